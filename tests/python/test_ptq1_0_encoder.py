#!/usr/bin/env python3
"""Tests for the PTQ1_0 encoder of tools/make-test-model.py (--type ptq1_0) and for tools/ptq1-tree.py.

Run: python3 tests/python/test_ptq1_0_encoder.py [-v]      (needs numpy; the tool's end-to-end case needs
PyPI gguf==0.19.0 too)

- The encoder against tests/golden/ptq1_0_quant.bin (50 blocks the fork's quantize_row_ptq1_0_ref
  wrote): every block byte for byte. Mutants of the encoder (round half to even, floor instead of
  the ceiling, qh digits not multiplied by 3) must each miss at least one golden block, so the golden
  file catches those mistakes; exact halves (which the golden blocks never hit) are pinned to C
  roundf's rule, halves away from zero.
- The decode rule (docs/formats.md, section 2) against tests/golden/ptq1_0_dequant.bin (306 blocks through the
  fork's dequantize_row_ptq1_0), bit for bit; then PQ2_0 -> PTQ1_0 keeps every value.
- The tool end to end on a tiny GGUF: --type ptq1_0 writes type 143 tensors of 28-byte blocks whose
  values equal those of the --type pq2_0 output, and general.file_type 143.
- tools/ptq1-tree.py on a fake tree holding only the anchor lines: applies, is idempotent, reverts
  to the same bytes, and refuses a tree it does not recognise without writing anything.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
try:
    import numpy as np
except ImportError as e:                       # a failure, not a skip: the test command must notice
    sys.exit(f"test_ptq1_0_encoder: {e}; run the Python tests in the project's environment "
             "(python3 tools/test-all.py makes it from tools/requirements.txt)")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "tools", "make-test-model.py")
TREE = os.path.join(ROOT, "tools", "ptq1-tree.py")
GOLDEN = os.environ.get("GGML_T2P_GOLDEN_DIR", os.path.join(ROOT, "tests", "golden"))


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


mtm = load("make_test_model", TOOL)
mtm.np = np
tree = load("ptq1_tree", TREE)


def golden_quant():
    with open(os.path.join(GOLDEN, "ptq1_0_quant.bin"), "rb") as f:
        raw = f.read()
    assert raw[:4] == b"PTQQ"
    version, n = struct.unpack_from("<II", raw, 4)
    assert version == 1
    pos, cases = 12, []
    for _ in range(n):
        (tag,) = struct.unpack_from("<I", raw, pos)
        x = np.frombuffer(raw, dtype="<f4", count=128, offset=pos + 4).copy()
        blk = raw[pos + 516:pos + 544]
        cases.append((tag, x, blk))
        pos += 544
    assert pos == len(raw)
    return cases


def golden_dequant():
    with open(os.path.join(GOLDEN, "ptq1_0_dequant.bin"), "rb") as f:
        raw = f.read()
    assert raw[:4] == b"PTDQ"
    version, n = struct.unpack_from("<II", raw, 4)
    pos, cases = 12, []
    for _ in range(n):
        blk = raw[pos + 4:pos + 32]
        y = raw[pos + 32:pos + 32 + 512]
        cases.append((blk, y))
        pos += 32 + 512
    assert pos == len(raw)
    return cases


def mutant(x, rounding="away", ceil=True, qh_times3=True, scale_from_fp16=False):
    """The encoder with one deliberate change; the default arguments give the right encoder."""
    g = np.asarray(x, dtype=np.float32).reshape(-1, 128)
    amax = np.abs(g).max(axis=1)
    dd = amax.astype(np.float16).astype(np.float32) if scale_from_fp16 else amax
    inv = np.where(dd > 0, np.float32(1) / np.where(dd > 0, dd, np.float32(1)), np.float32(0)).astype(np.float32)
    v = (g * inv[:, None]).astype(np.float32)
    if rounding == "away":
        r = np.copysign(np.floor(np.abs(v).astype(np.float64) + 0.5), v)
    else:
        r = np.rint(v)
    t = np.clip(r.astype(np.int64) + 1, 0, 2)
    nb = t.shape[0]
    p5 = np.array([81, 27, 9, 3, 1])
    lo = (t[:, :80].reshape(nb, 5, 16) * p5[None, :, None]).sum(axis=1)
    mid = (t[:, 80:120].reshape(nb, 5, 8) * p5[None, :, None]).sum(axis=1)
    hi = (t[:, 120:].reshape(nb, 4, 2) * p5[None, 1:, None]).sum(axis=1) * (3 if qh_times3 else 1)
    vals = np.concatenate([lo, mid, hi], axis=1)
    out = np.empty((nb, 28), dtype=np.uint8)
    out[:, :26] = ((vals * 256 + (242 if ceil else 0)) // 243).astype(np.uint8)
    out[:, 26:] = amax.astype("<f2").view(np.uint8).reshape(nb, 2)
    return out


class Encoder(unittest.TestCase):
    def test_golden_blocks_byte_for_byte(self):
        cases = golden_quant()
        self.assertEqual(len(cases), 50)
        for i, (tag, x, want) in enumerate(cases):
            got = mtm.ptq1_0_quantize(x).tobytes()
            self.assertEqual(got.hex(), want.hex(), f"golden case {i} (tag {tag})")

    def test_mutants_are_caught(self):
        cases = golden_quant()
        x = np.stack([c[1] for c in cases])
        want = b"".join(c[2] for c in cases)
        self.assertEqual(mutant(x).tobytes(), want, "the unmutated reference of this test is wrong")
        for name, kw in [("floor, not ceil", dict(ceil=False)),
                         ("qh without the extra 3", dict(qh_times3=False))]:
            self.assertTrue(mutant(x, **kw).tobytes() != want, f"mutant '{name}' passes the golden file")
        # Not told apart by the golden blocks (no x * id lands exactly on a half there, and their
        # scales are fp16 values already): half-to-even rounding, and dividing by fp16(d).
        # test_exact_halves pins the first with C roundf's rule (the golden README: halves away from 0).
        self.assertEqual(mutant(x, rounding="even").tobytes(), want)
        self.assertEqual(mutant(x, scale_from_fp16=True).tobytes(), want)

    def test_exact_halves(self):
        # max |x| = 1, so x * id = x: +-0.5 round away from zero to +-1 (digits 2 and 0), as C's roundf
        x = np.zeros(128, dtype=np.float32)
        x[0], x[1], x[2], x[3], x[4] = 1.0, 0.5, -0.5, 0.49999997, -0.49999997
        got = mtm.ptq1_0_decode_block(mtm.ptq1_0_quantize(x).tobytes())
        self.assertEqual(got[:5], [1.0, 1.0, -1.0, 0.0, 0.0])
        self.assertNotEqual(mutant(x, rounding="even").tobytes(), mtm.ptq1_0_quantize(x).tobytes())

    def test_decode_rule_matches_golden_dequant(self):
        for i, (blk, y) in enumerate(golden_dequant()):
            got = struct.pack("<128f", *mtm.ptq1_0_decode_block(blk))
            self.assertEqual(got, y, f"dequant case {i}")

    def test_pq2_0_to_ptq1_0_keeps_values(self):
        rng = np.random.default_rng(7)
        nb = 300
        codes = rng.integers(0, 3, size=(nb, 128)).astype(np.uint8)
        codes[0] = 1                                          # all zero: d becomes +0
        codes[1] = 2                                          # all +1
        d = (rng.uniform(2 ** -14, 4.0, size=nb)).astype("<f2")
        c = codes.reshape(nb, 32, 4)
        pq = np.empty((nb, 34), dtype=np.uint8)
        pq[:, :2] = d.view(np.uint8).reshape(nb, 2)
        pq[:, 2:] = c[:, :, 0] | (c[:, :, 1] << 2) | (c[:, :, 2] << 4) | (c[:, :, 3] << 6)
        pt = mtm.ptq1_0_from_pq2_0(pq)
        self.assertEqual(pt.shape, (nb, 28))
        for b in range(nb):
            want = [(int(q) - 1) * float(d[b]) for q in codes[b]]
            self.assertTrue(mtm.ptq1_0_decode_block(pt[b].tobytes()) == want, f"block {b}")
        self.assertEqual(pt[0, 26:].tobytes(), b"\0\0")


class ToolEndToEnd(unittest.TestCase):
    def test_tiny_model_both_types(self):
        try:
            import gguf
        except ImportError as e:
            self.fail(f"{e}: gguf is pinned in tools/requirements.txt")
        with tempfile.TemporaryDirectory(prefix="t2p-ptq1-") as d:
            src = os.path.join(d, "src.gguf")
            w = gguf.GGUFWriter(src, "llama")
            w.add_block_count(1)
            w.add_file_type(0)
            rng = np.random.default_rng(3)
            w.add_tensor("blk.0.ffn_down.weight", rng.normal(0, 0.02, size=(8, 384)).astype(np.float32))
            w.add_tensor("blk.0.attn_norm.weight", np.ones(384, dtype=np.float32))
            w.write_header_to_file()
            w.write_kv_data_to_file()
            w.write_tensors_to_file()
            w.close()
            out = {}
            for t in ("pq2_0", "ptq1_0"):
                path = os.path.join(d, f"{t}.gguf")
                r = subprocess.run([sys.executable, TOOL, "--input", src, "-o", path, "--type", t, "--verify",
                                    "--no-install"], capture_output=True, text=True)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                self.assertIn("blocks decoded OK", r.stdout)
                out[t] = path
            vals = {}
            for t, path in out.items():
                with open(path, "rb") as fh:
                    raw = fh.read()
                bb = 28 if t == "ptq1_0" else 34
                nbytes = 8 * 3 * bb                           # the ternary tensor, then the norm at 32 alignment
                tail = raw[-((nbytes + 31) // 32 * 32 + 384 * 4):]
                ftype = raw.find(b"general.file_type")
                (ft,) = struct.unpack_from("<I", raw, ftype + len("general.file_type") + 4)
                self.assertEqual(ft, 143 if t == "ptq1_0" else 141)
                self.assertIn(struct.pack("<I", 143 if t == "ptq1_0" else 142), raw[:ftype + 4096])
                blocks = tail[:8 * 3 * bb]
                if t == "ptq1_0":
                    v = [x for i in range(24) for x in mtm.ptq1_0_decode_block(blocks[28 * i:28 * i + 28])]
                else:
                    v = []
                    for i in range(24):
                        blk = blocks[34 * i:34 * i + 34]
                        (dd,) = struct.unpack("<e", blk[:2])
                        v += [(((blk[2 + j // 4] >> (2 * (j % 4))) & 3) - 1) * dd for j in range(128)]
                vals[t] = v
            self.assertEqual(len(vals["pq2_0"]), 8 * 384)
            self.assertTrue(vals["pq2_0"] == vals["ptq1_0"], "PQ2_0 and PTQ1_0 outputs hold different values")


class TreeTool(unittest.TestCase):
    def fake_tree(self, d):
        for rel, anchor, _text, _where, count in tree.EDITS:
            path = os.path.join(d, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "a", encoding="utf-8") as f:
                f.write("// filler\n" + anchor * (count or 1) + "\n")

    def snapshot(self, d):
        out = {}
        for root, _, files in os.walk(d):
            for n in files:
                p = os.path.join(root, n)
                out[os.path.relpath(p, d)] = open(p, "rb").read()
        return out

    def run_tree(self, *args):
        return subprocess.run([sys.executable, TREE, *args], capture_output=True, text=True)

    def test_apply_idempotent_revert(self):
        with tempfile.TemporaryDirectory(prefix="t2p-tree-") as d:
            self.fake_tree(d)
            before = self.snapshot(d)
            r = self.run_tree("--llama", d)
            self.assertEqual(r.returncode, 0, r.stderr)
            after = self.snapshot(d)
            self.assertNotEqual(before, after)
            self.assertIn("GGML_TYPE_PTQ1_0  = 143", after["ggml/include/ggml.h"].decode())
            self.assertEqual(after["ggml/src/ggml-cpu/ops.cpp"].decode().count("case GGML_TYPE_PTQ1_0:"), 7)
            r = self.run_tree("--llama", d)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("nothing to make", r.stdout)
            self.assertEqual(self.snapshot(d), after)
            self.assertEqual(self.run_tree("--llama", d, "--check").returncode, 0)
            r = self.run_tree("--llama", d, "--revert")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(self.snapshot(d), before)

    def test_refuses_unknown_tree(self):
        with tempfile.TemporaryDirectory(prefix="t2p-tree-") as d:
            self.fake_tree(d)
            h = os.path.join(d, "include/llama.h")
            open(h, "w").write("// another fork\n")
            before = self.snapshot(d)
            r = self.run_tree("--llama", d)
            self.assertEqual(r.returncode, 1)
            self.assertIn("include/llama.h", r.stderr)
            self.assertEqual(self.snapshot(d), before, "a refused run wrote files")
            self.assertEqual(self.run_tree("--llama", d, "--check").returncode, 1)

    def test_refuses_tree_with_its_own_ptq1_0(self):
        with tempfile.TemporaryDirectory(prefix="t2p-tree-") as d:
            self.fake_tree(d)
            with open(os.path.join(d, "ggml/include/ggml.h"), "a") as f:
                f.write("        GGML_TYPE_PTQ1_0 = 143,\n")
            before = self.snapshot(d)
            r = self.run_tree("--llama", d)
            self.assertEqual(r.returncode, 1)
            self.assertIn("already has a PTQ1_0", r.stderr)
            self.assertEqual(self.snapshot(d), before)

    def test_help(self):
        r = self.run_tree("--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("--llama", r.stdout)


if __name__ == "__main__":
    unittest.main()
