"""Estimator.train() alone under TF_CONFIG (no train_and_evaluate): the same
script in every role of a PS job, as real processes (programs/
train_alone_job.py); the roles train() refuses. RunConfig(train_distribute=)
with loom.tf's strategies: MultiWorkerMirroredStrategy as a chief + worker
collective job, alone, and the parameter-server strategy without ps tasks."""
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


def test_train_alone_in_a_cluster_without_ps_checks_its_arguments(tmp_path, monkeypatch):
    cluster = {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]}
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "chief", "index": 0}}))
    est = tf.estimator.Estimator(_model_fn, config=tf.estimator.RunConfig(model_dir=str(tmp_path)))
    with pytest.raises(ValueError, match=r"chief and worker tasks \(task chief:0\) needs max_steps"):
        est.train(_input_fn, steps=5)
    ps = tf.compat.v1.distribute.experimental.ParameterServerStrategy()
    est = tf.estimator.Estimator(_model_fn, config=tf.estimator.RunConfig(model_dir=str(tmp_path / "p"),
                                                                          train_distribute=ps))
    with pytest.raises(tf.errors.InvalidArgumentError, match="parameter-server strategy but TF_CONFIG names no"):
        est.train(_input_fn, max_steps=5)


@pytest.mark.parametrize("canned", [False, True], ids=["model_fn", "DNNClassifier"])
def test_train_alone_in_chief_and_worker_tasks_is_one_collective_job(tmp_path, canned):
    """chief + worker processes (no ps) of the script that calls train(max_steps=300) alone: both are ranks
    of the collective strategy (MultiWorkerMirroredStrategy's), end at global step 300 with the same
    variables, and the chief's final checkpoint has learnt the blobs."""
    if not os.path.exists(GLOO):
        pytest.skip("needs the Gloo plugin (make gloo)")
    md = str(tmp_path / "job")
    cluster = {"chief": ["127.0.0.1:%d" % _free_port()], "worker": ["127.0.0.1:%d" % _free_port()]}
    envs = {r: _env(r, md, cluster) for r in ("chief", "worker")}
    if canned:
        for env in envs.values():
            env["CANNED"] = "1"
    codes, out = run_tasks(envs, [JOB])
    assert codes == {"chief": 0, "worker": 0}, out
    sums = {}
    for rank, role in enumerate(("chief", "worker")):
        assert "TRAINED %s" % role in out[role], out[role]
        m = re.search(r"collective: rank=%d size=2 steps=300 global_step=300 variables_checksum=(\w+)" % rank,
                      out[role])
        assert m, out[role]
        sums[role] = m.group(1)
    assert sums["chief"] == sums["worker"]
    line = [ln for ln in out["chief"].splitlines() if ln.startswith("METRIC ")][-1]
    m = {k: float(v) for k, v in re.findall(r"(\w+)=([-\d.e]+)", line)}
    assert m["global_step"] == 300 and m["accuracy"] > 0.85, out["chief"]


# ---------------------------------------------------------------- RunConfig(train_distribute=strategy)
PROGRAM = os.path.join(HERE, "..", "examples", "tf_programs", "fashion_mnist_dist.py")
FMNIST = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"
GLOO = os.path.join(os.path.dirname(os.path.abspath(os.environ.get("LOOM_LIBRARY") or loom._lib.lib._name)),
                    "libloom_gloo.so")


def _with_strategy(tmp_path, strategy):
    """fashion_mnist_dist.py with RunConfig(train_distribute=<strategy>) (TF's multi-worker Estimator idiom)."""
    src = open(PROGRAM).read()
    old = "config = tf.estimator.RunConfig(model_dir=model_dir, tf_random_seed=SEED, save_checkpoints_steps=200)"
    assert old in src
    path = tmp_path / "strategy_program.py"
    path.write_text(src.replace(old, old[:-1] + ", train_distribute=%s)" % strategy))
    return str(path)


def _free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _metric(out):
    line = [ln for ln in out.splitlines() if ln.startswith("METRIC ")][-1]
    return {k: float(v) for k, v in re.findall(r"(\w+)=([-\d.e]+)", line)}


def test_multi_worker_mirrored_strategy_runs_the_collective_job(tmp_path):
    """chief + worker processes of one script with MultiWorkerMirroredStrategy: both all-reduce every step
    (over Gloo at the chief's TF_CONFIG address) and end with the same variables."""
    if not os.path.exists(FMNIST) or not os.path.exists(GLOO):
        pytest.skip("needs the Fashion-MNIST files and the Gloo plugin (make gloo)")
    prog = _with_strategy(tmp_path, "tf.distribute.MultiWorkerMirroredStrategy()")
    cluster = {"chief": ["127.0.0.1:%d" % _free_port()], "worker": ["127.0.0.1:%d" % _free_port()]}
    envs = {}
    for role in ("chief", "worker"):
        envs[role] = task_env(role, cluster, str(tmp_path / "job"))
        envs[role]["MAX_STEPS"] = "100"
    codes, out = run_tasks(envs, [prog, "0"], timeout=200)
    assert codes == {"chief": 0, "worker": 0}, out
    sums = {}
    for rank, role in enumerate(("chief", "worker")):
        m = re.search(r"collective: rank=%d size=2 steps=100 global_step=100 variables_checksum=(\w+)" % rank,
                      out[role])
        assert m, out[role]
        sums[role] = m.group(1)
    assert sums["chief"] == sums["worker"]
    m = _metric(out["chief"])
    assert m["global_step"] == 100 and m["accuracy"] > 0.6, out["chief"]


def test_strategies_without_their_cluster(tmp_path):
    """MultiWorkerMirroredStrategy without TF_CONFIG trains alone (TF's single worker); the
    parameter-server strategy in a cluster without ps tasks is an error naming it."""
    if not os.path.exists(FMNIST):
        pytest.skip("%s not found" % FMNIST)
    prog = _with_strategy(tmp_path, "tf.distribute.experimental.MultiWorkerMirroredStrategy()")
    env = task_env()
    env["MAX_STEPS"] = "50"
    p = subprocess.run([sys.executable, prog, "0"], env=env, capture_output=True, text=True, timeout=200)
    assert p.returncode == 0 and _metric(p.stdout)["global_step"] == 50, p.stdout + p.stderr
    prog = _with_strategy(tmp_path, "tf.compat.v1.distribute.experimental.ParameterServerStrategy()")
    env = task_env("chief", {"chief": ["127.0.0.1:%d" % _free_port()], "worker": ["127.0.0.1:%d" % _free_port()]},
                   str(tmp_path / "ps_job"))
    p = subprocess.run([sys.executable, prog, "0"], env=env, capture_output=True, text=True, timeout=200)
    assert p.returncode != 0 and "InvalidArgumentError" in p.stderr, p.stderr[-2000:]
    assert 'the parameter-server strategy but TF_CONFIG names no "ps" tasks' in p.stderr, p.stderr[-2000:]


def test_run_config_takes_loom_strategies_only():
    s = tf.distribute.MultiWorkerMirroredStrategy()
    assert tf.estimator.RunConfig(train_distribute=s).train_distribute is s
    assert tf.estimator.RunConfig(train_distribute=s).replace(save_summary_steps=5).train_distribute is s
    with pytest.raises(NotImplementedError, match="train_distribute=.*MultiWorkerMirroredStrategy"):
        tf.estimator.RunConfig(train_distribute="mirrored")
    with pytest.raises(NotImplementedError, match="MultiWorkerMirroredStrategy.scope"):
        s.scope()
