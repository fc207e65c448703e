//! Kernels and the one place that chooses them.
//!
//! A kernel computes, for weight rows `rows` of a repacked matrix and every activation column,
//! the reference dot of [`crate::reference::vec_dot_pq2_0_q8_k`] (or its PTQ1_0 twin), bit for
//! bit, from activations packed once per matrix multiplication ([`act_pack`]). Which kernels
//! exist, on which layout, for which batch widths, with which tile, activation format and CPU
//! features, is the kernel table, [`table::LEVELS`], one row per [`KernelLevel`] (`ref`,
//! `dotprod`, `i8mm`, `avx2`, `avxvnni`, `avx512vnni`, `amx`).
//!
//! [`KernelLevel::best`] is `None` on a CPU without dotprod (ARM) or without AVX2+FMA+F16C (x86):
//! callers then decline and stock code runs. Nothing in here knows about ggml; the C ABI in
//! [`crate::ffi`] is a thin layer on [`gemm_raw`] and [`act_pack::pack_raw`].
//!
//! ## Modules, in layers (each imports only from the layers below it)
//! 1. Shared types: [`features`] (the CPU's features, asked once), [`operands`] (weights,
//!    activations, output, validation), [`act_pack`] (the activation formats and the pack).
//! 2. Kernels, on the shared types only: [`scalar`], `amx` (the tile kernel over a tile
//!    interface) and the ISA files (NEON; x86 AVX2, VNNI, AMX; the Q8_K quantizers).
//! 3. [`table`]: the kernel table and [`KernelLevel`], the only module that names the ISA files.
//! 4. [`dispatch`] (the entry points, reading the table) and [`driver`] (rows split over threads);
//!    with the feature `testing` only, `amx_model` (the AMX kernel under a scalar tile model,
//!    and its other test entry points).
//!
//! This file only declares.

pub mod act_lut;
pub mod act_pack;
// the AMX tile kernel's body: the library runs it on x86-64; elsewhere only the tests do (under
// the scalar model, feature `testing`)
#[cfg(any(target_arch = "x86_64", feature = "testing"))]
pub mod amx;
#[cfg(feature = "testing")]
pub mod amx_model;
pub mod dispatch;
pub mod driver;
pub mod features;
pub mod operands;
pub mod scalar;
pub mod table;

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
mod x86_l64;
#[cfg(target_arch = "x86_64")]
pub mod x86_quant;
#[cfg(target_arch = "x86_64")]
pub mod x86_vnni;

pub use dispatch::{gemm, gemm_packed, gemm_raw, gemv, quantize_q8_k, quantize_row_q8_k_fast};
pub use driver::{gemm_par, gemm_par_packed};
pub use features::CpuFeatures;
pub use operands::{Activations, PackedWeights};
pub use table::{assume_kernel, assume_on, KernelLevel};
