/* Files and folders, Windows (see os/file.h). */
#include "os/file.h"

#include <direct.h>
#include <errno.h>
#include <fcntl.h>
#include <io.h>
#include <process.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <windows.h>

#include "os/glob.h"

/* The nearest errno value to a Windows error code. */
static int errno_of(DWORD e)
{
    switch (e) {
    case ERROR_FILE_NOT_FOUND:
    case ERROR_PATH_NOT_FOUND:
        return ENOENT;
    case ERROR_ACCESS_DENIED:
        return EACCES;
    case ERROR_ALREADY_EXISTS:
    case ERROR_FILE_EXISTS:
        return EEXIST;
    case ERROR_SHARING_VIOLATION:
    case ERROR_LOCK_VIOLATION:
        return EBUSY;
    case ERROR_DISK_FULL:
    case ERROR_HANDLE_DISK_FULL:
        return ENOSPC;
    case ERROR_NOT_ENOUGH_MEMORY:
    case ERROR_OUTOFMEMORY:
        return ENOMEM;
    default:
        return EIO;
    }
}

int vkg_os_mkdir(const char *dir)
{
    if (CreateDirectoryA(dir, NULL))
        return 0;
    DWORD e = GetLastError();
    DWORD a = GetFileAttributesA(dir);
    if (e == ERROR_ALREADY_EXISTS && a != INVALID_FILE_ATTRIBUTES && (a & FILE_ATTRIBUTE_DIRECTORY))
        return 0;
    return errno_of(e);
}

int vkg_os_flush_to_disk(FILE *f)
{
    if (fflush(f) != 0)
        return errno;
    HANDLE h = (HANDLE)_get_osfhandle(_fileno(f));
    if (h == INVALID_HANDLE_VALUE)
        return EBADF;
    return FlushFileBuffers(h) ? 0 : errno_of(GetLastError());
}

int vkg_os_replace(const char *from, const char *to)
{
    return MoveFileExA(from, to, MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH)
               ? 0
               : errno_of(GetLastError());
}

int vkg_os_sync_dir(const char *dir)
{
    (void)dir;
    return 0;
}

int vkg_os_open_read(const char *path, int *fd, unsigned long long *size, const char **not_regular)
{
    struct _stat64 sb;
    *fd = -1;
    *not_regular = NULL;
    if (_stat64(path, &sb) != 0)
        return errno;
    if (!(sb.st_mode & _S_IFREG)) {
        *not_regular = (sb.st_mode & _S_IFDIR) ? "a directory" : "not a regular file";
        return EINVAL;
    }
    int d = _open(path, _O_RDONLY | _O_BINARY | _O_NOINHERIT);
    if (d < 0)
        return errno;
    *fd = d;
    *size = (unsigned long long)sb.st_size;
    return 0;
}

long long vkg_os_read(int fd, void *buf, size_t n)
{
    return _read(fd, buf, n > 0x7FFFFFFF ? 0x7FFFFFFFu : (unsigned)n);
}

long long vkg_os_pread(int fd, void *buf, size_t n, unsigned long long off)
{
    HANDLE h = (HANDLE)_get_osfhandle(fd);
    if (h == INVALID_HANDLE_VALUE) {
        errno = EBADF;
        return -1;
    }
    /* ReadFile at an OVERLAPPED offset on a handle opened for synchronous reads leaves the file
     * pointer after what it read: the position is put back, as pread leaves it. */
    long long pos = _lseeki64(fd, 0, SEEK_CUR);
    if (pos < 0)
        return -1;
    OVERLAPPED at = {0};
    at.Offset = (DWORD)off, at.OffsetHigh = (DWORD)(off >> 32);
    DWORD got = 0;
    long long rc = 0;
    if (ReadFile(h, buf, n > 0x7FFFFFFF ? 0x7FFFFFFFu : (DWORD)n, &got, &at))
        rc = (long long)got;
    else if (GetLastError() != ERROR_HANDLE_EOF)
        rc = -1, errno = errno_of(GetLastError());
    if (_lseeki64(fd, pos, SEEK_SET) < 0)
        return -1;
    return rc;
}

FILE *vkg_os_fdopen_read(int fd)
{
    return _fdopen(fd, "rb");
}

void vkg_os_close(int fd)
{
    if (fd >= 0)
        _close(fd);
}

