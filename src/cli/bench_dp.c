/* `vkgpt bench dp`: data-parallel step time for N = 1, 2, 4 local ranks (threads of this process,
 * each with its own trainer and device, joined over loopback tcp by default), split into compute,
 * allreduce time, exposed communication (allreduce time after the device had finished the
 * backward pass) and the overlapped fraction, with and without gradient buckets; with --zero 1
 * also under ZeRO-1 (communication = reduce-scatters, the norm's partial sums and the parameters'
 * allgather, which runs after the update and so is all exposed) with each rank's AdamW bytes;
 * with --copy-path 1 the buckets also by the copy path (--zero-copy 0: the host packs and unpacks
 * every bucket) beside the zero-copy path the device takes where it imports host memory; with
 * --grad-dtype bf16 the gradients of 2+ ranks exchanged in bf16 (grad_MiB: the gradient each rank
 * hands the reduction per step, halved); with --auto 1 also with --rank-batch auto (the split
 * chosen from each rank's measured speed, --rebalance-every steps apart after a calibration of
 * the first min(3, N): give --warmup at least that). Every mode's lines "# rank k busy ... idle
 * ..." give each rank's busy time (step minus the time it waited for the others) and idle time
 * (that wait) per step, and its rows. With --inner-steps H also DiLoCo (--sync diloco: H inner
 * steps, then the pseudo-gradient exchanged in --outer-dtype) and, with --fragments F, its
 * streaming form (F fragments, each exchange beside the next inner step). Every mode reports the
 * bytes each rank hands the collectives per step (MiB/step, the mean over the measured steps:
 * the gradient every step with --sync step, the pseudo-gradient once per H steps with DiLoCo)
 * and the compute utilisation (1 - exposed / step).
 * Prints figures, asserts nothing. Random tokens in a temporary llm.c shard are the data. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "os/file.h"
#include "cli/bench_ranks.h"
#include "cli/cli.h"
#include "cli/flags.h"
#include "vkgpt/comm.h"
#include "vkgpt/io.h"
#include "vkgpt/train.h"

#define MAX_BENCH_RANKS 16

typedef struct bench_cfg {
    int layers, heads, channels, vocab, seq, batch, steps, warmup, rebalance_every;
    int inner_steps, outer_dtype, fragments; /* DiLoCo's modes (inner_steps 0: none) */
    float bucket_mb;
    vkg_comm_transport transport;
    vkg_comm_dtype grad_dtype; /* of 2+ ranks */
    const char *device;
    char data[600];
} bench_cfg;

typedef struct rank_job {
    const bench_cfg *b;
    int rank, world, overlap, zero, copy, port, balanced;
    int sync;               /* 0 step, 1 diloco, 2 streaming diloco */
    size_t optimizer_bytes; /* this rank's AdamW on the device */
    size_t grad_bytes;      /* the gradient it hands the reduction per step (0 alone) */
    uint64_t job_id;
    vkg_comm_ctx_t *ctx;
    vkg_status st;
    char err[512];
    double ms, comm_ms, exposed_ms; /* means over measured steps (rank 0) */
    double comm_bytes;              /* mean bytes handed the collectives per step */
    int rows;                       /* micro-batch rows in the last step */
    char split[256];                /* the rank batches of the last step */
    char speeds[256];               /* rows/s per rank at the last re-balancing ("" none) */
    char bucket_path[256];          /* how rank 0's buckets reached the collectives */
} rank_job;

