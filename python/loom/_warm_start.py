"""WarmStartSettings and VocabInfo (tf.estimator's) over loom's C
loom_warm_start_settings (include/loom/loom_canned.h): which variables of a
new model start from a checkpoint, under which names there, and 2-D tables
whose vocabulary changed, remapped entry by entry.

    ws = loom.WarmStartSettings("old_model_dir", vars_to_warm_start=".*",
                                var_name_to_vocab_info={
                                    "dnn/.../tok_embedding/embedding_weights":
                                        loom.VocabInfo("new.txt", 4, 1, "old.txt")},
                                var_name_to_prev_var_name={})
    est = loom.DNNClassifier(..., warm_start_from=ws)

The settings apply when training starts in a model_dir without a checkpoint.
"""
import collections
import ctypes as C
import numbers
import os
import re

from . import _lib as L
from ._lib import lib


def _b(s):
    return None if s is None else (s.encode() if isinstance(s, str) else s)


def _is_path(v):
    return isinstance(v, (str, bytes, os.PathLike))


def _strings(arg, v):
    """A vocabulary: a file path, or a list of strings."""
    if _is_path(v):
        return os.fsdecode(os.fspath(v))
    if isinstance(v, (list, tuple)) and v and all(isinstance(t, str) for t in v):
        return list(v)
    raise TypeError("VocabInfo(%s=%r): give the path of a vocabulary file (one entry per line) or a list of "
                    "strings" % (arg, v))


def _int(arg, v, lo):
    if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v < lo:
        raise ValueError("VocabInfo(%s=%r): must be an int >= %d" % (arg, v, lo))
    return int(v)


class VocabInfo(collections.namedtuple("VocabInfo", ["new_vocab", "new_vocab_size", "num_oov_buckets", "old_vocab",
                                                     "old_vocab_size", "backup_initializer", "axis"])):
    """tf.estimator.VocabInfo: how a 2-D variable over a vocabulary is warm
    started. Entry k along axis (0: rows, an embedding or a linear
    column's weights; 1: columns, an output layer over label classes) takes
    the old entry of the same string; entries of new strings and the
    num_oov_buckets entries after the vocabulary take backup_initializer's
    values (None: zeros). new_vocab / old_vocab: a vocabulary file (one
    entry per line) or, in loom, a list of strings; new_vocab_size: its
    first entries used (>= 1), old_vocab_size: -1 for all.
    backup_initializer: None, a number (a constant) or a loom
    Initializer."""

    def __new__(cls, new_vocab, new_vocab_size, num_oov_buckets, old_vocab, old_vocab_size=-1,
                backup_initializer=None, axis=0):
        if axis not in (0, 1) or isinstance(axis, bool):
            raise ValueError("The only supported values for the axis argument are 0 and 1.  Provided axis: %r"
                             % (axis,))
        _strings("new_vocab", new_vocab)
        _strings("old_vocab", old_vocab)
        _int("new_vocab_size", new_vocab_size, 1)
        _int("num_oov_buckets", num_oov_buckets, 0)
        if not isinstance(old_vocab_size, numbers.Integral) or isinstance(old_vocab_size, bool) or \
                old_vocab_size == 0 or old_vocab_size < -1:
            raise ValueError("VocabInfo(old_vocab_size=%r): must be -1 (the whole old vocabulary) or an int >= 1"
                             % (old_vocab_size,))
        self = super().__new__(cls, new_vocab, new_vocab_size, num_oov_buckets, old_vocab, old_vocab_size,
                               backup_initializer, axis)
        self._backup_c()  # checks it
        return self

    def _backup_c(self):
        """The C loom_initializer of backup_initializer, or None (zeros)."""
        b = self.backup_initializer
        if b is None:
            return None
        if isinstance(b, L.Initializer):
            return b
        if isinstance(b, numbers.Real) and not isinstance(b, bool):
            return lib.loom_init_constant(float(b))
        raise TypeError("VocabInfo(backup_initializer=%r): give None (zeros), a number or a loom Initializer"
                        % (b,))


