#!/usr/bin/env python3
"""Cycle model of the ggml-t2p kernels: compiles the crate for aarch64 (and for the x86-64 host),
extracts the inner loop of each kernel from the compiled assembly, runs llvm-mca-19 on it for
several cores, and prints instructions and cycles per 128 weights per output next to stock's PQ2_0
loop. Then (aarch64, under qemu) the instructions one call executes outside those loops.

Only cores that llvm-mca-19 schedules with their own model are reported: the tool checks every
-mcpu by the resource names llvm-mca prints (e.g. -mcpu=cortex-a76 is scheduled with the
Cortex-A57 model, -mcpu=apple-m4 with the 2013 Cyclone model; both are refused).

The model ignores memory bandwidth (decode is bandwidth-bound on real machines); it ranks
instruction efficiency. See README.md "Benchmarks and the cycle model".
"""

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys

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
# AVX-VNNI branches), clang-19 -O3, its inner loop (one 128-weight block per iteration) in
# llvm-mca-19. AVX2 branch: built with -march=haswell (65 instructions); VNNI branch: -march=alderlake
# (vpdpbusd VEX, 53 instructions) on alderlake, -march=sapphirerapids (EVEX ymm, 44 instructions) on
# sapphirerapids and znver4. Each of our kernels is compared with the branch of its own ISA level.
STOCK_X86 = {
    "avx2": {"instr": 65, "cycles": {"haswell": 22.15, "alderlake": 16.59, "sapphirerapids": 16.59, "znver4": 15.14}},
    "vnni": {"instr": {"alderlake": 53, "sapphirerapids": 44, "znver4": 44},
             "cycles": {"alderlake": 21.14, "sapphirerapids": 21.14, "znver4": 8.17}},
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
        sys.exit("cycle-model: llvm-mca-19 / the aarch64 toolchain not found (tools/toolchain.sh), or run without --no-install")
    subprocess.run(["bash", "-c", f". '{ROOT}/tools/toolchain.sh' && ensure_aarch64_toolchain 1 && ensure_llvm19 1"], check=True)


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
        if m and m.group(2) == mac:
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


def model_rows(asm, kernels, triple, cores, comment, stock_for, has_isa):
    """Prints and returns the table rows of `kernels` on `cores`."""
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
            print(f"{label:34} {core:15} {per_ins:6.2f} {r_ins:7.3f}x {per_cyc:7.2f} {r_cyc:7.3f}x {100 * issue:8.0f}%")
            rows.append(dict(kernel=label, symbol=frag, core=core, instr_per_128_per_output=per_ins, cycles_per_128_per_output=per_cyc,
                             instr_ratio_vs_stock=r_ins, cycle_ratio_vs_stock=r_cyc, mac_issue_fraction=issue,
                             loop_instructions=ins, loop_cycles=cyc, macs_per_loop=n_mac, blocks_per_loop=blocks))
    return rows


# ---- outside-loop instructions per call (aarch64, qemu) ----

def build_driver():
    env = dict(os.environ, RUSTC="/usr/bin/rustc", CARGO_TARGET_DIR=OUT,
               CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER="aarch64-linux-gnu-gcc",
               CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUSTFLAGS="-C target-feature=+crt-static")
    out = subprocess.run(["cargo", "test", "--release", "--target", ARM_TARGET, "--test", "outside_loop", "--no-run",
                          "--message-format=json"], cwd=ROOT, env=env, check=True, text=True, capture_output=True).stdout
    for line in out.splitlines():
        try:
            m = json.loads(line)
        except ValueError:
            continue
        if m.get("reason") == "compiler-artifact" and m.get("executable"):
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
    subprocess.run(["qemu-aarch64-static", "-cpu", "max", "-d", "in_asm,exec,nochain", "-D", log, binary,
                    "outside_loop_share", "--ignored", "--exact", "--test-threads=1"], env=env, check=True,
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
    ap.add_argument("--no-outside-loop", action="store_true", help="skip the outside-loop line (it builds a test driver and runs qemu)")
    ap.add_argument("--no-install", action="store_true", help="do not apt-get llvm-19 / the aarch64 toolchain when missing")
    ap.add_argument("--json", metavar="FILE", help="also write the tables as JSON")
    ap.add_argument("--show-loop", metavar="KERNEL",
                    help="print the extracted loop of one kernel and exit: a part of its table label or symbol, "
                         "e.g. 'gemv', 'T2P gemm 4x8', 'ptq1_0x4_4x1_q8_k_dotprod', 'X16 gemv (AVX2)' (the first match)")
    args = ap.parse_args()
    cores = [c for c in args.cores.split(",") if c]
    x86_cores = [c for c in args.x86_cores.split(",") if c]
    ensure_tools(not args.no_install)

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
    if x86_cores:
        for c in x86_cores:
            out["models"][c] = check_model("x86_64", c, X86_CORES.get(c))
        asm = build_asm(None)
        print()
        print("x86-64 (X16 layout; one loop iteration = one 16-row x 128-weight block per column), rows only on cores with the ISA")
        print("scheduling models: " + ", ".join(f"-mcpu={c}: {out['models'][c]}" for c in x86_cores))
        a, v = STOCK_X86["avx2"], STOCK_X86["vnni"]
        print(f"stock yardstick (x86 ggml_vec_dot_pq2_0_q8_K): AVX2 branch {a['instr']} instructions, cycles " +
              ", ".join(f"{c} {a['cycles'][c]}" for c in x86_cores if c in a["cycles"]) + "; VNNI branch " +
              ", ".join(f"{c} {v['instr'][c]} instr {v['cycles'][c]} cycles" for c in x86_cores if c in v["cycles"]))
        print(hdr)
        print("-" * len(hdr))

        def stock(k, c):
            s = STOCK_X86[k[5]]
            ins = s["instr"] if isinstance(s["instr"], int) else s["instr"][c]
            return ins, s["cycles"][c]

        out["x86"] = model_rows(asm, X86_KERNELS, "x86_64", x86_cores, "#", stock, lambda k, c: c in k[6])
        print("x stock: against stock's branch of the same ISA level (AVX2 kernels: the AVX2 branch; VNNI kernels: the VNNI branch)")
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
