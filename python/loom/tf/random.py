"""tf.random.set_seed: the global seed; shuffles without an op seed draw
theirs from it as TF does (deterministic per program when it is set).
Inside an Estimator's input_fn the graph seed (RunConfig.tf_random_seed)
takes its place, counted from the start of each call as TF's ops in a new
graph are."""
import contextlib
import os

_global = None
_counter = 0
_graph = None  # (seed, [counter]) while an Estimator calls an input_fn under tf_random_seed


def set_seed(seed):
    global _global, _counter
    _global = None if seed is None else int(seed)
    _counter = 0


def get_global_seed():
    return _global


@contextlib.contextmanager
def _graph_seed(seed):
    """While an Estimator builds a graph whose seed is seed (None: no graph
    seed, the global one applies)."""
    global _graph
    saved = _graph
    _graph = None if seed is None else (int(seed), [0])
    try:
        yield
    finally:
        _graph = saved


def op_seed(seed):
    """The seed of a random op: its own, else one drawn from the global seed
    (a new one per op, deterministic), else a random one."""
    global _counter
    if seed is not None:
        return int(seed) & 0xFFFFFFFFFFFFFFFF
    if _graph is not None:
        _graph[1][0] += 1
        return (_graph[0] * 1000003 + _graph[1][0]) & 0xFFFFFFFFFFFFFFFF
    if _global is None:
        return int.from_bytes(os.urandom(8), "little")
    _counter += 1
    return (_global * 1000003 + _counter) & 0xFFFFFFFFFFFFFFFF


def __getattr__(name):
    from ._surface import missing
    raise missing("random.", name)
