/* Launch N ranks as threads or forked processes for the transport tests; collect their reports;
 * kill and reap whatever overruns. Children never return into cmocka: they _exit. Windows has
 * threads only: ranks asked for as processes run as threads there, over tcp where ipc was asked
 * for (Windows' libzmq has no ipc://), each said on stderr; fake hosts are skipped. */
#include "test_comm_harness.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "os/clock.h"
#include "os/file.h"

#if !defined(_WIN32)
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#define VKG_TH_PROCESSES 1
#endif

typedef struct record {
    int create_status;
    int body_rc;
    double t_done;
    char report[VKG_TH_REPORT];
} record;

typedef struct thread_arg {
    vkg_th_job *job;
    int rank;
} thread_arg;

struct vkg_th_job {
    int n;
    vkg_th_opts o;
    vkg_th_body body;
    void *arg;
    vkg_comm_config base;
    char ipc_dir[64];
    double deadline;
    /* processes */
    pid_t pid[VKG_TH_MAX_RANKS];
    int fd[VKG_TH_MAX_RANKS];
    unsigned char buf[VKG_TH_MAX_RANKS][sizeof(record) + 1];
    size_t have[VKG_TH_MAX_RANKS];
    int ready[VKG_TH_MAX_RANKS];
    /* threads */
    vkg_comm_ctx_t *ctx;
    pthread_t th[VKG_TH_MAX_RANKS];
    thread_arg targ[VKG_TH_MAX_RANKS];
    vkg_th_result tres[VKG_TH_MAX_RANKS];
};

double vkg_th_now(void)
{
    return vkg_os_now_ms() * 1e-3;
}

uint64_t vkg_th_digest(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

void vkg_th_report(vkg_th_rank *r, const char *fmt, ...)
{
    if (r->report_len >= sizeof r->report - 1)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(r->report + r->report_len, sizeof r->report - r->report_len, fmt, ap);
    va_end(ap);
    if (n > 0)
        r->report_len += (size_t)n;
    if (r->report_len > sizeof r->report - 1)
        r->report_len = sizeof r->report - 1;
}

static void tell_ready(int fd);

void vkg_th_ready(vkg_th_rank *r)
{
    if (r->fd >= 0)
        tell_ready(r->fd);
}

static void run_rank(vkg_th_job *j, int rank, int fd, vkg_comm_ctx_t *ctx, record *out)
{
    vkg_comm_config cfg = j->base;
    cfg.rank = rank;
    cfg.ctx = ctx;
    vkg_th_rank r;
    memset(&r, 0, sizeof r);
    r.rank = rank;
    r.size = j->n;
    r.fd = fd;
    memset(out, 0, sizeof *out);
    out->body_rc = -1;
    if (j->o.before_create)
        j->o.before_create(rank);
    out->create_status = vkg_comm_create(&cfg, &r.comm);
    if (out->create_status != VKG_OK) {
        snprintf(out->report, sizeof out->report, "create: %s: %s",
                 vkg_status_name(out->create_status), vkg_error_message());
        out->t_done = vkg_th_now();
        return;
    }
    out->body_rc = j->body(&r, j->arg);
    out->t_done = vkg_th_now();
    if (r.comm)
        vkg_comm_destroy(&r.comm);
    memcpy(out->report, r.report, sizeof out->report);
    out->report[sizeof out->report - 1] = '\0';
}

static void *thread_main(void *p)
{
    thread_arg *a = p;
    record rec;
    run_rank(a->job, a->rank, -1, a->job->ctx, &rec);
    vkg_th_result *res = &a->job->tres[a->rank];
    res->create_status = rec.create_status;
    res->body_rc = rec.body_rc;
    res->t_done = rec.t_done;
    res->reported = 1;
    memcpy(res->report, rec.report, sizeof res->report);
    return NULL;
}

/* ---- ranks as forked processes (POSIX) ---- */
#if defined(VKG_TH_PROCESSES)

static void adapt(vkg_th_opts *o)
{
    (void)o;
}

static void tell_ready(int fd)
{
    ssize_t w = write(fd, "R", 1);
    (void)w;
}

/* Join th, unless it is still running at until (vkg_th_now's clock): nonzero then. */
static int join_by(pthread_t th, double until)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double left = until - vkg_th_now();
    ts.tv_sec += left > 0 ? (time_t)left : 0;
    return pthread_timedjoin_np(th, NULL, &ts);
}

