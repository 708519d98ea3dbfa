/* The library's internal interfaces the command-line tool uses beyond its public API
 * (include/vkgpt/): the one place where src/cli reaches into the library. Every other file of
 * src/cli includes only its own headers, the public ones, this one and the support below the
 * library (os/: clock, file-name patterns; base/: errors, parsing, escaping; base/json.h: a JSON
 * reader of no dependencies), which its unit tests compile alone (tests/check_cli_includes.cmake
 * fails the tests otherwise). So what the tool depends on inside the library is listed here,
 * each with why. These interfaces may change with the library; the public headers are the ones
 * a program outside this tree uses.
 *
 * Besides these, bench ops includes the ops' X-macro table (ops/op_table.def) where it builds
 * its rows, as ops.h does. */
#ifndef VKG_CLI_INTERNAL_H
#define VKG_CLI_INTERNAL_H

/* vkgpt plan and bench train: the stage plan, the fit check and ZeRO-1's shards without a
 * device, and a strategy built alone to time its parts. */
#include "parallel/strategy.h"

/* vkgpt sample: a checkpoint's files read without a trainer. */
#include "train/checkpoint.h"

/* The benchmarks (bench_*.c): single ops recorded on their own tensors (bench ops, fused), the
 * model's parts timed alone (bench train), the driver's pipeline statistics (bench ops). */
#include "model/model.h"
#include "ops/ops.h"
#include "vk/pipestats.h"

#endif
