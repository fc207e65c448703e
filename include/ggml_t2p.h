/*
 * ggml_t2p.h - the C ABI of ggml-t2p (libggml_t2p.a): exact CPU kernels for ternary PQ2_0 and
 * PTQ1_0 weights, run on a load-time repack into a layout shaped for the CPU (T2P or PTQ1_0x4 on
 * ARM: sdot, smmla; X16 on x86-64: vpdpbusd, vpmaddubsw; L64 for PTQ1_0 on x86-64 with AVX-512
 * VBMI: vpermi2b table lookups, 1.75 bits per weight kept).
 *
 * Numerics: every output is, bit for bit, the fork's PQ2_0 x Q8_K formula
 *     sumf = fma(fp32(d_i) * d_y, (float) isum_i, sumf)    over 128-weight blocks i, in order
 * for every kernel level, batch width and row split. Activation rows whose length k is a multiple
 * of 128 but not of 256 are zero-padded to a multiple of 256 before Q8_K quantization.
 * NaN scales: an output whose formula meets a NaN scale (a weight block's d_i or an activation
 * block's d_y, one or both) is a NaN at every level, its payload and sign unspecified (levels
 * differ there); every other output keeps the formula's bits.
 *
 * Sizes: every size query (ggml_t2p_supports, ggml_t2p_repacked_size, ggml_t2p_act_packed_size)
 * answers GGML_T2P_ERR_SHAPE for a size past PTRDIFF_MAX bytes (isize::MAX): no buffer is larger.
 *
 * Flow (ABI 5): at load, ggml_t2p_choose picks the level and the layouts for this CPU (or
 * declines, saying why), ggml_t2p_repack fills them (a ggml host does both, and the rest of its
 * bookkeeping, through a ggml_t2p_plugin: see the end of this header). Per matrix multiplication, the caller quantizes activations to Q8_K (ggml's own
 * quantizer, or ggml_t2p_quantize_q8_k with the host's rounding: the same bits), packs them once with ggml_t2p_act_pack (pieces may be packed by several threads at
 * once), then runs ggml_t2p_gemv / ggml_t2p_gemm on row ranges from any threads. The packed
 * activation format is the library's business: ask ggml_t2p_act_packed_size for its size.
 *
 * Errors: every function validates its arguments and returns GGML_T2P_OK (0) or a negative
 * GGML_T2P_ERR_* status. Null pointers, shapes we do not handle (k % 128, rows % 4), buffers that
 * are too small or misaligned, and kernels the CPU lacks are reported, never undefined behaviour,
 * and no panic crosses this boundary. Pointers must be valid for the sizes passed with them.
 *
 * Threads: a repack starts and joins its own threads (at most ggml_t2p_set_threads, default all
 * cores; none for matrices under 1 MiB); nothing runs after it returns and no pool is kept, so it
 * is safe after fork(). act_pack, gemv and gemm run on the calling thread only.
 */
#ifndef GGML_T2P_H
#define GGML_T2P_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 5: layout L64 (GGML_T2P_LAYOUT_L64, row tile 64) and GGML_T2P_CPU_AVX512VBMI; choose and
 * layout_for may answer L64 for PTQ1_0 on x86-64. */
#define GGML_T2P_ABI_VERSION 5

/* Status codes. */
#define GGML_T2P_OK                    0
#define GGML_T2P_ERR_NULL             -1 /* a required pointer is NULL */
#define GGML_T2P_ERR_SHAPE            -2 /* k % 128 != 0, rows % 4 != 0, zero/negative/overflowing sizes, bad column or block index */
#define GGML_T2P_ERR_BUFFER_SIZE      -3 /* a buffer is smaller than the shape needs */
#define GGML_T2P_ERR_MISALIGNED       -4 /* a buffer is not aligned for its type (2 B weights, 4 B Q8_K and dst, GGML_T2P_ACT_ALIGN packed activations) */
#define GGML_T2P_ERR_RANGE            -5 /* row range reversed, out of bounds, or (non-empty) not on the layout's row tile */
#define GGML_T2P_ERR_UNSUPPORTED      -6 /* kernel level not available on this CPU, or layout not for this type or kernel */
#define GGML_T2P_ERR_INVALID_ARGUMENT -7 /* unknown type id, layout, kernel or flag; an output buffer overlapping an input */
#define GGML_T2P_ERR_INTERNAL         -8 /* a bug: an internal panic was caught */

/* CPU feature bits (ggml_t2p_cpu_features). */
#define GGML_T2P_CPU_NEON       1u
#define GGML_T2P_CPU_DOTPROD    2u
#define GGML_T2P_CPU_I8MM       4u
#define GGML_T2P_CPU_AVX2       8u  /* AVX2 with FMA and F16C */
#define GGML_T2P_CPU_AVXVNNI    16u /* AVX-VNNI (and AVX2, FMA, F16C) */
#define GGML_T2P_CPU_AVX512VNNI 32u /* AVX-512 F, BW, VL, VNNI (and AVX2, FMA, F16C) */
#define GGML_T2P_CPU_AMX_TILE   64u /* AMX-TILE with the tile state enabled by the OS (XCR0 17, 18), on
                                      * Linux (other OSes: never). The Linux tile-data permission is not
                                      * part of it: it is asked (arch_prctl ARCH_REQ_XCOMP_PERM, once per
                                      * process) on a CPU with AMX when a level is chosen (AUTO, or
                                      * ggml_t2p_best_kernel) or amx is asked for, and
                                      * ggml_t2p_supports(..., GGML_T2P_KERNEL_AMX, ...) says whether it
                                      * was granted. A granted permission enlarges the process's signal
                                      * frames (a small sigaltstack may then be refused) */