int vkg_os_is_file(const char *path)
{
    DWORD a = GetFileAttributesA(path);
    return a != INVALID_FILE_ATTRIBUTES && !(a & FILE_ATTRIBUTE_DIRECTORY);
}

int vkg_os_is_dir(const char *path)
{
    DWORD a = GetFileAttributesA(path);
    return a != INVALID_FILE_ATTRIBUTES && (a & FILE_ATTRIBUTE_DIRECTORY);
}

int vkg_os_list_dir(const char *dir, struct vkg_os_paths *out)
{
    *out = (vkg_os_paths){0};
    size_t len = strlen(dir);
    char *pattern = malloc(len + 3);
    if (!pattern)
        return ENOMEM;
    memcpy(pattern, dir, len);
    memcpy(pattern + len, "/*", 3);
    int rc = vkg_os_glob(pattern, out);
    free(pattern);
    if (rc == VKG_OS_GLOB_NOMATCH) /* an empty folder, or none */
        return GetFileAttributesA(dir) == INVALID_FILE_ATTRIBUTES ? ENOENT : 0;
    if (rc != VKG_OS_GLOB_OK)
        return rc == VKG_OS_GLOB_NOMEM ? ENOMEM : EIO;
    for (size_t i = 0; i < out->n; i++) /* names only */
        memmove(out->v[i], out->v[i] + len + 1, strlen(out->v[i] + len + 1) + 1);
    return 0;
}

int vkg_os_rmdir(const char *dir)
{
    return RemoveDirectoryA(dir) ? 0 : errno_of(GetLastError());
}

int vkg_os_mkdtemp(char *tmpl)
{
    static const char digits[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    size_t n = strlen(tmpl);
    if (n < 6 || strcmp(tmpl + n - 6, "XXXXXX") != 0)
        return EINVAL;
    /* Names from the process id, the clock and a counter; a name already taken is tried again. */
    unsigned long long seed = ((unsigned long long)GetCurrentProcessId() << 32) ^ GetTickCount64();
    for (unsigned attempt = 0; attempt < 1000; attempt++) {
        unsigned long long v = (seed + attempt) * 0x9E3779B97F4A7C15ull;
        for (int i = 0; i < 6; i++, v /= 36)
            tmpl[n - 6 + i] = digits[v % 36];
        if (CreateDirectoryA(tmpl, NULL))
            return 0;
        DWORD e = GetLastError();
        if (e != ERROR_ALREADY_EXISTS && e != ERROR_FILE_EXISTS)
            return errno_of(e);
    }
    return EEXIST;
}

long long vkg_os_getline(char **line, size_t *cap, FILE *f)
{
    size_t n = 0;
    for (int c; (c = getc(f)) != EOF;) {
        if (n + 2 > *cap) {
            size_t grown = *cap ? 2 * *cap : 128;
            char *p = realloc(*line, grown);
            if (!p) {
                errno = ENOMEM;
                return -1;
            }
            *line = p, *cap = grown;
        }
        (*line)[n++] = (char)c;
        if (c == '\n')
            break;
    }
    if (n == 0)
        return -1;
    (*line)[n] = '\0';
    return (long long)n;
}

int vkg_os_write_new(const char *path, int owner_only, const void *data, size_t n)
{
    (void)owner_only; /* the folder's permissions (os/file.h) */
    int fd = _open(path, _O_WRONLY | _O_CREAT | _O_EXCL | _O_BINARY | _O_NOINHERIT,
                   _S_IREAD | _S_IWRITE);
    if (fd < 0)
        return errno;
    const char *p = data;
    int err = 0;
    while (n > 0 && !err) {
        int w = _write(fd, p, n > 0x40000000 ? 0x40000000u : (unsigned)n);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
        } else {
            err = w < 0 ? errno : EIO;
        }
    }
    if (!err && _commit(fd) != 0)
        err = errno;
    if (_close(fd) != 0 && !err)
        err = errno;
    return err;
}

int vkg_os_truncate(const char *path, unsigned long long size)
{
    int fd = _open(path, _O_WRONLY | _O_BINARY);
    if (fd < 0)
        return errno;
    int err = _chsize_s(fd, (long long)size);
    _close(fd);
    return err;
}

