"""Graph-building helpers of a TF 1 model_fn: tf.compat.v1.layers.batch_normalization
(loom_layers.h), tf.control_dependencies, tf.group, and
tf.compat.v1.get_collection(GraphKeys.UPDATE_OPS) so that the moving
statistics are updated the way TF programs ask for it:

    update_ops = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)
    with tf.control_dependencies(update_ops):
        train_op = optimizer.minimize(loss, global_step=tf.compat.v1.train.get_global_step())
"""
import contextlib
import ctypes as C

from .. import _lib as L
from .. import _lib_keras as K
from .._lib import lib
from .. import Output, Node, _b
from . import ops as _ops

L._d("loom_layers_batch_normalization", L.Output, L.vp, L.Output, L.P(K.BatchNormOptions), L.cs)
L._d("loom_graph_push_control_deps", None, L.vp, L.cint, L.P(L.vp))
L._d("loom_graph_pop_control_deps", None, L.vp)
L._d("loom_group", L.vp, L.vp, L.cint, L.P(L.vp), L.cs)
L._d("loom_group_collection", L.vp, L.vp, L.cs, L.cs)


class GraphKeys:
    """tf.compat.v1.GraphKeys (the collections tf.compat.v1.get_collection reads: UPDATE_OPS,
    TRAINABLE_VARIABLES, GLOBAL_VARIABLES, REGULARIZATION_LOSSES, LOSSES)."""
    UPDATE_OPS = "update_ops"
    LOSSES = "losses"
    REGULARIZATION_LOSSES = "regularization_losses"
    GLOBAL_VARIABLES = "variables"
    TRAINABLE_VARIABLES = "trainable_variables"
    LOCAL_VARIABLES = "local_variables"
    GLOBAL_STEP = "global_step"
    SUMMARIES = "summaries"


def batch_normalization(inputs, axis=-1, momentum=0.99, epsilon=0.001, center=True, scale=True,
                        beta_initializer=None, gamma_initializer=None, moving_mean_initializer=None,
                        moving_variance_initializer=None, beta_regularizer=None, gamma_regularizer=None,
                        beta_constraint=None, gamma_constraint=None, training=False, trainable=True, name=None,
                        reuse=None, renorm=False, renorm_clipping=None, renorm_momentum=0.99, fused=None,
                        virtual_batch_size=None, adjustment=None):
    """tf.compat.v1.layers.batch_normalization: variables <name>/gamma, beta,
    moving_mean, moving_variance; in training (a Python bool or a bool
    tensor) the batch's moments, with the moving-statistics updates added to
    GraphKeys.UPDATE_OPS (run them through tf.control_dependencies, as in TF).
    The initializers are TF's defaults (zeros / ones); `fused` is accepted
    (the same math)."""
    what = "tf.compat.v1.layers.batch_normalization"
    for arg, v in (("beta_initializer", beta_initializer), ("gamma_initializer", gamma_initializer),
                   ("moving_mean_initializer", moving_mean_initializer),
                   ("moving_variance_initializer", moving_variance_initializer),
                   ("beta_regularizer", beta_regularizer), ("gamma_regularizer", gamma_regularizer),
                   ("beta_constraint", beta_constraint), ("gamma_constraint", gamma_constraint),
                   ("renorm", renorm), ("renorm_clipping", renorm_clipping), ("virtual_batch_size", virtual_batch_size),
                   ("adjustment", adjustment)):
        if v:
            raise NotImplementedError("loom.tf: %s(%s=...) is not supported (TF's defaults only)" % (what, arg))
    if reuse:
        raise NotImplementedError("loom.tf: %s(reuse=True) is not supported: give each layer its own name" % what)
    if not isinstance(axis, int):
        raise NotImplementedError("loom.tf: %s(axis=%r): one axis" % (what, axis))
    g = _ops._g(inputs, what)
    o = K.lib.loom_batch_norm_options_default()
    o.axis, o.momentum, o.epsilon, o.center, o.scale = int(axis), float(momentum), float(epsilon), int(bool(center)), \
        int(bool(scale))
    o.trainable = int(bool(trainable))
    if isinstance(training, Output):
        o.training_flag = training.c
    elif isinstance(training, bool):
        o.training = int(training)
    else:
        raise TypeError("%s: training must be a Python bool or a bool tensor, got %r" % (what, training))
    return g._out(lib.loom_layers_batch_normalization(g.p, inputs.c, C.byref(o), _b(name)))