#define GGML_T2P_CPU_AMX_INT8   128u /* AMX-INT8 (reported only with AMX_TILE) */
#define GGML_T2P_CPU_AVX512VBMI 256u /* AVX-512 VBMI (with AVX512VNNI): the L64 layout's kernels */

/* Kernel levels. AUTO picks the best the CPU has (an error when it has none of the SIMD levels). */
#define GGML_T2P_KERNEL_AUTO       0
#define GGML_T2P_KERNEL_REF        1 /* portable scalar twin: exact, slow, always available, any layout */
#define GGML_T2P_KERNEL_DOTPROD    2 /* ARM: NEON sdot gemv, sdot 4x4 gemm (T2P, PTQ1_0X4) */
#define GGML_T2P_KERNEL_I8MM       3 /* ARM: NEON sdot gemv, smmla 4x16/4x8/4x4 gemm (T2P, PTQ1_0X4) */
#define GGML_T2P_KERNEL_AVX2       4 /* x86-64: vpmaddubsw, 16-row tiles (X16) */
#define GGML_T2P_KERNEL_AVXVNNI    5 /* x86-64: vpdpbusd ymm, 16-row tiles (X16) */
#define GGML_T2P_KERNEL_AVX512VNNI 6 /* x86-64: vpdpbusd zmm, 16-row tiles (X16); with AVX-512 VBMI also
                                      * L64: a vpermi2b gemv, gemm expanded to X16 */
#define GGML_T2P_KERNEL_AMX        7 /* x86-64: AMX-INT8 tdpbssd tiles for gemm of 5+ columns, the
                                      * AVX512VNNI kernels below that (X16, and L64 with VBMI). AUTO's
                                      * first choice where the OS grants the tile state. */

/* Source weight types: ggml type ids in PrismML's fork. */
#define GGML_T2P_TYPE_PQ2_0  142 /* 128 weights, 34 bytes: fp16 d, qs[32] */
#define GGML_T2P_TYPE_PTQ1_0 143 /* 128 weights, 28 bytes: qs[24], qh[2], fp16 d last */

/* Repacked layouts, tile major (all k/128 blocks of one row tile, then the next). */
#define GGML_T2P_LAYOUT_T2P      1 /* ARM: 4 rows x 128 weights in 136 bytes; from PQ2_0 or PTQ1_0 */
#define GGML_T2P_LAYOUT_PTQ1_0X4 2 /* ARM: 4 rows in 112 bytes; from PTQ1_0 only, 1.75 bits per weight */
#define GGML_T2P_LAYOUT_X16      3 /* x86-64: 16 rows in 544 bytes; from PQ2_0 or PTQ1_0; last tile zero-padded */
#define GGML_T2P_LAYOUT_L64      4 /* x86-64 with AVX-512 VBMI: 64 rows in 1792 bytes; from PTQ1_0 only,
                                    * 1.75 bits per weight; last tile zero-padded */

/* ggml_t2p_layout_for flags. */
#define GGML_T2P_PREFER_COMPACT 1u /* PTQ1_0: keep 1.75 bits per weight where a layout for it exists
                                    * (PTQ1_0X4 on ARM, L64 on x86-64 with AVX-512 VBMI) */

/* Alignment of a packed activation buffer. */
#define GGML_T2P_ACT_ALIGN 16

/* Library version string, e.g. "0.2.0". Static storage. */
const char * ggml_t2p_version(void);

/* GGML_T2P_ABI_VERSION of the library (compare with the header's; a mismatch means the header
 * and the library come from different versions: do not call anything else). */
uint32_t ggml_t2p_abi_version(void);

/* GGML_T2P_CPU_* bits of the running CPU: what the OS reports (Linux/Android HWCAPs, macOS sysctl
 * hw.optional.arm.FEAT_*, Windows IsProcessorFeaturePresent, x86 cpuid), plus features promised
 * with ggml_t2p_assume_kernel. */
uint32_t ggml_t2p_cpu_features(void);

/* GGML_T2P_CPU_* bits the OS cannot report either way on this machine. Windows on ARM reports
 * i8mm only through IsProcessorFeaturePresent(PF_ARM_V82_I8MM_INSTRUCTIONS_AVAILABLE = 66), which
 * Windows builds older than that flag answer FALSE on every CPU: there, i8mm is unknown unless
 * reported. 0 everywhere else. */
uint32_t ggml_t2p_cpu_features_unknown(void);

/* The caller promises that the CPU runs kernel (GGML_T2P_KERNEL_*, not AUTO), for features the OS
 * cannot tell (ggml_t2p_cpu_features_unknown): from then on the library treats them as present,
 * for the whole process (ggml_t2p_best_kernel may then choose kernel too). A wrong promise is an
 * illegal instruction (SIGILL; STATUS_ILLEGAL_INSTRUCTION on Windows) at the first kernel call.
 * GGML_T2P_OK when kernel is available afterwards (also when it already was);
 * GGML_T2P_ERR_UNSUPPORTED when it needs a feature the OS reported absent or another architecture
 * (nothing is assumed); GGML_T2P_ERR_INVALID_ARGUMENT for an unknown kernel or AUTO. Thread-safe. */
int32_t ggml_t2p_assume_kernel(int32_t kernel);

/* The best kernel level this CPU runs, or 0 when it has none of the SIMD levels (ARM without
 * dotprod, x86 without AVX2+FMA+F16C): callers should then decline and leave the weights to stock
 * code. On a CPU with AMX this asks Linux for the tile-data permission (see GGML_T2P_CPU_AMX_TILE):
 * AMX where granted, else AVX512VNNI. */
int32_t ggml_t2p_best_kernel(void);

