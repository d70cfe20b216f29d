/* test_docs.c: the documents stand as generated and render: docs/results.md and README.md's headline
 * block are what scripts/gen-docs makes from results/ (never typed by hand, never stale), and every
 * Markdown file has balanced code fences and relative links to files that exist (scripts/check-markdown,
 * itself shown to catch both). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/lib/ranks.h"
#include "tests/lib/scripts.h"
#include "tests/lib/tmpdir.h"

static void s_script(const char *name, char *out, size_t len)
{
    char h[512];
    cr_assert(harness_path(h, sizeof h) == 0, "build the harness first (make)");
    cr_assert(test_script(h, name, out, len) == 0, "no executable %s", out);
    if (system("command -v python3 >/dev/null 2>&1") != 0) cr_skip_test("python3 is not installed (the scripts need it)");
}

Test(docs, generated_from_results_and_not_stale, .timeout = 60)
{
    char gen[1024], cmd[8192];
    static char out[1 << 16];
    s_script("gen-docs", gen, sizeof gen);
    char root[1024];
    snprintf(root, sizeof root, "%s", gen);
    *strrchr(root, '/') = '\0';
    *strrchr(root, '/') = '\0';
    snprintf(cmd, sizeof cmd, "cd '%s' && scripts/gen-docs --check", root);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 0, "docs/results.md or README.md is stale against results/ (make docs): %s",
                 out);
    /* and the check can fail: a results file that says otherwise makes them stale */
    char *dir = tmpdir_make(), path[1200];
    snprintf(cmd, sizeof cmd, "cp -r '%s/results' '%s/results' && cp '%s/README.md' '%s/README.md' && mkdir -p '%s/docs' && "
             "cp '%s/docs/results.md' '%s/docs/results.md'", root, dir, root, dir, dir, root, dir);
    cr_assert_eq(system(cmd), 0);
    snprintf(path, sizeof path, "%s/results/model-fit-check.jsonl", dir);
    FILE *f = fopen(path, "a");
    cr_assert(f);
    fprintf(f, "{\"mode\":\"model\",\"kind\":\"error\",\"sample\":\"out\",\"group\":\"all\",\"count\":1,"
               "\"median_abs_err_pct\":50,\"p90_abs_err_pct\":50,\"worst_err_pct\":50,\"within_10pct\":0}\n");
    fclose(f);
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' --check --results results --readme README.md --out docs/results.md", dir, gen);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 1, "a changed results file: %s", out);
    cr_expect(strstr(out, "stale"), "%s", out);
    tmpdir_remove(dir);
}

Test(docs, markdown_renders, .timeout = 60)
{
    char chk[1024], cmd[2048];
    static char out[1 << 16];
    s_script("check-markdown", chk, sizeof chk);
    snprintf(cmd, sizeof cmd, "'%s'", chk);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    char *dir = tmpdir_make(), path[1200];
    snprintf(path, sizeof path, "%s/a.md", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fprintf(f, "# a\n\n[there](missing.md) and [fine](a.md)\n\n```\ncode never closed\n");
    fclose(f);
    snprintf(cmd, sizeof cmd, "'%s' '%s'", chk, dir);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 1, "%s", out);
    cr_expect(strstr(out, "missing.md"), "%s", out);
    cr_expect(strstr(out, "never closed"), "%s", out);
    cr_expect(!strstr(out, "link to a.md"), "%s", out);
    tmpdir_remove(dir);
}
