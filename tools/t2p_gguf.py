#!/usr/bin/env python3
"""GGUF headers read and written by hand, for the tools that handle ternary models (peers.py,
convert-q2kt.py, make-test-model.py). Python 3 standard library only.

Not a command (`python3 tools/t2p_gguf.py --help` prints this). Why by hand: the `gguf` package
(0.19, tools/requirements.txt) reads and writes GGUF, but knows none of the fork's ternary type ids
(141 PQ2_0, 142/143 PTQ1_0): its reader rejects them and its writer takes only the tensor types it
knows. So: Header reads a GGUF v2/v3
header (metadata entries as raw bytes and scalar values, tensor infos, alignment, where the data
starts, each tensor's byte span); kv_uint32 / kv_float32 / kv_string make metadata entries,
tensor_info_bytes a tensor info, header_bytes a whole header with its padding, and place the
aligned offsets of the tensors that follow.
"""

from __future__ import annotations

import math
import os
import struct
import sys

MAGIC = b"GGUF"
# GGUF metadata value types -> fixed sizes and struct formats (8 = string and 9 = array are variable)
VT_UINT32, VT_FLOAT32, VT_STRING, VT_ARRAY = 4, 6, 8, 9
VT_SIZE = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
VT_FMT = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
DEFAULT_ALIGNMENT = 32


def align_up(n, a):
    """N rounded up to a multiple of A."""
    return (n + a - 1) // a * a


def _key(key):
    kb = key.encode("utf-8")
    return struct.pack("<Q", len(kb)) + kb


def kv_uint32(key, value):
    """The bytes of a metadata entry KEY = VALUE (uint32)."""
    return _key(key) + struct.pack("<II", VT_UINT32, value)


def kv_float32(key, value):
    """The bytes of a metadata entry KEY = VALUE (float32)."""
    return _key(key) + struct.pack("<If", VT_FLOAT32, value)


def kv_string(key, value):
    """The bytes of a metadata entry KEY = VALUE (a UTF-8 string)."""
    vb = value.encode("utf-8")
    return _key(key) + struct.pack("<IQ", VT_STRING, len(vb)) + vb


