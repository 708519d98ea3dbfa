/* Child processes, in the platform layer (src/os; see clock.h): start this very program again with
 * other arguments and variables, read what it prints, ask it to stop or end it, and learn how it
 * ended. A child never outlives the process that started it, however that one ends: on Linux the
 * kernel sends it SIGTERM (PR_SET_PDEATHSIG); on Windows it is in a job object that kills its
 * processes when the last handle to it closes; on other POSIX systems it holds the read end of a
 * pipe whose write end only the parent holds, and its vkg_os_on_stop takes the pipe's end as a
 * request to stop. */
#ifndef VKG_OS_SPAWN_H
#define VKG_OS_SPAWN_H

#include <stddef.h>

typedef struct vkg_os_child vkg_os_child;

/* How a child ended: killed by signal (POSIX; 0 when it exited), or its exit code (on Windows
 * every ending is an exit code: a child ended with vkg_os_child_stop(c, 1) exits 137, 128 + 9,
 * as a SIGKILLed one is reported by shells). */
typedef struct vkg_os_exit {
    int signal;
    int code;
} vkg_os_exit;

/* Start this program (the running executable) with args (args[0] is the name it sees; NULL
 * ends the list) and this process's environment with env's "NAME=value" strings (NULL-ended; may
 * be NULL) set over it. Its standard output and error go to two pipes that vkg_os_children_pump
 * reads; its standard input is this process's. 0 and *out, or an errno value with what failed
 * in err. */
int vkg_os_spawn_self(char *const *args, const char *const *env, vkg_os_child **out, char *err,
                      size_t cap);

/* Wait up to timeout_ms for output of any of the n children (NULL entries are skipped), then
 * hand each piece read to fn(ctx, k, stream, data, len) (k: the index in cs; stream 0 standard
 * output, 1 standard error) and each stream's end as fn(ctx, k, stream, NULL, 0), once. Returns
 * the number of streams still open. */
int vkg_os_children_pump(vkg_os_child *const *cs, int n, int timeout_ms,
                         void (*fn)(void *ctx, int k, int stream, const char *data, size_t len),
                         void *ctx);

/* 1 and *how when the child has ended (it is reaped; later calls return the same), 0 while it
 * runs. Never blocks. */
int vkg_os_child_ended(vkg_os_child *c, vkg_os_exit *how);

/* 1 when the child is alive but frozen: stopped by a signal (SIGSTOP, SIGTSTP) or a debugger, so
 * it runs no more until continued (Linux: its state in /proc; 0 on systems where it cannot be
 * seen, and on Windows, which has no such state). 0 once it has ended. Never blocks. */
int vkg_os_child_frozen(vkg_os_child *c);

/* now 0: ask the child to stop (POSIX: SIGTERM; Windows: an event its vkg_os_on_stop turns into
 * VKG_OS_STOP_TERMINATE); now 1: end it at once (SIGKILL; TerminateProcess). Nothing once it has
 * ended. */
void vkg_os_child_stop(vkg_os_child *c, int now);

/* The system's number for the child (a process id), for messages. */
long vkg_os_child_id(const vkg_os_child *c);

/* Release what the parent holds of the child (its pipes and handles). An unended child is ended
 * first (vkg_os_child_stop(c, 1)) and waited for. NULL does nothing. */
void vkg_os_child_free(vkg_os_child *c);

/* "exited with status N" or "was killed by signal N (name)", into buf. */
void vkg_os_exit_describe(vkg_os_exit how, char *buf, size_t cap);

#endif
