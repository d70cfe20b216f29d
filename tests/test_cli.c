/* test_cli.c: the harness command line as its users meet it (issue 32, section 4): a misspelt flag's
 * "did you mean", a torchrun-style environment that is half set, each mode's --help, nccl-tests' spellings,
 * argument errors and train's missing paths found before launch, shell completion's values. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/lib/ranks.h"
#include "tests/lib/scripts.h"
#include "trainer/workload.h"
#include "harness/registry/layouts.h"
#include <unistd.h>
#include "harness/cli/opts.h"
#include "core/err.h"

static char g_harness[512];

static void s_find(void)
{
    cr_assert(harness_path(g_harness, sizeof g_harness) == 0, "build the harness first (make)");
}

/* A misspelt long flag names the option it most likely meant, once, in the one error line; a word near
 * nothing gets no guess. */
Test(cli, misspelt_flag_says_did_you_mean, .timeout = 30)
{
    s_find();
    static const struct { const char *typed, *meant; } cases[] = {
        {"--procss 2", "--procs"},          /* one letter too many */
        {"--warmpu 3", "--warmup"},         /* two letters swapped */
        {"--sizez 4K", "--sizes"},          /* one letter wrong */
        {"--Procs 2", "--procs"},           /* case */
        {"--stpes=3", "--steps"},           /* with =VALUE */
        {"--ring-algp ring", "--ring-algo"}, /* an engine's own option */
    };
    char cmd[2048], out[8192], want[128];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s bench %s", g_harness, cases[i].typed);
        cr_expect_eq(run_cmd(cmd, out, sizeof out), 2, "%s: %s", cases[i].typed, out);
        snprintf(want, sizeof want, "did you mean %s?", cases[i].meant);
        cr_expect_eq(count_in(out, want), 1, "%s: want '%s' once:\n%s", cases[i].typed, want, out);
        cr_expect_eq(count_in(out, "unknown option"), 1, "%s: the error is printed once:\n%s", cases[i].typed, out);
    }
    snprintf(cmd, sizeof cmd, "%s bench --bogus", g_harness);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 2, "%s", out);
    cr_expect(strstr(out, "unknown option '--bogus'") && !strstr(out, "did you mean"), "%s", out);
    /* the driver's own options (set on a rank's command line) are never suggested */
    snprintf(cmd, sizeof cmd, "%s bench --as-rnk", g_harness);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 2, "%s", out);
    cr_expect(!strstr(out, "--as-rank"), "%s", out);
}

/* A torchrun-style environment that is half set is refused before any work, as torchrun's env:// refuses it:
 * WORLD_SIZE=2 without RANK used to run a world of one and exit 0; a rank outside the world failed late, on
 * MASTER_ADDR. WORLD_SIZE=1 alone is a world of one, as before. */
Test(cli, torchrun_env_half_set_is_refused, .timeout = 60)
{
    s_find();
    static const struct { const char *env, *said; } cases[] = {
        {"WORLD_SIZE=2", "WORLD_SIZE=2 is set but RANK is not"},
        {"WORLD_SIZE=2 RANK=2", "RANK=2 but WORLD_SIZE=2: the rank must be below the world size"},
        {"RANK=1", "RANK=1 is set but WORLD_SIZE is not"},
        {"WORLD_SIZE=two RANK=0", "WORLD_SIZE=two: the world size must be a whole number"},
    };
    char cmd[2048], out[8192];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(cmd, sizeof cmd, "env -u RANK -u WORLD_SIZE -u SLURM_PROCID -u OMPI_COMM_WORLD_RANK %s timeout 20 %s bench "
                 "--engine ring --sizes 4K --iters 1 --warmup 0", cases[i].env, g_harness);
        cr_expect_eq(run_cmd(cmd, out, sizeof out), 2, "%s: %s", cases[i].env, out);
        cr_expect(strstr(out, cases[i].said) && !strstr(out, "syncbench bench:") && !strstr(out, ".c:"),
                  "%s: want '%s', no run, no source location:\n%s", cases[i].env, cases[i].said, out);
        cr_expect_eq(count_in(out, "harness: "), 1, "%s: said once:\n%s", cases[i].env, out);
    }
    snprintf(cmd, sizeof cmd, "env -u RANK -u SLURM_PROCID -u OMPI_COMM_WORLD_RANK WORLD_SIZE=1 timeout 20 %s bench "
             "--engine ring --sizes 4K --iters 1 --warmup 0 --quiet", g_harness);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 0, "WORLD_SIZE=1: %s", out);
    /* the launcher's own ranks are not this process: --procs runs whatever the environment says */
    snprintf(cmd, sizeof cmd, "env -u RANK WORLD_SIZE=3 timeout 30 %s bench --engine ring --procs 2 --sizes 4K --iters 1 "
             "--warmup 0 --quiet", g_harness);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 0, "--procs 2 under WORLD_SIZE=3: %s", out);
    cr_expect(strstr(out, "2 ranks") != NULL, "%s", out);
}

