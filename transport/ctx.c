/* vkg_comm_ctx: a ZeroMQ context plus its ZAP handler, the thread that decides which incoming
 * tcp/ipc connections may complete their handshake.
 *
 * Policy: a communicator registers what each of its server sockets' ZAP domains admits: CURVE
 * public keys and, for its data socket, the job's secret as PLAIN password. PLAIN connections
 * present user "vkgpt" and a password: on a registered domain the registered one; on the
 * rendezvous domain "vkgpt/<job>:<generation>" (no registration) the password
 * "<job>:<generation>", so a process of another job or an older generation is refused before any
 * message is delivered (that password is guessable: it admits a join, which rank 0 checks, and
 * nothing else). Everything else (NULL mechanism, unregistered data domains, wrong keys) is
 * refused.
 * Not here: sockets of the communicators themselves (comm.c).
 */
#include "comm_internal.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "os/thread.h"

typedef struct keyreg {
    const void *owner;
    char domain[64];
    uint8_t *keys; /* nkeys * 32 bytes */
    size_t nkeys;
    char password[72]; /* PLAIN password admitted; "" = none */
} keyreg;

struct vkg_comm_ctx {
    void *zctx;
    void *zap;      /* REP at inproc://zeromq.zap.01, used only by the thread */
    void *ctl_send; /* PAIR: destroy -> thread */
    void *ctl_recv;
    vkg_os_thread *thread;
    int started;
    vkg_os_mutex *mu;
    keyreg *regs;
    size_t nregs;
    atomic_int users;
};

void *vkg__ctx_zmq(vkg_comm_ctx_t *ctx)
{
    return ctx->zctx;
}

void vkg__ctx_ref(vkg_comm_ctx_t *ctx, int delta)
{
    atomic_fetch_add(&ctx->users, delta);
}

vkg_status vkg__ctx_register(vkg_comm_ctx_t *ctx, const void *owner, const char *domain,
                             const uint8_t *keys, size_t nkeys, const char *password)
{
    VKG_CHECK(strlen(domain) < sizeof ctx->regs[0].domain &&
                  (!password || strlen(password) < sizeof ctx->regs[0].password),
              VKG_ERR_INVALID_ARG, "ZAP domain or password too long");
    uint8_t *copy = malloc(nkeys * 32 + 1);
    VKG_CHECK(copy != NULL, VKG_ERR_NOMEM, "out of memory registering CURVE keys");
    if (nkeys)
        memcpy(copy, keys, nkeys * 32);
    vkg_os_mutex_lock(ctx->mu);
    keyreg *r = realloc(ctx->regs, (ctx->nregs + 1) * sizeof *r);
    if (!r) {
        vkg_os_mutex_unlock(ctx->mu);
        free(copy);
        return VKG_FAIL(VKG_ERR_NOMEM, "out of memory registering CURVE keys");
    }
    ctx->regs = r;
    keyreg *k = &ctx->regs[ctx->nregs++];
    k->owner = owner;
    snprintf(k->domain, sizeof k->domain, "%s", domain);
    k->keys = copy;
    k->nkeys = nkeys;
    snprintf(k->password, sizeof k->password, "%s", password ? password : "");
    vkg_os_mutex_unlock(ctx->mu);
    return VKG_OK;
}

void vkg__ctx_unregister(vkg_comm_ctx_t *ctx, const void *owner)
{
    vkg_os_mutex_lock(ctx->mu);
    for (size_t i = 0; i < ctx->nregs;) {
        if (ctx->regs[i].owner == owner) {
            free(ctx->regs[i].keys);
            ctx->regs[i] = ctx->regs[--ctx->nregs];
        } else {
            i++;
        }
    }
    vkg_os_mutex_unlock(ctx->mu);
}

/* Equal without an early exit, so the time taken does not tell how much of a guess matched. */
static int same_bytes(const void *a, const void *b, size_t n)
{
    const uint8_t *x = a, *y = b;
    uint8_t d = 0;
    for (size_t i = 0; i < n; i++)
        d |= (uint8_t)(x[i] ^ y[i]);
    return d == 0;
}

