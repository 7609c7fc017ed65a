#!/usr/bin/env python3
"""Reference values from TensorFlow 2.15 for the feature ops (loom_sparse.h).

Run with the TF peer virtualenv:
    $(scripts/peer_venv.sh tf) scripts/gen_fc_fixtures.py
(/root/.cache/loom/venv/tf/bin/python). Writes text fixtures under
tests/fixtures/fc/, read by tests/test_feature_ops.c. Strings are written as
hex prefixed with 'x' ("x" alone is the empty string); floats as the hex of
their IEEE bits, so every value round-trips exactly. The seed is fixed, so
rerunning gives the same files.

Files (one record per line, fields separated by one space):
  hash.txt       header "N n1 n2 n3" (bucket counts), then per string:
                 hex Fingerprint64 (rebuilt from to_hash_bucket_fast, see fp64())
                 and tf.strings.to_hash_bucket_fast for n1, n2, n3
  int_hash.txt   header "N n1 n2 n3", then: value as_string(value) b1 b2 b3
  bucketize.txt  blocks "B dtype nb b_1..b_nb (f32 bits)" "N count" then
                 lines: xbits out
  vocab.txt      blocks "V kind source num_oov default vocab_size" then
                 "K n" + keys (hex or decimal), "Q count" + lines "query id"
  cross.txt      blocks "C k num_buckets hash_key dtypes..." then
                 "R rows" + per row: one line per input "n v1 .. vn", one
                 output line "n id1 .. idn"
"""
import os
import random
import struct
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.ops import lookup_ops  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "tests", "fixtures", "fc")
rng = random.Random(14)


def hx(b):
    if isinstance(b, str):
        b = b.encode("utf-8")
    return "x" + b.hex()


def rand_text(n):
    # random UTF-8 text of n code points: ASCII, Latin-1, CJK, emoji
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.6:
            out.append(chr(rng.randint(0x20, 0x7e)))
        elif r < 0.75:
            out.append(chr(rng.randint(0xa0, 0x24f)))
        elif r < 0.9:
            out.append(chr(rng.randint(0x4e00, 0x9fff)))
        else:
            out.append(chr(rng.randint(0x1f300, 0x1f64f)))
    return "".join(out).encode("utf-8")


def rand_bytes_len(n):
    # exactly n bytes of valid UTF-8 (pad with ASCII)
    s = rand_text(n)
    while len(s) > n:
        s = s[:-1]
        try:
            s.decode("utf-8")
        except UnicodeDecodeError:
            continue
    return s + b"a" * (n - len(s))


def strings(count):
    out = [b"", b"a", b"ab", b"abc", b"abcd", b"hello", b"hello world!!", b"0", b"-1"]
    # every length 0..300 once, then random lengths
    for n in range(0, 301):
        out.append(rand_bytes_len(n))
    while len(out) < count:
        r = rng.random()
        if r < 0.4:
            n = rng.randint(0, 8)
        elif r < 0.7:
            n = rng.randint(9, 32)
        elif r < 0.9:
            n = rng.randint(33, 64)
        else:
            n = rng.randint(65, 160)
        out.append(rand_bytes_len(n))
    return out


def fp64(strs):
    """Fingerprint64 of each string as TF computes it. No TF op returns it
    whole (tf.fingerprint of a string tensor hashes the per-string
    fingerprints again), so it is rebuilt from StringToHashBucketFast, which
    is Fingerprint64(s) % n: with M = 2^63 - 1, fp = r + k M for k in 0..2
    (r = fp % M), and M = 1 (mod 3) makes fp % 3 pick k."""
    M = 2**63 - 1
    r = tf.strings.to_hash_bucket_fast(tf.constant(strs), M).numpy()
    t = tf.strings.to_hash_bucket_fast(tf.constant(strs), 3).numpy()
    out = []
    for ri, ti in zip(r, t):
        ri, ti = int(ri), int(ti)
        ks = [k for k in range(3) if ri + k * M < 2**64 and (ri + k * M) % 3 == ti]
        assert len(ks) == 1
        out.append(ri + ks[0] * M)
    return out


def gen_hash():
    strs = strings(5000)
    ns = [1, 10, 1000003]
    fps = fp64(strs)
    b = [tf.strings.to_hash_bucket_fast(tf.constant(strs), n).numpy() for n in ns]
    with open(os.path.join(OUT, "hash.txt"), "w") as f:
        f.write("%d %s\n" % (len(strs), " ".join(map(str, ns))))
        for i, s in enumerate(strs):
            f.write("%s %d %d %d %d\n" % (hx(s), fps[i], b[0][i], b[1][i], b[2][i]))


