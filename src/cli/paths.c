/* The files and folders a command line names, checked before any work starts: one that does not
 * exist is a usage error (exit 2) naming the flag and the path, whatever the command, instead of
 * an error of whichever part of the library first trips over it. Whether a file that exists can
 * be read, and holds what it should, is the library's business (a failure while running). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "os/file.h"
#include "os/glob.h"
#include "base/escape.h"
#include "cli/cli.h"
#include "vkgpt/train.h"

int vkg_cli_need_path(const char *cmd, const char *what, const char *path, int pattern)
{
    char shown[600];
    if (!path)
        return 0;
    vkg__escape(shown, sizeof shown, path, strlen(path));
    if (pattern) {
        vkg_os_paths g;
        int rc = vkg_os_glob(path, &g);
        vkg_os_paths_free(&g);
        if (rc != VKG_OS_GLOB_NOMATCH)
            return 0; /* matches, or a glob error the data loader reports */
        fprintf(stderr, "vkgpt %s: %s: no file matches '%s'\n", cmd, what, shown);
        return 2;
    }
    if (vkg_os_exists(path) != 0)
        return 0; /* there (or unreadable: the library names why) */
    fprintf(stderr, "vkgpt %s: %s: no such file or folder '%s'\n", cmd, what, shown);
    return 2;
}

int vkg_cli_train_paths(const struct vkg_train_config *c)
{
    int named_tokenizer =
        c->tokenizer && strcmp(c->tokenizer, "byte") && strcmp(c->tokenizer, "gpt2");
    if (vkg_cli_need_path("train", "--data", c->data, 1) ||
        vkg_cli_need_path("train", "--val-data", c->val_data, 1) ||
        vkg_cli_need_path("train", "--init", c->init_path, 0) ||
        vkg_cli_need_path("train", "--tokenizer", named_tokenizer ? c->tokenizer : NULL, 0) ||
        vkg_cli_need_path("train", "--vocab-dir", c->vocab_dir, 0))
        return 2;
    return 0;
}
