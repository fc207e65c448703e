#!/usr/bin/env python3
"""Run a statically linked x86-64 Linux program under the Bochs emulator with a chosen CPU
feature set (AVX2 / AVX-VNNI / AVX-512 VNNI / both), and return its output and exit status.

Why Bochs: QEMU's TCG implements neither AVX-VNNI nor AVX-512; Bochs (3.0) implements both, with
CPU models that report them in CPUID. Debian bookworm ships Bochs 2.7, whose CPU models cannot
enable AVX-VNNI, so this tool builds Bochs 3.0 from Debian trixie's source package (once, cached).

Everything comes from Debian's apt repositories through a private apt configuration (nothing is
installed system-wide but xorriso and cpio, which make the guest's images, where they are missing)
and is cached under target/x86-emu/ of the repository. The archive is the
one this machine's own apt configuration names (the URIs of its Debian `main` entries in
/etc/apt/sources.list and sources.list.d/*.list / *.sources, or --mirror): the tool writes a
private sources list with that archive for the two suites below (deb for the binaries, deb-src for
Bochs) and never edits the system's configuration. No archive address is built into the tool.

  * bochs 3.0 source (trixie, deb-src), built here with g++/make into a headless binary;
  * bochsbios + vgabios (bookworm): the BIOS and VGA BIOS images;
  * linux-image-6.1.*-amd64 (bookworm): the guest kernel (only /boot/vmlinuz is kept);
  * busybox-static (bookworm): the only program in the initramfs besides yours;
  * isolinux + syslinux-common (bookworm): the El Torito boot loader and mboot.c32.

Once, the kernel is decompressed here and laid out as a Multiboot image behind a small 32-bit
shim (tools/x86-emu/shim.c and shim-start.S, compiled with the host gcc) that enters Linux through
its PVH entry point: the guest never runs the XZ decompressor (that alone was ~4.5e9 emulated
instructions, ~40 s per boot).

Each run writes an initramfs (busybox, an /init script, your program; packed with GNU cpio) and a
bootable ISO image (xorriso), boots it under Bochs with the serial ports going to files (ttyS0:
kernel console and markers, ttyS1: the program's stdout, ttyS2: its stderr), runs the program
once, powers off through ACPI (Bochs exits), and exits with the program's status. The C and
assembly built here (the shim, the --self-test program) are in tools/x86-emu/.

Known Bochs 3.0 / Linux 6.1 problems worked around here (see KERNEL_CMDLINE and CPU_SETS):
models with CPUID leaf 0x15 make Linux trust a nominal TSC frequency (tsc_early_khz= is passed);
with FSRM the guest kernel's memmove path corrupts its text (clearcpuid=fsrm, kernel side only);
AMX without XFD makes Linux set an invalid XCR0 (AMX is excluded from the spr set).
"""

import argparse
import fcntl
import hashlib
import os
import re
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.dont_write_bytecode = True    # no __pycache__ beside the tools
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import toolchain  # noqa: E402  (apt-get for xorriso and cpio)

REPO = Path(__file__).resolve().parent.parent
SOURCES = Path(__file__).resolve().parent / "x86-emu"   # the C and assembly built here (shim, self-test)
SHIM_SOURCES = (SOURCES / "shim.c", SOURCES / "shim-start.S")
SELFTEST_SOURCE = SOURCES / "vnni-selftest.c"
DEFAULT_CACHE = REPO / "target" / "x86-emu"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
BIN_SUITE = "bookworm"  # kernel, busybox, isolinux, BIOS images
SRC_SUITE = "trixie"  # bochs source
BOCHS_UPSTREAM = "3.0"  # bochs source version taken from SRC_SUITE (Debian trixie: 3.0+dfsg-1)

# Exit statuses of this tool that are not the program's own.
EXIT_TIMEOUT = 124
EXIT_EMU_FAILURE = 125

MARK_START = "@@X86EMU-START@@"
MARK_EXIT = "@@X86EMU-EXIT"  # followed by " <status>@@"

# ----------------------------------------------------------------------------------------------
# CPU feature sets. `model` is a Bochs 3.0 CPU model; add/exclude are Bochs feature names
# (cpu: add_features= / exclude_features=).
CPU_SETS = {
    "avx2": dict(
        model="corei7_haswell_4770",
        exclude="",
        add="",
        help="Haswell (Core i7-4770): AVX2, FMA, F16C, BMI1/2; no AVX-512, no VNNI of any kind. "
        "The control: VNNI code must decline / die with SIGILL here.",
    ),
    "avxvnni": dict(
        model="arrow_lake",
        exclude="avx_ifma avx_vnni_int8 avx_vnni_int16 avx_ne_convert sha512 sm3 sm4 cmpccxadd lass",
        add="",
        help="Alder-Lake-like: AVX2, FMA, F16C + AVX-VNNI (VEX vpdpbusd on xmm/ymm); no AVX-512. "
        "(Bochs' Arrow Lake model minus its post-Alder-Lake extensions: AVX-IFMA, "
        "AVX-VNNI-INT8/INT16, AVX-NE-CONVERT, SHA512, SM3, SM4, CMPCCXADD, LASS.)",
    ),
    "avx512vnni": dict(
        model="corei7_icelake_u",
        exclude="",
        add="",
        help="Ice Lake (Core i7-1065G7), Zen-4-like: AVX-512 F/CD/BW/DQ/VL + AVX-512 VNNI "
        "(EVEX vpdpbusd on xmm/ymm/zmm), also IFMA/VBMI/VBMI2/BITALG/VPOPCNTDQ, F16C, FMA; "
        "no AVX-VNNI (the VEX form raises #UD).",
    ),
    "spr": dict(
        model="sapphire_rapids",
        exclude="amx amx_int8 amx_bf16 la57",
        add="",
        help="Sapphire Rapids without AMX: AVX-512 (incl. VNNI, BF16, FP16) + AVX-VNNI, F16C, FMA "
        "(5-level paging left out, as in every set here).",
    ),
    "amx": dict(
        model="sapphire_rapids",
        exclude="la57",
        add="",
        help="Sapphire Rapids with AMX-TILE/INT8/BF16 (tdpbssd on 16x64-byte tiles) and XFD "
        "(added to Bochs here: Linux enables AMX only with it), AVX-512 VNNI, AVX-VNNI.",
    ),
    "avx512": dict(
        model="corei7_skylake_x",
        exclude="",
        add="",
        help="Skylake-X: AVX-512 F/CD/BW/DQ/VL, FMA, F16C but no VNNI of any kind (extra control).",
    ),
}

# Bochs build: headless, no plugins, no debugger, everything we do not need left out.
BOCHS_CONFIGURE = [
    "--with-nogui", "--without-x", "--without-x11",
    "--enable-x86-64", "--enable-cpu-level=6", "--enable-avx", "--enable-evex", "--enable-amx",
    "--enable-all-optimizations", "--enable-fpu", "--enable-pci", "--enable-cdrom",
    "--disable-plugins", "--disable-debugger", "--disable-smp", "--disable-usb",
    "--disable-ne2000", "--disable-sb16", "--disable-es1370", "--disable-gameport",
    "--disable-busmouse", "--disable-docbook", "--disable-readline", "--disable-show-ips",
    "--disable-xpm", "--disable-idle-hack", "--disable-cet", "--disable-svm", "--disable-vmx",
    "--disable-stats",
]
BOCHS_CFLAGS = "-O2"

