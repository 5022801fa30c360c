/*
 * A page of words registered with the fake device layer, for its unit tests
 * (test_dev_fake.c, test_dev_fake_events.c): included after cmocka.h and device/dev.h.
 */
#ifndef COLL_TEST_FAKE_PAGE_H
#define COLL_TEST_FAKE_PAGE_H

#include <stdint.h>
#include <sys/mman.h>

/* A registered page of a shared mapping (as a completion word's is), zero, its device address
 * in *dev_p. */
static uint64_t *registered_page(uint64_t *dev_p)
{
    void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

    assert_true(p != MAP_FAILED);
    assert_int_equal(coll_dev_fake.host_register(p, 4096, dev_p), COLL_OK);
    return p;
}

/* Undo registered_page(). */
static void unregister_page(uint64_t *page)
{
    coll_dev_fake.host_unregister(page);
    munmap(page, 4096);
}

#endif
