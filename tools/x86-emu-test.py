#!/usr/bin/env python3
"""Run the x86-64 kernel levels this machine lacks (AVX-VNNI, AVX-512 VNNI) for real, in an emulator.

Builds the crate's test binaries and the C ABI program statically for x86_64-unknown-linux-gnu,
then runs them under Bochs (tools/x86-emu.py: a full-system emulator that implements AVX-VNNI and
AVX-512 VNNI) for three CPU feature sets:

  avxvnni     Alder/Arrow-Lake-like: AVX2 + AVX-VNNI, no AVX-512  -> level avxvnni (ymm)
  avx512vnni  Ice-Lake-like: AVX-512 F/BW/VL/VNNI, no AVX-VNNI    -> level avx512vnni (zmm)
  spr         Sapphire-Rapids-like: both                          -> levels avxvnni and avx512vnni

For each set it runs the oracle, the golden vectors, the property tests (with
GGML_T2P_TEST_LEVELS set to the set's levels: every output is still held against the scalar
reference *formula*, only the slow reference *kernel* level is skipped) and the C ABI program
(every level, the library's own choice of the best one and of the layout). It prints one line per
set and exits non-zero if anything fails. The AVX2 level and the portable levels run natively in
`cargo test`; this tool adds the levels the host CPU cannot run. Speed in an emulator means
nothing: this checks bits only.

The first run builds Bochs 3.0 from Debian's source package (about 7 minutes on 2 cores; cached
under target/x86-emu/). Logs: target/x86-emu-test/<set>.log.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = "x86_64-unknown-linux-gnu"
SETS = {
    "avxvnni": ["avxvnni"],
    "avx512vnni": ["avx512vnni"],
    "spr": ["avxvnni", "avx512vnni"],
}
TESTS = ["oracle", "golden", "props"]


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def build(target_dir: Path) -> dict:
    """Static test binaries and C programs; returns {name: path}."""
    env = dict(os.environ, CARGO_TARGET_DIR=str(target_dir))
    env["CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS"] = "-C target-feature=+crt-static"
    print(f"x86-emu-test: building static test binaries for {TARGET} (release)", flush=True)
    out = subprocess.run(["cargo", "test", "--release", "--target", TARGET, "--no-run", "--message-format=json",
                          *[a for t in TESTS for a in ("--test", t)]],
                         cwd=ROOT, env=env, check=True, capture_output=True, text=True).stdout
    bins = {}
    for line in out.splitlines():
        try:
            m = json.loads(line)
        except ValueError:
            continue
        if m.get("reason") == "compiler-artifact" and m.get("profile", {}).get("test") and m.get("executable"):
            bins[m["target"]["name"]] = Path(m["executable"])
    sh(["cargo", "build", "--release", "--lib", "--target", TARGET], cwd=ROOT, env=env,
       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    lib = target_dir / TARGET / "release" / "libggml_t2p.a"
    smoke = target_dir / "abi_smoke-static"
    # (glibc warns that a static binary's getaddrinfo/getpwuid_r need its shared libraries at run
    # time; the library never calls them, so the link's stderr is shown only on failure)
    r = subprocess.run(["cc", "-static", "-O2", "-std=c11", "-Wall", "-Werror", "-I", str(ROOT / "include"),
                        str(ROOT / "tests/c/abi_smoke.c"), str(lib), "-lpthread", "-ldl", "-lm", "-o", str(smoke)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"x86-emu-test: linking the C program failed:\n{r.stderr}")
    bins["abi_smoke"] = smoke
    missing = [t for t in TESTS if t not in bins]
    if missing:
        sys.exit(f"x86-emu-test: test binaries not built: {missing}")
    return bins


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", nargs="+", choices=sorted(SETS), default=list(SETS), help="CPU sets (default: all)")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per emulated run (default 1800)")
    ap.add_argument("--golden", type=Path, default=None,
                    help="golden vector directory (default $GGML_T2P_GOLDEN_DIR or ../shared/golden)")
    args = ap.parse_args()

    golden = args.golden or Path(os.environ.get("GGML_T2P_GOLDEN_DIR", ROOT.parent / "shared" / "golden"))
    if not golden.is_dir():
        print(f"x86-emu-test: golden vector directory {golden} is missing", file=sys.stderr)
        return 1
    bins = build(ROOT / "target" / "static")
    logs = ROOT / "target" / "x86-emu-test"
    logs.mkdir(parents=True, exist_ok=True)
    emu = [sys.executable, str(ROOT / "tools" / "x86-emu.py")]
    failed = 0
    for cpu in args.sets:
        levels = ",".join(SETS[cpu])
        log = logs / f"{cpu}.log"
        t0 = time.time()
        ok = True
        lines = []
        with log.open("w") as f:
            for name in TESTS + ["abi_smoke"]:
                cmd = emu + ["--cpu", cpu, "--timeout", str(args.timeout), "--env", f"GGML_T2P_TEST_LEVELS={levels}"]
                if name == "golden":
                    cmd += ["--file", f"{golden}:golden", "--env", "GGML_T2P_GOLDEN_DIR=/work/golden"]
                cmd += ["--", str(bins[name])]
                if name != "abi_smoke":
                    cmd += ["--nocapture", "--test-threads=1"]
                f.write(f"=== {name}: {' '.join(cmd)}\n")
                f.flush()
                r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                f.write(r.stdout)
                if r.returncode != 0:
                    ok = False
                    f.write(f"=== {name}: exit status {r.returncode}\n")
                fails = 0
                for l in r.stdout.splitlines():
                    if l.startswith("FAIL"):
                        fails += 1
                        if fails > 3:
                            continue
                    keys = ("oracle:", "split:", "golden pq2_0_dot_q8k.fma", "kernels:", "c abi smoke:", "panicked")
                    if any(k in l for k in keys) or "test result" in l or l.startswith("FAIL"):
                        lines.append(l[l.index("...") + 4:] if l.startswith("test ") and "..." in l else l)
        failed += not ok
        print(f"x86-emu-test: {cpu:11} {'PASS' if ok else 'FAIL'}  levels {levels}  ({time.time() - t0:.0f} s, log {log})")
        for l in lines:
            print(f"    {l}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
