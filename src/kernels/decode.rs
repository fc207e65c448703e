//! Decoders shared by the ARM kernels: a [`ChunkDecoder`] turns one 4-row x 128-weight block into
//! 16 chunks of two `[row a | row b]` int8 operands (one per row pair) and hands them to a
//! [`ChunkSink`] (a kernel's inner step: `sdot` gemv, `sdot` 4x4 tile, `smmla` tile), plus the
//! per-block float step and the column store they all use. [`T2pDecoder`] is here; the PTQ1_0x4
//! decoder lives with its kernels in `ptq1_0_neon`.

use super::asm::load_f16x4;
use super::Job;
use crate::format::BlockT2p;
use core::arch::aarch64::*;

/// Receives the decoded chunks of one block (see [`ChunkDecoder::chunks`]).
pub(crate) trait ChunkSink {
    /// Chunk `c` (weights `8c..8c+8`) of row pairs 0 and 1 as `[row a | row b]` operands.
    ///
    /// # Safety
    /// Called only from kernels compiled with the features the sink's instructions need.
    unsafe fn chunk(&mut self, c: usize, pair0: int8x16_t, pair1: int8x16_t);
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
    /// Calls `sink.chunk(c, pair0, pair1)` for each chunk `c` in 0..16 (in any order), where
    /// `pairP` holds rows `2P` (bytes 0..8) and `2P+1` (bytes 8..16), weights `8c..8c+8`.
    ///
    /// # Safety
    /// NEON available; as [`ChunkSink::chunk`].
    unsafe fn chunks<S: ChunkSink>(b: &Self::Block, sink: &mut S);
}

/// T2P with exact slot values (`and 3`, `ushr 2 + and 3`, `ushr 4 + and 3`, `ushr 6`).
pub(crate) struct T2pDecoder;

/// Word `w` of both row pairs: chunks `4w .. 4w+4`.
#[inline(always)]
unsafe fn t2p_word<S: ChunkSink>(b: &BlockT2p, w: usize, sink: &mut S) {
    // SAFETY: each word is 16 readable bytes; the sink's contract is the caller's.
    unsafe {
        let m3 = vdupq_n_u8(3);
        let s8 = vreinterpretq_s8_u8;
        let w0 = vld1q_u8(b.qs[0][w].as_ptr());
        let w1 = vld1q_u8(b.qs[1][w].as_ptr());
        sink.chunk(4 * w, s8(vandq_u8(w0, m3)), s8(vandq_u8(w1, m3)));
        sink.chunk(4 * w + 1, s8(vandq_u8(vshrq_n_u8::<2>(w0), m3)), s8(vandq_u8(vshrq_n_u8::<2>(w1), m3)));
        sink.chunk(4 * w + 2, s8(vandq_u8(vshrq_n_u8::<4>(w0), m3)), s8(vandq_u8(vshrq_n_u8::<4>(w1), m3)));
        sink.chunk(4 * w + 3, s8(vshrq_n_u8::<6>(w0)), s8(vshrq_n_u8::<6>(w1)));
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
            t2p_word(b, 0, sink);
            t2p_word(b, 1, sink);
            t2p_word(b, 2, sink);
            t2p_word(b, 3, sink);
        }
    }
}

/// Applies one block's integer result to the running sums: `sumf + scale * isum` (one fused
/// rounding per lane, as the reference), where `isum = v - sum(y)` or, for negated decoders,
/// `isum = -(v + sum(y))` (computed as `sumf - scale * (v + sum(y))`, the same bits). `nysum` is
/// `-sum(y)` per lane.
#[inline(always)]
pub(crate) unsafe fn apply(
    negated: bool,
    sumf: float32x4_t,
    scale: float32x4_t,
    v: int32x4_t,
    nysum: int32x4_t,
) -> float32x4_t {
    // SAFETY: register operations; NEON is baseline on aarch64.
    unsafe {
        if negated {
            vfmsq_f32(sumf, scale, vcvtq_f32_s32(vsubq_s32(v, nysum)))
        } else {
            vfmaq_f32(sumf, scale, vcvtq_f32_s32(vaddq_s32(v, nysum)))
        }
    }
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

#[inline(always)]
pub(crate) unsafe fn lane_s32(v: [int32x4_t; 2], j: usize) -> int32x4_t {
    // SAFETY: register operations.
    unsafe {
        match j {
            0 => vdupq_laneq_s32::<0>(v[0]),
            1 => vdupq_laneq_s32::<1>(v[0]),
            2 => vdupq_laneq_s32::<0>(v[1]),
            _ => vdupq_laneq_s32::<1>(v[1]),
        }
    }
}
