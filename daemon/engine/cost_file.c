/*
 * The cost model's constants read from text (cost.h): the "KEY = VALUE" lines bench/calibrate.sh
 * writes, for the daemon's cost_params file and bench/coll-cost's --params and --set.
 */
#include "engine/cost.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { KEY_DOUBLE, KEY_U32, KEY_U64 } key_type_t;

typedef struct {
    const char *name;
    size_t off;
    key_type_t type;
} param_key_t;

#define D(f) {#f, offsetof(coll_cost_params_t, f), KEY_DOUBLE}
#define U32(f) {#f, offsetof(coll_cost_params_t, f), KEY_U32}
#define U64(f) {#f, offsetof(coll_cost_params_t, f), KEY_U64}

static const param_key_t keys[] = {
    D(alpha),          D(beta),           D(gamma),          D(alpha_op),
    D(alpha_shm),      D(beta_mem),       D(alpha_direct),   D(codec_cast),
    D(codec_onebit),   D(codec_topk),     D(codec_flop),     D(topk_ratio),
    U32(powersgd_rank), U64(powersgd_rows), U32(knomial_radix), U64(segment_bytes),
    U64(rd_max_bytes), D(cpu_msg),         D(cpu_byte),       D(cpu_op),
    U32(cpus),         U32(cpus_shared),
};

#define NKEYS (sizeof(keys) / sizeof(keys[0]))

static const param_key_t *key_named(const char *name, size_t len)
{
    for (size_t i = 0; i < NKEYS; i++) {
        if (strlen(keys[i].name) == len && strncmp(keys[i].name, name, len) == 0) {
            return &keys[i];
        }
    }
    return NULL;
}

/* Store @p v in the field of @p k; 0 when it does not fit the field's type. */
static int store(coll_cost_params_t *p, const param_key_t *k, double v)
{
    char *f = (char *)p + k->off;

    switch (k->type) {
    case KEY_U32:
        if (v != floor(v) || v > UINT32_MAX) {
            return 0;
        }
        *(uint32_t *)f = (uint32_t)v;
        return 1;
    case KEY_U64:
        if (v != floor(v) || v >= 18446744073709551616.0) {
            return 0;
        }
        *(uint64_t *)f = (uint64_t)v;
        return 1;
    default:
        *(double *)f = v;
        return 1;
    }
}

/* The key named before the '=' of @p line, with @p value the text after it; NULL with @p err
 * saying why for a line without '=' or an unknown key. */
static const param_key_t *line_key(const char *line, const char **value, char *err,
                                   size_t errlen)
{
    const char *eq = strchr(line, '='), *key = line + strspn(line, " \t");
    const param_key_t *k;
    size_t klen;

    if (eq == NULL) {
        snprintf(err, errlen, "want KEY = VALUE, got \"%s\"", line);
        return NULL;
    }
    klen = (size_t)(eq - key);
    while (klen > 0 && (key[klen - 1] == ' ' || key[klen - 1] == '\t')) {
        klen--;
    }
    if ((k = key_named(key, klen)) == NULL) {
        snprintf(err, errlen, "unknown constant \"%.*s\"", (int)klen, key);
    }
    *value = eq + 1;
    return k;
}

/* Whether @p s is a decimal number, spaces around it: an optional sign, digits with at most one
 * '.' (one digit at least), an optional exponent ('e', an optional sign, digits). Not the hex,
 * "inf" and "nan" strtod() also reads. */
static int decimal(const char *s)
{
    static const char digits[] = "0123456789";
    size_t n;

    s += strspn(s, " \t");
    s += *s == '+' || *s == '-';
    n = strspn(s, digits);
    s += n;
    if (*s == '.') {
        n += strspn(s + 1, digits);
        s += 1 + strspn(s + 1, digits);
    }
    if (n == 0) {
        return 0;
    }
    if (*s == 'e' || *s == 'E') {
        s += 1 + (s[1] == '+' || s[1] == '-');
        if ((n = strspn(s, digits)) == 0) {
            return 0;
        }
        s += n;
    }
    return s[strspn(s, " \t\r")] == '\0';
}

/* The number @p text (what follows the '=') as @p k's value in @p p; COLL_ERR_INVALID with
 * @p err saying why. One below the smallest double is the 0 or denormal strtod() gives it. */
