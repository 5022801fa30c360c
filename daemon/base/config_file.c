/*
 * The configuration file (config.h): INI read by libinih, with lines counted so that every
 * message names file:line, keys looked up in the table of config.c, and comments after a value
 * handled the same way for '#' and ';'.
 */
#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/config_table.h"
#include "base/log.h"

typedef struct {
    coll_config_t *cfg;
    char (*origin)[320];  /* a coll__cfg_origin_t */
    const char *path;
    FILE *f;
    int line;          /* number of the line being parsed */
    int at_line_start; /* the next chunk read starts a new line */
    int too_long;      /* a line did not fit inih's buffer */
    int failed;        /* an error was printed */
} file_ctx_t;

/* fgets for inih that counts lines, so messages can name them. */
static char *file_reader(char *str, int num, void *stream)
{
    file_ctx_t *c = stream;
    size_t n;

    if (fgets(str, num, c->f) == NULL) {
        return NULL;
    }
    c->line += c->at_line_start;
    n = strlen(str);
    c->at_line_start = n > 0 && str[n - 1] == '\n';
    if (!c->at_line_start && n + 1 == (size_t)num && !feof(c->f)) {
        c->too_long = 1;
        return NULL;
    }
    return str;
}

/*
 * A value without its comment: '#' or ';' at its start or after a space begins one. libinih
 * (as Debian builds it) cuts only at " ;"; cutting at " #" too keeps '#' from ever becoming
 * part of a value, and makes `--print-config` output ("key = value  # origin") a valid file.
 * No value of the table can hold a comment character after a space. A value in double quotes
 * loses them ("" is the empty value, as the example file and the docs write it).
 */
static void strip_comment(const char *value, char *out, size_t len)
{
    size_t n = 0;

    for (const char *p = value; *p != '\0' && n + 1 < len; p++) {
        if ((*p == '#' || *p == ';') && (p == value || p[-1] == ' ' || p[-1] == '\t')) {
            break;
        }
        out[n++] = *p;
    }
    while (n > 0 && (out[n - 1] == ' ' || out[n - 1] == '\t')) {
        n--;
    }
    out[n] = '\0';
    /* A value in double quotes is what they hold: "" the empty value the docs write so. */
    if (n >= 2 && out[0] == '"' && out[n - 1] == '"') {
        memmove(out, out + 1, n - 2);
        out[n - 2] = '\0';
    }
}

static int file_handler(void *user, const char *section, const char *name, const char *raw)
{
    file_ctx_t *c = user;
    const cfg_key_t *key = coll__cfg_key_find(name);
    char from[300], value[1024];

    snprintf(from, sizeof(from), "%s:%d", c->path, c->line);
    if (section[0] != '\0' && strcmp(section, "collectived") != 0) {
        coll_warn(COLL_SUB_CORE, "%s: unknown section [%s] (key %s ignored); keys go at the top "
                  "or under [collectived]", from, section, name);
        return 1;
    }
    if (key == NULL) {
        coll_warn(COLL_SUB_CORE, "%s: unknown key '%s' ignored (see collectived --help)", from,
                  name);
        return 1;
    }
    strip_comment(raw, value, sizeof(value));
    if (coll__cfg_set_value(c->cfg, key, value, from) < 0) {
        c->failed = 1;
        return 0;
    }
    c->cfg->source[coll__cfg_key_index(key)] = COLL_CFG_FILE;
    snprintf(c->origin[coll__cfg_key_index(key)], sizeof(c->origin[0]), "file %s", from);
    return 1;
}

int coll__cfg_load_file(coll_config_t *cfg, coll__cfg_origin_t origin, const char *path,
                        int required)
{
    file_ctx_t c = {cfg, origin, path, NULL, 0, 1, 0, 0};
    int rc;

    c.f = fopen(path, "r");
    if (c.f == NULL) {
        if (errno == ENOENT && !required) {
            return 0;
        }
        fprintf(stderr, "collectived: configuration file %s: %s\n", path, strerror(errno));
        return -1;
    }
    rc = ini_parse_stream(file_reader, &c, file_handler, &c);
    fclose(c.f);
    if (c.too_long) {
        fprintf(stderr, "collectived: %s:%d: line too long\n", path, c.line);
        return -1;
    }
    if (rc != 0 && !c.failed) {
        fprintf(stderr, "collectived: %s:%d: syntax error; expected 'key = value', "
                        "'[collectived]' or a comment (# or ;)\n", path, rc);
    }
    if (rc != 0 || c.failed) {
        return -1;
    }
    free(cfg->config_file);
    cfg->config_file = strdup(path);
    return cfg->config_file != NULL ? 0 : -1;
}

