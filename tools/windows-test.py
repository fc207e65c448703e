#!/usr/bin/env python3
"""The Windows smoke test: libggml_t2p built for x86_64-pc-windows-gnu, C programs linked with
MinGW-w64, run under Wine, their output compared with the same programs built for Linux.

  python3 tools/windows-test.py [--no-install] [--system-libs "kernel32 ntdll ..."] [--out DIR]

Steps (x86-64 Linux host; Debian/Ubuntu for the installs):
  1. tools: x86_64-w64-mingw32-gcc (apt: gcc-mingw-w64-x86-64), wine (apt: wine wine64), cmake, a
     host C compiler, and Rust's x86_64-pc-windows-gnu std (rustup target add). Missing ones are
     installed (apt-get, rustup) unless --no-install, which names them and fails;
  2. the system libraries: the list the CMake fragment gives a MinGW build
     (ggml-glue/ggml-t2p-target.cmake, read with cmake -P), checked against what rustc prints for the
     target (--print native-static-libs): a library rustc needs that the fragment lacks fails the
     test, since a MinGW llama.cpp build links with the fragment's list. --system-libs replaces the
     list (to show that a wrong one fails);
  3. cargo build --release --lib for the host and for x86_64-pc-windows-gnu;
  4. builds tests/windows/win_bits.c and tests/c/abi_smoke.c natively (gcc) and for Windows
     (x86_64-w64-mingw32-gcc -static, with the fragment's libraries), and tests/c/fork_smoke.c and
     tests/c/release_smoke.c (the source release, ggml_t2p_release_source and the plugin's sliced
     repack) for Windows (each prints that it is skipped there: no fork; the release is Linux only);
  5. runs the .exe files under Wine (WINEPREFIX=<out>/wineprefix, WINEDEBUG=-all, no display),
     after giving a Wine that lacks bcryptprimitives.dll (Wine before 9, e.g. Debian 12's 8.0) the
     stand-in from tests/windows/bcryptprimitives_shim.c: Rust's std imports ProcessPrng from it;
  6. requires: every program's exit status 0, win_bits' lines (all but "# " lines) and abi_smoke's
     output identical natively and under Wine, and, with GGML_T2P_KERNEL set to each x86 level, the
     same verdict natively and under Wine: a level this CPU has runs, one it lacks is declined.
win_bits prints the CPU features and the chosen level, FNV-1a hashes of the repacked bytes and of
the gemv/gemm outputs of every level the CPU runs (PQ2_0 and PTQ1_0, 1 to 17 columns), and whether a
repack above 1 MiB used threads and left none behind.

Exit status 0: passed; 1: a step failed (the output says which and why); 2: bad arguments or tools
missing with --no-install. On a host that is not x86-64 Linux it prints a SKIP line and exits 0.
"""

from __future__ import annotations

import argparse
import difflib
import os
import platform
import re
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True   # no __pycache__ beside the tools
import t2p_common as tc  # noqa: E402
import t2p_runner as tr  # noqa: E402
import toolchain  # noqa: E402  (the Debian package names and apt-get as root or through sudo)
TRIPLE = "x86_64-pc-windows-gnu"
MINGW_CC = "x86_64-w64-mingw32-gcc"
# the x86 levels forced one by one, widest last (amx: Linux only)
LEVELS = tuple(reversed([lv for lv in tc.ARCH_LEVELS["x86_64"] if lv != "amx"]))
TOOL = "windows-test"


class Fail(Exception):
    def __init__(self, msg, code=1):
        super().__init__(msg)
        self.code = code


def say(msg):
    print(f"{TOOL}: {msg}", flush=True)


def run(cmd, env=None, timeout=900):
    """Runs cmd (t2p_runner.run); (status, stdout, stderr) as text, CRLF turned into LF."""
    return tr.run(cmd, env=env, timeout=timeout)


