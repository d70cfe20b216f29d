/* profile.c: `harness profile`: hands its arguments to syncbench-profile (python/syncbench/profile.py), which
 * writes a PyTorch model's gradient profile for --model FILE.tsv; see profile.h. */
#include "harness/launch/profile.h"
#include "harness/launch/peers.h"
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int h_profile_exec(int argc, char **argv)
{
    char root[PATH_MAX] = ".", python[PATH_MAX + 32], path[PATH_MAX + 64];
    if (h_repo_root(root, sizeof root) < 0) snprintf(root, sizeof root, ".");
    const char *env = getenv("SYNCBENCH_TORCH_PYTHON");
    snprintf(python, sizeof python, "%s/peers/.venv/bin/python", root);
    if (env && *env) snprintf(python, sizeof python, "%s", env);
    else if (access(python, X_OK) != 0) snprintf(python, sizeof python, "python3");
    /* the checkout's package first, so a build tree works without `make python` */
    snprintf(path, sizeof path, "%s/python/syncbench/profile.py", root);
    if (access(path, R_OK) == 0) {
        const char *old = getenv("PYTHONPATH");
        char *pp = malloc(strlen(root) + (old ? strlen(old) : 0) + 16);
        if (!pp) return fprintf(stderr, "harness: profile: out of memory\n"), 1;
        sprintf(pp, "%s/python%s%s", root, old && *old ? ":" : "", old && *old ? old : "");
        setenv("PYTHONPATH", pp, 1);
        free(pp);
    }
    char **av = calloc((size_t)argc + 4, sizeof *av);
    if (!av) return fprintf(stderr, "harness: profile: out of memory\n"), 1;
    int k = 0;
    av[k++] = python, av[k++] = "-m", av[k++] = "syncbench.profile";
    for (int i = 0; i < argc; i++) av[k++] = argv[i];
    av[k] = NULL;
    fflush(NULL);
    execvp(python, av);
    fprintf(stderr, "harness: profile: cannot run %s: %s (it needs a python with torch: `make peers` makes "
                    "peers/.venv, or set SYNCBENCH_TORCH_PYTHON)\n", python, strerror(errno));
    free(av);
    return 1;
}
