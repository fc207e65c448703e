#!/usr/bin/env python3
"""Runs a patched llama-perplexity two ways and requires identical results: every per-chunk value it
prints, the final estimate, and the file of all saved log-probabilities (--kl-divergence-base), byte
for byte. Exits non-zero on any mismatch. Python 3 standard library only; Linux, macOS and Windows.

Runs llama-perplexity twice, A and B, and compares:
  - the per-chunk values "[i]ppl" and the final estimate PPL, as printed (4 decimals);
  - the saved log-probabilities of every token (--kl-divergence-base FILE, 16-bit per vocab entry
    and per token), byte for byte: a difference in any logit that moves any of these shows up here,
    far below the printed precision.
The final estimate's "+/- U" is printed for both runs but is not part of the verdict: llama-perplexity
adds per-token values on several threads that take tokens as they come and add their partial sums of
nll and nll^2 in the order they finish (tools/perplexity/perplexity.cpp, process_logits), and U, a
difference of two nearly equal sums, shows that order in its last digits. With identical log-prob
files and identical PPL values it was seen to differ in the last digit (...63838 vs ...63837).
The PPL values come from such sums too (of nll alone, no cancellation): their last bits can move the
same way, but at 4 printed decimals a change has never been seen; they stay in the verdict.

  A (default): GGML_T2P_KERNEL=ref, the library's scalar reference kernels
  B (default): the patched binary as is (best kernels for this CPU)

Every run gets --no-mmap (--mmap to leave it out), -lv 4 (llama-perplexity shows ggml's INFO lines,
the plugin's among them, only at this verbosity) and, when the binary has it, -fit off: the memory-fit
pre-pass of newer llama.cpp loads the model once with INFO lines muted, and the plugin says
"enabled"/"declining" only once, during that pass. Each run's plugin state is printed: enabled (which
kernel, how many tensors repacked), declined, disabled, or "no ggml-t2p line" (not patched, or INFO
lines hidden).

A run that dies by a signal is named (e.g. "killed by SIGILL (illegal instruction) in
tinygemm_kernel_amx<...> at `tileloadd ...`"): the signal from the exit status, the function and
instruction from a backtrace in the log or, when gdb is installed, from one rerun under gdb (not with
--runner); the gdb report is kept beside the log (A.log.gdb).

Exit status: 0 only if everything matches; 1 on a mismatch or a failed run; 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

sys.dont_write_bytecode = True    # no __pycache__ beside the tools
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import t2p_common as tc  # noqa: E402

TOOL = "ppl-check"
NUM = r"(?:[0-9.]+|-?nan|-?inf)"
CHUNK_RE = re.compile(r"\[[0-9]+\]" + NUM)
FINAL_RE = re.compile(r"Final estimate: PPL = (" + NUM + r") \+/- (" + NUM + r")")


def parser():
    ap = argparse.ArgumentParser(
        prog="tools/ppl-check.py", formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="%(prog)s --perplexity PATCHED/llama-perplexity -m MODEL.gguf -f TEXT [options] [-- extra args]",
        description=__doc__.split("\n\n", 1)[1],
        epilog="examples:\n"
               "  default vs reference kernels: tools/ppl-check.py --perplexity build/bin/llama-perplexity "
               "-m m.gguf -f t.txt\n"
               "  -ub 1 vs -ub 64 (both ggml-t2p): ... --a-env \"\" --a-args \"-ub 1\" --b-args \"-ub 64\"\n"
               "  declined vs off (no dotprod):    ... --a-env \"GGML_T2P=0\" --runner \"qemu-aarch64-static "
               "-cpu cortex-a72\"\n"
               "Compare like with like: a different -ub (ubatch) can change the results of stock llama.cpp "
               "code itself\n(GGML_T2P=0 at -c 128: the default ubatch and -ub 64 give different values), so a "
               "difference between runs\nwith different -ub says nothing about the ggml-t2p kernels. "
               "-ub 1 vs -ub 64 with ggml-t2p on were bit-identical on the test model with the default 3 chunks,\n"
               "but not with --chunks 1, where stock code (GGML_T2P=0) differs the same way (docs/numerics.md, 'Comparing runs').")
    ap.add_argument("--perplexity", metavar="PATH", required=True, help="the patched llama-perplexity (required)")
    ap.add_argument("-m", "--model", metavar="PATH", required=True, help="model (required)")
    ap.add_argument("-f", "--file", metavar="PATH", required=True, dest="text", help="text file (required)")
    ap.add_argument("-c", type=int, default=128, metavar="N", dest="ctx", help="context per chunk (default 128)")
    ap.add_argument("--chunks", type=int, default=3, metavar="N", help="chunks (default 3)")
    ap.add_argument("-t", type=int, metavar="N", dest="threads", help="threads (default: all cores)")
    ap.add_argument("--a-env", default="GGML_T2P_KERNEL=ref", metavar="\"K=V ...\"",
                    help="environment for run A (default \"GGML_T2P_KERNEL=ref\")")
    ap.add_argument("--b-env", default="", metavar="\"K=V ...\"", help="environment for run B (default \"\")")
    ap.add_argument("--a-args", default="", metavar="\"...\"",
                    help="extra llama-perplexity arguments for A only (e.g. \"-ub 1\")")
    ap.add_argument("--b-args", default="", metavar="\"...\"", help="extra arguments for B only (e.g. \"-ub 64\")")
    ap.add_argument("--runner", default="", metavar="CMD", help="prefix, e.g. \"qemu-aarch64-static -cpu max\"")
    ap.add_argument("--out", metavar="DIR", help="keep logs and log-prob files there (default: temporary)")
    ap.add_argument("--mmap", action="store_true", help="leave mmap on (do not pass --no-mmap)")
    return ap


def parse(argv):
    return tc.parse_with_extra(parser(), argv, ("--a-env", "--b-env", "--a-args", "--b-args", "--runner"))


def first_difference(a, b):
    """(byte offset, size a, size b) of the first difference of two files, or None when identical."""
    with open(a, "rb") as fa, open(b, "rb") as fb:
        pos = 0
        while True:
            ba, bb = fa.read(1 << 20), fb.read(1 << 20)
            if ba != bb:
                n = min(len(ba), len(bb))
                i = next((k for k in range(n) if ba[k] != bb[k]), n)
                return pos + i, os.path.getsize(a), os.path.getsize(b)
            if not ba:
                return None
            pos += len(ba)


def chunk_values(text):
    """The per-chunk values "[1]12.3456 [2]..." of a llama-perplexity log, as printed."""
    return CHUNK_RE.findall(text)


def final_estimate(text):
    """(PPL, +/- U) of the "Final estimate" line, as printed, or None when there is none."""
    m = FINAL_RE.search(text)
    return (m.group(1), m.group(2)) if m else None


def why_no_chunks(text):
    """The lines of a llama-perplexity log that say why it scored nothing (a text shorter than two
    contexts, a bad -c), else its last three lines."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    hits = [ln for ln in lines if re.search(r"need at least|tokenizes to only|error|failed|requires", ln, re.I)]
    return (hits or lines[-3:])[:3] or ["(its log is empty)"]


