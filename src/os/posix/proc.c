/* This process, POSIX (see os/proc.h). */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* sched_setaffinity and its CPU sets */
#endif
#define _POSIX_C_SOURCE 200809L
#include "os/proc.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#if defined(__linux__)
#include <sched.h>
#endif
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#if !defined(__linux__)
#include <pthread.h>
#include <stdint.h>
#endif

_Static_assert(SIGINT == VKG_OS_STOP_INTERRUPT && SIGTERM == VKG_OS_STOP_TERMINATE,
               "the stop numbers are POSIX's signal numbers");

#if !defined(__linux__)
/* A child of vkg_os_spawn_self holds the read end of a pipe (its number in VKG_OS_LIFELINE_FD)
 * whose write end only its parent holds: its end means the parent is gone. Linux sends SIGTERM
 * instead (PR_SET_PDEATHSIG). */
static void (*volatile lifeline_fn)(int stop);

static void *watch_lifeline(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char b;
    while (read(fd, &b, 1) != 0 && errno == EINTR) {
    }
    void (*fn)(int) = lifeline_fn;
    if (fn)
        fn(VKG_OS_STOP_TERMINATE);
    return NULL;
}

static void watch_parent(void (*fn)(int stop))
{
    static int watching;
    const char *v = getenv("VKG_OS_LIFELINE_FD");
    lifeline_fn = fn;
    if (!v || !*v || watching)
        return;
    watching = 1;
    pthread_t th;
    if (pthread_create(&th, NULL, watch_lifeline, (void *)(intptr_t)atoi(v)) == 0)
        pthread_detach(th);
}
#endif

void vkg_os_on_stop(void (*fn)(int stop))
{
#if !defined(__linux__)
    watch_parent(fn);
#endif
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = fn;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
}

int vkg_os_isatty(int stream)
{
    return isatty(stream == 2 ? STDERR_FILENO : STDOUT_FILENO) == 1;
}

int vkg_os_cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int vkg_os_bind_cpu(int cpu)
{
#if defined(__linux__)
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu % vkg_os_cpu_count(), &set);
    return sched_setaffinity(0, sizeof set, &set) == 0 ? 0 : errno;
#else
    (void)cpu;
    return ENOTSUP;
#endif
}

void vkg_os_tune_malloc(void)
{
#if defined(__GLIBC__)
    mallopt(M_MMAP_THRESHOLD,
            32 << 20); /* the largest glibc accepts; also stops the dynamic rule */
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

void vkg_os_ignore_broken_pipe(void)
{
    signal(SIGPIPE, SIG_IGN);
}

unsigned long long vkg_os_peak_rss(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0 || ru.ru_maxrss < 0)
        return 0;
#if defined(__APPLE__)
    return (unsigned long long)ru.ru_maxrss; /* bytes there */
#else
    return (unsigned long long)ru.ru_maxrss * 1024u;
#endif
}

int vkg_os_setenv(const char *name, const char *value, int overwrite)
{
    return setenv(name, value, overwrite) == 0 ? 0 : errno;
}
