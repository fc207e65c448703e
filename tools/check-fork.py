#!/usr/bin/env python3
"""Check patches/ggml-t2p.patch against a llama.cpp (or ggml) tree you already have.

Steps, each reported with its time:
  apply      git apply the patch (or find it applied already); --no-apply skips this
  configure  cmake with GGML_CPU_T2P=ON, static libraries, no llama.cpp tools/tests/examples
  build      only the ggml, ggml-base and ggml-cpu targets (cargo builds libggml_t2p on the way)
  test       (--test) the ggml-level test (ggml-glue/tests) against that build, once per
             GGML_T2P_KERNEL setting (--kernels, default: unset and ref), then once more for the
             first of them with GGML_T2P_EMBED=0 (GGML_T2P_EMBED from the caller's environment is
             not passed on). PASS: the plugin ran and
             every check passed; DECLINED: the plugin declined as expected (a ggml without PQ2_0,
             or a CPU without a SIMD level) and the checks that remain passed; FAIL otherwise.

It never downloads anything: --llama names a directory you have (a git checkout or a plain tree,
for instance one exported with `git archive`). The tree is modified only by `git apply`.
Exit status: 0 when every step that ran succeeded, 1 otherwise, 2 for usage errors.

Examples:
  tools/check-fork.py --llama ~/src/llama.cpp --test
  tools/check-fork.py --llama ~/src/ggml --build-dir /tmp/ggml-t2p-build --test   # upstream ggml
  tools/check-fork.py --llama ~/src/llama.cpp --json result.json -- -DGGML_NATIVE=OFF
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.dont_write_bytecode = True    # no __pycache__ beside the tools
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import t2p_common as tc  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent  # the ggml-t2p checkout
DEFAULT_PATCH = Path(tc.PATCH)
IS_WINDOWS = platform.system() == "Windows"

# llama.cpp options that keep the configure to ggml (unknown ones only draw a CMake warning).
LLAMA_OFF = [
    "LLAMA_BUILD_TESTS", "LLAMA_BUILD_EXAMPLES", "LLAMA_BUILD_TOOLS", "LLAMA_BUILD_SERVER",
    "LLAMA_BUILD_APP", "LLAMA_BUILD_COMMON", "LLAMA_CURL", "LLAMA_OPENSSL",
]
GGML_OFF = ["GGML_BUILD_TESTS", "GGML_BUILD_EXAMPLES"]


def log(msg: str) -> None:
    print(msg, flush=True)


class Step:
    def __init__(self, name: str):
        self.name = name
        self.status = "skipped"
        self.detail = ""
        self.seconds = 0.0
        self.log_file = ""

    def as_dict(self) -> dict:
        return {"status": self.status, "detail": self.detail, "seconds": round(self.seconds, 1), "log": self.log_file}


def run(cmd: list[str], cwd: Path | None, log_path: Path | None, env: dict | None = None,
        timeout: float | None = None) -> tuple[int, str]:
    """Runs cmd, returns (exit status, combined output); the output also goes to log_path."""
    shown = " ".join(str(c) for c in cmd)
    try:
        p = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, errors="replace", timeout=timeout)
        rc, out = p.returncode, p.stdout
    except subprocess.TimeoutExpired as e:
        out = e.stdout if isinstance(e.stdout, str) else (e.stdout or b"").decode(errors="replace")
        rc, out = 124, out + f"\n[check-fork] timed out after {timeout} s\n"
    except OSError as e:
        rc, out = 127, f"[check-fork] cannot run {cmd[0]}: {e}\n"
    if log_path is not None:
        with open(log_path, "a", encoding="utf-8") as f:
            f.write(f"$ {shown}\n{out}\n[exit {rc}]\n\n")
    return rc, out


def tail(text: str, n: int = 12) -> str:
    return "\n".join(text.rstrip().splitlines()[-n:])


def find_ggml_dir(tree: Path, directory: str | None) -> Path | None:
    """The directory holding ggml's include/ and src/ggml-cpu/ inside the tree."""
    candidates = [tree / directory] if directory else [tree / "ggml", tree]
    for c in candidates:
        if (c / "include" / "ggml.h").is_file() and (c / "src" / "ggml-cpu").is_dir():
            return c
    return None


