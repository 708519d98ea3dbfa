/* This process, Windows (see os/proc.h): console control events, the peak working set. */
#include "os/proc.h"

#include <errno.h>
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

void vkg_os_on_stop(void (*fn)(int stop))
{
    stop_fn = fn;
    SetConsoleCtrlHandler(on_console_event, TRUE);
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
