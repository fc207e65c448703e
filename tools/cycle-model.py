#!/usr/bin/env python3
"""Cycle model of the ggml-t2p kernels: compiles the crate for aarch64 (and for the x86-64 host),
extracts the inner loop of each kernel from the compiled assembly, runs llvm-mca-19 on it for
several cores, and prints instructions and cycles per 128 weights per output next to stock's PQ2_0
loop. Then (aarch64, under qemu) the instructions one call executes outside those loops.

Only cores that llvm-mca-19 schedules with their own model are reported: the tool checks every
-mcpu by the resource names llvm-mca prints (e.g. -mcpu=cortex-a76 is scheduled with the
Cortex-A57 model, -mcpu=apple-m4 with the 2013 Cyclone model; both are refused).

The model ignores memory bandwidth (decode is bandwidth-bound on real machines); it ranks
instruction efficiency. See docs/benchmarks.md, "The cycle model".
"""

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True   # no __pycache__ beside the tools
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import t2p_common as tc  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARM_TARGET = "aarch64-unknown-linux-gnu"
OUT = os.path.join(ROOT, "target", "cycle-model")

# llvm-mca-19 scheduling models, by the prefix of their resource names -> the core they model.
MODELS = {
    "V2Unit": "Neoverse-V2", "N1Unit": "Neoverse-N1", "N2Unit": "Neoverse-N2", "V1Unit": "Neoverse-V1",
    "Ampere1Unit": "AmpereOne (Ampere1)", "Ampere1BUnit": "AmpereOne (Ampere1B)", "A57Unit": "Cortex-A57",
    "CyUnit": "Apple Cyclone (2013)", "CortexA55Unit": "Cortex-A55", "CortexA510Unit": "Cortex-A510",
    "HWPort": "Haswell", "ADLPPort": "Alder Lake P-core", "SPRPort": "Sapphire Rapids", "Zn4": "Zen 4",
    "SKLPort": "Skylake", "ICXPort": "Ice Lake server", "Zn3": "Zen 3",
}
# -mcpu -> (its own model's resource prefix, FEAT_I8MM). Checked at run time (check_model).
ARM_CORES = {
    "neoverse-v2": ("V2Unit", True),
    "neoverse-n1": ("N1Unit", False),
    "neoverse-n2": ("N2Unit", True),
    "neoverse-v1": ("V1Unit", True),
    "ampere1": ("Ampere1Unit", True),
}
X86_CORES = {"haswell": "HWPort", "alderlake": "ADLPPort", "sapphirerapids": "SPRPort", "znver4": "Zn4"}

# Stock ARM yardstick, per 128 weights per output (stock has no PQ2_0 gemm: a prompt batch costs the
# same per output). The fork runs ggml_vec_dot_pq2_0_q8_K on ARM as the generic C; issue 5 measured
# a NEON form of it: 72 instructions, llvm-mca-19 cycles V2 12.6, N1 25.1 (kept: the before/after
# numbers of issues 5-9 use them). That loop's source is not at hand here; the other cores'
# numbers come from the closest reconstruction: the fork's NEON ggml_vec_dot_pq2_0_q8_0 loop
# (arch/arm/quants.c: tbl/ushl/and/sub decode, 2 sdot per 32) with one Q8_K scale per 128 and the
# four sub-block dots in one int32x4, clang-19 -O3 -march=armv8.6-a+dotprod+i8mm, one block per
# iteration, 71 instructions; it gives V2 12.38, N1 25.11 (issue 5: 12.6, 25.1), and N2 25.13,
# V1 15.17, Ampere1 24.66.
STOCK_ARM = {"instr": 72, "cycles": {"neoverse-v2": 12.6, "neoverse-n1": 25.1, "neoverse-n2": 25.13,
                                     "neoverse-v1": 15.17, "ampere1": 24.66}}
# Stock x86 yardstick: the newest fork's x86 ggml_vec_dot_pq2_0_q8_K (arch/x86/quants.c, AVX2 and
# AVX-VNNI branches) in our harness (YARDSTICK_HARNESS), clang-19 -O3, its inner loop (one 128-weight
# block per iteration) in llvm-mca-19, each built for the core it is modeled on: VNNI branch with
# -march=CORE (alderlake: VEX vpdpbusd ymm; sapphirerapids, znver4: EVEX vpdpbusd ymm), AVX2 branch
# with -march=CORE -mno-avxvnni -mno-avx512vnni (haswell: plain). Recorded 2026-12-01 with
# `--stock-source` on that file (fork commit 04e39def); the run with --stock-source FILE rebuilds them.
# (Until then the VNNI branch on znver4 was the sapphirerapids build, VEX-encoded where Zen 4 has no
# AVX-VNNI: 8.17 cycles, 8.82 in this harness; built for Zen 4 it is 18.14.) Each of our kernels is
# compared with the branch of its own ISA level.
STOCK_X86 = {
    "avx2": {"instr": {"haswell": 67, "alderlake": 67, "sapphirerapids": 58, "znver4": 59},
             "cycles": {"haswell": 22.16, "alderlake": 18.3, "sapphirerapids": 16.73, "znver4": 11.84}},
    "vnni": {"instr": {"alderlake": 55, "sapphirerapids": 46, "znver4": 47},
             "cycles": {"alderlake": 21.14, "sapphirerapids": 21.14, "znver4": 18.14}},
}

