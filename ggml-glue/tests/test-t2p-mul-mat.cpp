// test-t2p-mul-mat.cpp - graph-level test of the CPU_T2P extra buffer type in a patched llama.cpp.
//
// test-backend-ops never places weights in extra buffer types, so this program does it itself:
// it finds CPU_T2P through the public backend registry, stores random PQ2_0 weights (all four codes,
// random fp16 scales) in it and the same bytes in a plain CPU buffer, and runs MUL_MAT through
// ggml_backend_graph_compute for many batch widths, K values and thread counts. Where the host ggml
// also has PTQ1_0 (type 143: the fork's newer branches, or a tree made by tools/ptq1-tree.py), the
// same runs follow with random PTQ1_0 weights (every byte value, non-canonical ones included, in qs
// and qh; random fp16 scales). It checks
//  (a) CPU_T2P output == the library's scalar reference (GGML_T2P_KERNEL_REF on its own repack, fed
//      with ggml's Q8_K quantization of the zero-padded columns), bit for bit;
//  (b) stock output (PQ2_0 / PTQ1_0 x Q8_0 in this snapshot) within a per-element bound derived from the two
//      activation quantizers' step sizes (see stock_bound below).
// Where the plugin declines (no SIMD level, GGML_T2P=0) only (b) runs, and the program checks that the
// buffer type is absent as expected. It also prints which extra buffer type llama.cpp's loader would give
// each type (the first whose supports_op accepts it: CPU_T2P must come first while present) and, with the
// plugin absent, runs the weights through the buffer type that takes them instead (the fork's CPU_REPACK
// takes PQ2_0 on AVX-512 VNNI CPUs) and holds that path to the stock bound too. On a ggml without PQ2_0 (type 142; every fork branch but
// q2_0-prs, upstream ggml) it checks only that the plugin declines. Exit status 0 means PASS.

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "ggml_t2p.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

// From ggml-t2p-probe.cmake (tests/CMakeLists.txt); without it, the newest ggml is assumed.
#ifndef GGML_T2P_HAVE_HADAMARD_HINT
#    define GGML_T2P_HAVE_HADAMARD_HINT 1
#endif

namespace {

constexpr int64_t QK           = 128;   // weights per PQ2_0 / PTQ1_0 block
constexpr size_t  PQ2_0_BYTES  = 34;
constexpr size_t  PTQ1_0_BYTES = 28;
constexpr auto    TYPE_PQ2_0   = static_cast<ggml_type>(GGML_T2P_TYPE_PQ2_0);
constexpr auto    TYPE_PTQ1_0  = static_cast<ggml_type>(GGML_T2P_TYPE_PTQ1_0);

// Digit n (0..4) of a PTQ1_0 byte b, 0..2 (docs/formats.md §2): ((uint8_t)(b * 3^n) * 3) >> 8.
int ptq1_0_digit(uint8_t b, int n) {
    static const uint8_t pow3[5] = { 1, 3, 9, 27, 81 };
    return ((uint8_t) (b * pow3[n]) * 3) >> 8;
}

// Digit of element e (0..127) of a PTQ1_0 block.
int ptq1_0_element(const uint8_t * blk, int e) {
    if (e < 80) return ptq1_0_digit(blk[e % 16], e / 16);
    if (e < 120) return ptq1_0_digit(blk[16 + (e - 80) % 8], (e - 80) / 8);
    return ptq1_0_digit(blk[24 + (e - 120) % 2], (e - 120) / 2);
}

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
    return std::chrono::duration<double>(clock_type::now() - t0).count();
}

int g_failures = 0;

#define CHECK(cond, ...)                                       \
    do {                                                       \
        if (!(cond)) {                                         \
            std::fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
            std::fprintf(stderr, __VA_ARGS__);                 \
            std::fprintf(stderr, "\n");                        \
            ++g_failures;                                      \
        }                                                      \
    } while (0)

// ------------------------------------------------------------------------------------------------
// Random data.

struct weight_matrix {
    int32_t              type = GGML_T2P_TYPE_PQ2_0;   // or GGML_T2P_TYPE_PTQ1_0
    int64_t              rows = 0, k = 0;
    std::vector<uint8_t> bytes;   // PQ2_0 or PTQ1_0, row-major
    std::vector<float>   absw;    // |weight| per element, for the stock bound
};

weight_matrix make_weights(std::mt19937 & rng, int64_t rows, int64_t k, int32_t type = GGML_T2P_TYPE_PQ2_0) {
    weight_matrix w;
    w.type = type;
    w.rows = rows;
    w.k    = k;
    const int64_t nb = k / QK;
    w.absw.resize((size_t) (rows * k));
    std::uniform_real_distribution<float> mag(0.002f, 0.05f);
    std::uniform_int_distribution<int>    pct(0, 99);
    if (type == GGML_T2P_TYPE_PTQ1_0) {
        // Any byte is a valid PTQ1_0 byte (its digits are 0..2); the fork's quantizer writes only some.
        w.bytes.resize((size_t) (rows * nb) * PTQ1_0_BYTES);
        std::uniform_int_distribution<int> byte(0, 255);
        for (int64_t r = 0; r < rows; ++r) {
            for (int64_t b = 0; b < nb; ++b) {
                uint8_t * blk = w.bytes.data() + (size_t) (r * nb + b) * PTQ1_0_BYTES;
                const int p   = pct(rng);
                for (int j = 0; j < 26; ++j) {
                    blk[j] = (uint8_t) (p < 3 ? 128 : byte(rng));   // 128: five zero digits
                }
                float d = p < 1 ? 0.0f : (p < 12 ? -mag(rng) : mag(rng));
                const ggml_fp16_t h = ggml_fp32_to_fp16(d);
                std::memcpy(blk + 26, &h, 2);
                d = std::fabs(ggml_fp16_to_fp32(h));
                for (int e = 0; e < 128; ++e) {
                    w.absw[(size_t) (r * k + b * QK + e)] = (float) std::abs(ptq1_0_element(blk, e) - 1) * d;
                }
            }
        }
        return w;
    }
    w.bytes.resize((size_t) (rows * nb) * PQ2_0_BYTES);
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t b = 0; b < nb; ++b) {
            uint8_t * blk = w.bytes.data() + (size_t) (r * nb + b) * PQ2_0_BYTES;
            const int p   = pct(rng);
            float     d   = p < 1 ? 0.0f : (p < 12 ? -mag(rng) : mag(rng));
            const ggml_fp16_t h = ggml_fp32_to_fp16(d);
            std::memcpy(blk, &h, 2);
            d = std::fabs(ggml_fp16_to_fp32(h));
            for (int j = 0; j < 128; ++j) {
                const int c    = pct(rng);
                const int code = c < 30 ? 0 : c < 65 ? 1 : c < 95 ? 2 : 3;   // 5% code 3 (+2)
                blk[2 + j / 4] |= (uint8_t) (code << (2 * (j % 4)));
                w.absw[(size_t) (r * k + b * QK + j)] = (float) std::abs(code - 1) * d;
            }
        }
    }
    return w;
}

