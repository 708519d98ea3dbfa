/* Internal to the rendezvous (rendezvous.c: rank 0's side; rendezvous_client.c: the other
 * ranks'): the layout of the HELLO and TABLE bodies and what the two sides share. The protocol is
 * described at the top of rendezvous.c. */
#ifndef VKG_TRANSPORT_RENDEZVOUS_H
#define VKG_TRANSPORT_RENDEZVOUS_H

#include "comm_internal.h"

/* HELLO body: world size (u32), rank (u32), then an entry. TABLE body: an entry per rank, then the
 * job's secret. An entry: data endpoint, CURVE public key (Z85 and its NUL), host identity. */
#define VKG_RDV_HELLO_BYTES (8 + VKG_COMM_ADDR_MAX + VKG_COMM_KEY_CHARS + 1 + VKG_HOST_BYTES)
#define VKG_RDV_ENTRY_BYTES (VKG_COMM_ADDR_MAX + VKG_COMM_KEY_CHARS + 1 + VKG_HOST_BYTES)
#define VKG_RDV_HOST_AT                                                                            \
    (VKG_COMM_ADDR_MAX + VKG_COMM_KEY_CHARS + 1) /* in an entry; + 8 in a hello */

/* Receive up to n frames of one message; returns the frame count (frames beyond n dropped). */
int vkg__rendezvous_recv(void *s, zmq_msg_t *f, int n);

/* A rank other than 0, its rendezvous socket rdv connected to rank 0 at `master` (mon: that
 * connection's monitor, or NULL): send HELLO, take the TABLE, admit the secret, send READY and
 * wait for GO, all before deadline (vkg__now_ns). Fills c->peers and c->secret. Errors name rank
 * 0's endpoint: VKG_ERR_TIMEOUT, VKG_ERR_PEER (rejected or refused handshake), VKG_ERR_PROTOCOL,
 * VKG_ERR_NETWORK. */
vkg_status vkg__rendezvous_client(vkg_comm_t *c, void *rdv, void *mon, const char *master,
                                  int64_t deadline);

/* Rank 0's reply f[0..nf) (header, body) taken as the TABLE: fills c->peers and c->secret and
 * admits the secret. A REJECT becomes the error it carries; anything else VKG_ERR_PROTOCOL. */
vkg_status vkg__rendezvous_table(vkg_comm_t *c, zmq_msg_t *f, int nf, const char *master);

#endif
