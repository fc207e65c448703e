#!/usr/bin/env python3
"""Tests for tools/profile.py's own logic (no llama.cpp needed). Python 3 standard library only.

Run: python3 tests/python/test_profile.py [-v]

* classify puts each node in its class: ternary MUL_MATs by buffer (CPU_T2P) or type (PQ2_0 in stock's
  buffer), other weight MUL_MATs, attention (FLASH_ATTN_EXT, or KQ/KQV MUL_MATs on the KV cache and
  SOFT_MAX when the graph has no FLASH_ATTN_EXT), norms, ROPE, the rest; op_name / segment_name give
  the by-name keys (MUL_MAT with its class, a fused norm segment as RMS_NORM+MUL, empty segments none);
* aggregate, on a canned decode-profile JSON with hand-computed answers: a norm segment (RMS_NORM+MUL)
  counts as a norm, empty-op segments give the per-compute cost that is subtracted from every other
  segment, each class is the median over steps, residual = light graph - sum of classes, outside =
  whole token without callback - light graph, weight bytes and the node counts; the same per op name
  (every segment in exactly one name, the segments per graph, the name residual);
* prompt batches, on a canned prompt JSON of a Bonsai 2-like graph (GATED_DELTA_NET, SSM_CONV, CONCAT,
  CPY, L2_NORM, SILU, SIGMOID, ...): per-batch and per-token figures, the ternary GMAC/s from src0_ne,
  refusing to merge decode with prompt runs or batches of different sizes; old (format 1) JSON still
  aggregates, without GMAC/s;
* --from-json prints those tables (decode first, then prompt; the rows add up to the whole step, the
  by-name table lists every op), and the command line refuses what it cannot run (no --llama/-m,
  --from-json with them, -t 0, an unknown configuration or mode, -n/--batches 0, a missing or bad JSON
  file, a build folder without libllama) with a message and status 2;
* the run loop, with a stand-in for decode-profile (a script writing canned JSON): --mode both runs the
  decode and the prompt kind for every configuration and thread count with the right arguments (-p,
  -n/--batches, -w/--batch-warmup, --kind prompt) and environment (stock GGML_T2P=0, ours-nohybrid
  GGML_T2P_HYBRID=0), and keeps JSON that --from-json reads back.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "tools", "profile.py")
spec = importlib.util.spec_from_file_location("profile_under_test", TOOL)
prof = importlib.util.module_from_spec(spec)
spec.loader.exec_module(prof)


def node(op, name, src0_type="f32", buft="CPU", weights=False, nbytes=0, ne=None, src0_ne=None):
    n = {"op": op, "name": name, "type": "f32", "ne": ne or [8, 1, 1, 1], "src0": "x", "src0_type": src0_type,
         "src0_buft": buft, "src0_weights": weights, "src0_bytes": nbytes, "src1_type": "f32"}
    if src0_ne:
        n["src0_ne"] = src0_ne
    return n


NODES = [
    node("GET_ROWS", "embd", "q5_0", weights=True, nbytes=99999),   # 0 rest (not a MUL_MAT: no bytes counted)
    node("RMS_NORM", "norm-0"),                                       # 1 norm, computed with 2
    node("MUL", "attn_norm-0"),                                       # 2
    node("MUL_MAT", "Qcur-0", "pq2_0", "CPU_T2P", True, 1000),        # 3 ternary (ours)
    node("RESHAPE", "Qcur-0 (reshaped)"),                             # 4 empty
    node("ROPE", "Qcur-0"),                                           # 5 rope
    node("VIEW", "cache_k_l0 (view)"),                                # 6 empty
    node("FLASH_ATTN_EXT", "__fattn__-0"),                            # 7 attention
    node("MUL_MAT", "kq-0", "f16", "CPU", False, 4096),               # 8 attention (src0: the KV cache)
    node("SOFT_MAX", "kq_soft_max-0"),                                # 9 rest while the graph has FA
    node("ADD", "ffn_inp-0"),                                         # 10 rest
    node("MUL_MAT", "result_output", "q8_0", "CPU", True, 500),       # 11 other weight MUL_MAT
    node("MUL_MAT", "ffn_down-0", "pq2_0", "CPU", True, 2000),        # 12 ternary (stock's buffer)
]
# (first node, last node, µs) of one 'nodes' step; the step k (1, 2, 3) has every time times k
SEGS = [[0, 0, 10], [1, 2, 7], [3, 3, 103], [4, 4, 3], [5, 5, 5], [6, 6, 3], [7, 7, 23], [8, 8, 13],
        [9, 9, 4], [10, 10, 6], [11, 11, 53], [12, 12, 203]]


def canned(config="ours", threads=1):
    steps = []
    for k, (tok, lt, lg) in enumerate([(1000, 1150, 800), (1200, 1150, 900), (1100, 1300, 1000)], 1):
        steps.append({"round": 0, "pos": 8 + k, "mode": "none", "token_us": tok})
        steps.append({"round": 0, "pos": 8 + k, "mode": "light", "token_us": lt, "graph_us": lg,
                      "before_us": 50 * k, "after_us": 40 * k})
        steps.append({"round": 0, "pos": 8 + k, "mode": "nodes", "token_us": 2000 * k, "graph_us": 1000 * k,
                      "before_us": 0, "after_us": 0, "segs": [[a, b, us * k] for a, b, us in SEGS]})
    # decode-profile's format 1: no kind, no src0_ne, no n_tokens (what --from-json must still read)
    return {"format": 1, "model": "/m/canned.gguf", "desc": "canned", "threads": threads, "n_prompt": 8,
            "n_gen": 3, "rounds": 1, "fa": "auto", "mmap": 0, "model_bytes": 1, "prompt_us": [1, 1],
            "nodes": copy.deepcopy(NODES), "steps": steps, "config": config, "load": 0.5, "t2p": "enabled"}


# A Bonsai 2-like (qwen35 linear-attention block) graph of a 512-token batch
P = 512
PROMPT_NODES = [
    node("GET_ROWS", "model.input_embed", "pq2_0", weights=True, nbytes=99999, ne=[2048, P, 1, 1]),  # 0 rest
    node("RMS_NORM", "norm-0", ne=[2048, P, 1, 1]),                                                  # 1 norm
    node("MUL", "attn_norm-0", ne=[2048, P, 1, 1]),                                                  # 2 fused
    node("MUL_MAT", "linear_attn_qkv_mixed-0", "pq2_0", "CPU_T2P", True, 3000, [6144, P, 1, 1],
         [2048, 6144, 1, 1]),                                                                        # 3 ternary
    node("RESHAPE", "qkv (reshaped)"),                                                               # 4 empty
    node("CONCAT", "conv_input-0"),                                                                  # 5 rest
    node("SSM_CONV", "conv_output_raw-0"),                                                           # 6 rest
    node("SILU", "conv_output_silu-0"),                                                              # 7 rest
    node("VIEW", "q_conv-0"),                                                                        # 8 empty
    node("L2_NORM", "q_conv-0"),                                                                     # 9 norm
    node("GATED_DELTA_NET", "__fgdn__-0"),                                                           # 10 rest
    node("CPY", "state_update-0"),                                                                   # 11 rest
    node("SIGMOID", "beta_sigmoid-0"),                                                               # 12 rest, 1 thread
    node("MUL_MAT", "linear_attn_out-0", "pq2_0", "CPU", True, 1000, [2048, P, 1, 1],
         [2048, 2048, 1, 1]),                                                                        # 13 ternary
    node("ADD", "ffn_inp-0", ne=[2048, P, 1, 1]),                                                    # 14 rest
]
# one batch of the 'nodes' mode at k = 1 (steps k = 1, 2, 3 have every time times k); the empty segments
# take 3 µs, so each other one is 3 µs over a round figure
PROMPT_SEGS = [[0, 0, 53], [1, 2, 103], [3, 3, 20003], [4, 4, 3], [5, 5, 503], [6, 6, 1003], [7, 7, 203],
               [8, 8, 3], [9, 9, 153], [10, 10, 5003], [11, 11, 33], [12, 12, 23], [13, 13, 8003], [14, 14, 13]]
# corrected, in µs, at k = 1
PROMPT_BY_NAME = {"GET_ROWS": 50, "RMS_NORM+MUL": 100, "MUL_MAT ternary": 28000, "CONCAT": 500, "SSM_CONV": 1000,
                  "SILU": 200, "L2_NORM": 150, "GATED_DELTA_NET": 5000, "CPY": 30, "SIGMOID": 20, "ADD": 10}


def canned_prompt(config="ours", threads=1, n_prompt=P):
    steps = []
    for k, (none, lt, lg) in enumerate([(75000, 75500, 72000), (76000, 75000, 71000), (74000, 76000, 73000)], 1):
        steps.append({"round": 0, "pos": 0, "n_tokens": n_prompt, "mode": "none", "batch_us": none})
        steps.append({"round": 0, "pos": 0, "n_tokens": n_prompt, "mode": "light", "batch_us": lt, "graph_us": lg,
                      "before_us": 500 * k, "after_us": 40 * k})
        steps.append({"round": 0, "pos": 0, "n_tokens": n_prompt, "mode": "nodes", "batch_us": 40000 * k,
                      "graph_us": 36000 * k, "before_us": 0, "after_us": 0,
                      "segs": [[a, b, us * k] for a, b, us in PROMPT_SEGS]})
    return {"format": 2, "kind": "prompt", "model": "/m/b2.gguf", "desc": "qwen35 canned", "threads": threads,
            "n_prompt": n_prompt, "n_gen": 1, "rounds": 3, "warmup": 1, "fa": "auto", "mmap": 0,
            "n_batch": n_prompt, "n_ubatch": n_prompt, "model_bytes": 1, "prompt_us": [0, 0], "reprompts": 0,
            "nodes": copy.deepcopy(PROMPT_NODES), "compute_cost_us": [[0.5, 0.5]], "steps": steps,
            "config": config, "load": 0.25, "t2p": "enabled"}


class Classify(unittest.TestCase):
    def test_classes(self):
        want = ["rest", "norm", "rest", "ternary", "rest", "rope", "rest", "attention", "attention", "rest",
                "rest", "other_mm", "ternary"]
        self.assertEqual([prof.classify(n, True) for n in NODES], want)
        # without FLASH_ATTN_EXT in the graph, SOFT_MAX is attention's
        self.assertEqual(prof.classify(NODES[9], False), "attention")
        self.assertEqual(prof.classify(node("MUL_MAT_ID", "e", "ptq1_0", "CPU", True), True), "ternary")
        self.assertEqual(prof.classify(node("NORM", "n"), True), "norm")
        self.assertEqual([prof.classify(n, False) for n in PROMPT_NODES],
                         ["rest", "norm", "rest", "ternary", "rest", "rest", "rest", "rest", "rest", "norm", "rest",
                          "rest", "rest", "ternary", "rest"])

    def test_segment_owner(self):
        self.assertEqual(prof.segment_owner(NODES, 1, 2), 1)
        self.assertEqual(prof.segment_owner(NODES, 4, 4), None)
        self.assertEqual(prof.segment_owner(NODES, 4, 5), 5)

    def test_names(self):
        self.assertEqual([prof.op_name(n, True) for n in NODES],
                         ["GET_ROWS", "RMS_NORM", "MUL", "MUL_MAT ternary", "RESHAPE", "ROPE", "VIEW",
                          "FLASH_ATTN_EXT", "MUL_MAT KQ/KQV", "SOFT_MAX", "ADD", "MUL_MAT other weights",
                          "MUL_MAT ternary"])
        self.assertEqual(prof.segment_name(NODES, 1, 2, True), "RMS_NORM+MUL")      # the fused pair
        self.assertEqual(prof.segment_name(NODES, 4, 5, True), "ROPE")              # empty ops leave no trace
        self.assertEqual(prof.segment_name(NODES, 6, 6, True), None)
        self.assertEqual(prof.segment_name(PROMPT_NODES, 10, 10, False), "GATED_DELTA_NET")


class Aggregate(unittest.TestCase):
    def test_one_step(self):
        per_class, rest_ops, cost, n, raw, by_name = prof.step_profile(NODES, True, SEGS)
        self.assertEqual(cost, 3)
        self.assertEqual(n, 12)
        self.assertEqual(per_class, {"ternary": 300, "other_mm": 50, "attention": 30, "norm": 4, "rope": 2,
                                     "rest": 11})
        self.assertEqual(rest_ops, {"GET_ROWS": 7, "SOFT_MAX": 1, "ADD": 3})
        self.assertEqual(raw, sum(us for _, _, us in SEGS) - 6)
        self.assertEqual(by_name, {"GET_ROWS": 7, "RMS_NORM+MUL": 4, "MUL_MAT ternary": 300, "ROPE": 2,
                                   "FLASH_ATTN_EXT": 20, "MUL_MAT KQ/KQV": 10, "SOFT_MAX": 1, "ADD": 3,
                                   "MUL_MAT other weights": 50})
        self.assertEqual(sum(by_name.values()), sum(per_class.values()))

    def test_fork_correction(self):
        """A compute on all threads costs FORK_US more, except for ops ggml-cpu runs on one (GET_ROWS)."""
        per_class, rest_ops, cost, _, _, by_name = prof.step_profile(NODES, True, SEGS, fork_us=2)
        self.assertEqual(cost, 3)
        self.assertEqual(per_class, {"ternary": 296, "other_mm": 48, "attention": 26, "norm": 2, "rope": 0,
                                     "rest": 7})
        self.assertEqual(rest_ops, {"GET_ROWS": 7, "SOFT_MAX": -1, "ADD": 1})
        self.assertEqual(by_name["GET_ROWS"], 7)
        self.assertEqual(by_name["MUL_MAT ternary"], 296)
        self.assertEqual(by_name["RMS_NORM+MUL"], 2)
        _, _, _, _, _, pb = prof.step_profile(PROMPT_NODES, False, PROMPT_SEGS, fork_us=2)
        self.assertEqual(pb["SIGMOID"], 20)              # one thread in ggml-cpu: no fork/join to subtract
        self.assertEqual(pb["GATED_DELTA_NET"], 4998)    # all threads
        self.assertEqual(pb["SSM_CONV"], 998)
        run = canned(threads=2)
        run["compute_cost_us"] = [[0.3, 5.3], [0.3, 4.3], [0.5, 6.5]]
        self.assertAlmostEqual(prof.fork_cost(run), 5.0)
        self.assertEqual(prof.fork_cost(canned(threads=1)), 0.0)       # no measurement: no correction
        run1 = canned(threads=1)
        run1["compute_cost_us"] = [[0.3, 0.4]]
        self.assertEqual(prof.fork_cost(run1), 0.0)                    # 1 thread: nothing to fork
        s = prof.aggregate([run])
        self.assertAlmostEqual(s["fork_us"], 5.0)
        # step k (1, 2, 3) has cost 3k: ternary 100k - 5 + 200k - 5 -> the median at k = 2: 590 µs;
        # rest: GET_ROWS 7k (one thread: no fork), SOFT_MAX k - 5, ADD 3k - 5 -> 11k - 10 -> 12 µs
        self.assertAlmostEqual(s["classes"]["ternary"], 0.59)
        self.assertAlmostEqual(s["classes"]["rest"], 0.012)
        self.assertAlmostEqual(s["by_name"]["MUL_MAT ternary"], 0.59)
        self.assertAlmostEqual(s["by_name"]["ADD"], 0.001)

    def test_summary(self):
        s = prof.aggregate([canned()])
        self.assertEqual((s["kind"], s["n_tokens"]), ("decode", 1))
        self.assertTrue(s["flash"])
        # medians over the steps k = 1, 2, 3 of k * (one step's value), in ms
        want = {"ternary": 0.6, "other_mm": 0.1, "attention": 0.06, "norm": 0.008, "rope": 0.004, "rest": 0.022}
        for c, v in want.items():
            self.assertAlmostEqual(s["classes"][c], v, places=9, msg=c)
        self.assertAlmostEqual(s["rest_ops"]["GET_ROWS"], 0.014)
        self.assertAlmostEqual(s["step"], 1.1)
        self.assertAlmostEqual(s["step_light"], 1.15)
        self.assertAlmostEqual(s["graph"], 0.9)
        self.assertAlmostEqual(s["step_nodes"], 4.0)
        self.assertAlmostEqual(s["graph_nodes"], 2.0)
        self.assertAlmostEqual(s["before"], 0.1)
        self.assertAlmostEqual(s["after"], 0.08)
        self.assertAlmostEqual(s["residual"], 0.9 - 0.794)
        self.assertAlmostEqual(s["outside"], 0.2)
        self.assertAlmostEqual(s["compute_cost_us"], 6)
        self.assertEqual(s["computes"], 12)
        self.assertEqual((s["n_nodes"], s["n_ternary"], s["n_t2p"]), (13, 2, 1))
        self.assertEqual(s["ternary_bytes"], 3000)
        self.assertEqual(s["matmul_weight_bytes"], 3500)
        self.assertIsNone(s["ternary_macs"])           # format 1: no src0_ne
        self.assertEqual(s["steps"], {"none": 3, "light": 3, "nodes": 3})
        # the rows add up to the whole token
        self.assertAlmostEqual(sum(s["classes"].values()) + s["residual"] + s["outside"], s["step"])
        # by name: every non-empty segment in one name, medians at k = 2
        want = {"GET_ROWS": 0.014, "RMS_NORM+MUL": 0.008, "MUL_MAT ternary": 0.6, "ROPE": 0.004,
                "FLASH_ATTN_EXT": 0.04, "MUL_MAT KQ/KQV": 0.02, "SOFT_MAX": 0.002, "ADD": 0.006,
                "MUL_MAT other weights": 0.1}
        self.assertEqual(set(s["by_name"]), set(want))
        for k, v in want.items():
            self.assertAlmostEqual(s["by_name"][k], v, places=9, msg=k)
        self.assertEqual(s["name_count"], {"GET_ROWS": 1, "RMS_NORM+MUL": 1, "MUL_MAT ternary": 2, "ROPE": 1,
                                           "FLASH_ATTN_EXT": 1, "MUL_MAT KQ/KQV": 1, "SOFT_MAX": 1, "ADD": 1,
                                           "MUL_MAT other weights": 1})
        self.assertAlmostEqual(sum(s["by_name"].values()) + s["name_residual"] + s["outside"], s["step"])

    def test_merge_and_refuse(self):
        a, b = canned(), canned()
        for st in b["steps"]:
            st["token_us"] *= 10
        s = prof.aggregate([a, b])
        self.assertEqual(s["steps"], {"none": 6, "light": 6, "nodes": 6})
        self.assertAlmostEqual(s["step"], (1200 + 10000) / 2 / 1000)   # the median of 6 samples
        b["nodes"][5]["op"] = "ADD"
        with self.assertRaisesRegex(ValueError, "graphs differ"):
            prof.aggregate([a, b])
        c = canned()
        c["steps"] = [st for st in c["steps"] if st["mode"] != "light"]
        with self.assertRaisesRegex(ValueError, "no steps in mode 'light'"):
            prof.aggregate([c])


class Prompt(unittest.TestCase):
    def test_summary(self):
        s = prof.aggregate([canned_prompt()])
        self.assertEqual((s["kind"], s["n_tokens"]), ("prompt", P))
        self.assertFalse(s["flash"])
        # medians over k = 1, 2, 3 of k * the batch's values: k = 2
        self.assertAlmostEqual(s["step"], 75.0)
        self.assertAlmostEqual(s["step_light"], 75.5)
        self.assertAlmostEqual(s["graph"], 72.0)
        self.assertAlmostEqual(s["step_nodes"], 80.0)
        self.assertAlmostEqual(s["graph_nodes"], 72.0)
        self.assertAlmostEqual(s["before"], 1.0)
        want = {"ternary": 56.0, "other_mm": 0.0, "attention": 0.0, "norm": 0.5, "rope": 0.0, "rest": 13.62}
        for c, v in want.items():
            self.assertAlmostEqual(s["classes"][c], v, places=9, msg=c)
        self.assertAlmostEqual(s["residual"], 72.0 - 70.12)
        self.assertAlmostEqual(s["outside"], 3.0)
        self.assertEqual(set(s["by_name"]), set(PROMPT_BY_NAME))
        for k, v in PROMPT_BY_NAME.items():
            self.assertAlmostEqual(s["by_name"][k], 2 * v / 1000.0, places=9, msg=k)
        self.assertEqual(s["name_count"], {k: 2 if k == "MUL_MAT ternary" else 1 for k in PROMPT_BY_NAME})
        self.assertAlmostEqual(sum(s["by_name"].values()) + s["name_residual"] + s["outside"], s["step"])
        # K x outputs of the two ternary MUL_MATs: 2048 x (6144 + 2048) x 512
        self.assertEqual(s["ternary_macs"], 2048 * 8192 * P)
        self.assertEqual((s["n_ternary"], s["n_t2p"], s["ternary_bytes"]), (2, 1, 4000))

    def test_medians_per_name(self):
        """Each name is its own median over the batches, so the by-name rows need their own residual."""
        r = canned_prompt()
        segs = [s for s in r["steps"] if s["mode"] == "nodes"]
        for st, (gdn, conv) in zip(segs, [(103, 13), (13, 103), (53, 53)]):
            st["segs"] = [[4, 4, 3], [6, 6, conv], [10, 10, gdn]]
        s = prof.aggregate([r])
        self.assertAlmostEqual(s["classes"]["rest"], 0.110)        # 110, 110, 100 µs
        self.assertAlmostEqual(s["by_name"]["GATED_DELTA_NET"], 0.050)
        self.assertAlmostEqual(s["by_name"]["SSM_CONV"], 0.050)
        self.assertAlmostEqual(s["residual"], 72.0 - 0.110)
        self.assertAlmostEqual(s["name_residual"], 72.0 - 0.100)
        self.assertEqual(s["name_count"], {"SSM_CONV": 1, "GATED_DELTA_NET": 1})

    def test_refuse(self):
        d, p = canned(), canned_prompt()
        with self.assertRaisesRegex(ValueError, "mix decode and prompt"):
            prof.aggregate([p, d])
        with self.assertRaisesRegex(ValueError, "differ in size"):
            prof.aggregate([p, canned_prompt(n_prompt=256)])

    def test_report(self):
        """Decode's tables first, then prompt's; each kind has the class table and the by-name table, with
        its own units; a configuration unknown to CONFIGS comes after the known ones."""
        lines = prof.report([canned_prompt("ours"), canned("ours"), canned_prompt("stock"),
                             canned_prompt("ours-nohybrid"), canned_prompt("mine")])
        text = "\n".join(lines)
        self.assertLess(text.index("decode profile:"), text.index("prompt profile:"))
        self.assertEqual(text.count("by op name"), 2)
        ptext = text[text.index("prompt profile:"):]
        head = [ln for ln in ptext.splitlines() if "ours-nohybrid" in ln and "stock" in ln][0]
        self.assertLess(head.index("stock"), head.index("ours "))
        self.assertLess(head.index("ours "), head.index("ours-nohybrid"))
        self.assertLess(head.index("ours-nohybrid"), head.index("mine"))
        self.assertIn("one batch of 512 tokens as one ubatch (n_batch 512, n_ubatch 512)", ptext)
        self.assertIn("GGML_T2P_HYBRID=0", ptext)
        self.assertNotIn("NOT one ubatch", ptext)
        self.assertIn("1 batch(es) x 3 rounds per run", ptext)
        small = canned_prompt()
        small["n_ubatch"] = 256
        self.assertIn("NOT one ubatch: n_ubatch 256 < 512", "\n".join(prof.report([small])))
        # runs of other sizes in one table: the title says so instead of naming the first run's
        other = canned_prompt("stock")
        other["rounds"] = 1
        text = "\n".join(prof.report([canned_prompt("ours"), other]))
        self.assertIn("batches x rounds per run differ between the runs", text)
        self.assertNotIn("x 3 rounds", text)
        self.assertIn("decode profile: canned.gguf (canned), 1 thread, FA auto, prompt 8 tokens, 3 steps x 1 rounds "
                      "per run (positions 8..10)", "\n".join(prof.report([canned()])))


class CommandLine(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="t2p-profile-")
        cls.json = {}
        for cfg in ("stock", "ours"):
            path = os.path.join(cls.tmp.name, f"{cfg}.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(canned(cfg), f)
            cls.json[cfg] = path
            path = os.path.join(cls.tmp.name, f"prompt-{cfg}.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(canned_prompt(cfg), f)
            cls.json["prompt-" + cfg] = path
        cls.model = os.path.join(cls.tmp.name, "m.gguf")
        with open(cls.model, "wb") as f:
            f.write(b"GGUF")
        os.makedirs(os.path.join(cls.tmp.name, "llama", "build-t2p", "bin"))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def run_tool(self, *argv):
        return subprocess.run([sys.executable, TOOL] + list(argv), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)

    def test_help(self):
        p = self.run_tool("--help")
        self.assertEqual(p.returncode, 0)
        for opt in ("--from-json", "--mode", "--batches", "--batch-warmup", "--threads", "ours-nohybrid",
                    "GGML_T2P_HYBRID=0", "What differs from decode"):
            self.assertIn(opt, p.stdout)

    def test_from_json(self):
        p = self.run_tool("--from-json", self.json["ours"], self.json["stock"])
        self.assertEqual(p.returncode, 0, p.stdout)
        out = p.stdout
        self.assertIn("stock (GGML_T2P=0)", out)
        self.assertLess(out.index("stock (GGML_T2P=0)"), out.index("ours"))   # stock's column first
        self.assertRegex(out, r"ternary MUL_MAT\s+0\.600\s+54\.5%\s+0\.600\s+54\.5%")
        self.assertRegex(out, r"attention \(FLASH_ATTN_EXT\)\s+0\.060\s+5\.5%")
        self.assertRegex(out, r"distortion residual\s+0\.106\s+9\.6%")
        self.assertRegex(out, r"outside the graph\s+0\.200\s+18\.2%")
        self.assertRegex(out, r"whole token \(no callback\)\s+1\.100\s+100\.0%")
        self.assertIn("empty-op computes measure 6.0 us each", out)
        # the by-name table of decode: n, ms/token, share per configuration, largest first
        names = out[out.index("by op name"):]
        self.assertRegex(names, r"\nMUL_MAT ternary\s+2\s+0\.600\s+54\.5%\s+0\.600\s+54\.5%")
        self.assertRegex(names, r"\nRMS_NORM\+MUL\s+1\s+0\.008\s+0\.7%")
        self.assertLess(names.index("MUL_MAT ternary"), names.index("MUL_MAT other weights"))
        self.assertLess(names.index("MUL_MAT other weights"), names.index("FLASH_ATTN_EXT"))
        self.assertRegex(names, r"sum of the ops above\s+0\.794\s+72\.2%")
        self.assertRegex(names, r"whole token \(no callback\)\s+1\.100\s+100\.0%")

    def test_from_json_prompt(self):
        p = self.run_tool("--from-json", self.json["prompt-ours"], self.json["ours"], self.json["prompt-stock"])
        self.assertEqual(p.returncode, 0, p.stdout)
        out = p.stdout
        self.assertLess(out.index("decode profile:"), out.index("prompt profile:"))
        pr = out[out.index("prompt profile:"):]
        self.assertRegex(pr, r"ms/batch\s+ms/token\s+share\s+ms/batch\s+ms/token\s+share")
        # ms per batch, per token (/ 512) and the share of the batch, stock's column then ours
        self.assertRegex(pr, r"ternary MUL_MAT\s+56\.00\s+0\.1094\s+74\.7%\s+56\.00\s+0\.1094\s+74\.7%")
        self.assertRegex(pr, r"norms \(RMS_NORM\+MUL, NORM\)\s+0\.50\s+0\.0010\s+0\.7%")
        self.assertRegex(pr, r"\nrest\s+13\.62\s+0\.0266\s+18\.2%")
        self.assertRegex(pr, r"distortion residual\s+1\.88\s+0\.0037\s+2\.5%")
        self.assertRegex(pr, r"outside the graph\s+3\.00\s+0\.0059\s+4\.0%")
        self.assertRegex(pr, r"whole batch \(no callback\)\s+75\.00\s+0\.1465\s+100\.0%")
        self.assertRegex(pr, r"tokens/s\s+6826\.67")
        self.assertRegex(pr, r"ternary MUL_MAT GMAC/s, over their time\s+153\.4")
        self.assertNotIn("GB/s", pr)
        self.assertIn("callback overhead: light +0.500 ms/batch", pr)
        names = pr[pr.index("by op name"):]
        for op, n, ms_, tok, share in (("MUL_MAT ternary", 2, "56.00", "0.1094", "74.7"),
                                       ("GATED_DELTA_NET", 1, "10.00", "0.0195", "13.3"),
                                       ("SSM_CONV", 1, "2.00", "0.0039", "2.7"),
                                       ("CONCAT", 1, "1.00", "0.0020", "1.3"),
                                       ("SILU", 1, "0.40", "0.0008", "0.5"),
                                       ("L2_NORM", 1, "0.30", "0.0006", "0.4"),
                                       ("RMS_NORM+MUL", 1, "0.20", "0.0004", "0.3"),
                                       ("GET_ROWS", 1, "0.10", "0.0002", "0.1"),
                                       ("CPY", 1, "0.06", "0.0001", "0.1"),
                                       ("SIGMOID", 1, "0.04", "0.0001", "0.1"),
                                       ("ADD", 1, "0.02", "0.0000", "0.0")):
            self.assertRegex(names, rf"\n{re.escape(op)}\s+{n}\s+{re.escape(ms_)}\s+{tok}\s+{share}%", op)
        order = [names.index("\n" + op + " ") for op in ("MUL_MAT ternary", "GATED_DELTA_NET", "SSM_CONV",
                                                         "CONCAT", "SILU", "L2_NORM", "RMS_NORM+MUL")]
        self.assertEqual(order, sorted(order))
        self.assertRegex(names, r"sum of the ops above\s+70\.12\s+0\.1370\s+93\.5%")
        self.assertRegex(names, r"distortion residual\s+1\.88\s+0\.0037\s+2\.5%")
        self.assertRegex(names, r"whole batch \(no callback\)\s+75\.00\s+0\.1465\s+100\.0%")

    def test_refusals(self):
        d = self.tmp.name
        llama = os.path.join(d, "llama")
        bad_kind = os.path.join(d, "bad-kind.json")
        with open(bad_kind, "w", encoding="utf-8") as f:
            json.dump(dict(canned_prompt(), kind="train"), f)
        for argv, want in (([], "--llama and -m are required"),
                           (["--from-json", self.json["ours"], "--llama", d], "without --llama and -m"),
                           (["--from-json", os.path.join(d, "missing.json")], "no such file"),
                           (["--from-json", self.model], "not decode-profile JSON"),
                           (["--from-json", bad_kind], "unknown kind 'train'"),
                           (["--llama", os.path.join(d, "nope"), "-m", self.model], "no such folder"),
                           (["--llama", llama, "-m", self.model, "-t", "0"], "not a thread count"),
                           (["--llama", llama, "-m", self.model, "--configs", "ours,nope"], "unknown configuration"),
                           (["--llama", llama, "-m", self.model, "--mode", "train"], "invalid choice"),
                           (["--llama", llama, "-m", self.model, "-n", "0"], "-n must be at least 1"),
                           (["--llama", llama, "-m", self.model, "-p", "0"], "-p must be at least 1"),
                           (["--llama", llama, "-m", self.model, "--batches", "0"], "--batches must be at least 1"),
                           (["--llama", llama, "-m", self.model, "--batch-warmup", "0"],
                            "--batch-warmup must be at least 1"),
                           (["--llama", llama, "-m", self.model, "--mode", "prompt", "--configs",
                             "stock,ours-nohybrid"],
                            "Windows is not supported" if os.name == "nt" else "no libllama")):
            p = self.run_tool(*argv)
            self.assertEqual(p.returncode, 2, (argv, p.stdout))
            self.assertIn(want, p.stdout, argv)


FAKE_PROGRAM = r'''
import json, os, sys
a = dict(zip(sys.argv[1::2], sys.argv[2::2]))
sys.path.insert(0, os.environ["PROFILE_TEST_DIR"])
import test_profile as t
kind = a.get("--kind", "decode")
r = t.canned_prompt(n_prompt=int(a["-p"])) if kind == "prompt" else t.canned()
for k in ("config", "load", "t2p"):
    del r[k]
r["threads"] = int(a["-t"])
r["argv"] = sys.argv[1:]
r["env"] = {k: os.environ.get(k) for k in ("GGML_T2P", "GGML_T2P_HYBRID")}
with open(a["-o"], "w") as f:
    json.dump(r, f)
print("ggml-t2p: disabled (GGML_T2P=0)" if os.environ.get("GGML_T2P") == "0" else "ggml-t2p: enabled (fake)")
'''


@unittest.skipIf(os.name == "nt", "the tool refuses Windows")
class RunLoop(unittest.TestCase):
    """tools/profile.py's run loop with a stand-in for decode-profile."""

    def test_both_modes(self):
        with tempfile.TemporaryDirectory(prefix="t2p-profile-run-") as d:
            build = os.path.join(d, "llama", "build-t2p", "bin")
            os.makedirs(build)
            open(os.path.join(build, prof.lib_names()[0]), "wb").close()
            model = os.path.join(d, "m.gguf")
            with open(model, "wb") as f:
                f.write(b"GGUF")
            exe = os.path.join(d, "fake-decode-profile")
            with open(exe, "w", encoding="utf-8") as f:
                f.write(f"#!{sys.executable}\n" + FAKE_PROGRAM)
            os.chmod(exe, 0o755)
            out = os.path.join(d, "out")
            saved = (prof.build_program, prof.tc.machine_load, dict(os.environ))
            prof.build_program = lambda *a: exe
            prof.tc.machine_load = lambda t: (f"load for {t}", None)
            for k in ("GGML_T2P", "GGML_T2P_HYBRID"):
                os.environ.pop(k, None)
            os.environ["PROFILE_TEST_DIR"] = os.path.dirname(os.path.abspath(__file__))
            try:
                with contextlib.redirect_stdout(io.StringIO()) as buf, contextlib.redirect_stderr(buf):
                    status, lines = prof.run(["--llama", os.path.join(d, "llama"), "-m", model, "--mode", "both",
                                              "-p", "512", "-t", "1,2", "--configs", "stock,ours,ours-nohybrid",
                                              "-n", "3", "--batches", "2", "--warmup", "5", "--batch-warmup", "2",
                                              "--rounds", "4", "--work", os.path.join(d, "work"), "--out", out])
            finally:
                prof.build_program, prof.tc.machine_load = saved[0], saved[1]
                os.environ.clear()
                os.environ.update(saved[2])
            self.assertEqual(status, 0, buf.getvalue())
            files = sorted(f for f in os.listdir(out) if f.endswith(".json"))
            self.assertEqual(files, sorted(f"{k}{c}-t{t}-1.json" for k in ("", "prompt-")
                                           for c in ("stock", "ours", "ours-nohybrid") for t in (1, 2)))
            for name in files:
                with open(os.path.join(out, name), encoding="utf-8") as f:
                    r = json.load(f)
                a = dict(zip(r["argv"][::2], r["argv"][1::2]))
                cfg = r["config"]
                self.assertTrue(name.startswith(("prompt-" if "prompt" in name else "") + cfg + "-t"), name)
                self.assertEqual(a["-t"], str(r["threads"]))
                self.assertEqual(a["-r"], "4")
                self.assertEqual(a["-p"], "512")
                if name.startswith("prompt-"):
                    self.assertEqual((a["--kind"], a["-n"], a["-w"]), ("prompt", "2", "2"), name)
                else:
                    self.assertNotIn("--kind", a)
                    self.assertEqual((a["-n"], a["-w"]), ("3", "5"), name)
                self.assertEqual(r["env"], {"stock": {"GGML_T2P": "0", "GGML_T2P_HYBRID": None},
                                            "ours": {"GGML_T2P": None, "GGML_T2P_HYBRID": None},
                                            "ours-nohybrid": {"GGML_T2P": None, "GGML_T2P_HYBRID": "0"}}[cfg], name)
                self.assertEqual(r["t2p"], "disabled (GGML_T2P=0): stock code ran" if cfg == "stock"
                                 else "enabled (fake); no repack line (no PQ2_0/PTQ1_0 MUL_MAT ran?)")
            text = "\n".join(lines)
            self.assertEqual(text.count("decode profile:"), 2)      # 1 and 2 threads
            self.assertEqual(text.count("prompt profile:"), 2)
            self.assertEqual(text.count("by op name"), 4)
            # the kept JSON reads back into the same tables
            p = subprocess.run([sys.executable, TOOL, "--from-json"] + [os.path.join(out, f) for f in files],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            self.assertEqual(p.returncode, 0, p.stdout)
            self.assertEqual(p.stdout.splitlines(), lines)
            # -p not given: decode's prompt 16 tokens, prompt's batch 512
            args = prof.parser().parse_args(["--mode", "both"])
            self.assertEqual(prof.program_args("decode", args), ["-p", "16", "-n", "8", "-w", "8"])
            self.assertEqual(prof.program_args("prompt", args), ["--kind", "prompt", "-p", "512", "-n", "1",
                                                                 "-w", "1"])


if __name__ == "__main__":
    unittest.main()