// n_cols columns of k floats. Column 1 is all zeros (Q8_K d = 0) when there are at least 3.
std::vector<float> make_activations(std::mt19937 & rng, int64_t k, int64_t n_cols) {
    std::vector<float>               x((size_t) (k * n_cols));
    std::normal_distribution<float>  normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> scale(0.1f, 10.0f);
    std::uniform_int_distribution<int>    pct(0, 999);
    for (int64_t c = 0; c < n_cols; ++c) {
        const float s    = scale(rng);
        const bool  zero = n_cols >= 3 && c == 1;
        for (int64_t j = 0; j < k; ++j) {
            float v = zero ? 0.0f : s * normal(rng);
            if (!zero && pct(rng) < 5) {
                v *= 20.0f;   // outliers
            }
            x[(size_t) (c * k + j)] = v;
        }
    }
    return x;
}

// ------------------------------------------------------------------------------------------------
// The library's scalar reference, straight through the C ABI.

struct reference {
    int64_t              rows = 0, k = 0;
    std::vector<uint8_t> packed;   // T2P

    explicit reference(const weight_matrix & w) : rows(w.rows), k(w.k) {
        size_t size = 0;
        int32_t st  = ggml_t2p_repacked_size(w.type, GGML_T2P_LAYOUT_T2P, rows, k, &size);
        CHECK(st == GGML_T2P_OK, "repacked_size: %s", ggml_t2p_status_string(st));
        packed.resize(size);
        st = ggml_t2p_repack(w.type, GGML_T2P_LAYOUT_T2P, w.bytes.data(), w.bytes.size(), rows, k,
                             packed.data(), packed.size());
        CHECK(st == GGML_T2P_OK, "repack: %s", ggml_t2p_status_string(st));
    }

    // dst[c * rows + r]
    std::vector<float> gemm(const std::vector<float> & x, int64_t n_cols) const {
        const int64_t nq    = (k + 255) / 256;
        const int64_t k_pad = nq * 256;
        const size_t  q8_row = ggml_row_size(GGML_TYPE_Q8_K, k_pad);
        size_t act_size = 0;
        CHECK(ggml_t2p_act_packed_size(GGML_T2P_LAYOUT_T2P, GGML_T2P_KERNEL_REF, k, n_cols, &act_size) == GGML_T2P_OK,
              "act_packed_size");
        std::vector<uint64_t> act((act_size + 63) / 8 + 8);   // GGML_T2P_ACT_ALIGN (16) after the adjustment below
        char * act_base = (char *) (((uintptr_t) act.data() + 63) / 64 * 64);
        std::vector<uint32_t> q8((q8_row + 3) / 4);           // one column of Q8_K, 4-byte aligned
        std::vector<float>    pad((size_t) k_pad, 0.0f);
        const ggml_from_float_t q8k = ggml_get_type_traits_cpu(GGML_TYPE_Q8_K)->from_float;
        for (int64_t c = 0; c < n_cols; ++c) {
            std::memcpy(pad.data(), x.data() + c * k, (size_t) k * sizeof(float));
            q8k(pad.data(), q8.data(), k_pad);
            const int32_t st = ggml_t2p_act_pack(GGML_T2P_LAYOUT_T2P, GGML_T2P_KERNEL_REF, k, n_cols, c, 0, nq, q8.data(),
                                                 q8_row, act_base, act_size);
            CHECK(st == GGML_T2P_OK, "act_pack: %s", ggml_t2p_status_string(st));
        }
        std::vector<float> dst((size_t) (rows * n_cols));
        const int32_t st = ggml_t2p_gemm(GGML_T2P_LAYOUT_T2P, GGML_T2P_KERNEL_REF, packed.data(), packed.size(), rows, k,
                                         act_base, act_size, n_cols, dst.data(), dst.size(), rows, 0, rows);
        CHECK(st == GGML_T2P_OK, "reference gemm: %s", ggml_t2p_status_string(st));
        return dst;
    }
};

// ------------------------------------------------------------------------------------------------
// The stock bound.
//
// Both outputs are sum_j w_j * x'_j with the same exact weights w_j and two quantizations x' of the
// same column x:
//   Q8_K (ours): 256-element blocks, d = amax/127 (fp32), x' = d*q with |x - x'| <= d*(1/2 + 2^-15)
//                (the 2^-15 covers the rounding of iscale*x before rounding to an integer);
//   Q8_0 (stock): 32-element blocks, d = amax/127, stored as fp16(d), q = round(x/d), x' = fp16(d)*q,
//                |x - x'| <= d/2*(1 + 2^-20) + |d - fp16(d)|*127.
// So |y_t2p - y_stock| <= sum_j |w_j| (e8K_j + e80_j) + float rounding of the two sums. Each sum
// has at most K/32 + K/128 accumulation steps plus a few products: we add
// (K/32 + K/128 + 8) * 2^-23 * sum_j |w_j| (|x_j| + e8K_j + e80_j), i.e. two unit roundoffs per step.
// This bound is rigorous (worst case, all errors aligned); real errors are random and average out,
// so observed/bound ratios are far below 1. The bound is computed in float and scaled by 1.001.

