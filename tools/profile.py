#!/usr/bin/env python3
"""Decode and prompt profile: where the time of one decoded token, or of one prompt batch, goes, per op
class and per op by name, stock (GGML_T2P=0) and ggml-t2p side by side. Python 3 standard library and a
C++17 compiler; Linux and macOS.

Compiles tools/profile/decode-profile.cpp (ours, public llama.h API only) against the llama.cpp
checkout you name (its include/ and ggml/include/ headers, and the libllama, libggml and libggml-base
shared libraries in its build folder, default LLAMA/build-t2p/bin as tools/t2p.py builds it) into
--work, then runs it once per kind (--mode), configuration and thread count.

--mode decode (the default): the program loads the model, decodes a random prompt of -p tokens, then in
each of --rounds rounds decodes -n single tokens (positions p..p+n-1 each time) in three modes, in an
order that rotates from round to round:

  none   no callback: the whole-token time (llama_decode + llama_synchronize)
  light  ggml's graph evaluation callback (llama_context_params.cb_eval) asks for the graph's last
         node only: the graph is computed in one go; this gives the graph's time, hence the time
         outside the graph (whole token without callback minus graph), and what a callback costs
  nodes  the callback asks for every node (a norm together with the node after it, so that ggml-cpu's
         RMS_NORM+MUL fusion still runs): one compute per node, timed from ask to answer

Between modes the positions after the prompt are dropped; a model with a recurrent state (Mamba, the
Gated-DeltaNet blocks of Bonsai 2 / qwen35) cannot drop them, so its memory is cleared and the prompt
decoded again, untimed (the "re-prompts" count under the table).

--mode prompt: one step is a whole batch of -p tokens (default 512) decoded as ONE ubatch (n_batch =
n_ubatch = p) at positions 0..p-1 on an empty memory (cleared before every batch, untimed), with the
logits of the last token only, as llama-bench's pp test; the same three modes, --batches batches per
mode and round (default 1) after --batch-warmup untimed batches per context (default 1). The tables give
ms per batch and per token (batch / p) side by side. What differs from decode: no prompt comes before
the batches; the time outside the graph also holds building the inputs of p tokens (positions, the
attention mask, the recurrent states' copies); the per-compute corrections (below) are the same
absolute µs, so they matter far less against ops that each take milliseconds (what is left as residual
is mostly the noise between separate batches); the weights are read once per batch, so instead of GB/s
the table gives the ternary MUL_MATs' GMAC/s (multiply-adds: K x outputs) over their own time. --mode
both runs decode and prompt (the same -p for both when given; otherwise decode's prompt is 16 tokens and
the batch 512).

Per-node computes cost more than one graph compute: each one is planned, forks and joins the
threads (when its op runs on all of them), synchronizes and calls back. The tool subtracts from every
timed node (1) the median time of the nodes of empty ops (VIEW, RESHAPE, PERMUTE, TRANSPOSE), which
do no work, so their computes measure the scheduler's loop, a 1-thread plan and our callback, and
(2) for ops that ggml-cpu runs on all threads, the extra cost of a compute on all threads over one on
1 thread, which decode-profile measures on a graph of one 1-element ADD after every round. What the
correction leaves over (the corrected per-node sum against the light mode's graph time) is its own row,
"distortion residual", so the rows add up to the whole step's time. The lines under the table give the
raw distortion: the whole step with per-node callbacks against without, per compute.

Classes: ternary MUL_MAT (weights in the CPU_T2P buffer, or of type PQ2_0/PTQ1_0 in stock's), other
weight MUL_MAT (e.g. a Q8_0 output matrix), attention (FLASH_ATTN_EXT; with --fa off the KQ and KQV
MUL_MATs and SOFT_MAX), norms (RMS_NORM, NORM, L2_NORM, GROUP_NORM, with the MUL fused into RMS_NORM),
ROPE, and the rest. A second table gives every op by name (GATED_DELTA_NET, SSM_CONV, CONCAT,
GET_ROWS, CPY, SILU, SIGMOID, SOFTPLUS, MUL, ADD, ...; unary and GLU ops by their own names): a
segment's ops joined by '+' (RMS_NORM+MUL: the fused pair), MUL_MAT split into ternary, other weights and
KQ/KQV; the column n is the number of such segments per graph. Times are the medians over all steps
of a configuration (each class or op on its own); shares are of the whole step's time without callback.

Configurations (--configs): stock (GGML_T2P=0: the fork's own code in the same binary), ours (the
environment as it is), ours-nohybrid (GGML_T2P_HYBRID=0: ggml-t2p leaves the hybrid's float ops
GATED_DELTA_NET, SSM_CONV, CONCAT and F32 GET_ROWS to ggml; a library without that switch ignores it and runs as
ours).

--from-json re-reads the JSON of earlier runs (kept with --out; decode-profile's JSON of format 1,
decode only, and 2) and prints the same tables without running anything. Exit status: 0 when every run
worked, 1 when a build or run failed, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.dont_write_bytecode = True    # no __pycache__ beside the tools
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import t2p_common as tc  # noqa: E402

TOOL = "profile"
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "profile", "decode-profile.cpp")
CONFIGS = {"stock": {"GGML_T2P": "0"}, "ours": {}, "ours-nohybrid": {"GGML_T2P_HYBRID": "0"}}
LABELS = {"stock": "stock (GGML_T2P=0)", "ours": "ours", "ours-nohybrid": "ours-nohybrid"}
KINDS = ["decode", "prompt"]
EMPTY_OPS = {"NONE", "VIEW", "RESHAPE", "PERMUTE", "TRANSPOSE"}
MATMUL_OPS = {"MUL_MAT", "MUL_MAT_ID"}
TERNARY_TYPES = {"pq2_0", "ptq1_0"}
NORM_OPS = {"RMS_NORM", "NORM", "L2_NORM", "GROUP_NORM"}
CLASSES = ["ternary", "other_mm", "attention", "norm", "rope", "rest"]
# a MUL_MAT's name in the by-name table: the op and its class
MATMUL_NAMES = {"ternary": "ternary", "other_mm": "other weights", "attention": "KQ/KQV"}
# ops that ggml-cpu computes on one thread whatever the thread count (ggml_get_n_tasks in the snapshot's
# ggml-cpu.c): a graph of one of them alone is planned for 1 thread, so computing it alone costs no
# thread fork/join
SINGLE_TASK_OPS = {"GET_ROWS", "SET_ROWS", "SCALE", "SET", "CLAMP", "SUB", "SQR", "SQRT", "LOG", "SIN", "COS",
                   "SUM", "SUM_ROWS", "MEAN", "ARGMAX", "REPEAT", "REPEAT_BACK", "LEAKY_RELU", "DIAG",
                   "GET_ROWS_BACK", "ABS", "SGN", "NEG", "STEP", "TANH", "ELU", "RELU", "SIGMOID", "HARDSWISH",
                   "HARDSIGMOID", "EXP", "SOFTPLUS", "EXPM1", "FLOOR", "CEIL", "ROUND", "TRUNC"}


# ---------------------------------------------------------------------------------------------
# Aggregation (pure functions; tests/python/test_profile.py checks them on canned input)

def classify(node, flash):
    """The class of one graph node (a dict of decode-profile's node table). FLASH: the graph has a
    FLASH_ATTN_EXT node (then SOFT_MAX elsewhere is not attention's)."""
    op = node["op"]
    if op in MATMUL_OPS:
        if node.get("src0_buft") == "CPU_T2P" or node.get("src0_type") in TERNARY_TYPES:
            return "ternary"
        if node.get("src0_weights"):
            return "other_mm"
        return "attention"                 # KQ / KQV: src0 is the KV cache, not a weight
    if op == "FLASH_ATTN_EXT" or (op == "SOFT_MAX" and not flash):
        return "attention"
    if op in NORM_OPS:
        return "norm"
    if op == "ROPE":
        return "rope"
    return "rest"


def class_labels(flash):
    return {"ternary": "ternary MUL_MAT", "other_mm": "other weight MUL_MAT",
            "attention": "attention (FLASH_ATTN_EXT)" if flash else "attention (KQ, KQV MUL_MAT + SOFT_MAX)",
            "norm": "norms (RMS_NORM+MUL, NORM)", "rope": "ROPE", "rest": "rest"}


def segment_owner(nodes, first, last):
    """The node a segment's time belongs to: its first node of a non-empty op (a norm and the MUL
    after it -> the norm); None when every node of it is empty (VIEW, RESHAPE, ...)."""
    for i in range(first, last + 1):
        if nodes[i]["op"] not in EMPTY_OPS:
            return i
    return None


def op_name(node, flash):
    """A node's name in the by-name table: its op (unary and GLU ops by their own name, as ggml_op_desc
    gives them), a MUL_MAT with its class."""
    op = node["op"]
    if op in MATMUL_OPS:
        return f"{op} {MATMUL_NAMES[classify(node, flash)]}"
    return op


def segment_name(nodes, first, last, flash):
    """A segment's name in the by-name table: the names of its non-empty nodes joined by '+' (a norm
    and the MUL fused into it: RMS_NORM+MUL); None for a segment of empty ops only."""
    names = [op_name(nodes[i], flash) for i in range(first, last + 1) if nodes[i]["op"] not in EMPTY_OPS]
    return "+".join(names) or None


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def step_time(step):
    """The whole step's µs: a decoded token ('token_us') or a prompt batch ('batch_us')."""
    return step["token_us"] if "token_us" in step else step["batch_us"]


def run_kind(run):
    """'decode' or 'prompt' (decode-profile's JSON of format 1 has no kind: decode)."""
    return run.get("kind", "decode")


def step_profile(nodes, flash, segs, fork_us=0.0):
    """One 'nodes' step: (per-class corrected µs, per-op µs of 'rest', per-compute cost µs, number of
    computes, raw per-node sum µs, per-name corrected µs). The per-compute cost is the median time of
    the segments made of empty ops only (0 when there are none: the scheduler's loop, a 1-thread plan
    and compute, our callback); it is subtracted from every other segment, and FORK_US (the extra cost
    of a compute on all threads over one on 1 thread, measured by decode-profile) too from those whose
    op runs on all threads. Per name: segment_name's key, every segment of the step in one of them."""
    empty = [us for first, last, us in segs if segment_owner(nodes, first, last) is None]
    cost = median(empty) if empty else 0.0
    per_class = dict.fromkeys(CLASSES, 0.0)
    rest_ops = {}
    by_name = {}
    raw = 0.0
    for first, last, us in segs:
        owner = segment_owner(nodes, first, last)
        if owner is None:
            continue
        raw += us
        op = nodes[owner]["op"]
        cls = classify(nodes[owner], flash)
        net = us - cost - (0.0 if op in SINGLE_TASK_OPS else fork_us)
        per_class[cls] += net
        if cls == "rest":
            rest_ops[op] = rest_ops.get(op, 0.0) + net
        name = segment_name(nodes, first, last, flash)
        by_name[name] = by_name.get(name, 0.0) + net
    return per_class, rest_ops, cost, len(segs), raw, by_name


def fork_cost(run):
    """The extra µs of one compute on the run's threads over one on 1 thread (median over its rounds;
    0 when the run has no such measurement, or at 1 thread)."""
    pairs = run.get("compute_cost_us") or []
    if run.get("threads", 1) <= 1 or not pairs:
        return 0.0
    return max(0.0, median([n - one for one, n in pairs]))


def same_graph(a, b):
    return [n["op"] for n in a] == [n["op"] for n in b]


def matmul_macs(node):
    """Multiply-adds of one MUL_MAT node: K (src0's ne0) times the output's elements; None without src0's
    shape (decode-profile's JSON of format 1)."""
    ne0 = node.get("src0_ne")
    if not ne0:
        return None
    out = 1
    for x in node.get("ne", [0]):
        out *= x
    return ne0[0] * out


def aggregate(runs):
    """Merge the runs (decode-profile JSON dicts) of one kind, configuration and thread count into a
    summary dict; times in ms per step (a token in decode, a whole batch in prompt; medians over steps).
    Raises ValueError when the runs' graphs, kinds or batch sizes differ or a mode is missing."""
    if not runs:
        raise ValueError("no runs")
    nodes = runs[0]["nodes"]
    kind = run_kind(runs[0])
    for r in runs[1:]:
        if run_kind(r) != kind:
            raise ValueError("the runs mix decode and prompt")
        if not same_graph(nodes, r["nodes"]):
            raise ValueError("the runs' graphs differ (another model or settings?)")
        if kind == "prompt" and r["n_prompt"] != runs[0]["n_prompt"]:
            raise ValueError("the runs' batches differ in size")
    if kind not in KINDS:
        raise ValueError(f"unknown kind '{kind}'")
    n_tokens = runs[0]["n_prompt"] if kind == "prompt" else 1
    flash = any(n["op"] == "FLASH_ATTN_EXT" for n in nodes)
    steps = [s for r in runs for s in r["steps"]]
    by_mode = {m: [s for s in steps if s["mode"] == m] for m in ("none", "light", "nodes")}
    for m, ss in by_mode.items():
        if not ss:
            raise ValueError(f"no steps in mode '{m}'")
    fork = median([fork_cost(r) for r in runs])
    profs = [step_profile(nodes, flash, s["segs"], fork_cost(r)) for r in runs for s in r["steps"]
             if s["mode"] == "nodes"]
    ms = lambda xs: median(xs) / 1000.0  # noqa: E731
    whole = ms([step_time(s) for s in by_mode["none"]])
    whole_light = ms([step_time(s) for s in by_mode["light"]])
    graph_light = ms([s["graph_us"] for s in by_mode["light"]])
    whole_nodes = ms([step_time(s) for s in by_mode["nodes"]])
    graph_nodes = ms([s["graph_us"] for s in by_mode["nodes"]])
    classes = {c: ms([p[0][c] for p in profs]) for c in CLASSES}
    ops = sorted({op for p in profs for op in p[1]})
    rest_ops = {op: ms([p[1].get(op, 0.0) for p in profs]) for op in ops}
    names = sorted({k for p in profs for k in p[5]})
    by_name = {k: ms([p[5].get(k, 0.0) for p in profs]) for k in names}
    first_segs = by_mode["nodes"][0]["segs"]
    name_count = {}
    for first, last, _ in first_segs:
        k = segment_name(nodes, first, last, flash)
        if k is not None:
            name_count[k] = name_count.get(k, 0) + 1
    cost_us = median([p[2] for p in profs])
    computes = median([p[3] for p in profs])
    raw = ms([p[4] for p in profs])
    residual = graph_light - sum(classes.values())
    name_residual = graph_light - sum(by_name.values())
    outside = whole - graph_light
    tern = [n for n in nodes if n["op"] in MATMUL_OPS and classify(n, flash) == "ternary"]
    weights = [n for n in nodes if n["op"] in MATMUL_OPS and n.get("src0_weights")]
    tern_bytes = sum(n.get("src0_bytes", 0) for n in tern)
    mm_bytes = sum(n.get("src0_bytes", 0) for n in weights)
    macs = [matmul_macs(n) for n in tern]
    return {
        "kind": kind, "n_tokens": n_tokens,
        "flash": flash, "labels": class_labels(flash), "classes": classes, "rest_ops": rest_ops,
        "by_name": by_name, "name_count": name_count, "name_residual": name_residual,
        "residual": residual, "outside": outside, "step": whole, "step_light": whole_light,
        "step_nodes": whole_nodes, "graph": graph_light, "graph_nodes": graph_nodes,
        "before": ms([s["before_us"] for s in by_mode["light"]]),
        "after": ms([s["after_us"] for s in by_mode["light"]]),
        "compute_cost_us": cost_us, "fork_us": fork, "computes": computes, "raw_nodes": raw,
        "n_nodes": len(nodes), "n_ternary": len(tern),
        "n_t2p": sum(1 for n in tern if n.get("src0_buft") == "CPU_T2P"),
        "ternary_bytes": tern_bytes, "matmul_weight_bytes": mm_bytes,
        "ternary_macs": None if None in macs else sum(macs),
        "reprompts": sum(r.get("reprompts", 0) for r in runs),
        "steps": {m: len(ss) for m, ss in by_mode.items()},
    }


def gbs(nbytes, ms_):
    return nbytes / (ms_ / 1000.0) / 1e9 if ms_ and ms_ > 0 else float("nan")


def pct(x, total):
    return 100.0 * x / total if total else float("nan")


def columns(kind):
    """(header line, sub-header line, cell function (value ms, summary) -> text, blank cell) of one
    configuration's columns: decode ms/token and share; prompt ms/batch, ms/token and share."""
    if kind == "prompt":
        return (30, f"{'ms/batch':>12}{'ms/token':>10}{'share':>8}",
                lambda v, s: f"{v:12.2f}{v / s['n_tokens']:10.4f}{pct(v, s['step']):7.1f}%")
    return (24, f"{'ms/token':>14}{'share':>10}", lambda v, s: f"{v:14.3f}{pct(v, s['step']):9.1f}%")


def table(summaries, title_lines=()):
    """Lines of the side-by-side class table: SUMMARIES is [(label, summary dict)], all of one kind."""
    kind = summaries[0][1]["kind"]
    width, sub_cells, cell = columns(kind)
    unit = "batch" if kind == "prompt" else "token"
    lines = list(title_lines)
    head = f"{'':40}" + "".join(f"{lab[:width - 2]:>{width}}" for lab, _ in summaries)
    sub = f"{'':40}" + sub_cells * len(summaries)
    lines += [head, sub]
    labels = summaries[0][1]["labels"]

    def row(name, key):
        lines.append(f"{name:40}" + "".join(cell(key(s), s) for _, s in summaries))

    def plain(name, key, fmt):
        lines.append(f"{name:40}" + "".join(f"{key(s):{fmt}}{'':{width - 14}}" for _, s in summaries))

    for c in CLASSES:
        row(labels[c], lambda s, c=c: s["classes"][c])
    row("distortion residual", lambda s: s["residual"])
    row("outside the graph", lambda s: s["outside"])
    row(f"whole {unit} (no callback)", lambda s: s["step"])
    plain("tokens/s", lambda s: 1000.0 * s["n_tokens"] / s["step"], "14.2f")
    if kind == "prompt":
        plain("ternary MUL_MAT GMAC/s, over their time",
              lambda s: float("nan") if s["ternary_macs"] is None
              else s["ternary_macs"] / (s["classes"]["ternary"] / 1000.0) / 1e9, "14.1f")
    else:
        plain("ternary weights GB/s, over their time",
              lambda s: gbs(s["ternary_bytes"], s["classes"]["ternary"]), "14.2f")
        plain("weight MUL_MAT GB/s, over whole token", lambda s: gbs(s["matmul_weight_bytes"], s["step"]), "14.2f")
    for lab, s in summaries:
        lines.append(
            f"{lab}: {s['n_ternary']} ternary MUL_MATs ({s['n_t2p']} in CPU_T2P), "
            f"{s['ternary_bytes'] / 1e6:.1f} MB; graph {s['graph']:.3f} ms (before it {s['before']:.3f}, "
            f"after it {s['after']:.3f}); steps none/light/nodes {s['steps']['none']}/{s['steps']['light']}/"
            f"{s['steps']['nodes']}"
            + (f"; re-prompts {s['reprompts']} (a recurrent state cannot drop positions: cleared and the "
               f"prompt decoded again between modes, untimed)" if s["reprompts"] else ""))
        light = s["step_light"] - s["step"]
        per_node = s["step_nodes"] - s["step"]
        lines.append(
            f"{lab}: callback overhead: light {light:+.3f} ms/{unit} ({pct(light, s['step']):+.1f}%); per-node "
            f"{per_node:+.3f} ms/{unit} ({pct(per_node, s['step']):+.1f}%) over {s['computes']:.0f} computes = "
            f"{1000.0 * per_node / s['computes'] if s['computes'] else float('nan'):.1f} us each; empty-op computes "
            f"measure {s['compute_cost_us']:.1f} us each, a thread fork/join {s['fork_us']:.1f} us more "
            f"(both subtracted); per-node graph {s['graph_nodes']:.3f} ms raw "
            f"against {s['graph']:.3f} ms in one compute; residual after correction {s['residual']:+.3f} ms "
            f"({pct(s['residual'], s['graph']):+.1f}% of the graph)")
    return lines


def name_table(summaries):
    """Lines of the side-by-side by-name table: every op name (segment_name) with its segments per graph
    (n; 'a/b' where the configurations' graphs differ) and its median time, largest first; then the
    sum, the residual (light graph - sum), outside the graph and the whole step, so the rows add up."""
    kind = summaries[0][1]["kind"]
    width, sub_cells, cell = columns(kind)
    unit = "batch" if kind == "prompt" else "token"
    names = {k for _, s in summaries for k in s["by_name"]}
    order = sorted(names, key=lambda k: (-max(s["by_name"].get(k, 0.0) for _, s in summaries), k))
    lines = [f"by op name (a segment's ops joined by '+'; n = segments per graph), corrected, medians over "
             f"{'batches' if kind == 'prompt' else 'steps'}:",
             f"{'':34}{'n':>6}" + "".join(f"{lab[:width - 2]:>{width}}" for lab, _ in summaries),
             f"{'':40}" + sub_cells * len(summaries)]
    for k in order:
        counts = []
        for _, s in summaries:
            c = str(s["name_count"].get(k, 0))
            if c not in counts:
                counts.append(c)
        lines.append(f"{k[:33]:34}{'/'.join(counts):>6}"
                     + "".join(cell(s["by_name"].get(k, 0.0), s) for _, s in summaries))
    for name, key in (("sum of the ops above", lambda s: sum(s["by_name"].values())),
                      ("distortion residual", lambda s: s["name_residual"]),
                      ("outside the graph", lambda s: s["outside"]),
                      (f"whole {unit} (no callback)", lambda s: s["step"])):
        lines.append(f"{name:40}" + "".join(cell(key(s), s) for _, s in summaries))
    return lines


def group_runs(runs):
    """{(kind, prompt tokens, threads, config): [run, ...]} in the order first seen."""
    groups = {}
    for r in runs:
        groups.setdefault((run_kind(r), r["n_prompt"], r["threads"], r.get("config", "?")), []).append(r)
    return groups


def config_order(c):
    return (list(CONFIGS).index(c) if c in CONFIGS else 99, c)


def title(kind, runs, threads):
    """The first line of a table's title (RUNS: all of the table, the first one named)."""
    first = runs[0]
    th = f"{threads} thread{'s' if threads != 1 else ''}"
    model = f"{os.path.basename(first['model'])} ({first.get('desc', '')})"
    p = first["n_prompt"]
    sizes = {(r["n_gen"], r["rounds"]) for r in runs}
    if kind == "prompt":
        nb, nub = first.get("n_batch", p), first.get("n_ubatch", p)
        one = "" if nub >= p else f" -- NOT one ubatch: n_ubatch {nub} < {p}"
        per_run = (f"{first['n_gen']} batch(es) x {first['rounds']} rounds per run" if len(sizes) == 1
                   else "batches x rounds per run differ between the runs (steps below)")
        return (f"prompt profile: {model}, {th}, FA {first.get('fa')}, one batch of {p} tokens as one ubatch "
                f"(n_batch {nb}, n_ubatch {nub}){one}, positions 0..{p - 1} on an empty memory, "
                f"{per_run}; ms/token = ms/batch / {p}")
    per_run = (f"{first['n_gen']} steps x {first['rounds']} rounds per run (positions {p}..{p + first['n_gen'] - 1})"
               if len(sizes) == 1 else "steps x rounds per run differ between the runs (steps below)")
    return f"decode profile: {model}, {th}, FA {first.get('fa')}, prompt {p} tokens, {per_run}"


def report(runs):
    """The printed lines for a list of runs (each with 'config' and 'load' added by this tool)."""
    lines = []
    groups = group_runs(runs)
    tables = sorted({(k, p, t) for k, p, t, _ in groups}, key=lambda x: (KINDS.index(x[0]) if x[0] in KINDS
                                                                        else 99, x[0], x[1], x[2]))
    for kind, p, threads in tables:
        cfgs = sorted([c for k, pp, t, c in groups if (k, pp, t) == (kind, p, threads)], key=config_order)
        runs_of = {c: groups[(kind, p, threads, c)] for c in cfgs}
        summaries = [(LABELS.get(c, c), aggregate(runs_of[c])) for c in cfgs]
        loads = [r.get("load") for c in cfgs for r in runs_of[c] if r.get("load") is not None]
        head = [title(kind, [r for c in cfgs for r in runs_of[c]], threads)]
        if loads:
            head.append("1-minute load average before the runs: " + ", ".join(f"{x:.2f}" for x in loads))
        head += [f"ggml-t2p: {LABELS.get(c, c)}: {runs_of[c][0].get('t2p', '?')}" for c in cfgs]
        if "ours-nohybrid" in cfgs:
            head.append("ours-nohybrid = ours with GGML_T2P_HYBRID=0 (GATED_DELTA_NET, SSM_CONV, CONCAT and F32 GET_ROWS "
                        "left to ggml; "
                        "a library without that switch runs it as ours)")
        lines += table(summaries, head) + [""] + name_table(summaries) + [""]
    return lines


# ---------------------------------------------------------------------------------------------
# Building and running

def lib_names():
    if sys.platform == "darwin":
        return ["libllama.dylib", "libggml.dylib", "libggml-base.dylib"]
    return ["libllama.so", "libggml.so", "libggml-base.so"]


def find_lib_dir(build):
    for sub in ("bin", "src", "lib", os.path.join("bin", "Release")):
        d = os.path.join(build, sub)
        if os.path.isfile(os.path.join(d, lib_names()[0])):
            return d
    return None


def compiler():
    for c in [os.environ.get("CXX"), "c++", "g++", "clang++"]:
        if c and shutil.which(c):
            return shutil.which(c)
    return None


def build_program(llama, lib_dir, work, log):
    """Path of the built decode-profile (rebuilt when missing or older than its source or the
    checkout's libllama/llama.h), or None after printing why."""
    exe = os.path.join(work, "decode-profile")
    deps = [SOURCE, os.path.join(lib_dir, lib_names()[0]), os.path.join(llama, "include", "llama.h")]
    if os.path.isfile(exe) and all(os.path.getmtime(exe) >= os.path.getmtime(d) for d in deps):
        return exe
    cxx = compiler()
    if not cxx:
        tc.say(TOOL, "no C++ compiler found (set CXX, or install g++ or clang++)")
        return None
    cmd = [cxx, "-std=c++17", "-O2", "-I", os.path.join(llama, "include"), "-I", os.path.join(llama, "ggml", "include"),
           SOURCE, "-o", exe, "-L", lib_dir, "-lllama", "-lggml", "-lggml-base", f"-Wl,-rpath,{lib_dir}"]
    tc.say(TOOL, f"compiling {' '.join(cmd)}")
    with open(log, "wb") as f:
        rc = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    if rc != 0:
        print(tc.tail(log, 25), file=sys.stderr)
        tc.say(TOOL, f"compiling decode-profile failed with status {rc} (log: {log})")
        return None
    return exe


def parser():
    ap = argparse.ArgumentParser(
        prog="tools/profile.py", formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="%(prog)s --llama DIR -m MODEL.gguf [--mode decode|prompt|both] [options]\n"
              "       %(prog)s --from-json RUN.json [RUN.json ...]",
        description=__doc__.split("\n\n", 1)[1],
        epilog="examples:\n"
               "  tools/profile.py --llama ~/llama.cpp -m synthetic-8b-pq2_0.gguf -t 1,2 --repeat 2 --out prof8b\n"
               "  tools/profile.py --llama ~/llama.cpp -m model.gguf --configs ours --fa off\n"
               "  tools/profile.py --llama ~/llama.cpp -m bonsai2-2b-pq2_0.gguf --mode prompt -p 512 -t 1,2,all \\\n"
               "      --configs stock,ours,ours-nohybrid --out prof-pp512\n"
               "  tools/profile.py --from-json prof8b/*.json prof-pp512/*.json")
    ap.add_argument("--llama", metavar="DIR", help="the llama.cpp checkout, patched and built by tools/t2p.py")
    ap.add_argument("--llama-build", metavar="DIR", help="its build folder (default: LLAMA/build-t2p)")
    ap.add_argument("-m", "--model", metavar="PATH", help="the GGUF model")
    ap.add_argument("--mode", choices=["decode", "prompt", "both"], default="decode",
                    help="decode: single decoded tokens (the default); prompt: whole prompt batches of -p tokens "
                         "as one ubatch; both: the two, one after the other")
    ap.add_argument("-t", "--threads", dest="t", default="1", metavar="LIST",
                    help="thread counts, comma-separated; 'all' = every core (default 1)")
    ap.add_argument("-p", type=int, default=None, metavar="N",
                    help="decode: prompt tokens before the steps (default 16); prompt: the tokens of a batch, "
                         "processed as one ubatch (default 512); with --mode both, given: used by both")
    ap.add_argument("-n", type=int, default=8, metavar="N", help="decode steps per mode and round (default 8)")
    ap.add_argument("--batches", type=int, default=1, metavar="N",
                    help="prompt batches per mode and round (default 1)")
    ap.add_argument("--rounds", type=int, default=2, metavar="N", help="rounds per run (default 2)")
    ap.add_argument("--warmup", type=int, default=8, metavar="N",
                    help="decode steps per context before the rounds, not timed (default 8: the first steps "
                         "after a load run slower)")
    ap.add_argument("--batch-warmup", type=int, default=1, metavar="N",
                    help="prompt batches per context before the rounds, not timed (default 1)")
    ap.add_argument("--repeat", type=int, default=1, metavar="N",
                    help="runs per kind, configuration and thread count, interleaved (default 1)")
    ap.add_argument("--configs", default="stock,ours", metavar="LIST",
                    help="comma-separated: stock (GGML_T2P=0), ours, ours-nohybrid (GGML_T2P_HYBRID=0: the "
                         "hybrid's GATED_DELTA_NET, SSM_CONV, CONCAT and F32 GET_ROWS left to ggml) (default stock,ours)")
    ap.add_argument("--fa", choices=["on", "off", "auto"], default="auto",
                    help="flash attention (default auto, as llama-bench: on for the CPU)")
    ap.add_argument("--mmap", action="store_true", help="load with mmap (default: no mmap, as tools/ab.py)")
    ap.add_argument("--work", metavar="DIR",
                    help="where decode-profile is compiled (default: the cache folder's profile/)")
    ap.add_argument("--out", metavar="DIR", help="keep each run's JSON and log there (default: a temporary folder)")
    ap.add_argument("--from-json", nargs="+", metavar="FILE",
                    help="print the tables of runs kept with --out (decode and prompt, old and new); runs nothing")
    return ap


def load_runs(ap, files):
    runs = []
    for path in files:
        tc.file_arg(ap, "--from-json", path)
        try:
            with open(path, encoding="utf-8") as f:
                r = json.load(f)
        except (OSError, ValueError) as e:
            ap.error(f"--from-json {path}: not decode-profile JSON ({e})")
        if not isinstance(r, dict) or "nodes" not in r or "steps" not in r or "threads" not in r:
            ap.error(f"--from-json {path}: not decode-profile JSON (no nodes, steps or threads)")
        if run_kind(r) not in KINDS:
            ap.error(f"--from-json {path}: unknown kind '{run_kind(r)}' (known: {', '.join(KINDS)})")
        runs.append(r)
    return runs


def print_report(runs):
    try:
        lines = report(runs)
    except (ValueError, KeyError, TypeError, ZeroDivisionError, IndexError) as e:
        tc.say(TOOL, f"cannot aggregate these runs: {e}")
        return 1, None
    for line in lines:
        print(line)
    sys.stdout.flush()
    return 0, lines


def program_args(kind, args):
    """decode-profile's arguments for one kind (beside -m, -o and -t)."""
    if kind == "prompt":
        return ["--kind", "prompt", "-p", str(args.p or 512), "-n", str(args.batches), "-w", str(args.batch_warmup)]
    return ["-p", str(args.p or 16), "-n", str(args.n), "-w", str(args.warmup)]


def run(argv):
    ap = parser()
    args = ap.parse_args(argv)
    if args.from_json:
        if args.llama or args.model:
            ap.error("--from-json reads earlier runs: give it without --llama and -m")
        return print_report(load_runs(ap, args.from_json))
    if not args.llama or not args.model:
        ap.error("--llama and -m are required (or --from-json FILE...)")
    if not os.path.isdir(args.llama):
        ap.error(f"--llama {args.llama}: no such folder")
    tc.file_arg(ap, "-m", args.model)
    threads = tc.thread_counts_arg(ap, args.t)
    for name, v, low in (("-p", 1 if args.p is None else args.p, 1), ("-n", args.n, 1), ("--rounds", args.rounds, 1),
                         ("--repeat", args.repeat, 1), ("--warmup", args.warmup, 1), ("--batches", args.batches, 1),
                         ("--batch-warmup", args.batch_warmup, 1)):
        if v < low:
            ap.error(f"{name} must be at least {low}")
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    for c in configs:
        if c not in CONFIGS:
            ap.error(f"--configs: unknown configuration '{c}' (known: {', '.join(CONFIGS)})")
    if not configs:
        ap.error("--configs: none given")
    configs = list(dict.fromkeys(configs))
    kinds = KINDS if args.mode == "both" else [args.mode]
    if tc.IS_WINDOWS:
        ap.error("Windows is not supported yet: decode-profile is compiled with a Unix-style C++ compiler "
                 "command (-L, -l, rpath); build tools/profile/decode-profile.cpp against llama.lib and "
                 "ggml.lib yourself and pass its JSON to --from-json")
    build = os.path.abspath(args.llama_build or os.path.join(args.llama, "build-t2p"))
    lib_dir = find_lib_dir(build)
    if not lib_dir:
        ap.error(f"no {lib_names()[0]} under {build}: build the checkout with shared libraries "
                 f"(tools/t2p.py --llama {args.llama} does), or name the build folder with --llama-build")
    work = os.path.abspath(args.work or os.path.join(tc.cache_dir(), "profile"))
    tc.out_arg(ap, work, "--work")
    llama = os.path.abspath(args.llama)
    model = os.path.abspath(args.model)
    with tc.out_dir(ap, args.out, "t2p-profile-") as out:
        exe = build_program(llama, lib_dir, work, os.path.join(out, "compile.log"))
        if not exe:
            return 1, None
        runs = []
        for rep in range(1, args.repeat + 1):
            for kind in kinds:
                for t in threads:
                    load_line, load_warn = tc.machine_load(t)
                    tc.say(TOOL, load_line)
                    if load_warn:
                        tc.say(TOOL, load_warn)
                    for c in configs:
                        stem = f"{'prompt-' if kind == 'prompt' else ''}{c}-t{t}-{rep}"
                        path = os.path.join(out, stem + ".json")
                        log = os.path.join(out, stem + ".log")
                        cmd = ([exe, "-m", model, "-o", path, "-t", str(t)] + program_args(kind, args)
                               + ["-r", str(args.rounds), "--fa", args.fa, "--mmap", "1" if args.mmap else "0"])
                        env = CONFIGS[c]
                        try:
                            load1 = os.getloadavg()[0]
                        except (AttributeError, OSError):
                            load1 = None
                        tc.say(TOOL, f"run {rep}/{args.repeat}, {kind}, {t} thread(s), {c}: {tc.show_env(env)} "
                                     f"{' '.join(cmd)}")
                        secs = tc.run_checked(TOOL, f"{kind} {c} ({t} threads)", cmd, env, log)
                        if secs is None:
                            return 1, None
                        try:
                            with open(path, encoding="utf-8") as f:
                                r = json.load(f)
                        except (OSError, ValueError) as e:
                            tc.say(TOOL, f"{kind} {c} ({t} threads): no readable JSON from decode-profile in "
                                         f"{path}: {e}")
                            return 1, None
                        r["config"] = c
                        r["load"] = load1
                        r["t2p"] = tc.plugin_state(tc.read_text(log))[1]
                        with open(path, "w", encoding="utf-8") as f:
                            json.dump(r, f)
                        tc.say(TOOL, f"  {secs:.1f} s; ggml-t2p: {r['t2p']}")
                        runs.append(r)
        status, lines = print_report(runs)
        if args.out and status == 0:
            print(f"JSON and logs: {args.out} (tools/profile.py --from-json {os.path.join(args.out, '*.json')})")
        return status, lines


if __name__ == "__main__":
    tc.tool_main(TOOL, run)
