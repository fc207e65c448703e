#!/usr/bin/env python3
"""Tests for the crash diagnosis, the AMX workaround decision and the load report of the Python tools
(tools/t2p_common.py, used by ab.py, ppl-check.py and t2p.py). Python 3 standard library only.

Run: python3 tests/python/test_tools.py [-v]

The pure functions are tested on logs shaped like what gdb, glibc's backtrace_symbols and ggml's own
unwinder print. The whole path (exit status -> signal -> gdb rerun -> function and instruction -> the
known AMX crash -> "rebuild without ggml's AMX code") is then run for real on a stand-in program: a
C function named like the fork's AMX kernel that executes `tileloadd` without a tile configuration,
which raises SIGILL on every x86-64 CPU (no AMX: #UD; AMX without the Linux tile-data permission:
SIGILL as well). Those tests need a C compiler that knows -mamx-tile (GCC 11+, clang 12+) and an x86-64
Linux host; elsewhere they are skipped and the skip says why.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.join(HERE, "..", "..", "tools")
sys.path.insert(0, TOOLS)
import t2p_common as tc  # noqa: E402


def load(name, filename):
    spec = importlib.util.spec_from_file_location(name, os.path.join(TOOLS, filename))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


ab = load("ab_under_test", "ab.py")
ppl_check = load("ppl_check_under_test", "ppl-check.py")
t2p = load("t2p_under_test", "t2p.py")

# What gdb printed for the stand-in on this project's Zen 4 machine (run_checked's rerun report).
GDB_REPORT = """Program received signal SIGILL, Illegal instruction.
0x0000555555555161 in tinygemm_kernel_amx ()
#0  0x0000555555555161 in tinygemm_kernel_amx ()
#1  0x0000555555555077 in main ()
=> 0x555555555161 <tinygemm_kernel_amx+17>:\ttileloadd (%rdi,%rax,1),%tmm0"""

# A C++ template frame of a worker thread, as gdb prints it for a Release build (no debug info).
GDB_TEMPLATE = """Thread 3 "llama-perplexi" received signal SIGILL, Illegal instruction.
#0  0x00007ffff7e4b2c1 in void (anonymous namespace)::tinygemm_kernel_amx<block_q8_0, float, 1, 2>(int, int, int, void const*, void const*, float*, int) () from /b/bin/libggml-cpu.so
#1  0x00007ffff7e4c000 in ggml_backend_amx_mul_mat () from /b/bin/libggml-cpu.so"""

EXECINFO = """/b/bin/libggml-base.so(ggml_print_backtrace+0x21)[0x7f0000001000]
/b/bin/libggml-base.so(ggml_abort+0x130)[0x7f0000002000]
/b/bin/libggml-cpu.so(ggml_compute_forward_mul_mat+0x77)[0x7f0000003000]
/b/bin/llama-bench(+0x1234)[0x55000000]"""

UNWIND = """0: 0x7f0000001000 ggml_print_backtrace
1: 0x7f0000002000 ggml_abort
2: 0x7f0000003000 ggml_graph_compute_thread"""


class Signals(unittest.TestCase):
    def test_negative_status_is_a_signal(self):
        self.assertEqual(tc.death_signal(-4), (4, "killed by"))
        self.assertEqual(tc.death_signal(-11)[0], 11)

    def test_shell_style_status_is_probably_a_signal(self):
        sig, how = tc.death_signal(132)
        self.assertEqual(sig, 4)
        self.assertIn("probably", how)

    def test_ordinary_failures_are_not_signals(self):
        for rc in (0, 1, 2, 124, 125, 128, None):
            self.assertEqual(tc.death_signal(rc), (None, None), rc)
        self.assertIsNone(tc.diagnose(1, "error: something"))

    def test_signal_names(self):
        self.assertEqual(tc.signal_name(4), "SIGILL (illegal instruction)")
        self.assertTrue(tc.signal_name(11).startswith("SIGSEGV"))
        self.assertEqual(tc.signal_name(250), "signal 250")


class CrashSite(unittest.TestCase):
    def test_gdb_report(self):
        self.assertEqual(tc.crash_site(GDB_REPORT), ("tinygemm_kernel_amx", "tileloadd (%rdi,%rax,1),%tmm0"))

    def test_gdb_template_frame(self):
        f, i = tc.crash_site(GDB_TEMPLATE)
        self.assertEqual(f, "void (anonymous namespace)::tinygemm_kernel_amx<block_q8_0, float, 1, 2>")
        self.assertIsNone(i)

    def test_execinfo_skips_the_abort_machinery(self):
        self.assertEqual(tc.crash_site(EXECINFO), ("ggml_compute_forward_mul_mat", None))

    def test_ggml_unwinder_lines(self):
        self.assertEqual(tc.crash_site(UNWIND), ("ggml_graph_compute_thread", None))

    def test_nothing_in_an_ordinary_log(self):
        self.assertEqual(tc.crash_site("llama_model_loader: loaded meta data\nperplexity: 3 chunks\n"), (None, None))


