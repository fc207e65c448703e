/*
 * A C program against include/ggml_t2p.h (ABI 5) and libggml_t2p.a: repacks a PQ2_0 matrix into
 * every layout, packs activations (whole columns, and one column in pieces the way ggml threads
 * do), runs gemv and gemm on every kernel level the CPU has for that layout, checks the bits
 * against its own C rendering of the reference formula (sumf = fmaf(d * yd, (float) isum, sumf)),
 * and checks the error codes. Then the ggml plugin (ggml_t2p_plugin_*) with a host of callbacks:
 * the settings and their log lines, the repack, a multiplication through the plan on 1 to 3
 * "threads" (run one after the other) against the same formula, the load line. Exit status 0
 * when every check passed (and the same output natively and under Wine).
 *
 * Which levels the CPU has is found here, independently of the library (cpuid and xgetbv on
 * x86-64, the kernel's HWCAPs on aarch64 Linux): every level the CPU has must be accepted and run
 * on its layout, every level it lacks must be refused (the decline path), and the library's own
 * choice must be one the CPU has (none only on a CPU without a SIMD level).
 */
#include "ggml_t2p.h"
#include "smoke_ref.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define K      384 /* 3 x 128: also exercises the zero-padded half Q8_K block */
#define NROWS  20 /* X16: one full 16-row tile and a padded one */
#define NCOLS  3
#define NB     (K / 128)
#define NQ     ((K + 255) / 256)

/* cpu_has[kernel id]: 1 the CPU runs that level, 0 it does not, -1 this program cannot tell here
 * (amx: the CPU and XCR0 offer it, the Linux tile-data permission is the library's to ask) */
static int cpu_has[8] = { -1, 1, -1, -1, -1, -1, -1, -1 };
static const char * cpu_source = "unknown on this platform: levels not checked against the CPU";

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
static void detect_cpu(void) {
    unsigned a, b, c, d, b7 = 0, c7 = 0, d7 = 0, a71 = 0;
    unsigned long long xcr0 = 0;
    __cpuid(0, a, b, c, d);
    const unsigned max_leaf = a;
    __cpuid(1, a, b, c, d);
    const int fma = (c >> 12) & 1, osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, f16c = (c >> 29) & 1;
    if (osxsave) {
        unsigned lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        xcr0 = ((unsigned long long) hi << 32) | lo;
    }
    if (max_leaf >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        b7 = b;
        c7 = c;
        d7 = d;
        if (a >= 1) {
            __cpuid_count(7, 1, a, b, c, d);
            a71 = a;
        }
    }
    const int ymm = (xcr0 & 0x6) == 0x6, zmm = (xcr0 & 0xe6) == 0xe6; /* OS saves ymm / zmm state */
    const int avx2 = avx && ymm && fma && f16c && ((b7 >> 5) & 1);
    cpu_has[GGML_T2P_KERNEL_DOTPROD] = cpu_has[GGML_T2P_KERNEL_I8MM] = 0;
    cpu_has[GGML_T2P_KERNEL_AVX2]    = avx2;
    cpu_has[GGML_T2P_KERNEL_AVXVNNI] = avx2 && ((a71 >> 4) & 1);
    cpu_has[GGML_T2P_KERNEL_AVX512VNNI] =
        avx2 && zmm && ((b7 >> 16) & 1) && ((b7 >> 30) & 1) && ((b7 >> 31) & 1) && ((c7 >> 11) & 1);
    /* AMX-TILE (7.0 edx 24) and AMX-INT8 (25) with XCR0's tile bits (17, 18) */
    const int tiles = ((d7 >> 24) & 1) && ((d7 >> 25) & 1) && (xcr0 & 0x60000) == 0x60000;
    cpu_has[GGML_T2P_KERNEL_AMX] = cpu_has[GGML_T2P_KERNEL_AVX512VNNI] && tiles ? -1 : 0;
    cpu_source = "cpuid + xgetbv";
}
#elif defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
static void detect_cpu(void) {
    const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    const int asimd = (hw >> 1) & 1, dp = (hw >> 20) & 1, i8mm = (hw2 >> 13) & 1; /* HWCAP_ASIMD(DP), HWCAP2_I8MM */
    cpu_has[GGML_T2P_KERNEL_AVX2] = cpu_has[GGML_T2P_KERNEL_AVXVNNI] = cpu_has[GGML_T2P_KERNEL_AVX512VNNI] = 0;
    cpu_has[GGML_T2P_KERNEL_AMX] = 0;
    cpu_has[GGML_T2P_KERNEL_DOTPROD] = asimd && dp;
    cpu_has[GGML_T2P_KERNEL_I8MM]    = asimd && dp && i8mm;
    cpu_source = "AT_HWCAP/AT_HWCAP2";
}
#else
static void detect_cpu(void) {}
#endif

/* the layout a kernel level runs PQ2_0 weights on (the reference level: every layout) */
static int level_runs(int level, int layout) {
    if (level == GGML_T2P_KERNEL_DOTPROD || level == GGML_T2P_KERNEL_I8MM) return layout == GGML_T2P_LAYOUT_T2P;
    if (level >= GGML_T2P_KERNEL_AVX2) return layout == GGML_T2P_LAYOUT_X16;
    return 1;
}

/* ---- The ggml plugin (ggml_t2p_plugin_*): a host of callbacks, as the shim is one ---- */

static const char * host_env[8][2]; /* name, value; a NULL name ends the list */
static const char * env_get(const char * name) {
    for (int i = 0; i < 8 && host_env[i][0] != NULL; i++)
        if (strcmp(host_env[i][0], name) == 0) return host_env[i][1];
    return NULL;
}
static int32_t host_types(int32_t id, int64_t * weights, size_t * bytes, const char ** name) {
    if (id != GGML_T2P_TYPE_PQ2_0 && id != GGML_T2P_TYPE_PTQ1_0) return 0;
    *weights = 128;
    *bytes   = id == GGML_T2P_TYPE_PQ2_0 ? 34 : 28;
    *name    = id == GGML_T2P_TYPE_PQ2_0 ? "pq2_0" : "ptq1_0";
    return 1;
}
static int host_q8k_values; /* values the host's quantizer was given */
static void host_q8k(const float * x, void * y, int64_t n) { /* a host whose rounding is UNFUSED */
    host_q8k_values += (int) n;
    ggml_t2p_quantize_q8_k(GGML_T2P_KERNEL_REF, GGML_T2P_ROUND_UNFUSED, x, n, y, (size_t) (n / 256) * sizeof(q8_k_block));
}
static char host_log[2048];
static int  host_warns;
static void host_log_line(int32_t level, const char * line, void * user) {
    strncat(host_log, line, sizeof host_log - strlen(host_log) - 1);
    host_warns += level == GGML_T2P_LOG_WARN;
    ++*(int *) user;
}
/* A plugin for the environment `env` (name, value pairs, then NULL); its status in *st. */
static ggml_t2p_plugin * make_plugin(const char * const * env, int32_t * st, int * n_lines) {
    int i = 0;
    for (; env[2 * i] != NULL; i++) {
        host_env[i][0] = env[2 * i];
        host_env[i][1] = env[2 * i + 1];
    }
    host_env[i][0] = NULL;
    host_log[0] = '\0';
    host_warns = host_q8k_values = *n_lines = 0;
    ggml_t2p_plugin * p = (ggml_t2p_plugin *) 1;
    *st = ggml_t2p_plugin_new(env_get, host_types, host_q8k, host_log_line, n_lines, &p);
    return p;
}

/* A dense F32 view of ggml's shape ne (4 dims). */
static ggml_t2p_tensor_view f32_view(float * data, int64_t n0, int64_t n1, int64_t n2) {
    ggml_t2p_tensor_view v = { data, 0, { n0, n1, n2, 1 }, { 4, 4 * (uint64_t) n0, 4 * (uint64_t) (n0 * n1), 4 * (uint64_t) (n0 * n1 * n2) } };
    return v;
}

/* The hybrid's short conv through the plugin, 3 threads: small integers, so every product and sum
 * is exact and the C formula needs no FMA of its own; then what is declined or malformed. */
