#!/usr/bin/env python3
"""Tests for tools/peers.py's own logic (no llama.cpp needed).

Run: python3 tests/python/test_peers.py [-v]      (needs numpy and PyPI gguf==0.19.0 to write test GGUFs)

* gguf_tensors reads a GGUF written by PyPI gguf's writer: names, shapes, file type and byte sizes
  (checked against the sizes numpy gives the arrays written);
* bytes_per_token counts one row of token_embd when output.weight exists, all of it when tied;
* the command line refuses what it cannot run (unknown configuration, ik-* without --ik, bad --p-for,
  bad --read-bw, a missing model) with a message and status 2, before any build or run;
* --dry-run prints the plan: the PQ2_0 source used as is, conversions through F16, --p-for applied,
  each configuration's environment (ours-nohybrid: GGML_T2P_HYBRID=0, with --isa avx2 also the level);
  --ptq1 FILE is run as is by ours-ptq1_0 and stock-ptq1_0, TQ1_0 comes from the fork's llama-quantize
  and IQ1_BN from ik_llama.cpp's; --embed-same converts token_embd and output to each file's type
  too (files of their own); a --ptq1 file without PTQ1_0 tensors is refused;
* bytes per token count ours' PTQ1_0 matrices as held (34/28 of the file's bytes as X16/T2P, the file's
  bytes where the load line says L64 or PTQ1_0x4), the others' as filed;
* --n-for runs one configuration with other generated tokens and tables them in the -n rows, saying so;
* a configuration that fails to convert or to run stops the tool, or with --keep-going is named with
  the engine's own error line and left out while the others' table is printed (status 1 either way):
  driven by stand-in llama-bench / llama-quantize scripts that fail where told.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

try:
    import numpy as np
    import gguf
except ImportError as e:                       # a failure, not a skip: the test command must notice
    sys.exit(f"test_peers: {e}; run the Python tests in the project's environment "
             "(python3 tools/test-all.py makes it from tools/requirements.txt)")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "tools", "peers.py")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_synthetic import teach_gguf  # noqa: E402  (PyPI gguf taught types 142 and 143)

spec = importlib.util.spec_from_file_location("peers", TOOL)
peers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(peers)


def write_ptq1_0_gguf(path):
    """A GGUF with one PTQ1_0 matrix (96 x 128: 96 blocks of 28 bytes) and one F32 vector."""
    teach_gguf()
    w = gguf.GGUFWriter(path, "qwen35")
    w.add_file_type(143)
    w.add_tensor("blk.0.ffn_up.weight", np.zeros((96, 28), dtype=np.uint8),
                 raw_dtype=gguf.GGMLQuantizationType(143))
    w.add_tensor("blk.0.attn_norm.weight", np.ones(128, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# stand-ins for the engines' programs: llama-quantize copies its source (and fails for the type named
# in T2P_FAKE_QUANT_FAIL); llama-bench prints llama-bench's JSON for each -p size and -n, one entry per
# thread count, and fails with an error line when GGML_T2P=0 (as a fork that cannot load a type would)
FAKE_QUANTIZE = """import shutil, sys, os
src, dst, qtype = sys.argv[-3:]
if qtype == os.environ.get("T2P_FAKE_QUANT_FAIL"):
    sys.exit(f"main: invalid ftype '{qtype}'")
shutil.copyfile(src, dst)
"""
FAKE_BENCH = """import json, sys, os
a = sys.argv
m = a[a.index("-m") + 1]
if "tq2_0" in m:                  # works once, then fails (a failure after samples were taken)
    if os.path.exists(m + ".ran"):
        print("error: second run refused", file=sys.stderr)
        sys.exit(1)
    open(m + ".ran", "w").close()
elif os.environ.get("GGML_T2P") == "0" and "q4_0" not in m:
    print("llama_model_load: error loading model: unknown model architecture: 'qwen35'", file=sys.stderr)
    sys.exit(1)
