/* Child processes, POSIX (see os/spawn.h; what every system does alike is in os/spawn.c): fork
 * and exec of this program, pipes read through poll, waitpid, kill. */
#define _POSIX_C_SOURCE 200809L
#include "os/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/prctl.h>
#elif defined(__APPLE__)
#include <mach-o/dyld.h>
#endif

#include "os/spawn_impl.h"

#define LIFELINE_ENV "VKG_OS_LIFELINE_FD" /* see vkg_os_on_stop in proc.c */

struct vkg_os_child {
    vkg_os__child_base base; /* first (os/spawn_impl.h) */
    pid_t pid;
    int fd[2];    /* standard output and error (-1 once ended) */
    int lifeline; /* the write end the child watches (-1 on Linux and once ended) */
};

int vkg_os__self_path(char *path, size_t cap, char *err, size_t errcap)
{
#if defined(__linux__)
    snprintf(path, cap, "/proc/self/exe");
    int e = 0;
#elif defined(__APPLE__)
    uint32_t size = (uint32_t)cap;
    int e = _NSGetExecutablePath(path, &size) == 0 ? 0 : ENAMETOOLONG;
#else
    (void)path, (void)cap;
    int e = ENOSYS;
#endif
    if (e)
        snprintf(err, errcap, "cannot find this program's path: %s", strerror(e));
    return e;
}

int vkg_os__spawn(const char *path, char *const *args, const char *const *env, vkg_os_child **out,
                  char *err, size_t cap)
{
    int e = 0;
    vkg_os_child *c = calloc(1, sizeof *c);
    int po[2] = {-1, -1}, pe[2] = {-1, -1}, pl[2] = {-1, -1};
    if (!c) {
        snprintf(err, cap, "out of memory");
        return ENOMEM;
    }
    if (pipe(po) != 0 || pipe(pe) != 0) {
        e = errno;
        snprintf(err, cap, "pipe: %s", strerror(e));
        goto fail;
    }
#if !defined(__linux__)
    if (pipe(pl) != 0) {
        e = errno;
        snprintf(err, cap, "pipe: %s", strerror(e));
        goto fail;
    }
    fcntl(pl[1], F_SETFD, FD_CLOEXEC);
#endif
    /* The read ends are this process's alone: a later child holding one open would keep this
     * child's output pipe alive, and the child would block on it once this process is gone. */
    fcntl(po[0], F_SETFD, FD_CLOEXEC), fcntl(pe[0], F_SETFD, FD_CLOEXEC);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        e = errno;
        snprintf(err, cap, "fork: %s", strerror(e));
        goto fail;
    }
    if (pid == 0) {
#if defined(__linux__)
        /* The parent may have died before the signal was asked for: then nobody would send it. */
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent)
            _exit(128 + SIGTERM);
#else
        char fdv[16];
        snprintf(fdv, sizeof fdv, "%d", pl[0]);
        setenv(LIFELINE_ENV, fdv, 1);
        if (getppid() != parent)
            _exit(128 + SIGTERM);
#endif
        dup2(po[1], STDOUT_FILENO), dup2(pe[1], STDERR_FILENO);
        close(po[0]), close(po[1]), close(pe[0]), close(pe[1]);
        for (int i = 0; env && env[i]; i++) {
            const char *eq = strchr(env[i], '=');
            char name[256];
            if (!eq || (size_t)(eq - env[i]) >= sizeof name)
                continue;
            memcpy(name, env[i], (size_t)(eq - env[i]));
            name[eq - env[i]] = '\0';
            setenv(name, eq + 1, 1);
        }
        /* SIGINT and SIGTERM as by default (the exec keeps an ignored signal ignored); SIGPIPE as
         * the parent has it: ignored by vkg_os_ignore_broken_pipe, a child whose output reader is
         * gone gets EPIPE and goes on to stop as it was asked, instead of dying silently. */
        signal(SIGINT, SIG_DFL), signal(SIGTERM, SIG_DFL);
        execv(path, args);
        fprintf(stderr, "cannot run %s: %s\n", path, strerror(errno));
        _exit(127);
    }
    close(po[1]), close(pe[1]);
    if (pl[0] >= 0)
        close(pl[0]);
    c->base.id = (long)pid;
    c->pid = pid, c->fd[0] = po[0], c->fd[1] = pe[0], c->lifeline = pl[1];
    *out = c;
    return 0;
