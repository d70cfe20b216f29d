/* scripts.c: finding the checkout's scripts/ from a test (scripts.h). */
#include "tests/lib/scripts.h"
#include <limits.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int test_script(const char *harness, const char *name, char *out, size_t len)
{
    char dir[PATH_MAX];
    /* resolved first: the tests name it BUILD/tests/../harness */
    if (!harness || !realpath(harness, dir)) snprintf(dir, sizeof dir, "%s", harness ? harness : "");
    snprintf(out, len, "scripts/%s", name);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0', slash = strrchr(dir, '/');
    if (slash) *slash = '\0', snprintf(out, len, "%s/scripts/%s", dir, name);
    if (access(out, X_OK) != 0 && getcwd(dir, sizeof dir)) snprintf(out, len, "%s/scripts/%s", dir, name);
    return access(out, X_OK) == 0 ? 0 : -1;
}
