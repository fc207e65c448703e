#!/usr/bin/env python3
"""The project's test command (README.md; .ci/run calls it with --require-all): installs what is
missing, runs the host test suite (every kernel level this CPU has, natively; the bindgen ABI check;
the C programs), rustfmt, clippy (also for Windows and macOS targets) and rustdoc (no warnings: no
broken links in the API docs), checks that the benchmarks and tools build, runs the tool tests, the
C programs built for Windows (MinGW-w64) under Wine, then the x86-64 levels this CPU lacks under an
emulator and the aarch64 build under qemu.

Every stage prints "== <stage>", then "-- <stage>: PASS (<seconds> s)"; a stage that cannot run says
"SKIP: <stage>: <reason>"; a failing stage prints "-- <stage>: FAIL (...)", the summary, and exits
1. The summary lists every stage with its time and which kernel levels ran natively and which
emulated. The full suite needs a Debian 12 x86-64 host (apt-get for what is missing); elsewhere the
stages that cannot run say so. This file uses the Python 3 standard library only; the Python stages
run in the project's own virtual environment (tools/requirements.txt, pinned; made in the cache
folder and reused while the file is unchanged).
"""

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True   # no __pycache__ beside the tools
import t2p_common as tc  # noqa: E402
import toolchain  # noqa: E402

OTHER_TARGETS = ("aarch64-pc-windows-msvc", "aarch64-apple-darwin", "x86_64-pc-windows-msvc")
HOST_LOG_LINES = re.compile(
    r"^(golden|oracle|split|kernels|ptq1_0 digits|c abi|this CPU|fork smoke|release smoke|distance)|test result|FAILED|panicked")
PY = sys.executable or "python3"   # the project's environment once its stage ran


class StageFail(Exception):
    """The running stage failed (the message says how)."""


# Below this much free space where the build writes, a failing stage is most likely the disk (a
# cross build of the tests writes about 1 GiB, the host tests about 2).
LOW_DISK = 3 << 30
ERROR_LINE = re.compile(r"error|FAIL|failed|panicked|No space left|Killed|cannot|not found", re.I)


def free_space_text():
    """Free space of the file systems the stages write to (the checkout's target/ and the temporary
    folder), as one line; the second value says whether any is below LOW_DISK."""
    parts, low = [], False
    for label, path in (("checkout", ROOT), ("temporary folder", tempfile.gettempdir())):
        try:
            free = shutil.disk_usage(path).free
        except OSError:
            continue
        low |= free < LOW_DISK
        parts.append(f"{label} {path}: {free / (1 << 30):.1f} GiB free")
    return "; ".join(parts), low


def error_lines(lines, keep=12):
    """The last `keep` lines of a failed command's output that look like its reason (or, when none
    does, its last lines), for the end of the log, which is what a truncated CI log still shows."""
    bad = [line.rstrip() for line in lines if ERROR_LINE.search(line) and not line.lstrip().startswith("test result: ok")]
    return (bad or [line.rstrip() for line in lines])[-keep:]


class Run:
    def __init__(self, require_all):
        self.require_all = require_all
        self.start = time.monotonic()
        self.summary = []          # (name, result, seconds)
        self.required_skips = []
        self.levels = {}           # "natively ...", "x86-64 under Bochs", "aarch64 under qemu" -> text

    def stage(self, name, body):
        """Runs body() as stage `name`; a StageFail or a failing command ends the whole run."""
        print(f"== {name}", flush=True)
        t0 = time.monotonic()
        try:
            body()
        except (StageFail, subprocess.CalledProcessError, toolchain.Missing, OSError) as e:
            sys.stdout.flush()   # the stage's own lines before its verdict
            t = int(time.monotonic() - t0)
            print(f"test-all: {e}", file=sys.stderr)
            print(f"-- {name}: FAIL ({t} s)", file=sys.stderr, flush=True)
            self.summary.append((name, "FAIL", t))
            self.print_summary(sys.stderr)
            # The reason again after the summary: a CI log cut in the middle still ends with it.
            print(f"test-all: {name} failed: {e}", file=sys.stderr)
            space, low = free_space_text()
            print(f"test-all: {space}" + (" (low: the likely cause)" if low else ""), file=sys.stderr)
            print(f"test-all: FAIL ({int(time.monotonic() - self.start)} s)", file=sys.stderr, flush=True)
            sys.exit(1)
        t = int(time.monotonic() - t0)
        print(f"-- {name}: PASS ({t} s)", flush=True)
        self.summary.append((name, "PASS", t))

    def skip(self, name, required, reason):
        """A stage that cannot run; `required`: CI must run it (--require-all fails the run)."""
        print(f"SKIP: {name}: {reason}", flush=True)
        if required:
            self.summary.append((name, "SKIP (required)", 0))
            self.required_skips.append(f"{name}: {reason}")
        else:
            self.summary.append((name, "SKIP", 0))

    def print_summary(self, out=sys.stdout):
        print("== summary", file=out)
        for name, result, t in self.summary:
            print("  %-58s %-16s %5s s" % (name, result, t), file=out)
        for what, text in self.levels.items():
            if text:
                print(f"  {what}: {text}", file=out)
        out.flush()


