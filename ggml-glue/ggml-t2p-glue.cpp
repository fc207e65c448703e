// ggml-t2p-glue.cpp - CPU_T2P: a ggml-cpu extra buffer type that runs PQ2_0 (and PTQ1_0) MUL_MATs
// through libggml_t2p.
//
// Data flow: llama.cpp places a weight here when supports_op accepts a MUL_MAT on it; set_tensor
// repacks the whole tensor through ggml_t2p_repack into the layout the library chose for this CPU
// (ggml_t2p_choose, which also picks the kernel level or declines); each MUL_MAT quantizes src1 to
// Q8_K into per-thread scratch (by column, or by Q8_K block when there is one column, zero-padded to
// a multiple of 256) and packs it at once
// with ggml_t2p_act_pack, meets at one barrier, then hands out chunks of the layout's row tiles to
// ggml_t2p_gemv / ggml_t2p_gemm. The Q8_K bits are always those of the host ggml's own quantizer:
// the library's SIMD quantizer (ggml_t2p_quantize_q8_k) runs when a probe at start-up shows that
// one of its roundings reproduces the host's quantize_row_q8_K_ref (see probe_q8k_rounding), else
// ggml's own from_float runs.
// This file knows ggml; it knows no byte order and no ISA (the library owns both).

#include "ggml-t2p-glue.h"
#include "ggml-t2p-release.h"

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
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

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
// Configuration: environment, CPU and library checks, made once.

struct t2p_config {
    bool     enabled     = false;
    int32_t  kernel      = 0;       // the concrete level passed to every call
    bool     pq2_known   = false;   // the host ggml's type 142 is PQ2_0 (block 128, 34 bytes)
    bool     ptq1_known  = false;   // the host ggml's type 143 is PTQ1_0 (block 128, 28 bytes)
    int32_t  pq2_layout  = -1;      // layouts the library chose for this CPU and kernel
    int32_t  ptq1_layout = -1;
    int32_t  q8k_rounding = 0;      // GGML_T2P_ROUND_* of the library's Q8_K quantizer; 0: ggml's own
    bool     release_source = true; // drop a repacked tensor's file pages (ggml-t2p-release.h)
    bool     huge_pages     = false; // advise our buffers as transparent huge pages (Linux)
};

const char * env_value(const char * name) {
    const char * v = std::getenv(name);
    return (v != nullptr && *v != '\0') ? v : nullptr;
}

// An on/off environment variable: false for 0/off/false/no, true for 1/on/true/yes; unset, empty
// or anything else gives the variable's default (`def`), with a warning for the last.
bool env_on(const char * name, bool def = true) {
    const char * v = env_value(name);
    if (v == nullptr) {
        return def;
    }
    const std::string s = v;
    if (s == "0" || s == "off" || s == "false" || s == "no") {
        return false;
    }
    if (s == "1" || s == "on" || s == "true" || s == "yes") {
        return true;
    }
    GGML_LOG_WARN("ggml-t2p: unknown %s=%s (expected 0 or 1), using %d\n", name, v, def ? 1 : 0);
    return def;
}

// Whether the host ggml's type `id` is the ternary type the library knows by that id (its block
// size and bytes, ggml_t2p_source_block): an unrelated type that reuses the id, or an older meaning
// of it, is left to stock code.
bool host_type_is(int id, const char * what) {
    int64_t blck = 0;
    size_t  size = 0;
    if (static_cast<int>(GGML_TYPE_COUNT) <= id || ggml_t2p_source_block(id, &blck, &size) != GGML_T2P_OK) {
        return false;
    }
    const auto t = static_cast<ggml_type>(id);
    if (ggml_blck_size(t) == blck && ggml_type_size(t) == size) {
        return true;
    }
    GGML_LOG_WARN("ggml-t2p: this ggml's type %d is %s (block %lld, %zu bytes), not %s (block %lld, %zu bytes): "
                  "such weights stay on stock code\n", id, ggml_type_name(t), (long long) ggml_blck_size(t),
                  ggml_type_size(t), what, (long long) blck, size);
    return false;
}

