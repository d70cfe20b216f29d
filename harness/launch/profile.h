/* profile.h: `harness profile MODEL --input SHAPE [-o FILE.tsv] ...`: a PyTorch model's gradient profile by
 * syncbench-profile (python/syncbench/profile.py), run with the python that has torch. */
#ifndef SB_HARNESS_PROFILE_H
#define SB_HARNESS_PROFILE_H

/* Replace this process with `PYTHON -m syncbench.profile ARGS...` (argv after "profile"): PYTHON is
 * $SYNCBENCH_TORCH_PYTHON, else the checkout's peers/.venv/bin/python (`make peers`), else python3; the
 * checkout's python/ goes first on PYTHONPATH. Returns only when it cannot start it: 1, with why on stderr
 * (syncbench-profile itself says when torch is missing). */
int h_profile_exec(int argc, char **argv);

#endif
