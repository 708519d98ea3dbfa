/* `vkgpt launch -n N -- train ...`: start N local ranks of this very binary with torchrun-style
 * variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) and VKGPT_DEVICE, stream
 * their stdout/stderr line by line with a "[rank k] " prefix, and when a rank fails stop the
 * others (SIGTERM, then SIGKILL after a grace period) and exit non-zero. SIGINT, SIGTERM or
 * SIGUSR1 asks every rank to stop (each saves a checkpoint) and exits as `vkgpt train` does (75, a
 * preemption, to resume; 130 for SIGINT); so does a rank's own notice, agreed by all ranks. Every
 * child is reaped, and no rank outlives the launcher, however it dies (Linux: SIGTERM from the
 * kernel; Windows: the job object ends it). On Windows a stop request is the rank's stop event and
 * SIGKILL is TerminateProcess (os/spawn.h: the platform layer starts and stops ranks). Also here:
 * the data-parallel flags of `vkgpt train` (vkg_cli_dp_resolve). Not here: multi-host launching
 * (use torchrun-style variables, srun or mpirun; see README). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/escape.h"
#include "os/clock.h"
#include "os/file.h"
#include "os/proc.h"
#include "os/spawn.h"
#include "cli/cli.h"
#include "cli/flags.h"
#include "vkgpt/comm.h"
#include "vkgpt/train.h"

#define MAX_RANKS 256
#define LINE_MAX_BYTES 8192

const char *const vkg_cli_lr_scales[] = {"none", "linear", "sqrt", NULL};
const char *const vkg_cli_precisions[] = {"fp32", "bf16", NULL};
const char *const vkg_cli_grad_dtypes[] = {"fp32", "bf16", NULL};

vkg_comm_dtype vkg_cli_grad_dtype(int i)
{
    return i == 1 ? VKG_COMM_BF16 : VKG_COMM_F32;
}

int vkg_cli_dp_resolve(vkg_cli_dp_flags *d, struct vkg_train_config *cfg)
{
    vkg_comm_config *cc = &cfg->par.comm;
    vkg_status st = vkg_comm_config_from_env(cc, NULL);
    if (st != VKG_OK) {
        vkg_cli_report("train", st);
        return 2;
    }
    if (d->world_size > 0)
        cc->world_size = d->world_size;
    if (d->rank >= 0)
        cc->rank = d->rank;
    if (d->master_addr)
        snprintf(cc->master_addr, sizeof cc->master_addr, "%s", d->master_addr);
    if (d->listen_all)
        cc->listen_all = 1;
    if (d->master_port > 0)
        cc->master_port = d->master_port;
    if (d->timeout_s > 0)
        cc->timeout_ms = d->timeout_s * 1000;
    if (d->transport &&
        (vkg_comm_transport_select(d->transport, &cc->transport, &cc->shm) != VKG_OK ||
         cc->transport == VKG_COMM_INPROC)) {
        fprintf(stderr,
                "vkgpt train: --transport must be tcp, ipc, shm (shared memory between the ranks "
                "of a host, required) or zmq (never shared memory), got '%s'\n",
                d->transport);
        return 2;
    }
    if (cc->world_size > 1 && cc->transport == VKG_COMM_TCP && !cc->listen_all &&
        (!strcmp(cc->master_addr, "0.0.0.0") || !strcmp(cc->master_addr, "::") ||
         !strcmp(cc->master_addr, "*"))) {
        fprintf(stderr,
                "vkgpt train: master address %s (--master-addr or MASTER_ADDR) would make rank 0 "
                "listen on every interface of its host; give the address the other ranks reach "
                "(this host's IP or name), or add --listen-all to do so deliberately\n",
                cc->master_addr);
        return 2;
    }
    if (cc->rank < 0 || cc->rank >= cc->world_size) {
        fprintf(stderr, "vkgpt train: --rank %d is outside 0..%d (--world-size %d)\n", cc->rank,
                cc->world_size - 1, cc->world_size);
        return 2;
    }
    if (d->rebalance_every > 0 && !(d->rank_batch && !strcmp(d->rank_batch, "auto"))) {
        fprintf(stderr, "vkgpt train: --rebalance-every needs --rank-batch auto\n");
        return 2;
    }
    if (d->rank_batch && !strcmp(d->rank_batch, "auto")) {
        if (cfg->par.pp > 1 || cfg->par.zero) {
            fprintf(stderr,
                    "vkgpt train: --rank-batch auto is not supported with %s yet: give a fixed "
                    "--rank-batch list\n",
                    cfg->par.pp > 1 ? "--pp" : "--zero 1");
            return 2;
        }
        cfg->par.rank_batch_auto = 1;
        cfg->rebalance_every = d->rebalance_every > 0 ? d->rebalance_every : 20;
    } else if (d->rank_batch) {
        int n = vkg_flags_int_list(d->rank_batch, 1, 1 << 20, d->rank_batch_v,
                                   (int)(sizeof d->rank_batch_v / sizeof d->rank_batch_v[0]));
        if (n < 0) {
            fprintf(stderr,
                    "vkgpt train: --rank-batch wants sizes from 1 to %d separated by commas, "
                    "one per rank (e.g. 4,2,2), got '%s'\n",
                    1 << 20, d->rank_batch);
            return 2;
        }
        int dp = vkg_train_dp_ranks(cfg);
        if (dp && n != dp) {
            fprintf(stderr,
                    "vkgpt train: --rank-batch lists %d sizes but there are %d data-parallel "
                    "ranks%s\n",
                    n, dp, cfg->par.pp > 1 ? " (ranks / --pp)" : "");
            return 2;
        }
        cfg->par.rank_batch = d->rank_batch_v;
        cfg->par.rank_batch_count = n;
    }
    if (d->bucket_mb > 0.0f)
        cfg->par.bucket_bytes = (long long)((double)d->bucket_mb * 1048576.0);
    if (d->no_overlap)
        cfg->par.bucket_bytes = -1;
    cfg->par.force_copy_path = !d->zero_copy;
    cfg->par.grad_dtype = vkg_cli_grad_dtype(d->grad_dtype);
    cfg->lr_scale = (vkg_lr_scale)d->lr_scale;
    cfg->base_batch = d->base_batch;
    return 0;
}

typedef struct child {
    vkg_os_child *proc;
    int open[2]; /* standard output and error still open */
    char buf[2][LINE_MAX_BYTES];
    size_t len[2];
    int done;
    vkg_os_exit how;
} child;

