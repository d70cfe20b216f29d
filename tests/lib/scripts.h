/* scripts.h: finding the checkout's scripts/ from a test (the harness binary's tree, else the cwd). */
#ifndef SB_TEST_SCRIPTS_H
#define SB_TEST_SCRIPTS_H
#include <stddef.h>

/* out = CHECKOUT/scripts/NAME, CHECKOUT being the parent of the harness binary's BUILD directory
 * (harness = BUILD/harness), else the working directory. 0 when it is executable, -1 otherwise (out
 * still names where it was looked for). */
int test_script(const char *harness, const char *name, char *out, size_t len);

#endif