static void make_ipc_dir(vkg_th_job *j)
{
    snprintf(j->ipc_dir, sizeof j->ipc_dir, "/tmp/vkgt-XXXXXX");
    if (!mkdtemp(j->ipc_dir))
        abort();
    snprintf(j->base.ipc_dir, sizeof j->base.ipc_dir, "%s", j->ipc_dir);
}

static void start_processes(vkg_th_job *j)
{
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < j->n; r++) {
        int p[2];
        if (pipe(p))
            abort();
        pid_t pid = fork();
        if (pid < 0)
            abort();
        if (pid == 0) {
            close(p[0]);
            for (int q = 0; q < r; q++)
                close(j->fd[q]);
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            alarm((unsigned)j->o.wall_s + 5);
            char tag[16] = "";
            if (j->o.hosts)
                snprintf(tag, sizeof tag, "h%c", j->o.hosts[r]);
            else if (j->o.ranks_per_host)
                snprintf(tag, sizeof tag, "h%d", r / j->o.ranks_per_host);
            if (tag[0])
                setenv("VKG_TEST_HOST_TAG", tag, 1);
            record rec;
            run_rank(j, r, p[1], NULL, &rec);
            unsigned char out[sizeof rec + 1];
            out[0] = 'D';
            memcpy(out + 1, &rec, sizeof rec);
            size_t off = 0;
            while (off < sizeof out) {
                ssize_t w = write(p[1], out + off, sizeof out - off);
                if (w <= 0)
                    break;
                off += (size_t)w;
            }
            _exit(0);
        }
        close(p[1]);
        fcntl(p[0], F_SETFL, O_NONBLOCK);
        j->pid[r] = pid;
        j->fd[r] = p[0];
    }
}

pid_t vkg_th_pid(vkg_th_job *j, int rank)
{
    return j->pid[rank];
}

/* Read what is available from rank r's pipe; returns 1 once its record is complete, -1 on EOF
 * without a record. */
static int pump(vkg_th_job *j, int r)
{
    for (;;) {
        if (j->have[r] == 0) {
            unsigned char ch;
            ssize_t n = read(j->fd[r], &ch, 1);
            if (n == 0)
                return -1;
            if (n < 0)
                return errno == EAGAIN || errno == EINTR ? 0 : -1;
            if (ch == 'R') {
                j->ready[r] = 1;
                continue;
            }
            j->buf[r][0] = ch;
            j->have[r] = 1;
        }
        size_t want = sizeof(record) + 1 - j->have[r];
        if (!want)
            return 1;
        ssize_t n = read(j->fd[r], j->buf[r] + j->have[r], want);
        if (n == 0)
            return -1;
        if (n < 0)
            return errno == EAGAIN || errno == EINTR ? 0 : -1;
        j->have[r] += (size_t)n;
        if (j->have[r] == sizeof(record) + 1)
            return 1;
    }
}

/* Poll the pipes of ranks not in `done` until cond says stop or the deadline. */
static void poll_pipes(vkg_th_job *j, int *state, double until, int want_ready)
{
    for (;;) {
        struct pollfd pf[VKG_TH_MAX_RANKS];
        int idx[VKG_TH_MAX_RANKS], n = 0;
        for (int r = 0; r < j->n; r++) {
            if (state[r] != 0)
                continue;
            if (want_ready && j->ready[r])
                continue;
            pf[n] = (struct pollfd){j->fd[r], POLLIN, 0};
            idx[n++] = r;
        }
        double now = vkg_th_now();
        if (!n || now >= until)
            return;
        int rc = poll(pf, (nfds_t)n, (int)((until - now) * 1000) + 1);
        if (rc <= 0)
            continue;
        for (int k = 0; k < n; k++)
            if (pf[k].revents)
                state[idx[k]] = pump(j, idx[k]) == 0 ? 0 : 1;
    }
}

