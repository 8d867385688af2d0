/* pbl_version(): "MAJOR.MINOR.PATCH (commit C)", the version the headers say (version.h's
 * macros, which CMake's project version is read from) and a commit: git describe's output at
 * build time, or "unknown" outside a git checkout. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "pebble/pebble.h"

static void test_version_text(void **state)
{
    (void)state;
    const char *v = pbl_version();
    assert_non_null(v);
    printf("pbl_version(): %s\n", v);
    char want[64];
    snprintf(want, sizeof want, "%d.%d.%d (commit ", PBL_VERSION_MAJOR, PBL_VERSION_MINOR, PBL_VERSION_PATCH);
    assert_true(strncmp(v, want, strlen(want)) == 0);
    const char *commit = v + strlen(want);
    size_t n = strlen(commit);
    assert_true(n >= 2 && commit[n - 1] == ')');
    /* git describe --always --dirty: [TAG-N-g]HEX[-dirty], or unknown */
    for (size_t i = 0; i + 1 < n; i++)
        assert_true(strchr("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ._+-", commit[i]) != NULL);
    assert_true(strcmp(v, pbl_version()) == 0); /* the same static text each call */
}

int main(void)
{
    const struct CMUnitTest tests[] = { cmocka_unit_test(test_version_text) };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