def verdict(log_a, log_b, have_logprobs, logprob_diff, logprob_size):
    """(lines, ok): the comparison of two llama-perplexity logs and their log-prob files.

    ok needs: per-chunk values present and identical, both final PPL values present and identical,
    both log-prob files present and identical (logprob_diff None). The "+/-" of the final estimate is
    shown, and explained when it alone differs, but never decides (see the module docstring)."""
    ca, cb = chunk_values(log_a), chunk_values(log_b)
    fa, fb = final_estimate(log_a), final_estimate(log_b)

    def show(c, f):
        return " ".join(c) + (f" | Final estimate: PPL = {f[0]} +/- {f[1]}" if f else " | no final estimate")

    lines = [f"A: {show(ca, fa)}", f"B: {show(cb, fb)}"]
    ok = True
    if not ca:
        lines.append("per-chunk values: NONE in run A")
        ok = False
    elif ca == cb and fa is not None and fb is not None and fa[0] == fb[0]:
        lines.append(f"per-chunk values: identical ({len(ca)} chunks), final PPL identical")
    else:
        lines.append("per-chunk values: DIFFER" if ca != cb else "final PPL: DIFFERS or missing")
        ok = False
    if fa and fb and fa[1] != fb[1]:
        lines.append(f"final +/-: {fa[1]} vs {fb[1]} (not part of the verdict: llama-perplexity's thread-order "
                     "sums, see --help)")
    if not have_logprobs:
        lines.append("log-prob files: MISSING (this llama-perplexity wrote no --kl-divergence-base file)")
        ok = False
    elif logprob_diff is None:
        lines.append(f"log-prob files: identical ({logprob_size} bytes)")
    else:
        lines.append(f"log-prob files: DIFFER (first difference at byte {logprob_diff[0] + 1}, counting from 1 as "
                     f"cmp does; sizes {logprob_diff[1]} and {logprob_diff[2]})")
        ok = False
    return lines, ok