int vkg_th_wait_ready(vkg_th_job *j, double max_s)
{
    if (!j->o.processes)
        return 0;
    int state[VKG_TH_MAX_RANKS] = {0};
    poll_pipes(j, state, vkg_th_now() + max_s, 1);
    for (int r = 0; r < j->n; r++)
        if (!j->ready[r])
            return -1;
    return 0;
}

static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char path[512];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

static void reap(vkg_th_job *j, int r, vkg_th_result *res, double grace_until)
{
    int status = 0;
    pid_t w = 0;
    while ((w = waitpid(j->pid[r], &status, WNOHANG)) == 0 && vkg_th_now() < grace_until)
        usleep(2000);
    if (w == 0) {
        kill(j->pid[r], SIGKILL);
        w = waitpid(j->pid[r], &status, 0);
    }
    res->exit_status = status;
    res->signaled = w > 0 && WIFSIGNALED(status);
}

static void finish_processes(vkg_th_job *j, vkg_th_result *res, unsigned skip)
{
    int state[VKG_TH_MAX_RANKS] = {0};
    for (int r = 0; r < j->n; r++)
        state[r] = (skip >> r) & 1u;
    poll_pipes(j, state, j->deadline, 0);
    for (int r = 0; r < j->n; r++) /* frozen or dead on purpose: now they go */
        if ((skip >> r) & 1u)
            kill(j->pid[r], SIGKILL);
    double grace = vkg_th_now() + 3;
    for (int r = 0; r < j->n; r++) {
        res[r].body_rc = -1;
        if (j->have[r] == sizeof(record) + 1 && j->buf[r][0] == 'D') {
            record rec;
            memcpy(&rec, j->buf[r] + 1, sizeof rec);
            res[r].create_status = rec.create_status;
            res[r].body_rc = rec.body_rc;
            res[r].t_done = rec.t_done;
            res[r].reported = 1;
            memcpy(res[r].report, rec.report, sizeof res[r].report);
        }
        reap(j, r, &res[r], grace);
        close(j->fd[r]);
    }
}

int vkg_th_fault(int n, const vkg_th_opts *o, vkg_th_body body, void *arg, int victim, int sig,
                 double bound_s, const char *label)
{
    vkg_th_job *j = vkg_th_start(n, o, body, arg);
    int ready = vkg_th_wait_ready(j, 20) == 0;
    if (ready)
        usleep(100000);
    else
        fprintf(stderr, "  %s: the ranks did not get ready\n", label);
    double t0 = vkg_th_now();
    kill(vkg_th_pid(j, victim), sig);
    vkg_th_result res[VKG_TH_MAX_RANKS];
    vkg_th_finish(j, res, 1u << victim);
    char name[32];
    snprintf(name, sizeof name, "rank %d", victim);
    int ok = ready;
    double worst = 0;
    for (int q = 0; q < n; q++) {
        if (q == victim)
            continue;
        double dt = res[q].t_done - t0;
        worst = dt > worst ? dt : worst;
        ok &= res[q].reported && res[q].body_rc == 1 && strstr(res[q].report, name) != NULL &&
              dt <= bound_s;
    }
    fprintf(stderr, "  %s, %s rank %d: slowest survivor failed after %.2f s (bound %.1f)\n", label,
            sig == SIGKILL   ? "SIGKILL"
            : sig == SIGSTOP ? "SIGSTOP"
                             : "signal",
            victim, worst, bound_s);
    if (!ok || getenv("VKG_TEST_VERBOSE"))
        vkg_th_dump(res, n);
    return ok;
}
#else /* Windows: threads only */

/* Ranks as threads, and tcp on the loopback interface for ipc, each said once per test
 * program; fake hosts (an environment variable per process) are skipped. */