// Which rounding of ggml_t2p_quantize_q8_k gives the host ggml's Q8_K bits (GGML_T2P_ROUND_*), or 0
// (then ggml's own quantizer runs): the library's probe values go through the host's from_float,
// and the library says which of its roundings gives the same blocks (the header says why the host's
// rounding depends on how ggml-base was compiled).
int32_t probe_q8k_rounding(int32_t kernel) {
    float x[GGML_T2P_Q8K_PROBE_VALUES];
    std::string host(ggml_row_size(GGML_TYPE_Q8_K, GGML_T2P_Q8K_PROBE_VALUES), '\x5a');
    int32_t rounding = 0;
    if (ggml_t2p_q8k_probe_input(x, GGML_T2P_Q8K_PROBE_VALUES) != GGML_T2P_OK) {
        return 0;
    }
    ggml_get_type_traits_cpu(GGML_TYPE_Q8_K)->from_float(x, &host[0], GGML_T2P_Q8K_PROBE_VALUES);
    if (ggml_t2p_q8k_probe_rounding(kernel, x, GGML_T2P_Q8K_PROBE_VALUES, host.data(), host.size(), &rounding) != GGML_T2P_OK) {
        return 0;
    }
    return rounding;
}

// Logs the library's message lines (ggml_t2p_choose): each as a warning, the last as the reason
// when the plugin declines.
void log_lines(const char * msg, bool declined) {
    const std::string text = msg;
    size_t            at   = 0;
    while (at < text.size()) {
        const size_t end  = text.find('\n', at);
        const bool   last = end == std::string::npos || end + 1 >= text.size();
        const std::string line = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
        GGML_LOG_WARN("ggml-t2p: %s%s\n", declined && last ? "declining: " : "", line.c_str());
        at = end == std::string::npos ? text.size() : end + 1;
    }
}

t2p_config make_config() {
    t2p_config cfg;

    // GGML_T2P: on unless 0/off/false/no.
    if (!env_on("GGML_T2P")) {
        GGML_LOG_INFO("ggml-t2p: disabled (GGML_T2P=%s)\n", env_value("GGML_T2P"));
        return cfg;
    }

    if (ggml_t2p_abi_version() != GGML_T2P_ABI_VERSION) {
        GGML_LOG_WARN("ggml-t2p: disabled (libggml_t2p %s has ABI %u, this shim was built for ABI %d: rebuild both)\n",
                      ggml_t2p_version(), (unsigned) ggml_t2p_abi_version(), GGML_T2P_ABI_VERSION);
        return cfg;
    }

    // The library chooses the level (GGML_T2P_KERNEL: auto or a level name) and the layouts
    // (GGML_T2P_PTQ1: t2p or native) from what this ggml has and this CPU runs, or declines.
    // (a type id this ggml uses for another type is said first: it is a fact about this ggml)
    cfg.pq2_known  = host_type_is(GGML_T2P_TYPE_PQ2_0, "PQ2_0");
    cfg.ptq1_known = host_type_is(GGML_T2P_TYPE_PTQ1_0, "PTQ1_0");
    char          msg[1024] = "";
    const int32_t st = ggml_t2p_choose(env_value("GGML_T2P_KERNEL"), env_value("GGML_T2P_PTQ1"), cfg.pq2_known,
                                       cfg.ptq1_known, &cfg.kernel, &cfg.pq2_layout, &cfg.ptq1_layout, msg, sizeof msg);
    log_lines(msg, st != GGML_T2P_OK);
    if (st != GGML_T2P_OK) {
        if (msg[0] == '\0') {
            GGML_LOG_WARN("ggml-t2p: declining: %s\n", ggml_t2p_status_string(st));
        }
        return cfg;
    }

    // GGML_T2P_RELEASE_SOURCE: 1 (default: after a repack, unmap the source's pages when they come
    // from a read-only shared file mapping, see ggml-t2p-release.h) or 0 (keep them mapped).
    cfg.release_source = env_on("GGML_T2P_RELEASE_SOURCE");

    // GGML_T2P_HUGE_PAGES: 0 (default: leave the pages as ggml's allocator gets them) or 1 (advise
    // each CPU_T2P buffer as transparent huge pages before the repack first touches it, see
    // advise_huge_pages). Off by default: on the 8B model it made the repack 2.7 s slower (likely the
    // kernel compacting memory to fault huge pages; not profiled) and decode no faster beyond this
    // machine's noise.
    cfg.huge_pages = env_on("GGML_T2P_HUGE_PAGES", false);

    // GGML_T2P_QUANTIZE: auto (default: the library's Q8_K quantizer when it reproduces the host's,
    // see probe_q8k_rounding) or ggml (always the host's own).
    const char * quant_why = "GGML_T2P_QUANTIZE=ggml";
    const char * qv        = env_value("GGML_T2P_QUANTIZE");
    if (qv == nullptr || std::string(qv) != "ggml") {
        if (qv != nullptr && std::string(qv) != "auto") {
            GGML_LOG_WARN("ggml-t2p: unknown GGML_T2P_QUANTIZE=%s (expected auto or ggml), using auto\n", qv);
        }
        cfg.q8k_rounding = probe_q8k_rounding(cfg.kernel);
        quant_why = "the host's quantize_row_q8_K matches neither rounding";
    }

    cfg.enabled = true;
    GGML_LOG_INFO("ggml-t2p: enabled (libggml_t2p %s, kernel %s; PQ2_0 %s%s, PTQ1_0 %s%s; Q8_K by %s%s%s)\n",
                  ggml_t2p_version(), ggml_t2p_kernel_name(cfg.kernel), cfg.pq2_layout < 0 ? "not in this ggml" : "-> ",
                  cfg.pq2_layout < 0 ? "" : ggml_t2p_layout_name(cfg.pq2_layout),
                  cfg.ptq1_layout < 0 ? "not in this ggml" : "-> ",
                  cfg.ptq1_layout < 0 ? "" : ggml_t2p_layout_name(cfg.ptq1_layout),
                  cfg.q8k_rounding == 0 ? "ggml (" : "libggml_t2p, ",
                  cfg.q8k_rounding == 0 ? quant_why
                                        : (cfg.q8k_rounding == 1 ? "fused rounding as the host's" : "unfused rounding as the host's"),
                  cfg.q8k_rounding == 0 ? ")" : "");
    return cfg;
}

