#!/usr/bin/env python3
"""Teach a llama.cpp checkout that has PQ2_0 (PrismML's fork, branch q2_0-prs, ff6b68f38) the ternary
type PTQ1_0 (ggml type 143), so that ggml-t2p's PTQ1_0 path can run inside llama.cpp. Python 3
standard library only.

The fork added PTQ1_0 after the last state its public git mirror holds; this tool writes the pieces a
CPU build needs into the checkout the user names (never downloads one), as small edits anchored on
the PQ2_0 lines beside which they belong. All code it inserts is ggml-t2p's own, written from the
format's facts (docs/formats.md section 2); the numbers and names are the fork's:

  ggml/include/ggml.h             GGML_TYPE_PTQ1_0 = 143 (GGML_TYPE_COUNT 144), GGML_FTYPE_MOSTLY_PTQ1_0 = 129
  ggml/src/ggml-common.h          QK_PTQ1_0 128, block_ptq1_0 { uint8 qs[24]; uint8 qh[2]; fp16 d; } (28 B)
  ggml/src/ggml-quants.[ch]       quantize_row_ptq1_0_ref, dequantize_row_ptq1_0, quantize_ptq1_0,
                                  row validation (finite fp16 d)
  ggml/src/ggml.c                 type traits "ptq1_0" (block 128, 28 bytes), ftype map, quantize_chunk
  ggml/src/ggml-cpu/quants.[ch]   quantize_row_ptq1_0, ggml_vec_dot_ptq1_0_q8_0 (generic C; the fork
                                  runs PTQ1_0 x Q8_0 in generic C on x86 and ARM)
  ggml/src/ggml-cpu/ggml-cpu.c    CPU traits: vec_dot_type Q8_0
  ggml/src/ggml-cpu/ops.cpp       PTQ1_0 beside PQ2_0 in the quantized-type case lists
  include/llama.h                 LLAMA_FTYPE_MOSTLY_PTQ1_0 = 143
  src/llama-model-loader.cpp      its name "PTQ1_0 - 1.75 bpw ternary (group 128)", type -> ftype
  src/llama-quant.cpp             ftype -> type, the fallback type (Q4_0) and the embedding rule
  tools/quantize/quantize.cpp     llama-quantize name PTQ1_0
  gguf-py/gguf/constants.py       GGMLQuantizationType.PTQ1_0 = 143, LlamaFileType.MOSTLY_PTQ1_0 = 143,
                                  GGML_QUANT_SIZES (128, 28)

Apply ggml-t2p's patch (tools/t2p.py) before or after; the two touch different files. Idempotent: a
second run finds every edit in place and changes nothing. A checkout whose anchors differ (another
fork version) or that already has a PTQ1_0 of its own is refused before any file is written, with
the first edit that did not fit. --check only reports. --revert takes the edits out again.

Exit status: 0 done (or nothing to do), 1 refused or failed, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import os
import sys

MARK = "ggml-t2p ptq1-tree"

# ---------------------------------------------------------------------------------------------
# The code inserted (ggml-t2p's own)

COMMON_BLOCK = f"""
// PTQ1_0 ({MARK}): ternary, 128 weights in 28 bytes (1.75 bpw). qs[0..16] hold five base-3 digits of
// elements 16n+m, qs[16..24] of 80+8n+m, qh[0..2] four digits of 120+2n+h; a byte stores
// ceil(v * 256 / 243) of its digits' base-3 value v (first element most significant), and digit n
// of byte b is ((uint8_t)(b * 3^n) * 3) >> 8. Weight = (digit - 1) * d; d last.
#define QK_PTQ1_0 128
typedef struct {{
    uint8_t qs[24];
    uint8_t qh[2];
    ggml_half d;
}} block_ptq1_0;
static_assert(sizeof(block_ptq1_0) == 28, "wrong ptq1_0 block size/padding");
"""

QUANTS_H_QUANT = ("GGML_API void quantize_row_ptq1_0_ref(const float * GGML_RESTRICT x, "
                  f"block_ptq1_0 * GGML_RESTRICT y, int64_t k); // {MARK}\n")
QUANTS_H_DEQUANT = ("GGML_API void dequantize_row_ptq1_0(const block_ptq1_0 * GGML_RESTRICT x, "
                    f"float * GGML_RESTRICT y, int64_t k); // {MARK}\n")
QUANTS_H_CHUNK = ("GGML_API size_t quantize_ptq1_0(const float * GGML_RESTRICT src, void * GGML_RESTRICT dst, "
                  f"int64_t nrows, int64_t n_per_row, const float * imatrix); // {MARK}\n")

QUANTS_C = f"""
// ---- PTQ1_0 ({MARK}) ----

