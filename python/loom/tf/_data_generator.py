"""tf.data.Dataset.from_generator and tf.TensorSpec: a dataset whose
elements a Python generator yields (loom_dataset_from_generator calls back
for each one, from the estimator's loop in C). As TF, the generator is
called again for each pass (repeat), its elements are converted to the
declared dtypes and must have the declared shapes (None: any size; the rank
must be known), and an exception it raises ends the pass as
tf.errors.UnknownError naming it. The element is a tensor, a dict of them,
or (features, labels) of those (loom.tf's estimator inputs)."""
import ctypes as C
import itertools

import numpy as np

from .. import _lib as L
from .._lib import lib
from .. import Dataset as _LoomDataset, _Status, _b, _to_tensor, _dtype, STRING
from . import dtypes as _dt
from .data import Dataset, _Comp, LABEL, FEATURES

_NEXT = C.CFUNCTYPE(L.cint, L.vp, L.cint, L.P(L.vp), L.vp)
_RESET = C.CFUNCTYPE(L.cint, L.vp, L.vp)
_RELEASE = C.CFUNCTYPE(None, L.vp)
L._d("loom_dataset_from_generator", L.vp, L.cint, L.P(L.cs), L.P(L.cint), L.P(L.i32), L.P(L.i64), L.cs, _NEXT,
     _RESET, _RELEASE, L.vp, L.vp)
L._d("loom_status_set_message", None, L.vp, L.cint, L.cs)
_OUT_OF_RANGE, _UNKNOWN = 11, 2
_alive = {}  # key -> a generator dataset's callbacks, while its loom dataset lives
_keys = itertools.count(1)
_release = _RELEASE(lambda key: _alive.pop(key, None))


class TensorSpec:
    """tf.TensorSpec: the shape (None or None dims: not fixed) and dtype of a tensor."""

    def __init__(self, shape, dtype=_dt.float32, name=None):
        self.shape = None if shape is None else tuple(None if d is None else int(d) for d in shape)
        self.dtype, self.name = _dt.as_dtype(dtype), name

    def __eq__(self, other):
        return isinstance(other, TensorSpec) and (self.shape, self.dtype) == (other.shape, other.dtype)

    def __repr__(self):
        return "TensorSpec(shape=%s, dtype=%r, name=%r)" % (self.shape, self.dtype, self.name)


def _leaf(types, shapes, what):
    """(numpy dtype, shape) of one tensor's signature."""
    if isinstance(types, TensorSpec):
        shape, types = types.shape, types.dtype
    elif isinstance(types, (dict, tuple, list)):
        raise NotImplementedError("loom.tf: from_generator: %s is nested; loom.tf takes a tensor, a dict of "
                                  "tensors or (features, labels) of those" % what)
    else:
        shape = None if shapes is None else tuple(None if d is None else int(d) for d in shapes)
    if shape is None:
        raise NotImplementedError("loom.tf: from_generator: the shape of %s is not given: give output_shapes (or "
                                  "output_signature with tf.TensorSpec shapes); loom needs each tensor's rank"
                                  % what)
    return _dt.as_dtype(types).as_numpy_dtype, shape


def _leaves(types, shapes, what):
    """[(component name, numpy dtype, shape)] and the structure (a dict of
    component names, or one name) of a features or labels signature."""
    if isinstance(types, dict):
        if shapes is not None and not isinstance(shapes, dict):
            raise TypeError("from_generator: output_shapes must have output_types' structure (a dict at %s)" % what)
        if not types:
            raise ValueError("from_generator: an empty dict at %s" % what)
        out = [(str(k), *_leaf(t, None if shapes is None else shapes.get(k), "%s[%r]" % (what, k)))
               for k, t in types.items()]
        return out, {str(k): str(k) for k in types}
    return [(what, *_leaf(types, shapes, what))], what


def _signature(output_types, output_shapes, output_signature):
    if output_signature is not None:
        if output_types is not None or output_shapes is not None:
            raise TypeError("The `output_types` and `output_shapes` arguments can not be used together with the "
                            "`output_signature` argument.")
        types, shapes = output_signature, None
    elif output_types is None:
        raise TypeError("from_generator: give output_signature (or output_types and output_shapes)")
    else:
        types, shapes = output_types, output_shapes
    if isinstance(types, tuple):
        if len(types) != 2:
            raise NotImplementedError("loom.tf: from_generator of a tuple of %d: give (features, labels)" % len(types))
        if shapes is not None and (not isinstance(shapes, tuple) or len(shapes) != 2):
            raise TypeError("from_generator: output_shapes must have output_types' structure (features, labels)")
        f, fs = _leaves(types[0], None if shapes is None else shapes[0], FEATURES)
        if isinstance(types[1], dict):
            raise NotImplementedError("loom.tf: labels as a dict (multi-head) are not supported")
        lab, _ = _leaves(types[1], None if shapes is None else shapes[1], LABEL)
        return f + lab, (fs, LABEL)
    return _leaves(types, shapes, FEATURES)


