/**
 * @file args.h
 * @brief One value of a coll-train option: a number in a range, one of a few names, a span.
 *
 * Each parser reads the text @p s given to option @p opt (its long name, without the dashes).
 * A value it refuses is said on stderr in one line that names the option, the value and what
 * was expected, and @p out is left as it was, so that the command line's other values are
 * still read and every bad one is reported in the same run (options.h).
 */
#ifndef COLL_TRAIN_ARGS_H
#define COLL_TRAIN_ARGS_H

#include "lr.h"

#include <stdint.h>

/** @brief A decimal integer in [@p min, @p max]. @return 0, or -1 after saying why. */
int train_arg_long(const char *opt, const char *s, long min, long max, long *out);

/** @brief A decimal integer in [@p min, INT_MAX]. @return 0, or -1 after saying why. */
int train_arg_int(const char *opt, const char *s, int min, int *out);

/** @brief A finite number in [@p min, @p max). @return 0, or -1 after saying why. */
int train_arg_double(const char *opt, const char *s, double min, double max, double *out);

/** @brief As train_arg_double(), rounded to float. @return 0, or -1 after saying why. */
int train_arg_float(const char *opt, const char *s, double min, double max, float *out);

/**
 * @brief One of the @p n strings @p names; @p out is its index.
 * @return 0, or -1 after naming the value and every accepted name.
 */
int train_arg_name(const char *opt, const char *s, const char *const *names, int n, int *out);

/** @brief A span: "500" (steps) or "5ep" (epochs), 0 .. INT_MAX. @return 0, or -1 after saying
 *         why. */
int train_arg_span(const char *opt, const char *s, train_span_t *out);

/** @brief An unsigned 64-bit integer (decimal, 0x hex or 0 octal). @return 0, or -1 after
 *         saying why. */
int train_arg_u64(const char *opt, const char *s, uint64_t *out);

#endif /* COLL_TRAIN_ARGS_H */
