#!/usr/bin/env python3
"""Tests for tools/profile.py's own logic (no llama.cpp needed). Python 3 standard library only.

Run: python3 tests/python/test_profile.py [-v]

* classify puts each node in its class: ternary MUL_MATs by buffer (CPU_T2P) or type (PQ2_0 in stock's
  buffer), other weight MUL_MATs, attention (FLASH_ATTN_EXT, or KQ/KQV MUL_MATs on the KV cache and
  SOFT_MAX when the graph has no FLASH_ATTN_EXT), norms, ROPE, the rest;
* aggregate, on a canned decode-profile JSON with hand-computed answers: a norm segment (RMS_NORM+MUL)
  counts as a norm, empty-op segments give the per-compute cost that is subtracted from every other
  segment, each class is the median over steps, residual = light graph - sum of classes, outside =
  whole token without callback - light graph, weight bytes and the node counts;
* --from-json prints that table (the rows add up to the whole token), and the command line refuses
  what it cannot run (no --llama/-m, --from-json with them, -t 0, an unknown configuration, a missing
  or bad JSON file, a build folder without libllama) with a message and status 2.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
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


def node(op, name, src0_type="f32", buft="CPU", weights=False, nbytes=0):
    return {"op": op, "name": name, "type": "f32", "ne": [8, 1, 1, 1], "src0": "x", "src0_type": src0_type,
            "src0_buft": buft, "src0_weights": weights, "src0_bytes": nbytes, "src1_type": "f32"}


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
    return {"format": 1, "model": "/m/canned.gguf", "desc": "canned", "threads": threads, "n_prompt": 8,
            "n_gen": 3, "rounds": 1, "fa": "auto", "mmap": 0, "model_bytes": 1, "prompt_us": [1, 1],
            "nodes": copy.deepcopy(NODES), "steps": steps, "config": config, "load": 0.5, "t2p": "enabled"}


class Classify(unittest.TestCase):
    def test_classes(self):
        want = ["rest", "norm", "rest", "ternary", "rest", "rope", "rest", "attention", "attention", "rest",
                "rest", "other_mm", "ternary"]
        self.assertEqual([prof.classify(n, True) for n in NODES], want)
        # without FLASH_ATTN_EXT in the graph, SOFT_MAX is attention's
        self.assertEqual(prof.classify(NODES[9], False), "attention")
        self.assertEqual(prof.classify(node("MUL_MAT_ID", "e", "ptq1_0", "CPU", True), True), "ternary")
        self.assertEqual(prof.classify(node("NORM", "n"), True), "norm")

    def test_segment_owner(self):
        self.assertEqual(prof.segment_owner(NODES, 1, 2), 1)
        self.assertEqual(prof.segment_owner(NODES, 4, 4), None)
        self.assertEqual(prof.segment_owner(NODES, 4, 5), 5)


class Aggregate(unittest.TestCase):
    def test_one_step(self):
        per_class, rest_ops, cost, n, raw = prof.step_profile(NODES, True, SEGS)
        self.assertEqual(cost, 3)
        self.assertEqual(n, 12)
        self.assertEqual(per_class, {"ternary": 300, "other_mm": 50, "attention": 30, "norm": 4, "rope": 2,
                                     "rest": 11})
        self.assertEqual(rest_ops, {"GET_ROWS": 7, "SOFT_MAX": 1, "ADD": 3})
        self.assertEqual(raw, sum(us for _, _, us in SEGS) - 6)

    def test_fork_correction(self):
        """A compute on all threads costs FORK_US more, except for ops ggml-cpu runs on one (GET_ROWS)."""
        per_class, rest_ops, cost, _, _ = prof.step_profile(NODES, True, SEGS, fork_us=2)
        self.assertEqual(cost, 3)
        self.assertEqual(per_class, {"ternary": 296, "other_mm": 48, "attention": 26, "norm": 2, "rope": 0,
                                     "rest": 7})
        self.assertEqual(rest_ops, {"GET_ROWS": 7, "SOFT_MAX": -1, "ADD": 1})
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

    def test_summary(self):
        s = prof.aggregate([canned()])
        self.assertTrue(s["flash"])
        # medians over the steps k = 1, 2, 3 of k * (one step's value), in ms
        want = {"ternary": 0.6, "other_mm": 0.1, "attention": 0.06, "norm": 0.008, "rope": 0.004, "rest": 0.022}
        for c, v in want.items():
            self.assertAlmostEqual(s["classes"][c], v, places=9, msg=c)
        self.assertAlmostEqual(s["rest_ops"]["GET_ROWS"], 0.014)
        self.assertAlmostEqual(s["token"], 1.1)
        self.assertAlmostEqual(s["token_light"], 1.15)
        self.assertAlmostEqual(s["graph"], 0.9)
        self.assertAlmostEqual(s["token_nodes"], 4.0)
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
        self.assertEqual(s["steps"], {"none": 3, "light": 3, "nodes": 3})
        # the rows add up to the whole token
        self.assertAlmostEqual(sum(s["classes"].values()) + s["residual"] + s["outside"], s["token"])

    def test_merge_and_refuse(self):
        a, b = canned(), canned()
        for st in b["steps"]:
            st["token_us"] *= 10
        s = prof.aggregate([a, b])
        self.assertEqual(s["steps"], {"none": 6, "light": 6, "nodes": 6})
        self.assertAlmostEqual(s["token"], (1200 + 10000) / 2 / 1000)   # the median of 6 samples
        b["nodes"][5]["op"] = "ADD"
        with self.assertRaisesRegex(ValueError, "graphs differ"):
            prof.aggregate([a, b])
        c = canned()
        c["steps"] = [st for st in c["steps"] if st["mode"] != "light"]
        with self.assertRaisesRegex(ValueError, "no steps in mode 'light'"):
            prof.aggregate([c])


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
        self.assertIn("--from-json", p.stdout)

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

    def test_refusals(self):
        d = self.tmp.name
        llama = os.path.join(d, "llama")
        for argv, want in (([], "--llama and -m are required"),
                           (["--from-json", self.json["ours"], "--llama", d], "without --llama and -m"),
                           (["--from-json", os.path.join(d, "missing.json")], "no such file"),
                           (["--from-json", self.model], "not decode-profile JSON"),
                           (["--llama", os.path.join(d, "nope"), "-m", self.model], "no such folder"),
                           (["--llama", llama, "-m", self.model, "-t", "0"], "not a thread count"),
                           (["--llama", llama, "-m", self.model, "--configs", "ours,nope"], "unknown configuration"),
                           (["--llama", llama, "-m", self.model, "-n", "0"], "-n must be at least 1"),
                           (["--llama", llama, "-m", self.model],
                            "Windows is not supported" if os.name == "nt" else "no libllama")):
            p = self.run_tool(*argv)
            self.assertEqual(p.returncode, 2, (argv, p.stdout))
            self.assertIn(want, p.stdout, argv)


if __name__ == "__main__":
    unittest.main()
