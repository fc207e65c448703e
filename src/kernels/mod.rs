//! Kernels and the one place that chooses them.
//!
//! A kernel computes, for weight rows `rows` of a repacked matrix and every activation column,
//! the reference dot of [`crate::reference::vec_dot_pq2_0_q8_k`] (or its PTQ1_0 twin), bit for
//! bit, from activations packed once per matrix multiplication ([`act_pack`]). Levels, from
//! portable to fastest, and the layout each runs on:
//!
//! | level | layouts | gemv (1 column) | gemm (several columns) |
//! |---|---|---|---|
//! | [`KernelLevel::Reference`] | all | `_generic` scalar twins ([`scalar`]) | the same |
//! | [`KernelLevel::Dotprod`] | T2P, PTQ1_0x4 | `sdot`, 4 rows | `sdot`, 4 rows x 4 columns |
//! | [`KernelLevel::I8mm`] | T2P, PTQ1_0x4 | `sdot` (as dotprod) | `smmla`, 4 rows x 16 (then 8, 4) columns |
//! | [`KernelLevel::Avx2`] | X16 | `vpmaddubsw`, 16 rows | `vpmaddubsw`, 16 rows x 4 columns |
//! | [`KernelLevel::AvxVnni`] | X16 | `vpdpbusd` ymm, 16 rows | `vpdpbusd` ymm, 16 rows x 2 columns |
//! | [`KernelLevel::Avx512Vnni`] | X16 | `vpdpbusd` zmm, 16 rows | `vpdpbusd` zmm, 16 rows x 8 columns |
//! | [`KernelLevel::Amx`] (forced only) | X16 | as avx512vnni | `tdpbssd`, 16 rows x 16 columns, 2 x 2 tiles at a time (as avx512vnni below [`dispatch::AMX_MIN_COLS`]) |
//!
//! [`KernelLevel::best`] is `None` on a CPU without dotprod (ARM) or without AVX2+FMA+F16C (x86):
//! callers then decline and stock code runs. Nothing in here knows about ggml; the C ABI in
//! [`crate::ffi`] is a thin layer on [`gemm_raw`] and [`act_pack::pack_raw`].
//!
//! ## Modules, one way
//! Shared: [`features`] (CPU features, levels, the choice), [`operands`] (weights, activations,
//! output, validation), [`act_pack`] (the activation pack). Kernels: [`scalar`], [`amx`] (the
//! tile kernel over a tile interface, with its scalar model) and the ISA files,
//! which use only the shared modules. [`dispatch`] (the one table) is the only module that names
//! an ISA file; [`driver`] splits rows over threads through it. This file only declares.

pub mod act_pack;
pub mod amx;
pub mod dispatch;
pub mod driver;
pub mod features;
pub mod operands;
pub mod peak;
pub mod scalar;

#[cfg(target_arch = "aarch64")]
mod asm;
#[cfg(target_arch = "aarch64")]
mod decode;
#[cfg(target_arch = "aarch64")]
pub mod neon_dotprod;
#[cfg(target_arch = "aarch64")]
pub mod neon_i8mm;
#[cfg(target_arch = "aarch64")]
pub mod neon_quant;
#[cfg(target_arch = "aarch64")]
pub mod ptq1_0_neon;

#[cfg(target_arch = "x86_64")]
mod x86;
#[cfg(target_arch = "x86_64")]
mod x86_amx;
#[cfg(target_arch = "x86_64")]
pub mod x86_avx2;
#[cfg(target_arch = "x86_64")]
pub mod x86_quant;
#[cfg(target_arch = "x86_64")]
pub mod x86_vnni;

pub use dispatch::{gemm, gemm_packed, gemm_raw, gemv, quantize_q8_k, quantize_row_q8_k_fast};
pub use driver::{gemm_par, gemm_par_packed};
pub use features::{assume_kernel, assume_on, CpuFeatures, KernelLevel};
pub use operands::{Activations, PackedWeights};
