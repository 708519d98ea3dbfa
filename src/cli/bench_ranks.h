/* What the benchmarks that run their ranks as threads of this process share (`vkgpt bench dp`,
 * `bench pp`, and `bench allreduce` with --transport inproc): one thread per rank started and
 * waited for, the message a failed rank keeps for the report, and the temporary token shard the
 * training benchmarks read. Not here: what a rank does, its inproc context (the caller makes it
 * and hands it to the ranks in their jobs), and how a failed rank is reported (each benchmark
 * names its own configuration). */
#ifndef VKG_CLI_BENCH_RANKS_H
#define VKG_CLI_BENCH_RANKS_H

#include <stddef.h>

#include "vkgpt/status.h"

/* Run fn on n threads of this process, one per rank, thread r given (char *)jobs + r * stride
 * (the caller's array of per-rank jobs: what the rank needs and where it leaves its results),
 * and return once every thread has returned. VKG_OK, or VKG_ERR_NOMEM when nothing could be
 * started. A thread that cannot start ends the process (abort) after "vkgpt <what>: cannot start
 * the thread of rank <r>" on standard error: the ranks already running would wait for it for
 * ever. */
vkg_status vkg_cli_bench_run_ranks(const char *what, int n, void *jobs, size_t stride,
                                   void *(*fn)(void *));

/* The message of the error this thread recorded last into err (cap bytes), for a rank's report:
 * with code locations under VKGPT_VERBOSE (vkg_cli_verbose), else the plain text. */
void vkg_cli_bench_rank_error(char *err, size_t cap);

/* A temporary llm.c shard of n random tokens below vocab for benchmark `what`, in the system's
 * temporary folder (os/file.h's vkg_os_temp_dir); its path in path. 0, or the exit code after
 * reporting. */
int vkg_cli_bench_shard(const char *what, size_t n, int vocab, char *path, size_t cap);

#endif