static int key_admitted(vkg_comm_ctx_t *ctx, const char *domain, const uint8_t *key)
{
    int ok = 0;
    vkg_os_mutex_lock(ctx->mu);
    for (size_t i = 0; i < ctx->nregs && !ok; i++) {
        if (strcmp(ctx->regs[i].domain, domain))
            continue;
        for (size_t j = 0; j < ctx->regs[i].nkeys && !ok; j++)
            ok = same_bytes(ctx->regs[i].keys + 32 * j, key, 32);
    }
    vkg_os_mutex_unlock(ctx->mu);
    return ok;
}

/* 1: admitted; 0: refused; -1: the domain has no registered password. */
static int password_admitted(vkg_comm_ctx_t *ctx, const char *domain, const char *pw, size_t n)
{
    int found = 0, ok = 0;
    vkg_os_mutex_lock(ctx->mu);
    for (size_t i = 0; i < ctx->nregs; i++) {
        const keyreg *r = &ctx->regs[i];
        if (strcmp(r->domain, domain) || !r->password[0])
            continue;
        found = 1;
        ok |= strlen(r->password) == n && same_bytes(r->password, pw, n);
    }
    vkg_os_mutex_unlock(ctx->mu);
    return found ? ok : -1;
}

#define ZAP_MAX_FRAMES 12
#define ZAP_FRAME_MAX 256

typedef struct zap_req {
    int n;
    size_t len[ZAP_MAX_FRAMES];
    char data[ZAP_MAX_FRAMES][ZAP_FRAME_MAX + 1];
} zap_req;

static int frame_is(const zap_req *q, int i, const char *s)
{
    return i < q->n && q->len[i] == strlen(s) && !memcmp(q->data[i], s, q->len[i]);
}

/* Decide one ZAP request (RFC 27): frames version, request id, domain, address, routing id,
 * mechanism, credentials... */
static int zap_decide(vkg_comm_ctx_t *ctx, const zap_req *q)
{
    if (q->n < 6 || !frame_is(q, 0, "1.0"))
        return 0;
    char domain[ZAP_FRAME_MAX + 1];
    memcpy(domain, q->data[2], q->len[2]);
    domain[q->len[2]] = '\0';
    if (frame_is(q, 5, "PLAIN") && q->n == 8) {
        if (!frame_is(q, 6, "vkgpt"))
            return 0;
        int reg = password_admitted(ctx, domain, q->data[7], q->len[7]);
        if (reg >= 0)
            return reg;
        return !strncmp(domain, "vkgpt/", 6) && frame_is(q, 7, domain + 6);
    }
    if (frame_is(q, 5, "CURVE") && q->n == 7 && q->len[6] == 32)
        return key_admitted(ctx, domain, (const uint8_t *)q->data[6]);
    return 0;
}

static void zap_serve_one(vkg_comm_ctx_t *ctx)
{
    zap_req q;
    q.n = 0;
    int more = 1, overflow = 0;
    while (more) {
        zmq_msg_t f;
        zmq_msg_init(&f);
        if (zmq_msg_recv(&f, ctx->zap, 0) < 0) {
            zmq_msg_close(&f);
            return;
        }
        more = zmq_msg_more(&f);
        size_t n = zmq_msg_size(&f);
        if (q.n < ZAP_MAX_FRAMES && n <= ZAP_FRAME_MAX) {
            memcpy(q.data[q.n], zmq_msg_data(&f), n);
            q.len[q.n++] = n;
        } else {
            overflow = 1;
        }
        zmq_msg_close(&f);
    }
    int ok = !overflow && zap_decide(ctx, &q);
    const char *code = ok ? "200" : "400";
    const char *text = ok ? "OK" : "not a member of this vkgpt job";
    zmq_send(ctx->zap, "1.0", 3, ZMQ_SNDMORE);
    zmq_send(ctx->zap, q.n > 1 ? q.data[1] : "", q.n > 1 ? q.len[1] : 0, ZMQ_SNDMORE);
    zmq_send(ctx->zap, code, 3, ZMQ_SNDMORE);
    zmq_send(ctx->zap, text, strlen(text), ZMQ_SNDMORE);
    zmq_send(ctx->zap, ok ? "vkgpt" : "", ok ? 5 : 0, ZMQ_SNDMORE);
    zmq_send(ctx->zap, "", 0, 0);
}

