/*
 * c11_compat.h - force-included (-include) when tools/windows-test.py builds tests/c/abi_smoke.c
 * for Windows with MinGW-w64. Elsewhere this header does nothing.
 *
 * - aligned_alloc: neither msvcrt nor the UCRT has C11 aligned_alloc (Microsoft's C runtime offers
 *   _aligned_malloc / _aligned_free, and free() must not release _aligned_malloc memory), so every
 *   malloc/aligned_alloc/free of the program goes through _aligned_malloc / _aligned_free.
 * - fmaf: MinGW-w64's own fmaf (libmingwex, Debian 12's mingw-w64 10.0) is not a fused
 *   multiply-add: it rounds twice, and gave other bits than glibc's fmaf for 29% of random inputs
 *   here. The program's reference formula needs one rounding, so it gets a correct one: the
 *   product of two floats is exact in double; the sum is rounded to double, its exact error found
 *   with 2Sum, and an inexact sum rounded to odd before the final rounding to float.
 */
#ifndef GGML_T2P_C11_COMPAT_H
#define GGML_T2P_C11_COMPAT_H
#if defined(_WIN32)
#    include <malloc.h>
#    include <math.h>
#    include <stdint.h>
#    include <stdlib.h>
#    include <string.h>
static inline void * t2p_compat_aligned_alloc(size_t align, size_t size) { return _aligned_malloc(size ? size : 1, align); }
static inline void * t2p_compat_malloc(size_t size) { return _aligned_malloc(size ? size : 1, 16); }
static inline void t2p_compat_free(void * p) { _aligned_free(p); }
#    define aligned_alloc t2p_compat_aligned_alloc
#    define malloc        t2p_compat_malloc
#    define free          t2p_compat_free
#    if defined(__MINGW32__)
static inline float t2p_compat_fmaf(float a, float b, float c) {
    volatile double xy = (double) a * (double) b, z = c, s = xy + z;
    if (!isfinite(s)) {
        return (float) s;
    }
    volatile double bv = s - xy, av = s - bv;
    double err = (xy - av) + (z - bv);
    if (err == 0.0) {
        return (float) s;
    }
    uint64_t bits;
    double t = s;
    memcpy(&bits, &t, 8);
    if ((err < 0.0) != (t < 0.0)) {
        bits -= 1;
    }
    bits |= 1;
    memcpy(&t, &bits, 8);
    return (float) t;
}
#        define fmaf t2p_compat_fmaf
#    endif
#endif
#endif
