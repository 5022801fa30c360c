/**
 * @file assert.h
 * @brief COLL_ASSERT(cond): an invariant (a state transition, a counter, list membership) that
 *        holds unless the code is wrong. Checked in Debug and sanitizer builds (COLL_ASSERTIONS,
 *        set by CMake), where a violation prints the condition and where it failed, then
 *        aborts; compiled out otherwise (Release, RelWithDebInfo), arguments unevaluated.
 */
#ifndef COLL_COMMON_ASSERT_H
#define COLL_COMMON_ASSERT_H

#ifdef COLL_ASSERTIONS
/** @brief Print "file:line: function: assertion 'cond' failed" to stderr and abort(). */
void coll__assert_failed(const char *cond, const char *file, int line, const char *func)
    __attribute__((noreturn));
#define COLL_ASSERT(cond)                                                                          \
    ((cond) ? (void)0 : coll__assert_failed(#cond, __FILE__, __LINE__, __func__))
#else
#define COLL_ASSERT(cond) ((void)0)
#endif

#endif
