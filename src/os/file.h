/* Files and folders, in the platform layer (src/os; see clock.h): what crash-safe writing and the
 * checkpoint folder's lock need beyond C11's stdio. Every function returns 0 or an errno value
 * (strerror names it; on Windows the system's error is mapped to the nearest errno value). */
#ifndef VKG_OS_FILE_H
#define VKG_OS_FILE_H

#include <stddef.h>
#include <stdio.h>

/* Create the folder dir (mode 0755 & ~umask on POSIX). 0 also when it exists as a folder;
 * EEXIST when something else of that name is in the way. */
int vkg_os_mkdir(const char *dir);

/* Flush f's buffers and make its data reach the disk (fsync; F_FULLFSYNC on macOS, where fsync
 * stops at the drive's cache; FlushFileBuffers on Windows). */
int vkg_os_flush_to_disk(FILE *f);

/* Rename from over to, replacing any file there, atomically where the system can (rename;
 * MoveFileEx with MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH on Windows). */
int vkg_os_replace(const char *from, const char *to);

/* Make a rename or creation in folder dir survive a crash (fsync of the folder; a file system
 * that cannot sync a folder is accepted; nothing to do on Windows, where MoveFileEx's
 * write-through covers it). */
int vkg_os_sync_dir(const char *dir);

/* Open path for reading, only when it is a regular file (a pipe or a device may never end, and
 * is never opened: it is looked at first): 0 with *fd (close-on-exec) and *size; EINVAL with
 * *not_regular naming what it is ("a directory", "a FIFO (named pipe)", ...); else an errno
 * value (*not_regular NULL). */
int vkg_os_open_read(const char *path, int *fd, unsigned long long *size, const char **not_regular);

/* Read up to n bytes from fd at its position (vkg_os_read) or at byte off (vkg_os_pread, which
 * leaves the position alone), retrying when interrupted: the count (0 at the end), or -1 with
 * errno set. */
long long vkg_os_read(int fd, void *buf, size_t n);
long long vkg_os_pread(int fd, void *buf, size_t n, unsigned long long off);

/* A stdio stream reading fd (which it then owns), or NULL with errno set. */
FILE *vkg_os_fdopen_read(int fd);

/* Close a descriptor of vkg_os_open_read. */
void vkg_os_close(int fd);

/* 1 when path is a regular file (vkg_os_is_file) or a folder (vkg_os_is_dir), 0 otherwise
 * (absent included). */
int vkg_os_is_file(const char *path);
int vkg_os_is_dir(const char *path);

/* The names in folder dir (not "." or ".."), sorted by name, into *out (vkg_os_paths of
 * os/glob.h; free with vkg_os_paths_free). 0, or an errno value (ENOENT: no such folder). */
struct vkg_os_paths;
int vkg_os_list_dir(const char *dir, struct vkg_os_paths *out);

/* Remove the empty folder dir. 0 or an errno value. */
int vkg_os_rmdir(const char *dir);

/* Create a new folder named tmpl with its trailing "XXXXXX" replaced so that nothing of that name
 * existed (mkdtemp; mode 0700 on POSIX), writing the name into tmpl. 0, EINVAL when tmpl does not
 * end in "XXXXXX", or an errno value. */
int vkg_os_mkdtemp(char *tmpl);

/* Read one line of f (up to and with its '\n', if any) into *line (grown as needed, *cap bytes;
 * NUL-terminated), as POSIX getline: its length, or -1 at the end or on an error (errno set). */
long long vkg_os_getline(char **line, size_t *cap, FILE *f);

/* Create the file path, which must not exist yet (EEXIST otherwise), write the n bytes of data into
 * it and make them reach the disk. owner_only: readable by this user alone (mode 0600 on POSIX,
 * else 0644; on Windows the file takes its folder's permissions, as every new file there). */
int vkg_os_write_new(const char *path, int owner_only, const void *data, size_t n);

/* Cut or extend the file at path to size bytes. */
int vkg_os_truncate(const char *path, unsigned long long size);

/* Whether something (a file, a folder, a symbolic link, followed or not) is at path: 1 yes, 0 no
 * (ENOENT), -1 when it cannot be told (errno set). */
int vkg_os_exists(const char *path);

/* 1 when ch separates the folders of a path: '/', and on Windows '\\' too; else 0. */
int vkg_os_is_path_sep(int ch);

/* The folder for temporary files into buf (cap bytes, NUL-terminated, no trailing separator):
 * on POSIX $TMPDIR when it is set, not empty and fits, else "/tmp"; on Windows what GetTempPath
 * gives (%TMP%, %TEMP%, %USERPROFILE% or the Windows folder), else "." (the current folder). */
void vkg_os_temp_dir(char *buf, size_t cap);

/* This process's id. */
long vkg_os_pid(void);

/* The current folder into buf (cap bytes): 0, or an errno value (ERANGE: it does not fit). */
int vkg_os_getcwd(char *buf, size_t cap);

/* This machine's name into buf (cap bytes, NUL-terminated); "unknown" when it has none. */
void vkg_os_hostname(char *buf, size_t cap);

/* An advisory lock on a file, held until released or the process ends however it ends. */
typedef struct vkg_os_lockfile vkg_os_lockfile;

/* Open path (created when absent) and lock it exclusively without waiting. 0 and *out; EBUSY
 * when another holder has it, with the file's first cap - 1 bytes in text (NUL-terminated; what
 * the holder wrote with vkg_os_lockfile_write); else an errno value. text may be NULL. */
int vkg_os_lockfile_take(const char *path, vkg_os_lockfile **out, char *text, size_t cap);

/* Replace the locked file's contents with text. */
int vkg_os_lockfile_write(vkg_os_lockfile *l, const char *text);

/* Empty the file, release the lock and close it; *l = NULL (NULL-safe). */
void vkg_os_lockfile_release(vkg_os_lockfile **l);

#endif
