/* main.c: the harness program: parses the command line (cli/opts.c), then either drives launches (with
 * --procs, --gpus or --nnodes: launch/drive.c) or, inside a rank (started by our launcher, torchrun-style env,
 * srun or mpirun), joins the job and runs the mode. The only place that turns the harness's err.h
 * codes into exit codes: 0 ok or help; 2 usage errors; 3 wrong bench results; 128 + signal when
 * interrupted; 1 any other failure, with "harness: <err_detail()>" on stderr. */
#include "harness/cli/modecfg.h"
#include "harness/launch/drive.h"
#include "harness/record/result.h"
#include "harness/record/jsonl.h"
#include "harness/model/cluster.h"
#include "trainer/workload.h"
#include "harness/modes/gemm.h"
#include "harness/launch/launch.h"
#include "harness/model/host.h"
#include "harness/report/report.h"
#include "harness/modes/explain.h"
#include "harness/launch/profile.h"
#include "harness/record/timeline.h"
#include "core/dev.h"
#include "core/afile.h"
#include "core/err.h"
#include "core/log.h"
#include "core/topo.h"
#include <limits.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---------- exit codes ---------- */

/* Print why rc failed (err_detail, when there is one) and return the exit code; a negative rc other
 * than the special ones exits inval_code for ERR_INVAL (2 where that is a usage error), else 1. */
static int s_exit(int rc, int inval_code)
{
    if (rc >= 0) return rc;
    if (err_detail()[0]) h_say_error(err_detail()); /* in a rank, through the launcher's failure line */
    if (rc == ERR_INTERRUPT) return 128 + h_interrupt_signal();
    if (rc == ERR_WRONG) return 3;
    return rc == ERR_INVAL ? inval_code : 1;
}

/* ---------- inside a rank ---------- */

/* A failure inside a rank: the message (printf-style) as err_detail; the code, but never one that
 * s_exit would take for wrong results or an interruption (those exit 1 from here, as any failure). */
static int s_rank_fail(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int s_rank_fail(int rc, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    err_set(rc, "%s", buf);
    return rc == ERR_WRONG || rc == ERR_INTERRUPT ? ERR_PEER : rc;
}

/* a plain `harness bench` with no launcher and no rank environment: a world of one */
static void s_world_of_one(const h_opts_t *o)
{
    if (o->init_method || getenv("RANK") || getenv("SLURM_PROCID") || getenv("OMPI_COMM_WORLD_RANK")) return;
    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "1", 1);
    setenv("LOCAL_RANK", "0", 1);
    if (!getenv("MASTER_ADDR")) setenv("MASTER_ADDR", "127.0.0.1", 1);
    if (!getenv("MASTER_PORT")) {
        char p[16];
        snprintf(p, sizeof p, "%d", 20000 + (int)(getpid() % 30000));
        setenv("MASTER_PORT", p, 1);
    }
}

/* A torchrun-style environment (env://: RANK and WORLD_SIZE) must be whole before this process joins as one
 * rank of it: WORLD_SIZE > 1 without RANK would otherwise run a world of one and exit 0 (s_world_of_one),
 * and a RANK outside the world would fail late. 0, or ERR_INVAL saying what to set (a usage error). */
static int s_check_rank_env(void)
{
    const char *er = getenv("RANK"), *ew = getenv("WORLD_SIZE");
    long r = -1, w = -1;
    char *end;
    if (ew) {
        w = strtol(ew, &end, 10);
        if (!*ew || *end || w < 1 || w > INT_MAX)
            return err_set(ERR_INVAL, "WORLD_SIZE=%s: the world size must be a whole number >= 1", ew);
    }
    if (er) {
        r = strtol(er, &end, 10);
        if (!*er || *end || r < 0 || r > INT_MAX) return err_set(ERR_INVAL, "RANK=%s: the rank must be a whole number >= 0", er);
    }
    if (ew && !er && w > 1)
        return err_set(ERR_INVAL, "WORLD_SIZE=%ld is set but RANK is not: a torchrun-style environment (env://) needs both in "
                       "every process, as torchrun sets them (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT); "
                       "to start %ld ranks here give --procs %ld, or unset WORLD_SIZE to run one", w, w, w);
    if (er && !ew)
        return err_set(ERR_INVAL, "RANK=%ld is set but WORLD_SIZE is not: a torchrun-style environment (env://) needs both "
                       "in every process, as torchrun sets them", r);
    if (er && ew && r >= w)
        return err_set(ERR_INVAL, "RANK=%ld but WORLD_SIZE=%ld: the rank must be below the world size (0 to %ld)", r, w, w - 1);
    return 0;
}

