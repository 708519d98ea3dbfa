/* Shared memory between the processes of one host, Linux (see os/shm.h). */
#if !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* memfd_create, its seals, SO_PEERCRED, accept4, process_vm_readv */
#endif
#include "os/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

int vkg_os_shm_new(int *fd)
{
    *fd = memfd_create("vkgpt-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    return *fd >= 0 ? 0 : errno;
}

int vkg_os_shm_resize(int fd, size_t bytes)
{
    return ftruncate(fd, (off_t)bytes) == 0 ? 0 : errno;
}

int vkg_os_shm_seal(int fd)
{
    return fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0 ? 0 : errno;
}

int vkg_os_shm_sealed(int fd)
{
    int seals = fcntl(fd, F_GET_SEALS);
    return seals >= 0 && (seals & F_SEAL_SHRINK);
}

int vkg_os_shm_size(int fd, size_t *bytes)
{
    struct stat sb;
    if (fstat(fd, &sb) != 0)
        return errno;
    *bytes = (size_t)sb.st_size;
    return 0;
}

unsigned long long vkg_os_shm_resident(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 ? (unsigned long long)st.st_blocks * 512u : 0;
}

int vkg_os_shm_map(int fd, size_t bytes, void **p)
{
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED)
        return errno;
    *p = m;
    return 0;
}

void vkg_os_shm_unmap(void *p, size_t bytes)
{
    munmap(p, bytes);
}

void vkg_os_shm_discard(void *p, size_t bytes)
{
    (void)madvise(p, bytes, MADV_REMOVE); /* the memfd keeps touched pages until punched out */
}

void vkg_os_shm_close(int fd)
{
    close(fd);
}

void vkg_os_wait_on(atomic_uint *w, uint32_t val, long long timeout_ns)
{
    struct timespec ts = {(time_t)(timeout_ns / 1000000000), (long)(timeout_ns % 1000000000)};
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT, val, &ts, NULL, 0);
}

void vkg_os_wake_all(atomic_uint *w)
{
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

int vkg_os_process_read(long pid, void *dst, uint64_t addr, size_t bytes)
{
    uint8_t *d = dst;
    while (bytes > 0) {
        struct iovec l = {d, bytes}, r = {(void *)(uintptr_t)addr, bytes};
        ssize_t got = process_vm_readv((pid_t)pid, &l, 1, &r, 1, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return got == 0 ? EFAULT : errno;
        d += got;
        addr += (uint64_t)got;
        bytes -= (size_t)got;
    }
    return 0;
}

static socklen_t abstract_addr(const char *name, struct sockaddr_un *sa)
{
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    size_t n = strlen(name);
    if (n > sizeof sa->sun_path - 1)
        n = sizeof sa->sun_path - 1;
    memcpy(sa->sun_path + 1, name, n); /* sun_path[0] = 0: the abstract namespace */
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

int vkg_os_local_listen(const char *name, int *fd_out)
{
    struct sockaddr_un sa;
    socklen_t len = abstract_addr(name, &sa);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return errno;
    if (bind(fd, (struct sockaddr *)&sa, len) != 0 || listen(fd, 64) != 0) {
        int e = errno;
        close(fd);
        return e;
    }
    *fd_out = fd;
    return 0;
}

int vkg_os_local_connect(const char *name, int *fd_out)
{
    struct sockaddr_un sa;
    socklen_t len = abstract_addr(name, &sa);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return errno;
    if (connect(fd, (struct sockaddr *)&sa, len) != 0) {
        int e = errno;
        close(fd);
        return e;
    }
    *fd_out = fd;
    return 0;
}

int vkg_os_local_accept(int lfd, int ms, int *fd)
{
    struct pollfd p = {lfd, POLLIN, 0};
    if (poll(&p, 1, ms) <= 0)
        return ETIMEDOUT;
    *fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    return *fd >= 0 ? 0 : errno;
}

int vkg_os_local_peer(int fd, unsigned *uid, long *pid)
{
    struct ucred uc;
    socklen_t len = sizeof uc;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) != 0)
        return errno;
    *uid = (unsigned)uc.uid, *pid = (long)uc.pid;
    return 0;
}

unsigned vkg_os_euid(void)
{
    return (unsigned)geteuid();
}

int vkg_os_local_recv(int fd, void *buf, size_t len, int *fd_out, int ms, long *got)
{
    struct pollfd p = {fd, POLLIN, 0};
    int rc;
    do
        rc = poll(&p, 1, ms);
    while (rc < 0 && errno == EINTR);
    if (rc <= 0)
        return ETIMEDOUT;
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctrl;
    struct iovec io = {buf, len};
    struct msghdr mh = {.msg_iov = &io, .msg_iovlen = 1};
    if (fd_out) {
        mh.msg_control = ctrl.buf;
        mh.msg_controllen = sizeof ctrl.buf;
        *fd_out = -1;
    }
    ssize_t n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
    if (n < 0)
        return errno;
    for (struct cmsghdr *cm = fd_out ? CMSG_FIRSTHDR(&mh) : NULL; cm; cm = CMSG_NXTHDR(&mh, cm))
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
            memcpy(fd_out, CMSG_DATA(cm), sizeof(int));
    *got = (long)n;
    return 0;
}

int vkg_os_local_send(int fd, const void *buf, size_t len, int pass_fd, long *sent)
{
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctrl;
    struct iovec io = {(void *)buf, len};
    struct msghdr mh = {.msg_iov = &io, .msg_iovlen = 1};
    if (pass_fd >= 0) {
        memset(&ctrl, 0, sizeof ctrl);
        mh.msg_control = ctrl.buf;
        mh.msg_controllen = sizeof ctrl.buf;
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &pass_fd, sizeof(int));
    }
    ssize_t n;
    do
        n = sendmsg(fd, &mh, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return errno;
    *sent = (long)n;
    return 0;
}
