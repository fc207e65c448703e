/* The 32-bit boot shim of tools/x86-emu.py: turns the Multiboot information that syslinux's
   mboot.c32 hands over (command line, the initramfs module, the BIOS e820 memory map) into a PVH
   hvm_start_info and jumps to the kernel's PVH entry point (CONFIG_PVH, as QEMU does for an
   uncompressed vmlinux): no XZ decompression in the guest, no real-mode setup. Freestanding
   (-m32 -ffreestanding), no libc. */
typedef unsigned int u32;
typedef unsigned long long u64;
struct mb_info { u32 flags, mem_lower, mem_upper, boot_device, cmdline, mods_count, mods_addr;
                 u32 syms[4]; u32 mmap_length, mmap_addr; };
struct mb_mod { u32 start, end, cmdline, pad; };
struct mb_mmap { u32 size; u64 addr, len; u32 type; } __attribute__((packed));
struct start_info { u32 magic, version, flags, nr_modules; u64 modlist_paddr, cmdline_paddr,
                    rsdp_paddr, memmap_paddr; u32 memmap_entries, reserved; };
struct modlist { u64 paddr, size, cmdline_paddr, reserved; };
struct memmap { u64 addr, size; u32 type, reserved; };
extern u32 pvh_entry;
static struct start_info si;
static struct modlist mods[4];
static struct memmap mm[128];

static u64 find_rsdp(void) {
    for (u32 a = 0xE0000; a < 0x100000; a += 16) {
        const char *p = (const char *)a;
        if (p[0] == 'R' && p[1] == 'S' && p[2] == 'D' && p[3] == ' ' && p[4] == 'P' &&
            p[5] == 'T' && p[6] == 'R' && p[7] == ' ')
            return a;
    }
    return 0;
}

void shim_main(u32 magic, struct mb_info *mbi) {
    if (magic != 0x2BADB002) for (;;) __asm__ volatile("hlt");
    si.magic = 0x336ec578;             /* XEN_HVM_START_MAGIC_VALUE */
    si.version = 1;
    if (mbi->flags & (1u << 2)) {      /* command line, minus the first word (image name) */
        const char *c = (const char *)mbi->cmdline;
        while (*c && *c != ' ') c++;
        while (*c == ' ') c++;
        si.cmdline_paddr = (u32)c;
    }
    if (mbi->flags & (1u << 3)) {      /* modules: the first is the initramfs */
        struct mb_mod *m = (struct mb_mod *)mbi->mods_addr;
        u32 n = mbi->mods_count < 4 ? mbi->mods_count : 4;
        for (u32 i = 0; i < n; i++) {
            mods[i].paddr = m[i].start;
            mods[i].size = m[i].end - m[i].start;
        }
        si.nr_modules = n;
        si.modlist_paddr = (u32)mods;
    }
    if (mbi->flags & (1u << 6)) {      /* BIOS e820 memory map */
        u32 n = 0;
        for (u32 off = 0; off < mbi->mmap_length && n < 128; n++) {
            struct mb_mmap *e = (struct mb_mmap *)(mbi->mmap_addr + off);
            mm[n].addr = e->addr;
            mm[n].size = e->len;
            mm[n].type = e->type;
            off += e->size + 4;
        }
        si.memmap_paddr = (u32)mm;
        si.memmap_entries = n;
    }
    si.rsdp_paddr = find_rsdp();
    __asm__ volatile("jmp *%0" : : "r"(pvh_entry), "b"(&si) : "memory");
    for (;;) ;
}
