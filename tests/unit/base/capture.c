#include "capture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static struct {
    int fd;    /* captured descriptor, -1 when none */
    int saved; /* its original */
    FILE *tmp;
    char text[16384];
} cap = {-1, -1, NULL, ""};

void capture_start(int fd)
{
    fflush(stdout);
    fflush(stderr);
    cap.tmp = tmpfile();
    assert_non_null(cap.tmp);
    cap.saved = dup(fd);
    assert_true(cap.saved >= 0);
    assert_true(dup2(fileno(cap.tmp), fd) >= 0);
    cap.fd = fd;
}

const char *capture_end(void)
{
    size_t n;
    if (cap.fd < 0) {
        return cap.text;
    }
    fflush(stdout);
    fflush(stderr);
    dup2(cap.saved, cap.fd);
    close(cap.saved);
    cap.fd = -1;
    rewind(cap.tmp);
    n = fread(cap.text, 1, sizeof(cap.text) - 1, cap.tmp);
    cap.text[n] = '\0';
    fclose(cap.tmp);
    return cap.text;
}

const char *capture_text(void)
{
    return cap.text;
}

void assert_contains(const char *text, const char *part)
{
    if (strstr(text, part) == NULL) {
        fail_msg("\"%s\" not found in output:\n%s", part, text);
    }
}
