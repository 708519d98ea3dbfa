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

/* This process's id. */
long vkg_os_pid(void);

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