/* Name of a kernel level ("ref", "dotprod", "i8mm", "avx2", "avxvnni", "avx512vnni", "amx", "auto"), or
 * "unknown". Static storage. */
const char * ggml_t2p_kernel_name(int32_t kernel);

/* Parses a kernel name as ggml_t2p_kernel_name prints it (and "auto") into *out_kernel;
 * GGML_T2P_ERR_INVALID_ARGUMENT for anything else. */
int32_t ggml_t2p_kernel_from_name(const char * name, int32_t * out_kernel);

/* Name of a layout ("T2P", "PTQ1_0x4", "X16", "L64"), or "unknown". Static storage. */
const char * ggml_t2p_layout_name(int32_t layout);

/* Text for a status code. Static storage. */
const char * ggml_t2p_status_string(int32_t status);

/* The layout weights of src_type get with kernel on this CPU (X16 on x86-64, or L64 for PTQ1_0
 * with GGML_T2P_PREFER_COMPACT where the CPU has AVX-512 VBMI and the kernel is AVX512VNNI, AMX or
 * REF; T2P on ARM, or PTQ1_0X4 for PTQ1_0 with GGML_T2P_PREFER_COMPACT). */
int32_t ggml_t2p_layout_for(int32_t src_type, int32_t kernel, uint32_t flags, int32_t * out_layout);

/* Rows per tile of a layout (4, 16 for X16, 64 for L64): gemv/gemm row ranges start on a multiple
 * of it and end on one or at n_rows. */
int32_t ggml_t2p_row_tile(int32_t layout, int64_t * out_rows);

/* GGML_T2P_OK if a matrix of n_rows x k weights of src_type can be repacked into layout and run
 * with kernel; else the reason (SHAPE, also for a source or repacked size past PTRDIFF_MAX bytes;
 * UNSUPPORTED, INVALID_ARGUMENT). */
int32_t ggml_t2p_supports(int32_t src_type, int32_t layout, int32_t kernel, int64_t n_rows, int64_t k);

/* Bytes of the repacked matrix in *out_size (PQ2_0 -> T2P and PTQ1_0 -> PTQ1_0X4 keep the source
 * size; PTQ1_0 -> T2P is 136/112 of it; X16 is ceil(n_rows/16)*16 rows of PQ2_0; L64 is
 * ceil(n_rows/64)*64 rows of PTQ1_0); SHAPE for a source or repacked size past PTRDIFF_MAX bytes. */
int32_t ggml_t2p_repacked_size(int32_t src_type, int32_t layout, int64_t n_rows, int64_t k, size_t * out_size);

/* Caps the threads a repack uses (0: all cores, the default; negative: INVALID_ARGUMENT). */
int32_t ggml_t2p_set_threads(int32_t n_threads);

/* Repacks a row-major src_type matrix (n_rows x k weights, src_size >= its size, 2-byte aligned)
 * into layout at dst (dst_size >= ggml_t2p_repacked_size, 2-byte aligned). Overlapping src and dst
 * are refused with GGML_T2P_ERR_INVALID_ARGUMENT.
 * Row-tile order: for r0 a multiple of ggml_t2p_row_tile, rows [r0, r1) repacked alone (as a
 * matrix of r1 - r0 rows) give bytes [ggml_t2p_repacked_size(r0 rows), that + its own size) of the
 * whole matrix's repack, so a large matrix can be repacked in slices of whole row tiles. */
int32_t ggml_t2p_repack(int32_t src_type, int32_t layout, const void * src, size_t src_size, int64_t n_rows, int64_t k, void * dst, size_t dst_size);

/* Bytes of the packed activations of n_cols columns of length k for gemv/gemm with layout and
 * kernel (0 for n_cols = 0; SHAPE past PTRDIFF_MAX bytes). The format depends on all four: pack
 * and run with the same values. */
int32_t ggml_t2p_act_packed_size(int32_t layout, int32_t kernel, int64_t k, int64_t n_cols, size_t * out_size);

/* Packs Q8_K blocks [blk_begin, blk_end) of activation column col (of n_cols columns of length k;
 * a column has ceil(k/256) Q8_K blocks) into packed (packed_size >= ggml_t2p_act_packed_size,
 * aligned to GGML_T2P_ACT_ALIGN). q8k points at exactly those blocks (q8k_size >= (blk_end -
 * blk_begin) * 292 bytes, 4-byte aligned). A call writes only its own column's part for those
 * blocks (and, for the last column, the padding the format needs), so calls on different
 * (column, block range) pieces may run on different threads at the same time; together they must
 * cover every block of every column before gemv/gemm run. Errors are checked in this order:
 * the shape (SHAPE: block range past ceil(k/256), col >= n_cols), then the buffers (packed
 * overlapping q8k: INVALID_ARGUMENT; NULL, BUFFER_SIZE, MISALIGNED). */
int32_t ggml_t2p_act_pack(int32_t layout, int32_t kernel, int64_t k, int64_t n_cols, int64_t col,
                          int64_t blk_begin, int64_t blk_end, const void * q8k, size_t q8k_size,
                          void * packed, size_t packed_size);

/* gemv (one activation column, decode): dst[r] = row r of W . act for r in [row_begin, row_end).
 * w: repacked matrix (w_size bytes); act: packed activations of 1 column (act_size bytes); dst:
 * dst_len floats, only [row_begin, row_end) written. */
int32_t ggml_t2p_gemv(int32_t layout, int32_t kernel, const void * w, size_t w_size, int64_t n_rows, int64_t k,
                      const void * act, size_t act_size, float * dst, size_t dst_len, int64_t row_begin, int64_t row_end);

