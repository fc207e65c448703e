#!/usr/bin/env python3
"""Tests for the verdict of tools/ppl-check.py (Python 3 standard library only).

Run: python3 tests/python/test_ppl_check.py [-v]

The verdict reads two llama-perplexity logs as that tool prints them and the comparison of the two
--kl-divergence-base files. These tests hold what decides PASS: every per-chunk value, the final PPL
and the log-prob bytes; and what does not: the "+/-" of the final estimate alone, which llama-perplexity
computes from per-thread partial sums added in the order its threads finish (see ppl-check --help).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import unittest

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("ppl_check", os.path.join(HERE, "..", "..", "tools", "ppl-check.py"))
ppl_check = importlib.util.module_from_spec(_spec)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
_spec.loader.exec_module(ppl_check)


def log(chunks, final=None):
    """A llama-perplexity log shaped like the real one (progress line of chunk values, final line)."""
    text = "perplexity: calculating perplexity over 3 chunks, n_ctx=128, batch_size=2048, n_seq=16\n"
    text += "".join(f"[{i + 1}]{v}," for i, v in enumerate(chunks)) + "\n"
    if final:
        text += f"Final estimate: PPL = {final[0]} +/- {final[1]}\n"
    return text


A = log(["72273.7575", "182000.6828", "162856.4208"], ("162856.4208", "57862.85735"))


class Verdict(unittest.TestCase):
    def check(self, log_b, diff=None, have=True, log_a=A):
        lines, ok = ppl_check.verdict(log_a, log_b, have, diff, 1234)
        return ok, "\n".join(lines)

    def test_identical_passes(self):
        ok, text = self.check(A)
        self.assertTrue(ok, text)
        self.assertIn("per-chunk values: identical (3 chunks), final PPL identical", text)
        self.assertIn("log-prob files: identical (1234 bytes)", text)
        self.assertNotIn("final +/-", text)

    def test_one_chunk_digit_fails(self):
        ok, text = self.check(log(["72273.7575", "182000.6829", "162856.4208"], ("162856.4208", "57862.85735")))
        self.assertFalse(ok)
        self.assertIn("per-chunk values: DIFFER", text)

    def test_missing_chunk_fails(self):
        ok, _ = self.check(log(["72273.7575", "182000.6828"], ("162856.4208", "57862.85735")))
        self.assertFalse(ok)

    def test_final_ppl_differs_fails(self):
        ok, text = self.check(log(["72273.7575", "182000.6828", "162856.4208"], ("162856.4209", "57862.85735")))
        self.assertFalse(ok)
        self.assertIn("final PPL: DIFFERS", text)

    def test_final_missing_fails(self):
        ok, _ = self.check(log(["72273.7575", "182000.6828", "162856.4208"]))
        self.assertFalse(ok)

    def test_logprob_bytes_differ_fails(self):
        ok, text = self.check(A, diff=(4096, 1234, 1234))
        self.assertFalse(ok)
        self.assertIn("first difference at byte 4097", text)

    def test_logprob_missing_fails(self):
        ok, text = self.check(A, have=False)
        self.assertFalse(ok)
        self.assertIn("MISSING", text)

    def test_no_chunks_fails(self):
        ok, _ = self.check("nothing", log_a="nothing")
        self.assertFalse(ok)

    def test_uncertainty_alone_is_shown_not_decisive(self):
        # seen on the test model: same log-prob bytes and values, +/- 28309806.63838 vs 28309806.63837
        ok, text = self.check(log(["72273.7575", "182000.6828", "162856.4208"], ("162856.4208", "57862.85734")))
        self.assertTrue(ok, text)
        self.assertIn("final +/-: 57862.85735 vs 57862.85734 (not part of the verdict", text)

    def test_uncertainty_does_not_hide_other_differences(self):
        ok, _ = self.check(log(["72273.7575", "182000.6828", "162856.4208"], ("162856.4208", "57862.85734")),
                           diff=(0, 1234, 1234))
        self.assertFalse(ok)

    def test_nan_values_compare_as_printed(self):
        a = log(["nan", "nan"], ("nan", "nan"))
        ok, _ = self.check(a, log_a=a)
        self.assertTrue(ok)
        ok, _ = self.check(log(["nan", "12.5"], ("nan", "nan")), log_a=a)
        self.assertFalse(ok)


class Arguments(unittest.TestCase):
    def test_values_that_look_like_options(self):
        # "-t 1" starts like ppl-check's own -t: argparse alone refuses it as the value of --a-args
        _, args = ppl_check.parse(["--perplexity", "p", "-m", "m", "-f", "f", "--a-args", "-t 1",
                                   "--b-args", "-t 2", "--a-env", "", "-t", "3", "--", "-ub", "64"])
        self.assertEqual((args.a_args, args.b_args, args.a_env, args.threads), ("-t 1", "-t 2", "", 3))
        self.assertEqual(args.extra, ["-ub", "64"])


class UsageErrors(unittest.TestCase):
    """Bad option values stop with a usage error (status 2) naming the option, before any run, with
    no Python traceback; the same helpers serve ab.py and t2p.py."""

    def run_tool(self, name, argv):
        import subprocess
        return subprocess.run([sys.executable, os.path.join(HERE, "..", "..", "tools", name)] + argv,
                              capture_output=True, text=True, env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))

    def test_bad_values(self):
        import tempfile
        me = os.path.abspath(__file__)
        with tempfile.TemporaryDirectory() as tmp:
            afile = os.path.join(tmp, "a.txt")
            with open(afile, "w") as f:
                f.write("x")
            base = ["--perplexity", sys.executable, "-m", me, "-f", me]
            cases = [(base + ["--a-args", '-ub "1'], "--a-args"), (base + ["--b-args", "'x"], "--b-args"),
                     (base + ["--runner", 'qemu "x'], "--runner"), (base + ["--a-env", 'A="x'], "--a-env"),
                     (base + ["--out", afile], "--out"), (base + ["--out", os.path.join(afile, "sub")], "--out")]
            bench = ["--bench", sys.executable, "-m", me]
            cases += [(bench + ["--runner", 'x "y'], "--runner"), (bench + ["--out", afile], "--out"),
                      (bench + ["-p", "0", "-n", "0"], "-p and -n")]
            for argv, what in cases:
                tool = "ppl-check.py" if argv[0] == "--perplexity" else "ab.py"
                r = self.run_tool(tool, argv)
                self.assertEqual(r.returncode, 2, (tool, argv, r.stderr))
                self.assertNotIn("Traceback", r.stderr, argv)
                self.assertIn(what, r.stderr, argv)
            with open(afile) as f:
                self.assertEqual(f.read(), "x")
            t2p = [(["--llama", tmp, "--text", tmp], "is a folder"), (["--llama", tmp, "--model", afile + "x"], "no such"),
                   (["--llama", tmp, "--qemu-cpu", "max"], "--cross-aarch64"), (["--llama", tmp, "-p", "0", "-n", "0"],
                   "not both 0"), (["--llama", tmp, "--rounds", "0"], "--rounds"), (["--llama", tmp, "--out", afile], "--out")]
            for argv, what in t2p:
                r = self.run_tool("t2p.py", argv)
                self.assertEqual(r.returncode, 2, (argv, r.stderr))
                self.assertIn(what, r.stderr, argv)
                self.assertNotIn("Traceback", r.stderr, argv)

    def test_why_no_chunks(self):
        log_text = ("load ...\nperplexity: you need at least 256 tokens to evaluate perplexity with a context of 128\n"
                    "perplexity: the data file you provided tokenizes to only 2 tokens\n")
        self.assertEqual(ppl_check.why_no_chunks(log_text)[1],
                         "perplexity: the data file you provided tokenizes to only 2 tokens")
        self.assertEqual(ppl_check.why_no_chunks(""), ["(its log is empty)"])


if __name__ == "__main__":
    unittest.main()
