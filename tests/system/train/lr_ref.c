/*
 * lr_ref: the learning rates coll_schedule_lr() gives for a schedule written field by field on
 * the command line, one "<step> <lr>" line per requested step (0-based, as coll_schedule_lr()
 * counts; lr with 17 significant digits). The reference of train_schedule.py: it builds the
 * coll_schedule_t directly, without the trainer's option parsing or its epoch conversion.
 *
 *   lr_ref BASE_LR [scale BASE_BATCH GLOBAL_BATCH] [warmup STEPS [START_LR]]
 *          [step GAMMA M1,M2,...] [cosine TOTAL FINAL_LR] -- STEP...
 *
 * Exit status 0; 2 for a malformed command line or a schedule coll_schedule_check() refuses.
 */
#include "common/schedule.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(void)
{
    fprintf(stderr, "usage: lr_ref BASE_LR [scale BB GB] [warmup T [START]] "
                    "[step GAMMA M1,M2,...] [cosine TOTAL FINAL] -- STEP...\n");
    return 2;
}

static int parse_milestones(char *list, coll_schedule_t *s)
{
    char *save = NULL;

    for (char *tok = strtok_r(list, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        if (s->num_milestones == COLL_SCHEDULE_MAX_MILESTONES) {
            return -1;
        }
        s->milestones[s->num_milestones++] = strtoull(tok, NULL, 10);
    }
    return 0;
}

/* One clause at argv[*i]; advances *i past it. Returns 0, -1 when malformed. */
static int parse_clause(int argc, char **argv, int *i, coll_schedule_t *s)
{
    const char *what = argv[(*i)++];
    int left = argc - *i;

    if (strcmp(what, "scale") == 0 && left >= 2) {
        s->field_mask |= COLL_SCHEDULE_FIELD_SCALING;
        s->base_batch = strtoull(argv[(*i)++], NULL, 10);
        s->global_batch = strtoull(argv[(*i)++], NULL, 10);
    } else if (strcmp(what, "warmup") == 0 && left >= 1) {
        s->field_mask |= COLL_SCHEDULE_FIELD_WARMUP;
        s->warmup_steps = strtoull(argv[(*i)++], NULL, 10);
        if (*i < argc && strcmp(argv[*i], "--") != 0 && strchr("0123456789.", argv[*i][0])) {
            s->field_mask |= COLL_SCHEDULE_FIELD_WARMUP_START;
            s->warmup_start_lr = strtod(argv[(*i)++], NULL);
        }
    } else if (strcmp(what, "step") == 0 && left >= 2) {
        s->field_mask |= COLL_SCHEDULE_FIELD_DECAY;
        s->decay = COLL_SCHEDULE_STEP;
        s->gamma = strtod(argv[(*i)++], NULL);
        return parse_milestones(argv[(*i)++], s);
    } else if (strcmp(what, "cosine") == 0 && left >= 2) {
        s->field_mask |= COLL_SCHEDULE_FIELD_DECAY;
        s->decay = COLL_SCHEDULE_COSINE;
        s->total_steps = strtoull(argv[(*i)++], NULL, 10);
        s->final_lr = strtod(argv[(*i)++], NULL);
    } else {
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    coll_schedule_t s;
    int i = 2;

    memset(&s, 0, sizeof(s));
    if (argc < 2) {
        return usage();
    }
    s.base_lr = strtod(argv[1], NULL);
    while (i < argc && strcmp(argv[i], "--") != 0) {
        if (parse_clause(argc, argv, &i, &s) != 0) {
            return usage();
        }
    }
    if (i == argc || coll_schedule_check(&s) != COLL_OK) {
        fprintf(stderr, "lr_ref: %s\n", i == argc ? "no -- before the steps" : "invalid schedule");
        return 2;
    }
    for (i++; i < argc; i++) {
        unsigned long long step = strtoull(argv[i], NULL, 10);
        printf("%llu %.17g\n", step, coll_schedule_lr(&s, step));
    }
    return 0;
}
