#!/usr/bin/env python3
"""Shared pieces of the Python tools (ab.py, ppl-check.py, t2p.py, make-test-model.py, convert-q2kt.py;
Python 3 standard library only).

Not a command: it names the cache folder, makes the project's isolated Python environment
(tools/requirements.txt, pinned) and runs the tools that need numpy/gguf inside it, finds binaries (".exe" on Windows, the "bin/Release" folder of multi-config
generators), splits --runner and "K=V" arguments without a shell, asks a binary's --help which flags
it has, says how a run that died by a signal died (the signal, and the function and instruction from a
backtrace in its log or from one rerun under gdb), recognises the fork's known stock AMX crash and names
its workaround, reports the machine's load before timing, holds the one rule of which ggml-t2p kernel
levels a CPU's flags allow (kernel_levels; also for peers.py, x86-emu-test.py, windows-test.py,
cycle-model.py), applies patches/ggml-t2p.patch once (apply_patch; t2p.py and check-fork.py), and reads
the ggml-t2p shim's log lines to say which state the plugin was in:

  ggml-t2p: enabled (libggml_t2p 0.2.0, kernel avx2; PQ2_0 -> X16, PTQ1_0 -> X16)
  ggml-t2p: declining: this CPU has no dotprod; stock code runs ...
  ggml-t2p: disabled (GGML_T2P=0)
  ggml-t2p: 168 tensors repacked (168 PQ2_0 -> X16; 77.1 MiB) in 0.21 s; kernel avx2
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

IS_WINDOWS = os.name == "nt"
NO_LINE = "no ggml-t2p line: this binary is not patched, or its log level hides INFO lines"


def cache_dir():
    """This project's cache folder: GGML_T2P_CACHE, else the platform's user cache folder."""
    if os.environ.get("GGML_T2P_CACHE"):
        return os.path.abspath(os.environ["GGML_T2P_CACHE"])
    if IS_WINDOWS:
        base = os.environ.get("LOCALAPPDATA") or os.path.join(os.path.expanduser("~"), "AppData", "Local")
    elif sys.platform == "darwin":
        base = os.path.join(os.path.expanduser("~"), "Library", "Caches")
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "ggml-t2p")


REQUIREMENTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "requirements.txt")
ENV_MARK = "ggml-t2p-env"      # in the environment's folder: the hash of the requirements it holds


def requirements_hash():
    """SHA-256 (first 16 hex digits) of tools/requirements.txt and the interpreter's X.Y: a changed
    pin or another Python makes another environment."""
    import hashlib
    with open(REQUIREMENTS, "rb") as f:
        data = f.read()
    return hashlib.sha256(data + f"\0py{sys.version_info[0]}.{sys.version_info[1]}".encode()).hexdigest()[:16]


def env_dir():
    """The project's Python environment for this interpreter and tools/requirements.txt:
    <cache>/python/env-pyXY-<hash>."""
    v = f"py{sys.version_info[0]}{sys.version_info[1]}"
    return os.path.join(cache_dir(), "python", f"env-{v}-{requirements_hash()}")


def env_python(env):
    """The interpreter inside the virtual environment `env`."""
    return os.path.join(env, "Scripts", "python.exe") if IS_WINDOWS else os.path.join(env, "bin", "python")


def in_project_env():
    """True when this interpreter runs inside the project's environment for the current pins."""
    mark = os.path.join(sys.prefix, ENV_MARK)
    try:
        with open(mark) as f:
            return f.read().strip() == requirements_hash()
    except OSError:
        return False


