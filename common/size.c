#include "common/size.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>

int coll_parse_size(const char *text, uint64_t *bytes_p)
{
    char *end;
    errno = 0;
    if (!isdigit((unsigned char)text[0])) {
        return -1;
    }
    unsigned long long v = strtoull(text, &end, 10);
    unsigned shift = 0;
    if (errno != 0) {
        return -1;
    }
    switch (toupper((unsigned char)*end)) {
    case '\0': break;
    case 'K': shift = 10; end++; break;
    case 'M': shift = 20; end++; break;
    case 'G': shift = 30; end++; break;
    case 'T': shift = 40; end++; break;
    case 'B': break; /* a bare byte suffix, consumed below */
    default: return -1;
    }
    if (*end == 'B' || *end == 'b') {
        end++;
    }
    if (*end != '\0' || (shift > 0 && v > (UINT64_MAX >> shift))) {
        return -1;
    }
    *bytes_p = (uint64_t)v << shift;
    return 0;
}
