#!/usr/bin/env python3
"""Installs what the host tests, the llama.cpp builds (native and aarch64 cross) and the aarch64
cross tests need on a Debian 12 machine (docs/building.md, "aarch64 cross build": the aarch64
cross build), only what is missing, with apt-get (as root, or through sudo).

Run it (`python3 tools/toolchain.py [--host-only] [--llvm]`), or import it for its functions, as
the project's tools do (`tools/test-all.py`, `tools/qemu-test.py`, `tools/t2p.py`,
`tools/cycle-model.py`, `tools/windows-test.py`, `tools/x86-emu.py`). Every `ensure_*` function
takes `install`: with False it installs nothing and raises `Missing` naming what is missing.
Python 3 standard library only.
"""

import argparse
import glob
import os
import shutil
import subprocess
import sys

# The MinGW-w64 x86-64 cross compilers and their Debian packages: the CMake fragment's configure with
# the real compilers (ggml-glue/cmake-tests/run.cmake), the Windows stage (tools/windows-test.py: C)
# and t2p.py --cross-windows (C++) use them.
MINGW_X64_PACKAGES = {
    "x86_64-w64-mingw32-gcc": "gcc-mingw-w64-x86-64",
    "x86_64-w64-mingw32-g++": "g++-mingw-w64-x86-64",
}


class Missing(Exception):
    """Something is missing and installing was not allowed, or installing failed."""


_apt_updated = False


def _as_root(cmd):
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return cmd
    if shutil.which("sudo"):
        return ["sudo"] + cmd
    raise Missing(f"not root and no sudo: cannot run {' '.join(cmd)}")