def tensor_info_bytes(name, dims, ttype, offset):
    """The bytes of a tensor info: NAME, its DIMS (ne0 first), type id TTYPE and OFFSET in the data."""
    return (_key(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", int(d)) for d in dims)
            + struct.pack("<IQ", ttype, offset))


def place(sizes, align):
    """The offsets of tensors of SIZES bytes laid out one after the other, each at a multiple of ALIGN."""
    out, off = [], 0
    for n in sizes:
        out.append(off)
        off = align_up(off + n, align)
    return out


def header_bytes(version, kv_entries, tensor_infos, align):
    """A whole GGUF header: magic, VERSION, the counts, the metadata entries KV_ENTRIES (bytes each),
    the tensor infos TENSOR_INFOS ([(name, dims, type id, offset)]), zero-padded to ALIGN (where the
    data starts)."""
    out = MAGIC + struct.pack("<IQQ", version, len(tensor_infos), len(kv_entries)) + b"".join(kv_entries)
    out += b"".join(tensor_info_bytes(*t) for t in tensor_infos)
    return out + bytes(align_up(len(out), align) - len(out))


class _Cursor:
    """Sequential reader over the start of a file; grows its buffer as parsing needs. ValueError
    ('truncated GGUF header') at the end of the file."""

    def __init__(self, f):
        self.f = f
        self.buf = bytearray()
        self.pos = 0

    def need(self, n):
        while len(self.buf) < self.pos + n:
            more = self.f.read(max(1 << 20, self.pos + n - len(self.buf)))
            if not more:
                raise ValueError("truncated GGUF header")
            self.buf += more

    def take(self, n):
        self.need(n)
        b = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return b

    def unpack(self, fmt):
        n = struct.calcsize(fmt)
        self.need(n)
        v = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += n
        return v

    def skip(self, n):
        self.need(n)
        self.pos += n


class TensorInfo:
    """A tensor of a GGUF header: name, dims (ne0 first), type id (ttype), offset in the data, n
    (elements), span (bytes up to the next tensor or the end of the file) and nbytes (the exact size,
    None until a caller that knows the type sets it)."""

    def __init__(self, name, dims, ttype, offset):
        self.name, self.dims, self.ttype, self.offset = name, dims, ttype, offset
        self.n = math.prod(dims)
        self.nbytes = None
        self.span = None


class Header:
    """The header of the GGUF file PATH: version, kv ([(key, raw bytes of the whole entry, value type,
    scalar or string value or None for arrays)], in file order), meta ({key: value}), tensors
    ([TensorInfo] in file order, each with its span), alignment (general.alignment, else 32),
    data_start, size (of the file).

    VERSIONS: the versions accepted (None: any from 2 on). Errors: ValueError for a file that is not
    GGUF ('not a GGUF file (bad magic)'), another version, a truncated header or a metadata value
    type it does not know; UnicodeDecodeError for a key or name that is not UTF-8 (STRICT true; else
    replaced); OSError when it cannot be read."""

    def __init__(self, path, versions=(2, 3), strict=True):
        self.path = path
        self.size = os.path.getsize(path)
        errors = "strict" if strict else "replace"
        with open(path, "rb") as f:
            c = _Cursor(f)
            if c.take(4) != MAGIC:
                raise ValueError("not a GGUF file (bad magic)")
            (self.version,) = c.unpack("<I")
            if versions is None and self.version < 2:
                raise ValueError(f"GGUF version {self.version} is too old")
            if versions is not None and self.version not in versions:
                raise ValueError(f"GGUF version {self.version} not supported "
                                 f"({' or '.join(str(v) for v in versions)})")
            n_t, n_kv = c.unpack("<QQ")
            self.kv = []
            for _ in range(n_kv):
                start = c.pos
                (klen,) = c.unpack("<Q")
                key = c.take(klen).decode("utf-8", errors)
                (vt,) = c.unpack("<I")
                value = None
                if vt in VT_FMT:
                    (value,) = c.unpack(VT_FMT[vt])
                elif vt == VT_STRING:
                    (n,) = c.unpack("<Q")
                    value = c.take(n).decode("utf-8", "replace")
                elif vt == VT_ARRAY:
                    self._skip_array(c, key)
                else:
                    raise ValueError(f"metadata {key}: unsupported value type {vt}")
                self.kv.append((key, bytes(c.buf[start:c.pos]), vt, value))
            self.tensors = []
            for _ in range(n_t):
                (nl,) = c.unpack("<Q")
                name = c.take(nl).decode("utf-8", errors)
                (nd,) = c.unpack("<I")
                dims = list(c.unpack(f"<{nd}Q"))
                tt, off = c.unpack("<IQ")
                self.tensors.append(TensorInfo(name, dims, tt, off))
            self.meta = dict((k, v) for k, _, _, v in self.kv)
            self.alignment = int(self.meta.get("general.alignment", DEFAULT_ALIGNMENT))
            self.data_start = align_up(c.pos, self.alignment)
        ordered = sorted(self.tensors, key=lambda t: t.offset)
        for i, t in enumerate(ordered):
            end = ordered[i + 1].offset if i + 1 < len(ordered) else self.size - self.data_start
            t.span = end - t.offset

    @staticmethod
    def _skip_array(c, key):
        at, n = c.unpack("<IQ")
        if at == VT_STRING:
            for _ in range(n):
                (sl,) = c.unpack("<Q")
                c.skip(sl)
        elif at == VT_ARRAY:
            for _ in range(n):
                Header._skip_array(c, key)
        elif at in VT_SIZE:
            c.skip(n * VT_SIZE[at])
        else:
            raise ValueError(f"metadata {key}: array of unsupported type {at}")

    def scalar(self, key, types):
        """The value of metadata entry KEY when its value type is one of TYPES, else None."""
        return next((v for k, _, vt, v in self.kv if k == key and vt in types), None)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0)
    sys.exit("t2p_gguf.py is a module of the Python tools in tools/, not a command")