ps = [int(x) for x in a[a.index("-p") + 1].split(",")]
n, ts = int(a[a.index("-n") + 1]), [int(x) for x in a[a.index("-t") + 1].split(",")]
out = [dict(n_prompt=p, n_gen=0, n_threads=t, avg_ts=100.0 * t + p) for t in ts for p in ps if p]
out += [dict(n_prompt=0, n_gen=n, n_threads=t, avg_ts=10.0 * t) for t in ts if n]
print(json.dumps(out))
"""


def write_gguf(path, tied, ftype=1):
    w = gguf.GGUFWriter(path, "qwen3")
    w.add_file_type(ftype)
    w.add_tensor("token_embd.weight", np.ones((100, 64), dtype=np.float16))     # 100 rows of 64
    w.add_tensor("blk.0.attn_norm.weight", np.ones(64, dtype=np.float32))
    w.add_tensor("blk.0.ffn_up.weight", np.ones((96, 64), dtype=np.float16))
    if not tied:
        w.add_tensor("output.weight", np.ones((100, 64), dtype=np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


class Peers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="t2p-peers-")
        cls.untied = os.path.join(cls.tmp.name, "untied.gguf")
        cls.tied = os.path.join(cls.tmp.name, "tied.gguf")
        write_gguf(cls.untied, tied=False)
        write_gguf(cls.tied, tied=True, ftype=0)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_table(self):
        ftype, t = peers.gguf_tensors(self.untied)
        self.assertEqual(ftype, 1)
        self.assertEqual(t["token_embd.weight"][0], [64, 100])
        self.assertEqual(t["blk.0.ffn_up.weight"][0], [64, 96])
        # sizes: the data itself, padded to the 32-byte alignment
        pad = lambda n: (n + 31) // 32 * 32  # noqa: E731
        self.assertEqual(t["token_embd.weight"][1], pad(100 * 64 * 2))
        self.assertEqual(t["blk.0.attn_norm.weight"][1], pad(64 * 4))
        self.assertEqual(t["blk.0.ffn_up.weight"][1], pad(96 * 64 * 2))
        self.assertEqual(t["output.weight"][1], 100 * 64 * 2)        # the last tensor: no padding after it
        self.assertEqual(peers.gguf_tensors(self.tied)[0], 0)

    def test_bytes_per_token(self):
        _, t = peers.gguf_tensors(self.untied)
        want = t["token_embd.weight"][1] // 100 + t["blk.0.attn_norm.weight"][1] + \
            t["blk.0.ffn_up.weight"][1] + t["output.weight"][1]
        self.assertEqual(peers.bytes_per_token(t), want)
        _, t = peers.gguf_tensors(self.tied)
        self.assertEqual(peers.bytes_per_token(t), sum(v[1] for v in t.values()))

    def test_bytes_per_token_ptq1_0(self):
        """ours holds PTQ1_0 matrices as X16/T2P (34 bytes per 28 filed); the others read the file."""
        t = {"blk.0.ffn_up.weight": ([128, 96], 96 * 28, 143), "blk.0.attn_norm.weight": ([128], 512, 0)}
        self.assertEqual(peers.bytes_per_token(t), 96 * 28 + 512)
        self.assertEqual(peers.bytes_per_token(t, ptq1_resident=True), 96 * 34 + 512)
        path = os.path.join(self.tmp.name, "ptq1.gguf")
        write_ptq1_0_gguf(path)
        ftype, t = peers.gguf_tensors(path)
        self.assertEqual(ftype, 143)
        self.assertEqual(t["blk.0.ffn_up.weight"][2], 143)
        self.assertEqual(peers.bytes_per_token(t, ptq1_resident=True) - peers.bytes_per_token(t), 96 * 6)

    def test_ptq1_kept_reads_the_load_line(self):
        line = "ggml-t2p: enabled (libggml_t2p 0.2.0, kernel amx; PQ2_0 -> X16, PTQ1_0 -> {}; Q8_K by ...)"
        self.assertTrue(peers.ptq1_kept(line.format("L64")))
        self.assertTrue(peers.ptq1_kept(line.format("PTQ1_0x4")))
        self.assertFalse(peers.ptq1_kept(line.format("X16")))
        self.assertFalse(peers.ptq1_kept(line.format("T2P")))
        self.assertFalse(peers.ptq1_kept("no ggml-t2p line"))

    def test_ptq1_dry_run(self):
        """--ptq1: ours-ptq1_0 and stock-ptq1_0 run that file; TQ1_0 from the fork, IQ1_BN from ik."""
        d = self.tmp.name
        fork, ik = os.path.join(d, "p-fork"), os.path.join(d, "p-ik")
        self.fake_build(os.path.join(fork, "build-t2p"), None)
        self.fake_build(os.path.join(ik, "build-peers"), None)
        pt = os.path.join(d, "p1.gguf")
        write_ptq1_0_gguf(pt)
        w = os.path.join(d, "w")
        base = ["--llama", fork, "--ik", ik, "-m", self.untied, "--work", w, "--dry-run",
                "--configs", "ours-ptq1_0,stock-ptq1_0,stock-tq1_0,ik-iq1_bn,ik-iq2_bn"]
        p = self.run_tool(*(base + ["--ptq1", pt]))
        self.assertEqual(p.returncode, 0, p.stdout)
        out = p.stdout
        self.assertRegex(out, r"\(ours-ptq1_0\): \S*build-t2p/bin/llama-bench -m " + pt)
        self.assertNotRegex(out, r"\(ours-ptq1_0\):.*GGML_T2P")
        self.assertRegex(out, r"\(stock-ptq1_0\): GGML_T2P=0 \S*llama-bench -m " + pt)
        self.assertIn(f"p-fork/build-t2p/bin/llama-quantize {self.untied} {os.path.join(w, 'untied-tq1_0.gguf')} TQ1_0",
                      out)
        self.assertIn(f"p-ik/build-peers/bin/llama-quantize {self.untied} {os.path.join(w, 'untied-ik-iq1_bn.gguf')} "
                      "IQ1_BN", out)
        self.assertRegex(out, r"\(ik-iq1_bn\): \S*p-ik/build-peers/bin/llama-bench -m \S*untied-ik-iq1_bn\.gguf")
        self.assertRegex(out, r"\(ik-iq2_bn\): .*untied-ik-iq2_bn\.gguf -p 512,64 .* -rtr 0")
        self.assertNotIn(" PTQ1_0\n", out)                # the --ptq1 file needs no conversion
        # without --ptq1 the fork's llama-quantize makes one
        p = self.run_tool(*base)
        self.assertEqual(p.returncode, 0, p.stdout)
        self.assertIn(f"{self.untied} {os.path.join(w, 'untied-ptq1_0.gguf')} PTQ1_0", p.stdout)
        # --embed-same: token_embd and output in each file's own type, in files of their own
        p = self.run_tool(*(base + ["--ptq1", pt, "--embed-same"]))
        self.assertEqual(p.returncode, 0, p.stdout)
        self.assertIn("llama-quantize --token-embedding-type tq1_0 --output-tensor-type tq1_0 "
                      f"{self.untied} {os.path.join(w, 'untied-tq1_0-emb.gguf')} TQ1_0", p.stdout)
        self.assertIn("llama-quantize --token-embedding-type iq1_bn --output-tensor-type iq1_bn "
                      f"{self.untied} {os.path.join(w, 'untied-ik-iq1_bn-emb.gguf')} IQ1_BN", p.stdout)
        self.assertRegex(p.stdout, r"\(ik-iq1_bn\): .*untied-ik-iq1_bn-emb\.gguf ")
        # a --ptq1 file with no PTQ1_0 tensor is refused
        p = self.run_tool(*(base + ["--ptq1", self.untied]))
        self.assertEqual(p.returncode, 2, p.stdout)
        self.assertIn("no tensor of type PTQ1_0", p.stdout)
        # the PTQ1_0 configurations are not in the default set
        self.assertNotIn("ptq1_0", peers.DEFAULT_CONFIGS[0] + ",".join(peers.DEFAULT_CONFIGS))

    def test_keep_going(self):
        """A failed conversion and a failed run: without --keep-going the tool stops (status 1, no
        table); with it they are named (the engine's error line) and the rest is tabled (status 1)."""
        d = self.tmp.name
        fork = os.path.join(d, "k-fork")
        self.fake_build(os.path.join(fork, "build-t2p"), None)
        for n, body in (("llama-quantize", FAKE_QUANTIZE), ("llama-bench", FAKE_BENCH)):
            with open(os.path.join(fork, "build-t2p", "bin", n), "w") as f:
                f.write(f"#!{sys.executable}\n{body}")
        base = ["--llama", fork, "-m", self.untied, "--work", os.path.join(d, "kw"), "--configs",
                "ours,stock-pq2_0,stock-tq1_0,stock-tq2_0,stock-q4_0", "-p", "8", "-n", "4", "-t", "1", "--rounds", "2",
                "--n-for", "ours=2"]
        env = dict(os.environ, T2P_FAKE_QUANT_FAIL="TQ1_0")
        p = subprocess.run([sys.executable, TOOL] + base + ["--out", os.path.join(d, "k1")], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertIn("quantize tq1_0 failed", p.stdout)
        self.assertNotIn("ratio ours/peer", p.stdout)
        p = subprocess.run([sys.executable, TOOL] + base + ["--keep-going", "--out", os.path.join(d, "k2"),
                                                            "--json", os.path.join(d, "k2.json")],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertRegex(p.stdout, r"FAILED stock-pq2_0: llama-bench failed: llama_model_load: error loading "
                                   r"model: unknown model architecture: 'qwen35'")
        self.assertRegex(p.stdout, r"FAILED stock-tq1_0: conversion to TQ1_0 failed")
        self.assertRegex(p.stdout, r"\npp8 +1 +108\.00 \(  0%\)")     # ours' two rounds tabled
        self.assertRegex(p.stdout, r"\ntg4 +1 +10\.00 ")           # ours' tg2 (--n-for), in the tg4 row
        self.assertIn("ours decoded 2 tokens per run (--n-for), tabled in the tg4 rows", p.stdout)
        with open(os.path.join(d, "k2", "ours-1.json")) as f:         # what llama-bench was asked for
            self.assertEqual({t["n_gen"] for t in json.load(f)}, {0, 2})
        with open(os.path.join(d, "k2.json")) as f:
            got = json.load(f)
        self.assertEqual(got["configs"], ["ours", "stock-q4_0"])
        self.assertEqual(sorted(got["failed"]), ["stock-pq2_0", "stock-tq1_0", "stock-tq2_0"])
        # stock-tq2_0 worked in round 1 and failed in round 2: named, and left out of the table
        self.assertRegex(p.stdout, r"FAILED stock-tq2_0: llama-bench failed: .*error: second run refused")
        self.assertNotRegex(p.stdout, r"\ntest .*stock-tq2_0")
        self.assertRegex(p.stdout, r"\ntest .*ours .*stock-q4_0")

    def run_tool(self, *argv):
        return subprocess.run([sys.executable, TOOL] + list(argv), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)

    def test_refusals(self):
        d = self.tmp.name
        base = ["--llama", d, "-m", self.untied, "--work", os.path.join(d, "w")]
        for extra, want in ((["--configs", "ours,nope"], "unknown configuration 'nope'"),
                            (["--configs", "ik-iq2_bn"], "need --ik"),
                            (["--configs", "ours", "--p-for", "stock-q4_0=64"], "not among the configurations"),
                            (["--configs", "ours", "--p-for", "ours=x"], "is not CONFIG=N"),
                            (["--configs", "ours", "--read-bw", "1=fast"], "is not THREADS=GB/s"),
                            (["--configs", "ours", "-t", "0"], "not a thread count"),
                            (["--configs", "ours", "--rounds", "0"], "at least 1"),
                            (["--configs", "ours", "--n-for", "ours=0"], "is not CONFIG=N"),
                            (["--configs", "ours", "--n-for", "stock-q4_0=8"], "not among the configurations")):
            p = self.run_tool(*(base + extra))
            self.assertEqual(p.returncode, 2, (extra, p.stdout))
            self.assertIn(want, p.stdout, extra)
        p = self.run_tool("--llama", d, "-m", os.path.join(d, "missing.gguf"))
        self.assertEqual(p.returncode, 2)
        self.assertIn("no such file", p.stdout)

    def test_dry_run(self):
        """A fake fork build folder with llama-bench and llama-quantize stand-ins (never run)."""
        d = self.tmp.name
        self.fake_build(os.path.join(d, "fork", "build-t2p"), None)
        p = self.run_tool("--llama", os.path.join(d, "fork"), "-m", self.untied, "--work", os.path.join(d, "w"),
                          "--configs", "ours,ours-avx2,ours-nohybrid,stock-pq2_0,stock-q4_0",
                          "--p-for", "stock-pq2_0=64",
                          "-t", "1,2", "-n", "16", "--dry-run")
        self.assertEqual(p.returncode, 0, p.stdout)
        out = p.stdout
        # an F16 source needs no F16 step; PQ2_0 and Q4_0 are made from it
        self.assertNotIn("--allow-requantize", out)
        self.assertIn(f"{self.untied} {os.path.join(d, 'w', 'untied-pq2_0.gguf')} PQ2_0", out)
        self.assertIn(f"{self.untied} {os.path.join(d, 'w', 'untied-q4_0.gguf')} Q4_0", out)
        self.assertIn("(ours-avx2): GGML_T2P_KERNEL=avx2 ", out)
        self.assertIn("(ours-nohybrid): GGML_T2P_HYBRID=0 ", out)
        self.assertNotRegex(out, r"\(ours-nohybrid\):.*GGML_T2P_KERNEL")
        self.assertRegex(out, r"\(ours-nohybrid\).*untied-pq2_0\.gguf -p 512,64 -n 16 ")
        self.assertIn("(stock-pq2_0): GGML_T2P=0 ", out)
        self.assertRegex(out, r"\(stock-pq2_0\).* -p 64 -n 16 -t 1,2 ")
        self.assertRegex(out, r"\(ours\).* -p 512,64 -n 16 -t 1,2 -r 1 -mmp 0 -v -o json")

    def fake_build(self, folder, cache):
        """FOLDER/bin/llama-bench and llama-quantize stand-ins (never run), and CACHE as its
        CMakeCache.txt (None: no cache)."""
        bin_dir = os.path.join(folder, "bin")
        os.makedirs(bin_dir, exist_ok=True)
        for n in ("llama-bench", "llama-quantize"):
            path = os.path.join(bin_dir, n)
            with open(path, "w") as f:
                f.write("#!/bin/sh\nexit 1\n")
            os.chmod(path, 0o755)
        if cache is not None:
            with open(os.path.join(folder, "CMakeCache.txt"), "w") as f:
                f.write(cache)

    def test_isa_violations(self):
        d = os.path.join(self.tmp.name, "cache")
        os.makedirs(d, exist_ok=True)
        self.assertEqual(peers.isa_violations(d, "avx2"), ["no CMakeCache.txt"])
        good = "GGML_NATIVE:BOOL=OFF\nGGML_AVX2:BOOL=ON\nGGML_FMA:BOOL=ON\nGGML_F16C:BOOL=ON\n"
        for cache, fork, want in (
                (good, False, []),
                (good + "GGML_CPU_T2P:BOOL=ON\n", True, []),
                (good, True, ["GGML_CPU_T2P not ON"]),
                (good.replace("NATIVE:BOOL=OFF", "NATIVE:BOOL=ON") + "GGML_AMX_INT8:BOOL=on\n//GGML_AVX512:BOOL=ON\n",
                 False, ["GGML_NATIVE=ON", "GGML_AMX_INT8=on"]),
                (good + "GGML_AVX512:BOOL=Y\r\n", False, ["GGML_AVX512=Y"]),
                (good.replace("GGML_AVX2:BOOL=ON", "GGML_AVX2:BOOL=OFF"), False, ["GGML_AVX2 not ON"]),
                (good + "GGML_BACKEND_DL:BOOL=ON\nGGML_CPU_ALL_VARIANTS:BOOL=ON\n", False,
                 ["GGML_BACKEND_DL=ON", "GGML_CPU_ALL_VARIANTS=ON"]),
                (good + "CMAKE_C_FLAGS:STRING=-O2 -march=native\nCMAKE_CXX_FLAGS:STRING=-mavx512f -g\n", False,
                 ["CMAKE_C_FLAGS has -march=native", "CMAKE_CXX_FLAGS has -mavx512f"])):
            with open(os.path.join(d, "CMakeCache.txt"), "w", newline="") as f:
                f.write(cache)
            self.assertEqual(peers.isa_violations(d, "avx2", fork), want, cache)

    def test_kernel_levels(self):
        """The levels of ours-LEVEL (t2p_common.kernel_levels, also x86-emu-test's) from /proc/cpuinfo flags: amx only with AMX-TILE, AMX-INT8 and the
        AVX-512 VNNI set (its narrow batches run there), best first."""
        base = {"avx2", "fma", "f16c"}
        avx512 = base | {"avx512f", "avx512bw", "avx512vl", "avx512_vnni"}
        for flags, want in ((avx512 | {"amx_tile", "amx_int8", "avx_vnni"}, ["amx", "avx512vnni", "avxvnni", "avx2"]),
                            (avx512 | {"amx_tile"}, ["avx512vnni", "avx2"]),
                            (base | {"amx_tile", "amx_int8"}, ["avx2"]),
                            (avx512, ["avx512vnni", "avx2"]),
                            (base | {"avx_vnni"}, ["avxvnni", "avx2"]),
                            ({"avx2", "fma"}, [])):
            self.assertEqual(peers.tc.kernel_levels("x86_64", flags), want, sorted(flags))
        self.assertEqual(peers.tc.kernel_levels("aarch64", {"asimddp", "i8mm"}), ["i8mm", "dotprod"])
        self.assertEqual(peers.tc.kernel_levels("riscv64", avx512), [])

    def test_isa_dry_run(self):
        """--isa avx2: ours forced to avx2 in the AVX2-only build folders; a native folder, a folder
        with binaries and no CMakeCache, and other levels of ours refused; --build only printed."""
        d = self.tmp.name
        fork, ik = os.path.join(d, "isa-fork"), os.path.join(d, "isa-ik")
        os.makedirs(fork, exist_ok=True)
        os.makedirs(ik, exist_ok=True)
        base = ["--llama", fork, "--ik", ik, "-m", self.untied, "--work", os.path.join(d, "w"), "--isa", "avx2",
                "--configs", "ours,ours-LEVEL,ours-nohybrid,ik-iq2_bn-rtr", "--dry-run"]
        if "avx2" not in peers.cpu_levels():     # ARM, or x86-64 without AVX2: the tool refuses --isa avx2
            p = self.run_tool(*base)
            self.assertEqual(p.returncode, 2, p.stdout)
            self.assertRegex(p.stdout, r"does not run the avx2 level|an x86-64 class")
            return
        # --build with --dry-run: the configure and build commands are printed, not run, nothing is made
        p = self.run_tool(*(base + ["--build"]))
        self.assertEqual(p.returncode, 0, p.stdout)
        self.assertRegex(p.stdout, r"would run: cmake -S \S*isa-fork -B \S*build-peers-avx2 .*-DGGML_CPU_T2P=ON.*"
                                   r"-DGGML_NATIVE=OFF")
        self.assertRegex(p.stdout, r"would run: cmake -S \S*isa-ik -B \S*build-peers-avx2 .*-DGGML_NATIVE=OFF")
        self.assertFalse(os.path.exists(os.path.join(fork, "build-peers-avx2")))
        self.assertFalse(os.path.exists(os.path.join(d, "w")))
        avx2_only = "GGML_NATIVE:BOOL=OFF\nGGML_AVX2:BOOL=ON\nGGML_FMA:BOOL=ON\nGGML_F16C:BOOL=ON\n"
        self.fake_build(os.path.join(fork, "build-peers-avx2"), avx2_only + "GGML_CPU_T2P:BOOL=ON\n")
        self.fake_build(os.path.join(ik, "build-peers-avx2"), avx2_only)
        p = self.run_tool(*base)
        self.assertEqual(p.returncode, 0, p.stdout)
        self.assertIn("(ours): GGML_T2P_KERNEL=avx2 ", p.stdout)
        self.assertIn("(ours-avx2): GGML_T2P_KERNEL=avx2 ", p.stdout)
        self.assertIn("(ours-nohybrid): GGML_T2P_HYBRID=0 GGML_T2P_KERNEL=avx2 ", p.stdout)
        self.assertNotIn("avx512vnni", p.stdout)
        self.assertIn(os.path.join(fork, "build-peers-avx2", "bin", "llama-bench"), p.stdout)
        self.assertIn(os.path.join(ik, "build-peers-avx2", "bin", "llama-bench"), p.stdout)
        # ours on the PTQ1_0 file is ours too: forced to the class's level
        pt = os.path.join(d, "isa-p1.gguf")
        write_ptq1_0_gguf(pt)
        p = self.run_tool(*(base[:-3] + ["--configs", "ours,ours-ptq1_0", "--ptq1", pt, "--dry-run"]))
        self.assertEqual(p.returncode, 0, p.stdout)
        self.assertRegex(p.stdout, r"\(ours-ptq1_0\): GGML_T2P_KERNEL=avx2 \S*build-peers-avx2/bin/llama-bench -m " + pt)
        # refused: a native ik build; a fork build without the plugin; binaries with no CMakeCache
        self.fake_build(os.path.join(ik, "build-peers"), "GGML_NATIVE:BOOL=ON\n")
        p = self.run_tool(*(base + ["--ik-build", os.path.join(ik, "build-peers")]))
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertIn("GGML_NATIVE=ON", p.stdout)
        self.fake_build(os.path.join(fork, "no-t2p"), avx2_only)
        p = self.run_tool(*(base + ["--llama-build", os.path.join(fork, "no-t2p")]))
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertIn("GGML_CPU_T2P not ON", p.stdout)
        self.fake_build(os.path.join(fork, "installed"), None)
        p = self.run_tool(*(base + ["--llama-build", os.path.join(fork, "installed")]))
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertIn("no CMakeCache.txt", p.stdout)
        # ours at any other level is refused, by --levels or by name
        for extra in (["--levels", "avx512vnni"], ["--configs", "ours,ours-avx512vnni"]):
            p = self.run_tool(*(base + extra))
            self.assertEqual(p.returncode, 2, p.stdout)
            self.assertIn("ours runs avx2 only", p.stdout)

if __name__ == "__main__":
    unittest.main()
