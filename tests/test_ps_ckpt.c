/* test_ps_ckpt.c: checkpoints of the parameter server's state (trainer/ckpt_set.c, ps/ps_ckpt.c,
 * core/shard.c): training N+M steps equals training N, saving, and resuming for M, bit for bit, with SGD,
 * momentum and Adam, dedicated servers and colocated ones, and resuming with another server count
 * (re-sharded); a corrupt or missing shard is refused naming the file; a save that fails on a full disk
 * leaves the previous checkpoint whole and resumable. Ranks are forked on loopback (tests/lib/ranks.h). */
#include <criterion/criterion.h>
#include <cblas.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>
#include "core/afile.h"
#include "core/comm.h"
#include "core/err.h"
#include "ps/ps.h"
#include "tests/lib/ps_ranks.h"
#include "tests/lib/ranks.h"
#include "tests/lib/tmpdir.h"
#include "trainer/ckpt.h"
#include "trainer/trainer.h"

#define W 2                /* workers */
#define N_FIRST 3          /* steps before the save */
#define N_TOTAL 7          /* steps in all */

typedef struct {
    const char *optim;
    int colocate, servers;
    int steps;             /* steps this run trains (after a resume: more of them) */
    const char *resume;    /* NULL: from scratch */
    const char *save;      /* NULL: no checkpoint */
    int save_fails;        /* 1: the save must fail (rank 0), the run still ends cleanly */
    char out[300];         /* rank 0 writes its parameters here */
} s_arg_t;

static int s_rank(int rank, int world, void *argp)
{
    s_arg_t *a = argp;
    openblas_set_num_threads(1);
    comm_t *comm = NULL;
    if (ps_test_open(&comm, 30000)) return 1;
    ps_topo_t t = {.nworkers = W, .colocate = a->colocate, .timeout_ms = PS_TEST_TO};
    if (rank >= W) return ps_test_server_rank(&comm, &t, 0);
    ps_opts_t po;
    engine_cfg_t ec = ps_test_cfg(&t, world, &po);
    trainer_cfg_t c;
    trainer_cfg_default(&c);
    c.model = "mlp:784-24-10";
    c.global_batch = 32;
    c.synth_samples = 160; /* 5 steps an epoch: the save lands mid-epoch, the run crosses one */
    c.seed = 9;
    c.world = W;
    c.rank = rank;
    c.comm = comm;
    c.timeout_ms = PS_TEST_TO;
    int rc = optim_parse(a->optim, &c.optim);
    engine_t *e = NULL;
    trainer_t *tr = NULL;
    trainer_step_t st;
    if (!rc) rc = ps_engine.create(&e, comm, &ec);
    if (!rc) rc = trainer_new(&tr, &c);
    if (!rc && a->resume) rc = trainer_resume(tr, a->resume);
    if (!rc) rc = trainer_attach(tr, &ps_engine, e);
    for (int i = 0; i < a->steps && !rc; i++) rc = trainer_step(tr, &st);
    if (!rc && a->save && rank == 0) {
        int s = trainer_save(tr, a->save);
        if (a->save_fails != (s < 0)) {
            fprintf(stderr, "save: %s (%s)\n", err_str(s), err_detail());
            rc = ERR_WRONG;
        } else if (s < 0) {
            fprintf(stderr, "save failed as it should: %s\n", err_detail());
            if (s != ERR_NOSPC || !strstr(err_detail(), "No space left")) rc = ERR_WRONG;
        }
    }
    if (!rc && rank == 0) {
        FILE *f = fopen(a->out, "wb");
        if (!f || fwrite(trainer_params(tr), sizeof(float), trainer_shape(tr)->count, f) != trainer_shape(tr)->count)
            rc = ERR_IO;
        if (f) fclose(f);
    }
    if (rc) fprintf(stderr, "rank %d: %s (%s)\n", rank, err_str(rc), err_detail());
    trainer_destroy(&tr);
    if (e) ps_engine.destroy(&e);
    comm_destroy(&comm);
    return rc ? 1 : 0;
}

static size_t s_slurp(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f, "%s: %s", path, strerror(errno));
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    return n;
}

static int s_world(const s_arg_t *a) { return W + (a->colocate ? 0 : a->servers); }