def must(what, cmd, env=None, timeout=900):
    rc, out, err = run(cmd, env=env, timeout=timeout)
    if rc != 0:
        tail = "\n".join((out + err).strip().splitlines()[-25:])
        raise Fail(f"{what} failed (status {rc}): {' '.join(cmd)}\n{tail}")
    return out, err


# ---------------------------------------------------------------------------------------------
# 1. tools

def rustup_has_target():
    rc, out, _ = run(["rustup", "target", "list", "--installed"], timeout=120)
    return rc == 0 and TRIPLE in out.split()


def missing_tools():
    """[(what, apt package or None, how)] for every tool that is missing."""
    miss = []
    if not shutil.which(MINGW_CC):
        pkg = toolchain.MINGW_X64_PACKAGES[MINGW_CC]
        miss.append((MINGW_CC, pkg, f"apt-get install {pkg}"))
    if not shutil.which("wine"):
        miss.append(("wine", "wine wine64", "apt-get install wine wine64"))
    if not shutil.which("cmake"):
        miss.append(("cmake", "cmake", "apt-get install cmake"))
    if not (shutil.which("cc") or shutil.which("gcc")):
        miss.append(("a host C compiler", "gcc", "apt-get install gcc"))
    if not shutil.which("cargo"):
        miss.append(("cargo", None, "Rust from rustup (https://rustup.rs)"))
    elif not shutil.which("rustup"):
        miss.append((f"the Rust std for {TRIPLE}", None,
                     f"rustup (to run `rustup target add {TRIPLE}`), or a Rust with that std"))
    elif not rustup_has_target():
        miss.append((f"the Rust std for {TRIPLE}", None, f"rustup target add {TRIPLE}"))
    return miss


def ensure_tools(install):
    miss = missing_tools()
    if not miss:
        return
    names = ", ".join(m[0] for m in miss)
    if not install:
        raise Fail(f"missing: {names}. Install with: " + "; ".join(m[2] for m in miss) + " (or drop --no-install)", 2)
    apt = " ".join(m[1] for m in miss if m[1]).split()
    if apt:
        if not shutil.which("apt-get"):
            raise Fail(f"missing {names}, and no apt-get here: install " + ", ".join(apt) + " yourself", 2)
        say("installing with apt-get: " + " ".join(apt))
        try:
            toolchain.apt_install(apt, recommends=False, timeout=1800)
        except toolchain.Missing as e:
            raise Fail(f"apt-get install failed ({e}; its output above)", 2) from None
    if any(m[0].startswith("the Rust std") for m in miss) and shutil.which("rustup"):
        say(f"rustup target add {TRIPLE}")
        must("rustup target add", ["rustup", "target", "add", TRIPLE], timeout=900)
    miss = missing_tools()
    if miss:
        raise Fail("still missing after installing: " + ", ".join(m[0] for m in miss), 2)


# ---------------------------------------------------------------------------------------------
# 2. system libraries

FRAGMENT_PROBE = """\
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(CMAKE_CROSSCOMPILING TRUE)
set(MINGW 1)
set(CMAKE_C_COMPILER_ID GNU)
set(CMAKE_CXX_COMPILER_ID GNU)
include("{fragment}")
ggml_t2p_rust_target(r)
message("TRIPLES=${{r_TRIPLES}}")
message("LIB=${{r_LIB_NAME}}")
message("LIBS=${{r_SYSTEM_LIBS}}")
message("ERROR=${{r_ERROR}}")
"""


def fragment_mingw(out_dir):
    """What ggml-glue/ggml-t2p-target.cmake gives a MinGW x86-64 build: (triple, lib name, libs)."""
    probe = os.path.join(out_dir, "fragment-mingw.cmake")
    with open(probe, "w") as f:
        f.write(FRAGMENT_PROBE.format(fragment=os.path.join(ROOT, "ggml-glue", "ggml-t2p-target.cmake")))
    out, err = must("reading the CMake fragment", ["cmake", "-P", probe], timeout=120)
    vals = dict(re.findall(r"^(TRIPLES|LIB|LIBS|ERROR)=(.*)$", out + err, re.M))
    if vals.get("ERROR"):
        raise Fail(f"the CMake fragment refuses MinGW x86-64: {vals['ERROR']}")
    libs = [x for x in vals.get("LIBS", "").split(";") if x]
    return vals.get("TRIPLES", ""), vals.get("LIB", ""), libs


