/* Files and folders, POSIX (see os/file.h). */
#define _POSIX_C_SOURCE 200809L
#if defined(__APPLE__)
#define _DARWIN_C_SOURCE /* F_FULLFSYNC, flock */
#else
#define _DEFAULT_SOURCE /* flock (BSD), gethostname */
#endif
#include "os/file.h"

#include <dirent.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "os/glob.h"

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

/* What a file that is not regular is, for messages. */
static const char *file_kind(mode_t mode)
{
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISFIFO(mode))
        return "a FIFO (named pipe)";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    if (S_ISSOCK(mode))
        return "a socket";
    return "not a regular file";
}

int vkg_os_open_read(const char *path, int *fd, unsigned long long *size, const char **not_regular)
{
    struct stat sb;
    *fd = -1;
    *not_regular = NULL;
    /* stat first, so a device is never opened; fstat again, for a file swapped in between.
     * O_NONBLOCK: opening a FIFO must not wait for a writer. */
    if (stat(path, &sb) != 0)
        return errno;
    if (!S_ISREG(sb.st_mode)) {
        *not_regular = file_kind(sb.st_mode);
        return EINVAL;
    }
    int d = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (d < 0)
        return errno;
    int err = 0;
    if (fstat(d, &sb) != 0)
        err = errno;
    else if (!S_ISREG(sb.st_mode)) {
        *not_regular = file_kind(sb.st_mode);
        err = EINVAL;
    }
    int flags = err ? -1 : fcntl(d, F_GETFL);
    if (!err && (flags < 0 || fcntl(d, F_SETFL, flags & ~O_NONBLOCK) != 0))
        err = errno;
    if (err) {
        close(d);
        return err;
    }
    *fd = d;
    *size = (unsigned long long)sb.st_size;
    return 0;
}

long long vkg_os_read(int fd, void *buf, size_t n)
{
    for (;;) {
        ssize_t got = read(fd, buf, n);
        if (got >= 0 || errno != EINTR)
            return (long long)got;
    }
}

long long vkg_os_pread(int fd, void *buf, size_t n, unsigned long long off)
{
    for (;;) {
        ssize_t got = pread(fd, buf, n, (off_t)off);
        if (got >= 0 || errno != EINTR)
            return (long long)got;
    }
}

FILE *vkg_os_fdopen_read(int fd)
{
    return fdopen(fd, "rb");
}

void vkg_os_close(int fd)
{
    if (fd >= 0)
        close(fd);
}

int vkg_os_is_file(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

int vkg_os_is_dir(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

int vkg_os_list_dir(const char *dir, struct vkg_os_paths *out)
{
    *out = (vkg_os_paths){0};
    DIR *d = opendir(dir);
    if (!d)
        return errno;
    size_t cap = 0;
    int err = 0;
    for (struct dirent *de; (errno = 0, de = readdir(d));) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (out->n == cap) {
            size_t c = cap ? 2 * cap : 16;
            char **v = realloc(out->v, c * sizeof *v);
            if (!v) {
                err = ENOMEM;
                break;
            }
            out->v = v, cap = c;
        }
        if (!(out->v[out->n] = strdup(de->d_name))) {
            err = ENOMEM;
            break;
        }
        out->n++;
    }
    if (!err && errno)
        err = errno;
    closedir(d);
    if (err) {
        vkg_os_paths_free(out);
        return err;
    }
    vkg_os__paths_sort(out);
    return 0;
}

int vkg_os_rmdir(const char *dir)
{
    return rmdir(dir) == 0 ? 0 : errno;
}

int vkg_os_mkdtemp(char *tmpl)
{
    return mkdtemp(tmpl) ? 0 : errno;
}

long long vkg_os_getline(char **line, size_t *cap, FILE *f)
{
    return (long long)getline(line, cap, f);
}

int vkg_os_write_new(const char *path, int owner_only, const void *data, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, owner_only ? 0600 : 0644);
    if (fd < 0)
        return errno;
    const char *p = data;
    int err = 0;
    while (n > 0 && !err) {
        ssize_t w = write(fd, p, n);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
        } else if (w < 0 && errno != EINTR) {
            err = errno;
        }
    }
    if (!err && fsync(fd) != 0)
        err = errno;
    if (close(fd) != 0 && !err)
        err = errno;
    return err;
}

int vkg_os_truncate(const char *path, unsigned long long size)
{
    return truncate(path, (off_t)size) == 0 ? 0 : errno;
}

int vkg_os_exists(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) == 0)
        return 1;
    return errno == ENOENT ? 0 : -1;
}

int vkg_os_is_path_sep(int ch)
{
    return ch == '/';
}

void vkg_os_temp_dir(char *buf, size_t cap)
{
    if (cap == 0)
        return;
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir || strlen(dir) >= cap)
        dir = "/tmp";
    snprintf(buf, cap, "%s", dir);
    for (size_t n = strlen(buf); n > 1 && buf[n - 1] == '/'; n--)
        buf[n - 1] = '\0';
}

long vkg_os_pid(void)
{
    return (long)getpid();
}

int vkg_os_getcwd(char *buf, size_t cap)
{
    return getcwd(buf, cap) ? 0 : errno;
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
