// ggml-t2p-glue.h - the CPU_T2P extra buffer type of ggml-cpu.
//
// Weights of type PQ2_0 (and PTQ1_0 where the host ggml knows it) that llama.cpp places in this
// buffer type are repacked once at load time by libggml_t2p (include/ggml_t2p.h) and multiplied by
// its exact ARM kernels; every other op and tensor stays with stock ggml-cpu.
//
// Environment (read once, at the first call):
//   GGML_T2P=0                           the buffer type is not offered (stock everywhere)
//   GGML_T2P_KERNEL=auto|ref|dotprod|i8mm  kernel level (default auto: the best the CPU has;
//                                        ref runs the scalar twin, also on CPUs without dotprod)
//   GGML_T2P_PTQ1=t2p|native             layout for PTQ1_0 weights (default t2p)
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