/* Whether `harness MODE --help` lists the option (a line of its own starting "  --NAME", or naming it
 * after another option on such a line). */
static int s_lists(const char *help, const char *opt)
{
    char key[80];
    snprintf(key, sizeof key, "%.64s ", opt);
    for (const char *p = strstr(help, key); p; p = strstr(p + 1, key))
        if (p > help && (p[-1] == ' ' || p[-1] == '\n')) return 1;
    return 0;
}

/* Each MODE --help lists that mode's options only, and the warning for an option a mode ignores agrees
 * with it: report's help listed --net, --timeline, --peers and --json; gemm's --data, --optim, --factor;
 * explain's --json, --timeout; simulate's omitted --timeout, which bounds a simulation. */
Test(cli, mode_help_lists_only_its_options, .timeout = 60)
{
    s_find();
    static const struct { const char *mode, *has, *hasnt; } cases[] = {
        {"report", "--label --plots --format --quiet", "--net --timeline --peers --json --procs --sizes --engine"},
        {"gemm", "--procs --iters --warmup --model --batch --json", "--data --optim --factor --op --scaling --transport --net"},
        {"explain", "--engine --procs --sizes --dtype --plots", "--json --timeout --iters --scaling --timeline --label"},
        {"simulate", "--timeout --lat --sizes --engine --json", "--procs --check --iters --op --plots"},
        {"bench", "--sizes --iters --op --check --timeline --peers --json", "--format --plots --optim --steps"},
        {"train", "--model --data --optim --steps --save --json --timeline", "--format --sizes --op --lat"},
    };
    char cmd[2048], out[1 << 16], opt[64];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s %s --help", g_harness, cases[i].mode);
        cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
        for (int want = 1; want >= 0; want--) {
            const char *list = want ? cases[i].has : cases[i].hasnt;
            for (const char *p = list; *p; p += strcspn(p, " "), p += *p == ' ') {
                snprintf(opt, sizeof opt, "%.*s", (int)strcspn(p, " "), p);
                cr_expect_eq(s_lists(out, opt), want, "%s --help %s %s:\n%s", cases[i].mode, want ? "lacks" : "lists", opt, out);
            }
        }
    }
    /* what the help leaves out, the mode warns about; what it lists, it does not */
    snprintf(cmd, sizeof cmd, "%s explain --engine ring --procs 2 --sizes 64 --json - --timeout 5", g_harness);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, "warning: --json does nothing in explain mode") && strstr(out, "warning: --timeout does nothing "
              "in explain mode"), "%s", out);
    snprintf(cmd, sizeof cmd, "%s report --peers --net bw=1gbit /dev/null", g_harness);
    run_cmd(cmd, out, sizeof out);
    cr_expect(strstr(out, "warning: --peers does nothing in report mode") && strstr(out, "warning: --net does nothing "
              "in report mode"), "%s", out);
    snprintf(cmd, sizeof cmd, "%s simulate --timeout 1 --engine ring --nodes 2 --sizes 4K --net inter=1gbit --lat 5 "
             "--quiet", g_harness);
    run_cmd(cmd, out, sizeof out);
    cr_expect(!strstr(out, "--timeout does nothing"), "simulate honours --timeout:\n%s", out);
}

/* nccl-tests' -g G and -t T: G GPUs a thread, T threads a process, -np N processes: N x T x G GPUs, one rank
 * each (--gpus); bench only; with --gpus, refused. Parsed here, in the test's own process. */
