"""tf.random.set_seed: the global seed; shuffles without an op seed draw
theirs from it as TF does (deterministic per program when it is set)."""
import os

_global = None
_counter = 0


def set_seed(seed):
    global _global, _counter
    _global = None if seed is None else int(seed)
    _counter = 0


def get_global_seed():
    return _global


def op_seed(seed):
    """The seed of a random op: its own, else one drawn from the global seed
    (a new one per op, deterministic), else a random one."""
    global _counter
    if seed is not None:
        return int(seed) & 0xFFFFFFFFFFFFFFFF
    if _global is None:
        return int.from_bytes(os.urandom(8), "little")
    _counter += 1
    return (_global * 1000003 + _counter) & 0xFFFFFFFFFFFFFFFF


def __getattr__(name):
    from ._surface import missing
    raise missing("random.", name)