/* uninterrupted N_TOTAL steps vs N_FIRST, save, resume (with resume_servers) for the rest: same bits */
static void s_case(const char *optim, int colocate, int servers, int resume_servers)
{
    char *dir = tmpdir_make();
    char ck[300];
    snprintf(ck, sizeof ck, "%s/ck", dir);
    s_arg_t a = {.optim = optim, .colocate = colocate, .servers = servers, .steps = N_TOTAL};
    s_arg_t b = a, r = a;
    b.steps = N_FIRST;
    b.save = ck;
    r.steps = N_TOTAL - N_FIRST;
    r.resume = ck;
    r.servers = resume_servers;
    r.colocate = resume_servers ? 0 : colocate;
    snprintf(a.out, sizeof a.out, "%s/a.bin", dir);
    snprintf(b.out, sizeof b.out, "%s/b.bin", dir);
    snprintf(r.out, sizeof r.out, "%s/r.bin", dir);
    cr_assert_eq(run_ranks(s_world(&a), s_rank, &a, 90000), 0, "uninterrupted run");
    cr_assert_eq(run_ranks(s_world(&b), s_rank, &b, 90000), 0, "run that saves");
    /* the manifest, the workers' file and one shard per server */
    cr_assert_eq(tmpdir_entries_with(dir, "ck"), 2 + (colocate ? W : servers));
    cr_assert_eq(run_ranks(s_world(&r), s_rank, &r, 90000), 0, "resumed run");
    static char pa[1 << 20], pb[1 << 20], pr[1 << 20];
    size_t na = s_slurp(a.out, pa, sizeof pa), nb = s_slurp(b.out, pb, sizeof pb), nr = s_slurp(r.out, pr, sizeof pr);
    cr_assert(na > 0 && na == nr && na == nb);
    cr_assert_neq(memcmp(pa, pb, na), 0, "the saved run stopped earlier (the comparison can fail)");
    cr_assert_eq(memcmp(pa, pr, na), 0, "parameters after the resume differ from the uninterrupted run (%s, %s)", optim,
                 colocate ? "colocated" : "dedicated");
    tmpdir_remove(dir);
}

Test(ps_ckpt, sgd_dedicated_resumes_bit_identically, .timeout = 240) { s_case("sgd:lr=0.05", 0, 2, 2); }
Test(ps_ckpt, momentum_dedicated_resumes_bit_identically, .timeout = 240) { s_case("sgd:lr=0.05,momentum=0.9", 0, 2, 2); }
Test(ps_ckpt, adam_dedicated_resumes_bit_identically, .timeout = 240) { s_case("adam:lr=1e-3", 0, 2, 2); }
Test(ps_ckpt, momentum_colocated_resumes_bit_identically, .timeout = 240) { s_case("sgd:lr=0.05,momentum=0.9", 1, 0, 0); }
Test(ps_ckpt, adam_colocated_resumes_bit_identically, .timeout = 240) { s_case("adam:lr=1e-3", 1, 0, 0); }
/* saved by 2 servers, resumed on 3 (and on 1): the shards' ranges are gathered and cut again */
Test(ps_ckpt, adam_resumes_on_another_server_count, .timeout = 240) { s_case("adam:lr=1e-3", 0, 2, 3); }
Test(ps_ckpt, momentum_resumes_from_colocated_on_one_server, .timeout = 240) { s_case("sgd:lr=0.05,momentum=0.9", 1, 0, 1); }

/* The name of the checkpoint file in dir whose name ends with suffix (".s1", ".w"), into out. */
static void s_find(const char *dir, const char *suffix, char *out, size_t len)
{
    char cmd[600], buf[600] = "";
    snprintf(cmd, sizeof cmd, "ls %s | grep -- '%s$'", dir, suffix);
    cr_assert_eq(run_cmd(cmd, buf, sizeof buf), 0, "no file *%s in %s", suffix, dir);
    buf[strcspn(buf, "\n")] = 0;
    snprintf(out, len, "%s/%s", dir, buf);
}

static void s_local_cfg(trainer_cfg_t *c)
{
    trainer_cfg_default(c);
    c->model = "mlp:784-24-10";
    c->global_batch = 32;
    c->synth_samples = 160;
    c->seed = 9;
    cr_assert_eq(optim_parse("adam:lr=1e-3", &c->optim), 0);
}

static int s_resume_local(const char *ck)
{
    trainer_cfg_t c;
    s_local_cfg(&c);
    trainer_t *t = NULL;
    cr_assert_eq(trainer_new(&t, &c), 0);
    int rc = trainer_resume(t, ck);
    trainer_destroy(&t);
    return rc;
}

static void s_copy(const char *from, const char *to)
{
    char cmd[700], out[200];
    snprintf(cmd, sizeof cmd, "cp %s %s", from, to);
    cr_assert_eq(run_cmd(cmd, out, sizeof out), 0);
}