# Bochs 3.0 implements the AMX instructions and their XSAVE state but not XFD (extended feature
# disable, IA32_XFD / IA32_XFD_ERR, CPUID.(0xD,1):EAX[4]). Linux enables AMX only with XFD: without
# it, Linux 6.1 drops XTILEDATA but keeps XTILECFG in XCR0, an invalid pair, and panics on XSETBV.
# These edits add XFD as the SDM describes it, for the AMX tile-data component only: the two MSRs
# (bits other than 18 reserved: #GP), the CPUID bits, and the fault: with IA32_XFD[18] set, every
# AMX instruction raises #NM and sets IA32_XFD_ERR[18]. That is what lets Linux's lazy tile-state
# allocation and its permission check (ARCH_REQ_XCOMP_PERM; SIGILL without it) run in the guest.
# An XFD-armed component also reads as not in use (XINUSE), for XGETBV with ECX = 1 and for XSAVE*,
# which then treat it as in its init state: Linux's idle loop releases the tiles only when
# XGETBV(1) says they are in use, and would otherwise take the #NM in the kernel. Not modelled:
# XRSTOR*'s #NM for an armed component (Linux clears XFD before it restores tile data).
# The last edit fixes a Bochs bug that only a guest with AMX enabled reaches: the trace cache is
# indexed by the physical address XOR the fetch-mode bits, and its self-modifying-code scan looks
# for a 128-byte line's traces among that line's 128 entries. With AMX usable the fetch mode has
# bit 7 set, which moves a trace into the neighbouring line's entries, where the scan of a store's
# lines did not look: Linux's boot-time code patching then ran stale instructions and oopsed.
# The scan now also covers the line after the highest stored line (entries move by at most one
# line, and its per-trace line mask still decides what is flushed).
# Bochs 3.0 also reports the tile data as in use (XINUSE[18]) exactly when every tile is in its
# init state, the inverse of the SDM; XSAVE* then skipped a task's live tiles (lost across a
# context switch) and XGETBV(1) showed released tiles as in use. Now: in use when a tile is.
# XSAVE* wrote each tile's rows where the layout (that of LDTILECFG, which XRSTOR* reads back) has
# its bytes per row and the other way round, so a task's tile configuration came back invalid
# after a context switch (#UD on its next tile instruction): the two fields are now swapped back.
# XSAVE* and XRSTOR* moved only rows 0..7 of each tile (the loop ran to the number of tiles, 8, not
# of rows, 16): rows 8..15 of a task's tiles were lost across a context switch.
# And Bochs 3.0's byte dot products for TDPBSSD/TDPBSUD/TDPBUSD widen every byte as unsigned
# (Bit8u into Bit32s); the signed operands are now sign-extended (found by the self-test's
# tdpbssd against the scalar formula: wrong sums whenever a byte was negative).
# Each edit's old text must occur exactly once in the source, so a different Bochs version fails
# loudly here.
BOCHS_AMX_EDITS = [
    ("cpu/cpu.h",
     "  Bit64u ia32_xss;\n#endif\n",
     "  Bit64u ia32_xss;\n#endif\n#if BX_SUPPORT_AMX\n  Bit64u ia32_xfd, ia32_xfd_err;\n#endif\n"),
    ("cpu/init.cc",
     "  BX_CPU_THIS_PTR msr.ia32_xss = 0;\n",
     "  BX_CPU_THIS_PTR msr.ia32_xss = 0;\n#if BX_SUPPORT_AMX\n  BX_CPU_THIS_PTR msr.ia32_xfd = 0;\n"
     "  BX_CPU_THIS_PTR msr.ia32_xfd_err = 0;\n#endif\n"),
    ("cpu/msr.cc",
     "    case BX_MSR_XSS:\n      if (! is_cpu_extension_supported(BX_ISA_XSAVES)) {\n",
     "#if BX_SUPPORT_AMX\n    case BX_MSR_IA32_XFD:\n    case BX_MSR_IA32_XFD_ERROR:\n"
     "      if (! is_cpu_extension_supported(BX_ISA_AMX))\n        return handle_unknown_rdmsr(index, msr);\n"
     "      val64 = (index == BX_MSR_IA32_XFD) ? BX_CPU_THIS_PTR msr.ia32_xfd : BX_CPU_THIS_PTR msr.ia32_xfd_err;\n"
     "      break;\n#endif\n"
     "    case BX_MSR_XSS:\n      if (! is_cpu_extension_supported(BX_ISA_XSAVES)) {\n"),
    ("cpu/msr.cc",
     "    case BX_MSR_XSS:\n      {\n",
     "#if BX_SUPPORT_AMX\n    case BX_MSR_IA32_XFD:\n    case BX_MSR_IA32_XFD_ERROR:\n"
     "      if (! is_cpu_extension_supported(BX_ISA_AMX))\n        return handle_unknown_wrmsr(index, val_64);\n"
     "      if (val_64 & ~Bit64u(BX_XCR0_XTILEDATA_MASK)) {\n"
     "        BX_ERROR((\"WRMSR: reserved bit in IA32_XFD / IA32_XFD_ERR\"));\n        return false;\n      }\n"
     "      if (index == BX_MSR_IA32_XFD) {\n        BX_CPU_THIS_PTR msr.ia32_xfd = val_64;\n"
     "        handleAvxModeChange();\n      }\n      else {\n        BX_CPU_THIS_PTR msr.ia32_xfd_err = val_64;\n      }\n"
     "      break;\n#endif\n"
     "    case BX_MSR_XSS:\n      {\n"),
    ("cpu/xsave.cc",
     "      xinuse |= BX_XCR0_SSE_MASK;\n  }\n\n  return xinuse;\n",
     "      xinuse |= BX_XCR0_SSE_MASK;\n  }\n\n#if BX_SUPPORT_AMX\n"
     "  xinuse &= ~Bit32u(BX_CPU_THIS_PTR msr.ia32_xfd);\n#endif\n  return xinuse;\n"),
    ("cpu/msr.cc",
     "  msr_desc[BX_MSR_XSS] = new MSR_Descriptor(\"MSR_IA32_XSS\", BX_ISA_XSAVES);\n",
     "  msr_desc[BX_MSR_XSS] = new MSR_Descriptor(\"MSR_IA32_XSS\", BX_ISA_XSAVES);\n"
     "#if BX_SUPPORT_AMX\n  msr_desc[BX_MSR_IA32_XFD] = new MSR_Descriptor(\"MSR_IA32_XFD\", BX_ISA_AMX);\n"
     "  msr_desc[BX_MSR_IA32_XFD_ERROR] = new MSR_Descriptor(\"MSR_IA32_XFD_ERR\", BX_ISA_AMX);\n#endif\n"),
    ("cpu/proc_ctrl.cc",
     "(BX_XCR0_XTILECFG_MASK | BX_XCR0_XTILEDATA_MASK)) != 0)\n    clear_amx_ok();\n",
     "(BX_XCR0_XTILECFG_MASK | BX_XCR0_XTILEDATA_MASK)) != 0 ||\n"
     "      (BX_CPU_THIS_PTR msr.ia32_xfd & BX_XCR0_XTILEDATA_MASK) != 0)\n    clear_amx_ok();\n"),
    ("cpu/proc_ctrl.cc",
     "  if (~BX_CPU_THIS_PTR xcr0.val32 & (BX_XCR0_XTILECFG_MASK | BX_XCR0_XTILEDATA_MASK))\n"
     "    exception(BX_UD_EXCEPTION, 0);\n",
     "  if (~BX_CPU_THIS_PTR xcr0.val32 & (BX_XCR0_XTILECFG_MASK | BX_XCR0_XTILEDATA_MASK))\n"
     "    exception(BX_UD_EXCEPTION, 0);\n\n"
     "  if (BX_CPU_THIS_PTR msr.ia32_xfd & BX_XCR0_XTILEDATA_MASK) {\n"
     "    BX_CPU_THIS_PTR msr.ia32_xfd_err |= BX_XCR0_XTILEDATA_MASK;\n"
     "    exception(BX_NM_EXCEPTION, 0);\n  }\n"),
    ("cpu/cpuid.cc",
     "    if (is_cpu_extension_supported(BX_ISA_XSAVES))\n      leaf->eax |= (1<<3);\n",
     "    if (is_cpu_extension_supported(BX_ISA_XSAVES))\n      leaf->eax |= (1<<3);\n"
     "#if BX_SUPPORT_AMX\n    if (is_cpu_extension_supported(BX_ISA_AMX))\n      leaf->eax |= (1<<4);\n#endif\n"),
    ("cpu/cpuid.cc",
     "      leaf->ecx = (cpu->ia32_xss_suppmask & (1 << subfunction)) != 0;\n",
     "      leaf->ecx = (cpu->ia32_xss_suppmask & (1 << subfunction)) != 0;\n"
     "#if BX_SUPPORT_AMX\n      if (subfunction == xcr0_t::BX_XCR0_XTILEDATA_BIT)\n        leaf->ecx |= (1<<2);\n#endif\n"),
    ("cpu/xsave.cc",
     "  return (BX_CPU_THIS_PTR amx->tile_use_tracker == 0);  // all tiles are zero\n",
     "  return (BX_CPU_THIS_PTR amx->tile_use_tracker != 0);  // some tile is not in its init state\n"),
    ("cpu/xsave.cc",
     "      tilecfg.vmm16u(8+n)    = BX_CPU_THIS_PTR amx->tilecfg[n].rows;\n"
     "      tilecfg.vmmubyte(48+n) = BX_CPU_THIS_PTR amx->tilecfg[n].bytes_per_row;\n",
     "      tilecfg.vmm16u(8+n)    = BX_CPU_THIS_PTR amx->tilecfg[n].bytes_per_row;\n"
     "      tilecfg.vmmubyte(48+n) = BX_CPU_THIS_PTR amx->tilecfg[n].rows;\n"),
    ("cpu/xsave.cc",
     "    for (unsigned row=0; row < BX_TILE_REGISTERS; row++) {\n      write_virtual_zmmword(",
     "    for (unsigned row=0; row < BX_TILE_MAX_ROWS; row++) {\n      write_virtual_zmmword("),
    ("cpu/xsave.cc",
     "    for (unsigned row=0; row < BX_TILE_REGISTERS; row++) {\n      read_virtual_zmmword(",
     "    for (unsigned row=0; row < BX_TILE_MAX_ROWS; row++) {\n      read_virtual_zmmword("),
    ("cpu/icache.h",
     "    if (line_mask > mask) break;\n",
     "    if (Bit64u(line_mask) > (Bit64u(mask) << 1)) break;\n"),
] + [
    ("cpu/avx/amx.cc", f"p{n}dword = {old}", f"p{n}dword = {new}")
    for n in range(4)
    for old, new in (
        (f"Bit32s(xbyte[{n}]) * Bit32s(ybyte[{n}]);", f"Bit32s(Bit8s(xbyte[{n}])) * Bit32s(Bit8s(ybyte[{n}]));"),
        (f"Bit32s(xbyte[{n}]) * Bit32u(ybyte[{n}]);", f"Bit32s(Bit8s(xbyte[{n}])) * Bit32s(ybyte[{n}]);"),
        (f"Bit32u(xbyte[{n}]) * Bit32s(ybyte[{n}]);", f"Bit32s(xbyte[{n}]) * Bit32s(Bit8s(ybyte[{n}]));"),
    )
]


