/* GPipe, 1F1B and ZB-H1 action lists (see pp_schedule.h). */
#include "parallel/pp_schedule.h"

#include "parallel/strategy.h"

int vkg_pp_slots(int kind, int S, int stage, int M)
{
    int k = kind == VKG_PP_GPIPE ? M : kind == VKG_PP_ZBH1 ? S : S - stage;
    return k < M ? k : M;
}

int vkg_pp_actions(int kind, int M)
{
    return (kind == VKG_PP_ZBH1 ? 3 : 2) * M;
}

/* ZB-H1: 1F1B's forwards and input passes, each weight pass `stage` input passes after its own,
 * the deferred ones at the end. */
static void zbh1(int S, int stage, int M, int K, vkg_pp_action *out)
{
    int warm = S - 1 - stage < M ? S - 1 - stage : M, n = 0, w = 0;
    for (int i = 0; i < warm; i++)
        out[n++] = (vkg_pp_action){VKG_PP_OP_F, i, i % K};
    for (int i = 0; i < M; i++) {
        if (warm + i < M)
            out[n++] = (vkg_pp_action){VKG_PP_OP_F, warm + i, (warm + i) % K};
        out[n++] = (vkg_pp_action){VKG_PP_OP_B, i, i % K};
        if (i >= stage) { /* the weight pass of micro-batch i - stage */
            out[n++] = (vkg_pp_action){VKG_PP_OP_W, w, w % K};
            w++;
        }
    }
    for (; w < M; w++)
        out[n++] = (vkg_pp_action){VKG_PP_OP_W, w, w % K};
}

int vkg_pp_schedule(int kind, int S, int stage, int M, vkg_pp_action *out)
{
    int K = vkg_pp_slots(kind, S, stage, M), n = 0;
    if (kind == VKG_PP_ZBH1) {
        zbh1(S, stage, M, K, out);
        return K;
    }
    int warm = kind == VKG_PP_GPIPE ? M : (S - 1 - stage < M ? S - 1 - stage : M);
    for (int i = 0; i < warm; i++)
        out[n++] = (vkg_pp_action){VKG_PP_OP_F, i, i % K};
    for (int i = 0; warm + i < M; i++) { /* steady state: one forward, one backward */
        out[n++] = (vkg_pp_action){VKG_PP_OP_F, warm + i, (warm + i) % K};
        out[n++] = (vkg_pp_action){VKG_PP_OP_B, i, i % K};
    }
    for (int i = M - warm; i < M; i++)
        out[n++] = (vkg_pp_action){VKG_PP_OP_B, i, i % K};
    return K;
}