static void *bench_rank(void *p)
{
    rank_job *j = p;
    const bench_cfg *b = j->b;
    vkg_train_config c = vkg_train_config_default();
    c.device = b->device;
    c.layers = b->layers, c.heads = b->heads, c.channels = b->channels;
    c.max_seq_len = b->seq, c.vocab_size = b->vocab, c.data = b->data;
    c.batch = b->batch, c.seq = b->seq, c.steps = b->steps + b->warmup;
    c.lr = 1e-4f, c.schedule = VKG_SCHEDULE_CONSTANT;
    c.par.comm.world_size = j->world, c.par.comm.rank = j->rank,
    c.par.comm.transport = b->transport;
    c.par.comm.master_port = j->port, c.par.comm.job_id = j->job_id, c.par.comm.ctx = j->ctx;
    c.par.bucket_bytes = j->overlap ? (long long)((double)b->bucket_mb * 1048576.0) : -1;
    c.par.zero = j->zero;
    c.par.force_copy_path = j->copy;
    c.par.grad_dtype = j->world > 1 ? b->grad_dtype : VKG_COMM_F32;
    c.par.rank_batch_auto = j->balanced, c.rebalance_every = b->rebalance_every;
    if (j->sync) {
        c.par.sync = 1, c.par.inner_steps = b->inner_steps, c.par.outer_dtype = b->outer_dtype;
        c.par.fragments = j->sync == 2 ? b->fragments : 1;
    }
    vkg_trainer_t *t = NULL;
    vkg_status st = vkg_trainer_create(&c, &t);
    if (st == VKG_OK) {
        vkg_trainer_info info;
        vkg_trainer_get_info(t, &info);
        j->optimizer_bytes = info.optimizer_bytes;
        j->grad_bytes = j->world > 1 ? info.num_params * vkg_comm_dtype_size(c.par.grad_dtype) : 0;
        snprintf(j->bucket_path, sizeof j->bucket_path, "%s", info.bucket_path);
    }
    int measured = 0;
    for (int s = 0; st == VKG_OK && s < b->steps + b->warmup; s++) {
        vkg_step_info info;
        st = vkg_trainer_step(t, &info);
        if (st == VKG_OK && info.rank_speeds[0])
            snprintf(j->speeds, sizeof j->speeds, "%s", info.rank_speeds);
        if (st == VKG_OK && s >= b->warmup) {
            j->ms += info.ms, j->comm_ms += info.comm_ms, j->exposed_ms += info.exposed_comm_ms;
            j->comm_bytes += (double)info.comm_bytes;
            measured++;
            snprintf(j->split, sizeof j->split, "%s", info.rank_batches);
        }
    }
    if (measured)
        j->ms /= measured, j->comm_ms /= measured, j->exposed_ms /= measured,
            j->comm_bytes /= measured;
    if (st != VKG_OK)
        vkg_cli_bench_rank_error(j->err, sizeof j->err);
    if (st == VKG_OK) {
        vkg_trainer_info info;
        vkg_trainer_get_info(t, &info);
        j->rows = info.batch;
    }
    j->st = st;
    vkg_trainer_destroy(&t);
    return NULL;
}

/* One configuration: world ranks as threads; every rank's means in out[world]. */
static int run_world(const bench_cfg *b, int world, int overlap, int zero, int copy, int balanced,
                     int sync, rank_job *out)
{
    static uint64_t counter;
    rank_job jobs[MAX_BENCH_RANKS];
    vkg_comm_ctx_t *ctx = NULL;
    int port = 0;
    if (b->transport == VKG_COMM_INPROC && vkg_comm_ctx_create(&ctx) != VKG_OK)
        return vkg_cli_report("bench dp", VKG_ERR_NETWORK);
    if (b->transport == VKG_COMM_TCP && vkg_comm_pick_port("127.0.0.1", &port) != VKG_OK)
        return vkg_cli_report("bench dp", VKG_ERR_NETWORK);
    uint64_t job_id = ((uint64_t)vkg_os_pid() << 20) + ++counter;
    for (int r = 0; r < world; r++) {
        jobs[r] = (rank_job){.b = b,
                             .rank = r,
                             .world = world,
                             .overlap = overlap,
                             .zero = zero,
                             .copy = copy,
                             .port = port,
                             .balanced = balanced,
                             .sync = sync,
                             .job_id = job_id,
                             .ctx = ctx};
    }
    vkg_status st = vkg_cli_bench_run_ranks("bench", world, jobs, sizeof *jobs, bench_rank);
    vkg_comm_ctx_destroy(&ctx);
    if (st != VKG_OK)
        return vkg_cli_report("bench dp", st);
    for (int r = 0; r < world; r++)
        if (jobs[r].st != VKG_OK) {
            fprintf(stderr, "vkgpt bench dp: rank %d of %d: %s\n", r, world,
                    jobs[r].err[0] ? jobs[r].err : vkg_status_str(jobs[r].st));
            return vkg_cli_exit_code(jobs[r].st);
        }
    memcpy(out, jobs, (size_t)world * sizeof *out);
    return 0;
}

