#!/usr/bin/env bash
# Runs a patched llama-perplexity two ways and requires identical results: every per-chunk value
# it prints, the final estimate, and the file of all saved log-probabilities (--kl-divergence-base),
# byte for byte. Exits non-zero on any mismatch.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: tools/ppl-check.sh --perplexity PATCHED/llama-perplexity -m MODEL.gguf -f TEXT [options] [-- extra args]

Runs llama-perplexity twice, A and B, and compares:
  - the per-chunk values "[i]ppl" and the final estimate, as printed (4 decimals);
  - the saved log-probabilities of every token (--kl-divergence-base FILE, 16-bit per vocab
    entry and per token), byte for byte: a difference in any logit that moves any of these
    shows up here, far below the printed precision.
Exit status 0 only if everything matches.

  A (default): GGML_T2P_KERNEL=ref, the library's scalar reference kernels
  B (default): the patched binary as is (best kernels for this CPU)

options:
  --perplexity PATH  the patched llama-perplexity (required)
  -m PATH            model (required)
  -f PATH            text file (required)
  -c N               context per chunk (default 128)
  --chunks N         chunks (default 3)
  -t N               threads (default: all cores)
  --a-env "K=V ..."  environment for run A (default "GGML_T2P_KERNEL=ref")
  --b-env "K=V ..."  environment for run B (default "")
  --a-args "..."     extra llama-perplexity arguments for A only (e.g. "-ub 1")
  --b-args "..."     extra arguments for B only (e.g. "-ub 64")
  --runner CMD       prefix, e.g. "qemu-aarch64-static -cpu max"
  --out DIR          keep logs and log-prob files there (default: temporary)
  -h, --help         this text

Examples:
  default vs reference kernels: tools/ppl-check.sh --perplexity build/bin/llama-perplexity -m m.gguf -f t.txt
  -ub 1 vs -ub 64:              ... --a-env "" --a-args "-ub 1" --b-args "-ub 64"
  declined vs off (no dotprod): ... --a-env "GGML_T2P=0" --runner "qemu-aarch64-static -cpu cortex-a72"
EOF
}

PPL="" MODEL="" TEXT="" CTX=128 CHUNKS=3 THREADS="" RUNNER="" OUT=""
A_ENV="GGML_T2P_KERNEL=ref" B_ENV="" A_ARGS="" B_ARGS=""
EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    --perplexity) PPL="$2"; shift 2 ;;
    -m) MODEL="$2"; shift 2 ;;
    -f) TEXT="$2"; shift 2 ;;
    -c) CTX="$2"; shift 2 ;;
    --chunks) CHUNKS="$2"; shift 2 ;;
    -t) THREADS="$2"; shift 2 ;;
    --a-env) A_ENV="$2"; shift 2 ;;
    --b-env) B_ENV="$2"; shift 2 ;;
    --a-args) A_ARGS="$2"; shift 2 ;;
    --b-args) B_ARGS="$2"; shift 2 ;;
    --runner) RUNNER="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; EXTRA=("$@"); break ;;
    *) echo "ppl-check: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$PPL" ] && [ -n "$MODEL" ] && [ -n "$TEXT" ] || { usage >&2; exit 2; }
[ -x "$PPL" ] || { echo "ppl-check: $PPL is not an executable" >&2; exit 2; }
[ -r "$MODEL" ] && [ -r "$TEXT" ] || { echo "ppl-check: cannot read $MODEL or $TEXT" >&2; exit 2; }
THREADS="${THREADS:-$(nproc)}"
if [ -z "$OUT" ]; then OUT="$(mktemp -d)"; trap 'rm -rf "$OUT"' EXIT; else mkdir -p "$OUT"; fi
read -r -a RUN <<< "$RUNNER"

run() { # label env args
  local label="$1" envs="$2" args="$3" start=$SECONDS
  read -r -a E <<< "$envs"
  read -r -a A <<< "$args"
  echo "ppl-check: run $label: env [${envs}] args [${args}] ${RUNNER:+runner [$RUNNER]}" >&2
  # -lv 4: llama-perplexity shows ggml's INFO lines (ours among them) only at this verbosity
  if ! env "${E[@]}" "${RUN[@]}" "$PPL" -m "$MODEL" -f "$TEXT" -c "$CTX" --chunks "$CHUNKS" -t "$THREADS" --no-mmap -lv 4 \
      --kl-divergence-base "$OUT/$label.logprobs" "${A[@]}" "${EXTRA[@]}" > "$OUT/$label.log" 2>&1; then
    tail -n 20 "$OUT/$label.log" >&2
    echo "ppl-check: run $label failed (log above)" >&2
    exit 1
  fi
  grep -h "ggml-t2p" "$OUT/$label.log" | sed "s/^/    $label: /" >&2 || true
  echo "    $label: $((SECONDS - start)) s" >&2
}
run A "$A_ENV" "$A_ARGS"
run B "$B_ENV" "$B_ARGS"

chunks() { grep -Eo '\[[0-9]+\][0-9.]+(nan|inf)?' "$1" | tr '\n' ' '; }
final() { grep -Eo 'Final estimate: PPL = [0-9.]+ \+/- [0-9.]+' "$1" || echo "no final estimate"; }
ca="$(chunks "$OUT/A.log")" cb="$(chunks "$OUT/B.log")"
fa="$(final "$OUT/A.log")" fb="$(final "$OUT/B.log")"
echo "A: $ca| $fa"
echo "B: $cb| $fb"
status=0
[ -n "$ca" ] || { echo "ppl-check: no per-chunk values in run A" >&2; status=1; }
if [ "$ca" = "$cb" ] && [ "$fa" = "$fb" ]; then echo "per-chunk values: identical ($(echo "$ca" | wc -w) chunks)"; else echo "per-chunk values: DIFFER"; status=1; fi
if cmp -s "$OUT/A.logprobs" "$OUT/B.logprobs"; then
  echo "log-prob files: identical ($(stat -c %s "$OUT/A.logprobs") bytes)"
else
  echo "log-prob files: DIFFER ($(cmp "$OUT/A.logprobs" "$OUT/B.logprobs" | head -1))"
  status=1
fi
[ "$status" = 0 ] && echo "ppl-check: PASS" || echo "ppl-check: FAIL"
exit $status
