#include "base/auth.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"

#define SECRET_MIN 16u
#define SECRET_MAX 4096u
#define MADE_SECRET_BYTES 32u

/* Reads the secret; returns 0, -1 with the reason in @p why (errno kept for open()). */
static int read_secret(const char *path, uint8_t *key, char *why, size_t len)
{
    uint8_t secret[SECRET_MAX];
    struct stat st;
    ssize_t n = -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC), err;

    if (fd < 0) {
        err = errno;
        snprintf(why, len, "%s: %s", path, strerror(err));
        errno = err;
        return -1;
    }
    if (fstat(fd, &st) < 0) {
        snprintf(why, len, "%s: %s", path, strerror(errno));
    } else if (st.st_mode & 0077) {
        snprintf(why, len, "%s is readable by others (mode %o); chmod 600 it", path,
                 (unsigned)(st.st_mode & 0777));
    } else if ((n = read(fd, secret, sizeof(secret))) < (ssize_t)SECRET_MIN) {
        snprintf(why, len, "%s holds %zd bytes; it needs at least %u", path, n, SECRET_MIN);
        n = -1;
    } else {
        crypto_generichash(key, COLL_AUTH_BYTES, secret, (size_t)n, NULL, 0);
    }
    sodium_memzero(secret, sizeof(secret));
    close(fd);
    errno = 0;
    return n > 0 ? 0 : -1;
}

/* Without a secret: peers unauthenticated (on purpose) or none at all. */
static void no_secret(coll_auth_t *auth, int allow_unauth, const char *fmt, const char *path)
{
    auth->mode = allow_unauth ? COLL_PEERS_UNAUTHENTICATED : COLL_PEERS_OFF;
    snprintf(auth->why, sizeof(auth->why), fmt, path);
}

coll_status_t coll_auth_load(coll_auth_t *auth, const char *path, int required,
                             int allow_unauth)
{
    char why[sizeof(auth->why) - 32];

    memset(auth, 0, sizeof(*auth));
    if (sodium_init() < 0) {
        coll_error(COLL_SUB_CORE, "libsodium failed to initialise");
        return COLL_ERR_INVALID;
    }
    if (path[0] == '\0') {
        no_secret(auth, allow_unauth, "peer_secret_file is \"\"%s", "");
        return COLL_OK;
    }
    if (read_secret(path, auth->key, why, sizeof(why)) == 0) {
        auth->enabled = 1;
        auth->mode = COLL_PEERS_AUTHENTICATED;
        return COLL_OK;
    }
    /* The default file may be missing (not created yet, a workstation) or not ours to read (a
     * daemon of another user); one named on purpose, or one that is there but unsafe, may not. */
    if (!required && (errno == ENOENT || errno == EACCES)) {
        no_secret(auth, allow_unauth, "no node secret (%s)", why);
        return COLL_OK;
    }
    coll_error(COLL_SUB_CORE, "peer secret file %s", why);
    return COLL_ERR_INVALID;
}

static coll_status_t give_to(const char *path, int fd, const char *owner)
{
    struct passwd *pw;

    if (owner[0] == '\0') {
        return COLL_OK;
    }
    if ((pw = getpwnam(owner)) == NULL) {
        fprintf(stderr, "collectived: --make-secret=%s: no such user\n", owner);
        return COLL_ERR_INVALID;
    }
    if (fchown(fd, pw->pw_uid, pw->pw_gid) < 0) {
        fprintf(stderr, "collectived: giving %s to %s: %s\n", path, owner, strerror(errno));
        return COLL_ERR_IO;
    }
    return COLL_OK;
}

coll_status_t coll_auth_make_secret(const char *path, const char *owner)
{
    uint8_t raw[MADE_SECRET_BYTES];
    char hex[2 * MADE_SECRET_BYTES + 2];
    coll_status_t st;
    int fd;

    if (path[0] == '\0') {
        printf("collectived: peer_secret_file is \"\": no node secret to make\n");
        return COLL_OK;
    }
    if (sodium_init() < 0) {
        fprintf(stderr, "collectived: libsodium failed to initialise\n");
        return COLL_ERR_INVALID;
    }
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST) {
        printf("collectived: %s exists; kept as it is\n", path);
        return COLL_OK;
    }
    if (fd < 0) {
        fprintf(stderr, "collectived: creating %s: %s\n", path, strerror(errno));
        return COLL_ERR_IO;
    }
    randombytes_buf(raw, sizeof(raw));
    sodium_bin2hex(hex, sizeof(hex), raw, sizeof(raw));
    hex[2 * MADE_SECRET_BYTES] = '\n';
    st = give_to(path, fd, owner);
    if (st == COLL_OK && (write(fd, hex, sizeof(hex) - 1) != (ssize_t)sizeof(hex) - 1 ||
                          fsync(fd) < 0)) {
        fprintf(stderr, "collectived: writing %s: %s\n", path, strerror(errno));
        st = COLL_ERR_IO;
    }
    sodium_memzero(raw, sizeof(raw));
    sodium_memzero(hex, sizeof(hex));
    close(fd);
    if (st != COLL_OK) {
        unlink(path);
        return st;
    }
    printf("collectived: made a node secret in %s (mode 0600%s%s); give every node of the "
           "cluster the same file\n", path, owner[0] ? ", owner " : "", owner);
    return COLL_OK;
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

void coll_auth_job_digest(const char *job, const char *token, uid_t uid, uint8_t *digest)
{
    uint8_t key[crypto_generichash_KEYBYTES];
    uint8_t by_uid[8] = {0, 'u', 'i', 'd', (uint8_t)uid, (uint8_t)(uid >> 8),
                         (uint8_t)(uid >> 16), (uint8_t)(uid >> 24)};

    crypto_generichash(key, sizeof(key), (const uint8_t *)job, strlen(job), NULL, 0);
    if (token[0] != '\0') {
        crypto_generichash(digest, COLL_AUTH_BYTES, (const uint8_t *)token, strlen(token), key,
                           sizeof(key));
    } else {
        crypto_generichash(digest, COLL_AUTH_BYTES, by_uid, sizeof(by_uid), key, sizeof(key));
    }
}