/* --bind and --gpus for this rank: 0 or a failure (s_rank_fail). */
static int s_place(h_opts_t *o, const boot_cfg_t *bc)
{
    char msg[1024];
    const char *bind = o->bind;
    if (!strcmp(bind, "auto")) {
        /* ranks round-robin over cores (local rank i on core i mod cores), oversubscribed or not:
         * measured here, a fixed placement makes the ring 1.1x to 1.6x faster at 4 and 8 ranks
         * on 2 cores against letting the scheduler move ranks (results/bind-placement.txt) */
        bind = topo_ncores() > 0 && !strcmp(o->mode, "bench") ? "core" : "none";
        /* train stays unbound: the engine's communication thread and the BLAS threads then use
         * whatever core is free, as under torchrun */
    }
    if (strcmp(bind, "none")) {
        char desc[128];
        int rc = topo_bind(bind, bc->local_rank >= 0 ? bc->local_rank : bc->rank, bc->local_world, desc, sizeof desc);
        if (rc < 0) return s_rank_fail(rc, "rank %d: --bind: %s", bc->rank, err_trace(rc, msg, sizeof msg));
        LOG_I("bound: %s", desc);
    }
    if (o->gpus) {
        char desc[256] = "";
        int lr = bc->local_rank >= 0 ? bc->local_rank : bc->rank;
        int dev = dev_select_of(o->ranks_per_gpu > 1 ? lr / o->ranks_per_gpu : lr, o->gpus, desc, sizeof desc);
        if (dev < 0) return s_rank_fail(dev, "rank %d: %s", bc->rank, err_trace(dev, msg, sizeof msg));
        o->device = dev;
        LOG_I("using %s", desc);
    }
    return 0;
}

/* The mode on a joined rank, with --timeline around it. 0 or a failure (s_rank_fail); ERR_WRONG only
 * for wrong bench results (the detail says which). */
static int s_rank_mode(h_opts_t *o, comm_t *comm)
{
    char msg[1024];
    int wrong = 0;
    h_timeline_cfg_t tl;
    h_timeline_cfg_of(o, &tl);
    int rc = h_timeline_begin(&tl, comm); /* --timeline: every rank records, rank 0 writes the file at the end */
    if (rc < 0) {}
    else if (!strcmp(o->mode, "bench")) {
        h_bench_cfg_t c;
        h_bench_cfg_of(o, &c);
        rc = h_bench(&c, comm, &wrong);
    } else if (!strcmp(o->mode, "model")) {
        h_model_cfg_t c;
        h_model_cfg_of(o, &c);
        rc = h_model(&c, comm);
    } else {
        h_train_cfg_t c;
        h_train_cfg_of(o, &c);
        rc = h_train(&c, comm);
    }
    if (rc < 0) return s_rank_fail(rc, "rank %d: %s failed: %s", comm->rank, o->mode, err_trace(rc, msg, sizeof msg));
    char wmsg[512];
    snprintf(wmsg, sizeof wmsg, "%s", wrong ? err_detail() : "");
    if (h_timeline_end(&tl, comm) < 0 && rc == 0 && !wrong) {
        err_clear(); /* h_timeline_end said why */
        return ERR_IO;
    }
    if (wrong) return err_set(ERR_WRONG, "%s", wmsg);
    return rc;
}

