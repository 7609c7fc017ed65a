"""Estimator.train() alone under TF_CONFIG (no train_and_evaluate): the same
script in every role of a PS job, as real processes (programs/
train_alone_job.py); the roles train() refuses."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import loom
import loom.tf as tf
from task_procs import run_tasks, task_env

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "programs", "train_alone_job.py")
CLUSTER = {"chief": ["127.0.0.1:0"], "ps": ["127.0.0.1:0"], "worker": ["127.0.0.1:0"]}


def _env(role, model_dir, cluster=CLUSTER):
    env = task_env(role, cluster, model_dir)
    env["LOOM_LOCAL_SIZE"], env["MAX_STEPS"] = "4", "300"
    return env


@pytest.mark.parametrize("canned", [False, True, "normalizer"], ids=["model_fn", "DNNClassifier", "normalizer_fn"])
def test_train_alone_runs_each_role_through_the_ps(tmp_path, canned):
    """ps + chief + worker processes run one script that calls train(max_steps=300):
    the trainers push their steps through the PS (together exactly 300, the
    PS's global step), the PS serves and exits 0 once the chief ends the job,
    and the chief's final checkpoint has learnt the blobs."""
    md = str(tmp_path / "job")
    envs = {}
    for role in ("ps", "chief", "worker"):
        envs[role] = _env(role, md)
        if canned:
            envs[role]["CANNED"] = "1"
        if canned == "normalizer":
            envs[role]["NORMALIZER"] = "1"
    codes, out = run_tasks(envs, [JOB])
    for role, code in codes.items():
        assert code == 0, (role, out[role])
        assert out[role].startswith("task %s:0" % role), out[role]
        assert "TRAINED %s" % role in out[role], out[role]
    if canned == "normalizer":  # the trainers traced the normalizer into their graphs
        for role in ("chief", "worker"):
            assert int(re.search(r"NORMALIZER traced (\d+)", out[role]).group(1)) >= 1, out[role]
    # how many steps each trainer reserved on the PS depends on timing (a trainer that got none prints
    # no per-step line); together they end at max_steps exactly
    steps = {r: re.search(r"job %s:0: per step: .* steps=(\d+)" % r, out[r]) for r in ("chief", "worker")}
    steps = {r: int(f.group(1)) if f else 0 for r, f in steps.items()}
    assert sum(steps.values()) == 300, (steps, out)
    assert "per step" not in out["ps"]
    line = [ln for ln in out["chief"].splitlines() if ln.startswith("METRIC ")][-1]
    m = {k: float(v) for k, v in re.findall(r"(\w+)=([-\d.e]+)", line)}
    assert m["global_step"] == 300 and m["accuracy"] > 0.85, out["chief"]  # 3 classes: chance is 1/3
    assert os.path.exists(os.path.join(md, "model.ckpt-300.index")) or \
        any(f.startswith("model.ckpt-300") for f in os.listdir(md))
    assert os.path.isdir(os.path.join(md, "ps"))


def test_train_alone_in_the_evaluator_task_raises_tf_value_error(tmp_path):
    """TF's Estimator.train raises ValueError in an evaluator task (only
    train_and_evaluate runs that role): so does loom.tf, before anything runs."""
    md = str(tmp_path / "job")
    p = subprocess.run([sys.executable, JOB], env=_env("evaluator", md), capture_output=True, text=True, timeout=120)
    assert p.returncode != 0
    assert "ValueError: Train has been called wrong configuration" in p.stderr, p.stderr
    assert "train_and_evaluate" in p.stderr
    assert "TRAINED" not in p.stdout


def _model_fn(features, labels, mode):
    logits = tf.compat.v1.layers.dense(features["x"], 2)
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=tf.compat.v1.train.GradientDescentOptimizer(
        0.1).minimize(loss, global_step=tf.compat.v1.train.get_global_step()))


def _input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": np.zeros((4, 2), np.float32)}, np.zeros(4, np.int32))).batch(2)


@pytest.mark.parametrize("kw", [{"steps": 10}, {}])
def test_train_alone_in_a_ps_job_needs_max_steps(tmp_path, monkeypatch, kw):
    """The job's stop condition is the PS's global step: train(steps=...) and
    train() without a bound name max_steps (nothing connects)."""
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": CLUSTER, "task": {"type": "worker", "index": 0}}))
    est = tf.estimator.Estimator(_model_fn, config=tf.estimator.RunConfig(model_dir=str(tmp_path)))
    with pytest.raises(ValueError, match=r"worker:0.*needs max_steps"):
        est.train(_input_fn, **kw)


def test_train_alone_in_a_cluster_without_ps_is_not_implemented(tmp_path, monkeypatch):
    cluster = {"chief": ["127.0.0.1:0"], "worker": ["127.0.0.1:0"]}
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "chief", "index": 0}}))
    est = tf.estimator.Estimator(_model_fn, config=tf.estimator.RunConfig(model_dir=str(tmp_path)))
    with pytest.raises(NotImplementedError, match=r"without \"ps\" tasks \(task chief:0\).*train_and_evaluate"):
        est.train(_input_fn, max_steps=5)
