/* MPI_Allreduce bandwidth in the same format as `vkgpt bench allreduce`, for comparison.
 *
 * Same sizes (doubling from --min to --max), iterations (--iters, scaled down above 16 MiB with a
 * minimum of 3), warm-up, integer-valued float inputs checked exactly, and the same definition of
 * time (the slowest rank's mean per call), algbw (size / time) and busbw (algbw * 2(n-1)/n).
 * Build: mpicc -O2 -o mpi_allreduce mpi_allreduce.c
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t parse_size(const char *s)
{
    char *end = NULL;
    double v = strtod(s, &end);
    if (*end == 'K' || *end == 'k')
        v *= 1024;
    else if (*end == 'M' || *end == 'm')
        v *= 1024 * 1024;
    else if (*end == 'G' || *end == 'g')
        v *= 1024.0 * 1024 * 1024;
    return (size_t)v;
}

/* The inputs of vkgpt's benchmark: rank offsets cancel, so the sum is n * w(i) exactly. */
static float input_value(size_t i, int rank, int n)
{
    float w = (float)((i * 7) % 32);
    int d = rank < n - 1 ? rank : -((n - 1) * (n - 2) / 2);
    return w + (float)d;
}

int main(int argc, char **argv)
{
    size_t min_bytes = 4096, max_bytes = (size_t)256 << 20;
    int iters = 20, warmup = 5;
    MPI_Init(&argc, &argv);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--min"))
            min_bytes = parse_size(argv[i + 1]);
        else if (!strcmp(argv[i], "--max"))
            max_bytes = parse_size(argv[i + 1]);
        else if (!strcmp(argv[i], "--iters"))
            iters = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--warmup"))
            warmup = atoi(argv[i + 1]);
    }
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    float *send = malloc(max_bytes), *recv = malloc(max_bytes);
    memset(recv, 0, max_bytes);
    if (rank == 0) {
        printf("# MPI_Allreduce: %d ranks, float sum, iters %d (scaled down above 16 MiB, min 3), "
               "warmup %d\n",
               n, iters, warmup);
        printf("# %10s %12s %8s %6s %10s %8s %8s %7s\n", "size", "count", "type", "redop", "time",
               "algbw", "busbw", "#wrong");
        printf("# %10s %12s %8s %6s %10s %8s %8s %7s\n", "(B)", "(elements)", "", "", "(us)",
               "(GB/s)", "(GB/s)", "");
        fflush(stdout);
    }
    for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
        size_t count = bytes / 4;
        int it = iters;
        if (bytes > ((size_t)16 << 20)) {
            it = (int)((double)iters * (double)(16 << 20) / (double)bytes);
            it = it < 3 ? 3 : it;
        }
        for (size_t i = 0; i < count; i++)
            send[i] = input_value(i, rank, n);
        for (int w = 0; w < warmup; w++)
            MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int k = 0; k < it; k++)
            MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double t = (MPI_Wtime() - t0) / it, tmax = 0;
        long long wrong = 0, wrong_all = 0;
        for (size_t i = 0; i < count; i++)
            wrong += recv[i] != (float)((i * 7) % 32) * (float)n;
        MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        MPI_Reduce(&wrong, &wrong_all, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            double algbw = (double)bytes / tmax / 1e9, busbw = algbw * 2.0 * (n - 1) / n;
            printf("  %10zu %12zu %8s %6s %10.2f %8.2f %8.2f %7lld\n", bytes, count, "float", "sum",
                   tmax * 1e6, algbw, busbw, wrong_all);
            fflush(stdout);
        }
    }
    free(send);
    free(recv);
    MPI_Finalize();
    return 0;
}
