//! NEON kernels with `sdot` (FEAT_DotProd): the T2P gemv of the seeds, a generic `sdot` gemv,
//! and a dotprod-only gemm for CPUs without i8mm (Cortex-A76, Neoverse-N1, Raspberry Pi 5).
//!
//! ## T2P gemv (`gemv_t2p_4x1_q8_k_dotprod`)
//! One T2P block is 4 rows x 128 weights: 2 row pairs x 4 words of 16 bytes. Slot `s` of word `w`
//! is `[row a: chunk 4w+s | row b: the same chunk]`; the chunk's 8 activations come duplicated
//! (`[y | y]`, prepared once per call in `act_pack::ActDup` and loaded with `ldp`) so one `sdot`
//! serves both rows (lanes 0,1: row a; 2,3: row b).
//! Slots come out with `and 0x03` (u), `and 0x0c` (4u), `and 0x30` (16u) and `ushr #6` (u; an `and
//! 0xc0` would give 128 = -128), each into its own accumulator: 8 independent accumulators per
//! block, so `sdot` latency hides behind itself. Once per 128 weights:
//! `a2 + 4 a1 + 16 (a0 + a3) = 16 dot(u, y)`, `>> 4` (exact), minus `sum(y)` from the activation pack
//! gives `isum`, and one `fmul` + one `fma` per 4 rows apply `fp32(d) * d_y` exactly as the
//! reference does.
//!
//! ### Instruction count (read from the compiled code)
//! `tools/cycle-model.py --show-loop gemv_t2p_4x1_q8_k_dotprod` prints the loop as rustc 1.96
//! (`--release`, aarch64) emits it (`cargo rustc --release --target aarch64-unknown-linux-gnu
//! --crate-type rlib -- --emit asm`). One iteration is one T2P block, 128 weights x 4 rows:
//!
//! | per | instructions |
//! |---|---|
//! | 16-byte word | 4 `sdot` + 3 `and` + 1 `ushr` (the seed's "three ands and one shift"), 1 weight load, 1/2 `ldp` of activations |
//! | 128 weights x 4 rows | **106**: 32 `sdot`, 24 `and`, 8 `ushr`, 16 loads, 13 for the recombination, 2 for the running total, 9 for the float step (`fcvtl`, `fmul`, `scvtf`, `fmla`, ...), 2 loop |
//! | 128 weights x 1 row | 26.5, against 72 for stock `ggml_vec_dot_pq2_0_q8_K` (0.37x) |
//!
//! The seed counts stock NEON at 16 preparation instructions for 4 `sdot` per 64 weights (look-up,
//! shift, mask, subtract); here preparing one `sdot` operand costs one `and` (or one `ushr`).
//! Cycles per core (llvm-mca) are in README.md "Benchmarks and the cycle model".
//!
//! ## Generic kernels
//! The gemv and the 4x4 `sdot` gemm here and the `smmla` gemm in `neon_i8mm` run any
//! `decode::ChunkDecoder` (T2P and PTQ1_0x4).

use super::act_pack::{ActBlockX4, ActDup};
use super::asm::{load_f16x4, sdot};
use super::decode::{apply, lane_f32, lane_s32, store_col, ChunkDecoder, ChunkSink, T2pDecoder};
use super::Job;
use crate::format::BlockT2p;
use core::arch::aarch64::*;

/// `a2 + 4 a1 + 16 (a0 + a3)` for the slot accumulators of both row pairs, pairwise-added first
/// so the result's lanes are rows 0..4 (each row pair's lanes are `[a, a, b, b]`).
#[inline(always)]
unsafe fn recombine(p0: [int32x4_t; 4], p1: [int32x4_t; 4]) -> int32x4_t {
    // SAFETY: register operations.
    unsafe {
        let s: [int32x4_t; 4] = core::array::from_fn(|i| vpaddq_s32(p0[i], p1[i]));
        vaddq_s32(vaddq_s32(s[2], vshlq_n_s32::<2>(s[1])), vshlq_n_s32::<4>(vaddq_s32(s[0], s[3])))
    }
}

/// T2P x Q8_K gemv with `sdot`, 4 rows per block (the seed's kernel).
///
/// # Safety
/// dotprod available; `job` validated by `gemm_raw` with one column.
#[target_feature(enable = "neon,dotprod")]
pub(crate) unsafe fn gemv_t2p_4x1_q8_k_dotprod(job: Job<'_, BlockT2p, ActDup>) {
    // SAFETY: forwarded.
    unsafe { gemv_t2p_body(&job, job.act) }
}

