/*
 * SIGHUP's half of the configuration (config.h): build it again from the same layers and take
 * over what may change while the daemon runs. What needs a restart (sockets, listeners, the
 * peer secret, threads, UCX) is named in the log and left as it is.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/config.h"
#include "base/config_table.h"
#include "base/log.h"

static int reloadable(const char *name)
{
    const char *list = COLL_CONFIG_RELOADABLE;
    size_t n = strlen(name);

    for (const char *p = strstr(list, name); p != NULL; p = strstr(p + 1, name)) {
        if ((p == list || p[-1] == ' ') && (p[n] == ',' || p[n] == '\0')) {
            return 1;
        }
    }
    return 0;
}

static int same_value(const cfg_key_t *key, const coll_config_t *a, const coll_config_t *b)
{
    const void *fa = (const char *)a + key->offset, *fb = (const char *)b + key->offset;

    if (key->type == CFG_SIZE || key->type == CFG_UINT) {
        return *(const uint64_t *)fa == *(const uint64_t *)fb;
    }
    return strcmp(*(char *const *)fa, *(char *const *)fb) == 0;
}

/* The value of @p key in @p cfg as text, for messages. */
static const char *value_text(const cfg_key_t *key, const coll_config_t *cfg, char *buf,
                              size_t len)
{
    const void *f = (const char *)cfg + key->offset;

    if (key->type == CFG_SIZE || key->type == CFG_UINT) {
        snprintf(buf, len, "%llu", (unsigned long long)*(const uint64_t *)f);
        return buf;
    }
    return *(char *const *)f;
}

/* Give @p cfg the value of @p key that @p next has (swapped: @p next frees the old one). */
static void take(const cfg_key_t *key, coll_config_t *cfg, coll_config_t *next)
{
    char *fc = (char *)cfg + key->offset, *fn = (char *)next + key->offset;
    size_t size = key->type == CFG_SIZE || key->type == CFG_UINT ? sizeof(uint64_t)
                                                                  : sizeof(char *);
    char tmp[sizeof(uint64_t) > sizeof(char *) ? sizeof(uint64_t) : sizeof(char *)];

    memcpy(tmp, fc, size);
    memcpy(fc, fn, size);
    memcpy(fn, tmp, size);
    cfg->source[coll__cfg_key_index(key)] = next->source[coll__cfg_key_index(key)];
}

int coll_config_reload(coll_config_t *cfg, char *applied, size_t len)
{
    coll_config_t next;
    size_t n = 0;

    applied[0] = '\0';
    if (coll_config_load(cfg->argc, cfg->argv, &next) != COLL_CONFIG_RUN) {
        coll_config_cleanup(&next);
        return -1;
    }
    for (size_t i = 0; coll__cfg_key(i) != NULL; i++) {
        const cfg_key_t *key = coll__cfg_key(i);
        char was[32], now[32];

        if (same_value(key, cfg, &next)) {
            continue;
        }
        if (!reloadable(key->name)) {
            coll_warn(COLL_SUB_CORE, "reload: %s changed (%s -> %s) but takes effect only when "
                      "the daemon restarts", key->name, value_text(key, cfg, was, sizeof(was)),
                      value_text(key, &next, now, sizeof(now)));
            continue;
        }
        take(key, cfg, &next);
        if (n < len) {
            n += (size_t)snprintf(applied + n, len - n, "%s%s", n ? ", " : "", key->name);
        }
    }
    coll_config_cleanup(&next);
    return 0;
}
