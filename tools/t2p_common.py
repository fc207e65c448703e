#!/usr/bin/env python3
"""Shared pieces of the Python tools (ab.py, ppl-check.py, t2p.py, make-test-model.py, convert-q2kt.py;
Python 3 standard library only).

Not a command: it names the cache folder and installs missing PyPI packages there or in the running
environment, finds binaries (".exe" on Windows, the "bin/Release" folder of multi-config
generators), splits --runner and "K=V" arguments without a shell, asks a binary's --help which flags
it has, and reads the ggml-t2p shim's log lines to say which state the plugin was in:

  ggml-t2p: enabled (libggml_t2p 0.2.0, kernel avx2; PQ2_0 -> X16, PTQ1_0 -> X16)
  ggml-t2p: declining: this CPU has no dotprod; stock code runs ...
  ggml-t2p: disabled (GGML_T2P=0)
  ggml-t2p: 168 tensors repacked (168 PQ2_0 -> X16; 77.1 MiB) in 0.21 s; kernel avx2
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
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


def private_site():
    """Where packages go when the interpreter's environment is externally managed (PEP 668)."""
    return os.path.join(cache_dir(), "python", f"py{sys.version_info[0]}{sys.version_info[1]}")


def externally_managed():
    """PEP 668: an EXTERNALLY-MANAGED file in the stdlib folder, outside a virtual environment."""
    import sysconfig
    if sys.prefix != getattr(sys, "base_prefix", sys.prefix):
        return False
    return os.path.isfile(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED"))


def pip_command(pkgs):
    """The pip command line that installs pkgs where ensure_packages would (for messages)."""
    target = f" --target {private_site()}" if externally_managed() else ""
    return f"{sys.executable} -m pip install{target} " + " ".join(pkgs)


def ensure_packages(tool, wanted, install, soft=("gguf",), size_note=""):
    """Makes the PyPI packages `wanted` ("name" or "name==version") importable, or exits with how.

    The private site (<cache>/python/pyXY, where an externally managed Python gets its packages) is
    added to sys.path after the system's own. Missing packages are installed with pip when `install`
    is true: into the running environment, or with --target into the private site under PEP 668. A
    package in `soft` at another version is only noted on stderr; other version mismatches count as
    missing. `size_note` is appended to the install message.
    """
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
                if name in soft:
                    print(f"note: {name} {have} is installed; {tool} was written against {name} {ver}",
                          file=sys.stderr)
                else:
                    miss.append(spec)
        return miss

    site = private_site()
    if os.path.isdir(site) and site not in sys.path:
        sys.path.append(site)            # packages an earlier run installed there (after the system's own)
        importlib.invalidate_caches()
    miss = missing_now()
    if miss and install:
        cmd = [sys.executable, "-m", "pip", "install"]
        if externally_managed():
            cmd += ["--target", site]
            where = f"{site} (this Python's environment is externally managed, PEP 668)"
        else:
            where = f"the environment of {sys.executable}"
        if subprocess.call([sys.executable, "-m", "pip", "--version"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL) != 0:
            sys.exit(f"error: missing Python packages: {', '.join(miss)}, and {sys.executable} has no pip.\n"
                     "Install pip first (Debian/Ubuntu: apt-get install python3-pip; `bash tools/toolchain.sh` "
                     "does it), or use a virtual environment: python3 -m venv .venv")
        print(f"{tool}: installing missing Python packages into {where}{size_note}:\n  "
              + " ".join(cmd + miss), flush=True)
        subprocess.check_call(cmd + miss)
        if site not in sys.path and os.path.isdir(site):
            sys.path.append(site)
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


def run_checked(tool, what, cmd, env_over, stdout_path, stderr_path=None):
    """run_logged with os.environ plus env_over. On success returns the seconds it took; when the
    command cannot start or exits non-zero, prints the log's tail and a line saying so (naming
    `what`) and returns None."""
    env = dict(os.environ)
    env.update(env_over)
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
        return None
    return secs


def split_extra(argv):
    """(arguments before "--", arguments after it): the latter go to every run of the binary."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, []


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
