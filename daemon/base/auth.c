#include "base/auth.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"

#define SECRET_MIN 16u
#define SECRET_MAX 4096u

coll_status_t coll_auth_load(coll_auth_t *auth, const char *path)
{
    uint8_t secret[SECRET_MAX];
    struct stat st;
    ssize_t n;
    int fd;

    memset(auth, 0, sizeof(*auth));
    if (sodium_init() < 0) {
        coll_error(COLL_SUB_CORE, "libsodium failed to initialise");
        return COLL_ERR_INVALID;
    }
    if (path[0] == '\0') {
        return COLL_OK;
    }
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0) {
        coll_error(COLL_SUB_CORE, "peer secret file %s: %m", path);
        goto err;
    }
    if (st.st_mode & 0077) {
        coll_error(COLL_SUB_CORE, "peer secret file %s is readable by others (mode %o); "
                   "chmod 600 it", path, (unsigned)(st.st_mode & 0777));
        goto err;
    }
    n = read(fd, secret, sizeof(secret));
    if (n < (ssize_t)SECRET_MIN) {
        coll_error(COLL_SUB_CORE, "peer secret file %s holds %zd bytes; it needs at least %u",
                   path, n, SECRET_MIN);
        goto err;
    }
    crypto_generichash(auth->key, sizeof(auth->key), secret, (size_t)n, NULL, 0);
    sodium_memzero(secret, sizeof(secret));
    auth->enabled = 1;
    close(fd);
    return COLL_OK;

err:
    if (fd >= 0) {
        close(fd);
    }
    return COLL_ERR_INVALID;
}

void coll_auth_nonce(uint8_t *nonce)
{
    randombytes_buf(nonce, COLL_AUTH_BYTES);
}

void coll_auth_mac(const coll_auth_t *auth, const char *role, const uint8_t *nonce,
                   uint8_t *mac)
{
    crypto_auth_hmacsha256_state st;
    char label[32];

    snprintf(label, sizeof(label), "collectived %s", role);
    crypto_auth_hmacsha256_init(&st, auth->key, sizeof(auth->key));
    crypto_auth_hmacsha256_update(&st, (const uint8_t *)label, strlen(label));
    crypto_auth_hmacsha256_update(&st, nonce, COLL_AUTH_BYTES);
    crypto_auth_hmacsha256_final(&st, mac);
}

int coll_auth_check(const coll_auth_t *auth, const char *role, const uint8_t *nonce,
                    const uint8_t *mac, size_t mac_len)
{
    uint8_t want[COLL_AUTH_BYTES];

    if (mac_len != COLL_AUTH_BYTES) {
        return 0;
    }
    coll_auth_mac(auth, role, nonce, want);
    return sodium_memcmp(want, mac, COLL_AUTH_BYTES) == 0;
}

void coll_auth_token_digest(const char *job, const char *token, uint8_t *digest)
{
    uint8_t key[crypto_generichash_KEYBYTES];

    crypto_generichash(key, sizeof(key), (const uint8_t *)job, strlen(job), NULL, 0);
    crypto_generichash(digest, COLL_AUTH_BYTES, (const uint8_t *)token, strlen(token), key,
                       sizeof(key));
}
