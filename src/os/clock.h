/* Time, in the platform layer (src/os: the only code that includes an operating system's headers
 * for what it covers; it includes nothing of the project and every other layer may use it). */
#ifndef VKG_OS_CLOCK_H
#define VKG_OS_CLOCK_H

/* Milliseconds on a monotonic clock (CLOCK_MONOTONIC; QueryPerformanceCounter on Windows):
 * differences are durations; the origin means nothing. */
double vkg_os_now_ms(void);

/* The same clock in whole nanoseconds (its resolution may be coarser). */
long long vkg_os_now_ns(void);

/* Sleep for at least ms milliseconds (an interrupted sleep is resumed). */
void vkg_os_sleep_ms(unsigned ms);

#endif
