/* Threads, what every system does alike (see os/thread.h and os/thread_impl.h): the records'
 * memory, handing a new thread its function and keeping its result for the join, and the
 * one-time initialisation, on C11 atomics for every system. Not here: any call to the system;
 * posix/thread.c and win32/thread.c make those. */
#include "os/thread.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "os/clock.h"
#include "os/thread_impl.h"

static vkg_os__thread_base *base(vkg_os_thread *t)
{
    return (vkg_os__thread_base *)t;
}

int vkg_os_thread_start(vkg_os_thread **out, void *(*fn)(void *), void *arg)
{
    vkg_os_thread *t = calloc(1, vkg_os__thread_size);
    if (!t)
        return ENOMEM;
    base(t)->fn = fn, base(t)->arg = arg;
    int e = vkg_os__thread_create(t);
    if (e) {
        free(t);
        return e;
    }
    *out = t;
    return 0;
}

void vkg_os__thread_main(vkg_os_thread *t)
{
    base(t)->result = base(t)->fn(base(t)->arg);
}

void vkg_os_thread_join(vkg_os_thread *t, void **result)
{
    vkg_os__thread_wait(t);
    if (result)
        *result = base(t)->result;
    free(t);
}

int vkg_os_mutex_create(vkg_os_mutex **out)
{
    vkg_os_mutex *m = calloc(1, vkg_os__mutex_size);
    if (!m)
        return ENOMEM;
    int e = vkg_os__mutex_init(m);
    if (e) {
        free(m);
        return e;
    }
    *out = m;
    return 0;
}

void vkg_os_mutex_destroy(vkg_os_mutex *m)
{
    if (!m)
        return;
    vkg_os__mutex_deinit(m);
    free(m);
}

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
