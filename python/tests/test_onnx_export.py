"""loom.export_onnx: a canned classifier's export written as ONNX with the
default options (the string classes skipped with a note on the "loom"
logger), checked with ONNX Runtime against loom's Predictor on the same rows
(tests/onnx_check.py in the onnx virtualenv of scripts/peer_venv.sh; that
part is skipped when the virtualenv does not exist), and the errors."""
import json
import logging
import os
import subprocess

import numpy as np
import pytest

import loom
from iris_data import dense, iris

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SERVING = {"x": (np.float32, (None, 2)), "pl": (np.float32, (None, 1)), "pw": (np.float32, (None, 1))}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    X, y = iris()
    tmp = tmp_path_factory.mktemp("onnx")
    fc = loom.FeatureColumns()
    est = loom.DNNClassifier(hidden_units=[8], feature_columns=[fc.numeric("x", shape=(2,)), fc.numeric("pl"),
                                                                fc.numeric("pw")],
                             n_classes=3, model_dir=str(tmp / "m"), learning_rate=0.1, random_seed=7,
                             save_summary_steps=0, num_threads=1)
    est.train(lambda m: loom.Dataset.from_tensor_slices(dict(dense(X), label=y.astype(np.int32)), label="label")
              .shuffle(150, seed=1).repeat().batch(16), steps=100)
    return est.export(tmp / "export", SERVING), X


def onnx_python():
    root = os.environ.get("LOOM_VENV_DIR", os.path.join(os.path.expanduser("~"), ".cache", "loom", "venv"))
    py = os.path.join(root, "onnx", "bin", "python")
    return py if os.path.exists(os.path.join(root, "onnx", ".ok")) else None


def test_export_onnx_default_options_match_the_predictor(exported, tmp_path, caplog):
    ed, X = exported
    with caplog.at_level(logging.INFO, logger="loom"):
        path = loom.export_onnx(ed)
    assert path == os.path.join(ed, "model.onnx") and os.path.getsize(path) > 100
    assert "output 'classes' (string) skipped" in caplog.text
    assert "output 'all_classes' (string) skipped" in caplog.text
    # the same rows through loom's predictor: the reference for ONNX Runtime
    out = loom.Predictor(ed).predict(dense(X), signature="predict")
    numeric = {k: v for k, v in out.items() if v.dtype != object}
    assert set(numeric) == {"logits", "probabilities", "class_ids", "all_class_ids"}
    py = onnx_python()
    if py is None:
        pytest.skip("no onnx virtualenv (scripts/peer_venv.sh onnx; tests/test_onnx.c makes it)")
    case = tmp_path / "case"
    case.mkdir()
    os.replace(path, case / "model.onnx")
    man = {"model": "model.onnx", "tolerance": 1e-5, "inputs": [], "outputs": []}
    for side, arrays in (("inputs", dense(X)), ("outputs", numeric)):
        for i, (k, a) in enumerate(arrays.items()):
            a = np.ascontiguousarray(a)
            a.astype(a.dtype.newbyteorder("<")).tofile(case / ("%s_%d.bin" % (side, i)))
            man[side].append({"key": k, "file": "%s_%d.bin" % (side, i), "dtype": a.dtype.name, "shape": list(a.shape)})
    (case / "manifest.json").write_text(json.dumps(man))
    r = subprocess.run([py, os.path.join(ROOT, "tests", "onnx_check.py"), str(case)], capture_output=True, text=True)
    assert r.returncode == 0 and "onnx_check: OK" in r.stdout, r.stdout + r.stderr


def test_export_onnx_errors(exported, tmp_path):
    ed, _ = exported
    with pytest.raises(loom.LoomError) as e:
        loom.export_onnx(ed, tmp_path / "a.onnx", signature="nope")
    assert e.value.code_name == "NOT_FOUND" and "'nope'" in str(e.value)
    with pytest.raises(loom.LoomError) as e:  # a string output named: the node that makes it is named
        loom.export_onnx(ed, tmp_path / "b.onnx", output_keys=["logits", "classes"])
    assert e.value.code_name == "UNIMPLEMENTED" and "(op " in str(e.value)
    assert not os.path.exists(tmp_path / "b.onnx")
    p = loom.export_onnx(ed, tmp_path / "c.onnx", output_keys="probabilities")
    assert p == str(tmp_path / "c.onnx") and os.path.getsize(p) > 100
