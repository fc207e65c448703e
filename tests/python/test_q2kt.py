#!/usr/bin/env python3
"""Tests for tools/convert-q2kt.py (zero-exact Q2_K re-encoding of PQ2_0, PTQ1_0 and TQ2_0).

Run: python3 tests/python/test_q2kt.py [-v]      (needs numpy and PyPI gguf==0.19.0; the golden vectors in
tests/golden, or $GGML_T2P_GOLDEN_DIR when set; a missing directory is a failure)

The converter's output is never judged by the converter's own code:
  * its source decoders are held bit for bit against the fork's golden PQ2_0 / PTQ1_0 dequant vectors;
  * a synthetic GGUF (PQ2_0 with crafted scale pairs, code 3, zero/negative/subnormal scales, PTQ1_0
    from the golden blocks, TQ2_0, rows of 384/128 that must fall back to Q4_0, copied F32/Q8_0 tensors
    and metadata) is converted through the command line; the result is re-read with PyPI gguf's
    GGUFReader and decoded with gguf.quants (ggml's canonical Q2_K layout, independent numpy code);
    a literal per-element loop of the dequantize_row_q2_K formula cross-checks gguf.quants itself;
  * the expected values come from this file's own spec decoders, the golden floats or gguf.quants
    (TQ2_0); exactness per super-block is decided here with exact rational arithmetic, and the best
    inexact error with an independent brute-force search.
"""

from __future__ import annotations

import importlib.util
import math
import os
import struct
import subprocess
import sys
import tempfile
import unittest
from fractions import Fraction

try:
    import numpy as np
    import gguf
except ImportError as e:                       # a failure, not a skip: the test command must notice
    sys.exit(f"test_q2kt: {e}; run the Python tests in the project's environment "
             "(python3 tools/test-all.py makes it from tools/requirements.txt)")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "tools", "convert-q2kt.py")
GOLDEN = os.environ.get("GGML_T2P_GOLDEN_DIR") or os.path.join(ROOT, "tests", "golden")


