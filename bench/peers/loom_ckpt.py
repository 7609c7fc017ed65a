"""Reads a loom checkpoint file (the format in engine/checkpoint.c's header)
into numpy arrays: {name: array}, numeric tensors only (strings skipped).
Record CRCs are not checked: the files come from the loom run beside it."""
import struct

import numpy as np

_DTYPES = {1: np.float32, 2: np.float64, 3: np.int32, 4: np.int64, 5: np.uint8, 6: np.bool_}


def read_loom_checkpoint(path):
    with open(path, "rb") as f:
        b = f.read()
    if b[:8] != b"LOOMCKPT":
        raise ValueError("%s: not a loom checkpoint" % path)
    (n,) = struct.unpack_from("<Q", b, 16)
    o, out = 24, {}
    for _ in range(n):
        (ln,) = struct.unpack_from("<I", b, o)
        name = b[o + 4:o + 4 + ln].decode()
        o += 4 + ln
        dt, rank = struct.unpack_from("<II", b, o)
        dims = struct.unpack_from("<%dq" % rank, b, o + 8)
        (nb,) = struct.unpack_from("<Q", b, o + 8 + 8 * rank)
        o += 8 + 8 * rank + 8 + 4  # dtype, rank, dims, length, meta CRC
        if dt in _DTYPES:
            out[name] = np.frombuffer(b[o:o + nb], _DTYPES[dt]).reshape(dims).copy()
        o += nb + 4  # data, data CRC
    return out
