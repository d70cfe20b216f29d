"""torchjob.py: what the PyTorch side-by-side scripts of peers/ share: starting a job's ranks with torchrun's
environment (rank 0's output passed through, every rank stopped as soon as one fails or the job outlives its
budget) and a percentile."""
import os
import secrets
import signal
import socket
import subprocess
import sys
import time


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def launch_ranks(name, script, argv, procs, budget, port, env_extra=None):
    """Run `procs` ranks of `script` with `argv` on 127.0.0.1:`port`; 0, or 1 after saying which rank failed."""
    secret = secrets.token_hex(32)
    here = os.path.dirname(os.path.abspath(script))
    ps = []
    for r in range(procs):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(procs), LOCAL_RANK=str(r), LOCAL_WORLD_SIZE=str(procs),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), SYNCBENCH_JOB_SECRET=secret, OMP_NUM_THREADS="1",
                   **(env_extra or {}))
        env["PYTHONPATH"] = os.path.join(os.path.dirname(here), "python") + os.pathsep + env.get("PYTHONPATH", "")
        ps.append(subprocess.Popen([sys.executable, os.path.abspath(script)] + argv, env=env,
                                   stdout=None if r == 0 else subprocess.DEVNULL, start_new_session=True))
    deadline, rc = time.monotonic() + budget, 0
    try:
        while any(p.poll() is None for p in ps):
            bad = [(r, p.returncode) for r, p in enumerate(ps) if p.returncode not in (None, 0)]
            if bad:
                print("%s: rank %d exited %d%s: stopping every rank" % (
                    name, bad[0][0], bad[0][1], " (killed: out of memory?)" if bad[0][1] == -signal.SIGKILL else ""),
                      file=sys.stderr)
                return 1
            if time.monotonic() > deadline:
                print("%s: ranks still running after %d s: stopping every rank" % (name, budget), file=sys.stderr)
                return 1
            time.sleep(0.2)
        bad = [(r, p.returncode) for r, p in enumerate(ps) if p.returncode != 0]
        if bad:
            print("%s: rank %d exited %d" % ((name,) + bad[0]), file=sys.stderr)
            rc = 1
    finally:
        for p in ps:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    return rc