Test(cli, nccl_tests_gpu_count, .timeout = 30)
{
    static const struct { const char *args; int gpus; } cases[] = {
        {"bench -g 2", 2}, {"bench -np 2 -g 2", 4}, {"bench -t 2 -g 2", 4}, {"bench --ngpus 1 --nthreads 3", 3},
        {"bench -np 4 -g 1 -b 8 -e 128M -f 2", 4}, {"bench -t 2", 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[256], *av[32];
        int ac = 0;
        av[ac++] = "harness";
        snprintf(buf, sizeof buf, "%s", cases[i].args);
        for (char *save = NULL, *t = strtok_r(buf, " ", &save); t && ac < 31; t = strtok_r(NULL, " ", &save)) av[ac++] = t;
        av[ac] = NULL;
        h_opts_t o;
        cr_assert_eq(h_opts_parse(&o, ac, av), 0, "%s: %s", cases[i].args, err_detail());
        cr_expect(o.gpus == cases[i].gpus && o.procs == 0, "%s: --gpus %d --procs %d, want --gpus %d", cases[i].args, o.gpus,
                  o.procs, cases[i].gpus);
    }
    char a0[] = "harness", a1[] = "bench", a2[] = "-g", a3[] = "2", a4[] = "--gpus", a5[] = "2";
    char *bad[] = {a0, a1, a2, a3, a4, a5, NULL};
    h_opts_t o;
    cr_expect_eq(h_opts_parse(&o, 6, bad), ERR_INVAL);
    cr_expect(strstr(err_detail(), "give one") != NULL, "%s", err_detail());
    char t1[] = "train";
    char *other[] = {a0, t1, a2, a3, NULL};
    cr_assert_eq(h_opts_parse(&o, 4, other), 0, "%s", err_detail());
    cr_expect(o.gpus == 0, "train -g 2 is not bench's: it warns and does nothing, --gpus %d", o.gpus);
}

/* Each engine's table closes as nccl-tests' does: the wrong elements, then the mean busbw over the sizes. */
Test(cli, bench_closes_with_avg_bus_bandwidth, .timeout = 90)
{
    s_find();
    char cmd[2048], out[1 << 15];
    snprintf(cmd, sizeof cmd, "%s bench -np 2 --engine ring,tree -b 4K -e 64K -f 4 -n 3 -w 1", g_harness);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    cr_expect_eq(count_in(out, "# Out of bounds values : 0 OK\n"), 2, "%s", out);
    cr_expect_eq(count_in(out, "# Avg bus bandwidth    : "), 2, "%s", out);
    /* each closing line: the mean of its table's busbw column (printed to 3 decimals) */
    double sum = 0;
    int rows = 0, tables = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        double bw;
        size_t b, c;
        char type[16], op[16];
        if (sscanf(line, " %zu %zu %15s %15s %*f %*f %lf", &b, &c, type, op, &bw) == 5) sum += bw, rows++;
        else if (sscanf(line, "# Avg bus bandwidth : %lf", &bw) == 1) {
            cr_expect_eq(rows, 3, "sizes 4K, 16K, 64K: %d rows", rows);
            cr_expect(rows && fabs(bw - sum / rows) <= 0.0006, "Avg bus bandwidth %g, the rows' mean %g", bw, rows ? sum / rows : 0);
            sum = 0, rows = 0, tables++;
        }
    }
    cr_expect_eq(tables, 2);
}

/* nccl-tests' -a: an iteration's time over the workers (0 rank 0's, 1 the mean, 2 the min, 3 the max, our
 * default): said in the header and, unless the max, in every JSON line as a configuration of its own. */
Test(cli, nccl_tests_average, .timeout = 90)
{
    s_find();
    static const char *const names[] = {"rank0", "mean", "min", "max"};
    char cmd[2048], out[1 << 15], want[64];
    for (int a = 0; a < 4; a++) {
        snprintf(cmd, sizeof cmd, "%s bench -np 2 --engine ring -b 4K -e 4K -n 3 -w 1 -a %d --json -", g_harness, a);
        cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "-a %d: %s", a, out);
        snprintf(want, sizeof want, "\"time_ranks\":\"%s\"", names[a]);
        cr_expect_eq(count_in(out, want), a == 3 ? 0 : 1, "-a %d: %s", a, out);
        snprintf(want, sizeof want, "time over the workers: %s\n", names[a]);
        cr_expect_eq(count_in(out, want), a == 3 ? 0 : 1, "-a %d: %s", a, out);
    }
    snprintf(cmd, sizeof cmd, "%s bench -np 2 -a 4", g_harness);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 2, "%s", out);
    cr_expect(strstr(out, "bad value '4' for --average") != NULL, "%s", out);
}

