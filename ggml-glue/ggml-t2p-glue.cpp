// ggml-t2p-glue.cpp - CPU_T2P: a ggml-cpu extra buffer type that runs PQ2_0 (and PTQ1_0) MUL_MATs
// through libggml_t2p.
//
// Data flow: llama.cpp places a weight here when supports_op accepts a MUL_MAT on it; set_tensor
// repacks the whole tensor through ggml_t2p_repack; each MUL_MAT quantizes src1 with ggml's own
// Q8_K quantizer into wdata (rows split across threads, zero-padded to a multiple of 256), meets at a
// barrier, then hands out chunks of 4-row groups to ggml_t2p_gemv / ggml_t2p_gemm.
// This file knows ggml; it knows nothing of the T2P byte order (the library owns that).

#include "ggml-t2p-glue.h"

#include "ggml_t2p.h"

#include "ggml-backend-impl.h"
#include "ggml-cpu-impl.h"
#include "ggml-cpu.h"
#include "ggml-impl.h"
#include "traits.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

// ---------------------------------------------------------------------------------------------
// Configuration: environment, CPU and library checks, made once.

struct t2p_config {
    bool        enabled     = false;
    int32_t     kernel      = 0;                       // the concrete level passed to gemv/gemm
    int32_t     ptq1_layout = GGML_T2P_LAYOUT_T2P;     // layout for PTQ1_0 weights
    bool        ptq1_known  = false;                   // the host ggml has PTQ1_0 (id 143, 128/28)
};

const char * env_value(const char * name) {
    const char * v = std::getenv(name);
    return (v != nullptr && *v != '\0') ? v : nullptr;
}

bool host_knows_ptq1_0() {
    const int id = GGML_T2P_TYPE_PTQ1_0;
    if (static_cast<int>(GGML_TYPE_COUNT) <= id) {
        return false;
    }
    const auto t = static_cast<ggml_type>(id);
    return ggml_blck_size(t) == 128 && ggml_type_size(t) == 28;
}

t2p_config make_config() {
    t2p_config cfg;

    // GGML_T2P: on unless 0/off/false/no.
    if (const char * v = env_value("GGML_T2P")) {
        const std::string s = v;
        if (s == "0" || s == "off" || s == "false" || s == "no") {
            GGML_LOG_INFO("ggml-t2p: disabled (GGML_T2P=%s)\n", v);
            return cfg;
        }
        if (!(s == "1" || s == "on" || s == "true" || s == "yes")) {
            GGML_LOG_WARN("ggml-t2p: unknown GGML_T2P=%s (expected 0 or 1), using 1\n", v);
        }
    }

    if (ggml_t2p_abi_version() != GGML_T2P_ABI_VERSION) {
        GGML_LOG_WARN("ggml-t2p: disabled (libggml_t2p ABI %u, header ABI %d)\n",
                      (unsigned) ggml_t2p_abi_version(), GGML_T2P_ABI_VERSION);
        return cfg;
    }

    // GGML_T2P_KERNEL: auto (default), ref, dotprod, i8mm.
    int32_t requested = GGML_T2P_KERNEL_AUTO;
    if (const char * v = env_value("GGML_T2P_KERNEL")) {
        const std::string s = v;
        if (s == "ref") {
            requested = GGML_T2P_KERNEL_REF;
        } else if (s == "dotprod") {
            requested = GGML_T2P_KERNEL_DOTPROD;
        } else if (s == "i8mm") {
            requested = GGML_T2P_KERNEL_I8MM;
        } else if (s != "auto") {
            GGML_LOG_WARN("ggml-t2p: unknown GGML_T2P_KERNEL=%s (expected auto, ref, dotprod or i8mm), using auto\n", v);
        }
    }
    if (requested == GGML_T2P_KERNEL_AUTO) {
        cfg.kernel = ggml_t2p_best_kernel();
        if (cfg.kernel == 0) {
            GGML_LOG_INFO("ggml-t2p: CPU has no dotprod, declining (GGML_T2P_KERNEL=ref forces the scalar kernel)\n");
            return cfg;
        }
    } else {
        cfg.kernel = requested;
        if (ggml_t2p_supports(GGML_T2P_TYPE_PQ2_0, GGML_T2P_LAYOUT_T2P, requested, 4, 128) != GGML_T2P_OK) {
            GGML_LOG_WARN("ggml-t2p: CPU cannot run GGML_T2P_KERNEL=%s, declining\n", ggml_t2p_kernel_name(requested));
            return cfg;
        }
    }

    // GGML_T2P_PTQ1: t2p (default) or native (PTQ1_0x4).
    if (const char * v = env_value("GGML_T2P_PTQ1")) {
        const std::string s = v;
        if (s == "native") {
            cfg.ptq1_layout = GGML_T2P_LAYOUT_PTQ1_0X4;
        } else if (s != "t2p") {
            GGML_LOG_WARN("ggml-t2p: unknown GGML_T2P_PTQ1=%s (expected t2p or native), using t2p\n", v);
        }
    }
    cfg.ptq1_known = host_knows_ptq1_0();

    cfg.enabled = true;
    GGML_LOG_INFO("ggml-t2p: enabled (libggml_t2p %s, kernel %s; PQ2_0 -> T2P, PTQ1_0 %s)\n", ggml_t2p_version(),
                  ggml_t2p_kernel_name(cfg.kernel),
                  !cfg.ptq1_known                                  ? "not in this ggml"
                  : cfg.ptq1_layout == GGML_T2P_LAYOUT_PTQ1_0X4     ? "-> PTQ1_0x4"
                                                                    : "-> T2P");
    return cfg;
}

