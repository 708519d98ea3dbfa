/* The host's shared-memory segment: creating it, handing it to the local ranks, and deciding
 * whether the collectives use it (vkg__shm_setup, called by create after the first barrier).
 *
 * The host's first rank creates an anonymous memfd (no name in any file system; sealed against
 * shrinking, so no rank can make another's accesses fault), maps it and listens on an abstract
 * Unix socket named by 16 random bytes it drew for this segment and sent to the segment's ranks
 * over the job's own messages (shm_setup.c): nobody outside the job can predict the name, so
 * nobody can bind it first. Both ends check that the other runs as the same user
 * (SO_PEERCRED). Each other local rank connects and both prove they hold the job's secret
 * without sending it: the rank sends {version, job, generation, rank, nonce}, the host answers
 * with its own nonce and BLAKE2b keyed with the secret over ("host" | ids | both nonces), the
 * rank checks that and answers the same over "rank"; only then does the host pass the memfd
 * (SCM_RIGHTS). A process of another job, user or handover version, or without the secret, is
 * refused with a reason and never sees the descriptor.
 * The listener closes once every local rank has attached, so the segment is reachable only
 * through the ranks' descriptors and mappings and vanishes with the last of them.
 * Not here: deciding whether to use the segment (shm_setup.c), the collectives in it
 * (shm_coll.c).
 */
#include "shm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_testing.h"
#include "os/clock.h"
#include "os/shm.h"

#define MSG_HELLO 0x48534b56u /* "VKSH" */
#define MSG_CHAL 0x43534b56u  /* "VKSC" */
#define MSG_PROOF 0x50534b56u /* "VKSP" */
#define MSG_FD 0x46534b56u    /* "VKSF" */
/* 2: keyed BLAKE2b proofs and a version word (1: SipHash, the word at offset 4 was the status) */
#define HANDOVER_VERSION 2u
#define REFUSED 1u
#define STEP_MS 2000 /* one message of the handover waits at most this long */

typedef struct shm_msg {
    uint32_t magic, version, status, rank, generation, pad;
    uint64_t job_id, bytes;
    uint8_t nonce[16], mac[VKG_MAC_BYTES];
    char why[256]; /* status REFUSED: the reason */
} shm_msg;

size_t vkg__shm_layout(int n, size_t chunk, size_t pool, size_t *data_off, size_t *pool_off)
{
    size_t head = 128 + (size_t)n * (sizeof(vkg_shm_ctl) + VKG_SHM_REASON);
    *data_off = (head + 4095) & ~(size_t)4095;
    *pool_off = *data_off + (size_t)n * VKG_SHM_SLOTS * chunk; /* chunk: a multiple of 4 KiB */
    return *pool_off + (size_t)n * pool;
}

void vkg__shm_bind(struct vkg_shm *s, uint8_t *base, size_t bytes, int n, int me)
{
    s->base = base;
    s->bytes = bytes;
    s->hdr = (vkg_shm_hdr *)base;
    s->ctl = (vkg_shm_ctl *)(base + 128);
    s->reasons = (char *)(base + 128 + (size_t)n * sizeof(vkg_shm_ctl));
    s->data = base + s->hdr->data_off;
    s->chunk = s->hdr->chunk;
    s->slots = (int)s->hdr->slots;
    s->pool = base + s->hdr->pool_off;
    s->pool_bytes = s->hdr->pool_bytes;
    s->n = n;
    s->me = me;
}

void vkg__shm_socket_name(const uint8_t tag[VKG_SHM_TAG_BYTES], char *name, size_t cap)
{
    size_t len = (size_t)snprintf(name, cap, "vkgpt-shm-");
    for (int i = 0; i < VKG_SHM_TAG_BYTES && len + 3 <= cap; i++)
        len += (size_t)snprintf(name + len, cap - len, "%02x", tag[i]);
}