/* Argument errors are found before any launch, said once, without source locations: --model (its error names
 * the models), --optim, --straggler (a rank outside the world). They used to fail inside every rank, each with
 * "(at train.c:530)", and the driver repeated it. A failure only a rank can find keeps its locations for
 * --verbose. */
Test(cli, argument_errors_before_launch, .timeout = 90)
{
    s_find();
    static const struct { const char *args, *said; } cases[] = {
        {"--model nonsense", "--model nonsense: unknown model; the named models are resnet50, resnet101, vgg16"},
        {"--model mlp:784-0-10", "--model mlp:784-0-10: an MLP is mlp:W0-W1-...-Wn"},
        {"--straggler 5:30", "--straggler 5:30: rank 5 is not a worker of this run (workers 0..1)"},
        {"--straggler 1:abc", "--straggler 1:abc: expected RANK:MS"},
        {"--optim adam:lr=abc", "--optim adam:lr=abc: 'lr=abc' is not a number"},
        {"--optim bogus", "--optim bogus: unknown optimizer 'bogus'"},
        /* issue 33 section 5: a value over the top said "expected seconds >= 1" */
        {"--timeout 86401", "bad value '86401' for --timeout: expected seconds from 1 to 86400"},
    };
    char cmd[2048], out[8192];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(cmd, sizeof cmd, "timeout 60 %s train %s --procs 2 --steps 2", g_harness, cases[i].args);
        cr_expect_eq(run_cmd(cmd, out, sizeof out), 2, "%s: %s", cases[i].args, out);
        cr_expect(strstr(out, cases[i].said) != NULL, "%s: want '%s':\n%s", cases[i].args, cases[i].said, out);
        cr_expect(count_in(out, "harness: ") == 1 && !strstr(out, "[rank") && !strstr(out, ".c:"),
                  "%s: once, before any rank, no source location:\n%s", cases[i].args, out);
    }
    /* every named model is listed, from the workload registry */
    snprintf(cmd, sizeof cmd, "%s train --model nonsense", g_harness);
    run_cmd(cmd, out, sizeof out);
    cr_expect(strstr(out, "bert-large") && strstr(out, "gpt2") && strstr(out, "mlp:784-1024-1024-10"), "%s", out);
    /* a world of one (no launcher, no rank environment) has worker 0 only */
    snprintf(cmd, sizeof cmd, "env -u RANK -u WORLD_SIZE %s train --straggler 1:30 --steps 2", g_harness);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 2, "%s", out);
    cr_expect(strstr(out, "rank 1 is not a worker of this run (workers 0..0)") != NULL, "%s", out);
    /* a failure found in a rank (a data file that is not one): its locations only with --verbose */
    char bad[] = "/tmp/sb-cli-data-XXXXXX";
    int fd = mkstemp(bad);
    cr_assert(fd >= 0 && write(fd, "not data\n", 9) == 9);
    close(fd);
    for (int verbose = 0; verbose < 2; verbose++) {
        snprintf(cmd, sizeof cmd, "timeout 60 %s train --procs 2 --steps 2 --data %s%s", g_harness, bad,
                 verbose ? " --verbose" : "");
        cr_expect_neq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
        cr_expect(strstr(out, bad) != NULL, "%s", out);
        cr_expect_eq(strstr(out, "(at trainer.c:") != NULL, verbose, "--verbose %d:\n%s", verbose, out);
    }
    unlink(bad);
}

/* train's paths before any rank starts: a missing --data or --resume, a --save or --json that cannot be written,
 * one line naming the flag and the path, exit 2 (--data, --resume and --save failed in every rank before). */
Test(cli, train_paths_checked_before_launch, .timeout = 90)
{
    s_find();
    static const struct { const char *mode, *args, *said; } cases[] = {
        {"train", "--data /nonexistent/x.idx", "harness: --data: data file '/nonexistent/x.idx': No such file"},
        {"train", "--data mnist", "harness: --data: data file 'mnist': No such file"},
        {"train", "--resume /nonexistent/ck", "harness: --resume: checkpoint '/nonexistent/ck': No such file"},
        {"train", "--resume /tmp", "harness: --resume: checkpoint '/tmp' is not a regular file"},
        {"train", "--save /nonexistent/dir/ck", "harness: --save /nonexistent/dir/ck: no folder /nonexistent/dir"},
        {"train", "--json /nonexistent/dir/r.jsonl", "harness: --json /nonexistent/dir/r.jsonl: cannot write there"},
        {"run", "--data /nonexistent/x.idx", "harness: --data: data file '/nonexistent/x.idx': No such file"},
    };
    char cmd[2048], out[8192];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(cmd, sizeof cmd, "cd /tmp && timeout 60 %s %s %s --procs 2 --steps 2", g_harness, cases[i].mode,
                 cases[i].args);
        cr_expect_eq(run_cmd(cmd, out, sizeof out), 2, "%s: %s", cases[i].args, out);
        cr_expect(strstr(out, cases[i].said) != NULL, "%s: want '%s':\n%s", cases[i].args, cases[i].said, out);
        cr_expect(count_in(out, "harness: ") == 1 && !strstr(out, "[rank") && !strstr(out, "starting ranks"),
                  "%s: once, before any rank:\n%s", cases[i].args, out);
    }
}

