/* Waiting: the wait loop with its deadline, connection monitoring, explaining a lost peer, and
 * failure handling (abort broadcast, release of in-flight buffers).
 *
 * Deadline: it counts only time spent inside a call waiting: from the start of the wait or the
 * last message that arrived, whichever is later, so a rank's own compute between calls never
 * counts against it. When it passes, the rank tells every peer whom it waits for (a stall
 * notice; a notice "over" follows once it makes progress again, and clears the notice on every
 * peer; a wait that ends well ends any stall it began). What happens next depends on whether
 * peers can be seen alive:
 *  - tcp and ipc: every connection carries heartbeats answered by the peer's I/O thread, so a
 *    dead or frozen (SIGSTOP) peer loses its connection within about the timeout and is named at
 *    once. A live peer that has not reached the call is busy computing: the rank keeps waiting.
 *    Following who waits for whom from the awaited rank, the wait fails only when the chain ends
 *    at a lost rank (named) or comes back to a rank already on it (ranks wait for each other in
 *    a cycle: they called different collectives).
 *  - inproc (threads of one process) has no liveness signal: a stall is final. The rank gives
 *    up after a short grace period, and so does every rank that gets its notice; meanwhile the
 *    notices of the others arrive, so each follows the chain to its end and names the rank that
 *    stopped everyone (0 waits for 1, which waits for the stuck 2: every rank names 2).
 * An abort or a lost connection still wins at any time. Lost or refused connections fail a wait
 * at once.
 * Not here: sending, receiving and validating messages (io.c).
 */
#include "comm_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- connection monitoring ---- */

static void read_monitor(vkg_comm_t *c, void *mon)
{
    for (;;) {
        zmq_msg_t ev, addr;
        zmq_msg_init(&ev);
        if (zmq_msg_recv(&ev, mon, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&ev);
            return;
        }
        uint16_t event = 0;
        if (zmq_msg_size(&ev) >= 2)
            memcpy(&event, zmq_msg_data(&ev), 2);
        int more = zmq_msg_more(&ev);
        zmq_msg_close(&ev);
        if (!more)
            continue;
        zmq_msg_init(&addr);
        if (zmq_msg_recv(&addr, mon, 0) < 0) {
            zmq_msg_close(&addr);
            return;
        }
        size_t n = zmq_msg_size(&addr);
        const char *a = zmq_msg_data(&addr);
        for (int q = 0; q < c->size; q++) {
            if (q == c->rank || strlen(c->peers[q].endpoint) != n ||
                memcmp(c->peers[q].endpoint, a, n))
                continue;
            if (event == ZMQ_EVENT_DISCONNECTED)
                c->peers[q].lost = 1;
            else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH ||
                     event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL)
                c->peers[q].refused = event;
        }
        zmq_msg_close(&addr);
    }
}

static vkg_status check_peers(const vkg_comm_t *c, const vkg_expect *ex)
{
    for (int q = 0; q < c->size; q++) {
        if (q == c->rank || !(ex->all_peers || q == ex->sender || q == ex->waiting_on))
            continue;
        const vkg_peer *p = &c->peers[q];
        VKG_CHECK(!p->refused, VKG_ERR_PEER,
                  "%s: rank %d (%s) refused our connection: authentication failed (job id, "
                  "generation or CURVE key mismatch)",
                  ex->what, q, p->endpoint);
        VKG_CHECK(!p->lost, VKG_ERR_PEER,
                  "%s: connection to rank %d (%s) lost: the process died, froze (no heartbeat "
                  "reply) or closed its communicator",
                  ex->what, q, p->endpoint);
    }
    return VKG_OK;
}

/* ---- explaining a lost peer ---- */

/* A peer vanished or refused a send. An abort explaining why (from it or from another rank that
 * saw it first) may be on its way: give it a short moment and report it instead of the bare
 * loss. Returns the abort's error, a protocol error met meanwhile, or `loss` unchanged. */