/* gemm (n_cols activation columns, prompt batches): dst[j * dst_col_stride + r] = row r of W .
 * column j, for r in [row_begin, row_end) and j in [0, n_cols). act: packed activations of n_cols
 * columns. dst_col_stride >= n_rows when n_cols > 1. One column runs the gemv kernel; results are
 * identical either way. n_cols = 0 (an empty batch) is valid and touches no activation or dst
 * memory (those pointers may then be NULL). An empty row range (row_begin == row_end <= n_rows)
 * is valid anywhere; a non-empty one starts on a row tile (ggml_t2p_row_tile) and ends on one or
 * at n_rows, else GGML_T2P_ERR_RANGE. dst sharing bytes with w or act: INVALID_ARGUMENT. */
int32_t ggml_t2p_gemm(int32_t layout, int32_t kernel, const void * w, size_t w_size, int64_t n_rows, int64_t k,
                      const void * act, size_t act_size, int64_t n_cols, float * dst, size_t dst_len,
                      int64_t dst_col_stride, int64_t row_begin, int64_t row_end);

/* Q8_K activation quantization: the library's SIMD twin of ggml's quantize_row_q8_K_ref.
 * GGML_T2P_HAVE_QUANTIZE_Q8_K is defined where the header declares it (a shim can test for it). */
#define GGML_T2P_HAVE_QUANTIZE_Q8_K 1

/* How quantize_row_q8_K_ref's `nearest_int(iscale * x)` rounds, i.e. how the host ggml-base was
 * compiled. The C is iscale*x[j] + 12582912.f after inlining; whether a compiler fuses it:
 *   FUSED:   one fused multiply-add (GCC's default contraction where FMA is in the ISA: every
 *            aarch64 build, x86 builds of ggml-base with -mfma / -march=native in CFLAGS);
 *   UNFUSED: the product rounded first (x86 ggml-base built for the baseline ISA, which is what
 *            llama.cpp's CMake does with GGML_NATIVE: the arch flags go to ggml-cpu only; clang,
 *            which contracts within one expression only; MSVC).
 * The two differ in the last bit of iscale*x near a .5 tie: a few qs in some blocks. */
#define GGML_T2P_ROUND_FUSED   1
#define GGML_T2P_ROUND_UNFUSED 2

/* Quantizes n floats (n % 256 == 0, else SHAPE; n = 0 does nothing) from x (4-byte aligned) to
 * n/256 Q8_K blocks at y (y_size >= n/256 * 292 bytes, 4-byte aligned), bit for bit what
 * quantize_row_q8_K_ref computes when its rounding is `rounding` (GGML_T2P_ROUND_*; anything else
 * INVALID_ARGUMENT), NaN and infinite inputs included. Like it, a block whose values are all
 * zeros (or NaNs) gets d = 0, qs = 0 and its bsums are left as they were. kernel: AUTO (the
 * fastest quantizer of this CPU; the scalar one where there is no SIMD level) or a level (REF
 * runs the scalar reference; UNSUPPORTED if the CPU lacks it). x and y sharing bytes:
 * INVALID_ARGUMENT. Runs on the calling thread. */
int32_t ggml_t2p_quantize_q8_k(int32_t kernel, int32_t rounding, const float * x, int64_t n, void * y, size_t y_size);

/* ---- The plugin's policy (ABI 5): the ggml shim asks, logs the answer and translates; every
 * decision is made here. ---- */

/* Chooses the kernel level and the layouts a ggml host runs with.
 * kernel_env: GGML_T2P_KERNEL as set (NULL or "" for unset): "auto" or NULL: the best level of this
 * CPU; a level name: that level. An unknown name warns and means auto; a forced level the CPU
 * lacks declines, except "amx" where the CPU or OS refuses AMX (the best other level runs, with a
 * warning) and a level whose feature the OS cannot report (assumed, with a warning).
 * ptq1_env: GGML_T2P_PTQ1 ("t2p": the 2.125-bit layouts, T2P or X16; "native": 1.75 bits per
 * weight kept where a layout for that exists, PTQ1_0X4 on ARM, L64 on x86-64 with AVX-512 VBMI;
 * NULL: the default, native where the CPU has AVX-512 VBMI and the level is avx512vnni, amx or ref,
 * else t2p; anything else warns and means the default).
 * host_has_pq2 / host_has_ptq1: nonzero when the host's type 142 / 143 is PQ2_0 / PTQ1_0 (see
 * ggml_t2p_source_block); a type the host lacks gets layout -1.
 * Writes *out_kernel (a GGML_T2P_KERNEL_* level, 0 when declining), *out_pq2_layout and
 * *out_ptq1_layout (GGML_T2P_LAYOUT_*, or -1: not taken), and into msg (msg_size bytes, always
 * NUL-terminated when msg_size > 0) the lines to log, each ending in '\n', without a prefix:
 * warnings, then, when declining, the reason as the last line (when they do not all fit, whole
 * warnings are left out so that the reason stays). An env value that is not UTF-8 is an unknown
 * value (a warning). GGML_T2P_OK: the plugin runs; GGML_T2P_ERR_UNSUPPORTED: it declines (stock
 * code runs every weight); GGML_T2P_ERR_NULL for a NULL out pointer (msg may be NULL when msg_size
 * is 0). */
int32_t ggml_t2p_choose(const char * kernel_env, const char * ptq1_env, int32_t host_has_pq2, int32_t host_has_ptq1,
                        int32_t * out_kernel, int32_t * out_pq2_layout, int32_t * out_ptq1_layout, char * msg,
                        size_t msg_size);

/* Weights and bytes per block of src_type (128 weights; PQ2_0 34 bytes, PTQ1_0 28): the host's
 * type of that id must report the same, else it is another type and stays on stock code. */
