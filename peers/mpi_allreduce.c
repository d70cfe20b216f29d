/* mpi_allreduce.c: the peer we measure against: OpenMPI's MPI_Allreduce timed exactly as `harness bench`
 * times ours (warm-up, per-iteration time, slowest rank per iteration, median over iterations; loop_us:
 * the slowest rank's timed loop / iterations; nccl-tests' algbw/busbw, exact-result check), writing the
 * same JSON lines. Built by `make peers`. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static size_t parse_size(const char *s)
{
    char *e;
    double v = strtod(s, &e);
    if (*e == 'K') v *= 1024; else if (*e == 'M') v *= 1048576; else if (*e == 'G') v *= 1073741824.0;
    return (size_t)v;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, P;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    size_t lo = 4096, hi = 64u << 20;
    int iters = 20, warmup = 5;
    const char *json = NULL, *label = "openmpi";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--sizes")) {
            char b[64]; snprintf(b, sizeof b, "%s", argv[i + 1]);
            char *c = strchr(b, ':');
            if (c) { *c = 0; lo = parse_size(b); hi = parse_size(c + 1); } else lo = hi = parse_size(b);
        } else if (!strcmp(argv[i], "--iters")) iters = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--warmup")) warmup = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--json")) json = argv[i + 1];
        else if (!strcmp(argv[i], "--label")) label = argv[i + 1];
    }
    float *in = malloc(hi), *out = malloc(hi);
    double *t = malloc(sizeof(double) * (size_t)iters), *tmax = malloc(sizeof(double) * (size_t)iters);
    char host[128] = "";
    gethostname(host, sizeof host - 1);
    if (rank == 0) {
        printf("#\n# OpenMPI MPI_Allreduce (%s), %d ranks, dtype f32, op sum\n", label, P);
        printf("# %12s %12s %6s %6s %10s %9s %9s %8s\n", "size(B)", "count", "type", "redop", "time(us)", "algbw", "busbw", "#wrong");
    }
    for (size_t bytes = lo; bytes <= hi; bytes *= 2) {
        size_t n = bytes / 4;
        for (size_t i = 0; i < n; i++) in[i] = (float)((int)((i * 7 + (size_t)rank * 13) % 9) - 4);
        for (int w = 0; w < warmup; w++) MPI_Allreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double l0 = MPI_Wtime(), loop, lmax = 0;
        for (int it = 0; it < iters; it++) {
            double t0 = MPI_Wtime();
            MPI_Allreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            t[it] = (MPI_Wtime() - t0) * 1e6;
        }
        loop = (MPI_Wtime() - l0) * 1e6 / iters;
        long wrong = 0;
        for (size_t i = 0; i < n; i++) {
            float want = 0;
            for (int r = 0; r < P; r++) want += (float)((int)((i * 7 + (size_t)r * 13) % 9) - 4);
            if (out[i] != want) wrong++;
        }
        long wsum = 0;
        MPI_Reduce(t, tmax, iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        MPI_Reduce(&loop, &lmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        MPI_Reduce(&wrong, &wsum, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            qsort(tmax, (size_t)iters, sizeof(double), cmpd);
            double med = iters % 2 ? tmax[iters / 2] : 0.5 * (tmax[iters / 2 - 1] + tmax[iters / 2]);
            double algbw = (double)bytes / (med * 1e-6) / 1e9, busbw = P > 1 ? algbw * 2.0 * (P - 1) / P : algbw;
            printf("  %12zu %12zu %6s %6s %10.1f %9.3f %9.3f %8ld\n", bytes, n, "f32", "sum", med, algbw, busbw, wsum);
            fflush(stdout);
            if (json) {
                FILE *f = fopen(json, "a");
                time_t now = time(NULL);
                char ts[40];
                strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
                if (f) {
                    fprintf(f, "{\"mode\":\"bench\",\"engine\":\"openmpi\",\"impl\":\"%s\",\"world\":%d,\"bytes\":%zu,"
                               "\"count\":%zu,\"dtype\":\"f32\",\"op\":\"sum\",\"iters\":%d,\"warmup\":%d,\"time_us\":%.3f,"
                               "\"loop_us\":%.3f,\"algbw_gbs\":%.6f,\"busbw_gbs\":%.6f,\"wrong\":%ld,\"host\":\"%s\",\"timestamp\":\"%s\"}\n",
                            label, P, bytes, n, iters, warmup, med, lmax, algbw, busbw, wsum, host, ts);
                    fclose(f);
                }
            }
        }
    }
    free(in); free(out); free(t); free(tmax);
    MPI_Finalize();
    return 0;
}
