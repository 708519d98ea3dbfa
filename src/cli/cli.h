/* The vkgpt command-line tool: one function per subcommand, dispatched from main.c.
 * Each subcommand parses its own flags (errors list the valid values), prints to stdout/stderr,
 * and returns the process exit code: 0 success, 1 runtime failure, 2 usage error. */
#ifndef VKG_CLI_H
#define VKG_CLI_H

#include "vkgpt/status.h"

typedef int (*vkg_cli_fn)(int argc, char **argv);

typedef struct vkg_cli_command {
    const char *name;    /* "devices", "bench", ... */
    vkg_cli_fn run;      /* argv[0] is the subcommand name */
    const char *summary; /* one line for `vkgpt help` */
} vkg_cli_command;

/* Print "vkgpt <cmd>: <status name>: <thread's error message>" to stderr and return 1. */
int vkg_cli_report(const char *cmd, vkg_status status);

/* Subcommands (one file each under src/cli/). */
int vkg_cli_devices(int argc, char **argv);
int vkg_cli_prepare(int argc, char **argv);
int vkg_cli_bench(int argc, char **argv);
int vkg_cli_bench_ops(int argc, char **argv);
int vkg_cli_train(int argc, char **argv);
int vkg_cli_sample(int argc, char **argv);
int vkg_cli_bench_allreduce(int argc, char **argv);
int vkg_cli_keygen(int argc, char **argv);


#endif
