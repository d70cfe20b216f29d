/* tmpdir.h: temporary directories for the tests (criterion assertions inside). */
#ifndef SB_TEST_TMPDIR_H
#define SB_TEST_TMPDIR_H

/* A fresh /tmp/sb-boot-XXXXXX (malloc'd; asserts it was made). */
char *tmpdir_make(void);
/* Entries of dir whose name starts with prefix ("" = all). */
int tmpdir_entries_with(const char *dir, const char *prefix);
int tmpdir_entries(const char *dir);
/* rm -rf dir (expects success), then free the name. */
void tmpdir_remove(char *dir);

#endif