static volatile sig_atomic_t launch_signal;

static void on_launch_signal(int sig)
{
    launch_signal = sig;
}

static double now_s(void)
{
    return vkg_os_now_ms() / 1000.0;
}

/* One line of child k with the rank prefix: on a terminal its control bytes escaped (a rank's
 * output is a pipe, so it printed them raw: a model's sample, a file's text), raw elsewhere. */
static void emit_line(FILE *out, int k, const char *line, size_t n)
{
    static char shown[4 * LINE_MAX_BYTES + 1];
    if (vkg_os_isatty(out == stderr ? 2 : 1)) {
        n = vkg__escape_text(shown, line, n);
        line = shown;
    }
    fprintf(out, "[rank %d] %.*s\n", k, (int)n, line);
}

/* Write complete lines of child k's stream s with the rank prefix (all of it when flush). */
static void emit(child *c, int k, int s, int flush)
{
    FILE *out = s ? stderr : stdout;
    char *b = c->buf[s];
    size_t start = 0;
    for (size_t i = 0; i < c->len[s]; i++)
        if (b[i] == '\n') {
            size_t end = i > start && b[i - 1] == '\r' ? i - 1 : i; /* Windows' line ends */
            emit_line(out, k, b + start, end - start);
            start = i + 1;
        }
    if ((flush || start == 0) && c->len[s] - start > 0 &&
        (flush || c->len[s] == sizeof c->buf[s])) {
        emit_line(out, k, b + start, c->len[s] - start);
        start = c->len[s];
    }
    memmove(b, b + start, c->len[s] - start);
    c->len[s] -= start;
    fflush(out);
}

/* vkg_os_children_pump's callback: ctx is the child array. */
static void on_output(void *ctx, int k, int s, const char *data, size_t len)
{
    child *c = &((child *)ctx)[k];
    if (!data) {
        emit(c, k, s, 1);
        c->open[s] = 0;
        return;
    }
    while (len > 0) {
        size_t room = sizeof c->buf[s] - c->len[s], take = len < room ? len : room;
        memcpy(c->buf[s] + c->len[s], data, take);
        c->len[s] += take, data += take, len -= take;
        emit(c, k, s, 0);
    }
}

