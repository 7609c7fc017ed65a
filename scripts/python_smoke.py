"""An installed loom package as a user meets it: run from outside the source
tree with no LOOM_LIBRARY, it must import from the environment's site-packages,
load the library it ships with (or the one given as argv[1]), and train,
evaluate and predict with a canned LinearClassifier on a small in-memory
dataset. Prints key=value lines; exits non-zero on the first check that fails.
    python python_smoke.py [EXPECTED_LIBRARY] [SOURCE_TREE]"""
import os
import sys
import tempfile

assert "LOOM_LIBRARY" not in os.environ, "run without LOOM_LIBRARY"
import numpy as np  # noqa: E402

import loom  # noqa: E402

pkg = os.path.dirname(os.path.abspath(loom.__file__))
want = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] else os.path.join(pkg, "libloom.so")
tree = os.path.realpath(sys.argv[2]) if len(sys.argv) > 2 else None
print("package=%s" % pkg)
print("library=%s" % loom.LIBRARY_PATH)
if tree and os.path.realpath(pkg).startswith(tree + os.sep):
    sys.exit("loom was imported from the source tree (%s), not from the installed package" % pkg)
if os.path.realpath(loom.LIBRARY_PATH) != os.path.realpath(want):
    sys.exit("loom loaded %s, expected %s" % (loom.LIBRARY_PATH, want))

# Two classes split by the line x0 + x1 = 0.
rng = np.random.default_rng(0)
X = rng.normal(size=(200, 2)).astype(np.float32)
y = (X[:, 0] + X[:, 1] > 0).astype(np.int32)
with tempfile.TemporaryDirectory() as d:
    fc = loom.FeatureColumns()
    est = loom.LinearClassifier(feature_columns=[fc.numeric("x", shape=(2,))], n_classes=2,
                                model_dir=os.path.join(d, "m"), learning_rate=0.5, random_seed=1,
                                save_summary_steps=0, num_threads=1)
    est.train(lambda mode: loom.Dataset.from_tensor_slices({"x": X, "y": y}, label="y")
              .shuffle(200, seed=1).repeat().batch(20), steps=100)
    r = est.evaluate(lambda mode: loom.Dataset.from_tensor_slices({"x": X, "y": y}, label="y").batch(50))
    p = est.predict(lambda mode: loom.Dataset.from_tensor_slices({"x": X}).batch(64))
print("global_step=%d accuracy=%.4f loss=%.4f" % (r["global_step"], r["accuracy"], r["loss"]))
if r["global_step"] != 100 or r["accuracy"] < 0.95:
    sys.exit("training did not learn a linearly separable problem: %r" % (r,))
agree = float((p["class_ids"].ravel() == y).mean())
if abs(agree - r["accuracy"]) > 1e-6:
    sys.exit("predict's class_ids match %.4f of the labels, evaluate said %.4f" % (agree, r["accuracy"]))
print("python_smoke: ok")
