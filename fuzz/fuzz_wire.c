/* libFuzzer target: what a rank parses from the network. The first input byte picks the parser
 * (see vkg__fuzz_wire in transport/comm_testing.h): a data-connection message (header frame and
 * payload, validated and dispatched: aborts, stall notices, credits, point-to-point counts, stale
 * data), a rendezvous hello at rank 0, or rank 0's reply (peer table or reject) at a joining
 * rank. Any status is fine; a crash, a sanitizer report or a leak is a finding. */
#include <stddef.h>
#include <stdint.h>

#include "../transport/comm_testing.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    (void)vkg__fuzz_wire(data, size);
    return 0;
}
