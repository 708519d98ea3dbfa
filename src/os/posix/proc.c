/* This process, POSIX (see os/proc.h). */
#define _POSIX_C_SOURCE 200809L
#include "os/proc.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

_Static_assert(SIGINT == VKG_OS_STOP_INTERRUPT && SIGTERM == VKG_OS_STOP_TERMINATE,
               "the stop numbers are POSIX's signal numbers");

void vkg_os_on_stop(void (*fn)(int stop))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = fn;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
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
