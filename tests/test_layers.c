/* test_layers.c: the architecture as a check on the sources: arrows point down (harness > trainer >
 * engines > core, the public API in api/ beside the trainer, and inside harness/ the rooms in their order), an engine never includes another,
 * only the registry names engines in the harness (includes an engine's header, spells an engine's name as a
 * string or uses the patterns it once gave; with the listed exceptions, each with its reason),
 * no test includes a harness .c file (they link libharness.a), and every source file opens with a line
 * naming itself and what it is for. */
#include <criterion/criterion.h>
#include <ftw.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tests/lib/ranks.h"
#include "tests/lib/scripts.h"
#include "harness/registry/engines.h"

/* The rooms of harness/ from the bottom up: a file may include its own room and those below it. */
static const char *const s_rooms[] = {"registry", "record", "emulate", "report", "model", "simulate", "modes", "cli", "launch"};
#define S_NROOMS (int)(sizeof s_rooms / sizeof s_rooms[0])
static const char *const s_engines[] = {"ring", "ps", "allreduce-tree", "mpi"};

/* Harness files that still read an engine's code directly rather than its declared schedule
 * (engine_ops_t.schedule, through the registry): none now; a file listed here is exempt. */
static const char *const s_engine_readers[] = {NULL};

/* Harness files outside the registry that still name an engine in their code (a string literal that is an
 * engine's name), each with its reason; every other one reads engines through the registry and their
 * declared schedules. */
static const char *const s_engine_namers[] = {NULL};
/* Words no harness file outside the registry may use: the communication patterns the registry once gave. */
static const char *const s_pattern_words[] = {"h_pattern_t", "H_PATTERN_", "h_engine_pattern"};

static char g_root[PATH_MAX];
static char g_bad[1 << 15];
static size_t g_nbad;
static int g_nfiles;

static void s_root(void)
{
    char h[PATH_MAX], s[PATH_MAX];
    cr_assert(harness_path(h, sizeof h) == 0, "build the harness first (make)");
    test_script(h, "run-tests", s, sizeof s);
    char *cut = strstr(s, "/scripts/run-tests");
    cr_assert(cut, "cannot find the checkout from %s", s);
    *cut = '\0';
    snprintf(g_root, sizeof g_root, "%s", s);
}

static void s_fail(const char *fmt, const char *a, const char *b)
{
    size_t o = strlen(g_bad);
    if (o + 512 < sizeof g_bad) snprintf(g_bad + o, sizeof g_bad - o, fmt, a, b);
    g_nbad++;
}

/* Layer of a path relative to the checkout: 0 core, 1 engines, 2 trainer and the public API (api/, with its
 * own engine table), 3 harness; -1 other. */
static int s_layer(const char *rel)
{
    if (!strncmp(rel, "core/", 5)) return 0;
    for (size_t i = 0; i < sizeof s_engines / sizeof *s_engines; i++) {
        size_t n = strlen(s_engines[i]);
        if (!strncmp(rel, s_engines[i], n) && rel[n] == '/') return 1;
    }
    if (!strncmp(rel, "trainer/", 8) || !strncmp(rel, "api/", 4)) return 2;
    if (!strncmp(rel, "harness/", 8)) return 3;
    return -1;
}

static const char *s_engine_of(const char *rel)
{
    for (size_t i = 0; i < sizeof s_engines / sizeof *s_engines; i++) {
        size_t n = strlen(s_engines[i]);
        if (!strncmp(rel, s_engines[i], n) && rel[n] == '/') return s_engines[i];
    }
    return NULL;
}

/* Room of a harness path: its index in s_rooms; S_NROOMS for harness/main.c (above every room); -1 none. */
static int s_room(const char *rel)
{
    if (strncmp(rel, "harness/", 8)) return -1;
    if (!strcmp(rel, "harness/main.c")) return S_NROOMS;
    for (int i = 0; i < S_NROOMS; i++) {
        size_t n = strlen(s_rooms[i]);
        if (!strncmp(rel + 8, s_rooms[i], n) && rel[8 + n] == '/') return i;
    }
    return -2; /* a harness file outside every room */
}

