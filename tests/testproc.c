/* Child processes of the vkgpt binary and temporary folders for the end-to-end tests (see
 * testproc.h). It fails the calling cmocka test on what it cannot do; it checks no output. */
#include "testproc.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef VKGPT_BIN
#error "VKGPT_BIN (the path of the vkgpt binary) must be defined by the build"
#endif

double vkg_test_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void vkg_test_proc_start(vkg_test_proc *p, const char *const *args, const vkg_test_proc_opts *opts)
{
    static const vkg_test_proc_opts none = {0};
    if (!opts)
        opts = &none;
    const char *argv[64] = {VKGPT_BIN};
    int n = 1;
    for (; args[n - 1]; n++) {
        assert_true(n < 63);
        argv[n] = args[n - 1];
    }
    argv[n] = NULL;
    printf("$ vkgpt");
    for (int i = 1; i < n; i++)
        printf(" %s", argv[i]);
    printf("\n");
    fflush(stdout);
    int po[2], pe[2] = {-1, -1};
    assert_int_equal(pipe(po), 0);
    if (!opts->merge_stderr)
        assert_int_equal(pipe(pe), 0);
    memset(p, 0, sizeof *p);
    p->pid = fork();
    assert_true(p->pid >= 0);
    if (p->pid == 0) {
        if (opts->address_space) {
            struct rlimit rl = {opts->address_space, opts->address_space};
            setrlimit(RLIMIT_AS, &rl);
        }
        for (int i = 0; opts->env && opts->env[i]; i++)
            putenv((char *)opts->env[i]);
        dup2(po[1], STDOUT_FILENO);
        dup2(opts->merge_stderr ? po[1] : pe[1], STDERR_FILENO);
        close(po[0]), close(po[1]);
        if (!opts->merge_stderr)
            close(pe[0]), close(pe[1]);
        execv(VKGPT_BIN, (char *const *)argv);
        _exit(127);
    }
    close(po[1]);
    if (!opts->merge_stderr)
        close(pe[1]);
    p->fd[0] = po[0], p->fd[1] = pe[0];
    for (int i = 0; i < 2; i++) {
        if (p->fd[i] >= 0)
            fcntl(p->fd[i], F_SETFL, O_NONBLOCK);
        p->buf[i] = calloc(1, 1);
        assert_non_null(p->buf[i]);
    }
}

static void reap(vkg_test_proc *p, int options)
{
    int st;
    pid_t r;
    do
        r = waitpid(p->pid, &st, options);
    while (r < 0 && errno == EINTR);
    if (r != p->pid)
        return;
    p->done = 1;
    p->wstatus = st;
    p->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void close_pipes(vkg_test_proc *p)
{
    for (int i = 0; i < 2; i++)
        if (p->fd[i] >= 0)
            close(p->fd[i]), p->fd[i] = -1;
}

int vkg_test_proc_pump(vkg_test_proc *p, double wait_s, const char *until)
{
    double end = vkg_test_now() + wait_s;
    while (p->fd[0] >= 0 || p->fd[1] >= 0) {
        if (until && strstr(p->buf[0], until))
            return 1;
        double left = end - vkg_test_now();
        struct pollfd fds[2] = {{.fd = p->fd[0], .events = POLLIN},
                                {.fd = p->fd[1], .events = POLLIN}};
        int rc = poll(fds, 2, left > 0 ? (int)(left * 1000) + 1 : 0);
        if (rc < 0 && errno == EINTR)
            continue;
        assert_true(rc >= 0);
        if (rc == 0)
            break; /* nothing more within wait_s */
        for (int i = 0; i < 2; i++) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            char chunk[4096];
            ssize_t got = read(fds[i].fd, chunk, sizeof chunk);
            if (got < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            if (got <= 0) {
                close(fds[i].fd);
                p->fd[i] = -1;
                continue;
            }
            char *nb = realloc(p->buf[i], p->len[i] + (size_t)got + 1);
            assert_non_null(nb);
            memcpy(nb + p->len[i], chunk, (size_t)got);
            p->len[i] += (size_t)got;
            nb[p->len[i]] = '\0';
            p->buf[i] = nb;
        }
        if (left <= 0)
            break;
    }
    /* Both pipes at EOF (or the time is up): reap the child if it ends within the time left. */
    for (;;) {
        if (!p->done)
            reap(p, WNOHANG);
        if (p->done || p->fd[0] >= 0 || p->fd[1] >= 0 || vkg_test_now() >= end)
            break;
        usleep(10000);
    }
    return until && strstr(p->buf[0], until) != NULL;
}

int vkg_test_proc_wait(vkg_test_proc *p, double timeout_s)
{
    double end = vkg_test_now() + timeout_s;
    for (double left; !p->done && (left = end - vkg_test_now()) > 0;)
        vkg_test_proc_pump(p, left < 0.2 ? left : 0.2, NULL);
    if (!p->done) {
        vkg_test_proc_kill(p);
        fail_msg("vkgpt did not finish within %.0f s; stdout:\n%s\nstderr:\n%s", timeout_s,
                 p->buf[0], p->buf[1]);
    }
    if (p->fd[0] >= 0 || p->fd[1] >= 0)
        vkg_test_proc_pump(p, 0.05, NULL); /* what is left in the pipes */
    close_pipes(p);
    if (p->len[1])
        printf("  stderr: %s", p->buf[1]);
    return p->status;
}

void vkg_test_proc_kill(vkg_test_proc *p)
{
    if (p->pid > 0 && !p->done) {
        kill(p->pid, SIGKILL);
        reap(p, 0);
    }
    close_pipes(p);
}

void vkg_test_proc_free(vkg_test_proc *p)
{
    vkg_test_proc_kill(p);
    free(p->buf[0]);
    free(p->buf[1]);
    memset(p, 0, sizeof *p);
    p->fd[0] = p->fd[1] = -1;
}

int vkg_test_validation_force(const char *dir, const char *log_path, int sync)
{
    char settings[1024];
    snprintf(settings, sizeof settings, "%s/vk_layer_settings.txt", dir);
    FILE *f = fopen(settings, "w");
    if (!f)
        return -1;
    fprintf(f,
            "khronos_validation.debug_action = VK_DBG_LAYER_ACTION_LOG_MSG\n"
            "khronos_validation.log_filename = %s\n"
            "khronos_validation.report_flags = info,warn,error,perf\n",
            log_path);
    if (sync)
        fprintf(f, "khronos_validation.enables = "
                   "VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT\n");
    if (fclose(f) != 0)
        return -1;
    setenv("VK_INSTANCE_LAYERS", "VK_LAYER_KHRONOS_validation", 1);
    setenv("VK_LAYER_SETTINGS_PATH", dir, 1);
    return 0;
}

void vkg_test_validation_clean(const char *log_path, int opened_device)
{
    char *log = vkg_test_read_file(log_path, NULL);
    if (opened_device && (!log || !strstr(log, "Validation Layer Active")))
        fail_msg("the validation layer was not active (its log %s: %s)", log_path,
                 log ? log : "missing");
    if (log && (strstr(log, "ERROR") || strstr(log, "WARNING") || strstr(log, "PERF")))
        fail_msg("the validation layer reported:\n%s", log);
    free(log);
    unlink(log_path);
}
