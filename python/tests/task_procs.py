"""Runs a TF_CONFIG job's tasks as real processes, for the tests."""
import subprocess
import sys


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
