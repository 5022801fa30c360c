/**
 * @file dtype.h
 * @brief Internals of the names of datatypes, reductions and algorithms shared by the client
 *        library, the daemon and the tools (the public names are in collective.h).
 */
#ifndef COLL_COMMON_DTYPE_H
#define COLL_COMMON_DTYPE_H

/** @return The coll_algo_t named @p name ("auto", "ring", "rd", ...); -1 when unknown. Pure. */
int coll__algo_parse(const char *name);

#endif