static void hybrid_checks(const ggml_t2p_plugin * p) {
    enum { NC = 4, CH = 21, T = 5 };
    static float x[CH][NC - 1 + T], w[CH][NC], y[T][CH];
    for (int c = 0; c < CH; ++c) {
        for (int t = 0; t < NC - 1 + T; ++t) x[c][t] = (float) ((c * 7 + t * 3) % 11 - 5);
        for (int i = 0; i < NC; ++i) w[c][i] = (float) ((c + i * 5) % 7 - 3);
    }
    ggml_t2p_tensor_view srcs[2] = { f32_view(&x[0][0], NC - 1 + T, CH, 1), f32_view(&w[0][0], NC, CH, 1) };
    ggml_t2p_tensor_view dst     = f32_view(&y[0][0], CH, T, 1);
    int ok = 1;
    for (int ith = 0; ith < 3; ++ith) ok &= ggml_t2p_plugin_hybrid_op(p, GGML_T2P_OP_SSM_CONV, srcs, 2, &dst, ith, 3) == GGML_T2P_OK;
    for (int t = 0; t < T; ++t) {
        for (int c = 0; c < CH; ++c) {
            float s = 0.0f;
            for (int i = 0; i < NC; ++i) s += x[c][t + i] * w[c][i];
            ok &= y[t][c] == s;
        }
    }
    CHECK(ok, "hybrid: SSM_CONV through the plugin, 3 threads");

    /* CONCAT as the conv input is built: the kept state (NC - 1 x CH) then the new tokens, a
     * transposed view of y (T x CH: element stride CH floats), into (NC - 1 + T) x CH */
    static float state[CH][NC - 1], cat[CH][NC - 1 + T];
    for (int c = 0; c < CH; ++c)
        for (int i = 0; i < NC - 1; ++i) state[c][i] = (float) (c * 10 + i);
    ggml_t2p_tensor_view cat_srcs[2] = { f32_view(&state[0][0], NC - 1, CH, 1), f32_view(&y[0][0], T, CH, 1) };
    cat_srcs[1].nb[0] = 4 * CH; /* ggml_transpose */
    cat_srcs[1].nb[1] = 4;
    ggml_t2p_tensor_view cat_dst = f32_view(&cat[0][0], NC - 1 + T, CH, 1);
    ok = 1;
    for (int ith = 2; ith >= 0; --ith) ok &= ggml_t2p_plugin_hybrid_op(p, GGML_T2P_OP_CONCAT, cat_srcs, 2, &cat_dst, ith, 3) == GGML_T2P_OK;
    for (int c = 0; c < CH; ++c)
        for (int i = 0; i < NC - 1 + T; ++i) ok &= cat[c][i] == (i < NC - 1 ? state[c][i] : y[i - (NC - 1)][c]);
    CHECK(ok, "hybrid: CONCAT of the conv state and transposed tokens through the plugin, 3 threads");
    cat_dst.ne[0] += 1;
    CHECK(ggml_t2p_plugin_hybrid_op(p, GGML_T2P_OP_CONCAT, cat_srcs, 2, &cat_dst, 0, 1) == GGML_T2P_ERR_SHAPE, "hybrid: CONCAT sizes that do not add up");

    /* GET_ROWS of F32 rows (a recurrent state's gather): rows 2 and 0 of cat, 3 threads */
    static int32_t rid[2] = { 2, 0 };
    static float got[2][NC - 1 + T];
    ggml_t2p_tensor_view gr_srcs[2] = { f32_view(&cat[0][0], NC - 1 + T, CH, 1), f32_view((float *) rid, 2, 1, 1) };
    gr_srcs[1].type = 26; /* I32 */
    ggml_t2p_tensor_view gr_dst = f32_view(&got[0][0], NC - 1 + T, 2, 1);
    ok = 1;
    for (int ith = 2; ith >= 0; --ith) ok &= ggml_t2p_plugin_hybrid_op(p, GGML_T2P_OP_GET_ROWS, gr_srcs, 2, &gr_dst, ith, 3) == GGML_T2P_OK;
    for (int i = 0; i < NC - 1 + T; ++i) ok &= got[0][i] == cat[2][i] && got[1][i] == cat[0][i];
    CHECK(ok, "hybrid: F32 GET_ROWS through the plugin, 3 threads");
    rid[1] = CH;
    got[0][0] = 1234.0f;
    CHECK(ggml_t2p_plugin_hybrid_op(p, GGML_T2P_OP_GET_ROWS, gr_srcs, 2, &gr_dst, 0, 1) == GGML_T2P_ERR_RANGE && got[0][0] == 1234.0f,
          "hybrid: GET_ROWS id out of range refused, nothing written");
    y[0][0] = 1234.0f;
    ggml_t2p_tensor_view f16 = dst;
    f16.type = 1;
    CHECK(ggml_t2p_plugin_hybrid_op(p, GGML_T2P_OP_SSM_CONV, srcs, 2, &f16, 0, 1) == GGML_T2P_ERR_UNSUPPORTED && y[0][0] == 1234.0f, "hybrid: F16 declined, nothing written");
    CHECK(ggml_t2p_plugin_hybrid_op(p, GGML_T2P_OP_GATED_DELTA_NET, srcs, 2, &dst, 0, 1) == GGML_T2P_ERR_INVALID_ARGUMENT, "hybrid: wrong source count");
    CHECK(ggml_t2p_plugin_hybrid_op(p, GGML_T2P_OP_SSM_CONV, srcs, 2, &dst, 1, 1) == GGML_T2P_ERR_RANGE, "hybrid: ith >= nth");
    CHECK(ggml_t2p_plugin_hybrid_op(p, GGML_T2P_OP_SSM_CONV, NULL, 2, &dst, 0, 1) == GGML_T2P_ERR_NULL, "hybrid: NULL sources");
    CHECK(ggml_t2p_plugin_hybrid_op(NULL, GGML_T2P_OP_SSM_CONV, srcs, 2, &dst, 0, 1) == GGML_T2P_ERR_NULL, "hybrid: NULL plugin");
}

