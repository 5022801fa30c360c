/**
 * @file list.h
 * @brief Intrusive circular doubly linked list (as UCX's ucs_list or the Linux kernel's list).
 * Not thread-safe; every list in the daemon belongs to the loop thread.
 */
#ifndef COLL_BASE_LIST_H
#define COLL_BASE_LIST_H

#include <stddef.h>

#include "common/assert.h"

/** A list head, or a link embedded in an element. */
typedef struct coll_list {
    struct coll_list *prev;
    struct coll_list *next;
} coll_list_t;

static inline void coll_list_init(coll_list_t *head)
{
    head->prev = head;
    head->next = head;
}

static inline int coll_list_empty(const coll_list_t *head)
{
    return head->next == head;
}

/** Append @p elem at the tail of @p head; @p elem must not be in a list (an unlinked or freshly
 *  initialized link, or one never linked). */
static inline void coll_list_push(coll_list_t *head, coll_list_t *elem)
{
    COLL_ASSERT(elem->next == NULL || elem->next == elem);
    elem->prev = head->prev;
    elem->next = head;
    head->prev->next = elem;
    head->prev = elem;
}

/** Unlink @p elem; it becomes an empty list of its own, so removing twice is harmless. */
static inline void coll_list_remove(coll_list_t *elem)
{
    COLL_ASSERT(elem->next->prev == elem && elem->prev->next == elem);
    elem->prev->next = elem->next;
    elem->next->prev = elem->prev;
    coll_list_init(elem);
}

/** Remove and return the head element, or NULL when empty. */
static inline coll_list_t *coll_list_pop(coll_list_t *head)
{
    coll_list_t *e = head->next;
    if (e == head) {
        return NULL;
    }
    coll_list_remove(e);
    return e;
}

#define coll_container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/** Iterate over elements of type @p type linked through @p member; @p tmp allows removal. */
#define coll_list_for_each_safe(elem, tmp, head, type, member)                                    \
    for (elem = coll_container_of((head)->next, type, member),                                    \
        tmp = coll_container_of(elem->member.next, type, member);                                  \
         &elem->member != (head);                                                                  \
         elem = tmp, tmp = coll_container_of(elem->member.next, type, member))

#endif
