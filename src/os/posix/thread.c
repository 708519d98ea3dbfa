/* Threads, POSIX (see os/thread.h; what every system does alike is in os/thread.c): pthreads. */
#define _POSIX_C_SOURCE 200809L
#include "os/thread.h"

#include <pthread.h>

#include "os/thread_impl.h"

struct vkg_os_thread {
    vkg_os__thread_base base; /* first (os/thread_impl.h) */
    pthread_t id;
};

struct vkg_os_mutex {
    pthread_mutex_t mu;
};

const size_t vkg_os__thread_size = sizeof(struct vkg_os_thread);
const size_t vkg_os__mutex_size = sizeof(struct vkg_os_mutex);

static void *trampoline(void *p)
{
    vkg_os__thread_main(p);
    return NULL;
}

int vkg_os__thread_create(vkg_os_thread *t)
{
    return pthread_create(&t->id, NULL, trampoline, t);
}

void vkg_os__thread_wait(vkg_os_thread *t)
{
    pthread_join(t->id, NULL);
}

int vkg_os__mutex_init(vkg_os_mutex *m)
{
    return pthread_mutex_init(&m->mu, NULL);
}

void vkg_os__mutex_deinit(vkg_os_mutex *m)
{
    pthread_mutex_destroy(&m->mu);
}

void vkg_os_mutex_lock(vkg_os_mutex *m)
{
    pthread_mutex_lock(&m->mu);
}

void vkg_os_mutex_unlock(vkg_os_mutex *m)
{
    pthread_mutex_unlock(&m->mu);
}