def run(argv):
    """Returns (exit status, result dict: verdict lines, states {label: (state, summary)}, pass bool)."""
    ap, args = parse(argv)
    result = {"lines": [], "states": {}, "pass": False}
    ppl = tc.resolve_binary(args.perplexity)
    if not ppl or not tc.is_executable(ppl):
        ap.error(f"{args.perplexity} is not an executable")
    tc.file_arg(ap, "-m", args.model)
    tc.file_arg(ap, "-f", args.text)
    envs = {"A": tc.env_arg(ap, args.a_env, "--a-env"), "B": tc.env_arg(ap, args.b_env, "--b-env")}
    extra_args = {"A": tc.command_arg(ap, args.a_args, "--a-args"), "B": tc.command_arg(ap, args.b_args, "--b-args")}
    runner = tc.runner_arg(ap, args.runner)
    threads = args.threads or tc.cpu_count()
    with tc.out_dir(ap, args.out, "t2p-ppl-") as out:
        return _run(args, result, ppl, envs, extra_args, runner, threads, out)


def _run(args, result, ppl, envs, extra_args, runner, threads, out):
    fit_off = []
    if tc.has_flag(tc.help_text(runner, ppl), "--fit"):
        fit_off = ["-fit", "off"]
    logs, states = {}, {}
    for label in ("A", "B"):
        log = os.path.join(out, f"{label}.log")
        logprobs = os.path.join(out, f"{label}.logprobs")
        tc.say(TOOL, f"run {label}: env [{tc.show_env(envs[label])}] args [{' '.join(extra_args[label])}]"
               + (f" runner [{args.runner}]" if runner else ""))
        cmd = runner + [ppl, "-m", os.path.abspath(args.model), "-f", os.path.abspath(args.text),
                        "-c", str(args.ctx), "--chunks", str(args.chunks), "-t", str(threads)]
        cmd += [] if args.mmap else ["--no-mmap"]
        # -lv 4: INFO lines (ours among them); -fit off: no pre-pass that prints our one-time line muted
        cmd += ["-lv", "4"] + fit_off + ["--kl-divergence-base", logprobs] + extra_args[label] + args.extra
        info = {}
        secs = tc.run_checked(TOOL, f"run {label}", cmd, envs[label], log, info=info, gdb=not runner)
        if secs is None:
            result["failed"] = f"run {label}"
            result["crash"] = info.get("crash")
            why = info["crash"]["text"] if info.get("crash") else f"exit status {info.get('rc')}"
            result["lines"] = [f"run {label} did not finish: {why}",
                               f"ppl-check: FAIL (run {label} did not finish)"]
            for line in result["lines"]:
                print(line)
            return 1, result
        text = tc.read_text(log)
        logs[label] = text
        state, summary, lines = tc.plugin_state(text)
        states[label] = (state, summary)
        for line in lines:
            tc.say(TOOL, f"    {label}: {line}")
        tc.say(TOOL, f"    {label}: {secs:.0f} s")

    la, lb = os.path.join(out, "A.logprobs"), os.path.join(out, "B.logprobs")
    have = os.path.isfile(la) and os.path.isfile(lb)
    diff = first_difference(la, lb) if have else None
    lines, ok = verdict(logs["A"], logs["B"], have, diff, os.path.getsize(la) if have else 0)
    for label in ("A", "B"):
        if not chunk_values(logs[label]):
            lines.extend(f"  run {label}, llama-perplexity: {line}" for line in why_no_chunks(logs[label]))
    lines.append("plugin state (from each run's log):")
    for label in ("A", "B"):
        lines.append(f"  {label}: {states[label][1]}")
    sa, sb = states["A"][0], states["B"][0]
    if not ok and sb == "declined" and sa == "enabled":
        lines.append("  note: B declined (stock code) while A ran ggml-t2p: compare declined with off instead, "
                     "--a-env GGML_T2P=0")
    if not ok and sa == "enabled" and sb == "enabled" and args.a_args != args.b_args:
        lines.append("  note: A and B differ in their arguments; a different -ub changes stock llama.cpp's own "
                     "results too (GGML_T2P=0 differs between the default ubatch and -ub 64), so such runs can "
                     "differ without ggml-t2p at fault")
    if args.out:
        lines.append(f"logs and log-prob files: {args.out}")
    lines.append("ppl-check: PASS" if ok else "ppl-check: FAIL")
    for line in lines:
        print(line)
    sys.stdout.flush()
    result.update({"lines": lines, "states": states, "pass": ok})
    return (0 if ok else 1), result


if __name__ == "__main__":
    tc.tool_main(TOOL, run)