// The byte of five (or four, then times 3) base-3 digits t[0], t[step], ...: ceil(v * 256 / 243).
static uint8_t ptq1_0_byte(const uint8_t * t, int step, int count) {{
    int v = 0;
    for (int n = 0; n < count; ++n) {{
        v = 3*v + t[n*step];
    }}
    if (count == 4) {{
        v *= 3;
    }}
    return (uint8_t) ((v*256 + 242) / 243);
}}

static int ptq1_0_digit(uint8_t b, int n) {{
    static const uint8_t pow3[5] = {{ 1, 3, 9, 27, 81 }};
    return ((uint8_t) (b * pow3[n]) * 3) >> 8;
}}

void quantize_row_ptq1_0_ref(const float * GGML_RESTRICT x, block_ptq1_0 * GGML_RESTRICT y, int64_t k) {{
    assert(k % QK_PTQ1_0 == 0);
    const int64_t nb = k / QK_PTQ1_0;

    for (int64_t i = 0; i < nb; ++i) {{
        const float * xb = x + i*QK_PTQ1_0;
        float amax = 0.0f;
        for (int j = 0; j < QK_PTQ1_0; ++j) {{
            const float a = fabsf(xb[j]);
            if (a > amax) {{
                amax = a;
            }}
        }}
        const float id = amax > 0.0f ? 1.0f/amax : 0.0f;

        uint8_t t[QK_PTQ1_0];
        for (int j = 0; j < QK_PTQ1_0; ++j) {{
            int q = (int) roundf(xb[j]*id) + 1;
            t[j] = (uint8_t) (q < 0 ? 0 : q > 2 ? 2 : q);
        }}
        for (int m = 0; m < 16; ++m) {{
            y[i].qs[m] = ptq1_0_byte(t + m, 16, 5);
        }}
        for (int m = 0; m < 8; ++m) {{
            y[i].qs[16 + m] = ptq1_0_byte(t + 80 + m, 8, 5);
        }}
        for (int h = 0; h < 2; ++h) {{
            y[i].qh[h] = ptq1_0_byte(t + 120 + h, 2, 4);
        }}
        y[i].d = GGML_FP32_TO_FP16(amax);
    }}
}}

void dequantize_row_ptq1_0(const block_ptq1_0 * GGML_RESTRICT x, float * GGML_RESTRICT y, int64_t k) {{
    assert(k % QK_PTQ1_0 == 0);
    const int64_t nb = k / QK_PTQ1_0;

    for (int64_t i = 0; i < nb; ++i) {{
        const float d = GGML_FP16_TO_FP32(x[i].d);
        float * yb = y + i*QK_PTQ1_0;
        for (int n = 0; n < 5; ++n) {{
            for (int m = 0; m < 16; ++m) {{
                yb[16*n + m] = (ptq1_0_digit(x[i].qs[m], n) - 1) * d;
            }}
            for (int m = 0; m < 8; ++m) {{
                yb[80 + 8*n + m] = (ptq1_0_digit(x[i].qs[16 + m], n) - 1) * d;
            }}
        }}
        for (int n = 0; n < 4; ++n) {{
            for (int h = 0; h < 2; ++h) {{
                yb[120 + 2*n + h] = (ptq1_0_digit(x[i].qh[h], n) - 1) * d;
            }}
        }}
    }}
}}

