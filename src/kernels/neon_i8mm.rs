//! NEON kernels with `smmla` (FEAT_I8MM): gemm over tiles of 4 weight rows x 16 activation
//! columns, then 4 x 8 and 4 x 4 for the last 8..15 and 1..7 columns.
//!
//! A decoded chunk of a row pair, `[row a: 8 weights | row b: the same 8]`, is the 2x8 left
//! operand of `smmla` as it is. The Q8_Kx4 pack interleaves 4 columns in 8-byte chunks, so chunk
//! `c` of columns (0,1) and (2,3) are two 16-byte right operands loaded with one `ldp`; each decoded
//! vector meets 8 (4x16), 4 (4x8) or 2 (4x4) of them, so the 6 decoding instructions of a 16-byte
//! word are shared by up to 32 `smmla`, with no zips in the loop. The accumulators start each block
//! at the pack's seeds `MAGIC - sum(y)` (`MAGIC + sum(y)` for negated decoders; `smmla` lane order),
//! so they end at `MAGIC +- isum`, whose bits are the float `12582912 +- isum`: the float step is
//! `fsub` + `fmul` + `fmla` per accumulator (no `scvtf`, 2 micro-ops on Neoverse-V2). The `ldp` and
//! its 4 `smmla` are one asm block (`asm::smmla_2x2_ldp`) so the compiler cannot hoist a tile's 64
//! activation loads to the top of the block, which ran out of registers and spilled. Columns past
//! the batch are zeros in the pack: a batch that is not a multiple of the tile runs one padded pass,
//! whose extra outputs are never stored; the weights of a row group stay in L1 across the column
//! tiles.
//!
//! Compiled (rustc 1.96, `--release`; `tools/cycle-model.py --show-loop`), one 128-weight block
//! costs 485 instructions for 64 outputs in a 4x16 tile (7.6 per output per 128 weights; stock 72):
//! 256 `smmla`, 48 decode, 48 float step, 107 loads (activations, seeds, scales, spilled sums),
//! 12 stores of spilled float sums, 14 address and loop; 264 for 32 outputs in a 4x8 tile (8.3) and
//! 162 for 16 in a 4x4 tile (10.1). A 4x16 tile holds 16 integer and 16 float accumulators, all 32
//! vector registers, so some float sums spill to L1 once per block; on Neoverse-V2 (llvm-mca-19) the
//! loop runs at 69% of the `smmla` issue limit.

use super::act_pack::ActBlockX4;
use super::asm::smmla_2x2_ldp;
use super::decode::{apply, pick_seed, store_col, ChunkDecoder, ChunkSink, T2pDecoder};
use super::operands::Job;
use crate::format::BlockT2p;
use core::arch::aarch64::*;

/// `smmla` tile sink: `NG` groups of 4 columns, `NQ = 2 NG` column pairs, 2 row pairs.
struct SmmlaSink<const NG: usize, const NQ: usize> {
    acc: [[int32x4_t; NQ]; 2],
    qs: [*const i8; NG],
}

impl<const NG: usize, const NQ: usize> SmmlaSink<NG, NQ> {
    /// Column group `k`: chunk `C` of columns (0,1) and (2,3) in one `ldp`, 4 `smmla`.
    #[inline(always)]
    unsafe fn group<const C: usize>(&mut self, k: usize, w0: int8x16_t, w1: int8x16_t) {
        // SAFETY: qs[k] points at a Q8_Kx4 block's 512 values (chunk C at bytes 32C..32C+32); the
        // caller has i8mm.
        unsafe {
            let [a0, a1, a2, a3] = smmla_2x2_ldp::<C>(
                [self.acc[0][2 * k], self.acc[0][2 * k + 1], self.acc[1][2 * k], self.acc[1][2 * k + 1]],
                w0,
                w1,
                self.qs[k],
            );
            self.acc[0][2 * k] = a0;
            self.acc[0][2 * k + 1] = a1;
            self.acc[1][2 * k] = a2;
            self.acc[1][2 * k + 1] = a3;
        }
    }
}

impl<const NG: usize, const NQ: usize> ChunkSink for SmmlaSink<NG, NQ> {
    #[inline(always)]
    unsafe fn chunk<const C: usize>(&mut self, w0: int8x16_t, w1: int8x16_t) {
        // SAFETY: forwarded. Written out: a loop over k keeps the accumulators in memory.
        unsafe {
            self.group::<C>(0, w0, w1);
            if NG > 1 {
                self.group::<C>(1, w0, w1);
            }
            if NG > 2 {
                self.group::<C>(2, w0, w1);
                self.group::<C>(3, w0, w1);
            }
        }
    }
}

/// One tile: row group `g` x column groups `cg .. cg + NG` (4 columns each).
///
/// # Safety
/// i8mm available; `job` validated; `pack` is the job's Q8_Kx4 activations; `cg + NG <= ceil(n_cols / 4)`.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // q indexes sumf, acc and the pack at once; kept as modeled
unsafe fn tile<D: ChunkDecoder, const NG: usize, const NQ: usize>(
    job: &Job<'_, D::Block, ActBlockX4>,
    pack: &[ActBlockX4],
    g: usize,
    cg: usize,
) {
    debug_assert_eq!(NQ, 2 * NG);
    let nb = job.nb;
    // SAFETY: a register operation (NEON is part of the target).
    let mut sumf = [[unsafe { vdupq_n_f32(0.0) }; NQ]; 2];
    for (i, b) in job.tile(g).iter().enumerate() {
        let a: [&ActBlockX4; NG] = core::array::from_fn(|k| &pack[(cg + k) * nb + i]);
        // SAFETY: all loads are inside this block and these pack entries.
        unsafe {
            // start at MAGIC - sum(y) (code decoders: the accumulator ends at MAGIC + isum) or
            // MAGIC + sum(y) (negated decoders: it ends at MAGIC - isum); see act_pack::MAGIC
            let acc: [[int32x4_t; NQ]; 2] = core::array::from_fn(|p| {
                core::array::from_fn(|q| {
                    vld1q_s32(pick_seed(D::NEGATED, &a[q / 2].seed[p][q % 2], &a[q / 2].nseed[p][q % 2]))
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
                    sumf[p][q] = apply(D::NEGATED, sumf[p][q], vmulq_f32(dp[p], yq), acc[p][q]);
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
