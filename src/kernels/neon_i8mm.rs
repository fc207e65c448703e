//! NEON kernels with `smmla` (FEAT_I8MM): gemm over tiles of 4 weight rows x 16 activation
//! columns, then 4 x 8 and 4 x 4 for the last 8..15 and 1..7 columns.
//!
//! A decoded chunk of a row pair, `[row a: 8 weights | row b: the same 8]`, is the 2x8 left
//! operand of `smmla` as it is. The Q8_Kx4 pack interleaves 4 columns in 8-byte chunks, so chunk
//! `c` of columns (0,1) and (2,3) are two 16-byte right operands loaded with one `ld1 {2 regs}`;
//! each decoded vector meets 8 (4x16), 4 (4x8) or 2 (4x4) of them, so the 6 decoding instructions
//! of a 16-byte word are shared by up to 32 `smmla`, with no zips in the loop. The accumulators
//! start each block at `-sum(y)` (in `smmla` lane order, from the pack), so they end holding `isum`
//! and the float step is `scvtf` + `fmul` + `fma` per accumulator. Columns past the batch are zeros
//! in the pack: a batch that is not a multiple of the tile runs one padded pass, whose extra outputs
//! are never stored; the weights of a row group stay in L1 across the column tiles.
//!
//! Compiled (rustc 1.96, `--release`; `tools/cycle-model.py --show-loop`), one 128-weight block
//! costs 503 instructions for 64 outputs in a 4x16 tile (7.9 per output per 128 weights; stock 72),
//! 263 for 32 in a 4x8 tile (8.2) and 162 for 16 in a 4x4 tile (10.1). A 4x16 tile holds 16 integer
//! and 16 float accumulators, which is all 32 vector registers, so its float sums spill to L1
//! once per block; the model still ranks it first.

use super::act_pack::ActBlockX4;
use super::asm::smmla;
use super::decode::{store_col, ChunkDecoder, ChunkSink, T2pDecoder};
use super::Job;
use crate::format::BlockT2p;
use core::arch::aarch64::*;

/// `smmla` tile sink: `NG` groups of 4 columns, `NQ = 2 NG` column pairs, 2 row pairs.
struct SmmlaSink<const NG: usize, const NQ: usize> {
    acc: [[int32x4_t; NQ]; 2],
    qs: [*const i8; NG],
}

impl<const NG: usize, const NQ: usize> SmmlaSink<NG, NQ> {
    /// Column group `k`: chunk `c` of columns (0,1) and (2,3) in one `ld1 {2 regs}`, 4 `smmla`.
    #[inline(always)]
    unsafe fn group(&mut self, k: usize, c: usize, w0: int8x16_t, w1: int8x16_t) {
        // SAFETY: qs[k] points at a Q8_Kx4 block's 512 values; the caller has i8mm.
        unsafe {
            let x = vld1q_s8_x2(self.qs[k].add(32 * c));
            self.acc[0][2 * k] = smmla(self.acc[0][2 * k], w0, x.0);
            self.acc[0][2 * k + 1] = smmla(self.acc[0][2 * k + 1], w0, x.1);
            self.acc[1][2 * k] = smmla(self.acc[1][2 * k], w1, x.0);
            self.acc[1][2 * k + 1] = smmla(self.acc[1][2 * k + 1], w1, x.1);
        }
    }
}

impl<const NG: usize, const NQ: usize> ChunkSink for SmmlaSink<NG, NQ> {
    #[inline(always)]
    unsafe fn chunk(&mut self, c: usize, w0: int8x16_t, w1: int8x16_t) {
        // SAFETY: forwarded. Written out: a loop over k keeps the accumulators in memory.
        unsafe {
            self.group(0, c, w0, w1);
            if NG > 1 {
                self.group(1, c, w0, w1);
            }
            if NG > 2 {
                self.group(2, c, w0, w1);
                self.group(3, c, w0, w1);
            }
        }
    }
}

