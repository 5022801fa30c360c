/**
 * @file exec_host.h
 * @brief The host executor (kernels/exec.h): the kernels of kernels/cpu on host memory. Callers
 *        reach it through coll_exec_get(COLL_MEM_HOST); only kernels/exec.c names it.
 */
#ifndef COLL_KERNELS_CPU_EXEC_HOST_H
#define COLL_KERNELS_CPU_EXEC_HOST_H

#include "kernels/exec.h"

/** The host's table: every entry is the host kernel of the same name. */
extern const coll_exec_t coll_exec_host;

#endif
