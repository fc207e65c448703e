#!/usr/bin/env python3
"""Tests for tools/rpc-check.py that need no llama.cpp build: the RPC messages it writes, byte for
byte against the C layout of ggml-rpc.cpp's packed structs (protocol 4 and 5), its PQ2_0 blocks, its
ports and its refusals of bad arguments. (The tool itself runs against real rpc-server processes;
docs/results.md has its runs.) Python 3 standard library only.

Run: python3 tests/python/test_rpc_check.py [-v]
"""

import importlib.util
import os
import socket
import struct
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.join(HERE, "..", "..", "tools")
spec = importlib.util.spec_from_file_location("rpc_check_under_test", os.path.join(TOOLS, "rpc-check.py"))
rc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rc)


class WireFormat(unittest.TestCase):
    def test_rpc_tensor_layout(self):
        # struct rpc_tensor, #pragma pack(1): id u64 @0, type u32 @8, buffer u64 @12, ne[4] u32 @20,
        # nb[4] u32 @36, op u32 @52, op_params[16] i32 @56, flags i32 @120, src[10] u64 @124,
        # view_src u64 @204, view_offs u64 @212, data u64 @220, name[64] @228, 4 bytes @292: 296
        t = rc.tensor(rc.PQ2_0, 256, 32, buffer=0x1122, data=0xABCDEF, name="blk.0.w", tid=7)
        self.assertEqual(len(t), 296)
        u32 = lambda off: struct.unpack_from("<I", t, off)[0]  # noqa: E731
        u64 = lambda off: struct.unpack_from("<Q", t, off)[0]  # noqa: E731
        self.assertEqual((u64(0), u32(8), u64(12)), (7, 142, 0x1122))
        self.assertEqual([u32(20 + 4 * i) for i in range(4)], [256, 32, 1, 1])
        # nb: a 34-byte block, a row of two blocks, the whole matrix (dims 2 and 3 of size 1)
        self.assertEqual([u32(36 + 4 * i) for i in range(4)], [34, 68, 68 * 32, 68 * 32])
        self.assertEqual(u32(52), 0)
        self.assertEqual(t[56:204], bytes(148))   # op_params, flags, src[]
        self.assertEqual((u64(204), u64(212), u64(220)), (0, 0, 0xABCDEF))
        self.assertEqual(t[228:228 + 8], b"blk.0.w\0")
        self.assertEqual(t[292:], bytes(4))

    def test_sizes_of_the_block_types(self):
        self.assertEqual(rc.nbytes(rc.PQ2_0, 256, 32), 2 * 34 * 32)
        self.assertEqual(rc.nbytes(rc.PTQ1_0, 256, 32), 2 * 28 * 32)
        t = rc.tensor(rc.PTQ1_0, 384, 3, 0, 0, "x")
        self.assertEqual(struct.unpack_from("<4I", t, 36), (28, 84, 252, 252))

    def test_name_is_cut_to_63_bytes_and_terminated(self):
        t = rc.tensor(rc.PQ2_0, 128, 16, 0, 0, "n" * 100)
        self.assertEqual(t[228:291], b"n" * 63)
        self.assertEqual(t[291], 0)

    def test_pq2_0_blocks(self):
        import random
        b = rc.pq2_blocks(random.Random(1), 3)
        self.assertEqual(len(b), 3 * 34)
        for i in range(3):
            blk = b[34 * i:34 * (i + 1)]
            self.assertEqual(struct.unpack("<e", blk[:2])[0], 1.0)
            codes = [(q >> (2 * j)) & 3 for q in blk[2:] for j in range(4)]
            self.assertTrue(all(c < 3 for c in codes))   # codes 0..2 only: ternary weights
            self.assertEqual(set(codes), {0, 1, 2})


class Ports(unittest.TestCase):
    def test_free_port_is_a_loopback_port_nobody_holds(self):
        p = rc.free_port()
        self.assertTrue(0 < p < 65536)
        with socket.socket() as s:
            s.bind((rc.HOST, p))
        self.assertEqual(rc.HOST, "127.0.0.1")


class Arguments(unittest.TestCase):
    def run_tool(self, *args):
        return subprocess.run([sys.executable, os.path.join(TOOLS, "rpc-check.py"), *args], capture_output=True,
                              text=True, env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))

    def test_missing_binaries_are_named(self):
        with tempfile.TemporaryDirectory() as d:
            r = self.run_tool("--bin", d, "-m", __file__)
        self.assertEqual(r.returncode, 2)
        self.assertIn("rpc-server", r.stderr)
        self.assertIn("-DGGML_RPC=ON", r.stderr)

    def test_counts_must_be_positive(self):
        r = self.run_tool("--bin", ".", "-m", __file__, "--workers", "0")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--workers", r.stderr)

    def test_help(self):
        r = self.run_tool("--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("--bad-input", r.stdout)
        self.assertIn("127.0.0.1", r.stdout)


if __name__ == "__main__":
    unittest.main()
