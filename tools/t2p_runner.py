#!/usr/bin/env python3
"""Shared pieces of the three runners that run the crate's tests and C programs under a wrapper:
tools/qemu-test.py (aarch64 programs under qemu-aarch64-static, for several -cpu models),
tools/x86-emu-test.py (static x86-64 programs under Bochs, through tools/x86-emu.py) and
tools/windows-test.py (MinGW-w64 programs under Wine). Python 3 standard library only.

Not a command (`python3 tools/t2p_runner.py --help` prints this). It builds a target's cargo test
executables and reads which ones cargo built, with the staticlib of that same build, from cargo's
JSON messages (build_tests, cargo_test_artifacts); makes the command lines that compile and link
the C programs of tests/ against that library (c_command); runs a program, under its wrapper, with
a timeout (run), also into a per-set log (run_logged); and reads libtest's "test result" totals
and the summary lines a runner shows from the output (test_totals, summary_lines, verdict).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INCLUDE = os.path.join(ROOT, "include")


def run(cmd, env=None, timeout=None, cwd=ROOT, merge=False):
    """Runs CMD (a list) in CWD with ENV (None: this process's), stdin empty, for at most TIMEOUT
    seconds (None: no limit). Returns (exit status, stdout, stderr) as text (UTF-8, bad bytes
    replaced, CRLF turned into LF); MERGE true: stderr goes into stdout (in order) and stderr is ''.
    A program that is not found gives status 127; one that times out is killed and gives 124, with
    what it printed until then."""
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT if merge else subprocess.PIPE, timeout=timeout)
    except FileNotFoundError:
        return 127, "", f"{cmd[0]}: not found"
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode("utf-8", "replace")
        return 124, out.replace("\r\n", "\n"), f"timed out after {timeout} s"
    dec = lambda b: (b or b"").decode("utf-8", "replace").replace("\r\n", "\n")  # noqa: E731
    return p.returncode, dec(p.stdout), dec(p.stderr)


def run_logged(log, header, cmd, env=None, timeout=None):
    """Writes '=== HEADER' to the open log file LOG, runs CMD (run, stderr merged into stdout) and
    appends its output. Returns (exit status, output)."""
    log.write(f"=== {header}\n")
    log.flush()
    rc, out, err = run(cmd, env=env, timeout=timeout, merge=True)
    log.write(out + (err + "\n" if err else ""))
    log.flush()
    return rc, out + err


def cargo_test_artifacts(json_lines, package="ggml-t2p"):
    """What `cargo test --no-run --message-format=json` built, from its stdout: ([(test target name,
    executable)], [file names of `package`'s staticlib artifacts]), in cargo's order. Lines that are
    not JSON (cargo's own) are skipped."""
    tests, staticlibs = [], []
    for line in json_lines.splitlines():
        try:
            m = json.loads(line)
        except ValueError:
            continue
        if m.get("reason") != "compiler-artifact":
            continue
        if m.get("profile", {}).get("test") and m.get("executable"):
            tests.append((m["target"]["name"], m["executable"]))
        elif package in m.get("package_id", "") and "staticlib" in m["target"].get("kind", []):
            staticlibs += m.get("filenames", [])
    return tests, staticlibs


def build_tests(tool, target, env, cargo_args=(), tests=()):
    """Builds the crate's test executables for TARGET (`cargo test --target TARGET CARGO_ARGS --no-run`,
    only the test targets TESTS when given) in ROOT with ENV (its CARGO_TARGET_DIR, else target/),
    and the staticlib of the same build: a separate `cargo build --lib` would compile the crate
    again, with other dependency features; it runs only when cargo names no staticlib.
    Returns ([(test target name, executable)] in cargo's order, path of libggml_t2p.a). A build
    that fails or builds nothing prints 'TOOL: the test build failed ...' and cargo's own output on
    stderr and exits with status 1 (a target that failed to build: none of those that did runs);
    a failing `cargo build --lib` shows its output and raises CalledProcessError."""
    cmd = ["cargo", "test", "--target", target, *cargo_args, "--no-run"] + [a for t in tests for a in ("--test", t)]
    rc, out, _ = run(cmd + ["--message-format=json"], env=env)
    built, staticlibs = cargo_test_artifacts(out)
    if rc != 0 or not built:
        print(f"{tool}: the test build failed or built nothing; its output follows", file=sys.stderr, flush=True)
        subprocess.run(cmd, cwd=ROOT, env=env, stdout=sys.stderr)
        sys.exit(1)
    lib = next((f for f in reversed(staticlibs) if f.endswith(".a")), "")
    if not lib:
        profile = "release" if "--release" in cargo_args else "debug"
        lib = os.path.join(env.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target"), target, profile,
                           "libggml_t2p.a")
        cmd = ["cargo", "build", "--lib", "--target", target, *cargo_args]
        if run(cmd, env=env)[0] != 0:
            subprocess.run(cmd, cwd=ROOT, env=env, check=True)
    return built, lib


def c_command(cc, src, lib, exe, flags=(), libs=("pthread", "dl", "m"), static=True):
    """The command line that compiles the C program SRC with CC (-O2 -std=c11 -Wall -Werror, the
    crate's include/ folder, then FLAGS) and links it with LIB and the system libraries LIBS into EXE,
    statically (-static) unless STATIC is false."""
    return ([cc, "-O2", "-std=c11", "-Wall", "-Werror", "-I", INCLUDE, *flags, src, lib]
            + ["-l" + x for x in libs] + (["-static"] if static else []) + ["-o", exe])


def link_c(tool, cc, name, lib, exe, flags=()):
    """Links tests/c/NAME.c statically with CC against LIB into EXE (c_command). The compiler's output
    is shown only when it fails (glibc warns that a static binary's getaddrinfo/getpwuid_r need its
    shared libraries at run time; the library never calls them): then 'TOOL: linking NAME.c failed'
    and the output go to stderr and the process exits with status 1. Returns EXE."""
    rc, out, err = run(c_command(cc, os.path.join(ROOT, "tests", "c", f"{name}.c"), lib, exe, flags))
    if rc != 0:
        sys.exit(f"{tool}: linking {name}.c failed:\n{out}{err}")
    return exe


_TOTALS = re.compile(r"test result: [a-zA-Z]+\. (\d+) passed; (\d+) failed")


def test_totals(text):
    """(passed, failed): the sums over libtest's 'test result: ok. N passed; M failed' lines."""
    found = _TOTALS.findall(text)
    return sum(int(p) for p, _ in found), sum(int(f) for _, f in found)


def summary_lines(text, pattern):
    """The lines of TEXT that the regular expression PATTERN matches at their start, in order."""
    pat = re.compile(pattern)
    return [line for line in text.splitlines() if pat.match(line)]


def verdict(ok):
    """'PASS' or 'FAIL'."""
    return "PASS" if ok else "FAIL"


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0)
    sys.exit("t2p_runner.py is a module of the runners in tools/, not a command")