/// One tile: row group `g` x column groups `cg .. cg + NG` (4 columns each).
///
/// # Safety
/// i8mm available; `job` validated; `pack` is the job's Q8_Kx4 activations; `cg + NG <= ceil(n_cols / 4)`.
#[inline(always)]
unsafe fn tile<D: ChunkDecoder, const NG: usize, const NQ: usize>(
    job: &Job<'_, D::Block, ActBlockX4>,
    pack: &[ActBlockX4],
    g: usize,
    cg: usize,
) {
    debug_assert_eq!(NQ, 2 * NG);
    let nb = job.nb;
    let mut sumf = [[unsafe { vdupq_n_f32(0.0) }; NQ]; 2];
    for (i, b) in job.tile(g).iter().enumerate() {
        let a: [&ActBlockX4; NG] = core::array::from_fn(|k| &pack[(cg + k) * nb + i]);
        // SAFETY: all loads are inside this block and these pack entries.
        unsafe {
            // start at -sum(y) (T2P: codes u, isum = dot(u,y) - sum(y)) or +sum(y) (negated
            // decoders: the accumulator ends at -isum)
            let acc: [[int32x4_t; NQ]; 2] = core::array::from_fn(|p| {
                core::array::from_fn(|q| {
                    let init = if D::NEGATED { &a[q / 2].ysum[p][q % 2] } else { &a[q / 2].nysum[p][q % 2] };
                    vld1q_s32(init.as_ptr())
                })
            });
            let mut sink = SmmlaSink::<NG, NQ> { acc, qs: core::array::from_fn(|k| a[k].qs.as_ptr()) };
            D::chunks(b, &mut sink);
            let acc = sink.acc;
            let d = D::scales(b);
            let dp = [vzip1q_f32(d, d), vzip2q_f32(d, d)]; // [d0,d0,d1,d1], [d2,d2,d3,d3]
            for q in 0..NQ {
                let yq = vld1q_f32(a[q / 2].yd[q % 2].as_ptr());
                for p in 0..2 {
                    let scale = vmulq_f32(dp[p], yq);
                    let v = vcvtq_f32_s32(acc[p][q]);
                    sumf[p][q] =
                        if D::NEGATED { vfmsq_f32(sumf[p][q], scale, v) } else { vfmaq_f32(sumf[p][q], scale, v) };
                }
            }
        }
    }
    for q in 0..NQ {
        // sumf[p][q] lanes: [row 2p . col 2q, row 2p . col 2q+1, row 2p+1 . col 2q, row 2p+1 . col 2q+1]
        // SAFETY: the job owns rows 4g..4g+4 of every column; store_col skips padded columns.
        unsafe {
            store_col(job, g, 4 * cg + 2 * q, vuzp1q_f32(sumf[0][q], sumf[1][q]));
            store_col(job, g, 4 * cg + 2 * q + 1, vuzp2q_f32(sumf[0][q], sumf[1][q]));
        }
    }
}

/// Generic `smmla` gemm: 4x16 tiles, then at most one 4x8 and one 4x4 tile for the remaining
/// column groups.
///
/// # Safety
/// i8mm available; `job` validated; `pack` is the job's Q8_Kx4 activations of the job's activations.
#[inline(always)]
pub(crate) unsafe fn gemm_smmla<D: ChunkDecoder>(job: &Job<'_, D::Block, ActBlockX4>, pack: &[ActBlockX4]) {
    let groups = job.n_cols.div_ceil(4);
    for g in job.tiles.clone() {
        let mut cg = 0;
        while cg + 4 <= groups {
            // SAFETY: forwarded; cg + 4 <= groups.
            unsafe { tile::<D, 4, 8>(job, pack, g, cg) };
            cg += 4;
        }
        while cg + 2 <= groups {
            // SAFETY: forwarded; cg + 2 <= groups.
            unsafe { tile::<D, 2, 4>(job, pack, g, cg) };
            cg += 2;
        }
        if cg < groups {
            // SAFETY: forwarded; cg + 1 == groups.
            unsafe { tile::<D, 1, 2>(job, pack, g, cg) };
        }
    }
}

/// T2P x Q8_K gemm with `smmla` (4x16, 4x8, 4x4 tiles).
///
/// # Safety
/// i8mm and dotprod available; `job` validated.
#[target_feature(enable = "neon,dotprod,i8mm")]
pub(crate) unsafe fn gemm_t2p_4x16_q8_k_i8mm(job: Job<'_, BlockT2p, ActBlockX4>) {
    // SAFETY: forwarded.
    unsafe { gemm_t2p_4x16_body(&job, job.act) }
}

#[target_feature(enable = "neon,dotprod,i8mm")]
unsafe fn gemm_t2p_4x16_body(job: &Job<'_, BlockT2p, ActBlockX4>, pack: &[ActBlockX4]) {
    // SAFETY: forwarded.
    unsafe { gemm_smmla::<T2pDecoder>(job, pack) }
}
