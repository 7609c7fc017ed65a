#!/usr/bin/env python3
"""Checks one case of tests/test_onnx.c with the real ONNX tools.

usage: onnx_check.py CASE_DIR

CASE_DIR holds manifest.json (written by the C test), model.onnx and raw
little-endian tensors: the inputs fed to loom's predictor and the outputs it
gave. onnx.checker.check_model (full check, with shape inference) must pass;
the model's inputs and outputs must be the manifest's keys; onnxruntime's
outputs must have loom's shapes and dtypes and equal them
within the manifest's tolerance (absolute; integers exactly). Prints
"onnx_check: <case> <key> max_abs_diff=<d>" per output and
"onnx_check: OK <case>" at the end; exit 1 on any failure.
"""
import json
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort


def load(case, entry):
    a = np.fromfile(os.path.join(case, entry["file"]), dtype=np.dtype(entry["dtype"]).newbyteorder("<"))
    return a.reshape(entry["shape"]).astype(np.dtype(entry["dtype"]))


def main():
    case = sys.argv[1]
    name = os.path.basename(os.path.normpath(case))
    with open(os.path.join(case, "manifest.json")) as f:
        man = json.load(f)
    path = os.path.join(case, man["model"])
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    opset = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    if not opset or opset[0] < 17:
        print(f"onnx_check: {name}: default-domain opset {opset} < 17")
        return 1
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feeds = {e["key"]: load(case, e) for e in man["inputs"]}
    want_in = sorted(i.name for i in sess.get_inputs())
    if want_in != sorted(feeds):
        print(f"onnx_check: {name}: model inputs {want_in}, manifest {sorted(feeds)}")
        return 1
    keys = [e["key"] for e in man["outputs"]]
    model_out = sorted(o.name for o in sess.get_outputs())
    if model_out != sorted(keys):
        print(f"onnx_check: {name}: model outputs {model_out}, manifest {sorted(keys)}")
        return 1
    got = sess.run(keys, feeds)
    tol = float(man.get("tolerance", 1e-5))
    bad = 0
    for e, g in zip(man["outputs"], got):
        w = load(case, e)
        if g.shape != w.shape or g.dtype != w.dtype:
            print(f"onnx_check: {name} {e['key']}: onnxruntime gives {g.dtype}{list(g.shape)}, "
                  f"loom {w.dtype}{list(w.shape)}")
            bad += 1
            continue
        if w.size == 0:
            d = 0.0
        elif np.issubdtype(w.dtype, np.floating):
            d = float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64))))
        else:
            d = float(np.max(np.abs(g.astype(np.int64) - w.astype(np.int64))))
        ok = d <= tol if np.issubdtype(w.dtype, np.floating) else d == 0
        print(f"onnx_check: {name} {e['key']} max_abs_diff={d:.3g}{'' if ok else ' FAIL'}")
        bad += not ok
    if bad:
        print(f"onnx_check: {name}: {bad} output(s) differ")
        return 1
    print(f"onnx_check: OK {name} ({len(keys)} outputs, onnx {onnx.__version__}, "
          f"onnxruntime {ort.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
