#!/usr/bin/env python3
"""llama.cpp's RPC workers with ggml-t2p, on this machine's loopback: bit-identical logits, the speed
against stock workers, and a worker's answers to bad input (issue 36).

Starts --workers rpc-server processes on 127.0.0.1 (free ports, never another address), each with
-t THREADS, from a llama.cpp build made with the patch and -DGGML_RPC=ON (the patch teaches the
worker to keep its weights in ggml-t2p's buffer type), and then, each step bounded by --timeout:

  1. logits: tools/ppl-check.py, A = one process, B = the same llama-perplexity with every layer on
     the workers (--rpc ... -ngl 99, so the layers are split over them); PASS needs identical
     per-chunk values and log-prob files. The workers' own ggml-t2p lines follow (their share of the
     repack: "N tensors repacked ..." on each);
  2. speed (unless --no-bench): llama-bench through ggml-t2p workers, then through the same workers
     restarted with GGML_T2P=0 (stock code on the workers), one table;
  3. bad input (--bad-input): a client of the RPC protocol (versions 4 and 5), patched as llama.cpp's
     (it asks the worker the size of a quantized weight first, so the worker uses ggml-t2p's buffers),
     sends a worker: on one connection a repacked weight set whole and read back, one block of it
     replaced and read back, a copy out of it; then, each on a new connection, a tensor outside its
     buffer, a PTQ1_0 weight whose repack would pass the buffer's end, rows that are not whole
     blocks, a set_tensor shorter than its header and one cut off. Each refusal must close the
     connection before a GET_ALIGNMENT sent after it is answered, the cases the worker logs must log
     their error, and after each case the worker must answer a new connection (HELLO,
     GET_ALIGNMENT).

The workers are stopped at the end, also on failure or Ctrl-C. Exit status: 0 when every step
passed, 1 when one failed, 2 on bad arguments.
"""

import argparse
import json
import os
import random
import socket
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import t2p_common as tc  # noqa: E402

TOOL = "rpc-check"
HERE = os.path.dirname(os.path.abspath(__file__))
HOST = "127.0.0.1"

# ---------------------------------------------------------------------------------------------
# The RPC wire format (ggml/src/ggml-rpc/ggml-rpc.cpp, protocol 4 and 5: the same messages for
# what this tool sends). Request: command byte, u64 size, payload; reply: u64 size, payload. A
# worker that refuses a request closes the connection (that is its error reply).

CMD_ALLOC_BUFFER, CMD_GET_ALIGNMENT, CMD_BUFFER_GET_BASE, CMD_FREE_BUFFER = 0, 1, 3, 4
CMD_SET_TENSOR, CMD_GET_TENSOR, CMD_COPY_TENSOR, CMD_GET_ALLOC_SIZE, CMD_HELLO = 6, 8, 9, 13, 14
PROTOCOLS = (4, 5)
CONN_CAPS = 24           # bytes of the HELLO capabilities (zeros: plain TCP)
MAX_SRC = 10
# rpc_tensor, packed: id, type, buffer, ne[4], nb[4], op, op_params[16], flags, src[10], view_src,
# view_offs, data, name[64], 4 bytes (padding in 4.x, use_count in 5.x)
TENSOR = struct.Struct("<QIQ4I4II16ii10QQQQ64s4x")
assert TENSOR.size == 296
PQ2_0, PTQ1_0 = 142, 143
BLOCK_BYTES = {PQ2_0: 34, PTQ1_0: 28}   # per 128 weights


def tensor(type_id, ne0, ne1, buffer, data, name, tid=1):
    """An rpc_tensor of a row-major ne0 x ne1 matrix of a 128-weight block type."""
    row = ne0 // 128 * BLOCK_BYTES[type_id]
    nb = (BLOCK_BYTES[type_id], row, row * ne1, row * ne1)
    return TENSOR.pack(tid, type_id, buffer, ne0, ne1, 1, 1, *nb, 0, *([0] * 16), 0, *([0] * MAX_SRC), 0, 0, data,
                       name.encode()[:63])


def nbytes(type_id, ne0, ne1):
    return ne0 // 128 * BLOCK_BYTES[type_id] * ne1


class Closed(Exception):
    """The worker closed the connection (how it refuses a request)."""


