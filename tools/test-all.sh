#!/usr/bin/env bash
# The project's test command (README.md; .ci/run calls it): installs what is missing, runs the host
# test suite (with the bindgen ABI check and the C program), checks that the benchmarks and tools
# build, then cross-compiles the tests for aarch64 and runs them under qemu for four CPU models.
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: tools/test-all.sh [--no-install] [--host-only] [--no-x86-emu]

  --no-install   fail instead of apt-get installing missing packages
  --host-only    skip the aarch64 qemu runs and the emulated x86 levels
  --no-x86-emu   skip the x86-64 levels this CPU lacks (AVX-VNNI, AVX-512 VNNI) under Bochs
  -h, --help     this text

Environment: GGML_T2P_GOLDEN_DIR (default ../shared/golden beside the repo; a missing directory fails).
USAGE
}

INSTALL=1
QEMU=1
X86EMU=1
while [ $# -gt 0 ]; do
  case "$1" in
    --no-install) INSTALL=0; shift ;;
    --host-only) QEMU=0; X86EMU=0; shift ;;
    --no-x86-emu) X86EMU=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "test-all: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
# shellcheck source=tools/toolchain.sh
. "$ROOT/tools/toolchain.sh"
ensure_host_toolchain "$INSTALL"
[ "$QEMU" = 0 ] || ensure_aarch64_toolchain "$INSTALL"

start=$SECONDS
echo "== host: cargo test --features abi-check ($(rustc -V))"
mkdir -p target
log=target/host-test.log
status=0
cargo test --features abi-check -- --nocapture > "$log" 2>&1 || status=$?
grep -E '^(golden|oracle|split|kernels|ptq1_0 digits|c abi)|test result|FAILED|panicked' "$log" || true
if [ "$status" != 0 ]; then
  tail -n 60 "$log" >&2
  echo "test-all: host tests FAILED (full log: $log)" >&2
  exit 1
fi

echo "== host: rustfmt and clippy"
if cargo fmt --version >/dev/null 2>&1; then cargo fmt --check; else echo "test-all: rustfmt not installed, skipped"; fi
if cargo clippy --version >/dev/null 2>&1; then
  cargo clippy --quiet --all-targets --features abi-check -- -D warnings
else
  echo "test-all: clippy not installed, skipped"
fi

echo "== other targets: the Windows and macOS code paths compile and pass clippy (no linking)"
for t in aarch64-pc-windows-msvc aarch64-apple-darwin x86_64-pc-windows-msvc; do
  if command -v rustup >/dev/null 2>&1 && { rustup target list --installed 2>/dev/null | grep -qx "$t" ||
       { [ "$INSTALL" = 1 ] && timeout 300 rustup target add "$t" >/dev/null 2>&1; }; }; then
    cargo clippy --quiet --target "$t" --lib -- -D warnings
    echo "test-all: $t: clippy clean"
  else
    echo "test-all: no Rust std for $t on this machine (rustup target add $t), skipped"
  fi
done

echo "== host: benches and tools build"
cargo bench --no-run --quiet
bash -n tools/qemu-test.sh tools/toolchain.sh
# every tool answers --help (ab.py, ppl-check.py and t2p.py replaced ab.sh and ppl-check.sh)
for t in tools/*.py; do
  PYTHONDONTWRITEBYTECODE=1 python3 "$t" --help >/dev/null || { echo "test-all: python3 $t --help failed" >&2; exit 1; }
done
for t in tools/*.sh; do bash "$t" --help >/dev/null || { echo "test-all: bash $t --help failed" >&2; exit 1; }; done

echo "== ppl-check verdict (tests/test_ppl_check.py)"
PYTHONDONTWRITEBYTECODE=1 python3 tests/test_ppl_check.py

echo "== Q2_KT converter (tests/test_q2kt.py: numpy + gguf==0.19.0, installed like make-test-model does)"
q2kt_site=$(PYTHONDONTWRITEBYTECODE=1 python3 - "$INSTALL" <<'PY'
import importlib.util, sys
spec = importlib.util.spec_from_file_location("make_test_model", "tools/make-test-model.py")
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
m.need_packages(False, sys.argv[1] == "1")   # exits non-zero when they are missing and not installable
print(m.private_site())
PY
) || { echo "test-all: numpy/gguf for the Q2_KT tests are missing" >&2; exit 1; }
PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="${q2kt_site##*$'\n'}${PYTHONPATH:+:$PYTHONPATH}" python3 tests/test_q2kt.py

echo "== CMake fragment under mock Windows (MSVC, clang-cl) and macOS toolchains"
cmake -DWORK="$ROOT/target/cmake-tests" -P ggml-glue/cmake-tests/run.cmake

if [ "$X86EMU" = 1 ] && [ "$(uname -m)" = x86_64 ]; then
  echo "== x86-64 levels under Bochs (AVX-VNNI, AVX-512 VNNI: real instructions, emulated CPU)"
  python3 tools/x86-emu.py --self-test
  python3 tools/x86-emu-test.py
fi

if [ "$QEMU" = 1 ]; then
  echo "== aarch64 under qemu"
  bash tools/qemu-test.sh --no-install
fi
echo "test-all: PASS ($((SECONDS - start)) s)"
