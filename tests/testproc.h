/* Child processes and temporary folders for the end-to-end tests, which run the built vkgpt binary
 * (VKGPT_BIN, defined by the build for each test that compiles testproc.c): start it with
 * arguments, extra environment entries and limits, collect its stdout and stderr through poll()
 * into growing buffers, and reap it within a time bound, failing the test (cmocka) past it. It
 * does not judge the output; terminals (pseudo-terminals) and subreaping are left to the tests. */
#ifndef VKG_TESTPROC_H
#define VKG_TESTPROC_H

#include <stddef.h>
#include <sys/types.h>

#include "testutil.h"

typedef struct vkg_test_proc {
    pid_t pid;
    int fd[2];    /* stdout and stderr read ends; -1 at EOF, once closed, or (stderr) when merged */
    char *buf[2]; /* NUL-terminated output so far: stdout (with stderr when merged) and stderr */
    size_t len[2]; /* bytes in buf[0] and buf[1] */
    int done;      /* 1 once the child has been reaped */
    int status;    /* once done: its exit code, or 128 + signal when a signal ended it */
    int wstatus;   /* once done: the raw status from waitpid() */
} vkg_test_proc;

typedef struct vkg_test_proc_opts {
    const char *const *env; /* NULL-terminated "NAME=value" entries added to the child's
                               environment, or NULL */
    int merge_stderr;       /* 1: the child's stderr goes to buf[0] with its stdout */
    size_t address_space;   /* the child's RLIMIT_AS in bytes; 0 for no limit */
} vkg_test_proc_opts;

/* Seconds on the monotonic clock. */
double vkg_test_now(void);

/* Start VKGPT_BIN with args (NULL-terminated, without the binary's own name, at most 62) and opts
 * (NULL: no extra environment, separate stderr, no limit); the command line is echoed to stdout.
 * The child's output is collected by vkg_test_proc_pump/wait; free *p with vkg_test_proc_free.
 * Fails the test when the pipes or the fork cannot be made. */
void vkg_test_proc_start(vkg_test_proc *p, const char *const *args, const vkg_test_proc_opts *opts);

/* Read the child's output for up to wait_s seconds, returning early once buf[0] contains `until`
 * (when not NULL) or both pipes are at EOF and the child is reaped; reaps the child (without
 * blocking) when it has exited. Returns 1 when buf[0] contains `until`, else 0. Never kills. */
int vkg_test_proc_pump(vkg_test_proc *p, double wait_s, const char *until);

/* Collect the output and reap the child within timeout_s seconds; returns its exit code (128 +
 * signal when a signal ended it) and prints its stderr when separate and not empty. Past the
 * bound it kills the child (SIGKILL), reaps it and fails the test with the output so far. Closes
 * the pipes, so output written later by the child's own children is lost. */
int vkg_test_proc_wait(vkg_test_proc *p, double timeout_s);

/* Kill the child with SIGKILL when it is not yet reaped, reap it and close the pipes. */
void vkg_test_proc_kill(vkg_test_proc *p);

/* Kill the child if it still runs (vkg_test_proc_kill), free the buffers and zero *p. */
void vkg_test_proc_free(vkg_test_proc *p);

/* Force the Khronos validation layer on for every child started from now on (the loader's
 * VK_INSTANCE_LAYERS), logging every info, warning, error and performance message to log_path,
 * with synchronization validation when sync is set; its settings file is written in dir.
 * Returns 0, or -1 when the settings file cannot be written. */
int vkg_test_validation_force(const char *dir, const char *log_path, int sync);

/* Fail the test unless the last child ran with the layer active (when it opened a device) and
 * the layer reported nothing; then remove the log for the next child. */
void vkg_test_validation_clean(const char *log_path, int opened_device);

#endif
