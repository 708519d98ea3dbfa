/* Waiting and signalling in the host's shared-memory segment (shm.h): each rank's progress
 * counters, the abort word, and the start of a collective. The collectives themselves are in
 * shm_coll.c (one host) and hier.c (two levels); creating and handing over the segment in shm.c.
 *
 * A rank raises its counters (vkg_shm_ctl: in, red, out), each the number of pipeline steps it has
 * finished in that phase; the others wait for them.
 *
 * Waits: spin on the counter, then sleep on it with FUTEX_WAIT. The spin adapts: it doubles
 * (up to 50 us with a core per rank, 1 us otherwise) after a wait that ended while spinning and
 * halves (down to 1 us) after one that had to sleep. Measured on a loaded 2-core host: a fixed
 * 50 us spin made every 4 KiB allreduce take 57 us (the awaited rank shared the spinner's core
 * and ran only once the spin gave up), sleeping at once 10 us; idle, spinning gives 1.5 us; a
 * publisher calls FUTEX_WAKE only when someone sleeps. Every 10 ms of waiting the rank looks at the
 * ZeroMQ side (vkg__comm_poll: aborts, heartbeats of dead or frozen peers, the deadline and who
 * waits for whom), and every wait checks the segment's abort word, which a failing rank sets (with
 * its reason, in the host's segment and in its groups' segments) before it wakes everyone.
 */
#include "shm.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "os/shm.h"

#define POLL_NS 10000000 /* look at the ZeroMQ side this often while waiting */
#define SPIN_MIN_NS 1000 /* the shortest spin: enough to notice that spinning pays again */

enum { CTR_IN = VKG_SHM_IN, CTR_RED = VKG_SHM_RED, CTR_OUT = VKG_SHM_OUT };

typedef vkg_shm_op shm_op;

static int reached(uint32_t v, uint32_t target)
{
    return (int32_t)(v - target) >= 0;
}

static atomic_uint *counter(struct vkg_shm *s, int q, int which)
{
    vkg_shm_ctl *k = &s->ctl[q];
    return which == CTR_IN ? &k->in : which == CTR_RED ? &k->red : &k->out;
}

static void publish(struct vkg_shm *s, int which, uint32_t v)
{
    atomic_uint *w = counter(s, s->me, which);
    atomic_store(w, v);
    if (atomic_load(&s->hdr->sleepers))
        vkg_os_wake_all(w);
}

static vkg_status aborted(shm_op *o)
{
    struct vkg_shm *s = o->s;
    unsigned w = atomic_load(&s->hdr->abort_word);
    int x = (int)w - 1;
    char why[VKG_SHM_REASON + 64];
    if (x < 0 || x >= s->n)
        return VKG_FAIL(VKG_ERR_PROTOCOL, "%s: the segment's abort word is corrupt (%u)", o->what,
                        w);
    vkg__escape(why, sizeof why, s->reasons + (size_t)x * VKG_SHM_REASON,
                strnlen(s->reasons + (size_t)x * VKG_SHM_REASON, VKG_SHM_REASON));
    o->c->peer_aborted = 1;
    return VKG_FAIL(VKG_ERR_PEER, "%s: rank %d aborted: %s", o->what, o->ranks[x], why);
}

static void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Wait until rank q's counter `which` reaches target. */
static vkg_status wait_one(shm_op *o, int q, int which, uint32_t target)
{
    struct vkg_shm *s = o->s;
    vkg_comm_t *c = o->c;
    atomic_uint *w = counter(s, q, which);
    int64_t t0 = vkg__now_ns();
    for (unsigned i = 1;; i++) {
        if (reached(atomic_load_explicit(w, memory_order_acquire), target)) {
            s->spin_ns = s->spin_ns * 2 < s->spin_max_ns ? s->spin_ns * 2 : s->spin_max_ns;
            return VKG_OK;
        }
        if (atomic_load_explicit(&s->hdr->abort_word, memory_order_relaxed))
            return aborted(o);
        if ((i & 15) == 0 && vkg__now_ns() - t0 >= s->spin_ns)
            break;
        relax();
    }
    s->spin_ns = s->spin_ns / 2 > SPIN_MIN_NS ? s->spin_ns / 2 : SPIN_MIN_NS;
    uint32_t seen = atomic_load(w);
    int64_t polled = 0;
    for (;;) {
        uint32_t v = atomic_load(w);
        int64_t now = vkg__now_ns();
        if (reached(v, target)) {
            c->progress_ns = now;
            return VKG_OK;
        }
        if (atomic_load(&s->hdr->abort_word))
            return aborted(o);
        if (v != seen) { /* the rank moves: that is progress */
            seen = v;
            c->progress_ns = now;
        }
        if (now - polled >= POLL_NS) {
            vkg_expect ex = {
                .sender = -1, .all_peers = 1, .waiting_on = o->ranks[q], .what = o->what};
            VKG_TRY(vkg__comm_poll(c, &ex));
            polled = vkg__now_ns();
        }
        atomic_fetch_add(&s->hdr->sleepers, 1);
        v = atomic_load(w);
        if (!reached(v, target) && !atomic_load(&s->hdr->abort_word)) {
            vkg_os_wait_on(w, v, POLL_NS);
        }
        atomic_fetch_sub(&s->hdr->sleepers, 1);
    }
}

