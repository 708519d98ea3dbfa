/* `vkgpt train --resume` and the run's settings (see train_resume.h): which flags run.json keeps,
 * taking them back as defaults, what a flag given again changes, and the architecture a resumed
 * checkpoint fixes. The file format is runconf.c's; writing it is the trainer's. */
#include "cli/train_resume.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/escape.h"
#include "os/file.h"

static const char *const not_kept[] = {
    "--device",      "--tiles",  "--validation",      "--quiet",      "--init", "--model",
    "--ckpt-dir",    "--resume", "--resume-fallback", "--world-size", "--rank", "--master-addr",
    "--master-port", NULL};
static const char *const arch_flags[] = {"--layers", "--heads", "--channels",
                                         "--ctx",    "--vocab", NULL};

/* Flags whose relative paths run.json keeps from the folder the run started in. */
static const char *const path_flags[] = {"--data", "--val-data", "--vocab-dir",
                                         "--log",  "--trace",    NULL};

/* Outputs: a checkpoint folder may come from someone else, so the files its run.json names are
 * not written (truncated, or an .svg beside them) unless the command line names them again. */
static const char *const output_flags[] = {"--log", "--trace", NULL};

static int listed(const char *const *list, const char *name)
{
    for (int i = 0; list[i]; i++)
        if (!strcmp(list[i], name))
            return 1;
    return 0;
}

void vkg_cli_train_runconf_skip(const vkg_flag *flags, int nflags, int from_init,
                                const vkg_cli_resume *res, const vkg_flags_result *r,
                                unsigned char *skip)
{
    for (int i = 0; i < nflags; i++) {
        int arch = listed(arch_flags, flags[i].name);
        /* Resumed: the shape is the checkpoint's; kept when run.json had it or it was given
         * again (and then checked against the checkpoint), not from the defaults. */
        int unknown = res && res->path[0] && !res->saved.value[i] && !(r && r->seen[i]);
        skip[i] = listed(not_kept, flags[i].name) || (arch && (from_init || unknown))
                      ? VKG_RUNCONF_SKIP
                  : listed(path_flags, flags[i].name) ? VKG_RUNCONF_PATH
                                                      : 0;
    }
}

/* text as printable ASCII (vkg__escape: no line break or control byte of run.json reaches the
 * terminal) in a new string, or NULL when out of memory. */
static char *shown(const char *text)
{
    size_t n = strlen(text);
    char *s = malloc(4 * n + 1);
    if (s)
        vkg__escape(s, 4 * n + 1, text, n);
    return s;
}

/* Append one line to res->notes (truncated when full); the values as a terminal shows them. */
static void note(vkg_cli_resume *res, const char *flag, const char *now, const char *saved)
{
    size_t len = strlen(res->notes);
    char *a = shown(now), *b = shown(saved ? saved : "it unset");
    snprintf(res->notes + len, sizeof res->notes - len, "resume: %s %s (the run had %s)\n", flag,
             a ? a : "?", b ? b : "?");
    free(a);
    free(b);
}

