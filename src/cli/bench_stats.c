/* `vkgpt bench ops`: the driver's statistics of the pipelines a row used, printed under the row,
 * and the end of a row (its command list and arenas released). The statistics are printed as the
 * driver names them; nothing here judges them. */
#include <stdio.h>
#include <stdlib.h>

#include "cli/bench_ops.h"
#include "cli/internal.h"

/* One pipeline's line for one executable: "#   kernel [spec...] sg N, executable (subgroup S):
 * name value; name value; ...". */
static void print_exec(const vkg_pipestats *p, const vkg_pipestat_exec *x)
{
    printf("#   %s [", vkg__kernel_name(p->kernel));
    for (int i = 0; i < p->nspec; i++)
        printf("%s%u", i ? " " : "", p->spec[i]);
    printf("]");
    if (p->subgroup)
        printf(" required subgroup %u", p->subgroup);
    printf(", %s (subgroup %u): ", x->name, x->subgroup);
    if (x->nstats == 0)
        printf("the driver names no statistic");
    for (int i = 0; i < x->nstats; i++)
        printf("%s%s %s", i ? "; " : "", x->stats[i].name, x->stats[i].value);
    printf("\n");
}

vkg_status vkg_bench_print_stats(vkg_bench *b)
{
    if (!vkg_pipestats_enabled(b->dev))
        return VKG_OK;
    vkg_pipestats *p = NULL;
    int n = 0;
    VKG_TRY(vkg_pipestats_collect(b->dev, &p, &n));
    for (int i = 0; i < n; i++) {
        if (p[i].nexec == 0)
            printf("#   %s: the driver lists no executable\n", vkg__kernel_name(p[i].kernel));
        for (int e = 0; e < p[i].nexec; e++)
            print_exec(&p[i], &p[i].exec[e]);
    }
    free(p);
    return VKG_OK;
}

void vkg_bench_row_end(vkg_bench *b)
{
    vkg_cmd_destroy(&b->cmd);
    while (b->narenas > 0)
        vkg_arena_destroy(&b->arenas[--b->narenas]);
}
