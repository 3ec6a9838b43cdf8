// The vector ISA the CPU TT micro-kernels of this translation unit are written for, and the namespace that keeps
// each ISA's build of them apart. A build takes the widest ISA the compiler targets (-march=native): AVX-512
// (16-float vectors, 32 registers), else AVX2 + FMA (8-float vectors), else portable loops. Where the compiler
// targets AVX-512, the TT kernel sources are compiled a second time with DLRMBENCH_FORCE_AVX2 (the *_avx2.cpp
// units), so the AVX2 kernels run, and are tested, on AVX-512 machines too: CI on either kind of machine covers
// the AVX2 kernels, and the AVX-512 ones wherever the CPU has them. tt_register.cpp registers one CPU kernel per
// TT op that runs the build set_cpu_isa selected (the native one unless a test asks otherwise).
#pragma once

#if defined(__AVX512F__) && !defined(DLRMBENCH_FORCE_AVX2)
#define DLRMBENCH_AVX512 1
#define DLRMBENCH_ISA_NS isa_avx512
#elif defined(__AVX2__) && defined(__FMA__)
#define DLRMBENCH_AVX2 1
#define DLRMBENCH_ISA_NS isa_avx2
#else
#define DLRMBENCH_ISA_NS isa_portable
#endif

#if defined(DLRMBENCH_AVX512) || defined(DLRMBENCH_AVX2)
#include <immintrin.h>
#endif