static void adapt(vkg_th_opts *o)
{
    static int told_processes, told_ipc;
    if (o->ranks_per_host || o->hosts) {
        fprintf(stderr, "  skipped here: fake hosts (one environment per forked process)\n");
        skip();
    }
    if (o->processes && !told_processes++)
        fprintf(stderr, "  note: ranks run as threads here (the harness forks processes on POSIX "
                        "only)\n");
    if (o->transport == VKG_COMM_IPC && !told_ipc++)
        fprintf(stderr, "  note: tcp on 127.0.0.1 stands in for ipc (Windows' libzmq has no "
                        "ipc://)\n");
    o->processes = 0;
    if (o->transport == VKG_COMM_IPC)
        o->transport = VKG_COMM_TCP;
}

static void tell_ready(int fd)
{
    (void)fd;
}

/* winpthreads has no timed join: ctest's timeout bounds a thread that never ends. */
static int join_by(pthread_t th, double until)
{
    (void)until;
    return pthread_join(th, NULL);
}

static void make_ipc_dir(vkg_th_job *j)
{
    (void)j;
}

static void start_processes(vkg_th_job *j)
{
    (void)j;
}

static void finish_processes(vkg_th_job *j, vkg_th_result *res, unsigned skip)
{
    (void)j, (void)res, (void)skip;
}

static void remove_dir(const char *dir)
{
    (void)dir;
}

int vkg_th_wait_ready(vkg_th_job *j, double max_s)
{
    (void)j, (void)max_s;
    return 0;
}
#endif
vkg_th_job *vkg_th_start(int n, const vkg_th_opts *opts, vkg_th_body body, void *arg)
{
    static unsigned counter;
    vkg_th_opts adapted = *opts;
    adapt(&adapted);
    const vkg_th_opts *o = &adapted;
    vkg_th_job *j = calloc(1, sizeof *j);
    if (!j || n < 1 || n > VKG_TH_MAX_RANKS)
        abort();
    j->n = n;
    j->o = *o;
    j->body = body;
    j->arg = arg;
    if (j->o.wall_s <= 0)
        j->o.wall_s = 90;
    j->deadline = vkg_th_now() + j->o.wall_s;
    vkg_comm_config *c = &j->base;
    vkg_comm_config_default(c);
    c->world_size = n;
    c->transport = o->transport;
    c->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 30000;
    c->segment_bytes = o->segment_bytes;
    c->small_bytes = o->small_bytes;
    c->window = o->window;
    c->ring_min_ranks = o->ring_min_ranks;
    c->shm = o->shm;
    c->shm_chunk_bytes = o->shm_chunk_bytes;
    c->job_id = o->job_id ? o->job_id
                          : ((uint64_t)vkg_os_pid() << 24) ^ ((uint64_t)++counter << 4) ^
                                (uint64_t)time(NULL) << 40;
    if (o->curve_sec[0]) {
        snprintf(c->curve_public, sizeof c->curve_public, "%.40s", o->curve_pub);
        snprintf(c->curve_secret, sizeof c->curve_secret, "%.40s", o->curve_sec);
    }
    if (o->transport == VKG_COMM_TCP && vkg_comm_pick_port("127.0.0.1", &c->master_port) != VKG_OK)
        abort();
    if (o->transport == VKG_COMM_IPC)
        make_ipc_dir(j);
    for (int r = 0; r < n; r++)
        j->fd[r] = -1;
    if (!o->processes) {
        if (o->ranks_per_host || o->hosts) /* the host tag is an environment variable */
            abort();
        if (vkg_comm_ctx_create(&j->ctx) != VKG_OK)
            abort();
        for (int r = 0; r < n; r++) {
            j->targ[r] = (thread_arg){j, r};
            if (pthread_create(&j->th[r], NULL, thread_main, &j->targ[r]))
                abort();
        }
        return j;
    }
    start_processes(j);
    return j;
}