static int pump(child *cs, int n, int timeout_ms)
{
    vkg_os_child *procs[MAX_RANKS];
    for (int k = 0; k < n; k++)
        procs[k] = cs[k].open[0] || cs[k].open[1] ? cs[k].proc : NULL;
    return vkg_os_children_pump(procs, n, timeout_ms, on_output, cs);
}

/* Failed: killed, or an exit status other than 0 and a preemption's (the ranks agreed on it and
 * saved: every rank exits so; none is to be stopped for it). */
static int failed_status(vkg_os_exit how)
{
    return how.signal || (how.code != 0 && how.code != VKG_CLI_EXIT_PREEMPTED);
}

/* Start rank k: this program with train's arguments and the rank's variables; its output into
 * two pipes. A rank dies with the launcher: if the launcher ends, even by SIGKILL, the rank is
 * asked to stop (Linux: SIGTERM from the kernel, which `vkgpt train` takes as a request to stop
 * after the current step, with a checkpoint) or ended (Windows: the job object), so no rank goes
 * on training unwatched (os/spawn.h). */
static int spawn(child *c, int k, int n, int port, const char *device, const char *transport,
                 const char *job, char **args)
{
    char rank[48], local_rank[48], world[48], local_world[48], mport[48], job_v[96], tr[64],
        dev[256];
    snprintf(rank, sizeof rank, "RANK=%d", k);
    snprintf(local_rank, sizeof local_rank, "LOCAL_RANK=%d", k);
    snprintf(world, sizeof world, "WORLD_SIZE=%d", n);
    snprintf(local_world, sizeof local_world, "LOCAL_WORLD_SIZE=%d", n);
    snprintf(mport, sizeof mport, "MASTER_PORT=%d", port);
    snprintf(job_v, sizeof job_v, "VKG_JOB_ID=%s", job);
    snprintf(tr, sizeof tr, "VKG_COMM_TRANSPORT=%s", transport);
    snprintf(dev, sizeof dev, "VKGPT_DEVICE=%s", device ? device : "");
    const char *env[] = {rank,
                         local_rank,
                         world,
                         local_world,
                         mport,
                         job_v,
                         tr,
                         "MASTER_ADDR=127.0.0.1",
                         device ? dev : NULL,
                         NULL};
    char err[256];
    if (vkg_os_spawn_self(args, env, &c->proc, err, sizeof err) != 0) {
        fprintf(stderr, "vkgpt launch: cannot start rank %d: %s\n", k, err);
        return 1;
    }
    c->open[0] = c->open[1] = 1;
    return 0;
}

static void signal_all(child *cs, int n, int now)
{
    for (int k = 0; k < n; k++)
        if (cs[k].proc && !cs[k].done)
            vkg_os_child_stop(cs[k].proc, now);
}

static void free_all(child *cs, int n)
{
    for (int k = 0; k < n; k++) {
        vkg_os_child_free(cs[k].proc);
        cs[k].proc = NULL;
    }
}

/* One run of n ranks until all have ended: spawn them (rank k on device rank_dev[k], NULL: the
 * default), stream their output, stop the others when one fails, forward a stop request.
 * Returns the exit status `launch` would end with; *failed_out: the rank that failed first (-1:
 * none, or the run was stopped by a request), with what happened to it in lost. */