std::vector<float> per_element_error(const std::vector<float> & x, int64_t k, int64_t n_cols) {
    std::vector<float> e((size_t) (k * n_cols));
    const float        c = (float) (k / 32 + k / 128 + 8) * std::ldexp(1.0f, -23);
    for (int64_t col = 0; col < n_cols; ++col) {
        const float * xc = x.data() + col * k;
        float *       ec = e.data() + col * k;
        std::vector<float> e8k((size_t) k), e80((size_t) k);
        for (int64_t b = 0; b < k; b += 256) {
            float amax = 0.0f;
            for (int64_t j = b; j < std::min(k, b + 256); ++j) {
                amax = std::max(amax, std::fabs(xc[j]));
            }
            const float d = amax / 127.0f;
            for (int64_t j = b; j < std::min(k, b + 256); ++j) {
                e8k[(size_t) j] = d * (0.5f + std::ldexp(1.0f, -15));
            }
        }
        for (int64_t b = 0; b < k; b += 32) {
            float amax = 0.0f;
            for (int64_t j = b; j < b + 32; ++j) {
                amax = std::max(amax, std::fabs(xc[j]));
            }
            const float d   = amax / 127.0f;
            const float d16 = ggml_fp16_to_fp32(ggml_fp32_to_fp16(d));
            const float err = 0.5f * d * (1.0f + std::ldexp(1.0f, -20)) + std::fabs(d - d16) * 127.0f;
            for (int64_t j = b; j < b + 32; ++j) {
                e80[(size_t) j] = err;
            }
        }
        for (int64_t j = 0; j < k; ++j) {
            const float q = e8k[(size_t) j] + e80[(size_t) j];
            ec[j]         = q + c * (std::fabs(xc[j]) + q);
        }
    }
    return e;
}

// bound[c * rows + r] = 1.001 * sum_j |w_rj| e_cj
std::vector<float> stock_bound(const weight_matrix & w, const std::vector<float> & e, int64_t n_cols) {
    std::vector<float> b((size_t) (w.rows * n_cols));
    for (int64_t c = 0; c < n_cols; ++c) {
        const float * ec = e.data() + c * w.k;
        for (int64_t r = 0; r < w.rows; ++r) {
            const float * wr = w.absw.data() + r * w.k;
            float         s  = 0.0f;
            for (int64_t j = 0; j < w.k; ++j) {
                s += wr[j] * ec[j];
            }
            b[(size_t) (c * w.rows + r)] = 1.001f * s + 1e-30f;
        }
    }
    return b;
}

// ------------------------------------------------------------------------------------------------
// Backend plumbing.

struct env_t {
    ggml_backend_t             backend = nullptr;
    ggml_backend_dev_t         dev     = nullptr;
    ggml_backend_buffer_type_t t2p     = nullptr;   // CPU_T2P, or null when the plugin declined
};

ggml_backend_buffer_type_t find_t2p_buft(ggml_backend_dev_t dev) {
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
    auto get_extra = (ggml_backend_dev_get_extra_bufts_t) ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts");
    if (get_extra == nullptr) {
        return nullptr;
    }
    std::printf("extra buffer types:");
    ggml_backend_buffer_type_t found = nullptr;
    for (ggml_backend_buffer_type_t * b = get_extra(dev); b != nullptr && *b != nullptr; ++b) {
        std::printf(" %s", ggml_backend_buft_name(*b));
        if (std::strcmp(ggml_backend_buft_name(*b), "CPU_T2P") == 0) {
            found = *b;
        }
    }
    std::printf("\n");
    return found;
}

// One weight matrix, stored twice: in CPU_T2P (when available) and in a plain CPU buffer.
struct placed_weights {
    ggml_context *        ctx_t = nullptr, *ctx_s = nullptr;
    ggml_backend_buffer_t buf_t = nullptr, buf_s = nullptr;
    ggml_tensor *         wt = nullptr, *ws = nullptr;

    placed_weights(const env_t & env, const weight_matrix & w) {
        const ggml_init_params ip = { 2 * ggml_tensor_overhead(), nullptr, true };
        ctx_s                     = ggml_init(ip);
        const auto wtype          = static_cast<ggml_type>(w.type);
        ws                        = ggml_new_tensor_2d(ctx_s, wtype, w.k, w.rows);
        ggml_set_name(ws, "w_stock");
        buf_s = ggml_backend_alloc_ctx_tensors_from_buft(ctx_s, ggml_backend_cpu_buffer_type());
        ggml_backend_tensor_set(ws, w.bytes.data(), 0, w.bytes.size());
        if (env.t2p != nullptr) {
            ctx_t = ggml_init(ip);
            wt    = ggml_new_tensor_2d(ctx_t, wtype, w.k, w.rows);
            ggml_set_name(wt, "w_t2p");
            buf_t = ggml_backend_alloc_ctx_tensors_from_buft(ctx_t, env.t2p);
            CHECK(buf_t != nullptr, "allocating in CPU_T2P failed");
            CHECK(ggml_backend_buffer_get_size(buf_t) >= ggml_nbytes(wt), "CPU_T2P buffer too small");
            ggml_backend_tensor_set(wt, w.bytes.data(), 0, w.bytes.size());   // repacks
        }
    }

    ~placed_weights() {
        if (buf_t) ggml_backend_buffer_free(buf_t);
        if (buf_s) ggml_backend_buffer_free(buf_s);
        if (ctx_t) ggml_free(ctx_t);
        if (ctx_s) ggml_free(ctx_s);
    }
};

struct totals {
    int64_t cases_bitwise = 0;   // (shape, width, threads) runs compared bit for bit with the reference
    int64_t cases_stock   = 0;   // (shape, width) runs compared with stock under the bound
    double  max_abs       = 0;   // max |stock - reference|
    double  max_ratio     = 0;   // max |stock - reference| / bound
    double  max_rel       = 0;   // max over runs of max|stock - ref| / max|ref|
    double  t_t2p = 0, t_stock = 0, t_ref = 0, t_bound = 0;
};

