/* The transport's keyed hash and random bytes, both from libsodium (which libzmq links for
 * CURVE): the keyed BLAKE2b that proves, in the shared-memory handover (shm.c), that both ends
 * hold the job's secret without sending it, and the random bytes of secrets, nonces and socket
 * names. No state of its own; libsodium's initialisation is idempotent and thread-safe. */
#include "comm_internal.h"

#include <sodium.h>

_Static_assert(VKG_SECRET_BYTES >= crypto_generichash_KEYBYTES_MIN, "the secret keys BLAKE2b");
_Static_assert(VKG_MAC_BYTES >= crypto_generichash_BYTES_MIN &&
                   VKG_MAC_BYTES <= crypto_generichash_BYTES_MAX,
               "a BLAKE2b output size");

vkg_status vkg__crypto_random(void *buf, size_t n)
{
    VKG_CHECK(sodium_init() >= 0, VKG_ERR_IO,
              "libsodium could not be initialised (no source of random bytes)");
    randombytes_buf(buf, n);
    return VKG_OK;
}

void vkg__crypto_mac(const uint8_t key[VKG_SECRET_BYTES], const void *msg, size_t n,
                     uint8_t out[VKG_MAC_BYTES])
{
    crypto_generichash(out, VKG_MAC_BYTES, msg, n, key, VKG_SECRET_BYTES);
}

int vkg__crypto_same_mac(const uint8_t *a, const uint8_t *b)
{
    return sodium_memcmp(a, b, VKG_MAC_BYTES) == 0;
}
