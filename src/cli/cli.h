/* The vkgpt command-line tool: one function per subcommand, dispatched from main.c.
 * Each subcommand parses its own flags (errors list the valid values), prints to stdout/stderr,
 * and returns the process exit code: 0 success, 1 runtime failure, 2 usage error. */
#ifndef VKG_CLI_H
#define VKG_CLI_H

#include <signal.h>
#include <stddef.h>

#include "vkgpt/comm.h"
#include "vkgpt/device.h"
#include "vkgpt/status.h"
#include "vkgpt/tuning.h"

typedef int (*vkg_cli_fn)(int argc, char **argv);

typedef struct vkg_cli_command {
    const char *name;    /* "devices", "bench", ... */
    vkg_cli_fn run;      /* argv[0] is the subcommand name */
    const char *summary; /* one line for `vkgpt help` */
} vkg_cli_command;

/* Print "vkgpt <cmd>: <thread's error text>" to stderr (vkg_error_text: the sentence, without
 * code locations; the status description when there is none), control characters written as
 * \xNN, and return vkg_cli_exit_code(status). Verbose (vkg_cli_verbose): "vkgpt <cmd>: <status
 * description> (<status name>): <vkg_error_message, with its code locations>". */
int vkg_cli_report(const char *cmd, vkg_status status);
/* The exit code of a failure with this status: 2 (a usage error) for VKG_ERR_INVALID_ARG (a value
 * or combination refused) and VKG_ERR_NOT_FOUND (a file, device or checkpoint named that does
 * not exist), 1 (a failure while running) for every other status. */
int vkg_cli_exit_code(vkg_status status);
/* 1 when errors are to name their code locations: VKGPT_VERBOSE set and not "" or "0" (vkgpt
 * --verbose sets it, so launched ranks inherit it). */
int vkg_cli_verbose(void);
/* 0 when path (what the flag `what` names) exists, or when path is NULL; otherwise 2 after
 * printing "vkgpt <cmd>: <what>: no file matches '<path>'" (pattern: path is a glob, as --data)
 * or "...: no such file or folder '<path>'". A path that exists but cannot be used is left to
 * the library. */
int vkg_cli_need_path(const char *cmd, const char *what, const char *path, int pattern);
/* vkg_cli_need_path for every path of a train config: --data and --val-data (patterns), --init,
 * a --tokenizer file, --vocab-dir. 0, or 2 after printing the first that does not exist. */
struct vkg_train_config;
int vkg_cli_train_paths(const struct vkg_train_config *c);
/* Print a sampled text and a newline to stdout: on a terminal with control bytes escaped as
 * \xNN (vkg__escape_text: a model's text may hold escape sequences), raw when raw is set or
 * stdout is not a terminal (a pipe or a file gets the model's bytes). */
void vkg_cli_print_sample(const char *text, int raw);
/* Parse a --tiles value (vkg_matmul_tiling_parse) into *out: 0, or 2 after printing
 * "vkgpt <cmd>: <why>" (the message quotes the value and says what was expected). NULL: *out
 * zero (no tiles forced), 0. */
int vkg_cli_tiles(const char *cmd, const char *value, vkg_matmul_tiling *out);
/* Print one line: the matmul kernel an open device runs and its row of the tiled kernel's table
 * (tiles per size, the subgroup sizes required, fill, subgroup size control), after indent. */
void vkg_cli_print_matmul(const vkg_device_t *dev, const char *indent);

/* Progress (progress.c): the monotonic clock in seconds; a duration as "42s", "3m07s" or
 * "2h05m"; one step's line of `vkgpt train` (live and rewritten in place when tty, plain
 * otherwise) with the time elapsed since the run's first step and the ETA of the last one, from
 * the wall time of the `done` steps this run has taken. */
double vkg_cli_now_s(void);
void vkg_cli_duration(double seconds, char *buf, size_t cap);
struct vkg_step_info;
void vkg_cli_print_step(const struct vkg_step_info *s, long long steps, double elapsed_s,
                        long long done, int tty);
/* The lines that open a train run on this rank: device, cooperative matrices, precision, memory,
 * batch, data parallelism, transport, pipeline (schedule: its name) and sharded optimizer, each
 * where it applies. */
struct vkg_trainer_info;
void vkg_cli_print_run(const struct vkg_trainer_info *info, int recompute, const char *schedule);

/* The exit status of a run stopped by a notice (SIGTERM or SIGUSR1, Kubernetes' and Slurm's, on
 * any rank): every rank stopped after the same step and the checkpoint was written; the same
 * command with --resume goes on (sysexits.h's EX_TEMPFAIL: a temporary failure, to retry). */
#define VKG_CLI_EXIT_PREEMPTED 75

