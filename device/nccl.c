/*
 * Whether NCCL is on this machine (dev.h, coll_nccl_probe): libnccl.so.2 opened at run time, as
 * the driver is, and asked its version. The library stays loaded for the NCCL path.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "device/dev.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int present;
static char text[COLL_DEV_TEXT_MAX];

static void probe(void)
{
    void *lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    int (*get_version)(int *);
    int v = 0;

    if (lib == NULL) {
        snprintf(text, sizeof(text), "absent: %s", dlerror());
        return;
    }
    *(void **)&get_version = dlsym(lib, "ncclGetVersion");
    if (get_version == NULL || get_version(&v) != 0) {
        snprintf(text, sizeof(text), "absent: libnccl.so.2 does not answer ncclGetVersion");
        dlclose(lib);
        return;
    }
    /* NCCL_VERSION(X, Y, Z) is X * 10000 + Y * 100 + Z since 2.9, X * 1000 + Y * 100 + Z before. */
    if (v >= 20900) {
        snprintf(text, sizeof(text), "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
    } else {
        snprintf(text, sizeof(text), "%d.%d.%d", v / 1000, v / 100 % 10, v % 100);
    }
    present = 1;
}

int coll_nccl_probe(const char **text_p)
{
    pthread_once(&once, probe);
    *text_p = text;
    return present;
}
