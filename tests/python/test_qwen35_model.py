#!/usr/bin/env python3
"""A small qwen35 (Bonsai 2) model through the plugin path, every ternary matrix checked bit for bit.

Run: python3 tests/python/test_qwen35_model.py [-v]   (needs numpy and PyPI gguf==0.19.0, and cargo)

tools/make-test-model.py --synthetic bonsai2-test writes Bonsai 2's qwen35 tensor set at test widths
(hidden 256, FFN 512, 3 linear-attention blocks + 1 full-attention block, tied embedding, a vocabulary
of 1,000: token_embd's 1,000 rows end in a partial 16-row tile) as PQ2_0 and as PTQ1_0, from a tiny
tokenizer GGUF written here with PyPI gguf's writer (nothing is downloaded). The ternary tensors are
listed with PyPI gguf's GGUFReader (taught the block sizes of types 142 and 143) and checked to be
the qwen35 set: attn_qkv, attn_gate and ssm_out in the linear blocks, attn_q/k/v/output in the full
block, ffn_gate/up/down in every block, token_embd, and no output.weight (tied).

Then examples/model_check.rs (built once with cargo build --release --example model_check, in
CARGO_TARGET_DIR when set, else the checkout's target/, and run from where cargo put it) runs every
ternary tensor through the library's plugin object (the one the C ABI wraps: supports, repack, the
shim's plan / act_prepare / mul_mat_rows for 1, 7 and 33 columns on 1 and 3 threads, GET_ROWS for
token_embd) against the reference formula, at every kernel level this CPU runs (GGML_T2P_KERNEL=<level>,
the levels from model_check --levels) and at the level auto picks: its summary line must count every
ternary tensor of the file as taken, 0 declined, 0 wrong. The check of the check: --decline NAME (a
tensor left to stock code) and --corrupt NAME (one weight code flipped in the repacked bytes) must make
it fail, naming the tensor.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

try:
    import numpy as np  # noqa: F401  (the tool needs it; a missing one must fail here, not later)
    import gguf
except ImportError as e:                       # a failure, not a skip: the test command must notice
    sys.exit(f"test_qwen35_model: {e}; run the Python tests in the project's environment "
             "(python3 tools/test-all.py makes it from tools/requirements.txt)")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "tools", "make-test-model.py")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
from test_synthetic import teach_gguf, write_tokenizer  # noqa: E402  (PyPI gguf taught types 142 and 143)

PQ2_0, PTQ1_0 = 142, 143
N_VOCAB = 256                      # tokens of the tokenizer written here (padded to 1,000 by the tool)
SHAPE = "bonsai2-test"
LAYERS, VOCAB = 4, 1000            # the shape's blocks (3 linear + 1 full) and padded vocabulary
SUMMARY = re.compile(r"^model_check: (\d+) ternary tensors: (\d+) taken, (\d+) declined, (\d+) wrong "
                     r"\(kernel ([^;)]+)", re.M)


def expected_ternary():
    """The ternary tensor names of the qwen35 set, tied (no output.weight)."""
    names = {"token_embd.weight"}
    for i in range(LAYERS):
        b = f"blk.{i}."
        mats = ["attn_qkv", "attn_gate", "ssm_out"] if (i + 1) % 4 else ["attn_q", "attn_k", "attn_v", "attn_output"]
        names |= {b + m + ".weight" for m in mats + ["ffn_gate", "ffn_up", "ffn_down"]}
    return names


def run_env(level=None):
    """This process's environment without any GGML_T2P* setting (a GGML_T2P=0 or GGML_T2P_EMBED=0
    of the caller's would decline weights), with GGML_T2P_KERNEL=level when given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GGML_T2P")}
    if level:
        env["GGML_T2P_KERNEL"] = level
    return env