int vkg_cli_train_resume_settings(const char *dir, const vkg_flag *flags, int nflags, int argc,
                                  char **argv, void (*reset)(void *), void *ctx,
                                  vkg_flags_result *r, vkg_cli_resume *res)
{
    unsigned char skip[VKG_FLAGS_MAX];
    char err[1024], *now = malloc(65536);
    int rc = 2;
    memset(res, 0, sizeof *res);
    snprintf(res->path, sizeof res->path, "%s/run.json", dir);
    if (!now) {
        fprintf(stderr, "vkgpt train: out of memory\n");
        return 2;
    }
    vkg_cli_train_runconf_skip(flags, nflags, 0, NULL, NULL, skip);
    reset(ctx);
    int loaded = vkg_cli_runconf_load(res->path, flags, nflags, skip, &res->saved, err, sizeof err);
    if (loaded == 2) {
        fprintf(stderr,
                "vkgpt train: --resume: %s; the run's settings cannot be taken from it (repair or "
                "remove the file: without it every flag not given takes its default)\n",
                err);
        goto done;
    }
    res->found = loaded == 0;
    /* Flags given again win; the same arguments parsed once already, so this cannot fail. */
    if (vkg_flags_parse_args(flags, nflags, argc, argv, NULL, r) != VKG_FLAGS_OK) {
        fprintf(stderr, "vkgpt train: %s\n", r->error);
        goto done;
    }
    for (int i = 0; i < nflags && res->found; i++) {
        if (skip[i] == VKG_RUNCONF_SKIP || !r->seen[i])
            continue;
        int has = vkg_cli_flag_text(&flags[i], now, 65536);
        const char *saved = res->saved.value[i];
        if (!strcmp(flags[i].name, "--tokenizer") && (!saved || strcmp(now, saved))) {
            char *a = shown(now), *b = shown(saved ? saved : "the default for its data");
            fprintf(stderr,
                    "vkgpt train: --tokenizer %s disagrees with the run's tokenizer, %s (%s): the "
                    "checkpoint's token ids are that tokenizer's; drop the flag to continue the "
                    "run, or give a new --ckpt-dir to train a new model\n",
                    a ? a : "?", b ? b : "?", res->path);
            free(a);
            free(b);
            goto done;
        }
        char abs_now[8192], cwd[4096];
        if (skip[i] == VKG_RUNCONF_PATH && now[0] != '/' && vkg_os_getcwd(cwd, sizeof cwd) == 0)
            snprintf(abs_now, sizeof abs_now, "%s/%s", cwd, now); /* as run.json keeps paths */
        else
            snprintf(abs_now, sizeof abs_now, "%s", now);
        if (has && (!saved || strcmp(abs_now, saved)))
            note(res, flags[i].name, now, saved);
    }
    for (int i = 0; i < nflags && res->found; i++) {
        if (!listed(output_flags, flags[i].name) || r->seen[i] || !res->saved.value[i] ||
            flags[i].type != VKG_FLAG_STR)
            continue;
        *(const char **)flags[i].dst = NULL;
        char *b = shown(res->saved.value[i]);
        size_t len = strlen(res->notes);
        snprintf(res->notes + len, sizeof res->notes - len,
                 "resume: %s not taken from the run's settings (it had %s): an output is written "
                 "where the command line says, never where a checkpoint folder says; give it "
                 "again to write there\n",
                 flags[i].name, b ? b : "?");
        free(b);
    }
    rc = 0;
done:
    free(now);
    return rc;
}

void vkg_cli_train_resume_report(const vkg_cli_resume *res, int resume, int rank)
{
    if (!resume || rank != 0 || !res->path[0])
        return;
    if (!res->found) {
        printf("resume: no %s (a run from before vkgpt kept its settings): every flag not given "
               "takes its default\n",
               res->path);
        return;
    }
    printf("resume: settings from %s; flags given again override them\n%s", res->path, res->notes);
}

void vkg_cli_train_arch_given(const vkg_flag *flags, int nflags, const vkg_flags_result *r,
                              int arch_given[5])
{
    for (int i = 0; i < 5; i++)
        arch_given[i] = vkg_flags_seen(flags, nflags, r, arch_flags[i]);
}

void vkg_cli_train_ckpt_line(const vkg_train_config *c, int every)
{
    char each[48] = "", keep[80] = "keeping them all";
    if (!c->ckpt_dir)
        return;
    if (every > 0)
        snprintf(each, sizeof each, "every %d steps and ", every);
    if (c->keep_checkpoints > 0)
        snprintf(keep, sizeof keep, "keeping the newest %d, older ones deleted",
                 c->keep_checkpoints);
    printf("checkpoints: %s, %sat the end; %s (--keep)\n", c->ckpt_dir, each, keep);
}

int vkg_cli_train_check_resumed(vkg_trainer_t *t, const vkg_train_config *c,
                                const int arch_given[5])
{
    vkg_trainer_info info;
    vkg_trainer_get_info(t, &info);
    if (!info.resumed)
        return 0;
    const struct {
        int given, ckpt;
    } arch[5] = {{c->layers, info.layers},
                 {c->heads, info.heads},
                 {c->channels, info.channels},
                 {c->max_seq_len, info.max_seq_len},
                 {c->vocab_size, info.vocab_size}};
    for (int i = 0; i < 5; i++)
        if (arch_given[i] && arch[i].given != arch[i].ckpt) {
            fprintf(stderr,
                    "vkgpt train: %s %d disagrees with the checkpoint resumed at step %lld, whose "
                    "model has %s %d: drop the flag to continue that run, or give a new "
                    "--ckpt-dir to train a new model\n",
                    arch_flags[i], arch[i].given, info.start_step, arch_flags[i], arch[i].ckpt);
            return 2;
        }
    return 0;
}