/* BLAKE2b keyed with the secret over role | job | generation | rank | host nonce | rank nonce. */
static void proof(const vkg_shm_creds *cr, const char *role, uint32_t rank, const uint8_t *nh,
                  const uint8_t *nr, uint8_t out[VKG_MAC_BYTES])
{
    uint8_t m[4 + 8 + 4 + 4 + 32];
    memcpy(m, role, 4);
    memcpy(m + 4, &cr->job_id, 8);
    memcpy(m + 12, &cr->generation, 4);
    memcpy(m + 16, &rank, 4);
    memcpy(m + 20, nh, 16);
    memcpy(m + 36, nr, 16);
    vkg__crypto_mac(cr->secret, m, sizeof m, out);
}

static vkg_status nonce(uint8_t out[16])
{
    return vkg__crypto_random(out, 16);
}

/* VKG_OK when the process at the other end of fd runs as this process's user. Test-only:
 * VKG_TEST_SHM_PEER_UID adds its value to the peer's uid as read, so that a test without a
 * second user can see a peer of another one. */
static vkg_status same_user(int fd, const char *who)
{
    unsigned uid = 0;
    long pid = 0;
    int e = vkg_os_local_peer(fd, &uid, &pid);
    VKG_CHECK(e == 0, VKG_ERR_NETWORK, "shared memory handover: reading the credentials of %s: %s",
              who, strerror(e));
    const char *fake = getenv("VKG_TEST_SHM_PEER_UID");
    if (fake && *fake)
        uid += (unsigned)strtoul(fake, NULL, 10);
    VKG_CHECK(uid == vkg_os_euid(), VKG_ERR_PEER,
              "shared memory handover: %s (pid %ld) runs as uid %u, this job as uid %u", who, pid,
              uid, vkg_os_euid());
    return VKG_OK;
}

/* Receive one message (and a descriptor, when fd_out is given) within ms. */
static vkg_status recv_msg(int fd, shm_msg *m, int *fd_out, int ms, const char *from)
{
    memset(m, 0, sizeof *m);
    long n = 0;
    int e = vkg_os_local_recv(fd, m, sizeof *m, fd_out, ms, &n);
    VKG_CHECK(e != ETIMEDOUT, VKG_ERR_TIMEOUT,
              "shared memory handover: %s sent nothing within %d ms", from, ms);
    VKG_CHECK(e == 0, VKG_ERR_NETWORK, "shared memory handover: receiving from %s: %s", from,
              strerror(e));
    /* version 1 put the status (0 or 1) where the version is now */
    uint32_t v = n >= 8 ? (m->version > 1 ? m->version : 1) : 0;
    VKG_CHECK(n < 8 || v == HANDOVER_VERSION, VKG_ERR_PROTOCOL,
              "shared memory handover: %s speaks handover version %u, this build speaks version "
              "%u (mixed vkgpt versions in one job)",
              from, (unsigned)v, HANDOVER_VERSION);
    VKG_CHECK(n == (long)sizeof *m, VKG_ERR_PROTOCOL,
              "shared memory handover: %s sent %ld bytes, expected %zu (closed, or not a vkgpt "
              "rank of this version)",
              from, n, sizeof *m);
    m->why[sizeof m->why - 1] = '\0';
    return VKG_OK;
}

static vkg_status send_msg(int fd, const shm_msg *m, int pass_fd)
{
    long n = 0;
    int e = vkg_os_local_send(fd, m, sizeof *m, pass_fd, &n);
    VKG_CHECK(e == 0 && n == (long)sizeof *m, VKG_ERR_NETWORK, "shared memory handover: send: %s",
              strerror(e ? e : EIO));
    return VKG_OK;
}

static void refuse(int fd, uint32_t magic, const char *why)
{
    shm_msg m = {.magic = magic, .version = HANDOVER_VERSION, .status = REFUSED};
    snprintf(m.why, sizeof m.why, "%s", why);
    (void)send_msg(fd, &m, -1);
}