def sh(cmd, env=None, base_env=None, **kw):
    """Runs cmd in the checkout, its output on ours; a non-zero exit fails the stage. `env` is added
    to `base_env` (default: this process's environment)."""
    sys.stdout.flush()
    full_env = None if env is None and base_env is None else dict(base_env or os.environ, **(env or {}))
    subprocess.run(cmd, cwd=ROOT, env=full_env, check=True, **kw)


def tee(cmd, path):
    """Runs cmd, its output both on ours and into `path`; a non-zero exit fails the stage. Returns the
    output."""
    sys.stdout.flush()
    lines = []
    with open(path, "w") as f, subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                                 text=True, errors="replace") as p:
        for line in p.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            f.write(line)
            lines.append(line)
    if p.returncode != 0:
        why = "\n".join("    " + line for line in error_lines(lines))
        raise StageFail(f"{' '.join(cmd)} exited with status {p.returncode}; its last error lines:\n{why}")
    return "".join(lines)


def has(cmd):
    return subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0


def shell_script(path):
    """A file whose first line is a shell's #! line."""
    if not os.path.isfile(path):
        return False
    with open(path, "rb") as f:
        first = f.readline(200)
    return bool(re.match(rb"#!\s*\S*(/|\s)(ba|da|z|k)?sh\b", first))


def linux_x86_64():
    return sys.platform.startswith("linux") and platform.machine() == "x86_64"