def patch_bochs_amx(top: Path):
    """Applies BOCHS_AMX_EDITS to the unpacked Bochs source at `top`."""
    for rel, old, new in BOCHS_AMX_EDITS:
        f = top / rel
        text = f.read_text(encoding="latin-1")
        if text.count(old) != 1:
            raise ToolError(f"Bochs AMX patch: {rel}: expected text found {text.count(old)} times, "
                            f"not once (a different Bochs version?)")
        f.write_text(text.replace(old, new), encoding="latin-1")

KERNEL_CMDLINE = [
    "console=ttyS0,115200", "quiet", "loglevel=1", "rdinit=/init", "panic=0",
    "mitigations=off", "tsc=reliable", "no_timer_check",
    # boot-time work that only costs emulated time here: the crypto self-tests (~15 s of guest
    # time), the W+X page-table check after write-protecting the kernel, loading the built-in
    # X.509 certificates, ftrace/kprobe event tables, tracefs, TCP cubic
    "cryptomgr.notests=1", "rodata=off",
    "initcall_blacklist=load_system_certificate_list,trace_eval_init,init_kprobe_trace,"
    "tracer_init_tracefs,cubictcp_register",
    # With FSRM (Ice Lake and later models) the kernel's own memmove takes a `rep movsb` path
    # that leaves the guest kernel with corrupted text under Bochs 3.0 (boot hangs in a page
    # fault loop); this only changes what the kernel uses, not what CPUID shows to programs.
    "clearcpuid=fsrm",
]


def log(msg):
    print(f"x86-emu: {msg}", file=sys.stderr, flush=True)


class ToolError(Exception):
    pass


# ----------------------------------------------------------------------------------------------
# The archive, from the system's own apt configuration.

# Suite names (and their aliases) of the Debian archive proper; an entry with one of these as its
# suite (not -updates, -security, -backports) and the `main` component is a Debian archive entry.
DEBIAN_SUITES = {"buster", "bullseye", "bookworm", "trixie", "forky", "duke", "sid",
                 "oldoldstable", "oldstable", "stable", "testing", "unstable"}


