#include "common/assert.h"

#include <stdio.h>
#include <stdlib.h>

#ifdef COLL_ASSERTIONS
void coll__assert_failed(const char *cond, const char *file, int line, const char *func)
{
    fprintf(stderr, "%s:%d: %s: Assertion '%s' failed\n", file, line, func, cond);
    fflush(stderr);
    abort();
}
#endif
