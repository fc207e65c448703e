#!/usr/bin/env python3
"""Cross-compiles the test suite for aarch64-unknown-linux-gnu (statically) and runs it under
qemu-aarch64-static for several CPU models, plus the C programs tests/c/abi_smoke.c and
tests/c/fork_smoke.c (load, fork, load) linked statically against the aarch64 libggml_t2p.a.
Installs what is missing first (Debian; tools/toolchain.py; docs/building.md: the aarch64 cross build).

The first two tests of tests/rust/c_abi.rs, which build those programs on the host, cannot run there:
they are left out by name (reported as SKIP) and the static programs run instead; the third,
release_smoke (the source release), is left out too (qemu-user does not model Rss), and so is
amx_level_hygiene (amx_smoke is x86-64 Linux only). fork_smoke gets a 30-second grace for the thread
count (qemu-user lists a joined thread for a while). Prints one line per CPU model and exits non-zero
if any run fails. Logs: target/qemu-logs/<cpu>.log. Linux hosts (Debian's cross toolchain).

Environment: GGML_T2P_GOLDEN_DIR (golden vectors; default tests/golden), QEMU_TEST_ARGS (extra
arguments passed to every test binary, e.g. a test-name filter; split as a shell would).
"""

import argparse
import os
import re
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True   # no __pycache__ beside the tools
import t2p_runner as tr  # noqa: E402
import toolchain  # noqa: E402

TARGET = "aarch64-unknown-linux-gnu"
CPUS = "max neoverse-n1 cortex-a76 cortex-a72"
# tests/rust/c_abi.rs builds the C programs with the host's compiler from inside the test: not under
# qemu. They are skipped by name here (and fail if run) and the static programs run instead;
# release_smoke (the source release) is not run under qemu-user at all: there MAP_POPULATE
# left Rss at 0 and madvise(MADV_RANDOM) did not split the mapping, so its Rss checks fail (seen
# with Debian's qemu-aarch64-static); it is Linux memory management, not aarch64 code.
C_TESTS_SKIP = ["--skip", "c_program_links_and_runs", "--skip", "repack_survives_fork",
                "--skip", "source_release_drops_only_file_pages", "--skip", "amx_level_hygiene"]
SUMMARY_LINES = r"^(golden|oracle|c abi|this CPU|kernels|ptq1_0 digits|split|fork smoke)"


def main():
    ap = argparse.ArgumentParser(
        prog="python3 tools/qemu-test.py",
        description="Runs every test binary of the crate, built for aarch64 and linked statically, under "
                    "`qemu-aarch64-static -cpu <model>` for each CPU model, and the C programs tests/c/abi_smoke.c "
                    "and tests/c/fork_smoke.c linked statically against the aarch64 libggml_t2p.a. Logs: "
                    "target/qemu-logs/<cpu>.log.",
        epilog="Environment: GGML_T2P_GOLDEN_DIR (golden vectors; default tests/golden), QEMU_TEST_ARGS (extra "
               "arguments passed to every test binary, e.g. a test-name filter).")
    ap.add_argument("--cpus", default=CPUS,
                    help=f'qemu CPU models, space- or comma-separated (default: "{CPUS}"); max: dotprod + i8mm; '
                         "neoverse-n1, cortex-a76: dotprod only; cortex-a72: neither (the library must decline: "
                         'no kernel level but "ref")')
    ap.add_argument("--no-install", action="store_true", help="do not apt-get missing packages; fail instead")
    ap.add_argument("--release", action="store_true", help="build the tests with the release profile")
    args = ap.parse_args()
    cpus = args.cpus.replace(",", " ").split()
    if not cpus:
        sys.exit("qemu-test: --cpus names no CPU model")
    if not sys.platform.startswith("linux"):
        sys.exit(f"qemu-test: needs a Linux host (Debian's aarch64 cross toolchain and qemu-user), not {sys.platform}")
    try:
        toolchain.ensure_aarch64(not args.no_install)
    except toolchain.Missing as e:
        sys.exit(f"qemu-test: {e}")

    profile_args = ["--release"] if args.release else []
    env = dict(os.environ)
    env.update({
        "RUSTC": "/usr/bin/rustc",
        "RUSTDOC": "/usr/bin/rustdoc",
        "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER": "aarch64-linux-gnu-gcc",
        "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUSTFLAGS": "-C target-feature=+crt-static",
        "CC_aarch64_unknown_linux_gnu": "aarch64-linux-gnu-gcc",
        "CARGO_TARGET_DIR": os.path.join(ROOT, "target", "cross"),
    })
    target_dir = env["CARGO_TARGET_DIR"]
    rustc_v = subprocess.run(["/usr/bin/rustc", "-V"], capture_output=True, text=True).stdout.strip()
    print(f"qemu-test: building tests for {TARGET} ({rustc_v})", flush=True)
    tests, lib = tr.build_tests("qemu-test", TARGET, env, profile_args)
    bins = [path for _, path in tests]
    cc = "aarch64-linux-gnu-gcc"
    smoke = tr.link_c("qemu-test", cc, "abi_smoke", lib, os.path.join(target_dir, "abi_smoke-aarch64"))
    fork = tr.link_c("qemu-test", cc, "fork_smoke", lib, os.path.join(target_dir, "fork_smoke-aarch64"),
                     ["-D_POSIX_C_SOURCE=200809L"])

    extra = shlex.split(os.environ.get("QEMU_TEST_ARGS", ""))
    logs = os.path.join(ROOT, "target", "qemu-logs")
    os.makedirs(logs, exist_ok=True)
    failed_any = False
    for cpu in cpus:
        log_path = os.path.join(logs, f"{cpu}.log")
        ok = True
        start = time.monotonic()
        text = ""
        with open(log_path, "w") as log:
            for b in bins + [smoke, fork]:
                if b == smoke:
                    bargs = []
                elif b == fork:
                    bargs = ["1", "120", "30000"]   # layout T2P, child timeout 120 s, thread-count grace 30 s
                else:
                    bargs = ["--nocapture", "--test-threads=2"] + C_TESTS_SKIP + extra
                rc, out = tr.run_logged(log, f"{os.path.basename(b)} {' '.join(bargs)}",
                                        ["qemu-aarch64-static", "-cpu", cpu, b] + bargs)
                text += out
                ok &= rc == 0
        passed, failed = tr.test_totals(text)
        features = next((m.group(0) for line in text.splitlines()
                         if (m := re.search(r"cpu features 0x[0-9a-f]+, best kernel [^,]*$", line))), "")
        failed_any |= not ok
        print("qemu -cpu %-12s %s  %d tests passed, %d failed, %s  (%ds)"
              % (cpu, tr.verdict(ok), passed, failed, features, time.monotonic() - start))
        for line in tr.summary_lines(text, SUMMARY_LINES):
            print("    " + line)
        print("    SKIP: tests/rust/c_abi.rs c_program_links_and_runs, repack_survives_fork (host-built C programs; "
              "abi_smoke and fork_smoke ran above as static aarch64 programs)")
        print("    SKIP: tests/rust/c_abi.rs source_release_drops_only_file_pages (release_smoke: qemu-user does not "
              "model Rss; it runs natively)")
        print("    SKIP: tests/rust/c_abi.rs amx_level_hygiene (amx_smoke: x86-64 Linux only; it runs natively and under "
              "Bochs)")
        if not ok:
            bad = [line for line in text.splitlines() if re.search(r"panicked|FAIL|failed|error", line)]
            for line in bad[:20]:
                print("    ! " + line)
        sys.stdout.flush()
    sys.exit(1 if failed_any else 0)

if __name__ == "__main__":
    main()
