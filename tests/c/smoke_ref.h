/*
 * What the C test programs share: the two block types as the ABI sees them, a check counter, a
 * fixed pseudo-random sequence, and a C rendering of the reference formula of docs/numerics.md for one
 * PQ2_0 row against one Q8_K column:
 *   sumf = fmaf(fp16_to_f32(w.d) * a.d, (float) isum, sumf)   per 128-weight block, in order,
 * with isum the exact sum of (code - 1) * q over the block (codes 0..3, code 3 counting as 2).
 * Header-only (static inline), included by abi_smoke.c and amx_smoke.c.
 */
#ifndef GGML_T2P_SMOKE_REF_H
#define GGML_T2P_SMOKE_REF_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct { uint16_t d; uint8_t qs[32]; } pq2_0_block;   /* 34 bytes */
typedef struct { float d; int8_t qs[256]; int16_t bsums[16]; } q8_k_block; /* 292 bytes */

static int checks = 0, failures = 0;
#define CHECK(cond, ...) do { checks++; if (!(cond)) { failures++; printf("FAIL: " __VA_ARGS__); printf("\n"); } } while (0)

static uint64_t rng_state = 0x1234;
static inline uint32_t rnd(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}

/* IEEE half -> float, exact. */
static inline float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        float v = ldexpf((float)man, -24);
        return sign ? -v : v;
    }
    bits = sign | ((exp + 112) << 23) | (man << 13);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* One output: row `w` (nb PQ2_0 blocks of 128 weights) against column `a` ((nb + 1) / 2 Q8_K
 * blocks; an odd nb uses the first half of the last one). */
static inline float reference_dot(const pq2_0_block * w, const q8_k_block * a, int nb) {
    float sumf = 0.0f;
    for (int i = 0; i < nb; i++) {
        const int8_t * q = a[i / 2].qs + 128 * (i % 2);
        int isum = 0;
        for (int j = 0; j < 128; j++) {
            int code = (w[i].qs[j / 4] >> (2 * (j % 4))) & 3;
            isum += (code - 1) * q[j];
        }
        sumf = fmaf(half_to_float(w[i].d) * a[i / 2].d, (float)isum, sumf);
    }
    return sumf;
}

/* Random PQ2_0 rows (positive fp16 scales around 2^-7, codes 0..3) and Q8_K columns with their
 * bsums; a row length of nb blocks with nb odd zero-pads the last Q8_K block's second half. */
static inline void random_operands(pq2_0_block * w, int n_blocks, q8_k_block * act, int n_cols, int nb) {
    const int nq = (nb + 1) / 2;
    for (int i = 0; i < n_blocks; i++) {
        w[i].d = (uint16_t)(0x2000 + rnd() % 0x1000);
        for (int j = 0; j < 32; j++) w[i].qs[j] = (uint8_t)rnd();
    }
    for (int c = 0; c < n_cols * nq; c++) {
        act[c].d = 0.01f + (float)(rnd() % 1000) * 1e-5f;
        for (int j = 0; j < 256; j++) act[c].qs[j] = (int8_t)(rnd() % 255 - 127);
        if (nb % 2 && c % nq == nq - 1) memset(act[c].qs + 128, 0, 128);
        for (int b = 0; b < 16; b++) {
            int s = 0;
            for (int j = 0; j < 16; j++) s += act[c].qs[16 * b + j];
            act[c].bsums[b] = (int16_t)s;
        }
    }
}

#endif