static int write_data(bench_cfg *b, int max_world)
{
    size_t n =
        (size_t)(b->steps + b->warmup + 1) * (size_t)max_world * (size_t)b->batch * (size_t)b->seq +
        1;
    return vkg_cli_bench_shard("bench dp", n, b->vocab, b->data, sizeof b->data);
}

int vkg_cli_bench_dp(int argc, char **argv)
{
    bench_cfg b = {.layers = 4,
                   .heads = 4,
                   .channels = 256,
                   .vocab = 50257,
                   .seq = 64,
                   .batch = 4,
                   .steps = 3,
                   .warmup = 1,
                   .rebalance_every = 20,
                   .bucket_mb = 25.0f,
                   .transport = VKG_COMM_TCP};
    const char *ranks = "1,2,4", *transport = "tcp";
    int flat = 1, zero = 0, copy_path = 0, grad_dtype = 0, balance = 0;
    b.device = getenv("VKGPT_DEVICE");
    static const char *const outer_dtypes[] = {"fp32", "bf16", "int8", "int4", NULL};
    const vkg_flag flags[] = {
        {"--ranks", VKG_FLAG_STR, &ranks, "world sizes to run, e.g. 1,2,4", 0, 0, 0},
        {"--layers", VKG_FLAG_INT, &b.layers, "layers", 0, 1, 1000},
        {"--heads", VKG_FLAG_INT, &b.heads, "attention heads", 0, 1, 1000},
        {"--channels", VKG_FLAG_INT, &b.channels, "channels", 0, 1, 65536},
        {"--vocab", VKG_FLAG_INT, &b.vocab, "vocabulary", 0, 2, 65535},
        {"--seq", VKG_FLAG_INT, &b.seq, "sequence length T (also the context)", 0, 1, 65536},
        {"--batch", VKG_FLAG_INT, &b.batch, "micro-batch per rank", 0, 1, 1 << 20},
        {"--steps", VKG_FLAG_INT, &b.steps, "measured steps", 0, 1, 1e6},
        {"--warmup", VKG_FLAG_INT, &b.warmup, "unmeasured steps first", 0, 0, 1e6},
        {"--bucket-mb", VKG_FLAG_FLOAT, &b.bucket_mb, "gradient bucket size (MiB)", 0, 0.0001,
         65536},
        {"--transport", VKG_FLAG_STR, &transport, "tcp, ipc or inproc", 0, 0, 0},
        {"--flat", VKG_FLAG_INT, &flat, "1: also run without overlap (one allreduce)", 0, 0, 1},
        {"--zero", VKG_FLAG_INT, &zero, "1: also run every mode of 2+ ranks with ZeRO-1", 0, 0, 1},
        {"--copy-path", VKG_FLAG_INT, &copy_path,
         "1: also run the buckets by the copy path (host pack/unpack, --zero-copy 0)", 0, 0, 1},
        {"--grad-dtype", VKG_FLAG_CHOICE, &grad_dtype, VKG_CLI_GRAD_DTYPE_HELP, vkg_cli_grad_dtypes,
         0, 0},
        {"--auto", VKG_FLAG_INT, &balance,
         "1: also run 2+ ranks with --rank-batch auto (buckets; VKG_TEST_ROW_DELAY_MS=d0,d1 "
         "slows rank k by d_k ms per row, a test-only stand-in for a slower device)",
         0, 0, 1},
        {"--rebalance-every", VKG_FLAG_INT, &b.rebalance_every,
         "--auto: steps between re-balancings", 0, 1, 1e6},
        {"--inner-steps", VKG_FLAG_INT, &b.inner_steps,
         "also run DiLoCo (--sync diloco) of 2+ ranks with H inner steps (0: not)", 0, 0, 1e9},
        {"--outer-dtype", VKG_FLAG_CHOICE, &b.outer_dtype, "DiLoCo's pseudo-gradient exchange",
         outer_dtypes, 0, 0},
        {"--fragments", VKG_FLAG_INT, &b.fragments,
         "with --inner-steps: also streaming DiLoCo of F fragments (0: not)", 0, 0, 1e6},
        {"--device", VKG_FLAG_STR, &b.device, "device index or name (every rank)", 0, 0, 0},
    };
    int rc = vkg_flags_parse("bench dp", "[options]", flags, (int)(sizeof flags / sizeof flags[0]),
                             argc, argv, NULL, NULL);
    if (rc)
        return rc == 1 ? 0 : 2;
    b.grad_dtype = vkg_cli_grad_dtype(grad_dtype);
    if (vkg_comm_transport_parse(transport, &b.transport) != VKG_OK) {
        fprintf(stderr, "vkgpt bench dp: --transport must be tcp, ipc or inproc, got '%s'\n",
                transport);
        return 2;
    }
    int worlds[MAX_BENCH_RANKS], max_world = 1;
    int nw = vkg_flags_int_list(ranks, 1, MAX_BENCH_RANKS, worlds, MAX_BENCH_RANKS);
    if (nw < 0) {
        fprintf(stderr,
                "vkgpt bench dp: --ranks wants at most %d sizes from 1 to %d separated by "
                "commas, got '%s'\n",
                MAX_BENCH_RANKS, MAX_BENCH_RANKS, ranks);
        return 2;
    }
    for (int i = 0; i < nw; i++)
        max_world = worlds[i] > max_world ? worlds[i] : max_world;
    if ((rc = write_data(&b, max_world)) != 0)
        return rc;
    if (b.fragments && !b.inner_steps) {
        fprintf(stderr, "vkgpt bench dp: --fragments needs --inner-steps (DiLoCo's round)\n");
        return 2;
    }
    printf("# GPT-2 L=%d NH=%d C=%d V=%d, B=%d x T=%d per rank, %d measured steps after %d, "
           "%s, buckets of %.2f MiB, gradients exchanged in %s\n",
           b.layers, b.heads, b.channels, b.vocab, b.batch, b.seq, b.steps, b.warmup,
           vkg_comm_transport_name(b.transport), (double)b.bucket_mb,
           vkg_cli_grad_dtypes[grad_dtype]);
    if (b.inner_steps)
        printf("# diloco: --sync diloco, %d inner steps, pseudo-gradient in %s%s", b.inner_steps,
               outer_dtypes[b.outer_dtype], b.fragments ? "; " : "\n");
    if (b.inner_steps && b.fragments)
        printf("stream: %d fragments, each exchange beside the next inner step\n", b.fragments);
    printf("# compute = step - exposed; exposed = allreduce time after the device finished the "
           "backward pass; overlap = 1 - exposed / allreduce; hidden = 1 - exposed / the flat "
           "run's allreduce (the share of the whole-gradient allreduce that buckets hide); "
           "zero-*: ZeRO-1 (allreduce = reduce-scatters + the norm's partial sums + the "
           "parameters' allgather); *-copy: buckets by the copy path (the host packs and "
           "unpacks each; the others zero-copy where the device imports host memory); adamw = "
           "rank 0's AdamW on the device; grad_MiB = the gradient each rank hands the "
           "reduction per step (parameters x 4 bytes, x 2 in bf16); MiB/step = the mean bytes "
           "each rank hands the collectives per measured step; util = compute / step\n");
    printf("%5s %12s %10s %10s %10s %10s %8s %8s %10s %10s %9s %9s %6s\n", "ranks", "mode",
           "step_ms", "compute_ms", "allred_ms", "exposed_ms", "overlap", "hidden", "tok/s",
           "adamw_MiB", "grad_MiB", "MiB/step", "util");
    int said_path = 0;
    for (int i = 0; i < nw && rc == 0; i++) {
        double flat_comm = 0.0;
        for (int z = 0; z <= (zero && worlds[i] > 1) && rc == 0; z++)
            for (int v = flat ? 0 : 1; v <= 5 && rc == 0; v++) {
                rank_job all[MAX_BENCH_RANKS];
                /* v: 0 flat, 1 buckets, 2 auto (with --auto), 3 buckets-copy, 4 diloco, 5
                 * streaming diloco */
                int overlap = v > 0, copy = v == 3, balanced = v == 2;
                int sync = v >= 4 ? v - 3 : 0;
                if ((worlds[i] == 1 && v != 1) || (balanced && (!balance || z)) ||
                    (copy && !copy_path) || (sync && (z || !b.inner_steps)) ||
                    (sync == 2 && !b.fragments))
                    continue;
                if ((rc = run_world(&b, worlds[i], overlap, z, copy, balanced, sync, all)) != 0)
                    break;
                const rank_job r = all[0];
                if (worlds[i] > 1 && overlap && !copy && !said_path++)
                    printf("# buckets by %s\n", r.bucket_path);
                double tok = (double)worlds[i] * b.batch * b.seq / (r.ms / 1e3);
                char ov[16] = "-", hid[16] = "-";
                if (worlds[i] > 1 && r.comm_ms > 0)
                    snprintf(ov, sizeof ov, "%.0f%%", 100.0 * (1.0 - r.exposed_ms / r.comm_ms));
                if (!overlap && !z)
                    flat_comm = r.comm_ms;
                else if (worlds[i] > 1 && flat_comm > 0)
                    snprintf(hid, sizeof hid, "%.0f%%", 100.0 * (1.0 - r.exposed_ms / flat_comm));
                static const char *const modes[2][6] = {
                    {"flat", "buckets", "auto", "buckets-copy", "diloco", "stream"},
                    {"zero-flat", "zero-buckets", "-", "zero-bk-copy", "-", "-"}};
                const char *mode = worlds[i] == 1 ? "single" : modes[z][v];
                printf("%5d %12s %10.1f %10.1f %10.1f %10.1f %8s %8s %10.0f %10.1f %9.1f %9.3f "
                       "%5.1f%%\n",
                       worlds[i], mode, r.ms, r.ms - r.exposed_ms, r.comm_ms, r.exposed_ms, ov, hid,
                       tok, (double)r.optimizer_bytes / 1048576.0,
                       sync ? 0.0 : (double)r.grad_bytes / 1048576.0, r.comm_bytes / 1048576.0,
                       r.ms > 0 ? 100.0 * (1.0 - r.exposed_ms / r.ms) : 100.0);
                for (int k = 0; k < worlds[i] && worlds[i] > 1; k++)
                    printf("# %s rank %d: busy %.1f ms, idle %.1f ms per step; %d rows (split "
                           "%s)\n",
                           mode, k, all[k].ms - all[k].exposed_ms, all[k].exposed_ms, all[k].rows,
                           all[0].split);
                if (balanced)
                    printf("# auto: rows/s per rank at the last re-balancing: %s\n",
                           all[0].speeds[0] ? all[0].speeds : "(none yet)");
                fflush(stdout);
            }
    }
    remove(b.data);
    return rc;
}