def rustc_native_libs(out_dir):
    """The libraries rustc says a staticlib for TRIPLE needs (std only: ggml-t2p adds none)."""
    src = os.path.join(out_dir, "native_libs_probe.rs")
    with open(src, "w") as f:
        f.write("#![no_main]\n")
    out, err = must("rustc --print native-static-libs",
                    ["rustc", "--target", TRIPLE, "--crate-type", "staticlib", "--crate-name", "probe",
                     "--print", "native-static-libs", "-o", os.path.join(out_dir, "libprobe.a"), src], timeout=300)
    m = re.search(r"native-static-libs:(.*)", out + err)
    if not m:
        raise Fail("rustc printed no native-static-libs line:\n" + (out + err)[-2000:])
    return [t[2:] for t in m.group(1).split() if t.startswith("-l")]


# ---------------------------------------------------------------------------------------------
# 3.-4. build

def cargo_build(target=None):
    cmd = ["cargo", "build", "--release", "--lib"] + (["--target", target] if target else [])
    env = dict(os.environ)
    if target:
        env.setdefault("CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER", MINGW_CC)
    t0 = time.monotonic()
    must(f"cargo build ({target or 'host'})", cmd, env=env, timeout=3600)
    lib = os.path.join(ROOT, "target", *( [target] if target else []), "release", "libggml_t2p.a")
    if not os.path.isfile(lib):
        raise Fail(f"cargo built no {lib}")
    say(f"built {os.path.relpath(lib, ROOT)} in {time.monotonic() - t0:.1f} s")
    return lib


def build_native(src, exe, lib):
    cc = shutil.which("cc") or "gcc"
    must(f"compiling {os.path.relpath(src, ROOT)} natively",
         tr.c_command(cc, src, lib, exe, ["-Wextra", "-D_POSIX_C_SOURCE=200809L"], static=False))


def build_windows(src, exe, lib, libs, extra=()):
    # -static: no MinGW runtime DLLs to find under Wine; __USE_MINGW_ANSI_STDIO: C99 printf (%zu, %a)
    cmd = tr.c_command(MINGW_CC, src, lib, exe, ["-Wextra", "-D_POSIX_C_SOURCE=200809L", "-D__USE_MINGW_ANSI_STDIO=1",
                                                 *extra], libs)
    rc, out, err = run(cmd)
    if rc != 0:
        undefined = sorted(set(re.findall(r"undefined reference to `([^']+)'", out + err)))
        hint = (f"\n  {len(undefined)} undefined symbols, e.g. " + ", ".join(undefined[:6]) +
                "\n  (a system library missing from the list: " + " ".join(libs) + ")") if undefined else ""
        tail = "\n".join(l[-200:] for l in (out + err).strip().splitlines()[-6:])
        raise Fail(f"linking {os.path.basename(exe)} for Windows failed (status {rc}){hint}\n{tail}")


# ---------------------------------------------------------------------------------------------
# 5. Wine

def wine_env(out_dir, extra=None):
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.update(WINEPREFIX=os.path.join(out_dir, "wineprefix"), WINEDEBUG="-all", WINEARCH="win64",
               WINEDLLOVERRIDES="mscoree,mshtml=")      # no Mono/Gecko installer prompts
    env.update(extra or {})
    return env