def load_tool():
    spec = importlib.util.spec_from_file_location("convert_q2kt", TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.np, mod.gguf = np, gguf
    return mod


cq = load_tool()


# ---------------------------------------------------------------------------
# golden vectors (fork reference dequantizers)
# ---------------------------------------------------------------------------

def read_golden(name, magic, block_bytes):
    path = os.path.join(GOLDEN, name)
    if not os.path.isfile(path):
        raise AssertionError(f"golden file missing: {path} (set GGML_T2P_GOLDEN_DIR)")
    with open(path, "rb") as f:
        b = f.read()
    assert b[:4] == magic, name
    _, count = struct.unpack_from("<II", b, 4)
    pos = 12
    blocks, ys = [], []
    for _ in range(count):
        pos += 4                                   # tag
        blocks.append(np.frombuffer(b, np.uint8, block_bytes, pos))
        pos += block_bytes
        ys.append(np.frombuffer(b, "<u4", 128, pos))
        pos += 512
    assert pos == len(b)
    return np.stack(blocks), np.stack(ys)


# ---------------------------------------------------------------------------
# independent references
# ---------------------------------------------------------------------------

def pq2_0_values_spec(raw):
    """PQ2_0 blocks (nb, 34) -> float32 values, straight from the format text."""
    nb = raw.shape[0]
    y = np.empty((nb, 128), np.float32)
    for i in range(nb):
        d = np.float32(np.frombuffer(raw[i, 0:2].tobytes(), np.float16)[0])
        for j in range(128):
            code = (int(raw[i, 2 + j // 4]) >> (2 * (j % 4))) & 3
            y[i, j] = np.float32(code - 1) * d
    return y.ravel()


def q2k_loop(block):
    """One Q2_K block (84 bytes) -> 256 float32, element by element as dequantize_row_q2_K reads it."""
    sc = block[0:16]
    qs = block[16:80]
    d = np.float32(np.frombuffer(block[80:82].tobytes(), np.float16)[0])
    dmin = np.float32(np.frombuffer(block[82:84].tobytes(), np.float16)[0])
    y = []
    for n in range(2):                        # two halves of 128
        for j in range(4):                    # crumb position (shift 2j)
            for g in range(2):                # two sub-blocks of 16
                s = int(sc[8 * n + 2 * j + g])
                dl = d * np.float32(s & 15)
                ml = dmin * np.float32(s >> 4)
                for l in range(16):
                    q = (int(qs[32 * n + 16 * g + l]) >> (2 * j)) & 3
                    y.append(dl * np.float32(q) - ml)
    return np.array(y, np.float32)


def fp16_exact(x: Fraction):
    """x as an fp16 value if exactly representable, else None."""
    h = np.float16(float(x))
    if not np.isfinite(h):
        return None
    return h if Fraction(float(h)) == x else None


def exact_solution(s0, s1):
    """Does an exact Q2_KT encoding exist for the half scales s0, s1 (floats)? The contract:
    zero halves are free; same signs need d*a0 = |s0|, d*a1 = |s1| (a <= 15, d fp16); a half whose
    sign differs from the first non-zero one also needs a <= 7."""
    if s0 == 0 or s1 == 0:
        return True
    t0, t1 = Fraction(abs(s0)), Fraction(abs(s1))
    a1max = 15 if (s0 < 0) == (s1 < 0) else 7
    for a0 in range(1, 16):
        d = fp16_exact(t0 / a0)
        if d is None:
            continue
        a1 = t1 / Fraction(float(d))
        if a1.denominator == 1 and 1 <= a1.numerator <= a1max:
            return True
    return False


def best_error_brute(t0, t1, a1max=15):
    """Smallest max_i |d*a_i - t_i|/t_i over a_i in 1..15 and fp16 d near the optimum (+-2 ulp)."""
    best = math.inf
    for a0 in range(1, 16):
        for a1 in range(1, a1max + 1):
            x = 2 * t0 * t1 / (a0 * t1 + a1 * t0)
            h = np.float16(x)
            cands = [h]
            for _ in range(2):
                cands.append(np.nextafter(cands[-1], np.float16(np.inf)))
            h2 = h
            for _ in range(2):
                h2 = np.nextafter(h2, np.float16(-np.inf))
                cands.append(h2)
            for c in cands:
                d = float(c)
                e = max(abs(d * a0 - t0) / t0, abs(d * a1 - t1) / t1)
                best = min(best, e)
    return best


# ---------------------------------------------------------------------------
# a minimal GGUF writer for the synthetic input (gguf's writer rejects types 142/143)
# ---------------------------------------------------------------------------

def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def write_gguf(path, kvs, tensors, alignment=32):
    """kvs: list of raw entry bytes; tensors: list of (name, dims, type, data bytes)."""
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs)
    off = 0
    offs = []
    for name, dims, tt, data in tensors:
        offs.append(off)
        out += gguf_string(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", x) for x in dims)
        out += struct.pack("<IQ", tt, off)
        off = (off + len(data) + alignment - 1) // alignment * alignment
    out += bytes((-len(out)) % alignment)
    for (name, dims, tt, data), o in zip(tensors, offs):
        assert len(out) % alignment == 0
        out += data
        if (name, dims, tt, data) != tensors[-1]:
            out += bytes((-len(data)) % alignment)
    with open(path, "wb") as f:
        f.write(out)


def kv_u32(key, v):
    return gguf_string(key) + struct.pack("<II", 4, v)


def kv_str(key, v):
    return gguf_string(key) + struct.pack("<I", 8) + gguf_string(v)


def kv_str_array(key, items):
    return gguf_string(key) + struct.pack("<IIQ", 9, 8, len(items)) + b"".join(gguf_string(x) for x in items)


def kv_f32_array(key, items):
    return gguf_string(key) + struct.pack("<IIQ", 9, 6, len(items)) + struct.pack(f"<{len(items)}f", *items)


def fp16_bytes(x):
    return np.array([x], np.float16).view(np.uint8)


def make_pq2_0(rng, scales, code3=True):
    """PQ2_0 blocks from a list of scales: random codes (0..3 or 0..2)."""
    nb = len(scales)
    raw = np.empty((nb, 34), np.uint8)
    raw[:, 0:2] = np.array(scales, np.float16).view(np.uint8).reshape(nb, 2)
    hi = 4 if code3 else 3
    codes = rng.integers(0, hi, size=(nb, 128), dtype=np.uint8)
    c = codes.reshape(nb, 32, 4)
    raw[:, 2:] = c[:, :, 0] | (c[:, :, 1] << 2) | (c[:, :, 2] << 4) | (c[:, :, 3] << 6)
    return raw


def crafted_scale_pairs(rng):
    """Half-scale pairs (s0, s1) covering every case of the construction."""
    f = lambda v: float(np.float16(v))                     # noqa: E731
    pairs = [
        (0.0123, 0.0123), (1.0, 1.0), (65504.0, 65504.0),             # equal
        (0.01, 0.03), (0.03, 0.01), (0.0625, 0.9375), (0.9375, 0.0625),   # ratios 1:3, 15:1 (exact)
        (0.25 * 7, 0.25 * 11), (3 * 2 ** -10, 5 * 2 ** -10),             # 7:11, 3:5 with exact d
        (0.0, 0.02), (0.02, 0.0), (0.0, 0.0), (-0.0, 0.02), (0.02, -0.0),  # zero halves
        (-0.02, -0.02), (-0.01, -0.05), (-0.013, -0.017),             # both negative
        (0.02, -0.02), (-0.02, 0.02), (0.01, -0.07), (0.013, -0.029),  # mixed signs
        (2 ** -24, 2 ** -24), (2 ** -24, 3 * 2 ** -24), (2 ** -20, 0.01),  # subnormals
        (1e-3, 1.07e-3), (0.0137, 0.0141), (0.5, 0.51), (0.02, 0.3),  # typical inexact
        (65504.0, 1.0), (2 ** -24, 65504.0),                          # extreme ratios
    ]
    for _ in range(40):                                  # absmean-like neighbours
        s = rng.uniform(0.005, 0.05)
        pairs.append((s, s * rng.uniform(0.7, 1.4)))
    for _ in range(10):
        pairs.append((rng.uniform(-1, 1), rng.uniform(-1, 1)))
    return [(f(a), f(b)) for a, b in pairs]


# ---------------------------------------------------------------------------
# tests
# ---------------------------------------------------------------------------

class SourceDecoders(unittest.TestCase):
    def test_pq2_0_golden(self):
        raw, y = read_golden("pq2_0_dequant.bin", b"PQDQ", 34)
        d, codes = cq.decode_pq2_0(raw)
        got = ((codes.astype(np.float32) - 1) * d.astype(np.float32)[:, None]).view("<u4")
        self.assertTrue(np.array_equal(got, y), "PQ2_0 decode differs from the fork's golden dequant")
        self.assertEqual(len(raw), 50)

    def test_ptq1_0_golden(self):
        raw, y = read_golden("ptq1_0_dequant.bin", b"PTDQ", 28)
        d, codes = cq.decode_ptq1_0(raw)
        got = ((codes.astype(np.float32) - 1) * d.astype(np.float32)[:, None]).view("<u4")
        self.assertTrue(np.array_equal(got, y), "PTQ1_0 decode differs from the fork's golden dequant")
        self.assertEqual(len(raw), 306)

    def test_tq2_0_against_gguf(self):
        rng = np.random.default_rng(7)
        raw = rng.integers(0, 256, size=(20, 66), dtype=np.uint8)
        raw[:, 64:66] = np.array(rng.uniform(-2, 2, 20), np.float16).view(np.uint8).reshape(20, 2)
        d, codes = cq.decode_tq2_0(raw)
        mine = (codes.astype(np.float32) - 1) * d.astype(np.float32)[:, None]
        ref = gguf.quants.dequantize(raw, gguf.GGMLQuantizationType.TQ2_0).reshape(20, 256)
        self.assertTrue(np.array_equal(mine, ref))


class ScaleSearch(unittest.TestCase):
    def test_fast_equals_brute(self):
        rng = np.random.default_rng(1)
        t0 = np.abs(np.array(rng.uniform(0.001, 0.1, 4000), np.float16)).astype(np.float64)
        t1 = (t0 * rng.uniform(0.05, 20, 4000)).astype(np.float16).astype(np.float64)
        # add exact ratios and the extremes
        t0 = np.concatenate([t0, [1, 3, 0.0625, 2 ** -24, 65504, 0.01, 1.0]])
        t1 = np.concatenate([t1, [1, 5, 0.9375, 65504, 2 ** -24, 0.0100021, 14 / 15]])
        t1 = t1.astype(np.float16).astype(np.float64)
        keep = t1 > 0
        t0, t1 = t0[keep], t1[keep]
        _, a0f, a1f, ef, _ = cq.search_fast(t0, t1)
        _, a0b, a1b, eb = cq.search_brute(t0, t1)
        self.assertTrue(np.array_equal(ef, eb), f"fast search differs on {np.sum(ef != eb)} pairs")
        self.assertTrue(np.all((a0f >= 1) & (a0f <= 15) & (a1f >= 1) & (a1f <= 15)))

    def test_brute_is_optimal(self):
        rng = np.random.default_rng(2)
        for _ in range(60):
            t0 = float(np.float16(rng.uniform(0.001, 1)))
            t1 = float(np.float16(t0 * rng.uniform(0.3, 3)))
            _, _, _, e = cq.search_brute(np.array([t0]), np.array([t1]))
            self.assertLessEqual(e[0], best_error_brute(t0, t1) * (1 + 1e-12) + 1e-300)


class Conversion(unittest.TestCase):
    """Convert a synthetic GGUF through the command line; judge with gguf's reader and dequantizer."""

    @classmethod
    def setUpClass(cls):
        rng = np.random.default_rng(1234)
        cls.tmp = tempfile.TemporaryDirectory()
        src = os.path.join(cls.tmp.name, "in.gguf")
        dst = os.path.join(cls.tmp.name, "out-q2kt.gguf")
        pairs = crafted_scale_pairs(rng)
        scales = [s for p in pairs for s in p]
        while len(scales) % 4:                   # whole rows of K = 512 (4 PQ2_0 blocks)
            scales += [0.01, 0.01]
        pq = make_pq2_0(rng, scales)
        pq[0, 2:] = 0xFF                          # an all-code-3 block (+2s everywhere)
        pq[1, 2:] = 0x55                          # an all-zero-weight block
        pq_rows = len(scales) // 4
        pq384 = make_pq2_0(rng, [float(x) for x in rng.uniform(-0.05, 0.05, 24)])      # K=384 -> Q4_0
        ptq, ptq_y = read_golden("ptq1_0_dequant.bin", b"PTDQ", 28)
        ptq = ptq[:306]
        ptq128 = ptq[:40]                                                               # K=128 -> Q4_0
        tq = rng.integers(0, 256, size=(32, 66), dtype=np.uint8)
        tq_scales = [0.02, -0.02, 0.0, -0.0, 2 ** -24, 65504.0] + list(rng.uniform(-0.1, 0.1, 26))
        tq[:, 64:66] = np.array(tq_scales, np.float16).view(np.uint8).reshape(32, 2)
        f32 = rng.standard_normal(256).astype(np.float32)
        q8 = rng.integers(0, 256, size=(8, 34), dtype=np.uint8)
        cls.kvs = [kv_str("general.architecture", "test"), kv_u32("general.file_type", 141),
                   kv_str_array("tokenizer.ggml.tokens", ["a", "bc", ""]), kv_f32_array("x.f", [1.5, -2.0])]
        cls.src_tensors = [
            ("pq", [512, pq_rows], cq.T_PQ2_0, pq.tobytes()),
            ("f32", [256], 0, f32.tobytes()),
            ("pq384", [384, 8], cq.T_PQ2_0, pq384.tobytes()),
            ("ptq", [256, 153], cq.T_PTQ1_0, ptq.tobytes()),
            ("q8", [256], 8, q8.tobytes()),
            ("ptq128", [128, 40], cq.T_PTQ1_0, ptq128.tobytes()),
            ("tq", [512, 16], cq.T_TQ2_0, tq.tobytes()),
        ]
        write_gguf(src, cls.kvs, cls.src_tensors)
        cls.expect = {
            "pq": pq2_0_values_spec(pq),
            "pq384": pq2_0_values_spec(pq384),
            "ptq": ptq_y.view(np.float32).ravel(),
            "ptq128": ptq_y[:40].view(np.float32).ravel(),
            "tq": gguf.quants.dequantize(tq, gguf.GGMLQuantizationType.TQ2_0).ravel(),
        }
        cls.half_scales = {
            "pq": np.array(scales, np.float16).astype(np.float64),
            "ptq": np.frombuffer(ptq[:, 26:28].tobytes(), np.float16).astype(np.float64),
            "tq": np.repeat(np.array(tq_scales, np.float16).astype(np.float64), 2),
        }
        cls.raw = {"pq": pq, "tq": tq}
        r = subprocess.run([sys.executable, TOOL, src, dst, "--json", os.path.join(cls.tmp.name, "f.json")],
                           capture_output=True, text=True)
        cls.log = r.stdout + r.stderr
        cls.returncode = r.returncode
        if not os.path.isfile(dst):
            raise AssertionError(f"converter wrote nothing ({r.returncode}):\n{cls.log}")
        cls.dry = subprocess.run([sys.executable, TOOL, src, "--dry-run"], capture_output=True, text=True)
        cls.src, cls.dst = src, dst
        cls.reader = gguf.GGUFReader(dst, "r")
        cls.out = {t.name: t for t in cls.reader.tensors}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_cli_exit_status(self):
        """The converter's own check (gguf.quants per chunk) must pass too."""
        self.assertEqual(self.returncode, 0, self.log)

    def test_types_and_shapes(self):
        want = {"pq": "Q2_K", "f32": "F32", "pq384": "Q4_0", "ptq": "Q2_K", "q8": "Q8_0", "ptq128": "Q4_0",
                "tq": "Q2_K"}
        self.assertEqual([t.name for t in self.reader.tensors], [t[0] for t in self.src_tensors])
        for name, dims, _, _ in self.src_tensors:
            t = self.out[name]
            self.assertEqual(t.tensor_type.name, want[name], name)
            self.assertEqual([int(x) for x in t.shape], dims, name)

    def test_copied_bytes_and_metadata(self):
        for name, _, _, data in self.src_tensors:
            if name in ("f32", "q8"):
                self.assertEqual(bytes(self.out[name].data.view(np.uint8).ravel()), data, name)
        f = self.reader.fields
        self.assertEqual(int(f["general.file_type"].parts[-1][0]), 10)
        self.assertEqual(f["general.architecture"].contents(), "test")
        self.assertEqual(f["tokenizer.ggml.tokens"].contents(), ["a", "bc", ""])
        self.assertEqual(f["x.f"].contents(), [1.5, -2.0])
        # every metadata entry but file_type is byte-identical: compare the raw header prefix
        src = cq.GGUFFile(self.src)
        dst = cq.GGUFFile(self.dst)
        self.assertEqual([k for k, *_ in src.kv], [k for k, *_ in dst.kv])
        for (k, a, *_), (_, b, *_) in zip(src.kv, dst.kv):
            if k != "general.file_type":
                self.assertEqual(a, b, k)

    def decoded(self, name):
        t = self.out[name]
        return gguf.quants.dequantize(t.data, t.tensor_type).ravel()

    def test_zero_and_sign_exact_everywhere(self):
        for name, src in self.expect.items():
            out = self.decoded(name)
            z = src == 0
            self.assertTrue(np.all(out[z] == 0), f"{name}: {np.sum(out[z] != 0)} zeros not exact")
            self.assertTrue(np.all(np.sign(out[~z]) == np.sign(src[~z])), f"{name}: sign differs")
            self.assertGreater(z.sum(), 0)

    def test_q4_0_fallback_bit_exact(self):
        for name in ("pq384", "ptq128"):
            self.assertTrue(np.array_equal(self.decoded(name).view("<u4"), self.expect[name].view("<u4")), name)

    def test_q2k_exact_where_representable_else_best(self):
        n_exact = n_inexact = n_code3 = 0
        for name in ("pq", "ptq", "tq"):
            out = self.decoded(name).reshape(-1, 256)
            src = self.expect[name].reshape(-1, 256)
            s = self.half_scales[name].reshape(-1, 2)
            for b in range(out.shape[0]):
                s0, s1 = s[b]
                if exact_solution(s0, s1):
                    n_exact += 1
                    self.assertTrue(np.array_equal(out[b], src[b]),
                                    f"{name} super-block {b} (scales {s0}, {s1}) should be exact")
                    n_code3 += int(np.sum((src[b] != 0) & (src[b] == 2 * np.repeat(np.float32([s0, s1]), 128))))
                else:
                    n_inexact += 1
                    nz = src[b] != 0
                    if not nz.any():
                        continue
                    err = np.max(np.abs(out[b][nz].astype(np.float64) - src[b][nz]) / np.abs(src[b][nz]))
                    a1max = 15 if (s0 < 0) == (s1 < 0) else 7
                    best = best_error_brute(abs(s0), abs(s1), a1max)
                    self.assertLessEqual(err, best * (1 + 1e-9), f"{name} super-block {b}: {err} > best {best}")
        self.assertGreater(n_exact, 20)
        self.assertGreater(n_inexact, 20)
        self.assertGreater(n_code3, 100, "code 3 (+2s) must be present and exact")

    def test_tq2_0_qs_bytes_unchanged(self):
        """TQ2_0 and Q2_K share the qs interleave: with one scale per block the bytes must match."""
        q2k = self.out["tq"].data.view(np.uint8).reshape(-1, 84)
        self.assertTrue(np.array_equal(q2k[:, 16:80], self.raw["tq"][:, 0:64]))

    def test_gguf_quants_matches_literal_loop(self):
        """gguf.quants (the reference above) against a per-element loop of the Q2_K formula."""
        for name in ("pq", "tq"):
            blocks = self.out[name].data.view(np.uint8).reshape(-1, 84)
            ref = gguf.quants.dequantize(blocks, gguf.GGMLQuantizationType.Q2_K).reshape(-1, 256)
            for b in range(0, blocks.shape[0], 3):
                self.assertTrue(np.array_equal(q2k_loop(blocks[b]).view("<u4"), ref[b].view("<u4")), (name, b))

    def test_refusals(self):
        """No overwrite without --force; a non-finite scale stops the run and leaves no file."""
        r = subprocess.run([sys.executable, TOOL, self.src, self.dst], capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--force", r.stderr)
        with tempfile.TemporaryDirectory() as tmp:
            bad = os.path.join(tmp, "nan.gguf")
            raw = bytearray(self.src_tensors[0][3])
            raw[34 * 5:34 * 5 + 2] = np.array([np.inf], np.float16).tobytes()
            write_gguf(bad, self.kvs, [("pq", self.src_tensors[0][1], cq.T_PQ2_0, bytes(raw))])
            r = subprocess.run([sys.executable, TOOL, bad, os.path.join(tmp, "out.gguf")],
                               capture_output=True, text=True)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("non-finite scale", r.stderr)
            self.assertEqual(os.listdir(tmp), ["nan.gguf"])

    def test_json_and_output_never_overwrite_the_input(self):
        """--json or the output naming the input (also through a link), each other, an existing file
        without --force, or a directory: refused before any work, every file unchanged."""
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "in.gguf")
            with open(self.src, "rb") as f:
                data = f.read()
            with open(src, "wb") as f:
                f.write(data)
            link = os.path.join(tmp, "link.gguf")
            os.symlink(src, link)
            keep = os.path.join(tmp, "keep.json")
            with open(keep, "w") as f:
                f.write("{}")
            out = os.path.join(tmp, "out.gguf")
            cases = [[src, out, "--json", src], [src, "--dry-run", "--json", link], [src, out, "--json", out],
                     [src, out, "--json", keep], [src, link], [src, out, "--json", tmp],
                     [src, out, "--json", os.path.join(tmp, "no", "such", "dir.json")]]
            for argv in cases:
                r = subprocess.run([sys.executable, TOOL] + argv, capture_output=True, text=True)
                self.assertEqual(r.returncode, 2, (argv, r.stderr))
                self.assertNotIn("Traceback", r.stderr)
                with open(src, "rb") as f:
                    self.assertEqual(f.read(), data, argv)
                with open(keep) as f:
                    self.assertEqual(f.read(), "{}", argv)
                self.assertFalse(os.path.exists(out), argv)

    def test_dry_run_writes_nothing_and_reports(self):
        self.assertEqual(self.dry.returncode, 0, self.dry.stdout + self.dry.stderr)
        self.assertIn("zeros exact 100.000%", self.dry.stdout)
        self.assertIn("would write", self.dry.stdout)
        self.assertEqual(sorted(os.listdir(self.tmp.name)), ["f.json", "in.gguf", "out-q2kt.gguf"])


if __name__ == "__main__":
    unittest.main()
