# Installs what the host tests, the llama.cpp builds (native and aarch64 cross) and the aarch64 cross
# tests need on a Debian 12 machine (NOTES.md §6), only when it is missing. Run it
# (`bash tools/toolchain.sh [--host-only] [--llvm]`), or source it for its functions, as the project's
# scripts do.

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

apt_install() {
  echo "toolchain: installing $*" >&2
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2
}

apt_updated=0
apt_update_once() {
  if [ "$apt_updated" = 0 ]; then
    as_root apt-get update -qq >&2
    apt_updated=1
  fi
}

# CMake, make, a C++ compiler and git: what a llama.cpp build with the plugin needs besides cargo
# (README's build commands, tools/t2p.py, the ggml-level test).
build_tools_missing() {
  command -v cmake >/dev/null || echo cmake
  command -v make >/dev/null || echo make
  command -v g++ >/dev/null || echo g++
  command -v git >/dev/null || echo git
}

# libclang's C library as bindgen loads it (libclang.so*, libclang-N.so*); libclang-cpp (the C++
# interface, installed with llvm-N) is not it.
have_libclang() {
  local f
  for f in /usr/lib/llvm-*/lib/libclang.so* /usr/lib/llvm-*/lib/libclang-[0-9]*.so* \
           /usr/lib/*-linux-gnu/libclang.so* /usr/lib/*-linux-gnu/libclang-[0-9]*.so*; do
    [ -e "$f" ] && return 0
  done
  [ -n "${LIBCLANG_PATH:-}" ] && ls "$LIBCLANG_PATH"/libclang*.so* >/dev/null 2>&1
}

# Rust (Debian's rustc-web/cargo-web, 1.96, when there is no cargo at all), libclang for bindgen (the
# abi-check feature), a C compiler for the C ABI test, and the llama.cpp build tools above.
ensure_host_toolchain() {
  local install="${1:-1}" missing=()
  if ! command -v cargo >/dev/null && ! [ -x "$HOME/.cargo/bin/cargo" ]; then
    missing+=(rustc-web cargo-web)
  fi
  command -v cc >/dev/null || missing+=(gcc)
  command -v gdb >/dev/null || missing+=(gdb)   # tools name the function a crashed run died in
  have_libclang || missing+=(libclang-dev)
  mapfile -t -O "${#missing[@]}" missing < <(build_tools_missing)
  if [ "${#missing[@]}" -gt 0 ]; then
    [ "$install" = 1 ] || { echo "toolchain: missing ${missing[*]}" >&2; return 1; }
    apt_update_once
    apt_install "${missing[@]}"
  fi
}

# Debian's rustc-web (1.96, with an aarch64 std), the aarch64 GNU toolchain and qemu-user-static.
ensure_aarch64_toolchain() {
  local install="${1:-1}" missing=()
  [ -x /usr/bin/rustc ] && [ -x /usr/bin/rustdoc ] || missing+=(rustc-web cargo-web)
  [ -d /usr/lib/rustlib/aarch64-unknown-linux-gnu/lib ] || missing+=(libstd-rust-web-dev:arm64)
  command -v aarch64-linux-gnu-gcc >/dev/null || missing+=(gcc-aarch64-linux-gnu)
  command -v aarch64-linux-gnu-g++ >/dev/null || missing+=(g++-aarch64-linux-gnu)
  command -v qemu-aarch64-static >/dev/null || missing+=(qemu-user-static)
  mapfile -t -O "${#missing[@]}" missing < <(build_tools_missing)   # the cross build of llama.cpp
  if [ "${#missing[@]}" -gt 0 ]; then
    [ "$install" = 1 ] || { echo "toolchain: missing ${missing[*]}" >&2; return 1; }
    if ! dpkg --print-foreign-architectures | grep -qx arm64; then
      as_root dpkg --add-architecture arm64
      apt_updated=0
    fi
    apt_update_once
    apt_install "${missing[@]}"
  fi
}

# pip for tools/make-test-model.py (it installs numpy, gguf and the model parts with it).
ensure_python_pip() {
  local install="${1:-1}"
  command -v python3 >/dev/null && python3 -m pip --version >/dev/null 2>&1 && return 0
  [ "$install" = 1 ] || { echo "toolchain: missing python3-pip" >&2; return 1; }
  apt_update_once
  apt_install python3 python3-pip
}

# The MinGW-w64 x86-64 cross compilers (C and C++): the CMake fragment's configure with the real
# compilers (ggml-glue/cmake-tests/run.cmake) and the Windows stage (tools/windows-test.py) use them.
ensure_mingw_x64() {
  local install="${1:-1}" missing=()
  command -v x86_64-w64-mingw32-gcc >/dev/null || missing+=(gcc-mingw-w64-x86-64)
  command -v x86_64-w64-mingw32-g++ >/dev/null || missing+=(g++-mingw-w64-x86-64)
  [ "${#missing[@]}" = 0 ] && return 0
  [ "$install" = 1 ] || { echo "toolchain: missing ${missing[*]}" >&2; return 1; }
  apt_update_once
  apt_install "${missing[@]}"
}

# llvm-mca-19 for the cycle model (Debian's llvm-19).
ensure_llvm19() {
  local install="${1:-1}"
  command -v llvm-mca-19 >/dev/null && return 0
  [ "$install" = 1 ] || { echo "toolchain: missing llvm-19 (llvm-mca-19)" >&2; return 1; }
  apt_update_once
  apt_install llvm-19
}

# Run directly: install everything the project's scripts use.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  llvm=0 aarch64=1
  for arg in "$@"; do
    case "$arg" in
      -h|--help)
        echo "usage: bash tools/toolchain.sh [--host-only] [--llvm]"
        echo "Installs (apt-get, as root or with sudo) what is missing: Rust (Debian's rustc-web and cargo-web,"
        echo "only when there is no cargo), libclang-dev and gcc for the host tests; cmake, make, g++ and git"
        echo "for building llama.cpp with the plugin; python3-pip for tools/make-test-model.py; rustc-web,"
        echo "libstd-rust-web-dev:arm64, the aarch64 GNU toolchain and qemu-user-static for the aarch64 tests"
        echo "and the cross build (not with --host-only); with --llvm also llvm-19 (llvm-mca-19) for"
        echo "tools/cycle-model.py."
        exit 0 ;;
      --llvm) llvm=1 ;;
      --host-only) aarch64=0 ;;
      *) echo "toolchain: unknown argument $arg (see --help)" >&2; exit 2 ;;
    esac
  done
  ensure_host_toolchain 1
  ensure_python_pip 1
  [ "$aarch64" = 0 ] || ensure_aarch64_toolchain 1
  [ "$llvm" = 0 ] || ensure_llvm19 1
  echo "toolchain: host tools, llama.cpp build tools, pip$([ "$aarch64" = 1 ] && echo ', aarch64 tools')$([ "$llvm" = 1 ] && echo ', llvm-mca-19') present"
fi
