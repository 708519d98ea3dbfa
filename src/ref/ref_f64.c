/* The double instantiation of the CPU reference ops (vkg_ref_<op>_f64), used by the
 * finite-difference tests. The code lives in ref_impl.h, shared with ref_f32.c. */
#include <assert.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "ref/ref.h"

#define real double
#define REF_SFX _f64
#include "ref/ref_impl.h"
#include "ref/ref_llama_impl.h"