def step_apply(st: Step, tree: Path, rel: str, patch: Path, git: str, logf: Path) -> None:
    """git apply the patch in TREE (t2p_common.apply_patch; every git command goes to the log LOGF),
    or find it applied already; fills ST."""
    # The patch names ggml/src/...; -p2 drops "a/ggml", --directory puts ggml's place back.
    args = ["-p2"] + ([f"--directory={rel}"] if rel not in ("", ".") else [])
    t0 = time.monotonic()
    state, _, out = tc.apply_patch(tree, patch, args, git, run=lambda cmd, cwd, env: run(cmd, cwd, logf, env))
    st.status, st.detail = ("ok", state) if state in ("applied", "already applied") else ("FAIL", tail(out))
    st.seconds = time.monotonic() - t0


def default_generator() -> list[str]:
    if os.environ.get("CMAKE_GENERATOR"):
        return []
    if not IS_WINDOWS and shutil.which("ninja"):
        return ["-G", "Ninja"]
    return []  # CMake's default: Unix Makefiles, or the newest Visual Studio on Windows


def cache_value(build: Path, name: str) -> str | None:
    cache = build / "CMakeCache.txt"
    if not cache.is_file():
        return None
    for line in cache.read_text(errors="replace").splitlines():
        m = re.match(rf"^{re.escape(name)}:[A-Z]+=(.*)$", line)
        if m:
            return m.group(1)
    return None


def step_configure(st: Step, tree: Path, is_llama: bool, build: Path, args, logf: Path) -> None:
    cmd = [args.cmake, "-S", tree, "-B", build] + default_generator() + [
        "-DGGML_CPU_T2P=ON", f"-DGGML_CPU_T2P_DIR={ROOT}", "-DBUILD_SHARED_LIBS=OFF",
        "-DCMAKE_BUILD_TYPE=Release",
    ]
    cmd += [f"-D{o}=OFF" for o in (LLAMA_OFF if is_llama else GGML_OFF)]
    cmd += args.cmake_args
    t0 = time.monotonic()
    rc, out = run(cmd, None, logf, timeout=args.timeout)
    st.seconds = time.monotonic() - t0
    m = re.search(r"ggml-t2p: .* -> (\S+) \(([^)]*)\)", out)
    if rc == 0:
        st.status = "ok"
        st.detail = f"probes: {m.group(2)}" if m else "ggml-t2p.cmake not included?"
        if not m:
            st.status = "FAIL"
    else:
        st.status, st.detail = "FAIL", tail(out)


def step_build(st: Step, build: Path, args, logf: Path) -> None:
    cmd = [args.cmake, "--build", build, "--config", "Release", "--target", "ggml", "ggml-base", "ggml-cpu"]
    if args.jobs:
        cmd += ["--parallel", str(args.jobs)]
    t0 = time.monotonic()
    rc, out = run(cmd, None, logf, timeout=args.timeout)
    st.seconds = time.monotonic() - t0
    st.status, st.detail = ("ok", "ggml, ggml-base, ggml-cpu") if rc == 0 else ("FAIL", tail(out))


def find_exe(d: Path, name: str) -> Path | None:
    exe = name + (".exe" if IS_WINDOWS else "")
    for p in [d / exe, d / "Release" / exe]:
        if p.is_file():
            return p
    found = list(d.rglob(exe))
    return found[0] if found else None


