/* The one-time initialisation of os/thread.h, on C11 atomics for every system. */
#include "os/thread.h"

#include <stdatomic.h>

#include "os/clock.h"

void vkg_os_once_run(vkg_os_once *once, void (*fn)(void))
{
    if (atomic_load_explicit(&once->state, memory_order_acquire) == 2)
        return;
    int idle = 0;
    if (atomic_compare_exchange_strong_explicit(&once->state, &idle, 1, memory_order_acq_rel,
                                                memory_order_acquire)) {
        fn();
        atomic_store_explicit(&once->state, 2, memory_order_release);
        return;
    }
    while (atomic_load_explicit(&once->state, memory_order_acquire) != 2)
        vkg_os_sleep_ms(1); /* another thread runs fn: initialisations are short and rare */
}
