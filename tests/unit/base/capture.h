/**
 * @file capture.h
 * @brief Unit-test helper: capture what a function prints on stdout or stderr into a string,
 *        and assert on it (cmocka). One capture at a time; not thread-safe.
 */
#ifndef COLL_TEST_CAPTURE_H
#define COLL_TEST_CAPTURE_H

/** @brief Redirect descriptor @p fd (STDOUT_FILENO or STDERR_FILENO) into a temporary file. */
void capture_start(int fd);

/**
 * @brief Restore the descriptor and return what was written meanwhile (at most 16 KiB,
 *        NUL-terminated, valid until the next capture). Safe when nothing is captured (a
 *        teardown after a failed assert): returns the last text.
 */
const char *capture_end(void);

/** @return The text of the last finished capture. */
const char *capture_text(void);

/** @brief Fail the test unless @p part occurs in @p text (both printed when it does not). */
void assert_contains(const char *text, const char *part);

#endif