static int s_listed(const char *rel, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (list[i] && !strcmp(rel, list[i])) return 1;
    return 0;
}

/* The code of a line without its comments (state: inside a block comment across lines) */
static void s_code_of(const char *line, char *code, size_t len, int *in_comment)
{
    size_t k = 0;
    for (const char *p = line; *p && k + 1 < len; p++) {
        if (*in_comment) {
            if (p[0] == '*' && p[1] == '/') *in_comment = 0, p++;
            continue;
        }
        if (p[0] == '/' && p[1] == '*') { *in_comment = 1, p++; continue; }
        if (p[0] == '/' && p[1] == '/') break;
        code[k++] = *p;
    }
    code[k] = '\0';
}

/* A harness file's code outside the registry: no pattern words, no string literal that is an engine's name. */
static void s_check_names(const char *rel, const char *code)
{
    if (strncmp(rel, "harness/", 8) || !strncmp(rel, "harness/registry/", 17) ||
        s_listed(rel, s_engine_namers, sizeof s_engine_namers / sizeof *s_engine_namers))
        return;
    for (size_t i = 0; i < sizeof s_pattern_words / sizeof *s_pattern_words; i++)
        if (strstr(code, s_pattern_words[i])) s_fail("%s uses %s: engines have no patterns outside the registry\n", rel, s_pattern_words[i]);
    int n = h_engine_count() + h_peer_engine_count();
    for (int e = 0; e < n; e++) {
        const engine_ops_t *ops = e < h_engine_count() ? h_engine_at(e) : h_peer_engine_at(e - h_engine_count());
        char lit[64];
        snprintf(lit, sizeof lit, "\"%s\"", ops->name);
        if (strstr(code, lit)) s_fail("%s names the engine %s: only the registry names engines in the harness\n", rel, lit);
    }
}

static void s_check_file(const char *rel, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) { s_fail("%s: cannot read%s\n", rel, ""); return; }
    g_nfiles++;
    char line[4096], base[256];
    snprintf(base, sizeof base, "%s", strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel);
    /* the opening line: a comment that starts with NAME, then ":" or " (DIR):" */
    if (!fgets(line, sizeof line, f) || strncmp(line, "/* ", 3) || strncmp(line + 3, base, strlen(base)) ||
        (line[3 + strlen(base)] != ':' && line[3 + strlen(base)] != ' '))
        s_fail("%s: does not open with \"/* %s: what it is for\"\n", rel, base);
    int layer = s_layer(rel), room = s_room(rel);
    const char *engine = s_engine_of(rel);
    if (room == -2) s_fail("%s: a harness file outside the rooms%s\n", rel, "");
    int in_comment = 0;
    do {
        char inc[1024], code[4096];
        s_code_of(line, code, sizeof code, &in_comment);
        s_check_names(rel, code);
        if (sscanf(line, " #include \"%1023[^\"]\"", inc) != 1) continue;
        int il = s_layer(inc);
        if (!strncmp(rel, "tests/", 6) && !strncmp(inc, "harness/", 8) && strstr(inc, ".c"))
            s_fail("%s includes %s: tests link libharness.a\n", rel, inc);
        if (layer >= 0 && il > layer) s_fail("%s includes %s: a layer above its own\n", rel, inc);
        const char *ie = s_engine_of(inc);
        if (engine && ie && strcmp(engine, ie)) s_fail("%s includes %s: an engine includes another engine\n", rel, inc);
        if (room >= 0 && s_room(inc) > room) s_fail("%s includes %s: a room above its own\n", rel, inc);
        if (room >= 0 && ie && s_room(rel) != 0 &&
            !s_listed(rel, s_engine_readers, sizeof s_engine_readers / sizeof *s_engine_readers))
            s_fail("%s includes %s: only the registry names engines in the harness\n", rel, inc);
    } while (fgets(line, sizeof line, f));
    fclose(f);
}

