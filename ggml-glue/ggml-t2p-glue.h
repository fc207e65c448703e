// ggml-t2p-glue.h - the CPU_T2P extra buffer type of ggml-cpu.
//
// Weights of type PQ2_0 (and PTQ1_0 where the host ggml knows it) that llama.cpp places in this
// buffer type are repacked once at load time by libggml_t2p (include/ggml_t2p.h) into the layout
// the library picks for this CPU and multiplied by its exact kernels (ARM: sdot, smmla; x86-64:
// AVX2, AVX-VNNI, AVX-512 VNNI); every other op and tensor stays with stock ggml-cpu.
//
// Environment (read once, at the first call, by the library: ggml_t2p_plugin_new in
// include/ggml_t2p.h; README.md, "What you see, and the toggles"):
//   GGML_T2P=0                   the buffer type is not offered (stock everywhere)
//   GGML_T2P_KERNEL=auto|ref|dotprod|i8mm|avx2|avxvnni|avx512vnni|amx
//                                kernel level (default auto: the best the CPU has; ref runs the
//                                scalar twin, also on CPUs without a SIMD level)
//   GGML_T2P_PTQ1=t2p|native     PTQ1_0 weights at 2.125 bits per weight or kept at 1.75 where a
//                                layout for that exists (PTQ1_0x4 on ARM, L64 on x86-64 with
//                                AVX-512 VBMI); default native where L64 runs, else t2p
//   GGML_T2P_QUANTIZE=auto|ggml  Q8_K activations by the library in the host's rounding (default,
//                                when the start-up probe finds it) or always by ggml's own
//   GGML_T2P_RELEASE_SOURCE=1|0  after repacking a tensor, unmap the file pages it was read from
//                                when they are a read-only shared file mapping (llama.cpp's mmap;
//                                Linux only), so that peak RSS with mmap matches --no-mmap
//                                (default 1; 0 keeps them mapped)
//   GGML_T2P_HUGE_PAGES=0|1      advise the buffers as transparent huge pages (Linux; default 0)
#pragma once

#include "ggml-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

// The CPU_T2P buffer type, or NULL when disabled (GGML_T2P=0) or unsupported on this CPU.
ggml_backend_buffer_type_t ggml_backend_cpu_t2p_buffer_type(void);

#ifdef __cplusplus
}
#endif