int32_t ggml_t2p_source_block(int32_t src_type, int64_t * out_weights, size_t * out_bytes);

/* The Q8_K rounding probe (which GGML_T2P_ROUND_* reproduces the host's quantize_row_q8_K): the
 * host quantizes the probe values with its own Q8_K from_float and hands the blocks back. */
#define GGML_T2P_Q8K_PROBE_VALUES 512

/* Writes the GGML_T2P_Q8K_PROBE_VALUES probe values (two blocks of near-ties) to x (n >= that
 * many floats, else BUFFER_SIZE). */
int32_t ggml_t2p_q8k_probe_input(float * x, size_t n);

/* Which rounding of ggml_t2p_quantize_q8_k with kernel reproduces host_q8k, the host's Q8_K
 * blocks of the n values at x (n % 256 == 0, else SHAPE; host_size >= n/256 * 292 bytes, else
 * BUFFER_SIZE): *out_rounding = GGML_T2P_ROUND_FUSED or _UNFUSED when exactly that one matches bit
 * for bit, 0 when neither does (the host's quantizer should keep running) or the two roundings
 * agree on x. */
int32_t ggml_t2p_q8k_probe_rounding(int32_t kernel, const float * x, size_t n, const void * host_q8k,
                                    size_t host_size, int32_t * out_rounding);

/* ---- The ggml plugin (ABI 5): the state a ggml host keeps of the library. The shim
 * (ggml-glue/) creates one at start-up and only translates ggml's calls into these; the settings
 * (environment), the check of the host's types, the Q8_K quantizer, the load accounting and its
 * log line, the sliced repack with the release of the source's file pages, the huge-page advice,
 * the work plan of a matrix multiplication and its row split are made here. Every call is
 * thread-safe; the plugin holds no thread and no lock. ---- */

/* A plugin (opaque). */
typedef struct ggml_t2p_plugin ggml_t2p_plugin;

/* Log levels of ggml_t2p_log_fn: the values of ggml's GGML_LOG_LEVEL_INFO and GGML_LOG_LEVEL_WARN. */
#define GGML_T2P_LOG_INFO 2
#define GGML_T2P_LOG_WARN 3

/* The host's callbacks. Each may be called from any thread.
 * ggml_t2p_getenv_fn: the value of environment variable name, or NULL when unset (getenv); the
 *   string is copied before the next call.
 * ggml_t2p_host_type_fn: the host's type type_id: writes its weights per block, bytes per block
 *   and name (static storage, or NULL) and returns nonzero; returns 0 when the host has no type
 *   of that id (nothing written).
 * ggml_t2p_quantize_fn: the host's own Q8_K quantizer (ggml's from_float of GGML_TYPE_Q8_K): n
 *   floats (a multiple of 256) at x into n/256 blocks of 292 bytes at y (4-byte aligned).
 * ggml_t2p_log_fn: one log line, NUL-terminated, "ggml-t2p: ..." ending in '\n', at level
 *   GGML_T2P_LOG_*; user is the log_user given to ggml_t2p_plugin_new. */
typedef const char * (*ggml_t2p_getenv_fn)(const char * name);
typedef int32_t (*ggml_t2p_host_type_fn)(int32_t type_id, int64_t * out_weights, size_t * out_bytes, const char ** out_name);
typedef void (*ggml_t2p_quantize_fn)(const float * x, void * y, int64_t n);
typedef void (*ggml_t2p_log_fn)(int32_t level, const char * line, void * user);

/* Creates the plugin from the host's environment and types, logging each line through log (NULL:
 * nothing is logged). The settings, read with env, in this order:
 *   GGML_T2P               0/off/false/no: disabled; 1/on/true/yes or unset: on (on/off
 *                          variables warn for anything else and keep their default);
 *   (the host's types 142 and 143: taken when host_type reports 128 weights and the bytes of
 *    ggml_t2p_source_block, else a warning and stock code for that type)
 *   GGML_T2P_KERNEL, GGML_T2P_PTQ1   the level and layouts, as ggml_t2p_choose (its warnings, or
 *                          "declining: <why>");
 *   GGML_T2P_RELEASE_SOURCE  on/off, default on (ggml_t2p_plugin_repack);
 *   GGML_T2P_HUGE_PAGES    on/off, default off (ggml_t2p_plugin_new_buffer);
 *   GGML_T2P_QUANTIZE      auto (default: the library's Q8_K quantizer when the probe, run once
 *                          here through host_q8k, finds the host's rounding; else host_q8k) or
 *                          ggml (always host_q8k); anything else warns and means auto;
 *   GGML_T2P_HYBRID        on/off, default on (ggml_t2p_plugin_hybrid_op);
 *   GGML_T2P_EMBED         on/off, default on (ggml_t2p_plugin_get_rows_supported).
 * Logs "ggml-t2p: enabled (libggml_t2p <version>, kernel <level>; PQ2_0 -> <layout>, PTQ1_0 ...;
 * Q8_K by ...; GATED_DELTA_NET, SSM_CONV, CONCAT and F32 GET_ROWS on|off (...); GET_ROWS on ternary weights on|off (...))" at INFO, or "ggml-t2p: disabled (GGML_T2P=<value>)" at INFO, or the warnings then
 * "ggml-t2p: declining: <why>" at WARN.
 * GGML_T2P_OK: *out_plugin is the plugin (the shim keeps it for the process; ggml_t2p_plugin_free
 * frees it); GGML_T2P_ERR_UNSUPPORTED: disabled or declining, *out_plugin = NULL (stock code runs
 * every weight); GGML_T2P_ERR_NULL: env, host_type, host_q8k or out_plugin NULL. */
