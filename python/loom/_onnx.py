"""ONNX export of an export directory (loom_onnx.h): export_onnx."""
import ctypes as C
import logging
import os
import threading

from . import _lib as L
from ._lib import lib
from . import _Status, _b

_LOG_INFO, _LOG_WARN = 1, 2
_log_lock = threading.Lock()
logger = logging.getLogger("loom")


def _default_signature(export_dir):
    """"predict" (every prediction, raw features in) when the export has it, else "serving_default"."""
    try:
        import json
        with open(os.path.join(export_dir, "signatures.json")) as f:
            return "predict" if "predict" in json.load(f) else "serving_default"
    except (OSError, ValueError):
        return "serving_default"


def export_onnx(export_dir, path=None, signature=None, output_keys=None):
    """Writes one signature of an export directory (Estimator.export) as an
    ONNX model (opset 17) and returns its path (default
    <export_dir>/model.onnx). signature: default "predict" when the export
    has it, else "serving_default". output_keys: the outputs to write;
    None = every numeric one, a non-numeric one (a classifier's string
    "classes") being skipped with a note on the "loom" logger (INFO); a
    non-numeric output named here raises LoomError (UNIMPLEMENTED), as does
    an op ONNX cannot express (the error names the node and its op)."""
    export_dir = os.fspath(export_dir)
    path = os.fspath(path) if path is not None else os.path.join(export_dir, "model.onnx")
    o = lib.loom_onnx_options_default()
    o.signature = _b(signature or _default_signature(export_dir))
    keys = None
    if output_keys is not None:
        if isinstance(output_keys, str):
            output_keys = [output_keys]
        keys = (C.c_char_p * max(1, len(output_keys)))(*[_b(k) for k in output_keys])
        o.noutputs = len(output_keys)
        o.output_keys = keys
    notes = []

    def sink(level, msg, user):
        notes.append((level, msg.decode(errors="replace")))

    cb = L.LOG_FN(sink)
    st = _Status()
    with _log_lock:  # the C library has one log sink: this call's notes, then the default sink again
        lib.loom_log_set(C.cast(cb, C.c_void_p), None, _LOG_INFO)
        try:
            rc = lib.loom_onnx_export(_b(export_dir), _b(path), C.byref(o), st.p)
        finally:
            lib.loom_log_set(None, None, _LOG_WARN)
    for level, msg in notes:
        logger.log(logging.WARNING if level >= _LOG_WARN else logging.INFO, "%s", msg)
    st.raise_if(rc)
    return path
