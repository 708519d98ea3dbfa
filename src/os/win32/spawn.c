/* Child processes, Windows (see os/spawn.h; what every system does alike is in os/spawn.c):
 * CreateProcess of this program with a command line quoted as the C runtime splits it
 * (vkg_os__quote_arg), its output through anonymous pipes (polled with
 * PeekNamedPipe: they have no overlapped reads), every child in one job object that kills them
 * when this process ends, and a named event per child as its request to stop (Windows has no
 * signals between processes; os/win32/proc.c's vkg_os_on_stop waits on it). */
#include "os/spawn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>

#include "os/spawn_impl.h"

#define STOP_EVENT_ENV "VKG_OS_STOP_EVENT" /* see vkg_os_on_stop in proc.c */

struct vkg_os_child {
    vkg_os__child_base base; /* first (os/spawn_impl.h) */
    HANDLE process;
    HANDLE out[2]; /* standard output and error (NULL once ended) */
    HANDLE stop;   /* the named event the child watches */
};

/* The job every child joins; it is never closed: the system closes it when this process ends,
 * and then ends the children. */
static HANDLE the_job(void)
{
    static HANDLE job;
    static INIT_ONCE once = INIT_ONCE_STATIC_INIT;
    BOOL pending;
    if (InitOnceBeginInitialize(&once, 0, &pending, NULL) && pending) {
        HANDLE j = CreateJobObjectA(NULL, NULL);
        if (j) {
            JOBOBJECT_EXTENDED_LIMIT_INFORMATION li;
            memset(&li, 0, sizeof li);
            li.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
            if (!SetInformationJobObject(j, JobObjectExtendedLimitInformation, &li, sizeof li)) {
                CloseHandle(j);
                j = NULL;
            }
        }
        job = j;
        InitOnceComplete(&once, 0, NULL);
    }
    return job;
}

/* Whether the block entry e ("NAME=value") sets a name that one of env's sets (case-insensitive,
 * as Windows' names are). */
static int overridden(const char *e, const char *const *env)
{
    const char *eq = strchr(e + 1, '='); /* "=C:=C:\..." entries start with '=' */
    size_t len = eq ? (size_t)(eq - e) : strlen(e);
    for (int i = 0; env && env[i]; i++)
        if (!_strnicmp(env[i], e, len) && env[i][len] == '=')
            return 1;
    return 0;
}

/* This process's environment block with env set over it, or NULL. */
static char *environment_block(const char *const *env)
{
    char *cur = GetEnvironmentStringsA();
    if (!cur)
        return NULL;
    size_t need = 1;
    for (const char *e = cur; *e; e += strlen(e) + 1)
        need += strlen(e) + 1;
    for (int i = 0; env && env[i]; i++)
        need += strlen(env[i]) + 1;
    char *block = malloc(need), *w = block;
    if (block) {
        for (const char *e = cur; *e; e += strlen(e) + 1)
            if (!overridden(e, env)) {
                memcpy(w, e, strlen(e) + 1);
                w += strlen(e) + 1;
            }
        for (int i = 0; env && env[i]; i++) {
            memcpy(w, env[i], strlen(env[i]) + 1);
            w += strlen(env[i]) + 1;
        }
        *w = '\0';
    }
    FreeEnvironmentStringsA(cur);
    return block;
}

static void close_handle(HANDLE *h)
{
    if (*h) {
        CloseHandle(*h);
        *h = NULL;
    }
}

int vkg_os__self_path(char *path, size_t cap, char *err, size_t errcap)
{
    DWORD len = cap > MAXDWORD ? MAXDWORD : (DWORD)cap;
    DWORD plen = GetModuleFileNameA(NULL, path, len);
    if (plen == 0 || plen >= len) {
        snprintf(err, errcap, "cannot find this program's path (GetModuleFileName, error %lu)",
                 (unsigned long)GetLastError());
        return ENAMETOOLONG;
    }
    return 0;
}

