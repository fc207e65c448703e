#!/usr/bin/env python3
"""Peer benchmark: ggml-t2p against the engines a user would pick instead, side by side.

From a llama.cpp checkout patched and built by tools/t2p.py (PrismML's fork, q2_0-prs) and, when
given, an ik_llama.cpp checkout, converts one model to each format with each engine's own
llama-quantize (through F16) and runs llama-bench in interleaved rounds over these configurations:

  ours            PQ2_0, ggml-t2p as it chooses (GGML_T2P_KERNEL unset)
  ours-LEVEL      PQ2_0, GGML_T2P_KERNEL=LEVEL, for each level this CPU runs (amx, avx512vnni, avxvnni,
                  avx2; on ARM i8mm, dotprod; where the OS refuses AMX's tile-data permission, the
                  library runs avx512vnni for ours-amx and says so in the run's log)
  ours-nohybrid   PQ2_0, GGML_T2P_HYBRID=0: our matrices, ggml's own GATED_DELTA_NET, SSM_CONV, CONCAT and F32
                  GET_ROWS (the Gated-DeltaNet hybrids' own ops, qwen35; other models run neither, only F32
                  CONCATs and GET_ROWS if any)
  ours-ptq1_0     PTQ1_0 (1.75 bpw), ggml-t2p as it chooses (--ptq1 FILE, or the fork's llama-quantize
                  when it knows PTQ1_0: a checkout taught it by tools/ptq1-tree.py)
  stock-pq2_0     PQ2_0, the fork's own code (GGML_T2P=0)
  stock-ptq1_0    the PTQ1_0 file, the fork's own code (GGML_T2P=0)
  stock-tq2_0     TQ2_0 of the fork's llama-quantize (GGML_T2P=0)
  stock-tq1_0     TQ1_0 of the fork's llama-quantize (GGML_T2P=0)
  stock-q4_0      Q4_0 of the fork's llama-quantize (GGML_T2P=0)
  ik-iq2_bn       IQ2_BN of ik_llama.cpp's llama-quantize
  ik-iq2_bn-rtr   the same file with -rtr 1 (ik_llama repacks to IQ2_BN_R4 at load)
  ik-iq1_bn       IQ1_BN (1.625 bpw) of ik_llama.cpp's llama-quantize

(ik_llama.cpp has no TQ2_0 type.) Each llama-quantize applies its own rules to token_embd and
output; the table names the bytes a decoded token reads in each file, so that differences in those
types show. A configuration that cannot run the model (a type or architecture an engine lacks)
fails with the engine's own message in its log; --keep-going reports it and runs the others.
Bytes per token are the file's, except for ours on a PTQ1_0 file where the run's load line says
the PTQ1_0 matrices went to X16 or T2P (2.125 bpw: GGML_T2P_PTQ1=t2p, or a CPU without AVX-512
VBMI on x86, or ARM's default): then it reads 34/28 of those tensors' bytes, and the table counts
what it reads (L64 and PTQ1_0x4 keep the file's bytes).

Each round runs every configuration once (llama-bench -r 1, all tests and thread counts in one
process, -mmp 0, in the same order), so slow drifts of the machine hit all alike. The table gives the
median tokens/s over the rounds, the spread (max-min as a share of the median), our ratio to each
peer (ours = the best of our configurations in that cell, named), and for decode the bytes read per
token divided by the time per token, as GB/s and, with --read-bw, as a share of the machine's read
bandwidth at that thread count. The 1-minute load average is recorded before every run (other work
on the machine shows there).

Converted models go to --work (default: the cache folder's peers/), named after the source, and are
reused while newer than their source. Nothing is downloaded: the checkouts are the user's, and with
--build the missing binaries are built there with cmake (the fork: llama-quantize into the folder
t2p.py built; ik_llama.cpp: a CPU-only native Release build in IK/build-peers).

--isa avx2 compares on the AVX2 class (Haswell .. Zen 3) on a machine that has more: both engines are
built without anything beyond AVX2, FMA, F16C and BMI2 (GGML_NATIVE=OFF; the fork with the ggml-t2p
patch in LLAMA/build-peers-avx2, ik_llama.cpp in IK/build-peers-avx2; --build builds them), the tool
refuses build folders whose CMakeCache says otherwise, and `ours` runs GGML_T2P_KERNEL=avx2 (the
library's own detection would pick a wider level; so does ours-nohybrid).

Exit status: 0 when every run worked, 1 when a conversion or run failed, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import struct
import subprocess
import sys
import time

sys.dont_write_bytecode = True    # no __pycache__ beside the tools
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import t2p_common as tc  # noqa: E402
import t2p_gguf  # noqa: E402

TOOL = "peers"

# general.file_type values that need no requantization to reach F16
FTYPE_FLOAT = {0: "F32", 1: "F16", 32: "BF16"}
FTYPE_PQ2_0 = 141

# the levels --configs accepts as ours-LEVEL by name (amx only through the ours-LEVEL expansion)
NAMED_LEVELS = [lv for lv in tc.LEVEL_FLAGS if lv != "amx"] + ["ref"]

# --isa: cmake flags of a build that uses no instruction beyond the class (ggml's own options; the
# fork and ik_llama.cpp both read them), and the ggml-t2p level `ours` runs there
ISA_FLAGS = {"avx2": ["-DGGML_NATIVE=OFF", "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON",
                      "-DGGML_F16C=ON", "-DGGML_BMI2=ON", "-DGGML_AVX512=OFF", "-DGGML_AVX_VNNI=OFF",
                      "-DGGML_AVXVNNI=OFF", "-DGGML_AMX_INT8=OFF"]}
ISA_LEVEL = {"avx2": "avx2"}
# CMakeCache entries that must not be true in an --isa build (ggml's wider ISAs, -march=native, and the
# builds that pick a CPU variant at run time), and those that must be
ISA_FORBIDDEN = {"avx2": ["GGML_NATIVE", "GGML_AVX512", "GGML_AVX512_VNNI", "GGML_AVX512_VBMI", "GGML_AVX512_BF16",
                          "GGML_AVX_VNNI", "GGML_AVXVNNI", "GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16",
                          "GGML_BACKEND_DL", "GGML_CPU_ALL_VARIANTS"]}
ISA_REQUIRED = {"avx2": ["GGML_AVX2", "GGML_FMA", "GGML_F16C"]}
# compiler flags in CMAKE_C_FLAGS / CMAKE_CXX_FLAGS that would widen the build
ISA_FLAG_WORDS = {"avx2": ("-march=native", "-mtune=native", "-mavx512", "-mamx", "-mavxvnni", "-mavx10",
                           "-mavx-vnni")}
# CMake's true constants (if(<constant>)); anything else that is not a false constant is a path or
# a variable name and is treated as not set
CMAKE_TRUE = ("1", "ON", "YES", "TRUE", "Y")

ALL_CONFIGS = ["ours", "ours-LEVEL", "ours-nohybrid", "ours-ptq1_0", "stock-pq2_0", "stock-ptq1_0", "stock-tq2_0",
               "stock-tq1_0", "stock-q4_0", "ik-iq2_bn", "ik-iq2_bn-rtr", "ik-iq1_bn"]
# the configurations the default --configs runs (the PTQ1_0 ones need --ptq1 or a fork that knows PTQ1_0)
DEFAULT_CONFIGS = [c for c in ALL_CONFIGS if "ptq1_0" not in c]
# each configuration's file format; ours-LEVEL and ours-nohybrid run the PQ2_0 file
FORMAT = {"ours-ptq1_0": "ptq1_0"}
# formats that ik_llama.cpp's llama-quantize makes (the rest: the fork's), and the ik file's type name
IK_FORMATS = {"iq2_bn": "IQ2_BN", "iq1_bn": "IQ1_BN"}
GGML_TYPE_PTQ1_0 = 143
# ggml-t2p holds a PTQ1_0 matrix as X16/T2P (unless its load line says L64 or PTQ1_0x4: ptq1_kept):
# 34 bytes per 128 weights instead of 28
PTQ1_0_RESIDENT = 34 / 28


# ---------------------------------------------------------------------------
# GGUF: the tensor table, for the bytes a decoded token reads
# ---------------------------------------------------------------------------

def gguf_tensors(path):
    """Returns (general.file_type or None, {name: (dims, bytes, ggml type)}); bytes from the offsets
    (the padding between tensors, under the alignment, is counted with the tensor before it).
    ValueError (naming PATH) when it is not a GGUF file of version 2 or later, or its header is cut
    short."""
    try:
        h = t2p_gguf.Header(path, versions=None, strict=False)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
    return h.scalar("general.file_type", (4, 5)), {t.name: (t.dims, t.span, t.ttype) for t in h.tensors}


def ptq1_kept(log_text):
    """Whether a run's plugin load line says PTQ1_0 matrices keep their 1.75 bits (L64 on x86, PTQ1_0x4
    on ARM): `PTQ1_0 -> L64` / `PTQ1_0 -> PTQ1_0x4` in its `enabled (...)` line."""
    return any(f"PTQ1_0 -> {lay}" in log_text for lay in ("L64", "PTQ1_0x4"))


def bytes_per_token(tensors, ptq1_resident=False):
    """Bytes of weights one decoded token reads: every tensor once, but of token_embd one row (unless
    the model has no output.weight, when token_embd is the output matrix too). With PTQ1_RESIDENT,
    PTQ1_0 tensors count as ggml-t2p holds them (X16/T2P: 34/28 of their bytes)."""
    total = 0
    for name, (dims, nbytes, ttype) in tensors.items():
        if ptq1_resident and ttype == GGML_TYPE_PTQ1_0:
            nbytes = round(nbytes * PTQ1_0_RESIDENT)
        if name == "token_embd.weight" and "output.weight" in tensors and len(dims) == 2:
            total += nbytes // dims[1]
        else:
            total += nbytes
    return total


# ---------------------------------------------------------------------------
# binaries and builds
# ---------------------------------------------------------------------------

def run_build(cmd, log):
    tc.say(TOOL, f"build: {' '.join(cmd)}  (log: {log})")
    with open(log, "ab") as f:
        rc = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    if rc != 0:
        print(tc.tail(log, 25), file=sys.stderr)
        tc.say(TOOL, f"build failed with status {rc}: {' '.join(cmd)}")
    return rc == 0


def built_binaries(args, build, log, configure):
    """{name: path} of llama-bench and llama-quantize in the build folder BUILD, building the missing
    ones with --build (configuring first with the command CONFIGURE, or, where that is a string,
    refusing with it as the reason when the folder is not configured); None when any is missing."""
    got = {n: tc.find_built_binary(build, n) for n in ("llama-bench", "llama-quantize")}
    missing = [n for n, p in got.items() if not p]
    if missing and args.build and args.dry_run:
        if not os.path.isfile(os.path.join(build, "CMakeCache.txt")) and not isinstance(configure, str):
            print(f"would run: {' '.join(configure)}")
        print(f"would run: cmake --build {build} --config Release -j {args.jobs} --target {' '.join(missing)}")
        return {n: p or os.path.join(build, "bin", n) for n, p in got.items()}
    if missing and args.build:
        if not os.path.isfile(os.path.join(build, "CMakeCache.txt")):
            if isinstance(configure, str):
                tc.say(TOOL, configure)
                return None
            if not run_build(configure, log):
                return None
        if not run_build(["cmake", "--build", build, "--config", "Release", "-j", str(args.jobs),
                          "--target"] + missing, log):
            return None
        got = {n: tc.find_built_binary(build, n) for n in got}
        missing = [n for n, p in got.items() if not p]
    if missing:
        tc.say(TOOL, f"not built in {build}: {', '.join(missing)} (--build builds them)")
        return None
    return got


def isa_violations(build, isa, fork=False):
    """What in BUILD's CMakeCache.txt says it may use instructions beyond the class ISA, or not its
    baseline (e.g. ['GGML_NATIVE=ON', 'GGML_FMA not ON']); for the fork build (FORK) also a missing
    ggml-t2p (GGML_CPU_T2P). ['no CMakeCache.txt'] when there is no cache to read."""
    cache = os.path.join(build, "CMakeCache.txt")
    if not os.path.isfile(cache):
        return ["no CMakeCache.txt"]
    text = tc.read_text(cache)
    values = {}
    for line in text.splitlines():
        if line.startswith(("//", "#")):
            continue
        name, _, rest = line.partition(":")
        values[name.strip()] = rest.partition("=")[2].strip()
    bad = []
    for name in ISA_FORBIDDEN[isa]:
        if values.get(name, "").upper() in CMAKE_TRUE:
            bad.append(f"{name}={values[name]}")
    for name in ISA_REQUIRED[isa] + (["GGML_CPU_T2P"] if fork else []):
        if values.get(name, "").upper() not in CMAKE_TRUE:
            bad.append(f"{name} not ON")
    for name in ("CMAKE_C_FLAGS", "CMAKE_CXX_FLAGS"):
        words = [w for w in values.get(name, "").split() if w.startswith(ISA_FLAG_WORDS[isa])]
        if words:
            bad.append(f"{name} has {' '.join(words)}")
    return bad


def isa_checked(build, isa, what, fork=False, before_build=False):
    """True when BUILD may serve --isa ISA (always without --isa); says why not otherwise. Before a
    build (BEFORE_BUILD), a folder without a CMakeCache.txt passes when it has no binaries either (--build
    configures it; otherwise the missing binaries are reported)."""
    if not isa:
        return True
    bad = isa_violations(build, isa, fork)
    if bad == ["no CMakeCache.txt"] and before_build and not any(
            tc.find_built_binary(build, n) for n in ("llama-bench", "llama-quantize")):
        return True
    if bad:
        tc.say(TOOL, f"--isa {isa}: {what} build {build}: {', '.join(bad)}: it may use instructions beyond "
                     f"{isa} (or lack its baseline); name an {isa}-only CMake build folder, or a new one with --build")
        return False
    return True


def fork_binaries(args):
    if args.isa:
        build = args.llama_build or os.path.join(args.llama, f"build-peers-{args.isa}")
        configure = (["cmake", "-S", args.llama, "-B", build] + tc.fork_cmake_options()
                     + ["-DLLAMA_BUILD_TESTS=OFF"] + ISA_FLAGS[args.isa])
        if not isa_checked(build, args.isa, "the fork's", fork=True, before_build=True):
            return None
    else:
        build = args.llama_build or os.path.join(args.llama, "build-t2p")
        configure = f"{build} is not configured: run tools/t2p.py --llama {args.llama} first"
    got = built_binaries(args, build, os.path.join(os.path.abspath(args.out_dir), "fork-build.log")
                         if args.isa else os.path.join(build, "peers-build.log"), configure)
    if got and args.isa and not args.dry_run and not isa_checked(build, args.isa, "the fork's", fork=True):
        return None
    return got


def ik_binaries(args):
    build = args.ik_build or os.path.join(args.ik, f"build-peers-{args.isa}" if args.isa else "build-peers")
    if not isa_checked(build, args.isa, "ik_llama.cpp's", before_build=True):
        return None
    got = built_binaries(args, build, os.path.join(os.path.abspath(args.out_dir), "ik-build.log"),
                         ["cmake", "-S", args.ik, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                          "-DGGML_CUDA=OFF", "-DLLAMA_CURL=OFF",
                          "-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_BUILD_TESTS=OFF",
                          # flash attention for every KV-cache type: many large files, and llama-bench's
                          # default F16 cache does not need them
                          "-DGGML_IQK_FA_ALL_QUANTS=OFF"]
                         + (ISA_FLAGS[args.isa] if args.isa else ["-DGGML_NATIVE=ON"]))
    if got and not args.dry_run and not isa_checked(build, args.isa, "ik_llama.cpp's"):
        return None
    return got


def cpu_levels():
    """The ggml-t2p levels this CPU runs, best first (what GGML_T2P_KERNEL accepts)."""
    return tc.host_levels()


# ---------------------------------------------------------------------------
# conversions
# ---------------------------------------------------------------------------

def config_format(c):
    """The file format configuration C runs: its FORMAT entry, the part after stock-/ik-, or PQ2_0."""
    if c in FORMAT:
        return FORMAT[c]
    return c.split("-")[1] if c.startswith(("stock-", "ik-")) else "pq2_0"


def last_error(log_path):
    """The last line of a failed run's log that reads like an error (the engine's own message), or
    its last non-empty line. (A run killed by a signal is named by t2p_common.diagnose instead.)"""
    lines = [x.strip() for x in tc.read_text(log_path).splitlines() if x.strip()]
    for x in reversed(lines):
        if re.search(r"error|failed|not supported|unsupported|invalid|unknown (model|type|tensor|arch)", x, re.I):
            return x
    return lines[-1] if lines else "(empty log)"


def up_to_date(dst, src):
    """DST exists and is not older than SRC (a conversion made from it is reused)."""
    return os.path.isfile(dst) and os.path.isfile(src) and os.path.getmtime(dst) >= os.path.getmtime(src)


def quantize(tool_bin, src, dst, qtype, allow_requant, log_dir, label, extra=()):
    """llama-quantize [EXTRA] SRC -> DST (type QTYPE), written to a temporary name and renamed; reused
    while DST is newer than SRC. Returns True on success."""
    if up_to_date(dst, src):
        tc.say(TOOL, f"{label}: reusing {dst}")
        return True
    tmp = f"{dst}.tmp-{os.getpid()}"
    cmd = [tool_bin] + (["--allow-requantize"] if allow_requant else []) + list(extra) + [src, tmp, qtype]
    log = os.path.join(log_dir, f"quantize-{label}.log")
    tc.say(TOOL, f"{label}: {' '.join(cmd)}  (log: {log})")
    t0 = time.monotonic()
    secs = tc.run_checked(TOOL, f"quantize {label}", cmd, {"GGML_T2P": "0"}, log)
    if secs is None:
        if os.path.exists(tmp):
            os.unlink(tmp)
        return False
    os.replace(tmp, dst)
    tc.say(TOOL, f"{label}: {dst} ({os.path.getsize(dst) / 2**20:.1f} MiB) in {time.monotonic() - t0:.0f} s")
    return True


# ---------------------------------------------------------------------------
# runs
# ---------------------------------------------------------------------------

def load_bench_json(path):
    """llama-bench -o json -> {(test, threads): tokens/s}."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    # ik_llama's llama-bench may print more than the JSON array to stdout: take the array
    i, j = text.find("["), text.rfind("]")
    data = json.loads(text[i:j + 1])
    res = {}
    for t in data:
        test = f"pp{t['n_prompt']}" if t["n_gen"] == 0 else f"tg{t['n_gen']}"
        res[(test, int(t["n_threads"]))] = float(t["avg_ts"])
    return res