/// The slot accumulators are never reset: `sdot` and the recombination are linear and wrap mod
/// 2^32, so each block's `16 dot(u, y)` is the difference of two running totals, exact because
/// the true value fits in i32 (at most 16 * 128 * 3 * 128). That saves 8 `movi` per block.
#[target_feature(enable = "neon,dotprod")]
unsafe fn gemv_t2p_body(job: &Job<'_, BlockT2p, ActDup>, dup: &[ActDup]) {
    let (m03, m0c, m30) = (vdupq_n_u8(0x03), vdupq_n_u8(0x0c), vdupq_n_u8(0x30));
    let zero = vdupq_n_s32(0);
    for g in job.tiles.clone() {
        let mut sumf = vdupq_n_f32(0.0);
        let mut acc = [[zero; 4]; 2];
        let mut prev = zero;
        for (b, a) in job.tile(g).iter().zip(dup) {
            // SAFETY: all loads are fields of `b` and `a`.
            unsafe {
                let mut word = |w: usize| {
                    let y = vld1q_s8_x4(a.qs[4 * w].as_ptr());
                    for (p, acc) in acc.iter_mut().enumerate() {
                        let word = vld1q_u8(b.qs[p][w].as_ptr());
                        acc[0] = sdot(acc[0], vreinterpretq_s8_u8(vandq_u8(word, m03)), y.0);
                        acc[1] = sdot(acc[1], vreinterpretq_s8_u8(vandq_u8(word, m0c)), y.1);
                        acc[2] = sdot(acc[2], vreinterpretq_s8_u8(vandq_u8(word, m30)), y.2);
                        acc[3] = sdot(acc[3], vreinterpretq_s8_u8(vshrq_n_u8::<6>(word)), y.3);
                    }
                };
                word(0);
                word(1);
                word(2);
                word(3);
                // lanes [row 0, row 1, row 2, row 3] of the running 16 * dot(u, y)
                let total = recombine(acc[0], acc[1]);
                let dot16 = vsubq_s32(total, prev);
                prev = total;
                let scale = vmulq_n_f32(load_f16x4(b.d.as_ptr().cast()), a.d);
                sumf = apply(false, sumf, scale, vshrq_n_s32::<4>(dot16), vld1q_dup_s32(&a.nysum));
            }
        }
        // SAFETY: rows 4g..4g+4 of column 0 belong to this job.
        unsafe { vst1q_f32(job.out.ptr.add(4 * g), sumf) };
    }
}

/// gemv sink: `sdot` of each chunk with its duplicated activations, two accumulators per row pair
/// (even and odd chunks) so consecutive `sdot` do not wait on each other.
struct GemvSink {
    acc: [[int32x4_t; 2]; 2],
    y: *const [i8; 16],
}

impl ChunkSink for GemvSink {
    #[inline(always)]
    unsafe fn chunk(&mut self, c: usize, w0: int8x16_t, w1: int8x16_t) {
        // SAFETY: y points at 16 duplicated chunks; the caller has dotprod.
        unsafe {
            let y = vld1q_s8((*self.y.add(c)).as_ptr());
            self.acc[0][c & 1] = sdot(self.acc[0][c & 1], w0, y);
            self.acc[1][c & 1] = sdot(self.acc[1][c & 1], w1, y);
        }
    }
}

/// Generic gemv with `sdot` for any [`ChunkDecoder`] (running totals as in the T2P gemv).
///
/// # Safety
/// dotprod available; `job` validated with one column; `dup` is its packed column (Dup format).
#[inline(always)]
pub(crate) unsafe fn gemv_sdot<D: ChunkDecoder>(job: &Job<'_, D::Block, ActDup>, dup: &[ActDup]) {
    // SAFETY: register setup only.
    let zero = unsafe { vdupq_n_s32(0) };
    for g in job.tiles.clone() {
        // SAFETY: as above.
        let mut sumf = unsafe { vdupq_n_f32(0.0) };
        let mut sink = GemvSink { acc: [[zero; 2]; 2], y: core::ptr::null() };
        let mut prev = zero;
        for (b, a) in job.tile(g).iter().zip(dup) {
            // SAFETY: all loads are fields of `b` and `a`.
            unsafe {
                sink.y = a.qs.as_ptr();
                D::chunks(b, &mut sink);
                let acc = sink.acc;
                let total = vpaddq_s32(vaddq_s32(acc[0][0], acc[0][1]), vaddq_s32(acc[1][0], acc[1][1]));
                let v = vsubq_s32(total, prev);
                prev = total;
                let scale = vmulq_n_f32(D::scales(b), a.d);
                sumf = apply(D::NEGATED, sumf, scale, v, vld1q_dup_s32(&a.nysum));
            }
        }
        // SAFETY: rows 4g..4g+4 of column 0 belong to this job.
        unsafe { vst1q_f32(job.out.ptr.add(4 * g), sumf) };
    }
}