/* `harness run` keeps every run's results, timestamped, says where they went, and points run-latest.jsonl at the
 * newest (it wrote run-latest.jsonl and deleted the one before without a word). */
Test(cli, run_keeps_earlier_runs_and_says_where, .timeout = 120)
{
    s_find();
    char dir[] = "/tmp/sb-cli-run-XXXXXX", cmd[2048], out[1 << 15], name[2][256];
    cr_assert(mkdtemp(dir));
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd, "cd %s && %s run --engine ring --procs 2 --sizes 4K --iters 1 --steps 2 --warmup-steps 0 "
                 "--model mlp:784-32-10 --rounds 1 --quiet", dir, g_harness);
        cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
        const char *at = strstr(out, "# this run's results: results/tmp/run-");
        cr_assert(at, "%s", out);
        cr_assert_eq(sscanf(at, "# this run's results: results/tmp/%255s", name[i]), 1);
        cr_assert(strstr(out, "results in results/tmp/") && strstr(out, name[i]), "%s", out);
    }
    cr_assert(strcmp(name[0], name[1]), "both runs wrote %s", name[0]);
    for (int i = 0; i < 2; i++) {
        char p[600];
        snprintf(p, sizeof p, "%s/results/tmp/%s", dir, name[i]);
        FILE *f = fopen(p, "r");
        cr_assert(f, "run %d's results %s are gone", i + 1, p);
        char line[256];
        cr_assert(fgets(line, sizeof line, f) && strstr(line, "\"mode\""), "%s: no result line", p);
        fclose(f);
    }
    char lp[600], target[256];
    snprintf(lp, sizeof lp, "%s/results/tmp/run-latest.jsonl", dir);
    ssize_t n = readlink(lp, target, sizeof target - 1);
    cr_assert(n > 0, "no run-latest.jsonl link");
    target[n] = '\0';
    cr_assert_str_eq(target, name[1]);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

/* What the generated bash completion (script) offers for `harness WORDS`, the last word the one completed. */
static void s_complete(const char *script, const char *words, char *out, size_t len)
{
    char drv[300], cmd[400];
    snprintf(drv, sizeof drv, "%s.drv", script);
    FILE *f = fopen(drv, "w");
    cr_assert(f != NULL, "%s", drv);
    fprintf(f, "source %s\nCOMP_WORDS=(harness %s)\nCOMP_CWORD=$((${#COMP_WORDS[@]} - 1))\n_harness\n"
               "echo \"${COMPREPLY[*]}\"\n", script, words);
    fclose(f);
    snprintf(cmd, sizeof cmd, "bash %s", drv);
    run_cmd(cmd, out, len);
    unlink(drv);
}

/* Completion completes --model, --device and --engine values from the tables the harness parses with: every
 * registry model, device preset, engine and simulate's layouts; a comma list by its last word. It completed
 * none of the three (and --op's list lacked move). */