void vkg_th_finish(vkg_th_job *j, vkg_th_result *res, unsigned skip)
{
    memset(res, 0, sizeof *res * (size_t)j->n);
    if (!j->o.processes) {
        for (int r = 0; r < j->n; r++) {
            if (join_by(j->th[r], j->deadline + 5)) {
                fprintf(stderr, "rank %d thread did not finish within the wall limit\n", r);
                abort();
            }
            res[r] = j->tres[r];
        }
        vkg_comm_ctx_destroy(&j->ctx);
    } else {
        finish_processes(j, res, skip);
    }
    if (j->ipc_dir[0])
        remove_dir(j->ipc_dir);
    free(j);
}

void vkg_th_run(int n, const vkg_th_opts *o, vkg_th_body body, void *arg, vkg_th_result *res)
{
    vkg_th_finish(vkg_th_start(n, o, body, arg), res, 0);
}

int vkg_th_run_ok(int n, const vkg_th_opts *o, vkg_th_body body, void *arg)
{
    vkg_th_result res[VKG_TH_MAX_RANKS];
    vkg_th_run(n, o, body, arg, res);
    int ok = 1;
    for (int r = 0; r < n; r++)
        ok &= res[r].create_status == VKG_OK && res[r].body_rc == 0;
    if (!ok)
        vkg_th_dump(res, n);
    return ok;
}

void vkg_th_dump(const vkg_th_result *res, int n)
{
    for (int r = 0; r < n; r++)
        fprintf(stderr, "  rank %d: create=%d body=%d reported=%d signaled=%d t=%.3f: %s\n", r,
                res[r].create_status, res[r].body_rc, res[r].reported, res[r].signaled,
                res[r].t_done, res[r].report);
}

int vkg_th_agree(const vkg_th_result *res, int n, size_t prefix)
{
    int ok = 1;
    for (int q = 0; q < n; q++) {
        ok &= res[q].create_status == VKG_OK && res[q].body_rc == 0;
        ok &= strncmp(res[q].report, res[0].report, prefix) == 0;
    }
    if (!ok || getenv("VKG_TEST_VERBOSE"))
        vkg_th_dump(res, n);
    return ok;
}

int vkg_th_allreduce_until_error(vkg_th_rank *r, size_t count,
                                 int (*path_ok)(vkg_th_rank *r, void *arg), void *arg)
{
    float *x = malloc(count * sizeof *x);
    if (!x)
        return 1;
    for (size_t i = 0; i < count; i++)
        x[i] = (float)(i % 7);
    vkg_status st = vkg_comm_allreduce(r->comm, x, x, count, VKG_COMM_F32, VKG_COMM_AVG);
    if (st == VKG_OK && !path_ok(r, arg))
        st = VKG_ERR_STATE;
    vkg_th_ready(r);
    for (long it = 0; st == VKG_OK && it < 1000000; it++)
        st = vkg_comm_allreduce(r->comm, x, x, count, VKG_COMM_F32, VKG_COMM_AVG);
    vkg_th_report(r, "%s: %s", vkg_status_name(st), vkg_error_message());
    free(x);
    return st == VKG_OK ? 0 : 1;
}

uint32_t vkg_th_mix(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    return x ^ (x >> 16);
}

float vkg_th_int_value(int r, size_t i)
{
    return (float)((int)(vkg_th_mix((uint32_t)i * 31u + (uint32_t)r) % 33u) - 16) / 2.0f;
}

float vkg_th_odd_value(int r, size_t i, unsigned spread)
{
    uint32_t h = vkg_th_mix((uint32_t)i ^ ((uint32_t)r << 24) ^ 0x9e3779b9u);
    float m = (float)(h & 0xffffff) / 16777216.0f - 0.5f;
    return m * (float)(1u << ((h >> 24) % spread));
}

uint16_t vkg_th_to16(float f, vkg_comm_dtype dt)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if (dt == VKG_COMM_BF16)
        return (uint16_t)(u >> 16);
    int e = (int)((u >> 23) & 0xff) - 127 + 15;
    uint16_t s = (uint16_t)((u >> 16) & 0x8000);
    if ((u & 0x7fffffff) == 0 || e <= 0)
        return s;
    if (e >= 31)
        return (uint16_t)(s | 0x7bff);
    return (uint16_t)(s | (e << 10) | ((u >> 13) & 0x3ff));
}
