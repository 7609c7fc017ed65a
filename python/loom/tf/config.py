"""tf.config's knobs an Estimator program sets: the threads of the sessions
made after the call (tf.config.threading: intra-op threads are the
estimator's session threads, as a RunConfig session_config's
intra_op_parallelism_threads; loom runs a graph's ops in order on one pool,
so the inter-op count is kept and reported, changing nothing) and
tf.config.experimental.enable_op_determinism (a loom run repeats itself for
a fixed graph seed and thread count, what TF's switch asks for, so there is
nothing to switch on)."""
from .. import _config
from ._surface import Namespace, missing

_state = {"inter": 0}


def _count(n, what):
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError("%s: the number of threads must be an int >= 0 (0: the system's choice), got %r" % (what, n))
    return n


def _set_intra_op_parallelism_threads(num_threads):
    _config.DEFAULT_THREADS[0] = _count(num_threads, "tf.config.threading.set_intra_op_parallelism_threads")


def _get_intra_op_parallelism_threads():
    return _config.DEFAULT_THREADS[0]


def _set_inter_op_parallelism_threads(num_threads):
    _state["inter"] = _count(num_threads, "tf.config.threading.set_inter_op_parallelism_threads")


def _get_inter_op_parallelism_threads():
    return _state["inter"]


def _enable_op_determinism():
    """Nothing to switch on: loom is deterministic already."""


threading = Namespace("config.threading", set_intra_op_parallelism_threads=_set_intra_op_parallelism_threads,
                      get_intra_op_parallelism_threads=_get_intra_op_parallelism_threads,
                      set_inter_op_parallelism_threads=_set_inter_op_parallelism_threads,
                      get_inter_op_parallelism_threads=_get_inter_op_parallelism_threads)
experimental = Namespace("config.experimental", enable_op_determinism=_enable_op_determinism)


def __getattr__(name):
    raise missing("config.", name)