int vkg_os__spawn(const char *path, char *const *args, const char *const *env, vkg_os_child **out,
                  char *err, size_t cap)
{
    static LONG counter;
    HANDLE job = the_job();
    if (!job) {
        snprintf(err, cap, "cannot create the job object its children die with (error %lu)",
                 (unsigned long)GetLastError());
        return EPERM;
    }
    size_t line_cap = 32768, pos = 0;
    char *line = malloc(line_cap), *block = NULL;
    vkg_os_child *c = calloc(1, sizeof *c);
    HANDLE wr[2] = {NULL, NULL};
    int e = ENOMEM;
    if (!line || !c) {
        snprintf(err, cap, "out of memory");
        goto fail;
    }
    line[0] = '\0';
    if (vkg_os__quote_arg(line, line_cap, &pos, path) != 0) {
        snprintf(err, cap, "the command line is longer than Windows takes");
        e = E2BIG;
        goto fail;
    }
    for (int i = 1; args[i]; i++)
        if (vkg_os__quote_arg(line, line_cap, &pos, args[i]) != 0) {
            snprintf(err, cap, "the command line is longer than Windows takes");
            e = E2BIG;
            goto fail;
        }
    char stop_name[96], stop_var[128];
    snprintf(stop_name, sizeof stop_name, "Local\\vkgpt-stop-%lu-%ld",
             (unsigned long)GetCurrentProcessId(), (long)InterlockedIncrement(&counter));
    c->stop = CreateEventA(NULL, TRUE, FALSE, stop_name);
    snprintf(stop_var, sizeof stop_var, "%s=%s", STOP_EVENT_ENV, stop_name);
    const char *extra[256];
    int ne = 0;
    for (; env && env[ne] && ne < 254; ne++)
        extra[ne] = env[ne];
    extra[ne++] = stop_var, extra[ne] = NULL;
    block = environment_block(extra);
    if (!c->stop || !block) {
        snprintf(err, cap, "cannot create the stop event or the environment (error %lu)",
                 (unsigned long)GetLastError());
        e = EIO;
        goto fail;
    }
    SECURITY_ATTRIBUTES sa = {sizeof sa, NULL, TRUE};
    for (int s = 0; s < 2; s++) {
        if (!CreatePipe(&c->out[s], &wr[s], &sa, 0) ||
            !SetHandleInformation(c->out[s], HANDLE_FLAG_INHERIT, 0)) {
            snprintf(err, cap, "cannot create a pipe (error %lu)", (unsigned long)GetLastError());
            e = EMFILE;
            goto fail;
        }
    }
    STARTUPINFOA si;
    memset(&si, 0, sizeof si);
    si.cb = sizeof si;
    si.dwFlags = STARTF_USESTDHANDLES;
    si.hStdInput = GetStdHandle(STD_INPUT_HANDLE);
    si.hStdOutput = wr[0], si.hStdError = wr[1];
    PROCESS_INFORMATION pi;
    /* Suspended until it is in the job, so that nothing it starts escapes the job. */
    if (!CreateProcessA(path, line, NULL, NULL, TRUE, CREATE_SUSPENDED, block, NULL, &si, &pi)) {
        snprintf(err, cap, "CreateProcess %s failed (error %lu)", path,
                 (unsigned long)GetLastError());
        e = ENOEXEC;
        goto fail;
    }
    if (!AssignProcessToJobObject(job, pi.hProcess)) {
        snprintf(err, cap, "cannot put the child in the job it dies with (error %lu)",
                 (unsigned long)GetLastError());
        TerminateProcess(pi.hProcess, 128 + 9);
        WaitForSingleObject(pi.hProcess, INFINITE);
        CloseHandle(pi.hThread), CloseHandle(pi.hProcess);
        e = EPERM;
        goto fail;
    }
    ResumeThread(pi.hThread);
    CloseHandle(pi.hThread);
    close_handle(&wr[0]), close_handle(&wr[1]);
    c->process = pi.hProcess, c->base.id = (long)pi.dwProcessId;
    free(line), free(block);
    *out = c;
    return 0;
fail:
    close_handle(&wr[0]), close_handle(&wr[1]);
    if (c) {
        close_handle(&c->out[0]), close_handle(&c->out[1]), close_handle(&c->stop);
        free(c);
    }
    free(line), free(block);
    return e;
}

int vkg_os_children_pump(vkg_os_child *const *cs, int n, int timeout_ms,
                         void (*fn)(void *ctx, int k, int stream, const char *data, size_t len),
                         void *ctx)
{
    ULONGLONG until = GetTickCount64() + (ULONGLONG)(timeout_ms > 0 ? timeout_ms : 0);
    for (;;) {
        int open_streams = 0, got = 0;
        for (int k = 0; k < n; k++)
            for (int s = 0; cs[k] && s < 2; s++) {
                vkg_os_child *c = cs[k];
                if (!c->out[s])
                    continue;
                DWORD avail = 0, r = 0;
                char buf[8192];
                if (!PeekNamedPipe(c->out[s], NULL, 0, NULL, &avail, NULL)) {
                    close_handle(&c->out[s]); /* broken: every write end is closed */
                    fn(ctx, k, s, NULL, 0);
                    got = 1;
                    continue;
                }
                open_streams++;
                if (avail == 0)
                    continue;
                if (ReadFile(c->out[s], buf, avail < sizeof buf ? avail : sizeof buf, &r, NULL) &&
                    r > 0) {
                    fn(ctx, k, s, buf, r);
                    got = 1;
                }
            }
        if (got || open_streams == 0 || GetTickCount64() >= until) {
            if (open_streams == 0 && !got && GetTickCount64() < until)
                Sleep((DWORD)(until - GetTickCount64()));
            return open_streams;
        }
        Sleep(5);
    }
}

int vkg_os__child_reap(vkg_os_child *c, int wait, vkg_os_exit *how)
{
    DWORD code = 0;
    if (WaitForSingleObject(c->process, wait ? INFINITE : 0) != WAIT_OBJECT_0 ||
        !GetExitCodeProcess(c->process, &code))
        return 0;
    how->signal = 0;
    how->code = (int)code;
    return 1;
}

int vkg_os__child_frozen(vkg_os_child *c)
{
    (void)c; /* Windows has no stopped state a parent can see */
    return 0;
}

void vkg_os__child_signal(vkg_os_child *c, int now)
{
    if (now)
        TerminateProcess(c->process, 128 + 9);
    else
        SetEvent(c->stop);
}

void vkg_os__child_release(vkg_os_child *c)
{
    close_handle(&c->out[0]), close_handle(&c->out[1]), close_handle(&c->stop);
    close_handle(&c->process);
    free(c);
}

const char *vkg_os__signal_name(int sig)
{
    (void)sig; /* every ending is an exit code here (os/spawn.h) */
    return "a signal";
}