/* The exit status for a run stopped by signal sig on this rank (0: by another rank's notice). */
static inline int vkg_cli_stop_status(int sig)
{
    return sig == SIGINT ? 128 + SIGINT : VKG_CLI_EXIT_PREEMPTED;
}

/* The lines `train --help` and `launch --help` end their synopsis with: signals and exit codes. */
#define VKG_CLI_EXIT_HELP                                                                          \
    "\n  SIGTERM or SIGUSR1 (a preemption notice) to any rank: every rank finishes the same "      \
    "step, the\n  checkpoint is saved (with --ckpt-dir) and the exit status is 75: run the same "  \
    "command with\n  --resume to go on. Ctrl-C: the same, exit 130. Exit status otherwise: 0 "     \
    "done, 1 a failure\n  while running, 2 a usage error (a bad flag, a file or device named "     \
    "that does not exist).\n  VKGPT_VERBOSE=1: errors name code locations."

/* Subcommands (one file each under src/cli/). */
int vkg_cli_devices(int argc, char **argv);
int vkg_cli_prepare(int argc, char **argv);
int vkg_cli_bench(int argc, char **argv);
int vkg_cli_bench_ops(int argc, char **argv);
int vkg_cli_bench_train(int argc, char **argv);
int vkg_cli_train(int argc, char **argv);
int vkg_cli_sample(int argc, char **argv);
int vkg_cli_bench_allreduce(int argc, char **argv);
int vkg_cli_keygen(int argc, char **argv);
int vkg_cli_launch(int argc, char **argv);
int vkg_cli_bench_dp(int argc, char **argv);
int vkg_cli_bench_pp(int argc, char **argv);
int vkg_cli_plan(int argc, char **argv);

/* Data-parallel flags of `vkgpt train` (cmd_launch.c): launcher variables first
 * (vkg_comm_config_from_env), then these flags override them. */
typedef struct vkg_cli_dp_flags {
    int world_size, rank, master_port, timeout_s, lr_scale;
    const char *master_addr, *transport, *rank_batch;
    long long base_batch;
    float bucket_mb;
    int no_overlap, listen_all;
    int zero_copy;       /* 0: gradient buckets by the copy path (force_copy_path) */
    int grad_dtype;      /* index into vkg_cli_grad_dtypes: 0 fp32, 1 bf16 */
    int rebalance_every; /* -1: not given */
    int rank_batch_v[1024];
} vkg_cli_dp_flags;
#define VKG_CLI_DP_FLAGS_INIT                                                                      \
    {                                                                                              \
        .world_size = -1, .rank = -1, .master_port = -1, .timeout_s = -1, .zero_copy = 1,          \
        .rebalance_every = -1                                                                      \
    }
extern const char *const vkg_cli_lr_scales[];
/* --coopmat's values, indexed by vkg_coopmat_mode (train, bench train). */
extern const char *const vkg_cli_coopmats[];
#define VKG_CLI_COOPMAT_HELP                                                                       \
    "auto: under --precision bf16, the bf16 forward products on the device's cooperative "         \
    "matrices (tensor cores) where it has them, a self-check at start passes and they are 10 % "   \
    "faster on a product timed at start (rank 0's choice for every rank), else off (the run says " \
    "which); on: always, an error where the device lacks them; off; emulate: the same kernel "     \
    "without them (a check)"
/* 0, or 2 after printing why --coopmat (vkg_coopmat_mode) cannot go with --precision. */
int vkg_cli_coopmat_check(const char *cmd, int coopmat, int precision);
/* --grad-dtype's values (train, bench dp), and the dtype of index i. */
extern const char *const vkg_cli_grad_dtypes[];
vkg_comm_dtype vkg_cli_grad_dtype(int i);
#define VKG_CLI_GRAD_DTYPE_HELP                                                                    \
    "what the data-parallel ranks exchange gradients in: fp32 (the default) or bf16 (rounded to "  \
    "nearest even, summed in fp32, widened back before clipping and AdamW: up to half the bytes)"
/* --precision's values, indexed by VKG_PRECISION_* (train, bench train, plan). */
extern const char *const vkg_cli_precisions[];
#define VKG_CLI_PRECISION_HELP                                                                     \
    "fp32 (the default) or bf16: mixed precision as llm.c's, fp32 master weights, AdamW and "      \
    "gradients, bf16 weight copy for the matrix products; checkpoints stay fp32"
