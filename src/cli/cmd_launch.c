/* `vkgpt launch -n N -- train ...`: start N local ranks of this very binary with torchrun-style
 * variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) and VKGPT_DEVICE, stream
 * their stdout/stderr line by line with a "[rank k] " prefix, and when a rank fails stop the
 * others (SIGTERM, then SIGKILL after a grace period) and exit non-zero. SIGINT, SIGTERM or
 * SIGUSR1 asks every rank to stop (each saves a checkpoint) and exits as `vkgpt train` does (75, a
 * preemption, to resume; 130 for SIGINT); so does a rank's own notice, agreed by all ranks. Every
 * child is reaped, and every rank gets SIGTERM from the kernel when the launcher dies, however it
 * dies. Also here: the data-parallel flags of `vkgpt train` (vkg_cli_dp_resolve). Not here:
 * multi-host launching (use torchrun-style variables, srun or mpirun; see README). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if !defined(_WIN32)
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

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
    vkg_comm_config *cc = &cfg->comm;
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
        if (cfg->pp > 1 || cfg->zero) {
            fprintf(stderr,
                    "vkgpt train: --rank-batch auto is not supported with %s yet: give a fixed "
                    "--rank-batch list\n",
                    cfg->pp > 1 ? "--pp" : "--zero 1");
            return 2;
        }
        cfg->rank_batch_auto = 1;
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
                    n, dp, cfg->pp > 1 ? " (ranks / --pp)" : "");
            return 2;
        }
        cfg->rank_batch = d->rank_batch_v;
        cfg->rank_batch_count = n;
    }
    if (d->bucket_mb > 0.0f)
        cfg->bucket_bytes = (long long)((double)d->bucket_mb * 1048576.0);
    if (d->no_overlap)
        cfg->bucket_bytes = -1;
    cfg->force_copy_path = !d->zero_copy;
    cfg->grad_dtype = vkg_cli_grad_dtype(d->grad_dtype);
    cfg->lr_scale = (vkg_lr_scale)d->lr_scale;
    cfg->base_batch = d->base_batch;
    return 0;
}

#if defined(_WIN32)
int vkg_cli_launch(int argc, char **argv)
{
    (void)argc, (void)argv;
    fprintf(stderr, "vkgpt launch: not built for Windows yet (the launcher forks and execs its "
                    "ranks; spawning them with CreateProcess and a job object is still to come). "
                    "Start each rank yourself: vkgpt train --world-size N --rank R --master-addr "
                    "127.0.0.1 --master-port P ... (tcp; ipc does not exist on Windows)\n");
    return 2;
}
#else
typedef struct child {
    pid_t pid;
    int fd[2]; /* stdout, stderr pipes (-1 when closed) */
    char buf[2][LINE_MAX_BYTES];
    size_t len[2];
    int done, status;
} child;

static volatile sig_atomic_t launch_signal;

static void on_launch_signal(int sig)
{
    launch_signal = sig;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Write complete lines of child k's stream s with the rank prefix (all of it when flush). */
static void emit(child *c, int k, int s, int flush)
{
    FILE *out = s ? stderr : stdout;
    char *b = c->buf[s];
    size_t start = 0;
    for (size_t i = 0; i < c->len[s]; i++)
        if (b[i] == '\n') {
            fprintf(out, "[rank %d] %.*s\n", k, (int)(i - start), b + start);
            start = i + 1;
        }
    if ((flush || start == 0) && c->len[s] - start > 0 &&
        (flush || c->len[s] == sizeof c->buf[s])) {
        fprintf(out, "[rank %d] %.*s\n", k, (int)(c->len[s] - start), b + start);
        start = c->len[s];
    }
    memmove(b, b + start, c->len[s] - start);
    c->len[s] -= start;
    fflush(out);
}

static void pump(child *cs, int n, int timeout_ms)
{
    struct pollfd pfd[2 * MAX_RANKS];
    int who[2 * MAX_RANKS], np = 0;
    for (int k = 0; k < n; k++)
        for (int s = 0; s < 2; s++)
            if (cs[k].fd[s] >= 0) {
                pfd[np] = (struct pollfd){.fd = cs[k].fd[s], .events = POLLIN};
                who[np++] = k * 2 + s;
            }
    if (np == 0) {
        usleep((useconds_t)timeout_ms * 1000);
        return;
    }
    if (poll(pfd, (nfds_t)np, timeout_ms) <= 0)
        return;
    for (int i = 0; i < np; i++) {
        if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        child *c = &cs[who[i] / 2];
        int s = who[i] % 2;
        ssize_t r = read(c->fd[s], c->buf[s] + c->len[s], sizeof c->buf[s] - c->len[s]);
        if (r > 0) {
            c->len[s] += (size_t)r;
            emit(c, who[i] / 2, s, 0);
        } else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
            emit(c, who[i] / 2, s, 1);
            close(c->fd[s]);
            c->fd[s] = -1;
        }
    }
}