/// 4x4 `sdot` tile sink: chunk `c` of the 4 columns, each duplicated by one `ld4r {4 x .2d}`.
struct Sdot4x4Sink {
    acc: [[int32x4_t; 4]; 2],
    qs: *const i8,
}

impl ChunkSink for Sdot4x4Sink {
    #[inline(always)]
    unsafe fn chunk(&mut self, c: usize, w0: int8x16_t, w1: int8x16_t) {
        // SAFETY: qs points at a Q8_Kx4 block's 512 values; the caller has dotprod.
        unsafe {
            let y = vld4q_dup_u64(self.qs.add(32 * c).cast::<u64>());
            let y = [
                vreinterpretq_s8_u64(y.0),
                vreinterpretq_s8_u64(y.1),
                vreinterpretq_s8_u64(y.2),
                vreinterpretq_s8_u64(y.3),
            ];
            for j in 0..4 {
                self.acc[0][j] = sdot(self.acc[0][j], w0, y[j]);
                self.acc[1][j] = sdot(self.acc[1][j], w1, y[j]);
            }
        }
    }
}

/// Generic dotprod-only gemm: tiles of 4 rows x 4 columns, `sdot` with activation chunks from the
/// Q8_Kx4 pack, duplicated on load (one `ld4r` gives chunk `c` of all 4 columns as `[y | y]`). Each decoded chunk feeds 8 `sdot` (2 row pairs x 4
/// columns); a batch that is not a multiple of 4 runs its last tile on zero-padded columns.
///
/// # Safety
/// dotprod available; `job` validated; `pack` is the job's Q8_Kx4 activations.
#[inline(always)]
pub(crate) unsafe fn gemm_sdot_4x4<D: ChunkDecoder>(job: &Job<'_, D::Block, ActBlockX4>, pack: &[ActBlockX4]) {
    let nb = job.nb;
    for g in job.tiles.clone() {
        let blocks = job.tile(g);
        for cg in 0..job.n_cols.div_ceil(4) {
            let acts = &pack[cg * nb..(cg + 1) * nb];
            let mut sumf = [unsafe { vdupq_n_f32(0.0) }; 4];
            for (b, a) in blocks.iter().zip(acts) {
                // SAFETY: all loads inside this block and this pack entry.
                unsafe {
                    let zero = vdupq_n_s32(0);
                    let mut sink = Sdot4x4Sink { acc: [[zero; 4]; 2], qs: a.qs.as_ptr() };
                    D::chunks(b, &mut sink);
                    let acc = sink.acc;
                    let d = D::scales(b);
                    let yd = [vld1q_f32(a.yd[0].as_ptr()), vld1q_f32(a.yd[1].as_ptr())];
                    let nys = [vld1q_s32(a.nysum[0][0].as_ptr()), vld1q_s32(a.nysum[0][1].as_ptr())];
                    for j in 0..4 {
                        let v = vpaddq_s32(acc[0][j], acc[1][j]);
                        let scale = vmulq_f32(d, lane_f32(yd, j));
                        sumf[j] = apply(D::NEGATED, sumf[j], scale, v, lane_s32(nys, j));
                    }
                }
            }
            for (j, s) in sumf.into_iter().enumerate() {
                // SAFETY: the job owns rows 4g..4g+4 of every column.
                unsafe { store_col(job, g, 4 * cg + j, s) };
            }
        }
    }
}

/// T2P x Q8_K gemm for CPUs with dotprod but no i8mm.
///
/// # Safety
/// dotprod available; `job` validated.
#[target_feature(enable = "neon,dotprod")]
pub(crate) unsafe fn gemm_t2p_4x4_q8_k_dotprod(job: Job<'_, BlockT2p, ActBlockX4>) {
    // SAFETY: forwarded.
    unsafe { gemm_t2p_4x4_body(&job, job.act) }
}

#[target_feature(enable = "neon,dotprod")]
unsafe fn gemm_t2p_4x4_body(job: &Job<'_, BlockT2p, ActBlockX4>, pack: &[ActBlockX4]) {
    // SAFETY: forwarded.
    unsafe { gemm_sdot_4x4::<T2pDecoder>(job, pack) }
}
