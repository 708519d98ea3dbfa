/* What the transport's own tests need to play a peer that holds the job's secret (a peer with a
 * bug, or another version) and so reach the message validation behind the handshake. Not for use
 * outside tests/: the secret is what keeps foreign processes out of a job. */
#ifndef VKG_TRANSPORT_COMM_TESTING_H
#define VKG_TRANSPORT_COMM_TESTING_H

#include <stdint.h>

#include "vkgpt/comm.h"

/* The job's 16-byte secret as rank 0 drew it (all zero for a single rank). */
void vkg__comm_secret(const vkg_comm_t *c, uint8_t out[16]);

/* Fuzzing the parsers a rank runs on network input (fuzz/fuzz_wire.c): each builds a rank of a
 * world of 4 with no sockets and feeds it `data`. The first byte picks the parser:
 *   0: a data-connection message (header frame = the next 64 bytes, payload = the rest, or a
 *      short header frame when fewer remain), validated and dispatched as a waiting rank would;
 *   1: a rendezvous hello at rank 0 (frames: routing id, header, hello body);
 *   2: rank 0's reply to a joining rank (header, then the peer table or a reject reason).
 * Returns the parser's status; never crashes on any input (that is what fuzzing checks). */
vkg_status vkg__fuzz_wire(const uint8_t *data, size_t size);

#endif
