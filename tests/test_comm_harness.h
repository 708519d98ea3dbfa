/* Launching N communicator ranks for the transport tests: threads (any transport; inproc needs
 * them) or forked processes (tcp, ipc). Every child is bounded in time and reaped; a child that
 * overruns is killed. Ranks report back a status and a text (digests, error messages). */
#ifndef VKG_TEST_COMM_HARNESS_H
#define VKG_TEST_COMM_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/error.h"
#include "vkgpt/comm.h"

#define VKG_TH_MAX_RANKS 8
#define VKG_TH_REPORT 2048

typedef struct vkg_th_rank vkg_th_rank;

/* A rank's work. Runs after vkg_comm_create succeeded; returns 0 for success. Write what the
 * parent should see (digests, error text) with vkg_th_report. */
typedef int (*vkg_th_body)(vkg_th_rank *r, void *arg);

struct vkg_th_rank {
    int rank, size;
    vkg_comm_t *comm;
    int fd; /* pipe to the parent (processes), -1 for threads */
    char report[VKG_TH_REPORT];
    size_t report_len;
};

typedef struct vkg_th_opts {
    vkg_comm_transport transport;
    int processes;  /* 1: fork one process per rank; 0: threads */
    int timeout_ms; /* communicator timeout (default 30000) */
    size_t segment_bytes, small_bytes;
    int window;
    int ring_min_ranks;
    uint64_t job_id;                   /* 0: derived from the pid and a counter */
    double wall_s;                     /* kill every rank after this long (default 90) */
    char curve_pub[41], curve_sec[41]; /* optional job key pair */
    int keep_comm;          /* 1: the body destroys the comm itself (sets r->comm = NULL) */
    vkg_comm_shm shm;       /* shared-memory policy (default: automatic) */
    size_t shm_chunk_bytes; /* 0: the transport's */
    /* Test-only fake hosts (processes only): rank r runs as host r / ranks_per_host, through
     * VKG_TEST_HOST_TAG (transport/host.c); 0: the real host identity. */
    int ranks_per_host;
    /* Or (when not NULL) one character per rank naming its fake host: "aaab" puts ranks 0-2 on
     * one host and rank 3 on another, "abab" interleaves two hosts. */
    const char *hosts;
    /* When not NULL, called in each rank (its process, with processes) before its communicator
     * is created: e.g. to set a test-only environment variable in one rank. */
    void (*before_create)(int rank);
} vkg_th_opts;

typedef struct vkg_th_result {
    int create_status; /* vkg_comm_create's status */
    int body_rc;       /* the body's return (or -1 when it never reported) */
    int reported;      /* 1 when the rank sent its result */
    double t_done;     /* CLOCK_MONOTONIC seconds when it reported */
    int exit_status;   /* processes: waitpid status */
    int signaled;      /* processes: killed by a signal */
    char report[VKG_TH_REPORT];
} vkg_th_result;

typedef struct vkg_th_job vkg_th_job;

/* Start n ranks running body. */
vkg_th_job *vkg_th_start(int n, const vkg_th_opts *o, vkg_th_body body, void *arg);
/* Wait until every rank called vkg_th_ready (processes only); 0 on success. */
int vkg_th_wait_ready(vkg_th_job *j, double max_s);
pid_t vkg_th_pid(vkg_th_job *j, int rank);
/* Collect results (waits at most the remaining wall time, then kills), reap, free the job.
 * Ranks in `skip` (bitmask) are not waited for; once the others reported they are killed
 * (SIGKILL, which also ends a stopped process) and reaped. */
void vkg_th_finish(vkg_th_job *j, vkg_th_result *res, unsigned skip);
/* start + finish. */
void vkg_th_run(int n, const vkg_th_opts *o, vkg_th_body body, void *arg, vkg_th_result *res);

/* start + finish; 1 when every rank created its communicator and its body returned 0, otherwise
 * 0 after printing every rank's result. */
int vkg_th_run_ok(int n, const vkg_th_opts *o, vkg_th_body body, void *arg);
/* In a body: tell the parent this rank is up (processes; no-op for threads). */
void vkg_th_ready(vkg_th_rank *r);
/* In a body: append formatted text to the report. */
void vkg_th_report(vkg_th_rank *r, const char *fmt, ...) VKG_PRINTF_(2, 3);

double vkg_th_now(void);
uint64_t vkg_th_digest(const void *p, size_t n);
/* Print every rank's result (for a failing test). */
void vkg_th_dump(const vkg_th_result *res, int n);
/* 1 when every rank was created, its body returned 0 and its report starts with the same
 * `prefix` characters as rank 0's (a digest); otherwise (or with VKG_TEST_VERBOSE) dumps them. */
int vkg_th_agree(const vkg_th_result *res, int n, size_t prefix);
/* A fault: start n ranks running body (which calls vkg_th_ready once its collectives run, then
 * loops until one fails and returns 1 with the error in its report), send sig to rank victim
 * once all are ready, and check that every other rank reported such a failure naming "rank
 * <victim>" within bound_s seconds. Prints `label` with the slowest survivor's time; returns 1
 * when all held (dumps the results otherwise). */
