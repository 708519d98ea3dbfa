/* An upward or sideways include: the parallel layer reaching the trainer's internals above it.
 * tests/check_layers.cmake expects this file not to compile against the parallel view and to
 * compile against the train view. */
#include "train/trainer_internal.h"

int vkg_layers_probe(void);
int vkg_layers_probe(void)
{
    return 0;
}