def build_model_check():
    """cargo build --release --example model_check (in CARGO_TARGET_DIR when set, else target/): the
    path of the program, from cargo's own report of the artifact."""
    if not shutil.which("cargo"):
        raise AssertionError("cargo is not on PATH: the model check is a Cargo example")
    b = subprocess.run(["cargo", "build", "--release", "--quiet", "--example", "model_check",
                        "--message-format", "json-render-diagnostics"], cwd=ROOT,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if b.returncode != 0:
        raise AssertionError(f"cargo build --release --example model_check failed:\n{b.stderr}")
    exes = [m["executable"] for m in map(json.loads, b.stdout.splitlines())
            if m.get("reason") == "compiler-artifact" and m.get("target", {}).get("name") == "model_check"
            and m.get("executable")]
    if len(exes) != 1:
        raise AssertionError(f"cargo named {len(exes)} model_check programs:\n{b.stdout[-2000:]}")
    return exes[0]


def model_check(*argv, level=None):
    """The model check with ARGV (as cargo run --release --example model_check -- ARGV): (exit status,
    stdout, stderr)."""
    p = subprocess.run([Qwen35Model.exe] + list(argv), cwd=ROOT, env=run_env(level), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    return p.returncode, p.stdout, p.stderr


class Qwen35Model(unittest.TestCase):
    exe = None                     # the model check program (setUpClass)

    @classmethod
    def setUpClass(cls):
        teach_gguf()
        t0 = time.time()
        cls.exe = build_model_check()
        cls.tmp = tempfile.TemporaryDirectory(prefix="t2p-qwen35-")
        d = cls.tmp.name
        tok = os.path.join(d, "tok.gguf")
        write_tokenizer(tok, N_VOCAB)
        cls.files = {}
        for ty, tid in (("pq2_0", PQ2_0), ("ptq1_0", PTQ1_0)):
            path = os.path.join(d, f"{SHAPE}-{ty}.gguf")
            p = subprocess.run([sys.executable, TOOL, "--synthetic", SHAPE, "--type", ty, "--tokenizer-from", tok,
                                "-o", path, "--no-install"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if p.returncode != 0:
                raise AssertionError(f"make-test-model --synthetic {SHAPE} --type {ty} failed:\n{p.stdout}")
            cls.files[ty] = (path, tid)
        rc, out, err = model_check("--levels")
        if rc != 0:
            raise AssertionError(f"model_check --levels failed ({rc}):\n{out}{err}")
        cls.levels = out.split()
        print(f"\ntest_qwen35_model: levels here: {' '.join(cls.levels)}; model check built and "
              f"files made in {time.time() - t0:.1f} s", file=sys.stderr)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def ternary(self, ty):
        """{name: ([ne0, ne1], type)} of the ternary tensors of the file of type TY."""
        r = gguf.GGUFReader(self.files[ty][0], "r")
        return {t.name: (list(map(int, t.shape)), int(t.tensor_type)) for t in r.tensors
                if int(t.tensor_type) in (PQ2_0, PTQ1_0)}

    def test_the_file_holds_the_qwen35_ternary_set(self):
        for ty, (path, tid) in self.files.items():
            got = self.ternary(ty)
            self.assertEqual(set(got), expected_ternary(), ty)
            self.assertNotIn("output.weight", got)                   # tied: the LM head is token_embd
            self.assertEqual({t for _, t in got.values()}, {tid}, ty)
            self.assertEqual(got["token_embd.weight"][0], [256, VOCAB])
            for name, ((k, rows), _) in got.items():
                self.assertEqual(k % 256, 0, name)
                # every row count a multiple of 16 but the embedding's: a partial row tile
                self.assertEqual(rows % 16 != 0, name == "token_embd.weight", f"{name}: {rows} rows")
            self.assertLess(os.path.getsize(path), 1 << 20)

    def assert_passes(self, ty, level, *extra):
        path, _ = self.files[ty]
        n = len(expected_ternary())
        rc, out, err = model_check(*extra, path, level=level)
        what = " ".join([f"{ty}, GGML_T2P_KERNEL={level or '(auto)'}"] + list(extra))
        self.assertEqual(rc, 0, f"{what}:\n{out}{err}")
        m = SUMMARY.search(out)
        self.assertIsNotNone(m, f"{what}: no summary line:\n{out}")
        self.assertEqual(tuple(int(x) for x in m.groups()[:4]), (n, n, 0, 0), f"{what}:\n{out}")
        for name in expected_ternary():                          # one 'taken' line per tensor
            self.assertRegex(out, rf"(?m)^  {re.escape(name)} \S+ \d+ x \d+: taken ", f"{what}: {name}")
        self.assertRegex(out, r"(?m)^  token_embd\.weight .*; GET_ROWS exact$", what)
        print(f"  {what}: {out[m.start():].splitlines()[0]}", file=sys.stderr)
        return m.group(5)

    def test_every_level_takes_every_tensor_exactly(self):
        self.assertIn("ref", self.levels)
        for level in self.levels:
            for ty in self.files:
                with self.subTest(level=level, type=ty):
                    self.assertEqual(self.assert_passes(ty, level), level)
        # the host's other Q8_K rounding
        self.assertEqual(self.assert_passes("ptq1_0", "ref", "--rounding", "fused"), "ref")

    def test_auto_takes_a_simd_level(self):
        if self.levels == ["ref"]:
            # no SIMD level: auto declines (stock code runs every weight), and the check says so
            rc, out, _ = model_check(self.files["pq2_0"][0])
            self.assertEqual(rc, 1, out)
            self.assertIn("kernel none", out)
            return
        for ty in self.files:
            level = self.assert_passes(ty, None)
            self.assertIn(level, self.levels)
            self.assertNotEqual(level, "ref")

    def test_a_declined_or_corrupted_tensor_fails(self):
        level = self.levels[-1]                         # the best-placed level here (amx, avx512vnni, ...)
        for ty in self.files:
            path = self.files[ty][0]
            for opt, name, verdict in (("--decline", "blk.0.attn_qkv.weight", "declined"),
                                       ("--corrupt", "blk.3.ffn_down.weight", "wrong"),
                                       ("--corrupt", "token_embd.weight", "wrong"),
                                       ("--decline", "token_embd.weight", "declined")):
                for lv in ("ref", level):
                    with self.subTest(type=ty, opt=opt, name=name, level=lv):
                        rc, out, err = model_check(opt, name, path, level=lv)
                        self.assertEqual(rc, 1, f"{opt} {name}:\n{out}{err}")
                        self.assertIn(f"model_check: FAIL: {name} {verdict}", err)
                        m = SUMMARY.search(out)
                        n = len(expected_ternary())
                        want = (n, n - 1, 1, 0) if verdict == "declined" else (n, n - 1, 0, 1)
                        self.assertEqual(tuple(int(x) for x in m.groups()[:4]), want, out)
                        # only the named tensor fails
                        self.assertEqual(err.count("model_check: FAIL:"), 1, err)
                        if opt == "--corrupt" and name == "token_embd.weight":
                            # the embedding's own check (GET_ROWS runs first) finds it
                            self.assertIn(f"{name} wrong: GET_ROWS of ids", err)
        # a name the file lacks is a usage error, not a pass
        rc, _, err = model_check("--corrupt", "blk.9.ffn_down.weight", self.files["pq2_0"][0])
        self.assertEqual(rc, 2)
        self.assertIn("has no ternary tensor of that name", err)

    def test_usage(self):
        rc, out, _ = model_check("--help")
        self.assertEqual(rc, 0)
        self.assertIn("--corrupt NAME", out)
        rc, _, err = model_check("--rounding", "half", self.files["pq2_0"][0])
        self.assertEqual(rc, 2)
        self.assertIn("expected fused or unfused", err)
        rc, _, err = model_check(os.path.join(self.tmp.name, "tok.gguf.missing"))
        self.assertEqual(rc, 2)
        rc, out, err = model_check(os.path.join(self.tmp.name, "tok.gguf"))    # a GGUF without ternary tensors
        self.assertEqual(rc, 1, out + err)
        self.assertIn("has no PQ2_0 or PTQ1_0 tensor", err)


if __name__ == "__main__":
    unittest.main()
