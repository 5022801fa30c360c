/* Unit tests of the intrusive list (daemon/list.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "base/list.h"

typedef struct {
    int value;
    coll_list_t link;
} item_t;

static void fill(coll_list_t *head, item_t *items, int n)
{
    coll_list_init(head);
    for (int i = 0; i < n; i++) {
        items[i].value = i;
        coll_list_init(&items[i].link); /* stack memory: push wants an unlinked element */
        coll_list_push(head, &items[i].link);
    }
}

/* Values of the list in order, written to out; returns the length. */
static int values(coll_list_t *head, int *out, int max)
{
    int n = 0;
    for (coll_list_t *l = head->next; l != head && n < max; l = l->next) {
        out[n++] = coll_container_of(l, item_t, link)->value;
    }
    return n;
}

static void test_init_is_empty(void **state)
{
    coll_list_t head;
    coll_list_init(&head);
    assert_true(coll_list_empty(&head));
    assert_null(coll_list_pop(&head));
}

static void test_push_appends_at_tail(void **state)
{
    coll_list_t head;
    item_t items[3];
    int got[4];

    fill(&head, items, 3);
    assert_false(coll_list_empty(&head));
    assert_int_equal(values(&head, got, 4), 3);
    assert_int_equal(got[0], 0);
    assert_int_equal(got[1], 1);
    assert_int_equal(got[2], 2);
    assert_ptr_equal(head.prev, &items[2].link);
}

static void test_pop_takes_head_in_fifo_order(void **state)
{
    coll_list_t head;
    item_t items[3];

    fill(&head, items, 3);
    for (int i = 0; i < 3; i++) {
        coll_list_t *e = coll_list_pop(&head);
        assert_non_null(e);
        assert_int_equal(coll_container_of(e, item_t, link)->value, i);
        /* A popped element is an empty list of its own. */
        assert_true(coll_list_empty(e));
    }
    assert_true(coll_list_empty(&head));
    assert_null(coll_list_pop(&head));
}

static void test_remove_middle_keeps_neighbours_linked(void **state)
{
    coll_list_t head;
    item_t items[3];
    int got[4];

    fill(&head, items, 3);
    coll_list_remove(&items[1].link);
    assert_int_equal(values(&head, got, 4), 2);
    assert_int_equal(got[0], 0);
    assert_int_equal(got[1], 2);
    assert_ptr_equal(items[0].link.next, &items[2].link);
    assert_ptr_equal(items[2].link.prev, &items[0].link);
}

static void test_remove_twice_is_harmless(void **state)
{
    coll_list_t head;
    item_t items[2];
    int got[3];

    fill(&head, items, 2);
    coll_list_remove(&items[0].link);
    coll_list_remove(&items[0].link);
    assert_int_equal(values(&head, got, 3), 1);
    assert_int_equal(got[0], 1);
}

static void test_remove_last_leaves_empty(void **state)
{
    coll_list_t head;
    item_t items[1];

    fill(&head, items, 1);
    coll_list_remove(&items[0].link);
    assert_true(coll_list_empty(&head));
    assert_ptr_equal(head.next, &head);
    assert_ptr_equal(head.prev, &head);
}

static void test_for_each_safe_removes_every_other(void **state)
{
    coll_list_t head;
    item_t items[6], *it, *tmp;
    int got[7], visited = 0;

    fill(&head, items, 6);
    coll_list_for_each_safe(it, tmp, &head, item_t, link) {
        assert_int_equal(it->value, visited);
        visited++;
        if (it->value % 2 == 0) {
            coll_list_remove(&it->link);
        }
    }
    assert_int_equal(visited, 6);
    assert_int_equal(values(&head, got, 7), 3);
    assert_int_equal(got[0], 1);
    assert_int_equal(got[1], 3);
    assert_int_equal(got[2], 5);
}

static void test_for_each_safe_removes_all(void **state)
{
    coll_list_t head;
    item_t items[4], *it, *tmp;
    int visited = 0;

    fill(&head, items, 4);
    coll_list_for_each_safe(it, tmp, &head, item_t, link) {
        coll_list_remove(&it->link);
        visited++;
    }
    assert_int_equal(visited, 4);
    assert_true(coll_list_empty(&head));
}

static void test_for_each_safe_on_empty_visits_nothing(void **state)
{
    coll_list_t head;
    item_t *it, *tmp;
    int visited = 0;

    coll_list_init(&head);
    coll_list_for_each_safe(it, tmp, &head, item_t, link) {
        visited++;
    }
    assert_int_equal(visited, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_is_empty),
        cmocka_unit_test(test_push_appends_at_tail),
        cmocka_unit_test(test_pop_takes_head_in_fifo_order),
        cmocka_unit_test(test_remove_middle_keeps_neighbours_linked),
        cmocka_unit_test(test_remove_twice_is_harmless),
        cmocka_unit_test(test_remove_last_leaves_empty),
        cmocka_unit_test(test_for_each_safe_removes_every_other),
        cmocka_unit_test(test_for_each_safe_removes_all),
        cmocka_unit_test(test_for_each_safe_on_empty_visits_nothing),
    };
    return cmocka_run_group_tests_name("list", tests, NULL, NULL);
}