vkg_status vkg__explain_loss(vkg_comm_t *c, vkg_status loss)
{
    int64_t span = (int64_t)c->timeout_ms * 1000000 / 4;
    int64_t end = vkg__now_ns() + (span < 250000000 ? span : 250000000);
    vkg_expect none = {.sender = -1, .waiting_on = -1, .what = "draining"};
    for (;;) {
        vkg_inmsg in, out;
        int got = 0, matched = 0;
        vkg_status st = vkg__recv_wait(c, &in, &got, 0);
        if (st < 0)
            return st;
        if (got) {
            VKG_TRY(vkg__dispatch(c, &none, &in, &out, &matched));
            continue;
        }
        int64_t now = vkg__now_ns();
        if (now >= end)
            return loss;
        zmq_pollitem_t it = {c->rx, 0, ZMQ_POLLIN, 0};
        zmq_poll(&it, 1, (long)((end - now) / 1000000) + 1);
    }
}

/* ---- stalls: who waits for whom ---- */

/* Send every peer a stall notice: the rank this one waits for, or VKG_STALL_OVER. Best effort: a
 * peer that is gone is found by the wait itself. */
static void tell_stall(vkg_comm_t *c, uint32_t waiting_on)
{
    for (int q = 0; q < c->size; q++) {
        if (q == c->rank)
            continue;
        vkg_wire_hdr h;
        vkg__hdr_init(c, &h, VKG_W_STALL);
        h.seq = c->seq;
        h.segment = waiting_on;
        (void)vkg__raw_send(c, q, &h, NULL);
    }
}

/* Tell every peer whom this rank waits for (once per communicator) and start the grace period
 * after which it gives up. */
static void begin_stall(vkg_comm_t *c, const vkg_expect *ex, int64_t now)
{
    int64_t timeout_ns = (int64_t)c->timeout_ms * 1000000;
    int64_t grace_ns = timeout_ns / 4 < 500000000 ? timeout_ns / 4 : 500000000;
    if (!c->stall_end)
        c->stall_end = now + grace_ns;
    if (c->stall_told || ex->waiting_on < 0)
        return;
    c->stall_told = 1;
    tell_stall(c, (uint32_t)ex->waiting_on);
}

/* After a stall, progress: tell the peers this rank no longer waits. */
static void end_stall(vkg_comm_t *c)
{
    if (c->stall_told)
        tell_stall(c, VKG_STALL_OVER);
    c->stall_told = 0;
    c->stall_end = 0;
}

/* With liveness (tcp, ipc), after this rank's deadline passed waiting for ex->waiting_on: the
 * failure when the chain of who waits for whom ends at a lost rank or closes a cycle; VKG_OK
 * while it ends at a live rank that is busy elsewhere (keep waiting). */
static vkg_status chain_verdict(const vkg_comm_t *c, const vkg_expect *ex)
{
    double s = (double)(vkg__now_ns() - c->progress_ns) / 1e9;
    char chain[160];
    int len = snprintf(chain, sizeof chain, "rank %d", c->rank), x = ex->waiting_on, hops = 0;
    for (;;) {
        if (len >= 0 && (size_t)len < sizeof chain)
            len += snprintf(chain + len, sizeof chain - (size_t)len, " -> rank %d", x);
        if (x == c->rank || ++hops > c->size)
            return VKG_FAIL(VKG_ERR_TIMEOUT,
                            "%s: no progress for %.1f s: ranks wait for each other in a cycle "
                            "(%s): they called different collectives or the same ones in another "
                            "order",
                            ex->what, s, chain);
        if (c->peers[x].lost)
            return VKG_FAIL(VKG_ERR_PEER,
                            "%s: rank %d (%s) is gone: the process died or froze (no heartbeat "
                            "reply) while ranks waited for it (%s)",
                            ex->what, x, c->peers[x].endpoint, chain);
        if (!c->peers[x].stalled_on)
            return VKG_OK; /* x is alive and not waiting: it computes */
        x = c->peers[x].stalled_on - 1;
    }
}

/* The failure after a stall: follow who waits for whom from this rank (or, when this wait names
 * nobody, from the first rank that reported a stall) to the rank at the end of the chain. */