def parse_read_bw(ap, text):
    bw = {}
    for w in (text or "").split(","):
        if not w.strip():
            continue
        t, eq, v = w.partition("=")
        try:
            bw[int(t)] = float(v)
            if not eq or bw[int(t)] <= 0:
                raise ValueError
        except ValueError:
            ap.error(f"--read-bw: '{w}' is not THREADS=GB/s")
    return bw


def parser():
    ap = argparse.ArgumentParser(
        prog="tools/peers.py", formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="%(prog)s --llama DIR [--ik DIR] -m MODEL.gguf [options] [-- extra llama-bench args]",
        description=__doc__.split("\n\n", 1)[1],
        epilog="examples:\n"
               "  # ours (each level) against stock PQ2_0 only, on a PQ2_0 model: no conversion\n"
               "  tools/peers.py --llama ~/llama.cpp -m synthetic-8b-pq2_0.gguf --configs ours,ours-LEVEL,stock-pq2_0\n"
               "  # every peer, building what is missing, 3 rounds, the read bandwidth of cargo bench read_bw\n"
               "  tools/peers.py --llama ~/llama.cpp --ik ~/ik_llama.cpp --build -m model-f16.gguf --rounds 3 \\\n"
               "      --read-bw 1=8.2,2=13.6 --json peers.json")
    ap.add_argument("--llama", metavar="DIR", required=True,
                    help="the fork checkout, patched and built by tools/t2p.py")
    ap.add_argument("--llama-build", metavar="DIR", help="its build folder (default: LLAMA/build-t2p; with --isa ISA: LLAMA/build-peers-ISA)")
    ap.add_argument("--ik", metavar="DIR", help="an ik_llama.cpp checkout (for the ik-* configurations)")
    ap.add_argument("--ik-build", metavar="DIR", help="its build folder (default: IK/build-peers; with --isa ISA: IK/build-peers-ISA)")
    ap.add_argument("--build", action="store_true",
                    help="build missing binaries with cmake (llama-quantize in the fork's folder; ik_llama.cpp "
                         "CPU-only, native, Release; with --isa both engines without anything beyond it); "
                         "not with --dry-run")
    ap.add_argument("--isa", choices=sorted(ISA_FLAGS),
                    help="compare on a narrower x86 class than this CPU: both engines built without anything "
                         "beyond it (folders build-peers-ISA), ours at that level (see above)")
    ap.add_argument("--jobs", "-j", type=int, default=tc.cpu_count(), metavar="N", help="build jobs (default: all cores)")
    ap.add_argument("-m", "--model", metavar="GGUF", required=True,
                    help="the source model: F16/BF16/F32, or any type the fork's llama-quantize reads "
                         "(a PQ2_0 file is used as is for the PQ2_0 configurations and dequantized to F16 "
                         "for the others)")
    ap.add_argument("--ptq1", metavar="GGUF",
                    help="the same model as PTQ1_0 (e.g. make-test-model.py --type ptq1_0), used as is for "
                         "ours-ptq1_0 and stock-ptq1_0 (needs a fork that loads PTQ1_0: tools/ptq1-tree.py); "
                         "without it the fork's llama-quantize makes one from F16")
    ap.add_argument("--embed-same", action="store_true",
                    help="convert token_embd and output to each file's own type too (llama-quantize "
                         "--token-embedding-type/--output-tensor-type; files named ...-emb.gguf), as in "
                         "PrismML's files where every matrix is ternary; without it each llama-quantize "
                         "applies its own rules (e.g. Q6_K for them)")
    ap.add_argument("--keep-going", action="store_true",
                    help="a configuration that fails (to convert or to run) is reported and left out; the "
                         "others go on (exit status 1 at the end)")
    ap.add_argument("--work", metavar="DIR", help="converted models (default: <cache>/peers)")
    ap.add_argument("--configs", default=",".join(DEFAULT_CONFIGS), metavar="LIST",
                    help="comma-separated configurations (default: " + ",".join(DEFAULT_CONFIGS) + "; ik-* need "
                         "--ik): " + ", ".join(ALL_CONFIGS) + "; ours-LEVEL expands to each level this CPU runs")
    ap.add_argument("--levels", metavar="LIST", help="ggml-t2p levels for ours-LEVEL (default: those this CPU runs: "
                    + (",".join(cpu_levels()) or "none found") + "; with --isa ISA: that level only)")
    ap.add_argument("-p", default="512,64", metavar="LIST", help="prompt sizes (default 512,64)")
    ap.add_argument("--p-for", action="append", default=[], metavar="CONFIG=LIST",
                    help="other prompt sizes for one configuration, e.g. stock-pq2_0=64 where a slow path would "
                         "take minutes per pp512 (repeatable; 0 = no prompt test)")
    ap.add_argument("-n", type=int, default=128, metavar="N", help="generated tokens (default 128)")
    ap.add_argument("--n-for", action="append", default=[], metavar="CONFIG=N",
                    help="other generated tokens for one configuration, e.g. stock-ptq1_0=16 where a slow "
                         "path would take minutes per tg128; its tokens/s are tabled in the -n rows and the "
                         "table says so (repeatable)")
    ap.add_argument("-t", default="1,all", metavar="LIST", help="thread counts (default 1,all)")
    ap.add_argument("--rounds", type=int, default=3, metavar="N", help="interleaved rounds (default 3)")
    ap.add_argument("--read-bw", metavar="T=GBPS,...",
                    help="the machine's read bandwidth per thread count (e.g. 1=8.2,2=13.6 from cargo bench "
                         "read_bw), for decode's share of it")
    ap.add_argument("--out", dest="out_dir", metavar="DIR", default=None,
                    help="keep logs and JSON of every run there (default: WORK/runs-<time>)")
    ap.add_argument("--json", metavar="FILE", help="write every sample, median and setting as JSON")
    ap.add_argument("--dry-run", action="store_true", help="print the conversions and runs, run nothing")
    return ap


