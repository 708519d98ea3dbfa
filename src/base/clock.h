/* The monotonic clock in milliseconds, for timings and timelines (never wall time). */
#ifndef VKG_BASE_CLOCK_H
#define VKG_BASE_CLOCK_H

/* Milliseconds on CLOCK_MONOTONIC: differences are durations; the origin means nothing. */
double vkg_now_ms(void);

#endif