def gen_int_hash():
    vals = [0, 1, -1, 9, 10, -10, 2**31 - 1, -2**31, 2**31, -2**31 - 1, 2**63 - 1, -2**63, -2**63 + 1, 2**63 - 2]
    while len(vals) < 5000:
        r = rng.random()
        if r < 0.3:
            vals.append(rng.randint(-1000, 1000))
        elif r < 0.6:
            vals.append(rng.randint(-2**31, 2**31 - 1))
        else:
            vals.append(rng.randint(-2**63, 2**63 - 1))
    ns = [1, 7, 100000]
    x = tf.constant(vals, dtype=tf.int64)
    txt = tf.as_string(x).numpy()
    b = [tf.strings.to_hash_bucket_fast(tf.as_string(x), n).numpy() for n in ns]
    with open(os.path.join(OUT, "int_hash.txt"), "w") as f:
        f.write("%d %s\n" % (len(vals), " ".join(map(str, ns))))
        for i, v in enumerate(vals):
            f.write("%d %s %d %d %d\n" % (v, txt[i].decode(), b[0][i], b[1][i], b[2][i]))


def f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


def gen_bucketize():
    lists = [
        [],
        [0.0],
        [-1.0, 0.0, 1.0],
        [0.5, 1.5, 2.5, 10.0, 100.0],
        [-1e6, -3.25, 0.1, 0.2, 0.3, 7.0, 7.0, 1e3, 1e9],
        [float(2**24), float(2**24 + 2), float(2**31), float(2**53), float(2**62), float(2**63)],
        [f32(x) for x in sorted(rng.uniform(-1000, 1000) for _ in range(40))],
    ]
    with open(os.path.join(OUT, "bucketize.txt"), "w") as f:
        for dt in ["float32", "float64", "int32", "int64"]:
            per = 5000 // len(lists) + 1
            for bl in lists:
                bl = [f32(b) for b in bl]
                xs = []
                for b in bl:  # on, and next to, each boundary
                    if dt == "float32":
                        c = np.float32(b)
                        xs += [c, np.nextafter(c, np.float32(-np.inf)), np.nextafter(c, np.float32(np.inf))]
                    elif dt == "float64":
                        c = np.float64(b)
                        xs += [c, np.nextafter(c, -np.inf), np.nextafter(c, np.inf)]
                    else:
                        lim = 2**31 - 1 if dt == "int32" else 2**63 - 1
                        for d in (-2, -1, 0, 1, 2):
                            if abs(b) < 2**64:
                                v = int(b) + d
                                if -lim - 1 <= v <= lim:
                                    xs.append(v)
                if dt == "int32":
                    xs += [0, 1, -1, 2**31 - 1, -2**31, 2**24 + 1, 2**24 + 3, -(2**24) - 1]
                elif dt == "int64":
                    xs += [0, 1, -1, 2**63 - 1, -2**63, 2**24 + 1, 2**53 + 1, 2**62 + 1, 2**63 - 2**38, -(2**62) - 1]
                else:
                    xs += [0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e-40, -1e-40]
                while len(xs) < per:
                    r = rng.random()
                    if dt in ("float32", "float64"):
                        if r < 0.5 and bl:
                            xs.append(rng.choice(bl) + rng.uniform(-1, 1))
                        else:
                            xs.append(rng.uniform(-2000, 2000) * (10 ** rng.randint(-3, 6)))
                    else:
                        lim = 2**31 - 1 if dt == "int32" else 2**63 - 1
                        if r < 0.5:
                            xs.append(rng.randint(-2000, 2000))
                        else:
                            xs.append(rng.randint(-lim - 1, lim))
                x = tf.constant(np.array(xs, dtype=dt))
                out = tf.raw_ops.Bucketize(input=x, boundaries=bl).numpy()
                f.write("B %s %d %s\n" % (dt, len(bl), " ".join("%08x" % struct.unpack("<I", struct.pack("<f", b))[0] for b in bl)))
                f.write("N %d\n" % len(xs))
                arr = np.array(xs, dtype=dt)
                for i in range(len(xs)):
                    if dt == "float32":
                        tok = "%08x" % struct.unpack("<I", arr[i].tobytes())[0]
                    elif dt == "float64":
                        tok = "%016x" % struct.unpack("<Q", arr[i].tobytes())[0]
                    else:
                        tok = "%d" % int(arr[i])
                    f.write("%s %d\n" % (tok, out[i]))