const t2p_config & config() {
    static const t2p_config cfg = make_config();
    return cfg;
}

// The layout a weight type is repacked into, or -1 when the plugin does not take the type.
int32_t layout_for(ggml_type type) {
    if (static_cast<int>(type) == GGML_T2P_TYPE_PQ2_0) {
        return GGML_T2P_LAYOUT_T2P;
    }
    if (static_cast<int>(type) == GGML_T2P_TYPE_PTQ1_0 && config().ptq1_known) {
        return config().ptq1_layout;
    }
    return -1;
}

// ---------------------------------------------------------------------------------------------
// Load statistics, reported once at the first MUL_MAT.

struct t2p_stats {
    std::atomic<int64_t>  n_t2p{ 0 };
    std::atomic<int64_t>  n_x4{ 0 };
    std::atomic<uint64_t> bytes{ 0 };
    std::atomic<int64_t>  nanos{ 0 };
    std::atomic<bool>     reported{ false };
};

t2p_stats & stats() {
    static t2p_stats s;
    return s;
}

void report_once() {
    t2p_stats & s = stats();
    if (s.reported.load(std::memory_order_relaxed) || s.reported.exchange(true)) {
        return;
    }
    const int64_t n_t2p = s.n_t2p.load();
    const int64_t n_x4  = s.n_x4.load();
    const char *  to    = n_x4 == 0 ? "T2P" : n_t2p == 0 ? "PTQ1_0x4" : "T2P/PTQ1_0x4";
    GGML_LOG_INFO("ggml-t2p: %lld tensor%s repacked to %s (%.1f MiB) in %.2f s; kernel %s\n",
                  (long long) (n_t2p + n_x4), n_t2p + n_x4 == 1 ? "" : "s", to, s.bytes.load() / (1024.0 * 1024.0), s.nanos.load() * 1e-9,
                  ggml_t2p_kernel_name(config().kernel));
}

[[noreturn]] void abort_status(const char * what, const ggml_tensor * t, int32_t status) {
    GGML_ABORT("ggml-t2p: %s failed for %s: %s (%d)", what, t->name, ggml_t2p_status_string(status), (int) status);
}

// ---------------------------------------------------------------------------------------------
// Which MUL_MATs the plugin runs. Called with the weight in a (possibly zero-size, dummy) buffer of
// our type: llama.cpp's weight placement and the scheduler ask the same question.

bool mul_mat_ok(const ggml_tensor * op) {
    const ggml_tensor * src0 = op->src[0];
    const ggml_tensor * src1 = op->src[1];
    if (op->op != GGML_OP_MUL_MAT || src0 == nullptr || src1 == nullptr) {
        return false;
    }
    const int32_t layout = layout_for(src0->type);
    if (layout < 0) {
        return false;
    }
    // The Hadamard hint routes the op to stock's FWHT (ggml-cpu.c); never ours.
    if (ggml_get_op_params_i32(op, 1) == GGML_HINT_SRC0_IS_HADAMARD) {
        return false;
    }
    // Weight: a 2-D contiguous matrix, rows % 4 == 0 and K % 128 == 0.
    if (src0->ne[2] != 1 || src0->ne[3] != 1 || !ggml_is_contiguous(src0)) {
        return false;
    }
    if (src0->ne[1] % 4 != 0 || src0->ne[0] % 128 != 0) {
        return false;
    }
    // Activations: F32 rows, elements contiguous. A 2-D weight broadcasts over src1's dims 2 and 3,
    // so those are just more columns (see forward_mul_mat).
    if (src1->type != GGML_TYPE_F32 || src1->nb[0] != sizeof(float) || src1->ne[0] != src0->ne[0]) {
        return false;
    }
    // Output: contiguous F32, so column c of the flattened batch is at c * nb[1].
    if (op->type != GGML_TYPE_F32 || !ggml_is_contiguous(op) || op->ne[0] != src0->ne[1]) {
        return false;
    }
    return ggml_t2p_supports(src0->type, layout, config().kernel, src0->ne[1], src0->ne[0]) == GGML_T2P_OK;
}