class Conn:
    """One connection to a worker, after HELLO."""

    def __init__(self, port, timeout=30.0):
        self.s = socket.create_connection((HOST, port), timeout=timeout)
        major, minor, patch = self.hello()
        if major not in PROTOCOLS:
            self.close()
            raise RuntimeError(f"RPC protocol {major}.{minor}.{patch}: this tool speaks {PROTOCOLS}")
        self.version = f"{major}.{minor}.{patch}"

    def close(self):
        self.s.close()

    def send(self, cmd, payload, size=None):
        self.s.sendall(struct.pack("<BQ", cmd, len(payload) if size is None else size) + payload)

    def recv_exact(self, n):
        out = b""
        while len(out) < n:
            chunk = self.s.recv(n - len(out))
            if not chunk:
                raise Closed()
            out += chunk
        return out

    def reply(self):
        (n,) = struct.unpack("<Q", self.recv_exact(8))
        return self.recv_exact(n)

    def call(self, cmd, payload):
        self.send(cmd, payload)
        return self.reply()

    def hello(self):
        r = self.call(CMD_HELLO, bytes(CONN_CAPS))
        return r[0], r[1], r[2]

    def alignment(self):
        return struct.unpack("<Q", self.call(CMD_GET_ALIGNMENT, struct.pack("<I", 0)))[0]

    def alloc(self, size):
        ptr, got = struct.unpack("<QQ", self.call(CMD_ALLOC_BUFFER, struct.pack("<IQ", 0, size)))
        base = struct.unpack("<Q", self.call(CMD_BUFFER_GET_BASE, struct.pack("<Q", ptr)))[0]
        return ptr, got, base

    def alloc_size(self, t):
        """The worker's allocation size for `t` (buffer 0: the size in a new buffer). Asked for a
        quantized weight whose rows are a multiple of 512 elements, it also tells a patched worker
        that this client asks for every quantized weight, so that the worker may repack them."""
        return struct.unpack("<Q", self.call(CMD_GET_ALLOC_SIZE, struct.pack("<I", 0) + t + bytes(TENSOR.size * MAX_SRC)))[0]

    def set_tensor(self, t, offset, data):
        self.send(CMD_SET_TENSOR, t + struct.pack("<Q", offset) + data)   # no reply

    def get_tensor(self, t, offset, size):
        return self.call(CMD_GET_TENSOR, t + struct.pack("<QQ", offset, size))

    def copy_tensor(self, src, dst):
        return self.call(CMD_COPY_TENSOR, src + dst)[0]


def pq2_blocks(rng, n):
    """n PQ2_0 blocks: fp16 scale 1.0, codes 0..2."""
    out = b""
    for _ in range(n):
        codes = [rng.randrange(3) for _ in range(128)]
        qs = bytes(sum(codes[4 * i + j] << (2 * j) for j in range(4)) for i in range(32))
        out += struct.pack("<e", 1.0) + qs
    return out


