#!/usr/bin/env bash
# The project's test command (README.md; .ci/run calls it with --require-all): installs what is
# missing, runs the host test suite (every kernel level this CPU has, natively; the bindgen ABI
# check; the C programs), rustfmt and clippy (also for Windows and macOS targets), checks that the
# benchmarks and tools build, runs the tool tests, the C programs built for Windows (MinGW-w64) under
# Wine, then the x86-64 levels this CPU lacks under an emulator and the aarch64 build under qemu. Every stage prints its time; a stage that cannot run
# says "SKIP: <stage>: <reason>"; the summary lists every stage and which kernel levels ran natively
# and which emulated.
set -eEuo pipefail

usage() {
  cat <<'USAGE'
usage: tools/test-all.sh [--no-install] [--host-only] [--no-x86-emu] [--no-windows] [--require-all]

  --no-install   fail instead of installing missing packages (apt-get, rustup targets)
  --host-only    skip the aarch64 qemu runs, the emulated x86 levels and the Windows build
  --no-x86-emu   skip the x86-64 levels this CPU lacks (run under Bochs)
  --no-windows   skip the MinGW-w64 Windows build of the C programs run under Wine
  --require-all  fail when a required stage was skipped (rustfmt, clippy, the other targets'
                 clippy, the Windows build under Wine, the emulated x86 levels, qemu);
                 on by default when CI=true
  -h, --help     this text

Environment: GGML_T2P_GOLDEN_DIR (golden vectors; default tests/golden of this checkout),
CI (=true: as --require-all).
USAGE
}

INSTALL=1
QEMU=1
X86EMU=1
WINDOWS=1
REQUIRE_ALL=0
[ "${CI:-}" = true ] && REQUIRE_ALL=1
while [ $# -gt 0 ]; do
  case "$1" in
    --no-install) INSTALL=0; shift ;;
    --host-only) QEMU=0; X86EMU=0; WINDOWS=0; shift ;;
    --no-x86-emu) X86EMU=0; shift ;;
    --no-windows) WINDOWS=0; shift ;;
    --require-all) REQUIRE_ALL=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "test-all: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
mkdir -p target

# --- stages: each prints "== name", then "-- name: PASS (N s)"; a skip prints "SKIP: name: why"
START=$SECONDS
SUMMARY=()          # "name|result|seconds"
REQUIRED_SKIPS=()
STAGE=""
STAGE_T0=$SECONDS

begin() {
  STAGE="$1"
  STAGE_T0=$SECONDS
  echo "== $STAGE"
}

pass() {
  local t=$((SECONDS - STAGE_T0))
  echo "-- $STAGE: PASS (${t} s)"
  SUMMARY+=("$STAGE|PASS|$t")
  STAGE=""
}

# skip NAME REQUIRED REASON: REQUIRED=1 for a stage CI must run
skip() {
  local name="$1" required="$2" reason="$3"
  echo "SKIP: $name: $reason"
  if [ "$required" = 1 ]; then
    SUMMARY+=("$name|SKIP (required)|0")
    REQUIRED_SKIPS+=("$name: $reason")
  else
    SUMMARY+=("$name|SKIP|0")
  fi
}

summary() {
  local line name result t
  echo "== summary"
  for line in "${SUMMARY[@]}"; do
    IFS='|' read -r name result t <<<"$line"
    printf '  %-58s %-16s %5s s\n' "$name" "$result" "$t"
  done
  [ -z "${NATIVE_LEVELS:-}" ] || echo "  kernel levels natively (host cargo test, this CPU): $NATIVE_LEVELS"
  [ -z "${EMU_LEVELS:-}" ] || echo "  x86-64 under Bochs: $EMU_LEVELS"
  [ -z "${QEMU_LEVELS:-}" ] || echo "  aarch64 under qemu: $QEMU_LEVELS"
}

on_error() {
  local status=$?
  trap - ERR
  if [ -n "$STAGE" ]; then
    echo "-- $STAGE: FAIL ($((SECONDS - STAGE_T0)) s, exit status $status)" >&2
    SUMMARY+=("$STAGE|FAIL|$((SECONDS - STAGE_T0))")
  fi
  summary >&2
  echo "test-all: FAIL ($((SECONDS - START)) s)" >&2
  exit 1
}
trap on_error ERR

