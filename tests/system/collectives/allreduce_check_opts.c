/* allreduce_check's command line (allreduce_check.h). */
#include "allreduce_check.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_common.h"

/* ---- options ------------------------------------------------------------------------------ */

void allreduce_check_usage(FILE *f)
{
    fprintf(f,
            "usage: allreduce_check [--counts LIST] [--op sum|avg] [--iters K] [--window W]\n"
            "                       [--keyed [--reuse-keys]]\n"
            "                       [--inplace|--outofplace|--mixed] [--mismatch-rank R\n"
            "                       [--mismatch-layout]] [--mismatch-node N]\n"
            "                       [--late-rank K [--late-ms D]] [--mismatch-ms D]\n"
            "                       [--mismatch-text S]... [--timeout-ms T]\n"
            "Run as every rank of a collective-launch job; checks coll_allreduce_async().\n"
            "  --counts LIST   comma-separated element counts (default 0,1,N-1,N+1,1000003):\n"
            "                  an integer with optional suffix Ki or Mi (2^10, 2^20), or N, N-k,\n"
            "                  N+k where N is the number of nodes (world size / local size)\n"
            "  --op OP         sum (default) or avg\n"
            "  --iters K       rounds per count, each with other data (default 2)\n"
            "  --window W      operations in flight per round, 1..16 (default 1)\n"
            "  --keyed         give operations explicit keys and let each rank submit the\n"
            "                  round's operations in another order\n"
            "  --reuse-keys    with --keyed: operation w of every round and count has key w\n"
            "  --inplace       sendbuf == recvbuf; --outofplace (default) separate buffers;\n"
            "                  --mixed: even ranks in place, odd ranks out of place\n"
            "  --mismatch-rank R  rank R submits another count than the others for the first\n"
            "                  count of LIST; every rank must get COLL_ERR_MISMATCH\n"
            "  --mismatch-layout  rank R submits the same count but another tensor layout\n"
            "                  fingerprint (coll_op_params_t.layout) than the others\n"
            "  --mismatch-node N  every rank of node N submits another count: its local ranks\n"
            "                  agree, the daemons find the mismatch between nodes\n"
            "  --late-rank K   in mismatch mode, rank K submits --late-ms later than the others\n"
            "  --late-ms D     that delay in milliseconds (default 500)\n"
            "  --mismatch-ms D in mismatch mode, the error must come within D ms of the\n"
            "                  submission (default 10000)\n"
            "  --mismatch-text S  in mismatch mode, the error's message must contain S (up to\n"
            "                  4 times)\n"
            "  --timeout-ms T  bound on each wait (default 120000)\n");
}

static int split_counts(opts_t *o, const char *list)
{
    char buf[MAX_COUNTS * TOKEN_MAX];
    char *save = NULL;
    snprintf(buf, sizeof(buf), "%s", list);
    o->ncounts = 0;
    for (char *t = strtok_r(buf, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
        if (o->ncounts == MAX_COUNTS || strlen(t) >= TOKEN_MAX) {
            return -1;
        }
        snprintf(o->tokens[o->ncounts++], TOKEN_MAX, "%s", t);
    }
    return o->ncounts > 0 ? 0 : -1;
}

void allreduce_check_parse_opts(int argc, char **argv, opts_t *o)
{
    static const struct option longopts[] = {
        {"counts", required_argument, NULL, 'c'},   {"op", required_argument, NULL, 'o'},
        {"iters", required_argument, NULL, 'i'},    {"inplace", no_argument, NULL, 'I'},
        {"outofplace", no_argument, NULL, 'O'},     {"mixed", no_argument, NULL, 'M'},
        {"mismatch-rank", required_argument, NULL, 'm'},
        {"mismatch-layout", no_argument, NULL, 'Y'},
        {"mismatch-node", required_argument, NULL, 'n'},
        {"window", required_argument, NULL, 'w'},   {"keyed", no_argument, NULL, 'k'},
        {"reuse-keys", no_argument, NULL, 'R'},
        {"late-rank", required_argument, NULL, 'l'}, {"late-ms", required_argument, NULL, 'L'},
        {"mismatch-ms", required_argument, NULL, 'D'},
        {"mismatch-text", required_argument, NULL, 'T'},
        {"timeout-ms", required_argument, NULL, 't'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    long v;
    int ch, bad = 0;

    *o = (opts_t){.op = COLL_SUM, .iters = 2, .place = PLACE_OUT, .mismatch_rank = -1, .window = 1,
                  .mismatch_node = -1, .late_rank = -1, .late_ms = 500, .timeout_ms = 120000,
                  .mismatch_ms = MISMATCH_DEADLINE_MS};
    split_counts(o, "0,1,N-1,N+1,1000003");
    while (!bad && (ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'c': bad = split_counts(o, optarg) < 0; break;
        case 'o':
            bad = strcmp(optarg, "sum") != 0 && strcmp(optarg, "avg") != 0;
            o->op = strcmp(optarg, "avg") == 0 ? COLL_AVG : COLL_SUM;
            break;
        case 'i': bad = check_parse_int(optarg, 1, 1000, &v) < 0; o->iters = (int)v; break;
        case 'I': o->place = PLACE_IN; break;
        case 'O': o->place = PLACE_OUT; break;
        case 'M': o->place = PLACE_MIXED; break;
        case 'm': bad = check_parse_int(optarg, 0, 1 << 20, &v) < 0; o->mismatch_rank = (int)v; break;
        case 'Y': o->mismatch_layout = 1; break;
        case 'n': bad = check_parse_int(optarg, 0, 1 << 20, &v) < 0; o->mismatch_node = (int)v; break;
        case 'w': bad = check_parse_int(optarg, 1, MAX_WINDOW, &v) < 0; o->window = (int)v; break;
        case 'k': o->keyed = 1; break;
        case 'R': o->reuse_keys = 1; break;
        case 'l': bad = check_parse_int(optarg, 0, 1 << 20, &v) < 0; o->late_rank = (int)v; break;
        case 'L': bad = check_parse_int(optarg, 0, 60000, &v) < 0; o->late_ms = (int)v; break;
        case 't': bad = check_parse_int(optarg, 1, 3600000, &v) < 0; o->timeout_ms = (int)v; break;
        case 'D': bad = check_parse_int(optarg, 1, 3600000, &v) < 0; o->mismatch_ms = (int)v; break;
        case 'T':
            bad = o->ntexts == MAX_TEXTS;
            o->texts[bad ? 0 : o->ntexts++] = optarg;
            break;
        case 'h': allreduce_check_usage(stdout); exit(0);
        default: bad = 1;
        }
    }
    if (bad || optind != argc) {
        allreduce_check_usage(stderr);
        exit(2);
    }
}

