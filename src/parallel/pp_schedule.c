/* GPipe and 1F1B action lists (see pp_schedule.h). */
#include "parallel/pp_schedule.h"

#include "parallel/strategy.h"

int vkg_pp_slots(int kind, int S, int stage, int M)
{
    int k = kind == VKG_PP_GPIPE ? M : S - stage;
    return k < M ? k : M;
}

int vkg_pp_schedule(int kind, int S, int stage, int M, vkg_pp_action *out)
{
    int K = vkg_pp_slots(kind, S, stage, M), n = 0;
    int warm = kind == VKG_PP_GPIPE ? M : (S - 1 - stage < M ? S - 1 - stage : M);
    for (int i = 0; i < warm; i++)
        out[n++] = (vkg_pp_action){0, i, i % K};
    for (int i = 0; warm + i < M; i++) { /* steady state: one forward, one backward */
        out[n++] = (vkg_pp_action){0, warm + i, (warm + i) % K};
        out[n++] = (vkg_pp_action){1, i, i % K};
    }
    for (int i = M - warm; i < M; i++)
        out[n++] = (vkg_pp_action){1, i, i % K};
    return K;
}
