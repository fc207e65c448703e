#!/usr/bin/env python3
"""A/B speed runs of llama-bench: stock (GGML_T2P=0 in the patched binary, or a separately built stock
binary) against ggml-t2p, in interleaved rounds, then one table of pp/tg tokens/s and ratios, and the
plugin's state in each configuration, read from the runs' logs. Python 3 standard library only; runs
on Linux, macOS and Windows.

Runs interleaved rounds A, B, A, B, ... of llama-bench and prints one table:
  A = stock:    the patched binary with GGML_T2P=0 (or --stock BINARY, a separate stock build)
  B = ggml-t2p: the patched binary as is (GGML_T2P_KERNEL etc. from your environment apply)

Before the first round it reports the machine's load (load average, cores, and the cores busy during
2 s just before the runs) and warns when other work plus the runs' threads oversubscribe the cores:
llama-bench threads spin at barriers, so a busy machine slows both columns, unequally.
A run that dies by a signal is named (e.g. SIGILL) with, when gdb is installed (or the log has a
backtrace), the function and instruction where it died; see docs/building.md, "When a run crashes".

Every run uses -mmp 0 (no mmap; --mmap to keep llama-bench's default) and -v, which makes llama-bench
show ggml's INFO lines, the plugin's among them. After the table, one line per configuration says what
the plugin did: enabled (which kernel, how many tensors repacked), declined (this CPU lacks dotprod or
AVX2: stock code ran in both columns), disabled, or that no ggml-t2p line appeared (the binary is not
patched, or its log level hides INFO lines). Extra arguments after -- go to every llama-bench run.

Exit status: 0 when every run succeeded, 1 when a run failed, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys

sys.dont_write_bytecode = True    # no __pycache__ beside the tools
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import t2p_common as tc  # noqa: E402

TOOL = "ab"


def parser():
    ap = argparse.ArgumentParser(
        prog="tools/ab.py", formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="%(prog)s --bench PATCHED/llama-bench -m MODEL.gguf [options] [-- extra llama-bench args]",
        description=__doc__.split("\n\n", 1)[1],
        epilog="examples:\n"
               "  tools/ab.py --bench build/bin/llama-bench -m model-pq2_0.gguf\n"
               "  tools/ab.py --bench build/bin/llama-bench --stock stock/bin/llama-bench -m m.gguf -t 4 -- -ub 64\n"
               "  tools/ab.py --bench build-arm/bin/llama-bench -m m.gguf --runner \"qemu-aarch64-static -cpu max\"")
    ap.add_argument("--bench", metavar="PATH", required=True, help="the patched llama-bench (required)")
    ap.add_argument("--stock", metavar="PATH", help="a stock llama-bench to use for A instead of GGML_T2P=0")
    ap.add_argument("-m", "--model", metavar="PATH", required=True, help="the GGUF model (required)")
    ap.add_argument("--rounds", type=int, default=2, metavar="N", help="interleaved rounds (default 2)")
    ap.add_argument("-p", type=int, default=64, metavar="N", dest="pp", help="prompt tokens (default 64)")
    ap.add_argument("-n", type=int, default=32, metavar="N", dest="tg", help="generated tokens (default 32)")
    ap.add_argument("-t", type=int, metavar="N", dest="threads", help="threads (default: all cores)")
    ap.add_argument("--runner", metavar="CMD", default="",
                    help="prefix for every run, e.g. \"qemu-aarch64-static -cpu max\"; results are then labelled "
                         "EMULATED (they measure the emulator, not the kernels)")
    ap.add_argument("--out", metavar="DIR", help="keep each run's JSON and log there (default: a temporary directory)")
    ap.add_argument("--mmap", action="store_true",
                    help="run with mmap (-mmp 1) instead of -mmp 0; see docs/architecture.md on when mmap costs memory")
    return ap


def parse(argv):
    return tc.parse_with_extra(parser(), argv)


def load_json(path):
    """llama-bench -o json: a list of test results. Returns {test: avg tokens/s}."""
    res = {}
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    for t in data:
        test = f"pp{t['n_prompt']}" if t["n_gen"] == 0 else f"tg{t['n_gen']}"
        res[test] = t["avg_ts"]
    return res


def run(argv):
    """Returns (exit status, result dict: rows [(test, a, b, ratio)], states {label: (state, summary)},
    lines [printed result lines])."""
    ap, args = parse(argv)
    result = {"rows": [], "states": {}, "lines": []}
    bench = tc.resolve_binary(args.bench)
    if not bench or not tc.is_executable(bench):
        ap.error(f"{args.bench} is not an executable")
    stock = None
    if args.stock:
        stock = tc.resolve_binary(args.stock)
        if not stock or not tc.is_executable(stock):
            ap.error(f"{args.stock} is not an executable")
    tc.file_arg(ap, "-m", args.model)
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    tc.token_counts_arg(ap, args.pp, args.tg)
    threads = args.threads or tc.cpu_count()
    runner = tc.runner_arg(ap, args.runner)
    model = os.path.abspath(args.model)
    with tc.out_dir(ap, args.out, "t2p-ab-") as out:
        return _run(args, result, bench, stock, model, threads, runner, out)


def _run(args, result, bench, stock, model, threads, runner, out):
    configs = [("A", stock or bench, {} if stock else {"GGML_T2P": "0"}), ("B", bench, {})]
    data = {"A": {}, "B": {}}
    states = {"A": [], "B": []}
    load_line, load_warn = tc.machine_load(threads)
    result["load"] = (load_line, load_warn)
    tc.say(TOOL, load_line)
    if load_warn:
        tc.say(TOOL, load_warn)
    for r in range(1, args.rounds + 1):
        for label, binary, env_over in configs:
            json_path = os.path.join(out, f"{label}-{r}.json")
            log_path = os.path.join(out, f"{label}-{r}.log")
            what = f"{tc.show_env(env_over)} " if env_over else ""
            tc.say(TOOL, f"round {r}/{args.rounds} {label}: {what}{binary} ...")
            # -v: llama-bench shows ggml's INFO lines (ours among them) only when verbose; they go to stderr
            cmd = runner + [binary, "-m", model, "-p", str(args.pp), "-n", str(args.tg), "-t", str(threads),
                            "-r", "1", "-mmp", "1" if args.mmap else "0", "-v", "-o", "json"] + args.extra
            info = {}
            secs = tc.run_checked(TOOL, f"run {label}", cmd, env_over, json_path, log_path, info=info,
                                  gdb=not runner)
            if secs is None:
                result["failed"] = f"run {label} (round {r})"
                result["crash"] = info.get("crash")
                if info.get("crash"):
                    line = f"run {label} (round {r}, {what.strip() or 'as is'}): {info['crash']['text']}"
                    result["lines"] = [load_line] + ([load_warn] if load_warn else []) + [line]
                    print(line)
                return 1, result
            try:
                got = load_json(json_path)
                if not got:
                    raise ValueError("no results in it")
                for test, ts in got.items():
                    data[label].setdefault(test, []).append(ts)
            except (ValueError, KeyError, TypeError) as e:
                tc.say(TOOL, f"{label}: cannot read llama-bench's JSON in {json_path}: {e}")
                return 1, result
            state, summary, _ = tc.plugin_state(tc.read_text(log_path))
            states[label].append((state, summary))
            tc.say(TOOL, f"  {label}: {secs:.1f} s; ggml-t2p: {summary}")

    lines = [load_line] + ([load_warn] if load_warn else [])
    lines.append(f"A = {'stock binary ' + stock if stock else 'patched binary, GGML_T2P=0'}; B = ggml-t2p; "
                 f"{args.rounds} interleaved rounds, median tokens/s")
    if runner:
        lines.append(f"EMULATED ({args.runner}): these numbers measure the emulator, not the kernels")
    lines.append(f"{'test':8} {'A t/s':>10} {'B t/s':>10} {'B/A':>7}")
    for test, a_vals in data["A"].items():
        ma = statistics.median(a_vals)
        mb = statistics.median(data["B"][test]) if test in data["B"] else math.nan
        ratio = mb / ma if ma else math.nan
        result["rows"].append((test, ma, mb, ratio))
        lines.append(f"{test:8} {ma:10.2f} {mb:10.2f} {ratio:6.2f}x")
    lines.append("plugin state (from each run's log):")
    for label in ("A", "B"):
        seen = []
        for s in states[label]:
            if not any(tc.same_state(s, x) for x in seen):
                seen.append(s)
        state, summary = seen[0]
        if label == "A" and stock and state == "none":
            summary += " (expected: a stock binary)"
        lines.append(f"  {label}: {summary}")
        for s in seen[1:]:
            lines.append(f"  {label} (another round): {s[1]}")
        result["states"][label] = (state, summary)
    if result["states"]["B"][0] == "declined":
        lines.append("  note: B declined, so both columns ran stock code; the ratio only shows run-to-run noise")
    elif result["states"]["B"][0] == "none" and not stock:
        lines.append("  note: without a ggml-t2p line in B nothing shows that the kernels ran")
    if args.out:
        lines.append(f"JSON and logs: {args.out}")
    for line in lines:
        print(line)
    sys.stdout.flush()
    result["lines"] = lines
    return 0, result


if __name__ == "__main__":
    tc.tool_main(TOOL, run)