/* The host's side of one connection. *rank_out: the rank that attached (-1 if refused). */
static vkg_status serve_one(int cfd, const vkg_shm_creds *cr, int nranks, const int *attached,
                            int seg_fd, size_t seg_bytes, int *rank_out, char *wrong_user,
                            size_t cap)
{
    *rank_out = -1;
    shm_msg m, r;
    char why[200];
    vkg_status st = same_user(cfd, "a connecting process");
    if (st < 0) {
        refuse(cfd, MSG_CHAL, "not this job's user");
        snprintf(wrong_user, cap, "%s", vkg_error_message());
        return st;
    }
    st = recv_msg(cfd, &m, NULL, STEP_MS, "a connecting process");
    if (st < 0) {
        refuse(cfd, MSG_CHAL, vkg_error_message());
        return st;
    }
    if (m.magic != MSG_HELLO) {
        refuse(cfd, MSG_CHAL, "not a vkgpt shared memory request");
        return VKG_FAIL(VKG_ERR_PROTOCOL, "shared memory handover: malformed request refused");
    }
    if (m.job_id != cr->job_id || m.generation != cr->generation) {
        snprintf(why, sizeof why, "job %016llx generation %u is not this job",
                 (unsigned long long)m.job_id, (unsigned)m.generation);
        refuse(cfd, MSG_CHAL, why);
        return VKG_FAIL(VKG_ERR_PEER, "shared memory handover refused: %s", why);
    }
    if (m.rank == 0 || m.rank >= (uint32_t)nranks || attached[m.rank]) {
        snprintf(why, sizeof why, "rank %u is not a local rank still to attach", (unsigned)m.rank);
        refuse(cfd, MSG_CHAL, why);
        return VKG_FAIL(VKG_ERR_PEER, "shared memory handover refused: %s", why);
    }
    r = (shm_msg){.magic = MSG_CHAL, .version = HANDOVER_VERSION, .rank = m.rank};
    VKG_TRY(nonce(r.nonce));
    proof(cr, "host", m.rank, r.nonce, m.nonce, r.mac);
    VKG_TRY(send_msg(cfd, &r, -1));
    shm_msg p;
    VKG_TRY(recv_msg(cfd, &p, NULL, STEP_MS, "a connecting process"));
    uint8_t want[VKG_MAC_BYTES];
    proof(cr, "rank", m.rank, r.nonce, m.nonce, want);
    if (p.magic != MSG_PROOF || !vkg__crypto_same_mac(p.mac, want)) {
        refuse(cfd, MSG_FD, "no proof of this job's secret");
        return VKG_FAIL(VKG_ERR_PEER,
                        "shared memory handover refused to a process claiming rank %u: it does "
                        "not hold this job's secret",
                        (unsigned)m.rank);
    }
    shm_msg f = {.magic = MSG_FD, .version = HANDOVER_VERSION, .rank = m.rank, .bytes = seg_bytes};
    VKG_TRY(send_msg(cfd, &f, seg_fd));
    *rank_out = (int)m.rank;
    return VKG_OK;
}

vkg_status vkg__shm_serve(int lfd, const vkg_shm_creds *cr, int nranks, int seg_fd,
                          size_t seg_bytes, int64_t deadline, int *refusals)
{
    int *attached = calloc((size_t)nranks, sizeof *attached);
    VKG_CHECK(attached != NULL, VKG_ERR_NOMEM, "out of memory");
    int left = nranks - 1;
    vkg_status st = VKG_OK;
    char wrong_user[300] = "";
    while (left > 0) {
        int64_t now = vkg__now_ns();
        if (wrong_user[0] && now >= deadline) { /* a rank of another user: said at once */
            st = VKG_FAIL(VKG_ERR_PEER,
                          "shared memory handover refused a process of another user (%s): every "
                          "rank of a job must run as one user",
                          wrong_user);
            break;
        }
        if (now >= deadline) {
            char missing[128] = "";
            size_t len = 0;
            for (int q = 1; q < nranks && len + 12 < sizeof missing; q++)
                if (!attached[q])
                    len += (size_t)snprintf(missing + len, sizeof missing - len, " %d", q);
            st = VKG_FAIL(VKG_ERR_TIMEOUT,
                          "shared memory handover: ranks%s did not attach to the segment in time",
                          missing);
            break;
        }
        int cfd = -1;
        if (vkg_os_local_accept(lfd, (int)((deadline - now) / 1000000) + 1, &cfd) != 0)
            continue;
        int rank = -1;
        int had = wrong_user[0] != '\0';
        if (serve_one(cfd, cr, nranks, attached, seg_fd, seg_bytes, &rank, wrong_user,
                      sizeof wrong_user) == VKG_OK &&
            rank > 0) {
            attached[rank] = 1;
            left--;
        } else if (refusals) {
            (*refusals)++;
        }
        /* the job's own ranks connect at once: a second more for them, not the whole timeout */
        if (!had && wrong_user[0] && deadline > vkg__now_ns() + 1000000000)
            deadline = vkg__now_ns() + 1000000000;
        vkg_os_shm_close(cfd);
    }
    free(attached);
    return st;
}

