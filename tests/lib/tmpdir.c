/* tmpdir.c: temporary directories for the tests (file:// rendezvous, stores): make one, count its
 * entries, remove it. */
#include "tests/lib/tmpdir.h"
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *tmpdir_make(void)
{
    char *d = strdup("/tmp/sb-boot-XXXXXX");
    cr_assert_not_null(mkdtemp(d));
    return d;
}

int tmpdir_entries_with(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && !strncmp(e->d_name, prefix, strlen(prefix))) n++;
    if (d) closedir(d);
    return n;
}

int tmpdir_entries(const char *dir) { return tmpdir_entries_with(dir, ""); }

void tmpdir_remove(char *dir)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
    free(dir);
}
