"""Runs a TF_CONFIG job's tasks as real processes, for the tests."""
import json
import os
import subprocess
import sys

import loom


def task_env(role=None, cluster=None, model_dir=None):
    """This environment with the loom under test importable, and TF_CONFIG naming task role:0 of cluster
    (no TF_CONFIG when role is None)."""
    env = dict(os.environ)
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(loom.__file__)))
    env["PYTHONPATH"] = pkg_root + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("TF_CONFIG", None)
    if role is not None:
        env["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": role, "index": 0}, "model_dir": model_dir})
    return env


def run_tasks(envs, args, cwd=None, timeout=240):
    """Starts one `python args...` per role of envs ({role: environment}), waits for all of them within
    timeout seconds (killing what is left) and returns ({role: exit code}, {role: output})."""
    procs = {role: subprocess.Popen([sys.executable] + list(args), cwd=cwd, env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True)
             for role, env in envs.items()}
    out = {}
    try:
        for role, p in procs.items():
            out[role] = p.communicate(timeout=timeout)[0]
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
    return {role: p.returncode for role, p in procs.items()}, out
