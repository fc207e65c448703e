#!/usr/bin/env python3
"""Re-encode the ternary tensors of a GGUF (PQ2_0, PTQ1_0, TQ2_0) as zero-exact Q2_K ("Q2_KT").

Every PQ2_0 (ggml type 142), PTQ1_0 (143) and TQ2_0 (35) tensor is rewritten as Q2_K (type 10), which
every llama.cpp backend runs (CPU, CUDA, Metal, Vulkan, ROCm, SYCL); every other tensor, and every
metadata entry except general.file_type, is copied byte for byte. The file is streamed tensor by
tensor in chunks of 4M weights, so memory does not grow with the model (about 160 MB peak RSS,
Python and numpy included), and written atomically (a temporary file renamed at the end).
--dry-run computes and prints the same per-tensor figures without writing anything.

Source formats (value of a weight = (code - 1) * d, d an fp16 scale, codes 0..3 = -1, 0, +1, +2):
  PQ2_0   128 weights, 34 B: d, then qs[32]; weight j = bits 2*(j%4) of qs[j/4].
  PTQ1_0  128 weights, 28 B: qs[24], qh[2], d last; base-3 digits (codes 0..2), docs/formats.md section 2.
  TQ2_0   256 weights, 66 B: qs[64], then d; weight 128n + 32l + m = bits 2l of qs[32n + m].
Q2_K (256 weights, 84 B: scales[16], qs[64], fp16 d, fp16 dmin), as ggml's dequantize_row_q2_K reads
it: weight e = 128n + 32j + l (n 0..1, j 0..3, l 0..31) has q = bits 2j of qs[32n + l] and
sub-block i = e / 16, and
    w = d * (scales[i] & 15) * q  -  dmin * (scales[i] >> 4)            q in 0..3.
This is the same "stride-32 crumb" interleave as TQ2_0's qs, and not PQ2_0's linear order.

The construction. Per 16-weight sub-block, Q2_K's values are the arithmetic progression
  w(q) = step * q - offset,  step = d * sc,  offset = dmin * m,  q = 0..3.
A ternary sub-block with scale s needs exactly {-s, 0, +s, +2s} for codes 0..3 (code 3 is legal in
PQ2_0 and TQ2_0 and must survive), i.e. step = s and offset = s with q = code. So:
  * q = code, dmin = d, m = sc = a with d * a = s. Then offset == step bit for bit (the same fp32
    product), so code 1 gives d*a*1 - d*a = 0 EXACTLY and every code c gives d*a*(c - 1): zeros exact
    and signs exact in every case, and code 3 gives +2*d*a. Magnitudes are exact iff d * a == s.
  * Equal scales (TQ2_0 always: one scale per 256; PQ2_0/PTQ1_0 when both 128-halves of a
    super-block share s): a = 1, d = dmin = s. Exact bit for bit: s * q and s*q - s are exact in fp32.
  * Two scales s0, s1 (PQ2_0/PTQ1_0 carry one per 128 weights, so two per super-block) in a ratio
    a0 : a1 with integers 1..15 and d = s0/a0 representable in fp16: sub-blocks 0..7 get sc = m = a0,
    8..15 get a1. Exact bit for bit (d*a fits in 15 bits of mantissa: every fp32 step is exact).
  * Otherwise: the (a0, a1, fp16 d) with the smallest worst relative magnitude error
    max_i |d*a_i - s_i| / |s_i| (searched over the two nearest ratios a0/a1 with a <= 15 and all their
    multiples, each with the two fp16 values around the optimal real d; proven optimal against the
    next ratios out, with a brute-force search over all 15 x 15 pairs where the proof fails). Zeros
    and signs stay exact (d = |smaller scale|, a = 1 for both halves already gives an error below 1,
    so no non-zero weight can collapse to 0); the error is reported per tensor. Adjacent absmean
    scales are close to each other, and 1 : 1 has no 4-bit neighbour nearer than 14 : 15, so on real
    PQ2_0 files most super-blocks land here: a ratio midway between 1 and 15/14 costs 1.72%, plus
    the fp16 rounding of d (the full-depth Qwen2.5-0.5B test model: worst 1.83%, mean 0.15%).
  * A zero scale (+0 or -0): that half gets sc = m = 0 (all its weights decode to +0).
  * Negative scales (legal in the container, never made by the ternarizers): d takes the sign of the
    first non-zero scale; a half of the other sign uses q = 3 - code and m = 2a (a <= 7), so that
    w = d*a*(3 - code) - 2*d*a = -d*a*(code - 1): still exact, zero-exact and sign-exact.
  * "Exact" means equal as values: where the source has -0.0 (code 1 with a negative or -0 scale),
    Q2_K gives +0.0.
Rows whose length is a multiple of 128 but not of 256 (Qwen2.5-0.5B's 896) cannot be Q2_K at all
(every k-quant is 256-wide); those PQ2_0/PTQ1_0 tensors become Q4_0 (32 weights: fp16 d, 4-bit q,
w = (q - 8) * d) with d = s and q = code + 7: exact bit for bit, on every backend (4.5 bpw).

Exactness against the source is measured, not assumed: every converted chunk is decoded again with
PyPI gguf's independent numpy dequantizer (gguf.quants) and compared with the source values
(code - 1) * fp32(d), unless --no-check. Figures per tensor: zeros reconstructed exactly, sign
agreement of the non-zero weights, worst relative magnitude error, share of super-blocks exact.

Why Python (numpy + PyPI gguf) and not a Rust binary: the job is a one-off file rewrite with a
vectorizable per-block rule; numpy runs it unchanged on Linux, macOS and Windows without a build
(one core, measured on Q2_K tensors: about 50M weights/s, 10M/s with the gguf.quants check;
projected: 10 and 45 minutes for a 27B model), and gguf's dequantizers give an independent check
of the layout. PyPI gguf 0.19's GGUFReader refuses type ids it does not know (142, 143), so this
tool reads the GGUF header itself (the metadata entries are kept as raw bytes) and uses gguf for
type sizes and the reference dequantizers.

Examples:
  # print per-tensor error figures only
  tools/convert-q2kt.py model-pq2_0.gguf --dry-run
  # convert (writes model-q2kt.gguf atomically; --force to overwrite)
  tools/convert-q2kt.py model-pq2_0.gguf model-q2kt.gguf
  # also save the per-tensor figures as JSON
  tools/convert-q2kt.py model-pq2_0.gguf model-q2kt.gguf --json figures.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import struct
import sys
import time

sys.dont_write_bytecode = True    # no __pycache__ beside the tools
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import t2p_common as tc  # noqa: E402
import t2p_gguf  # noqa: E402


# ggml type ids
T_F32, T_Q4_0, T_Q2_K, T_TQ2_0, T_PQ2_0, T_PTQ1_0 = 0, 2, 10, 35, 142, 143
TYPE_NAMES = {T_PQ2_0: "PQ2_0", T_PTQ1_0: "PTQ1_0", T_TQ2_0: "TQ2_0", T_Q2_K: "Q2_K", T_Q4_0: "Q4_0"}
EXTRA_SIZES = {T_PQ2_0: (128, 34), T_PTQ1_0: (128, 28)}   # (weights, bytes) per block; gguf lacks these
TERNARY = (T_PQ2_0, T_PTQ1_0, T_TQ2_0)
Q2_K_BYTES = 84
Q4_0_BYTES = 18
LLAMA_FTYPE_MOSTLY_Q4_0 = 2
LLAMA_FTYPE_MOSTLY_Q2_K = 10


CHUNK_WEIGHTS = 1 << 22      # weights per processing chunk (bounds memory: ~100 MiB of temporaries)
COPY_CHUNK = 16 << 20        # bytes per read/write when copying a tensor unchanged
AMAX = 15                    # largest 4-bit sub-block scale / min

np = None                    # imported lazily (--help works without numpy/gguf)
gguf = None


def need_packages(install):
    """Import numpy and gguf from the project's Python environment (tools/requirements.txt; this
    tool runs itself again inside it when started elsewhere; --install makes it when missing)."""
    import importlib

    tc.use_project_env("convert-q2kt", install)
    global np, gguf
    np = importlib.import_module("numpy")
    gguf = importlib.import_module("gguf")


# ---------------------------------------------------------------------------
# GGUF header (read ourselves: gguf 0.19's reader rejects type ids 142/143)
# ---------------------------------------------------------------------------

class GGUFFile(t2p_gguf.Header):
    """Header of a GGUF v2/v3 file (t2p_gguf.Header: raw metadata entries, tensor infos, data
    offset), with each tensor's exact size (nbytes) where its type is known here. ValueError as
    Header's, and when a tensor's ne0 is not a multiple of its block or it does not fit before the
    next one."""

    def __init__(self, path):
        super().__init__(path)
        for t in self.tensors:
            size = type_size(t.ttype)
            if size is not None:
                blk, bts = size
                if t.dims[0] % blk:
                    raise ValueError(f"{t.name}: ne0 = {t.dims[0]} is not a multiple of the block size {blk}")
                t.nbytes = t.n // blk * bts
                if t.nbytes > t.span:
                    raise ValueError(f"{t.name}: {t.nbytes} bytes do not fit before the next tensor")


def type_size(ttype):
    if ttype in EXTRA_SIZES:
        return EXTRA_SIZES[ttype]
    try:
        return gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(ttype)]
    except (ValueError, KeyError):
        return None


def type_name(ttype):
    if ttype in TYPE_NAMES:
        return TYPE_NAMES[ttype]
    try:
        return gguf.GGMLQuantizationType(ttype).name
    except ValueError:
        return f"type{ttype}"


# ---------------------------------------------------------------------------
# source decoders: raw blocks -> (fp16 scales, codes 0..3 in element order)
# ---------------------------------------------------------------------------

def decode_pq2_0(raw):
    """raw (nb, 34) uint8 -> d (nb,) float16, codes (nb, 128) uint8."""
    nb = raw.shape[0]
    d = raw[:, 0:2].copy().view(np.float16).reshape(nb)
    qs = raw[:, 2:34]
    codes = (qs[:, :, None] >> np.array([0, 2, 4, 6], np.uint8)) & np.uint8(3)   # [byte, slot]
    return d, codes.reshape(nb, 128)


_POW3 = None


def _digits(b, n):
    """Base-3 digits 0..n-1 of PTQ1_0 bytes b (..., k) -> (..., k, n): ((uint8)(b*3^i) * 3) >> 8."""
    v = (b[..., None].astype(np.uint16) * _POW3[:n]) & 0xFF
    return ((v * 3) >> 8).astype(np.uint8)


def decode_ptq1_0(raw):
    """raw (nb, 28) uint8 -> d (nb,) float16, codes (nb, 128) uint8 (digits 0..2)."""
    global _POW3
    if _POW3 is None:
        _POW3 = np.array([1, 3, 9, 27, 81], np.uint16)
    nb = raw.shape[0]
    d = raw[:, 26:28].copy().view(np.float16).reshape(nb)
    codes = np.empty((nb, 128), np.uint8)
    # qs[0..16]: digit n of byte m -> element 16n + m
    codes[:, 0:80] = _digits(raw[:, 0:16], 5).transpose(0, 2, 1).reshape(nb, 80)
    # qs[16..24]: digit n of byte 16 + m -> element 80 + 8n + m
    codes[:, 80:120] = _digits(raw[:, 16:24], 5).transpose(0, 2, 1).reshape(nb, 40)
    # qh[0..2]: digit n of byte h -> element 120 + 2n + h
    codes[:, 120:128] = _digits(raw[:, 24:26], 4).transpose(0, 2, 1).reshape(nb, 8)
    return d, codes


def decode_tq2_0(raw):
    """raw (nb, 66) uint8 -> d (nb,) float16, codes (nb, 256) uint8."""
    nb = raw.shape[0]
    d = raw[:, 64:66].copy().view(np.float16).reshape(nb)
    qs = raw[:, 0:64].reshape(nb, 2, 1, 32)
    codes = (qs >> np.array([0, 2, 4, 6], np.uint8).reshape(1, 1, 4, 1)) & np.uint8(3)
    return d, codes.reshape(nb, 256)


DECODERS = {T_PQ2_0: decode_pq2_0, T_PTQ1_0: decode_ptq1_0, T_TQ2_0: decode_tq2_0}


# ---------------------------------------------------------------------------
# Q2_K scale search
# ---------------------------------------------------------------------------

def fp16_brackets(x):
    """Largest fp16 <= x and smallest fp16 >= x, for finite x >= 0 (float64 array)."""
    with np.errstate(over="ignore"):
        h = x.astype(np.float16)
        hx = h.astype(np.float64)
        lo = np.where(hx <= x, h, np.nextafter(h, np.float16(-np.inf)))
        hi = np.where(hx >= x, h, np.nextafter(h, np.float16(np.inf)))   # may be inf: never chosen
    return lo, hi


def rel_err(t0, t1, a0, a1, d16):
    """Worst relative error max_i |d*a_i - t_i| / t_i (float64; exact products)."""
    d = d16.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        e = np.maximum(np.abs(d * a0 - t0) / t0, np.abs(d * a1 - t1) / t1)
    return np.where(np.isfinite(e), e, np.inf)


class Best:
    """Running minimum of (err, d16, a0, a1) over candidates; the first of equal errors wins."""

    def __init__(self, n):
        self.err = np.full(n, np.inf)
        self.d = np.zeros(n, np.float16)
        self.a0 = np.zeros(n, np.int64)
        self.a1 = np.zeros(n, np.int64)

    def offer(self, idx, t0, t1, a0, a1):
        """Candidates (a0, a1) for the blocks idx (their t0, t1); tries both fp16 brackets of d*."""
        dstar = 2.0 * t0 * t1 / (a0 * t1 + a1 * t0)      # equalizes the two relative errors
        for d16 in fp16_brackets(dstar):
            e = rel_err(t0, t1, a0, a1, d16)
            better = e < self.err[idx]
            if better.any():
                j = idx[better]
                self.err[j] = e[better]
                self.d[j] = d16[better]
                self.a0[j] = a0[better] if np.ndim(a0) else a0
                self.a1[j] = a1[better] if np.ndim(a1) else a1


def search_brute(t0, t1, amax0=AMAX, amax1=AMAX):
    """Best (d16, a0, a1, err) over every a0 <= amax0, a1 <= amax1: the definition of 'best'."""
    n = t0.shape[0]
    best = Best(n)
    idx = np.arange(n)
    for a0 in range(1, amax0 + 1):
        for a1 in range(1, amax1 + 1):
            best.offer(idx, t0, t1, a0, a1)
    return best.d, best.a0, best.a1, best.err


_FRAC = None


def fractions():
    """Sorted distinct ratios p/q with 1 <= p, q <= 15 (reduced): values, p, q."""
    global _FRAC
    if _FRAC is None:
        fr = sorted({(p / q, p, q) for p in range(1, AMAX + 1) for q in range(1, AMAX + 1)
                     if math.gcd(p, q) == 1})
        _FRAC = (np.array([f[0] for f in fr]), np.array([f[1] for f in fr]), np.array([f[2] for f in fr]))
    return _FRAC


def search_fast(t0, t1):
    """Same result (same error) as search_brute(t0, t1), much faster.

    The continuous optimum for a ratio f = a0/a1 has error |f - r| / (f + r), r = t0/t1, which grows
    with the distance of f from r on either side; fp16 rounding of d only adds to it. So: try the
    nearest ratio below and above r (all multiples, both fp16 brackets), then check that the next
    ratio out on each side cannot beat the result even without rounding; blocks where that check
    fails go to the brute-force search."""
    vals, ps, qs = fractions()
    nf = vals.shape[0]
    n = t0.shape[0]
    r = t0 / t1
    pos = np.searchsorted(vals, r)                 # vals[pos-1] < r <= vals[pos]
    best = Best(n)
    for side in (pos - 1, pos):                    # nearest below, nearest at-or-above
        ok = (side >= 0) & (side < nf)
        idx = np.nonzero(ok)[0]
        f = side[idx]
        p, q = ps[f], qs[f]
        kmax = AMAX // np.maximum(p, q)
        for k in range(1, AMAX + 1):
            m = kmax >= k
            if not m.any():
                break
            j = idx[m]
            best.offer(j, t0[j], t1[j], p[m] * k, q[m] * k)
    # proof: the next ratio out on each side has continuous error >= what we found
    unproven = np.zeros(n, bool)
    for nxt in (pos - 2, pos + 1):
        has = (nxt >= 0) & (nxt < nf)
        f = np.clip(nxt, 0, nf - 1)
        estar = np.abs(vals[f] - r) / (vals[f] + r)
        unproven |= has & (estar < best.err)
    u = np.nonzero(unproven)[0]
    if u.size:
        d, a0, a1, e = search_brute(t0[u], t1[u])
        best.d[u], best.a0[u], best.a1[u], best.err[u] = d, a0, a1, e
    return best.d, best.a0, best.a1, best.err, int(u.size)


def q2k_params(s):
    """Per super-block parameters from the two 128-half scales s (B, 2) float16.

    Returns d (B,) float16 (= dmin), sc (B, 2) and m (B, 2) nibbles per half, flip (B, 2) bool
    (q = 3 - code in that half), err (B,) worst relative magnitude error (0 = exact), brute count."""
    B = s.shape[0]
    s64 = s.astype(np.float64)
    if not np.all(np.isfinite(s64)):
        raise ValueError("non-finite scale")
    t = np.abs(s64)
    nz = t > 0
    neg = s64 < 0
    # sign of d: the first non-zero scale's sign
    sign_neg = np.where(nz[:, 0], neg[:, 0], neg[:, 1])
    flip = nz & (neg != sign_neg[:, None])
    d = np.zeros(B, np.float16)
    a = np.zeros((B, 2), np.int64)
    err = np.zeros(B)
    brute = 0
    # one non-zero half: a = 1, d = that scale (exact)
    one = nz[:, 0] ^ nz[:, 1]
    if one.any():
        h = np.where(nz[one, 0], 0, 1)
        d[one] = np.abs(s[one, :])[np.arange(h.size), h]
        a[one, 0] = nz[one, 0]
        a[one, 1] = nz[one, 1]
    both = nz[:, 0] & nz[:, 1]
    same = both & ~flip[:, 1]
    if same.any():
        i = np.nonzero(same)[0]
        di, a0, a1, e, nb = search_fast(t[i, 0], t[i, 1])
        d[i], a[i, 0], a[i, 1], err[i] = di, a0, a1, e
        brute += nb
    mixed = both & flip[:, 1]
    if mixed.any():                               # half 1 flipped: m = 2a needs a1 <= 7
        i = np.nonzero(mixed)[0]
        di, a0, a1, e = search_brute(t[i, 0], t[i, 1], AMAX, AMAX // 2)
        d[i], a[i, 0], a[i, 1], err[i] = di, a0, a1, e
        brute += i.size
    m = np.where(flip, 2 * a, a)
    d = np.where(sign_neg, -d, d).astype(np.float16)
    return d, a, m, flip, err, brute


def encode_q2k(codes, s):
    """codes (B, 256) uint8 in element order, s (B, 2) float16 half scales -> (B, 84) uint8 Q2_K
    blocks, err (B,), number of blocks that needed the brute-force search."""
    B = codes.shape[0]
    d, a, m, flip, err, brute = q2k_params(s)
    q = codes.reshape(B, 2, 128)
    q = np.where(flip[:, :, None], np.uint8(3) - q, q).astype(np.uint8)
    out = np.empty((B, Q2_K_BYTES), np.uint8)
    nib = (a | (m << 4)).astype(np.uint8)                         # (B, 2): one byte per half
    out[:, 0:16] = np.repeat(nib, 8, axis=1)                     # sub-blocks 0..7, 8..15
    q4 = q.reshape(B, 2, 4, 32)                                  # [n, j, l] = weight 128n + 32j + l
    qs = q4[:, :, 0] | (q4[:, :, 1] << 2) | (q4[:, :, 2] << 4) | (q4[:, :, 3] << 6)
    out[:, 16:80] = qs.reshape(B, 64)
    dd = d.view(np.uint8).reshape(B, 2)
    out[:, 80:82] = dd
    out[:, 82:84] = dd                                           # dmin = d
    return out, err, brute


def encode_q4_0(codes, s):
    """codes (nb, 128), s (nb,) float16 -> (nb*4, 18) Q4_0 blocks: d = s, q = code + 7 (exact)."""
    nb = codes.shape[0]
    c = (codes.reshape(nb * 4, 2, 16) + np.uint8(7)).astype(np.uint8)
    out = np.empty((nb * 4, Q4_0_BYTES), np.uint8)
    out[:, 0:2] = np.repeat(s.view(np.uint8).reshape(nb, 2), 4, axis=0)
    out[:, 2:18] = c[:, 0] | (c[:, 1] << 4)
    return out


# ---------------------------------------------------------------------------
# conversion of one tensor, chunk by chunk
# ---------------------------------------------------------------------------

class Figures:
    def __init__(self):
        self.n = self.zeros = self.zeros_exact = self.nonzero = self.signs = self.equal = 0
        self.max_rel = self.sum_rel = 0.0
        self.blocks = self.blocks_exact = self.brute = 0
        self.checked = False

    def add_check(self, src, out):
        """src, out: float32 values of the same weights (source formula, gguf.quants decode)."""
        self.checked = True
        z = src == 0
        nz_count = src.size - int(np.count_nonzero(z))
        self.n += src.size
        self.zeros += src.size - nz_count
        self.zeros_exact += int(np.count_nonzero(z & (out == 0)))
        self.nonzero += nz_count
        # a non-zero source weight agrees in sign when out is non-zero with the same sign bit
        self.signs += int(np.count_nonzero(~z & (out != 0) & (np.signbit(out) == np.signbit(src))))
        if nz_count:
            rel = np.abs(out - src) / np.where(z, np.float32(1), np.abs(src))   # exact values give 0
            self.max_rel = max(self.max_rel, float(rel.max()))
            self.sum_rel += float(rel.sum(dtype=np.float64))
        self.equal += int(np.count_nonzero(out == src))

    def as_dict(self):
        def frac(a, b):
            return a / b if b else 1.0
        return {"weights": self.n, "zeros": self.zeros, "zero_exact_frac": frac(self.zeros_exact, self.zeros),
                "nonzero": self.nonzero, "sign_agree_frac": frac(self.signs, self.nonzero),
                "max_rel_err": self.max_rel, "mean_rel_err": self.sum_rel / self.nonzero if self.nonzero else 0.0,
                "value_exact_frac": frac(self.equal, self.n),
                "superblocks": self.blocks, "superblocks_exact": self.blocks_exact,
                "brute_force_blocks": self.brute, "checked": self.checked}


def plan_type(t):
    """Output type for tensor t: Q2_K, Q4_0 (rows not a multiple of 256) or None (copy)."""
    if t.ttype == T_TQ2_0:
        return T_Q2_K
    if t.ttype in (T_PQ2_0, T_PTQ1_0):
        return T_Q2_K if t.dims[0] % 256 == 0 else T_Q4_0
    return None


def out_nbytes(t, otype):
    return t.n // 256 * Q2_K_BYTES if otype == T_Q2_K else t.n // 32 * Q4_0_BYTES


def convert_tensor(f_in, src, t, otype, write, check):
    """Stream tensor t from f_in, write its new blocks through write(bytes) (None: dry run)."""
    blk, bts = type_size(t.ttype)
    nblocks = t.n // blk
    per = max(2, (CHUNK_WEIGHTS // blk) // 2 * 2)   # source blocks per chunk (even: whole super-blocks)
    fig = Figures()
    f_in.seek(src.data_start + t.offset)
    done = 0
    while done < nblocks:
        nb = min(per, nblocks - done)
        raw = np.frombuffer(f_in.read(nb * bts), np.uint8)
        if raw.size != nb * bts:
            raise ValueError(f"{t.name}: file truncated")
        d, codes = DECODERS[t.ttype](raw.reshape(nb, bts))
        if np.any(codes > 3):
            raise AssertionError("code out of range")
        if not np.all(np.isfinite(d)):
            bad = done + int(np.nonzero(~np.isfinite(d))[0][0])
            raise ValueError(f"{t.name}: block {bad} has a non-finite scale; refusing to convert")
        if t.ttype == T_TQ2_0:
            s2 = np.stack([d, d], axis=1)
            c256 = codes
        elif otype == T_Q2_K:
            s2 = d.reshape(-1, 2)
            c256 = codes.reshape(-1, 256)
        if otype == T_Q2_K:
            out, err, brute = encode_q2k(c256, s2)
            fig.blocks += out.shape[0]
            fig.blocks_exact += int((err == 0).sum())
            fig.brute += brute
            qtype = gguf.GGMLQuantizationType.Q2_K
        else:
            out = encode_q4_0(codes, d)
            fig.blocks += out.shape[0]
            fig.blocks_exact += out.shape[0]
            qtype = gguf.GGMLQuantizationType.Q4_0
        if check:
            srcv = ((codes.astype(np.float32) - 1) * d.astype(np.float32)[:, None]).ravel()
            outv = gguf.quants.dequantize(out, qtype).ravel()
            fig.add_check(srcv, outv)
        if write:
            write(out.tobytes())
        done += nb
    return fig


def copy_bytes(f_in, start, n, write):
    f_in.seek(start)
    while n:
        b = f_in.read(min(COPY_CHUNK, n))
        if not b:
            raise ValueError("file truncated")
        write(b)
        n -= len(b)


def fmt_mib(n):
    return f"{n / 1048576:.1f} MiB"


def convert(args):
    t_start = time.time()
    src = GGUFFile(args.input)
    plan = [(t, plan_type(t)) for t in src.tensors]
    n_conv = sum(1 for _, o in plan if o is not None)
    types = {}
    for t in src.tensors:
        types[type_name(t.ttype)] = types.get(type_name(t.ttype), 0) + 1
    print(f"reading {src.path}: GGUF v{src.version}, {len(src.tensors)} tensors "
          f"({', '.join(f'{k} x{v}' for k, v in sorted(types.items()))}), {len(src.kv)} metadata entries, "
          f"alignment {src.alignment}")
    for t, o in plan:
        if o is None and t.nbytes is None:
            print(f"  note: {t.name} has type id {t.ttype}, unknown here: copied as its {t.span} byte span")
    if n_conv == 0:
        print("warning: no PQ2_0, PTQ1_0 or TQ2_0 tensor: the output would be a copy")

    n_q2k = sum(1 for _, o in plan if o == T_Q2_K)
    new_ftype = LLAMA_FTYPE_MOSTLY_Q2_K if n_q2k else (LLAMA_FTYPE_MOSTLY_Q4_0 if n_conv else None)
    kv_out = []
    for key, raw, vt, value in src.kv:
        if key == "general.file_type" and new_ftype is not None and vt in t2p_gguf.VT_FMT and value != new_ftype:
            klen = struct.unpack_from("<Q", raw)[0]
            kv_out.append(raw[:8 + klen + 4] + struct.pack(t2p_gguf.VT_FMT[vt], new_ftype))
            print(f"  general.file_type: {value} -> {new_ftype}")
        else:
            kv_out.append(raw)

    sizes = [out_nbytes(t, o) if o is not None else (t.nbytes if t.nbytes is not None else t.span) for t, o in plan]
    infos = [(t, o, off, nbytes) for (t, o), off, nbytes in zip(plan, t2p_gguf.place(sizes, src.alignment), sizes)]
    meta = t2p_gguf.header_bytes(src.version, kv_out, [(t.name, t.dims, o if o is not None else t.ttype, o_off)
                                                        for t, o, o_off, _ in infos], src.alignment)
    total_out = len(meta) + (infos[-1][2] + infos[-1][3] if infos else 0)

    check = not args.no_check
    if args.dry_run and not check:
        sys.exit("error: --dry-run with --no-check has nothing to do")
    results = []
    total_in = sum(t.nbytes or t.span for t in src.tensors)
    done_in = 0
    out = None if args.dry_run else tc.AtomicOut(args.output)
    with open(src.path, "rb") as f_in, out or contextlib.nullcontext():
        if out:
            out.write(meta)
        for i, (t, o, o_off, nbytes) in enumerate(infos):
            t0 = time.time()
            if out:
                assert out.n == len(meta) + o_off, t.name
            if o is not None:
                fig = convert_tensor(f_in, src, t, o, out.write if out else None, check)
                rec = {"name": t.name, "from": type_name(t.ttype), "to": type_name(o),
                       "shape": t.dims, "bytes_in": t.nbytes, "bytes_out": nbytes}
                rec.update(fig.as_dict())
                results.append(rec)
                line = (f"  [{i + 1:4d}/{len(infos)}] {t.name:30s} {type_name(t.ttype):>6s} -> {type_name(o):4s} "
                        f"{'x'.join(str(x) for x in t.dims):>11s}")
                if check:
                    line += (f"  zeros exact {100 * rec['zero_exact_frac']:7.3f}%  signs "
                             f"{100 * rec['sign_agree_frac']:7.3f}%  max rel {rec['max_rel_err']:.3e}  "
                             f"exact blocks {100 * fig.blocks_exact / max(1, fig.blocks):6.2f}%")
                else:
                    line += f"  exact blocks {100 * fig.blocks_exact / max(1, fig.blocks):6.2f}%"
                done_in += t.nbytes
                line += (f"  {time.time() - t0:5.2f} s  [{100 * done_in / max(1, total_in):5.1f}%, "
                         f"{time.time() - t_start:6.1f} s]")
                print(line, flush=True)
            elif out:
                copy_bytes(f_in, src.data_start + t.offset, nbytes, out.write)
                done_in += t.nbytes or t.span
                if args.verbose:
                    print(f"  [{i + 1:4d}/{len(infos)}] {t.name:30s} {type_name(t.ttype):>6s} copied "
                          f"({nbytes} B)", flush=True)
            else:
                done_in += t.nbytes or t.span
            if out:
                pad = t2p_gguf.align_up(nbytes, src.alignment) - nbytes
                if i + 1 < len(infos) and pad:
                    out.write(bytes(pad))
        if out:
            assert out.n == total_out
            out.commit()

    summarize(results, check, src, args, total_out, time.time() - t_start)
    if args.json:
        with tc.AtomicOut(args.json) as jout:
            jout.write(json.dumps({"input": os.path.abspath(args.input), "output": None if args.dry_run else
                                   os.path.abspath(args.output), "tensors": results}, indent=1).encode())
            jout.commit()
        print(f"per-tensor figures written to {args.json}")
    if out:
        reread(args.output, infos)
    if check and results:
        bad = [r["name"] for r in results if r["zero_exact_frac"] < 1 or r["sign_agree_frac"] < 1]
        if bad:
            print(f"error: zeros or signs not exact in {len(bad)} tensors: {', '.join(bad[:5])}",
                  file=sys.stderr)
            return 1
    return 0


def summarize(results, check, src, args, total_out, seconds):
    conv = results
    in_bytes = sum(r["bytes_in"] for r in conv)
    out_bytes = sum(r["bytes_out"] for r in conv)
    by = {}
    for r in conv:
        by.setdefault((r["from"], r["to"]), 0)
        by[(r["from"], r["to"])] += 1
    print(f"{len(conv)} tensors converted ("
          + ", ".join(f"{a} -> {b} x{n}" for (a, b), n in sorted(by.items()))
          + f"), {len(src.tensors) - len(conv)} copied; converted data {fmt_mib(in_bytes)} -> {fmt_mib(out_bytes)}")
    q2k = [r for r in conv if r["to"] == "Q2_K"]
    if q2k:
        nb = sum(r["superblocks"] for r in q2k)
        ne = sum(r["superblocks_exact"] for r in q2k)
        nbf = sum(r["brute_force_blocks"] for r in q2k)
        print(f"  Q2_K super-blocks: {nb}, magnitude-exact {ne} ({100 * ne / max(1, nb):.2f}%), "
              f"brute-force searched {nbf}")
    if check and conv:
        zmin = min(conv, key=lambda r: r["zero_exact_frac"])
        smin = min(conv, key=lambda r: r["sign_agree_frac"])
        emax = max(conv, key=lambda r: r["max_rel_err"])
        print(f"  min zero-exact fraction {100 * zmin['zero_exact_frac']:.4f}% ({zmin['name']}), "
              f"min sign agreement {100 * smin['sign_agree_frac']:.4f}% ({smin['name']}), "
              f"worst relative magnitude error {emax['max_rel_err']:.4e} ({emax['name']})")
        nzw = sum(r["nonzero"] for r in conv)
        print(f"  mean relative magnitude error over all {nzw} non-zero weights: "
              f"{sum(r['mean_rel_err'] * r['nonzero'] for r in conv) / max(1, nzw):.4e}")
        nw = sum(r["weights"] for r in conv)
        ne = sum(r["value_exact_frac"] * r["weights"] for r in conv)
        print(f"  weights checked against gguf.quants: {nw}, value-exact {100 * ne / max(1, nw):.3f}%")
    what = "would write" if args.dry_run else "wrote"
    print(f"{what} {total_out} bytes ({fmt_mib(total_out)})" + ("" if args.dry_run else f" to {args.output}")
          + f" in {seconds:.1f} s")


def reread(path, infos):
    """Parse the written header again and compare the tensor table with the plan. (PyPI gguf's
    GGUFReader would be an independent parser, but it maps and touches the whole file; the test
    suite re-reads its outputs with it.)"""
    r = GGUFFile(path)
    got = [(t.name, t.ttype, t.offset, t.nbytes) for t in r.tensors]
    want = [(t.name, o if o is not None else t.ttype, off, nbytes if (o is not None or t.nbytes is not None)
             else None) for t, o, off, nbytes in infos]
    if got != want or os.path.getsize(path) != r.data_start + (infos[-1][2] + infos[-1][3] if infos else 0):
        raise SystemExit("error: the written file does not match the plan")
    print(f"re-read: {len(got)} tensors, types, offsets and sizes as planned")


def same_path(a, b):
    """True when a and b name one file (also through links), or would once written."""
    if os.path.exists(a) and os.path.exists(b):
        return os.path.samefile(a, b)
    return os.path.realpath(a) == os.path.realpath(b)


def check_paths(ap, args):
    """Refuses, before any work, an output or --json path that would overwrite the input (or each
    other), an existing one without --force, a directory, or a folder that cannot be written."""
    outs = [("output", args.output)] if args.output else []
    outs += [("--json", args.json)] if args.json else []
    for what, path in outs:
        tc.out_file_arg(ap, what, path)
        if same_path(args.input, path):
            ap.error(f"{what} {path} is the input file")
        if os.path.exists(path) and not args.force:
            ap.error(f"{what} {path} exists (use --force to overwrite)")
    if len(outs) == 2 and same_path(outs[0][1], outs[1][1]):
        ap.error("--json must differ from the output")


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] + " (the module docstring, shown below, explains the encoding)",
        epilog=__doc__[__doc__.index("Source formats"):], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("input", help="source GGUF with PQ2_0, PTQ1_0 and/or TQ2_0 tensors")
    ap.add_argument("output", nargs="?", help="output GGUF (written atomically); not with --dry-run")
    ap.add_argument("--dry-run", "-n", action="store_true",
                    help="convert in memory and print the per-tensor error figures; write nothing")
    ap.add_argument("--no-check", action="store_true",
                    help="skip the per-chunk decode with gguf.quants (faster; no error figures)")
    ap.add_argument("--json", metavar="PATH", help="also write the per-tensor figures as JSON")
    ap.add_argument("--force", "-f", action="store_true", help="overwrite an existing output or --json file")
    ap.add_argument("--install", action="store_true", help="make the project's Python environment (numpy, gguf: tools/requirements.txt) if missing")
    ap.add_argument("--verbose", "-v", action="store_true", help="also list the copied tensors")
    args = ap.parse_args()
    if args.dry_run and args.output:
        ap.error("--dry-run writes nothing: drop the output path")
    if not args.dry_run and not args.output:
        ap.error("an output path is required (or --dry-run)")
    check_paths(ap, args)
    need_packages(args.install)
    if sys.byteorder != "little":
        sys.exit("error: little-endian hosts only")
    try:
        return convert(args)
    except (ValueError, OSError) as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    sys.exit(main())
