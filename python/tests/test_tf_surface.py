"""docs/tf-surface.md is what scripts/gen_tf_surface.py writes from loom.tf
now (regenerate it after changing the surface)."""
import os
import subprocess
import sys

import loom

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def _run(*args):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(loom.__file__)))
    return subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "gen_tf_surface.py")] + list(args), env=env,
                          capture_output=True, text=True, timeout=120)


def test_committed_surface_page_is_up_to_date():
    p = _run("--check")
    assert p.returncode == 0, p.stderr


def test_surface_page_lists_what_the_code_provides():
    doc = open(os.path.join(ROOT, "docs", "tf-surface.md")).read()
    for sym in ("`Sequential(layers=None, name=None, trainable=True)`", "`LoggingTensorHook(tensors, every_n_iter=None",
                "`exponential_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False, name=None)`",
                "`model_to_estimator(keras_model=None", "`train_and_evaluate(estimator, train_spec, eval_spec)`",
                "## `tf.keras.layers`", "`Conv2D(filters, kernel_size, strides=(1, 1), padding='valid'"):
        assert sym in doc, sym
    assert "## `tf.ops`" not in doc and "## `tf.hooks`" not in doc  # implementation modules are not TF's
    assert "- `tf.keras.layers`: Dense, Conv2D" in doc.split("## Not provided")[1]  # _surface.ALTERNATIVES