static int run_ranks(child *cs, int n, int port, int grace, const char *const *rank_dev,
                     const char *transport, const char *job, char **args, int *failed_out,
                     char *lost, size_t lost_cap)
{
    memset(cs, 0, (size_t)n * sizeof *cs);
    fprintf(stderr, "vkgpt launch: %d ranks, %s rendezvous at 127.0.0.1:%d\n", n, transport, port);
    int failed = -1, running = 0, exit_code = 0, frozen = 0;
    double kill_at = 0.0;
    for (int k = 0; k < n; k++) {
        if (spawn(&cs[k], k, n, port, rank_dev[k], transport, job, args) != 0) {
            failed = k, exit_code = 1, kill_at = now_s() + grace;
            cs[k].done = 1, cs[k].how.code = 1;
            signal_all(cs, k, 0);
            break;
        }
        running++;
        fprintf(stderr, "vkgpt launch: rank %d is pid %ld\n", k, vkg_os_child_id(cs[k].proc));
    }
    int forwarded = 0;
    while (running > 0) {
        pump(cs, n, 100);
        if (launch_signal && !forwarded) {
            fprintf(stderr, "vkgpt launch: signal %d: asking every rank to stop\n",
                    (int)launch_signal);
            signal_all(cs, n, 0);
            forwarded = 1;
            kill_at = now_s() + grace;
        }
        for (int k = 0; k < n; k++) {
            vkg_os_exit how;
            if (!cs[k].proc || cs[k].done || !vkg_os_child_ended(cs[k].proc, &how))
                continue;
            cs[k].done = 1, cs[k].how = how;
            running--;
            if (failed_status(how) && failed < 0 && !forwarded) {
                char why[128];
                vkg_os_exit_describe(how, why, sizeof why);
                fprintf(stderr,
                        "vkgpt launch: rank %d %s; stopping the other ranks (SIGTERM, "
                        "SIGKILL after %d s)\n",
                        k, why, grace);
                failed = k;
                exit_code = how.code;
                /* a rank that froze (SIGSTOP, a debugger) makes the others fail naming it: the
                 * one that exited first is a witness, the frozen one is lost */
                for (int q = 0; q < n; q++)
                    if (q != k && cs[q].proc && !cs[q].done && vkg_os_child_frozen(cs[q].proc)) {
                        fprintf(stderr,
                                "vkgpt launch: rank %d is frozen (stopped, it runs no more): it "
                                "is the rank lost, rank %d exited on its account\n",
                                q, k);
                        failed = q, frozen = 1;
                        break;
                    }
                signal_all(cs, n, 0);
                kill_at = now_s() + grace;
            }
        }
        if (kill_at > 0.0 && now_s() > kill_at) {
            fprintf(stderr, "vkgpt launch: ranks still running after %d s: SIGKILL\n", grace);
            signal_all(cs, n, 1);
            kill_at = 0.0;
        }
    }
    while (pump(cs, n, 100) > 0) { /* the last of their output */
    }
    for (int k = 0; k < n && failed >= 0; k++)
        if (cs[k].proc && k != failed) {
            char why[128];
            vkg_os_exit_describe(cs[k].how, why, sizeof why);
            fprintf(stderr, "vkgpt launch: rank %d %s\n", k, why);
        }
    *failed_out = forwarded ? -1 : failed; /* a stop asked for is not a loss to restart from */
    if (failed >= 0 && frozen)
        snprintf(lost, lost_cap, "froze (stopped by a signal or a debugger)");
    else if (failed >= 0)
        vkg_os_exit_describe(cs[failed].how, lost, lost_cap);
    if (failed < 0 && forwarded) /* stopped, after the ranks saved: as `vkgpt train` exits */
        exit_code = vkg_cli_stop_status((int)launch_signal);
    if (failed < 0)
        for (int k = 0; k < n; k++) {
            if (failed_status(cs[k].how) && !exit_code)
                exit_code = 1;
            if (!exit_code && cs[k].how.code == VKG_CLI_EXIT_PREEMPTED && !cs[k].how.signal)
                exit_code = VKG_CLI_EXIT_PREEMPTED; /* a rank's notice: all stopped and saved */
        }
    free_all(cs, n);
    return exit_code;
}

/* Whether args (NULL-terminated) hold flag, alone or as "flag=value". */
static int has_flag(char *const *args, const char *flag)
{
    size_t len = strlen(flag);
    for (; *args; args++)
        if (!strncmp(*args, flag, len) && ((*args)[len] == '\0' || (*args)[len] == '='))
            return 1;
    return 0;
}

