/* test_front.c: what the harness's outputs say to a newcomer (issue 32, sections 2 to 4): train of several
 * engines ends side by side with a verdict, oversubscription warned once and long runs show progress,
 * emulated progress lines and JSON lines carry no made-up loss, a global batch the workers cannot share is caught before
 * launch. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tests/lib/ranks.h"

static char g_harness[512];

static void s_find(void)
{
    cr_assert(harness_path(g_harness, sizeof g_harness) == 0, "build the harness first (make)");
}

/* `train --engine ring,ps` printed one table per engine and stopped: it ends with the engines side by side
 * (report's table) and run's verdict line naming the leader, from this run's lines only (a --json file's
 * earlier runs stay out of it), emulated or not. */
Test(front, train_of_engines_ends_side_by_side_with_a_verdict, .timeout = 180)
{
    s_find();
    char dir[] = "/tmp/sb-front-XXXXXX", cmd[2048], out[1 << 16], json[600];
    cr_assert(mkdtemp(dir));
    snprintf(json, sizeof json, "%s/r.jsonl", dir);
    /* an earlier run in the file: a tree train line */
    snprintf(cmd, sizeof cmd, "%s train --engine tree --procs 2 --steps 2 --warmup-steps 0 --model mlp:784-32-10 --quiet "
             "--json %s", g_harness, json);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    cr_expect_eq(count_in(out, "side by side"), 0, "one engine: no side-by-side:\n%s", out);
    static const char *const how[] = {"--procs 2 --model mlp:784-32-10", "--procs 2 --model mlp:784-32-10 --json FILE",
                                      "--nodes 2 --gpus-per-node 1 --model resnet50 --shrink 100"};
    for (int i = 0; i < 3; i++) {
        char args[700];
        snprintf(args, sizeof args, "%s", how[i]);
        char *f = strstr(args, "FILE");
        if (f) snprintf(f, sizeof args - (size_t)(f - args), "%s", json);
        snprintf(cmd, sizeof cmd, "%s train --engine ring,ps %s --steps 2 --warmup-steps 0 --quiet", g_harness, args);
        cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s\n%s", args, out);
        const char *side = strstr(out, "# syncbench train: the engines side by side");
        cr_assert(side, "%s: no side-by-side table:\n%s", args, out);
        cr_expect_eq(count_in(out, "the engines side by side"), 1, "%s", out);
        /* the table after it has both engines, and only this run's (no tree from the file's earlier run) */
        cr_expect(strstr(side, "\n  ring") && strstr(side, "\n  ps-sync-servers1"), "%s:\n%s", args, side);
        cr_expect(!strstr(side, "tree"), "%s: an earlier run in the side-by-side:\n%s", args, side);
        const char *v = strstr(side, "\n# verdict: ");
        cr_assert(v, "%s: no verdict:\n%s", args, side);
        cr_expect(!strncmp(v, "\n# verdict: ring leads", 22) || !strncmp(v, "\n# verdict: ps-sync-servers1 leads", 34),
                  "%s: the verdict names the leader:\n%s", args, v);
        cr_expect(strstr(v, "one round: no spread"), "%s: one run is said to be one:\n%s", args, v);
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

/* Ranks outnumbering the cores were said by `harness run` alone: bench and train at --procs cores + 1 said
 * nothing. Every mode that launches ranks warns, once (run too: its own check and its launches' share the
 * one line); at --procs 2 on a machine of 2 cores or more, no warning. */
Test(front, oversubscription_warned_once_in_every_mode, .timeout = 300)
{
    s_find();
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    cr_assert(cores >= 1);
    int P = (int)cores + 1;
    char cmd[2048], out[1 << 16], want[128];
    snprintf(want, sizeof want, "warning: %d ranks on %ld cores: ranks wait for a CPU, so the timings are the host's", P, cores);
    static const char *const modes[] = {
        "bench --engine ring --sizes 4K --iters 2 --warmup 1",
        "train --engine ring --steps 2 --warmup-steps 0 --model mlp:784-32-10 --batch-per-gpu 4 --quiet",
        "train --engine ring,tree --steps 2 --warmup-steps 0 --model mlp:784-32-10 --batch-per-gpu 4 --quiet",
        "run --engine ring --sizes 4K --iters 1 --steps 2 --warmup-steps 0 --model mlp:784-32-10 --batch-per-gpu 4 "
        "--rounds 1 --quiet --json /dev/null",
    };
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        snprintf(cmd, sizeof cmd, "cd /tmp && timeout 250 %s %s --procs %d", g_harness, modes[i], P);
        cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s:\n%s", modes[i], out);
        cr_expect_eq(count_in(out, want), 1, "%s: the warning once:\n%s", modes[i], out);
    }
    if (cores >= 2) {
        snprintf(cmd, sizeof cmd, "%s bench --engine ring --sizes 4K --iters 2 --warmup 1 --procs 2", g_harness);
        cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
        cr_expect_eq(count_in(out, "ranks on"), 0, "2 ranks on %ld cores: no warning:\n%s", cores, out);
    }
}

/* A bench size that runs on for seconds printed nothing until its row (64 MiB with many ranks: 30 s of
 * silence): worker 0 says where it is, at most a line every 3 s, none with --quiet. The iterations are sized
 * from one measured iteration, so the size runs about 8 s on any machine. */
Test(front, a_long_bench_size_shows_progress, .timeout = 300)
{
    s_find();
    char cmd[2048], out[1 << 16];
    snprintf(cmd, sizeof cmd, "%s bench --engine ring --procs 2 --sizes 16M --iters 3 --warmup 1", g_harness);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    const char *row = strstr(out, "\n      16777216 ");
    double us = 0;
    cr_assert(row && sscanf(row, " %*u %*u %*s %*s %lf", &us) == 1 && us > 0, "%s", out);
    int iters = (int)(8e6 / us) + 1;
    for (int quiet = 0; quiet < 2; quiet++) {
        /* the timed loop of the run itself (its row's median x iterations) must have lasted 4 s: a load that came
         * or went since the first run reruns it with more iterations (three tries) */
        for (int tries = 0; tries < 3; tries++) {
            iters = iters > 20000 ? 20000 : iters;
            snprintf(cmd, sizeof cmd, "%s bench --engine ring --procs 2 --sizes 16M --iters %d --warmup 0%s", g_harness,
                     iters, quiet ? " --quiet" : "");
            double secs = 0, t = 0;
            cr_assert_eq(run_cmd_timed(cmd, out, sizeof out, &secs), 0, "%s", out);
            row = strstr(out, "\n      16777216 ");
            cr_assert(row && sscanf(row, " %*u %*u %*s %*s %lf", &t) == 1 && t > 0, "%s", out);
            double loop_s = t * iters / 1e6;
            if (loop_s < 4 && tries < 2) {
                iters = (int)(iters * 8.0 / loop_s) + 1;
                continue;
            }
            int lines = count_in(out, "# ... 16777216 bytes: timed iteration ");
            if (quiet) {
                cr_expect_eq(lines, 0, "--quiet: no progress lines:\n%s", out);
            } else {
                cr_expect(lines >= 1, "%d iterations of %.0f us, %.1f s: no progress line:\n%s", iters, t, secs, out);
                cr_expect(lines <= secs / 3 + 1, "%d progress lines in %.1f s: more than one every 3 s:\n%s", lines, secs, out);
            }
            break;
        }
    }
}

/* tests/data/report_sample.jsonl, by this file's path as the Makefile compiles it (from the checkout) */
static void s_sample(char *path, size_t len)
{
    const char *f = __FILE__, *slash = strrchr(f, '/');
    snprintf(path, len, "%.*s/data/report_sample.jsonl", slash ? (int)(slash - f) : 1, slash ? f : ".");
}

/* `report --format csv` wrote its bench, train and model tables, each with its own header, into one stream
 * that no CSV reader takes as is. --csv DIR writes one file per table (bench.csv, train.csv, model.csv),
 * --table T prints one table alone (in any format), both with tidy columns (engine_label, run, model, emulated,
 * device, nodes, gpus_per_node, host_bound_runs), every row as wide as its header: read here with python3's
 * csv module. The one stream stays, and says on stderr how to get one table a file. */
Test(front, report_csv_one_table_a_file, .timeout = 60)
{
    s_find();
    char sample[512], dir[] = "/tmp/sb-front-csv-XXXXXX", cmd[4096], out[1 << 16], py[600];
    s_sample(sample, sizeof sample);
    cr_assert(mkdtemp(dir));
    snprintf(cmd, sizeof cmd, "%s report %s --csv %s/tables 2>/dev/null", g_harness, sample, dir);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, "/tables/bench.csv: 5 rows") && strstr(out, "/tables/train.csv: 4 rows") &&
              strstr(out, "/tables/model.csv: 2 rows"), "%s", out);
    snprintf(py, sizeof py, "%s/check.py", dir);
    FILE *f = fopen(py, "w");
    cr_assert(f);
    fputs("import csv, sys\n"
          "want = {'bench': ['label', 'world', 'bytes', 'busbw_gbs', 'host_bound_runs', 'engine_label', 'run', 'model',\n"
          "                  'emulated', 'nodes', 'gpus_per_node', 'transport'],\n"
          "        'train': ['label', 'world', 'samples_per_s', 'host_bound_runs', 'engine_label', 'run', 'model', 'emulated',\n"
          "                  'device', 'nodes', 'gpus_per_node', 'batch'],\n"
          "        'model': ['what', 'label', 'world', 'pred_us']}\n"
          "for name, cols in want.items():\n"
          "    rows = list(csv.reader(open(sys.argv[1] + '/' + name + '.csv', newline='')))\n"
          "    head = rows[0]\n"
          "    assert 'section' not in head, (name, head)\n"
          "    assert len(set(head)) == len(head), (name, 'a column twice', head)\n"
          "    for c in cols: assert c in head, (name, c, head)\n"
          "    for r in rows[1:]:\n"
          "        assert len(r) == len(head), (name, r)\n"
          "        int(r[head.index('world')])\n"
          "    print(name, len(rows) - 1)\n"
          "t = list(csv.DictReader(open(sys.argv[1] + '/train.csv', newline='')))\n"
          "ps = [r for r in t if r['label'] == 'ps-servers1'][0]\n"
          "assert ps['engine_label'] == 'ps-servers1' and ps['servers'] == '1' and ps['batch'] == '256', ps\n"
          "print('ok')\n", f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "python3 %s %s/tables", py, dir);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, "bench 5\ntrain 4\nmodel 2\nok\n"), "%s", out);
    /* --table train --format csv: the same table as train.csv, on stdout */
    snprintf(cmd, sizeof cmd, "%s report %s --table train --format csv 2>/dev/null | cmp - %s/tables/train.csv", g_harness,
             sample, dir);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 0, "--table train differs from train.csv: %s", out);
    /* --table in text: that table alone */
    snprintf(cmd, sizeof cmd, "%s report %s --table bench --plots %s/plots 2>/dev/null", g_harness, sample, dir);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, "# bench: busbw") && !strstr(out, "# train: ") && !strstr(out, "# model: "), "%s", out);
    /* the one stream says how to get one table a file */
    snprintf(cmd, sizeof cmd, "{ %s report %s --format csv 2>&1 >/dev/null; }", g_harness, sample);
    run_cmd(cmd, out, sizeof out);
    cr_expect(strstr(out, "3 tables with different headers in one stream") && strstr(out, "--csv DIR"), "%s", out);
    /* what cannot be done: said once, exit 2 */
    static const struct { const char *args, *said; } bad[] = {
        {"--table nothing", "bad value 'nothing' for --table: expected bench, train or model"},
        {"--csv DIR/x --format md", "--csv DIR/x writes CSV files and --format md prints tables: give one of them"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char args[700], said[700];
        snprintf(args, sizeof args, "%s", bad[i].args);
        snprintf(said, sizeof said, "%s", bad[i].said);
        char *d = strstr(args, "DIR");
        if (d) snprintf(d, sizeof args - (size_t)(d - args), "%s/x%s", dir, strstr(bad[i].args, "DIR") + 5);
        d = strstr(said, "DIR");
        if (d) snprintf(d, sizeof said - (size_t)(d - said), "%s/x%s", dir, strstr(bad[i].said, "DIR") + 5);
        snprintf(cmd, sizeof cmd, "%s report %s %s", g_harness, sample, args);
        cr_expect_eq(run_cmd(cmd, out, sizeof out), 2, "%s: %s", args, out);
        cr_expect(strstr(out, said) && count_in(out, "harness: ") == 1, "%s: want '%s':\n%s", args, said, out);
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

/* An emulated model computes no loss, yet every progress line said "rank 0 loss 0.0000". Its lines now carry
 * none, and give the emulated rate and step (the host's over --dilate) as its table does; a real model's
 * lines keep their loss. */
Test(front, emulated_progress_says_no_made_up_loss, .timeout = 120)
{
    s_find();
    char cmd[2048], out[1 << 16];
    snprintf(cmd, sizeof cmd, "%s train --engine ring --nodes 2 --gpus-per-node 1 --model resnet50 --shrink 100 --steps 3 "
             "--warmup-steps 1 --dilate 2", g_harness);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    cr_expect_eq(count_in(out, "# ring step "), 2, "%s", out);
    cr_expect_eq(count_in(out, "loss"), 0, "an emulated run's lines name a loss:\n%s", out);
    cr_expect_eq(count_in(out, "samples/s emulated (rank 0 x workers), step "), 3, "%s", out);
    /* the last step's step time beside the table's (the median of two): same emulated scale, within 2x */
    const char *last = strstr(out, "# ring step 2/2: ~"), *row = strstr(out, "\n  ring ");
    double ps, pms, tsps, tms;
    cr_assert(last && sscanf(last, "# ring step 2/2: ~%lf samples/s emulated (rank 0 x workers), step %lf", &ps, &pms) == 2,
              "%s", out);
    cr_assert(row && sscanf(row, " ring %*d %lf %*f %*f %*f %lf", &tsps, &tms) == 2, "%s", out);
    cr_expect(pms > tms / 2 && pms < tms * 2 && ps > tsps / 2 && ps < tsps * 2, "progress %.1f/s %.2f ms, table %.1f/s %.2f ms",
              ps, pms, tsps, tms);
    snprintf(cmd, sizeof cmd, "%s train --engine ring --procs 2 --model mlp:784-32-10 --steps 2 --warmup-steps 0", g_harness);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    cr_expect_eq(count_in(out, ": rank 0 loss "), 2, "a real model's lines keep their loss:\n%s", out);
}

/* `train --procs 3` failed inside every rank (the default global batch 256 is not a multiple of 3): it is found
 * before launch, said once, with the way out (--batch-per-gpu, or the nearest multiples); --scaling's every
 * world is checked; a batch the workers share, or --batch-per-gpu, runs. */
Test(front, a_batch_the_workers_cannot_share_is_caught_before_launch, .timeout = 120)
{
    s_find();
    static const struct { const char *args, *said; } cases[] = {
        {"--procs 3", "the global batch 256 (the default) is not a multiple of the 3 workers: give each worker's batch, "
                      "--batch-per-gpu B (torchrun's and Horovod's way), or a --batch that 3 divides (255 or 258)"},
        {"--procs 4 --batch 10", "the global batch 10 (--batch) is not a multiple of the 4 workers"},
        {"--scaling 1,2,3 --batch 4", "not a multiple of the 3 workers of a --scaling world"},
        {"--procs 5 --batch 3", "or a --batch that 5 divides (5)"},
    };
    char cmd[2048], out[1 << 15];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int mode = 0; mode < 2; mode++) {
            snprintf(cmd, sizeof cmd, "cd /tmp && timeout 60 %s %s %s --steps 2 --model mlp:784-32-10 --json /dev/null", g_harness,
                     mode ? "run" : "train", cases[i].args);
            if (mode && strstr(cases[i].args, "--scaling")) continue; /* run is one world */
            cr_expect_eq(run_cmd(cmd, out, sizeof out), 2, "%s: %s", cmd, out);
            cr_expect(strstr(out, cases[i].said) != NULL, "%s: want '%s':\n%s", cmd, cases[i].said, out);
            cr_expect(count_in(out, "harness: ") == 1 && !strstr(out, "[rank") && !strstr(out, "rank 0") &&
                      !strstr(out, "syncbench"), "%s: once, before any rank:\n%s", cmd, out);
        }
    }
    static const char *const fine[] = {"--procs 3 --batch 258", "--procs 3 --batch-per-gpu 4"};
    for (size_t i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd, "%s train %s --steps 2 --warmup-steps 0 --model mlp:784-32-10 --quiet", g_harness, fine[i]);
        cr_expect_eq(run_cmd(cmd, out, sizeof out), 0, "%s: %s", fine[i], out);
    }
}

