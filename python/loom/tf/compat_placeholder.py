"""tf.compat.v1.placeholder, as the raw serving input receiver takes it."""
from . import dtypes as _dt


class Placeholder:
    def __init__(self, dtype, shape=None, name=None):
        if shape is None:
            raise NotImplementedError("loom.tf: tf.compat.v1.placeholder needs a shape (None for unknown dims)")
        self.dtype = _dt.as_dtype(dtype)
        self.shape = tuple(shape)
        self.name = name


def placeholder(dtype, shape=None, name=None):
    return Placeholder(dtype, shape, name)
