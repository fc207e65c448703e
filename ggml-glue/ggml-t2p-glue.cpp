// ggml-t2p-glue.cpp - CPU_T2P: a ggml-cpu extra buffer type that runs PQ2_0 (and PTQ1_0) MUL_MATs
// through libggml_t2p.
//
// This file only translates ggml to the library's C ABI (include/ggml_t2p.h, "The ggml plugin").
// At start-up it hands the library ggml's environment, type traits, Q8_K quantizer and log
// (ggml_t2p_plugin_new: the settings, the level and layouts, or why the plugin declines).
// llama.cpp places a weight here when supports_op accepts the MUL_MAT (or, for the token
// embedding, the GET_ROWS) that uses it; set_tensor hands the
// whole tensor to ggml_t2p_plugin_repack (which repacks it, in slices that release the source's
// file pages, and counts it for the load line). On an RPC worker (the patch's ggml-rpc.cpp hunks)
// every tensor of the client's buffers lands here: what is not a weight we take is stored as a CPU
// buffer stores it (repacked() decides, from the tensor alone), and a repacked weight read back
// or written in part goes through its source bytes (ggml_t2p_plugin_unpack). Each MUL_MAT asks
// for the work plan, every thread
// quantizes and packs its share of src1 into the work buffer (ggml_t2p_plugin_act_prepare), meets
// at one barrier, then takes chunks of whole row tiles (ggml_t2p_plugin_mul_mat_rows). A GET_ROWS
// on our weights (the token embedding; accepted so that a tied LM head and its embedding are one
// repacked tensor) goes to ggml_t2p_plugin_get_rows. The float
// ops of Gated-DeltaNet models (GATED_DELTA_NET, SSM_CONV, and the CONCAT of their conv input) and every F32 GET_ROWS (their
// recurrent state's gather, one row that ggml gives to one thread) go to ggml_t2p_plugin_hybrid_op, which
// runs each thread's share or declines (ggml's own op runs). This file
// knows ggml; it knows no byte order, no ISA and no policy (the library owns all three).

#include "ggml-t2p-glue.h"

#include "ggml_t2p.h"

#include "ggml-backend-impl.h"
#include "ggml-cpu-impl.h"
#include "ggml-cpu.h"
#include "ggml-impl.h"
#include "traits.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

// What the host ggml offers, from ggml-t2p-probe.cmake (the CMake fragment defines these as 0 or 1;
// compiled without it, the newest ggml is assumed).
#ifndef GGML_T2P_HAVE_HADAMARD_HINT
#    define GGML_T2P_HAVE_HADAMARD_HINT 1   // GGML_HINT_SRC0_IS_HADAMARD in ggml.h
#endif
#ifndef GGML_T2P_HAVE_TENSOR_2D
#    define GGML_T2P_HAVE_TENSOR_2D 1       // set_tensor_2d/get_tensor_2d in the buffer interface
#endif
#ifndef GGML_T2P_HAVE_CHUNK_API
#    define GGML_T2P_HAVE_CHUNK_API 1       // ggml_threadpool_chunk_set/add
#endif