// ---------------------------------------------------------------------------------------------
// wdata layout of one MUL_MAT:
//   [up to 63 bytes to reach a 64-byte boundary]
//   [Q8_K activations: n_cols rows of ceil(K/256) blocks, rounded up to 64 bytes]
//   [per thread, only when K % 256 != 0: a float buffer of ceil(K/256)*256, rounded up to 64 bytes]

constexpr size_t WDATA_ALIGN = 64;

size_t round_up(size_t n, size_t a) {
    return (n + a - 1) / a * a;
}

struct work_plan {
    int64_t k       = 0;   // row length
    int64_t k_pad   = 0;   // k rounded up to 256
    int64_t n_cols  = 0;   // src1 rows over all of its dims
    size_t  act_row = 0;   // bytes of one quantized column
    size_t  act     = 0;   // bytes of all quantized columns
    size_t  pad     = 0;   // bytes of one thread's padding buffer (0: none needed)

    size_t bytes(int n_threads) const {
        return (WDATA_ALIGN - 1) + round_up(act, WDATA_ALIGN) + (size_t) n_threads * pad;
    }
};

work_plan plan_for(const ggml_tensor * op) {
    const ggml_tensor * src1 = op->src[1];
    work_plan p;
    p.k      = src1->ne[0];
    p.k_pad  = (p.k + 255) / 256 * 256;
    p.n_cols = src1->ne[1] * src1->ne[2] * src1->ne[3];
    int32_t st = ggml_t2p_act_size(p.k, 1, &p.act_row);
    if (st != GGML_T2P_OK) {
        abort_status("ggml_t2p_act_size", op, st);
    }
    st = ggml_t2p_act_size(p.k, p.n_cols, &p.act);
    if (st != GGML_T2P_OK) {
        abort_status("ggml_t2p_act_size", op, st);
    }
    p.pad = p.k_pad != p.k ? round_up((size_t) p.k_pad * sizeof(float), WDATA_ALIGN) : 0;
    return p;
}

// ---------------------------------------------------------------------------------------------

class tensor_traits : public ggml::cpu::tensor_traits {
  public:
    bool work_size(int n_threads, const ggml_tensor * op, size_t & size) override {
        if (op->op != GGML_OP_MUL_MAT || !mul_mat_ok(op)) {
            return false;
        }
        size = plan_for(op).bytes(n_threads);
        return true;
    }

    bool compute_forward(ggml_compute_params * params, ggml_tensor * op) override {
        if (op->op != GGML_OP_MUL_MAT) {
            return false;
        }
        // A weight in our buffer holds repacked bytes: stock code must never see it, so an op we
        // cannot run here is a bug (supports_op declined it and the scheduler ran it anyway).
        if (!mul_mat_ok(op)) {
            GGML_ABORT("ggml-t2p: MUL_MAT %s on weight %s (%s) is not supported by CPU_T2P", op->name,
                       op->src[0]->name, ggml_type_name(op->src[0]->type));
        }
        report_once();
        forward_mul_mat(params, op);
        return true;
    }