/* A fault test's body: one f32 average allreduce of count floats, then path_ok(r, arg) (did it
 * take the path under test? any failure of it counts as an error), vkg_th_ready, and
 * allreduces until one fails; reports the status and error. Returns 0 only if none failed. */
int vkg_th_allreduce_until_error(vkg_th_rank *r, size_t count,
                                 int (*path_ok)(vkg_th_rank *r, void *arg), void *arg);
int vkg_th_fault(int n, const vkg_th_opts *o, vkg_th_body body, void *arg, int victim, int sig,
                 double bound_s, const char *label);

/* Collective inputs. A 32-bit integer hash. */
uint32_t vkg_th_mix(uint32_t x);
/* Integer-valued input of rank r at element i (halves in [-8, 8]): sums and averages over up to
 * 8 ranks are exact in fp32, bf16 and f16. */
float vkg_th_int_value(int r, size_t i);
/* Input whose fp32 sum depends on the order of additions: magnitudes spread over 2^spread. */
float vkg_th_odd_value(int r, size_t i, unsigned spread);
/* count inputs of rank r in dtype dt: integer-valued, or with odd order-revealing (spread 12). */
void vkg_th_fill(void *buf, size_t count, vkg_comm_dtype dt, int r, int odd);
/* A bf16 or f16 value as float. */
float vkg_th_from16(uint16_t h, vkg_comm_dtype dt);
/* Elements of an allreduce result (op over n ranks of vkg_th_fill's integer-valued inputs) that
 * are wrong: exact, except averages of 16-bit types within half a unit of the type. */
int vkg_th_count_wrong(const void *dst, size_t count, vkg_comm_dtype dt, vkg_comm_op op, int n);
/* A sweep of allreduces: counts x the dtypes in the bitmask (1 << dtype) x (sum in place, average
 * out of place at an odd element offset) x (vkg_th_fill's integer-valued inputs, checked exactly;
 * with odd also its order-revealing inputs, digested only). get/put allocate and release a
 * buffer (NULL: malloc/free); call runs one allreduce (NULL: vkg_comm_allreduce) and returns how
 * many things about it were wrong besides its values (which engine ran it, say). */
typedef struct vkg_th_sweep {
    const size_t *counts;
    int ncounts, dtypes, odd;
    void *(*get)(vkg_th_rank *r, void *arg, size_t bytes);
    void (*put)(vkg_th_rank *r, void *arg, void *p);
    int (*call)(vkg_th_rank *r, void *arg, const void *in, void *dst, size_t count,
                vkg_comm_dtype dt, vkg_comm_op op, vkg_status *st);
    void *arg;
} vkg_th_sweep;
/* Run sweep s: *wrong elements, *bad (the sum of call's returns), *digest of every result; the
 * first failing status. */
vkg_status vkg_th_sweep_run(vkg_th_rank *r, const vkg_th_sweep *s, int *wrong, int *bad,
                            uint64_t *digest);
/* f as bf16 (truncated) or f16 (exact for the integer inputs, saturated or flushed otherwise). */
uint16_t vkg_th_to16(float f, vkg_comm_dtype dt);

/* ---- the bf16 reduce-scatter's checks (test_comm_scatter16.c) ---- */

/* Input of rank r at element i of case kase: a bf16 of either sign, half of them +-2^23 or
 * +-(2^23 + 2^16), the others about 2^-1 or 2^10, so that its fp32 sum over ranks depends on the
 * order of additions and its rounding to bf16 on the rounding mode. */
uint16_t vkg_th_sc_input(int kase, int r, size_t i);
/* The rank the allreduce of count elements over n ranks starts element i's sum at: with ring, the
 * ring chunk holding i (vkg__chunk_start's chunks); otherwise 0 (rank order). */
int vkg_th_sc_first(size_t count, int n, size_t i, int ring);
/* Element i of the bf16 sum over n ranks of case kase: the inputs widened and added in fp32 from
 * rank first on around the ranks, rounded once to nearest even (truncate: toward zero, for
 * proving that the checks notice a wrong rounding). */
uint16_t vkg_th_sc_reference(int kase, int n, size_t i, int first, int truncate);
/* One bf16 reduce-scatter on rank r of count elements over chunks bounds ([size + 1]), in buf
 * (count elements, the caller's: ordinary memory or a pool buffer), after a bf16 allreduce of the
 * same inputs: this rank's chunk must equal the reference (in the order ring says) and the
 * allreduce's result bit for bit, the rest of buf its input. Returns the failures (reported);
 * folds the allreduce's result into *dig. */
int vkg_th_sc_case(vkg_th_rank *r, int kase, size_t count, const size_t *bounds, int ring,
                   uint16_t *buf, uint64_t *dig);

#endif