def parse_one_line_sources(text, origin):
    """Entries of a one-line-style sources file (sources.list, *.list) as dicts with the deb822
    field names (Types, URIs, Suites, Components, Signed-By, Enabled) plus 'origin'."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        opts = {}
        m = re.match(r"^(deb|deb-src)\s+(?:\[([^\]]*)\]\s+)?(\S+)\s+(\S+)\s*(.*)$", line)
        if not m:
            continue
        for o in (m.group(2) or "").split():
            k, _, v = o.partition("=")
            opts[k.lower()] = v
        out.append({"Types": [m.group(1)], "URIs": [m.group(3)], "Suites": [m.group(4)],
                    "Components": m.group(5).split(), "Signed-By": opts.get("signed-by", ""),
                    "Enabled": "yes", "origin": f"{origin}:{n}"})
    return out


def parse_deb822_sources(text, origin):
    """Stanzas of a deb822 .sources file (comments and continuation lines handled)."""
    out, cur, key, start = [], {}, None, 1

    def flush():
        if cur:
            d = {k: v.strip() for k, v in cur.items()}
            out.append({"Types": d.get("types", "").split(), "URIs": d.get("uris", "").split(),
                        "Suites": d.get("suites", "").split(),
                        "Components": d.get("components", "").split(),
                        "Signed-By": d.get("signed-by", ""),
                        "Enabled": d.get("enabled", "yes").lower(),
                        "origin": f"{origin}:{start}"})
    for n, line in enumerate(text.splitlines() + [""], 1):
        if line.startswith("#"):
            continue
        if not line.strip():
            flush()
            cur, key = {}, None
            continue
        if line[0] in " \t" and key:
            cur[key] += "\n" + line.strip()
            continue
        k, sep, v = line.partition(":")
        if sep:
            if not cur:
                start = n
            key = k.strip().lower()
            cur[key] = v.strip()
    return out


def system_source_files():
    """The system's sources files, where apt itself looks (apt-config), else /etc/apt."""
    lst, parts = Path("/etc/apt/sources.list"), Path("/etc/apt/sources.list.d")
    try:
        p = subprocess.run(["apt-config", "shell", "L", "Dir::Etc::sourcelist/f",
                            "P", "Dir::Etc::sourceparts/d"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        vals = dict(re.findall(r"^(L|P)='(.*)'$", p.stdout, re.M))
        lst = Path(vals.get("L", lst))
        parts = Path(vals.get("P", parts))
    except OSError:
        pass
    files = [lst] if lst.is_file() else []
    if parts.is_dir():
        files += sorted(f for f in parts.iterdir() if f.suffix in (".list", ".sources"))
    return files


def debian_archives(entries):
    """[(uri, signed_by, origin)] of the enabled binary Debian archive entries with `main`, in the
    order apt reads them, each URI once."""
    seen, out = set(), []
    for e in entries:
        if e["Enabled"] == "no" or "deb" not in e["Types"] or "main" not in e["Components"]:
            continue
        if not any(s in DEBIAN_SUITES for s in e["Suites"]):
            continue
        for u in e["URIs"]:
            if u.startswith("cdrom:") or u in seen:
                continue
            seen.add(u)
            out.append((u.rstrip("/"), e["Signed-By"], e["origin"]))
    return out


def system_debian_archive(files=None):
    """The Debian archive this machine's apt configuration uses: (uri, signed_by, origin)."""
    files = system_source_files() if files is None else files
    entries = []
    for f in files:
        try:
            text = f.read_text(errors="replace")
        except OSError:
            continue
        entries += (parse_deb822_sources if f.suffix == ".sources"
                    else parse_one_line_sources)(text, str(f))
    found = debian_archives(entries)
    if not found:
        raise ToolError(
            "no Debian archive in this machine's apt sources (" +
            (", ".join(map(str, files)) or "none found") + "): an enabled 'deb' entry with a "
            "Debian suite (" + ", ".join(sorted(DEBIAN_SUITES)) + ") and the main component is "
            "needed, or name the archive with --mirror URI")
    return found[0]


# ----------------------------------------------------------------------------------------------
# Fetching with a private apt configuration.

class Apt:
    def __init__(self, cache: Path, mirror):
        """mirror: None for the system's own Debian archive, else a URI the user gave."""
        self.root = cache / "apt"
        if mirror:
            uri, keyring, origin = mirror.rstrip("/"), KEYRING, "--mirror"
        else:
            uri, keyring, origin = system_debian_archive()
        keyring = keyring if keyring and "\n" not in keyring else KEYRING
        log(f"Debian archive: {uri} (from {origin})")
        for d in ("lists/partial", "archives/partial", "empty"):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        src = self.root / "sources.list"
        text = (
            f"deb [arch=amd64 signed-by={keyring}] {uri} {BIN_SUITE} main\n"
            f"deb-src [signed-by={keyring}] {uri} {SRC_SUITE} main\n"
        )
        if not src.exists() or src.read_text() != text:
            src.write_text(text)
            stamp = self.root / "updated"
            if stamp.exists():
                stamp.unlink()

    def opts(self):
        r = self.root
        o = {
            "Dir::Etc::SourceList": r / "sources.list",
            "Dir::Etc::SourceParts": r / "empty",
            "Dir::Etc::Preferences": r / "empty" / "none",
            "Dir::Etc::PreferencesParts": r / "empty",
            "Dir::State::Lists": r / "lists",
            "Dir::Cache": r,
            "Dir::Cache::archives": r / "archives",
            "Dir::State::status": "/var/lib/dpkg/status",
            "APT::Get::AllowUnauthenticated": "false",
            "Acquire::Languages": "none",
            "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled": "false",
            "Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled": "false",
            "Acquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled": "false",
            "Acquire::IndexTargets::deb::DEP-11-icons-hidpi::DefaultEnabled": "false",
            "Acquire::IndexTargets::deb::Contents-deb::DefaultEnabled": "false",
            "Acquire::IndexTargets::deb::CNF::DefaultEnabled": "false",
        }
        if os.geteuid() == 0:
            o["APT::Sandbox::User"] = "root"
        out = []
        for k, v in o.items():
            out += ["-o", f"{k}={v}"]
        return out

    def run(self, tool, *args, cwd=None, check=True):
        cmd = [tool, *self.opts(), *args]
        p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
        if check and p.returncode != 0:
            raise ToolError(f"{' '.join(cmd[:1] + list(args))} failed:\n{p.stdout[-3000:]}")
        return p

    def update(self, force=False):
        stamp = self.root / "updated"
        if stamp.exists() and not force and time.time() - stamp.stat().st_mtime < 14 * 86400:
            return
        log(f"apt-get update (private lists: {BIN_SUITE} main, {SRC_SUITE} main sources)")
        self.run("apt-get", "update")
        stamp.write_text(time.ctime() + "\n")

    def field(self, package, name, showsrc=False):
        p = self.run("apt-cache", "showsrc" if showsrc else "show", package)
        return re.findall(rf"^{name}: (.*)$", p.stdout, re.M)

    def download(self, package, dest: Path):
        """apt-get download PACKAGE into dest; returns the .deb path."""
        dest.mkdir(parents=True, exist_ok=True)
        name = package.split("=")[0]
        for f in dest.glob(f"{name}_*.deb"):
            return f
        try:
            self.run("apt-get", "download", package, cwd=dest)
        except ToolError:
            self.update(force=True)
            self.run("apt-get", "download", package, cwd=dest)
        debs = list(dest.glob(f"{name}_*.deb"))
        if not debs:
            raise ToolError(f"apt-get download {package} produced no .deb")
        return debs[0]


def deb_extract(deb: Path, dest: Path, members=None):
    """Extract a .deb (optionally only the given member paths, e.g. './bin/busybox')."""
    dest.mkdir(parents=True, exist_ok=True)
    p1 = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE)
    with tarfile.open(fileobj=p1.stdout, mode="r|") as tf:
        for m in tf:
            if members is None or any(m.name == x or m.name.startswith(x.rstrip("*"))
                                      for x in members):
                tf.extract(m, dest, set_attrs=False)
    if p1.wait() != 0:
        raise ToolError(f"dpkg-deb --fsys-tarfile {deb} failed")


class Assets:
    """Everything downloaded/built, under the cache directory (protected by a file lock)."""

    def __init__(self, cache: Path, mirror: str, jobs: int):
        self.cache = cache
        self.mirror = mirror
        self.jobs = jobs
        self.bochs = cache / "bin" / "bochs"
        self.bios = cache / "bios" / "BIOS-bochs-latest"
        self.vgabios = cache / "bios" / "VGABIOS-lgpl-latest"
        self.kernel = cache / "boot" / "vmlinuz"
        self.isolinux = cache / "boot" / "isolinux.bin"
        self.ldlinux = cache / "boot" / "ldlinux.c32"
        self.mboot = cache / "boot" / "mboot.c32"
        self.libcom32 = cache / "boot" / "libcom32.c32"
        self.busybox = cache / "boot" / "busybox"
        self.pvh = cache / "boot" / "kernel.mb"

    def ready(self):
        return all(p.exists() for p in (self.bochs, self.bios, self.vgabios, self.kernel,
                                        self.isolinux, self.ldlinux, self.mboot, self.libcom32,
                                        self.busybox, self.pvh)) \
            and self._bochs_stamp_ok() and self._pvh_stamp_ok()

    def _bochs_stamp(self):
        xfd = hashlib.sha256(repr(BOCHS_AMX_EDITS).encode()).hexdigest()
        return f"{BOCHS_UPSTREAM}\n{BOCHS_CFLAGS}\n{' '.join(BOCHS_CONFIGURE)}\nxfd {xfd}\n"

    def _bochs_stamp_ok(self):
        st = self.cache / "bin" / "bochs.stamp"
        return st.exists() and st.read_text() == self._bochs_stamp()

    def ensure(self):
        try:
            toolchain.ensure_image_tools(True)
        except toolchain.Missing as e:
            raise ToolError(f"the guest images need xorriso and cpio: {e}") from None
        self.cache.mkdir(parents=True, exist_ok=True)
        with open(self.cache / "lock", "w") as lk:
            fcntl.flock(lk, fcntl.LOCK_EX)
            if self.ready():
                return
            apt = Apt(self.cache, self.mirror)
            apt.update()
            debs = self.cache / "debs"
            if not all(p.exists() for p in (self.busybox, self.isolinux, self.ldlinux,
                                            self.mboot, self.libcom32)):
                self._fetch_boot_bits(apt, debs)
            if not (self.bios.exists() and self.vgabios.exists()):
                self._fetch_bios(apt, debs)
            if not self.kernel.exists():
                self._fetch_kernel(apt, debs)
            if not (self.pvh.exists() and self._pvh_stamp_ok()):
                self._build_pvh_image()
            if not (self.bochs.exists() and self._bochs_stamp_ok()):
                self._build_bochs(apt)

    def _fetch_boot_bits(self, apt, debs):
        x = self.cache / "x"
        for pkg in ("busybox-static", "isolinux", "syslinux-common"):
            log(f"fetching {pkg}")
            deb_extract(apt.download(pkg, debs), x, [
                "./bin/busybox", "./usr/lib/ISOLINUX/isolinux.bin",
                "./usr/lib/syslinux/modules/bios/"])
        (self.cache / "boot").mkdir(exist_ok=True)
        shutil.copy(x / "bin/busybox", self.busybox)
        shutil.copy(x / "usr/lib/ISOLINUX/isolinux.bin", self.isolinux)
        mods = x / "usr/lib/syslinux/modules/bios"
        for m, out in (("ldlinux.c32", self.ldlinux), ("mboot.c32", self.mboot),
                       ("libcom32.c32", self.libcom32)):
            shutil.copy(mods / m, out)

    def _fetch_bios(self, apt, debs):
        x = self.cache / "x"
        for pkg in ("bochsbios", "vgabios"):
            log(f"fetching {pkg}")
            deb_extract(apt.download(pkg, debs), x)
        (self.cache / "bios").mkdir(exist_ok=True)
        # (bochs' own VGABIOS-lgpl-latest is a symlink to vgabios' vgabios.bin)
        for link, out in ((x / "usr/share/bochs/BIOS-bochs-latest", self.bios),
                          (x / "usr/share/vgabios/vgabios.bin", self.vgabios)):
            target = link
            for _ in range(8):
                if not target.is_symlink():
                    break
                t = os.readlink(target)
                target = (x / t.lstrip("/")) if t.startswith("/") else target.parent / t
            shutil.copy(target, out)

    def _fetch_kernel(self, apt, debs):
        deps = apt.field("linux-image-amd64", "Depends")
        names = [re.match(r"\s*(linux-image-[\w.+-]+)", d) for d in deps]
        names = [m.group(1) for m in names if m]
        if not names:
            raise ToolError("cannot resolve linux-image-amd64 to a kernel package")
        pkg = sorted(names)[-1]
        log(f"fetching {pkg} (about 70 MB; only /boot/vmlinuz-* is kept)")
        deb = apt.download(pkg, debs)
        x = self.cache / "x"
        deb_extract(deb, x, ["./boot/vmlinuz-"])
        vm = sorted((x / "boot").glob("vmlinuz-*"))
        if not vm:
            raise ToolError(f"no /boot/vmlinuz-* in {deb.name}")
        (self.cache / "boot").mkdir(exist_ok=True)
        shutil.copy(vm[-1], self.kernel)
        (self.cache / "boot" / "kernel-version").write_text(vm[-1].name + "\n")
        deb.unlink()  # 70 MB, only needed once

    def _pvh_stamp(self):
        h = hashlib.sha256(b"".join(f.read_bytes() for f in SHIM_SOURCES))
        h.update(self.kernel.read_bytes() if self.kernel.exists() else b"")
        return h.hexdigest() + "\n"

    def _pvh_stamp_ok(self):
        st = self.cache / "boot" / "kernel.mb.stamp"
        return st.exists() and st.read_text() == self._pvh_stamp()

    def _build_pvh_image(self):
        log("making the uncompressed PVH kernel image (kernel.mb) from vmlinuz")
        img = build_pvh_image(self.kernel.read_bytes(), build_shim(self.cache / "shim"))
        self.pvh.write_bytes(img)
        (self.cache / "boot" / "kernel.mb.stamp").write_text(self._pvh_stamp())

    def _build_bochs(self, apt):
        for t in ("g++", "make"):
            if not shutil.which(t):
                raise ToolError(f"building Bochs needs {t}: apt-get install g++ make")
        srcdir = self.cache / "src"
        srcdir.mkdir(exist_ok=True)
        rec = apt.run("apt-cache", "showsrc", "bochs").stdout
        version = (re.findall(r"^Version: (.*)$", rec, re.M) or [""])[0]
        if not version.startswith(BOCHS_UPSTREAM + "+"):
            raise ToolError(f"{SRC_SUITE} has bochs source {version!r}; this tool was made "
                            f"for {BOCHS_UPSTREAM}")
        orig = srcdir / f"bochs_{version.split('-')[0]}.orig.tar.xz"
        m = re.search(r"^Checksums-Sha256:\n((?: .*\n?)+)", rec, re.M)
        shas = {l.split()[2]: l.split()[0] for l in (m.group(1).splitlines() if m else [])
                if len(l.split()) == 3}
        if not orig.exists():
            log(f"fetching bochs {version} source ({SRC_SUITE})")
            # apt-get source also fetches the .dsc (which the mirror may refuse) and the
            # packaging; only the upstream tarball is used, checked against the signed index.
            apt.run("apt-get", "source", "--download-only", f"bochs={version}",
                    cwd=srcdir, check=False)
        if not orig.exists():
            raise ToolError(f"apt-get source bochs={version} did not fetch {orig.name}")
        want = shas.get(orig.name)
        got = hashlib.sha256(orig.read_bytes()).hexdigest()
        if not want or want != got:
            orig.unlink()
            raise ToolError(f"{orig.name}: sha256 {got} does not match the Sources index ({want})")
        build = srcdir / "build"
        if build.exists():
            shutil.rmtree(build)
        build.mkdir()
        log("unpacking bochs source")
        with tarfile.open(orig) as tf:
            tf.extractall(build)
        top = next(build.iterdir())
        patch_bochs_amx(top)
        env = dict(os.environ, CFLAGS=BOCHS_CFLAGS, CXXFLAGS=BOCHS_CFLAGS)
        t0 = time.time()
        log(f"configuring and building bochs (one-time, make -j{self.jobs}; a few minutes)")
        with open(srcdir / "build.log", "w") as bl:
            for cmd in (["./configure", *BOCHS_CONFIGURE], ["make", f"-j{self.jobs}", "bochs"]):
                p = subprocess.run(cmd, cwd=top, env=env, stdout=bl, stderr=subprocess.STDOUT)
                if p.returncode != 0:
                    raise ToolError(f"{cmd[0]} failed; see {srcdir / 'build.log'}")
        (self.cache / "bin").mkdir(exist_ok=True)
        shutil.copy(top / "bochs", self.bochs)
        (self.cache / "bin" / "bochs.stamp").write_text(self._bochs_stamp())
        shutil.rmtree(build)
        log(f"bochs built in {time.time() - t0:.0f}s -> {self.bochs}")


# ----------------------------------------------------------------------------------------------
# Fast boot: the Debian bzImage decompresses ~65 MB of XZ in the guest, which costs ~4.5 billion
# emulated instructions (most of the boot). Instead, the kernel is decompressed here once, its
# ELF segments are laid out flat at their physical addresses, and a tiny 32-bit shim placed just
# below them is booted by syslinux's mboot.c32 as a Multiboot "a.out kludge" image (mboot loads
# the flat file in place, the initramfs as a module). The shim turns the Multiboot information
# into a PVH hvm_start_info and jumps to the kernel's PVH entry (CONFIG_PVH, as QEMU does for an
# uncompressed vmlinux): no decompression, no real-mode setup.

SHIM_SIZE = 0x4000
KERNEL_PADDR = 0x1000000
SHIM_BASE = KERNEL_PADDR - SHIM_SIZE

def build_shim(work: Path) -> bytes:
    """The flat binary of the boot shim (SHIM_SOURCES, linked at SHIM_BASE), built in WORK with the
    host gcc, ld and objcopy. ToolError when one is missing, a step fails or the layout is not the
    one build_pvh_image patches (pvh_entry at +0x20, _start at +0x24, at most SHIM_SIZE bytes)."""
    for t in ("gcc", "ld", "objcopy"):
        if not shutil.which(t):
            raise ToolError(f"building the boot shim needs {t} (apt-get install gcc binutils)")
    work.mkdir(parents=True, exist_ok=True)
    shim_c, start_s = (str(f) for f in SHIM_SOURCES)
    (work / "shim.ld").write_text(
        "ENTRY(_start)\nSECTIONS {\n  . = 0x%x;\n" % SHIM_BASE +
        "  .all : { *(.text.start) *(.text*) *(.rodata*) *(.data*) *(.bss*) *(COMMON) }\n"
        "  /DISCARD/ : { *(.note*) *(.comment) *(.eh_frame*) }\n}\n")
    cflags = ["-m32", "-ffreestanding", "-fno-pic", "-fno-pie", "-fno-stack-protector",
              "-mgeneral-regs-only", "-fno-asynchronous-unwind-tables", "-O2"]
    for cmd in (["gcc", *cflags, "-c", shim_c, "-o", "shim.o"],
                ["gcc", "-m32", "-c", start_s, "-o", "start.o"],
                ["ld", "-m", "elf_i386", "--no-warn-rwx-segments", "-T", "shim.ld",
                 "-o", "shim.elf", "start.o", "shim.o"],
                ["objcopy", "-O", "binary", "shim.elf", "shim.bin"]):
        p = subprocess.run(cmd, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
        if p.returncode != 0:
            raise ToolError(f"{' '.join(cmd)} failed:\n{p.stdout}")
    nm = subprocess.run(["nm", "shim.elf"], cwd=work, stdout=subprocess.PIPE, text=True).stdout
    syms = {l.split()[2]: int(l.split()[0], 16) for l in nm.splitlines() if len(l.split()) == 3}
    if syms.get("pvh_entry") != SHIM_BASE + 0x20 or syms.get("_start") != SHIM_BASE + 0x24:
        raise ToolError(f"unexpected shim layout: {syms}")
    shim = (work / "shim.bin").read_bytes()
    if len(shim) > SHIM_SIZE:
        raise ToolError(f"shim is {len(shim)} bytes, more than {SHIM_SIZE}")
    return shim


def extract_vmlinux(bz: bytes) -> bytes:
    import lzma
    if bz[0x202:0x206] != b"HdrS":
        raise ToolError("kernel image is not a bzImage")
    i = bz.find(b"\xfd7zXZ\x00")
    if i < 0:
        raise ToolError("no XZ-compressed payload in the bzImage (only XZ kernels handled)")
    return lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(bz[i:])


def build_pvh_image(bz: bytes, shim: bytes) -> bytes:
    v = extract_vmlinux(bz)
    if v[:5] != b"\x7fELF\x02":
        raise ToolError("decompressed kernel is not an ELF64 vmlinux")
    phoff, = struct.unpack_from("<Q", v, 32)
    phentsize, phnum = struct.unpack_from("<HH", v, 54)
    loads, entry = [], None
    for i in range(phnum):
        ptype, _fl, off, _va, pa, fsz, msz, _al = struct.unpack_from("<IIQQQQQQ", v,
                                                                     phoff + i * phentsize)
        if ptype == 1:
            loads.append((pa, off, fsz, msz))
        elif ptype == 4:  # PT_NOTE: look for XEN_ELFNOTE_PHYS32_ENTRY (18) of owner "Xen"
            o = off
            while o < off + fsz:
                nsz, dsz, ntype = struct.unpack_from("<III", v, o)
                name = v[o + 12:o + 12 + nsz].rstrip(b"\0")
                desc = o + 12 + ((nsz + 3) & ~3)
                if name == b"Xen" and ntype == 18:
                    entry = struct.unpack_from("<I", v, desc)[0]
                o = desc + ((dsz + 3) & ~3)
    if entry is None:
        raise ToolError("kernel has no PVH entry note (needs CONFIG_PVH)")
    lo = min(p for p, _, _, _ in loads)
    if lo != KERNEL_PADDR:
        raise ToolError(f"kernel loads at 0x{lo:x}, not 0x{KERNEL_PADDR:x}")
    file_end = max(p + f for p, _, f, _ in loads)
    mem_end = max(p + m for p, _, _, m in loads)
    flat = bytearray(file_end - lo)
    for p, off, fsz, _ in loads:
        flat[p - lo:p - lo + fsz] = v[off:off + fsz]
    flat = bytes(flat).rstrip(b"\0")  # the rest is zero-filled by the loader (bss_end_addr)
    img = bytearray(shim.ljust(SHIM_SIZE, b"\0")) + flat
    load_end = SHIM_BASE + len(img)
    struct.pack_into("<IIIII", img, 12, SHIM_BASE, SHIM_BASE, load_end, max(mem_end, load_end),
                     SHIM_BASE + 0x24)
    struct.pack_into("<I", img, 0x20, entry)
    return bytes(img)


# ----------------------------------------------------------------------------------------------
# Initramfs (newc cpio, GNU cpio) and ISO 9660 + El Torito image (xorriso)

def _tool(cmd, what):
    """Runs CMD (its output captured); ToolError naming WHAT with the output when it fails."""
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if p.returncode != 0:
        raise ToolError(f"{what} failed ({' '.join(map(str, cmd))}):\n"
                        + p.stdout.decode(errors="replace")[-3000:])


def make_initramfs(root: Path, out: Path):
    """Packs the folder ROOT (every file, folder and link below it, parents before what they hold)
    into OUT, a newc cpio archive as the kernel unpacks it, with GNU cpio: owner root, the modes as
    they are in ROOT. (No /dev/console in it: the kernel's own built-in initramfs has that node.)
    ToolError when cpio fails."""
    names = []
    for top, dirs, files in os.walk(root):
        dirs.sort()
        rel = os.path.relpath(top, root)
        if rel != ".":
            names.append(rel)
        names += [os.path.normpath(os.path.join(rel, f)) for f in sorted(files)]
    with open(out, "wb") as f:
        p = subprocess.run(["cpio", "--create", "--format=newc", "--owner=0:0", "--reproducible", "--quiet"],
                           cwd=root, input="\n".join(names).encode() + b"\n", stdout=f, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise ToolError(f"cpio failed making {out}:\n{p.stderr.decode(errors='replace')[-3000:]}")


def make_iso(files, boot_name, out: Path):
    """Writes OUT, an ISO 9660 image (level 1, root directory only; Rock Ridge names as given, which
    isolinux looks up as they are: lower case) with an El Torito no-emulation boot entry for
    BOOT_NAME (isolinux.bin; xorriso fills in its boot info table). FILES: [(8.3 name, path of the
    file)]. ToolError when xorriso fails."""
    _tool(["xorriso", "-as", "mkisofs", "-quiet", "-iso-level", "1", "-V", "X86EMU", "-o", str(out),
           "-b", boot_name, "-c", "boot.cat", "-no-emul-boot", "-boot-load-size", "4", "-boot-info-table",
           "-graft-points"] + [f"/{name}={path}" for name, path in files], "xorriso")


# ----------------------------------------------------------------------------------------------

def check_program(path: Path):
    data = path.read_bytes()[:4096]
    if data[:4] != b"\x7fELF":
        raise ToolError(f"{path}: not an ELF file")
    if data[4] != 2 or data[5] != 1 or struct.unpack_from("<H", data, 18)[0] != 62:
        raise ToolError(f"{path}: not an x86-64 little-endian ELF")
    phoff, = struct.unpack_from("<Q", data, 32)
    phentsize, phnum = struct.unpack_from("<HH", data, 54)
    full = path.read_bytes() if phoff + phentsize * phnum > len(data) else data
    for i in range(phnum):
        ptype, = struct.unpack_from("<I", full, phoff + i * phentsize)
        if ptype == 3:  # PT_INTERP
            raise ToolError(f"{path}: dynamically linked (has an ELF interpreter); the guest has "
                            "no libraries. Link it statically (gcc -static, rustc -C "
                            "target-feature=+crt-static).")


def build_init(prog_name, args, env, cwd="/work"):
    """The initramfs' /init (busybox sh). The program's stdout/stderr are pipes (not ttys, as
    under a CI runner) drained by busybox cat onto ttyS1/ttyS2 (raw), streamed to the host."""
    q = shlex.quote
    envs = " ".join(q(f"{k}={v}") for k, v in env)
    bb = "/bin/busybox"
    return f"""#!/bin/busybox sh
{bb} mount -t devtmpfs devtmpfs /dev
{bb} mount -t proc proc /proc
{bb} mount -t sysfs sysfs /sys
{bb} mount -t tmpfs tmpfs /tmp
{bb} stty -F /dev/ttyS1 115200 raw -echo
{bb} stty -F /dev/ttyS2 115200 raw -echo
{bb} mkfifo /dev/x86emu-out /dev/x86emu-err
{bb} cat /dev/x86emu-out >/dev/ttyS1 &
o=$!
{bb} cat /dev/x86emu-err >/dev/ttyS2 &
e=$!
cd {q(cwd)}
echo {MARK_START}
{bb} env -i {envs} ./{q(prog_name)} {' '.join(q(a) for a in args)} \
    </dev/null >/dev/x86emu-out 2>/dev/x86emu-err
rc=$?
wait $o $e
echo "{MARK_EXIT} $rc@@"
{bb} poweroff -f
echo "{MARK_EXIT} poweroff-failed@@"
while :; do {bb} sleep 1000; done
"""


def bochsrc(run: Path, assets: Assets, cpuset, mem_mb, ips, extra_add, extra_exclude):
    s = CPU_SETS[cpuset]
    add = " ".join(x for x in (s["add"], extra_add) if x)
    exclude = " ".join(x for x in (s["exclude"], extra_exclude) if x)
    cpu = f"cpu: model={s['model']}, count=1, ips={ips}, reset_on_triple_fault=0"
    if add:
        cpu += f', add_features="{add}"'
    if exclude:
        cpu += f', exclude_features="{exclude}"'
    return f"""# generated by tools/x86-emu.py
display_library: nogui
megs: {mem_mb}
romimage: file="{assets.bios}", options=fastboot
vgaromimage: file="{assets.vgabios}"
{cpu}
clock: sync=none, time0=1
pci: enabled=1, chipset=i440fx
ata0: enabled=1, ioaddr1=0x1f0, ioaddr2=0x3f0, irq=14
ata0-master: type=cdrom, path="{run / 'boot.iso'}", status=inserted
ata1: enabled=0
boot: cdrom
floppy_bootsig_check: disabled=1
com1: enabled=1, mode=file, dev="{run / 'console.txt'}"
com2: enabled=1, mode=file, dev="{run / 'stdout.bin'}"
com3: enabled=1, mode=file, dev="{run / 'stderr.bin'}"
parport1: enabled=0
log: "{run / 'bochs.log'}"
panic: action=fatal
error: action=report
info: action=report
debug: action=ignore
"""


def _watch(proc, run: Path, t0, timeout, marker):
    """Poll the guest console until Bochs exits, the timeout hits or the guest is stuck."""
    status = t_start = seen_exit_at = reason = None
    while True:
        rc = proc.poll()
        con = (run / "console.txt").read_bytes().decode("latin-1")
        if t_start is None and MARK_START in con:
            t_start = time.monotonic()
        m = marker.search(con)
        if m and seen_exit_at is None:
            seen_exit_at = time.monotonic()
            status = m.group(1)
        if rc is not None:
            break
        now = time.monotonic()
        if seen_exit_at is not None and now - seen_exit_at > 5:
            reason = "guest printed its exit marker but did not power off; killed"
            break
        if "Kernel panic" in con and seen_exit_at is None:
            time.sleep(0.5)
            reason = "guest kernel panic"
            break
        if now - t0 > timeout:
            reason = f"timeout after {timeout}s"
            break
        time.sleep(0.05)
    return status, t_start, seen_exit_at, reason


def run_program(args, assets: Assets, program: Path, prog_args, env, cpuset, timeout,
                quiet=False):
    """Boot, run, return (status, stdout_bytes, stderr_bytes, info dict)."""
    check_program(program)
    runs = assets.cache / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    run = Path(tempfile.mkdtemp(prefix=f"{cpuset}-", dir=runs))
    info = {"run_dir": str(run)}
    keep = args.keep
    try:
        name = program.name
        # the initramfs: busybox, /init, the program, and --file SRC[:DEST], extra read-only data
        # under /work (a directory is copied whole)
        root = run / "initramfs"
        for sub in ("bin", "dev", "proc", "sys", "tmp", "work"):
            (root / sub).mkdir(parents=True)
        for src, dest, data, mode in ((assets.busybox, "bin/busybox", None, 0o755),
                                      (None, "init", build_init(name, prog_args, env).encode(), 0o755),
                                      (program, f"work/{name}", None, 0o755)):
            if data is None:
                shutil.copyfile(src, root / dest)
            else:
                (root / dest).write_bytes(data)
            os.chmod(root / dest, mode)
        for spec in getattr(args, "file", []) or []:
            src, _, dest = spec.partition(":")
            src_path = Path(src)
            dest = dest or src_path.name
            items = [(src_path, dest)] if src_path.is_file() else [
                (p, f"{dest}/{p.relative_to(src_path).as_posix()}") for p in sorted(src_path.rglob("*")) if p.is_file()]
            if not items:
                raise SystemExit(f"x86-emu: --file {spec}: nothing to copy")
            for p, rel in items:
                out = root / "work" / rel.strip("/")
                out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(p, out)
                os.chmod(out, 0o644)
        for top, dirs, _ in os.walk(root):
            for dname in dirs:
                os.chmod(os.path.join(top, dname), 0o755)
        make_initramfs(root, run / "initrd.img")
        shutil.rmtree(root)
        # The guest TSC runs at `ips` per guest second; models with CPUID leaf 0x15 would make
        # the kernel trust a nominal GHz frequency instead and mistime everything.
        cmdline = " ".join(KERNEL_CMDLINE + [f"tsc_early_khz={args.ips // 1000}"]
                           + args.append_cmdline)
        files = [("isolinux.bin", assets.isolinux), ("ldlinux.c32", assets.ldlinux)]
        if args.bzimage_boot:
            cfg = f"LINUX /vmlinuz\n  INITRD /initrd.img\n  APPEND {cmdline}\n"
            files += [("vmlinuz", assets.kernel)]
        else:
            cfg = f"KERNEL /mboot.c32\n  APPEND /kernel.mb {cmdline} --- /initrd.img\n"
            files += [("mboot.c32", assets.mboot), ("libcom32.c32", assets.libcom32), ("kernel.mb", assets.pvh)]
        (run / "isolinux.cfg").write_text("DEFAULT x\nPROMPT 0\nTIMEOUT 0\nLABEL x\n  " + cfg)
        files += [("isolinux.cfg", run / "isolinux.cfg"), ("initrd.img", run / "initrd.img")]
        make_iso(files, "isolinux.bin", run / "boot.iso")
        (run / "bochsrc").write_text(bochsrc(run, assets, cpuset, args.mem, args.ips,
                                             args.add_features, args.exclude_features))
        for n in ("console.txt", "stdout.bin", "stderr.bin"):
            (run / n).write_bytes(b"")
        t0 = time.monotonic()
        proc = subprocess.Popen([str(assets.bochs), "-q", "-f", str(run / "bochsrc")],
                                cwd=run, stdin=subprocess.DEVNULL,
                                stdout=open(run / "bochs.out", "wb"), stderr=subprocess.STDOUT,
                                start_new_session=True)
        status = None
        t_start = None
        reason = None
        marker = re.compile(re.escape(MARK_EXIT) + r" (\S+)@@")
        seen_exit_at = None
        try:
            status, t_start, seen_exit_at, reason = _watch(proc, run, t0, timeout, marker)
        finally:
            if proc.poll() is None:  # also on KeyboardInterrupt / SIGTERM
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        t_end = time.monotonic()
        info["wall_s"] = t_end - t0
        if t_start is not None:
            info["boot_s"] = t_start - t0
            info["program_s"] = (seen_exit_at or t_end) - t_start
        out = (run / "stdout.bin").read_bytes()
        err = (run / "stderr.bin").read_bytes()
        con = (run / "console.txt").read_bytes().decode("latin-1", "replace")
        info["console"] = con
        if status is None or not status.isdigit():
            blog = (run / "bochs.log").read_text(errors="replace") \
                if (run / "bochs.log").exists() else ""
            tail = "\n".join(l for l in blog.splitlines() if re.search(r"\b(PANIC|ERROR)\b", l))
            why = reason or (f"exit marker missing (bochs exited with {proc.returncode})"
                             if status is None else f"guest problem: {status}")
            info["error"] = why
            if not quiet:
                log(f"FAILED: {why}")
                log("guest console:\n" + con[-4000:])
                if tail:
                    log("bochs log (errors):\n" + tail[-3000:])
                log(f"run directory kept: {run}")
            keep = True
            return (EXIT_TIMEOUT if reason and reason.startswith("timeout") else EXIT_EMU_FAILURE,
                    out, err, info)
        return int(status), out, err, info
    finally:
        if not keep:
            shutil.rmtree(run, ignore_errors=True)
        elif not args.keep:  # kept for a failure: drop the big images, keep the logs
            (run / "boot.iso").unlink(missing_ok=True)
            (run / "initrd.img").unlink(missing_ok=True)
            shutil.rmtree(run / "initramfs", ignore_errors=True)


# ----------------------------------------------------------------------------------------------
# Self-test

# What each set must report (cpuid bits and gcc's __builtin_cpu_supports) and run.
SELFTEST_EXPECT = {
    "avx2": dict(avx2=1, avx512f=0, avx512bw=0, avx512vl=0, avx512vnni=0, avxvnni=0),
    "avxvnni": dict(avx2=1, avx512f=0, avx512bw=0, avx512vl=0, avx512vnni=0, avxvnni=1),
    "avx512vnni": dict(avx2=1, avx512f=1, avx512bw=1, avx512vl=1, avx512vnni=1, avxvnni=0),
    "spr": dict(avx2=1, avx512f=1, avx512bw=1, avx512vl=1, avx512vnni=1, avxvnni=1),
    "avx512": dict(avx2=1, avx512f=1, avx512bw=1, avx512vl=1, avx512vnni=0, avxvnni=0),
    "amx": dict(avx2=1, avx512f=1, avx512bw=1, avx512vl=1, avx512vnni=1, avxvnni=1),
}
# cpuid only (gcc 12's __builtin_cpu_supports has no AMX names): AMX-TILE and AMX-INT8, XFD
SELFTEST_AMX = {"amx": dict(amx=1, xfd=1)}


def self_test(args, assets):
    """Builds SELFTEST_SOURCE statically with the host gcc and runs it on each set of --sets (default
    all but avx512), holding what it reports and runs against SELFTEST_EXPECT / SELFTEST_AMX, and on
    the avx2 set checks that VEX vpdpbusd without a handler kills it with SIGILL. Prints a PASS or
    FAIL line per check and a summary; returns 0 when all passed, else 1. ToolError without gcc or
    when the program does not build."""
    gcc = shutil.which("gcc")
    if not gcc:
        raise ToolError("--self-test needs gcc")
    work = assets.cache / "selftest"
    work.mkdir(parents=True, exist_ok=True)
    exe = work / "vnni-selftest"
    p = subprocess.run([gcc, "-O2", "-static", "-o", str(exe), str(SELFTEST_SOURCE)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        raise ToolError("compiling the self-test failed:\n" + p.stdout)
    dis = subprocess.run(["objdump", "-d", str(exe)], stdout=subprocess.PIPE, text=True).stdout \
        if shutil.which("objdump") else ""
    if dis:
        enc = re.findall(r"^\s*[0-9a-f]+:\s+((?:[0-9a-f]{2} )+)\s*(\{vex\} )?vpdpbusd .*%([xyz]mm)0",
                         dis, re.M)
        log("self-test binary contains: " + ", ".join(
            f"{'EVEX' if e[0].startswith('62') else 'VEX'} vpdpbusd {e[2]}" for e in enc))
    sets = args.sets or ["avx2", "avxvnni", "avx512vnni", "spr", "amx"]
    failures = 0
    for cpuset in sets:
        want = SELFTEST_EXPECT[cpuset]
        status, out, err, info = run_program(args, assets, exe, [], [], cpuset, args.timeout,
                                             quiet=True)
        text = out.decode(errors="replace")
        problems = []
        if status != 0:
            problems.append(f"exit status {status} ({info.get('error', 'program failed')})")
        kv = {}
        for line in text.splitlines():
            w = line.split()
            if w and w[0] in ("cpuid", "builtin"):
                for t in w[1:]:
                    k, _, v = t.partition("=")
                    kv[f"{w[0]}.{k}"] = v
        for k, v in want.items():
            for src_ in ("cpuid", "builtin"):
                got = kv.get(f"{src_}.{k}")
                if got != str(v):
                    problems.append(f"{src_}.{k}={got} (want {v})")
        amx = SELFTEST_AMX.get(cpuset, dict(amx=0, xfd=0))
        for k, v in amx.items():
            if kv.get(f"cpuid.{k}") != str(v):
                problems.append(f"cpuid.{k}={kv.get(f'cpuid.{k}')} (want {v})")
        xcr0 = int(kv.get("cpuid.xcr0", "0"), 16)
        need = 0x7 | (0xE0 if want["avx512f"] else 0) | (0x60000 if amx["amx"] else 0)
        if not amx["amx"] and xcr0 & 0x60000:
            problems.append(f"xcr0=0x{xcr0:x} has tile state without AMX")
        if xcr0 & need != need:
            problems.append(f"xcr0=0x{xcr0:x} lacks 0x{need:x}")
        forms = dict(re.findall(r"^form ([\w-]+) (\w+)", text, re.M))
        expect_forms = {"vex256": "ok" if want["avxvnni"] else "SIGILL",
                        "evex512": "ok" if want["avx512vnni"] else "SIGILL",
                        "evex256": "ok" if want["avx512vnni"] else "SIGILL",
                        "amx-noperm": "SIGILL",
                        "amx": "ok" if amx["amx"] else "SIGILL",
                        "amx-thread": "ok" if amx["amx"] else "skipped",
                        "amx-fork": "ok" if amx["amx"] else "skipped",
                        "amx-switch": "ok" if amx["amx"] else "skipped"}
        if amx["amx"]:
            m = re.search(r"^amx xinuse during=0x([0-9a-f]+) after=0x([0-9a-f]+)", text, re.M)
            if not m or (int(m.group(1), 16), int(m.group(2), 16)) != (0x60000, 0):
                problems.append("XINUSE of the tile state (live, released): "
                                f"{m.groups() if m else None}, want (0x60000, 0x0)")
        for f_, e in expect_forms.items():
            if forms.get(f_) != e:
                problems.append(f"{f_}: {forms.get(f_)} (want {e})")
        vals = "; ".join(l.strip() for l in text.splitlines() if l.startswith(("form", "cpuid")))
        timing = f"boot {info.get('boot_s', float('nan')):.1f}s, total {info.get('wall_s', 0):.1f}s"
        if problems:
            failures += 1
            print(f"FAIL {cpuset}: {'; '.join(problems)} [{vals}] ({timing})", flush=True)
            if args.verbose:
                print(text + err.decode(errors="replace") + info.get("console", "")[-2000:])
        else:
            print(f"PASS {cpuset}: {vals} ({timing})", flush=True)
    # The negative case as a real process death: executing VEX vpdpbusd with no handler on the
    # avx2 set must kill the program with SIGILL (shell status 128+4).
    if "avx2" in sets:
        status, out, err, info = run_program(args, assets, exe, ["die", "vex256"], [], "avx2",
                                             args.timeout, quiet=True)
        text = out.decode(errors="replace").strip().replace("\n", " | ")
        ok = status == 128 + 4 and "survived" not in text
        if not ok:
            failures += 1
        print(f"{'PASS' if ok else 'FAIL'} avx2-sigill: `vnni-selftest die vex256` exit status "
              f"{status} (want 132 = SIGILL), output: {text!r} "
              f"(total {info.get('wall_s', 0):.1f}s)", flush=True)
    print(f"self-test: {'PASS' if failures == 0 else 'FAIL'} "
          f"({failures} failure{'s' if failures != 1 else ''})", flush=True)
    return 0 if failures == 0 else 1


# ----------------------------------------------------------------------------------------------

def main():
    sets_help = "\n".join(f"  {k:11s} {v['help']}" for k, v in CPU_SETS.items())
    ap = argparse.ArgumentParser(
        prog="x86-emu.py",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run a statically linked x86-64 Linux program under Bochs (a full-system "
        "emulator that implements AVX-512 and AVX-VNNI) with a chosen CPU feature set. A Debian "
        "Linux 6.1 kernel boots from a generated ISO, its initramfs holds only busybox and the "
        "program; the program's stdout/stderr come back on this side and its exit status is this "
        "tool's exit status.",
        epilog=f"""CPU feature sets (--cpu):
{sets_help}

In every set the guest kernel enables the XSAVE state of what the set has (XCR0), so runtime
detection (Rust is_x86_feature_detected!, gcc __builtin_cpu_supports) reports exactly it.

Exit status: the program's own (0-255; a program killed by signal N gives 128+N, e.g. 132 for
SIGILL); {EXIT_TIMEOUT} if --timeout expired; {EXIT_EMU_FAILURE} if the emulator or guest failed
(no exit marker); 2 for usage errors.

First use downloads (with apt, through a private configuration under CACHE/apt, no system-wide
install; from the Debian archive that this machine's apt sources name, or --mirror) bochs
{BOCHS_UPSTREAM} source from Debian {SRC_SUITE} and builds it (needs g++, make; a few minutes), and bochsbios, vgabios, busybox-static, isolinux, syslinux-common and
linux-image-amd64's kernel from Debian {BIN_SUITE}; xorriso and cpio, which make the guest's images,
are installed system-wide with apt-get where missing (tools/toolchain.py). Later runs only boot: a few
seconds.

Examples:
  python3 tools/x86-emu.py --cpu avx512vnni -- ./target/x86_64-unknown-linux-gnu/release/foo --bar
  python3 tools/x86-emu.py --cpu avxvnni --env RUST_BACKTRACE=1 --timeout 1200 -- ./test-bin
  python3 tools/x86-emu.py --self-test
  python3 tools/x86-emu.py --fetch-only""")
    ap.add_argument("--cpu", choices=list(CPU_SETS),
                    help="CPU feature set (see below); required to run a program")
    ap.add_argument("--timeout", type=float, default=900,
                    help="wall-clock seconds for the whole run, boot included (default 900)")
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                    help="environment variable for the program (repeatable); the program gets "
                    "only these")
    ap.add_argument("--file", action="append", default=[], metavar="SRC[:DEST]",
                    help="copy a file or directory into the guest at /work/DEST (default: its name; "
                         "the program runs in /work); repeatable")
    ap.add_argument("--mem", type=int, default=1024, metavar="MB",
                    help="guest RAM in MiB (default 1024); the program and initramfs live in it")
    ap.add_argument("--ips", type=int, default=50_000_000,
                    help="Bochs' emulated instructions per guest second (guest clock rate; "
                    "default 50000000)")
    ap.add_argument("--add-features", default="", metavar="'F1 F2'",
                    help="extra Bochs CPU features to add to the set (Bochs names)")
    ap.add_argument("--exclude-features", default="", metavar="'F1 F2'",
                    help="extra Bochs CPU features to remove from the set (Bochs names)")
    ap.add_argument("--append-cmdline", action="append", default=[], metavar="ARG",
                    help="extra guest kernel command-line argument (repeatable)")
    ap.add_argument("--cache-dir", type=Path,
                    default=Path(os.environ.get("X86EMU_CACHE", DEFAULT_CACHE)),
                    help=f"where downloads, the Bochs build and run directories go "
                    f"(default $X86EMU_CACHE or {DEFAULT_CACHE})")
    ap.add_argument("--mirror", metavar="URI",
                    help="Debian archive to fetch from (default: the first Debian archive with "
                    "the main component in this machine's apt sources, /etc/apt/sources.list and "
                    "sources.list.d/*.list, *.sources; its Signed-By keyring is used too)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2,
                    help="make -j for the one-time Bochs build")
    ap.add_argument("--bzimage-boot", action="store_true",
                    help="boot the compressed bzImage with isolinux instead of the PVH image "
                    "(slow: the guest spends ~40 s decompressing it; for debugging)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the run directory (ISO, bochsrc, console, bochs log)")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="print the guest console and timings to stderr")
    ap.add_argument("--fetch-only", action="store_true",
                    help="download/build everything, then exit")
    ap.add_argument("--self-test", action="store_true",
                    help="build a C program with VEX and EVEX vpdpbusd and check every set "
                    "(detection, results against scalar sums, SIGILL where absent)")
    ap.add_argument("--sets", nargs="+", choices=sorted(CPU_SETS),
                    help="with --self-test: only these sets (default: avx2 avxvnni avx512vnni spr)")
    ap.add_argument("program", nargs="?", type=Path, help="static x86-64 program")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="its arguments (after --)")
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    env = []
    for e in a.env:
        k, sep, v = e.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k):
            ap.error(f"--env wants NAME=VALUE, got {e!r}")
        env.append((k, v))
    if a.args and a.args[0] == "--":
        a.args = a.args[1:]
    a.cache_dir = a.cache_dir.resolve()
    assets = Assets(a.cache_dir, a.mirror, a.jobs)
    try:
        assets.ensure()
        if a.fetch_only:
            log(f"ready: {a.cache_dir}")
            return 0
        if a.self_test:
            return self_test(a, assets)
        if a.program is None:
            ap.error("no program given (or use --self-test / --fetch-only)")
        if a.cpu is None:
            ap.error("--cpu is required (one of: " + ", ".join(CPU_SETS) + ")")
        prog = a.program.resolve()
        if not prog.is_file():
            ap.error(f"{a.program}: no such file")
        status, out, err, info = run_program(a, assets, prog, a.args, env, a.cpu, a.timeout)
        sys.stdout.buffer.write(out)
        sys.stdout.flush()
        sys.stderr.buffer.write(err)
        sys.stderr.flush()
        if a.verbose:
            log("guest console:\n" + info.get("console", ""))
            log(f"cpu={a.cpu} status={status} boot={info.get('boot_s', float('nan')):.2f}s "
                f"program={info.get('program_s', float('nan')):.2f}s "
                f"total={info.get('wall_s', 0):.2f}s")
        return status
    except ToolError as e:
        log(str(e))
        return EXIT_EMU_FAILURE


if __name__ == "__main__":
    sys.exit(main())