fail:
    for (int i = 0; i < 2; i++) {
        if (po[i] >= 0)
            close(po[i]);
        if (pe[i] >= 0)
            close(pe[i]);
        if (pl[i] >= 0)
            close(pl[i]);
    }
    free(c);
    return e;
}

int vkg_os_children_pump(vkg_os_child *const *cs, int n, int timeout_ms,
                         void (*fn)(void *ctx, int k, int stream, const char *data, size_t len),
                         void *ctx)
{
    struct pollfd *pfd = calloc((size_t)n * 2 + 1, sizeof *pfd);
    int *who = calloc((size_t)n * 2 + 1, sizeof *who), np = 0;
    if (!pfd || !who) {
        free(pfd), free(who);
        return -1;
    }
    for (int k = 0; k < n; k++)
        for (int s = 0; cs[k] && s < 2; s++)
            if (cs[k]->fd[s] >= 0) {
                pfd[np] = (struct pollfd){.fd = cs[k]->fd[s], .events = POLLIN};
                who[np++] = k * 2 + s;
            }
    int open_streams = np;
    if (np == 0) {
        struct timespec ts = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    } else if (poll(pfd, (nfds_t)np, timeout_ms) > 0) {
        for (int i = 0; i < np; i++) {
            if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            vkg_os_child *c = cs[who[i] / 2];
            int s = who[i] % 2;
            char buf[8192];
            ssize_t r = read(c->fd[s], buf, sizeof buf);
            if (r > 0) {
                fn(ctx, who[i] / 2, s, buf, (size_t)r);
            } else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
                close(c->fd[s]);
                c->fd[s] = -1;
                open_streams--;
                fn(ctx, who[i] / 2, s, NULL, 0);
            }
        }
    }
    free(pfd), free(who);
    return open_streams;
}

int vkg_os__child_reap(vkg_os_child *c, int wait, vkg_os_exit *how)
{
    int status;
    pid_t r;
    while ((r = waitpid(c->pid, &status, wait ? 0 : WNOHANG)) < 0 && errno == EINTR) {
    }
    if (r != c->pid)
        return 0;
    how->signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    how->code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + how->signal;
    if (c->lifeline >= 0)
        close(c->lifeline), c->lifeline = -1;
    return 1;
}

int vkg_os__child_frozen(vkg_os_child *c)
{
#if defined(__linux__)
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)c->pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *end = strrchr(buf, ')'); /* "pid (comm) S ...": comm may hold anything */
    return end && end[1] == ' ' && (end[2] == 'T' || end[2] == 't');
#else
    (void)c;
    return 0;
#endif
}

void vkg_os__child_signal(vkg_os_child *c, int now)
{
    kill(c->pid, now ? SIGKILL : SIGTERM);
}

void vkg_os__child_release(vkg_os_child *c)
{
    for (int s = 0; s < 2; s++)
        if (c->fd[s] >= 0)
            close(c->fd[s]);
    if (c->lifeline >= 0)
        close(c->lifeline);
    free(c);
}

const char *vkg_os__signal_name(int sig)
{
    return sig == SIGKILL   ? "SIGKILL"
           : sig == SIGTERM ? "SIGTERM"
           : sig == SIGINT  ? "SIGINT"
           : sig == SIGSEGV ? "SIGSEGV"
           : sig == SIGABRT ? "SIGABRT"
           : sig == SIGBUS  ? "SIGBUS"
           : sig == SIGFPE  ? "SIGFPE"
           : sig == SIGILL  ? "SIGILL"
                            : "a signal";
}
