/* Threads, in the platform layer (src/os; see clock.h): start and join a thread, a mutex, and a
 * one-time initialisation. POSIX: pthreads; Windows: CreateThread, SRW locks; the one-time
 * initialisation on C11 atomics everywhere (os/thread.c, with what else both systems share). */
#ifndef VKG_OS_THREAD_H
#define VKG_OS_THREAD_H

typedef struct vkg_os_thread vkg_os_thread;
typedef struct vkg_os_mutex vkg_os_mutex;

/* Run fn(arg) on a new thread: 0 and *out, or an errno value (then nothing started). */
int vkg_os_thread_start(vkg_os_thread **out, void *(*fn)(void *), void *arg);

/* Wait for t to end and release it; fn's result into *result when result is not NULL. */
void vkg_os_thread_join(vkg_os_thread *t, void **result);

/* A mutex (not recursive): 0 and *out, or an errno value. */
int vkg_os_mutex_create(vkg_os_mutex **out);
void vkg_os_mutex_lock(vkg_os_mutex *m);
void vkg_os_mutex_unlock(vkg_os_mutex *m);
/* NULL does nothing. */
void vkg_os_mutex_destroy(vkg_os_mutex *m);

/* A one-time initialisation: VKG_OS_ONCE_INIT, then vkg_os_once_run(&once, fn) from any thread runs
 * fn exactly once; every call returns after fn has returned. C11 atomics only. */
typedef struct vkg_os_once {
    _Atomic int state; /* 0 not started, 1 running, 2 done */
} vkg_os_once;
#define VKG_OS_ONCE_INIT                                                                           \
    {                                                                                              \
        0                                                                                          \
    }
void vkg_os_once_run(vkg_os_once *once, void (*fn)(void));

#endif