  private:
    static void forward_mul_mat(ggml_compute_params * params, ggml_tensor * op) {
        const ggml_tensor * src0 = op->src[0];
        const ggml_tensor * src1 = op->src[1];
        const int           ith  = params->ith;
        const int           nth  = params->nth;

        const work_plan p = plan_for(op);
        if (p.n_cols == 0) {
            return;   // an empty batch (e.g. the last layer when no output is kept): every thread leaves
        }
        GGML_ASSERT(p.bytes(nth) <= params->wsize);

        char * const base = (char *) round_up((uintptr_t) params->wdata, WDATA_ALIGN);
        char * const act  = base;
        float *      pad  = nullptr;
        if (p.pad != 0) {
            pad = (float *) (base + round_up(p.act, WDATA_ALIGN) + (size_t) ith * p.pad);
            std::memset(pad + p.k, 0, (size_t) (p.k_pad - p.k) * sizeof(float));
        }

        // 1. Quantize src1 columns to Q8_K with ggml's own quantizer (the same bits as stock).
        const ggml_from_float_t from_float = ggml_get_type_traits_cpu(GGML_TYPE_Q8_K)->from_float;
        const int64_t           ne11       = src1->ne[1];
        const int64_t           ne12       = src1->ne[2];
        for (int64_t c = ith; c < p.n_cols; c += nth) {
            const int64_t i11 = c % ne11;
            const int64_t i12 = (c / ne11) % ne12;
            const int64_t i13 = c / (ne11 * ne12);
            const float * row = (const float *) ((const char *) src1->data + i11 * src1->nb[1] + i12 * src1->nb[2] +
                                                 i13 * src1->nb[3]);
            void * out = act + (size_t) c * p.act_row;
            if (pad != nullptr) {
                std::memcpy(pad, row, (size_t) p.k * sizeof(float));
                from_float(pad, out, p.k_pad);
            } else {
                from_float(row, out, p.k);
            }
        }

        if (ith == 0) {
            // Every thread starts on chunk ith, so the first free chunk is nth.
            ggml_threadpool_chunk_set(params->threadpool, nth);
        }
        ggml_barrier(params->threadpool);

        // 2. Hand out chunks of whole 4-row groups.
        const int64_t n_rows   = src0->ne[1];
        const int64_t n_groups = n_rows / 4;
        int64_t       n_chunks = (nth == 1 || ggml_is_numa()) ? nth : (int64_t) nth * 4;
        n_chunks               = std::min(n_chunks, n_groups);
        const int64_t per      = (n_groups + n_chunks - 1) / n_chunks;
        n_chunks               = (n_groups + per - 1) / per;

        const int32_t layout = layout_for(src0->type);
        const int32_t kernel = config().kernel;
        size_t        w_size = 0;
        int32_t       st     = ggml_t2p_repacked_size(src0->type, layout, n_rows, p.k, &w_size);
        if (st != GGML_T2P_OK) {
            abort_status("ggml_t2p_repacked_size", src0, st);
        }
        float * const dst        = (float *) op->data;
        const size_t  dst_len    = (size_t) ggml_nelements(op);
        const int64_t col_stride = (int64_t) (op->nb[1] / sizeof(float));

        for (int64_t chunk = ith; chunk < n_chunks; chunk = ggml_threadpool_chunk_add(params->threadpool, 1)) {
            const int64_t r0 = chunk * per * 4;
            const int64_t r1 = std::min(n_rows, r0 + per * 4);
            if (p.n_cols == 1) {
                st = ggml_t2p_gemv(layout, kernel, src0->data, w_size, n_rows, p.k, act, p.act, dst, dst_len, r0, r1);
            } else {
                st = ggml_t2p_gemm(layout, kernel, src0->data, w_size, n_rows, p.k, act, p.act, p.n_cols, dst, dst_len,
                                   col_stride, r0, r1);
            }
            if (st != GGML_T2P_OK) {
                abort_status(p.n_cols == 1 ? "ggml_t2p_gemv" : "ggml_t2p_gemm", op, st);
            }
        }
    }
};

tensor_traits & traits() {
    static tensor_traits t;
    return t;
}

class extra_buffer_type : public ggml::cpu::extra_buffer_type {
  public:
    bool supports_op(ggml_backend_dev_t, const ggml_tensor * op) override {
        if (op->op != GGML_OP_MUL_MAT || op->src[0] == nullptr || op->src[1] == nullptr) {
            return false;
        }
        const ggml_tensor * src0 = op->src[0];
        if (src0->buffer == nullptr || src0->buffer->buft != ggml_backend_cpu_t2p_buffer_type()) {
            return false;
        }
        const ggml_tensor * src1 = op->src[1];
        if (src1->buffer != nullptr && !ggml_backend_buft_is_host(src1->buffer->buft)) {
            return false;
        }
        return mul_mat_ok(op);
    }

    ggml::cpu::tensor_traits * get_tensor_traits(const ggml_tensor * op) override {
        if (op->op == GGML_OP_MUL_MAT && op->src[0] != nullptr && op->src[0]->buffer != nullptr &&
            op->src[0]->buffer->buft == ggml_backend_cpu_t2p_buffer_type()) {
            return (ggml::cpu::tensor_traits *) op->src[0]->extra;
        }
        return nullptr;
    }
};

// ---------------------------------------------------------------------------------------------
// Buffer and buffer type.

enum ggml_status buffer_init_tensor(ggml_backend_buffer_t, ggml_tensor * tensor) {
    tensor->extra = layout_for(tensor->type) >= 0 ? static_cast<ggml::cpu::tensor_traits *>(&traits()) : nullptr;
    return GGML_STATUS_SUCCESS;
}