static coll_status_t set_value(coll_cost_params_t *p, const param_key_t *k, const char *text,
                               char *err, size_t errlen)
{
    const char *shown = text + strspn(text, " \t");
    int ok = decimal(text), range = 0;
    double v = 0;

    if (ok) {
        errno = 0;
        v = strtod(text, NULL);
        range = errno == ERANGE;
    }
    if (range && isinf(v)) {
        snprintf(err, errlen, "%s: \"%s\" is out of range (above %.1e)", k->name, shown,
                 DBL_MAX);
        return COLL_ERR_INVALID;
    }
    /* Else a range error is an underflow; signbit(): "-1e-400" is negative, though -0. */
    if (!ok || v < 0 || (range && signbit(v)) || !store(p, k, v)) {
        snprintf(err, errlen, "%s: \"%s\" is not a %s", k->name, shown,
                 k->type == KEY_DOUBLE ? "finite number >= 0" : "whole number >= 0");
        return COLL_ERR_INVALID;
    }
    return COLL_OK;
}

coll_status_t coll_cost_params_set(coll_cost_params_t *p, const char *line, char *err,
                                   size_t errlen)
{
    const char *value;
    const param_key_t *k = line_key(line, &value, err, errlen);

    return k == NULL ? COLL_ERR_INVALID : set_value(p, k, value, err, errlen);
}

/* The constant of line @p no of the file, @p line without its comment, over @p p; @p first the
 * line each key was first given on (0: not yet). Blank lines are skipped. */
static coll_status_t set_line(coll_cost_params_t *p, const char *line, unsigned no,
                              unsigned *first, char *why, size_t whylen)
{
    const param_key_t *k;
    const char *value;

    if (line[strspn(line, " \t\r")] == '\0') {
        return COLL_OK;
    }
    if ((k = line_key(line, &value, why, whylen)) == NULL) {
        return COLL_ERR_INVALID;
    }
    if (first[k - keys] != 0) {
        snprintf(why, whylen, "key %s given twice, first on line %u", k->name, first[k - keys]);
        return COLL_ERR_INVALID;
    }
    first[k - keys] = no;
    return set_value(p, k, value, why, whylen);
}

/* The longest line read: 255 characters and a '\r' before the '\n'. */
#define LINE_BYTES 256

/*
 * Reads the next line of @p f, up to its '\n' or the end of the file, into @p line of
 * @p size bytes, NUL-terminated and without the '\n'. Returns its length in bytes, NUL bytes
 * included; @p size for a longer line (the rest left unread); -1 at the end of the file.
 */
static long next_line(FILE *f, char *line, size_t size)
{
    size_t n = 0;
    int c = EOF;

    while (n < size && (c = getc(f)) != EOF && c != '\n') {
        line[n++] = (char)c;
    }
    if (n == 0 && c == EOF) {
        return -1;
    }
    line[n < size ? n : size - 1] = '\0';
    return (long)n;
}

/* Every line of @p f over @p p; COLL_OK or COLL_ERR_INVALID with the line's number. */
static coll_status_t read_lines(FILE *f, coll_cost_params_t *p, const char *path, char *err,
                                size_t errlen)
{
    char line[LINE_BYTES + 1], why[200];
    coll_status_t st = COLL_OK;
    unsigned no = 0, first[NKEYS] = {0};
    long n;

    while (st == COLL_OK && (n = next_line(f, line, sizeof(line))) >= 0) {
        no++;
        st = COLL_ERR_INVALID;
        if (n == (long)sizeof(line)) {
            snprintf(why, sizeof(why), "line longer than 255 characters");
        } else if (memchr(line, '\0', (size_t)n) != NULL) {
            snprintf(why, sizeof(why), "a NUL byte");
        } else {
            line[strcspn(line, "#")] = '\0';
            st = set_line(p, line, no, first, why, sizeof(why));
        }
        if (st != COLL_OK) {
            snprintf(err, errlen, "%s:%u: %s", path, no, why);
        }
    }
    return st;
}

coll_status_t coll_cost_params_load(coll_cost_params_t *p, const char *path, char *err,
                                    size_t errlen)
{
    coll_cost_params_t q = *p;
    coll_status_t st;
    FILE *f = fopen(path, "r");

    if (f == NULL) {
        st = (coll_status_t)-errno;
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return st;
    }
    st = read_lines(f, &q, path, err, errlen);
    if (st == COLL_OK && ferror(f)) {
        snprintf(err, errlen, "%s: read error", path);
        st = COLL_ERR_INVALID;
    }
    fclose(f);
    if (st == COLL_OK && !coll_cost_params_valid(&q)) {
        snprintf(err, errlen, "%s: the constants are not usable together: %s", path,
                 coll_cost_params_problem(&q));
        st = COLL_ERR_INVALID;
    }
    if (st == COLL_OK) {
        *p = q;
    }
    return st;
}