size_t quantize_ptq1_0(const float * GGML_RESTRICT src, void * GGML_RESTRICT dst, int64_t nrow, int64_t n_per_row, const float * quant_weights) {{
    (void) quant_weights; // the ternary rule has no use for an importance matrix
    const size_t row_size = ggml_row_size(GGML_TYPE_PTQ1_0, n_per_row);
    for (int64_t row = 0; row < nrow; ++row) {{
        quantize_row_ptq1_0_ref(src + row*n_per_row, (block_ptq1_0 *) ((char *) dst + row*row_size), n_per_row);
    }}
    return nrow * row_size;
}}
"""

VALIDATE_C = f"""        case GGML_TYPE_PTQ1_0: // {MARK}
            {{
                VALIDATE_ROW_DATA_D_F16_IMPL(block_ptq1_0, data, nb);
            }} break;
"""

GGML_C_TRAITS = f"""    [GGML_TYPE_PTQ1_0] = {{ // {MARK}
        .type_name                = "ptq1_0",
        .blck_size                = QK_PTQ1_0,
        .type_size                = sizeof(block_ptq1_0),
        .is_quantized             = true,
        .to_float                 = (ggml_to_float_t) dequantize_row_ptq1_0,
        .from_float_ref           = (ggml_from_float_t) quantize_row_ptq1_0_ref,
    }},
"""

CPU_QUANTS_H = (f"void quantize_row_ptq1_0(const float * GGML_RESTRICT x, void * GGML_RESTRICT y, int64_t k); // {MARK}\n")
CPU_QUANTS_H_DOT = ("void ggml_vec_dot_ptq1_0_q8_0(int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT vx, "
                    f"size_t bx, const void * GGML_RESTRICT vy, size_t by, int nrc); // {MARK}\n")

CPU_QUANTS_C = f"""
// ---- PTQ1_0 ({MARK}) ----

void quantize_row_ptq1_0(const float * GGML_RESTRICT x, void * GGML_RESTRICT y, int64_t k) {{
    quantize_row_ptq1_0_ref(x, y, k);
}}

// PTQ1_0 x Q8_0, generic C: one PTQ1_0 block (128 weights) meets four Q8_0 blocks (32 each). Per
// Q8_0 block an integer sum of (digit - 1) * q, scaled by the Q8_0 scale; the block's sum of those
// is scaled by the PTQ1_0 scale.
void ggml_vec_dot_ptq1_0_q8_0(int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT vx, size_t bx, const void * GGML_RESTRICT vy, size_t by, int nrc) {{
    static const uint8_t pow3[5] = {{ 1, 3, 9, 27, 81 }};
    assert(n % QK_PTQ1_0 == 0);
    assert(nrc == 1);
    UNUSED(nrc);
    UNUSED(bx);
    UNUSED(by);
    UNUSED(bs);

    const block_ptq1_0 * GGML_RESTRICT x = vx;
    const block_q8_0   * GGML_RESTRICT y = vy;
    const int nb = n / QK_PTQ1_0;

    float sumf = 0.0f;
    for (int i = 0; i < nb; ++i) {{
        int8_t w[QK_PTQ1_0];
        for (int e = 0; e < 80; ++e) {{
            w[e] = (int8_t) ((((uint8_t) (x[i].qs[e % 16] * pow3[e / 16]) * 3) >> 8) - 1);
        }}
        for (int e = 80; e < 120; ++e) {{
            w[e] = (int8_t) ((((uint8_t) (x[i].qs[16 + (e - 80) % 8] * pow3[(e - 80) / 8]) * 3) >> 8) - 1);
        }}
        for (int e = 120; e < 128; ++e) {{
            w[e] = (int8_t) ((((uint8_t) (x[i].qh[(e - 120) % 2] * pow3[(e - 120) / 2]) * 3) >> 8) - 1);
        }}
        float sumi = 0.0f;
        for (int b = 0; b < 4; ++b) {{
            const block_q8_0 * GGML_RESTRICT yb = &y[4*i + b];
            int isum = 0;
            for (int j = 0; j < 32; ++j) {{
                isum += w[32*b + j] * yb->qs[j];
            }}
            sumi += GGML_CPU_FP16_TO_FP32(yb->d) * isum;
        }}
        sumf += GGML_CPU_FP16_TO_FP32(x[i].d) * sumi;
    }}
    *s = sumf;
}}
"""

CPU_TRAITS = f"""    [GGML_TYPE_PTQ1_0] = {{ // {MARK}
        .from_float               = quantize_row_ptq1_0,
        .vec_dot                  = ggml_vec_dot_ptq1_0_q8_0,
        .vec_dot_type             = GGML_TYPE_Q8_0,
        .nrows                    = 1,
    }},