# shellcheck source=tools/toolchain.sh
. "$ROOT/tools/toolchain.sh"
begin "toolchain (install what is missing)"
ensure_host_toolchain "$INSTALL"
[ "$QEMU" = 0 ] || ensure_aarch64_toolchain "$INSTALL"
pass

begin "host: cargo test --features abi-check ($(rustc -V | cut -d' ' -f1-2))"
log=target/host-test.log
status=0
cargo test --features abi-check -- --nocapture > "$log" 2>&1 || status=$?
grep -E '^(golden|oracle|split|kernels|ptq1_0 digits|c abi|this CPU|fork smoke|release smoke)|test result|FAILED|panicked' "$log" || true
if [ "$status" != 0 ]; then
  tail -n 60 "$log" >&2
  echo "test-all: host tests FAILED (full log: $log)" >&2
  false
fi
# the levels the suite ran natively, from the oracle's summary line ("X16/avx2", ...)
NATIVE_LEVELS=$(grep -m1 '^oracle:' "$log" | grep -o '"[^"]*/[^"]*"' | sed 's/.*\/\(.*\)"/\1/' | awk '!s[$0]++' | tr '\n' ' ' || true)
NATIVE_LEVELS="${NATIVE_LEVELS% }"
echo "test-all: kernel levels run natively: $NATIVE_LEVELS"
pass

if cargo fmt --version >/dev/null 2>&1; then
  begin "host: rustfmt"; cargo fmt --check; pass
else
  skip "host: rustfmt" 1 "cargo fmt is not installed (rustup component add rustfmt)"
fi
if cargo clippy --version >/dev/null 2>&1; then
  begin "host: clippy --all-targets --features abi-check"
  cargo clippy --quiet --all-targets --features abi-check -- -D warnings
  pass
else
  skip "host: clippy" 1 "cargo clippy is not installed (rustup component add clippy)"
fi

# the Windows and macOS code paths compile and pass clippy (no linking)
for t in aarch64-pc-windows-msvc aarch64-apple-darwin x86_64-pc-windows-msvc; do
  if ! cargo clippy --version >/dev/null 2>&1; then
    skip "clippy --target $t" 1 "cargo clippy is not installed"
  elif ! command -v rustup >/dev/null 2>&1; then
    skip "clippy --target $t" 1 "no rustup to add the Rust std for $t"
  elif ! rustup target list --installed 2>/dev/null | grep -qx "$t" &&
       ! { [ "$INSTALL" = 1 ] && timeout 300 rustup target add "$t" >/dev/null 2>&1; }; then
    skip "clippy --target $t" 1 "no Rust std for $t ($([ "$INSTALL" = 1 ] && echo 'rustup target add failed' || echo '--no-install'))"
  else
    begin "clippy --target $t --lib"
    cargo clippy --quiet --target "$t" --lib -- -D warnings
    pass
  fi
done

begin "host: benches build, tools answer --help"
if [ "$X86EMU" = 1 ] && [ "$(uname -m)" = x86_64 ] && [ "$(uname -s)" = Linux ]; then
  # built as tools/x86-emu-test.py builds its static test binaries (same folder, target, flags and
  # release settings), so that stage reuses the crate and its dependencies instead of compiling
  # them a further time
  CARGO_TARGET_DIR="$ROOT/target/static" CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS="-C target-feature=+crt-static" \
    cargo bench --no-run --quiet --target x86_64-unknown-linux-gnu
else
  cargo bench --no-run --quiet