static vkg_status stalled(const vkg_comm_t *c, const vkg_expect *ex)
{
    double s = (double)(vkg__now_ns() - c->progress_ns) / 1e9;
    int x = ex->waiting_on >= 0 ? c->rank : c->stall_seen - 1;
    if (x < 0)
        return VKG_FAIL(VKG_ERR_TIMEOUT, "%s: no progress for %.1f s", ex->what, s);
    char chain[160];
    int len = snprintf(chain, sizeof chain, "rank %d", x), hops = 0;
    for (; hops <= c->size; hops++) {
        int next = x == c->rank ? ex->waiting_on : c->peers[x].stalled_on - 1;
        if (next < 0)
            break;
        x = next;
        if (len >= 0 && (size_t)len < sizeof chain)
            len += snprintf(chain + len, sizeof chain - (size_t)len, " -> rank %d", x);
    }
    if (hops > c->size)
        return VKG_FAIL(VKG_ERR_TIMEOUT,
                        "%s: no progress for %.1f s: ranks wait for each other in a cycle (%s): "
                        "they called different collectives or the same ones in another order",
                        ex->what, s, chain);
    if (x == c->rank)
        return VKG_FAIL(VKG_ERR_TIMEOUT,
                        "%s: stopped after other ranks waited for this one past the timeout "
                        "(%s): a step between calls took longer than %.1f s, or ranks called "
                        "different collectives",
                        ex->what, chain, c->timeout_ms / 1000.0);
    if (hops == 1 && ex->waiting_on >= 0)
        return VKG_FAIL(VKG_ERR_TIMEOUT,
                        "%s: no progress for %.1f s waiting for rank %d (%s); it is dead, frozen "
                        "or stuck, or ranks called different collectives",
                        ex->what, s, x, c->peers[x].endpoint);
    return VKG_FAIL(VKG_ERR_TIMEOUT,
                    "%s: no progress for %.1f s: rank %d (%s) is dead, frozen or stuck, or ranks "
                    "called different collectives (who waits for whom: %s)",
                    ex->what, s, x, c->peers[x].endpoint, chain);
}

/* ---- the wait loop ---- */

