# Installs what the host tests and the aarch64 cross tests need on a Debian 12 machine (NOTES.md §6),
# only when it is missing. Run it (`bash tools/toolchain.sh [--llvm]`), or source it for its
# functions, as the project's scripts do.

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

# libclang for bindgen (the abi-check feature) and a C compiler for the C ABI test.
ensure_host_toolchain() {
  local install="${1:-1}" missing=()
  command -v cargo >/dev/null || { echo "toolchain: cargo not found (install Rust with rustup)" >&2; return 1; }
  command -v cc >/dev/null || missing+=(gcc)
  ls /usr/lib/llvm-*/lib/libclang.so* >/dev/null 2>&1 || ls /usr/lib/x86_64-linux-gnu/libclang*.so* >/dev/null 2>&1 || missing+=(libclang-dev)
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
  case "${1:-}" in
    -h|--help)
      echo "usage: bash tools/toolchain.sh [--llvm]"
      echo "Installs (apt-get, as root or with sudo) what is missing: libclang-dev and gcc for the host"
      echo "tests; rustc-web, libstd-rust-web-dev:arm64, the aarch64 GNU toolchain and qemu-user-static"
      echo "for the aarch64 tests; with --llvm also llvm-19 (llvm-mca-19) for tools/cycle-model.py."
      exit 0 ;;
    ""|--llvm) ;;
    *) echo "toolchain: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  ensure_host_toolchain 1
  ensure_aarch64_toolchain 1
  [ "${1:-}" != --llvm ] || ensure_llvm19 1
  echo "toolchain: host and aarch64 tools present$([ "${1:-}" = --llvm ] && echo ', llvm-mca-19 too')"
fi
