/*
 * A C program against include/ggml_t2p.h and libggml_t2p.a: repacks a PQ2_0 matrix, runs gemv and
 * gemm on every kernel level the CPU has, checks the bits against its own C rendering of the
 * reference formula (sumf = fmaf(d * yd, (float) isum, sumf)), and checks the error codes.
 * Exit status 0 when every check passed.
 */
#include "ggml_t2p.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define K      384 /* 3 x 128: also exercises the zero-padded half Q8_K block */
#define NROWS  8
#define NCOLS  3
#define NB     (K / 128)
#define NQ     ((K + 255) / 256)

typedef struct { uint16_t d; uint8_t qs[32]; } pq2_0_block;   /* 34 bytes */
typedef struct { float d; int8_t qs[256]; int16_t bsums[16]; } q8_k_block; /* 292 bytes */

static int checks = 0, failures = 0;

#define CHECK(cond, ...) do { checks++; if (!(cond)) { failures++; printf("FAIL: " __VA_ARGS__); printf("\n"); } } while (0)

static uint64_t rng_state = 0x1234;
static uint32_t rnd(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}

/* IEEE half -> float, exact. */
static float half_to_float(uint16_t h) {
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

static float reference_dot(const pq2_0_block * w, const q8_k_block * a) {
    float sumf = 0.0f;
    for (int i = 0; i < NB; i++) {
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

int main(void) {
    static pq2_0_block w[NROWS * NB];
    static q8_k_block act[NCOLS * NQ];
    _Static_assert(sizeof(pq2_0_block) == 34, "pq2_0 block");
    _Static_assert(sizeof(q8_k_block) == 292, "q8_k block");

    printf("ggml-t2p %s, abi %u (header %d), cpu features 0x%x, best kernel %s\n", ggml_t2p_version(),
           ggml_t2p_abi_version(), GGML_T2P_ABI_VERSION, ggml_t2p_cpu_features(),
           ggml_t2p_best_kernel() ? ggml_t2p_kernel_name(ggml_t2p_best_kernel()) : "none (callers decline)");
    CHECK(ggml_t2p_abi_version() == GGML_T2P_ABI_VERSION, "abi version");

    for (int i = 0; i < NROWS * NB; i++) {
        w[i].d = (uint16_t)(0x2000 + rnd() % 0x1000); /* positive fp16 around 2^-7 */
        for (int j = 0; j < 32; j++) w[i].qs[j] = (uint8_t)rnd(); /* codes 0..3 */
    }
    for (int c = 0; c < NCOLS * NQ; c++) {
        act[c].d = 0.01f + (float)(rnd() % 1000) * 1e-5f;
        for (int j = 0; j < 256; j++) act[c].qs[j] = (int8_t)(rnd() % 255 - 127);
        for (int b = 0; b < 16; b++) {
            int s = 0;
            for (int j = 0; j < 16; j++) s += act[c].qs[16 * b + j];
            act[c].bsums[b] = (int16_t)s;
        }
    }
    /* the padded half: a row of K = 384 is zero-padded to 512 before quantizing */
    for (int c = 0; c < NCOLS; c++) {
        q8_k_block * last = &act[c * NQ + NQ - 1];
        memset(last->qs + 128, 0, 128);
        for (int b = 8; b < 16; b++) last->bsums[b] = 0;
    }

    size_t wsize = 0, asize = 0;
    CHECK(ggml_t2p_repacked_size(GGML_T2P_TYPE_PQ2_0, GGML_T2P_LAYOUT_T2P, NROWS, K, &wsize) == GGML_T2P_OK, "size");
    CHECK(wsize == sizeof(w), "repacked size %zu", wsize);
    CHECK(ggml_t2p_act_size(K, NCOLS, &asize) == GGML_T2P_OK && asize == sizeof(act), "act size %zu", asize);

    void * packed = malloc(wsize);
    CHECK(ggml_t2p_repack(GGML_T2P_TYPE_PQ2_0, GGML_T2P_LAYOUT_T2P, w, sizeof(w), NROWS, K, packed, wsize) == GGML_T2P_OK, "repack");

    float want[NCOLS][NROWS];
    for (int c = 0; c < NCOLS; c++)
        for (int r = 0; r < NROWS; r++) want[c][r] = reference_dot(&w[r * NB], &act[c * NQ]);

    int levels[] = { GGML_T2P_KERNEL_REF, GGML_T2P_KERNEL_DOTPROD, GGML_T2P_KERNEL_I8MM, GGML_T2P_KERNEL_AUTO };
    for (int l = 0; l < 4; l++) {
        int lv = levels[l];
        int avail = lv == GGML_T2P_KERNEL_REF || (lv == GGML_T2P_KERNEL_AUTO ? ggml_t2p_best_kernel() != 0 : ggml_t2p_best_kernel() >= lv);
        float y[NROWS];
        int st = ggml_t2p_gemv(GGML_T2P_LAYOUT_T2P, lv, packed, wsize, NROWS, K, act, NQ * sizeof(q8_k_block), y, NROWS, 0, NROWS);
        if (!avail) {
            CHECK(st == GGML_T2P_ERR_UNSUPPORTED, "%s must be unsupported here, got %d", ggml_t2p_kernel_name(lv), st);
            continue;
        }
        CHECK(st == GGML_T2P_OK, "gemv %s: %s", ggml_t2p_kernel_name(lv), ggml_t2p_status_string(st));
        for (int r = 0; r < NROWS; r++) CHECK(memcmp(&y[r], &want[0][r], 4) == 0, "gemv %s row %d: %a vs %a", ggml_t2p_kernel_name(lv), r, y[r], want[0][r]);

        float ys[NCOLS * (NROWS + 1)];
        /* two threads' worth of row ranges, one call each */
        st = ggml_t2p_gemm(GGML_T2P_LAYOUT_T2P, lv, packed, wsize, NROWS, K, act, asize, NCOLS, ys, NCOLS * (NROWS + 1), NROWS + 1, 0, 4);
        CHECK(st == GGML_T2P_OK, "gemm %s rows 0..4: %s", ggml_t2p_kernel_name(lv), ggml_t2p_status_string(st));
        st = ggml_t2p_gemm(GGML_T2P_LAYOUT_T2P, lv, packed, wsize, NROWS, K, act, asize, NCOLS, ys, NCOLS * (NROWS + 1), NROWS + 1, 4, 8);
        CHECK(st == GGML_T2P_OK, "gemm %s rows 4..8", ggml_t2p_kernel_name(lv));
        for (int c = 0; c < NCOLS; c++)
            for (int r = 0; r < NROWS; r++)
                CHECK(memcmp(&ys[c * (NROWS + 1) + r], &want[c][r], 4) == 0, "gemm %s col %d row %d", ggml_t2p_kernel_name(lv), c, r);
    }

    float y[NROWS];
    size_t s;
    /* an empty batch (ggml gives the last layer zero columns when no output is needed) */
    CHECK(ggml_t2p_act_size(K, 0, &s) == GGML_T2P_OK && s == 0, "act size of 0 columns");
    CHECK(ggml_t2p_gemm(GGML_T2P_LAYOUT_T2P, GGML_T2P_KERNEL_REF, packed, wsize, NROWS, K, NULL, 0, 0, NULL, 0, NROWS, 0, NROWS) == GGML_T2P_OK,
          "gemm of 0 columns");
    CHECK(ggml_t2p_gemm(GGML_T2P_LAYOUT_T2P, GGML_T2P_KERNEL_REF, packed, wsize, NROWS, K, NULL, 0, 0, NULL, 0, NROWS, 0, 6) == GGML_T2P_ERR_RANGE,
          "gemm of 0 columns still checks the row range");

    /* errors: never a crash, always a status */
    CHECK(ggml_t2p_gemv(GGML_T2P_LAYOUT_T2P, 1, NULL, wsize, NROWS, K, act, asize, y, NROWS, 0, NROWS) == GGML_T2P_ERR_NULL, "null w");
    CHECK(ggml_t2p_gemv(GGML_T2P_LAYOUT_T2P, 1, packed, wsize, NROWS, K, act, asize, NULL, NROWS, 0, NROWS) == GGML_T2P_ERR_NULL, "null dst");
    CHECK(ggml_t2p_repacked_size(GGML_T2P_TYPE_PQ2_0, GGML_T2P_LAYOUT_T2P, NROWS, 100, &s) == GGML_T2P_ERR_SHAPE, "k = 100");
    CHECK(ggml_t2p_repacked_size(GGML_T2P_TYPE_PQ2_0, GGML_T2P_LAYOUT_T2P, 6, K, &s) == GGML_T2P_ERR_SHAPE, "rows = 6");
    CHECK(ggml_t2p_repacked_size(GGML_T2P_TYPE_PQ2_0, GGML_T2P_LAYOUT_T2P, -4, K, &s) == GGML_T2P_ERR_SHAPE, "rows = -4");
    CHECK(ggml_t2p_repacked_size(7, GGML_T2P_LAYOUT_T2P, NROWS, K, &s) == GGML_T2P_ERR_INVALID_ARGUMENT, "type 7");
    CHECK(ggml_t2p_repacked_size(GGML_T2P_TYPE_PQ2_0, GGML_T2P_LAYOUT_PTQ1_0X4, NROWS, K, &s) == GGML_T2P_ERR_UNSUPPORTED, "pq2_0 -> ptq1_0x4");
    CHECK(ggml_t2p_gemv(GGML_T2P_LAYOUT_T2P, 1, packed, wsize - 1, NROWS, K, act, asize, y, NROWS, 0, NROWS) == GGML_T2P_ERR_BUFFER_SIZE, "short w");
    CHECK(ggml_t2p_gemv(GGML_T2P_LAYOUT_T2P, 1, packed, wsize, NROWS, K, act, 291, y, NROWS, 0, NROWS) == GGML_T2P_ERR_BUFFER_SIZE, "short act");
    CHECK(ggml_t2p_gemv(GGML_T2P_LAYOUT_T2P, 1, packed, wsize, NROWS, K, act, asize, y, NROWS - 1, 0, NROWS) == GGML_T2P_ERR_BUFFER_SIZE, "short dst");
    CHECK(ggml_t2p_gemv(GGML_T2P_LAYOUT_T2P, 1, (char *)packed + 1, wsize - 1, 4, 128, act, asize, y, NROWS, 0, 4) == GGML_T2P_ERR_MISALIGNED, "odd w");
    CHECK(ggml_t2p_gemv(GGML_T2P_LAYOUT_T2P, 1, packed, wsize, NROWS, K, act, asize, y, NROWS, 0, 6) == GGML_T2P_ERR_RANGE, "rows 0..6");
    CHECK(ggml_t2p_gemv(GGML_T2P_LAYOUT_T2P, 1, packed, wsize, NROWS, K, act, asize, y, NROWS, 8, 4) == GGML_T2P_ERR_RANGE, "rows 8..4");
    CHECK(ggml_t2p_gemv(GGML_T2P_LAYOUT_T2P, 1, packed, wsize, NROWS, K, act, asize, y, NROWS, 0, 12) == GGML_T2P_ERR_RANGE, "rows 0..12");
    CHECK(ggml_t2p_gemv(9, 1, packed, wsize, NROWS, K, act, asize, y, NROWS, 0, NROWS) == GGML_T2P_ERR_INVALID_ARGUMENT, "layout 9");
    CHECK(ggml_t2p_gemv(GGML_T2P_LAYOUT_T2P, 42, packed, wsize, NROWS, K, act, asize, y, NROWS, 0, NROWS) == GGML_T2P_ERR_INVALID_ARGUMENT, "kernel 42");
    CHECK(ggml_t2p_repack(GGML_T2P_TYPE_PQ2_0, GGML_T2P_LAYOUT_T2P, w, sizeof(w), NROWS, K, packed, wsize - 136) == GGML_T2P_ERR_BUFFER_SIZE, "short dst repack");
    CHECK(ggml_t2p_repack(GGML_T2P_TYPE_PQ2_0, GGML_T2P_LAYOUT_T2P, packed, wsize, NROWS, K, packed, wsize) == GGML_T2P_ERR_INVALID_ARGUMENT, "in-place repack");
    {
        float ys[2 * NROWS + 1];
        CHECK(ggml_t2p_gemv(GGML_T2P_LAYOUT_T2P, 1, packed, wsize, NROWS, K, act, asize, (float *)((char *)ys + 1), NROWS, 0, NROWS) == GGML_T2P_ERR_MISALIGNED, "odd dst");
        CHECK(ggml_t2p_gemm(GGML_T2P_LAYOUT_T2P, 1, packed, wsize, NROWS, K, act, asize, 2, ys, SIZE_MAX, INT64_MAX, 0, NROWS) == GGML_T2P_ERR_BUFFER_SIZE, "dst extent past isize::MAX");
    }

    free(packed);
    printf("c abi smoke: %d/%d checks passed\n", checks - failures, checks);
    return failures == 0 ? 0 : 1;
}