vkg_status vkg__comm_wait(vkg_comm_t *c, const vkg_expect *ex, vkg_inmsg *m, int *event)
{
    *event = 0;
    if (vkg__stash_take(c, ex, m)) {
        *event = VKG_EV_MSG;
        return VKG_OK;
    }
    int64_t timeout_ns = (int64_t)c->timeout_ms * 1000000;
    /* the monitor (and tx, for drains) join the poll set only once a wait lasts: the common
     * short wait then costs one socket, and a lost peer is still seen within milliseconds */
    int64_t start = vkg__now_ns(), watch_after = start + 5000000;
    /* time spent outside this call (the caller's own work) never counts */
    if (c->progress_ns < start)
        c->progress_ns = start;
    /* a live peer that is not waiting is busy, not stuck (see the file comment) */
    int alive_waits = c->transport != VKG_COMM_INPROC && ex->waiting_on >= 0;
    vkg_status st = VKG_OK;
    if (ex->drain)
        atomic_store(&c->guard->waiting, 1);
    for (;;) {
        if (ex->drain && atomic_load(&c->guard->inflight) == 0) {
            *event = VKG_EV_DRAINED;
            break;
        }
        if (ex->credit && c->credit_moved) {
            c->credit_moved = 0;
            *event = VKG_EV_CREDIT;
            break;
        }
        vkg_inmsg in;
        int got = 0, matched = 0, ms = 0;
        int64_t now = vkg__now_ns();
        if (!ex->drain && now < watch_after) {
            /* the common short wait: one blocking receive costs fewer syscalls than a
             * non-blocking try followed by zmq_poll */
            int64_t lim = c->progress_ns + timeout_ns < watch_after ? c->progress_ns + timeout_ns
                                                                    : watch_after;
            ms = lim > now ? (int)((lim - now + 999999) / 1000000) : 0;
        }
        st = vkg__recv_wait(c, &in, &got, ms);
        if (st < 0)
            break;
        if (got) {
            if (in.h.kind != VKG_W_STALL) {
                c->progress_ns = vkg__now_ns();
                c->peers[in.h.sender].last_rx_ns = c->progress_ns;
                if (alive_waits && c->stall_told)
                    end_stall(c);
            }
            st = vkg__dispatch(c, ex, &in, m, &matched);
            if (st < 0)
                break;
            if (matched) {
                *event = VKG_EV_MSG;
                break;
            }
            continue;
        }
        if (ms > 0)
            continue; /* the short wait ran out: from now on watch the monitor too */
        st = check_peers(c, ex);
        if (st < 0) {
            st = vkg__explain_loss(c, st);
            break;
        }
        now = vkg__now_ns();
        int64_t until = c->progress_ns + timeout_ns;
        if (alive_waits) {
            if (now >= until) {
                begin_stall(c, ex, now);
                st = chain_verdict(c, ex);
                if (st < 0) {
                    st = vkg__explain_loss(c, st);
                    break;
                }
                until = now + 100000000; /* re-check as notices and heartbeats come in */
            }
        } else if (now >= until || (c->stall_seen && c->transport == VKG_COMM_INPROC)) {
            begin_stall(c, ex, now); /* inproc: a peer's stall is final (see the file comment) */
        }
        if (!alive_waits && c->stall_end) {
            if (now >= c->stall_end) {
                st = stalled(c, ex);
                break;
            }
            until = c->stall_end;
        }
        int watch = now >= watch_after;
        if (!watch && until > watch_after)
            until = watch_after;
        zmq_pollitem_t items[5];
        int n = 0, imon = -1, ihb = -1, iefd = -1;
        items[n++] = (zmq_pollitem_t){c->rx, 0, ZMQ_POLLIN, 0};
        if (c->mon && watch) {
            imon = n;
            items[n++] = (zmq_pollitem_t){c->mon, 0, ZMQ_POLLIN, 0};
        }
        if (c->hbmon && watch) {
            ihb = n;
            items[n++] = (zmq_pollitem_t){c->hbmon, 0, ZMQ_POLLIN, 0};
        }
        if (ex->drain) {
            iefd = n;
            items[n++] = (zmq_pollitem_t){NULL, vkg_os_wake_handle(c->guard->wake), ZMQ_POLLIN, 0};
            if (c->tx && watch) /* see wait_inflight: lets tx release payloads of dropped pipes */
                items[n++] = (zmq_pollitem_t){c->tx, 0, ZMQ_POLLIN, 0};
        }
        long wait_ms = (long)((until - now + 999999) / 1000000);
        int rc = zmq_poll(items, n, wait_ms > 0 ? wait_ms : 1);
        if (rc < 0 && zmq_errno() != EINTR) {
            st = VKG_FAIL(VKG_ERR_NETWORK, "%s: zmq_poll: %s", ex->what, zmq_strerror(zmq_errno()));
            break;
        }
        if (rc > 0 && imon >= 0 && (items[imon].revents & ZMQ_POLLIN))
            read_monitor(c, c->mon);
        if (rc > 0 && ihb >= 0 && (items[ihb].revents & ZMQ_POLLIN))
            read_monitor(c, c->hbmon);
        if (rc > 0 && iefd >= 0 && (items[iefd].revents & ZMQ_POLLIN)) {
            vkg_os_wake_drain(c->guard->wake);
            c->progress_ns = vkg__now_ns();
        }
    }
    if (ex->drain)
        atomic_store(&c->guard->waiting, 0);
    /* with liveness, a wait that ends well is progress: a stall it began (a drain's, which
     * tells no one) must not outlive it and fail a later wait at once */
    if (st == VKG_OK && c->transport != VKG_COMM_INPROC && c->stall_end)
        end_stall(c);
    return st;
}

vkg_status vkg__comm_poll(vkg_comm_t *c, const vkg_expect *ex)
{
    int alive_waits = c->transport != VKG_COMM_INPROC && ex->waiting_on >= 0;
    for (;;) {
        vkg_inmsg in, out;
        int got = 0, matched = 0;
        VKG_TRY(vkg__recv_wait(c, &in, &got, 0));
        if (!got)
            break;
        if (in.h.kind != VKG_W_STALL) {
            c->progress_ns = vkg__now_ns();
            c->peers[in.h.sender].last_rx_ns = c->progress_ns;
            if (alive_waits && c->stall_told)
                end_stall(c);
        }
        VKG_TRY(vkg__dispatch(c, ex, &in, &out, &matched));
        if (matched)
            zmq_msg_close(&out.body);
    }
    if (c->mon)
        read_monitor(c, c->mon);
    if (c->hbmon)
        read_monitor(c, c->hbmon);
    vkg_status st = check_peers(c, ex);
    if (st < 0)
        return vkg__explain_loss(c, st);
    int64_t now = vkg__now_ns(), until = c->progress_ns + (int64_t)c->timeout_ms * 1000000;
    if (alive_waits) {
        if (now < until)
            return VKG_OK;
        begin_stall(c, ex, now);
        st = chain_verdict(c, ex);
        return st < 0 ? vkg__explain_loss(c, st) : VKG_OK;
    }
    if (now >= until || (c->stall_seen && c->transport == VKG_COMM_INPROC))
        begin_stall(c, ex, now);
    return c->stall_end && now >= c->stall_end ? stalled(c, ex) : VKG_OK;
}

