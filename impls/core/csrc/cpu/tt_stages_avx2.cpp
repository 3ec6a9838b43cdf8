// tt_stages.cpp's kernels built a second time for AVX2 where the native build is AVX-512 (isa.h), so the AVX2 kernels
// run and are tested on AVX-512 machines too; tt_register.cpp picks between the two builds. Empty otherwise.
#if defined(__AVX512F__)
#define DLRMBENCH_FORCE_AVX2 1
#include "tt_stages.cpp"
#endif
