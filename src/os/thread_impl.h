/* What the two halves of os/thread.h agree on, for src/os alone: os/thread.c (what every system
 * does alike: the records' memory, handing a thread its function and keeping its result, the
 * one-time initialisation) and posix/thread.c or win32/thread.c (the system's thread and lock
 * calls). Nothing here is for callers of thread.h. */
#ifndef VKG_OS_THREAD_IMPL_H
#define VKG_OS_THREAD_IMPL_H

#include <stddef.h>

#include "os/thread.h"

/* The part of a thread every system keeps alike: the first member of each system's struct
 * vkg_os_thread, so that os/thread.c reaches it from a vkg_os_thread *. */
typedef struct vkg_os__thread_base {
    void *(*fn)(void *);
    void *arg;
    void *result; /* fn's, once it has returned */
} vkg_os__thread_base;

/* sizeof each system's struct vkg_os_thread and struct vkg_os_mutex: os/thread.c allocates them
 * (zeroed). */
extern const size_t vkg_os__thread_size;
extern const size_t vkg_os__mutex_size;

/* Start a thread that calls vkg_os__thread_main(t) (t's base holds fn and arg): 0, or an errno
 * value (then nothing started). */
int vkg_os__thread_create(vkg_os_thread *t);

/* On the new thread: run its function and keep the result (os/thread.c). */
void vkg_os__thread_main(vkg_os_thread *t);

/* Wait for t's thread to end and release the system's hold on it (not t's memory). */
void vkg_os__thread_wait(vkg_os_thread *t);

/* Make m a lock (0, or an errno value), and undo that (not m's memory). */
int vkg_os__mutex_init(vkg_os_mutex *m);
void vkg_os__mutex_deinit(vkg_os_mutex *m);

#endif
