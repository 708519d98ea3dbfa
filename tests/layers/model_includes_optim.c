/* An upward or sideways include: the model layer reaching the optimizer (the model knows no
 * optimizer). tests/check_layers.cmake expects this file not to compile against the model view and
 * to compile against the parallel view. */
#include "optim/adamw.h"

int vkg_layers_probe(void);
int vkg_layers_probe(void)
{
    return 0;
}
