/* One value of a coll-train option (args.h). */
#include "args.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int train_arg_long(const char *opt, const char *s, long min, long max, long *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > max) {
        fprintf(stderr, "coll-train: --%s: '%s' is not an integer in [%ld, %ld]\n", opt, s, min,
                max);
        return -1;
    }
    *out = v;
    return 0;
}

int train_arg_int(const char *opt, const char *s, int min, int *out)
{
    long v;

    if (train_arg_long(opt, s, min, INT_MAX, &v) != 0) {
        return -1;
    }
    *out = (int)v;
    return 0;
}

int train_arg_double(const char *opt, const char *s, double min, double max, double *out)
{
    char *end;
    double v;

    errno = 0;
    v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !isfinite(v) || v < min || v >= max) {
        fprintf(stderr, "coll-train: --%s: '%s' is not a number in [%g, %g)\n", opt, s, min, max);
        return -1;
    }
    *out = v;
    return 0;
}

int train_arg_float(const char *opt, const char *s, double min, double max, float *out)
{
    double v;

    if (train_arg_double(opt, s, min, max, &v) != 0) {
        return -1;
    }
    *out = (float)v;
    return 0;
}

int train_arg_name(const char *opt, const char *s, const char *const *names, int n, int *out)
{
    for (int i = 0; i < n; i++) {
        if (strcmp(s, names[i]) == 0) {
            *out = i;
            return 0;
        }
    }
    fprintf(stderr, "coll-train: --%s: '%s' is not one of", opt, s);
    for (int i = 0; i < n; i++) {
        fprintf(stderr, " %s", names[i]);
    }
    fprintf(stderr, "\n");
    return -1;
}

int train_arg_span(const char *opt, const char *s, train_span_t *out)
{
    char buf[32];
    size_t len = strlen(s);
    int epochs = len > 2 && strcmp(s + len - 2, "ep") == 0;
    long v;

    if (len >= sizeof(buf)) {
        fprintf(stderr, "coll-train: --%s: '%s' is too long\n", opt, s);
        return -1;
    }
    memcpy(buf, s, len + 1);
    buf[epochs ? len - 2 : len] = '\0';
    if (train_arg_long(opt, buf, 0, INT_MAX, &v) != 0) {
        return -1;
    }
    *out = (train_span_t){.count = v, .epochs = epochs};
    return 0;
}

int train_arg_u64(const char *opt, const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(s, &end, 0);
    if (errno != 0 || end == s || *end != '\0' || s[0] == '-') {
        fprintf(stderr, "coll-train: --%s: '%s' is not an unsigned 64-bit integer\n", opt, s);
        return -1;
    }
    *out = v;
    return 0;
}