static void describe(int status, char *buf, size_t cap)
{
    if (WIFEXITED(status))
        snprintf(buf, cap, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, cap, "was killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else
        snprintf(buf, cap, "ended with wait status %d", status);
}

/* Failed: killed, or an exit status other than 0 and a preemption's (the ranks agreed on it and
 * saved: every rank exits so; none is to be stopped for it). */
static int failed_status(int status)
{
    return !WIFEXITED(status) ||
           (WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != VKG_CLI_EXIT_PREEMPTED);
}

/* Fork and exec rank k: self train-args with the rank's variables; its output into two pipes.
 * A rank dies with the launcher: if the launcher ends, even by SIGKILL, the kernel sends the rank
 * SIGTERM (which `vkgpt train` takes as a request to stop after the current step, with a
 * checkpoint), so no rank goes on training unwatched. */
static int spawn(child *c, int k, int n, int port, const char *device, const char *transport,
                 const char *job, char **args)
{
    int po[2], pe[2];
    if (pipe(po) != 0 || pipe(pe) != 0) {
        fprintf(stderr, "vkgpt launch: pipe: %s\n", strerror(errno));
        return 1;
    }
    /* The read ends are the launcher's alone: a later rank holding one open would keep this
     * rank's output pipe alive, and the rank would block on it once the launcher is gone. */
    fcntl(po[0], F_SETFD, FD_CLOEXEC), fcntl(pe[0], F_SETFD, FD_CLOEXEC);
    pid_t launcher = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "vkgpt launch: fork: %s\n", strerror(errno));
        return 1;
    }
    if (pid == 0) {
        char v[64];
        /* The launcher may have died before the signal was asked for: then nobody would send it. */
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != launcher)
            _exit(128 + SIGTERM);
        dup2(po[1], STDOUT_FILENO), dup2(pe[1], STDERR_FILENO);
        close(po[0]), close(po[1]), close(pe[0]), close(pe[1]);
        snprintf(v, sizeof v, "%d", k), setenv("RANK", v, 1), setenv("LOCAL_RANK", v, 1);
        snprintf(v, sizeof v, "%d", n), setenv("WORLD_SIZE", v, 1);
        setenv("LOCAL_WORLD_SIZE", v, 1);
        snprintf(v, sizeof v, "%d", port), setenv("MASTER_PORT", v, 1);
        setenv("MASTER_ADDR", "127.0.0.1", 1);
        setenv("VKG_JOB_ID", job, 1);
        setenv("VKG_COMM_TRANSPORT", transport, 1);
        if (device)
            setenv("VKGPT_DEVICE", device, 1);
        signal(SIGINT, SIG_DFL), signal(SIGTERM, SIG_DFL);
        execv("/proc/self/exe", args);
        fprintf(stderr, "vkgpt launch: cannot run /proc/self/exe: %s\n", strerror(errno));
        _exit(127);
    }
    close(po[1]), close(pe[1]);
    c->pid = pid, c->fd[0] = po[0], c->fd[1] = pe[0];
    return 0;
}

static void signal_all(child *cs, int n, int sig)
{
    for (int k = 0; k < n; k++)
        if (cs[k].pid > 0 && !cs[k].done)
            kill(cs[k].pid, sig);
}

/* One run of n ranks until all have ended: spawn them (rank k on device rank_dev[k], NULL: the
 * default), stream their output, stop the others when one fails, forward a signal. Returns the
 * exit status `launch` would end with; *failed_out: the rank that failed first (-1: none, or the
 * run was stopped by a signal), with what happened to it in lost. */