class WarmStartSettings(collections.namedtuple("WarmStartSettings", [
        "ckpt_to_initialize_from", "vars_to_warm_start", "var_name_to_vocab_info", "var_name_to_prev_var_name"])):
    """tf.estimator.WarmStartSettings. ckpt_to_initialize_from: a model
    directory (its latest checkpoint), a checkpoint path or an export
    directory. vars_to_warm_start: a regex over the names of the trainable
    variables (".*": all of them); a list of regexes or names, each over
    all variables (optimizer slots, moving statistics too), matched at the
    start of the name; or None: only the variables of
    var_name_to_vocab_info. var_name_to_vocab_info: {variable: VocabInfo}.
    var_name_to_prev_var_name: {variable: its name in the checkpoint}.
    When training warm-starts, as TF: an entry of either dict naming no
    variable vars_to_warm_start selects, and a selected variable the
    checkpoint lacks (under its previous name), raise ValueError naming
    them."""

    def __new__(cls, ckpt_to_initialize_from, vars_to_warm_start=".*", var_name_to_vocab_info=None,
                var_name_to_prev_var_name=None):
        if not _is_path(ckpt_to_initialize_from):
            raise TypeError("WarmStartSettings(ckpt_to_initialize_from=%r): give a checkpoint path or a model "
                            "directory" % (ckpt_to_initialize_from,))
        v = vars_to_warm_start
        if isinstance(v, (list, tuple)):
            if not all(isinstance(r, str) for r in v):
                raise ValueError("WarmStartSettings(vars_to_warm_start=...): a list must be all strings (regexes "
                                 "or variable names), given types %s" % [type(r).__name__ for r in v])
            v = list(v)
        elif v is not None and not isinstance(v, str):
            raise ValueError("WarmStartSettings(vars_to_warm_start=%r): give a regex, a list of regexes or names, "
                             "or None" % (v,))
        for r in ([v] if isinstance(v, str) else v or []):
            try:
                re.compile(r)
            except re.error as e:
                raise ValueError("WarmStartSettings(vars_to_warm_start=...): invalid regex %r: %s" % (r, e)) from None
        vocab = dict(var_name_to_vocab_info or {})
        for k, vi in vocab.items():
            if not isinstance(k, str) or not isinstance(vi, VocabInfo):
                raise TypeError("WarmStartSettings(var_name_to_vocab_info=...): give {variable name: VocabInfo}, "
                                "got %r: %r" % (k, vi))
        prev = dict(var_name_to_prev_var_name or {})
        for k, p in prev.items():
            if not isinstance(k, str) or not isinstance(p, str):
                raise TypeError("WarmStartSettings(var_name_to_prev_var_name=...): give {variable name: name in "
                                "the checkpoint}, got %r: %r" % (k, p))
        return super().__new__(cls, os.fsdecode(os.fspath(ckpt_to_initialize_from)), v, vocab, prev)

    def _c(self, keep):
        """The C settings; keep collects what they point to."""
        w = lib.loom_warm_start_settings_default()

        def strs(items):
            a = (C.c_char_p * max(1, len(items)))(*[_b(s) for s in items])
            keep.append(a)
            return a

        w.ckpt_to_initialize_from = _b(self.ckpt_to_initialize_from)
        keep.append(w.ckpt_to_initialize_from)
        v = self.vars_to_warm_start
        if isinstance(v, str):
            w.vars_to_warm_start = _b(v)
        else:
            w.vars_to_warm_start = None
            if v is not None:  # a list, [] too (nothing selected); None: var_regexes NULL
                w.nvar_regexes, w.var_regexes = len(v), strs(v)
        if self.var_name_to_vocab_info:
            arr = (L.VocabInfo * len(self.var_name_to_vocab_info))()
            keep.append(arr)
            for i, (name, vi) in enumerate(self.var_name_to_vocab_info.items()):
                c = lib.loom_vocab_info_default()
                c.var_name = _b(name)
                for side in ("new", "old"):
                    voc = _strings(side + "_vocab", getattr(vi, side + "_vocab"))
                    if isinstance(voc, list):
                        setattr(c, side + "_vocab", strs(voc))
                        n = len(voc) if side == "old" and vi.old_vocab_size == -1 else \
                            getattr(vi, side + "_vocab_size")
                        if n > len(voc):
                            raise ValueError("VocabInfo for %s: %s_vocab_size %d is larger than the %d strings of "
                                             "%s_vocab" % (name, side, n, len(voc), side))
                        setattr(c, side + "_vocab_size", n)
                    else:
                        setattr(c, side + "_vocab_file", _b(voc))
                        setattr(c, side + "_vocab_size", getattr(vi, side + "_vocab_size"))
                c.num_oov_buckets = vi.num_oov_buckets
                b = vi._backup_c()
                if b is not None:
                    bp = C.pointer(b)
                    keep.append(bp)
                    c.backup_initializer = bp
                c.axis = vi.axis
                arr[i] = c
            w.nvocab_infos, w.vocab_infos = len(arr), arr
        if self.var_name_to_prev_var_name:
            items = list(self.var_name_to_prev_var_name.items())
            w.nprev_names = len(items)
            w.new_names, w.prev_names = strs([k for k, _ in items]), strs([p for _, p in items])
        keep.append(w)
        return w


def apply(est, warm_start_from):
    """Sets est's (a loom estimator, est.p made) warm start from a
    WarmStartSettings; a path was given to the C constructor."""
    est._warm_settings = warm_start_from if isinstance(warm_start_from, WarmStartSettings) else None
    if est._warm_settings is None:
        return
    from . import _Status, LoomError
    keep = []
    w = warm_start_from._c(keep)
    st = _Status()
    try:
        st.raise_if(lib.loom_estimator_set_warm_start_settings(est.p, C.byref(w), st.p))
    except LoomError as e:  # a setting C rejects (a regex POSIX does not take)
        raise ValueError("%s (vars_to_warm_start=%r)" % (e, warm_start_from.vars_to_warm_start)) from None


def settings_error(e):
    """TF's ValueError for a LoomError the C side raises when it applies
    the settings at the start of training (a rename or VocabInfo not used,
    a selected variable the checkpoint lacks: INVALID_ARGUMENT, the message
    starting "WarmStartSettings: " or "warm_start_from: variable"); any
    other error as it is."""
    msg = str(e)
    prefix = e.code_name + ": "
    msg = msg[len(prefix):] if msg.startswith(prefix) else msg
    if e.code == 3 and msg.startswith(("WarmStartSettings: ", "warm_start_from: variable ")):
        return ValueError(msg)
    return e