static int s_rank_main(h_opts_t *o)
{
    if (o->argc > 1 && !strcmp(o->argv[1], "run") && !strcmp(o->mode, "bench")) {
        /* `harness run` keeps the default comparison short */
        o->size_max = o->size_max > (16u << 20) ? (16u << 20) : o->size_max;
        o->iters = o->iters > 10 ? 10 : o->iters;
    }
    const char *e = getenv("SYNCBENCH_TIMEOUT");
    if (e && atoi(e) > 0) o->timeout_s = atoi(e);
    if (!strcmp(o->mode, "selftest")) {
        int r = getenv("RANK") ? atoi(getenv("RANK")) : 0, w = getenv("WORLD_SIZE") ? atoi(getenv("WORLD_SIZE")) : 1;
        err_clear();
        return h_selftest(r, w); /* it says why on stderr itself (the launcher tests read those lines) */
    }
    s_world_of_one(o);
    boot_cfg_t bc;
    char msg[1024];
    int rc = boot_cfg_init(&bc, o->init_method, -1, -1, o->timeout_s * 1000);
    if (rc < 0) return s_rank_fail(rc, "%s", err_trace(rc, msg, sizeof msg));
    if (o->ifname) snprintf(bc.ifname, sizeof bc.ifname, "%s", o->ifname);
    if (o->require_auth) bc.auth.require = 1;
    log_set_rank(bc.rank);
    CHECK(s_place(o, &bc));
    comm_t *comm = NULL;
    comm_opts_t co = {.transport = o->transport};
    rc = comm_new(&comm, &bc, &co);
    if (rc < 0) return s_rank_fail(rc, "rank %d: joining the job failed: %s", bc.rank, err_trace(rc, msg, sizeof msg));
    rc = s_rank_mode(o, comm);
    if (rc < 0 && rc != ERR_WRONG) {
        /* a failure: leave at once (nobody waits for the others), keeping the error we report */
        snprintf(msg, sizeof msg, "%s", err_detail());
        comm_abort(&comm);
        err_clear();
        if (msg[0]) err_set(rc, "%s", msg);
    } else {
        comm_destroy(&comm);
    }
    return rc;
}

/* ---------- the modes of the program itself ---------- */

/* A results or timeline file that can't be written should fail the run before any work, not after. */
static int s_check_writable(const char *flag, const char *path)
{
    if (!path || !strcmp(path, "-")) return 0;
    /* opened now and held: the results are appended through this descriptor at the end, whatever the run
     * did to this process's descriptors meanwhile (record/jsonl.h) */
    if (h_jreserve(path) < 0) return err_set(ERR_INVAL, "%s %s: cannot write there: %s", flag, path, strerror(errno));
    return 0;
}

/* A folder made if missing (--plots): it, or the nearest folder above it that exists, must be writable. */
static int s_check_folder(const char *flag, const char *path)
{
    if (!path || !*path) return 0;
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    struct stat st;
    for (;;) {
        if (stat(dir, &st) == 0) {
            if (!S_ISDIR(st.st_mode)) return err_set(ERR_INVAL, "%s %s: %s is not a folder", flag, path, dir);
            if (access(dir, W_OK | X_OK) != 0)
                return err_set(ERR_INVAL, "%s %s: cannot write in %s: %s", flag, path, dir, strerror(errno));
            return 0;
        }
        char *slash = strrchr(dir, '/');
        while (slash && slash > dir && slash[1] == '\0') { *slash = '\0'; slash = strrchr(dir, '/'); }
        if (!slash) { snprintf(dir, sizeof dir, "."); continue; }
        if (slash == dir) { dir[1] = '\0'; continue; }
        *slash = '\0';
    }
}

/* train's inputs and checkpoint before any rank starts: --data (a file, or a folder, to read), --resume (a
 * file to read), --save (a file that can be written); one error naming the flag and the path. Their
 * contents (a data set's format, a checkpoint's checksum) are the ranks' to check, once launched. */