Test(cli, completion_completes_values, .timeout = 60)
{
    s_find();
    char gen[1024], script[256], cmd[2048], out[1 << 14];
    cr_assert(test_script(g_harness, "gen-completion", gen, sizeof gen) == 0, "no %s", gen);
    snprintf(script, sizeof script, "/tmp/test_cli_completion.%d.bash", (int)getpid());
    snprintf(cmd, sizeof cmd, "%s %s > %s", gen, g_harness, script);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    char words[256], want[128];
    for (size_t i = 0; workload_at(i); i++) {
        s_complete(script, "train --model ''", out, sizeof out);
        snprintf(want, sizeof want, " %s ", workload_at(i));
        snprintf(words, sizeof words, " %.*s ", (int)strcspn(out, "\n"), out);
        cr_expect(strstr(words, want) != NULL, "--model lacks %s:%s", workload_at(i), words);
    }
    for (size_t i = 0; wl_device_at(i); i++) {
        s_complete(script, "train --device ''", out, sizeof out);
        snprintf(want, sizeof want, " %s ", wl_device_at(i));
        snprintf(words, sizeof words, " %.*s ", (int)strcspn(out, "\n"), out);
        cr_expect(strstr(words, want) != NULL, "--device lacks %s:%s", wl_device_at(i), words);
    }
    s_complete(script, "bench --engine ''", out, sizeof out);
    for (int i = 0; i < h_engine_count() + h_layout_count(); i++) {
        const char *name = i < h_engine_count() ? h_engine_at(i)->name : h_layout_at(i - h_engine_count())->label;
        snprintf(want, sizeof want, "%s", name);
        cr_expect(strstr(out, want) != NULL, "--engine lacks %s: %s", name, out);
    }
    static const struct { const char *words, *offered; } cases[] = {
        {"train --model v", "vgg16\n"}, {"train --device a1", "a100 a100-amp\n"}, {"bench --engine ring,t", "ring,tree\n"},
        {"bench --op m", "move\n"}, {"bench -d b", "bf16\n"}, {"bench --bind b", "block\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        s_complete(script, cases[i].words, out, sizeof out);
        cr_expect_str_eq(out, cases[i].offered, "%s", cases[i].words);
    }
    unlink(script);
}

/* The man page keeps option names' case (its headings were upper-cased: "TRAIN \-\-MODEL RESNET50"), gains
 * EXAMPLES (the README's five commands) and ENVIRONMENT: every torchrun, Slurm and OpenMPI variable harness/
 * and core/ name. */
Test(cli, man_page_keeps_case_examples_environment, .timeout = 60)
{
    s_find();
    char gen[1024], cmd[4096], vars[4096];
    static char man[1 << 17];
    cr_assert(test_script(g_harness, "gen-man", gen, sizeof gen) == 0, "no %s", gen);
    snprintf(cmd, sizeof cmd, "%s %s", gen, g_harness);
    cr_assert_eq(run_cmd(cmd, man, sizeof man), 0, "%s", man);
    cr_expect(strstr(man, "\n.SS \"Emulated GPU cluster (train \\-\\-model resnet50") != NULL, "%.2000s", man);
    for (const char *p = strstr(man, "\n.S"); p; p = strstr(p + 1, "\n.S")) {
        const char *dash = strstr(p, "\\-\\-"), *eol = strchr(p + 1, '\n');
        cr_expect(!dash || dash > eol || !(dash[4] >= 'A' && dash[4] <= 'Z'), "an upper-cased option: %.*s",
                  (int)(eol ? eol - p - 1 : 80), p + 1);
    }
    const char *ex = strstr(man, "\n.SH EXAMPLES\n"), *env = strstr(man, "\n.SH ENVIRONMENT\n");
    cr_assert(ex && env, "no EXAMPLES or ENVIRONMENT:\n%s", man);
    cr_expect(strstr(ex, "\nharness bench \\-\\-engine ring,tree,ps") && !strstr(man, "build/harness"), "%.1500s", ex);
    /* the variables, from the sources the page was made from */
    snprintf(cmd, sizeof cmd, "cd %.*s/.. && grep -rhoE '\"(RANK|WORLD_SIZE|LOCAL_[A-Z_]+|MASTER_[A-Z_]+|SLURM_[A-Z_]+|"
             "OMPI_[A-Z_]+)\"' --include='*.c' harness core | tr -d '\"' | sort -u", (int)(strrchr(gen, '/') - gen), gen);
    cr_assert_eq(run_cmd(cmd, vars, sizeof vars), 0, "%s", vars);
    int n = 0;
    for (char *save = NULL, *v = strtok_r(vars, "\n", &save); v; v = strtok_r(NULL, "\n", &save), n++) {
        int found = 0; /* a ".B NAME" line, or ".B NAME, NAME" */
        for (const char *b = strstr(env, "\n.B "); b && !found; b = strstr(b + 1, "\n.B ")) {
            size_t len = strlen(v);
            for (const char *w = b + 4; *w && *w != '\n'; w++)
                if (!strncmp(w, v, len) && (w[-1] == ' ') && (w[len] == '\n' || w[len] == ',')) found = 1;
        }
        cr_expect(found, "ENVIRONMENT lacks %s", v);
    }
    cr_expect(n >= 6, "the variables found: %d", n);
    static const char *const torchrun[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"};
    for (size_t i = 0; i < sizeof torchrun / sizeof torchrun[0]; i++) {
        char b[64];
        snprintf(b, sizeof b, "\n.B %s\n", torchrun[i]);
        cr_expect(strstr(env, b) != NULL, "ENVIRONMENT lacks %s", torchrun[i]);
    }
}

/* Help and errors agree with what the parser accepts: every option with a fixed list of values (harness
 * --list-values all) shows that list in its help when the help spells one (--op said sum|avg, --bind
 * auto|core|numa|none: move and block were accepted), and a bad value's error names each value; --device's
 * default is the same in its help and in the mode's defaults (the defaults said '-', the help v100). */
Test(cli, help_and_errors_agree_with_the_parser, .timeout = 90)
{
    s_find();
    char cmd[2048], err[1 << 12];
    static char lists[1 << 14], help[1 << 17];
    snprintf(cmd, sizeof cmd, "%s --list-values all", g_harness);
    cr_assert_eq(run_cmd(cmd, lists, sizeof lists), 0, "%s", lists);
    snprintf(cmd, sizeof cmd, "%s --help", g_harness);
    cr_assert_eq(run_cmd(cmd, help, sizeof help), 0, "%s", help);
    int checked = 0;
    for (char *save = NULL, *line = strtok_r(lists, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char name[64], vals[1024], key[80];
        const char *tab = strchr(line, '\t');
        cr_assert(tab != NULL, "%s", line);
        snprintf(name, sizeof name, "%.*s", (int)strcspn(line, "|\t"), line);
        snprintf(vals, sizeof vals, "%s", tab + 1);
        /* its help line, and the A|B|C it spells after the name (if any) */
        snprintf(key, sizeof key, "\n  %s ", name);
        const char *h = strstr(help, key);
        cr_expect(h != NULL, "%s: no help line", name);
        char spelled[256] = "";
        if (h) sscanf(h + strlen(key), "%255s", spelled);
        if (strchr(spelled, '|')) {
            int n = 0;
            for (char *s2 = NULL, *v = strtok_r(vals, " ", &s2); v; v = strtok_r(NULL, " ", &s2), n++) {
                char w[80];
                snprintf(w, sizeof w, "|%s|", v);
                char bar[300];
                snprintf(bar, sizeof bar, "|%s|", spelled);
                cr_expect(strstr(bar, w) != NULL, "%s accepts %s but its help says %s", name, v, spelled);
            }
            int bars = 1;
            for (const char *p = spelled; *p; p++) bars += *p == '|';
            cr_expect_eq(bars, n, "%s: help %s, accepted %d values", name, spelled, n);
            checked++;
        }
        if (!strcmp(name, "--engine")) continue; /* its error names the engines and points at simulate's layouts */
        snprintf(cmd, sizeof cmd, "%s train %s %s bogus", g_harness, strcmp(name, "--model") ? "--model resnet50 --nodes 1" : "",
                 name);
        cr_expect_eq(run_cmd(cmd, err, sizeof err), 2, "%s bogus: %s", name, err);
        snprintf(vals, sizeof vals, "%s", tab + 1);
        for (char *s2 = NULL, *v = strtok_r(vals, " ", &s2); v; v = strtok_r(NULL, " ", &s2))
            cr_expect(strstr(err, v) != NULL, "%s bogus: the error does not name %s:\n%s", name, v, err);
    }
    cr_expect(checked >= 3, "options whose help spells their values: %d", checked); /* --op, --bind, --dtype */
    /* --device: one default, the registry's presets */
    snprintf(cmd, sizeof cmd, "%s train --help", g_harness);
    cr_assert_eq(run_cmd(cmd, help, sizeof help), 0, "%s", help);
    char want[64];
    snprintf(want, sizeof want, "(default %s)", WL_DEVICE_DEFAULT);
    cr_expect(strstr(help, want) != NULL, "%s", help);
    snprintf(want, sizeof want, "--device %s ", WL_DEVICE_DEFAULT);
    cr_expect(strstr(help, want) != NULL, "the defaults say otherwise:\n%s", help);
    cr_expect(strstr(help, wl_device_names()) != NULL, "%s", help);
}