"""

# ---------------------------------------------------------------------------------------------
# The edits: (file, anchor, text, where, count). where: "after" (text goes after the anchor), "before",
# "replace" (anchor -> text; the reverse needs the anchor back). count: how often the anchor must occur
# (each occurrence gets the text); None = exactly once.

EDITS = [
    ("ggml/include/ggml.h",
     "        GGML_TYPE_COUNT   = 143,\n",
     f"        GGML_TYPE_PTQ1_0  = 143, // {MARK}: Prism-private ternary, group 128\n"
     f"        GGML_TYPE_COUNT   = 144, // {MARK}\n", "replace", None),
    ("ggml/include/ggml.h",
     "        GGML_FTYPE_MOSTLY_PQ2_0   = 128, // except 1d tensors (Prism-private group-128 Q2_0)\n",
     f"        GGML_FTYPE_MOSTLY_PTQ1_0  = 129, // {MARK}\n", "after", None),
    ("ggml/src/ggml-common.h",
     'static_assert(sizeof(block_pq2_0) == sizeof(ggml_half) + QKP2_0 / 4, "wrong pq2_0 block size/padding");\n',
     COMMON_BLOCK, "after", None),
    ("ggml/src/ggml-quants.h",
     "GGML_API void quantize_row_pq2_0_ref(const float * GGML_RESTRICT x, block_pq2_0 * GGML_RESTRICT y, int64_t k);\n",
     QUANTS_H_QUANT, "after", None),
    ("ggml/src/ggml-quants.h",
     "GGML_API void dequantize_row_pq2_0(const block_pq2_0 * GGML_RESTRICT x, float * GGML_RESTRICT y, int64_t k);\n",
     QUANTS_H_DEQUANT, "after", None),
    ("ggml/src/ggml-quants.h",
     "GGML_API size_t quantize_pq2_0(const float * GGML_RESTRICT src, void * GGML_RESTRICT dst, int64_t nrows, "
     "int64_t n_per_row, const float * imatrix);\n",
     QUANTS_H_CHUNK, "after", None),
    ("ggml/src/ggml-quants.c",
     "// reference implementation for deterministic creation of model files\n"
     "void quantize_row_q4_0_ref(",
     QUANTS_C.lstrip("\n") + "\n", "before", None),
    ("ggml/src/ggml-quants.c",
     "        case GGML_TYPE_PQ2_0:\n            {\n                VALIDATE_ROW_DATA_D_F16_IMPL(block_pq2_0, data, nb);\n"
     "            } break;\n",
     VALIDATE_C, "after", None),
    ("ggml/src/ggml.c",
     "        .from_float_ref           = (ggml_from_float_t) quantize_row_pq2_0_ref,\n    },\n",
     GGML_C_TRAITS, "after", None),
    ("ggml/src/ggml.c",
     "        case GGML_FTYPE_MOSTLY_PQ2_0:         wtype = GGML_TYPE_PQ2_0; break;\n",
     f"        case GGML_FTYPE_MOSTLY_PTQ1_0:        wtype = GGML_TYPE_PTQ1_0; break; // {MARK}\n", "after", None),
    ("ggml/src/ggml.c",
     "        case GGML_TYPE_PQ2_0:   result = quantize_pq2_0  (src + start, (char *) dst + start_row * row_size, "
     "nrows, n_per_row, imatrix); break;\n",
     "        case GGML_TYPE_PTQ1_0:  result = quantize_ptq1_0 (src + start, (char *) dst + start_row * row_size, "
     f"nrows, n_per_row, imatrix); break; // {MARK}\n", "after", None),
    ("ggml/src/ggml-cpu/quants.h",
     "void quantize_row_pq2_0(const float * GGML_RESTRICT x, void * GGML_RESTRICT y, int64_t k);\n",
     CPU_QUANTS_H, "after", None),
    ("ggml/src/ggml-cpu/quants.h",
     "void ggml_vec_dot_pq2_0_q8_0(int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT vx, "
     "size_t bx, const void * GGML_RESTRICT vy, size_t by, int nrc);\n",
     CPU_QUANTS_H_DOT, "after", None),
    ("ggml/src/ggml-cpu/quants.c",
     "// PQ2_0 (group 128) generic dot.",
     CPU_QUANTS_C.lstrip("\n") + "\n", "before", None),
    ("ggml/src/ggml-cpu/ggml-cpu.c",
     "        .vec_dot                  = ggml_vec_dot_pq2_0_q8_0,\n        .vec_dot_type             = GGML_TYPE_Q8_0,\n"
     "        .nrows                    = 1,\n    },\n",
     CPU_TRAITS, "after", None),
    ("ggml/src/ggml-cpu/ops.cpp",
     "        case GGML_TYPE_PQ2_0:\n",
     f"        case GGML_TYPE_PTQ1_0: // {MARK}\n", "after", 7),
    ("include/llama.h",
     "        LLAMA_FTYPE_MOSTLY_PQ2_0         = 141, // except 1d tensors (Prism-private group-128 Q2_0; kept < 0x400 "
     "to avoid the LLAMA_FTYPE_GUESSED bit)\n",
     f"        LLAMA_FTYPE_MOSTLY_PTQ1_0        = 143, // {MARK}: Prism-private ternary, group 128\n", "after", None),
    ("src/llama-model-loader.cpp",
     '        case LLAMA_FTYPE_MOSTLY_PQ2_0:    return "PQ2_0 - 2.125 bpw group-128 (Prism)";\n',
     f'        case LLAMA_FTYPE_MOSTLY_PTQ1_0:   return "PTQ1_0 - 1.75 bpw ternary (group 128)"; // {MARK}\n',
     "after", None),
    ("src/llama-model-loader.cpp",
     "            case GGML_TYPE_PQ2_0:   ftype = LLAMA_FTYPE_MOSTLY_PQ2_0;   break;\n",
     f"            case GGML_TYPE_PTQ1_0:  ftype = LLAMA_FTYPE_MOSTLY_PTQ1_0;  break; // {MARK}\n", "after", None),
    ("src/llama-quant.cpp",
     "            case GGML_TYPE_PQ2_0:\n            case GGML_TYPE_Q2_K:\n",
     f"            case GGML_TYPE_PTQ1_0: // {MARK}\n", "before", None),
    ("src/llama-quant.cpp",
     "ftype == LLAMA_FTYPE_MOSTLY_Q2_0 || ftype == LLAMA_FTYPE_MOSTLY_PQ2_0) {\n",
     "ftype == LLAMA_FTYPE_MOSTLY_Q2_0 || ftype == LLAMA_FTYPE_MOSTLY_PQ2_0 || "
     f"ftype == LLAMA_FTYPE_MOSTLY_PTQ1_0) {{ // {MARK}\n", "replace", None),
    ("src/llama-quant.cpp",
     "        case LLAMA_FTYPE_MOSTLY_PQ2_0: return GGML_TYPE_PQ2_0;\n",
     f"        case LLAMA_FTYPE_MOSTLY_PTQ1_0: return GGML_TYPE_PTQ1_0; // {MARK}\n", "after", None),
    ("tools/quantize/quantize.cpp",
     '    { "PQ2_0",    LLAMA_FTYPE_MOSTLY_PQ2_0,    " 2.125 bpw quantization (group 128, Prism)", },\n',
     f'    {{ "PTQ1_0",   LLAMA_FTYPE_MOSTLY_PTQ1_0,   " 1.75 bpw ternary quantization (group 128, Prism)", }}, // {MARK}\n',
     "after", None),
    ("gguf-py/gguf/constants.py",
     "    PQ2_0   = 142\n",
     f"    PTQ1_0  = 143  # {MARK}\n", "after", None),
    ("gguf-py/gguf/constants.py",
     "    MOSTLY_PQ2_0         = 141  # except 1d tensors (Prism-private group-128 Q2_0; < 0x400 GUESSED bit)\n",
     f"    MOSTLY_PTQ1_0        = 143  # {MARK}\n", "after", None),
    ("gguf-py/gguf/constants.py",
     "    GGMLQuantizationType.PQ2_0:   (128, 2 + 32),\n",
     f"    GGMLQuantizationType.PTQ1_0:  (128, 24 + 2 + 2),  # {MARK}\n", "after", None),
]


class Refused(Exception):
    pass


def new_text(anchor, text, where):
    return {"after": anchor + text, "before": text + anchor, "replace": text}[where]


def plan(llama, revert=False):
    """Return {path: new content} for the files that change, or raise Refused (nothing written)."""
    out = {}
    for rel, anchor, text, where, count in EDITS:
        path = os.path.join(llama, rel)
        if path not in out:
            if not os.path.isfile(path):
                raise Refused(f"{rel} is missing: {llama} does not look like a llama.cpp checkout")
            with open(path, encoding="utf-8", newline="") as f:
                out[path] = f.read()
        src = out[path]
        want = count or 1
        edited = new_text(anchor, text, where)
        n_edited = src.count(edited)
        n_bare = src.count(anchor) - (n_edited if where != "replace" else 0)
        have, lack = (n_bare, n_edited) if revert else (n_edited, n_bare)
        if lack == 0 and have == want:
            continue                         # already in the wanted state
        if lack != want or have != 0:
            raise Refused(f"{rel}: expected the edit's anchor {want} time(s); found it {n_bare} time(s) "
                          f"unedited and {n_edited} time(s) edited:\n    {anchor.splitlines()[0].strip()}\n"
                          "This checkout is not the fork's q2_0-prs (ff6b68f38) state, or it was edited by hand.")
        old, done = (edited, anchor) if revert else (anchor, edited)
        out[path] = src.replace(old, done)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(prog="tools/ptq1-tree.py", description=__doc__.split("\n\n", 1)[0],
                                 epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama", required=True, metavar="DIR", help="the llama.cpp checkout to edit (q2_0-prs state)")
    ap.add_argument("--check", action="store_true", help="report whether the edits are in place; write nothing")
    ap.add_argument("--revert", action="store_true", help="take the edits out again")
    args = ap.parse_args(argv)
    llama = os.path.abspath(args.llama)
    if not os.path.isdir(llama):
        ap.error(f"--llama {args.llama}: not a folder")
    ggml_h = os.path.join(llama, "ggml/include/ggml.h")
    if os.path.isfile(ggml_h):
        with open(ggml_h, encoding="utf-8") as f:
            h = f.read()
        if "GGML_TYPE_PTQ1_0" in h and MARK not in h:
            print(f"ptq1-tree: refused: {llama} already has a PTQ1_0 of its own (a newer fork?): nothing to add",
                  file=sys.stderr)
            return 1
    try:
        changes = plan(llama, revert=args.revert)
    except Refused as e:
        print(f"ptq1-tree: refused, nothing written: {e}", file=sys.stderr)
        return 1
    changed = {}
    for path, text in changes.items():
        with open(path, encoding="utf-8", newline="") as f:
            if f.read() != text:
                changed[path] = text
    what = "take out" if args.revert else "make"
    if not changed:
        print(f"ptq1-tree: {llama}: nothing to {what} (the PTQ1_0 edits are {'absent' if args.revert else 'in place'})")
        return 0
    if args.check:
        print(f"ptq1-tree: {llama}: would {what} edits in {len(changed)} files: "
              + ", ".join(os.path.relpath(p, llama) for p in sorted(changed)))
        return 1
    for path, text in changed.items():
        tmp = path + ".ptq1-tree.tmp"
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.replace(tmp, path)
    verb = "took out" if args.revert else "made"
    print(f"ptq1-tree: {verb} the PTQ1_0 edits in {len(changed)} files of {llama}: "
          + ", ".join(os.path.relpath(p, llama) for p in sorted(changed)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