static void plugin_checks(const pq2_0_block * w) {
    enum { PK = K, PN = NROWS, PC = 5 };
    int32_t st;
    int     lines;
    char    want[256];

    const char * off[] = { "GGML_T2P", "off", NULL };
    CHECK(make_plugin(off, &st, &lines) == NULL && st == GGML_T2P_ERR_UNSUPPORTED, "plugin: GGML_T2P=off");
    CHECK(strcmp(host_log, "ggml-t2p: disabled (GGML_T2P=off)\n") == 0 && host_warns == 0, "plugin: disabled line '%s'", host_log);
    const char * ref_env[] = { "GGML_T2P_KERNEL", "ref", "GGML_T2P_PTQ1", "fast", NULL };
    ggml_t2p_plugin * p = make_plugin(ref_env, &st, &lines);
    CHECK(st == GGML_T2P_OK && p != NULL && lines == 2 && host_warns == 1, "plugin: ref: %d, %d lines", st, lines);
    /* the default: native where the level keeps PTQ1_0 at 1.75 bits on x86 (L64), else t2p */
    CHECK(strstr(host_log, "ggml-t2p: unknown GGML_T2P_PTQ1=fast (expected t2p or native), using ") == host_log &&
          (strstr(host_log, "using t2p\n") != NULL) == (strstr(host_log, "PTQ1_0 -> L64") == NULL), "plugin: warning first: '%s'", host_log);
    int32_t lay = -1, native = -1;
    CHECK(ggml_t2p_layout_for(GGML_T2P_TYPE_PQ2_0, GGML_T2P_KERNEL_REF, 0, &native) == GGML_T2P_OK, "layout for ref");
    snprintf(want, sizeof want, "ggml-t2p: enabled (libggml_t2p %s, kernel ref; PQ2_0 -> %s, PTQ1_0 -> ", ggml_t2p_version(), ggml_t2p_layout_name(native));
    CHECK(strstr(host_log, want) != NULL && strstr(host_log, "; Q8_K by libggml_t2p, unfused rounding as the host's; GATED_DELTA_NET, SSM_CONV, CONCAT and F32 GET_ROWS on; GET_ROWS on ternary weights on)\n") != NULL,
          "plugin: enabled line '%s'", host_log);
    CHECK(host_q8k_values == GGML_T2P_Q8K_PROBE_VALUES, "plugin: the probe ran the host's quantizer once (%d values)", host_q8k_values);
    CHECK(ggml_t2p_plugin_layout(p, GGML_T2P_TYPE_PQ2_0, &lay) == GGML_T2P_OK && lay == native, "plugin layout %d", lay);
    CHECK(ggml_t2p_plugin_layout(p, 0, &lay) == GGML_T2P_ERR_UNSUPPORTED, "plugin layout of F32");
    CHECK(ggml_t2p_plugin_layout(NULL, GGML_T2P_TYPE_PQ2_0, &lay) == GGML_T2P_ERR_NULL, "plugin layout NULL");
    CHECK(ggml_t2p_plugin_supports(p, GGML_T2P_TYPE_PQ2_0, PN, PK) == GGML_T2P_OK, "plugin supports");
    CHECK(ggml_t2p_plugin_supports(p, GGML_T2P_TYPE_PQ2_0, PN, 200) == GGML_T2P_ERR_SHAPE, "plugin supports k = 200");
    CHECK(ggml_t2p_plugin_supports(p, 2, PN, PK) == GGML_T2P_ERR_UNSUPPORTED, "plugin supports Q4_0");

    /* the repack: the library's own bytes, counted once per tensor */
    size_t size = 0, size0 = 0;
    CHECK(ggml_t2p_plugin_repacked_size(p, GGML_T2P_TYPE_PQ2_0, PN, PK, &size) == GGML_T2P_OK, "plugin repacked size");
    CHECK(ggml_t2p_repacked_size(GGML_T2P_TYPE_PQ2_0, native, PN, PK, &size0) == GGML_T2P_OK && size == size0, "plugin size %zu", size);
    unsigned char * r0 = (unsigned char *) malloc(size), * r1 = (unsigned char *) malloc(size + 1);
    CHECK(ggml_t2p_repack(GGML_T2P_TYPE_PQ2_0, native, w, PN * NB * 34, PN, PK, r0, size) == GGML_T2P_OK, "repack");
    r1[size] = 0xA5;
    CHECK(ggml_t2p_plugin_repack(p, GGML_T2P_TYPE_PQ2_0, w, PN * NB * 34, PN, PK, r1, size + 1) == GGML_T2P_OK, "plugin repack");
    CHECK(memcmp(r0, r1, size) == 0 && r1[size] == 0xA5, "plugin repack: not the repack's bytes");
    CHECK(ggml_t2p_plugin_repack(p, GGML_T2P_TYPE_PQ2_0, w, PN * NB * 34, PN, PK, r1, size - 1) == GGML_T2P_ERR_BUFFER_SIZE, "plugin repack short dst");
    /* and back: the source bytes (a host's get_tensor of a repacked weight) */
    unsigned char * back = (unsigned char *) malloc(PN * NB * 34 + 1);
    back[PN * NB * 34] = 0x5A;
    CHECK(ggml_t2p_plugin_unpack(p, GGML_T2P_TYPE_PQ2_0, r0, size, PN, PK, back, PN * NB * 34 + 1) == GGML_T2P_OK, "plugin unpack");
    CHECK(memcmp(back, w, PN * NB * 34) == 0 && back[PN * NB * 34] == 0x5A, "plugin unpack: not the source bytes");
    CHECK(ggml_t2p_plugin_unpack(p, GGML_T2P_TYPE_PQ2_0, r0, size, PN, PK, back, PN * NB * 34 - 1) == GGML_T2P_ERR_BUFFER_SIZE, "plugin unpack short dst");
    CHECK(ggml_t2p_plugin_unpack(p, GGML_T2P_TYPE_PQ2_0, r0, size, PN, PK, NULL, PN * NB * 34) == GGML_T2P_ERR_NULL, "plugin unpack NULL dst");
    CHECK(ggml_t2p_plugin_unpack(NULL, GGML_T2P_TYPE_PQ2_0, r0, size, PN, PK, back, PN * NB * 34) == GGML_T2P_ERR_NULL, "plugin unpack NULL plugin");
    free(back);
    CHECK(ggml_t2p_plugin_new_buffer(p, NULL, 0) == GGML_T2P_OK && ggml_t2p_plugin_new_buffer(p, r1, size) == GGML_T2P_OK, "new buffer");

    /* the multiplication through the plan, as ggml's threads run it: 1 and PC columns, 1 to 3 threads */
    static float      x[PC][PK + 3];
    static q8_k_block xq[PC][2];
    static float      padded[512];
    for (int c = 0; c < PC; c++) {
        for (int j = 0; j < PK; j++) x[c][j] = (float) ((int) (rnd() % 20001) - 10000) * 3.1e-4f;
        memset(padded, 0, sizeof padded);
        memcpy(padded, x[c], PK * sizeof(float));
        CHECK(ggml_t2p_quantize_q8_k(GGML_T2P_KERNEL_REF, GGML_T2P_ROUND_UNFUSED, padded, 512, xq[c], sizeof xq[c]) == GGML_T2P_OK, "quantize column");
    }
    for (int nc = 1; nc <= PC; nc += PC - 1) {
        for (int nth = 1; nth <= 3; nth++) {
            size_t  work_size = 0;
            int64_t n_chunks = 0, chunk_rows = 0;
            st = ggml_t2p_plugin_mul_mat_plan(p, GGML_T2P_TYPE_PQ2_0, PN, PK, nc, nth, 0, &work_size, &n_chunks, &chunk_rows);
            CHECK(st == GGML_T2P_OK && n_chunks >= 1 && chunk_rows % (native == GGML_T2P_LAYOUT_X16 ? 16 : 4) == 0 &&
                  n_chunks * chunk_rows >= PN && (n_chunks - 1) * chunk_rows < PN, "plan: %d, %lld chunks of %lld rows", st,
                  (long long) n_chunks, (long long) chunk_rows);
            char * work = (char *) malloc(work_size + 1);
            for (int ith = nth - 1; ith >= 0; ith--) {   /* any order: each thread writes its own part */
                st = ggml_t2p_plugin_act_prepare(p, GGML_T2P_TYPE_PQ2_0, PK, &x[0][0], nc, 1, 1, sizeof x[0], sizeof x[0] * nc,
                                                 sizeof x[0] * nc, ith, nth, work + 1, work_size);
                CHECK(st == GGML_T2P_OK, "act prepare %d/%d: %s", ith, nth, ggml_t2p_status_string(st));
            }
            float y[PC][PN + 1];
            for (int c = 0; c < PC; c++) for (int r = 0; r <= PN; r++) y[c][r] = -1.0f;
            for (int64_t ch = n_chunks - 1; ch >= 0; ch--) {
                const int64_t a = ch * chunk_rows, b = a + chunk_rows < PN ? a + chunk_rows : PN;
                st = ggml_t2p_plugin_mul_mat_rows(p, GGML_T2P_TYPE_PQ2_0, r1, PN, PK, nc, work + 1, work_size, &y[0][0],
                                                  (size_t) nc * (PN + 1), PN + 1, a, b);
                CHECK(st == GGML_T2P_OK, "mul_mat_rows %lld..%lld: %s", (long long) a, (long long) b, ggml_t2p_status_string(st));
            }
            for (int c = 0; c < nc; c++) {
                for (int r = 0; r < PN; r++) {
                    const float ref = reference_dot(&w[r * NB], xq[c], NB);
                    CHECK(memcmp(&y[c][r], &ref, 4) == 0, "plugin mul_mat %d cols, %d threads: col %d row %d: %a vs %a", nc, nth, c, r, y[c][r], ref);
                }
                CHECK(y[c][PN] == -1.0f, "plugin mul_mat wrote the gap between columns");
            }
            CHECK(ggml_t2p_plugin_act_prepare(p, GGML_T2P_TYPE_PQ2_0, PK, &x[0][0], nc, 1, 1, sizeof x[0], sizeof x[0] * nc,
                                              sizeof x[0] * nc, nth, nth, work + 1, work_size) == GGML_T2P_ERR_INVALID_ARGUMENT, "act prepare ith = nth");
            CHECK(ggml_t2p_plugin_act_prepare(p, GGML_T2P_TYPE_PQ2_0, PK, &x[0][0], nc, 1, 1, sizeof x[0], sizeof x[0] * nc,
                                              sizeof x[0] * nc, 0, nth, work + 1, work_size - 1) == GGML_T2P_ERR_BUFFER_SIZE, "act prepare short work");
            free(work);
        }
    }
    CHECK(ggml_t2p_plugin_mul_mat_plan(p, GGML_T2P_TYPE_PQ2_0, PN, PK, 1, 0, 0, NULL, NULL, NULL) == GGML_T2P_ERR_INVALID_ARGUMENT, "plan for 0 threads");
    CHECK(host_q8k_values == 0 + GGML_T2P_Q8K_PROBE_VALUES, "the library's quantizer ran, not the host's");

    /* GET_ROWS on the repacked matrix (a token embedding): ggml's to_float of the source rows, bit for bit */
    {
        int32_t ids[4] = { PN - 1, 0, 3, 3 };
        float   rows[4][PK + 2];
        for (int i = 0; i < 4; i++) for (int j = 0; j < PK + 2; j++) rows[i][j] = -2.0f;
        ggml_t2p_tensor_view iv = { ids, 26, { 4, 1, 1, 1 }, { 4, 16, 16, 16 } };
        ggml_t2p_tensor_view dv = { rows, 0, { PK, 4, 1, 1 }, { 4, sizeof rows[0], sizeof rows, sizeof rows } };
        CHECK(ggml_t2p_plugin_get_rows_supported(p, GGML_T2P_TYPE_PQ2_0, PN, PK) == GGML_T2P_OK, "get_rows supported");
        CHECK(ggml_t2p_plugin_get_rows_supported(p, GGML_T2P_TYPE_PQ2_0, PN, 200) == GGML_T2P_ERR_SHAPE, "get_rows k = 200");
        CHECK(ggml_t2p_plugin_get_rows_supported(p, 2, PN, PK) == GGML_T2P_ERR_UNSUPPORTED, "get_rows of Q4_0");
        for (int ith = 2; ith >= 0; --ith) {
            st = ggml_t2p_plugin_get_rows(p, GGML_T2P_TYPE_PQ2_0, r1, size, PN, PK, &iv, &dv, ith, 3);
            CHECK(st == GGML_T2P_OK, "get_rows %d/3: %s", ith, ggml_t2p_status_string(st));
        }
        for (int i = 0; i < 4; i++) {
            for (int j = 0; j < PK; j++) {
                const pq2_0_block * b = &w[ids[i] * NB + j / 128];
                const float want = (float) (((b->qs[(j % 128) / 4] >> (2 * (j % 4))) & 3) - 1) * half_to_float(b->d);
                CHECK(memcmp(&rows[i][j], &want, 4) == 0, "get_rows row %d (id %d) weight %d: %a vs %a", i, ids[i], j, rows[i][j], want);
            }
            CHECK(rows[i][PK] == -2.0f && rows[i][PK + 1] == -2.0f, "get_rows wrote past a row");
        }
        ids[2] = PN;
        rows[2][0] = -2.0f;
        CHECK(ggml_t2p_plugin_get_rows(p, GGML_T2P_TYPE_PQ2_0, r1, size, PN, PK, &iv, &dv, 0, 1) == GGML_T2P_ERR_RANGE && rows[2][0] == -2.0f,
              "get_rows: an id past the rows, nothing written");
        ids[2] = 3;
        CHECK(ggml_t2p_plugin_get_rows(p, GGML_T2P_TYPE_PQ2_0, r1, size - 1, PN, PK, &iv, &dv, 0, 1) == GGML_T2P_ERR_BUFFER_SIZE, "get_rows: short weights");
        CHECK(ggml_t2p_plugin_get_rows(p, GGML_T2P_TYPE_PQ2_0, r1, size, PN, PK, NULL, &dv, 0, 1) == GGML_T2P_ERR_NULL, "get_rows: NULL ids");
        CHECK(ggml_t2p_plugin_get_rows(NULL, GGML_T2P_TYPE_PQ2_0, r1, size, PN, PK, &iv, &dv, 0, 1) == GGML_T2P_ERR_NULL, "get_rows: NULL plugin");
        dv.ne[1] = 3;
        CHECK(ggml_t2p_plugin_get_rows(p, GGML_T2P_TYPE_PQ2_0, r1, size, PN, PK, &iv, &dv, 0, 1) == GGML_T2P_ERR_SHAPE, "get_rows: 4 ids, 3 rows");
        dv.ne[1] = 4;
        CHECK(ggml_t2p_plugin_get_rows(p, GGML_T2P_TYPE_PQ2_0, r1, size, PN, PK, &iv, &dv, 3, 3) == GGML_T2P_ERR_RANGE, "get_rows: ith = nth");
        const char * no_embed[] = { "GGML_T2P_KERNEL", "ref", "GGML_T2P_EMBED", "0", NULL };
        int32_t st2 = 0, lines2 = 0;
        ggml_t2p_plugin * q = make_plugin(no_embed, &st2, &lines2);
        CHECK(st2 == GGML_T2P_OK && strstr(host_log, "; GET_ROWS on ternary weights off (GGML_T2P_EMBED=0))\n") != NULL, "plugin: EMBED=0 '%s'", host_log);
        CHECK(ggml_t2p_plugin_get_rows_supported(q, GGML_T2P_TYPE_PQ2_0, PN, PK) == GGML_T2P_ERR_UNSUPPORTED &&
              ggml_t2p_plugin_get_rows(q, GGML_T2P_TYPE_PQ2_0, r1, size, PN, PK, &iv, &dv, 0, 1) == GGML_T2P_ERR_UNSUPPORTED,
              "get_rows with GGML_T2P_EMBED=0");
        ggml_t2p_plugin_free(q);
    }

    /* the load line: once */
    lines = 0;
    host_log[0] = '\0';
    CHECK(ggml_t2p_plugin_report(p) == GGML_T2P_OK && ggml_t2p_plugin_report(p) == GGML_T2P_OK && lines == 1, "report once: %d lines", lines);
    snprintf(want, sizeof want, "ggml-t2p: 1 tensor repacked (1 PQ2_0 -> %s; 0.0 MiB) in ", ggml_t2p_layout_name(native));
    CHECK(strstr(host_log, want) == host_log, "load line '%s'", host_log);
#if defined(__linux__)
    CHECK(strstr(host_log, "; kernel ref; released 0.0 MiB of file-mapped source (0 tensors) in ") != NULL, "load line '%s'", host_log);
#else
    CHECK(strstr(host_log, "; kernel ref; source pages kept (not supported on this OS)\n") != NULL, "load line '%s'", host_log);
#endif
    ggml_t2p_plugin_free(p);

    /* the host's quantizer on request; a host quantizer of its own; bad arguments */
    const char * ggml_q[] = { "GGML_T2P_KERNEL", "ref", "GGML_T2P_QUANTIZE", "ggml", "GGML_T2P_RELEASE_SOURCE", "no", NULL };
    p = make_plugin(ggml_q, &st, &lines);
    CHECK(st == GGML_T2P_OK && strstr(host_log, "; Q8_K by ggml (GGML_T2P_QUANTIZE=ggml); GATED_DELTA_NET, SSM_CONV, CONCAT and F32 GET_ROWS on; GET_ROWS on ternary weights on)\n") != NULL && host_q8k_values == 0,
          "plugin: QUANTIZE=ggml '%s'", host_log);
    {
        static char work[1 << 16];
        size_t      work_size = 0;
        CHECK(ggml_t2p_plugin_mul_mat_plan(p, GGML_T2P_TYPE_PQ2_0, PN, PK, 1, 1, 0, &work_size, NULL, NULL) == GGML_T2P_OK && work_size <= sizeof work, "plan");
        CHECK(ggml_t2p_plugin_act_prepare(p, GGML_T2P_TYPE_PQ2_0, PK, &x[0][0], 1, 1, 1, 0, 0, 0, 0, 1, work, sizeof work) == GGML_T2P_OK &&
              host_q8k_values == 512, "plugin: QUANTIZE=ggml runs the host's quantizer (%d values)", host_q8k_values);
        CHECK(ggml_t2p_plugin_mul_mat_rows(p, GGML_T2P_TYPE_PQ2_0, r1, PN, PK, 1, work, 16, (float *) work, 1, 1, 0, PN) == GGML_T2P_ERR_BUFFER_SIZE, "mul_mat_rows short work");
    }
    CHECK(ggml_t2p_plugin_repack(p, GGML_T2P_TYPE_PQ2_0, w, PN * NB * 34, PN, PK, r1, size) == GGML_T2P_OK && ggml_t2p_plugin_report(p) == GGML_T2P_OK &&
          strstr(host_log, "; kernel ref; source pages kept (GGML_T2P_RELEASE_SOURCE=0)\n") != NULL, "plugin: release off '%s'", host_log);
    hybrid_checks(p);
    ggml_t2p_plugin_free(p);
    ggml_t2p_plugin_free(NULL);
    CHECK(ggml_t2p_plugin_new(NULL, host_types, host_q8k, NULL, NULL, &p) == GGML_T2P_ERR_NULL, "plugin new: NULL env");
    CHECK(ggml_t2p_plugin_new(env_get, host_types, host_q8k, NULL, NULL, NULL) == GGML_T2P_ERR_NULL, "plugin new: NULL out");
    CHECK(ggml_t2p_plugin_report(NULL) == GGML_T2P_ERR_NULL, "report NULL");

    /* the release of a source's pages: anonymous memory is kept (Linux), nothing is done elsewhere */
    int32_t why = -1, err = -1;
    size_t  dropped = 1;
    unsigned char * heap = (unsigned char *) malloc(1 << 20);
    memset(heap, 7, 1 << 20);
    CHECK(ggml_t2p_release_source(heap, 1 << 20, &why, &dropped, &err) == GGML_T2P_OK && dropped == 0 && err == 0 && heap[12345] == 7,
          "release of malloc'ed memory");
#if defined(__linux__)
    CHECK(why == GGML_T2P_RELEASE_NOT_SHARED, "release: %d", why);
#else
    CHECK(why == GGML_T2P_RELEASE_UNSUPPORTED, "release: %d", why);
#endif
    CHECK(ggml_t2p_release_source(heap, 1 << 20, NULL, &dropped, &err) == GGML_T2P_ERR_NULL, "release NULL out");
    free(heap);
    free(r0);
    free(r1);
}