static vkg_status wait_all(shm_op *o, int which, uint32_t target)
{
    for (int q = 0; q < o->s->n; q++)
        if (q != o->s->me && !reached(atomic_load(counter(o->s, q, which)), target))
            VKG_TRY(wait_one(o, q, which, target));
    return VKG_OK;
}

/* Wait until slot `step` may be overwritten: every rank copied out step - slots. */
static vkg_status wait_slot(shm_op *o, uint32_t step)
{
    return wait_all(o, CTR_OUT, step - (uint32_t)o->s->slots + 1);
}

/* Begin a collective in segment s whose local rank q is communicator rank ranks[q]. */
static vkg_status start_on(shm_op *o, vkg_comm_t *c, struct vkg_shm *s, const int *ranks,
                           const char *what)
{
    o->c = c;
    o->s = s;
    o->ranks = ranks;
    o->base = s->step;
    snprintf(o->what, sizeof o->what, "%s", what);
    int64_t now = vkg__now_ns();
    if (c->progress_ns < now) /* time outside collectives never counts */
        c->progress_ns = now;
    if (atomic_load(&o->s->hdr->abort_word))
        return aborted(o);
    return VKG_OK;
}

static vkg_status start(shm_op *o, vkg_comm_t *c, const char *name)
{
    char what[48];
    snprintf(what, sizeof what, "%s #%llu (shm)", name, (unsigned long long)c->seq);
    return start_on(o, c, c->shm, c->local, what);
}

vkg_status vkg__shm_start(vkg_shm_op *o, vkg_comm_t *c, const char *name)
{
    return start(o, c, name);
}

vkg_status vkg__shm_start_on(vkg_shm_op *o, vkg_comm_t *c, struct vkg_shm *s, const int *ranks,
                             const char *what)
{
    return start_on(o, c, s, ranks, what);
}

int vkg__shm_aborted(vkg_shm_op *o, vkg_status *st)
{
    if (!atomic_load(&o->s->hdr->abort_word))
        return 0;
    *st = aborted(o);
    return 1;
}

vkg_status vkg__shm_wait_one(vkg_shm_op *o, int q, int which, uint32_t target)
{
    return wait_one(o, q, which, target);
}

vkg_status vkg__shm_wait_all(vkg_shm_op *o, int which, uint32_t target)
{
    return wait_all(o, which, target);
}

vkg_status vkg__shm_wait_slot(vkg_shm_op *o, uint32_t step)
{
    return wait_slot(o, step);
}

void vkg__shm_publish(struct vkg_shm *s, int which, uint32_t v)
{
    publish(s, which, v);
}

/* Set segment s's abort word (the first failing rank's stays) with reason, and wake its waiters. */
static void abort_segment(struct vkg_shm *s, const char *reason)
{
    snprintf(s->reasons + (size_t)s->me * VKG_SHM_REASON, VKG_SHM_REASON, "%s", reason);
    unsigned zero = 0;
    atomic_compare_exchange_strong(&s->hdr->abort_word, &zero, (unsigned)s->me + 1);
    for (int q = 0; q < s->n; q++)
        for (int k = CTR_IN; k <= CTR_OUT; k++)
            vkg_os_wake_all(counter(s, q, k));
}

void vkg__shm_abort(vkg_comm_t *c, const char *reason)
{
    if (c->shm)
        abort_segment(c->shm, reason);
    for (int i = 0; i < c->ngroup_segs; i++)
        abort_segment(c->group_segs[i], reason);
}