const t2p_config & config() {
    static const t2p_config cfg = make_config();
    return cfg;
}

// The layout a weight type is repacked into, or -1 when the plugin does not take the type.
int32_t layout_for(ggml_type type) {
    if (static_cast<int>(type) == GGML_T2P_TYPE_PQ2_0) {
        return config().pq2_layout;
    }
    if (static_cast<int>(type) == GGML_T2P_TYPE_PTQ1_0) {
        return config().ptq1_layout;
    }
    return -1;
}

// Rows per tile of a layout (gemv/gemm row ranges start on a multiple of it).
int64_t row_tile(int32_t layout) {
    int64_t rows = 0;
    if (ggml_t2p_row_tile(layout, &rows) != GGML_T2P_OK || rows <= 0) {
        GGML_ABORT("ggml-t2p: layout %d has no row tile", (int) layout);
    }
    return rows;
}

// ---------------------------------------------------------------------------------------------
// Load statistics, reported once at the first MUL_MAT.

struct t2p_stats {
    std::atomic<int64_t>  n_pq2{ 0 };
    std::atomic<int64_t>  n_ptq1{ 0 };
    std::atomic<uint64_t> bytes{ 0 };
    std::atomic<int64_t>  nanos{ 0 };
    // the source release after each repack (ggml-t2p-release.h)
    std::atomic<uint64_t> released{ 0 };        // bytes whose file pages were unmapped
    std::atomic<int64_t>  n_released{ 0 };      // tensors with some pages unmapped
    std::atomic<int64_t>  n_not_mapped{ 0 };    // tensors not in a read-only shared file mapping (--no-mmap)
    std::atomic<int64_t>  n_refused{ 0 };       // tensors madvise refused (--mlock), or maps unreadable
    std::atomic<int>      refused_errno{ 0 };   // errno of the last refusal
    std::atomic<int64_t>  release_nanos{ 0 };
    // huge page advice on our buffers (advise_huge_pages)
    std::atomic<uint64_t> huge_advised{ 0 };    // bytes advised MADV_HUGEPAGE
    std::atomic<int>      huge_errno{ 0 };      // errno of the last refused advice (0: none refused)
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
    const int64_t n_pq2  = s.n_pq2.load();
    const int64_t n_ptq1 = s.n_ptq1.load();
    const t2p_config & cfg = config();
    std::string to;
    if (n_pq2 > 0) {
        to += std::to_string(n_pq2) + " PQ2_0 -> " + ggml_t2p_layout_name(cfg.pq2_layout);
    }
    if (n_ptq1 > 0) {
        to += std::string(to.empty() ? "" : ", ") + std::to_string(n_ptq1) + " PTQ1_0 -> " +
              ggml_t2p_layout_name(cfg.ptq1_layout);
    }
    // what became of the source's pages: "released X MiB of file-mapped source in T s (N kept: why)"
    std::string src;
    if (!cfg.release_source) {
        src = "source pages kept (GGML_T2P_RELEASE_SOURCE=0)";
    } else {
#if defined(__linux__)
        char buf[160];
        std::snprintf(buf, sizeof buf, "released %.1f MiB of file-mapped source (%lld tensors) in %.3f s",
                      s.released.load() / (1024.0 * 1024.0), (long long) s.n_released.load(), s.release_nanos.load() * 1e-9);
        src = buf;
        std::string kept;
        if (const int64_t n = s.n_not_mapped.load()) {
            kept += std::to_string(n) + " not in a read-only shared file mapping";
        }
        if (const int64_t n = s.n_refused.load()) {
            kept += std::string(kept.empty() ? "" : ", ") + std::to_string(n) + " refused: " + std::strerror(s.refused_errno.load());
        }
        if (!kept.empty()) {
            src += " (tensors kept: " + kept + ")";
        }
#else
        src = std::string("source pages kept (") + t2p_release_status_name(T2P_RELEASE_UNSUPPORTED) + ")";
#endif
    }
    // the huge page advice on our buffers: "; huge pages advised for X MiB" (Linux)
    std::string huge;
#if defined(__linux__)
    if (cfg.huge_pages) {   // off (the default): nothing to say
        char buf[160];
        std::snprintf(buf, sizeof buf, "; huge pages advised for %.1f MiB", s.huge_advised.load() / (1024.0 * 1024.0));
        huge = buf;
        if (const int e = s.huge_errno.load()) {
            huge += std::string(" (advice refused: ") + std::strerror(e) + ")";
        }
    }
#endif
    // the repack's own time (the ggml_t2p_repack calls, all threads of each) and its rate in MiB of
    // repacked bytes per second
    const double mib = s.bytes.load() / (1024.0 * 1024.0);
    const double sec = s.nanos.load() * 1e-9;
    GGML_LOG_INFO("ggml-t2p: %lld tensor%s repacked (%s; %.1f MiB) in %.2f s (%.0f MiB/s); kernel %s; %s%s\n",
                  (long long) (n_pq2 + n_ptq1), n_pq2 + n_ptq1 == 1 ? "" : "s", to.c_str(), mib, sec,
                  sec > 0 ? mib / sec : 0.0, ggml_t2p_kernel_name(cfg.kernel), src.c_str(), huge.c_str());
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
#if GGML_T2P_HAVE_HADAMARD_HINT
    // The Hadamard hint routes the op to stock's FWHT (ggml-cpu.c); never ours.
    if (ggml_get_op_params_i32(op, 1) == GGML_HINT_SRC0_IS_HADAMARD) {
        return false;
    }
#endif
    // Weight: a 2-D contiguous matrix (the library checks the shape in ggml_t2p_supports below).
    if (src0->ne[2] != 1 || src0->ne[3] != 1 || !ggml_is_contiguous(src0)) {
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
//   [packed activations of all columns (ggml_t2p_act_packed_size), rounded up to 64 bytes]
//   [per thread: one column's Q8_K row (ceil(K/256) blocks), rounded up to 64 bytes, then 256
//    floats for the zero-padded last block when K % 256 != 0]

constexpr size_t WDATA_ALIGN = 64;
constexpr int64_t QK_K_ = 256;

size_t round_up(size_t n, size_t a) {
    return (n + a - 1) / a * a;
}

struct work_plan {
    int32_t layout  = -1;
    int64_t k       = 0;   // row length
    int64_t nq      = 0;   // Q8_K blocks per column (the last one zero-padded when K % 256 != 0)
    int64_t n_cols  = 0;   // src1 rows over all of its dims
    size_t  q8_row  = 0;   // bytes of one column's Q8_K blocks
    size_t  packed  = 0;   // bytes of the packed activations
    size_t  scratch = 0;   // bytes of one thread's scratch

    size_t bytes(int n_threads) const {
        return (WDATA_ALIGN - 1) + round_up(packed, WDATA_ALIGN) + (size_t) n_threads * scratch;
    }
};

work_plan plan_for(const ggml_tensor * op) {
    const ggml_tensor * src1 = op->src[1];
    work_plan p;
    p.layout = layout_for(op->src[0]->type);
    p.k      = src1->ne[0];
    p.nq     = (p.k + QK_K_ - 1) / QK_K_;
    p.n_cols = src1->ne[1] * src1->ne[2] * src1->ne[3];
    p.q8_row = ggml_row_size(GGML_TYPE_Q8_K, p.nq * QK_K_);
    int32_t st = ggml_t2p_act_packed_size(p.layout, config().kernel, p.k, p.n_cols, &p.packed);
    if (st != GGML_T2P_OK) {
        abort_status("ggml_t2p_act_packed_size", op, st);
    }
    p.scratch = round_up(p.q8_row, WDATA_ALIGN) + (p.k % QK_K_ != 0 ? QK_K_ * sizeof(float) : 0);
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
    // Quantizes n values (a multiple of 256) to Q8_K at q8: with the library's quantizer in the
    // host's rounding (config().q8k_rounding; the same bits as ggml's, see probe_q8k_rounding), or
    // with ggml's own.
    static void quantize_q8k(const float * x, char * q8, int64_t n) {
        const t2p_config & cfg = config();
        if (cfg.q8k_rounding != 0) {
            const size_t  size = ggml_row_size(GGML_TYPE_Q8_K, n);
            const int32_t st   = ggml_t2p_quantize_q8_k(cfg.kernel, cfg.q8k_rounding, x, n, q8, size);
            if (st != GGML_T2P_OK) {
                GGML_ABORT("ggml-t2p: ggml_t2p_quantize_q8_k failed: %s (%d)", ggml_t2p_status_string(st), (int) st);
            }
            return;
        }
        ggml_get_type_traits_cpu(GGML_TYPE_Q8_K)->from_float(x, q8, n);
    }

    // Quantizes Q8_K blocks [b0, b1) of one src1 row into q8 (those blocks only), the last block of
    // a row whose K % 256 != 0 through the zero-padded buffer pad.
    static void quantize_blocks(const float * row, const work_plan & p, int64_t b0, int64_t b1, char * q8, float * pad) {
        const size_t            blk        = ggml_row_size(GGML_TYPE_Q8_K, QK_K_);
        const int64_t           full       = p.k / QK_K_;   // blocks with 256 real values
        const int64_t           b_full     = std::min(b1, full);
        if (b0 < b_full) {
            quantize_q8k(row + b0 * QK_K_, q8, (b_full - b0) * QK_K_);
        }
        if (b1 > full && b0 <= full) {   // the padded block, index `full`
            const int64_t tail = p.k - full * QK_K_;
            std::memcpy(pad, row + full * QK_K_, (size_t) tail * sizeof(float));
            std::memset(pad + tail, 0, (size_t) (QK_K_ - tail) * sizeof(float));
            quantize_q8k(pad, q8 + (size_t) (full - b0) * blk, QK_K_);
        }
    }

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

        char * const base    = (char *) round_up((uintptr_t) params->wdata, WDATA_ALIGN);
        char * const packed  = base;
        char * const scratch = base + round_up(p.packed, WDATA_ALIGN) + (size_t) ith * p.scratch;
        float * const pad    = (float *) (scratch + round_up(p.q8_row, WDATA_ALIGN));
        const int32_t kernel = config().kernel;

        // 1. Quantize src1 to Q8_K (the same bits as stock's quantizer, see quantize_q8k) and pack it,
        //    every thread its own part: one column split by Q8_K block, or whole columns.
        const int64_t ne11 = src1->ne[1];
        const int64_t ne12 = src1->ne[2];
        auto row_of = [&](int64_t c) {
            const int64_t i11 = c % ne11;
            const int64_t i12 = (c / ne11) % ne12;
            const int64_t i13 = c / (ne11 * ne12);
            return (const float *) ((const char *) src1->data + i11 * src1->nb[1] + i12 * src1->nb[2] + i13 * src1->nb[3]);
        };
        auto pack = [&](int64_t c, int64_t b0, int64_t b1) {
            quantize_blocks(row_of(c), p, b0, b1, scratch, pad);
            const int32_t st = ggml_t2p_act_pack(p.layout, kernel, p.k, p.n_cols, c, b0, b1, scratch, p.q8_row, packed, p.packed);
            if (st != GGML_T2P_OK) {
                abort_status("ggml_t2p_act_pack", op, st);
            }
        };
        if (p.n_cols == 1) {
            const int64_t b0 = p.nq * ith / nth;
            const int64_t b1 = p.nq * (ith + 1) / nth;
            if (b0 < b1) {
                pack(0, b0, b1);
            }
        } else {
            for (int64_t c = ith; c < p.n_cols; c += nth) {
                pack(c, 0, p.nq);
            }
        }

#if GGML_T2P_HAVE_CHUNK_API
        if (ith == 0) {
            // Every thread starts on chunk ith, so the first free chunk is nth.
            ggml_threadpool_chunk_set(params->threadpool, nth);
        }
#endif
        ggml_barrier(params->threadpool);

        // 2. Hand out chunks of whole row tiles (the library's tile: 4 rows, or 16 for X16).
        const int64_t n_rows   = src0->ne[1];
        const int64_t tile     = row_tile(p.layout);
        const int64_t n_tiles  = (n_rows + tile - 1) / tile;
        int64_t       n_chunks = (nth == 1 || ggml_is_numa()) ? nth : (int64_t) nth * 4;
        n_chunks               = std::min(n_chunks, n_tiles);
        const int64_t per      = (n_tiles + n_chunks - 1) / n_chunks;
        n_chunks               = (n_tiles + per - 1) / per;

        size_t  w_size = 0;
        int32_t st     = ggml_t2p_repacked_size(src0->type, p.layout, n_rows, p.k, &w_size);
        if (st != GGML_T2P_OK) {
            abort_status("ggml_t2p_repacked_size", src0, st);
        }
        float * const dst        = (float *) op->data;
        const size_t  dst_len    = (size_t) ggml_nelements(op);
        const int64_t col_stride = (int64_t) (op->nb[1] / sizeof(float));

#if GGML_T2P_HAVE_CHUNK_API
        for (int64_t chunk = ith; chunk < n_chunks; chunk = ggml_threadpool_chunk_add(params->threadpool, 1)) {
#else
        for (int64_t chunk = ith; chunk < n_chunks; chunk += nth) {   // older ggml: a static split
#endif
            const int64_t r0 = chunk * per * tile;
            const int64_t r1 = std::min(n_rows, r0 + per * tile);
            if (p.n_cols == 1) {
                st = ggml_t2p_gemv(p.layout, kernel, src0->data, w_size, n_rows, p.k, packed, p.packed, dst, dst_len, r0, r1);
            } else {
                st = ggml_t2p_gemm(p.layout, kernel, src0->data, w_size, n_rows, p.k, packed, p.packed, p.n_cols, dst,
                                   dst_len, col_stride, r0, r1);
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

// Source bytes per repack slice while the source is released (see buffer_set_tensor).
constexpr size_t RELEASE_SLICE_BYTES = size_t(16) << 20;

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

    // With the source release on, a tensor above RELEASE_SLICE_BYTES is repacked in slices of whole
    // row tiles (rows [r0, r1) alone give the bytes at repacked_size(r0) of the whole repack: the
    // header's row-tile order), and each slice's source pages are released before the next
    // (ggml-t2p-release.h), so the source and its copy are never both resident for more than one
    // slice: the output matrix of an 8B model is 158 MiB. Without it: one call, as before.
    const t2p_config & cfg       = config();
    const int64_t      n_rows    = tensor->ne[1];
    const size_t       row_bytes = ggml_row_size(tensor->type, tensor->ne[0]);
    int64_t            slice     = n_rows;
    if (cfg.release_source && size > RELEASE_SLICE_BYTES) {
        const int64_t tile = row_tile(layout);
        slice              = std::max<int64_t>(tile, (int64_t) (RELEASE_SLICE_BYTES / row_bytes) / tile * tile);
    }
    t2p_stats &       s        = stats();
    const char *      src      = static_cast<const char *>(data);
    const char *      kept     = src;   // the source from here on is not released yet
    size_t            released = 0;
    int               why      = T2P_RELEASE_TOO_SMALL;   // the refusal, for the load line
    int               error    = 0;
    bool              release  = cfg.release_source;   // off after a refusal: the rest is the same memory
    for (int64_t r0 = 0; r0 < n_rows; r0 += slice) {
        const int64_t r1  = std::min(n_rows, r0 + slice);
        size_t        off = 0;
        size_t        len = 0;
        if ((r0 > 0 && (st = ggml_t2p_repacked_size(tensor->type, layout, r0, tensor->ne[0], &off)) != GGML_T2P_OK) ||
            (st = ggml_t2p_repacked_size(tensor->type, layout, r1 - r0, tensor->ne[0], &len)) != GGML_T2P_OK) {
            abort_status("ggml_t2p_repacked_size", tensor, st);
        }
        GGML_ASSERT(off <= dst_size && len <= dst_size - off);
        const auto t0 = std::chrono::steady_clock::now();
        st = ggml_t2p_repack(tensor->type, layout, src + (size_t) r0 * row_bytes, (size_t) (r1 - r0) * row_bytes, r1 - r0,
                             tensor->ne[0], static_cast<char *>(tensor->data) + off, len);
        const auto t1 = std::chrono::steady_clock::now();
        if (st != GGML_T2P_OK) {
            abort_status("ggml_t2p_repack", tensor, st);
        }
        s.nanos.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());

        // The source up to here is never read again through this tensor: where it is a read-only
        // shared file mapping (llama.cpp's mmap), its whole pages leave this process's resident
        // set (they refault from the file if the host reads them); anything else is left alone.
        if (release) {
            const char *             end = src + (size_t) r1 * row_bytes;
            const t2p_release_result r   = t2p_release_source(kept, (size_t) (end - kept));
            if (r.status == T2P_RELEASE_DONE) {
                released += r.bytes;
                kept = src + (r.until - (uintptr_t) src);   // the page around `end` goes with the next slice
            } else if (r.status != T2P_RELEASE_TOO_SMALL) {
                why     = r.status;
                error   = r.error;
                release = false;
            }
            s.release_nanos.fetch_add(
                std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t1).count());
        }
    }

    (static_cast<int>(tensor->type) == GGML_T2P_TYPE_PQ2_0 ? s.n_pq2 : s.n_ptq1).fetch_add(1);
    s.bytes.fetch_add(dst_size);
    if (cfg.release_source) {
        if (released > 0) {
            s.released.fetch_add(released);
            s.n_released.fetch_add(1);
        } else if (why == T2P_RELEASE_NOT_SHARED) {
            s.n_not_mapped.fetch_add(1);
        } else if (why == T2P_RELEASE_REFUSED || why == T2P_RELEASE_NO_MAPS) {
            s.n_refused.fetch_add(1);
            s.refused_errno.store(error);
        }
    }
}

// Decode streams every repacked byte once per token, so the weights' pages decide how often the
// CPU walks page tables and where its hardware prefetchers stop (they do not cross a 4 KiB page).
// On Linux, ask for transparent huge pages on the whole 2 MiB pages inside a fresh buffer, before
// the repack writes (and so faults) them: with THP in "madvise" mode (Debian's and Ubuntu's
// default) they are 4 KiB pages otherwise; in "always" mode this changes nothing; in "never" mode
// the kernel ignores it. MADV_HUGEPAGE changes no contents, and a refusal (EINVAL on a kernel
// without THP) is only counted for the log. Measured in docs/results.md ("Huge pages").
void advise_huge_pages(void * base, size_t size) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (!config().huge_pages || base == nullptr) {
        return;
    }
    uintptr_t a = 0;
    uintptr_t e = 0;
    if (!t2p_page_interior(reinterpret_cast<uintptr_t>(base), size, uintptr_t(2) << 20, &a, &e)) {
        return;
    }
    if (madvise(reinterpret_cast<void *>(a), e - a, MADV_HUGEPAGE) == 0) {
        stats().huge_advised.fetch_add(e - a);
    } else {
        stats().huge_errno.store(errno);
    }
#else
    (void) base;
    (void) size;
#endif
}

const char * buft_get_name(ggml_backend_buffer_type_t) {
    return "CPU_T2P";
}

ggml_backend_buffer_t buft_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size) {
    ggml_backend_buffer_t buffer = ggml_backend_buft_alloc_buffer(ggml_backend_cpu_buffer_type(), size);
    if (buffer == nullptr) {
        return nullptr;
    }
    advise_huge_pages(ggml_backend_buffer_get_base(buffer), ggml_backend_buffer_get_size(buffer));
    buffer->buft                = buft;
    buffer->iface.init_tensor   = buffer_init_tensor;
    buffer->iface.set_tensor    = buffer_set_tensor;
    buffer->iface.get_tensor    = nullptr;   // repacked bytes are not the tensor's bytes
#if GGML_T2P_HAVE_TENSOR_2D
    buffer->iface.set_tensor_2d = nullptr;   // fall back to whole-tensor set_tensor
    buffer->iface.get_tensor_2d = nullptr;
#endif
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