# ARM kernels: symbol fragment, label, MAC instruction, MACs per 128-weight block, outputs per block
ARM_KERNELS = [
    ("gemv_t2p_4x1_q8_k_dotprod", "T2P gemv (sdot)", "sdot", 32, 4),
    ("gemm_t2p_4x16_q8_k_i8mm", "T2P gemm 4x16 (smmla)", "smmla", 256, 64),
    ("gemm_t2p_4x16_q8_k_i8mm", "T2P gemm 4x8 (smmla)", "smmla", 128, 32),
    ("gemm_t2p_4x16_q8_k_i8mm", "T2P gemm 4x4 (smmla, 4 cols)", "smmla", 64, 16),
    ("gemm_t2p_4x4_q8_k_dotprod", "T2P gemm 4x4 (sdot, no i8mm)", "sdot", 128, 16),
    ("gemv_ptq1_0x4_4x1_q8_k_dotprod", "PTQ1_0 native gemv (sdot)", "sdot", 32, 4),
    ("gemm_ptq1_0x4_4x16_q8_k_i8mm", "PTQ1_0 native gemm 4x16 (smmla)", "smmla", 256, 64),
    ("gemm_ptq1_0x4_4x16_q8_k_i8mm", "PTQ1_0 native gemm 4x8 (smmla)", "smmla", 128, 32),
    ("gemm_ptq1_0x4_4x4_q8_k_dotprod", "PTQ1_0 native gemm 4x4 (sdot)", "sdot", 128, 16),
]
# x86 kernels (X16: 16 rows x 128 weights per block, per column): symbol fragment, label, MAC
# instruction, MACs per block, outputs per block, stock branch, cores with the ISA
X86_KERNELS = [
    ("gemv_x16_16x1_q8_k_avx2", "X16 gemv (AVX2)", "vpmaddubsw", 64, 16, "avx2", ["haswell", "alderlake", "sapphirerapids", "znver4"]),
    ("gemm_x16_16x4_q8_k_avx2", "X16 gemm 16x4 (AVX2)", "vpmaddubsw", 256, 64, "avx2", ["haswell", "alderlake", "sapphirerapids", "znver4"]),
    ("gemv_x16_16x1_q8_k_avxvnni", "X16 gemv (AVX-VNNI)", "vpdpbusd", 64, 16, "vnni", ["alderlake", "sapphirerapids"]),
    ("gemm_x16_16x2_q8_k_avxvnni", "X16 gemm 16x2 (AVX-VNNI)", "vpdpbusd", 128, 32, "vnni", ["alderlake", "sapphirerapids"]),
    ("gemv_x16_16x1_q8_k_avx512vnni", "X16 gemv (AVX-512 VNNI)", "vpdpbusd", 32, 16, "vnni", ["sapphirerapids", "znver4"]),
    ("gemm_x16_16x8_q8_k_avx512vnni", "X16 gemm 16x8 (AVX-512 VNNI)", "vpdpbusd", 256, 128, "vnni", ["sapphirerapids", "znver4"]),
]
# The hybrid's gated delta rule on NEON (src/hybrid/neon.rs, gdn_rows_c, one copy per row length
# and pair of flags, wherever the compiler put them): the loop over state rows at S = 128 has no
# inner loop, so one iteration is one state row and token. Rows: label, vector FMAs and multiplies
# per iteration (3 x 128 / 4 FMAs: key dot, update, query dot; 128 / 4 vector multiplies per
# scaling), the FP instructions whose issue the row's bound is. A token inside a ubatch reads its
# rows scaled and scales them for the next (one scaling); a decoded token (a ubatch of one) scales
# them in both passes and stores them unscaled.
HYBRID_ARM = [("gated delta rule, row x token inside a ubatch (S 128)", 3 * 128 // 4, 128 // 4),
              ("gated delta rule, row x token of a decode (S 128)", 3 * 128 // 4, 2 * 128 // 4)]
HYBRID_FP = ("fmla", "fmul", "fadd", "faddp")

# Bonsai 2 27B matmul shapes (rows x k) for the outside-loop line, and the batches
SHAPES_27B = [(5120, 17408), (17408, 5120), (5120, 6144), (6144, 5120)]
OL_BATCHES = [("gemv", 1, "dotprod"), ("gemm4", 4, "i8mm"), ("gemm64", 64, "i8mm"), ("gemm4 sdot", 4, "dotprod")]


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw).stdout


def ensure_tools(install):
    need = ["llvm-mca-19", "qemu-aarch64-static", "aarch64-linux-gnu-objdump"]
    if all(shutil.which(t) for t in need):
        return
    if not install:
        sys.exit("cycle-model: llvm-mca-19 / the aarch64 toolchain not found (tools/toolchain.py), or run without --no-install")
    import toolchain
    try:
        toolchain.ensure_aarch64(True)
        toolchain.ensure_llvm19(True)
    except toolchain.Missing as e:
        sys.exit(f"cycle-model: {e}")


def build_asm(target):
    """The crate's release assembly for `target` (None: the host)."""
    env = dict(os.environ, CARGO_TARGET_DIR=OUT)
    cmd = ["cargo", "rustc", "--release", "--lib", "--crate-type", "rlib"]
    if target:
        env["RUSTC"] = "/usr/bin/rustc"
        cmd += ["--target", target]
    subprocess.run(cmd + ["--", "--emit", "asm"], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out = os.path.join(OUT, target, "release", "deps") if target else os.path.join(OUT, "release", "deps")
    files = sorted(glob.glob(os.path.join(out, "ggml_t2p-*.s")), key=os.path.getmtime)
    if not files:
        sys.exit(f"cycle-model: no assembly file in {out}")
    return open(files[-1]).read().splitlines()


def function_body(asm_lines, fragment):
    """Lines of the first function whose mangled name contains `fragment`."""
    start = next((i for i, l in enumerate(asm_lines) if re.match(r"^_ZN\S*" + re.escape(fragment) + r"\S*:", l)), None)
    if start is None:
        sys.exit(f"cycle-model: function {fragment} not found in the assembly")
    end = next(i for i in range(start + 1, len(asm_lines)) if asm_lines[i].startswith(".Lfunc_end"))
    return asm_lines[start:end]


INSN = re.compile(r"^\s+(?:\{vex\}\s+)?([a-z][a-z0-9.]*)\b")
BRANCH = re.compile(r"^\s+(b|b\.\w+|cbn?z|tbn?z|j\w+)\s+.*?(\.LBB\w+)\s*$")


def loops(body):
    """Every backward branch: (label index, branch index)."""
    labels = {}
    found = []
    for i, l in enumerate(body):
        m = re.match(r"^(\.LBB\w+):", l)
        if m:
            labels[m.group(1)] = i
        m = BRANCH.match(l.split("//")[0].split("#")[0].rstrip())
        if m and m.group(2) in labels:
            found.append((labels[m.group(2)], i))
    return found


def instructions(lines):
    return [l for l in lines if INSN.match(l) and not l.strip().startswith(".")]


def mnemonic(line):
    return INSN.match(line).group(1)


def loop_text(body, lo, hi, comment):
    """The loop as a self-contained snippet for llvm-mca: branches leaving it go to a local label."""
    out = []
    for l in body[lo + 1:hi + 1]:
        s = l.split(comment)[0].rstrip()
        if not s or s.lstrip().startswith(".") or re.match(r"^\.?\w+:", s):
            continue
        out.append(re.sub(r"\.LBB\w+", ".Lout", s))
    return "\n".join(out) + "\n.Lout:\n"


def pick_loop(body, mac, per_block):
    """Innermost loops that contain MAC instructions; the one with a whole number of blocks per
    iteration, preferring exactly `per_block` MACs (one block per iteration)."""
    cands = []
    for lo, hi in loops(body):
        n_mac = sum(1 for l in instructions(body[lo:hi + 1]) if mnemonic(l) == mac)
        if n_mac and n_mac % per_block == 0:
            cands.append((n_mac != per_block, hi - lo, lo, hi, n_mac))
    if not cands:
        return None
    cands.sort()
    _, _, lo, hi, n_mac = cands[0]
    return lo, hi, n_mac


def mca_raw(snippet, triple, core, iterations, extra=()):
    path = os.path.join(OUT, "loop.s")
    os.makedirs(OUT, exist_ok=True)
    with open(path, "w") as f:
        f.write(snippet)
    attrs = ["-mattr=+dotprod,+i8mm"] if triple == "aarch64" else []
    r = subprocess.run(["llvm-mca-19", f"-mtriple={triple}", f"-mcpu={core}", *attrs, f"-iterations={iterations}", *extra, path],
                       text=True, capture_output=True)
    if r.returncode != 0 or "not a recognized processor" in r.stderr:
        sys.exit(f"cycle-model: llvm-mca-19 -mcpu={core} failed:\n{r.stderr.strip()[:500]}")
    return r.stdout


def mca(snippet, triple, core, iterations=200, mac=None):
    """(instructions, cycles) per iteration; with `mac`, also the sum of the MAC instructions'
    reciprocal throughputs (llvm-mca's "Instruction Info" RThroughput): the cycles they need when
    nothing else runs."""
    txt = mca_raw(snippet, triple, core, iterations)
    total = int(re.search(r"Total Cycles:\s+(\d+)", txt).group(1))
    insns = int(re.search(r"Instructions:\s+(\d+)", txt).group(1))
    if mac is None:
        return insns / iterations, total / iterations
    info = txt.split("Instruction Info:", 1)[1].split("\n\n", 2)[1]
    rt = 0.0
    for line in info.splitlines():
        m = re.match(r"^\s*\d+\s+\d+\s+([\d.]+)\s+(?:[*U]\s+)*(?:\{vex\}\s+)?([a-z][a-z0-9.]*)", line)
        if m and m.group(2) in ((mac,) if isinstance(mac, str) else mac):
            rt += float(m.group(1))
    return insns / iterations, total / iterations, rt


def check_model(triple, core, expected):
    """The scheduling model llvm-mca-19 uses for -mcpu=core, from its resource names; exits unless
    it is the core's own (`expected` resource prefix)."""
    probe = "add x0, x0, #1\n" if triple == "aarch64" else "addq $1, %rax\n"
    txt = mca_raw(probe, triple, core, 1)
    names = re.findall(r"^\[[\d.]+\]\s+-\s+(\S+)", txt, re.M)
    used = next((m for p, m in sorted(MODELS.items(), key=lambda x: -len(x[0])) if any(n.startswith(p) for n in names)), None)
    if not expected or not any(n.startswith(expected) for n in names):
        known = ", ".join(ARM_CORES if triple == "aarch64" else X86_CORES)
        sys.exit(f"cycle-model: llvm-mca-19 -mcpu={core} schedules with the {used or 'an unknown'} model "
                 f"(resources {', '.join(names[:3])}, ...); only cores checked to have their own model are "
                 f"reported: {known}")
    return MODELS[expected]


def mac_key(mac, line):
    """'vpdpbusd zmm mem' for a loop line: the MAC, its width, whether an operand is in memory. The VEX
    form ({vex}, AVX-VNNI) is its own key: no core here was measured with it."""
    width = "zmm" if "%zmm" in line else "ymm" if "%ymm" in line else "xmm"
    vex = "{vex} " if "{vex}" in line else ""
    return f"{vex}{mac} {width}" + (" mem" if "(" in line else "")


def model_hybrid(asm, cores):
    """The hybrid rows (HYBRID_ARM) on each aarch64 core: instructions and cycles per state row and
    token, and the FP instructions' issue (their reciprocal throughputs over the modeled cycles)."""
    rows = []
    # every function of the hybrid module (the NEON rows may be inlined into GatedDeltaNet::run)
    starts = [i for i, l in enumerate(asm) if re.match(r"^_ZN8ggml_t2p6hybrid\S*:", l)]
    bodies = []
    for i in starts:
        end = next(j for j in range(i + 1, len(asm)) if asm[j].startswith(".Lfunc_end"))
        bodies.append(asm[i:end])
    for label, fmla, fmul in HYBRID_ARM:
        found = []
        for body in bodies:
            for lo, hi in loops(body):
                ins = instructions(body[lo:hi + 1])
                n_fmla = sum(1 for l in ins if mnemonic(l) == "fmla")
                n_fmul = sum(1 for l in ins if mnemonic(l) == "fmul" and ".4s" in l)   # vector only
                if n_fmla == fmla and n_fmul == fmul:
                    found.append((hi - lo, loop_text(body, lo, hi, "//")))
        if not found:
            print(f"{label:56} (no loop with {fmla} fmla and {fmul} fmul found)")
            continue
        snippet = min(found)[1]
        spills = sum(1 for l in instructions(snippet.splitlines()) if "[sp" in l)
        for core in cores:
            ins, cyc, fp_cycles = mca(snippet, "aarch64", core, mac=HYBRID_FP)
            print(f"{label:56} {core:15} {ins:6.0f} {cyc:8.2f} {100 * fp_cycles / cyc:8.0f}% {spills:7}")
            rows.append(dict(kernel=label, core=core, instructions=ins, cycles=cyc, fp_issue=fp_cycles / cyc,
                             stack_accesses=spills))
    return rows


def model_rows(asm, kernels, triple, cores, comment, stock_for, has_isa, limits=None):
    """Prints and returns the table rows of `kernels` on `cores`. LIMITS: {core: {"vpdpbusd zmm": per
    cycle, ...}} measured issue rates; where a row's MAC instructions all have one, the row also shows
    the cycles they need at that measured rate over the loop's modeled cycles."""
    rows = []
    for k in kernels:
        frag, label, mac, per_block, outputs = k[:5]
        body = function_body(asm, frag)
        picked = pick_loop(body, mac, per_block)
        if picked is None:
            print(f"{label:34} (no loop with {per_block} {mac} per block found)")
            continue
        lo, hi, n_mac = picked
        blocks = n_mac // per_block
        snippet = loop_text(body, lo, hi, comment)
        for core in cores:
            if not has_isa(k, core):
                continue
            ins, cyc, mac_cycles = mca(snippet, triple, core, mac=mac)
            per_ins, per_cyc = ins / (blocks * outputs), cyc / (blocks * outputs)
            issue = mac_cycles / cyc
            s_ins, s_cyc = stock_for(k, core)
            r_ins = per_ins / s_ins if s_ins else float("nan")
            r_cyc = per_cyc / s_cyc if s_cyc else float("nan")
            meas = ""
            issue_meas = None
            if limits is not None:
                lim = limits.get(core, {})
                macs = [l for l in instructions(snippet.splitlines()) if mnemonic(l) == mac]
                rates = [lim.get(mac_key(mac, l)) for l in macs]
                if rates and all(rates):
                    issue_meas = sum(1 / r for r in rates) / cyc
                meas = f" {100 * issue_meas:8.0f}%" if issue_meas is not None else f" {'-':>9}"
            print(f"{label:34} {core:15} {per_ins:6.2f} {r_ins:7.3f}x {per_cyc:7.2f} {r_cyc:7.3f}x {100 * issue:8.0f}%{meas}")
            rows.append(dict(kernel=label, symbol=frag, core=core, instr_per_128_per_output=per_ins, cycles_per_128_per_output=per_cyc,
                             instr_ratio_vs_stock=r_ins, cycle_ratio_vs_stock=r_cyc, mac_issue_fraction=issue,
                             mac_issue_fraction_measured_limit=issue_meas,
                             loop_instructions=ins, loop_cycles=cyc, macs_per_loop=n_mac, blocks_per_loop=blocks))
    return rows


# ---- stock's x86 loop, built for the core it models ----

# Our harness around the fork's function (the fork's source itself is read from --stock-source, never
# kept here): the types and macros the function uses, as ggml defines them on x86.
YARDSTICK_HARNESS = r"""
#include <immintrin.h>
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#define GGML_RESTRICT __restrict
#define UNUSED(x) (void)(x)
#define QK_K 256
#define QK_PQ2_0 128
typedef struct { uint16_t d; uint8_t qs[32]; } block_pq2_0;
typedef struct { float d; int8_t qs[256]; int16_t bsums[16]; } block_q8_K;
#define GGML_CPU_FP16_TO_FP32(h) _cvtsh_ss(h)
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
#  define GGML_DPBUSD_256(acc, a, b) _mm256_dpbusd_epi32(acc, a, b)
#elif defined(__AVXVNNI__)
#  define GGML_DPBUSD_256(acc, a, b) _mm256_dpbusd_avx_epi32(acc, a, b)
#endif
"""
YARDSTICK_FUNCS = ["hsum_float_8", "pq2k_dpbusd_acc", "ggml_vec_dot_pq2_0_q8_K"]
# -march for the branch: "vnni" = the core as it is; "avx2" = the core without any VNNI (the AVX2
# branch of the same function, built for that core's other instructions and tuning)
YARDSTICK_NO_VNNI = ["-mno-avxvnni", "-mno-avx512vnni"]


def c_function(src, name):
    """The text of C function NAME (signature to its closing brace) in SRC, or None."""
    m = re.search(r"^[^\n;{}]*\b" + re.escape(name) + r"\s*\([^;{]*\)\s*\{", src, re.M)
    if not m:
        return None
    depth, i = 0, m.end() - 1
    while i < len(src):
        depth += {"{": 1, "}": -1}.get(src[i], 0)
        if depth == 0:
            return src[m.start():i + 1]
        i += 1
    return None


def build_yardstick(source, core, branch):
    """Stock's ggml_vec_dot_pq2_0_q8_K from SOURCE (a fork's arch/x86/quants.c) built with clang-19 -O3
    -march=CORE (without VNNI for the AVX2 branch); its one-block loop as a llvm-mca snippet, with the
    instruction it multiplies with and the blocks per iteration."""
    text = open(source, encoding="utf-8", errors="replace").read()
    funcs = [c_function(text, f) for f in YARDSTICK_FUNCS]
    if not all(funcs):
        sys.exit(f"cycle-model: {source} lacks " + ", ".join(f for f, b in zip(YARDSTICK_FUNCS, funcs) if not b) +
                 " (it must be the fork's ggml/src/ggml-cpu/arch/x86/quants.c with the PQ2_0 x Q8_K AVX2 dot)")
    os.makedirs(OUT, exist_ok=True)
    c = os.path.join(OUT, "yardstick.c")
    with open(c, "w") as f:
        f.write(YARDSTICK_HARNESS + "\n\n".join(funcs) + "\n")
    flags = [f"-march={core}"] + (YARDSTICK_NO_VNNI if branch == "avx2" else [])
    r = subprocess.run(["clang-19", "-O3", *flags, "-S", "-o", "-", c], text=True, capture_output=True)
    if r.returncode != 0:
        sys.exit(f"cycle-model: clang-19 {' '.join(flags)} failed on the yardstick:\n{r.stderr[:800]}")
    asm = r.stdout.splitlines()
    start = next(i for i, l in enumerate(asm) if l.startswith("ggml_vec_dot_pq2_0_q8_K:"))
    end = next(i for i in range(start, len(asm)) if asm[i].startswith(".Lfunc_end"))
    body = asm[start:end]
    for mac in ("vpdpbusd", "vpmaddubsw"):
        picked = pick_loop(body, mac, 8)
        if picked:
            lo, hi, n_mac = picked
            return loop_text(body, lo, hi, "#"), mac, n_mac // 8, " ".join(flags)
    sys.exit(f"cycle-model: no loop with 8 vpdpbusd/vpmaddubsw per block in the yardstick built with {flags}")


def model_yardsticks(source, cores):
    """STOCK_X86-shaped figures from SOURCE, each branch built for the core it is modeled on."""
    res = {"avx2": {"instr": {}, "cycles": {}, "flags": {}}, "vnni": {"instr": {}, "cycles": {}, "flags": {}}}
    for branch, has in (("avx2", lambda c: True), ("vnni", lambda c: c != "haswell")):
        for core in cores:
            if not has(core):
                continue
            snippet, mac, blocks, flags = build_yardstick(source, core, branch)
            ins, cyc = mca(snippet, "x86_64", core)
            res[branch]["instr"][core] = round(ins / blocks, 2)
            res[branch]["cycles"][core] = round(cyc / blocks, 2)
            res[branch]["flags"][core] = flags
    return res


# ---- the host's measured MAC issue rates (x86-64) ----

# Independent accumulator chains (more than latency x issue width), one instruction per line; the
# same loop timed here and given to llvm-mca, so the two figures are of the same code.
# Each register form and the memory form the kernels use (a broadcast 4-byte group for vpdpbusd; the
# loads come from the stack, always mapped). Keys: MAC, width, " mem" for a memory operand (mac_key).
MICRO_OPS = {
    "vpdpbusd zmm": ("vpdpbusd %zmm14, %zmm15, %zmm{r}", "avx512vnni"),
    "vpdpbusd zmm mem": ("vpdpbusd (%rsp){{1to16}}, %zmm15, %zmm{r}", "avx512vnni"),
    "vpdpbusd ymm": ("vpdpbusd %ymm14, %ymm15, %ymm{r}", "avx512vnni"),
    "vpdpbusd ymm mem": ("vpdpbusd (%rsp){{1to8}}, %ymm15, %ymm{r}", "avx512vnni"),
    "vpmaddubsw ymm": ("vpmaddubsw %ymm14, %ymm15, %ymm{r}", None),
    "vpmaddubsw ymm mem": ("vpmaddubsw (%rsp), %ymm15, %ymm{r}", None),
}
MICRO_CHAINS = 12
MICRO_C = r"""
#include <stdint.h>
#include <stdio.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static inline uint64_t tsc(void) { unsigned lo, hi; __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi)); return ((uint64_t) hi << 32) | lo; }
#define N 500000L
static void ops(long n) { __asm__ volatile("1:\n" BODY "dec %0\n jnz 1b\n" : "+r"(n) :: "cc" CLOBBER); }
static void adds(long n) {   /* a chain of dependent adds: one core cycle each */
    __asm__ volatile("1:\n" ADDS "dec %0\n jnz 1b\n" : "+r"(n) :: "rax", "cc");
}
int main(void) {
    double t_ops = 1e9, t_add = 1e9; uint64_t c_ops = 0;
    for (int r = 0; r < 300; r++) {   /* shortest of many short runs: runs the scheduler did not cut */
        double t0 = now(); uint64_t c0 = tsc(); ops(N); uint64_t c1 = tsc(); double t1 = now();
        if (t1 - t0 < t_ops) { t_ops = t1 - t0; c_ops = c1 - c0; }
        t0 = now(); adds(N); t1 = now();
        if (t1 - t0 < t_add) t_add = t1 - t0;
    }
    double n = (double) CHAINS * N;
    printf("%.4f %.4f %.4f %.4f\n", n / t_ops / 1e9, n / t_add / 1e9, n / (double) c_ops, (double) c_ops / t_ops / 1e9);
    return 0;
}
"""


def host_core():
    """The llvm-mca -mcpu of this machine's core when the tool knows it (Zen 4 from AMD family 25 with
    AVX-512; Zen 5 family 26), else None."""
    try:
        info = open("/proc/cpuinfo", encoding="utf-8", errors="replace").read()
    except OSError:
        return None
    vendor = re.search(r"^vendor_id\s*:\s*(\S+)", info, re.M)
    family = re.search(r"^cpu family\s*:\s*(\d+)", info, re.M)
    if vendor and vendor.group(1) == "AuthenticAMD" and family and "avx512f" in tc.cpu_flags():
        return {25: "znver4", 26: "znver5"}.get(int(family.group(1)))
    return None


def measure_issue(flags):
    """{op: (per core cycle, per TSC cycle, core GHz, TSC GHz)} measured on this machine, for the ops
    whose ISA it has."""
    res = {}
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang-19")
    if not cc:
        return res
    os.makedirs(OUT, exist_ok=True)
    for op, (insn, isa) in MICRO_OPS.items():
        if isa == "avx512vnni" and "avx512_vnni" not in flags:
            continue
        body = "".join('"' + insn.format(r=r).replace("%", "%%").replace("{", "%{").replace("}", "%}") + '\\n" '
                       for r in range(MICRO_CHAINS))   # extended asm: %% for %, %{ %} for braces
        reg = "zmm" if "zmm" in insn else "ymm"
        clobber = "".join(f', "{reg}{r}"' for r in range(MICRO_CHAINS))
        adds = '"add $1, %%rax\\n" ' * MICRO_CHAINS
        src = (f"#define BODY {body}\n#define CLOBBER {clobber}\n#define ADDS {adds}\n"
               f"#define CHAINS {MICRO_CHAINS}\n" + MICRO_C)
        c, exe = os.path.join(OUT, "issue.c"), os.path.join(OUT, "issue")
        with open(c, "w") as f:
            f.write(src)
        r = subprocess.run([cc, "-O2", c, "-o", exe], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"cycle-model: building the issue-rate microbenchmark failed:\n{r.stderr[:800]}")
        per_ns, ghz, per_tsc, tsc_ghz = map(float, subprocess.run([exe], capture_output=True, text=True,
                                                                   check=True).stdout.split())
        res[op] = (per_ns / ghz, per_tsc, ghz, tsc_ghz)
    return res


AVX512_CORES = {"sapphirerapids", "znver4", "znver5", "icelake-server"}


def modeled_issue(core):
    """{op: per cycle} that llvm-mca-19 -mcpu=CORE gives the microbenchmark's loop (the ops of the ISA
    the core has)."""
    res = {}
    for op, (insn, isa) in MICRO_OPS.items():
        if isa == "avx512vnni" and core not in AVX512_CORES:
            continue
        snippet = "".join(f"{insn.format(r=r)}\n" for r in range(MICRO_CHAINS))
        ins, cyc = mca(snippet, "x86_64", core)
        res[op] = ins / cyc
    return res


# Measured elsewhere, recorded: issue 18 / NOTES 5c, one core of an Emerald Rapids Xeon (Raptor Cove,
# the Sapphire Rapids core family), 1 thread: vpdpbusd zmm about 123 MAC per cycle (64 MAC each: 1.92
# per cycle), ymm about 63 (32 MAC each: 1.97 per cycle).
RECORDED_ISSUE = {"sapphirerapids": {"vpdpbusd zmm": 123 / 64, "vpdpbusd ymm": 63 / 32},
                  "source": "issue 18's measurement on an Emerald Rapids core; register/memory form not recorded"}


# ---- outside-loop instructions per call (aarch64, qemu) ----

def build_driver():
    env = dict(os.environ, RUSTC="/usr/bin/rustc", CARGO_TARGET_DIR=OUT,
               CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER="aarch64-linux-gnu-gcc",
               CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUSTFLAGS="-C target-feature=+crt-static")
    out = subprocess.run(["cargo", "build", "--release", "--target", ARM_TARGET, "--example", "outside_loop",
                          "--message-format=json"], cwd=ROOT, env=env, check=True, text=True, capture_output=True).stdout
    for line in out.splitlines():
        try:
            m = json.loads(line)
        except ValueError:
            continue
        if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "outside_loop":
            return m["executable"]
    sys.exit("cycle-model: the outside_loop driver did not build")


def block_loop_ranges(binary):
    """Address ranges of the kernels' block loops: in each ARM kernel function, the loops that
    contain sdot/smmla and no smaller such loop."""
    syms = [l.split()[-1] for l in sh(["nm", binary]).splitlines()
            if re.search(r" [tT] \S*(neon_dotprod|neon_i8mm|ptq1_0_neon)\d+ge(mv|mm)_", l)]
    ranges = []
    for s in sorted(set(syms)):
        dis = sh(["aarch64-linux-gnu-objdump", "-d", "--no-show-raw-insn", f"--disassemble={s}", binary]).splitlines()
        ins = []
        for l in dis:
            m = re.match(r"^\s+([0-9a-f]+):\s+(\S+)\s*(.*)$", l)
            if m:
                ins.append((int(m.group(1), 16), m.group(2), m.group(3)))
        loops_ = []
        for a, op, args in ins:
            m = re.match(r"^(b\.\w+|b|cbn?z|tbn?z)$", op)
            t = re.search(r"\b([0-9a-f]+) <", args)
            if m and t and int(t.group(1), 16) <= a:
                lo = int(t.group(1), 16)
                macs = sum(1 for x in ins if lo <= x[0] <= a and x[1] in ("sdot", "smmla"))
                if macs:
                    loops_.append((lo, a))
        for lo, hi in loops_:
            if not any((l2, h2) != (lo, hi) and lo <= l2 and h2 <= hi for l2, h2 in loops_):
                ranges.append((lo, hi))
    return ranges


def count_share(binary, ranges, rows, k, cols, level, threads=16):
    """Instructions executed between the driver's markers, (in block loops, outside)."""
    log = os.path.join(OUT, "ol.log")
    env = dict(os.environ, T2P_OL_ROWS=str(rows), T2P_OL_K=str(k), T2P_OL_COLS=str(cols), T2P_OL_THREADS=str(threads),
               T2P_OL_LEVEL=level)
    subprocess.run(["qemu-aarch64-static", "-cpu", "max", "-d", "in_asm,exec,nochain", "-D", log, binary], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tbs = {}
    cur = None
    inside = outside = 0
    active = False
    with open(log, errors="replace") as f:
        for line in f:
            if line.startswith("IN:"):
                cur = []
                sym = line[3:].strip()
                continue
            if cur is not None:
                m = re.match(r"^0x([0-9a-f]+):", line)
                if m:
                    cur.append(int(m.group(1), 16))
                    continue
                if cur:
                    tbs[cur[0]] = (cur, sym)
                cur = None
            if line.startswith("Trace"):
                m = re.search(r"\[[0-9a-f]+/([0-9a-f]+)/", line)
                pc = int(m.group(1), 16)
                name = line.rsplit("]", 1)[1].strip()
                if "ol_begin" in name:
                    active = True
                    continue
                if "ol_end" in name:
                    break
                if active and pc in tbs:
                    for a in tbs[pc][0]:
                        if any(lo <= a <= hi for lo, hi in ranges):
                            inside += 1
                        else:
                            outside += 1
    os.remove(log)
    return inside, outside


def outside_loop():
    print()
    print("outside-loop instructions per call (aarch64, executed under qemu -cpu max, counted from the TB log):")
    print("  one MUL_MAT at the Bonsai 2 27B shapes as the ggml shim runs it on 16 threads, thread 0's share")
    print("  (its part of the activation pack + its 4 row chunks, each one gemm_raw call); outside = every")
    print("  instruction not in a kernel's block loop, as a share of all the share executes")
    binary = build_driver()
    ranges = block_loop_ranges(binary)
    res = []
    hdr = f"  {'batch':11}" + "".join(f" {f'{r}x{k}':>12}" for r, k in SHAPES_27B)
    print(hdr)
    for name, cols, level in OL_BATCHES:
        cells = []
        for rows, k in SHAPES_27B:
            ins, outs = count_share(binary, ranges, rows, k, cols, level)
            frac = outs / max(1, ins + outs)
            cells.append(f"{100 * frac:11.2f}%")
            res.append(dict(batch=name, cols=cols, level=level, rows=rows, k=k, in_loop=ins, outside=outs, outside_fraction=frac))
        print(f"  {name:11}" + "".join(f" {c:>12}" for c in cells))
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cores", default=",".join(ARM_CORES), help="aarch64 llvm-mca -mcpu names (default: %(default)s)")
    ap.add_argument("--x86-cores", default=",".join(X86_CORES), help="x86-64 -mcpu names (default: %(default)s; '' for none)")
    ap.add_argument("--no-outside-loop", action="store_true", help="skip the outside-loop line (it builds examples/outside_loop.rs for aarch64 and runs it under qemu)")
    ap.add_argument("--no-install", action="store_true", help="do not apt-get llvm-19 / the aarch64 toolchain when missing")
    ap.add_argument("--json", metavar="FILE", help="also write the tables as JSON")
    ap.add_argument("--stock-source", metavar="QUANTS_C",
                    help="the fork's ggml/src/ggml-cpu/arch/x86/quants.c with ggml_vec_dot_pq2_0_q8_K: build the x86 "
                         "yardstick from it for each core (clang-19 -O3 -march=CORE) instead of the recorded figures")
    ap.add_argument("--no-measure", action="store_true",
                    help="do not time this machine's vpdpbusd/vpmaddubsw issue rates (x86-64 Linux; about 10 s)")
    ap.add_argument("--show-loop", metavar="KERNEL",
                    help="print the extracted loop of one kernel and exit: a part of its table label or symbol, "
                         "e.g. 'gemv', 'T2P gemm 4x8', 'ptq1_0x4_4x1_q8_k_dotprod', 'X16 gemv (AVX2)' (the first match)")
    args = ap.parse_args()
    cores = [c for c in args.cores.split(",") if c]
    x86_cores = [c for c in args.x86_cores.split(",") if c]
    ensure_tools(not args.no_install)
    if args.stock_source and not shutil.which("clang-19"):
        sys.exit("cycle-model: --stock-source needs clang-19 (Debian: apt-get install clang-19)")
    if args.stock_source and not os.path.isfile(args.stock_source):
        sys.exit(f"cycle-model: --stock-source {args.stock_source}: no such file")

    if args.show_loop:
        want = args.show_loop.lower()
        k = next((k for k in ARM_KERNELS + X86_KERNELS if want in k[1].lower() or want in k[0]), None)
        if k is None:
            sys.exit(f"cycle-model: no kernel matches {args.show_loop!r}; kernels: " + "; ".join(k[1] for k in ARM_KERNELS + X86_KERNELS))
        x86 = k in X86_KERNELS
        body = function_body(build_asm(None if x86 else ARM_TARGET), k[0])
        picked = pick_loop(body, k[2], k[3])
        if picked is None:
            sys.exit(f"cycle-model: no loop with {k[3]} {k[2]} per block in {k[0]}")
        print(loop_text(body, picked[0], picked[1], "#" if x86 else "//"))
        return

    out = dict(stock_arm=STOCK_ARM, stock_x86=STOCK_X86, models={})
    hdr = f"{'kernel':34} {'core':15} {'instr':>6} {'x stock':>8} {'cycles':>7} {'x stock':>8} {'MAC issue':>9}"
    if cores:
        for c in cores:
            out["models"][c] = check_model("aarch64", c, ARM_CORES.get(c, (None,))[0])
        asm = build_asm(ARM_TARGET)
        print("cycle model: llvm-mca-19, per 128 weights per output (gemv: per output row; gemm: per output element)")
        print("scheduling models (from llvm-mca's resource names): " + ", ".join(f"-mcpu={c}: {out['models'][c]}" for c in cores))
        print(f"stock yardstick (ggml_vec_dot_pq2_0_q8_K, NEON): {STOCK_ARM['instr']} instructions; cycles " +
              ", ".join(f"{c} {STOCK_ARM['cycles'][c]}" for c in cores))
        print(hdr)
        print("-" * len(hdr))
        out["arm"] = model_rows(asm, ARM_KERNELS, "aarch64", cores, "//",
                                lambda k, c: (STOCK_ARM["instr"], STOCK_ARM["cycles"][c]),
                                lambda k, c: k[2] != "smmla" or ARM_CORES[c][1])
        print("(smmla rows only for cores with FEAT_I8MM: Neoverse-N1 has none)")
        print()
        print("the hybrid's float ops (NEON path), per iteration of the loop over state rows:")
        hh = f"{'op':56} {'core':15} {'instr':>6} {'cycles':>8} {'FP issue':>9} {'stack':>7}"
        print(hh)
        print("-" * len(hh))
        out["hybrid_arm"] = model_hybrid(asm, cores)
        print("FP issue: the loop's fmla/fmul/fadd/faddp x their reciprocal throughput over its modeled cycles (100% = the")
        print("row runs at the FP pipes' limit); stack: instructions of the loop that address the stack (spills)")
    if x86_cores:
        for c in x86_cores:
            out["models"][c] = check_model("x86_64", c, X86_CORES.get(c))
        asm = build_asm(None)
        print()
        print("x86-64 (X16 layout; one loop iteration = one 16-row x 128-weight block per column), rows only on cores with the ISA")
        print("scheduling models: " + ", ".join(f"-mcpu={c}: {out['models'][c]}" for c in x86_cores))
        stock_x86 = STOCK_X86
        if args.stock_source:
            stock_x86 = model_yardsticks(args.stock_source, x86_cores)
            out["stock_x86"] = stock_x86
            how = f"built now from {args.stock_source}"
        else:
            how = "recorded figures (--stock-source QUANTS_C rebuilds them)"
        a, v = stock_x86["avx2"], stock_x86["vnni"]
        print(f"stock yardstick (x86 ggml_vec_dot_pq2_0_q8_K, clang-19 -O3, each built for the core it is modeled on; {how}):")
        print("  AVX2 branch (-march=CORE without VNNI): " +
              ", ".join(f"{c} {a['instr'][c]:g} instr {a['cycles'][c]} cycles" for c in x86_cores if c in a["cycles"]))
        print("  VNNI branch (-march=CORE): " +
              ", ".join(f"{c} {v['instr'][c]:g} instr {v['cycles'][c]} cycles" for c in x86_cores if c in v["cycles"]))

        # issue rates: llvm-mca's model of a loop of independent MAC instructions, and the same loop timed here
        limits = {c: {k2: v for k, v in r.items() for k2 in (k, k + " mem")}
                  for c, r in RECORDED_ISSUE.items() if c in x86_cores and isinstance(r, dict)}
        here = host_core()
        measured = {}
        if not args.no_measure and here and here in x86_cores:
            measured = measure_issue(tc.cpu_flags())
            limits[here] = {op: m[0] for op, m in measured.items()}
        out["issue"] = {"modeled": {}, "measured": {here: measured} if measured else {}, "recorded": RECORDED_ISSUE}
        print(f"MAC issue rate per core cycle ({MICRO_CHAINS} independent chains): llvm-mca-19 model | measured")
        off = []
        for c in x86_cores:
            model = modeled_issue(c)
            out["issue"]["modeled"][c] = model
            cells = []
            for op, rate in model.items():
                if c == here and op in measured:
                    seen = f"{measured[op][0]:.2f} measured here"
                    if not 0.67 <= rate / measured[op][0] <= 1.5:
                        off.append(f"{op} {rate:.2f} modeled, {measured[op][0]:.2f} measured")
                elif c in RECORDED_ISSUE and op in RECORDED_ISSUE[c]:
                    seen = f"{RECORDED_ISSUE[c][op]:.2f} ({RECORDED_ISSUE['source']})"
                else:
                    seen = "not measured"
                cells.append(f"{op} {rate:.2f} | {seen}")
            print(f"  {c:15} " + "; ".join(cells))
        if measured:
            m0 = next(iter(measured.values()))
            print(f"  measured here ({here}): the shortest of 300 runs of 6M instructions; per core cycle from a chain of "
                  f"dependent adds timed the same way (1 cycle each: core {m0[2]:.2f} GHz), since the TSC ticks at a fixed "
                  f"{m0[3]:.2f} GHz, not at the core's clock; per TSC cycle: " +
                  ", ".join(f"{op} {m[1]:.2f}" for op, m in measured.items()))
        if off:
            print(f"  NOTE: llvm-mca-19's {here} model is off for " + "; ".join(off) + ": loops with those forms are "
                  "modeled too slow (stock's VNNI branch built for this core has 8 register-form ymm vpdpbusd per block, "
                  "so its modeled cycles, and the 'x stock' of the VNNI rows on this core, flatter ggml-t2p)")
        if "sapphirerapids" in x86_cores:
            print("  NOTE: llvm-mca-19 models Sapphire Rapids at 1 zmm vpdpbusd per cycle where the core issues about 2 "
                  f"({RECORDED_ISSUE['source']}): its zmm rows are modeled too slow")
        print(hdr + f" {'meas. lim':>9}")
        print("-" * (len(hdr) + 10))

        def stock(k, c):
            s = stock_x86[k[5]]
            return s["instr"][c], s["cycles"][c]

        out["x86"] = model_rows(asm, X86_KERNELS, "x86_64", x86_cores, "#", stock, lambda k, c: c in k[6], limits)
        print("x stock: against stock's branch of the same ISA level (AVX2 kernels: the AVX2 branch; VNNI kernels: the VNNI branch)")
        print("meas. lim: the loop's MAC instructions at the measured issue rate (above) over the loop's modeled cycles;")
        print("'-' where no rate was measured for that core")
    print("MAC issue: the loop's sdot/smmla/vpdpbusd/vpmaddubsw instructions x their reciprocal throughput on the core")
    print("(llvm-mca's RThroughput, as they are written in the loop), over the loop's modeled cycles (100% = the loop")
    print("runs at the MAC instructions' issue limit).")
    if not args.no_outside_loop:
        out["outside_loop"] = outside_loop()
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