def step_test(st: Step, tree: Path, build: Path, args, logf: Path) -> None:
    tdir = build / "ggml-t2p-glue-test"
    cmd = [args.cmake, "-S", ROOT / "ggml-glue" / "tests", "-B", tdir] + default_generator() + [
        f"-DLLAMA_CPP_DIR={tree}", f"-DLLAMA_BUILD_DIR={build}", "-DCMAKE_BUILD_TYPE=Release"]
    # Same compilers as the build under test.
    for var in ("CMAKE_C_COMPILER", "CMAKE_CXX_COMPILER", "CMAKE_TOOLCHAIN_FILE", "CMAKE_OSX_ARCHITECTURES",
                "CMAKE_MSVC_RUNTIME_LIBRARY", "GGML_CPU_T2P_RUST_TARGET"):
        v = cache_value(build, var)
        if v:
            cmd.append(f"-D{var}={v}")
    gen = cache_value(build, "CMAKE_GENERATOR_PLATFORM")
    if gen:
        cmd += ["-A", gen]
    cmd += args.test_cmake_args
    t0 = time.monotonic()
    rc, out = run(cmd, None, logf, timeout=args.timeout)
    if rc == 0:
        rc, out = run([args.cmake, "--build", tdir, "--config", "Release"], None, logf, timeout=args.timeout)
    if rc != 0:
        st.status, st.detail, st.seconds = "FAIL", "test build: " + tail(out), time.monotonic() - t0
        return
    exe = find_exe(tdir, "test-t2p-mul-mat")
    if exe is None:
        st.status, st.detail, st.seconds = "FAIL", "test-t2p-mul-mat not built", time.monotonic() - t0
        return
    results = []
    statuses = []
    # every level asked for with the embedding's GET_ROWS on (the default), then the first one with
    # GGML_T2P_EMBED=0 (the test then checks that CPU_T2P declines GET_ROWS)
    runs = [(k, None) for k in args.kernels] + [(args.kernels[0], "0")]
    for k, embed in runs:
        env = dict(os.environ)
        env.pop("GGML_T2P_KERNEL", None)
        env.pop("GGML_T2P_EMBED", None)
        label = "auto" if k in ("", "auto", "unset") else k
        if label != "auto":
            env["GGML_T2P_KERNEL"] = k
        if embed is not None:
            env["GGML_T2P_EMBED"] = embed
            label += " EMBED=0"
        cmd = (args.runner.split() if args.runner else []) + [str(exe)] + (["--quick"] if args.quick else [])
        t1 = time.monotonic()
        rc, out = run(cmd, None, logf, env=env, timeout=args.timeout)
        secs = time.monotonic() - t1
        kernel = re.search(r"best kernel (\S+);", out)
        present = "CPU_T2P present" in out
        declined_ok = re.search(r"CPU_T2P absent: the plugin declined \(expected\)", out) is not None
        final = re.findall(r"^(PASS|FAIL): .*$", out, re.M)
        if rc == 0 and final and final[-1] == "PASS" and present:
            status = "PASS"
        elif rc == 0 and final and final[-1] == "PASS" and declined_ok:
            status = "DECLINED"
        else:
            status = "FAIL"
        statuses.append(status)
        line = re.findall(r"^(?:PASS|FAIL): .*$", out, re.M)
        plugin = re.findall(r"^ggml-t2p: ((?:enabled|declining|disabled).*)$", out, re.M)
        results.append({"kernel": label, "status": status, "seconds": round(secs, 1),
                        "best_kernel": kernel.group(1) if kernel else None,
                        "plugin": plugin[0] if plugin else None,
                        "summary": line[-1] if line else tail(out, 3)})
    st.seconds = time.monotonic() - t0
    st.status = "FAIL" if "FAIL" in statuses else ("PASS" if all(s == "PASS" for s in statuses) else "DECLINED")
    st.detail = "; ".join(f"{r['kernel']}: {r['status']} ({r['seconds']} s)" for r in results)
    st.results = results  # type: ignore[attr-defined]


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="\n\n".join(__doc__.split("\n\n")[1:]),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama", required=True, type=Path, metavar="PATH",
                    help="llama.cpp tree (ggml/ inside) or upstream ggml tree; never downloaded")
    ap.add_argument("--directory", metavar="DIR",
                    help="where ggml lives inside PATH (default: ggml/ if present, else PATH itself)")
    ap.add_argument("--build-dir", type=Path, metavar="DIR",
                    help="build directory (default: PATH/build-ggml-t2p)")
    ap.add_argument("--patch", type=Path, default=DEFAULT_PATCH, help=f"patch to apply (default: {DEFAULT_PATCH})")
    ap.add_argument("--no-apply", action="store_true", help="the tree is patched already: skip git apply")
    ap.add_argument("--apply-only", action="store_true", help="stop after apply")
    ap.add_argument("--no-build", action="store_true", help="stop after configure")
    ap.add_argument("--test", action="store_true", help="build and run the ggml-level test (ggml-glue/tests)")
    ap.add_argument("--kernels", default="auto,ref",
                    help="GGML_T2P_KERNEL values for --test, comma-separated; auto = unset (default: auto,ref)")
    ap.add_argument("--quick", action="store_true", help="pass --quick to the test (fewer batch widths)")
    ap.add_argument("--runner", default="", help="prefix for running the test, e.g. 'qemu-aarch64-static -cpu max'")
    ap.add_argument("--jobs", "-j", type=int, default=0, help="parallel build jobs (default: the generator's)")
    ap.add_argument("--timeout", type=float, default=None, help="seconds per command (default: none)")
    ap.add_argument("--cmake", default="cmake", help="cmake executable (default: cmake)")
    ap.add_argument("--git", default="git", help="git executable (default: git)")
    ap.add_argument("--test-cmake-arg", dest="test_cmake_args", action="append", default=[],
                    help="extra argument for configuring the test (repeatable)")
    ap.add_argument("--json", type=Path, metavar="FILE", help="also write the results as JSON")
    ap.add_argument("cmake_args", nargs="*", metavar="-- CMAKE_ARG",
                    help="extra arguments for configuring the tree, after --")
    args = ap.parse_args()
    args.kernels = [k.strip() for k in args.kernels.split(",")] if args.kernels else ["auto"]

    tree = args.llama.resolve()
    if not tree.is_dir():
        print(f"check-fork: {tree} is not a directory (this tool never downloads a tree)", file=sys.stderr)
        return 2
    ggml = find_ggml_dir(tree, args.directory)
    if ggml is None:
        print(f"check-fork: no ggml (include/ggml.h, src/ggml-cpu/) in {tree}"
              + (f"/{args.directory}" if args.directory else " or its ggml/"), file=sys.stderr)
        return 2
    rel = os.path.relpath(ggml, tree)
    is_llama = (tree / "include" / "llama.h").is_file()
    if args.json is not None:
        tc.out_file_arg(ap, "--json", str(args.json))
    build = (args.build_dir or (tree / "build-ggml-t2p")).resolve()
    tc.out_arg(ap, str(build), "--build-dir")
    logf = build / "check-fork.log"
    logf.write_text(f"check-fork {time.strftime('%Y-%m-%d %H:%M:%S')}: {tree}\n\n", encoding="utf-8")

    steps = {n: Step(n) for n in ("apply", "configure", "build", "test")}
    for s in steps.values():
        s.log_file = str(logf)
    has_pq2 = re.search(r"GGML_TYPE_PQ2_0\s*=\s*142", (ggml / "include" / "ggml.h").read_text(errors="replace"))
    log(f"tree      {tree} ({'llama.cpp' if is_llama else 'ggml'}; ggml at {rel}; "
        f"PQ2_0 {'yes' if has_pq2 else 'no'})")
    log(f"build     {build}  (log: {logf})")

    def show(s: Step) -> None:
        log(f"{s.name:<9} {s.status:<8} {s.seconds:7.1f} s  {s.detail}")

    ok = True
    if args.no_apply:
        steps["apply"].detail = "--no-apply"
    else:
        step_apply(steps["apply"], tree, rel, args.patch, args.git, logf)
        ok = steps["apply"].status == "ok"
    show(steps["apply"])
    if ok and not args.apply_only:
        step_configure(steps["configure"], tree, is_llama, build, args, logf)
        show(steps["configure"])
        ok = steps["configure"].status == "ok"
        if ok and not args.no_build:
            step_build(steps["build"], build, args, logf)
            show(steps["build"])
            ok = steps["build"].status == "ok"
            if ok and args.test:
                step_test(steps["test"], tree, build, args, logf)
                show(steps["test"])
                for r in getattr(steps["test"], "results", []):
                    log(f"  GGML_T2P_KERNEL={r['kernel']}: {r['status']} ({r['seconds']} s)")
                    log(f"    plugin: {r['plugin']}")
                    log(f"    test:   {r['summary']}")
                ok = steps["test"].status in ("PASS", "DECLINED")

    if args.json:
        data = {"tree": str(tree), "ggml_dir": rel, "kind": "llama.cpp" if is_llama else "ggml",
                "has_pq2_0": bool(has_pq2), "build_dir": str(build), "patch": str(args.patch),
                "steps": {n: s.as_dict() for n, s in steps.items()},
                "tests": getattr(steps["test"], "results", [])}
        args.json.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    log("result    " + ("OK" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
