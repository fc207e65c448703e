//! NEON kernels with `smmla` (FEAT_I8MM): gemm over tiles of 4 weight rows x 8 activation
//! columns (and 4 x 4 for a last odd group of columns).
//!
//! A decoded chunk of a row pair, `[row a: 8 weights | row b: the same 8]`, is the 2x8 left
//! operand of `smmla` as it is. The Q8_Kx4 pack interleaves 4 columns in 8-byte chunks, so chunk
//! `c` of columns (0,1) and (2,3) are two 16-byte right operands loaded with one `ld1 {2 regs}`;
//! each decoded vector meets 2 (4x4) or 4 (4x8) of them: 8 or 16 `smmla` per chunk and row-pair
//! couple, every operand used at least twice, no zips in the loop. The accumulators start each
//! block at `-sum(y)` (in `smmla` lane order, from the pack), so they end holding `isum` and the
//! float step is `scvtf` + `fmul` + `fma` per accumulator. Columns past the batch are zeros in the
//! pack: a batch that is not a multiple of the tile runs one padded pass, whose extra outputs are
//! never stored.
//!
//! Compiled (rustc 1.96, `--release`), one 128-weight block of a 4x8 tile is 263 instructions for
//! 32 outputs (8.2 per output per 128 weights; stock: 72): 128 `smmla`, 48 for decoding 8 words
//! (`and`, `ushr`), 46 loads, 28 for the float step, the rest addressing (`tools/cycle-model.py`).

use super::act_pack::{with_x4, ActBlockX4};
use super::asm::smmla;
use super::neon_dotprod::{store_col, ChunkDecoder, T2pDecoder};
use super::Job;
use crate::format::BlockT2p;
use core::arch::aarch64::*;

/// One tile: row group `g` x column groups `cg .. cg + NG` (4 columns each).
///
/// # Safety
/// i8mm available; `job` validated; `pack` from `with_x4`; `cg + NG <= ceil(n_cols / 4)`.
#[inline(always)]
unsafe fn tile<D: ChunkDecoder, const NG: usize, const NQ: usize>(job: &Job<'_, D::Block>, pack: &[ActBlockX4], g: usize, cg: usize) {
    debug_assert_eq!(NQ, 2 * NG);
    let nb = job.nb;
    let mut sumf = [[unsafe { vdupq_n_f32(0.0) }; NQ]; 2];
    for (i, b) in job.group(g).iter().enumerate() {
        let a: [&ActBlockX4; NG] = core::array::from_fn(|k| &pack[(cg + k) * nb + i]);
        // SAFETY: all loads are inside this block and these pack entries.
        unsafe {
            // start at -sum(y) (T2P: codes u, isum = dot(u,y) - sum(y)) or +sum(y) (negated
            // decoders: the accumulator ends at -isum)
            let mut acc = [[vdupq_n_s32(0); NQ]; 2];
            for q in 0..NQ {
                let nys = vld1q_s32(a[q / 2].nysum[q % 2].as_ptr());
                let init = if D::NEGATED { vnegq_s32(nys) } else { nys };
                acc[0][q] = init;
                acc[1][q] = init;
            }
            D::chunks(b, |c, w0, w1| {
                for k in 0..NG {
                    let x = vld1q_s8_x2(a[k].qs.as_ptr().add(32 * c));
                    acc[0][2 * k] = smmla(acc[0][2 * k], w0, x.0);
                    acc[0][2 * k + 1] = smmla(acc[0][2 * k + 1], w0, x.1);
                    acc[1][2 * k] = smmla(acc[1][2 * k], w1, x.0);
                    acc[1][2 * k + 1] = smmla(acc[1][2 * k + 1], w1, x.1);
                }
            });
            let d = D::scales(b);
            let dp = [vzip1q_f32(d, d), vzip2q_f32(d, d)]; // [d0,d0,d1,d1], [d2,d2,d3,d3]
            for q in 0..NQ {
                let yq = vld1q_f32(a[q / 2].yd[q % 2].as_ptr());
                for p in 0..2 {
                    let scale = vmulq_f32(dp[p], yq);
                    let v = vcvtq_f32_s32(acc[p][q]);
                    sumf[p][q] = if D::NEGATED { vfmsq_f32(sumf[p][q], scale, v) } else { vfmaq_f32(sumf[p][q], scale, v) };
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

/// Generic `smmla` gemm: 4x8 tiles, and a 4x4 tile for a last odd group of 4 columns.
///
/// # Safety
/// i8mm available; `job` validated; `pack` from `with_x4` of the job's activations.
#[inline(always)]
pub(crate) unsafe fn gemm_smmla<D: ChunkDecoder>(job: &Job<'_, D::Block>, pack: &[ActBlockX4]) {
    let groups = job.n_cols.div_ceil(4);
    for g in job.groups.clone() {
        let mut cg = 0;
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

/// T2P x Q8_K gemm with `smmla`.
///
/// # Safety
/// i8mm and dotprod available; `job` validated.
#[target_feature(enable = "neon,dotprod,i8mm")]
pub(crate) unsafe fn gemm_t2p_4x8_q8_k_i8mm(job: Job<'_, BlockT2p>) {
    // SAFETY: forwarded.
    with_x4(job.act, job.n_cols, job.nb, |pack| unsafe { gemm_t2p_4x8_body(&job, pack) });
}

#[target_feature(enable = "neon,dotprod,i8mm")]
unsafe fn gemm_t2p_4x8_body(job: &Job<'_, BlockT2p>, pack: &[ActBlockX4]) {
    // SAFETY: forwarded.
    unsafe { gemm_smmla::<T2pDecoder>(job, pack) }
}
