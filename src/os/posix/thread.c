/* Threads, POSIX (see os/thread.h): pthreads. */
#define _POSIX_C_SOURCE 200809L
#include "os/thread.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

struct vkg_os_thread {
    pthread_t id;
};

struct vkg_os_mutex {
    pthread_mutex_t mu;
};

int vkg_os_thread_start(vkg_os_thread **out, void *(*fn)(void *), void *arg)
{
    vkg_os_thread *t = malloc(sizeof *t);
    if (!t)
        return ENOMEM;
    int e = pthread_create(&t->id, NULL, fn, arg);
    if (e) {
        free(t);
        return e;
    }
    *out = t;
    return 0;
}

void vkg_os_thread_join(vkg_os_thread *t, void **result)
{
    void *r = NULL;
    pthread_join(t->id, &r);
    if (result)
        *result = r;
    free(t);
}

int vkg_os_mutex_create(vkg_os_mutex **out)
{
    vkg_os_mutex *m = malloc(sizeof *m);
    if (!m)
        return ENOMEM;
    int e = pthread_mutex_init(&m->mu, NULL);
    if (e) {
        free(m);
        return e;
    }
    *out = m;
    return 0;
}

void vkg_os_mutex_lock(vkg_os_mutex *m)
{
    pthread_mutex_lock(&m->mu);
}

void vkg_os_mutex_unlock(vkg_os_mutex *m)
{
    pthread_mutex_unlock(&m->mu);
}

void vkg_os_mutex_destroy(vkg_os_mutex *m)
{
    if (!m)
        return;
    pthread_mutex_destroy(&m->mu);
    free(m);
}