// Runs MUL_MAT(w, x) for x of shape [k, n1, n2] (n_cols = n1 * n2 columns).
void run_case(const env_t & env, const weight_matrix & w, const placed_weights & pw, const reference & ref,
              int64_t n1, int64_t n2, const std::vector<int> & threads, std::mt19937 & rng, totals & tot) {
    const int64_t n_cols = n1 * n2;
    const int64_t rows   = w.rows;
    const std::vector<float> x = make_activations(rng, w.k, n_cols);

    const ggml_init_params ip  = { 8 * ggml_tensor_overhead() + 2 * ggml_graph_overhead(), nullptr, true };
    ggml_context *         ctx = ggml_init(ip);
    ggml_tensor *          xt  = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, w.k, n1, n2);
    ggml_tensor *          ys  = ggml_mul_mat(ctx, pw.ws, xt);
    ggml_tensor *          yt  = pw.wt ? ggml_mul_mat(ctx, pw.wt, xt) : nullptr;
    ggml_cgraph *          gs  = ggml_new_graph(ctx);
    ggml_build_forward_expand(gs, ys);
    ggml_cgraph * gt = nullptr;
    if (yt) {
        gt = ggml_new_graph(ctx);
        ggml_build_forward_expand(gt, yt);
        CHECK(ggml_backend_dev_supports_op(env.dev, yt), "CPU_T2P declined MUL_MAT k=%" PRId64 " rows=%" PRId64 " cols=%" PRId64 "x%" PRId64,
              w.k, rows, n1, n2);
    }
    // An empty batch (n_cols == 0) allocates nothing: ggml skips the op, but plans its work size.
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, env.backend);
    if (n_cols > 0) {
        ggml_backend_tensor_set(xt, x.data(), 0, x.size() * sizeof(float));
    }

    auto t0 = clock_type::now();
    const std::vector<float> yr = ref.gemm(x, n_cols);
    tot.t_ref += seconds_since(t0);

    // (a) CPU_T2P == reference, bit for bit, for every thread count.
    std::vector<float> out((size_t) (rows * n_cols));
    if (gt) {
        for (int nt : threads) {
            ggml_backend_cpu_set_n_threads(env.backend, nt);
            std::fill(out.begin(), out.end(), std::nanf(""));
            if (n_cols > 0) {
                ggml_backend_tensor_set(yt, out.data(), 0, out.size() * sizeof(float));
            }
            t0 = clock_type::now();
            CHECK(ggml_backend_graph_compute(env.backend, gt) == GGML_STATUS_SUCCESS, "graph compute (t2p)");
            tot.t_t2p += seconds_since(t0);
            if (n_cols > 0) {
                ggml_backend_tensor_get(yt, out.data(), 0, out.size() * sizeof(float));
            }
            int64_t bad = 0, first = -1;
            for (size_t i = 0; i < out.size(); ++i) {
                uint32_t a, b;
                std::memcpy(&a, &out[i], 4);
                std::memcpy(&b, &yr[i], 4);
                if (a != b) {
                    if (first < 0) first = (int64_t) i;
                    ++bad;
                }
            }
            CHECK(bad == 0, "t2p != reference: type %d k=%" PRId64 " rows=%" PRId64 " cols=%" PRId64 "x%" PRId64 " threads=%d: %" PRId64
                  " mismatches, first at col %" PRId64 " row %" PRId64 ": %.9g vs %.9g",
                  (int) w.type, w.k, rows, n1, n2, nt, bad, first / rows, first % rows, bad ? out[(size_t) first] : 0.0, bad ? yr[(size_t) first] : 0.0);
            ++tot.cases_bitwise;
        }
    }

    // (b) stock within the quantizer bound of the reference.
    ggml_backend_cpu_set_n_threads(env.backend, 2);
    t0 = clock_type::now();
    CHECK(ggml_backend_graph_compute(env.backend, gs) == GGML_STATUS_SUCCESS, "graph compute (stock)");
    tot.t_stock += seconds_since(t0);
    if (n_cols > 0) {
        ggml_backend_tensor_get(ys, out.data(), 0, out.size() * sizeof(float));
    }
    t0 = clock_type::now();
    const std::vector<float> bound = stock_bound(w, per_element_error(x, w.k, n_cols), n_cols);
    tot.t_bound += seconds_since(t0);
    double max_abs = 0, max_ratio = 0, max_ref = 0;
    int64_t over = 0;
    for (size_t i = 0; i < out.size(); ++i) {
        const double diff = std::fabs((double) out[i] - (double) yr[i]);
        max_abs   = std::max(max_abs, diff);
        max_ratio = std::max(max_ratio, diff / bound[i]);
        max_ref   = std::max(max_ref, std::fabs((double) yr[i]));
        over += !(diff <= bound[i]);   // NaN counts as over
    }
    CHECK(over == 0, "stock outside the bound: type %d k=%" PRId64 " rows=%" PRId64 " cols=%" PRId64 "x%" PRId64 ": %" PRId64 " elements, max ratio %.3g",
          (int) w.type, w.k, rows, n1, n2, over, max_ratio);
    ++tot.cases_stock;
    tot.max_abs   = std::max(tot.max_abs, max_abs);
    tot.max_ratio = std::max(tot.max_ratio, max_ratio);
    if (max_ref > 0) {
        tot.max_rel = std::max(tot.max_rel, max_abs / max_ref);
    }

    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
}

// Whether GGML_T2P_EMBED leaves GET_ROWS on (the plugin's default).
bool embed_on() {
    const char * v = std::getenv("GGML_T2P_EMBED");
    return !(v && (!std::strcmp(v, "0") || !std::strcmp(v, "off") || !std::strcmp(v, "false") || !std::strcmp(v, "no")));
}

// GET_ROWS of the weight in CPU_T2P (the token embedding's lookup) equals stock GET_ROWS on the same bytes
// in a plain CPU buffer (ggml's to_float), bit for bit, for ids anywhere in the matrix, at 1 and 3 threads.
// Returns the number of runs compared (0 when CPU_T2P is absent or does not take GET_ROWS).
int64_t check_get_rows(const env_t & env, const weight_matrix & w, const placed_weights & pw, std::mt19937 & rng) {
    if (pw.wt == nullptr) {
        return 0;
    }
    std::vector<int32_t> ids = { 0, (int32_t) w.rows - 1, 1, 1 };
    for (int i = 0; i < 9; ++i) {
        ids.push_back((int32_t) (rng() % (uint32_t) w.rows));
    }
    const int64_t          n   = (int64_t) ids.size();
    const ggml_init_params ip  = { 8 * ggml_tensor_overhead() + 2 * ggml_graph_overhead(), nullptr, true };
    ggml_context *         ctx = ggml_init(ip);
    ggml_tensor *          it  = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n);
    ggml_tensor *          gs  = ggml_get_rows(ctx, pw.ws, it);
    ggml_tensor *          gt  = ggml_get_rows(ctx, pw.wt, it);
    const bool supported = ggml_backend_dev_supports_op(env.dev, gt);
    CHECK(supported == embed_on(), "GET_ROWS of type %d k=%" PRId64 " rows=%" PRId64 ": supported %d, GGML_T2P_EMBED on %d",
          (int) w.type, w.k, w.rows, supported, embed_on());
    if (!supported) {
        ggml_free(ctx);
        return 0;
    }
    ggml_cgraph * graph_s = ggml_new_graph(ctx);
    ggml_build_forward_expand(graph_s, gs);
    ggml_cgraph * graph_t = ggml_new_graph(ctx);
    ggml_build_forward_expand(graph_t, gt);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, env.backend);
    ggml_backend_tensor_set(it, ids.data(), 0, ids.size() * sizeof(int32_t));
    std::vector<float> want((size_t) (n * w.k)), got(want.size());
    CHECK(ggml_backend_graph_compute(env.backend, graph_s) == GGML_STATUS_SUCCESS, "graph compute (stock GET_ROWS)");
    ggml_backend_tensor_get(gs, want.data(), 0, want.size() * sizeof(float));
    int64_t runs = 0;
    for (int nt : { 1, 3 }) {
        ggml_backend_cpu_set_n_threads(env.backend, nt);
        std::fill(got.begin(), got.end(), std::nanf(""));
        ggml_backend_tensor_set(gt, got.data(), 0, got.size() * sizeof(float));
        CHECK(ggml_backend_graph_compute(env.backend, graph_t) == GGML_STATUS_SUCCESS, "graph compute (t2p GET_ROWS)");
        ggml_backend_tensor_get(gt, got.data(), 0, got.size() * sizeof(float));
        CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0,
              "GET_ROWS t2p != stock: type %d k=%" PRId64 " rows=%" PRId64 " threads=%d", (int) w.type, w.k, w.rows, nt);
        ++runs;
    }
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
    return runs;
}