def wine_setup(out_dir, timeout):
    """Creates the private prefix; installs the bcryptprimitives.dll stand-in where Wine has none."""
    rc, ver, err = run(["wine", "--version"], env=wine_env(out_dir), timeout=120)
    if rc != 0:
        raise Fail(f"wine does not start (status {rc}): {(ver + err).strip()[:500]}")
    prefix = os.path.join(out_dir, "wineprefix")
    sys32 = os.path.join(prefix, "drive_c", "windows", "system32")
    if not os.path.isdir(sys32):
        say(f"creating the Wine prefix {prefix} (once; a minute)")
        rc, out, err = run(["wine", "wineboot", "--init"], env=wine_env(out_dir), timeout=timeout)
        if not os.path.isdir(sys32):
            raise Fail("Wine could not create its prefix (wineboot status "
                       f"{rc}): {(out + err).strip()[-800:]}\n  This Wine cannot run 64-bit Windows programs here.")
        run(["wineserver", "-w"], env=wine_env(out_dir), timeout=120)
    note = "its own bcryptprimitives.dll"
    dll = os.path.join(sys32, "bcryptprimitives.dll")
    wines = False
    if os.path.isfile(dll):
        with open(dll, "rb") as f:
            head = f.read(1 << 20)
        wines = b"Wine builtin DLL" in head or b"Wine placeholder DLL" in head
    if not wines:
        shim = os.path.join(out_dir, "bcryptprimitives.dll")
        must("building the bcryptprimitives.dll stand-in",
             [MINGW_CC, "-O2", "-shared", "-Wall", "-Werror", "-static-libgcc", "-o", shim,
              os.path.join(ROOT, "tests", "windows", "bcryptprimitives_shim.c"), "-ladvapi32"])
        shutil.copyfile(shim, dll)
        note = "no bcryptprimitives.dll of its own: the stand-in (tests/windows/bcryptprimitives_shim.c) installed"
    return ver.strip(), note


def run_wine(exe, out_dir, timeout, env_extra=None):
    return run(["wine", exe], env=wine_env(out_dir, env_extra), timeout=timeout)


def run_native(exe, timeout, env_extra=None):
    env = dict(os.environ)
    env.pop("GGML_T2P_KERNEL", None)
    env.update(env_extra or {})
    return run([exe], env=env, timeout=timeout)


# ---------------------------------------------------------------------------------------------
# 6. compare

def compared(text):
    return [l for l in text.splitlines() if l.strip() and not l.startswith("# ")]


AMX_FEATURES = 0x40 | 0x80  # GGML_T2P_CPU_AMX_TILE | GGML_T2P_CPU_AMX_INT8


def without_amx(text):
    """The native (Linux) output as Windows must print it on the same CPU: the library reports and
    uses AMX on Linux only, so the AMX feature bits are dropped and auto's amx is avx512vnni (amx
    needs AVX-512 VNNI)."""
    text = re.sub(r"cpu features 0x([0-9a-f]+)", lambda m: f"cpu features 0x{int(m.group(1), 16) & ~AMX_FEATURES:x}",
                  text)
    return text.replace("best kernel amx", "best kernel avx512vnni")


def compare(name, native, wine):
    """Prints a verdict; returns True when the compared lines are identical (native's AMX, which
    Windows never uses, taken out first: without_amx)."""
    a, b = compared(without_amx(native)), compared(wine)
    if a == b:
        say(f"{name}: {len(a)} lines identical natively and under Wine")
        return True
    say(f"{name}: native and Wine output DIFFER:")
    for line in list(difflib.unified_diff(a, b, "native", "wine", lineterm="", n=0))[:40]:
        print("    " + line)
    return False


def level_verdict(text, level):
    """The GGML_T2P_KERNEL line of win_bits' output for a forced level."""
    for line in text.splitlines():
        if line.startswith(("declining:", f"GGML_T2P_KERNEL={level}")):
            return line.strip()
    return "(no GGML_T2P_KERNEL line)"


