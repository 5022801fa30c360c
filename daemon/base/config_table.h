/**
 * @file config_table.h
 * @brief The table of configuration keys, as the files of base/config*.c share it (config.c
 *        holds the table; config_file.c reads the file, config_reload.c reloads). Not for use
 *        outside them: the rest of the daemon sees coll_config_t (config.h).
 */
#ifndef COLL_CONFIG_TABLE_H
#define COLL_CONFIG_TABLE_H

#include <stddef.h>

#include "base/config.h"

/** Value types of keys. */
typedef enum { CFG_STRING, CFG_SIZE, CFG_UINT, CFG_LOGLEVEL } cfg_type_t;

/** One key: its name, type, default, field in coll_config_t and documentation. */
typedef struct {
    const char *name;
    cfg_type_t type;
    const char *def;
    size_t offset;
    const char *doc;
    const char *alias_env; /**< a second variable read after COLLD_<NAME>, or NULL */
} cfg_key_t;

/** Where each value came from, in words ("file /etc/x.conf:4"), by key index. */
typedef char coll__cfg_origin_t[COLL_CONFIG_MAX_KEYS][320];

/** @return Key @p i of the table, NULL past its end. */
const cfg_key_t *coll__cfg_key(size_t i);

/** @return The index of @p key in the table. */
size_t coll__cfg_key_index(const cfg_key_t *key);

/** @return The key named @p name, or NULL. */
const cfg_key_t *coll__cfg_key_find(const char *name);

/**
 * @brief Store @p text, parsed by @p key's type, into its field of @p cfg.
 * @param [in] from The value's origin for the message ("flag --pool-size", "file x:3").
 * @return 0; -1 after printing key, value, origin and reason on stderr.
 */
int coll__cfg_set_value(coll_config_t *cfg, const cfg_key_t *key, const char *text,
                        const char *from);

/**
 * @brief Read the configuration file @p path into @p cfg (config_file.c), recording each
 *        value's origin as "file PATH:LINE" and setting cfg->config_file.
 * @param required 0: a missing file is no error (the default file).
 * @return 0; -1 after printing why (unreadable, syntax error with its line, invalid value).
 */
int coll__cfg_load_file(coll_config_t *cfg, coll__cfg_origin_t origin, const char *path,
                        int required);

#endif