#define VKG_CLI_DP_FLAGS(d)                                                                        \
    {"--world-size",                                                                               \
     VKG_FLAG_INT,                                                                                 \
     &(d).world_size,                                                                              \
     "data-parallel ranks (default: launcher env)",                                                \
     0,                                                                                            \
     1,                                                                                            \
     1024},                                                                                        \
        {"--rank", VKG_FLAG_INT, &(d).rank, "this rank, 0..world-1 (default: launcher env)", 0,    \
         0,        1023},                                                                          \
        {"--master-addr",                                                                          \
         VKG_FLAG_STR,                                                                             \
         &(d).master_addr,                                                                         \
         "rank 0's host (default: MASTER_ADDR)",                                                   \
         0,                                                                                        \
         0,                                                                                        \
         0},                                                                                       \
        {"--master-port",                                                                          \
         VKG_FLAG_INT,                                                                             \
         &(d).master_port,                                                                         \
         "rank 0's port (default: MASTER_PORT)",                                                   \
         0,                                                                                        \
         1,                                                                                        \
         65535},                                                                                   \
        {"--transport",                                                                            \
         VKG_FLAG_STR,                                                                             \
         &(d).transport,                                                                           \
         "tcp or ipc (default tcp; shared memory between ranks of a host), shm (required: "        \
         "fails naming the cause where the ranks or a group cannot use it) or zmq",                \
         0,                                                                                        \
         0,                                                                                        \
         0},                                                                                       \
        {"--comm-timeout",                                                                         \
         VKG_FLAG_INT,                                                                             \
         &(d).timeout_s,                                                                           \
         "seconds a collective may wait (default: VKG_COMM_TIMEOUT, else 60)",                     \
         0,                                                                                        \
         1,                                                                                        \
         86400},                                                                                   \
        {"--rank-batch",                                                                           \
         VKG_FLAG_STR,                                                                             \
         &(d).rank_batch,                                                                          \
         "micro-batch per rank, e.g. 4,2,2; auto: each rank's rows from its measured speed, "      \
         "starting from --batch on every rank, the global micro-batch and accumulation steps "     \
         "fixed, each rank within its memory plan (not with --pp or --zero)",                      \
         0,                                                                                        \
         0,                                                                                        \
         0},                                                                                       \
        {"--rebalance-every",                                                                      \
         VKG_FLAG_INT,                                                                             \
         &(d).rebalance_every,                                                                     \
         "--rank-batch auto: choose the split again every N steps (after a calibration of the "    \
         "first min(3, N); default 20)",                                                           \
         0,                                                                                        \
         1,                                                                                        \
         1000000000},                                                                              \
        {"--lr-scale",                                                                             \
         VKG_FLAG_CHOICE,                                                                          \
         &(d).lr_scale,                                                                            \
         "scale --lr with the total batch",                                                        \
         vkg_cli_lr_scales,                                                                        \
         0,                                                                                        \
         0},                                                                                       \
        {"--base-batch",                                                                           \
         VKG_FLAG_LL,                                                                              \
         &(d).base_batch,                                                                          \
         "total batch --lr was tuned for (needed by --lr-scale linear or sqrt; no default)",       \
         0,                                                                                        \
         1,                                                                                        \
         2147483647},                                                                              \
        {"--bucket-mb",                                                                            \
         VKG_FLAG_FLOAT,                                                                           \
         &(d).bucket_mb,                                                                           \
         "gradient bucket size in MiB (default 25)",                                               \
         0,                                                                                        \
         0.0001,                                                                                   \
         65536},                                                                                   \
        {"--no-overlap",                                                                           \
         VKG_FLAG_BOOL,                                                                            \
         &(d).no_overlap,                                                                          \
         "one allreduce after the backward pass",                                                  \
         0,                                                                                        \
         0,                                                                                        \
         0},                                                                                       \
        {"--zero-copy",                                                                            \
         VKG_FLAG_INT,                                                                             \
         &(d).zero_copy,                                                                           \
         "1 (default): buckets go from the device straight into the collectives' buffer where "    \
         "the driver imports host memory; 0: always by host copies",                               \
         0,                                                                                        \
         0,                                                                                        \
         1},                                                                                       \
        {"--grad-dtype",                                                                           \
         VKG_FLAG_CHOICE,                                                                          \
         &(d).grad_dtype,                                                                          \
         VKG_CLI_GRAD_DTYPE_HELP,                                                                  \
         vkg_cli_grad_dtypes,                                                                      \
         0,                                                                                        \
         0},                                                                                       \
    {                                                                                              \
        "--listen-all", VKG_FLAG_BOOL, &(d).listen_all,                                            \
            "allow a wildcard --master-addr (0.0.0.0): listen on every interface", 0, 0, 0         \
    }
struct vkg_train_config;
/* Fill cfg's comm, rank_batch and lr scaling from the environment and d; 0 or the exit code 2
 * after printing the error. */
int vkg_cli_dp_resolve(vkg_cli_dp_flags *d, struct vkg_train_config *cfg);

#endif
