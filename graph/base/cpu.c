/* The CPU's vector level and description (graph/base/cpu.h, pebble/version.h). */
#include "graph/base/cpu.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/base/export.h"
#include "pebble/version.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#define CPU_X86 1
#endif

static const char *const level_names[] = { "baseline", "avx2", "avx512" };

const char *pbl__cpu_level_name(int level)
{
    return level >= 0 && level <= PBL__CPU_AVX512 ? level_names[level] : "unknown";
}

int pbl__cpu_level_max(void)
{
#ifdef CPU_X86
    __builtin_cpu_init();
    /* the AVX-512 kernels use F only; the AVX2 ones need FMA beside it */
    if (__builtin_cpu_supports("avx512f"))
        return PBL__CPU_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return PBL__CPU_AVX2;
#endif
    return PBL__CPU_BASELINE;
}

/* PEBBLE_CPU_LEVEL's level, or -1 when it is unset or names no level */
static int env_level(void)
{
    const char *e = getenv("PEBBLE_CPU_LEVEL");
    if (!e)
        return -1;
    if (!strcmp(e, "sse2"))
        return PBL__CPU_BASELINE;
    for (int i = 0; i <= PBL__CPU_AVX512; i++)
        if (!strcmp(e, level_names[i]))
            return i;
    return -1;
}

/* -1 until the first call decides; every thread decides the same, so a race is harmless */
static int level_now = -1;

int pbl__cpu_level(void)
{
    int l = __atomic_load_n(&level_now, __ATOMIC_RELAXED);
    if (l < 0) {
        int max = pbl__cpu_level_max(), want = env_level();
        l = want >= 0 && want < max ? want : max;
        __atomic_store_n(&level_now, l, __ATOMIC_RELAXED);
    }
    return l;
}

void pbl__cpu_level_force(int level)
{
    int max = pbl__cpu_level_max();
    __atomic_store_n(&level_now, level < 0 ? -1 : level < max ? level : max, __ATOMIC_RELAXED);
}

PBL__API const char *pbl_cpu_kernels(void)
{
    return pbl__cpu_level_name(pbl__cpu_level());
}

/* The brand string (cpuid leaves 0x80000002..4), spaces trimmed, or "unknown". */
static void cpu_model(char *out, size_t n)
{
    snprintf(out, n, "unknown");
#ifdef CPU_X86
    unsigned r[12], top = __get_cpuid_max(0x80000000u, NULL);
    if (top < 0x80000004u)
        return;
    for (unsigned i = 0; i < 3; i++)
        __get_cpuid(0x80000002u + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3]);
    char b[49];
    memcpy(b, r, 48);
    b[48] = '\0';
    char *s = b;
    while (*s == ' ')
        s++;
    size_t len = strlen(s);
    while (len && s[len - 1] == ' ')
        s[--len] = '\0';
    if (len)
        snprintf(out, n, "%s", s);
#endif
}

static char describe_text[320];

static void describe(void)
{
    char model[64], ext[160] = "";
#ifdef CPU_X86
    static const char *const flags[] = { "sse2", "sse4.2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl",
                                         "avx512vnni" };
    __builtin_cpu_init();
    size_t at = 0;
    for (size_t i = 0; i < sizeof flags / sizeof *flags; i++) {
        int has = 0;
        /* __builtin_cpu_supports needs a string literal */
        switch (i) {
        case 0: has = __builtin_cpu_supports("sse2"); break;
        case 1: has = __builtin_cpu_supports("sse4.2"); break;
        case 2: has = __builtin_cpu_supports("avx"); break;
        case 3: has = __builtin_cpu_supports("avx2"); break;
        case 4: has = __builtin_cpu_supports("fma"); break;
        case 5: has = __builtin_cpu_supports("avx512f"); break;
        case 6: has = __builtin_cpu_supports("avx512bw"); break;
        case 7: has = __builtin_cpu_supports("avx512vl"); break;
        case 8: has = __builtin_cpu_supports("avx512vnni"); break;
        }
        if (has && at < sizeof ext)
            at += (size_t)snprintf(ext + at, sizeof ext - at, "%s%s", at ? " " : "", flags[i]);
    }
#endif
    cpu_model(model, sizeof model);
    const char *env = getenv("PEBBLE_CPU_LEVEL");
    int l = pbl__cpu_level(), max = pbl__cpu_level_max();
    char why[96] = "";
    /* the variable's text is not echoed: the string goes into JSON unescaped */
    if (env && env_level() < 0)
        snprintf(why, sizeof why, " (PEBBLE_CPU_LEVEL names no level: ignored)");
    else if (env && l != max)
        snprintf(why, sizeof why, " (PEBBLE_CPU_LEVEL=%s; the CPU runs %s)", pbl__cpu_level_name(l),
                 pbl__cpu_level_name(max));
    snprintf(describe_text, sizeof describe_text, "%s [%s]; kernels: %s%s", model,
             ext[0] ? ext : "no vector extensions known", pbl__cpu_level_name(l), why);
}

PBL__API const char *pbl_cpu_describe(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, describe);
    return describe_text;
}
