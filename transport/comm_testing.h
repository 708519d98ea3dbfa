/* What the transport's own tests need to play a peer that holds the job's secret (a peer with a
 * bug, or another version) and so reach the message validation behind the handshake. Not for use
 * outside tests/: the secret is what keeps foreign processes out of a job. */
#ifndef VKG_TRANSPORT_COMM_TESTING_H
#define VKG_TRANSPORT_COMM_TESTING_H

#include <stdint.h>

#include "vkgpt/comm.h"

/* The job's 16-byte secret as rank 0 drew it (all zero for a single rank). */
void vkg__comm_secret(const vkg_comm_t *c, uint8_t out[16]);

#endif