vkg_status vkg__drain(vkg_comm_t *c, const char *what, int waiting_on)
{
    if (atomic_load(&c->guard->inflight) == 0)
        return VKG_OK;
    vkg_expect ex = {
        .drain = 1, .all_peers = 1, .waiting_on = waiting_on, .what = what, .sender = -1};
    vkg_inmsg m;
    int ev;
    return vkg__comm_wait(c, &ex, &m, &ev);
}

/* ---- failure ---- */

/* Wait up to ms for the in-flight count to reach zero, without touching the error message. */
static int wait_inflight(vkg_comm_t *c, int ms)
{
    int64_t end = vkg__now_ns() + (int64_t)ms * 1000000;
    atomic_store(&c->guard->waiting, 1);
    while (atomic_load(&c->guard->inflight) > 0) {
        int64_t now = vkg__now_ns();
        if (now >= end)
            break;
        /* polling tx makes it process zmq's commands: a pipe to a vanished peer is torn down
         * (and its queued payloads released) only when the owning thread does that */
        zmq_pollitem_t it[2] = {{NULL, vkg_os_wake_handle(c->guard->wake), ZMQ_POLLIN, 0},
                                {c->tx, 0, ZMQ_POLLIN, 0}};
        if (zmq_poll(it, c->tx ? 2 : 1, (long)((end - now) / 1000000) + 1) > 0 &&
            (it[0].revents & ZMQ_POLLIN))
            vkg_os_wake_drain(c->guard->wake);
    }
    atomic_store(&c->guard->waiting, 0);
    return atomic_load(&c->guard->inflight) == 0;
}

vkg_status vkg__comm_fail(vkg_comm_t *c, vkg_status st, int tell_peers)
{
    if (c->failed)
        return st;
    c->failed = st;
    snprintf(c->fail_msg, sizeof c->fail_msg, "%s", vkg_error_message());
    if (tell_peers && !c->peer_aborted)
        vkg__shm_abort(c, c->fail_msg);
    if (tell_peers && !c->peer_aborted && c->tx) {
        char reason[960];
        int n = snprintf(reason, sizeof reason, "%s", c->fail_msg);
        size_t len = n < 0 ? 0 : ((size_t)n < sizeof reason ? (size_t)n : sizeof reason - 1);
        for (int q = 0; q < c->size; q++) {
            if (q == c->rank)
                continue;
            vkg_wire_hdr h;
            vkg__hdr_init(c, &h, VKG_W_ABORT);
            h.seq = c->seq;
            h.bytes = len;
            zmq_msg_t body;
            if (!len || zmq_msg_init_size(&body, len) < 0) {
                h.bytes = 0;
                (void)vkg__raw_send(c, q, &h, NULL);
                continue;
            }
            memcpy(zmq_msg_data(&body), reason, len);
            (void)vkg__raw_send(c, q, &h, &body);
        }
    }
    /* zmq may still reference caller buffers (zero-copy payloads to a peer that stopped reading).
     * Without linger, pipes to vanished peers release their payloads at once; healthy peers get a
     * moment to take theirs (and the abort); then whatever is left goes with tx. */
    if (c->tx) {
        int zero = 0;
        zmq_setsockopt(c->tx, ZMQ_LINGER, &zero, sizeof zero);
    }
    if (c->guard && !wait_inflight(c, c->timeout_ms / 4 < 200 ? c->timeout_ms / 4 : 200)) {
        if (c->tx) {
            zmq_close(c->tx);
            c->tx = NULL;
        }
        if (!wait_inflight(c, 2000))
            c->guard_leaked = 1;
    }
    return st;
}

vkg_status vkg__comm_usable(vkg_comm_t *c)
{
    VKG_CHECK(c != NULL, VKG_ERR_INVALID_ARG, "communicator is NULL");
    if (c->failed)
        return VKG_FAIL(c->failed, "communicator failed earlier: %s", c->fail_msg);
    return VKG_OK;
}
