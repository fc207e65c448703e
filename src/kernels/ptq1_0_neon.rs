//! Native PTQ1_0 kernels on the PTQ1_0x4 layout (1.75 bits per weight in memory).
//!
//! Digit `n` of a byte `q` is `(v >= 86) + (v >= 171)` for `v = q * 3^n mod 256`: one `mul`
//! (none for n = 0) and two `cmhs` per 16 bytes. NEON compares give -1 for true, so the sum of the
//! two masks is `-digit`, which `sdot`/`smmla` take as is; the block's `isum = -(dot + sum(y))`
//! (see `ChunkDecoder::NEGATED`). Every 16-byte vector of PTQ1_0x4 is already `[row a | row b]`,
//! so the same gemv/gemm drivers as T2P run it; the two `qh` bytes per row are expanded with one
//! `tbl` and one `mul` per row pair.
//!
//! Trade-off (see docs/ptq1_0.md, "Native or T2P"): native keeps the file's 1.75 bits per weight
//! (18% less memory traffic than T2P's 2.125) but spends about 5 instructions per 16 weights on
//! decoding where T2P spends 1 to 1.5; T2P wins wherever decode is compute-bound, native where
//! memory size or bandwidth is the limit.

use super::act_pack::{ActBlockX4, ActDup};
use super::asm::load_f16x4;
use super::decode::{ChunkDecoder, ChunkSink};
use super::neon_dotprod::{gemm_sdot_4x4, gemv_sdot};
use super::neon_i8mm::gemm_smmla;
use super::operands::Job;
use crate::format::BlockPtq1_0x4;
use core::arch::aarch64::*;

/// PTQ1_0x4 decoder: values are `-digit` (0, -1, -2).
pub(crate) struct Ptq1Decoder;

/// `tbl` indices that spread row `2p`'s and row `2p+1`'s two `qh` bytes over 8 lanes each.
static QH_INDEX: [[u8; 16]; 2] =
    [[0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3], [4, 5, 4, 5, 4, 5, 4, 5, 6, 7, 6, 7, 6, 7, 6, 7]];
/// Lane `e` of a qh chunk is element `120 + e`: digit `e / 2` of byte `e % 2`, i.e. the byte times
/// `3^(e/2)`.
static QH_MUL: [u8; 16] = [1, 1, 3, 3, 9, 9, 27, 27, 1, 1, 3, 3, 9, 9, 27, 27];

/// `-digit` of every lane of `t = q * 3^n mod 256`.
#[inline(always)]
unsafe fn neg_digit(t: uint8x16_t) -> int8x16_t {
    // SAFETY: register operations.
    unsafe { vreinterpretq_s8_u8(vaddq_u8(vcgeq_u8(t, vdupq_n_u8(86)), vcgeq_u8(t, vdupq_n_u8(171)))) }
}

/// `3^n mod 256` for digits 0..5 (a table: `u8::pow` on a loop counter is not folded).
const POW3: [u8; 5] = [1, 3, 9, 27, 81];

/// `-digit n` of every byte of `v`.
#[inline(always)]
unsafe fn neg_digit_n(v: uint8x16_t, n: u32) -> int8x16_t {
    // SAFETY: register operations only.
    unsafe {
        if n == 0 {
            neg_digit(v)
        } else {
            neg_digit(vmulq_u8(v, vdupq_n_u8(POW3[n as usize])))
        }
    }
}

impl ChunkDecoder for Ptq1Decoder {
    type Block = BlockPtq1_0x4;
    const NEGATED: bool = true;

    #[inline(always)]
    unsafe fn scales(b: &BlockPtq1_0x4) -> float32x4_t {
        // SAFETY: d is 8 readable bytes.
        unsafe { load_f16x4(b.d.as_ptr().cast()) }
    }

