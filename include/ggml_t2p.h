/*
 * ggml_t2p.h - the C ABI of ggml-t2p (libggml_t2p.a): exact ARM CPU kernels for ternary PQ2_0 and
 * PTQ1_0 weights, run on a load-time repack (T2P, PTQ1_0x4).
 *
 * Numerics: every output is, bit for bit, the fork's PQ2_0 x Q8_K formula
 *     sumf = fma(fp32(d_i) * d_y, (float) isum_i, sumf)    over 128-weight blocks i, in order
 * for every kernel level, batch width and row split. Activation rows whose length k is a multiple
 * of 128 but not of 256 are zero-padded to a multiple of 256 before Q8_K quantization.
 *
 * Errors: every function validates its arguments and returns GGML_T2P_OK (0) or a negative
 * GGML_T2P_ERR_* status. Null pointers, shapes we do not handle (k % 128, rows % 4), buffers that
 * are too small or misaligned, and kernels the CPU lacks are reported, never undefined behaviour,
 * and no panic crosses this boundary. Pointers must be valid for the sizes passed with them.
 *
 * Threads: repack may use a rayon pool; gemv/gemm run on the calling thread over the row range
 * given, so callers (ggml worker threads) split rows among themselves on 4-row boundaries.
 */
#ifndef GGML_T2P_H
#define GGML_T2P_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GGML_T2P_ABI_VERSION 1

/* Status codes. */
#define GGML_T2P_OK                    0
#define GGML_T2P_ERR_NULL             -1 /* a required pointer is NULL */
#define GGML_T2P_ERR_SHAPE            -2 /* k % 128 != 0, rows % 4 != 0, zero/negative/overflowing sizes */
#define GGML_T2P_ERR_BUFFER_SIZE      -3 /* a buffer is smaller than the shape needs */
#define GGML_T2P_ERR_MISALIGNED       -4 /* a buffer is not aligned for its type (2 B weights, 4 B activations and dst) */
#define GGML_T2P_ERR_RANGE            -5 /* row range reversed, out of bounds or not on 4-row boundaries */
#define GGML_T2P_ERR_UNSUPPORTED      -6 /* kernel level not available on this CPU, or layout not for this type */
#define GGML_T2P_ERR_INVALID_ARGUMENT -7 /* unknown type id, layout or kernel value; overlapping repack buffers */
#define GGML_T2P_ERR_INTERNAL         -8 /* a bug: an internal panic was caught */

/* CPU feature bits (ggml_t2p_cpu_features). */
#define GGML_T2P_CPU_NEON    1u
#define GGML_T2P_CPU_DOTPROD 2u
#define GGML_T2P_CPU_I8MM    4u

/* Kernel levels. AUTO picks the best the CPU has (an error when it has no dotprod). */
#define GGML_T2P_KERNEL_AUTO    0
#define GGML_T2P_KERNEL_REF     1 /* portable scalar twin: exact, slow, always available */
#define GGML_T2P_KERNEL_DOTPROD 2 /* NEON sdot gemv, sdot 4x4 gemm */
#define GGML_T2P_KERNEL_I8MM    3 /* NEON sdot gemv, smmla 4x16/4x8/4x4 gemm */

/* Source weight types: ggml type ids in PrismML's fork. */
#define GGML_T2P_TYPE_PQ2_0  142 /* 128 weights, 34 bytes: fp16 d, qs[32] */
#define GGML_T2P_TYPE_PTQ1_0 143 /* 128 weights, 28 bytes: qs[24], qh[2], fp16 d last */

/* Repacked layouts: 4 rows x 128 weights per block, row-group major. */
#define GGML_T2P_LAYOUT_T2P      1 /* 136-byte blocks; from PQ2_0 or PTQ1_0 */
#define GGML_T2P_LAYOUT_PTQ1_0X4 2 /* 112-byte blocks; from PTQ1_0 only, 1.75 bits per weight */

/* Library version string, e.g. "0.1.0". Static storage. */
const char * ggml_t2p_version(void);

/* GGML_T2P_ABI_VERSION of the library (compare with the header's). */
uint32_t ggml_t2p_abi_version(void);

/* GGML_T2P_CPU_* bits of the running CPU. */
uint32_t ggml_t2p_cpu_features(void);

/* The best kernel level this CPU runs (GGML_T2P_KERNEL_DOTPROD or _I8MM), or 0 when it has no
 * dotprod: callers should then decline and leave the weights to stock code. */
int32_t ggml_t2p_best_kernel(void);

/* Name of a kernel level ("ref", "dotprod", "i8mm", "auto"), or "unknown". Static storage. */
const char * ggml_t2p_kernel_name(int32_t kernel);

/* Text for a status code. Static storage. */
const char * ggml_t2p_status_string(int32_t status);

/* GGML_T2P_OK if a matrix of n_rows x k weights of src_type can be repacked into layout and run
 * with kernel; else the reason (SHAPE, UNSUPPORTED, INVALID_ARGUMENT). */
int32_t ggml_t2p_supports(int32_t src_type, int32_t layout, int32_t kernel, int64_t n_rows, int64_t k);

/* Bytes of the repacked matrix in *out_size (PQ2_0 -> T2P and PTQ1_0 -> PTQ1_0X4 keep the source
 * size; PTQ1_0 -> T2P is 136/112 of it). */
int32_t ggml_t2p_repacked_size(int32_t src_type, int32_t layout, int64_t n_rows, int64_t k, size_t * out_size);

/* Bytes of n_cols Q8_K activation rows of length k: n_cols * ceil(k/256) * 292 (0 for n_cols = 0). */
int32_t ggml_t2p_act_size(int64_t k, int64_t n_cols, size_t * out_size);

/* Repacks a row-major src_type matrix (n_rows x k weights, src_size >= its size, 2-byte aligned)
 * into layout at dst (dst_size >= ggml_t2p_repacked_size, 2-byte aligned). Overlapping src and dst
 * are refused with GGML_T2P_ERR_INVALID_ARGUMENT. */
int32_t ggml_t2p_repack(int32_t src_type, int32_t layout, const void * src, size_t src_size, int64_t n_rows, int64_t k, void * dst, size_t dst_size);

/* gemv (one activation column, decode): dst[r] = row r of W . act for r in [row_begin, row_end).
 * w: repacked matrix (w_size bytes); act: ceil(k/256) Q8_K blocks (act_size bytes, 4-byte
 * aligned); dst: dst_len floats, only [row_begin, row_end) written. */
int32_t ggml_t2p_gemv(int32_t layout, int32_t kernel, const void * w, size_t w_size, int64_t n_rows, int64_t k,
                      const void * act, size_t act_size, float * dst, size_t dst_len, int64_t row_begin, int64_t row_end);

/* gemm (n_cols activation columns, prompt batches): dst[j * dst_col_stride + r] = row r of W .
 * column j, for r in [row_begin, row_end) and j in [0, n_cols). act: n_cols rows of ceil(k/256)
 * Q8_K blocks back to back. dst_col_stride >= n_rows when n_cols > 1. One column runs the gemv
 * kernel; results are identical either way. n_cols = 0 (an empty batch) is valid and touches no
 * activation or dst memory (those pointers may then be NULL). */
int32_t ggml_t2p_gemm(int32_t layout, int32_t kernel, const void * w, size_t w_size, int64_t n_rows, int64_t k,
                      const void * act, size_t act_size, int64_t n_cols, float * dst, size_t dst_len,
                      int64_t dst_col_stride, int64_t row_begin, int64_t row_end);

#ifdef __cplusplus
}
#endif

#endif /* GGML_T2P_H */