def parse(argv):
    return tc.parse_with_extra(parser(), argv)


def run(argv):
    ap, args = parse(argv)
    tc.file_arg(ap, "-m", args.model)
    if args.ptq1:
        tc.file_arg(ap, "--ptq1", args.ptq1)
    if not os.path.isdir(args.llama):
        ap.error(f"--llama {args.llama}: no such folder")
    if args.ik and not os.path.isdir(args.ik):
        ap.error(f"--ik {args.ik}: no such folder")
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    if args.n < 0:
        ap.error("-n must be 0 or more")
    pps = []
    for w in args.p.split(","):
        if not w.strip().isdigit():
            ap.error(f"-p: '{w}' is not a token count")
        pps.append(int(w))
    threads = tc.thread_counts_arg(ap, args.t)
    p_for = {}
    for w in args.p_for:
        c, eq, lst = w.partition("=")
        if not eq or not all(x.strip().isdigit() for x in lst.split(",")):
            ap.error(f"--p-for: '{w}' is not CONFIG=N[,N...]")
        p_for[c] = lst
    n_for = {}
    for w in args.n_for:
        c, eq, n = w.partition("=")
        if not eq or not n.strip().isdigit() or int(n) < 1:
            ap.error(f"--n-for: '{w}' is not CONFIG=N (N at least 1)")
        n_for[c] = int(n)
    if n_for and args.n == 0:
        ap.error("--n-for: -n 0 runs no decode test")
    read_bw = parse_read_bw(ap, args.read_bw)
    if args.isa:
        if tc.cpu_arch(platform.machine().lower()) != "x86_64":
            ap.error(f"--isa {args.isa}: an x86-64 class; this machine is {platform.machine()}")
        if ISA_LEVEL[args.isa] not in cpu_levels():
            ap.error(f"--isa {args.isa}: this CPU does not run the {ISA_LEVEL[args.isa]} level (or its flags "
                     "could not be read: the tool reads Linux's /proc/cpuinfo)")
        if args.levels is not None and any(x != ISA_LEVEL[args.isa] for x in args.levels.split(",") if x):
            ap.error(f"--levels: with --isa {args.isa} ours runs {ISA_LEVEL[args.isa]} only")
    levels = [ISA_LEVEL[args.isa]] if args.isa else (
        cpu_levels() if args.levels is None else [x for x in args.levels.split(",") if x])
    configs = []
    for c in [x.strip() for x in args.configs.split(",") if x.strip()]:
        if c == "ours-LEVEL":
            configs += [f"ours-{lv}" for lv in levels]
        elif c in ALL_CONFIGS or (c.startswith("ours-") and c[5:] in NAMED_LEVELS):
            configs.append(c)
        else:
            ap.error(f"--configs: unknown configuration '{c}' (known: {', '.join(ALL_CONFIGS)}, ours-<level>)")
    if args.isa:
        other = [c for c in configs if c.startswith("ours-") and c not in (f"ours-{ISA_LEVEL[args.isa]}",
                                                                          "ours-nohybrid", "ours-ptq1_0")]
        if other:
            ap.error(f"--configs: with --isa {args.isa} ours runs {ISA_LEVEL[args.isa]} only, not "
                     f"{', '.join(other)}")
    for opt, given in (("--p-for", p_for), ("--n-for", n_for)):
        for c in given:
            if c not in configs:
                ap.error(f"{opt}: '{c}' is not among the configurations run ({', '.join(configs)})")
    if any(c.startswith("ik-") for c in configs) and not args.ik:
        ap.error("the ik-* configurations need --ik DIR (or leave them out of --configs)")
    if args.json:
        tc.out_file_arg(ap, "--json", args.json)
    work = os.path.abspath(args.work or os.path.join(tc.cache_dir(), "peers"))
    if not args.dry_run:
        tc.out_arg(ap, work, "--work")
    args.out_dir = args.out_dir or os.path.join(work, time.strftime("runs-%Y%m%d-%H%M%S"))
    if not args.dry_run:                   # a dry run writes nothing
        tc.out_arg(ap, args.out_dir)
    model = os.path.abspath(args.model)
    try:
        ftype, _ = gguf_tensors(model)
    except (ValueError, struct.error, OSError) as e:
        ap.error(f"-m {args.model}: cannot read its GGUF header: {e}")
    if args.ptq1:
        try:
            _, pt = gguf_tensors(args.ptq1)
        except (ValueError, struct.error, OSError) as e:
            ap.error(f"--ptq1 {args.ptq1}: cannot read its GGUF header: {e}")
        if not any(v[2] == GGML_TYPE_PTQ1_0 for v in pt.values()):
            ap.error(f"--ptq1 {args.ptq1}: no tensor of type PTQ1_0 ({GGML_TYPE_PTQ1_0}) in it")

    fork = fork_binaries(args)
    if not fork:
        return 1, None
    ik = ik_binaries(args) if any(c.startswith("ik-") for c in configs) else None
    if any(c.startswith("ik-") for c in configs) and not ik:
        return 1, None

    # --- conversions
    stem = re.sub(r"\.gguf$", "", os.path.basename(model))
    files, failed = {}, {}
    need = {config_format(c) for c in configs}
    f16 = model
    if ftype == FTYPE_PQ2_0 and "pq2_0" in need:
        files["pq2_0"] = model
        tc.say(TOOL, "the source is PQ2_0: used as is for the PQ2_0 configurations")
    if args.ptq1 and "ptq1_0" in need:
        files["ptq1_0"] = os.path.abspath(args.ptq1)
        tc.say(TOOL, f"--ptq1: {args.ptq1} used as is for the PTQ1_0 configurations")
    if args.embed_same and files:
        tc.say(TOOL, "--embed-same applies to the conversions only: " + ", ".join(sorted(files)) +
               " run as given, with the token_embd/output types those files have")
    if need - set(files):
        if ftype not in FTYPE_FLOAT:
            f16 = os.path.join(work, f"{stem}-f16.gguf")
            if args.dry_run:
                print(f"would reuse: {f16}" if up_to_date(f16, model) else
                      f"would run: {fork['llama-quantize']} --allow-requantize {model} {f16} F16")
            elif not quantize(fork["llama-quantize"], model, f16, "F16", True, args.out_dir, "f16"):
                return 1, None
        suffix = "-emb" if args.embed_same else ""
        for fmt in sorted(need - set(files)):
            if fmt in IK_FORMATS:                  # ik-iq2_bn and ik-iq2_bn-rtr share the IQ2_BN file
                qbin, qtype = ik["llama-quantize"], IK_FORMATS[fmt]
                dst = os.path.join(work, f"{stem}-ik-{fmt}{suffix}.gguf")
            else:
                qbin, qtype = fork["llama-quantize"], fmt.upper()
                dst = os.path.join(work, f"{stem}-{fmt}{suffix}.gguf")
            extra = ["--token-embedding-type", qtype.lower(), "--output-tensor-type", qtype.lower()] \
                if args.embed_same else []
            if args.dry_run:
                # (a new F16 file would be newer than every conversion made from the old one)
                print(f"would reuse: {dst}" if up_to_date(dst, f16) and (f16 == model or up_to_date(f16, model))
                      else f"would run: {' '.join([qbin] + extra + [f16, dst, qtype])}")
            elif not quantize(qbin, f16, dst, qtype, False, args.out_dir, fmt, extra):
                if not args.keep_going:
                    return 1, None
                for c in configs:
                    if config_format(c) == fmt:
                        failed[c] = f"conversion to {qtype} failed (log: {args.out_dir}/quantize-{fmt}.log)"
                continue
            files[fmt] = dst

    plan = []
    for c in configs:
        if c in failed:
            continue
        if c in ("ours", "ours-ptq1_0"):
            plan.append((c, fork["llama-bench"], files[config_format(c)],
                         {"GGML_T2P_KERNEL": ISA_LEVEL[args.isa]} if args.isa else {}, []))
        elif c == "ours-nohybrid":
            env = {"GGML_T2P_HYBRID": "0"}
            if args.isa:
                env["GGML_T2P_KERNEL"] = ISA_LEVEL[args.isa]
            plan.append((c, fork["llama-bench"], files["pq2_0"], env, []))
        elif c.startswith("ours-"):
            plan.append((c, fork["llama-bench"], files["pq2_0"], {"GGML_T2P_KERNEL": c[5:]}, []))
        elif c.startswith("stock-"):
            plan.append((c, fork["llama-bench"], files[config_format(c)], {"GGML_T2P": "0"}, []))
        elif c == "ik-iq2_bn":
            plan.append((c, ik["llama-bench"], files["iq2_bn"], {}, ["-rtr", "0"]))
        elif c == "ik-iq2_bn-rtr":
            plan.append((c, ik["llama-bench"], files["iq2_bn"], {}, ["-rtr", "1"]))
        elif c == "ik-iq1_bn":
            plan.append((c, ik["llama-bench"], files["iq1_bn"], {}, []))
    common = ["-t", ",".join(map(str, threads)), "-r", "1", "-mmp", "0", "-v", "-o", "json"]
    plan = [(label, binary, m, env, ["-p", p_for.get(label, ",".join(map(str, pps))),
                                     "-n", str(n_for.get(label, args.n))] + common + extra + args.extra)
            for label, binary, m, env, extra in plan]
    if args.dry_run:
        for label, binary, m, env, extra in plan:
            print(f"would run ({label}): {tc.show_env(env)} {binary} -m {m} {' '.join(extra)}".replace("  ", " "))
        return 0, None

    bpt = {}
    for label, _, m, _, _ in plan:
        bpt[label] = bytes_per_token(gguf_tensors(m)[1], ptq1_resident=label.startswith("ours"))
    samples = {label: {} for label, *_ in plan}
    loads, states, runs = [], {}, []
    t_start = time.time()
    load_line, load_warn = tc.machine_load(max(threads))
    tc.say(TOOL, load_line)
    if load_warn:
        tc.say(TOOL, load_warn)
    for r in range(1, args.rounds + 1):
        for label, binary, m, env, extra in plan:
            if label in failed:
                continue
            load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
            loads.append(load)
            json_path = os.path.join(args.out_dir, f"{label}-{r}.json")
            log_path = os.path.join(args.out_dir, f"{label}-{r}.log")
            cmd = [binary, "-m", m] + extra
            tc.say(TOOL, f"round {r}/{args.rounds} {label} (load {load:.2f}): {tc.show_env(env)} "
                         f"{os.path.basename(binary)} -m {os.path.basename(m)} ...")
            info = {}
            secs = tc.run_checked(TOOL, f"run {label}", cmd, env, json_path, log_path, info=info)
            why = None
            if secs is None:
                what = info["crash"]["text"] if info.get("crash") else last_error(log_path)
                why = f"llama-bench failed: {what} (log: {log_path})"
            else:
                try:
                    got = load_bench_json(json_path)
                    if not got:
                        raise ValueError("no results")
                except (ValueError, KeyError, TypeError) as e:
                    why = f"cannot read llama-bench's JSON in {json_path}: {e}"
            if why:
                tc.say(TOOL, f"{label}: {why}")
                if not args.keep_going:
                    return 1, None
                failed[label] = why
                continue
            for key, ts in got.items():
                if label in n_for and key[0] == f"tg{n_for[label]}":     # tabled in the -n rows
                    key = (f"tg{args.n}", key[1])
                samples[label].setdefault(key, []).append(ts)
            log_text = tc.read_text(log_path)
            state, summary, _ = tc.plugin_state(log_text)
            if label.startswith("ours") and ptq1_kept(log_text):
                bpt[label] = bytes_per_token(gguf_tensors(m)[1])   # the file's bytes, held as they are
            states.setdefault(label, []).append((state, summary))
            runs.append({"round": r, "config": label, "cmd": cmd, "env": env, "load1": load, "seconds": secs,
                         "results": {f"{k[0]}@{k[1]}": v for k, v in got.items()}})
            tc.say(TOOL, f"  {label}: {secs:.0f} s; " + ", ".join(f"{k[0]}@t{k[1]} {v:.2f}" for k, v in got.items()))
    loads.append(os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan"))
    secs = time.time() - t_start
    end_line, _ = tc.machine_load(max(threads))
    lines, table = report(args, [p for p in plan if p[0] not in failed], samples, states, bpt, read_bw, loads,
                          secs, n_for)
    lines += [f"FAILED {c}: {why}" for c, why in failed.items()]
    lines[1:1] = ["before: " + load_line] + ([load_warn] if load_warn else []) + ["after:  " + end_line]
    for line in lines:
        print(line)
    if args.json:
        with tc.AtomicOut(args.json) as out:
            # configs: those tabled; failed: the rest, with why (runs keeps every run that worked)
            out.write(json.dumps({"model": model, "files": files,
                                  "configs": [p[0] for p in plan if p[0] not in failed],
                                  "bytes_per_token": bpt, "read_bw": read_bw, "loads": loads,
                                  "table": table, "runs": runs, "machine_before": load_line,
                                  "machine_after": end_line,
                                  "states": {k: v[0][1] for k, v in states.items()},
                                  "failed": failed}, indent=1).encode())
            out.commit()
        print(f"JSON: {args.json}")
    return (1 if failed else 0), table


def report(args, plan, samples, states, bpt, read_bw, loads, secs, n_for):
    labels = [p[0] for p in plan]
    ours = [x for x in labels if x == "ours" or x.startswith("ours-")]
    peers = [x for x in labels if x not in ours]
    keys = []
    for label in labels:
        for k in samples[label]:
            if k not in keys:
                keys.append(k)
    keys.sort(key=lambda k: (k[1], k[0].startswith("tg"), -int(k[0][2:])))
    lines = [f"{args.rounds} interleaved rounds, llama-bench -r 1 each; median tokens/s (spread = (max-min)/median); "
             f"1-min load before the runs: min {min(loads):.2f}, median {statistics.median(loads):.2f}, "
             f"max {max(loads):.2f}; {secs / 60:.1f} min"]
    table = []
    head = f"{'test':7} {'thr':>3} " + " ".join(f"{x:>18}" for x in labels)
    lines.append(head)
    for k in keys:
        row = {"test": k[0], "threads": k[1], "median": {}, "spread": {}}
        cells = []
        for label in labels:
            v = samples[label].get(k, [])
            if v:
                med = statistics.median(v)
                sp = (max(v) - min(v)) / med if med else 0.0
                row["median"][label], row["spread"][label] = med, sp
                cells.append(f"{med:10.2f} ({100 * sp:3.0f}%)")
            else:
                cells.append(f"{'-':>18}")
        table.append(row)
        lines.append(f"{k[0]:7} {k[1]:3d} " + " ".join(f"{c:>18}" for c in cells))
    if ours and peers:
        lines.append("ours = the best of " + ", ".join(ours) + " in each cell; ratio ours/peer:")
        lines.append(f"{'test':7} {'thr':>3} {'ours best':>26} " + " ".join(f"{x:>14}" for x in peers))
        for row in table:
            got = {x: row["median"][x] for x in ours if x in row["median"]}
            if not got:
                continue
            best = max(got, key=got.get)
            row["ours_best"] = best
            row["ratio"] = {p: got[best] / row["median"][p] for p in peers if row["median"].get(p)}
            lines.append(f"{row['test']:7} {row['threads']:3d} {got[best]:9.2f} {best:>16} " +
                         " ".join(f"{row['ratio'][p]:13.2f}x" if p in row["ratio"] else f"{'-':>14}" for p in peers))
    lines.append("decode: weight bytes read per token (each file's tensor table; token_embd one row) x tokens/s:")
    for row in table:
        if not row["test"].startswith("tg"):
            continue
        parts = []
        for label in labels:
            if label in row["median"]:
                gbs = bpt[label] * row["median"][label] / 1e9
                share = f" = {100 * gbs / read_bw[row['threads']]:.0f}%" if row["threads"] in read_bw else ""
                row.setdefault("read_gbs", {})[label] = gbs
                parts.append(f"{label} {gbs:.2f} GB/s{share}")
        bw = f" of {read_bw[row['threads']]:.2f} GB/s read bandwidth" if row["threads"] in read_bw else ""
        lines.append(f"  {row['test']} t{row['threads']}{bw}: " + ", ".join(parts))
    lines.append("  bytes per token: " + ", ".join(f"{x} {bpt[x] / 1e6:.1f} MB" for x in labels))
    for label in labels:
        if label in n_for:
            lines.append(f"  {label} decoded {n_for[label]} tokens per run (--n-for), tabled in the tg{args.n} rows")
    lines.append("plugin state (from each run's log):")
    for label in labels:
        seen = []
        for s in states.get(label, []):
            if not any(tc.same_state(s, x) for x in seen):
                seen.append(s)
        for s in seen:
            lines.append(f"  {label}: {s[1]}")
    lines.append(f"logs and JSON of every run: {args.out_dir}")
    return lines, table


if __name__ == "__main__":
    tc.tool_main(TOOL, run)