vkg_status vkg__shm_attach(const char *name, const vkg_shm_creds *cr, int rank, int64_t deadline,
                           int *fd_out, size_t *bytes_out)
{
    *fd_out = -1;
    int fd = -1;
    for (;;) {
        int e = vkg_os_local_connect(name, &fd);
        if (e == 0)
            break;
        VKG_CHECK((e == ECONNREFUSED || e == ENOENT || e == EAGAIN) && vkg__now_ns() < deadline,
                  VKG_ERR_TIMEOUT,
                  "shared memory handover: cannot reach the host's first rank at @%s: %s", name,
                  strerror(e));
        vkg_os_sleep_ms(2);
    }
    shm_msg m = {.magic = MSG_HELLO,
                 .version = HANDOVER_VERSION,
                 .rank = (uint32_t)rank,
                 .generation = cr->generation,
                 .job_id = cr->job_id};
    vkg_status st = same_user(fd, "the process listening at the segment's socket");
    if (st == VKG_OK)
        st = nonce(m.nonce);
    shm_msg r = {0}, f;
    if (st == VKG_OK)
        st = send_msg(fd, &m, -1);
    if (st == VKG_OK)
        st = recv_msg(fd, &r, NULL, STEP_MS, "the host's first rank");
    uint8_t want[VKG_MAC_BYTES];
    proof(cr, "host", (uint32_t)rank, r.nonce, m.nonce, want);
    if (st == VKG_OK && r.status == REFUSED)
        st = VKG_FAIL(VKG_ERR_PEER, "the host's first rank refused the segment: %s", r.why);
    else if (st == VKG_OK && (r.magic != MSG_CHAL || !vkg__crypto_same_mac(r.mac, want)))
        st = VKG_FAIL(VKG_ERR_PEER,
                      "shared memory handover: the process at @%s does not hold this job's "
                      "secret; not attaching",
                      name);
    if (st == VKG_OK) {
        shm_msg p = {.magic = MSG_PROOF, .version = HANDOVER_VERSION, .rank = (uint32_t)rank};
        proof(cr, "rank", (uint32_t)rank, r.nonce, m.nonce, p.mac);
        st = send_msg(fd, &p, -1);
    }
    int got = -1;
    if (st == VKG_OK)
        st = recv_msg(fd, &f, &got, STEP_MS, "the host's first rank");
    if (st == VKG_OK && f.status == REFUSED)
        st = VKG_FAIL(VKG_ERR_PEER, "the host's first rank refused the segment: %s", f.why);
    else if (st == VKG_OK && (f.magic != MSG_FD || got < 0))
        st = VKG_FAIL(VKG_ERR_PROTOCOL, "shared memory handover: no segment descriptor came");
    vkg_os_shm_close(fd);
    if (st < 0) {
        if (got >= 0)
            vkg_os_shm_close(got);
        return st;
    }
    *fd_out = got;
    *bytes_out = (size_t)f.bytes;
    return VKG_OK;
}

vkg_status vkg__shm_listen(const char *name, int *lfd_out)
{
    int fd = -1, e = vkg_os_local_listen(name, &fd);
    if (e != 0) {
        return VKG_FAIL(VKG_ERR_NETWORK,
                        "shared memory handover: cannot listen at @%s: %s (another process holds "
                        "the name)",
                        name, strerror(e));
    }
    *lfd_out = fd;
    return VKG_OK;
}