/* An emulated model has no loss, yet its JSON lines carried "loss_first": 0, "loss_last": 0 (and "acc_last": 0):
 * they now carry none, a real model's keep theirs, and the readers take both the new lines and the old ones
 * (harness report, and harness model's check of emulated runs). */
Test(front, emulated_lines_carry_no_made_up_loss, .timeout = 120)
{
    s_find();
    char dir[] = "/tmp/sb-front-XXXXXX", cmd[2048], out[1 << 16], json[600];
    cr_assert(mkdtemp(dir));
    snprintf(json, sizeof json, "%s/r.jsonl", dir);
    snprintf(cmd, sizeof cmd, "%s train --engine ring --nodes 2 --gpus-per-node 1 --model resnet50 --shrink 100 --steps 2 "
             "--warmup-steps 0 --quiet --json %s > /dev/null && cat %s", g_harness, json, json);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    cr_assert(strstr(out, "\"emulated\": true"), "%s", out);
    cr_expect(!strstr(out, "loss_first") && !strstr(out, "loss_last") && !strstr(out, "acc_last"),
              "an emulated line carries a loss:\n%s", out);
    snprintf(cmd, sizeof cmd, "%s train --engine ring --procs 2 --model mlp:784-32-10 --steps 2 --warmup-steps 0 --quiet "
             "--json %s/m.jsonl > /dev/null && cat %s/m.jsonl", g_harness, dir, dir);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, "\"loss_first\": ") && strstr(out, "\"loss_last\": ") && strstr(out, "\"acc_last\": "),
              "a real model's line keeps its loss:\n%s", out);
    /* an older emulated line beside the new one: its loss 0 as older files wrote it */
    snprintf(cmd, sizeof cmd, "sed 's/\"skipped_steps\"/\"loss_first\": 0.0, \"loss_last\": 0.0, \"acc_last\": 0.0, \"skipped_steps\"/' "
             "%s >> %s && grep -c loss_first %s", json, json, json);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    cr_assert_eq(atoi(out), 1, "%s", out);
    snprintf(cmd, sizeof cmd, "%s report %s", g_harness, json);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, "train 1") && strstr(out, "\n  ring") && !strstr(out, "skipped"), "%s", out);
    snprintf(cmd, sizeof cmd, "%s model --model resnet50 --nodes 2 --gpus-per-node 1 %s", g_harness, json);
    cr_expect_eq(run_cmd(cmd, out, sizeof out), 0, "%s", out);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}