class Diagnose(unittest.TestCase):
    def test_amx_crash_from_gdb(self):
        d = tc.diagnose(-4, "", GDB_REPORT)
        self.assertTrue(d["amx"])
        self.assertEqual((d["name"], d["function"], d["where"]),
                         ("SIGILL (illegal instruction)", "tinygemm_kernel_amx", "gdb"))
        self.assertIn("killed by SIGILL (illegal instruction) in tinygemm_kernel_amx at `tileloadd", d["text"])
        self.assertIn("known stock AMX crash", d["text"])

    def test_amx_crash_from_the_log_alone(self):
        log = "load_tensors:          AMX model buffer size =   130.22 MiB\n"
        d = tc.diagnose(-4, log)
        self.assertTrue(d["amx"])
        self.assertIsNone(d["function"])
        self.assertIn("install gdb", d["text"])

    def test_sigill_elsewhere_is_not_the_amx_crash(self):
        d = tc.diagnose(-4, "", "Program received signal SIGILL, Illegal instruction.\n"
                                "#0  0x1 in ggml_vec_dot_q8_0_q8_0 ()\n=> 0x1 <ggml_vec_dot_q8_0_q8_0+9>:\tvpdpbusd %zmm1,%zmm2,%zmm3")
        self.assertFalse(d["amx"])
        self.assertEqual(d["function"], "ggml_vec_dot_q8_0_q8_0")

    def test_segfault_in_amx_code_is_not_the_sigill_crash(self):
        self.assertFalse(tc.diagnose(-11, "", GDB_TEMPLATE)["amx"])


