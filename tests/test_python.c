/* test_python.c: runs the syncbench Python package's own tests (python/tests/test_numpy.py) against this
 * build's libsyncbench.so with a python3 that has numpy; skipped, saying why, where none has it. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/lib/ranks.h"
#include "tests/lib/scripts.h"

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
             "-p 'test_*.py'", s, lib, py);
    int rc = run_cmd(cmd, out, sizeof out);
    cr_assert_eq(rc, 0, "%s:\n%s", cmd, out);
}
