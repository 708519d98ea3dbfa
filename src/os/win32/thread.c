/* Threads, Windows (see os/thread.h; what every system does alike is in os/thread.c):
 * CreateThread and SRW locks. */
#include "os/thread.h"

#include <errno.h>
#include <windows.h>

#include "os/thread_impl.h"

struct vkg_os_thread {
    vkg_os__thread_base base; /* first (os/thread_impl.h) */
    HANDLE h;
};

struct vkg_os_mutex {
    SRWLOCK lock;
};

const size_t vkg_os__thread_size = sizeof(struct vkg_os_thread);
const size_t vkg_os__mutex_size = sizeof(struct vkg_os_mutex);

static DWORD WINAPI trampoline(void *p)
{
    vkg_os__thread_main(p);
    return 0;
}

int vkg_os__thread_create(vkg_os_thread *t)
{
    t->h = CreateThread(NULL, 0, trampoline, t, 0, NULL);
    return t->h ? 0 : EAGAIN;
}

void vkg_os__thread_wait(vkg_os_thread *t)
{
    WaitForSingleObject(t->h, INFINITE);
    CloseHandle(t->h);
}

int vkg_os__mutex_init(vkg_os_mutex *m)
{
    InitializeSRWLock(&m->lock);
    return 0;
}

void vkg_os__mutex_deinit(vkg_os_mutex *m)
{
    (void)m; /* an SRW lock holds nothing to release */
}

void vkg_os_mutex_lock(vkg_os_mutex *m)
{
    AcquireSRWLockExclusive(&m->lock);
}

void vkg_os_mutex_unlock(vkg_os_mutex *m)
{
    ReleaseSRWLockExclusive(&m->lock);
}