def bad_input(port, log_path, say):
    """The bad-input cases against the worker on `port`; returns the failures (empty: passed)."""
    failures = []
    rng = random.Random(36)

    def log_since(pos):
        text = tc.read_text(log_path)
        lines = [line for line in text[pos:].splitlines() if line and "connection" not in line]
        return len(text), "; ".join(lines[-2:]) or "(nothing logged)"

    def alive():
        c = Conn(port)
        ok = c.alignment() > 0
        c.close()
        return ok

    pos = len(tc.read_text(log_path))
    c = Conn(port)
    say(f"bad input: worker 127.0.0.1:{port}, RPC protocol {c.version}")
    ne0, ne1 = 512, 32                      # two row tiles of 16, four blocks per row
    size = nbytes(PQ2_0, ne0, ne1)

    def fresh_buffer(conn, n):
        conn.alloc_size(tensor(PQ2_0, ne0, ne1, 0, 0, "size"))   # a patched client's first question
        return conn.alloc(n)

    ptr, got, base = fresh_buffer(c, 4 * size)
    w = tensor(PQ2_0, ne0, ne1, ptr, base, "w")
    src = pq2_blocks(rng, ne0 // 128 * ne1)
    c.set_tensor(w, 0, src)
    back = c.get_tensor(w, 0, size)
    part = pq2_blocks(rng, 1)
    c.set_tensor(w, 34, part)               # block 1 of row 0 only: read, replaced, repacked again
    back2 = c.get_tensor(w, 0, size)
    want2 = src[:34] + part + src[68:]
    cases = [("a repacked PQ2_0 weight read back (get_tensor)", back == src,
              f"{len(back)} bytes, {'the bytes that were set' if back == src else 'OTHER bytes'}"),
             ("one block of it set (a partial set_tensor), then read back", back2 == want2,
              "the tensor with that block replaced" if back2 == want2 else "OTHER bytes")]
    for what, ok, reply in cases:
        pos, logged = log_since(pos)
        say(f"  {what}: {reply}; worker log: {logged}; {'ok' if ok else 'FAILED'}")
        if not ok:
            failures.append(what)

    # copy out of a repacked weight: refused with result 0, the connection kept
    other = tensor(PQ2_0, ne0, ne1, ptr, base + size, "w2", tid=2)
    result = c.copy_tensor(w, other)
    c.close()   # (a worker serves one connection at a time)
    pos, logged = log_since(pos)
    ok = result == 0 and alive()   # (and so after the two cases above)
    say(f"  copy_tensor out of a repacked weight: result {result}; worker log: {logged}; "
        f"{'ok, worker answers' if ok else 'FAILED'}")
    if not ok:
        failures.append("copy_tensor")

    def refused(what, send, logs=None, cut=False):
        """`send(conn)` must make the worker close the connection: a GET_ALIGNMENT sent after it on
        the same connection must get no answer (with `cut`, the request itself is left unfinished
        and the stream closed instead); the worker's log must hold `logs` when given; then it must
        answer a new connection."""
        nonlocal pos
        conn = Conn(port)
        conn.s.settimeout(30.0)
        try:
            send(conn)
            if cut:
                conn.s.shutdown(socket.SHUT_WR)
                conn.reply()
            else:
                conn.call(CMD_GET_ALIGNMENT, struct.pack("<I", 0))
            outcome = "answered (expected a refusal)"
        except (Closed, ConnectionError):
            outcome = "connection closed (refused)"
        except socket.timeout:
            outcome = "no answer within 30 s"
        conn.close()
        time.sleep(0.2)
        pos, logged = log_since(pos)
        ok = outcome.startswith("connection closed") and (logs is None or logs in logged) and alive()
        say(f"  {what}: {outcome}; worker log: {logged}; {'ok, worker answers' if ok else 'FAILED'}")
        if not ok:
            failures.append(what)

    def out_of_bounds(conn):
        p, g, b = fresh_buffer(conn, size)
        conn.set_tensor(tensor(PQ2_0, ne0, ne1, p, b + g - 100, "past-the-end"), 0, src)

    def repack_past_end(conn):
        # a PTQ1_0 repack is larger than its source here: X16 at 2.125 bits per weight, or L64
        # (1.75 bits, with AVX-512 VBMI) whose 32 rows are padded to a 64-row tile
        n = nbytes(PTQ1_0, ne0, ne1)
        p, g, b = fresh_buffer(conn, n)
        conn.set_tensor(tensor(PTQ1_0, ne0, ne1, p, b, "ptq1"), 0, bytes(n))

    def not_whole_blocks(conn):
        p, g, b = fresh_buffer(conn, size)
        t = bytearray(tensor(PQ2_0, ne0, ne1, p, b, "rows-of-100"))
        struct.pack_into("<I", t, 20, 100)   # ne[0] = 100: no whole 128-weight blocks
        conn.set_tensor(bytes(t), 0, src[:100])

    def shorter_than_header(conn):
        conn.send(CMD_SET_TENSOR, b"\0" * 100)   # less than an rpc_tensor and its offset

    def cut_off(conn):
        p, g, b = fresh_buffer(conn, size)
        payload = tensor(PQ2_0, ne0, ne1, p, b, "cut") + struct.pack("<Q", 0) + src[:500]
        conn.send(CMD_SET_TENSOR, payload, size=TENSOR.size + 8 + size)   # says more than it sends

    ptq1_known = True
    try:
        probe = Conn(port)
        a = probe.alloc_size(tensor(PTQ1_0, ne0, ne1, 0, 0, "probe"))
        probe.close()
        say(f"  (a {ne1} x {ne0} PTQ1_0 weight: {nbytes(PTQ1_0, ne0, ne1)} bytes, {a} allocated on the worker)")
    except (Closed, ConnectionError):
        ptq1_known = False
        pos, _ = log_since(pos)
        say("  (this worker's ggml has no PTQ1_0: that case is left out)")
    refused("a tensor past its buffer's end", out_of_bounds, logs="out of its buffer")
    if ptq1_known:
        refused("a PTQ1_0 weight whose repack passes the buffer's end", repack_past_end, logs="out of its buffer")
    refused("a PQ2_0 tensor with 100 weights per row", not_whole_blocks, logs="not whole blocks")
    refused("a set_tensor shorter than its header", shorter_than_header)
    refused("a set_tensor cut off before its declared size", cut_off, cut=True)
    return failures


# ---------------------------------------------------------------------------------------------
# Workers

def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


class Workers:
    """rpc-server processes on 127.0.0.1; stopped by stop() (and never outliving this tool)."""

    def __init__(self, binary, n, threads, out, say):
        self.binary, self.n, self.threads, self.out, self.say = binary, n, threads, out, say
        self.procs, self.ports, self.logs = [], [], []

    def start(self, env_over, tag):
        env = dict(os.environ)
        env.update(env_over)
        for i in range(self.n):
            port = free_port()
            log = os.path.join(self.out, f"worker-{tag}-{i + 1}.log")
            with open(log, "w") as fh:
                p = subprocess.Popen([self.binary, "-H", HOST, "-p", str(port), "-t", str(self.threads)],
                                     stdout=fh, stderr=subprocess.STDOUT, env=env)
            self.procs.append(p)
            self.ports.append(port)
            self.logs.append(log)
        # listening once a connection is accepted (its stdout is block-buffered into the log, so the
        # banner is no sign); the probe closes at once, which the worker takes as a client leaving
        deadline = time.monotonic() + 60
        for p, port, log in zip(self.procs, self.ports, self.logs):
            while True:
                if p.poll() is not None:
                    raise RuntimeError(f"rpc-server on port {port} exited (status {p.returncode}): {tc.tail(log, 5)}")
                try:
                    socket.create_connection((HOST, port), timeout=1.0).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"rpc-server on port {port} did not listen within 60 s") from None
                    time.sleep(0.1)
        self.say(f"workers ({tag}): " + ", ".join(f"{HOST}:{p}" for p in self.ports)
                 + (f" with {' '.join(f'{k}={v}' for k, v in env_over.items())}" if env_over else ""))

    def endpoints(self):
        return ",".join(f"{HOST}:{p}" for p in self.ports)

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs, self.ports = [], []

    def t2p_lines(self):
        return [(os.path.basename(log), line) for log in self.logs for line in tc.t2p_lines(tc.read_text(log))]


