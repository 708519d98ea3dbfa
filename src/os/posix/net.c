/* Sockets and the wake-up, POSIX (see os/net.h): an eventfd on Linux, a pipe elsewhere. The
 * addresses are in os/addr.c. */
#define _POSIX_C_SOURCE 200809L
#include "os/net.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/eventfd.h>
#endif

int vkg_os_has_ipc(void)
{
    return 1;
}

int vkg_os_net_start(char *why, size_t cap)
{
    if (cap)
        why[0] = '\0';
    return 0;
}

int vkg_os__net_error(int code, int gai, char *why, size_t cap)
{
    if (!gai && !code)
        code = errno ? errno : EIO;
    snprintf(why, cap, "%s", gai ? gai_strerror(code) : strerror(code));
    return code;
}

/* ---- the wake-up ---- */

struct vkg_os_wake {
    int rd, wr; /* the eventfd twice, or a pipe's two ends */
};

int vkg_os_wake_create(vkg_os_wake **out, char *why, size_t whycap)
{
    *out = NULL;
    vkg_os_wake *w = calloc(1, sizeof *w);
    if (!w) {
        snprintf(why, whycap, "out of memory");
        return ENOMEM;
    }
#if defined(__linux__)
    w->rd = w->wr = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    int ok = w->rd >= 0;
#else
    int p[2];
    int ok = pipe(p) == 0;
    if (ok) {
        w->rd = p[0];
        w->wr = p[1];
        for (int i = 0; i < 2; i++)
            ok = ok && fcntl(p[i], F_SETFL, O_NONBLOCK) == 0 &&
                 fcntl(p[i], F_SETFD, FD_CLOEXEC) == 0;
        if (!ok) {
            close(p[0]);
            close(p[1]);
        }
    }
#endif
    if (!ok) {
        int e = errno;
        snprintf(why, whycap, "%s", strerror(e));
        free(w);
        return e;
    }
    *out = w;
    return 0;
}

void vkg_os_wake_signal(vkg_os_wake *w)
{
    uint64_t one = 1; /* an eventfd reads 8 bytes; a pipe takes any */
    ssize_t n = write(w->wr, &one, sizeof one);
    (void)n; /* EAGAIN: the counter or the pipe is full, so a wake-up is pending already */
}

void vkg_os_wake_drain(vkg_os_wake *w)
{
    uint64_t buf[8];
    while (read(w->rd, buf, sizeof buf) > 0) {
    }
}

vkg_os_socket vkg_os_wake_handle(const vkg_os_wake *w)
{
    return w->rd;
}

void vkg_os_wake_destroy(vkg_os_wake **pw)
{
    vkg_os_wake *w = pw ? *pw : NULL;
    if (!w)
        return;
    close(w->rd);
    if (w->wr != w->rd)
        close(w->wr);
    free(w);
    *pw = NULL;
}
