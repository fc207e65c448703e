#!/usr/bin/env python3
"""Cycle model of the ggml-t2p kernels: compiles the crate for aarch64, extracts the inner loop of
each kernel from the compiled assembly, runs llvm-mca-19 on it for several cores, and prints
instructions and cycles per 128 weights per output next to the stock PQ2_0 NEON yardstick.

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
TARGET = "aarch64-unknown-linux-gnu"
CORES = ["neoverse-v2", "neoverse-n1", "cortex-a76", "apple-m4"]
I8MM_CORES = {"neoverse-v2", "apple-m4"}  # of CORES, the ones with FEAT_I8MM

# Stock yardstick: llvm-mca-19 on the newest fork's ggml_vec_dot_pq2_0_q8_K NEON inner loop
# (clang-19 -O3, armv8.6-a+dotprod+i8mm), per 128 weights per output (issue 5). Stock has no
# PQ2_0 gemm, so a prompt batch costs the same per output.
STOCK = {"instr": 72, "cycles": {"neoverse-v2": 12.6, "neoverse-n1": 25.1, "cortex-a76": 42.2, "apple-m4": 19.2}}

# kernel symbol fragment -> (label, MAC instruction, MAC instructions per 128-weight block, outputs per block)
KERNELS = [
    ("gemv_t2p_4x16_q8_k_dotprod", "T2P gemv (sdot)", "sdot", 32, 4),
    ("gemm_t2p_4x16_q8_k_i8mm", "T2P gemm 4x16 (smmla)", "smmla", 256, 64),
    ("gemm_t2p_4x16_q8_k_i8mm", "T2P gemm 4x8 (smmla)", "smmla", 128, 32),
    ("gemm_t2p_4x16_q8_k_i8mm", "T2P gemm 4x4 (smmla, 4 cols)", "smmla", 64, 16),
    ("gemm_t2p_4x4_q8_k_dotprod", "T2P gemm 4x4 (sdot, no i8mm)", "sdot", 128, 16),
    ("gemv_ptq1_0x4_q8_k_dotprod", "PTQ1_0 native gemv (sdot)", "sdot", 32, 4),
    ("gemm_ptq1_0x4_4x16_q8_k_i8mm", "PTQ1_0 native gemm 4x16 (smmla)", "smmla", 256, 64),
    ("gemm_ptq1_0x4_4x16_q8_k_i8mm", "PTQ1_0 native gemm 4x8 (smmla)", "smmla", 128, 32),
    ("gemm_ptq1_0x4_4x4_q8_k_dotprod", "PTQ1_0 native gemm 4x4 (sdot)", "sdot", 128, 16),
]


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw).stdout


def ensure_tools(install):
    if shutil.which("llvm-mca-19"):
        return
    if not install:
        sys.exit("cycle-model: llvm-mca-19 not found (apt-get install llvm-19), or run without --no-install")
    subprocess.run(["bash", "-c", f". '{ROOT}/tools/toolchain.sh' && ensure_aarch64_toolchain 1 && ensure_llvm19 1"], check=True)


def build_asm():
    env = dict(os.environ, RUSTC="/usr/bin/rustc", CARGO_TARGET_DIR=os.path.join(ROOT, "target", "cycle-model"))
    out = os.path.join(env["CARGO_TARGET_DIR"], TARGET, "release", "deps")
    subprocess.run(["cargo", "rustc", "--release", "--lib", "--target", TARGET, "--crate-type", "rlib", "--", "--emit", "asm"],
                   cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    files = sorted(glob.glob(os.path.join(out, "ggml_t2p-*.s")), key=os.path.getmtime)
    if not files:
        sys.exit(f"cycle-model: no assembly file in {out}")
    return files[-1]


def function_body(asm_lines, fragment):
    """Lines of the first function whose mangled name contains `fragment`."""
    start = next((i for i, l in enumerate(asm_lines) if re.match(r"^_ZN\S*" + re.escape(fragment) + r"\S*:$", l)), None)
    if start is None:
        sys.exit(f"cycle-model: function {fragment} not found in the assembly")
    end = next(i for i in range(start + 1, len(asm_lines)) if asm_lines[i].startswith(".Lfunc_end"))
    return asm_lines[start:end]


INSN = re.compile(r"^\s+([a-z][a-z0-9.]*)\b")


def loops(body):
    """Every backward branch: (label index, branch index)."""
    labels = {}
    found = []
    for i, l in enumerate(body):
        m = re.match(r"^(\.LBB\w+):", l)
        if m:
            labels[m.group(1)] = i
        m = re.match(r"^\s+(b|b\.\w+|cbn?z|tbn?z)\s+.*?(\.LBB\w+)\s*$", l)
        if m and m.group(2) in labels:
            found.append((labels[m.group(2)], i))
    return found


def instructions(lines):
    return [l for l in lines if INSN.match(l) and not l.strip().startswith(".")]


def loop_text(body, lo, hi):
    """The loop as a self-contained snippet for llvm-mca: branches leaving it go to a local label."""
    out = []
    for l in body[lo + 1:hi + 1]:
        s = l.split("//")[0].rstrip()
        if not s or s.lstrip().startswith(".") or re.match(r"^\.?\w+:", s):
            continue
        s = re.sub(r"\.LBB\w+", ".Lout", s)
        out.append(s)
    return "\n".join(out) + "\n.Lout:\n"


def pick_loop(body, mac, per_block):
    """Innermost loops that contain MAC instructions; the one with a whole number of blocks per
    iteration, preferring exactly `per_block` MACs (one block per iteration)."""
    cands = []
    for lo, hi in loops(body):
        ins = instructions(body[lo:hi + 1])
        n_mac = sum(1 for l in ins if INSN.match(l).group(1) == mac)
        if n_mac and n_mac % per_block == 0:
            cands.append((n_mac != per_block, hi - lo, lo, hi, n_mac))
    if not cands:
        return None
    cands.sort()
    _, _, lo, hi, n_mac = cands[0]
    return lo, hi, n_mac


def mca(snippet, core, iterations=200):
    path = os.path.join(ROOT, "target", "cycle-model", "loop.s")
    with open(path, "w") as f:
        f.write(snippet)
    r = subprocess.run(["llvm-mca-19", "-mtriple=aarch64", f"-mcpu={core}", "-mattr=+dotprod,+i8mm",
                        f"-iterations={iterations}", path], text=True, capture_output=True)
    if r.returncode != 0 or "not a recognized processor" in r.stderr:
        sys.exit(f"cycle-model: llvm-mca-19 -mcpu={core} failed (is {core!r} an llvm-mca-19 CPU name?):\n{r.stderr.strip()[:500]}")
    txt = r.stdout
    total = int(re.search(r"Total Cycles:\s+(\d+)", txt).group(1))
    insns = int(re.search(r"Instructions:\s+(\d+)", txt).group(1))
    return insns / iterations, total / iterations


def mac_limit(core, mac):
    """Cycles per MAC instruction when nothing else runs: 16 independent accumulators."""
    op = "smmla" if mac == "smmla" else "sdot"
    body = "\n".join(f"{op} v{i}.4s, v{16 + i % 8}.16b, v{24 + i % 8}.16b" for i in range(16))
    ins, cyc = mca(body + "\n", core, 500)
    return cyc / 16


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cores", default=",".join(CORES), help="comma-separated llvm-mca -mcpu names (default: %(default)s)")
    ap.add_argument("--no-install", action="store_true", help="do not apt-get llvm-19 / the aarch64 toolchain when missing")
    ap.add_argument("--json", metavar="FILE", help="also write the table as JSON")
    ap.add_argument("--show-loop", metavar="KERNEL",
                    help="print the extracted loop of one kernel and exit: a part of its table label or symbol, "
                         "e.g. 'gemv', 'T2P gemm 4x8', 'ptq1_0x4_q8_k_dotprod' (the first match)")
    args = ap.parse_args()
    cores = args.cores.split(",")
    ensure_tools(not args.no_install)
    asm = open(build_asm()).read().splitlines()

    if args.show_loop:
        want = args.show_loop.lower()
        k = next((k for k in KERNELS if want in k[1].lower() or want in k[0]), None)
        if k is None:
            sys.exit(f"cycle-model: no kernel matches {args.show_loop!r}; kernels: " + "; ".join(k[1] for k in KERNELS))
        body = function_body(asm, k[0])
        picked = pick_loop(body, k[2], k[3])
        if picked is None:
            sys.exit(f"cycle-model: no loop with {k[3]} {k[2]} per block in {k[0]}")
        print(loop_text(body, picked[0], picked[1]))
        return

    limits = {(c, m): mac_limit(c, m) for c in cores for m in ("sdot", "smmla")}
    rows = []
    print(f"cycle model: llvm-mca-19, per 128 weights per output (gemv: per output row; gemm: per output element)")
    print(f"stock yardstick (ggml_vec_dot_pq2_0_q8_K NEON): {STOCK['instr']} instructions; cycles " +
          ", ".join(f"{c} {STOCK['cycles'][c]}" for c in cores if c in STOCK["cycles"]))
    hdr = f"{'kernel':34} {'core':12} {'instr':>6} {'x stock':>8} {'cycles':>7} {'x stock':>8} {'MAC issue':>9}"
    print(hdr)
    print("-" * len(hdr))
    for frag, label, mac, per_block, outputs in KERNELS:
        body = function_body(asm, frag)
        picked = pick_loop(body, mac, per_block)
        if picked is None:
            print(f"{label:34} (no loop with {per_block} {mac} per block found)")
            continue
        lo, hi, n_mac = picked
        blocks = n_mac // per_block
        snippet = loop_text(body, lo, hi)
        for core in cores:
            if mac == "smmla" and core not in I8MM_CORES:
                print(f"{label:34} {core:12} {'n/a: core has no i8mm':>40}")
                continue
            ins, cyc = mca(snippet, core)
            per_ins = ins / (blocks * outputs)
            per_cyc = cyc / (blocks * outputs)
            issue = limits[(core, mac)] * n_mac / cyc
            stock_cyc = STOCK["cycles"].get(core)
            r_cyc = per_cyc / stock_cyc if stock_cyc else float("nan")
            print(f"{label:34} {core:12} {per_ins:6.2f} {per_ins / STOCK['instr']:7.3f}x {per_cyc:7.2f} {r_cyc:7.3f}x {100 * issue:8.0f}%")
            rows.append(dict(kernel=label, symbol=frag, core=core, instr_per_128_per_output=per_ins, cycles_per_128_per_output=per_cyc,
                             instr_ratio_vs_stock=per_ins / STOCK["instr"], cycle_ratio_vs_stock=r_cyc, mac_issue_fraction=issue,
                             loop_instructions=ins, loop_cycles=cyc, macs_per_loop=n_mac, blocks_per_loop=blocks))
    print("MAC issue: the kernel's sdot/smmla count x the core's cycles per sdot/smmla when nothing else runs,")
    print("over the loop's modeled cycles (100% = the loop runs at the MAC instruction's issue limit).")
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(dict(stock=STOCK, rows=rows, mac_limits={f"{c}/{m}": v for (c, m), v in limits.items()}), f, indent=1)


if __name__ == "__main__":
    main()