int main(void) {
    static pq2_0_block w[NROWS * NB];
    static q8_k_block act[NCOLS * NQ];
    _Static_assert(sizeof(pq2_0_block) == 34, "pq2_0 block");
    _Static_assert(sizeof(q8_k_block) == 292, "q8_k block");

    detect_cpu();
    int32_t best = ggml_t2p_best_kernel();
    printf("ggml-t2p %s, abi %u (header %d), cpu features 0x%x, best kernel %s\n", ggml_t2p_version(),
           ggml_t2p_abi_version(), GGML_T2P_ABI_VERSION, ggml_t2p_cpu_features(),
           best ? ggml_t2p_kernel_name(best) : "none (callers decline)");
    CHECK(ggml_t2p_abi_version() == GGML_T2P_ABI_VERSION, "abi version");
    int any_simd = 0, known = cpu_has[GGML_T2P_KERNEL_AVX2] >= 0;
    printf("this CPU (%s) must run:", cpu_source);
    for (int lv = GGML_T2P_KERNEL_REF; lv <= GGML_T2P_KERNEL_AVX512VNNI; lv++) {
        if (cpu_has[lv] == 1) printf(" %s", ggml_t2p_kernel_name(lv));
        any_simd |= lv != GGML_T2P_KERNEL_REF && cpu_has[lv] == 1;
    }
    printf("%s\n", known ? "" : " (and what the library finds)");
    if (known) {
        /* amx where the CPU offers it (the OS's permission decides between it and avx512vnni) */
        const int best_ok = best == GGML_T2P_KERNEL_AMX ? cpu_has[best] != 0
                            : best > 0 && best < GGML_T2P_KERNEL_AMX ? cpu_has[best] == 1 && (cpu_has[GGML_T2P_KERNEL_AMX] == 0 || best == GGML_T2P_KERNEL_AVX512VNNI)
                                                                    : 0;
        CHECK(any_simd ? best_ok : best == 0, "the library's best kernel %d (%s) is not one this CPU has",
              best, best ? ggml_t2p_kernel_name(best) : "none");
    }

    random_operands(w, NROWS * NB, act, NCOLS, NB); /* K = 384: the last Q8_K block is half zero */

    float want[NCOLS][NROWS];
    for (int c = 0; c < NCOLS; c++)
        for (int r = 0; r < NROWS; r++) want[c][r] = reference_dot(&w[r * NB], &act[c * NQ], NB);

    /* the library's layout for this CPU */
    int32_t native = -1;
    if (best) {
        CHECK(ggml_t2p_layout_for(GGML_T2P_TYPE_PQ2_0, GGML_T2P_KERNEL_AUTO, 0, &native) == GGML_T2P_OK, "layout_for");
        printf("layout for PQ2_0 on this CPU: %s\n", ggml_t2p_layout_name(native));
    } else {
        CHECK(ggml_t2p_layout_for(GGML_T2P_TYPE_PQ2_0, GGML_T2P_KERNEL_AUTO, 0, &native) == GGML_T2P_ERR_UNSUPPORTED, "layout_for declines");
    }

    int layouts[] = { GGML_T2P_LAYOUT_T2P, GGML_T2P_LAYOUT_X16 };
    int levels[] = { GGML_T2P_KERNEL_REF, GGML_T2P_KERNEL_DOTPROD, GGML_T2P_KERNEL_I8MM, GGML_T2P_KERNEL_AVX2,
                     GGML_T2P_KERNEL_AVXVNNI, GGML_T2P_KERNEL_AVX512VNNI, GGML_T2P_KERNEL_AUTO };
    int runs = 0, ran[7] = { 0 }; /* ran[level]: bit li set when it ran on layouts[li] */
    for (int li = 0; li < 2; li++) {
        int lay = layouts[li];
        int64_t tile = 0;
        CHECK(ggml_t2p_row_tile(lay, &tile) == GGML_T2P_OK && tile == (lay == GGML_T2P_LAYOUT_X16 ? 16 : 4), "row tile %lld", (long long)tile);
        size_t wsize = 0;
        CHECK(ggml_t2p_repacked_size(GGML_T2P_TYPE_PQ2_0, lay, NROWS, K, &wsize) == GGML_T2P_OK, "size");
        size_t want_size = lay == GGML_T2P_LAYOUT_X16 ? (size_t)((NROWS + 15) / 16 * 16 * NB * 34) : sizeof(w);
        CHECK(wsize == want_size, "repacked size %zu, want %zu", wsize, want_size);
        void * packed = malloc(wsize);
        CHECK(ggml_t2p_repack(GGML_T2P_TYPE_PQ2_0, lay, w, sizeof(w), NROWS, K, packed, wsize) == GGML_T2P_OK, "repack");

        for (int l = 0; l < 7; l++) {
            int lv = levels[l];
            int st = ggml_t2p_supports(GGML_T2P_TYPE_PQ2_0, lay, lv, NROWS, K);
            /* must run: the reference level everywhere; a SIMD level where the CPU has it (found
             * above, not asked of the library) and it runs this layout; auto on the layout the
             * library chose for this CPU */
            int avail = lv == GGML_T2P_KERNEL_AUTO ? (best != 0 && native == lay)
                        : cpu_has[lv] < 0          ? st == GGML_T2P_OK /* cannot tell on this platform */
                                                   : cpu_has[lv] == 1 && level_runs(lv, lay);
            CHECK(avail == (st == GGML_T2P_OK), "%s on %s: the CPU %s it but the library says %s", ggml_t2p_kernel_name(lv),
                  ggml_t2p_layout_name(lay), avail ? "runs" : "cannot run", ggml_t2p_status_string(st));
            size_t asize1 = 0, asize = 0;
            int st1 = ggml_t2p_act_packed_size(lay, lv, K, 1, &asize1);
            if (st != GGML_T2P_OK) {
                CHECK(st == GGML_T2P_ERR_UNSUPPORTED, "%s on %s must be unsupported here, got %d", ggml_t2p_kernel_name(lv), ggml_t2p_layout_name(lay), st);
                CHECK(st1 == GGML_T2P_ERR_UNSUPPORTED, "act size for an unsupported kernel: %d", st1);
                continue;
            }
            CHECK(st1 == GGML_T2P_OK, "act size 1: %s", ggml_t2p_status_string(st1));
            CHECK(ggml_t2p_act_packed_size(lay, lv, K, NCOLS, &asize) == GGML_T2P_OK, "act size");
            void * a1 = aligned_alloc(64, asize1 + 64), * an = aligned_alloc(64, asize + 64);

            /* gemv: the single column packed in two pieces (Q8_K block 0, then block 1), as two threads would */
            CHECK(ggml_t2p_act_pack(lay, lv, K, 1, 0, 0, 1, &act[0], sizeof(q8_k_block), a1, asize1) == GGML_T2P_OK, "pack piece 0");
            CHECK(ggml_t2p_act_pack(lay, lv, K, 1, 0, 1, NQ, &act[1], (NQ - 1) * sizeof(q8_k_block), a1, asize1) == GGML_T2P_OK, "pack piece 1");
            float y[NROWS + 1];
            y[NROWS] = -1.0f;
            st = ggml_t2p_gemv(lay, lv, packed, wsize, NROWS, K, a1, asize1, y, NROWS, 0, NROWS);
            CHECK(st == GGML_T2P_OK, "gemv %s: %s", ggml_t2p_kernel_name(lv), ggml_t2p_status_string(st));
            for (int r = 0; r < NROWS; r++) CHECK(memcmp(&y[r], &want[0][r], 4) == 0, "gemv %s %s row %d: %a vs %a", ggml_t2p_layout_name(lay), ggml_t2p_kernel_name(lv), r, y[r], want[0][r]);
            CHECK(y[NROWS] == -1.0f, "gemv wrote past its rows");

            /* gemm: columns packed one call each, in reverse order */
            for (int c = NCOLS - 1; c >= 0; c--)
                CHECK(ggml_t2p_act_pack(lay, lv, K, NCOLS, c, 0, NQ, &act[c * NQ], NQ * sizeof(q8_k_block), an, asize) == GGML_T2P_OK, "pack col %d", c);
            float ys[NCOLS * (NROWS + 1)];
            for (int i = 0; i < NCOLS * (NROWS + 1); i++) ys[i] = -1.0f;
            /* two threads' worth of row ranges on the layout's tile, one call each */
            int split = (int) tile;
            st = ggml_t2p_gemm(lay, lv, packed, wsize, NROWS, K, an, asize, NCOLS, ys, NCOLS * (NROWS + 1), NROWS + 1, 0, split);
            CHECK(st == GGML_T2P_OK, "gemm %s rows 0..%d: %s", ggml_t2p_kernel_name(lv), split, ggml_t2p_status_string(st));
            st = ggml_t2p_gemm(lay, lv, packed, wsize, NROWS, K, an, asize, NCOLS, ys, NCOLS * (NROWS + 1), NROWS + 1, split, NROWS);
            CHECK(st == GGML_T2P_OK, "gemm %s rows %d..%d: %s", ggml_t2p_kernel_name(lv), split, NROWS, ggml_t2p_status_string(st));
            for (int c = 0; c < NCOLS; c++) {
                for (int r = 0; r < NROWS; r++)
                    CHECK(memcmp(&ys[c * (NROWS + 1) + r], &want[c][r], 4) == 0, "gemm %s %s col %d row %d", ggml_t2p_layout_name(lay), ggml_t2p_kernel_name(lv), c, r);
                CHECK(ys[c * (NROWS + 1) + NROWS] == -1.0f, "gemm wrote the gap between columns");
            }
            if (lay == GGML_T2P_LAYOUT_X16) {
                CHECK(ggml_t2p_gemm(lay, lv, packed, wsize, NROWS, K, an, asize, NCOLS, ys, NCOLS * (NROWS + 1), NROWS + 1, 4, NROWS) == GGML_T2P_ERR_RANGE, "X16 rows must start on 16");
                CHECK(ggml_t2p_gemm(lay, lv, packed, wsize, NROWS, K, an, asize, NCOLS, ys, NCOLS * (NROWS + 1), NROWS + 1, 0, 8) == GGML_T2P_ERR_RANGE, "X16 rows must end on 16 or n_rows");
                ys[4] = -2.0f;
                CHECK(ggml_t2p_gemm(lay, lv, packed, wsize, NROWS, K, an, asize, NCOLS, ys, NCOLS * (NROWS + 1), NROWS + 1, 4, 4) == GGML_T2P_OK && ys[4] == -2.0f,
                      "an empty row range off the tile is valid and writes nothing");
            }
            CHECK(ggml_t2p_gemm(lay, lv, packed, wsize, NROWS, K, (char *) an + 4, asize, NCOLS, ys, NCOLS * (NROWS + 1), NROWS + 1, 0, NROWS) == GGML_T2P_ERR_MISALIGNED, "misaligned packed act");
            CHECK(ggml_t2p_gemm(lay, lv, packed, wsize, NROWS, K, an, asize - 1, NCOLS, ys, NCOLS * (NROWS + 1), NROWS + 1, 0, NROWS) == GGML_T2P_ERR_BUFFER_SIZE, "short packed act");
            CHECK(ggml_t2p_act_pack(lay, lv, K, NCOLS, NCOLS, 0, NQ, &act[0], NQ * sizeof(q8_k_block), an, asize) == GGML_T2P_ERR_SHAPE, "pack col n_cols");
            CHECK(ggml_t2p_act_pack(lay, lv, K, NCOLS, 0, 0, NQ + 1, &act[0], (NQ + 1) * sizeof(q8_k_block), an, asize) == GGML_T2P_ERR_SHAPE, "pack past the last block");
            CHECK(ggml_t2p_act_pack(lay, lv, K, NCOLS, 0, 1, 0, &act[0], 0, an, asize) == GGML_T2P_ERR_SHAPE, "pack reversed blocks");
            CHECK(ggml_t2p_act_pack(lay, lv, K, NCOLS, 0, 0, NQ + 1, &act[0], sizeof(q8_k_block), an, asize) == GGML_T2P_ERR_SHAPE, "the shape is checked before the q8k size");
            CHECK(ggml_t2p_act_pack(lay, lv, K, NCOLS, 0, 0, 1, an, sizeof(q8_k_block), an, asize) == GGML_T2P_ERR_INVALID_ARGUMENT, "pack over its own q8k");
            CHECK(ggml_t2p_gemm(lay, lv, packed, wsize, NROWS, K, an, asize, NCOLS, (float *) an, asize / 4, NROWS, 0, NROWS) == GGML_T2P_ERR_INVALID_ARGUMENT, "dst over act");
            CHECK(ggml_t2p_gemm(lay, lv, packed, wsize, NROWS, K, an, asize, NCOLS, (float *) packed, wsize / 4, NROWS, 0, NROWS) == GGML_T2P_ERR_INVALID_ARGUMENT, "dst over w");
            CHECK(ggml_t2p_act_pack(lay, lv, K, NCOLS, 0, 0, NQ, &act[0], NQ * sizeof(q8_k_block) - 1, an, asize) == GGML_T2P_ERR_BUFFER_SIZE, "pack short q8k");
            CHECK(ggml_t2p_act_pack(lay, lv, K, NCOLS, 0, 0, NQ, &act[0], NQ * sizeof(q8_k_block), an, asize - 1) == GGML_T2P_ERR_BUFFER_SIZE, "pack short dst");
            CHECK(ggml_t2p_act_pack(lay, lv, K, NCOLS, 0, 0, NQ, &act[0], NQ * sizeof(q8_k_block), (char *) an + 4, asize) == GGML_T2P_ERR_MISALIGNED, "pack misaligned dst");
            CHECK(ggml_t2p_act_pack(lay, lv, K, NCOLS, 0, 0, NQ, NULL, NQ * sizeof(q8_k_block), an, asize) == GGML_T2P_ERR_NULL, "pack null q8k");
            free(a1);
            free(an);
            if (lv != GGML_T2P_KERNEL_AUTO) ran[lv] |= 1 << li;
            runs++;
        }
        free(packed);
    }
    printf("c abi smoke: %d (layout, kernel) runs; levels run:", runs);
    for (int lv = GGML_T2P_KERNEL_REF; lv <= GGML_T2P_KERNEL_AVX512VNNI; lv++) {
        if (ran[lv]) printf(" %s", ggml_t2p_kernel_name(lv));
    }
    printf("\n");
    /* every level the CPU has ran on each layout it serves */
    for (int lv = GGML_T2P_KERNEL_REF; lv <= GGML_T2P_KERNEL_AVX512VNNI; lv++) {
        for (int li = 0; li < 2; li++) {
            if (cpu_has[lv] == 1 && level_runs(lv, layouts[li]))
                CHECK(ran[lv] & (1 << li), "%s did not run on %s", ggml_t2p_kernel_name(lv), ggml_t2p_layout_name(layouts[li]));
        }
    }

    size_t wsize = 0, s;
    CHECK(ggml_t2p_repacked_size(GGML_T2P_TYPE_PQ2_0, GGML_T2P_LAYOUT_T2P, NROWS, K, &wsize) == GGML_T2P_OK, "size");
    void * packed = malloc(wsize);
    CHECK(ggml_t2p_repack(GGML_T2P_TYPE_PQ2_0, GGML_T2P_LAYOUT_T2P, w, sizeof(w), NROWS, K, packed, wsize) == GGML_T2P_OK, "repack");
    size_t asize = 0;
    CHECK(ggml_t2p_act_packed_size(GGML_T2P_LAYOUT_T2P, GGML_T2P_KERNEL_REF, K, 1, &asize) == GGML_T2P_OK, "ref act size");
    void * a1 = aligned_alloc(64, asize + 64);
    CHECK(ggml_t2p_act_pack(GGML_T2P_LAYOUT_T2P, GGML_T2P_KERNEL_REF, K, 1, 0, 0, NQ, act, NQ * sizeof(q8_k_block), a1, asize) == GGML_T2P_OK, "ref pack");
    float y[NROWS];

    /* an empty batch (ggml gives the last layer zero columns when no output is needed) */
    CHECK(ggml_t2p_act_packed_size(GGML_T2P_LAYOUT_T2P, GGML_T2P_KERNEL_REF, K, 0, &s) == GGML_T2P_OK && s == 0, "act size of 0 columns");
    CHECK(ggml_t2p_gemm(GGML_T2P_LAYOUT_T2P, GGML_T2P_KERNEL_REF, packed, wsize, NROWS, K, NULL, 0, 0, NULL, 0, NROWS, 0, NROWS) == GGML_T2P_OK,
          "gemm of 0 columns");
    CHECK(ggml_t2p_gemm(GGML_T2P_LAYOUT_T2P, GGML_T2P_KERNEL_REF, packed, wsize, NROWS, K, NULL, 0, 0, NULL, 0, NROWS, 0, 6) == GGML_T2P_ERR_RANGE,
          "gemm of 0 columns still checks the row range");

    /* names, one source */
    int32_t kid = -1;
    CHECK(ggml_t2p_kernel_from_name("avx512vnni", &kid) == GGML_T2P_OK && kid == GGML_T2P_KERNEL_AVX512VNNI, "kernel from name");
    CHECK(ggml_t2p_kernel_from_name("auto", &kid) == GGML_T2P_OK && kid == GGML_T2P_KERNEL_AUTO, "auto from name");
    CHECK(ggml_t2p_kernel_from_name("sse2", &kid) == GGML_T2P_ERR_INVALID_ARGUMENT, "unknown kernel name");
    CHECK(ggml_t2p_kernel_from_name(NULL, &kid) == GGML_T2P_ERR_NULL, "null kernel name");
    CHECK(strcmp(ggml_t2p_kernel_name(GGML_T2P_KERNEL_AVXVNNI), "avxvnni") == 0, "kernel name");
    CHECK(ggml_t2p_kernel_from_name("amx", &kid) == GGML_T2P_OK && kid == GGML_T2P_KERNEL_AMX, "amx from name");
    CHECK(strcmp(ggml_t2p_kernel_name(GGML_T2P_KERNEL_AMX), "amx") == 0, "amx kernel name");
    CHECK(strcmp(ggml_t2p_layout_name(GGML_T2P_LAYOUT_X16), "X16") == 0, "layout name");
    CHECK(strcmp(ggml_t2p_layout_name(GGML_T2P_LAYOUT_L64), "L64") == 0, "layout name L64");
    CHECK(strcmp(ggml_t2p_status_string(GGML_T2P_ERR_RANGE), "unknown status") != 0, "status string");
    CHECK(ggml_t2p_layout_for(GGML_T2P_TYPE_PQ2_0, GGML_T2P_KERNEL_REF, 0x80, &kid) == GGML_T2P_ERR_INVALID_ARGUMENT, "unknown layout flag");
    CHECK(ggml_t2p_row_tile(9, NULL) == GGML_T2P_ERR_INVALID_ARGUMENT, "row tile of layout 9");
    CHECK(ggml_t2p_set_threads(-1) == GGML_T2P_ERR_INVALID_ARGUMENT, "negative threads");
    CHECK(ggml_t2p_set_threads(0) == GGML_T2P_OK, "threads: all cores");

    /* errors: never a crash, always a status */
    CHECK(ggml_t2p_gemv(GGML_T2P_LAYOUT_T2P, 1, NULL, wsize, NROWS, K, a1, asize, y, NROWS, 0, NROWS) == GGML_T2P_ERR_NULL, "null w");
    CHECK(ggml_t2p_gemv(GGML_T2P_LAYOUT_T2P, 1, packed, wsize, NROWS, K, a1, asize, NULL, NROWS, 0, NROWS) == GGML_T2P_ERR_NULL, "null dst");
    CHECK(ggml_t2p_gemv(GGML_T2P_LAYOUT_T2P, 1, packed, wsize, NROWS, K, NULL, asize, y, NROWS, 0, NROWS) == GGML_T2P_ERR_NULL, "null act");
    CHECK(ggml_t2p_repacked_size(GGML_T2P_TYPE_PQ2_0, GGML_T2P_LAYOUT_T2P, NROWS, 100, &s) == GGML_T2P_ERR_SHAPE, "k = 100");
    CHECK(ggml_t2p_repacked_size(GGML_T2P_TYPE_PQ2_0, GGML_T2P_LAYOUT_X16, 6, K, &s) == GGML_T2P_ERR_SHAPE, "rows = 6");
    CHECK(ggml_t2p_repacked_size(GGML_T2P_TYPE_PQ2_0, GGML_T2P_LAYOUT_T2P, -4, K, &s) == GGML_T2P_ERR_SHAPE, "rows = -4");
    CHECK(ggml_t2p_repacked_size(7, GGML_T2P_LAYOUT_T2P, NROWS, K, &s) == GGML_T2P_ERR_INVALID_ARGUMENT, "type 7");
    CHECK(ggml_t2p_repacked_size(GGML_T2P_TYPE_PQ2_0, GGML_T2P_LAYOUT_PTQ1_0X4, NROWS, K, &s) == GGML_T2P_ERR_UNSUPPORTED, "pq2_0 -> ptq1_0x4");
    CHECK(ggml_t2p_repacked_size(GGML_T2P_TYPE_PQ2_0, GGML_T2P_LAYOUT_T2P, NROWS, K, NULL) == GGML_T2P_ERR_NULL, "null out_size");
    CHECK(ggml_t2p_gemv(GGML_T2P_LAYOUT_T2P, 1, packed, wsize - 1, NROWS, K, a1, asize, y, NROWS, 0, NROWS) == GGML_T2P_ERR_BUFFER_SIZE, "short w");
    CHECK(ggml_t2p_gemv(GGML_T2P_LAYOUT_T2P, 1, packed, wsize, NROWS, K, a1, asize - 1, y, NROWS, 0, NROWS) == GGML_T2P_ERR_BUFFER_SIZE, "short act");
    CHECK(ggml_t2p_gemv(GGML_T2P_LAYOUT_T2P, 1, packed, wsize, NROWS, K, a1, asize, y, NROWS - 1, 0, NROWS) == GGML_T2P_ERR_BUFFER_SIZE, "short dst");
    CHECK(ggml_t2p_gemv(GGML_T2P_LAYOUT_T2P, 1, (char *)packed + 1, wsize - 1, 4, 128, a1, asize, y, NROWS, 0, 4) == GGML_T2P_ERR_MISALIGNED, "odd w");
    CHECK(ggml_t2p_gemv(GGML_T2P_LAYOUT_T2P, 1, packed, wsize, NROWS, K, a1, asize, y, NROWS, 0, 6) == GGML_T2P_ERR_RANGE, "rows 0..6");
    CHECK(ggml_t2p_gemv(GGML_T2P_LAYOUT_T2P, 1, packed, wsize, NROWS, K, a1, asize, y, NROWS, 8, 4) == GGML_T2P_ERR_RANGE, "rows 8..4");
    CHECK(ggml_t2p_gemv(GGML_T2P_LAYOUT_T2P, 1, packed, wsize, NROWS, K, a1, asize, y, NROWS, 0, NROWS + 4) == GGML_T2P_ERR_RANGE, "rows past the end");
    CHECK(ggml_t2p_gemv(9, 1, packed, wsize, NROWS, K, a1, asize, y, NROWS, 0, NROWS) == GGML_T2P_ERR_INVALID_ARGUMENT, "layout 9");
    CHECK(ggml_t2p_gemv(GGML_T2P_LAYOUT_T2P, 42, packed, wsize, NROWS, K, a1, asize, y, NROWS, 0, NROWS) == GGML_T2P_ERR_INVALID_ARGUMENT, "kernel 42");
    CHECK(ggml_t2p_repack(GGML_T2P_TYPE_PQ2_0, GGML_T2P_LAYOUT_T2P, w, sizeof(w), NROWS, K, packed, wsize - 136) == GGML_T2P_ERR_BUFFER_SIZE, "short dst repack");
    CHECK(ggml_t2p_repack(GGML_T2P_TYPE_PQ2_0, GGML_T2P_LAYOUT_T2P, packed, wsize, NROWS, K, packed, wsize) == GGML_T2P_ERR_INVALID_ARGUMENT, "in-place repack");
    {
        float ys[2 * NROWS + 1];
        CHECK(ggml_t2p_gemv(GGML_T2P_LAYOUT_T2P, 1, packed, wsize, NROWS, K, a1, asize, (float *)((char *)ys + 1), NROWS, 0, NROWS) == GGML_T2P_ERR_MISALIGNED, "odd dst");
        size_t a2size = 0;
        CHECK(ggml_t2p_act_packed_size(GGML_T2P_LAYOUT_T2P, 1, K, 2, &a2size) == GGML_T2P_OK, "act size 2");
        void * a2 = aligned_alloc(64, a2size + 64);
        memset(a2, 0, a2size);
        CHECK(ggml_t2p_gemm(GGML_T2P_LAYOUT_T2P, 1, packed, wsize, NROWS, K, a2, a2size, 2, ys, SIZE_MAX, INT64_MAX, 0, NROWS) == GGML_T2P_ERR_BUFFER_SIZE, "dst extent past isize::MAX");
        free(a2);
    }

    /* Q8_K quantization: every level this CPU runs gives the REF bytes for each rounding; this
     * file's own C copy of quantize_row_q8_K_ref (contracted or not, as this compiler does) equals
     * one of the two; bad arguments get status codes. */
    {
        enum { QN = 512 };
        static float qx[QN];
        static q8_k_block qref[2][QN / 256], qlv[QN / 256], qc[QN / 256];
        for (int j = 0; j < QN; j++) qx[j] = (float)((int32_t)rnd() % 100000) * 1.37e-3f;
        qx[300] = -200.0f;
        for (int r = 0; r < 2; r++) {
            const int32_t rounding = r ? GGML_T2P_ROUND_UNFUSED : GGML_T2P_ROUND_FUSED;
            memset(qref[r], 0x5A, sizeof(qref[r]));
            CHECK(ggml_t2p_quantize_q8_k(GGML_T2P_KERNEL_REF, rounding, qx, QN, qref[r], sizeof(qref[r])) == GGML_T2P_OK, "quantize ref");
            for (int32_t lv = GGML_T2P_KERNEL_AUTO; lv <= GGML_T2P_KERNEL_AVX512VNNI; lv++) {
                memset(qlv, 0x5A, sizeof(qlv));
                const int32_t st = ggml_t2p_quantize_q8_k(lv, rounding, qx, QN, qlv, sizeof(qlv));
                if (st == GGML_T2P_ERR_UNSUPPORTED && lv != GGML_T2P_KERNEL_AUTO) continue;
                CHECK(st == GGML_T2P_OK, "quantize %s: %s", ggml_t2p_kernel_name(lv), ggml_t2p_status_string(st));
                CHECK(memcmp(qlv, qref[r], sizeof(qlv)) == 0, "quantize %s rounding %d: not the reference bytes", ggml_t2p_kernel_name(lv), rounding);
            }
        }
        for (int b = 0; b < QN / 256; b++) {
            const float * xb = qx + 256 * b;
            float max = 0, amax = 0;
            for (int j = 0; j < 256; j++) if (fabsf(xb[j]) > amax) { amax = fabsf(xb[j]); max = xb[j]; }
            const float iscale = -127.f / max;
            for (int j = 0; j < 256; j++) {
                float val = iscale * xb[j] + 12582912.f; /* nearest_int, inlined as a compiler would */
                int32_t i; memcpy(&i, &val, 4);
                const int v = (i & 0x007fffff) - 0x00400000;
                qc[b].qs[j] = (int8_t)(v < 127 ? v : 127);
            }
            for (int g = 0; g < 16; g++) { int sum = 0; for (int j = 0; j < 16; j++) sum += qc[b].qs[16 * g + j]; qc[b].bsums[g] = (int16_t)sum; }
            qc[b].d = 1 / iscale;
        }
        CHECK(memcmp(qc, qref[0], sizeof(qc)) == 0 || memcmp(qc, qref[1], sizeof(qc)) == 0, "quantize: this C build's quantizer is neither rounding");
        CHECK(ggml_t2p_quantize_q8_k(0, GGML_T2P_ROUND_FUSED, NULL, QN, qlv, sizeof(qlv)) == GGML_T2P_ERR_NULL, "quantize null x");
        CHECK(ggml_t2p_quantize_q8_k(0, GGML_T2P_ROUND_FUSED, qx, QN, NULL, sizeof(qlv)) == GGML_T2P_ERR_NULL, "quantize null y");
        CHECK(ggml_t2p_quantize_q8_k(0, GGML_T2P_ROUND_FUSED, qx, QN, qlv, sizeof(qlv) - 1) == GGML_T2P_ERR_BUFFER_SIZE, "quantize short y");
        CHECK(ggml_t2p_quantize_q8_k(0, GGML_T2P_ROUND_FUSED, (const float *)((const char *)qx + 2), 256, qlv, sizeof(qlv)) == GGML_T2P_ERR_MISALIGNED, "quantize odd x");
        CHECK(ggml_t2p_quantize_q8_k(0, GGML_T2P_ROUND_FUSED, qx, 256, (char *)qlv + 1, sizeof(qlv) - 1) == GGML_T2P_ERR_MISALIGNED, "quantize odd y");
        CHECK(ggml_t2p_quantize_q8_k(0, GGML_T2P_ROUND_FUSED, qx, 300, qlv, sizeof(qlv)) == GGML_T2P_ERR_SHAPE, "quantize n = 300");
        CHECK(ggml_t2p_quantize_q8_k(0, GGML_T2P_ROUND_FUSED, qx, -256, qlv, sizeof(qlv)) == GGML_T2P_ERR_SHAPE, "quantize n < 0");
        CHECK(ggml_t2p_quantize_q8_k(0, 0, qx, QN, qlv, sizeof(qlv)) == GGML_T2P_ERR_INVALID_ARGUMENT, "quantize rounding 0");
        CHECK(ggml_t2p_quantize_q8_k(42, GGML_T2P_ROUND_FUSED, qx, QN, qlv, sizeof(qlv)) == GGML_T2P_ERR_INVALID_ARGUMENT, "quantize kernel 42");
        CHECK(ggml_t2p_quantize_q8_k(0, GGML_T2P_ROUND_FUSED, (const float *)qlv, 256, qlv, sizeof(qlv)) == GGML_T2P_ERR_INVALID_ARGUMENT, "quantize in place");
        CHECK(ggml_t2p_quantize_q8_k(0, GGML_T2P_ROUND_FUSED, NULL, 0, NULL, 0) == GGML_T2P_OK, "quantize nothing");
    }

    /* The plugin's policy: the level and layouts a host gets, the messages, the rounding probe. */
    {
        int32_t kern = -7, lp = -7, lt = -7;
        char    msg[512];
        int32_t st = ggml_t2p_choose(NULL, NULL, 1, 1, &kern, &lp, &lt, msg, sizeof msg);
        if (best != 0) {
            int32_t want = -1;
            CHECK(st == GGML_T2P_OK && kern == best && msg[0] == '\0', "choose auto: %d, kernel %d, msg '%s'", st, kern, msg);
            CHECK(ggml_t2p_layout_for(GGML_T2P_TYPE_PQ2_0, best, 0, &want) == GGML_T2P_OK && lp == want, "choose: PQ2_0 layout");
        } else {
            CHECK(st == GGML_T2P_ERR_UNSUPPORTED && kern == 0 && strlen(msg) > 0, "choose auto declines: %d '%s'", st, msg);
        }
        st = ggml_t2p_choose("ref", "native", 0, 1, &kern, &lp, &lt, msg, sizeof msg);
        CHECK(st == GGML_T2P_OK && kern == GGML_T2P_KERNEL_REF && lp == -1 && lt >= 1, "choose ref, PTQ1_0 only: %d %d %d", st, lp, lt);
        st = ggml_t2p_choose("REF", "x", 1, 0, &kern, &lp, &lt, msg, sizeof msg);
        CHECK(strstr(msg, "unknown GGML_T2P_KERNEL=REF") != NULL && lt == -1, "choose: unknown name warns: '%s'", msg);
        st = ggml_t2p_choose("ref", NULL, 0, 0, &kern, &lp, &lt, msg, sizeof msg);
        CHECK(st == GGML_T2P_ERR_UNSUPPORTED && kern == 0 && strstr(msg, "neither PQ2_0") != NULL, "choose: no type declines");
        /* a msg too small for a warning gets none; a decline keeps its reason over the warnings
         * (ref runs on every CPU, so these do not depend on this CPU's levels) */
        st = ggml_t2p_choose("ref", "x", 1, 1, &kern, &lp, &lt, msg, 8);
        CHECK(st == GGML_T2P_OK && msg[0] == '\0', "choose: a warning that does not fit is left out: '%s'", msg);
        st = ggml_t2p_choose("ref", "x", 0, 0, &kern, &lp, &lt, msg, 100);
        CHECK(st == GGML_T2P_ERR_UNSUPPORTED && strncmp(msg, "this ggml has neither", 21) == 0 && strlen(msg) < 100,
              "choose: the reason is kept when the warnings do not fit: '%s'", msg);
        st = ggml_t2p_choose("ref", "x", 0, 0, &kern, &lp, &lt, msg, sizeof msg);
        CHECK(st == GGML_T2P_ERR_UNSUPPORTED && strstr(msg, "unknown GGML_T2P_PTQ1=x") == msg &&
              strstr(msg, "\nthis ggml has neither") != NULL, "choose: warning, then the reason: '%s'", msg);
        st = ggml_t2p_choose("ref", NULL, 0, 0, &kern, &lp, &lt, msg, 22);
        CHECK(st == GGML_T2P_ERR_UNSUPPORTED && strlen(msg) == 21 && strncmp(msg, "this ggml has neither", 21) == 0,
              "choose: a reason longer than msg is cut: '%s'", msg);
        st = ggml_t2p_choose("\xff\xfe", NULL, 1, 1, &kern, &lp, &lt, msg, sizeof msg);
        CHECK(strstr(msg, "unknown GGML_T2P_KERNEL=") != NULL && (best == 0 || (st == GGML_T2P_OK && kern == best)),
              "choose: a value that is not UTF-8 is an unknown name: %d '%s'", st, msg);
        CHECK(ggml_t2p_choose(NULL, NULL, 1, 1, NULL, &lp, &lt, msg, sizeof msg) == GGML_T2P_ERR_NULL, "choose null out");
        CHECK(ggml_t2p_choose(NULL, NULL, 1, 1, &kern, &lp, &lt, NULL, 16) == GGML_T2P_ERR_NULL, "choose null msg");

        int64_t bw = 0;
        size_t  bb = 0;
        CHECK(ggml_t2p_source_block(GGML_T2P_TYPE_PQ2_0, &bw, &bb) == GGML_T2P_OK && bw == 128 && bb == 34, "PQ2_0 block");
        CHECK(ggml_t2p_source_block(GGML_T2P_TYPE_PTQ1_0, &bw, &bb) == GGML_T2P_OK && bw == 128 && bb == 28, "PTQ1_0 block");
        CHECK(ggml_t2p_source_block(8, &bw, &bb) == GGML_T2P_ERR_INVALID_ARGUMENT, "block of type 8");

        /* the probe names the rounding this C build's quantizer uses (the reference in C above) */
        static float      px[GGML_T2P_Q8K_PROBE_VALUES];
        static q8_k_block ph[GGML_T2P_Q8K_PROBE_VALUES / 256], pf[GGML_T2P_Q8K_PROBE_VALUES / 256];
        int32_t           rounding = -1;
        CHECK(ggml_t2p_q8k_probe_input(px, GGML_T2P_Q8K_PROBE_VALUES) == GGML_T2P_OK, "probe input");
        CHECK(ggml_t2p_q8k_probe_input(px, GGML_T2P_Q8K_PROBE_VALUES - 1) == GGML_T2P_ERR_BUFFER_SIZE, "probe input short");
        CHECK(ggml_t2p_quantize_q8_k(GGML_T2P_KERNEL_REF, GGML_T2P_ROUND_FUSED, px, GGML_T2P_Q8K_PROBE_VALUES, pf, sizeof pf) == GGML_T2P_OK, "probe fused");
        for (int r = 0; r < 2; r++) {
            const int32_t want = r ? GGML_T2P_ROUND_UNFUSED : GGML_T2P_ROUND_FUSED;
            CHECK(ggml_t2p_quantize_q8_k(GGML_T2P_KERNEL_REF, want, px, GGML_T2P_Q8K_PROBE_VALUES, ph, sizeof ph) == GGML_T2P_OK, "probe host");
            CHECK(ggml_t2p_q8k_probe_rounding(0, px, GGML_T2P_Q8K_PROBE_VALUES, ph, sizeof ph, &rounding) == GGML_T2P_OK && rounding == want,
                  "probe: rounding %d, want %d", rounding, want);
        }
        CHECK(memcmp(ph, pf, sizeof ph) != 0, "probe: the two roundings differ on the probe values");
        ph[1].qs[7] ^= 1;
        CHECK(ggml_t2p_q8k_probe_rounding(0, px, GGML_T2P_Q8K_PROBE_VALUES, ph, sizeof ph, &rounding) == GGML_T2P_OK && rounding == 0,
              "probe: a host of its own matches neither");
        CHECK(ggml_t2p_q8k_probe_rounding(0, px, GGML_T2P_Q8K_PROBE_VALUES, ph, sizeof ph - 1, &rounding) == GGML_T2P_ERR_BUFFER_SIZE, "probe short host");
        CHECK(ggml_t2p_q8k_probe_rounding(0, px, 300, ph, sizeof ph, &rounding) == GGML_T2P_ERR_SHAPE, "probe n = 300");
        CHECK(ggml_t2p_q8k_probe_rounding(0, NULL, 256, ph, sizeof ph, &rounding) == GGML_T2P_ERR_NULL, "probe null x");
    }

    free(a1);
    free(packed);
    plugin_checks(w);
    printf("c abi smoke: %d/%d checks passed\n", checks - failures, checks);
    return failures == 0 ? 0 : 1;
}