// supports_op the way llama.cpp's weight placement asks it: the weight in a zero-size dummy buffer of
// our type, nothing else allocated.
bool buft_accepts(const env_t & env, ggml_backend_buffer_type_t buft, ggml_type wtype, int64_t k, int64_t rows, ggml_type xtype,
                  int64_t n1, int64_t n2, bool hadamard, bool get_rows);

bool placement_accepts(const env_t & env, ggml_type wtype, int64_t k, int64_t rows, ggml_type xtype, int64_t n1, int64_t n2,
                       bool hadamard, bool get_rows) {
    return buft_accepts(env, env.t2p, wtype, k, rows, xtype, n1, n2, hadamard, get_rows);
}

bool buft_accepts(const env_t & env, ggml_backend_buffer_type_t buft, ggml_type wtype, int64_t k, int64_t rows, ggml_type xtype,
                  int64_t n1, int64_t n2, bool hadamard, bool get_rows) {
    const ggml_init_params ip  = { 8 * ggml_tensor_overhead(), nullptr, true };
    ggml_context *         ctx = ggml_init(ip);
    ggml_tensor *          w   = ggml_new_tensor_2d(ctx, wtype, k, rows);
    ggml_tensor *          op  = nullptr;
    if (get_rows) {
        op = ggml_get_rows(ctx, w, ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 4));
    } else {
        op = ggml_mul_mat(ctx, w, ggml_new_tensor_3d(ctx, xtype, k, n1, n2));
        if (hadamard) {
#if GGML_T2P_HAVE_HADAMARD_HINT
            ggml_mul_mat_set_hint(op, GGML_HINT_SRC0_IS_HADAMARD);
#endif
        }
    }
    w->buffer       = ggml_backend_buft_alloc_buffer(buft, 0);
    const bool ok   = ggml_backend_dev_supports_op(env.dev, op);
    ggml_backend_buffer_free(w->buffer);
    w->buffer = nullptr;
    ggml_free(ctx);
    return ok;
}

bool host_has_ptq1();

// The extra buffer types in the CPU device's order (the order llama.cpp's loader tries them in).
std::vector<ggml_backend_buffer_type_t> extra_bufts(const env_t & env) {
    std::vector<ggml_backend_buffer_type_t> v;
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(env.dev);
    auto get_extra = (ggml_backend_dev_get_extra_bufts_t) ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts");
    for (ggml_backend_buffer_type_t * b = get_extra ? get_extra(env.dev) : nullptr; b != nullptr && *b != nullptr; ++b) {
        v.push_back(*b);
    }
    return v;
}

// The extra buffer type llama.cpp's loader gives a weight used by a MUL_MAT with F32 activations: the first
// one whose supports_op accepts it (select_weight_buft walks the list in this order), or null (a plain
// CPU buffer: stock code).
ggml_backend_buffer_type_t first_taker(const env_t & env, ggml_type wtype, int64_t k, int64_t rows, int64_t n1) {
    for (ggml_backend_buffer_type_t b : extra_bufts(env)) {
        if (buft_accepts(env, b, wtype, k, rows, GGML_TYPE_F32, n1, 1, false, false)) {
            return b;
        }
    }
    return nullptr;
}

// Precedence: with the plugin on, CPU_T2P takes PQ2_0 and PTQ1_0 before any other extra buffer type that
// also accepts them (the fork's CPU_REPACK takes PQ2_0 on AVX-512 VNNI CPUs). Prints who else would take them.
void check_precedence(const env_t & env) {
    for (ggml_type t : { TYPE_PQ2_0, TYPE_PTQ1_0 }) {
        if (t == TYPE_PTQ1_0 && !host_has_ptq1()) {
            continue;
        }
        for (int64_t n1 : { (int64_t) 1, (int64_t) 512 }) {
            ggml_backend_buffer_type_t first = first_taker(env, t, 896, 64, n1);
            std::printf("precedence %s 896x64 x %" PRId64 " cols: loader picks %s; also accepting:", ggml_type_name(t), n1,
                        first ? ggml_backend_buft_name(first) : "no extra buffer type (stock)");
            for (ggml_backend_buffer_type_t b : extra_bufts(env)) {
                if (b != first && buft_accepts(env, b, t, 896, 64, GGML_TYPE_F32, n1, 1, false, false)) {
                    std::printf(" %s", ggml_backend_buft_name(b));
                }
            }
            std::printf("\n");
            if (env.t2p) {
                CHECK(first == env.t2p, "%s: the loader would pick %s before CPU_T2P", ggml_type_name(t),
                      first ? ggml_backend_buft_name(first) : "a plain buffer");
            } else {
                CHECK(first == nullptr || std::strcmp(ggml_backend_buft_name(first), "CPU_T2P") != 0, "CPU_T2P picked while absent");
            }
        }
    }
}