vkg_status vkg__shm_create_fd(const vkg_shm_creds *cr, int n, size_t chunk, size_t pool,
                              int *fd_out, size_t *bytes_out)
{
    size_t data_off, pool_off, bytes = vkg__shm_layout(n, chunk, pool, &data_off, &pool_off);
    int fd = -1, e = vkg_os_shm_new(&fd);
    VKG_CHECK(e == 0, VKG_ERR_UNSUPPORTED, "memfd_create: %s", strerror(e));
    vkg_status st = VKG_OK;
    void *p = NULL;
    if ((e = vkg_os_shm_resize(fd, bytes)) != 0)
        st = VKG_FAIL(VKG_ERR_NOMEM, "sizing the segment to %zu bytes: %s", bytes, strerror(e));
    else if ((e = vkg_os_shm_seal(fd)) != 0)
        st = VKG_FAIL(VKG_ERR_UNSUPPORTED, "sealing the segment: %s", strerror(e));
    else if ((e = vkg_os_shm_map(fd, bytes, &p)) != 0)
        st = VKG_FAIL(VKG_ERR_NOMEM, "mapping the segment (%zu bytes): %s", bytes, strerror(e));
    if (st < 0) {
        vkg_os_shm_close(fd);
        return st;
    }
    vkg_shm_hdr *h = p;
    h->magic = VKG_SHM_MAGIC;
    h->version = VKG_SHM_VERSION;
    h->job_id = cr->job_id;
    h->generation = cr->generation;
    h->nlocal = (uint32_t)n;
    h->chunk = chunk;
    h->slots = VKG_SHM_SLOTS;
    h->total_bytes = bytes;
    h->data_off = data_off;
    h->pool_off = pool_off;
    h->pool_bytes = pool;
    vkg_os_shm_unmap(p, bytes);
    *fd_out = fd;
    *bytes_out = bytes;
    return VKG_OK;
}

vkg_status vkg__shm_map(int fd, const vkg_shm_creds *cr, int n, size_t chunk, uint8_t **base_out,
                        size_t *bytes_out)
{
    size_t bytes = 0, data_off, pool_off;
    int e = vkg_os_shm_size(fd, &bytes);
    VKG_CHECK(e == 0, VKG_ERR_IO, "fstat of the segment: %s", strerror(e));
    VKG_CHECK(vkg_os_shm_sealed(fd), VKG_ERR_PROTOCOL,
              "the segment handed over is not sealed against shrinking");
    /* the pools' size is the creator's (from the header): map the whole, then check it */
    VKG_CHECK(bytes >= 4096, VKG_ERR_PROTOCOL, "the segment has only %zu bytes", bytes);
    void *m = NULL;
    e = vkg_os_shm_map(fd, bytes, &m);
    VKG_CHECK(e == 0, VKG_ERR_NOMEM, "mapping the segment (%zu bytes): %s", bytes, strerror(e));
    uint8_t *p = m;
    const vkg_shm_hdr *h = (const vkg_shm_hdr *)p;
    size_t want = vkg__shm_layout(n, chunk, (size_t)h->pool_bytes, &data_off, &pool_off);
    if (h->magic != VKG_SHM_MAGIC || h->version != VKG_SHM_VERSION || h->job_id != cr->job_id ||
        h->generation != cr->generation || h->nlocal != (uint32_t)n || h->chunk != chunk ||
        h->slots != VKG_SHM_SLOTS || h->data_off != data_off || h->pool_off != pool_off ||
        h->total_bytes != bytes || want != bytes || h->pool_bytes % 4096) {
        vkg_os_shm_unmap(p, bytes);
        return VKG_FAIL(VKG_ERR_PROTOCOL,
                        "the segment's header does not describe this job's segment (job, "
                        "generation, ranks, chunk size or layout differ)");
    }
    *base_out = p;
    *bytes_out = bytes;
    return VKG_OK;
}