    #[inline(always)]
    unsafe fn chunks<S: ChunkSink>(b: &BlockPtq1_0x4, sink: &mut S) {
        // SAFETY: every load is a field of the block; the sink's contract is the caller's.
        unsafe {
            // written out: the compiler keeps a 2-trip loop otherwise
            let (l0, l1) = (vld1q_u8(b.lo[0][0].as_ptr()), vld1q_u8(b.lo[1][0].as_ptr()));
            five_digits::<S, 0, 2, 4, 6, 8>(l0, l1, sink);
            let (l0, l1) = (vld1q_u8(b.lo[0][1].as_ptr()), vld1q_u8(b.lo[1][1].as_ptr()));
            five_digits::<S, 1, 3, 5, 7, 9>(l0, l1, sink);
            let (h0, h1) = (vld1q_u8(b.hi[0].as_ptr()), vld1q_u8(b.hi[1].as_ptr()));
            five_digits::<S, 10, 11, 12, 13, 14>(h0, h1, sink);
            let qh = vld1_u8(b.qh.as_ptr().cast());
            let table = vcombine_u8(qh, qh);
            let mul = vld1q_u8(QH_MUL.as_ptr());
            let e0 = vmulq_u8(vqtbl1q_u8(table, vld1q_u8(QH_INDEX[0].as_ptr())), mul);
            let e1 = vmulq_u8(vqtbl1q_u8(table, vld1q_u8(QH_INDEX[1].as_ptr())), mul);
            sink.chunk::<15>(neg_digit(e0), neg_digit(e1));
        }
    }
}

/// Digits 0..5 of both row pairs' bytes as chunks `C0..C4` (half `h` of the `lo` bytes: chunks
/// `2n + h`; the `hi` bytes: chunks `10 + n`). Written out: with a loop the compiler keeps the big
/// (4x16) tiles' accumulators in memory.
#[inline(always)]
unsafe fn five_digits<
    S: ChunkSink,
    const C0: usize,
    const C1: usize,
    const C2: usize,
    const C3: usize,
    const C4: usize,
>(
    v0: uint8x16_t,
    v1: uint8x16_t,
    sink: &mut S,
) {
    // SAFETY: register operations; the sink's contract is the caller's.
    unsafe {
        sink.chunk::<C0>(neg_digit_n(v0, 0), neg_digit_n(v1, 0));
        sink.chunk::<C1>(neg_digit_n(v0, 1), neg_digit_n(v1, 1));
        sink.chunk::<C2>(neg_digit_n(v0, 2), neg_digit_n(v1, 2));
        sink.chunk::<C3>(neg_digit_n(v0, 3), neg_digit_n(v1, 3));
        sink.chunk::<C4>(neg_digit_n(v0, 4), neg_digit_n(v1, 4));
    }
}

/// PTQ1_0x4 x Q8_K gemv with `sdot`.
///
/// # Safety
/// dotprod available; `job` validated with one column.
#[target_feature(enable = "neon,dotprod")]
pub(crate) unsafe fn gemv_ptq1_0x4_4x1_q8_k_dotprod(job: Job<'_, BlockPtq1_0x4, ActDup>) {
    // SAFETY: forwarded.
    unsafe { gemv_body(&job, job.act) }
}

#[target_feature(enable = "neon,dotprod")]
unsafe fn gemv_body(job: &Job<'_, BlockPtq1_0x4, ActDup>, dup: &[ActDup]) {
    // SAFETY: forwarded.
    unsafe { gemv_sdot::<Ptq1Decoder>(job, dup) }
}

/// PTQ1_0x4 x Q8_K gemm, 4 rows x 4 columns with `sdot` (no i8mm).
///
/// # Safety
/// dotprod available; `job` validated.
#[target_feature(enable = "neon,dotprod")]
pub(crate) unsafe fn gemm_ptq1_0x4_4x4_q8_k_dotprod(job: Job<'_, BlockPtq1_0x4, ActBlockX4>) {
    // SAFETY: forwarded.
    unsafe { gemm_sdot_body(&job, job.act) }
}

#[target_feature(enable = "neon,dotprod")]
unsafe fn gemm_sdot_body(job: &Job<'_, BlockPtq1_0x4, ActBlockX4>, pack: &[ActBlockX4]) {
    // SAFETY: forwarded.
    unsafe { gemm_sdot_4x4::<Ptq1Decoder>(job, pack) }
}

/// PTQ1_0x4 x Q8_K gemm with `smmla` (4x16, 4x8, 4x4 tiles).
///
/// # Safety
/// i8mm and dotprod available; `job` validated.
#[target_feature(enable = "neon,dotprod,i8mm")]
pub(crate) unsafe fn gemm_ptq1_0x4_4x16_q8_k_i8mm(job: Job<'_, BlockPtq1_0x4, ActBlockX4>) {
    // SAFETY: forwarded.
    unsafe { gemm_smmla_body(&job, job.act) }
}

#[target_feature(enable = "neon,dotprod,i8mm")]
unsafe fn gemm_smmla_body(job: &Job<'_, BlockPtq1_0x4, ActBlockX4>, pack: &[ActBlockX4]) {
    // SAFETY: forwarded.
    unsafe { gemm_smmla::<Ptq1Decoder>(job, pack) }
}