static int s_check_train_paths(const h_opts_t *o)
{
    if (strcmp(o->mode, "train") && strcmp(o->mode, "run")) return 0;
    struct stat st;
    FILE *f = NULL;
    off_t size = 0;
    char why[1024];
    const char *d = o->data;
    if (d && *d && strcmp(d, "synthetic")) {
        if (stat(d, &st) == 0 && S_ISDIR(st.st_mode)) {
            if (access(d, R_OK | X_OK) != 0)
                return err_set(ERR_INVAL, "--data: data folder '%s': %s", d, strerror(errno));
        } else if (afile_open(d, "data file", &f, &size) < 0) {
            snprintf(why, sizeof why, "%s", err_detail());
            return err_set(ERR_INVAL, "--data: %s", why);
        }
        if (f) fclose(f);
        f = NULL;
    }
    if (o->resume) {
        if (afile_open(o->resume, "checkpoint", &f, &size) < 0) {
            snprintf(why, sizeof why, "%s", err_detail());
            return err_set(ERR_INVAL, "--resume: %s", why);
        }
        fclose(f);
    }
    if (o->save && afile_check_dest("--save", o->save) < 0) {
        snprintf(why, sizeof why, "%s", err_detail());
        return err_set(ERR_INVAL, "%s", why);
    }
    return 0;
}

/* `harness report`: h_report returns an exit code (>= 0) or an err.h code (< 0, explained on stderr or
 * by err_detail, shown as "harness: report: ...") */
static int s_report(h_opts_t *o)
{
    err_clear();
    h_report_cfg_t c = {.outdir = o->plots_dir, .format = o->format, .run_label = o->label, .table = o->table,
                        .csv_dir = o->csv_dir};
    int r = h_report_with(o->nmeasured, o->measured, &c);
    if (r >= 0) return r;
    const char *why = err_detail(); /* report's own messages may start with "report: " already */
    if (why[0]) fprintf(stderr, "harness: report: %s\n", strncmp(why, "report: ", 8) ? why : why + 8);
    return r == ERR_INVAL ? 2 : 1;
}

/* `harness run`: the default comparison: every engine, 4 CPU ranks, bench then train */
static int s_run(h_opts_t *o)
{
    if (!o->procs) o->procs = 4;
    char names[256] = "";
    size_t off = 0;
    if (!h_opts_given(o, "engine")) {
        o->nengines = 0; /* every engine, unless --engine says which */
        for (int i = 0; i < h_engine_count(); i++) o->engines[o->nengines++] = h_engine_at(i)->name;
    }
    for (int i = 0; i < o->nengines && off < sizeof names; i++)
        off += (size_t)snprintf(names + off, sizeof names - off, "%s%s", i ? ", " : "", o->engines[i]);
    static char runfile[128];
    if (!o->json) {
        /* this run's own file, timestamped, earlier runs kept (results/tmp is not committed); run-latest.jsonl
         * points at the newest */
        mkdir("results", 0755);
        mkdir("results/tmp", 0755);
        time_t now = time(NULL);
        struct tm tm;
        char stamp[32];
        strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", localtime_r(&now, &tm));
        snprintf(runfile, sizeof runfile, "results/tmp/run-%s.jsonl", stamp);
        for (int k = 2; access(runfile, F_OK) == 0 && k < 100; k++)
            snprintf(runfile, sizeof runfile, "results/tmp/run-%s-%d.jsonl", stamp, k);
        int fd = open(runfile, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0) {
            fprintf(stderr, "harness: run: cannot write %s: %s\n", runfile, strerror(errno));
            return 2;
        }
        close(fd);
        o->json = runfile;
        char link[160];
        snprintf(link, sizeof link, "results/tmp/run-latest.jsonl.%d", (int)getpid());
        unlink(link);
        if (symlink(runfile + strlen("results/tmp/"), link) != 0 || rename(link, "results/tmp/run-latest.jsonl") != 0) {
            unlink(link);
            fprintf(stderr, "harness: warning: run: results/tmp/run-latest.jsonl not pointed at %s: %s\n", runfile, strerror(errno));
        }
    }
    int rounds = o->rounds > 0 ? o->rounds : 3;
    printf("# syncbench run: bench then train, engines %s; %d CPU ranks; %d round%s, the engines' order alternating; "
           "results in %s\n", names, o->procs, rounds, rounds == 1 ? "" : "s", o->json);
    h_run_cfg_t rc_cfg;
    h_run_cfg_of(o, &rc_cfg);
    h_run_load_check(&rc_cfg, stdout);
    fflush(stdout);
    const char *order[H_MAX_ENGINES];
    int n = o->nengines, a = 0, b = 0;
    memcpy(order, o->engines, sizeof order);
    for (int r = 0; r < rounds && a < 128 && b < 128; r++) {
        for (int i = 0; i < n; i++) o->engines[i] = order[r % 2 ? n - 1 - i : i]; /* A B C, C B A, ... */
        if (rounds > 1) printf("\n# syncbench run: round %d of %d\n", r + 1, rounds);
        int ra = s_exit(h_drive(o, "bench"), 2);
        int rb = ra >= 128 ? ra : s_exit(h_drive(o, "train"), 2);
        a = a ? a : ra;
        b = b ? b : rb;
        if (ra >= 128) a = ra;
        if (rb >= 128) b = rb;
    }
    memcpy(o->engines, order, sizeof order);
    if (a < 128 && b < 128 && strcmp(o->json, "-")) {
        /* the comparison side by side, and where the figures went */
        char *files[1] = {(char *)o->json};
        printf("\n# syncbench run: the engines side by side (harness report %s)\n", o->json);
        fflush(stdout);
        h_report(1, files, NULL, "text");
        h_run_summary(o->json, "run", stdout);
        if (o->json == runfile)
            printf("# this run's results: %s (results/tmp/run-latest.jsonl points at it; earlier runs are kept beside it)\n",
                   runfile);
        if (h_run_load_check(&rc_cfg, stdout)) printf("# (the warning above holds at the end of the run too)\n");
    }
    return a ? a : b;
}