# ---------------------------------------------------------------------------------------------

def parser():
    ap = argparse.ArgumentParser(
        prog="tools/rpc-check.py", formatter_class=argparse.RawDescriptionHelpFormatter,
        description=__doc__.split("\n\n")[0],
        epilog=__doc__[__doc__.index("\n\n") + 2:] + "\nexamples:\n"
               "  tools/rpc-check.py --bin llama.cpp/build-rpc/bin -m model-pq2_0.gguf\n"
               "  tools/rpc-check.py --bin llama.cpp/build-rpc/bin -m m.gguf --workers 3 -t 2 --bad-input")
    ap.add_argument("--bin", required=True, metavar="DIR",
                    help="folder with rpc-server, llama-perplexity and llama-bench of a build with the patch and "
                         "-DGGML_RPC=ON")
    ap.add_argument("-m", "--model", required=True, metavar="GGUF", help="a PQ2_0/PTQ1_0 model")
    ap.add_argument("--text", metavar="TXT", help="text for llama-perplexity (default: tools/t2p.py's)")
    ap.add_argument("--workers", type=int, default=2, metavar="N", help="rpc-server processes (default 2)")
    ap.add_argument("-t", "--threads", type=int, default=1, metavar="N",
                    help="threads of each worker and of the client (default 1)")
    ap.add_argument("-c", type=int, default=128, metavar="N", help="perplexity context (default 128)")
    ap.add_argument("--chunks", type=int, default=2, metavar="N", help="perplexity chunks (default 2)")
    ap.add_argument("-p", type=int, default=64, metavar="N", help="llama-bench prompt tokens (default 64)")
    ap.add_argument("-n", type=int, default=16, metavar="N", help="llama-bench generated tokens (default 16)")
    ap.add_argument("-r", "--repetitions", type=int, default=2, metavar="N", help="llama-bench -r (default 2)")
    ap.add_argument("--timeout", type=int, default=1800, metavar="S",
                    help="the whole run's limit in seconds (default 1800)")
    ap.add_argument("--no-bench", action="store_true", help="skip the speed step")
    ap.add_argument("--bad-input", action="store_true", help="also send a worker the bad-input cases")
    ap.add_argument("--out", metavar="DIR", help="logs (default: a new temporary folder)")
    return ap