int vkg_cli_launch(int argc, char **argv)
{
    int n = 0, port = 0, grace = 10, pp = 0, zero = 0, grad_dtype = -1, max_restarts = 0,
        min_ranks = 1;
    const char *devices = NULL, *transport = "tcp";
    int sep = argc;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--")) {
            sep = i;
            break;
        }
    const vkg_flag flags[] = {
        {"-n", VKG_FLAG_INT, &n, "number of local ranks (required; no default)", 0, 1, MAX_RANKS},
        {"--devices", VKG_FLAG_STR, &devices, "device per rank, cycling: 0,1,... (VKGPT_DEVICE)", 0,
         0, 0},
        {"--transport", VKG_FLAG_STR, &transport,
         "tcp or ipc (shared memory between the ranks by default), shm (required: fails naming "
         "the cause where the ranks or a group of them cannot use it) or zmq (never)",
         0, 0, 0},
        {"--port", VKG_FLAG_INT, &port, "rendezvous port of rank 0 (default: a free one)", 0, 1,
         65535},
        {"--grace", VKG_FLAG_INT, &grace, "seconds between SIGTERM and SIGKILL on failure", 0, 0,
         3600},
        {"--pp", VKG_FLAG_INT, &pp,
         "pipeline stages, passed to every rank's train (N / pp "
         "data-parallel replicas; default: 1)",
         0, 1, 64},
        {"--zero", VKG_FLAG_INT, &zero,
         "1: ZeRO-1, passed to every rank's train (AdamW's moments sharded over the ranks)", 0, 0,
         1},
        {"--grad-dtype", VKG_FLAG_CHOICE, &grad_dtype,
         "passed to every rank's train: " VKG_CLI_GRAD_DTYPE_HELP, vkg_cli_grad_dtypes, 0, 0},
        {"--max-restarts", VKG_FLAG_INT, &max_restarts,
         "when a rank fails, stop the others and start again from the newest complete "
         "checkpoint (train --resume) without the lost rank's replica, up to this many times "
         "(default 0: the job ends); needs train's --ckpt-dir and --total-batch",
         0, 0, 1000},
        {"--min-ranks", VKG_FLAG_INT, &min_ranks,
         "fewest ranks a restart may go on with (default 1)", 0, 1, MAX_RANKS},
    };
    int rc = vkg_flags_parse("launch", "-n N [options] -- train [train options]" VKG_CLI_EXIT_HELP,
                             flags, (int)(sizeof flags / sizeof flags[0]), sep, argv, NULL, NULL);
    if (rc)
        return rc == 1 ? 0 : 2;
    vkg_comm_transport tr = VKG_COMM_TCP;
    vkg_comm_shm shm = VKG_COMM_SHM_AUTO;
    if (vkg_comm_transport_select(transport, &tr, &shm) != VKG_OK || tr == VKG_COMM_INPROC) {
        fprintf(stderr,
                "vkgpt launch: --transport must be tcp, ipc, shm (shared memory between the "
                "ranks, required) or zmq (never shared memory), got '%s'\n",
                transport);
        return 2;
    }
    if (n < 1 || sep >= argc - 1) {
        fprintf(stderr, "vkgpt launch: usage: vkgpt launch -n N [options] -- train [options]\n");
        return 2;
    }
    if (pp && n % pp) {
        fprintf(stderr,
                "vkgpt launch: --pp %d does not divide -n %d: give a number of ranks that is a "
                "multiple of --pp\n",
                pp, n);
        return 2;
    }
    if (zero && pp > 1 && n / pp < 2) {
        fprintf(stderr,
                "vkgpt launch: --zero 1 with --pp %d needs -n %d or more: each stage shards "
                "AdamW's moments over its data-parallel ranks (-n / --pp), and it has %d\n",
                pp, 2 * pp, n / pp);
        return 2;
    }
    if (zero && n < 2) {
        fprintf(stderr, "vkgpt launch: --zero 1 needs -n 2 or more: with one rank there is "
                        "nothing to shard the optimizer over\n");
        return 2;
    }
    if (max_restarts > 0 &&
        (!has_flag(argv + sep + 1, "--ckpt-dir") || !has_flag(argv + sep + 1, "--total-batch"))) {
        fprintf(stderr,
                "vkgpt launch: --max-restarts goes on from the newest checkpoint with fewer ranks: "
                "train needs --ckpt-dir (where the checkpoints are) and --total-batch (a batch "
                "that does not depend on the number of ranks)\n");
        return 2;
    }
    int port_given = port != 0, has_resume = has_flag(argv + sep + 1, "--resume");
    if (!port && vkg_comm_pick_port("127.0.0.1", &port) != VKG_OK)
        return vkg_cli_report("launch", VKG_ERR_NETWORK);
    char job[32];
    snprintf(job, sizeof job, "%08lx%08x", (unsigned long)vkg_os_pid() & 0xffffffffu,
             (unsigned)time(NULL));
    /* argv for the ranks: "vkgpt", everything after "--", then --pp S, --zero 1 and --grad-dtype
     * when given. */
    char pp_arg[16];
    snprintf(pp_arg, sizeof pp_arg, "%d", pp);
    char **args = calloc((size_t)(argc - sep + 8), sizeof *args);
    child *cs = calloc((size_t)n, sizeof *cs);
    if (!args || !cs) {
        free(args), free(cs);
        fprintf(stderr, "vkgpt launch: out of memory\n");
        return 1;
    }
    args[0] = "vkgpt";
    for (int i = sep + 1; i < argc; i++)
        args[i - sep] = argv[i];
    int na = argc - sep;
    if (pp)
        args[na] = "--pp", args[na + 1] = pp_arg, na += 2;
    if (zero)
        args[na] = "--zero", args[na + 1] = "1", na += 2;
    if (grad_dtype >= 0)
        args[na] = "--grad-dtype", args[na + 1] = (char *)vkg_cli_grad_dtypes[grad_dtype], na += 2;
    /* each rank's device: the --devices list's entries, cycling */
    char devlist[1024] = "", *rank_dev[MAX_RANKS] = {0};
    if (devices) {
        snprintf(devlist, sizeof devlist, "%s", devices);
        char *tok[MAX_RANKS];
        int count = 0;
        for (char *t = devlist; t && count < MAX_RANKS;) {
            char *comma = strchr(t, ',');
            if (comma)
                *comma = '\0';
            if (*t)
                tok[count++] = t;
            t = comma ? comma + 1 : NULL;
        }
        for (int k = 0; k < n && count; k++)
            rank_dev[k] = tok[k % count];
    }
    vkg_os_on_stop(on_launch_signal);
    vkg_os_ignore_broken_pipe();
    char losses[1024] = "", attempt_job[64];
    int exit_code = 0;
    for (int restarts = 0;; restarts++) {
        snprintf(attempt_job, sizeof attempt_job, "%s%s%d", job, restarts ? "-restart" : "",
                 restarts);
        int failed = -1;
        char lost[128] = "";
        exit_code = run_ranks(cs, n, port, grace, (const char *const *)rank_dev, transport,
                              restarts ? attempt_job : job, args, &failed, lost, sizeof lost);
        if (failed < 0 || exit_code == 0)
            break;
        size_t used = strlen(losses);
        snprintf(losses + used, sizeof losses - used, "%srank %d of %d %s", used ? ", then " : "",
                 failed, n, lost);
        if (restarts >= max_restarts) {
            if (max_restarts > 0)
                fprintf(stderr,
                        "vkgpt launch: giving up after %d restart%s (--max-restarts %d): %s\n",
                        restarts, restarts == 1 ? "" : "s", max_restarts, losses);
            break;
        }
        /* the lost rank's data-parallel replica goes (its whole pipeline, under --pp) */
        int S = pp > 1 ? pp : 1, dp = n / S, gone = failed % dp, m = 0;
        char why[200] = "";
        if (dp - 1 < 1)
            snprintf(why, sizeof why, "no rank would remain");
        else if (S * (dp - 1) < min_ranks)
            snprintf(why, sizeof why, "%d ranks would remain, fewer than --min-ranks %d",
                     S * (dp - 1), min_ranks);
        else if (zero && dp - 1 < 2)
            snprintf(why, sizeof why,
                     "--zero 1 needs 2 or more data-parallel ranks%s and %d would remain",
                     S > 1 ? " per stage" : "", dp - 1);
        if (why[0]) {
            fprintf(stderr, "vkgpt launch: not restarting: %s; lost %s\n", why, losses);
            break;
        }
        for (int k = 0; k < n; k++)
            if (k % dp != gone)
                rank_dev[m++] = rank_dev[k];
        n = m;
        if (!port_given && vkg_comm_pick_port("127.0.0.1", &port) != VKG_OK) {
            exit_code = vkg_cli_report("launch", VKG_ERR_NETWORK);
            break;
        }
        if (!has_resume)
            args[na++] = "--resume", has_resume = 1;
        if (launch_signal) /* asked to stop meanwhile */
            break;
        fprintf(stderr,
                "vkgpt launch: lost %s; restart %d of %d with %d rank%s, from the newest "
                "complete checkpoint (--resume)\n",
                losses, restarts + 1, max_restarts, n, n == 1 ? "" : "s");
    }
    free(args);
    free(cs);
    return exit_code;
}
