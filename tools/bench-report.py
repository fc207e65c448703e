#!/usr/bin/env python3
"""Summarize a `cargo bench` run of ggml-t2p into one table.

Reads criterion's results (target/criterion/<group>/<function>/<parameter>/new/) and prints, per
benchmark, the median time and the throughput it implies:

  read_bw    plain read bandwidth (GB/s), per thread count: the ceiling of a DRAM-streamed gemv
  gemv*      weight GB/s and Gweights/s, and the share of read_bw at the same thread count
  gemm*      GMAC/s (weights x columns per second) and weight GB/s, and the share of its level's
             issue limit at the same thread count
  issue_limit  peak GMAC/s of each level's instruction: vpdpbusd zmm (avx512vnni), AVX-VNNI
             vpdpbusd ymm (avxvnni), vpmaddubsw ymm (avx2), AMX tdpbssd (amx)
  repack     source GB/s
  reference  Gweights/s

Every figure comes from the same criterion run (run `cargo bench` once, then this tool), so a
gemv's share of the read bandwidth, or a gemm's share of the issue limit, compares numbers measured
side by side on the same machine.

Usage:
  cargo bench                       # or: cargo bench -- gemv_dram read_bw
  python3 tools/bench-report.py [--criterion-dir target/criterion] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path


def load(root: Path) -> list[dict]:
    rows = []
    for est in sorted(root.glob("*/*/*/new/estimates.json")) + sorted(root.glob("*/*/new/estimates.json")):
        bench = est.parent / "benchmark.json"
        if not bench.is_file():
            continue
        b = json.loads(bench.read_text())
        e = json.loads(est.read_text())
        median_ns = e["median"]["point_estimate"]
        tp = b.get("throughput") or {}
        bytes_, elems = None, None
        if "Bytes" in tp:
            bytes_ = tp["Bytes"]
        if "Elements" in tp:
            elems = tp["Elements"]
        if "ElementsAndBytes" in tp:
            elems = tp["ElementsAndBytes"]["elements"]
            bytes_ = tp["ElementsAndBytes"]["bytes"]
        rows.append({
            "group": b["group_id"],
            "function": b.get("function_id") or "",
            "param": b.get("value_str") or "",
            "ns": median_ns,
            "bytes": bytes_,
            "elems": elems,
        })
    return rows


def threads_of(param: str) -> str:
    m = re.search(r"(\d+)t$", param)
    return m.group(1) if m else "?"


def level_of(param: str) -> str:
    """The kernel level of a parameter such as `avx512vnni_2t`."""
    m = re.match(r"([a-z0-9]+)_\d+t$", param)
    return m.group(1) if m else "?"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--criterion-dir", default=None, metavar="DIR",
                    help="criterion's output directory (default: target/criterion beside this tool's repo)")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = ap.parse_args()
    root = Path(args.criterion_dir) if args.criterion_dir else Path(__file__).resolve().parent.parent / "target/criterion"
    if not root.is_dir():
        print(f"bench-report: {root} does not exist: run `cargo bench` first", file=sys.stderr)
        return 1
    rows = load(root)
    if not rows:
        print(f"bench-report: no criterion results under {root}", file=sys.stderr)
        return 1

    bw = {}
    for r in rows:
        if r["group"] == "read_bw" and r["bytes"]:
            bw[threads_of(r["param"])] = r["bytes"] / r["ns"]  # bytes per ns = GB/s

    peak = {}   # (level, threads) -> GMAC/s
    for r in rows:
        if r["group"] == "issue_limit" and r["elems"]:
            peak[(level_of(r["param"]), threads_of(r["param"]))] = r["elems"] / r["ns"]

    header = ["benchmark", "threads", "median", "weight GB/s", "Gweights/s or GMAC/s", "share of limit"]
    out = []
    order = ["read_bw", "issue_limit", "gemv_dram", "gemv", "gemm2", "gemm3", "gemm4", "gemm64", "reference", "repack",
             "ptq1_0"]
    rows.sort(key=lambda r: (order.index(r["group"]) if r["group"] in order else 99, r["function"], r["param"]))
    for r in rows:
        name = f'{r["group"]}/{r["function"]}/{r["param"]}'
        t = threads_of(r["param"])
        ms = r["ns"] / 1e6
        gbs = r["bytes"] / r["ns"] if r["bytes"] else None
        rate = r["elems"] / r["ns"] if r["elems"] else None
        share = ""
        if r["group"].startswith("gemv") and gbs is not None and t in bw:
            share = f"{100.0 * gbs / bw[t]:.0f}% of read bw"
        elif r["group"].startswith("gemm") and rate is not None and (level_of(r["param"]), t) in peak:
            lv = level_of(r["param"])
            share = f"{100.0 * rate / peak[(lv, t)]:.0f}% of {lv} issue"
        out.append([name, t, f"{ms:.3f} ms", f"{gbs:.2f}" if gbs else "", f"{rate:.2f}" if rate else "", share])

    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for o in out:
            print("| " + " | ".join(o) + " |")
    else:
        widths = [max(len(str(x[i])) for x in out + [header]) for i in range(len(header))]
        print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
        for o in out:
            print("  ".join(str(x).ljust(w) for x, w in zip(o, widths)))
    if not bw:
        print("(no read_bw results in this run: shares of the read bandwidth need `cargo bench -- read_bw` too)")
    if not peak:
        print("(no issue_limit results in this run: gemm shares need `cargo bench -- issue_limit` too)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