def main(argv):
    ap = parser()
    args = ap.parse_args(argv)
    if args.workers < 1 or args.threads < 1 or args.c < 1 or args.chunks < 1 or args.timeout < 60:
        ap.error("--workers, -t, -c and --chunks take 1 or more; --timeout 60 or more")
    bins = {}
    for name in ("rpc-server", "llama-perplexity", "llama-bench"):
        path = os.path.join(args.bin, name + (".exe" if os.name == "nt" else ""))
        if not tc.is_executable(path):
            ap.error(f"{path} not found: build llama.cpp with the patch and -DGGML_RPC=ON (docs/building.md)")
        bins[name] = path
    if not os.path.isfile(args.model):
        ap.error(f"--model {args.model}: no such file")
    say = lambda msg: tc.say(TOOL, msg)  # noqa: E731
    out = args.out or tempfile.mkdtemp(prefix="rpc-check-")
    os.makedirs(out, exist_ok=True)
    text = args.text
    if text is None:
        import importlib
        text = importlib.import_module("t2p").make_text()[0]
    deadline = time.monotonic() + args.timeout
    left = lambda: max(1, int(deadline - time.monotonic()))  # noqa: E731
    workers = Workers(bins["rpc-server"], args.workers, args.threads, out, say)
    failed = []
    try:
        workers.start({}, "t2p")
        # 1. logits: one process against the layers on the workers
        cmd = [sys.executable, os.path.join(HERE, "ppl-check.py"), "--perplexity", bins["llama-perplexity"],
               "-m", args.model, "-f", text, "-c", str(args.c), "--chunks", str(args.chunks), "-t", str(args.threads),
               "--a-env", "", "--b-env", "", "--b-args", f"--rpc {workers.endpoints()} -ngl 99",
               "--out", os.path.join(out, "ppl")]
        say("logits: " + " ".join(cmd[1:]))
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=left())
        for line in r.stdout.splitlines():
            if line.startswith(("A: [", "B: [", "per-chunk", "log-prob", "ppl-check: PASS", "ppl-check: FAIL")):
                say("  " + line)
        if r.returncode != 0:
            failed.append("logits")
            say("  " + (r.stdout + r.stderr).strip().splitlines()[-1])
        for log, line in workers.t2p_lines():
            say(f"  {log}: {line}")
        # 3. bad input, against the first ggml-t2p worker
        if args.bad_input:
            failed += bad_input(workers.ports[0], workers.logs[0], say)
        # 2. speed: ggml-t2p workers, then stock workers
        if not args.no_bench:
            rows = {}
            for tag, env in (("t2p", {}), ("stock", {"GGML_T2P": "0"})):
                if tag == "stock":
                    workers.stop()
                    workers.start(env, tag)
                cmd = [bins["llama-bench"], "-m", args.model, "-rpc", workers.endpoints(), "-ngl", "99",
                       "-p", str(args.p), "-n", str(args.n), "-t", str(args.threads), "-r", str(args.repetitions),
                       "-mmp", "0", "-o", "json"]
                say(f"speed ({tag} workers): " + " ".join(cmd[1:]))
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=left())
                if r.returncode != 0:
                    failed.append(f"llama-bench through {tag} workers")
                    say(f"  failed (status {r.returncode}): {r.stderr.strip().splitlines()[-1:]}")
                    continue
                for t in json.loads(r.stdout):
                    test = f"pp{t['n_prompt']}" if t["n_prompt"] else f"tg{t['n_gen']}"
                    rows.setdefault(test, {})[tag] = t["avg_ts"]
            say(f"{'test':<8} {'stock workers':>14} {'ggml-t2p workers':>17} {'ratio':>7}   (t/s, {args.workers} workers "
                f"x {args.threads} threads, loopback)")
            for test, v in rows.items():
                ratio = f"{v['t2p'] / v['stock']:.1f}x" if "t2p" in v and "stock" in v else "-"
                say(f"{test:<8} {v.get('stock', float('nan')):>14.2f} {v.get('t2p', float('nan')):>17.2f} {ratio:>7}")
    except subprocess.TimeoutExpired as e:
        failed.append(f"time limit ({args.timeout} s) reached during {os.path.basename(e.cmd[0])}")
    except (RuntimeError, OSError, Closed) as e:
        failed.append(str(e) or type(e).__name__)
    finally:
        workers.stop()
    say(f"logs: {out}")
    if failed:
        say("FAIL: " + "; ".join(failed))
        return 1
    say("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