def _graph(what):
    if not _ops._graphs:
        raise NotImplementedError("loom.tf: %s outside a model_fn (or hook begin()): loom.tf builds graph "
                                  "dependencies only inside a model_fn" % what)
    return _ops._graphs[-1]


def _node(x, what):
    if isinstance(x, Node):
        return x.p
    if isinstance(x, Output):
        return x.c.node
    raise TypeError("%s: %r is not a tensor or an op of the model_fn" % (what, x))


def get_collection(key, scope=None):
    """tf.compat.v1.get_collection: GraphKeys.UPDATE_OPS gives [one op that
    runs every update op of the collection] (empty when there is none; use
    it in tf.control_dependencies or tf.group as TF's list);
    GraphKeys.TRAINABLE_VARIABLES / GLOBAL_VARIABLES the model_fn's variables
    (as tf.compat.v1.trainable_variables / global_variables), and
    GraphKeys.REGULARIZATION_LOSSES / LOSSES the collection's tensors; scope
    keeps the items whose name re.match-es it."""
    from . import _model_fn_ops as M
    if key == GraphKeys.TRAINABLE_VARIABLES:
        return M.trainable_variables(scope)
    if key == GraphKeys.GLOBAL_VARIABLES:
        return M.global_variables(scope)
    if key in (GraphKeys.REGULARIZATION_LOSSES, GraphKeys.LOSSES):
        return M.collection_outputs(_graph("tf.compat.v1.get_collection"), key, scope)
    if key != GraphKeys.UPDATE_OPS or scope is not None:
        raise NotImplementedError("loom.tf: tf.compat.v1.get_collection(%r%s): loom.tf reads GraphKeys.UPDATE_OPS "
                                  "(without a scope), TRAINABLE_VARIABLES, GLOBAL_VARIABLES, "
                                  "REGULARIZATION_LOSSES and LOSSES"
                                  % (key, "" if scope is None else ", scope=%r" % scope))
    g = _graph("tf.compat.v1.get_collection")
    n = lib.loom_group_collection(g.p, _b(key), b"update_ops")
    g._check()
    return [Node(g, n)] if n else []


@contextlib.contextmanager
def control_dependencies(control_inputs):
    """tf.control_dependencies: every op built inside depends on control_inputs."""
    ins = [] if control_inputs is None else list(control_inputs)
    if not ins:
        yield
        return
    g = _graph("tf.control_dependencies")
    arr = (L.vp * len(ins))(*[_node(x, "tf.control_dependencies") for x in ins])
    lib.loom_graph_push_control_deps(g.p, len(ins), arr)
    try:
        yield
    finally:
        lib.loom_graph_pop_control_deps(g.p)


def group(*inputs, **kwargs):
    """tf.group: an op that runs every input (tensors, ops or lists of them)."""
    name = kwargs.pop("name", None)
    if kwargs:
        raise TypeError("group() got unexpected keyword arguments: %s" % sorted(kwargs))
    flat = []
    for x in inputs:
        flat.extend(x if isinstance(x, (list, tuple)) else [x])
    g = None
    for x in flat:
        g = x.graph
        break
    if g is None:
        g = _graph("tf.group")
    arr = (L.vp * max(1, len(flat)))(*[_node(x, "tf.group") for x in flat])
    n = lib.loom_group(g.p, len(flat), arr, _b(name))
    g._check()
    return Node(g, n)


L._d("loom_graph_push_scope", None, L.vp, L.cs)
L._d("loom_graph_pop_scope", None, L.vp)
L._d("loom_variable_scope_push", None, L.vp, L.cs, L.cint)
L._d("loom_variable_scope_pop", None, L.vp)
AUTO_REUSE = "auto_reuse"  # tf.compat.v1.AUTO_REUSE


