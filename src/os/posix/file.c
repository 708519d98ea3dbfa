/* Files and folders, POSIX (see os/file.h). */
#define _POSIX_C_SOURCE 200809L
#if defined(__APPLE__)
#define _DARWIN_C_SOURCE /* F_FULLFSYNC, flock */
#else
#define _DEFAULT_SOURCE /* flock (BSD), gethostname */
#endif
#include "os/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

int vkg_os_mkdir(const char *dir)
{
    struct stat sb;
    if (mkdir(dir, 0755) == 0)
        return 0;
    int err = errno;
    if (err == EEXIST && stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode))
        return 0;
    return err;
}

int vkg_os_flush_to_disk(FILE *f)
{
    if (fflush(f) != 0)
        return errno;
#if defined(__APPLE__)
    if (fcntl(fileno(f), F_FULLFSYNC) == 0)
        return 0; /* else a file system without it: fsync below */
#endif
    return fsync(fileno(f)) == 0 ? 0 : errno;
}

int vkg_os_replace(const char *from, const char *to)
{
    return rename(from, to) == 0 ? 0 : errno;
}

int vkg_os_sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    int rc = fsync(fd), err = errno;
    close(fd);
    return rc == 0 || err == EINVAL ? 0 : err;
}

long vkg_os_pid(void)
{
    return (long)getpid();
}

void vkg_os_hostname(char *buf, size_t cap)
{
    if (cap == 0)
        return;
    if (gethostname(buf, cap) != 0 || !buf[0])
        snprintf(buf, cap, "unknown");
    buf[cap - 1] = '\0';
}

struct vkg_os_lockfile {
    int fd;
};

int vkg_os_lockfile_take(const char *path, vkg_os_lockfile **out, char *text, size_t cap)
{
    *out = NULL;
    if (text && cap)
        text[0] = '\0';
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return errno;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int err = errno;
        if (err == EWOULDBLOCK && text && cap) {
            ssize_t n = pread(fd, text, cap - 1, 0);
            text[n > 0 ? n : 0] = '\0';
        }
        close(fd);
        return err == EWOULDBLOCK ? EBUSY : err;
    }
    vkg_os_lockfile *l = malloc(sizeof *l);
    if (!l) {
        close(fd);
        return ENOMEM;
    }
    l->fd = fd;
    *out = l;
    return 0;
}

int vkg_os_lockfile_write(vkg_os_lockfile *l, const char *text)
{
    size_t len = strlen(text);
    if (ftruncate(l->fd, 0) != 0)
        return errno;
    ssize_t n = pwrite(l->fd, text, len, 0);
    return n == (ssize_t)len ? 0 : n < 0 ? errno : EIO;
}

void vkg_os_lockfile_release(vkg_os_lockfile **l)
{
    if (!l || !*l)
        return;
    int rc = ftruncate((*l)->fd, 0); /* the text only informs: the lock goes with the close */
    (void)rc;
    close((*l)->fd);
    free(*l);
    *l = NULL;
}
