/* The monotonic clock and sleeping, Windows (see os/clock.h). */
#include "os/clock.h"

#include <windows.h>

double vkg_os_now_ms(void)
{
    LARGE_INTEGER f, c;
    QueryPerformanceFrequency(&f); /* fixed at boot, never 0 on Windows XP and later */
    QueryPerformanceCounter(&c);
    return (double)c.QuadPart * 1e3 / (double)f.QuadPart;
}

void vkg_os_sleep_ms(unsigned ms)
{
    Sleep(ms);
}