namespace {

// ---------------------------------------------------------------------------------------------
// The library's plugin, made once: nullptr when disabled (GGML_T2P=0) or declining.

ggml_t2p_plugin * make_plugin() {
    if (ggml_t2p_abi_version() != GGML_T2P_ABI_VERSION) {
        GGML_LOG_WARN("ggml-t2p: disabled (libggml_t2p %s has ABI %u, this shim was built for ABI %d: rebuild both)\n",
                      ggml_t2p_version(), (unsigned) ggml_t2p_abi_version(), GGML_T2P_ABI_VERSION);
        return nullptr;
    }
    // What this ggml is: its environment, its type ids (142 and 143 must be the ternary types the
    // library knows), its own Q8_K quantizer (the library reproduces its bits or calls it) and its log.
    auto env       = [](const char * name) -> const char * { return std::getenv(name); };
    auto host_type = [](int32_t id, int64_t * weights, size_t * bytes, const char ** name) -> int32_t {
        if (id < 0 || id >= static_cast<int32_t>(GGML_TYPE_COUNT)) {
            return 0;
        }
        const auto t = static_cast<ggml_type>(id);
        *weights     = ggml_blck_size(t);
        *bytes       = ggml_type_size(t);
        *name        = ggml_type_name(t);
        return 1;
    };
    auto quantize = [](const float * x, void * y, int64_t n) { ggml_get_type_traits_cpu(GGML_TYPE_Q8_K)->from_float(x, y, n); };
    auto log      = [](int32_t level, const char * line, void *) { ggml_log_internal(static_cast<ggml_log_level>(level), "%s", line); };
    ggml_t2p_plugin * p  = nullptr;
    const int32_t     st = ggml_t2p_plugin_new(env, host_type, quantize, log, nullptr, &p);   // it logs what it decided
    if (st != GGML_T2P_OK && st != GGML_T2P_ERR_UNSUPPORTED) {   // not a decision: a bug, with nothing logged
        GGML_LOG_WARN("ggml-t2p: declining: %s\n", ggml_t2p_status_string(st));
    }
    return st == GGML_T2P_OK ? p : nullptr;
}

ggml_t2p_plugin * plugin() {
    static ggml_t2p_plugin * const p = make_plugin();
    return p;
}

[[noreturn]] void abort_status(const char * what, const ggml_tensor * t, int32_t status) {
    GGML_ABORT("ggml-t2p: %s failed for %s: %s (%d)", what, t->name, ggml_t2p_status_string(status), (int) status);
}

// ---------------------------------------------------------------------------------------------
// Which MUL_MATs the plugin runs. Called with the weight in a (possibly zero-size, dummy) buffer of
// our type: llama.cpp's weight placement and the scheduler ask the same question.

// A weight the plugin may hold: 2-D, contiguous, and not a view (a view would hand the library its
// offset into the source format, never into our layout).
bool weight_ok(const ggml_tensor * w) {
    return w->ne[2] == 1 && w->ne[3] == 1 && ggml_is_contiguous(w) && w->view_src == nullptr;
}

// Whether t's bytes in its buffer are the plugin's repack (else they are t's own bytes): a weight
// the plugin takes, in our buffer type. Decided from the tensor alone, the same way at every step
// (set_tensor, get_tensor, the op's traits), so that a tensor stored plain is computed by stock
// code and a repacked one by ours. In llama.cpp only weights whose ops supports_op accepted land
// in our buffer; an RPC worker (patches/: ggml-rpc.cpp) puts every tensor of the client's buffers
// here, the rest stored as a CPU buffer stores them.
bool repacked(const ggml_tensor * t) {
    return t->buffer != nullptr && t->buffer->buft == ggml_backend_cpu_t2p_buffer_type() && weight_ok(t) &&
           ggml_t2p_plugin_supports(plugin(), t->type, t->ne[1], t->ne[0]) == GGML_T2P_OK;
}

bool mul_mat_ok(const ggml_tensor * op) {
    const ggml_tensor * src0 = op->src[0];
    const ggml_tensor * src1 = op->src[1];
    if (op->op != GGML_OP_MUL_MAT || src0 == nullptr || src1 == nullptr) {
        return false;
    }
#if GGML_T2P_HAVE_HADAMARD_HINT
    // The Hadamard hint routes the op to stock's FWHT (ggml-cpu.c); never ours.
    if (ggml_get_op_params_i32(op, 1) == GGML_HINT_SRC0_IS_HADAMARD) {
        return false;
    }
#endif
    // Weight: a 2-D contiguous matrix of a type the plugin takes (the library checks the type and
    // the shape in ggml_t2p_plugin_supports below).
    if (!weight_ok(src0)) {
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
    return ggml_t2p_plugin_supports(plugin(), src0->type, src0->ne[1], src0->ne[0]) == GGML_T2P_OK;
}

// Which GET_ROWS the plugin runs: a lookup in a 2-D weight of ours (the token embedding) by a 1-D
// I32 id vector into F32 rows. Accepting it places the embedding in our buffer, where a tied LM
// head (llama.cpp's duplicate of token_embd, made in the same buffer type's context) is the same
// tensor: one repacked copy serves both.
bool get_rows_ok(const ggml_tensor * op) {
    const ggml_tensor * src0 = op->src[0];
    const ggml_tensor * src1 = op->src[1];
    if (op->op != GGML_OP_GET_ROWS || src0 == nullptr || src1 == nullptr) {
        return false;
    }
    if (!weight_ok(src0)) {
        return false;
    }
    if (src1->type != GGML_TYPE_I32 || src1->ne[1] != 1 || src1->ne[2] != 1 || src1->ne[3] != 1) {
        return false;
    }
    if (op->type != GGML_TYPE_F32 || op->ne[0] != src0->ne[0] || op->ne[1] != src1->ne[0] || op->ne[2] != 1 ||
        op->ne[3] != 1 || op->nb[0] != sizeof(float)) {
        return false;
    }
    return ggml_t2p_plugin_get_rows_supported(plugin(), src0->type, src0->ne[1], src0->ne[0]) == GGML_T2P_OK;
}

int64_t n_cols_of(const ggml_tensor * op) {
    return op->src[1]->ne[1] * op->src[1]->ne[2] * op->src[1]->ne[3];
}

// ---------------------------------------------------------------------------------------------

class tensor_traits : public ggml::cpu::tensor_traits {
  public:
    bool work_size(int n_threads, const ggml_tensor * op, size_t & size) override {
        if (op->op != GGML_OP_MUL_MAT || !mul_mat_ok(op)) {
            return false;
        }
        const ggml_tensor * src0 = op->src[0];
        const int32_t st = ggml_t2p_plugin_mul_mat_plan(plugin(), src0->type, src0->ne[1], src0->ne[0], n_cols_of(op),
                                                        n_threads, 0, &size, nullptr, nullptr);
        if (st != GGML_T2P_OK) {
            abort_status("ggml_t2p_plugin_mul_mat_plan", op, st);
        }
        return true;
    }

    bool compute_forward(ggml_compute_params * params, ggml_tensor * op) override {
        if (op->op == GGML_OP_GET_ROWS) {
            if (!get_rows_ok(op)) {
                return cannot_run(op);
            }
            ggml_t2p_plugin_report(plugin());   // the load line, at the first op on our weights
            forward_get_rows(params, op);
            return true;
        }
        if (op->op != GGML_OP_MUL_MAT) {
            return false;
        }
        if (!mul_mat_ok(op)) {
            return cannot_run(op);
        }
        ggml_t2p_plugin_report(plugin());   // the load line, at the first MUL_MAT
        forward_mul_mat(params, op);
        return true;
    }

  private:
    // A repacked weight's op we cannot run. In llama.cpp that is a bug (supports_op declined the
    // op and the scheduler ran it anyway); on an RPC worker, which has no supports_op, a client's
    // graph can ask it. Stock code then runs on repacked bytes: its result is wrong, and the error
    // is logged (the first 8 times), but the process lives on.
    static bool cannot_run(const ggml_tensor * op) {
        static std::atomic<int> logged{0};
        if (logged.fetch_add(1) < 8) {
            GGML_LOG_ERROR("ggml-t2p: %s %s on the repacked weight %s (%s): not an op CPU_T2P runs; its result is wrong\n",
                           ggml_op_name(op->op), op->name, op->src[0]->name, ggml_type_name(op->src[0]->type));
        }
        return false;
    }

    static void forward_get_rows(ggml_compute_params * params, ggml_tensor * op);

    static void forward_mul_mat(ggml_compute_params * params, ggml_tensor * op) {
        const ggml_tensor * src0   = op->src[0];
        const ggml_tensor * src1   = op->src[1];
        const int           ith    = params->ith;
        const int           nth    = params->nth;
        const int64_t       n_rows = src0->ne[1];
        const int64_t       k      = src0->ne[0];
        const int64_t       n_cols = n_cols_of(op);
        if (n_cols == 0) {
            return;   // an empty batch (e.g. the last layer when no output is kept): every thread leaves
        }
        int64_t n_chunks   = 0;
        int64_t chunk_rows = 0;
        int32_t st = ggml_t2p_plugin_mul_mat_plan(plugin(), src0->type, n_rows, k, n_cols, nth, ggml_is_numa(), nullptr,
                                                  &n_chunks, &chunk_rows);
        if (st != GGML_T2P_OK) {
            abort_status("ggml_t2p_plugin_mul_mat_plan", op, st);
        }

        // 1. Quantize src1 to Q8_K (the same bits as stock's quantizer) and pack it, every thread its
        //    own part: one column split by Q8_K block, or whole columns.
        st = ggml_t2p_plugin_act_prepare(plugin(), src0->type, k, (const float *) src1->data, src1->ne[1], src1->ne[2],
                                         src1->ne[3], src1->nb[1], src1->nb[2], src1->nb[3], ith, nth, params->wdata,
                                         params->wsize);
        if (st != GGML_T2P_OK) {
            abort_status("ggml_t2p_plugin_act_prepare", op, st);
        }
#if GGML_T2P_HAVE_CHUNK_API
        if (ith == 0) {
            // Every thread starts on chunk ith, so the first free chunk is nth.
            ggml_threadpool_chunk_set(params->threadpool, nth);
        }
#endif
        ggml_barrier(params->threadpool);

        // 2. Hand out chunks of whole row tiles (the library's split).
#if GGML_T2P_HAVE_CHUNK_API
        for (int64_t chunk = ith; chunk < n_chunks; chunk = ggml_threadpool_chunk_add(params->threadpool, 1)) {
#else
        for (int64_t chunk = ith; chunk < n_chunks; chunk += nth) {   // older ggml: a static split
#endif
            const int64_t r0 = chunk * chunk_rows;
            const int64_t r1 = std::min(n_rows, r0 + chunk_rows);
            st = ggml_t2p_plugin_mul_mat_rows(plugin(), src0->type, src0->data, n_rows, k, n_cols, params->wdata,
                                              params->wsize, (float *) op->data, (size_t) ggml_nelements(op),
                                              (int64_t) (op->nb[1] / sizeof(float)), r0, r1);
            if (st != GGML_T2P_OK) {
                abort_status("ggml_t2p_plugin_mul_mat_rows", op, st);
            }
        }
    }
};

tensor_traits & traits() {
    static tensor_traits t;
    return t;
}

// ---------------------------------------------------------------------------------------------
// The hybrid's float ops (GATED_DELTA_NET, SSM_CONV of Gated-DeltaNet models), CONCAT (their conv
// input) and F32 GET_ROWS (their state's gather), whatever buffer their sources are in: ggml-cpu
// asks every extra buffer type for the traits of every op, and calls them on every thread. The
// hybrid's ops are found by name, so a ggml without them still builds.

int op_by_name(const char * name) {
    for (int i = 0; i < GGML_OP_COUNT; ++i) {
        if (std::strcmp(ggml_op_name(static_cast<ggml_op>(i)), name) == 0) {
            return i;
        }
    }
    return -1;
}

static_assert(GGML_TYPE_I32 == 26, "ggml_t2p_plugin_hybrid_op takes GET_ROWS ids as ggml's type 26 (I32)");

int32_t hybrid_kind(const ggml_tensor * op) {
    static const int conv = op_by_name("SSM_CONV");
    static const int gdn  = op_by_name("GATED_DELTA_NET");
    if (op->op == GGML_OP_CONCAT) {
        return GGML_T2P_OP_CONCAT;
    }
    if (op->op == GGML_OP_GET_ROWS) {   // (GET_ROWS on our weights took traits() before this)
        return op->src[0] != nullptr && op->src[0]->type == GGML_TYPE_F32 ? GGML_T2P_OP_GET_ROWS : 0;
    }
    return op->op == conv ? GGML_T2P_OP_SSM_CONV : (op->op == gdn ? GGML_T2P_OP_GATED_DELTA_NET : 0);
}

ggml_t2p_tensor_view view_of(const ggml_tensor * t) {
    ggml_t2p_tensor_view v = { t->data, static_cast<int32_t>(t->type), {}, {} };
    for (int d = 0; d < 4; ++d) {
        v.ne[d] = t->ne[d];
        v.nb[d] = t->nb[d];
    }
    return v;
}

size_t buft_get_alloc_size(ggml_backend_buffer_type_t, const ggml_tensor * tensor);

void tensor_traits::forward_get_rows(ggml_compute_params * params, ggml_tensor * op) {
    const ggml_tensor *        src0 = op->src[0];
    const ggml_t2p_tensor_view ids  = view_of(op->src[1]);
    const ggml_t2p_tensor_view dst  = view_of(op);
    const int32_t st = ggml_t2p_plugin_get_rows(plugin(), src0->type, src0->data, buft_get_alloc_size(nullptr, src0),
                                                src0->ne[1], src0->ne[0], &ids, &dst, params->ith, params->nth);
    if (st != GGML_T2P_OK) {   // (an id out of range: stock asserts too)
        abort_status("ggml_t2p_plugin_get_rows", op, st);
    }
}

class hybrid_traits : public ggml::cpu::tensor_traits {
  public:
    bool work_size(int, const ggml_tensor *, size_t &) override {
        return false;   // no work buffer (stock's plan stays, in case the op is declined)
    }

    bool compute_forward(ggml_compute_params * params, ggml_tensor * op) override {
        ggml_t2p_tensor_view srcs[GGML_MAX_SRC];
        int32_t              n = 0;
        for (; n < GGML_MAX_SRC && op->src[n] != nullptr; ++n) {
            srcs[n] = view_of(op->src[n]);
        }
        const ggml_t2p_tensor_view dst = view_of(op);
        // Declined (the same answer on every thread, nothing written): ggml runs it.
        return ggml_t2p_plugin_hybrid_op(plugin(), hybrid_kind(op), srcs, n, &dst, params->ith, params->nth) ==
               GGML_T2P_OK;
    }
};

class extra_buffer_type : public ggml::cpu::extra_buffer_type {
  public:
    bool supports_op(ggml_backend_dev_t, const ggml_tensor * op) override {
        if ((op->op != GGML_OP_MUL_MAT && op->op != GGML_OP_GET_ROWS) || op->src[0] == nullptr ||
            op->src[1] == nullptr) {
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
        return op->op == GGML_OP_MUL_MAT ? mul_mat_ok(op) : get_rows_ok(op);
    }

    ggml::cpu::tensor_traits * get_tensor_traits(const ggml_tensor * op) override {
        // by what the weight is, not by tensor->extra: an RPC worker's tensors are rebuilt from the
        // wire for every graph, without it
        if ((op->op == GGML_OP_MUL_MAT || op->op == GGML_OP_GET_ROWS) && op->src[0] != nullptr &&
            repacked(op->src[0])) {
            return &traits();
        }
        static hybrid_traits hybrid;
        return hybrid_kind(op) != 0 ? &hybrid : nullptr;
    }
};

// ---------------------------------------------------------------------------------------------
// Buffer and buffer type.

size_t buft_get_alloc_size(ggml_backend_buffer_type_t, const ggml_tensor * tensor) {
    size_t n = ggml_nbytes(tensor);
    size_t r = 0;
    if (tensor->ne[2] == 1 && tensor->ne[3] == 1 &&
        ggml_t2p_plugin_repacked_size(plugin(), tensor->type, tensor->ne[1], tensor->ne[0], &r) == GGML_T2P_OK) {
        n = std::max(n, r);
    }
    return n;
}

// The source-format bytes of a repacked tensor, into `out` (ggml_nbytes of them); false (and a
// log line) if the library refuses.
bool unpack_into(ggml_backend_buffer_t buffer, const ggml_tensor * t, std::vector<uint8_t> & out) {
    out.resize(ggml_nbytes(t));
    const int32_t st = ggml_t2p_plugin_unpack(plugin(), t->type, t->data, buft_get_alloc_size(buffer->buft, t), t->ne[1],
                                              t->ne[0], out.data(), out.size());
    if (st != GGML_T2P_OK) {
        GGML_LOG_ERROR("ggml-t2p: cannot give back the bytes of %s: %s\n", t->name, ggml_t2p_status_string(st));
    }
    return st == GGML_T2P_OK;
}

// Whether a repacked t fits in its buffer (its repack can be larger than ggml_nbytes: PTQ1_0 at
// 2.125 bits per weight as X16 or T2P, or with its last row tile padded). llama.cpp allocates with buft_get_alloc_size; an RPC client's tensor is
// checked against it by the worker (patches/) before it gets here.
bool fits(ggml_backend_buffer_t buffer, const ggml_tensor * t) {
    const uintptr_t base = (uintptr_t) ggml_backend_buffer_get_base(buffer);
    const uintptr_t p    = (uintptr_t) t->data;
    const size_t    need = buft_get_alloc_size(buffer->buft, t);
    return p >= base && p - base <= ggml_backend_buffer_get_size(buffer) &&
           need <= ggml_backend_buffer_get_size(buffer) - (p - base);
}

// Whether [offset, offset + size) lies inside t's bytes (ggml's own check of it can wrap around).
bool in_tensor(const ggml_tensor * t, size_t offset, size_t size) {
    return offset <= ggml_nbytes(t) && size <= ggml_nbytes(t) - offset;
}

void buffer_set_tensor(ggml_backend_buffer_t buffer, ggml_tensor * tensor, const void * data, size_t offset, size_t size) {
    if (!repacked(tensor)) {   // stored as the CPU buffer stores it
        std::memcpy((char *) tensor->data + offset, data, size);
        return;
    }
    if (!fits(buffer, tensor) || !in_tensor(tensor, offset, size)) {
        GGML_LOG_ERROR("ggml-t2p: %s: %zu bytes at %zu of %zu, %zu repacked, outside its CPU_T2P buffer: not written\n",
                       tensor->name, size, offset, ggml_nbytes(tensor), buft_get_alloc_size(buffer->buft, tensor));
        return;
    }
    const size_t n = ggml_nbytes(tensor);
    const void * whole = data;
    std::vector<uint8_t> staged;
    if (offset != 0 || size != n) {
        // part of a tensor (an RPC client may send one): the whole tensor's bytes back, the part
        // replaced, the whole repacked again (bytes no repack wrote, e.g. never set yet: zeros)
        if (!unpack_into(buffer, tensor, staged)) {
            staged.assign(n, 0);
        }
        std::memcpy(staged.data() + offset, data, size);
        whole = staged.data();
    }
    // The whole tensor at once: the library slices it and releases the source's file pages as it
    // goes (GGML_T2P_RELEASE_SOURCE), and counts it for the load line.
    const int32_t st = ggml_t2p_plugin_repack(plugin(), tensor->type, whole, n, tensor->ne[1], tensor->ne[0],
                                              tensor->data, buft_get_alloc_size(buffer->buft, tensor));
    if (st != GGML_T2P_OK) {
        abort_status("ggml_t2p_plugin_repack", tensor, st);
    }
}

void buffer_get_tensor(ggml_backend_buffer_t buffer, const ggml_tensor * tensor, void * data, size_t offset, size_t size) {
    if (!repacked(tensor)) {
        std::memcpy(data, (const char *) tensor->data + offset, size);
        return;
    }
    // the source format's bytes (a repacked weight read back: rare, so the whole tensor is unpacked)
    std::vector<uint8_t> whole;
    if (fits(buffer, tensor) && in_tensor(tensor, offset, size) && unpack_into(buffer, tensor, whole)) {
        std::memcpy(data, whole.data() + offset, size);
    } else {
        std::memset(data, 0, size);
    }
}

// A copy into a tensor of ours: plain bytes between a host buffer (or ours) and a tensor stored
// plain; a repacked tensor on either side is left to ggml's fallback (get, then set).
bool buffer_cpy_tensor(ggml_backend_buffer_t, const ggml_tensor * src, ggml_tensor * dst) {
    const bool src_plain = src->buffer != nullptr && !repacked(src) &&
                           (ggml_backend_buft_is_host(src->buffer->buft) ||
                            src->buffer->buft == ggml_backend_cpu_t2p_buffer_type());
    if (!src_plain || repacked(dst) || ggml_nbytes(src) != ggml_nbytes(dst)) {
        return false;
    }
    std::memcpy(dst->data, src->data, ggml_nbytes(src));
    return true;
}

const char * buft_get_name(ggml_backend_buffer_type_t) {
    return "CPU_T2P";
}

ggml_backend_buffer_t buft_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size) {
    ggml_backend_buffer_t buffer = ggml_backend_buft_alloc_buffer(ggml_backend_cpu_buffer_type(), size);
    if (buffer == nullptr) {
        return nullptr;
    }
    // huge-page advice before the repack first touches the pages (GGML_T2P_HUGE_PAGES)
    ggml_t2p_plugin_new_buffer(plugin(), ggml_backend_buffer_get_base(buffer), ggml_backend_buffer_get_size(buffer));
    buffer->buft                = buft;
    buffer->iface.set_tensor    = buffer_set_tensor;
    buffer->iface.get_tensor    = buffer_get_tensor;   // a repacked tensor's source bytes, unpacked
#if GGML_T2P_HAVE_TENSOR_2D
    buffer->iface.set_tensor_2d = nullptr;   // fall back to whole-tensor set_tensor
    buffer->iface.get_tensor_2d = nullptr;
#endif
    buffer->iface.cpy_tensor    = buffer_cpy_tensor;
    return buffer;
}

size_t buft_get_alignment(ggml_backend_buffer_type_t) {
    return TENSOR_ALIGNMENT;
}

ggml_backend_buffer_type_t make_buffer_type() {
    if (plugin() == nullptr) {
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