def gen_vocab():
    words = sorted(set(rand_text(rng.randint(0, 12)) for _ in range(400)))
    rng.shuffle(words)
    words = [w for w in words if b"\n" not in w and b"\r" not in w]
    ints = list(set(rng.randint(-2**40, 2**40) for _ in range(300)))
    rng.shuffle(ints)
    ints = ints[:300] + [0, -1, 2**63 - 1, -2**63]
    ints = list(dict.fromkeys(ints))
    spath = os.path.join(OUT, "vocab_str.txt")
    ipath = os.path.join(OUT, "vocab_int.txt")
    fwords = [w for w in words if w]  # TF rejects an empty line in a vocabulary file
    with open(spath, "wb") as f:
        f.write(b"\n".join(fwords) + b"\n")
    with open(ipath, "w") as f:
        f.write("\n".join(str(v) for v in ints))  # no final newline
    configs = [
        ("str", "list", 0, -1, 0),
        ("str", "list", 0, 7, 0),
        ("str", "list", 5, -1, 0),
        ("str", "file", 3, -1, 0),
        ("str", "file", 0, -5, 100),
        ("int", "list", 0, -1, 0),
        ("int", "list", 4, -1, 0),
        ("int", "file", 2, -1, 0),
        ("int", "file", 0, 42, 50),
    ]
    with open(os.path.join(OUT, "vocab.txt"), "w") as f:
        for kind, src, oov, dflt, vsize in configs:
            keys = (words if src == "list" else fwords) if kind == "str" else ints
            used = keys if vsize <= 0 else keys[:vsize]
            q = []
            while len(q) < 700:
                if rng.random() < 0.6:
                    q.append(rng.choice(keys))
                elif kind == "str":
                    q.append(rand_text(rng.randint(0, 10)))
                else:
                    q.append(rng.choice([rng.randint(-100, 100), rng.randint(-2**62, 2**62)]))
            dtype = tf.string if kind == "str" else tf.int64
            if src == "list":
                table = lookup_ops.index_table_from_tensor(tf.constant(used, dtype=dtype), num_oov_buckets=oov,
                                                           default_value=dflt, dtype=dtype)
            else:
                table = lookup_ops.index_table_from_file(spath if kind == "str" else ipath, num_oov_buckets=oov,
                                                         vocab_size=vsize if vsize > 0 else None,
                                                         default_value=dflt, key_dtype=dtype)
            ids = table.lookup(tf.constant(q, dtype=dtype)).numpy()
            f.write("V %s %s %d %d %d\n" % (kind, src, oov, dflt, vsize))
            if src == "list":
                f.write("K %d\n" % len(used))
                for k in used:
                    f.write((hx(k) if kind == "str" else str(k)) + "\n")
            f.write("Q %d\n" % len(q))
            for i, k in enumerate(q):
                f.write("%s %d\n" % (hx(k) if kind == "str" else str(k), ids[i]))


def gen_cross():
    configs = [
        (2, ["str", "str"], 1000, None),
        (2, ["str", "int"], 10, None),
        (2, ["int", "int"], 2**40, 12345),
        (3, ["str", "int", "str"], 100000, None),
        (3, ["int", "str", "int"], 7, 0xFFFFFFFFFFFF),
    ]
    with open(os.path.join(OUT, "cross.txt"), "w") as f:
        for k, kinds, nb, key in configs:
            rows = 300
            cols = []
            for kind in kinds:
                vals, idx = [], []
                for r in range(rows):
                    n = rng.choice([0, 1, 1, 2, 2, 3]) if rng.random() < 0.9 else rng.randint(4, 6)
                    if r < 3:
                        n = 1
                    for j in range(n):
                        idx.append([r, j])
                        if kind == "str":
                            vals.append(rand_text(rng.randint(0, 70 if rng.random() < 0.1 else 8)))
                        else:
                            vals.append(rng.choice([rng.randint(-50, 50), rng.randint(-2**63, 2**63 - 1)]))
                cols.append((kind, vals, idx))
            sps = []
            for kind, vals, idx in cols:
                sps.append(tf.SparseTensor(indices=tf.constant(np.array(idx, dtype=np.int64).reshape(-1, 2)),
                                           values=tf.constant(vals, dtype=tf.string if kind == "str" else tf.int64),
                                           dense_shape=[rows, 8]))
            if key is None:
                out = tf.sparse.cross_hashed(sps, num_buckets=nb)
            else:
                out = tf.sparse.cross_hashed(sps, num_buckets=nb, hash_key=key)
            oi = out.indices.numpy()
            ov = out.values.numpy()
            f.write("C %d %d %d %s\n" % (k, nb, key if key is not None else 0xDECAFCAFFE, " ".join(kinds)))
            f.write("R %d\n" % rows)
            for r in range(rows):
                for kind, vals, idx in cols:
                    vs = [vals[i] for i in range(len(idx)) if idx[i][0] == r]
                    f.write("%d%s\n" % (len(vs), "".join(" " + (hx(v) if kind == "str" else str(v)) for v in vs)))
                o = [int(ov[i]) for i in range(len(oi)) if oi[i][0] == r]
                f.write("%d%s\n" % (len(o), "".join(" %d" % v for v in o)))


def main():
    os.makedirs(OUT, exist_ok=True)
    gen_hash()
    gen_int_hash()
    gen_bucketize()
    gen_vocab()
    gen_cross()
    total = sum(os.path.getsize(os.path.join(OUT, n)) for n in os.listdir(OUT))
    print("wrote %s (%d bytes)" % (OUT, total))
    return 0


if __name__ == "__main__":
    sys.exit(main())