int32_t ggml_t2p_plugin_new(ggml_t2p_getenv_fn env, ggml_t2p_host_type_fn host_type, ggml_t2p_quantize_fn host_q8k,
                            ggml_t2p_log_fn log, void * log_user, ggml_t2p_plugin ** out_plugin);

/* Frees a plugin (NULL: nothing). No call on it may run or follow. */
void ggml_t2p_plugin_free(ggml_t2p_plugin * plugin);

/* The layout the plugin repacks weights of ggml type src_type into (*out_layout,
 * GGML_T2P_LAYOUT_*). GGML_T2P_ERR_UNSUPPORTED for any type it does not take (another type id, or
 * a ternary type this host lacks); ERR_NULL for a NULL plugin or out_layout. */
int32_t ggml_t2p_plugin_layout(const ggml_t2p_plugin * plugin, int32_t src_type, int32_t * out_layout);

/* GGML_T2P_OK when the plugin repacks and runs an n_rows x k matrix of src_type (ggml_t2p_supports
 * with its layout and level); else UNSUPPORTED (a type it does not take) or SHAPE. */
int32_t ggml_t2p_plugin_supports(const ggml_t2p_plugin * plugin, int32_t src_type, int64_t n_rows, int64_t k);

/* Bytes of the repacked n_rows x k matrix of src_type in the plugin's layout (*out_size); errors
 * as ggml_t2p_plugin_supports. */
int32_t ggml_t2p_plugin_repacked_size(const ggml_t2p_plugin * plugin, int32_t src_type, int64_t n_rows, int64_t k,
                                      size_t * out_size);

/* Repacks a whole row-major n_rows x k matrix of src_type at src (src_size >= its bytes, 2-byte
 * aligned) into dst (dst_size >= ggml_t2p_plugin_repacked_size) and counts it for the load line.
 * With GGML_T2P_RELEASE_SOURCE on, the source's whole pages are released once their rows are
 * repacked (ggml_t2p_release_source: only a read-only shared file mapping, Linux), and a source
 * above 16 MiB is repacked in slices of whole row tiles of at most 16 MiB (at least one tile),
 * each slice's pages released before the next, so source and copy overlap by one slice at most;
 * the same bytes either way. src must stay mapped and unchanged during the call; the pages it
 * released refault from the file if the host reads them again. Tensors may be repacked from
 * several threads at once. Errors: UNSUPPORTED for a type the plugin does not take, NULL,
 * BUFFER_SIZE, then as ggml_t2p_repack (a failed call counts nothing). */
int32_t ggml_t2p_plugin_repack(const ggml_t2p_plugin * plugin, int32_t src_type, const void * src, size_t src_size,
                               int64_t n_rows, int64_t k, void * dst, size_t dst_size);

/* The bytes of the source format (row-major, ggml's layout of src_type) of the n_rows x k matrix
 * that ggml_t2p_plugin_repack wrote at w (w_size >= ggml_t2p_plugin_repacked_size), written to dst
 * (dst_size >= n_rows * k / 128 source blocks): for a host that must give a repacked tensor's
 * bytes back (ggml's get_tensor, a partial set_tensor read-modify-write). PQ2_0 comes back byte for
 * byte; PTQ1_0 byte for byte from the ARM native layout, and from T2P, X16 or L64 through its digits,
 * each byte re-encoded as the fork's quantizer writes it (the same weights and scale; a file's byte
 * in another encoding of the same digits comes back as the quantizer's). Not counted for the load
 * line. Errors: UNSUPPORTED for a type the plugin does not take, NULL, BUFFER_SIZE, MISALIGNED,
 * SHAPE, INVALID_ARGUMENT for overlapping buffers or, for PTQ1_0, codes no repack of it writes. */
int32_t ggml_t2p_plugin_unpack(const ggml_t2p_plugin * plugin, int32_t src_type, const void * w, size_t w_size,
                               int64_t n_rows, int64_t k, void * dst, size_t dst_size);

/* A new buffer of the plugin at base (size bytes), before anything is repacked into it: with
 * GGML_T2P_HUGE_PAGES on, the whole 2 MiB pages inside it are advised as transparent huge pages
 * (Linux: madvise MADV_HUGEPAGE; the contents do not change) and counted for the load line.
 * GGML_T2P_OK also when nothing is done (the setting off, base NULL, no whole 2 MiB page, another
 * OS, or the advice refused: the load line says so); ERR_NULL for a NULL plugin. */
int32_t ggml_t2p_plugin_new_buffer(const ggml_t2p_plugin * plugin, void * base, size_t size);

/* Logs the load line, the first time it is called on the plugin (later calls log nothing), at
 * INFO: "ggml-t2p: <n> tensors repacked (<n> PQ2_0 -> <layout>[, <n> PTQ1_0 -> <layout>]; <MiB>
 * MiB) in <s> s (<MiB/s> MiB/s); kernel <level>; <source>[; huge pages advised for <MiB> MiB
 * [(advice refused: <error>)]]", the time and rate those of the repack calls themselves, and
 * <source> "released <MiB> MiB of file-mapped source (<n> tensors) in <s> s [(tensors kept: <n>
 * not in a read-only shared file mapping, <n> refused: <error>)]" (Linux), "source pages kept
 * (GGML_T2P_RELEASE_SOURCE=0)" or "source pages kept (not supported on this OS)". */
int32_t ggml_t2p_plugin_report(const ggml_t2p_plugin * plugin);