def main():
    ap = argparse.ArgumentParser(
        prog="python3 tools/test-all.py",
        description="The project's tests, stage by stage (README.md, 'The two commands'); installs what is "
                    "missing on Debian 12.",
        epilog="Environment: GGML_T2P_GOLDEN_DIR (golden vectors; default tests/golden of this checkout), "
               "CI (=true: as --require-all).")
    ap.add_argument("--no-install", action="store_true",
                    help="fail instead of installing missing packages (apt-get, rustup targets)")
    ap.add_argument("--host-only", action="store_true",
                    help="skip the aarch64 qemu runs, the emulated x86 levels and the Windows build")
    ap.add_argument("--no-x86-emu", action="store_true", help="skip the x86-64 levels this CPU lacks (run under Bochs)")
    ap.add_argument("--no-windows", action="store_true",
                    help="skip the MinGW-w64 Windows build of the C programs run under Wine")
    ap.add_argument("--require-all", action="store_true",
                    help="fail when a required stage was skipped (rustfmt, clippy, the other targets' clippy, the "
                         "Windows build under Wine, the emulated x86 levels, qemu); on by default when CI=true")
    args = ap.parse_args()
    install = not args.no_install
    qemu = not args.host_only
    x86emu = not (args.host_only or args.no_x86_emu)
    windows = not (args.host_only or args.no_windows)
    run = Run(args.require_all or os.environ.get("CI") == "true")
    os.makedirs(os.path.join(ROOT, "target"), exist_ok=True)

    def toolchain_stage():
        space, low = free_space_text()
        print(f"test-all: {space}" + (" (low: builds may fail)" if low else ""))
        if sys.platform.startswith("linux") and shutil.which("apt-get"):
            toolchain.ensure_host(install)
            toolchain.ensure_venv(install)
            if qemu:
                toolchain.ensure_aarch64(install)
        else:
            missing = [t for t in ("cargo", "cc", "cmake") if not shutil.which(t)]
            if missing:
                raise StageFail(f"missing {', '.join(missing)} (installing is for Debian hosts; install them yourself)")
    run.stage("toolchain (install what is missing)", toolchain_stage)

    # Every Python stage runs in the project's own environment (python3 -m venv without the system's
    # site packages, tools/requirements.txt pinned), so what this machine happens to have installed
    # cannot hide a missing requirement.
    def python_env():
        global PY
        try:
            PY = tc.project_python(install, "test-all")
        except RuntimeError as e:
            raise StageFail(str(e)) from None
        ver = subprocess.run([PY, "-c", "import sys, numpy, gguf; print(sys.version.split()[0], numpy.__version__, "
                                        "gguf.__name__)"], capture_output=True, text=True, env=tc.clean_env())
        if ver.returncode != 0:
            raise StageFail(f"the environment {PY} cannot import numpy and gguf:\n{ver.stderr}")
        print(f"test-all: Python stages run in {PY} (Python, numpy: {ver.stdout.strip()})")
    run.stage("Python environment (venv, tools/requirements.txt)", python_env)

    try:
        rustc_v = " ".join(subprocess.run(["rustc", "-V"], capture_output=True, text=True).stdout.split()[:2])
    except OSError:
        rustc_v = "rustc not on PATH"

    def host_tests():
        log = os.path.join(ROOT, "target", "host-test.log")
        sys.stdout.flush()
        with open(log, "w") as f:
            status = subprocess.run(["cargo", "test", "--features", "abi-check", "--", "--nocapture"], cwd=ROOT,
                                    stdout=f, stderr=subprocess.STDOUT).returncode
        with open(log, errors="replace") as f:
            text = f.read().splitlines()
        for line in text:
            if HOST_LOG_LINES.search(line):
                print(line)
        if status != 0:
            print("\n".join(text[-60:]), file=sys.stderr)
            why = "\n".join("    " + line for line in error_lines(text))
            raise StageFail(f"host tests FAILED (full log: {log}); the last error lines:\n{why}")
        # the levels the suite ran natively, from the oracle's summary line ("X16/avx2", ...)
        oracle = next((line for line in text if line.startswith("oracle:")), "")
        levels = []
        for m in re.findall(r'"[^"]*/([^"/]*)"', oracle):
            if m not in levels:
                levels.append(m)
        if not levels:
            raise StageFail("the oracle's summary line names no kernel level (full log: " + log + ")")
        run.levels["kernel levels natively (host cargo test, this CPU)"] = " ".join(levels)
        print(f"test-all: kernel levels run natively: {' '.join(levels)}")
    run.stage(f"host: cargo test --features abi-check ({rustc_v})", host_tests)

    if has(["cargo", "fmt", "--version"]):
        run.stage("host: rustfmt", lambda: sh(["cargo", "fmt", "--check"]))
    else:
        run.skip("host: rustfmt", True, "cargo fmt is not installed (rustup component add rustfmt)")
    clippy = has(["cargo", "clippy", "--version"])
    if clippy:
        run.stage("host: clippy --all-targets --features abi-check",
                  lambda: sh(["cargo", "clippy", "--quiet", "--all-targets", "--features", "abi-check", "--", "-D", "warnings"]))
    else:
        run.skip("host: clippy", True, "cargo clippy is not installed (rustup component add clippy)")
    # the API docs, private items included, build without a warning (an intra-doc link that names
    # nothing, a bad code block): rustdoc comes with every toolchain that has cargo
    run.stage("host: rustdoc --document-private-items (-D warnings)",
              lambda: sh(["cargo", "doc", "--quiet", "--no-deps", "--document-private-items"],
                         env={"RUSTDOCFLAGS": "-D warnings"}))

    # the Windows and macOS code paths compile and pass clippy (no linking)
    for t in OTHER_TARGETS:
        if not clippy:
            run.skip(f"clippy --target {t}", True, "cargo clippy is not installed")
            continue
        if not shutil.which("rustup"):
            run.skip(f"clippy --target {t}", True, f"no rustup to add the Rust std for {t}")
            continue
        installed = subprocess.run(["rustup", "target", "list", "--installed"], capture_output=True, text=True).stdout.split()
        if t not in installed:
            added = False
            if install:
                try:
                    added = subprocess.run(["rustup", "target", "add", t], capture_output=True, timeout=300).returncode == 0
                except subprocess.TimeoutExpired:
                    added = False
            if not added:
                why = "rustup target add failed" if install else "--no-install"
                run.skip(f"clippy --target {t}", True, f"no Rust std for {t} ({why})")
                continue
        run.stage(f"clippy --target {t} --lib",
                  lambda t=t: sh(["cargo", "clippy", "--quiet", "--target", t, "--lib", "--", "-D", "warnings"]))

    def benches_and_tools():
        if x86emu and linux_x86_64():
            # built as tools/x86-emu-test.py builds its static test binaries (same folder, target,
            # flags and release settings), so that stage reuses the crate and its dependencies
            # instead of compiling them a further time
            sh(["cargo", "bench", "--no-run", "--quiet", "--target", "x86_64-unknown-linux-gnu"],
               env={"CARGO_TARGET_DIR": os.path.join(ROOT, "target", "static"),
                    "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS": "-C target-feature=+crt-static"})
        else:
            sh(["cargo", "bench", "--no-run", "--quiet"])
        files = sorted(os.listdir(HERE))
        tools = [f for f in files if f.endswith(".py")]
        for t in tools:
            p = subprocess.run([PY, os.path.join(HERE, t), "--help"], cwd=ROOT, stdout=subprocess.DEVNULL,
                               env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
            if p.returncode != 0:
                raise StageFail(f"python3 tools/{t} --help failed")
        shell = [f for f in files if f.endswith((".sh", ".bash")) or shell_script(os.path.join(HERE, f))]
        if shell:
            raise StageFail(f"tools must be Python (they run on Linux, macOS and Windows): {', '.join(shell)}")
        print(f"test-all: benches build; {len(tools)} tools answer --help")
    run.stage("host: benches build, tools answer --help", benches_and_tools)

    # the Python tests run without PYTHONPATH and PYTHONHOME (tc.clean_env): a venv honours them,
    # and they would bring back packages the pins leave out
    py_env = {"PYTHONDONTWRITEBYTECODE": "1"}

    def tool_tests():
        for t in ("test_ppl_check.py", "test_tools.py", "test_profile.py", "test_peers.py", "test_rpc_check.py"):
            sh([PY, os.path.join("tests", "python", t)], env=py_env, base_env=tc.clean_env())
    run.stage("ppl-check verdict, tools, profile, peers and the RPC check (tests/python/test_ppl_check.py, test_tools.py, "
              "test_profile.py, test_peers.py, test_rpc_check.py)", tool_tests)

    def q2kt_tests():
        for t in ("test_q2kt.py", "test_synthetic.py", "test_qwen35_model.py", "test_ptq1_0_encoder.py"):
            sh([PY, os.path.join("tests", "python", t)], env=py_env, base_env=tc.clean_env())
    run.stage("Q2_KT converter, synthetic models, the small qwen35 model through the plugin at every level, "
              "PTQ1_0 encoder (tests/python/test_q2kt.py, test_synthetic.py, test_qwen35_model.py, "
              "test_ptq1_0_encoder.py: numpy and gguf from tools/requirements.txt)", q2kt_tests)

    def cmake_fragment():
        # the real MinGW-w64 compilers for its one real configure (installed here, so that every run
        # on a Debian host checks it, not only runs after the Windows stage installed them)
        if sys.platform.startswith("linux") and shutil.which("apt-get"):
            try:
                toolchain.ensure_mingw_x64(install)
            except toolchain.Missing as e:
                print(f"test-all: {e}; the real MinGW-w64 configure will be skipped")
        sh(["cmake", f"-DWORK={os.path.join(ROOT, 'target', 'cmake-tests')}", "-P", "ggml-glue/cmake-tests/run.cmake"])
    run.stage("CMake fragment under mock Windows (MSVC, clang-cl) and macOS toolchains", cmake_fragment)

    win = "Windows: MinGW-w64 x86-64 build run under Wine"
    if not windows:
        run.skip(win, True, "--no-windows or --host-only given")
    elif not linux_x86_64():
        run.skip(win, True, f"not an x86-64 Linux host ({sys.platform} {platform.machine()})")
    else:
        run.stage("Windows: MinGW-w64 x86-64 build of the C programs, run under Wine (tools/windows-test.py)",
                  lambda: sh([PY, "tools/windows-test.py"] + ([] if install else ["--no-install"])))

    emu = "x86-64 levels this CPU lacks, under Bochs"
    if not x86emu:
        run.skip(emu, True, "--no-x86-emu or --host-only given")
    elif not linux_x86_64():
        run.skip(emu, True, "not an x86-64 Linux host")
    else:
        def bochs():
            out = tee([PY, "tools/x86-emu-test.py", "--self-test"], os.path.join(ROOT, "target", "x86-emu-test.out"))
            found = re.findall(r"^x86-emu-test: emulated: (.*)$", out, re.M)
            run.levels["x86-64 under Bochs"] = found[-1] if found else ""
        run.stage(emu + " (and the AVX2-only decline path)", bochs)

    if not qemu:
        run.skip("aarch64 under qemu", True, "--host-only given")
    elif not sys.platform.startswith("linux"):
        run.skip("aarch64 under qemu", True, "not a Linux host (Debian's aarch64 cross toolchain and qemu-user)")
    else:
        def aarch64():
            out = tee([PY, "tools/qemu-test.py", "--no-install"], os.path.join(ROOT, "target", "qemu-test.out"))
            found = re.findall(r"^qemu -cpu (\S+) *PASS.*best kernel (\S+)", out, re.M)
            run.levels["aarch64 under qemu"] = ", ".join(f"{c} (best {k})" for c, k in found)
        run.stage("aarch64 under qemu", aarch64)

    run.print_summary()
    t = int(time.monotonic() - run.start)
    if run.required_skips:
        if run.require_all:
            for s in run.required_skips:
                print(f"test-all: a required stage was skipped: {s}", file=sys.stderr)
            print(f"test-all: FAIL ({t} s; --require-all or CI=true)", file=sys.stderr)
            sys.exit(1)
        print(f"test-all: PASS with {len(run.required_skips)} required stage(s) skipped ({t} s; CI would fail)")
    else:
        print(f"test-all: PASS ({t} s)")


if __name__ == "__main__":
    main()
