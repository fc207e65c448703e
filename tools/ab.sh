#!/usr/bin/env bash
# A/B speed runs of llama-bench: stock (GGML_T2P=0 in the patched binary, or a separately built
# stock binary) against ggml-t2p, in interleaved rounds, then one table of pp/tg and ratios.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: tools/ab.sh --bench PATCHED/llama-bench -m MODEL.gguf [options] [-- extra llama-bench args]

Runs interleaved rounds A, B, A, B, ... of llama-bench and prints one table:
  A = stock:    the patched binary with GGML_T2P=0 (or --stock BINARY, a separate stock build)
  B = ggml-t2p: the patched binary as is (GGML_T2P_KERNEL etc. from your environment apply)

options:
  --bench PATH     the patched llama-bench (required)
  --stock PATH     a stock llama-bench to use for A instead of GGML_T2P=0
  -m, --model PATH the GGUF model (required)
  --rounds N       interleaved rounds (default 2)
  -p N             prompt tokens (default 64)
  -n N             generated tokens (default 32)
  -t N             threads (default: all cores)
  --runner CMD     prefix for every run, e.g. "qemu-aarch64-static -cpu max"; results are then
                   labelled EMULATED (they measure the emulator, not the kernels)
  --out DIR        keep each run's JSON there (default: a temporary directory)
  -h, --help       this text

Every run uses --mmap 0 (-mmp 0): with mmap the mapped file stays resident beside the repacked
copy. Extra arguments after -- go to every llama-bench run.
EOF
}

BENCH="" STOCK="" MODEL="" ROUNDS=2 PP=64 TG=32 THREADS="" RUNNER="" OUT=""
EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bench) BENCH="$2"; shift 2 ;;
    --stock) STOCK="$2"; shift 2 ;;
    -m|--model) MODEL="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    -p) PP="$2"; shift 2 ;;
    -n) TG="$2"; shift 2 ;;
    -t) THREADS="$2"; shift 2 ;;
    --runner) RUNNER="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; EXTRA=("$@"); break ;;
    *) echo "ab: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$BENCH" ] && [ -n "$MODEL" ] || { usage >&2; exit 2; }
[ -x "$BENCH" ] || { echo "ab: $BENCH is not an executable" >&2; exit 2; }
[ -z "$STOCK" ] || [ -x "$STOCK" ] || { echo "ab: $STOCK is not an executable" >&2; exit 2; }
[ -r "$MODEL" ] || { echo "ab: cannot read $MODEL" >&2; exit 2; }
THREADS="${THREADS:-$(nproc)}"
if [ -z "$OUT" ]; then OUT="$(mktemp -d)"; trap 'rm -rf "$OUT"' EXIT; else mkdir -p "$OUT"; fi
read -r -a RUN <<< "$RUNNER"

run() { # label round binary env...
  local label="$1" round="$2" bin="$3"; shift 3
  local json="$OUT/$label-$round.json"
  echo "ab: round $round/$ROUNDS $label ..." >&2
  # -v: llama-bench shows ggml's INFO lines (ours among them) only when verbose; they go to the log
  if ! env "$@" "${RUN[@]}" "$bin" -m "$MODEL" -p "$PP" -n "$TG" -t "$THREADS" -r 1 -mmp 0 -v -o json "${EXTRA[@]}" > "$json" 2> "$OUT/$label-$round.log"; then
    tail -n 20 "$OUT/$label-$round.log" >&2
    echo "ab: $label run failed (log above)" >&2
    exit 1
  fi
}

for r in $(seq 1 "$ROUNDS"); do
  if [ -n "$STOCK" ]; then run A "$r" "$STOCK"; else run A "$r" "$BENCH" GGML_T2P=0; fi
  run B "$r" "$BENCH"
done
grep -h "^ggml-t2p" "$OUT"/B-1.log >&2 || echo "ab: warning: no ggml-t2p log line in the patched run (is the binary patched? did it decline?)" >&2

python3 - "$OUT" "$ROUNDS" "${RUNNER:+EMULATED ($RUNNER)}" "${STOCK:+stock binary $STOCK}" <<'PY'
import json, sys, statistics
out, rounds, emulated, stock = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def load(label):
    res = {}
    for r in range(1, rounds + 1):
        for t in json.load(open(f"{out}/{label}-{r}.json")):
            test = f"pp{t['n_prompt']}" if t["n_gen"] == 0 else f"tg{t['n_gen']}"
            res.setdefault(test, []).append(t["avg_ts"])
    return res
a, b = load("A"), load("B")
print(f"A = {stock or 'patched binary, GGML_T2P=0'}; B = ggml-t2p; {rounds} interleaved rounds, median tokens/s")
if emulated:
    print(f"{emulated}: these numbers measure the emulator, not the kernels")
print(f"{'test':8} {'A t/s':>10} {'B t/s':>10} {'B/A':>7}")
for test in a:
    ma, mb = statistics.median(a[test]), statistics.median(b.get(test, [float('nan')]))
    print(f"{test:8} {ma:10.2f} {mb:10.2f} {mb / ma:6.2f}x")
PY
