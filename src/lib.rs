//! # ggml-t2p: exact CPU kernels for ternary weights in llama.cpp
//!
//! PrismML's ternary models store weights as PQ2_0 (2 bits per weight, codes `u = w + 1`) or
//! PTQ1_0 (five trits per byte). At model load this crate repacks them into a layout shaped for
//! the CPU's dot-product instructions, so that decoding a weight costs about one `and`:
//! - ARM: **T2P** (4 rows x 128 weights in 136 bytes, two row pairs of 16-byte words) for `sdot`
//!   (gemv, decode) and `smmla`/i8mm (gemm, prompt batches);
//! - x86-64: **X16** (16 rows x 128 weights in 544 bytes, one 32-bit lane per row) for
//!   `vpdpbusd` (AVX-512 VNNI, AVX-VNNI) and `vpmaddubsw` (AVX2); PTQ1_0 with AVX-512 VBMI: **L64**
//!   (64 rows in 1792 bytes, the file's 1.75 bits per weight), a `vpermi2b` table-lookup gemv and
//!   a gemm through X16.
//!
//! Activations (ggml's Q8_K) are packed once per matrix multiplication
//! ([`kernels::act_pack`]) into the form the chosen kernel reads.
//!
//! ## Contract
//! - **Formats** ([`format`](mod@format)): PQ2_0 (34 B / 128 weights), PTQ1_0 (28 B), Q8_K activations
//!   (292 B / 256 values), T2P (136 B = 4 x PQ2_0), PTQ1_0x4 (112 B = 4 x PTQ1_0), X16
//!   (544 B = 16 x PQ2_0), L64 (1792 B = 64 x PTQ1_0).
//! - **Numerics** ([`reference`](mod@reference)): every output is, bit for bit,
//!   `sumf = fma(fp32(d_i) * d_y, (float) isum_i, sumf)` over 128-weight blocks `i` in order
//!   (docs/numerics.md §1, the fork's `ggml_vec_dot_pq2_0_q8_K`). Integer sums are exact, so every kernel,
//!   batch width, row split and CPU feature level returns the same bits. Rows whose width is a
//!   multiple of 128 but not of 256 are defined with the activation row zero-padded to 256.
//! - **NaN scales**: an output whose formula meets a NaN scale (a weight block's `d_i` or an
//!   activation block's `d_y`, one or both) is a NaN at every level; its payload and sign are
//!   unspecified (levels differ: the reference and AVX2 keep the activation's NaN, the VNNI levels
//!   the weight's, the ARM PTQ1_0x4 kernels may clear the sign). Every other output keeps the
//!   reference bits. This is the one place where levels may differ in bits.
//! - **Sizes**: every size query ([`repack::source_size`], [`repack::repacked_size`],
//!   [`kernels::act_pack::packed_size`], and the C ABI's `ggml_t2p_supports`,
//!   `ggml_t2p_repacked_size`, `ggml_t2p_act_packed_size`) refuses ([`Error::Shape`]) a size
//!   past `isize::MAX` bytes: no buffer can be that large.
//! - **Errors** ([`Error`]): bad shapes, short or misaligned buffers and unavailable kernels are
//!   reported, never undefined behaviour; the C ABI ([`ffi`], `include/ggml_t2p.h`) turns them
//!   into status codes and never lets a panic cross.
//!
//! ## Layout of the crate
//! [`format`](mod@format) (block types) -> [`repack`] (PQ2_0/PTQ1_0 -> T2P, PTQ1_0x4, X16, L64) ->
//! [`kernels`] (activation pack; one dispatch; scalar, NEON and x86 kernels) -> [`ffi`] (the only
//! `extern "C"`).

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks, clippy::missing_safety_doc)]
#![warn(missing_docs)]

mod checked;
mod error;
pub mod format;
pub mod hybrid;
pub mod kernels;
pub mod plugin;
pub mod reference;
pub mod repack;

pub mod ffi;

pub use error::Error;

pub use kernels::{Activations, CpuFeatures, KernelLevel, PackedWeights};
