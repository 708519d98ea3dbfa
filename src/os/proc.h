/* This process, in the platform layer (src/os; see clock.h): stop requests (the user or another
 * process asking it to stop: SIGINT and SIGTERM on POSIX, through sigaction; the console's events
 * on Windows, through SetConsoleCtrlHandler, which has no signals between processes) and its
 * peak memory. */
#ifndef VKG_OS_PROC_H
#define VKG_OS_PROC_H

/* The numbers a stop request is reported by, as POSIX numbers SIGINT and SIGTERM everywhere
 * (exit codes 128 + n mean the same on every system). */
enum { VKG_OS_STOP_INTERRUPT = 2, VKG_OS_STOP_TERMINATE = 15 };

/* From now on call fn(VKG_OS_STOP_INTERRUPT) on SIGINT (Windows: Ctrl+C) and
 * fn(VKG_OS_STOP_TERMINATE) on SIGTERM (Windows: Ctrl+Break, the console closing, logoff,
 * shutdown), and on POSIX fn(SIGUSR1) on SIGUSR1 (Slurm's preemption notice; its number is the
 * system's: 10 on Linux, 30 on macOS), replacing the process's earlier handling. fn runs in a
 * signal handler (POSIX, without SA_RESTART: a blocking call returns EINTR) or on a thread the
 * system starts (Windows): it may only store to a volatile sig_atomic_t or a lock-free atomic. On
 * Windows the system ends the process soon after fn returns for the closing, logoff and shutdown
 * events. A child of vkg_os_spawn_self (os/spawn.h) also gets fn(VKG_OS_STOP_TERMINATE) when its
 * parent asks it to stop (Windows: an event it waits on in a thread) or, where the kernel does not
 * send SIGTERM for it (POSIX but Linux), when its parent is gone. */
void vkg_os_on_stop(void (*fn)(int stop));

/* The most memory this process has held resident so far, in bytes (getrusage's ru_maxrss,
 * kibibytes on Linux, bytes on macOS; GetProcessMemoryInfo's peak working set on Windows); 0
 * when unknown. */
unsigned long long vkg_os_peak_rss(void);

/* Set the environment variable name to value for this process and those it starts; with
 * overwrite 0 an existing value stays. 0, or an errno value. */
int vkg_os_setenv(const char *name, const char *value, int overwrite);

/* 1 when this process's standard output (stream 1) or standard error (stream 2) is a terminal
 * (isatty; _isatty on Windows), else 0. */
int vkg_os_isatty(int stream);

/* Have the C library keep large freed blocks for reuse instead of returning them to the system
 * at once (glibc: mallopt's mmap threshold at its largest, 32 MiB, and a 1 GiB trim threshold, so
 * that the transport's large buffers are not mapped and unmapped every step); nothing elsewhere. */
void vkg_os_tune_malloc(void);

/* The CPUs online (sysconf; GetSystemInfo on Windows), at least 1. */
int vkg_os_cpu_count(void);

/* Run this process on CPU cpu modulo the CPUs online only (Linux: sched_setaffinity; Windows:
 * SetProcessAffinityMask, within the first 64). 0, or an errno value (ENOTSUP where the system
 * has no such call, as macOS). */
int vkg_os_bind_cpu(int cpu);

/* A write to a pipe or socket whose reader is gone fails (EPIPE) instead of ending the process
 * (SIGPIPE ignored on POSIX; Windows has no such signal). */
void vkg_os_ignore_broken_pipe(void);

#endif
