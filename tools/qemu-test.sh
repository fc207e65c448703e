#!/usr/bin/env bash
# Cross-compiles the test suite for aarch64-unknown-linux-gnu (statically) and runs it under
# qemu-aarch64-static for several CPU models, plus the C ABI program linked against the aarch64
# libggml_t2p.a. Installs what is missing first (Debian; NOTES.md §6).
set -euo pipefail

usage() {
  cat <<'EOF'
usage: tools/qemu-test.sh [--cpus "max neoverse-n1 cortex-a76 cortex-a72"] [--no-install] [--release]

Runs every test binary of the crate, built for aarch64 and linked statically, under
`qemu-aarch64-static -cpu <model>` for each CPU model, and the C programs tests/c/abi_smoke.c and
tests/c/fork_smoke.c (load, fork, load) linked statically against the aarch64 libggml_t2p.a. The
first two tests of tests/c_abi.rs, which build those programs on the host, cannot run there: they are
left out by name (reported as SKIP) and the static programs run instead; the third,
release_smoke (the shim's source release), is left out too (qemu-user does not model Rss), and so is
amx_level_hygiene (amx_smoke is x86-64 Linux only). fork_smoke gets a
30-second grace for the thread count (qemu-user lists a joined thread for a while). Prints one line
per CPU model and exits non-zero if any run fails. Logs: target/qemu-logs/<cpu>.log.

  --cpus LIST    qemu CPU models (default: max neoverse-n1 cortex-a76 cortex-a72)
                 max: dotprod + i8mm; neoverse-n1, cortex-a76: dotprod only;
                 cortex-a72: neither (the library must decline: no kernel level but "ref")
  --no-install   do not apt-get missing packages; fail instead
  --release      build the tests with the release profile
  -h, --help     this text

Environment: GGML_T2P_GOLDEN_DIR (golden vectors; default tests/golden), QEMU_TEST_ARGS
(extra arguments passed to every test binary, e.g. a test-name filter).
EOF
}

CPUS="max neoverse-n1 cortex-a76 cortex-a72"
INSTALL=1
PROFILE_ARGS=()
PROFILE_DIR=debug
while [ $# -gt 0 ]; do
  case "$1" in
    --cpus) CPUS="$2"; shift 2 ;;
    --no-install) INSTALL=0; shift ;;
    --release) PROFILE_ARGS=(--release); PROFILE_DIR=release; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "qemu-test: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
TARGET=aarch64-unknown-linux-gnu

# shellcheck source=tools/toolchain.sh
. "$ROOT/tools/toolchain.sh"
ensure_aarch64_toolchain "$INSTALL"

export RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUSTFLAGS="-C target-feature=+crt-static"
export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
export CARGO_TARGET_DIR="$ROOT/target/cross"