int vkg_os_exists(const char *path)
{
    if (GetFileAttributesA(path) != INVALID_FILE_ATTRIBUTES)
        return 1;
    DWORD e = GetLastError();
    if (e == ERROR_FILE_NOT_FOUND || e == ERROR_PATH_NOT_FOUND)
        return 0;
    errno = errno_of(e);
    return -1;
}

int vkg_os_is_path_sep(int ch)
{
    return ch == '/' || ch == '\\';
}

void vkg_os_temp_dir(char *buf, size_t cap)
{
    if (cap == 0)
        return;
    char dir[MAX_PATH + 2];
    DWORD n = GetTempPathA((DWORD)sizeof dir, dir);
    if (n == 0 || n >= sizeof dir || n >= cap)
        snprintf(dir, sizeof dir, ".");
    snprintf(buf, cap, "%s", dir);
    /* Without its trailing separator, except a drive's root ("C:\\"). */
    for (size_t len = strlen(buf);
         len > 1 && vkg_os_is_path_sep(buf[len - 1]) && buf[len - 2] != ':'; len--)
        buf[len - 1] = '\0';
}

long vkg_os_pid(void)
{
    return (long)GetCurrentProcessId();
}

int vkg_os_getcwd(char *buf, size_t cap)
{
    DWORD n = GetCurrentDirectoryA((DWORD)cap, buf);
    if (n == 0)
        return errno_of(GetLastError());
    return n >= cap ? ERANGE : 0;
}

void vkg_os_hostname(char *buf, size_t cap)
{
    if (cap == 0)
        return;
    DWORD n = (DWORD)cap;
    if (!GetComputerNameA(buf, &n) || !buf[0])
        snprintf(buf, cap, "unknown");
    buf[cap - 1] = '\0';
}

struct vkg_os_lockfile {
    HANDLE h;
};

/* Read the file's first cap - 1 bytes into text through a second, shared handle. */
static void read_text(const char *path, char *text, size_t cap)
{
    HANDLE r = CreateFileA(path, GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE, NULL,
                           OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, NULL);
    DWORD n = 0;
    if (r != INVALID_HANDLE_VALUE) {
        if (!ReadFile(r, text, (DWORD)(cap - 1), &n, NULL))
            n = 0;
        CloseHandle(r);
    }
    text[n] = '\0';
}

int vkg_os_lockfile_take(const char *path, vkg_os_lockfile **out, char *text, size_t cap)
{
    *out = NULL;
    if (text && cap)
        text[0] = '\0';
    HANDLE h = CreateFileA(path, GENERIC_READ | GENERIC_WRITE, FILE_SHARE_READ | FILE_SHARE_WRITE,
                           NULL, OPEN_ALWAYS, FILE_ATTRIBUTE_NORMAL, NULL);
    if (h == INVALID_HANDLE_VALUE)
        return errno_of(GetLastError());
    OVERLAPPED at = {0};
    /* a byte range far past any text, so that reading and writing the text stay possible */
    at.Offset = 0xFFFFFFF0u;
    if (!LockFileEx(h, LOCKFILE_EXCLUSIVE_LOCK | LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &at)) {
        DWORD e = GetLastError();
        CloseHandle(h);
        if (e == ERROR_LOCK_VIOLATION && text && cap)
            read_text(path, text, cap);
        return e == ERROR_LOCK_VIOLATION ? EBUSY : errno_of(e);
    }
    vkg_os_lockfile *l = malloc(sizeof *l);
    if (!l) {
        CloseHandle(h);
        return ENOMEM;
    }
    l->h = h;
    *out = l;
    return 0;
}

int vkg_os_lockfile_write(vkg_os_lockfile *l, const char *text)
{
    LARGE_INTEGER zero = {0};
    DWORD len = (DWORD)strlen(text), n = 0;
    if (!SetFilePointerEx(l->h, zero, NULL, FILE_BEGIN) || !SetEndOfFile(l->h) ||
        !WriteFile(l->h, text, len, &n, NULL))
        return errno_of(GetLastError());
    return n == len ? 0 : EIO;
}

void vkg_os_lockfile_release(vkg_os_lockfile **l)
{
    if (!l || !*l)
        return;
    LARGE_INTEGER zero = {0};
    if (SetFilePointerEx((*l)->h, zero, NULL, FILE_BEGIN))
        SetEndOfFile((*l)->h);
    CloseHandle((*l)->h); /* the lock goes with the handle */
    free(*l);
    *l = NULL;
}
