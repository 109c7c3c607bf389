#!/usr/bin/python3
"""Edits fields of a .pac file the way an attacker would, then makes every
checksum valid again (FORMAT.md sections 1 and 2), so that what a reader
sees past its checksums is exactly the edit.

Used by tests/security/hostile_pac_test.py, tests/spec/spec_test.py,
tests/python/test_hostile_files.py and tests/security/make_fuzz_regressions.py. Written
from layout/FORMAT.md, like tests/spec/pac_reader.py: no pacset code.
"""
import ctypes
import ctypes.util
import struct

_xxhash = ctypes.CDLL(ctypes.util.find_library("xxhash") or "libxxhash.so.0")
_xxhash.XXH3_64bits_withSeed.restype = ctypes.c_uint64
_xxhash.XXH3_64bits_withSeed.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint64]

UNIT = 16


def xxh3(data, seed=0):
    data = bytes(data)
    return _xxhash.XXH3_64bits_withSeed(data, len(data), seed)


class Pac:
    """A mutable .pac image with the header fields it needs to find things."""

    def __init__(self, data):
        self.data = bytearray(data)
        d = self.data
        self.version, self.header_size, self.block_size, self.section_count = \
            struct.unpack_from("<IIII", d, 8)
        self.payload = self.block_size - 16
        self.fixed = 144 if self.version >= 3 else 128

    @classmethod
    def load(cls, path):
        with open(path, "rb") as f:
            return cls(f.read())

    def save(self, path):
        with open(path, "wb") as f:
            f.write(self.data)

    # The header stream (section 2): header byte j lives at this file offset.
    def hoff(self, j):
        return (j // self.payload) * self.block_size + j % self.payload

    def hget(self, fmt, j):
        n = struct.calcsize(fmt)
        raw = bytes(self.data[self.hoff(j + i)] for i in range(n))
        return struct.unpack("<" + fmt, raw)[0]

    def hset(self, fmt, j, value):
        raw = struct.pack("<" + fmt, value)
        for i, byte in enumerate(raw):
            self.data[self.hoff(j + i)] = byte

    def file_id(self):
        return self.hget("Q", 128) if self.version >= 3 else 0

    def sections(self):
        out = {}
        for i in range(self.section_count):
            base = self.fixed + 32 * i
            stype = self.hget("I", base)
            out[stype] = (self.hget("Q", base + 8), self.hget("Q", base + 16),
                          self.hget("I", base + 24), base)
        return out

    def record_offset(self, stype, i):
        offset, _, rsize, _ = self.sections()[stype]
        bs = self.block_size
        c0 = (self.payload - offset % bs) // rsize
        per = self.payload // rsize
        if i < c0:
            return offset + i * rsize
        return (offset // bs + 1 + (i - c0) // per) * bs + ((i - c0) % per) * rsize

    def tree(self, t):
        """(root, group, root_kind) of tree t."""
        root, group, kind = struct.unpack_from("<QIB", self.data, self.record_offset(1, t))
        return root, group, kind

    def set_tree(self, t, root=None, group=None, kind=None):
        off = self.record_offset(1, t)
        r, g, k = self.tree(t)
        struct.pack_into("<QIB", self.data, off, r if root is None else root,
                         g if group is None else group, k if kind is None else kind)

    def compact(self):
        return self.hget("B", 37) == 0

    def node(self, ref):
        """(threshold, feature, flags, left, right) of the node at unit `ref`."""
        if self.compact():
            t, ff, left, right = struct.unpack_from("<fIII", self.data, ref * UNIT)
            return t, ff & 0xFFFFFF, ff >> 24, left, right
        t, f, flags, left, right = struct.unpack_from("<dIB3xQQ", self.data, ref * UNIT)
        return t, f, flags, left, right

    def set_node(self, ref, threshold=None, feature=None, flags=None, left=None, right=None):
        t, f, fl, lt, rt = self.node(ref)
        t = t if threshold is None else threshold
        f = f if feature is None else feature
        fl = fl if flags is None else flags
        lt = lt if left is None else left
        rt = rt if right is None else right
        if self.compact():
            struct.pack_into("<fIII", self.data, ref * UNIT, t, f | fl << 24, lt, rt)
        else:
            struct.pack_into("<dIB3xQQ", self.data, ref * UNIT, t, f, fl, lt, rt)

    def reseal(self):
        """Header checksum, then every block's trailer (index and checksum)."""
        hs = self.header_size
        stream = bytes(self.data[self.hoff(j)] for j in range(hs - 8))
        self.hset("Q", hs - 8, xxh3(stream))
        seed = self.file_id()
        bs = self.block_size
        for b in range(len(self.data) // bs):
            start = b * bs
            struct.pack_into("<Q", self.data, start + bs - 16, b)
            struct.pack_into("<Q", self.data, start + bs - 8,
                             xxh3(self.data[start:start + bs - 8], seed))
        return self
