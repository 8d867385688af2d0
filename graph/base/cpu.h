/* Which x86-64 vector level the CPU kernels use: the highest the CPU has (cpuid), lowered by
 * the environment variable PEBBLE_CPU_LEVEL=baseline|avx2|avx512 (a level the CPU lacks is
 * never chosen), so the slower paths can be run and measured on a fast machine. Read once per
 * process, at first use. Elsewhere than x86-64: always baseline. */
#ifndef PBL_BASE_CPU_H
#define PBL_BASE_CPU_H

enum { PBL__CPU_BASELINE = 0, PBL__CPU_AVX2 = 1, PBL__CPU_AVX512 = 2 };

/* the level in use (PBL__CPU_*) */
int pbl__cpu_level(void);

/* the highest level this CPU runs, whatever the environment says */
int pbl__cpu_level_max(void);

/* "baseline", "avx2" or "avx512" */
const char *pbl__cpu_level_name(int level);

/* Tests only: use `level` (clamped to the CPU's) from now on; -1 goes back to the
 * environment's choice. Not thread-safe against running kernels. */
void pbl__cpu_level_force(int level);

#endif
