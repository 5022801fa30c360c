/*
 * A main() for the harnesses when libFuzzer is not there (gcc, or a build without COLL_FUZZ):
 * runs LLVMFuzzerTestOneInput() once on each file named, or on each file of each directory
 * named, so that every build replays the seed corpus and the inputs of past findings (ctest
 * fuzz.<harness>, label reliability).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    long len;

    if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 ||
        fseek(f, 0, SEEK_SET) != 0 || (buf = malloc((size_t)len + 1)) == NULL ||
        fread(buf, 1, (size_t)len, f) != (size_t)len) {
        fprintf(stderr, "%s: cannot read\n", path);
        if (f != NULL) {
            fclose(f);
        }
        free(buf);
        return -1;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, (size_t)len);
    free(buf);
    return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

/* @return the number of inputs run, or -1 after an error. */
static int run_path(const char *path)
{
    struct dirent **names;
    struct stat st;
    int n, runs = 0;

    if (stat(path, &st) != 0) {
        perror(path);
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        return run_file(path) == 0 ? 1 : -1;
    }
    if ((n = scandir(path, &names, NULL, by_name)) < 0) {
        perror(path);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        char child[4096];
        snprintf(child, sizeof(child), "%s/%s", path, names[i]->d_name);
        if (names[i]->d_name[0] != '.' && stat(child, &st) == 0 && S_ISREG(st.st_mode)) {
            runs = runs < 0 || run_file(child) < 0 ? -1 : runs + 1;
        }
        free(names[i]);
    }
    free(names);
    return runs;
}

int main(int argc, char **argv)
{
    int total = 0;

    if (LLVMFuzzerInitialize != NULL) {
        LLVMFuzzerInitialize(&argc, &argv);
    }
    for (int i = 1; i < argc; i++) {
        int runs = run_path(argv[i]);
        if (runs < 0) {
            return 1;
        }
        total += runs;
    }
    printf("%s: %d inputs, no finding\n", argv[0], total);
    return total > 0 ? 0 : 1;
}
