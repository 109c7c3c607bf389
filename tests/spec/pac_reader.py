#!/usr/bin/python3
"""An independent .pac reader, written from layout/FORMAT.md alone.

It reads a .pac file and predicts margins, outputs and leaf ids the way the
format document says, without looking at pacset's code; tests/spec/
spec_test.py compares it bit for bit with `pacset predict`. Where the two
disagree, the document is wrong or incomplete (or the code is).

Dependencies: numpy, and through ctypes the system's libxxhash (XXH3-64) and
libm (`exp`, `expf`, which FORMAT.md names).

usage: pac_reader.py FILE.pac --input rows.csv [--margin | --leaf] [--mmap]
       pac_reader.py FILE.pac --check [--mmap]
"""
import argparse
import ctypes
import ctypes.util
import math
import mmap
import struct
import sys

import numpy as np

MAGIC = b"PACSET\r\n"
UNIT = 16

_xxhash = ctypes.CDLL(ctypes.util.find_library("xxhash") or "libxxhash.so.0")
_xxhash.XXH3_64bits_withSeed.restype = ctypes.c_uint64
_xxhash.XXH3_64bits_withSeed.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint64]
_libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
_libm.expf.restype = ctypes.c_float
_libm.expf.argtypes = [ctypes.c_float]
_libm.exp.restype = ctypes.c_double
_libm.exp.argtypes = [ctypes.c_double]

F32 = np.float32
Z32 = F32(1e-35)           # FORMAT.md §3: z = (double)1e-35f
Z64 = float(Z32)


class PacError(Exception):
    pass


def xxh3(data, seed=0):
    return _xxhash.XXH3_64bits_withSeed(bytes(data), len(data), seed)


def expf(x):
    return F32(_libm.expf(float(x)))


def exp(x):
    return _libm.exp(float(x))


