"""IDX files (Fashion-MNIST's format, gzip-compressed as Debian ships them), for the peer scripts."""
import gzip


def read_idx(path):
    """The array an IDX file holds (uint8 data; the dimensions from its header, big-endian). numpy is
    imported here, not at load, so that a peer script can report a missing framework first."""
    import numpy as np
    with gzip.open(path, "rb") as f:
        b = f.read()
    nd = b[3]
    dims = [int.from_bytes(b[4 + 4 * i:8 + 4 * i], "big") for i in range(nd)]
    return np.frombuffer(b, np.uint8, offset=4 + 4 * nd).reshape(dims)