Test(ps_ckpt, corrupt_or_missing_shards_are_refused_naming_the_file, .timeout = 120)
{
    char *dir = tmpdir_make();
    char ck[300], s1[700], keep[700], w[700];
    snprintf(ck, sizeof ck, "%s/ck", dir);
    s_arg_t b = {.optim = "adam:lr=1e-3", .servers = 2, .steps = N_FIRST, .save = ck};
    snprintf(b.out, sizeof b.out, "%s/b.bin", dir);
    cr_assert_eq(run_ranks(s_world(&b), s_rank, &b, 90000), 0, "run that saves");
    cr_assert_eq(s_resume_local(ck), 0, "the checkpoint as written resumes: %s", err_detail());
    s_find(dir, ".s1", s1, sizeof s1);
    s_find(dir, ".w", w, sizeof w);
    snprintf(keep, sizeof keep, "%s/keep", dir);
    s_copy(s1, keep);
    /* a flipped bit in the second shard */
    FILE *f = fopen(s1, "r+b");
    cr_assert(f);
    fseek(f, 5000, SEEK_SET);
    int ch = fgetc(f);
    fseek(f, 5000, SEEK_SET);
    fputc(ch ^ 0x04, f);
    fclose(f);
    cr_assert_eq(s_resume_local(ck), ERR_CORRUPT);
    cr_assert(strstr(err_detail(), s1) && strstr(err_detail(), "checksum"), "%s", err_detail());
    /* missing */
    unlink(s1);
    cr_assert_eq(s_resume_local(ck), ERR_IO);
    cr_assert(strstr(err_detail(), s1), "%s", err_detail());
    /* a valid shard, but not the one the manifest names: the first shard's bytes under the second's name */
    char s0[700];
    s_find(dir, ".s0", s0, sizeof s0);
    s_copy(s0, s1);
    cr_assert_eq(s_resume_local(ck), ERR_CORRUPT);
    cr_assert(strstr(err_detail(), s1) && strstr(err_detail(), "manifest"), "%s", err_detail());
    /* the workers' file missing */
    s_copy(keep, s1);
    cr_assert_eq(s_resume_local(ck), 0, "restored: %s", err_detail());
    s_copy(w, keep);
    unlink(w);
    cr_assert_eq(s_resume_local(ck), ERR_IO);
    cr_assert(strstr(err_detail(), w), "%s", err_detail());
    s_copy(keep, w);
    cr_assert_eq(s_resume_local(ck), 0, "restored: %s", err_detail());
    tmpdir_remove(dir);
}

/* Fallback when no small tmpfs can be made: the second save's shard of server 1 fails like a full disk. */
static int s_fail_second_save(const char *path)
{
    size_t n = strlen(path);
    return strstr(path, "/ck.5-") && n > 3 && !strcmp(path + n - 3, ".s1");
}

/* A private mount namespace with a small tmpfs at dir (root, or an unprivileged user namespace); 0 if made. */
static int s_small_tmpfs(const char *dir, const char *size)
{
    int flags = CLONE_NEWNS | (geteuid() != 0 ? CLONE_NEWUSER : 0);
    if (unshare(flags) != 0) return -1;
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 && geteuid() == 0) return -1;
    char opt[64];
    snprintf(opt, sizeof opt, "size=%s", size);
    return mount("tmpfs", dir, "tmpfs", 0, opt);
}

Test(ps_ckpt, a_full_disk_keeps_the_previous_checkpoint, .timeout = 240)
{
    char *dir = tmpdir_make();
    char fs[300], ck[400];
    snprintf(fs, sizeof fs, "%s/fs", dir);
    cr_assert_eq(mkdir(fs, 0700), 0);
    /* one checkpoint (Adam: parameters, two moments; workers' file, two shards: about 310 KB) fits, two do not */
    int tmpfs = s_small_tmpfs(fs, "400k") == 0;
    if (!tmpfs) {
        cr_log_info("no small tmpfs (%s): the full disk is injected (afile_fault_hook)", strerror(errno));
        afile_fault_hook = s_fail_second_save;
    }
    snprintf(ck, sizeof ck, "%s/ck", fs);
    s_arg_t a = {.optim = "adam:lr=1e-3", .servers = 2, .steps = N_TOTAL};
    s_arg_t b = a, b2 = a, r = a;
    b.steps = N_FIRST;
    b.save = ck;
    b2.steps = 2;
    b2.resume = ck;
    b2.save = ck;
    b2.save_fails = 1; /* the save after step 5 meets the full disk */
    r.steps = N_TOTAL - N_FIRST;
    r.resume = ck;
    snprintf(a.out, sizeof a.out, "%s/a.bin", dir);
    snprintf(b.out, sizeof b.out, "%s/b.bin", dir);
    snprintf(b2.out, sizeof b2.out, "%s/b2.bin", dir);
    snprintf(r.out, sizeof r.out, "%s/r.bin", dir);
    cr_assert_eq(run_ranks(s_world(&a), s_rank, &a, 90000), 0, "uninterrupted run");
    cr_assert_eq(run_ranks(s_world(&b), s_rank, &b, 90000), 0, "run that saves after step 3");
    int files = tmpdir_entries(fs);
    cr_assert_eq(files, 4, "manifest, workers' file, two shards");
    cr_assert_eq(run_ranks(s_world(&b2), s_rank, &b2, 90000), 0, "run whose save after step 5 fails (full disk)");
    cr_assert_eq(tmpdir_entries(fs), files, "the failed save left nothing of itself (%d files)", tmpdir_entries(fs));
    /* the checkpoint of step 3 is whole: resuming it for 4 steps is the uninterrupted run */
    cr_assert_eq(run_ranks(s_world(&r), s_rank, &r, 90000), 0, "resume of the previous checkpoint");
    static char pa[1 << 20], pr[1 << 20];
    size_t na = s_slurp(a.out, pa, sizeof pa), nr = s_slurp(r.out, pr, sizeof pr);
    cr_assert(na > 0 && na == nr);
    cr_assert_eq(memcmp(pa, pr, na), 0, "the previous checkpoint no longer resumes to the same parameters");
    afile_fault_hook = NULL;
    if (tmpfs) umount(fs);
    tmpdir_remove(dir);
}
