/* WIDE_LOOP: a function of loops over arrays, element by element, compiled twice on x86-64
 * with GCC and glibc (whose loader picks one as the module loads): for AVX2, chosen where
 * the processor has it, and for the baseline. Each element's arithmetic is the same in
 * both (the extensions are built without contraction into fused multiply-adds, and the
 * avx2 target has none); only how many elements one instruction holds differs, so the
 * results are the same bits. */
#ifndef GLUONBATCH_WIDE_LOOP_H
#define GLUONBATCH_WIDE_LOOP_H

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__)
#define WIDE_LOOP __attribute__((target_clones("avx2", "default")))
#else
#define WIDE_LOOP
#endif

#endif