void buffer_set_tensor(ggml_backend_buffer_t, ggml_tensor * tensor, const void * data, size_t offset, size_t size) {
    if (offset != 0 || size != ggml_nbytes(tensor)) {
        GGML_ABORT("ggml-t2p: partial write to %s (offset %zu, %zu of %zu bytes): CPU_T2P only takes whole tensors",
                   tensor->name, offset, size, ggml_nbytes(tensor));
    }
    const int32_t layout = layout_for(tensor->type);
    if (tensor->extra == nullptr || layout < 0 || tensor->ne[2] != 1 || tensor->ne[3] != 1) {
        GGML_ABORT("ggml-t2p: tensor %s (%s, %lld x %lld x %lld x %lld) cannot be stored in CPU_T2P", tensor->name,
                   ggml_type_name(tensor->type), (long long) tensor->ne[0], (long long) tensor->ne[1],
                   (long long) tensor->ne[2], (long long) tensor->ne[3]);
    }
    size_t  dst_size = 0;
    int32_t st       = ggml_t2p_repacked_size(tensor->type, layout, tensor->ne[1], tensor->ne[0], &dst_size);
    if (st != GGML_T2P_OK) {
        abort_status("ggml_t2p_repacked_size", tensor, st);
    }

    const auto t0 = std::chrono::steady_clock::now();
    st = ggml_t2p_repack(tensor->type, layout, data, size, tensor->ne[1], tensor->ne[0], tensor->data, dst_size);
    const auto t1 = std::chrono::steady_clock::now();
    if (st != GGML_T2P_OK) {
        abort_status("ggml_t2p_repack", tensor, st);
    }

    t2p_stats & s = stats();
    (layout == GGML_T2P_LAYOUT_PTQ1_0X4 ? s.n_x4 : s.n_t2p).fetch_add(1);
    s.bytes.fetch_add(dst_size);
    s.nanos.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
}

const char * buft_get_name(ggml_backend_buffer_type_t) {
    return "CPU_T2P";
}

ggml_backend_buffer_t buft_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size) {
    ggml_backend_buffer_t buffer = ggml_backend_buft_alloc_buffer(ggml_backend_cpu_buffer_type(), size);
    if (buffer == nullptr) {
        return nullptr;
    }
    buffer->buft                = buft;
    buffer->iface.init_tensor   = buffer_init_tensor;
    buffer->iface.set_tensor    = buffer_set_tensor;
    buffer->iface.get_tensor    = nullptr;   // repacked bytes are not the tensor's bytes
    buffer->iface.set_tensor_2d = nullptr;   // fall back to whole-tensor set_tensor
    buffer->iface.get_tensor_2d = nullptr;
    buffer->iface.cpy_tensor    = nullptr;
    return buffer;
}

size_t buft_get_alignment(ggml_backend_buffer_type_t) {
    return TENSOR_ALIGNMENT;
}

size_t buft_get_alloc_size(ggml_backend_buffer_type_t, const ggml_tensor * tensor) {
    size_t        n      = ggml_nbytes(tensor);
    const int32_t layout = layout_for(tensor->type);
    if (layout >= 0 && tensor->ne[2] == 1 && tensor->ne[3] == 1) {
        size_t r = 0;
        if (ggml_t2p_repacked_size(tensor->type, layout, tensor->ne[1], tensor->ne[0], &r) == GGML_T2P_OK) {
            n = std::max(n, r);
        }
    }
    return n;
}

ggml_backend_buffer_type_t make_buffer_type() {
    if (!config().enabled) {
        return nullptr;
    }
    static ggml_backend_buffer_type buft = {
        /* .iface   = */ {
            /* .get_name       = */ buft_get_name,
            /* .alloc_buffer   = */ buft_alloc_buffer,
            /* .get_alignment  = */ buft_get_alignment,
            /* .get_max_size   = */ nullptr,   // SIZE_MAX
            /* .get_alloc_size = */ buft_get_alloc_size,
            /* .is_host        = */ nullptr,   // not host: the bytes are repacked
        },
        /* .device  = */ ggml_backend_reg_dev_get(ggml_backend_cpu_reg(), 0),
        /* .context = */ static_cast<ggml::cpu::extra_buffer_type *>(new extra_buffer_type()),
    };
    return &buft;
}

}  // namespace

ggml_backend_buffer_type_t ggml_backend_cpu_t2p_buffer_type(void) {
    static const ggml_backend_buffer_type_t buft = make_buffer_type();
    return buft;
}