static void *zap_thread(void *arg)
{
    vkg_comm_ctx_t *ctx = arg;
    for (;;) {
        zmq_pollitem_t items[2] = {{ctx->zap, 0, ZMQ_POLLIN, 0}, {ctx->ctl_recv, 0, ZMQ_POLLIN, 0}};
        if (zmq_poll(items, 2, -1) < 0) {
            if (zmq_errno() == EINTR)
                continue;
            break;
        }
        if (items[1].revents & ZMQ_POLLIN)
            break;
        if (items[0].revents & ZMQ_POLLIN)
            zap_serve_one(ctx);
    }
    return NULL;
}

vkg_status vkg_comm_ctx_create(vkg_comm_ctx_t **out)
{
    VKG_CHECK(out != NULL, VKG_ERR_INVALID_ARG, "out is NULL");
    *out = NULL;
    vkg_comm_ctx_t *ctx = calloc(1, sizeof *ctx);
    VKG_CHECK(ctx != NULL, VKG_ERR_NOMEM, "out of memory creating a comm context");
    vkg_status st = VKG_OK;
    char ctl[64];
    int zero = 0;
    VKG_CHECK_GOTO(st, vkg_os_mutex_create(&ctx->mu) == 0, VKG_ERR_NOMEM, fail,
                   "out of memory creating a comm context");
    ctx->zctx = zmq_ctx_new();
    VKG_CHECK_GOTO(st, ctx->zctx != NULL, VKG_ERR_NETWORK, fail, "zmq_ctx_new: %s",
                   zmq_strerror(zmq_errno()));
    zmq_ctx_set(ctx->zctx, ZMQ_BLOCKY, 0);
    ctx->zap = zmq_socket(ctx->zctx, ZMQ_REP);
    ctx->ctl_send = zmq_socket(ctx->zctx, ZMQ_PAIR);
    ctx->ctl_recv = zmq_socket(ctx->zctx, ZMQ_PAIR);
    VKG_CHECK_GOTO(st, ctx->zap && ctx->ctl_send && ctx->ctl_recv, VKG_ERR_NETWORK, fail,
                   "creating ZAP sockets: %s", zmq_strerror(zmq_errno()));
    zmq_setsockopt(ctx->zap, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(ctx->ctl_send, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(ctx->ctl_recv, ZMQ_LINGER, &zero, sizeof zero);
    VKG_CHECK_GOTO(st, zmq_bind(ctx->zap, "inproc://zeromq.zap.01") == 0, VKG_ERR_NETWORK, fail,
                   "binding the ZAP handler: %s", zmq_strerror(zmq_errno()));
    snprintf(ctl, sizeof ctl, "inproc://vkg-zapctl-%p", (void *)ctx);
    VKG_CHECK_GOTO(st, zmq_bind(ctx->ctl_recv, ctl) == 0 && zmq_connect(ctx->ctl_send, ctl) == 0,
                   VKG_ERR_NETWORK, fail, "ZAP control pair: %s", zmq_strerror(zmq_errno()));
    VKG_CHECK_GOTO(st, vkg_os_thread_start(&ctx->thread, zap_thread, ctx) == 0, VKG_ERR_NOMEM, fail,
                   "cannot start the ZAP handler thread");
    ctx->started = 1;
    *out = ctx;
    return VKG_OK;
fail:
    vkg_comm_ctx_destroy(&ctx);
    return st;
}

void vkg_comm_ctx_destroy(vkg_comm_ctx_t **pctx)
{
    if (!pctx || !*pctx)
        return;
    vkg_comm_ctx_t *ctx = *pctx;
    *pctx = NULL;
    assert(atomic_load(&ctx->users) == 0 && "destroy every vkg_comm_t before its context");
    if (ctx->started) {
        zmq_send(ctx->ctl_send, "", 0, 0);
        vkg_os_thread_join(ctx->thread, NULL);
    }
    if (ctx->zap)
        zmq_close(ctx->zap);
    if (ctx->ctl_send)
        zmq_close(ctx->ctl_send);
    if (ctx->ctl_recv)
        zmq_close(ctx->ctl_recv);
    if (ctx->zctx)
        zmq_ctx_term(ctx->zctx);
    for (size_t i = 0; i < ctx->nregs; i++)
        free(ctx->regs[i].keys);
    free(ctx->regs);
    vkg_os_mutex_destroy(ctx->mu);
    free(ctx);
}
