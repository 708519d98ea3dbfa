/* What the two halves of os/spawn.h agree on, for src/os alone: os/spawn.c (what every system
 * does alike: remembering how a child ended, stopping and freeing it in order, describing an
 * ending, quoting a command line) and posix/spawn.c or win32/spawn.c (the system's calls: starting
 * a process, its pipes, waiting for it, signalling it). Nothing here is for callers of spawn.h. */
#ifndef VKG_OS_SPAWN_IMPL_H
#define VKG_OS_SPAWN_IMPL_H

#include <stddef.h>

#include "os/spawn.h"

/* The part of a child every system keeps alike: the first member of each system's struct
 * vkg_os_child, so that os/spawn.c reaches it from a vkg_os_child * (a pointer to a struct
 * converts to a pointer to its first member). */
typedef struct vkg_os__child_base {
    long id;   /* the system's number for it (a process id) */
    int ended; /* 1 once reaped; how then holds its ending */
    vkg_os_exit how;
} vkg_os__child_base;

/* This program's path into path (cap bytes): 0, or an errno value with what failed in err. */
int vkg_os__self_path(char *path, size_t cap, char *err, size_t errcap);

/* Start the program at path as vkg_os_spawn_self says: 0 and *out (its base's id set, not ended),
 * or an errno value with what failed in err. */
int vkg_os__spawn(const char *path, char *const *args, const char *const *env, vkg_os_child **out,
                  char *err, size_t errcap);

/* 1 and *how when the child c (not yet known to have ended) has ended, reaping it; 0 while it
 * runs. wait 1 blocks until it has ended (0 then only when the system cannot wait for it). */
int vkg_os__child_reap(vkg_os_child *c, int wait, vkg_os_exit *how);

/* 1 when c (not reaped) is stopped by a signal or a debugger; 0 otherwise or unknown. */
int vkg_os__child_frozen(vkg_os_child *c);

/* Ask c to stop (now 0) or end it at once (now 1); c has not been reaped. */
void vkg_os__child_signal(vkg_os_child *c, int now);

/* Close what the parent holds of c (pipes, handles) and free it; c has ended. */
void vkg_os__child_release(vkg_os_child *c);

/* The name of signal number sig ("SIGKILL", ...), or "a signal" for one without a name here. */
const char *vkg_os__signal_name(int sig);

/* Append arg to the command line at line + *pos (cap bytes in all; NUL-terminated after it,
 * *pos moved past it), a blank before it unless it is the first, quoted as the C runtime's
 * parser on Windows splits a command line back into arguments: in quotes when it is empty or
 * holds a blank, a tab, a newline, a vertical tab or a quote, each quote and the backslashes
 * before it escaped; otherwise as it is. 0, or -1 when it does not fit (*pos unchanged). Windows'
 * CreateProcess takes one such line; POSIX's exec takes the arguments apart. */
int vkg_os__quote_arg(char *line, size_t cap, size_t *pos, const char *arg);

#endif
