/**
 * @file fuzz.h
 * @brief What the libFuzzer harnesses of tests/fuzz share: an assertion that survives NDEBUG
 *        and names the broken invariant, and a byte reader over the fuzzer's input.
 *
 * A harness checks invariants of what a decoder accepted (it re-validates, its ranges are
 * within the documented limits), not only that nothing crashed: FUZZ_CHECK aborts, which
 * libFuzzer reports as a crash and saves the input that caused it.
 */
#ifndef COLL_FUZZ_H
#define COLL_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/** Fail the run when @p cond is false, naming it and the harness's own explanation. */
#define FUZZ_CHECK(cond, ...)                                                                      \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fuzz_fail(__FILE__, __LINE__, #cond);                                                  \
            fprintf(fuzz_report_stream(), __VA_ARGS__);                                            \
            fprintf(fuzz_report_stream(), "\n");                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/** Where failures are reported: stderr, unless a harness redirected it (fuzz_config.c). */
FILE *fuzz_report_stream(void);

/** @brief Send failure reports to @p f (NULL: stderr). */
void fuzz_report_to(FILE *f);

/** Print the first line of a failure report. */
void fuzz_fail(const char *file, int line, const char *cond);

/** Consumes the fuzzer's input from the front; reads past the end give zeros. */
typedef struct {
    const uint8_t *p;
    size_t left;
} fuzz_in_t;

static inline uint64_t fuzz_take(fuzz_in_t *in, size_t bytes)
{
    uint64_t v = 0;
    for (size_t i = 0; i < bytes; i++) {
        v = v << 8 | (in->left > 0 ? (in->left--, *in->p++) : 0);
    }
    return v;
}

/** A deterministic generator of chunk sizes, seeded from the input. */
static inline uint32_t fuzz_rand(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return (uint32_t)(*state >> 32);
}

#endif
