"""tf.compat.v1.estimator.inputs.numpy_input_fn / pandas_input_fn: input
functions over arrays held in memory. The arrays are handed to loom's
in-memory dataset once per call of the input_fn (once per train /
evaluate / predict), never copied per epoch; repeat, shuffle and batch run
in C with TF's semantics (batches cross epoch boundaries; the shuffle
buffer of queue_capacity rows follows the repeat, as TF's queue does)."""
import numpy as np

from .data import Dataset
from . import random as _random


def _input_fn(features, labels, batch_size, num_epochs, shuffle, queue_capacity, what):
    if shuffle is None or not isinstance(shuffle, bool):
        raise ValueError("shuffle must be provided and explicitly set as boolean (it is recommended to set it "
                         "as True for training); got {}".format(shuffle))
    if num_epochs is not None and num_epochs <= 0:
        raise ValueError("num_epochs must be > 0 or None, got %r" % (num_epochs,))
    if batch_size is None or batch_size <= 0:
        raise ValueError("batch_size must be > 0, got %r" % (batch_size,))

    def input_fn():
        seed = _random.op_seed(None)  # at the call: the Estimator's graph seed applies there, as in TF
        # TF feeds the rows in order, epoch after epoch, into a queue of
        # queue_capacity rows and, with shuffle, dequeues batches at random from
        # it (a RandomShuffleQueue): the shuffle spans epoch boundaries, so a
        # batch may hold one row twice when the data are smaller than the
        # queue. (TF's feeder starts at a random row; loom's at the first.)
        ds = Dataset.from_tensor_slices((features, labels) if labels is not None else features)
        ds = ds.repeat(num_epochs)
        if shuffle:
            ds = ds.shuffle(max(1, queue_capacity), seed=seed)
        return ds.batch(batch_size)
    input_fn.__name__ = what
    return input_fn


def numpy_input_fn(x, y=None, batch_size=128, num_epochs=1, shuffle=None, queue_capacity=1000, num_threads=1):
    xs = {k: np.asarray(v) for k, v in x.items()} if isinstance(x, dict) else np.asarray(x)  # an array: one tensor
    if y is not None and isinstance(y, dict):
        raise NotImplementedError("loom.tf: numpy_input_fn(y=<dict>): multi-head labels are not supported")
    if y is not None and isinstance(xs, dict) and "__labels__" in xs:
        raise ValueError("numpy_input_fn: feature key '__labels__' is reserved")
    return _input_fn(xs, None if y is None else np.asarray(y), batch_size, num_epochs, shuffle, queue_capacity,
                     "numpy_input_fn")


def pandas_input_fn(x, y=None, batch_size=128, num_epochs=1, shuffle=None, queue_capacity=1000, num_threads=1,
                    target_column="target"):
    if not hasattr(x, "columns"):
        raise TypeError("pandas_input_fn: x must be a pandas DataFrame, got %s" % type(x).__name__)
    if y is not None:
        if target_column in x.columns:
            raise ValueError("Cannot use name %s for target column: DataFrame already has a column with that "
                             "name: %s" % (target_column, list(x.columns)))
        if not np.array_equal(np.asarray(x.index), np.asarray(y.index)):
            raise ValueError("Index for x and y are mismatched.\nIndex for x: %s\nIndex for y: %s\n"
                             % (x.index, y.index))
    feats = {str(k): x[k].to_numpy() for k in x.columns}
    return _input_fn(feats, None if y is None else y.to_numpy(), batch_size, num_epochs, shuffle, queue_capacity,
                     "pandas_input_fn")
