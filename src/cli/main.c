/* vkgpt entry point: finds the subcommand in one table and runs it. Holds no logic of its own
 * beyond usage text. */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "os/proc.h"

static const vkg_cli_command commands[] = {
    {"train", vkg_cli_train, "train a GPT-2 model (new, from an llm.c file, or resumed)"},
    {"sample", vkg_cli_sample, "generate text from a checkpoint or an llm.c model file"},
    {"devices", vkg_cli_devices, "list Vulkan devices and the features vkgpt needs"},
    {"prepare", vkg_cli_prepare, "tokenize text into llm.c token shards (train + val)"},
    {"plan", vkg_cli_plan, "device memory per rank and pipeline stage of a training run"},
    {"bench", vkg_cli_bench, "benchmarks: ops, train, allreduce, dp, pp"},
    {"keygen", vkg_cli_keygen, "write a CURVE key pair for authenticated, encrypted transport"},
    {"launch", vkg_cli_launch, "run N local ranks: launch -n N [--pp S] -- train ..."},
};

#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: vkgpt [--verbose] <command> [options]   (vkgpt <command> --help for its "
               "options)\n\n"
               "commands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n--verbose (or VKGPT_VERBOSE=1): errors also name their kind and the places in "
               "the code they passed through\n"
               "VKG_VULKAN_LOADER=PATH: the Vulkan loader library to open at run time instead of "
               "the system's (libvulkan.so.1, vulkan-1.dll, libvulkan.1.dylib or MoltenVK)\n"
               "exit status: 0 done; 1 a failure while running; 2 a usage error (an unknown or bad "
               "flag, flags that conflict, a file or device named that does not exist); 75 "
               "preempted (SIGTERM or SIGUSR1: train and launch save a checkpoint first; run the "
               "same command with --resume); 128 + N stopped by signal N (130: Ctrl-C, also "
               "after a checkpoint)\n");
}

int vkg_cli_verbose(void)
{
    const char *v = getenv("VKGPT_VERBOSE");
    return v && v[0] && strcmp(v, "0") != 0;
}

int vkg_cli_exit_code(vkg_status status)
{
    return status == VKG_ERR_INVALID_ARG || status == VKG_ERR_NOT_FOUND ? 2 : 1;
}

int vkg_cli_report(const char *cmd, vkg_status status)
{
    int verbose = vkg_cli_verbose();
    const char *msg = verbose ? vkg_error_message() : vkg_error_text();
    if (verbose || !msg[0])
        fprintf(stderr, "vkgpt %s: %s", cmd, vkg_status_str(status));
    else
        fprintf(stderr, "vkgpt %s: ", cmd);
    if (verbose)
        fprintf(stderr, " (%s)%s", vkg_status_name(status), msg[0] ? ": " : "");
    /* Messages quote file names and contents: no control character reaches the terminal. */
    for (const unsigned char *p = (const unsigned char *)msg; *p; p++) {
        if (*p < 0x20 || *p == 0x7f)
            fprintf(stderr, "\\x%02x", *p);
        else
            fputc(*p, stderr);
    }
    fputc('\n', stderr);
    return vkg_cli_exit_code(status);
}

int vkg_cli_tiles(const char *cmd, const char *value, vkg_matmul_tiling *out)
{
    *out = (vkg_matmul_tiling){0};
    if (!value)
        return 0;
    if (vkg_matmul_tiling_parse(value, out) == VKG_OK)
        return 0;
    fprintf(stderr, "vkgpt %s: %s\n", cmd,
            vkg_cli_verbose() ? vkg_error_message() : vkg_error_text());
    return 2;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "--verbose")) { /* inherited by launched ranks */
        vkg_os_setenv("VKGPT_VERBOSE", "1", 1);
        argc--, argv++;
    }
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("vkgpt %s\n", VKG_VERSION);
        return 0;
    }
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "vkgpt: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
