/* test_python.c: runs the syncbench Python package's own tests against this build's libsyncbench.so:
 * python/tests/test_numpy.py with a python3 that has numpy, python/tests/test_torch.py (syncbench.torch: the
 * DDP comm hook, Horovod's API) with a python that has torch and gloo ($SYNCBENCH_TORCH_PYTHON, else
 * peers/.venv's, which `make peers` makes), python/tests/test_profile.py (syncbench-profile) and
 * python/tests/test_torch_models.py (peers/torch_models.py) with that python too;
 * each skipped, saying why, where no python has what it needs. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include "tests/lib/ranks.h"
#include "tests/lib/scripts.h"
#include "tests/lib/tmpdir.h"

Test(python, numpy_package_tests, .timeout = 600)
{
    char h[4096], s[4096];
    cr_assert(harness_path(h, sizeof h) == 0, "build the harness first (make)");
    test_script(h, "run-tests", s, sizeof s);
    char *cut = strstr(s, "/scripts/run-tests");
    cr_assert(cut, "cannot find the checkout from %s", s);
    *cut = '\0';
    const char *env = getenv("SYNCBENCH_PYTHON");
    static const char *const pys[] = {"python3", "/usr/bin/python3"};
    const char *py = NULL;
    char cmd[16384], out[1 << 16];
    for (size_t i = 0; !py && i < 3; i++) {
        const char *p = i == 0 ? env : pys[i - 1];
        if (!p || !*p) continue;
        snprintf(cmd, sizeof cmd, "%s -c 'import numpy' >/dev/null 2>&1", p);
        if (system(cmd) == 0) py = p;
    }
    if (!py) cr_skip_test("no python3 here imports numpy: install python3-numpy (scripts/install-deps does)");
    char lib[4096];
    snprintf(lib, sizeof lib, "%s", h);
    *strrchr(lib, '/') = '\0';
    snprintf(cmd, sizeof cmd, "cd '%s' && SYNCBENCH_LIB='%s/libsyncbench.so.0' %s -m unittest discover -s python/tests "
             "-p 'test_numpy.py'", s, lib, py);
    int rc = run_cmd(cmd, out, sizeof out);
    cr_assert_eq(rc, 0, "%s:\n%s", cmd, out);
}

/* Runs python/tests/PATTERN with the python that has torch and gloo ($SYNCBENCH_TORCH_PYTHON, else peers/.venv's,
 * else python3), or skips saying why. */
static void s_torch_tests(const char *pattern)
{
    char h[4096], s[4096];
    cr_assert(harness_path(h, sizeof h) == 0, "build the harness first (make)");
    test_script(h, "run-tests", s, sizeof s);
    char *cut = strstr(s, "/scripts/run-tests");
    cr_assert(cut, "cannot find the checkout from %s", s);
    *cut = '\0';
    char py[4200], cmd[16384], out[1 << 16];
    const char *env = getenv("SYNCBENCH_TORCH_PYTHON");
    if (env && *env) snprintf(py, sizeof py, "%s", env);
    else snprintf(py, sizeof py, "%s/peers/.venv/bin/python", s);
    if (!(env && *env) && access(py, X_OK) != 0) snprintf(py, sizeof py, "python3");
    snprintf(cmd, sizeof cmd, "%s -c 'import torch, torch.distributed as d; assert d.is_gloo_available()' "
             ">/dev/null 2>&1", py);
    if (system(cmd) != 0)
        cr_skip_test("torch with gloo is not importable by %s: `make peers` installs it into peers/.venv "
                     "(or set SYNCBENCH_TORCH_PYTHON)", py);
    char lib[4096];
    snprintf(lib, sizeof lib, "%s", h);
    *strrchr(lib, '/') = '\0';
    snprintf(cmd, sizeof cmd, "cd '%s' && SYNCBENCH_LIB='%s/libsyncbench.so.0' %s -W ignore::FutureWarning -m unittest "
             "discover -s python/tests -p '%s' 2>&1", s, lib, py, pattern);
    int rc = run_cmd(cmd, out, sizeof out);
    cr_assert_eq(rc, 0, "%s:\n%s", cmd, out);
}

Test(python, torch_package_tests, .timeout = 900) { s_torch_tests("test_torch.py"); }

/* syncbench-profile: counts against hand-computed values, ResNet-50 against workloads/resnet50.tsv */
Test(python, profile_tests, .timeout = 900) { s_torch_tests("test_profile.py"); }

/* peers/torch_models.py end to end, small: every config trains alike (issue 34 §3's comparison) */
Test(python, torch_models_script, .timeout = 600) { s_torch_tests("test_torch_models.py"); }

/* harness profile transformers:CLASS where transformers cannot be imported (a package on PYTHONPATH that refuses, so
 * the case is the same with or without `make peers`): one clear error, naming transformers and `make peers`, exit 2;
 * runs without torch too (transformers is asked for first). */
Test(python, profile_names_make_peers_when_transformers_is_missing, .timeout = 120)
{
    char h[4096], cmd[16384], out[1 << 14];
    cr_assert(harness_path(h, sizeof h) == 0, "build the harness first (make)");
    if (system("command -v python3 >/dev/null 2>&1") != 0) cr_skip_test("python3 is not installed");
    char *dir = tmpdir_make();
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/transformers' && echo 'raise ImportError(\"no transformers here (test)\")' "
             "> '%s/transformers/__init__.py'", dir, dir);
    cr_assert_eq(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "PYTHONPATH='%s' '%s' profile transformers:BertForMaskedLM --input 128:int 2>&1", dir, h);
    int rc = run_cmd(cmd, out, sizeof out);
    cr_expect_eq(rc, 2, "%s: rc %d:\n%s", cmd, rc, out);
    cr_expect(strstr(out, "transformers is not importable"), "%s", out);
    cr_expect(strstr(out, "no transformers here (test)"), "%s", out);
    const char *m = strstr(out, "`make peers`");
    cr_expect(m && !strstr(m + 1, "`make peers`"), "the error once, with `make peers`: %s", out);
    tmpdir_remove(dir);
}