def _element_parts(el, struct):
    """The leaves of one yielded element, in the spec's order."""
    if isinstance(struct, tuple):
        if not isinstance(el, tuple) or len(el) != 2:
            raise TypeError("from_generator: the generator yielded %r, not a (features, labels) tuple"
                            % (type(el).__name__,))
        return _element_parts(el[0], struct[0]) + [el[1]]
    if isinstance(struct, dict):
        if not isinstance(el, dict):
            raise TypeError("from_generator: the generator yielded %r, not a dict of %s" % (type(el).__name__,
                                                                                          sorted(struct)))
        missing_keys = [k for k in struct if k not in el]
        if missing_keys:
            raise KeyError("from_generator: the element has no %s" % missing_keys)
        return [el[k] for k in struct]
    return [el]


def _element_tensor(v, dtype, ltype, st):
    """A new loom_tensor of one yielded value (NULL with st set when it cannot be made): numbers copied in
    (an element is small; wrapping the array would cost a lock and a release callback per tensor),
    strings through _to_tensor."""
    if dtype is object:
        return _to_tensor(np.asarray(v, dtype=object), STRING)
    a = np.asarray(v, dtype=dtype)
    a = a if a.flags.c_contiguous else np.array(a, order="C")  # (ascontiguousarray makes 0-d arrays 1-d)
    t = lib.loom_tensor_new(ltype, a.ndim, (L.i64 * max(1, a.ndim))(*a.shape), st)
    if t and a.nbytes:
        C.memmove(lib.loom_tensor_data(t), a.ctypes.data, a.nbytes)
    return t


def from_generator(generator, output_types=None, output_shapes=None, args=None, output_signature=None, name=None):
    """tf.data.Dataset.from_generator."""
    if not callable(generator):
        raise TypeError("`generator` must be a Python callable.")
    leaves, struct = _signature(output_types, output_shapes, output_signature)
    spec = [_Comp(n, object if np.dtype(d).kind in "OSU" else np.dtype(d), tuple(s)) for n, d, s in leaves]
    names = [c.name for c in spec]
    args = tuple(args or ())

    def make():
        state = {"it": None}
        ltypes = [STRING if c.dtype is object else _dtype(c.dtype) for c in spec]

        def nxt(user, n, out, st):
            try:
                if state["it"] is None:
                    state["it"] = iter(generator(*args))
                try:
                    el = next(state["it"])
                except StopIteration:
                    return _OUT_OF_RANGE
                parts = _element_parts(el, struct)
                for i, (c, v, lt) in enumerate(zip(spec, parts, ltypes)):
                    out[i] = _element_tensor(v, c.dtype, lt, st)
                    if not out[i]:
                        return lib.loom_status_code(st)  # the dataset frees the tensors made before it
                return 0
            except BaseException as e:  # noqa: B902 - must not unwind through C
                lib.loom_status_set_message(st, _UNKNOWN, ("from_generator: the generator raised %s: %s"
                                                           % (type(e).__name__, e)).encode(errors="replace"))
                return _UNKNOWN

        def reset(user, st):
            state["it"] = None
            return 0
        cbs = (_NEXT(nxt), _RESET(reset))
        key = next(_keys)
        ndims = [len(c.shape) for c in spec]
        dims = [-1 if d is None else d for c in spec for d in c.shape]
        st = _Status()
        p = lib.loom_dataset_from_generator(
            len(spec), (L.cs * len(spec))(*[_b(n) for n in names]), (L.cint * len(spec))(*ltypes),
            (L.i32 * len(spec))(*ndims), (L.i64 * max(1, len(dims)))(*dims),
            _b(LABEL) if isinstance(struct, tuple) else None, cbs[0], cbs[1], _release, key, st.p)
        if not p:
            st.raise_if()
        _alive[key] = cbs  # until the loom dataset (wherever a transformation took it) is freed
        return _LoomDataset(p)
    return Dataset(None, None, (), make, spec, struct)