fi
bash -n tools/qemu-test.sh tools/toolchain.sh
for t in tools/*.py; do
  PYTHONDONTWRITEBYTECODE=1 python3 "$t" --help >/dev/null || { echo "test-all: python3 $t --help failed" >&2; false; }
done
for t in tools/*.sh; do bash "$t" --help >/dev/null || { echo "test-all: bash $t --help failed" >&2; false; }; done
pass

begin "ppl-check verdict, tools, profile and peers (tests/test_ppl_check.py, test_tools.py, test_profile.py, test_peers.py)"
PYTHONDONTWRITEBYTECODE=1 python3 tests/test_ppl_check.py
PYTHONDONTWRITEBYTECODE=1 python3 tests/test_tools.py
PYTHONDONTWRITEBYTECODE=1 python3 tests/test_profile.py
PYTHONDONTWRITEBYTECODE=1 python3 tests/test_peers.py
pass

begin "Q2_KT converter, synthetic models, PTQ1_0 encoder (tests/test_q2kt.py, test_synthetic.py, test_ptq1_0_encoder.py: numpy + gguf==0.19.0)"
q2kt_site=$(PYTHONDONTWRITEBYTECODE=1 python3 - "$INSTALL" <<'PY'
import importlib.util, sys
spec = importlib.util.spec_from_file_location("make_test_model", "tools/make-test-model.py")
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
m.need_packages(False, sys.argv[1] == "1")   # exits non-zero when they are missing and not installable
print(m.private_site())
PY
) || { echo "test-all: numpy/gguf for the Q2_KT tests are missing" >&2; false; }
PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="${q2kt_site##*$'\n'}${PYTHONPATH:+:$PYTHONPATH}" python3 tests/test_q2kt.py
PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="${q2kt_site##*$'\n'}${PYTHONPATH:+:$PYTHONPATH}" python3 tests/test_synthetic.py
PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="${q2kt_site##*$'\n'}${PYTHONPATH:+:$PYTHONPATH}" python3 tests/test_ptq1_0_encoder.py
pass

begin "CMake fragment under mock Windows (MSVC, clang-cl) and macOS toolchains"
# the real MinGW-w64 compilers for its one real configure (installed here, so that every run on a
# Debian host checks it, not only runs after the Windows stage installed them)
if [ "$(uname -s)" = Linux ] && command -v apt-get >/dev/null; then
  ensure_mingw_x64 "$INSTALL" || echo "test-all: the real MinGW-w64 configure will be skipped"
fi
cmake -DWORK="$ROOT/target/cmake-tests" -P ggml-glue/cmake-tests/run.cmake
pass

if [ "$WINDOWS" = 0 ]; then
  skip "Windows: MinGW-w64 x86-64 build run under Wine" 1 "--no-windows or --host-only given"
elif [ "$(uname -m)" != x86_64 ] || [ "$(uname -s)" != Linux ]; then
  skip "Windows: MinGW-w64 x86-64 build run under Wine" 1 "not an x86-64 Linux host ($(uname -s) $(uname -m))"
else
  begin "Windows: MinGW-w64 x86-64 build of the C programs, run under Wine (tools/windows-test.py)"
  python3 tools/windows-test.py $([ "$INSTALL" = 1 ] || echo --no-install)
  pass
fi

if [ "$X86EMU" = 0 ]; then
  skip "x86-64 levels this CPU lacks, under Bochs" 1 "--no-x86-emu or --host-only given"
elif [ "$(uname -m)" != x86_64 ]; then
  skip "x86-64 levels this CPU lacks, under Bochs" 1 "not an x86-64 host ($(uname -m))"
else
  begin "x86-64 levels this CPU lacks, under Bochs (and the AVX2-only decline path)"
  python3 tools/x86-emu-test.py --self-test | tee target/x86-emu-test.out
  EMU_LEVELS=$(sed -n 's/^x86-emu-test: emulated: //p' target/x86-emu-test.out | tail -n 1 || true)
  pass
fi

if [ "$QEMU" = 0 ]; then
  skip "aarch64 under qemu" 1 "--host-only given"
else
  begin "aarch64 under qemu"
  bash tools/qemu-test.sh --no-install | tee target/qemu-test.out
  QEMU_LEVELS=$(sed -n 's/^qemu -cpu \([^ ]*\) *PASS.*best kernel \([^ ]*\).*/\1 (best \2)/p' target/qemu-test.out | paste -sd, - | sed 's/,/, /g' || true)
  pass
fi

summary
if [ "${#REQUIRED_SKIPS[@]}" -gt 0 ]; then
  if [ "$REQUIRE_ALL" = 1 ]; then
    printf 'test-all: a required stage was skipped: %s\n' "${REQUIRED_SKIPS[@]}" >&2
    echo "test-all: FAIL ($((SECONDS - START)) s; --require-all or CI=true)" >&2
    exit 1
  fi
  echo "test-all: PASS with ${#REQUIRED_SKIPS[@]} required stage(s) skipped ($((SECONDS - START)) s; CI would fail)"
else
  echo "test-all: PASS ($((SECONDS - START)) s)"
fi
