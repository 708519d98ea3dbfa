/* Threads, Windows (see os/thread.h): CreateThread and SRW locks. */
#include "os/thread.h"

#include <errno.h>
#include <stdlib.h>
#include <windows.h>

struct vkg_os_thread {
    HANDLE h;
    void *(*fn)(void *);
    void *arg, *result;
};

struct vkg_os_mutex {
    SRWLOCK lock;
};

static DWORD WINAPI trampoline(void *p)
{
    vkg_os_thread *t = p;
    t->result = t->fn(t->arg);
    return 0;
}

int vkg_os_thread_start(vkg_os_thread **out, void *(*fn)(void *), void *arg)
{
    vkg_os_thread *t = calloc(1, sizeof *t);
    if (!t)
        return ENOMEM;
    t->fn = fn, t->arg = arg;
    t->h = CreateThread(NULL, 0, trampoline, t, 0, NULL);
    if (!t->h) {
        free(t);
        return EAGAIN;
    }
    *out = t;
    return 0;
}

void vkg_os_thread_join(vkg_os_thread *t, void **result)
{
    WaitForSingleObject(t->h, INFINITE);
    CloseHandle(t->h);
    if (result)
        *result = t->result;
    free(t);
}

int vkg_os_mutex_create(vkg_os_mutex **out)
{
    vkg_os_mutex *m = malloc(sizeof *m);
    if (!m)
        return ENOMEM;
    InitializeSRWLock(&m->lock);
    *out = m;
    return 0;
}

void vkg_os_mutex_lock(vkg_os_mutex *m)
{
    AcquireSRWLockExclusive(&m->lock);
}

void vkg_os_mutex_unlock(vkg_os_mutex *m)
{
    ReleaseSRWLockExclusive(&m->lock);
}

void vkg_os_mutex_destroy(vkg_os_mutex *m)
{
    free(m);
}
