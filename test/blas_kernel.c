/*
 * blas_kernel: which OpenBLAS kernel family this process runs, and which other one this CPU
 * can run instead — for .ci/test, which runs the CPU-numerics tests (CTest label `numerics`)
 * a second time with OPENBLAS_CORETYPE forcing another family, so that no test can lean on
 * the bits of one kernel.
 *
 *     blas_kernel            prints the kernel OpenBLAS chose (honouring OPENBLAS_CORETYPE)
 *     blas_kernel --other    prints a different family this CPU supports; exit 77 when there
 *                            is none (not x86-64)
 *
 * The other family: Haswell (AVX2 + FMA) when the kernel is an AVX-512 one (SkylakeX,
 * Cooperlake, SapphireRapids), else Prescott (SSE3, on every x86-64 CPU OpenBLAS supports);
 * when the kernel already is Prescott, Haswell, Sandybridge (AVX) or Nehalem (SSSE3), the
 * first of them the CPU has. OpenBLAS does not check that a forced family's instructions
 * exist (a Haswell kernel on a CPU without FMA dies of SIGILL), so every choice here is
 * checked against the CPU's own flags first.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <cblas.h>

static int is(const char *core, const char *name) { return strcasecmp(core, name) == 0; }

static const char *other_family(const char *core)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    int avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    int avx512 = is(core, "SkylakeX") || is(core, "Cooperlake") || is(core, "SapphireRapids");
    if (avx512 && avx2_fma)
        return "Haswell";
    if (!is(core, "Prescott") && __builtin_cpu_supports("sse3"))
        return "Prescott";
    if (avx2_fma)
        return "Haswell";
    if (__builtin_cpu_supports("avx"))
        return "Sandybridge";
    if (__builtin_cpu_supports("ssse3"))
        return "Nehalem";
    return NULL;
#else
    (void)core;
    return NULL;
#endif
}

int main(int argc, char **argv)
{
    const char *core = openblas_get_corename();
    if (argc == 1) {
        printf("%s\n", core);
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "--other") == 0) {
        const char *other = other_family(core);
        if (!other) {
            fprintf(stderr, "blas_kernel: no other OpenBLAS kernel family known to run on this CPU (now %s)\n", core);
            return 77;
        }
        printf("%s\n", other);
        return 0;
    }
    fprintf(stderr, "usage: blas_kernel [--other]\n");
    return 2;
}
