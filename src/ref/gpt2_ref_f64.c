/* The double instantiation of the reference GPT-2 (vkg_ref_gpt2_*_f64). The code lives in
 * gpt2_ref_impl.h, shared by both precisions. */
#include <assert.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ref/gpt2_ref.h"
#include "ref/ref.h"

#define real double
#define REF_SFX _f64
#include "ref/gpt2_ref_impl.h"