void check_placement(const env_t & env) {
    int n = 0;
    ++n;
    CHECK(placement_accepts(env, TYPE_PQ2_0, 896, 64, GGML_TYPE_F32, 512, 1, false, false), "PQ2_0 896x64 declined");
    ++n;
    CHECK(placement_accepts(env, TYPE_PQ2_0, 17408, 4100, GGML_TYPE_F32, 1, 1, false, false), "PQ2_0 17408x4100 declined");
    ++n;
    CHECK(placement_accepts(env, TYPE_PQ2_0, 896, 64, GGML_TYPE_F32, 5, 3, false, false), "3-D src1 declined");
    ++n;
    CHECK(!placement_accepts(env, TYPE_PQ2_0, 896, 6, GGML_TYPE_F32, 512, 1, false, false), "rows %% 4 != 0 accepted");
    ++n;
    CHECK(!placement_accepts(env, TYPE_PQ2_0, 896, 64, GGML_TYPE_F16, 512, 1, false, false), "F16 src1 accepted");
#if GGML_T2P_HAVE_HADAMARD_HINT
    ++n;
    CHECK(!placement_accepts(env, TYPE_PQ2_0, 896, 64, GGML_TYPE_F32, 512, 1, true, false), "Hadamard hint accepted");
#endif
    ++n;
    CHECK(!placement_accepts(env, GGML_TYPE_Q4_0, 896, 64, GGML_TYPE_F32, 512, 1, false, false), "Q4_0 accepted");
    // GET_ROWS (the token embedding's lookup) is ours unless GGML_T2P_EMBED is off
    const bool embed = embed_on();
    ++n;
    CHECK(placement_accepts(env, TYPE_PQ2_0, 896, 64, GGML_TYPE_F32, 1, 1, false, true) == embed, "GET_ROWS: accepted %d, GGML_T2P_EMBED on %d",
          !embed, embed);
    ++n;
    CHECK(!placement_accepts(env, TYPE_PQ2_0, 896, 6, GGML_TYPE_F32, 1, 1, false, true), "GET_ROWS with rows %% 4 != 0 accepted");
    if (host_has_ptq1()) {
        ++n;
        CHECK(placement_accepts(env, TYPE_PTQ1_0, 896, 64, GGML_TYPE_F32, 512, 1, false, false), "PTQ1_0 896x64 declined");
        ++n;
        CHECK(placement_accepts(env, TYPE_PTQ1_0, 4864, 896, GGML_TYPE_F32, 1, 1, false, false), "PTQ1_0 4864x896 declined");
        ++n;
        CHECK(!placement_accepts(env, TYPE_PTQ1_0, 896, 6, GGML_TYPE_F32, 512, 1, false, false), "PTQ1_0 rows %% 4 != 0 accepted");
        ++n;
        CHECK(placement_accepts(env, TYPE_PTQ1_0, 896, 64, GGML_TYPE_F32, 1, 1, false, true) == embed, "PTQ1_0 GET_ROWS: GGML_T2P_EMBED on %d", embed);
    }
    std::printf("placement checks: %d\n", n);
}

