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

long long vkg_os_now_ns(void)
{
    LARGE_INTEGER f, c;
    QueryPerformanceFrequency(&f);
    QueryPerformanceCounter(&c);
    /* whole seconds and the rest apart: c * 1e9 would overflow after a few days of uptime */
    long long s = c.QuadPart / f.QuadPart, r = c.QuadPart % f.QuadPart;
    return s * 1000000000 + r * 1000000000 / f.QuadPart;
}

void vkg_os_sleep_ms(unsigned ms)
{
    Sleep(ms);
}