echo "qemu-test: building tests for $TARGET ($("$RUSTC" -V))"
# the test binaries, and (last line, "lib ...") the staticlib of the same build for the C programs:
# a separate `cargo build --lib` would compile the crate again (other dependency features)
mapfile -t BINS < <(cargo test --target "$TARGET" "${PROFILE_ARGS[@]}" --no-run --message-format=json 2>/dev/null \
  | python3 -c 'import json,sys
lib = ""
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") != "compiler-artifact": continue
    if m.get("profile", {}).get("test") and m.get("executable"):
        print(m["executable"])
    elif "ggml-t2p" in m.get("package_id", "") and "staticlib" in m["target"].get("kind", []):
        lib = next((f for f in m.get("filenames", []) if f.endswith(".a")), lib)
print("lib " + lib)')
LIB=""
if [ "${#BINS[@]}" -gt 0 ] && [ "${BINS[-1]#lib }" != "${BINS[-1]}" ]; then
  LIB="${BINS[-1]#lib }"
  unset 'BINS[-1]'
fi
if [ "${#BINS[@]}" -eq 0 ]; then
  echo "qemu-test: no test binaries were built; the build output follows" >&2
  cargo test --target "$TARGET" "${PROFILE_ARGS[@]}" --no-run >&2
  exit 1
fi

if [ -z "$LIB" ]; then
  LIB="$CARGO_TARGET_DIR/$TARGET/$PROFILE_DIR/libggml_t2p.a"
  cargo build --lib --target "$TARGET" "${PROFILE_ARGS[@]}" 2>/dev/null || cargo build --lib --target "$TARGET" "${PROFILE_ARGS[@]}"
fi
SMOKE="$CARGO_TARGET_DIR/abi_smoke-aarch64"
aarch64-linux-gnu-gcc -static -O2 -std=c11 -Wall -Werror -I include tests/c/abi_smoke.c "$LIB" -lpthread -ldl -lm -o "$SMOKE"
FORK="$CARGO_TARGET_DIR/fork_smoke-aarch64"
aarch64-linux-gnu-gcc -static -O2 -std=c11 -Wall -Werror -D_POSIX_C_SOURCE=200809L -I include tests/c/fork_smoke.c "$LIB" \
  -lpthread -ldl -lm -o "$FORK"

# tests/c_abi.rs builds the C programs with the host's compiler from inside the test: not under
# qemu. They are skipped by name here (and fail if run) and the static programs above run instead;
# release_smoke (the shim's source release) is not run under qemu-user at all: there MAP_POPULATE
# left Rss at 0 and madvise(MADV_RANDOM) did not split the mapping, so its Rss checks fail
# (seen with Debian's qemu-aarch64-static); it is Linux memory management, not aarch64 code.
C_TESTS_SKIP=(--skip c_program_links_and_runs --skip repack_survives_fork --skip source_release_drops_only_file_pages
              --skip amx_level_hygiene)

mkdir -p "$ROOT/target/qemu-logs"
FAILED=0
for cpu in $CPUS; do
  log="$ROOT/target/qemu-logs/$cpu.log"
  : > "$log"
  ok=1
  passed=0
  start=$SECONDS
  for bin in "${BINS[@]}" "$SMOKE" "$FORK"; do
    args=()
    case "$bin" in
      "$SMOKE") ;;
      "$FORK") args=(1 120 30000) ;;   # layout T2P, child timeout 120 s, thread-count grace 30 s
      *) args=(--nocapture --test-threads=2 "${C_TESTS_SKIP[@]}" ${QEMU_TEST_ARGS:-}) ;;
    esac
    echo "=== $(basename "$bin") ${args[*]}" >> "$log"
    if qemu-aarch64-static -cpu "$cpu" "$bin" "${args[@]}" >> "$log" 2>&1; then :; else ok=0; fi
  done
  passed=$(grep -Eo 'test result: [a-zA-Z]+\. [0-9]+ passed' "$log" | awk '{s += $4} END {print s + 0}' || true)
  failed=$(grep -Eo 'test result: [a-zA-Z]+\. [0-9]+ passed; [0-9]+ failed' "$log" | awk '{s += $6} END {print s + 0}' || true)
  features=$(grep -m1 -Eo 'cpu features 0x[0-9a-f]+, best kernel [^,]*$' "$log" || true)
  if [ "$ok" = 1 ]; then status=PASS; else status=FAIL; FAILED=1; fi
  printf 'qemu -cpu %-12s %s  %d tests passed, %d failed, %s  (%ds)\n' "$cpu" "$status" "$passed" "$failed" "$features" $((SECONDS - start))
  grep -E '^(golden|oracle|c abi|this CPU|kernels|ptq1_0 digits|split|fork smoke)' "$log" | sed 's/^/    /' || true
  echo "    SKIP: tests/c_abi.rs c_program_links_and_runs, repack_survives_fork (host-built C programs; abi_smoke and fork_smoke ran above as static aarch64 programs)"
  echo "    SKIP: tests/c_abi.rs source_release_drops_only_file_pages (release_smoke: qemu-user does not model Rss; it runs natively)"
  echo "    SKIP: tests/c_abi.rs amx_level_hygiene (amx_smoke: x86-64 Linux only; it runs natively and under Bochs)"
  if [ "$ok" != 1 ]; then
    grep -E 'panicked|FAIL|failed|error' "$log" | head -20 | sed 's/^/    ! /'
  fi
done
exit $FAILED