// The shim advises each CPU_T2P buffer as transparent huge pages when GGML_T2P_HUGE_PAGES=1 (default off):
// allocate one of 8 MiB and read the kernel's verdict on a 2 MiB page inside it from
// /proc/self/smaps (THPeligible). Natively on x86-64 Linux only: under qemu-user, madvise is not
// passed on and smaps describes the emulator's own mappings.
void check_huge_pages(const env_t & env) {
#if defined(__linux__) && defined(__x86_64__)
    std::string mode;
    if (FILE * f = std::fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r")) {
        char line[128] = { 0 };
        if (std::fgets(line, sizeof line, f)) {
            const char * a = std::strchr(line, '[');
            const char * b = a ? std::strchr(a, ']') : nullptr;
            if (a && b) {
                mode.assign(a + 1, b);
            }
        }
        std::fclose(f);
    }
    const char * v       = std::getenv("GGML_T2P_HUGE_PAGES");
    const bool   advised = v && (!std::strcmp(v, "1") || !std::strcmp(v, "on") || !std::strcmp(v, "true") || !std::strcmp(v, "yes"));
    if (mode != "always" && mode != "madvise") {
        std::printf("huge pages: not checked (transparent huge pages '%s')\n", mode.c_str());
        return;
    }
    ggml_backend_buffer_t buf = ggml_backend_buft_alloc_buffer(env.t2p, size_t(8) << 20);
    CHECK(buf != nullptr, "CPU_T2P buffer of 8 MiB not allocated");
    if (buf == nullptr) {
        return;
    }
    const uintptr_t huge = uintptr_t(2) << 20;
    const uintptr_t page = (reinterpret_cast<uintptr_t>(ggml_backend_buffer_get_base(buf)) + huge - 1) & ~(huge - 1);
    int eligible = -1;
    if (FILE * f = std::fopen("/proc/self/smaps", "r")) {
        char line[512];
        bool inside = false;
        while (std::fgets(line, sizeof line, f)) {
            unsigned long lo = 0, hi = 0;
            if (std::sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {   // a mapping's header line
                inside = lo <= page && page + huge <= hi;
            } else if (inside && std::sscanf(line, "THPeligible: %d", &eligible) == 1) {
                break;
            }
        }
        std::fclose(f);
    }
    ggml_backend_buffer_free(buf);
    const int expect = (mode == "always" || advised) ? 1 : 0;
    if (eligible < 0) {
        std::printf("huge pages: not checked (no THPeligible line in /proc/self/smaps)\n");
        return;
    }
    std::printf("huge pages: THP mode %s, GGML_T2P_HUGE_PAGES %s: a 2 MiB page of a CPU_T2P buffer is THPeligible %d (expected %d)\n",
                mode.c_str(), advised ? "on" : "off", eligible, expect);
    CHECK(eligible == expect, "CPU_T2P buffer THPeligible %d, expected %d", eligible, expect);
#else
    (void) env;
    std::printf("huge pages: not checked (natively on x86-64 Linux only)\n");
#endif
}

// Whether this ggml's type `id` is the ternary type the plugin expects (as the shim checks it).
bool host_has_type(int id, int64_t blck, size_t size) {
    if (static_cast<int>(GGML_TYPE_COUNT) <= id) {
        return false;
    }
    return ggml_blck_size(static_cast<ggml_type>(id)) == blck && ggml_type_size(static_cast<ggml_type>(id)) == size;
}

bool host_has_pq2() {
    return host_has_type(GGML_T2P_TYPE_PQ2_0, 128, PQ2_0_BYTES);
}

bool host_has_ptq1() {
    return host_has_type(GGML_T2P_TYPE_PTQ1_0, 128, PTQ1_0_BYTES);
}

bool plugin_expected() {
    const char * on = std::getenv("GGML_T2P");
    if (on && (!std::strcmp(on, "0") || !std::strcmp(on, "off") || !std::strcmp(on, "false") || !std::strcmp(on, "no"))) {
        return false;
    }
    const char * k      = std::getenv("GGML_T2P_KERNEL");
    int32_t      kernel = GGML_T2P_KERNEL_AUTO;
    if (k && *k && ggml_t2p_kernel_from_name(k, &kernel) != GGML_T2P_OK) {
        kernel = GGML_T2P_KERNEL_AUTO;   // the shim warns and uses auto
    }
    int32_t layout = -1;
    if (ggml_t2p_layout_for(GGML_T2P_TYPE_PQ2_0, kernel, 0, &layout) != GGML_T2P_OK &&
        (kernel == GGML_T2P_KERNEL_AUTO || ggml_t2p_assume_kernel(kernel) != GGML_T2P_OK)) {
        return false;   // as the shim: an explicit level the OS cannot confirm is assumed
    }
    return host_has_pq2() || host_has_type(GGML_T2P_TYPE_PTQ1_0, 128, 28);   // else the shim declines
}

// With the plugin absent: the weights go where the loader would put them (another extra buffer type, such
// as the fork's CPU_REPACK, or none), and that path's output must lie within the stock bound of the
// library's reference (it quantizes activations to Q8_0 or Q8_K, as stock does). Returns the cases run.
int64_t check_host_path(const env_t & env, std::mt19937 & rng) {
    int64_t cases = 0;
    for (ggml_type t : { TYPE_PQ2_0, TYPE_PTQ1_0 }) {
        if (t == TYPE_PTQ1_0 && !host_has_ptq1()) {
            continue;
        }
        for (const auto & rk : { std::pair<int64_t, int64_t>{ 64, 896 }, std::pair<int64_t, int64_t>{ 96, 5120 } }) {
            ggml_backend_buffer_type_t taker = first_taker(env, t, rk.second, rk.first, 1);
            if (taker == nullptr) {
                std::printf("host path %s rows %" PRId64 " k %" PRId64 ": no extra buffer type takes it (stock code, checked above)\n",
                            ggml_type_name(t), rk.first, rk.second);
                continue;
            }
            env_t other = env;
            other.t2p   = taker;   // placed_weights puts "wt" there
            weight_matrix  w = make_weights(rng, rk.first, rk.second, (int32_t) t);
            placed_weights pw(other, w);
            reference      ref(w);
            double max_ratio = 0;
            for (int64_t n : { 1, 3, 4, 8, 33, 70 }) {
                const std::vector<float> x = make_activations(rng, w.k, n);
                const ggml_init_params ip  = { 4 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true };
                ggml_context *         ctx = ggml_init(ip);
                ggml_tensor *          xt  = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, w.k, n);
                ggml_tensor *          yt  = ggml_mul_mat(ctx, pw.wt, xt);
                ggml_cgraph *          g   = ggml_new_graph(ctx);
                ggml_build_forward_expand(g, yt);
                ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, env.backend);
                ggml_backend_tensor_set(xt, x.data(), 0, x.size() * sizeof(float));
                ggml_backend_cpu_set_n_threads(env.backend, 2);
                CHECK(ggml_backend_graph_compute(env.backend, g) == GGML_STATUS_SUCCESS, "graph compute (%s)", ggml_backend_buft_name(taker));
                std::vector<float> out((size_t) (w.rows * n));
                ggml_backend_tensor_get(yt, out.data(), 0, out.size() * sizeof(float));
                const std::vector<float> yr    = ref.gemm(x, n);
                const std::vector<float> bound = stock_bound(w, per_element_error(x, w.k, n), n);
                int64_t over = 0;
                for (size_t i = 0; i < out.size(); ++i) {
                    const double diff = std::fabs((double) out[i] - (double) yr[i]);
                    max_ratio         = std::max(max_ratio, diff / bound[i]);
                    over += !(diff <= bound[i]);
                }
                CHECK(over == 0, "%s path outside the bound: %s rows %" PRId64 " k %" PRId64 " cols %" PRId64 ": %" PRId64 " elements",
                      ggml_backend_buft_name(taker), ggml_type_name(t), w.rows, w.k, n, over);
                ++cases;
                ggml_backend_buffer_free(buf);
                ggml_free(ctx);
            }
            std::printf("host path %s rows %" PRId64 " k %" PRId64 ": weights in %s, 6 widths, max diff/bound %.3f\n",
                        ggml_type_name(t), rk.first, rk.second, ggml_backend_buft_name(taker), max_ratio);
            std::fflush(stdout);
        }
    }
    return cases;
}

std::vector<int64_t> widths_all() {
    std::vector<int64_t> v;
    for (int64_t n = 1; n <= 70; ++n) v.push_back(n);
    return v;
}

}  // namespace

