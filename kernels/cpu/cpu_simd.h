// cpu_simd.h: the x86 target the CPU backend's 8-lane loops are compiled
// for (AVX and F16C, no FMA: nothing is contracted, so each lane rounds as
// the scalar loop does), chosen at run time by the callers' CPU check.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DDP_X86 1
#define DDP_AVX_F16C __attribute__((target("avx,f16c")))
#endif