static int run_ranks(child *cs, int n, int port, int grace, const char *const *rank_dev,
                     const char *transport, const char *job, char **args, int *failed_out,
                     char *lost, size_t lost_cap)
{
    memset(cs, 0, (size_t)n * sizeof *cs);
    for (int k = 0; k < n; k++)
        cs[k].fd[0] = cs[k].fd[1] = -1;
    fprintf(stderr, "vkgpt launch: %d ranks, %s rendezvous at 127.0.0.1:%d\n", n, transport, port);
    int failed = -1, running = 0, exit_code = 0;
    double kill_at = 0.0;
    for (int k = 0; k < n; k++) {
        if (spawn(&cs[k], k, n, port, rank_dev[k], transport, job, args) != 0) {
            failed = k, exit_code = 1, kill_at = now_s() + grace;
            signal_all(cs, k, SIGTERM);
            break;
        }
        running++;
        fprintf(stderr, "vkgpt launch: rank %d is pid %d\n", k, (int)cs[k].pid);
    }
    int forwarded = 0;
    while (running > 0) {
        pump(cs, n, 100);
        if (launch_signal && !forwarded) {
            fprintf(stderr, "vkgpt launch: signal %d: asking every rank to stop\n",
                    (int)launch_signal);
            signal_all(cs, n, SIGTERM);
            forwarded = 1;
            kill_at = now_s() + grace;
        }
        for (int k = 0; k < n; k++) {
            int status;
            if (cs[k].pid <= 0 || cs[k].done || waitpid(cs[k].pid, &status, WNOHANG) != cs[k].pid)
                continue;
            cs[k].done = 1, cs[k].status = status;
            running--;
            if (failed_status(status) && failed < 0 && !forwarded) {
                char why[128];
                describe(status, why, sizeof why);
                fprintf(stderr,
                        "vkgpt launch: rank %d %s; stopping the other ranks (SIGTERM, "
                        "SIGKILL after %d s)\n",
                        k, why, grace);
                failed = k;
                exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
                signal_all(cs, n, SIGTERM);
                kill_at = now_s() + grace;
            }
        }
        if (kill_at > 0.0 && now_s() > kill_at) {
            fprintf(stderr, "vkgpt launch: ranks still running after %d s: SIGKILL\n", grace);
            signal_all(cs, n, SIGKILL);
            kill_at = 0.0;
        }
    }
    for (int open_fds = 1; open_fds;) { /* the last of their output */
        open_fds = 0;
        for (int k = 0; k < n; k++)
            open_fds |= cs[k].fd[0] >= 0 || cs[k].fd[1] >= 0;
        if (open_fds)
            pump(cs, n, 100);
    }
    for (int k = 0; k < n && failed >= 0; k++)
        if (cs[k].pid > 0 && k != failed) {
            char why[128];
            describe(cs[k].status, why, sizeof why);
            fprintf(stderr, "vkgpt launch: rank %d %s\n", k, why);
        }
    *failed_out = forwarded ? -1 : failed; /* a stop asked for is not a loss to restart from */
    if (failed >= 0)
        describe(cs[failed].status, lost, lost_cap);
    if (failed < 0 && forwarded) /* stopped, after the ranks saved: as `vkgpt train` exits */
        exit_code = vkg_cli_stop_status((int)launch_signal);
    if (failed < 0)
        for (int k = 0; k < n; k++) {
            if (failed_status(cs[k].status) && !exit_code)
                exit_code = 1;
            if (!exit_code && WIFEXITED(cs[k].status) &&
                WEXITSTATUS(cs[k].status) == VKG_CLI_EXIT_PREEMPTED)
                exit_code = VKG_CLI_EXIT_PREEMPTED; /* a rank's notice: all stopped and saved */
        }
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
    snprintf(job, sizeof job, "%08x%08x", (unsigned)getpid(), (unsigned)time(NULL));
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
        char *save = NULL, *tok[MAX_RANKS];
        int count = 0;
        for (char *t = strtok_r(devlist, ",", &save); t && count < MAX_RANKS;
             t = strtok_r(NULL, ",", &save))
            tok[count++] = t;
        for (int k = 0; k < n && count; k++)
            rank_dev[k] = tok[k % count];
    }
    struct sigaction sa = {0};
    sa.sa_handler = on_launch_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
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
#endif
