/* The fixed 64-byte wire header: little-endian encoding and names for messages. Validation of
 * the decoded fields against a communicator lives in io.c, where the sender can be named. */
#include "comm_internal.h"

#include <string.h>

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t get32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

void vkg__wire_encode(const vkg_wire_hdr *h, uint8_t out[VKG_WIRE_HDR_BYTES])
{
    put32(out + 0, h->magic);
    put16(out + 4, h->version);
    out[6] = h->kind;
    out[7] = h->flags;
    put64(out + 8, h->job_id);
    put32(out + 16, h->generation);
    put32(out + 20, h->sender);
    put64(out + 24, h->seq);
    put32(out + 32, h->segment);
    put32(out + 36, h->tag);
    put64(out + 40, h->bytes);
    memcpy(out + 48, h->secret, VKG_SECRET_BYTES);
}

void vkg__wire_decode(const uint8_t in[VKG_WIRE_HDR_BYTES], vkg_wire_hdr *h)
{
    h->magic = get32(in + 0);
    h->version = get16(in + 4);
    h->kind = in[6];
    h->flags = in[7];
    h->job_id = get64(in + 8);
    h->generation = get32(in + 16);
    h->sender = get32(in + 20);
    h->seq = get64(in + 24);
    h->segment = get32(in + 32);
    h->tag = get32(in + 36);
    h->bytes = get64(in + 40);
    memcpy(h->secret, in + 48, VKG_SECRET_BYTES);
}

int vkg__same_secret(const uint8_t *a, const uint8_t *b)
{
    uint8_t d = 0;
    for (int i = 0; i < VKG_SECRET_BYTES; i++)
        d |= (uint8_t)(a[i] ^ b[i]);
    return d == 0;
}

const char *vkg__wire_kind_name(int kind)
{
    switch (kind) {
    case VKG_W_HELLO:
        return "hello";
    case VKG_W_TABLE:
        return "peer table";
    case VKG_W_REJECT:
        return "reject";
    case VKG_W_DATA:
        return "data";
    case VKG_W_CREDIT:
        return "credit";
    case VKG_W_ABORT:
        return "abort";
    case VKG_W_P2P:
        return "point-to-point";
    case VKG_W_STALL:
        return "stall";
    case VKG_W_READY:
        return "ready";
    case VKG_W_GO:
        return "go-ahead";
    }
    return "unknown";
}

const char *vkg__coll_name(int coll)
{
    switch (coll) {
    case VKG_C_ALLREDUCE:
        return "allreduce";
    case VKG_C_BCAST:
        return "broadcast";
    case VKG_C_ALLGATHER:
        return "allgather";
    case VKG_C_BARRIER:
        return "barrier";
    case VKG_C_RSCATTER:
        return "reduce-scatter";
    case VKG_C_ALLGATHERV:
        return "allgatherv";
    }
    return "unknown collective";
}