/* The plan of one matrix multiplication: an n_rows x k matrix of src_type weights (in the
 * plugin's layout) times n_cols activation columns of k floats, on n_threads threads (>= 1, else
 * INVALID_ARGUMENT). *out_work_size: bytes of the work buffer ggml_t2p_plugin_act_prepare and
 * _mul_mat_rows share, at any alignment: 63 + the packed activations (ggml_t2p_act_packed_size)
 * rounded up to 64 + per thread one column's Q8_K blocks (ceil(k/256) x 292 bytes) rounded up to
 * 64, and 256 floats (1024 bytes) when k % 256 != 0. *out_n_chunks and *out_chunk_rows: the row
 * split, chunk c covering rows [c * chunk_rows, min(n_rows, (c + 1) * chunk_rows)), whole row
 * tiles: 4 chunks per thread (one per thread when n_threads is 1 or numa is nonzero), at most one
 * per row tile. Any out pointer may be NULL (not written). Errors as ggml_t2p_plugin_supports. */
int32_t ggml_t2p_plugin_mul_mat_plan(const ggml_t2p_plugin * plugin, int32_t src_type, int64_t n_rows, int64_t k,
                                     int64_t n_cols, int32_t n_threads, int32_t numa, size_t * out_work_size,
                                     int64_t * out_n_chunks, int64_t * out_chunk_rows);

/* Thread ith of nth (0 <= ith < nth, else INVALID_ARGUMENT) quantizes its share of the
 * activations to Q8_K (the library's quantizer in the host's rounding, or host_q8k: the host's
 * bits either way; the last block of a column whose k % 256 != 0 zero-padded) in its own scratch
 * of work, and packs it into work's packed activations: one column is split by Q8_K block over
 * the threads, more are dealt out column by column (ith, ith + nth, ...). The columns: n_cols =
 * ne1 * ne2 * ne3 rows of k floats; column c = i1 + ne1 * (i2 + ne2 * i3) starts at act + i1 *
 * nb1 + i2 * nb2 + i3 * nb3 bytes (4-byte aligned, else MISALIGNED). work: work_size bytes, at
 * least the plan's for nth threads (else BUFFER_SIZE). Every thread of the multiplication calls
 * it, at once, with the same arguments but ith; then they meet (a barrier) before the first
 * ggml_t2p_plugin_mul_mat_rows. n_cols = 0 does nothing. */
int32_t ggml_t2p_plugin_act_prepare(const ggml_t2p_plugin * plugin, int32_t src_type, int64_t k, const float * act,
                                    int64_t ne1, int64_t ne2, int64_t ne3, size_t nb1, size_t nb2, size_t nb3,
                                    int32_t ith, int32_t nth, void * work, size_t work_size);

/* Rows [row_begin, row_end) of the multiplication, after ggml_t2p_plugin_act_prepare: w is the
 * repacked matrix (ggml_t2p_plugin_repacked_size bytes), work the prepared work buffer (not
 * written meanwhile); dst as ggml_t2p_gemm (one column: the gemv kernel, dst_col_stride
 * ignored). Rows of different chunks may run on different threads at once. Errors as
 * ggml_t2p_gemm; BUFFER_SIZE for a work buffer too small for the packed activations. */
int32_t ggml_t2p_plugin_mul_mat_rows(const ggml_t2p_plugin * plugin, int32_t src_type, const void * w, int64_t n_rows,
                                     int64_t k, int64_t n_cols, const void * work, size_t work_size, float * dst,
                                     size_t dst_len, int64_t dst_col_stride, int64_t row_begin, int64_t row_end);

/* The hybrid's float ops (Gated-DeltaNet models such as qwen35 / Bonsai 2). */
#define GGML_T2P_OP_SSM_CONV        1 /* srcs: conv_x (d_conv - 1 + T x channels x seqs), conv1d.weight (d_conv x channels) */
#define GGML_T2P_OP_GATED_DELTA_NET 2 /* srcs: q, k (S x H_k x T x seqs'), v (S x H x T x seqs), g, beta (1 x H x T x seqs),
                                       * state (S*S*H x 1 x seqs); dst: S*H*T*seqs outputs, then the new state */
#define GGML_T2P_OP_CONCAT          3 /* srcs: a, b, joined along the one dimension where a.ne + b.ne == dst.ne (the
                                       * conv state and the transposed new tokens); dst dense. A copy: ggml's bits */
#define GGML_T2P_OP_GET_ROWS        4 /* srcs: F32 rows (k x n_rows x ne2 x ne3), I32 ids (n x ne2 x ne3); dst k x n x
                                       * ne2 x ne3: ggml's GET_ROWS of F32 (the recurrent states' gather), the rows cut
                                       * in pieces shared by every thread (ggml gives a row to one). A copy: ggml's bits;
                                       * an id out of range: RANGE (ggml runs it and asserts) */

/* A tensor as ggml describes one: its first byte, ggml type id (F32, 0; GET_ROWS's ids I32, 26), elements
 * per dimension (ggml's ne) and byte strides (ggml's nb). */
typedef struct ggml_t2p_tensor_view {
    void *   data;
    int32_t  type;
    int64_t  ne[4];
    uint64_t nb[4];
} ggml_t2p_tensor_view;

/* Thread ith of nth's share of the hybrid op `op` (GGML_T2P_OP_*) with ggml's sources srcs[0 ..
 * n_srcs) and destination dst, at the plugin's kernel level; call it from each of the op's nth
 * threads (any order; no barrier needed: the shares write disjoint outputs). The numerics are
 * docs/numerics.md section 7: the same bits at every level, thread count and ubatch split
 * (against ggml's own op built with AVX-512: the gated delta rule's arithmetic in its order, CONCAT's
 * copy; the conv's fused multiply-adds, which are ggml's where its compiler fuses them).
 * GGML_T2P_OK: done. GGML_T2P_ERR_UNSUPPORTED: declined, nothing written, let ggml run it
 * (GGML_T2P_HYBRID=0, a type other than F32, a gate per element, more than one state slot, a head
 * size other than 64/128/256, rows that are not contiguous (CONCAT: a destination that is not
 * dense), a destination overlapping a source, a conv wider than 8, an empty tensor). Other errors (nothing written; logged once per op kind): NULL, SHAPE (sources
 * that disagree), RANGE (ith outside [0, nth); GET_ROWS: an id out of range), INVALID_ARGUMENT (an unknown op
 * or wrong n_srcs).
 * Every thread of one op gets the same answer. */
