#!/usr/bin/env python3
"""Run the x86-64 kernel levels this machine lacks (AVX-VNNI, AVX-512 VNNI) for real, in an emulator,
and the AVX2-only decline path, which no machine with a VNNI level can run natively.

Builds the crate's test binaries and the C ABI program statically for x86_64-unknown-linux-gnu,
then runs them under Bochs (tools/x86-emu.py: a full-system emulator that implements AVX-VNNI and
AVX-512 VNNI) for CPU feature sets:

  avx2        Haswell-like: AVX2, no VNNI of any kind -> the library must choose avx2 and refuse
              both VNNI levels (the C ABI program, and the oracle's level-choice tests)
  avxvnni     Alder/Arrow-Lake-like: AVX2 + AVX-VNNI, no AVX-512  -> level avxvnni (ymm)
  avx512vnni  Ice-Lake-like: AVX-512 F/BW/VL/VNNI, no AVX-VNNI    -> level avx512vnni (zmm)
  spr         Sapphire-Rapids-like: both                          -> levels avxvnni and avx512vnni
  amx         Sapphire Rapids with AMX-INT8 (and XFD, which Linux needs to enable it) -> level amx:
              the oracle, golden and property tests on it, the tile kernel natively against its
              scalar model (tests/rust/amx.rs), and tests/c/amx_smoke.c twice: as the CPU is (the
              permission, a thread created before the first call, one after, a child after
              fork(), tiles released) and with the tile-data permission refused by seccomp

By default only what this CPU cannot run natively (host `cargo test` runs every level the CPU has):
the avx2 set always, plus the set of each VNNI level the CPU lacks (all three when it lacks both),
plus the amx set when it lacks AMX-INT8.
Here that is read from /proc/cpuinfo, independently of the library. --sets chooses explicitly.

For a level set it runs the oracle, the golden vectors, the property tests (with
GGML_T2P_TEST_LEVELS set to the set's levels: every output is still held against the scalar
reference *formula*, only the slow reference *kernel* level is skipped) and the C ABI program
(every level, the library's own choice of the best one and of the layout, levels the emulated CPU
lacks refused). It prints one line per set and exits non-zero if anything fails. Speed in an
emulator means nothing: this checks bits only.

The first run builds Bochs 3.0 from Debian's source package (about 7 minutes on 2 cores; cached
under target/x86-emu/). Logs: target/x86-emu-test/<set>.log.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.dont_write_bytecode = True    # no __pycache__ beside the tools
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import t2p_common as tc  # noqa: E402
import t2p_runner as tr  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TARGET = "x86_64-unknown-linux-gnu"
SETS = {
    "avx2": ["avx2"],
    "avxvnni": ["avxvnni"],
    "avx512vnni": ["avx512vnni"],
    "spr": ["avxvnni", "avx512vnni"],
    "amx": ["amx"],
}
LEVEL_TESTS = ["oracle", "golden", "props", "hybrid"]  # every level set runs these
TESTS = LEVEL_TESTS + ["amx"]  # the test binaries built
C_PROGRAMS = ["abi_smoke", "amx_smoke"]
# what each set runs, as (program, arguments, a line its output must contain or None): the avx2
# set only the decline path (its kernels run natively on any AVX2 host); the amx set also the tile
# kernel against its scalar model and the level's hygiene through the C ABI, as the CPU is and
# with the tile-data permission refused
RUNS = {cpu: [(t, [], None) for t in LEVEL_TESTS] + [("abi_smoke", [], None)] for cpu in SETS}
RUNS["avx2"] = [("oracle", ["decline_without_simd", "best_level_choice"], None), ("abi_smoke", [], None)]
RUNS["amx"] += [
    ("amx", [], "amx native: "),
    ("amx_smoke", [], "thread created before the library's first call: amx gemm"),
    ("amx_smoke", ["--deny"], "permission refused, the best level instead"),
]


# the lines of a run's output shown under its set's line (besides libtest's totals and FAIL lines)
SHOWN = ("oracle:", "split:", "golden pq2_0_dot_q8k.fma", "kernels:", "c abi smoke:", "this CPU", "panicked", "concat:",
         "amx native:", "amx smoke:")


def host_levels() -> list[str]:
    """The x86 kernel levels this CPU runs, from /proc/cpuinfo (as the library requires them)."""
    return tc.kernel_levels("x86_64", tc.cpu_flags())


def default_sets(native: list[str]) -> list[str]:
    """avx2 (the decline path) always; then the sets of the levels this CPU lacks (amx: AMX-INT8)."""
    lacks = [lv for lv in ("avxvnni", "avx512vnni") if lv not in native]
    sets = ["avx2", "avxvnni", "avx512vnni", "spr"] if len(lacks) == 2 else ["avx2"] + lacks
    return sets + ([] if "amx" in native else ["amx"])


def build(target_dir: Path) -> dict:
    """Static test binaries and C programs; returns {name: path}."""
    env = dict(os.environ, CARGO_TARGET_DIR=str(target_dir))
    env["CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS"] = "-C target-feature=+crt-static"
    print(f"x86-emu-test: building static test binaries for {TARGET} (release)", flush=True)
    tests, lib = tr.build_tests("x86-emu-test", TARGET, env, ["--release"], TESTS)
    bins = {name: Path(path) for name, path in tests}
    for name in C_PROGRAMS:
        bins[name] = Path(tr.link_c("x86-emu-test", "cc", name, lib, str(target_dir / f"{name}-static"),
                                    ["-D_POSIX_C_SOURCE=200809L"]))
    missing = [t for t in TESTS if t not in bins]
    if missing:
        sys.exit(f"x86-emu-test: test binaries not built: {missing}")
    return bins


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", nargs="+", choices=sorted(SETS), default=None,
                    help="CPU sets (default: avx2 plus the sets of the VNNI levels this CPU lacks)")
    ap.add_argument("--self-test", action="store_true",
                    help="first run tools/x86-emu.py --self-test for the same sets (the emulator's own check)")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per emulated run (default 1800)")
    ap.add_argument("--golden", type=Path, default=None,
                    help="golden vector directory (default $GGML_T2P_GOLDEN_DIR or tests/golden)")
    args = ap.parse_args()

    golden = args.golden or Path(os.environ.get("GGML_T2P_GOLDEN_DIR") or ROOT / "tests" / "golden")
    if not golden.is_dir():
        print(f"x86-emu-test: golden vector directory {golden} is missing", file=sys.stderr)
        return 1
    native = host_levels()
    sets = args.sets or default_sets(native)
    print(f"x86-emu-test: this CPU runs natively (/proc/cpuinfo): {' '.join(native) or 'no x86 SIMD level'}; "
          f"emulated sets: {' '.join(sets)}", flush=True)
    emu = [sys.executable, str(ROOT / "tools" / "x86-emu.py")]
    if args.self_test:
        t0 = time.time()
        r = subprocess.run(emu + ["--self-test", "--sets", *sets])
        print(f"x86-emu-test: emulator self-test {'PASS' if r.returncode == 0 else 'FAIL'} ({time.time() - t0:.0f} s)",
              flush=True)
        if r.returncode != 0:
            return 1
    t0 = time.time()
    bins = build(ROOT / "target" / "static")
    print(f"x86-emu-test: static build {time.time() - t0:.0f} s", flush=True)
    logs = ROOT / "target" / "x86-emu-test"
    logs.mkdir(parents=True, exist_ok=True)
    failed = 0
    for cpu in sets:
        levels = ",".join(SETS[cpu])
        log = logs / f"{cpu}.log"
        t0 = time.time()
        ok = True
        lines = []
        with log.open("w") as f:
            for name, filters, must in RUNS[cpu]:
                cmd = emu + ["--cpu", cpu, "--timeout", str(args.timeout), "--env", f"GGML_T2P_TEST_LEVELS={levels}"]
                if name == "golden":
                    cmd += ["--file", f"{golden}:golden", "--env", "GGML_T2P_GOLDEN_DIR=/work/golden"]
                cmd += ["--", str(bins[name])]
                cmd += filters if name in C_PROGRAMS else ["--nocapture", "--test-threads=1", *filters]
                rc, out = tr.run_logged(f, f"{name}: {' '.join(cmd)}", cmd)
                if rc != 0:
                    ok = False
                    f.write(f"=== {name}: exit status {rc}\n")
                if must and must not in out:
                    ok = False
                    lines.append(f"FAIL {name} {' '.join(filters)}: no line with {must!r}")
                    f.write(f"=== {name}: no line with {must!r}\n")
                fails = 0
                for l in out.splitlines():
                    if l.startswith("FAIL"):
                        fails += 1
                        if fails > 3:
                            continue
                    if any(k in l for k in SHOWN) or "test result" in l or l.startswith("FAIL"):
                        lines.append(l[l.index("...") + 4:] if l.startswith("test ") and "..." in l else l)
        failed += not ok
        what = "decline path" if cpu == "avx2" else "levels"
        print(f"x86-emu-test: {cpu:11} {tr.verdict(ok)}  {what} {levels}  ({time.time() - t0:.0f} s, log {log})",
              flush=True)
        for l in lines:
            print(f"    {l}")
    emulated = sorted({lv for cpu in sets if cpu != "avx2" for lv in SETS[cpu]})
    print(f"x86-emu-test: emulated: levels {' '.join(emulated) or 'none (this CPU has them all)'}"
          f"{'; AVX2-only decline path' if 'avx2' in sets else ''} (sets {' '.join(sets)})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