@contextlib.contextmanager
def variable_scope(name_or_scope, default_name=None, values=None, initializer=None, regularizer=None,
                   caching_device=None, partitioner=None, custom_getter=None, reuse=None, dtype=None,
                   use_resource=None, constraint=None, auxiliary_name_scope=True):
    """tf.compat.v1.variable_scope in a model_fn (loom_variable_scope_push):
    variables built inside are named "<scope>/..." ("<scope>/dense/kernel"),
    ops get a unique name scope; reuse=True / AUTO_REUSE share the scope's
    variables, as TF's."""
    what = "tf.compat.v1.variable_scope"
    for arg, v in (("initializer", initializer), ("regularizer", regularizer), ("caching_device", caching_device),
                   ("partitioner", partitioner), ("custom_getter", custom_getter), ("dtype", dtype),
                   ("constraint", constraint)):
        if v is not None:
            raise NotImplementedError("loom.tf: %s(%s=...) is not supported" % (what, arg))
    if not auxiliary_name_scope:
        raise NotImplementedError("loom.tf: %s(auxiliary_name_scope=False) is not supported" % what)
    name = name_or_scope if name_or_scope is not None else default_name
    if not isinstance(name, str) or not name:
        raise ValueError("%s: give a scope name (name_or_scope or default_name), got %r" % (what, name_or_scope))
    g = _graph(what)
    lib.loom_variable_scope_push(g.p, _b(name), 2 if reuse == AUTO_REUSE else 1 if reuse else 0)
    try:
        yield name
    finally:
        lib.loom_variable_scope_pop(g.p)


@contextlib.contextmanager
def name_scope(name, default_name=None, values=None):
    """tf.name_scope (and tf.compat.v1.name_scope) in a model_fn: the ops built
    inside get "<name>/" prefixes, made unique ("name_1"); variables keep
    their names (TF's get_variable ignores name scopes)."""
    name = name if name is not None else default_name
    if not isinstance(name, str) or not name:
        raise ValueError("tf.name_scope: give a scope name, got %r" % (name,))
    g = _graph("tf.name_scope")
    lib.loom_graph_push_scope(g.p, _b(name.rstrip("/")))
    try:
        yield name
    finally:
        lib.loom_graph_pop_scope(g.p)


def _static(shape, what):
    try:
        return [int(d) for d in ([shape] if isinstance(shape, int) else shape)]
    except TypeError:
        raise NotImplementedError("loom.tf: %s of a shape tensor is not supported: give the shape as a list of "
                                  "ints" % what) from None


def zeros(shape, dtype=None, name=None):
    import numpy as np
    from . import dtypes as _dt
    dt = _dt.as_dtype(dtype).as_numpy_dtype if dtype is not None else np.float32
    return _graph("tf.zeros").constant(np.zeros(_static(shape, "tf.zeros"), dt), name=name)


def ones(shape, dtype=None, name=None):
    import numpy as np
    from . import dtypes as _dt
    dt = _dt.as_dtype(dtype).as_numpy_dtype if dtype is not None else np.float32
    return _graph("tf.ones").constant(np.ones(_static(shape, "tf.ones"), dt), name=name)


def shape(input, out_type=None, name=None):  # noqa: A002 - TF's argument name
    """tf.shape: the dims of input at run time (int32, as TF's default)."""
    import numpy as np
    from .. import _dtype
    from . import dtypes as _dt
    dt = _dt.as_dtype(out_type).as_numpy_dtype if out_type is not None else np.int32
    g = input.graph
    return g._out(lib.loom_shape(g.p, input.c, _dtype(dt), _b(name)))


def range(start, limit=None, delta=1, dtype=None, name="range"):  # noqa: A001 - TF's name
    import numpy as np
    from .. import _dtype
    from . import dtypes as _dt
    if limit is None:
        start, limit = 0, start
    if dtype is None:
        dt = np.int32 if all(isinstance(v, int) for v in (start, limit, delta)) else np.float32
    else:
        dt = _dt.as_dtype(dtype).as_numpy_dtype
    g = _graph("tf.range")
    return g._out(lib.loom_range(g.p, float(start), float(limit), float(delta), _dtype(dt), _b(name)))


def dropout(x, rate, noise_shape=None, seed=None, name=None):
    """tf.nn.dropout (TF 2: always drops, scaling the kept values by 1 / (1 - rate))."""
    if noise_shape is not None:
        raise NotImplementedError("loom.tf: tf.nn.dropout(noise_shape=...) is not supported")
    if not 0 <= float(rate) < 1:
        raise ValueError("rate must be a scalar tensor or a float in the range [0, 1), got %g" % float(rate))
    g = _ops._g(x, "tf.nn.dropout")
    o = lib.loom_dropout_options_default()
    o.training = 1
    if seed is not None:
        o.seed = int(seed)
    return g._out(lib.loom_layers_dropout(g.p, x.c, float(rate), C.byref(o), _b(name)))