static int s_visit(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (type != FTW_F) return 0;
    size_t n = strlen(path);
    int src = (n > 2 && (!strcmp(path + n - 2, ".c") || !strcmp(path + n - 2, ".h"))) ||
              (n > 3 && !strcmp(path + n - 3, ".cu"));
    if (!src) return 0;
    const char *rel = path + strlen(g_root) + 1;
    s_check_file(rel, path);
    return 0;
}

Test(layers, arrows_point_down)
{
    s_root();
    static const char *const dirs[] = {"core", "ring", "ps", "allreduce-tree", "mpi", "trainer", "api", "include", "harness", "tests"};
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
        char d[PATH_MAX + 32];
        snprintf(d, sizeof d, "%s/%s", g_root, dirs[i]);
        cr_assert_eq(nftw(d, s_visit, 16, FTW_PHYS), 0, "cannot walk %s", d);
    }
    cr_assert_gt(g_nfiles, 150, "only %d source files found under %s", g_nfiles, g_root);
    cr_assert_eq(g_nbad, 0, "%zu problems:\n%s", g_nbad, g_bad);
}

/* The checks above must be able to fail: a file that breaks each rule is caught. */
Test(layers, the_rules_catch_a_breach)
{
    s_root();
    char dir[] = "/tmp/sb-layers-XXXXXX";
    cr_assert(mkdtemp(dir));
    char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/x.c", dir);
    static const struct { const char *rel, *text, *want; } cases[] = {
        {"core/x.c", "/* x.c: a core file */\n#include \"trainer/trainer.h\"\n", "a layer above its own"},
        {"ring/x.c", "/* x.c: an engine */\n#include \"ps/ps.h\"\n", "an engine includes another engine"},
        {"api/x.c", "/* x.c: the API */\n#include \"harness/registry/engines.h\"\n", "a layer above its own"},
        {"harness/record/x.c", "/* x.c: a record file */\n#include \"harness/modes/modes.h\"\n", "a room above its own"},
        {"harness/modes/x.c", "/* x.c: a mode */\n#include \"ring/ring.h\"\n", "only the registry names engines"},
        {"tests/x.c", "/* x.c: a test */\n#include \"harness/record/jsonl.c\"\n", "tests link libharness.a"},
        {"harness/x.c", "/* x.c: loose */\n", "outside the rooms"},
        {"harness/model/x.c", "/* x.c: a model */\nint k = h_engine_pattern(e);\n", "engines have no patterns"},
        {"harness/model/x.c", "/* x.c: a model */\nconst char *e = \"tree\";\n", "names the engine \"tree\""},
        {"core/x.c", "#include \"core/err.h\"\n", "does not open with"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        FILE *f = fopen(p, "w");
        cr_assert(f);
        fputs(cases[i].text, f);
        fclose(f);
        g_bad[0] = '\0';
        g_nbad = 0;
        s_check_file(cases[i].rel, p);
        cr_assert(g_nbad > 0 && strstr(g_bad, cases[i].want), "%s was not caught (%s): %s", cases[i].rel,
                  cases[i].want, g_bad);
    }
    g_bad[0] = '\0';
    g_nbad = 0;
    FILE *f = fopen(p, "w");
    cr_assert(f);
    fputs("/* x.c (harness/modes): a mode that keeps the rules (\"ring\" in a comment is prose) */\n"
          "#include \"harness/record/result.h\"\n"
          "#include \"core/err.h\"\n", f);
    fclose(f);
    s_check_file("harness/modes/x.c", p);
    cr_assert_eq(g_nbad, 0, "%s", g_bad);
    unlink(p);
    rmdir(dir);
}