def main():
    ap = argparse.ArgumentParser(
        prog="tools/windows-test.py",
        description="Build libggml_t2p for x86_64-pc-windows-gnu, link C programs with MinGW-w64, run them under "
                    "Wine, and require the same output as the Linux build (details: the top of this file).",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-install", dest="install", action="store_false",
                    help="fail (status 2) instead of installing missing tools with apt-get / rustup")
    ap.add_argument("--system-libs", metavar="LIBS",
                    help="link the Windows programs with these libraries (space separated, no -l) instead of the "
                         "CMake fragment's MinGW list; the fragment check is then skipped (to show that a wrong "
                         "list fails)")
    ap.add_argument("--out", default=os.path.join(ROOT, "target", "windows-test"),
                    help="work folder: programs, logs, the Wine prefix (default target/windows-test)")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per program run under Wine (default 600)")
    args = ap.parse_args()
    if args.timeout <= 0:
        ap.error("--timeout must be positive")

    if sys.platform != "linux" or tc.cpu_arch(platform.machine().lower()) != "x86_64":
        print(f"{TOOL}: SKIP: needs an x86-64 Linux host (Wine runs x86-64 Windows programs there); this is "
              f"{sys.platform}/{platform.machine()}")
        return 0
    t_start = time.monotonic()
    out_dir = os.path.abspath(args.out)
    os.makedirs(out_dir, exist_ok=True)
    ensure_tools(args.install)

    # 2. the system libraries the fragment gives MinGW, held against rustc's list
    triple, lib_name, frag_libs = fragment_mingw(out_dir)
    rust_libs = rustc_native_libs(out_dir)
    say(f"CMake fragment, MinGW x86-64: Rust target {triple}, {lib_name}, system libraries: {' '.join(frag_libs)}")
    say(f"rustc {TRIPLE} --print native-static-libs: {' '.join(rust_libs)}")
    if args.system_libs is not None:
        libs = args.system_libs.split()
        say(f"--system-libs: linking with {' '.join(libs) or '(none)'} instead of the fragment's list")
    else:
        problems = []
        if triple != TRIPLE:
            problems.append(f"the fragment picks Rust target '{triple}', want {TRIPLE}")
        if lib_name != "libggml_t2p.a":
            problems.append(f"the fragment expects '{lib_name}', cargo writes libggml_t2p.a for {TRIPLE}")
        lacking = [x for x in rust_libs if x not in frag_libs]
        if lacking:
            problems.append("the fragment's MinGW list lacks " + " ".join(lacking) + " (rustc needs them)")
        if problems:
            raise Fail("CMake fragment (ggml-glue/ggml-t2p-target.cmake): " + "; ".join(problems))
        libs = frag_libs

    # 3. the libraries
    host_lib = cargo_build()
    win_lib = cargo_build(TRIPLE)

    # 4. programs
    progs = {"win_bits": os.path.join(ROOT, "tests", "windows", "win_bits.c"),
             "abi_smoke": os.path.join(ROOT, "tests", "c", "abi_smoke.c")}
    # abi_smoke uses C11 aligned_alloc, which neither msvcrt nor the UCRT has
    compat = ["-include", os.path.join(ROOT, "tests", "windows", "c11_compat.h")]
    native, windows = {}, {}
    for name, src in progs.items():
        native[name] = os.path.join(out_dir, name)
        build_native(src, native[name], host_lib)
        windows[name] = os.path.join(out_dir, name + ".exe")
        build_windows(src, windows[name], win_lib, libs, compat if name == "abi_smoke" else ())
    windows["fork_smoke"] = os.path.join(out_dir, "fork_smoke.exe")
    build_windows(os.path.join(ROOT, "tests", "c", "fork_smoke.c"), windows["fork_smoke"], win_lib, libs)
    windows["release_smoke"] = os.path.join(out_dir, "release_smoke.exe")
    build_windows(os.path.join(ROOT, "tests", "c", "release_smoke.c"), windows["release_smoke"], win_lib, libs)
    say(f"linked for Windows with {MINGW_CC} -static and -l" + " -l".join(libs) + ": " +
        ", ".join(os.path.basename(windows[n]) for n in windows))

    # 5. Wine
    ver, note = wine_setup(out_dir, args.timeout)
    say(f"{ver}; {note}")

    ok = True
    results = {}
    for name in ("win_bits", "abi_smoke"):
        rn, on, en = run_native(native[name], args.timeout)
        rw, ow, ew = run_wine(windows[name], out_dir, args.timeout)
        for tag, text in (("native", on + en), ("wine", ow + ew)):
            with open(os.path.join(out_dir, f"{name}.{tag}.txt"), "w") as f:
                f.write(text)
        results[name] = (on, ow)
        for where, rc, out, err in (("natively", rn, on, en), ("under Wine", rw, ow, ew)):
            if rc != 0:
                ok = False
                say(f"{name} {where}: exit status {rc}" + (" (Wine could not load it: c0000135, a DLL is missing)"
                                                           if rc == 53 else ""))
                print("    " + "\n    ".join((out + err).strip().splitlines()[-15:]))
        ok = compare(name, on, ow) and ok
    # programs with nothing to do on Windows: they must run and say they skipped
    for prog, skipped in (("fork_smoke", "fork smoke: skipped"), ("release_smoke", "release smoke: skipped")):
        rw, ow, ew = run_wine(windows[prog], out_dir, args.timeout)
        if rw != 0 or skipped not in ow:
            ok = False
            say(f"{prog}.exe under Wine: status {rw}, output: {(ow + ew).strip()[:300]}")
        else:
            say(f"{prog}.exe under Wine: " + ow.strip())

    # GGML_T2P_KERNEL forced to each level: the same verdict natively and under Wine, and it
    # matches what the library reported for the level (runs, or not available: declined)
    on = results["win_bits"][0]
    for lv in LEVELS:
        has = re.search(rf"^level {lv}\s*: runs", on, re.M) is not None
        rn, tn, en = run_native(native["win_bits"], args.timeout, {"GGML_T2P_KERNEL": lv})
        rw, tw, ew = run_wine(windows["win_bits"], out_dir, args.timeout, {"GGML_T2P_KERNEL": lv})
        vn, vw = level_verdict(tn, lv), level_verdict(tw, lv)
        want = f"GGML_T2P_KERNEL={lv}: runs" if has else f"declining: this CPU cannot run GGML_T2P_KERNEL={lv}"
        why = []
        if not (vn == vw and vw.startswith(want)):
            why.append(f"want '{want}...' natively and under Wine")
        if rn != 0 or rw != 0:
            why.append(f"the program failed its other checks (status native {rn}, Wine {rw})")
        ok = ok and not why
        say(f"GGML_T2P_KERNEL={lv}: Wine: '{vw}'" + ("" if vn == vw else f", native: '{vn}'") +
            (f"  FAIL: {'; '.join(why)}" if why else ""))
        for where, rc, text, err in (("native", rn, tn, en), ("Wine", rw, tw, ew)):
            if rc != 0:
                # the program's own verdicts, so that a failure says which check it was
                lines = [l for l in (text + err).splitlines() if l.startswith(("FAIL", "# repack threads", "win bits"))]
                print(f"    {where}: " + (f"\n    {where}: ".join(lines) if lines else (text + err).strip()[-500:]))

    head = [l for l in compared(results["win_bits"][1]) if l.startswith(("ggml-t2p", "repack on"))]
    for l in head:
        say("wine: " + l)
    threads = [l for l in results["win_bits"][1].splitlines() if l.startswith("# repack threads")]
    if threads:
        say("wine: " + threads[0][2:])
    say(f"{tr.verdict(ok)} in {time.monotonic() - t_start:.0f} s (outputs in {out_dir})")
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Fail as e:
        print(f"{TOOL}: FAIL: {e}", file=sys.stderr)
        sys.exit(e.code)
    except KeyboardInterrupt:
        sys.exit(130)
