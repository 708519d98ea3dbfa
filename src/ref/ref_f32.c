/* The float instantiation of the CPU reference ops (vkg_ref_<op>): float storage, double
 * accumulation in every reduction. The code lives in ref_impl.h, shared with ref_f64.c. */
#include <assert.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "ref/ref.h"

#define real float
#define REF_SFX
#include "ref/ref_impl.h"
#include "ref/ref_llama_impl.h"
