/* This process, Windows (see os/proc.h): console control events, the peak working set. */
#include "os/proc.h"

#include <errno.h>
#include <io.h>
#include <stdio.h>
#include <stdlib.h>
#include <windows.h>

#include <psapi.h>

/* The handler the console events reach (written before the handler is installed). */
static void (*volatile stop_fn)(int stop);

static BOOL WINAPI on_console_event(DWORD event)
{
    void (*fn)(int) = stop_fn;
    if (!fn)
        return FALSE;
    fn(event == CTRL_C_EVENT ? VKG_OS_STOP_INTERRUPT : VKG_OS_STOP_TERMINATE);
    return TRUE;
}

/* A child started by vkg_os_spawn_self is asked to stop through a named event (in
 * VKG_OS_STOP_EVENT; Windows has no signals between processes): one thread waits on it. */
static DWORD WINAPI watch_stop_event(void *event)
{
    if (WaitForSingleObject((HANDLE)event, INFINITE) == WAIT_OBJECT_0) {
        void (*fn)(int) = stop_fn;
        if (fn)
            fn(VKG_OS_STOP_TERMINATE);
    }
    return 0;
}

void vkg_os_on_stop(void (*fn)(int stop))
{
    static LONG watching;
    stop_fn = fn;
    SetConsoleCtrlHandler(on_console_event, TRUE);
    const char *name = getenv("VKG_OS_STOP_EVENT");
    if (name && *name && InterlockedExchange(&watching, 1) == 0) {
        HANDLE ev = OpenEventA(SYNCHRONIZE, FALSE, name);
        HANDLE th = ev ? CreateThread(NULL, 0, watch_stop_event, ev, 0, NULL) : NULL;
        if (th)
            CloseHandle(th);
        else if (ev)
            CloseHandle(ev);
    }
}

int vkg_os_isatty(int stream)
{
    return _isatty(_fileno(stream == 2 ? stderr : stdout)) != 0;
}

int vkg_os_cpu_count(void)
{
    SYSTEM_INFO si;
    GetSystemInfo(&si);
    return si.dwNumberOfProcessors > 0 ? (int)si.dwNumberOfProcessors : 1;
}

int vkg_os_bind_cpu(int cpu)
{
    SYSTEM_INFO si;
    GetSystemInfo(&si);
    DWORD n = si.dwNumberOfProcessors > 64 ? 64 : si.dwNumberOfProcessors;
    DWORD_PTR mask = (DWORD_PTR)1 << (unsigned)(cpu % (int)(n ? n : 1));
    return SetProcessAffinityMask(GetCurrentProcess(), mask) ? 0 : EINVAL;
}

void vkg_os_tune_malloc(void)
{
}

void vkg_os_ignore_broken_pipe(void)
{
}

unsigned long long vkg_os_peak_rss(void)
{
    PROCESS_MEMORY_COUNTERS pmc;
    if (!GetProcessMemoryInfo(GetCurrentProcess(), &pmc, sizeof pmc))
        return 0;
    return (unsigned long long)pmc.PeakWorkingSetSize;
}

int vkg_os_setenv(const char *name, const char *value, int overwrite)
{
    if (!overwrite && getenv(name))
        return 0;
    return _putenv_s(name, value) == 0 ? 0 : errno ? errno : EINVAL;
}
