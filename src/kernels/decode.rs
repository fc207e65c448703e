//! Decoders shared by the ARM kernels: a [`ChunkDecoder`] turns one 4-row x 128-weight block into
//! 16 chunks of two `[row a | row b]` int8 operands (one per row pair) and hands them to a
//! [`ChunkSink`] (a kernel's inner step: `sdot` gemv, `sdot` 4x4 tile, `smmla` tile), plus the
//! per-block float step and the column store they all use. [`T2pDecoder`] is here; the PTQ1_0x4
//! decoder lives with its kernels in `ptq1_0_neon`.

use super::asm::load_f16x4;
use super::operands::Job;
use crate::format::BlockT2p;
use crate::reference::ROUNDING_MAGIC;
use core::arch::aarch64::*;

/// Receives the decoded chunks of one block (see [`ChunkDecoder::chunks`]).
pub(crate) trait ChunkSink {
    /// Chunk `C` (weights `8C..8C+8`) of row pairs 0 and 1 as `[row a | row b]` operands. `C` is a
    /// constant so that sinks can use it as an immediate offset.
    ///
    /// # Safety
    /// Called only from kernels compiled with the features the sink's instructions need.
    unsafe fn chunk<const C: usize>(&mut self, pair0: int8x16_t, pair1: int8x16_t);
}

/// Turns one 4-row x 128-weight block into `[row a | row b]` int8 chunk operands.
///
/// Decoders and sinks are traits with `#[inline(always)]` methods rather than closures: a closure
/// big enough (the 4x16 `smmla` tile) is not inlined, and its accumulators then live in memory.
pub(crate) trait ChunkDecoder {
    /// The repacked block type.
    type Block;
    /// `false`: values are codes `u = w + 1` and `isum = dot - sum(y)`.
    /// `true`: values are `-digit` and `isum = -(dot + sum(y))`.
    const NEGATED: bool;
    /// The four rows' scales as f32.
    ///
    /// # Safety
    /// NEON available (always on aarch64).
    unsafe fn scales(b: &Self::Block) -> float32x4_t;
    /// Calls `sink.chunk::<c>(pair0, pair1)` for each chunk `c` in 0..16 (in any order), where
    /// `pairP` holds rows `2P` (bytes 0..8) and `2P+1` (bytes 8..16), weights `8c..8c+8`.
    ///
    /// # Safety
    /// NEON available; as [`ChunkSink::chunk`].
    unsafe fn chunks<S: ChunkSink>(b: &Self::Block, sink: &mut S);
}

/// T2P with exact slot values (`and 3`, `ushr 2 + and 3`, `ushr 4 + and 3`, `ushr 6`).
pub(crate) struct T2pDecoder;

/// Word `W` of both row pairs: chunks `C0 = 4W .. 4W+4` (the chunk numbers are passed as well:
/// `4 * W` cannot be a const argument).
#[inline(always)]
unsafe fn t2p_word<S: ChunkSink, const W: usize, const C0: usize, const C1: usize, const C2: usize, const C3: usize>(
    b: &BlockT2p,
    sink: &mut S,
) {
    debug_assert!(C0 == 4 * W && C1 == C0 + 1 && C2 == C0 + 2 && C3 == C0 + 3);
    // SAFETY: each word is 16 readable bytes; the sink's contract is the caller's.
    unsafe {
        let m3 = vdupq_n_u8(3);
        let s8 = vreinterpretq_s8_u8;
        let w0 = vld1q_u8(b.qs[0][W].as_ptr());
        let w1 = vld1q_u8(b.qs[1][W].as_ptr());
        sink.chunk::<C0>(s8(vandq_u8(w0, m3)), s8(vandq_u8(w1, m3)));
        sink.chunk::<C1>(s8(vandq_u8(vshrq_n_u8::<2>(w0), m3)), s8(vandq_u8(vshrq_n_u8::<2>(w1), m3)));
        sink.chunk::<C2>(s8(vandq_u8(vshrq_n_u8::<4>(w0), m3)), s8(vandq_u8(vshrq_n_u8::<4>(w1), m3)));
        sink.chunk::<C3>(s8(vshrq_n_u8::<6>(w0)), s8(vshrq_n_u8::<6>(w1)));
    }
}

impl ChunkDecoder for T2pDecoder {
    type Block = BlockT2p;
    const NEGATED: bool = false;

    #[inline(always)]
    unsafe fn scales(b: &BlockT2p) -> float32x4_t {
        // SAFETY: d is 8 readable bytes.
        unsafe { load_f16x4(b.d.as_ptr().cast()) }
    }

    #[inline(always)]
    unsafe fn chunks<S: ChunkSink>(b: &BlockT2p, sink: &mut S) {
        // SAFETY: forwarded. Written out: the compiler keeps a 4-trip loop otherwise.
        unsafe {
            t2p_word::<S, 0, 0, 1, 2, 3>(b, sink);
            t2p_word::<S, 1, 4, 5, 6, 7>(b, sink);
            t2p_word::<S, 2, 8, 9, 10, 11>(b, sink);
            t2p_word::<S, 3, 12, 13, 14, 15>(b, sink);
        }
    }
}

/// Applies one block's integer result to the running sums: `sumf + scale * isum` (one fused
/// rounding per lane, as the reference). `v` is the block's accumulator sum started from the pack's
/// seed: `MAGIC + isum` for code decoders, `MAGIC - isum` for negated ones (seeded with
/// `MAGIC + sum(y)`; then `sumf - scale * (-isum)`, the same bits). Its bits read as a float are
/// `12582912 +- isum` exactly (`|isum| < 2^22`), so one `fsub` gives `(float) isum` (see
/// [`act_pack::MAGIC`](super::act_pack::MAGIC)).
#[inline(always)]
pub(crate) unsafe fn apply(negated: bool, sumf: float32x4_t, scale: float32x4_t, v: int32x4_t) -> float32x4_t {
    // SAFETY: register operations; NEON is baseline on aarch64.
    unsafe {
        let f = vsubq_f32(vreinterpretq_f32_s32(v), vdupq_n_f32(ROUNDING_MAGIC));
        if negated {
            vfmsq_f32(sumf, scale, f)
        } else {
            vfmaq_f32(sumf, scale, f)
        }
    }
}

/// The pack's seeds for a decoder: `seed` (`MAGIC - sum(y)`) for code decoders, `nseed`
/// (`MAGIC + sum(y)`) for negated ones.
#[inline(always)]
pub(crate) fn pick_seed<T>(negated: bool, seed: &T, nseed: &T) -> *const i32 {
    (if negated { nseed } else { seed } as *const T).cast()
}

/// Stores the 4 rows of row group `g` for column `j` if `j < n_cols`.
///
/// # Safety
/// The job owns those rows.
#[inline(always)]
pub(crate) unsafe fn store_col<B, A>(job: &Job<'_, B, A>, g: usize, j: usize, v: float32x4_t) {
    if j < job.n_cols {
        // SAFETY: per the function contract.
        unsafe { vst1q_f32(job.out.ptr.add(j * job.out.col_stride + 4 * g), v) };
    }
}

/// Broadcast lane `j % 2` of the column-pair vector holding column `j` (0..4).
#[inline(always)]
pub(crate) unsafe fn lane_f32(v: [float32x4_t; 2], j: usize) -> float32x4_t {
    // SAFETY: register operations.
    unsafe {
        match j {
            0 => vdupq_laneq_f32::<0>(v[0]),
            1 => vdupq_laneq_f32::<1>(v[0]),
            2 => vdupq_laneq_f32::<0>(v[1]),
            _ => vdupq_laneq_f32::<1>(v[1]),
        }
    }
}