@contextlib.contextmanager
def _file_lock(path):
    """An exclusive lock on the file `path` (made if missing) for the block: fcntl on POSIX, msvcrt on
    Windows; blocks until the lock is free."""
    with open(path, "a+b") as f:
        if IS_WINDOWS:
            import msvcrt
            f.seek(0)
            while True:
                try:
                    msvcrt.locking(f.fileno(), msvcrt.LK_LOCK, 1)
                    break
                except OSError:   # LK_LOCK gives up after 10 s: try again
                    continue
        else:
            import fcntl
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            if IS_WINDOWS:
                import msvcrt
                f.seek(0)
                msvcrt.locking(f.fileno(), msvcrt.LK_UNLCK, 1)
            else:
                import fcntl
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def clean_env():
    """This process's environment without PYTHONPATH and PYTHONHOME, for running the project's Python:
    a venv still honours them, and they would bring back packages the pins leave out."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


def project_python(install=True, tool="t2p"):
    """The interpreter of the project's isolated Python environment, made when missing.

    A virtual environment without the system's site packages (`python3 -m venv`), at env_dir(), with
    the pins of tools/requirements.txt and nothing else (pip --no-deps: every dependency is pinned
    there), installed by its own pip; run it with clean_env(), so whatever the machine has installed,
    a package missing from the pins is missing on every machine. Reused while the file and the Python
    version are unchanged (its folder name carries their hash); environments of other pins stay (other
    checkouts may use them). Processes sharing the cache folder make it one at a time (a lock file
    beside it), and a failed pip install leaves no environment behind (the next call starts again).
    `install` False: raises RuntimeError instead of making one."""
    env = env_dir()
    py = env_python(env)
    mark = os.path.join(env, ENV_MARK)
    if os.path.isfile(mark) and os.path.isfile(py):
        return py
    if not install:
        raise RuntimeError(f"the project's Python environment ({env}) is not made yet, and installing is off")
    os.makedirs(os.path.dirname(env), exist_ok=True)
    with _file_lock(env + ".lock"):
        if os.path.isfile(mark) and os.path.isfile(py):
            return py   # another process made it while this one waited
        shutil.rmtree(env, ignore_errors=True)
        print(f"{tool}: making the project's Python environment {env} (python -m venv; pins from "
              f"tools/requirements.txt)", flush=True)
        try:
            subprocess.check_call([sys.executable, "-m", "venv", env], env=clean_env())
            subprocess.check_call([py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-input",
                                   "--no-deps", "-r", REQUIREMENTS], env=clean_env())
        except (subprocess.CalledProcessError, OSError) as e:
            shutil.rmtree(env, ignore_errors=True)
            raise RuntimeError(f"making the Python environment failed ({e}); on Debian/Ubuntu `python3 -m venv` "
                               "needs python3-venv (python3 tools/toolchain.py installs it)") from None
        with open(mark, "w") as f:
            f.write(requirements_hash() + "\n")
    return py


def use_project_env(tool, install):
    """Runs the calling tool again inside the project's environment unless it already runs there
    (its exit status becomes ours), so that numpy and gguf come from tools/requirements.txt and not
    from whatever the machine has. `install` False and no environment yet: exits with how to make it."""
    if in_project_env():
        return
    try:
        py = project_python(install, tool)
    except RuntimeError as e:
        sys.exit(f"error: {e}\n(re-run with --install, or run `python3 tools/test-all.py` once)")
    sys.stdout.flush()
    sys.exit(subprocess.call([py, os.path.abspath(sys.argv[0])] + sys.argv[1:], env=clean_env()))


def pip_command(pkgs):
    """The pip command line that installs pkgs into the running environment (for messages)."""
    return f"{sys.executable} -m pip install " + " ".join(pkgs)


def ensure_packages(tool, wanted, install, size_note=""):
    """Makes the PyPI packages `wanted` ("name==version") importable in the running environment (the
    project's, see use_project_env) or returns the missing ones. Missing packages, or ones at another
    version, are installed with this environment's pip when `install` is true. `size_note` is appended
    to the install message."""
    import importlib
    import importlib.metadata as md

    def missing_now():
        miss = []
        for spec in wanted:
            name, _, ver = spec.partition("==")
            try:
                have = md.version(name)
            except md.PackageNotFoundError:
                miss.append(spec)
                continue
            if ver and have != ver:
                miss.append(spec)
        return miss

    miss = missing_now()
    if miss and install:
        cmd = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check"]
        print(f"{tool}: installing Python packages into the environment of {sys.executable}{size_note}:\n  "
              + " ".join(cmd + miss), flush=True)
        subprocess.check_call(cmd + miss)
        importlib.invalidate_caches()
        miss = missing_now()
    return miss


class AtomicOut:
    """Write to PATH.tmp-PID beside the target, fsync, then rename over the target (`commit`, which
    returns the SHA-256 of the bytes written when made with `digest=True`); `abort` removes the
    temporary file. `n` counts the bytes written. As a context manager, leaving the block without
    `commit` (an exception, an exit) aborts."""

    def __init__(self, path, digest=False):
        import hashlib
        self.path = os.path.abspath(path)
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        self.tmp = f"{self.path}.tmp-{os.getpid()}"
        self.f = open(self.tmp, "wb")
        self.h = hashlib.sha256() if digest else None
        self.n = 0

    def write(self, b):
        self.f.write(b)
        if self.h:
            self.h.update(b)
        self.n += len(b)

    def commit(self):
        self.f.flush()
        os.fsync(self.f.fileno())
        self.f.close()
        os.replace(self.tmp, self.path)
        return self.h.hexdigest() if self.h else None

    def abort(self):
        try:
            self.f.close()
        finally:
            if os.path.exists(self.tmp):
                os.unlink(self.tmp)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.abort()       # after commit: the file is closed and the temporary name gone, nothing to do
        return False


def say(tool, msg):
    """A progress line on stderr (results go to stdout)."""
    print(f"{tool}: {msg}", file=sys.stderr, flush=True)


def cpu_count():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


# ---------------------------------------------------------------------------------------------
# A run that died by a signal: which signal, where (function, instruction), and the known AMX crash

def death_signal(rc):
    """(signal number, how it was seen) of an exit status, or (None, None). A negative status is
    Python's "killed by signal -rc"; 129..192 is how a shell (or tools/x86-emu.py) reports death by
    signal rc-128, so that reading is only "probably"."""
    if rc is None:
        return None, None
    if rc < 0:
        return -rc, "killed by"
    if 128 < rc <= 128 + 64 and rc - 128 in _SIGNAL_NUMBERS:
        return rc - 128, "exit status %d: probably killed by" % rc
    return None, None


_SIGNAL_NUMBERS = {int(s) for s in signal.Signals}


def signal_name(sig):
    """'SIGILL (illegal instruction)' for 4; 'signal 77' for a number without a name here."""
    try:
        name = signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"
    desc = None
    if hasattr(signal, "strsignal"):
        try:
            desc = signal.strsignal(sig)
        except ValueError:
            desc = None
    desc = desc or {4: "Illegal instruction", 11: "Segmentation fault", 6: "Aborted", 7: "Bus error",
                    8: "Floating point exception", 9: "Killed"}.get(sig)
    return f"{name} ({desc.split(':')[0].lower()})" if desc else name


# frames that belong to the crash machinery, not to the code that crashed
_MACHINERY = re.compile(r"^(ggml_print_backtrace|ggml_abort|ggml_uncaught_exception|__GI_raise|raise|abort|"
                        r"__GI_abort|__pthread_kill\w*|pthread_kill|__restore_rt|_Unwind_\w+|"
                        r"backtrace\w*|__libc_start\w*|_start|<signal handler called>|std::terminate|"
                        r"__cxxabiv1::\w+|__gnu_cxx::__verbose_terminate_handler)")
# gdb: "#0  0x00007f... in tinygemm_kernel_amx<...>(...) () from /x/libggml-cpu.so" or "#1  func (a=1) at f.c:3"
_GDB_FRAME = re.compile(r"^#\d+\s+(?:0x[0-9a-fA-F]+ in )?(.+?)\s*(?:\(.*\)\s*)?(?:\(\)\s*)?(?: from \S+| at \S+)?$")
# glibc backtrace_symbols_fd: "/x/libggml-cpu.so(tinygemm_kernel_amx+0x1a2)[0x7f...]"
_EXECINFO_FRAME = re.compile(r"^\S*\(([^()+\s]+)\+0x[0-9a-fA-F]+\)\s*\[0x[0-9a-fA-F]+\]")
# ggml's _Unwind fallback: "3: 0x7f... tinygemm_kernel_amx"
_UNWIND_FRAME = re.compile(r"^\d+: 0x[0-9a-fA-F]+ (\S.*)$")
# gdb "x/i $pc": "=> 0x7ffff7e4b2c1 <_Z19tinygemm_kernel_amx...+4>:\ttileloadd (%rax,%rdx,1),%tmm0"
_GDB_PC = re.compile(r"^=> 0x[0-9a-fA-F]+(?: <(.+)\+\d+>)?:\s+(\S+)(.*)$")
_GDB_STOP = re.compile(r"^(?:Thread \d+ \"[^\"]*\" received|Program received) signal (SIG\w+)")


def _frame_function(raw):
    """The function of a gdb frame text 'name<T>(args) () from lib' -> 'name<T>'."""
    anon = "(anonymous namespace)"
    raw = raw.replace(anon, "\x00")
    depth, out = 0, []
    for ch in raw:
        if ch == "(" and depth == 0 and out:
            break
        depth += ch == "<"
        depth -= ch == ">"
        out.append(ch)
    return "".join(out).strip().replace("\x00", anon)


def crash_site(text):
    """(function, instruction) of the innermost frame outside the crash machinery that a log shows:
    gdb's "x/i $pc" and "#N" frames, glibc's backtrace_symbols lines, or ggml's own unwinder lines
    ('N: 0xADDR name'). Either can be None."""
    function = instruction = None
    for line in text.splitlines():
        line = line.strip()
        m = _GDB_PC.match(line)
        if m and instruction is None:
            instruction = (m.group(2) + m.group(3)).strip()
            if m.group(1) and function is None:
                function = m.group(1)
            continue
        if function is not None:
            continue
        name = None
        m = _GDB_FRAME.match(line)
        if m:
            name = _frame_function(line.split(" in ", 1)[1] if " in " in line.split("(")[0] else
                                   re.sub(r"^#\d+\s+", "", line))
        else:
            m = _EXECINFO_FRAME.match(line) or _UNWIND_FRAME.match(line)
            if m:
                name = m.group(1).strip()
        if name and name not in ("??", "") and not _MACHINERY.match(name):
            function = name
    return function, instruction


AMX_MARKS = re.compile(r"\bAMX model buffer\b|\bAMX_INT8 = 1\b|\bAMX\b.*\bbuffer size\b")
AMX_CODE = re.compile(r"amx|tile", re.I)
AMX_INSN = re.compile(r"^(tileloadd|tileloaddt1|tilestored|tdp\w+|ldtilecfg|sttilecfg|tilezero|tilerelease)\b")
# Compiler flags that leave the AMX code of ggml out of a -march=native build (GCC and clang honour
# -mno-* whatever its place relative to -march): __AMX_INT8__ is then undefined, and ggml-cpu
# compiles neither its AMX buffer type nor tinygemm_kernel_amx (ggml-cpu/amx/amx.cpp, ggml-cpu.cpp).
AMX_OFF_FLAGS = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"


def fork_cmake_options():
    """The CMake options of every build of the fork with ggml-t2p that the tools configure (t2p.py,
    peers.py --isa): Release, the plugin from this checkout, and no server, app, web UI, OpenSSL or
    curl (a CPU benchmark build needs none of them)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return ["-DCMAKE_BUILD_TYPE=Release", "-DGGML_CPU_T2P=ON", f"-DGGML_CPU_T2P_DIR={root}",
            "-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_BUILD_APP=OFF", "-DLLAMA_BUILD_UI=OFF",
            "-DLLAMA_OPENSSL=OFF", "-DLLAMA_CURL=OFF"]


def diagnose(rc, log_text, gdb_text=""):
    """What a failed run's exit status and output say. Returns None when it did not die by a signal,
    else a dict: signal, name ('SIGILL (illegal instruction)'), how, function, instruction, where
    ('gdb' or 'log' or None), amx (True when it is the fork's known stock AMX crash: SIGILL at a tile
    instruction, in an AMX function, or with ggml's AMX buffer in use), text (one line for people)."""
    sig, how = death_signal(rc)
    if sig is None:
        return None
    function, instruction, where = None, None, None
    for source, text in (("gdb", gdb_text), ("log", log_text)):
        f, i = crash_site(text or "")
        if (f or i) and where is None:
            function, instruction, where = f, i, source
    amx_evidence = []
    if sig == signal.SIGILL:
        if instruction and AMX_INSN.match(instruction):
            amx_evidence.append(f"the faulting instruction is {instruction.split()[0]}")
        if function and AMX_CODE.search(function):
            amx_evidence.append(f"{function} is ggml's AMX code")
        if AMX_MARKS.search(log_text or ""):
            amx_evidence.append("the log shows ggml's AMX buffer type in use")
    text = f"{how} {signal_name(sig)}"
    if function:
        text += f" in {function}"
    if instruction:
        text += f" at `{instruction}`"
    if where:
        text += f" (from {'a rerun under gdb' if where == 'gdb' else 'the backtrace in its log'})"
    elif sig == signal.SIGILL:
        text += " (no backtrace: ggml prints one only when it aborts, not on a signal; install gdb to name the function)"
    if amx_evidence:
        text += "; the fork's known stock AMX crash (" + "; ".join(amx_evidence) + ")"
    return {"signal": sig, "name": signal_name(sig), "how": how, "function": function,
            "instruction": instruction, "where": where, "amx": bool(amx_evidence), "text": text}


def gdb_rerun(cmd, env, timeout=600):
    """Run CMD once more under gdb (batch) and return gdb's report of the stop: the signal line, the
    backtrace of the faulting thread and the faulting instruction. '' when gdb is missing, or it timed
    out."""
    gdb = shutil.which("gdb")
    if not gdb or IS_WINDOWS:
        return ""
    g = [gdb, "-nx", "-batch", "-ex", "set pagination off", "-ex", "set confirm off",
         "-ex", "set print thread-events off", "-ex", "set style enabled off", "-ex", "run",
         "-ex", "bt 12", "-ex", "x/i $pc", "--args"] + cmd
    try:
        p = subprocess.run(g, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    out = p.stdout.decode("utf-8", "replace").splitlines()
    start = next((i for i, ln in enumerate(out) if _GDB_STOP.match(ln.strip())), None)
    if start is None:
        return ""
    return "\n".join(ln for ln in out[start:] if ln.startswith(("#", "=>", "Thread", "Program", "0x")))


def cpu_flags():
    """The CPU's flags from /proc/cpuinfo (Linux), as a set; empty elsewhere."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


# ---------------------------------------------------------------------------------------------
# CPU flags -> ggml-t2p kernel levels: the one copy in the tools of the rule the library applies

# The /proc/cpuinfo flags each ggml-t2p level (a GGML_T2P_KERNEL name) needs, as the library
# requires them. Every x86-64 level needs AVX2+FMA+F16C (without them the library declines), every
# aarch64 level dotprod (asimddp).
X86_BASE_FLAGS = ("avx2", "fma", "f16c")
AVX512_VNNI_FLAGS = X86_BASE_FLAGS + ("avx512f", "avx512bw", "avx512vl", "avx512_vnni")
LEVEL_FLAGS = {
    "amx": AVX512_VNNI_FLAGS + ("amx_tile", "amx_int8"),
    "avx512vnni": AVX512_VNNI_FLAGS,
    "avxvnni": X86_BASE_FLAGS + ("avx_vnni",),
    "avx2": X86_BASE_FLAGS,
    "i8mm": ("asimddp", "i8mm"),
    "dotprod": ("asimddp",),
}
# Each architecture's levels, best first (the library's BEST_ORDER).
ARCH_LEVELS = {"x86_64": ("amx", "avx512vnni", "avxvnni", "avx2"), "aarch64": ("i8mm", "dotprod")}
# qemu-user's aarch64 CPU models, as /proc/cpuinfo flags that matter here: max has dotprod and i8mm,
# neoverse-n1 and cortex-a76 dotprod only, the older cores neither (the library declines there).
QEMU_CPU_FLAGS = {
    "max": {"asimddp", "i8mm"},
    "neoverse-n1": {"asimddp"},
    "cortex-a76": {"asimddp"},
    "cortex-a72": set(),
    "cortex-a57": set(),
    "cortex-a53": set(),
}


def cpu_arch(mach):
    """'x86_64' or 'aarch64' for a platform.machine() name (lower case; amd64 and arm64 too), else
    None."""
    return {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}.get(mach)


def missing_flags(level, flags):
    """The /proc/cpuinfo flags of LEVEL_FLAGS[level] that FLAGS (a set) lacks, in that order.
    KeyError for a name that is not a level."""
    return [f for f in LEVEL_FLAGS[level] if f not in flags]


def kernel_levels(mach, flags):
    """The ggml-t2p levels (GGML_T2P_KERNEL names) of a CPU of architecture MACH (platform.machine(),
    lower case) with these /proc/cpuinfo flags, best first, as the library requires them (amx first
    where the CPU has it; the library skips it where the OS denies the tile-data permission, and
    runs avx512vnni). [] for an architecture without kernels."""
    return [lv for lv in ARCH_LEVELS.get(cpu_arch(mach), ()) if not missing_flags(lv, flags)]


def host_levels():
    """kernel_levels of this machine (platform.machine(), /proc/cpuinfo): [] where the flags cannot
    be read (not Linux)."""
    return kernel_levels(platform.machine().lower(), cpu_flags())


# ---------------------------------------------------------------------------------------------
# Applying patches/ggml-t2p.patch

PATCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "patches", "ggml-t2p.patch")


def _git_run(cmd, cwd, env):
    """Runs a git command: (exit status, its stdout and stderr together, stripped)."""
    p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout.decode("utf-8", "replace").strip()


def apply_patch(tree, patch=PATCH, args=(), git="git", whitespace=((),), run=None, before_apply=None):
    """Applies PATCH to the folder TREE once with `git apply`, never reaching a repository above TREE
    (GIT_CEILING_DIRECTORIES is TREE's parent: a plain folder is patched as patch(1) would, a
    checkout's own repository is used when TREE is its top).

    ARGS go to every `git apply` (e.g. -p2 --directory=ggml); WHITESPACE lists the extra flags to
    try in turn (e.g. `((), ("--ignore-whitespace",))`). RUN(cmd, cwd, env) -> (status, output) runs
    each git command (default: captured, output stripped; a caller may log them). Steps: `--reverse
    --check` with each WHITESPACE entry (passes: already applied); then BEFORE_APPLY() when given
    (it may raise to refuse); then `--check` with each, and the first that passes is applied.
    Returns (state, flags, output): state 'already applied', 'applied', 'apply failed' (git apply
    failed after its --check passed; output is its output) or 'does not apply' (no --check passed;
    flags None, output the first --check's output); flags the WHITESPACE entry used. Errors: only
    what RUN or BEFORE_APPLY raise (git missing: OSError from the default RUN)."""
    run = run or _git_run
    env = dict(os.environ)
    env["GIT_CEILING_DIRECTORIES"] = os.path.dirname(os.path.abspath(tree))
    base = [git, "apply"] + list(args)
    for ws in whitespace:
        if run(base + ["--reverse", "--check"] + list(ws) + [str(patch)], tree, env)[0] == 0:
            return "already applied", ws, ""
    if before_apply:
        before_apply()
    first_error = None
    for ws in whitespace:
        rc, out = run(base + ["--check"] + list(ws) + [str(patch)], tree, env)
        if rc == 0:
            rc, out = run(base + list(ws) + [str(patch)], tree, env)
            return ("applied" if rc == 0 else "apply failed"), ws, out
        first_error = first_error or out
    return "does not apply", None, first_error


def amx_workaround(diag, mode, applied, cross=False, windows=IS_WINDOWS):
    """What t2p does after a failed run with diagnosis DIAG under --amx-workaround MODE ('auto',
    'always', 'never') when the build at hand was (APPLIED) or was not made with AMX_OFF_FLAGS.
    Returns (action, reason) with action one of 'rebuild' (build without ggml's AMX code in a separate
    folder and rerun), 'none'."""
    if not diag:
        return "none", "the run did not die by a signal"
    if not diag["amx"]:
        return "none", f"{diag['name']} is not the known AMX crash: no workaround applies"
    if applied:
        return "none", "this build already leaves ggml's AMX code out, yet it crashed: not the known AMX crash"
    if cross or windows:
        return "none", "ggml's AMX code is only compiled natively on Linux/macOS x86-64 here: no workaround"
    if mode == "never":
        return "none", "--amx-workaround never: reported only"
    return "rebuild", ("the fork's own AMX matmul (tinygemm_kernel_amx) faults on this CPU: rebuild with "
                       f"{AMX_OFF_FLAGS} (ggml's AMX code compiled out) and rerun")


def crash_line(what, diag):
    return f"{what} {diag['text']}"


# ---------------------------------------------------------------------------------------------
# The machine's load before timing

def _cpu_times():
    """(busy, total) jiffies of all CPUs from /proc/stat, or None."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return sum(v[:8]) - idle, sum(v[:8])


def sample_busy(seconds=2.0):
    """Cores kept busy by everything on the machine during SECONDS (this process sleeps), or None."""
    a = _cpu_times()
    if a is None:
        return None
    time.sleep(seconds)
    b = _cpu_times()
    if b is None or b[1] == a[1]:
        return None
    return (b[0] - a[0]) / (b[1] - a[1]) * (os.cpu_count() or 1)


AUTOGROUP_HINT = ("; this kernel groups processes by session (sched_autogroup), so `nice` does not lower "
                  "another session's share of the CPU: stop that work, or lower its whole session "
                  "(as root: echo 19 > /proc/PID/autogroup)")


def load_verdict(loadavg, busy, cores, threads, autogroup=False):
    """(line, warning or None) about a machine before timing runs with THREADS threads. LOADAVG is the
    1/5/15-minute load average (or None), BUSY the cores busy by others just now (or None). The warning
    comes when the others' load plus our threads oversubscribe the cores (measured just now when
    possible, else from the 1-minute average), or when the 1-minute load is above the core count.
    AUTOGROUP (Linux's sched_autogroup is on) adds to a warning that nice values cannot fix it."""
    parts = []
    if loadavg:
        parts.append("load average %.2f %.2f %.2f (1/5/15 min)" % tuple(loadavg))
    if busy is not None:
        parts.append(f"{busy:.2f} cores busy over 2 s just before the runs")
    line = f"machine: {cores} cores; " + ("; ".join(parts) if parts else "load unknown on this OS")
    warn = None
    others = busy if busy is not None else (loadavg[0] if loadavg else None)
    if others is not None and others + threads > cores + 0.5:
        warn = (f"WARNING: the machine is busy ({others:.2f} cores in use by other work, plus the runs' "
                f"{threads} threads on {cores} cores): llama-bench threads spin at barriers, so an "
                "oversubscribed machine slows both columns, unequally; the ratios are not trustworthy. "
                "Rerun on a quiet machine")
    elif loadavg and loadavg[0] > cores:
        if busy is not None:
            warn = (f"note: the 1-minute load average {loadavg[0]:.2f} is above the {cores} cores, but the "
                    "CPU was idle just before the runs (the average still counts work that has just ended, "
                    "e.g. the build)")
        else:
            warn = (f"WARNING: the 1-minute load average {loadavg[0]:.2f} is above the {cores} cores: "
                    "llama-bench threads spin at barriers, so an oversubscribed machine slows both "
                    "columns, unequally. Rerun on a quiet machine")
    if warn and warn.startswith("WARNING") and autogroup:
        warn += AUTOGROUP_HINT
    return line, warn


def autogroup_enabled():
    """Whether Linux's sched_autogroup is on (False elsewhere, or when it cannot be read)."""
    try:
        with open("/proc/sys/kernel/sched_autogroup_enabled") as f:
            return f.read().strip() == "1"
    except OSError:
        return False


def machine_load(threads, seconds=2.0):
    """load_verdict for this machine now."""
    try:
        loadavg = os.getloadavg()
    except (AttributeError, OSError):
        loadavg = None
    return load_verdict(loadavg, sample_busy(seconds), os.cpu_count() or 1, threads, autogroup_enabled())


def split_command(text):
    """Split a --runner or --a-args string into arguments, without a shell (Windows: no quote removal
    rules of POSIX shells, so backslashes in paths survive)."""
    if not text:
        return []
    parts = shlex.split(text, posix=not IS_WINDOWS)
    if IS_WINDOWS:
        parts = [p[1:-1] if len(p) >= 2 and p[0] == p[-1] and p[0] in "\"'" else p for p in parts]
    return parts


def command_arg(ap, text, what):
    """split_command(TEXT) for option WHAT; an argparse error naming it when the quotes do not close."""
    try:
        return split_command(text)
    except ValueError as e:
        ap.error(f"{what}: {e} in {text!r}")


def file_arg(ap, flag, path):
    """An argparse error naming flag when the file the user named is missing, a folder or unreadable
    (nothing when path is None)."""
    if path is None:
        return
    if os.path.isdir(path):
        ap.error(f"{flag} {path} is a folder, not a file")
    if not os.path.isfile(path):
        ap.error(f"{flag} {path}: no such file")
    if not os.access(path, os.R_OK):
        ap.error(f"{flag} {path}: cannot read it")


def out_file_arg(ap, what, path):
    """An argparse error naming WHAT when the file PATH is to be written but is a folder, or its folder
    is missing or cannot be written."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        ap.error(f"{what} {path} is a folder, not a file")
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        ap.error(f"{what}: cannot write in {folder}")


def thread_counts_arg(ap, text):
    """-t LIST: comma-separated thread counts (1 or more, or 'all' for this machine's cores), sorted,
    each once; stops with an argparse error on anything else."""
    out = []
    for w in text.split(","):
        w = w.strip()
        if w == "all":
            out.append(cpu_count())
        elif w.isdigit() and int(w) > 0:
            out.append(int(w))
        else:
            ap.error(f"-t: '{w}' is not a thread count (numbers or 'all', comma-separated)")
    return sorted(set(out))


def token_counts_arg(ap, pp, tg):
    """-p/-n of an A/B run (None: the caller's default): token counts, 0 or more, not both 0."""
    if (pp is not None and pp < 0) or (tg is not None and tg < 0) or pp == tg == 0:
        ap.error("-p and -n: token counts (0 or more), not both 0 (nothing to measure otherwise)")


def out_arg(ap, path, what="--out"):
    """Makes the folder PATH now (before any run) or stops with an argparse error naming WHAT: a file
    is in the way, a parent is not a folder, or it cannot be written."""
    if not path:
        return
    if os.path.exists(path) and not os.path.isdir(path):
        ap.error(f"{what} {path} exists and is not a folder")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        ap.error(f"{what} {path}: {e.strerror or e}")
    if not os.access(path, os.W_OK):
        ap.error(f"{what} {path}: cannot write there")


def env_arg(ap, text, what):
    """'K=V K2=V2' of option WHAT -> dict; an argparse error naming WHAT on a word without '=' or
    unclosed quotes."""
    env = {}
    for word in command_arg(ap, text, what):
        key, eq, value = word.partition("=")
        if not eq or not key:
            ap.error(f"{what}: '{word}' is not KEY=VALUE")
        env[key] = value
    return env


def resolve_binary(path):
    """PATH as given, or PATH.exe on Windows; None when neither is a file."""
    cands = [path]
    if IS_WINDOWS and not path.lower().endswith(".exe"):
        cands.append(path + ".exe")
    for c in cands:
        if os.path.isfile(c):
            return os.path.abspath(c)
    return None


def find_built_binary(build_dir, name, config="Release"):
    """NAME in a CMake build folder: bin/NAME (make, Ninja), bin/<config>/NAME (Visual Studio, Xcode)."""
    for sub in (["bin"], ["bin", config], [config, "bin"], [config]):
        found = resolve_binary(os.path.join(build_dir, *sub, name))
        if found:
            return found
    return None


def is_executable(path):
    return os.path.isfile(path) and (IS_WINDOWS or os.access(path, os.X_OK))


_help_cache = {}


def help_text(runner, binary, timeout=600):
    """The binary's --help output (stdout and stderr), run through RUNNER; '' when it cannot run."""
    key = (tuple(runner), binary)
    if key not in _help_cache:
        try:
            p = subprocess.run(runner + [binary, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, timeout=timeout)
            _help_cache[key] = p.stdout.decode("utf-8", "replace")
        except (OSError, subprocess.TimeoutExpired):
            _help_cache[key] = ""
    return _help_cache[key]


def has_flag(help_out, flag):
    """True when --help lists FLAG as an option (e.g. '--fit', '-fit')."""
    return re.search(r"(^|[\s,])" + re.escape(flag) + r"([\s,=]|$)", help_out, re.M) is not None


# ---------------------------------------------------------------------------------------------
# The plugin's state, from a run's log

_LINE_RE = re.compile(r"ggml-t2p: ([^\r\n]*)")
_REPACK_RE = re.compile(r"^(\d+) tensors? repacked")


def t2p_lines(text):
    """Every 'ggml-t2p: ...' line of a log, from 'ggml-t2p:' on, in order."""
    return ["ggml-t2p: " + m.group(1).rstrip() for m in _LINE_RE.finditer(text)]


def plugin_state(text):
    """Read a run's log. Returns (state, summary, lines) with state one of
    'enabled', 'declined', 'disabled', 'none' and summary one line for people."""
    lines = t2p_lines(text)
    enabled = declined = disabled = repack = None
    others = []
    for line in lines:
        body = line[len("ggml-t2p: "):]
        if body.startswith("enabled"):
            enabled = enabled or body
        elif body.startswith("declining"):
            declined = declined or body
        elif body.startswith("disabled"):
            disabled = disabled or body
        elif _REPACK_RE.match(body):
            repack = repack or body
        else:
            others.append(body)
    warn = "".join(f"; warning: {o}" for o in others)
    if disabled:
        return "disabled", f"{disabled}: stock code ran{warn}", lines
    if declined:
        reason = declined[len("declining"):].lstrip(": ")
        return "declined", f"DECLINED: {reason}{warn}", lines
    if enabled and repack:
        return "enabled", f"{enabled}; {repack}{warn}", lines
    if enabled:
        return "enabled", f"{enabled}; no repack line (no PQ2_0/PTQ1_0 MUL_MAT ran?){warn}", lines
    if repack:
        return "enabled", (f"active: {repack} (the 'enabled' line was not shown: this binary's logging hid it)"
                           f"{warn}"), lines
    if others:
        return "none", "; ".join(others), lines
    return "none", NO_LINE, lines


def same_state(a, b):
    """Two (state, summary) pairs alike but for load times ('in 0.42 s')."""
    norm = lambda s: re.sub(r" in [0-9.]+ s", "", s[1])  # noqa: E731
    return a[0] == b[0] and norm(a) == norm(b)


def read_text(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def tail(path, n=20):
    return "\n".join(read_text(path).splitlines()[-n:])


def run_logged(cmd, env, stdout_path, stderr_path=None):
    """Run CMD (a list) with ENV (a full environment), stdout to a file and stderr to another file
    (or the same one when stderr_path is None). Returns (exit status, seconds)."""
    t0 = time.monotonic()
    with open(stdout_path, "wb") as out:
        if stderr_path is None:
            rc = subprocess.call(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        else:
            with open(stderr_path, "wb") as err:
                rc = subprocess.call(cmd, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
    return rc, time.monotonic() - t0


def run_checked(tool, what, cmd, env_over, stdout_path, stderr_path=None, info=None, gdb=True):
    """run_logged with os.environ plus env_over. On success returns the seconds it took; when the
    command cannot start or exits non-zero, prints the log's tail and a line saying so (naming
    `what`) and returns None. When it died by a signal, the line names the signal and, when a
    backtrace in the log or (GDB true, gdb installed) one rerun under gdb shows it, the function and
    instruction; the gdb report goes to STDOUT_PATH.gdb. INFO (a dict), when given, gets 'rc' and
    'crash' (diagnose's dict or None)."""
    env = dict(os.environ)
    env.update(env_over)
    if info is not None:
        info.update(rc=None, crash=None)
    try:
        rc, secs = run_logged(cmd, env, stdout_path, stderr_path)
    except OSError as e:
        say(tool, f"{what}: cannot run {cmd[0]}: {e}")
        return None
    if rc != 0:
        log = tail(stderr_path or stdout_path, 20)
        print(log, file=sys.stderr)
        where = "log above" if log.strip() else "its log is empty: the program printed nothing"
        say(tool, f"{what} failed with status {rc} ({where}; command: {' '.join(cmd)})")
        full = read_text(stdout_path) + ("" if stderr_path is None else read_text(stderr_path))
        diag = diagnose(rc, full)
        if diag and gdb and diag["where"] is None and shutil.which("gdb") and not IS_WINDOWS:
            say(tool, f"{what}: {diag['name']}; running it once more under gdb to see where")
            report = gdb_rerun(cmd, env)
            if report:
                with open(stdout_path + ".gdb", "w", encoding="utf-8") as f:
                    f.write(report + "\n")
            diag = diagnose(rc, full, report)
        if diag:
            say(tool, f"{what}: {diag['text']}")
        if info is not None:
            info.update(rc=rc, crash=diag)
        return None
    return secs


def split_extra(argv):
    """(arguments before "--", arguments after it): the latter go to every run of the binary."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, []


def parse_with_extra(ap, argv, glued=()):
    """(ap, args) for a tool whose arguments after "--" go to every run (args.extra); the options in
    glued take values that may look like options themselves (see glue_values)."""
    argv, extra = split_extra(argv)
    args = ap.parse_args(glue_values(argv, glued))
    args.extra = extra
    return ap, args


def glue_values(argv, names):
    """argv with "NAME VALUE" turned into "NAME=VALUE" for the options in names, so that a value that
    looks like an option itself ("-t 1", "-ub 1") reaches argparse as that option's value."""
    out, i = [], 0
    while i < len(argv):
        if argv[i] in names and i + 1 < len(argv):
            out.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


def runner_arg(ap, text):
    """--runner TEXT as an argument list; an argparse error when its program is not found."""
    runner = command_arg(ap, text, "--runner")
    if runner and not shutil.which(runner[0]) and not os.path.isfile(runner[0]):
        ap.error(f"--runner: {runner[0]} not found")
    return runner


@contextlib.contextmanager
def out_dir(ap, path, prefix):
    """The folder for a tool's logs: PATH (made now by out_arg, an argparse error if it cannot be), or a
    temporary one removed afterwards."""
    if path:
        out_arg(ap, path)
        yield os.path.abspath(path)
    else:
        with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
            yield tmp


def tool_main(tool, run):
    """Entry point of a tool whose run(argv) returns (exit status, result): exits with the status,
    130 on Ctrl-C."""
    try:
        status, _ = run(sys.argv[1:])
    except KeyboardInterrupt:
        print(f"{tool}: interrupted", file=sys.stderr)
        status = 130
    sys.exit(status)


def show_env(env_over):
    return " ".join(f"{k}={v}" for k, v in env_over.items())


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0)
    sys.exit("t2p_common.py is a module of the Python tools in tools/, not a command")