class PacFile:
    """§1-§3 and §5 of FORMAT.md."""

    HEADER = struct.Struct("<8sIIIIQBBBBBBBBIIIIQQQdIIQQQII")

    def __init__(self, path, mapped=False):
        """The whole file is read, or with `mapped` mapped (MAP_SHARED,
        read-only): then only the pages the checks and walks touch are
        faulted in, as a page-faulting engine reads them."""
        with open(path, "rb") as f:
            self.data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if mapped else f.read()
        self.path = path
        d = self.data
        if len(d) < 136 or d[:8] != MAGIC:
            raise PacError(f"{path}: not a .pac file")
        (magic, self.version, self.header_size, self.block_size, self.section_count,
         self.block_count, self.task, self.postprocess, self.aggregation, self.input_precision,
         self.accumulate_precision, self.node_format, self.layout, self.cardinality_source,
         self.num_features, self.num_outputs, self.num_classes, self.leaf_width, self.num_trees,
         self.num_nodes, self.num_leaf_records, self.sigmoid_alpha, self.bin_depth,
         self.trees_per_bin, self.node_first_block, self.node_block_count, self.bin_block_count,
         self.max_depth, _reserved) = self.HEADER.unpack_from(d, 0)
        # §5 rules 1-11 (the header), numbered as there.
        if self.version not in (1, 2, 3):
            raise PacError(f"{path}: version {self.version}")
        # §2: version 3's fixed part adds file_id, the seed of every block checksum.
        self.fixed = 144 if self.version == 3 else 128
        self.file_id = struct.unpack_from("<Q", d, 128)[0] if self.version == 3 else 0
        bs = self.block_size
        if self.section_count > 1024 or \
                self.header_size != self.fixed + 32 * self.section_count + 8:
            raise PacError(f"{path}: bad header size")
        if bs < 256 or bs > 1048576 or bs & (bs - 1):
            raise PacError(f"{path}: block size {bs}")
        self.payload = P = bs - 16
        if self.version == 1 and (bs < 4096 or self.header_size > P):
            raise PacError(f"{path}: version 1 needs 4 KiB blocks and the header in block 0")
        # §2: the header stream, gathered from the payloads of blocks 0, 1, ...
        header_blocks = -(-self.header_size // P)
        if header_blocks * bs > len(d):
            raise PacError(f"{path}: truncated header")
        h = b"".join(d[b * bs:b * bs + P] for b in range(header_blocks))
        h = h[:self.header_size]
        (hsum,) = struct.unpack_from("<Q", h, self.header_size - 8)
        if hsum != xxh3(h[:self.header_size - 8]):
            raise PacError(f"{path}: header checksum")
        if (self.postprocess > 6 or self.aggregation > 1 or self.input_precision > 1
                or self.accumulate_precision > 1 or self.node_format > 1):
            raise PacError(f"{path}: unknown enumeration value")
        K = self.num_outputs
        if not 1 <= K <= 1 << 20 or self.leaf_width not in (1, K):
            raise PacError(f"{path}: output count {K}, leaf width {self.leaf_width}")
        if (self.postprocess == 2 and K < 2) or (self.postprocess in (5, 6) and K != 1):
            raise PacError(f"{path}: postprocess {self.postprocess} with {K} outputs")
        if self.postprocess == 6 and self.accumulate_precision != 1:
            raise PacError(f"{path}: isolation score with float32 accumulation")
        if not math.isfinite(self.sigmoid_alpha):
            raise PacError(f"{path}: sigmoid alpha")
        if self.num_features < 1 or self.num_trees < 1:
            raise PacError(f"{path}: no features or no trees")
        if self.max_depth > 1 << 24:
            raise PacError(f"{path}: max depth")
        if not 1 <= self.block_count <= 1 << 40 or len(d) != self.block_count * bs:
            raise PacError(f"{path}: size {len(d)} != block_count * block_size")
        nfb, nbc = self.node_first_block, self.node_block_count
        if nfb < 1 or nbc < 1 or nfb + nbc > self.block_count or self.bin_block_count > nbc:
            raise PacError(f"{path}: node region")
        U = nbc * P // UNIT
        n = 1 if self.node_format == 0 else 2
        r = -(-8 * self.leaf_width // UNIT)
        if (self.num_nodes > U // n
                or self.num_leaf_records > (U - self.num_nodes * n) // r
                or (self.num_leaf_records > 0 and 16 * r > P)):
            raise PacError(f"{path}: node and leaf-record counts do not fit the node region")
        # Rules 12-18 (sections).
        self.sections = {}
        seen_types = set()
        for i in range(self.section_count):
            stype, flags, offset, count, rsize, _ = struct.unpack_from("<IIQQII", h,
                                                                      self.fixed + 32 * i)
            if stype in seen_types:
                raise PacError(f"{path}: section type {stype} twice")
            seen_types.add(stype)
            if stype not in (1, 2, 3, 4, 5, 6, 7, 8):
                if flags & 1:
                    raise PacError(f"{path}: required section type {stype} unknown")
                continue
            if rsize != {1: 16, 2: 8, 3: 16, 4: 1, 5: 8, 6: 4, 7: 16, 8: 8}[stype]:
                raise PacError(f"{path}: section {stype} record size {rsize}")
            self.sections[stype] = (offset, count, rsize)
            if count > 0:
                if offset % bs + rsize > P:
                    raise PacError(f"{path}: section {stype} starts in a trailer")
                if self.record_offset(stype, count - 1) + rsize > len(d):
                    raise PacError(f"{path}: section {stype} past the end")
            end = self.record_offset(stype, count - 1) + rsize if count else offset
            if stype in (1, 2, 4, 6, 7, 8) and end > nfb * bs:
                raise PacError(f"{path}: section {stype} outside the metadata blocks")
            if stype == 3 and (offset != nfb * bs or count != U):
                raise PacError(f"{path}: the nodes section is not the node region")
            if stype == 5 and (offset < (nfb + nbc) * bs or count < U):
                raise PacError(f"{path}: the leaf-id section does not follow the node region")
        for required in (1, 2, 3):
            if required not in self.sections:
                raise PacError(f"{path}: section {required} missing")
        if self.sections[1][1] != self.num_trees or self.sections[2][1] != K:
            raise PacError(f"{path}: tree table or base score count")
        if (6 in self.sections) != (7 in self.sections):
            raise PacError(f"{path}: category words without categorical splits or the reverse")
        n_params = 2 if self.postprocess == 6 else 0
        if self.sections.get(8, (0, 0, 8))[1] != n_params or (8 in self.sections) != (n_params > 0):
            raise PacError(f"{path}: postprocess {self.postprocess} parameter count")
        self.verified = set()
        # §5 Blocks: the metadata blocks when the file is opened.
        for b in range(nfb):
            self.check_block(b)
        self.node_lo = nfb * bs // UNIT
        self.node_hi = (nfb + nbc) * bs // UNIT
        # Rules 19-20 (tree table, base score).
        self.trees = []
        for t in range(self.num_trees):
            root, group, kind = struct.unpack_from("<QIB", d, self.record_offset(1, t))
            if group >= K:
                raise PacError(f"{path}: tree {t} has output group {group}")
            if kind > 3:
                raise PacError(f"{path}: tree {t} root kind {kind}")
            if kind == 0:
                self.check_node_ref(root)
            elif kind == 1:
                self.check_record_ref(root)
            elif kind == 3 and root >= K:
                raise PacError(f"{path}: tree {t} class {root}")
            self.trees.append((root, group, kind))
        self.base_score = [struct.unpack_from("<d", d, self.record_offset(2, k))[0]
                           for k in range(K)]
        if any(math.isnan(b) for b in self.base_score):
            raise PacError(f"{path}: base score is NaN")
        self.postprocess_params = [struct.unpack_from("<d", d, self.record_offset(8, i))[0]
                                   for i in range(n_params)]
        if not all(math.isfinite(v) for v in self.postprocess_params) or \
                (self.postprocess == 6 and self.postprocess_params[0] < 0):
            raise PacError(f"{path}: postprocess parameters")
        # Rule 20, categorical splits: known rule, sets inside the words.
        self.splits = []
        self.words = []
        if 7 in self.sections:
            nwords, nsplits = self.sections[6][1], self.sections[7][1]
            if nwords > 1 << 32 or nsplits > 1 << 32:
                raise PacError(f"{path}: too many category words or splits")
            self.words = [struct.unpack_from("<I", d, self.record_offset(6, i))[0]
                          for i in range(nwords)]
            for i in range(nsplits):
                lf, rf, lw, rw, rule = struct.unpack_from("<IIHHB", d, self.record_offset(7, i))
                if rule > 2 or lf + lw > nwords or rf + rw > nwords:
                    raise PacError(f"{path}: categorical split {i}")
                self.splits.append((lf, lw, rf, rw, rule))

    def check_node_ref(self, ref):
        """Rule 21."""
        size = 16 if self.node_format == 0 else 32
        if not (self.node_lo <= ref and ref * UNIT + size <= self.node_hi * UNIT) or \
                (ref * UNIT) % self.block_size + size > self.payload:
            raise PacError(f"{self.path}: node reference {ref} outside the node region")

    def check_record_ref(self, ref):
        """Rule 24."""
        size = -(-8 * self.leaf_width // UNIT) * UNIT
        if not (self.node_lo <= ref and ref * UNIT + size <= self.node_hi * UNIT) or \
                (ref * UNIT) % self.block_size + size > self.payload:
            raise PacError(f"{self.path}: leaf record {ref} outside the node region")

    def check_structure(self):
        """Rules 26-27: every internal node reached once; the header's counts exact."""
        seen = set()
        nodes = records = 0
        for t, (root, _, kind) in enumerate(self.trees):
            if kind == 1:
                records += 1
            if kind != 0:
                continue
            stack = [(root, 0)]
            while stack:
                ref, depth = stack.pop()
                if depth > self.max_depth:
                    raise PacError(f"{self.path}: tree {t} deeper than max_depth")
                units = (ref,) if self.node_format == 0 else (ref, ref + 1)
                if any(u in seen for u in units):
                    raise PacError(f"{self.path}: tree {t} reaches a node twice")
                seen.update(units)
                nodes += 1
                t, f, flags, left, right = self.node(ref)
                self.check_node(f, flags, t)
                for child, ck in ((left, (flags >> 3) & 3), (right, (flags >> 5) & 3)):
                    if ck == 0:
                        stack.append((child, depth + 1))
                    elif ck == 1:
                        self.check_record_ref(child)
                        records += 1
                    elif ck == 3 and child >= self.num_outputs:
                        raise PacError(f"{self.path}: class {child} out of range")
        if nodes != self.num_nodes or records != self.num_leaf_records:
            raise PacError(f"{self.path}: {nodes} nodes and {records} leaf records, the header "
                           f"says {self.num_nodes} and {self.num_leaf_records}")

    # §1: a block is valid when its checksum matches and block_index == b.
    def check_block(self, b):
        if b in self.verified:
            return
        bs = self.block_size
        blk = self.data[b * bs:(b + 1) * bs]
        index, checksum = struct.unpack_from("<QQ", blk, bs - 16)
        if index != b or checksum != xxh3(blk[:bs - 8], self.file_id):
            raise PacError(f"{self.path}: block {b} is corrupt")
        self.verified.add(b)

    def read(self, offset, size):
        """Bytes [offset, offset+size) of one payload, its block checked first."""
        b = offset // self.block_size
        if offset % self.block_size + size > self.payload or b >= self.block_count:
            raise PacError(f"{self.path}: record at {offset} crosses a trailer")
        self.check_block(b)
        return self.data[offset:offset + size]

    # §2: records flow through block payloads.
    def record_offset(self, stype, i):
        offset, count, rsize = self.sections[stype]
        if i >= count:
            raise PacError(f"{self.path}: record {i} of section {stype} out of range")
        bs = self.block_size
        o = offset % bs
        c0 = (self.payload - o) // rsize
        per = self.payload // rsize
        if i < c0:
            return offset + i * rsize
        return (offset // bs + 1 + (i - c0) // per) * bs + ((i - c0) % per) * rsize

    def node(self, ref):
        """(threshold, feature, flags, left, right) of the node at unit `ref`;
        for a categorical node (flag bit 7) the threshold is its split index,
        the field's bits read as an unsigned integer (§3)."""
        size = 16 if self.node_format == 0 else 32
        self.check_node_ref(ref)
        raw = self.read(ref * UNIT, size)
        if self.node_format == 0:
            t, ff, left, right = struct.unpack("<fIII", raw)
            if ff >> 24 & 0x80:
                t = struct.unpack_from("<I", raw)[0]
            else:
                t = F32(t)
            return t, ff & 0xFFFFFF, ff >> 24, left, right
        t, feature, flags, left, right = struct.unpack("<dIB3xQQ", raw)
        if flags & 0x80:
            t = struct.unpack_from("<Q", raw)[0]
        return t, feature, flags, left, right

    def check_node(self, feature, flags, t):
        """Rule 22."""
        if feature >= self.num_features:
            raise PacError(f"{self.path}: feature {feature} out of range")
        if flags & 0x80 and (t >= len(self.splits) or (flags >> 1) & 3 == 3):
            raise PacError(f"{self.path}: categorical node names split {t} "
                           f"or outside direction 3")

    def leaf_ids(self, ref):
        """§3 Leaf ids: the two child ids of the internal node at unit `ref`."""
        if 5 not in self.sections:
            raise PacError(f"{self.path}: no leaf-id section")
        rel = ref - self.node_first_block * self.block_size // UNIT
        B = self.block_size // UNIT
        Pu = (self.block_size - 16) // UNIT
        i = (rel // B) * Pu + rel % B
        return struct.unpack("<II", self.read(self.record_offset(5, i), 8))


def round_input(pac, row):
    """Routing step 1."""
    if pac.input_precision == 0:
        with np.errstate(over="ignore"):
            return [F32(v) for v in row]
    return [float(v) for v in row]


def category(x, rule):
    """§3 categorical routing step 2: the category of x (not NaN), or None."""
    x = float(x)  # exact for a float32 value
    if rule == 0:
        return math.trunc(x) if 0.0 <= x < 2.0**24 else None
    if rule == 1:
        if math.isinf(x):
            return None
        c = math.trunc(x)
        return c if 0 <= c < 2**31 else None
    return math.trunc(x) if 0.0 <= x < 2.0**31 else None


def in_set(pac, first, nwords, c):
    """§2 CategoricalSplitRecord: whether category c is in a set."""
    return c // 32 < nwords and bool(pac.words[first + c // 32] >> (c % 32) & 1)


def categorical_goes_left(pac, x, index, flags):
    """§3 routing step 2 at a categorical node."""
    if math.isnan(x):
        return bool(flags & 1)
    lf, lw, rf, rw, rule = pac.splits[index]
    c = category(x, rule)
    if c is not None:
        if in_set(pac, lf, lw, c):
            return True
        if in_set(pac, rf, rw, c):
            return False
    outside = (flags >> 1) & 3
    return outside == 1 or (outside == 2 and bool(flags & 1))


def goes_left(pac, x, t, flags):
    """Routing step 2, operands widened per the table in FORMAT.md §3."""
    if flags & 0x80:
        return categorical_goes_left(pac, x, t, flags)
    wide = pac.node_format == 1
    if pac.input_precision == 0 and not wide:
        z = Z32  # compact16 + float32: compare in float32
    else:
        x = float(x)
        t = float(t)
        z = Z64
    if math.isnan(x):
        if not flags & 4:
            return bool(flags & 1)
        x = type(x)(0.0)
    if flags & 2 and -z <= x <= z:
        return bool(flags & 1)
    return bool(x <= t)


def walk(pac, tree, xs):
    """Routes one rounded row through one tree: (leaf kind, leaf ref, leaf id)."""
    ref, _, kind = tree
    leaf_id = 0
    steps = 0
    while kind == 0:
        steps += 1
        if steps > pac.max_depth + 1:
            raise PacError(f"{pac.path}: path longer than max_depth")
        t, f, flags, left, right = pac.node(ref)
        pac.check_node(f, flags, t)
        go_left = goes_left(pac, xs[f], t, flags)
        lk, rk = (flags >> 3) & 3, (flags >> 5) & 3
        next_ref, next_kind = (left, lk) if go_left else (right, rk)
        if next_kind != 0 and 5 in pac.sections:
            ids = pac.leaf_ids(ref)
            leaf_id = ids[0] if go_left else ids[1]
        ref, kind = next_ref, next_kind
    return kind, ref, leaf_id


def margins(pac, row):
    """Output steps 1-4 for one row (a list of float64 values)."""
    K = pac.num_outputs
    f32 = pac.accumulate_precision == 0
    A = F32 if f32 else float
    xs = round_input(pac, row)
    acc = [A(b) for b in pac.base_score]
    with np.errstate(over="ignore", invalid="ignore"):
        for tree in pac.trees:
            kind, ref, _ = walk(pac, tree, xs)
            group = tree[1]
            if kind == 2:
                (v,) = struct.unpack("<f", struct.pack("<I", ref & 0xFFFFFFFF))
                acc[group] = A(acc[group] + A(F32(v)))
            elif kind == 3:
                if ref >= K:
                    raise PacError(f"{pac.path}: class {ref} out of range")
                acc[ref] = A(acc[ref] + A(1))
            elif kind == 1:
                w = pac.leaf_width
                pac.check_record_ref(ref)
                r = struct.unpack(f"<{w}d", pac.read(ref * UNIT, 8 * w))
                if w == 1:
                    acc[group] = A(acc[group] + A(r[0]))
                else:
                    for k in range(K):
                        acc[k] = A(acc[k] + A(r[k]))
            else:
                raise PacError(f"{pac.path}: unknown leaf kind {kind}")
        if pac.aggregation == 1:
            n = [0] * K
            for _, group, _ in pac.trees:
                if pac.leaf_width > 1:
                    n = [c + 1 for c in n]
                else:
                    n[group] += 1
            acc = [A(acc[k] / A(max(n[k], 1))) for k in range(K)]
    return acc


def postprocess(pac, m):
    """Output step 5."""
    p = pac.postprocess
    K = pac.num_outputs
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        if pac.accumulate_precision == 0:
            m = [F32(v) for v in m]
            one = F32(1.0)
            alpha = F32(pac.sigmoid_alpha)
            if p == 0:
                return m
            if p == 1:
                return [one / (one + expf(-(v * alpha))) for v in m]
            if p == 5:
                q = one / (one + expf(-(m[0] * alpha)))
                return [one - q, q]
            if p == 4:
                return [expf(v) for v in m]
            if p == 2:
                w = m[0]
                for k in range(1, K):
                    w = w if m[k] < w else m[k]
                e = [expf(F32(v - w)) for v in m]
                s = 0.0
                for v in e:
                    s += float(v)
                return [F32(v / F32(s)) for v in e]
        else:
            m = [float(v) for v in m]
            if p == 0:
                return m
            if p == 1:
                return [1.0 / (1.0 + exp((-pac.sigmoid_alpha) * v)) for v in m]
            if p == 5:
                q = 1.0 / (1.0 + exp((-pac.sigmoid_alpha) * m[0]))
                return [1.0 - q, q]
            if p == 4:
                return [exp(v) for v in m]
            if p == 6:
                d = pac.postprocess_params[0]
                return [-math.pow(2.0, -(m[0] / d if d != 0 else 1.0))]
            if p == 2:
                w = m[0]
                for k in range(1, K):
                    w = w if m[k] < w else m[k]
                e = [exp(v - w) for v in m]
                s = 0.0
                for v in e:
                    s += v
                return [v / s for v in e]
        if p == 3:
            b = 0
            for k in range(1, K):
                if m[k] > m[b]:
                    b = k
            return [b]
    raise PacError(f"{pac.path}: unknown postprocess {p}")


def predict(pac, row, margin=False):
    m = margins(pac, row)
    return m if margin else postprocess(pac, m)


def leaves(pac, row):
    xs = round_input(pac, row)
    return [walk(pac, tree, xs)[2] for tree in pac.trees]


def parse_csv(path):
    """FORMAT.md §6: each field to the nearest float64; empty, NA, nan are NaN."""
    rows = []
    with open(path) as f:
        for n, line in enumerate(f):
            fields = [x.strip() for x in line.strip().split(",")]
            if not line.strip():
                continue
            try:
                row = [math.nan if x in ("", "NA", "na") else float(x) for x in fields]
            except ValueError:
                if n == 0 and not rows:
                    continue  # a header line
                raise
            rows.append(row)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pac")
    ap.add_argument("--input")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--margin", action="store_true")
    g.add_argument("--leaf", action="store_true")
    g.add_argument("--check", action="store_true", help="only check the whole file (§5)")
    ap.add_argument("--mmap", action="store_true",
                    help="map the file instead of reading it (only touched pages are read)")
    a = ap.parse_args()
    pac = PacFile(a.pac, mapped=a.mmap)
    if a.check:
        pac.check_structure()
        print("ok")
        return 0
    for row in parse_csv(a.input):
        vals = leaves(pac, row) if a.leaf else predict(pac, row, a.margin)
        print(",".join(repr(v.item() if hasattr(v, "item") else v) for v in vals))


if __name__ == "__main__":
    sys.exit(main())
