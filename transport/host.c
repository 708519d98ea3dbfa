/* Host identity: which ranks of a job share a machine closely enough to share memory. A rank
 * reports its host name, the kernel's boot id and the IPC and network namespaces it runs in; two
 * ranks are local to each other only when all four agree (two containers, or two network
 * namespaces of one machine, are different hosts: the memfd handover goes through an abstract Unix
 * socket, which lives in a network namespace). Not here: what local ranks do with that (shm.c).
 */
#include "comm_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "os/file.h"
#include "os/host.h"

vkg_status vkg__host_identity(char *out, size_t cap)
{
    char host[72], kernel[160];
    vkg_os_hostname(host, sizeof host);
    vkg_os_kernel_identity(kernel, sizeof kernel);
    out[0] = '\0';
    /* without a boot id or namespaces nothing proves two ranks share a kernel: stay unknown,
     * local to nobody */
    if (!kernel[0])
        return VKG_OK;
    /* Test-only: the transport's tests fake several hosts with processes of one machine by
     * giving each "host" its own tag; nothing else sets this variable. */
    const char *tag = getenv("VKG_TEST_HOST_TAG");
    int n = snprintf(out, cap, "%s %s%s%s", host, kernel, tag && tag[0] ? " test-host=" : "",
                     tag && tag[0] ? tag : "");
    VKG_CHECK(n > 0 && (size_t)n < cap, VKG_ERR_IO, "host identity too long (%d bytes)", n);
    return VKG_OK;
}

void vkg__find_local(vkg_comm_t *c)
{
    const char *me = c->peers[c->rank].host;
    c->nlocal = 0;
    c->local_index = -1;
    for (int q = 0; q < c->size; q++) {
        if (q != c->rank && (!me[0] || strcmp(c->peers[q].host, me)))
            continue;
        if (q == c->rank)
            c->local_index = c->nlocal;
        c->local[c->nlocal++] = q;
    }
}

/* Rank q's host: the first rank with the same identity (a rank of unknown host is its own). */
static int host_of(const vkg_comm_t *c, int q)
{
    if (!c->peers[q].host[0])
        return q;
    for (int p = 0; p < q; p++)
        if (!strcmp(c->peers[p].host, c->peers[q].host))
            return p;
    return q;
}

void vkg__find_hosts(vkg_comm_t *c)
{
    int *count = calloc((size_t)c->size, sizeof *count); /* ranks per host, at its first rank */
    c->nhosts = 0;
    c->hosts_uniform = count != NULL;
    c->across_index = -1;
    c->lanes = c->most_local = c->nlocal;
    if (!count)
        return;
    for (int q = 0; q < c->size; q++)
        count[host_of(c, q)]++;
    for (int h = 0; h < c->size; h++) {
        if (!count[h])
            continue;
        if (count[h] != c->nlocal)
            c->hosts_uniform = 0;
        c->lanes = count[h] < c->lanes ? count[h] : c->lanes;
        c->most_local = count[h] > c->most_local ? count[h] : c->most_local;
        /* the rank of host h whose local index is this rank's; host h's ranks */
        int seen = 0, pick = -1;
        for (int q = h; q < c->size; q++) {
            if (host_of(c, q) != h)
                continue;
            if (seen++ == c->local_index)
                pick = q;
            c->host_of[q] = c->nhosts;
        }
        if (pick == c->rank)
            c->across_index = c->nhosts;
        c->leaders[c->nhosts] = h;
        c->across[c->nhosts++] = pick;
    }
    free(count);
}
