/*
 * The optimizer element loops (optim_body.h) for the build's baseline instruction set: on
 * x86-64 the compiler vectorizes them with SSE2, elsewhere with what the target has. Always
 * supported; the fallback when no wider set is.
 */
static int generic_supported(void)
{
    return 1;
}

#define OPTIM_ISA_VAR coll__optim_generic
#define OPTIM_ISA_NAME "generic"
#define OPTIM_ISA_SUPPORTED generic_supported
#define OPTIM_ISA_VBYTES 16 /* vectors of the sums of squares */
#include "kernels/cpu/optim_body.h"
