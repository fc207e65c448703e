/* The entry of the 32-bit boot shim of tools/x86-emu.py (built with the host gcc -m32, linked at
   SHIM_BASE, just below the kernel): a Multiboot header ("a.out kludge": syslinux's mboot.c32 loads
   the flat image in place; x86-emu.py fills in the load addresses), the kernel's PVH entry address
   (filled in too) and _start, which calls shim_main (shim.c) with the Multiboot magic and info. */
    .section .text.start, "ax"
    .code32
    .globl _start, pvh_entry
mb_header:
    .long 0x1BADB002                   /* Multiboot magic */
    .long 0x00010003                   /* align modules, memory info, a.out kludge */
    .long -(0x1BADB002 + 0x00010003)
    .long 0, 0, 0, 0, 0                /* header/load/load_end/bss_end/entry: patched */
pvh_entry:
    .long 0                            /* patched: kernel's PVH entry (physical) */
_start:
    cli
    cld
    mov $stack_top, %esp
    push %ebx
    push %eax
    call shim_main
1:  hlt
    jmp 1b
    .section .bss
    .balign 16
    .space 4096
stack_top:
    .section .note.GNU-stack, "", @progbits