int32_t ggml_t2p_plugin_hybrid_op(const ggml_t2p_plugin * plugin, int32_t op, const ggml_t2p_tensor_view * srcs,
                                  int32_t n_srcs, const ggml_t2p_tensor_view * dst, int32_t ith, int32_t nth);

/* GET_ROWS on the plugin's weights: a token embedding looked up in its repacked copy, so a model
 * whose LM head is its embedding (tied) holds the matrix once, in the plugin's buffer.
 * ggml_t2p_plugin_get_rows_supported: GGML_T2P_OK when the plugin runs GET_ROWS on an n_rows x k
 * matrix of src_type (the shim then accepts the op, and llama.cpp places the embedding in the
 * plugin's buffer type); UNSUPPORTED with GGML_T2P_EMBED=0 or a type it does not take; SHAPE. */
int32_t ggml_t2p_plugin_get_rows_supported(const ggml_t2p_plugin * plugin, int32_t src_type, int64_t n_rows, int64_t k);

/* Thread ith of nth's share of GET_ROWS on an n_rows x k matrix of src_type repacked at w
 * (w_size bytes, ggml_t2p_plugin_repack's output): ids is I32 (ggml type 26), ne = {n_ids, 1, 1,
 * 1}, its stride nb[0] a multiple of 4; dst is F32, ne = {k, n_ids, 1, 1}, nb[0] = 4, rows nb[1]
 * bytes apart (a multiple of 4, >= 4k). Row i of dst = row ids[i] of the matrix as ggml's
 * to_float of src_type gives it, (code - 1) * d per weight with d the block's fp16 scale: the
 * bits of stock GET_ROWS. Thread ith takes ids [ith * q + min(ith, r), ...) of n_ids = q * nth + r
 * (the first r threads one more). Errors, found before this thread writes anything: NULL,
 * BUFFER_SIZE (w below ggml_t2p_plugin_repacked_size), SHAPE (views that disagree), MISALIGNED,
 * RANGE (ith outside [0, nth), or an id of this thread's share outside [0, n_rows): stock asserts
 * there), INVALID_ARGUMENT (another type, dst overlapping w or ids), UNSUPPORTED as
 * ggml_t2p_plugin_get_rows_supported. */
int32_t ggml_t2p_plugin_get_rows(const ggml_t2p_plugin * plugin, int32_t src_type, const void * w, size_t w_size,
                                 int64_t n_rows, int64_t k, const ggml_t2p_tensor_view * ids,
                                 const ggml_t2p_tensor_view * dst, int32_t ith, int32_t nth);

/* What ggml_t2p_release_source did (*out_why). */
#define GGML_T2P_RELEASE_DONE        0 /* the interior's pages were unmapped from this process (*out_bytes > 0) */
#define GGML_T2P_RELEASE_TOO_SMALL   1 /* no whole page inside the range (or data NULL): nothing to do */
#define GGML_T2P_RELEASE_NOT_SHARED  2 /* part of it is not a read-only shared file mapping (anonymous,
                                        * private, writable, or not mapped): kept */
#define GGML_T2P_RELEASE_NO_MAPS     3 /* /proc/self/maps could not be read (*out_error: errno): kept */
#define GGML_T2P_RELEASE_REFUSED     4 /* madvise failed (*out_error: errno; EINVAL: locked, hugetlb or PFN
                                        * pages): kept */
#define GGML_T2P_RELEASE_UNSUPPORTED 5 /* not Linux: nothing is done */

/* Drops from this process's resident set the whole pages inside [data, data + size) when, and only
 * when, every one lies in a mapping that /proc/self/maps lists as shared, not writable and
 * file-backed (llama.cpp's mmap of a model): madvise(MADV_DONTNEED) then only removes page-table
 * entries, and a later read faults the same bytes back in from the page cache or the file. The
 * partial pages at either end, anonymous memory, private or writable mappings and ranges with a
 * gap are never touched. Linux (Android included) only: elsewhere UNSUPPORTED (macOS's madvise is
 * a hint there and has no maps to check; a Windows file view has no documented call for it). The
 * range must stay mapped and unchanged during the call. Writes *out_why (GGML_T2P_RELEASE_*),
 * *out_bytes (bytes dropped, whole pages from data rounded up to a page; 0 unless DONE) and
 * *out_error (errno for NO_MAPS and REFUSED, else 0). After a release (DONE) the range gets a
 * mapping of its own (madvise(MADV_NOHUGEPAGE) on exactly it splits the host's mapping; the
 * neighbours' pages in the 2 MiB regions at its ends are unmapped and refault when read), so a
 * kernel that maps a file's large folios whole does not map the released pages back on a read
 * next door; nothing of this on REFUSED. Cost: one read of /proc/self/maps and two madvise calls.
 * GGML_T2P_OK; ERR_NULL for a NULL out pointer. */
int32_t ggml_t2p_release_source(const void * data, size_t size, int32_t * out_why, size_t * out_bytes, int32_t * out_error);

#ifdef __cplusplus
}
#endif

#endif /* GGML_T2P_H */