def _run_root(cmd, timeout=None):
    """Runs cmd as root, its output on stderr (so that a caller's stdout stays its own); `timeout`
    in seconds (None: no limit). DEBIAN_FRONTEND goes through `env`, which sudo does not reset."""
    full = _as_root(["env", "DEBIAN_FRONTEND=noninteractive"] + cmd)
    try:
        rc = subprocess.call(full, stdout=sys.stderr, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Missing(f"timed out after {timeout} s: {' '.join(cmd)}") from None
    if rc != 0:
        raise Missing(f"failed: {' '.join(cmd)}")


def apt_update_once(timeout=None):
    """`apt-get update`, once per process (again after a new foreign architecture)."""
    global _apt_updated
    if not _apt_updated:
        _run_root(["apt-get", "update", "-qq"], timeout)
        _apt_updated = True


def apt_install(packages, recommends=True, timeout=None):
    """apt-get install PACKAGES (after one `apt-get update` per process); `timeout` in seconds for
    each of the two apt-get runs. Raises Missing on failure, on the timeout, or where there is no
    apt-get."""
    if not packages:
        return
    if not shutil.which("apt-get"):
        raise Missing(f"no apt-get here: install {' '.join(packages)} yourself")
    print(f"toolchain: installing {' '.join(packages)}", file=sys.stderr, flush=True)
    apt_update_once(timeout)
    _run_root(["apt-get", "install", "-y", "-qq"] + ([] if recommends else ["--no-install-recommends"]) + list(packages),
              timeout)


def _need(missing, install):
    """Installs `missing` (Debian package names) or raises Missing when not allowed."""
    if not missing:
        return
    if not install:
        raise Missing(f"missing {' '.join(missing)}")
    apt_install(missing)


def build_tools_missing():
    """CMake, make, a C++ compiler and git: what a llama.cpp build with the plugin needs besides
    cargo (the build commands of docs/building.md, tools/t2p.py, the ggml-level test). Debian package names."""
    return [p for p in ("cmake", "make", "g++", "git") if not shutil.which(p)]


def have_libclang():
    """libclang's C library as bindgen loads it (libclang.so*, libclang-N.so*); libclang-cpp (the
    C++ interface, installed with llvm-N) is not it."""
    pats = ["/usr/lib/llvm-*/lib/libclang.so*", "/usr/lib/llvm-*/lib/libclang-[0-9]*.so*",
            "/usr/lib/*-linux-gnu/libclang.so*", "/usr/lib/*-linux-gnu/libclang-[0-9]*.so*"]
    if any(glob.glob(p) for p in pats):
        return True
    d = os.environ.get("LIBCLANG_PATH")
    return bool(d) and bool(glob.glob(os.path.join(d, "libclang*.so*")))


def ensure_host(install=True):
    """Rust (Debian's rustc-web/cargo-web, 1.96, when there is no cargo at all), libclang for
    bindgen (the abi-check feature), a C compiler for the C ABI test, gdb (tools name the function a
    crashed run died in) and the llama.cpp build tools."""
    missing = []
    if not shutil.which("cargo") and not os.access(os.path.expanduser("~/.cargo/bin/cargo"), os.X_OK):
        missing += ["rustc-web", "cargo-web"]
    if not shutil.which("cc"):
        missing.append("gcc")
    if not shutil.which("gdb"):
        missing.append("gdb")
    if not have_libclang():
        missing.append("libclang-dev")
    missing += [p for p in build_tools_missing() if p not in missing]
    _need(missing, install)


def ensure_aarch64(install=True):
    """Debian's rustc-web (1.96, with an aarch64 std), the aarch64 GNU toolchain, qemu-user-static
    and the llama.cpp build tools (the cross build)."""
    global _apt_updated
    missing = []
    if not (os.access("/usr/bin/rustc", os.X_OK) and os.access("/usr/bin/rustdoc", os.X_OK)):
        missing += ["rustc-web", "cargo-web"]
    if not os.path.isdir("/usr/lib/rustlib/aarch64-unknown-linux-gnu/lib"):
        missing.append("libstd-rust-web-dev:arm64")
    for tool, pkg in (("aarch64-linux-gnu-gcc", "gcc-aarch64-linux-gnu"), ("aarch64-linux-gnu-g++", "g++-aarch64-linux-gnu"),
                      ("qemu-aarch64-static", "qemu-user-static")):
        if not shutil.which(tool):
            missing.append(pkg)
    missing += build_tools_missing()
    if not missing:
        return
    if not install:
        raise Missing(f"missing {' '.join(missing)}")
    if not (shutil.which("apt-get") and shutil.which("dpkg")):
        raise Missing(f"missing {' '.join(missing)}, and no apt-get/dpkg here (Debian's cross toolchain): install "
                      "them yourself")
    foreign = subprocess.run(["dpkg", "--print-foreign-architectures"], capture_output=True, text=True).stdout.split()
    if "arm64" not in foreign:
        _run_root(["dpkg", "--add-architecture", "arm64"])
        _apt_updated = False
    apt_install(missing)


def ensure_venv(install=True):
    """`python3 -m venv` for the project's Python environment (tools/requirements.txt, made by
    t2p_common.project_python): Debian's python3 has no ensurepip, and so no working venv, until
    python3-venv (and its python3.X-venv) is installed."""
    import importlib.util
    if importlib.util.find_spec("ensurepip") is not None and importlib.util.find_spec("venv") is not None:
        return
    _need(["python3-venv", f"python3.{sys.version_info[1]}-venv"], install)


def ensure_mingw_x64(install=True):
    """The MinGW-w64 x86-64 cross compilers, C and C++ ([`MINGW_X64_PACKAGES`])."""
    _need([pkg for tool, pkg in MINGW_X64_PACKAGES.items() if not shutil.which(tool)], install)


def ensure_image_tools(install=True):
    """xorriso (the bootable ISO 9660 image) and GNU cpio (the initramfs) for tools/x86-emu.py's
    guest images."""
    _need([p for p in ("xorriso", "cpio") if not shutil.which(p)], install)


def ensure_llvm19(install=True):
    """llvm-mca-19 for the cycle model (Debian's llvm-19)."""
    if not shutil.which("llvm-mca-19"):
        _need(["llvm-19"], install)


def main():
    ap = argparse.ArgumentParser(
        prog="python3 tools/toolchain.py",
        description="Installs (apt-get, as root or with sudo) what is missing: Rust (Debian's rustc-web and "
                    "cargo-web, only when there is no cargo), libclang-dev, gcc and gdb for the host tests; cmake, "
                    "make, g++ and git for building llama.cpp with the plugin; python3-venv for "
                    "the project's Python environment; rustc-web, libstd-rust-web-dev:arm64, the aarch64 GNU toolchain "
                    "and qemu-user-static for the aarch64 tests and the cross build (not with --host-only); with "
                    "--llvm also llvm-19 (llvm-mca-19) for tools/cycle-model.py. Debian 12.")
    ap.add_argument("--host-only", action="store_true", help="leave out the aarch64 toolchain and qemu")
    ap.add_argument("--llvm", action="store_true", help="also llvm-19 (llvm-mca-19)")
    args = ap.parse_args()
    try:
        ensure_host()
        ensure_venv()
        if not args.host_only:
            ensure_aarch64()
        if args.llvm:
            ensure_llvm19()
    except Missing as e:
        sys.exit(f"toolchain: {e}")
    print("toolchain: host tools, llama.cpp build tools, python3 -m venv" + ("" if args.host_only else ", aarch64 tools")
          + (", llvm-mca-19" if args.llvm else "") + " present")


if __name__ == "__main__":
    main()