class Workaround(unittest.TestCase):
    AMX = tc.diagnose(-4, "", GDB_REPORT)
    OTHER = tc.diagnose(-11, "", UNWIND)

    def test_auto_rebuilds_on_the_amx_crash(self):
        self.assertEqual(tc.amx_workaround(self.AMX, "auto", False, windows=False)[0], "rebuild")

    def test_no_rebuild_otherwise(self):
        cases = [(None, "auto", False, False), (self.OTHER, "auto", False, False),
                 (self.AMX, "auto", True, False),      # already built without AMX: it is something else
                 (self.AMX, "never", False, False),
                 (self.AMX, "auto", False, True)]      # the aarch64 cross build has no AMX code
        for diag, mode, applied, cross in cases:
            action, reason = tc.amx_workaround(diag, mode, applied, cross=cross, windows=False)
            self.assertEqual(action, "none", reason)
            self.assertTrue(reason)

    def test_cmake_gets_the_flags_only_with_the_workaround(self):
        ap, args = t2p.parse_args(["--llama", "/x"])
        plain = t2p.cmake_args(args, "/x", "/x/b")
        off = t2p.cmake_args(args, "/x", "/x/b", no_amx=True)
        self.assertFalse(any("amx" in a for a in plain))
        for var in ("CMAKE_C_FLAGS", "CMAKE_CXX_FLAGS"):
            self.assertTrue(any(a.startswith(f"-D{var}=") and a.endswith(tc.AMX_OFF_FLAGS) for a in off), off)

    def test_flags_leave_amx_out_of_a_native_build(self):
        """The flags against the -march of an AMX CPU, in both orders (ggml puts -march=native after
        CMAKE_CXX_FLAGS): __AMX_INT8__ (which guards ggml's AMX code) gone, AVX-512 VNNI kept. GCC
        spells the macros __AMX_INT8__ / __AMX_TILE__, clang __AMXINT8__ / __AMXTILE__ (so a clang
        build never compiles ggml's AMX code); both spellings must go."""
        compilers = [c for c in ("g++", "clang++") if shutil.which(c)]
        if not compilers:
            self.skipTest("no g++ or clang++ to ask")
        for cxx in compilers:
            def macros(flags):
                p = subprocess.run([cxx] + flags + ["-dM", "-E", "-x", "c++", os.devnull],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                if p.returncode != 0:
                    self.skipTest(f"{cxx} does not know -march=sapphirerapids or the AMX flags: {p.stderr[:200]}")
                return p.stdout
            off = tc.AMX_OFF_FLAGS.split()
            def defined(m, *names):
                return any(f"#define {n} " in m for n in names)
            int8, tile = ("__AMX_INT8__", "__AMXINT8__"), ("__AMX_TILE__", "__AMXTILE__")
            self.assertTrue(defined(macros(["-march=sapphirerapids"]), *int8), cxx)
            for flags in (off + ["-march=sapphirerapids"], ["-march=sapphirerapids"] + off):
                m = macros(flags)
                self.assertFalse(defined(m, *int8), (cxx, flags))
                self.assertFalse(defined(m, *tile), (cxx, flags))
                self.assertIn("__AVX512VNNI__", m, (cxx, flags))


class Load(unittest.TestCase):
    def test_quiet(self):
        line, warn = tc.load_verdict((0.1, 0.2, 0.3), 0.05, 2, 2)
        self.assertIn("2 cores", line)
        self.assertIn("0.10 0.20 0.30", line)
        self.assertIsNone(warn)

    def test_busy_now_warns(self):
        _, warn = tc.load_verdict((0.5, 0.5, 0.5), 2.0, 2, 2)
        self.assertIn("WARNING", warn)
        self.assertIn("spin at barriers", warn)

    def test_average_above_cores_without_a_sample_warns(self):
        _, warn = tc.load_verdict((3.5, 1.0, 0.5), None, 2, 1)
        self.assertIn("WARNING", warn)
        self.assertIn("3.50 cores in use", warn)

    def test_average_left_by_a_build_is_only_a_note_when_the_cpu_is_idle_now(self):
        _, warn = tc.load_verdict((3.5, 1.0, 0.5), 0.02, 2, 2)
        self.assertTrue(warn.startswith("note:"), warn)

    def test_autogroup_says_nice_does_not_help(self):
        _, warn = tc.load_verdict((0.5, 0.5, 0.5), 2.0, 2, 2, autogroup=True)
        self.assertIn("sched_autogroup", warn)
        _, warn = tc.load_verdict((0.5, 0.5, 0.5), 2.0, 2, 2, autogroup=False)
        self.assertNotIn("sched_autogroup", warn)
        self.assertIsNone(tc.load_verdict((0.1, 0.2, 0.3), 0.05, 2, 2, autogroup=True)[1])

    def test_fewer_threads_fit(self):
        self.assertIsNone(tc.load_verdict((1.0, 1.0, 1.0), 1.0, 4, 2)[1])

    def test_this_machine(self):
        line, _ = tc.machine_load(1, seconds=0.2)
        self.assertIn(f"{os.cpu_count()} cores", line)


STANDIN_C = r"""
#include <immintrin.h>
#include <stdio.h>
__attribute__((noinline, target("amx-tile"))) void tinygemm_kernel_amx(const void *p) {
    _tile_loadd(0, p, 64);
}
int main(int argc, char **argv) {
    static char buf[1024];
    (void) argv;
    fprintf(stderr, "load_tensors:          AMX model buffer size =    0.50 MiB\n");
    if (argc > 0) tinygemm_kernel_amx(buf);
    puts("not reached");
    return 0;
}
"""


class StandIn(unittest.TestCase):
    """The real path on a program that dies the way the fork's AMX code does."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="t2p-sigill-")
        cls.prog = os.path.join(cls.tmp.name, "llama-standin")
        cls.why = None
        if platform.machine().lower() not in ("x86_64", "amd64") or not sys.platform.startswith("linux"):
            cls.why = f"the stand-in is x86-64 Linux code (this is {sys.platform} {platform.machine()})"
            return
        cc = next((c for c in ("cc", "gcc", "clang") if shutil.which(c)), None)
        if not cc:
            cls.why = "no C compiler to build the stand-in"
            return
        src = os.path.join(cls.tmp.name, "standin.c")
        with open(src, "w") as f:
            f.write(STANDIN_C)
        p = subprocess.run([cc, "-O2", src, "-o", cls.prog], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if p.returncode != 0:
            cls.why = f"{cc} cannot build the stand-in (needs -mamx-tile support): {p.stdout[:200]!r}"
        cls.model = os.path.join(cls.tmp.name, "m.gguf")
        open(cls.model, "wb").close()
        cls.text = os.path.join(cls.tmp.name, "t.txt")
        with open(cls.text, "w") as f:
            f.write("text\n")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def setUp(self):
        if self.why:
            self.skipTest(self.why)

    def test_it_dies_by_sigill(self):
        p = subprocess.run([self.prog], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.assertEqual(p.returncode, -signal.SIGILL)

    def test_run_checked_names_signal_function_instruction(self):
        info = {}
        out = os.path.join(self.tmp.name, "rc.log")
        secs = tc.run_checked("test", "run A", [self.prog], {}, out, info=info)
        self.assertIsNone(secs)
        self.assertEqual(info["rc"], -4)
        d = info["crash"]
        self.assertEqual(d["signal"], signal.SIGILL)
        self.assertTrue(d["amx"], d["text"])
        if shutil.which("gdb"):
            self.assertEqual(d["function"], "tinygemm_kernel_amx", d["text"])
            self.assertTrue(d["instruction"].startswith("tileloadd"), d["text"])
            self.assertTrue(os.path.isfile(out + ".gdb"))
        print("\n    run_checked: " + d["text"], file=sys.stderr)

    def test_without_gdb_the_log_still_tells(self):
        info = {}
        tc.run_checked("test", "run A", [self.prog], {}, os.path.join(self.tmp.name, "nogdb.log"), info=info,
                       gdb=False)
        self.assertTrue(info["crash"]["amx"])
        self.assertIsNone(info["crash"]["function"])

    def test_ab_reports_and_t2p_would_rebuild(self):
        status, res = ab.run(["--bench", self.prog, "-m", self.model, "--rounds", "1", "-t", "1",
                              "--out", os.path.join(self.tmp.name, "ab")])
        self.assertEqual(status, 1)
        self.assertEqual(res["failed"], "run A (round 1)")
        self.assertTrue(res["crash"]["amx"])
        self.assertTrue(any("SIGILL" in ln for ln in res["lines"]), res["lines"])
        self.assertTrue(res["lines"][0].startswith("machine: "), res["lines"])
        self.assertEqual(tc.amx_workaround(res["crash"], "auto", False, windows=False)[0], "rebuild")

    def test_ppl_check_reports(self):
        status, res = ppl_check.run(["--perplexity", self.prog, "-m", self.model, "-f", self.text,
                                     "--out", os.path.join(self.tmp.name, "ppl")])
        self.assertEqual(status, 1)
        self.assertTrue(res["crash"]["amx"])
        self.assertIn("run A did not finish: killed by SIGILL", res["lines"][0])
        self.assertEqual(res["lines"][-1], "ppl-check: FAIL (run A did not finish)")

    def test_t2p_run_checks_skips_the_bit_check_and_names_the_crash(self):
        ap, args = t2p.parse_args(["--llama", "/x"])
        bins = {"llama-bench": self.prog, "llama-perplexity": self.prog}
        runs = t2p.run_checks(args, bins, self.model, self.text, os.path.join(self.tmp.name, "t2p"), [], 1, 1,
                              8, 4, [])
        self.assertTrue(runs["crash"]["amx"])
        self.assertEqual(runs["crash_where"], "ab.py run A (round 1)")
        self.assertIn("skipped", runs["ppl"][1])


test_all = load("test_all_under_test", "test-all.py")


class StageFailure(unittest.TestCase):
    """A failed stage's reason reaches the end of test-all's log (a CI log cut in the middle keeps
    its end), with the free disk space."""

    def test_the_reason_lines_are_kept(self):
        lines = ["   Compiling a", "test result: ok. 3 passed; 0 failed; 0 ignored", "error: linking with `cc` failed: exit status: 1",
                 "  = note: No space left on device", "warning: x", "done"]
        self.assertEqual(test_all.error_lines(lines), [lines[2], lines[3]])

    def test_without_a_reason_the_last_lines(self):
        lines = [f"line {i}" for i in range(30)]
        self.assertEqual(test_all.error_lines(lines, keep=3), ["line 27", "line 28", "line 29"])

    def test_tee_puts_the_reason_in_the_failure(self):
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(test_all.StageFail) as e:
                test_all.tee([sys.executable, "-c", "print('ok'); print('error: the cause'); raise SystemExit(3)"],
                             os.path.join(d, "out"))
        self.assertIn("status 3", str(e.exception))
        self.assertIn("error: the cause", str(e.exception))

    def test_free_space_is_stated(self):
        text, low = test_all.free_space_text()
        self.assertRegex(text, r"checkout .*: \d+\.\d GiB free")
        self.assertEqual(low, min(shutil.disk_usage(test_all.ROOT).free,
                                  shutil.disk_usage(tempfile.gettempdir()).free) < test_all.LOW_DISK)


x86emu = load("x86_emu_under_test", "x86-emu.py")


class AptSources(unittest.TestCase):
    """tools/x86-emu.py takes the Debian archive from the system's apt sources (no address of its own).
    The URIs here are local folders: the repository names no archive host."""

    DEB822 = """Types: deb
# a comment between fields
URIs: file:/srv/mirror/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: file:/srv/mirror/debian-security
Suites: bookworm-security
Components: main

Types: deb
URIs: file:/srv/other
Suites: nodistro
Components: main
"""
    ONE_LINE = """# comment
deb [arch=amd64 signed-by=/etc/apt/k.gpg] file:/srv/one/debian/ trixie main contrib
deb-src file:/srv/src/debian trixie main
deb file:/srv/backports bookworm-backports main
"""

    def test_deb822(self):
        entries = x86emu.parse_deb822_sources(self.DEB822, "debian.sources")
        self.assertEqual(len(entries), 3)
        self.assertEqual(entries[0]["Suites"], ["bookworm", "bookworm-updates"])
        self.assertEqual(entries[0]["origin"], "debian.sources:1")
        self.assertEqual(x86emu.debian_archives(entries),
                         [("file:/srv/mirror/debian", "/usr/share/keyrings/debian-archive-keyring.gpg",
                           "debian.sources:1")])

    def test_one_line(self):
        entries = x86emu.parse_one_line_sources(self.ONE_LINE, "sources.list")
        self.assertEqual(len(entries), 3)
        self.assertEqual(x86emu.debian_archives(entries), [("file:/srv/one/debian", "/etc/apt/k.gpg", "sources.list:2")])

    def test_disabled_and_foreign_entries_are_skipped(self):
        text = self.DEB822.replace("Types: deb\n# a comment", "Types: deb\nEnabled: no\n# a comment")
        self.assertEqual(x86emu.debian_archives(x86emu.parse_deb822_sources(text, "d")), [])

    def test_no_archive_is_a_clear_error(self):
        with tempfile.TemporaryDirectory() as d:
            f = os.path.join(d, "x.list")
            with open(f, "w") as fh:
                fh.write("deb file:/srv/other nodistro main\n")
            with self.assertRaises(x86emu.ToolError) as e:
                x86emu.system_debian_archive([__import__("pathlib").Path(f)])
            self.assertIn("--mirror", str(e.exception))

    def test_no_archive_host_in_the_tool(self):
        with open(os.path.join(TOOLS, "x86-emu.py"), encoding="utf-8") as f:
            self.assertNotRegex(f.read(), r"https?://")


x86emutest = load("x86_emu_test_under_test", "x86-emu-test.py")


class BochsAmx(unittest.TestCase):
    """The edits that give Bochs XFD and fix its AMX bugs apply to the text they were made for and
    refuse any other (a different Bochs version fails loudly, not silently unpatched)."""

    def tree(self, d, drop=None, twice=None):
        top = __import__("pathlib").Path(d)
        texts = {}
        for rel, old, _new in x86emu.BOCHS_AMX_EDITS:
            texts.setdefault(rel, []).append(old)
        for rel, olds in texts.items():
            body = "\n/* filler */\n".join(o for o in olds if o != drop)
            if twice is not None and twice in olds:
                body += "\n" + twice
            (top / rel).parent.mkdir(parents=True, exist_ok=True)
            (top / rel).write_text("/* head */\n" + body + "\n/* tail */\n", encoding="latin-1")
        return top

    def test_edits_apply_once_each(self):
        with tempfile.TemporaryDirectory() as d:
            top = self.tree(d)
            x86emu.patch_bochs_amx(top)
            for rel, old, new in x86emu.BOCHS_AMX_EDITS:
                text = (top / rel).read_text(encoding="latin-1")
                self.assertIn(new, text, rel)

    def test_missing_or_repeated_text_is_refused(self):
        first = x86emu.BOCHS_AMX_EDITS[0][1]
        for kw in (dict(drop=first), dict(twice=first)):
            with tempfile.TemporaryDirectory() as d:
                top = self.tree(d, **kw)
                with self.assertRaises(x86emu.ToolError) as e:
                    x86emu.patch_bochs_amx(top)
                self.assertIn("not once", str(e.exception))

    def test_the_amx_set_is_emulated_only_where_the_cpu_lacks_it(self):
        self.assertEqual(x86emutest.default_sets(["avx2", "avx512vnni"]), ["avx2", "avxvnni", "amx"])
        self.assertEqual(x86emutest.default_sets(["avx2", "avxvnni", "avx512vnni", "amx"]), ["avx2"])
        self.assertEqual(x86emutest.default_sets(["avx2"]), ["avx2", "avxvnni", "avx512vnni", "spr", "amx"])
        self.assertIn("amx", x86emu.CPU_SETS)
        self.assertNotIn("amx", x86emu.CPU_SETS["amx"]["exclude"].split())


if __name__ == "__main__":
    unittest.main()
