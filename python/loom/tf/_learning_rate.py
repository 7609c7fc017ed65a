"""tf.compat.v1.train's learning-rate decays, built into the graph of their
global_step (tf.compat.v1.train.get_global_step() in a model_fn, or any
integer scalar tensor): exponential_decay, piecewise_constant,
polynomial_decay and cosine_decay are loom's C schedules (loom_train.h);
inverse_time_decay and natural_exp_decay are composed of graph ops with
TF's formulas. Each returns a float32 scalar tensor that a
tf.compat.v1.train.*Optimizer takes as its learning_rate."""
import ctypes as C

import numpy as np

from .. import Output, _b
from .. import _lib_keras as K


def _step(global_step, fn):
    from .ops import _global_step_output
    gs = _global_step_output(global_step)
    if not isinstance(gs, Output):
        raise ValueError("tf.compat.v1.train.%s: global_step is required: pass tf.compat.v1.train.get_global_step() "
                         "(got %r)" % (fn, global_step))
    return gs


def _positive(v, what, fn):
    if v is None or float(v) <= 0:
        raise ValueError("tf.compat.v1.train.%s: %s must be > 0, got %r" % (fn, what, v))
    return float(v)


def exponential_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False, name=None):
    gs = _step(global_step, "exponential_decay")
    g = gs.graph
    return g._out(K.lib.loom_exponential_decay(g.p, float(learning_rate), gs.c,
                                               _positive(decay_steps, "decay_steps", "exponential_decay"),
                                               float(decay_rate), int(bool(staircase)), _b(name)))


def piecewise_constant(x, boundaries, values, name=None):
    gs = _step(x, "piecewise_constant")
    if len(values) != len(boundaries) + 1:
        raise ValueError("The length of boundaries should be 1 less than the length of values")
    g = gs.graph
    b = (C.c_double * max(1, len(boundaries)))(*[float(v) for v in boundaries])
    v = (C.c_double * len(values))(*[float(v) for v in values])
    return g._out(K.lib.loom_piecewise_constant(g.p, gs.c, len(boundaries), b, v, _b(name)))


def polynomial_decay(learning_rate, global_step, decay_steps, end_learning_rate=0.0001, power=1.0, cycle=False,
                     name=None):
    gs = _step(global_step, "polynomial_decay")
    g = gs.graph
    return g._out(K.lib.loom_polynomial_decay(g.p, float(learning_rate), gs.c,
                                              _positive(decay_steps, "decay_steps", "polynomial_decay"),
                                              float(end_learning_rate), float(power), int(bool(cycle)), _b(name)))


def cosine_decay(learning_rate, global_step, decay_steps, alpha=0.0, name=None):
    gs = _step(global_step, "cosine_decay")
    g = gs.graph
    return g._out(K.lib.loom_cosine_decay(g.p, float(learning_rate), gs.c,
                                          _positive(decay_steps, "decay_steps", "cosine_decay"), float(alpha),
                                          _b(name)))


def _progress(gs, decay_steps, staircase, fn):
    """global_step / decay_steps as float32, floor()ed when staircase."""
    g = gs.graph
    p = g.div(g.cast(gs, np.float32), g.constant(np.float32(_positive(decay_steps, "decay_steps", fn))))
    if staircase:
        p = g._out(K.lib.loom_floor(g.p, p.c, None))
    return p


def inverse_time_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False, name=None):
    """learning_rate / (1 + decay_rate * global_step / decay_steps)."""
    gs = _step(global_step, "inverse_time_decay")
    g = gs.graph
    p = _progress(gs, decay_steps, staircase, "inverse_time_decay")
    den = g.add(g.constant(np.float32(1.0)), g.mul(g.constant(np.float32(decay_rate)), p))
    return g.div(g.constant(np.float32(learning_rate)), den, name=name)


def natural_exp_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False, name=None):
    """learning_rate * exp(-decay_rate * global_step / decay_steps)."""
    gs = _step(global_step, "natural_exp_decay")
    g = gs.graph
    p = _progress(gs, decay_steps, staircase, "natural_exp_decay")
    return g.mul(g.constant(np.float32(learning_rate)), g.exp(g.mul(g.constant(np.float32(-decay_rate)), p)),
                 name=name)


__all__ = ["exponential_decay", "piecewise_constant", "polynomial_decay", "cosine_decay", "inverse_time_decay",
           "natural_exp_decay"]