int main(int argc, char ** argv) {
    // --quick: fewer widths (for slow emulators); default is the full matrix.
    const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
    const auto t_start = clock_type::now();

    ggml_cpu_init();
    env_t env;
    env.backend = ggml_backend_cpu_init();
    env.dev     = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    if (env.backend == nullptr || env.dev == nullptr) {
        std::fprintf(stderr, "no CPU backend\n");
        return 1;
    }
    const uint32_t feat = ggml_t2p_cpu_features();
    std::printf("libggml_t2p %s; CPU features:%s%s%s%s%s%s; best kernel %s; GGML_T2P_KERNEL=%s\n", ggml_t2p_version(),
                feat & GGML_T2P_CPU_NEON ? " neon" : "", feat & GGML_T2P_CPU_DOTPROD ? " dotprod" : "",
                feat & GGML_T2P_CPU_I8MM ? " i8mm" : "", feat & GGML_T2P_CPU_AVX2 ? " avx2" : "",
                feat & GGML_T2P_CPU_AVXVNNI ? " avxvnni" : "", feat & GGML_T2P_CPU_AVX512VNNI ? " avx512vnni" : "",
                ggml_t2p_best_kernel() ? ggml_t2p_kernel_name(ggml_t2p_best_kernel()) : "none",
                std::getenv("GGML_T2P_KERNEL") ? std::getenv("GGML_T2P_KERNEL") : "(unset)");

    env.t2p             = find_t2p_buft(env.dev);
    const bool expected = plugin_expected();
    if (env.t2p == nullptr) {
        std::printf("CPU_T2P absent: the plugin declined (%s)%s\n", expected ? "UNEXPECTED" : "expected",
                    host_has_pq2() ? "; checking the stock path only" : "");
    } else {
        std::printf("CPU_T2P present\n");
    }
    CHECK((env.t2p != nullptr) == expected, "CPU_T2P presence %d, expected %d", env.t2p != nullptr, expected);
    if (!host_has_pq2()) {
        std::printf("this ggml has no PQ2_0 (type %d; GGML_TYPE_COUNT %d): only the plugin's decline is checked\n",
                    GGML_T2P_TYPE_PQ2_0, (int) GGML_TYPE_COUNT);
        std::printf("%s: plugin %s on a ggml without PQ2_0, %d failures, %.1f s\n", g_failures == 0 ? "PASS" : "FAIL",
                    env.t2p ? "present" : "declined", g_failures, seconds_since(t_start));
        ggml_backend_free(env.backend);
        return g_failures == 0 ? 0 : 1;
    }
    if (env.t2p) {
        check_placement(env);
        check_huge_pages(env);
    }
    check_precedence(env);

    struct shape {
        int64_t              rows, k;
        std::vector<int64_t> widths;
        std::vector<int>     threads;
        int32_t              type = GGML_T2P_TYPE_PQ2_0;
    };
    const std::vector<int64_t> some      = { 1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 17, 31, 33, 64, 70 };
    const std::vector<int64_t> few       = { 1, 3, 4, 8, 70 };
    const std::vector<shape>   shapes    = {
        { 64,   896,   quick ? some : widths_all(), { 1, 3 } },   // K % 256 == 128: padded rows
        { 64,   1024,  quick ? some : widths_all(), { 1, 3 } },
        { 64,   5120,  quick ? some : widths_all(), { 1, 3 } },
        { 64,   17408, quick ? few : widths_all(),  { 1, 3 } },
        { 64,   128,   some,                        { 1, 2 } },   // one block, padded to 256
        { 32,   640,   some,                        { 1, 4 } },
        { 4100, 896,   quick ? few : some,          { 1, 4 } },
        { 4100, 1024,  few,                         { 2 } },
        { 4100, 5120,  { 1, 8 },                    { 3 } },
        { 896,  4864,  few,                         { 2 } },      // Qwen2.5-0.5B ffn_down
    };
    // PTQ1_0 (where this ggml has type 143): the same paths with fewer widths.
    const std::vector<shape> shapes_ptq1 = {
        { 64,   896,   some,                        { 1, 3 }, GGML_T2P_TYPE_PTQ1_0 },
        { 64,   5120,  quick ? few : some,          { 1, 3 }, GGML_T2P_TYPE_PTQ1_0 },
        { 64,   128,   few,                         { 1, 2 }, GGML_T2P_TYPE_PTQ1_0 },
        { 32,   640,   few,                         { 1, 4 }, GGML_T2P_TYPE_PTQ1_0 },
        { 4100, 896,   few,                         { 1, 4 }, GGML_T2P_TYPE_PTQ1_0 },
        { 896,  4864,  few,                         { 2 },    GGML_T2P_TYPE_PTQ1_0 },
    };
    std::vector<shape> all_shapes = shapes;
    if (host_has_ptq1()) {
        all_shapes.insert(all_shapes.end(), shapes_ptq1.begin(), shapes_ptq1.end());
    } else {
        std::printf("this ggml has no PTQ1_0 (type %d): PTQ1_0 cases skipped\n", GGML_T2P_TYPE_PTQ1_0);
    }

    std::mt19937 rng(20240607);
    totals       all;
    int64_t ptq1_bitwise = 0, get_rows_runs = 0;
    for (const shape & s : all_shapes) {
        const auto    t0 = clock_type::now();
        totals        tot;
        weight_matrix w  = make_weights(rng, s.rows, s.k, s.type);
        placed_weights pw(env, w);
        reference      ref(w);
        for (int64_t n : s.widths) {
            run_case(env, w, pw, ref, n, 1, s.threads, rng, tot);
        }
        if (s.rows == 64 && s.k == 896 && s.type == GGML_T2P_TYPE_PQ2_0) {   // src1 with more dims: a 2-D weight broadcasts; an empty batch
            run_case(env, w, pw, ref, 0, 1, { 1, 3 }, rng, tot);
            run_case(env, w, pw, ref, 5, 3, { 1, 3 }, rng, tot);
            run_case(env, w, pw, ref, 1, 2, { 2 }, rng, tot);
        }
        get_rows_runs += check_get_rows(env, w, pw, rng);
        if (s.type == GGML_T2P_TYPE_PTQ1_0) {
            ptq1_bitwise += tot.cases_bitwise;
        }
        std::printf("%-6s rows %5" PRId64 " k %5" PRId64 ": %4" PRId64 " bitwise runs, %3" PRId64
                    " stock runs; stock vs ref max|diff| %.3g, max|diff|/max|ref| %.2e, max diff/bound %.3f; "
                    "t2p %.2fs stock %.2fs ref %.2fs bound %.2fs, total %.1fs\n",
                    s.type == GGML_T2P_TYPE_PTQ1_0 ? "PTQ1_0" : "PQ2_0", s.rows, s.k, tot.cases_bitwise, tot.cases_stock, tot.max_abs, tot.max_rel, tot.max_ratio, tot.t_t2p,
                    tot.t_stock, tot.t_ref, tot.t_bound, seconds_since(t0));
        std::fflush(stdout);
        all.cases_bitwise += tot.cases_bitwise;
        all.cases_stock += tot.cases_stock;
        all.max_abs   = std::max(all.max_abs, tot.max_abs);
        all.max_rel   = std::max(all.max_rel, tot.max_rel);
        all.max_ratio = std::max(all.max_ratio, tot.max_ratio);
    }

    if (env.t2p == nullptr) {
        const int64_t n_host = check_host_path(env, rng);
        std::printf("host path (plugin absent): %" PRId64 " cases through another extra buffer type\n", n_host);
    }

    std::printf("GET_ROWS: %" PRId64 " runs equal to stock's bits\n", get_rows_runs);
    CHECK((get_rows_runs > 0) == (env.t2p != nullptr && embed_on()), "GET_ROWS runs %" PRId64 " (CPU_T2P %d, GGML_T2P_EMBED on %d)",
          get_rows_runs, env.t2p != nullptr, embed_on());
    std::printf("%s: %" PRId64 " bitwise cases (t2p == ref; %" PRId64 " of them PTQ1_0), %" PRId64
                " stock cases (max|diff| %.3g, max rel %.2e, max diff/bound %.3f), %d failures, %.1f s\n",
                g_failures == 0 ? "PASS" : "FAIL", all.cases_bitwise, ptq1_bitwise, all.cases_stock, all.max_abs, all.max_rel,
                all.max_ratio, g_failures, seconds_since(t_start));
    ggml_backend_free(env.backend);
    return g_failures == 0 ? 0 : 1;
}
