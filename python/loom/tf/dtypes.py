"""TF's dtype objects (tf.float32, tf.string ...) as far as feature columns,
specs and datasets need them."""
import numpy as np


class DType:
    def __init__(self, name, np_type):
        self.name = name
        self.as_numpy_dtype = np_type

    def __repr__(self):
        return "tf.%s" % self.name

    def __eq__(self, other):
        try:
            return as_dtype(other).name == self.name
        except TypeError:
            return NotImplemented

    def __hash__(self):
        return hash(self.name)

    @property
    def is_floating(self):
        return self.name.startswith("float")

    @property
    def is_integer(self):
        return self.name.startswith("int") or self.name.startswith("uint")


float16 = DType("float16", np.float16)
float32 = DType("float32", np.float32)
float64 = DType("float64", np.float64)
int8 = DType("int8", np.int8)
int16 = DType("int16", np.int16)
int32 = DType("int32", np.int32)
int64 = DType("int64", np.int64)
uint8 = DType("uint8", np.uint8)
bool = DType("bool", np.bool_)  # noqa: A001 - TF's name
string = DType("string", object)
_ALL = {d.name: d for d in (float16, float32, float64, int8, int16, int32, int64, uint8, bool, string)}
_ALL["double"] = float64
_ALL["float"] = float32


def as_dtype(d):
    """tf.as_dtype: a DType, a numpy dtype or type, or a name."""
    if isinstance(d, DType):
        return d
    if isinstance(d, str) and d in _ALL:
        return _ALL[d]
    if d is str or d is bytes:
        return string
    try:
        nd = np.dtype(d)
    except TypeError:
        raise TypeError("loom.tf: cannot convert %r to a dtype" % (d,)) from None
    if nd.kind in "USO":
        return string
    if nd.name in _ALL:
        return _ALL[nd.name]
    raise TypeError("loom.tf: no TF dtype for %s" % nd)
