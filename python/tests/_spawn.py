"""_spawn.py: starts a job of N local ranks for the package's tests, as torchrun would (RANK, WORLD_SIZE,
LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, a free MASTER_PORT, a job id and secret), waits with a
timeout and kills every rank left on failure or timeout: no process outlives a call."""
import os
import secrets
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)


def free_port():
    # two free ports in a row: torchrun's MASTER_PORT and ours, MASTER_PORT + 1
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1]
        if p >= 65535:
            continue
        try:
            with socket.socket() as s2:
                s2.bind(("127.0.0.1", p + 1))
            return p
        except OSError:
            continue
    raise RuntimeError("no two free ports in a row on 127.0.0.1")


def run(world, script, args=(), timeout=120, python=None, env_extra=None):
    """Run `python script args...` as ranks 0..world-1; returns [(returncode, output)] per rank. A rank still
    running after timeout seconds is killed (returncode None)."""
    port = free_port()
    job = "pyt-%d-%s" % (os.getpid(), secrets.token_hex(4))
    secret = secrets.token_hex(32)
    procs = []
    for r in range(world):
        env = dict(os.environ)
        env.update(RANK=str(r), WORLD_SIZE=str(world), LOCAL_RANK=str(r), LOCAL_WORLD_SIZE=str(world),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), SYNCBENCH_JOB=job,
                   SYNCBENCH_JOB_SECRET=secret, OMP_NUM_THREADS="1",
                   PYTHONPATH=PKG + os.pathsep + env.get("PYTHONPATH", ""))
        if env_extra:
            env.update(env_extra)
        procs.append(subprocess.Popen([python or sys.executable, os.path.join(HERE, script)] + [str(a) for a in args],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      start_new_session=True))
    deadline = time.monotonic() + timeout
    out = [None] * world
    try:
        for r, p in enumerate(procs):
            left = max(0.1, deadline - time.monotonic())
            try:
                o, _ = p.communicate(timeout=left)
                out[r] = (p.returncode, o.decode(errors="replace"))
            except subprocess.TimeoutExpired:
                break
    finally:
        for r, p in enumerate(procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                o, _ = p.communicate()
                out[r] = (None, "killed after %d s\n%s" % (timeout, o.decode(errors="replace")))
    return out