/* The lines appended to path from byte off on copied to the file open on fd: 0, or -1 (errno). */
static int s_copy_tail(const char *path, off_t off, int fd)
{
    FILE *in = fopen(path, "r");
    if (!in) return -1;
    char buf[65536];
    size_t n;
    int rc = fseeko(in, off, SEEK_SET);
    while (rc == 0 && (n = fread(buf, 1, sizeof buf, in)) > 0) rc = write(fd, buf, n) == (ssize_t)n ? 0 : -1;
    fclose(in);
    return rc;
}

/* `harness train` of several engines (or with --peers): the launches, then the engines side by side (report's
 * text tables) and run's verdict, from this train's own result lines: a private file the ranks write (no
 * --json), or the lines appended to --json FILE by these launches (not the earlier runs it holds). */
static int s_train(h_opts_t *o)
{
    const char *tdir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s/sb-train-XXXXXX.jsonl", tdir);
    int fd = o->json && !strcmp(o->json, "-") ? -1 : mkstemps(tmp, 6);
    if (fd < 0) return s_exit(h_drive(o, NULL), 2); /* JSON lines on stdout, or no private file: no summary */
    const char *user = o->json;
    struct stat st;
    off_t off = user && stat(user, &st) == 0 ? st.st_size : 0;
    if (!user) o->json = tmp;
    int rc = s_exit(h_drive(o, NULL), 2);
    o->json = user;
    int copied = !user || s_copy_tail(user, off, fd) == 0;
    close(fd);
    if (rc < 128 && copied) {
        char *files[1] = {tmp};
        h_jobj_t *objs = NULL;
        size_t n = 0, bad = 0, ntrain = 0;
        if (h_jread_files(1, files, &objs, &n, &bad, NULL) == 0)
            for (size_t i = 0; i < n; i++) ntrain += !strcmp(h_jstr(&objs[i], "mode", ""), "train");
        h_jfree_all(&objs, &n);
        if (ntrain > 1) {
            printf("\n# syncbench train: the engines side by side%s%s%s\n", user ? " (harness report " : "", user ? user : "",
                   user ? " holds them with its earlier runs)" : " (--json FILE keeps them)");
            fflush(stdout);
            h_report_tables(1, files);
            h_run_summary(tmp, "train", stdout);
            fflush(stdout);
        }
    }
    unlink(tmp);
    return rc;
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    /* profile: syncbench-profile's own options (a Python program: torch counts the model) */
    if (argc > 1 && !strcmp(argv[1], "profile")) return h_profile_exec(argc - 2, argv + 2);
    h_opts_t o;
    if (h_opts_parse(&o, argc, argv) < 0) return s_exit(ERR_INVAL, 2); /* every parse failure is a usage error */
    err_show_locations(o.verbose); /* a failure's file:line chain only for --verbose */
    if (o.version) {
        printf("harness (syncbench) %s\n", h_git_sha());
        return 0;
    }
    if (o.list_values) return s_exit(h_opts_list_values(stdout, o.list_values), 2);
    if (o.help) {
        if (argc > 1 && argv[1][0] != '-') h_opts_usage_mode(stdout, o.mode); /* harness MODE --help */
        else h_opts_usage(stdout);
        return 0;
    }
    if (h_is_launched()) return s_exit(s_rank_main(&o), 1);
    if (h_opts_check_mode(&o) < 0) return s_exit(ERR_INVAL, 2);
    /* every output path before any work: a run must not be lost to a late check */
    if (s_check_writable("--json", o.json) < 0 || (o.timeline && afile_check_dest("--timeline", o.timeline) < 0) ||
        s_check_folder("--plots", o.plots_dir) < 0 || s_check_folder("--csv", o.csv_dir) < 0 || s_check_train_paths(&o) < 0)
        return s_exit(ERR_INVAL, 2);
    if (!strcmp(o.mode, "report")) return s_report(&o);
    if (!strcmp(o.mode, "explain")) {
        h_explain_cfg_t c;
        h_explain_cfg_of(&o, &c);
        return s_exit(h_explain(&c, stdout, NULL, NULL), 2);
    }
    if (!strcmp(o.mode, "simulate")) {
        h_simulate_cfg_t c;
        h_simulate_cfg_of(&o, &c);
        return s_exit(h_simulate(&c), 2);
    }
    if (!strcmp(o.mode, "gemm")) {
        h_gemm_cfg_t c;
        h_gemm_cfg_of(&o, &c);
        int rc = h_gemm_bench(&c);
        char m[512];
        if (rc < 0) fprintf(stderr, "harness: gemm: %s\n", err_trace(rc, m, sizeof m));
        return rc < 0 ? 1 : 0;
    }
    if (!strcmp(o.mode, "model") && o.model_action) {
        h_model_fc_cfg_t c;
        h_model_fc_cfg_of(&o, &c);
        return s_exit(h_model_fitcheck(&c), 2);
    }
    if (!strcmp(o.mode, "model") && workload_is_known(o.model)) {
        h_model_cluster_cfg_t c;
        h_model_cluster_cfg_of(&o, &c);
        return s_exit(h_model_cluster(&c), 2);
    }
    if (!strcmp(o.mode, "model")) {
        /* one launch of the probe world (2 ranks by default), whatever --engine / --scaling say */
        if (!o.procs && !o.gpus && !o.nnodes) o.procs = 2;
        o.nscaling = 0;
        o.engines[0] = h_engine_at(0)->name;
        o.nengines = 1;
        return s_exit(h_drive(&o, NULL), 2);
    }
    if (!strcmp(o.mode, "run")) return s_run(&o);
    int several = o.nengines > 1 || o.peers;
    if ((o.procs || o.gpus || o.nnodes || o.nodes || o.nscaling) && !strcmp(o.mode, "train") && several) return s_train(&o);
    if (o.procs || o.gpus || o.nnodes || o.nodes || o.nscaling) return s_exit(h_drive(&o, NULL), 2);
    /* no launch: this process is one rank, of the environment's world or of a world of one */
    if (s_check_rank_env() < 0) return s_exit(ERR_INVAL, 2);
    if (!strcmp(o.mode, "bench") && !o.quiet && !o.init_method && !getenv("RANK") && !getenv("SLURM_PROCID") &&
        !getenv("OMPI_COMM_WORLD_RANK"))
        fprintf(stderr, "harness: warning: bench on one rank measures no communication (busbw 0); give the ranks: "
                        "--procs N (or -np N, --nproc-per-node N)\n");
    return s_exit(s_rank_main(&o), 1);
}
