/* vkgpt entry point: finds the subcommand in one table and runs it. Holds no logic of its own
 * beyond usage text. */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

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
    fprintf(f, "usage: vkgpt <command> [options]   (vkgpt <command> --help for its options)\n\n"
               "commands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
}

int vkg_cli_report(const char *cmd, vkg_status status)
{
    const char *msg = vkg_error_message();
    fprintf(stderr, "vkgpt %s: %s (%s)%s", cmd, vkg_status_str(status), vkg_status_name(status),
            msg[0] ? ": " : "");
    /* Messages quote file names and contents: no control character reaches the terminal. */
    for (const unsigned char *p = (const unsigned char *)msg; *p; p++) {
        if (*p < 0x20 || *p == 0x7f)
            fprintf(stderr, "\\x%02x", *p);
        else
            fputc(*p, stderr);
    }
    fputc('\n', stderr);
    return 1;
}

int vkg_cli_tiles(const char *cmd, const char *value, vkg_matmul_tiling *out)
{
    *out = (vkg_matmul_tiling){0};
    if (!value)
        return 0;
    if (vkg_matmul_tiling_parse(value, out) == VKG_OK)
        return 0;
    fprintf(stderr, "vkgpt %s: %s\n", cmd, vkg_error_message());
    return 2;
}

int main(int argc, char **argv)
{
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
