//! NEON kernels with `sdot` (FEAT_DotProd): the T2P gemv of the seeds, a generic `sdot` gemv,
//! and a dotprod-only gemm for CPUs without i8mm (Cortex-A76, Neoverse-N1, Raspberry Pi 5).
//!
//! ## T2P gemv (`gemv_t2p_4x1_q8_k_dotprod`)
//! One T2P block is 4 rows x 128 weights: 2 row pairs x 4 words of 16 bytes. Slot `s` of word `w`
//! is `[row a: chunk 4w+s | row b: the same chunk]`; the chunk's 8 activations come duplicated
//! (`[y | y]`, prepared once per call in `act_pack::ActDup` and loaded with `ldp`) so one `sdot`
//! serves both rows (lanes 0,1: row a; 2,3: row b).
//! Slots come out with `and 0x03` (u), `and 0x0c` (4u), `and 0x30` (16u) and `ushr #6` (u; an `and
//! 0xc0` would give 128 = -128). Slots 0 and 3 are both at scale 1 and share an accumulator, so a
//! row pair has three and a block six, all fresh every block (the blocks' `sdot` chains overlap).
//! The shared one starts at `MAGIC - sum(y)` from the pack (`act_pack::MAGIC`), the other two at
//! zero, also loaded from the pack (a load keeps the SIMD pipes free, a `movi` does not). Once per
//! 128 weights, 3 `addp` give rows 0..4 per scale and 2 `ssra` (`#2`, `#4`; exact: those sums are
//! multiples of 4 and 16) leave `MAGIC + isum`, whose bits are the float `12582912 + isum`: one
//! `fsub` gives `(float) isum` with no `scvtf`, and `fcvtl`, `fmul`, `fmla` apply `fp32(d) * d_y`
//! exactly as the reference does.
//!
//! ### Instruction count (read from the compiled code)
//! `tools/cycle-model.py --show-loop gemv_t2p_4x1_q8_k_dotprod` prints the loop as rustc 1.96
//! (`--release`, aarch64) emits it (`cargo rustc --release --target aarch64-unknown-linux-gnu
//! --crate-type rlib -- --emit asm`). One iteration is one T2P block, 128 weights x 4 rows:
//!
//! | per | instructions |
//! |---|---|
//! | 16-byte word | 4 `sdot` + 3 `and` + 1 `ushr` (the seed's "three ands and one shift"), 1 weight load, 1/2 `ldp` of activations |
//! | 128 weights x 4 rows | **98**: 32 `sdot`, 24 `and`, 8 `ushr`, 16 loads of weights and activations, 3 `ldp` of seeds and zeros, 5 for the recombination (3 `addp`, 2 `ssra`), 6 for the float step (2 `ldr`, `fcvtl`, `fmul`, `fsub` (as `fadd` of -12582912), `fmla`), 4 loop |
//! | 128 weights x 1 row | 24.5, against 72 for stock `ggml_vec_dot_pq2_0_q8_K` (0.34x) |
//!
//! On the cores llvm-mca-19 models, the 64 `sdot`/`and`/`ushr` and 9 other SIMD instructions per
//! block are the bound (Neoverse-N1: 2 SIMD pipes, 37 cycles per block). The seed counts stock NEON
//! at 16 preparation instructions for 4 `sdot` per 64 weights (look-up, shift, mask, subtract);
//! here preparing one `sdot` operand costs one `and` (or one `ushr`). Cycles per core are in
//! docs/benchmarks.md, "The cycle model", and docs/results.md.
//!
//! ## Generic kernels
//! The gemv and the 4x4 `sdot` gemm here and the `smmla` gemm in `neon_i8mm` run any
//! `decode::ChunkDecoder` (T2P and PTQ1_0x4).

use super::act_pack::{ActBlockX4, ActDup};
use super::asm::{load_f16x4, sdot};
use super::decode::{apply, lane_f32, pick_seed, store_col, ChunkDecoder, ChunkSink, T2pDecoder};
use super::operands::Job;
use crate::format::BlockT2p;
use core::arch::aarch64::*;

/// T2P x Q8_K gemv with `sdot`, 4 rows per block (the seed's kernel).
///
/// # Safety
/// dotprod available; `job` validated by `gemm_raw` with one column.
#[target_feature(enable = "neon,dotprod")]
pub(crate) unsafe fn gemv_t2p_4x1_q8_k_dotprod(job: Job<'_, BlockT2p, ActDup>) {
    // SAFETY: forwarded.
    unsafe { gemv_t2p_body(&job, job.act) }
}

/// Per row pair three accumulators, fresh every block: slots 0 and 3 (both at scale 1) share
/// `acc[p][0]`, seeded with `MAGIC - sum(y)`; slot 1 (`and 0x0c`, scale 4) and slot 2 (`and 0x30`,
/// scale 16) start at zero (loaded from the pack: no `movi` on the SIMD pipes). Then `addp` per scale gives rows 0..4 and two `ssra` (exact: those sums
/// are multiples of 4 and 16) leave `MAGIC + isum`.
#[target_feature(enable = "neon,dotprod")]
unsafe fn gemv_t2p_body(job: &Job<'_, BlockT2p, ActDup>, dup: &[ActDup]) {
    let (m03, m0c, m30) = (vdupq_n_u8(0x03), vdupq_n_u8(0x0c), vdupq_n_u8(0x30));
    for g in job.tiles.clone() {
        let mut sumf = vdupq_n_f32(0.0);
        for (b, a) in job.tile(g).iter().zip(dup) {
            // SAFETY: all loads are fields of `b` and `a`.
            unsafe {
                let seed = vld1q_s32_x2(a.seed[0].as_ptr());
                let (z0, z1) = (vld1q_s32_x2(a.zero[0].as_ptr()), vld1q_s32_x2(a.zero[2].as_ptr()));
                let mut acc = [[seed.0, z0.0, z0.1], [seed.1, z1.0, z1.1]];
                let mut word = |w: usize| {
                    let y = vld1q_s8_x4(a.qs[4 * w].as_ptr());
                    for (p, acc) in acc.iter_mut().enumerate() {
                        let word = vld1q_u8(b.qs[p][w].as_ptr());
                        acc[0] = sdot(acc[0], vreinterpretq_s8_u8(vandq_u8(word, m03)), y.0);
                        acc[1] = sdot(acc[1], vreinterpretq_s8_u8(vandq_u8(word, m0c)), y.1);
                        acc[2] = sdot(acc[2], vreinterpretq_s8_u8(vandq_u8(word, m30)), y.2);
                        acc[0] = sdot(acc[0], vreinterpretq_s8_u8(vshrq_n_u8::<6>(word)), y.3);
                    }
                };
                word(0);
                word(1);
                word(2);
                word(3);
                // lanes [row 0, row 1, row 2, row 3]
                let s03 = vpaddq_s32(acc[0][0], acc[1][0]);
                let s1 = vpaddq_s32(acc[0][1], acc[1][1]);
                let s2 = vpaddq_s32(acc[0][2], acc[1][2]);
                let v = vsraq_n_s32::<4>(vsraq_n_s32::<2>(s03, s1), s2);
                let scale = vmulq_n_f32(load_f16x4(b.d.as_ptr().cast()), a.d);
                sumf = apply(false, sumf, scale, v);
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
    unsafe fn chunk<const C: usize>(&mut self, w0: int8x16_t, w1: int8x16_t) {
        // SAFETY: y points at 16 duplicated chunks; the caller has dotprod.
        unsafe {
            let y = vld1q_s8((*self.y.add(C)).as_ptr());
            self.acc[0][C & 1] = sdot(self.acc[0][C & 1], w0, y);
            self.acc[1][C & 1] = sdot(self.acc[1][C & 1], w1, y);
        }
    }
}

/// Generic gemv with `sdot` for any [`ChunkDecoder`]: fresh accumulators every block, the even
/// chunks' seeded from the pack (`MAGIC -+ sum(y)`), the odd chunks' from zero.
///
/// # Safety
/// dotprod available; `job` validated with one column; `dup` is its packed column (Dup format).
#[inline(always)]
pub(crate) unsafe fn gemv_sdot<D: ChunkDecoder>(job: &Job<'_, D::Block, ActDup>, dup: &[ActDup]) {
    for g in job.tiles.clone() {
        // SAFETY: register setup only.
        let mut sumf = unsafe { vdupq_n_f32(0.0) };
        for (b, a) in job.tile(g).iter().zip(dup) {
            // SAFETY: all loads are fields of `b` and `a`.
            unsafe {
                let seed = vld1q_s32_x2(pick_seed(D::NEGATED, &a.seed, &a.nseed));
                let zero = vld1q_s32_x2(a.zero[0].as_ptr());
                let mut sink = GemvSink { acc: [[seed.0, zero.0], [seed.1, zero.1]], y: a.qs.as_ptr() };
                D::chunks(b, &mut sink);
                let acc = sink.acc;
                let v = vpaddq_s32(vaddq_s32(acc[0][0], acc[0][1]), vaddq_s32(acc[1][0], acc[1][1]));
                let scale = vmulq_n_f32(D::scales(b), a.d);
                sumf = apply(D::NEGATED, sumf, scale, v);
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
    #[allow(clippy::needless_range_loop)] // j indexes two register arrays at once; kept as modeled
    unsafe fn chunk<const C: usize>(&mut self, w0: int8x16_t, w1: int8x16_t) {
        // SAFETY: qs points at a Q8_Kx4 block's 512 values; the caller has dotprod.
        unsafe {
            let y = vld4q_dup_u64(self.qs.add(32 * C).cast::<u64>());
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
/// Q8_Kx4 pack, duplicated on load (one `ld4r` gives chunk `c` of all 4 columns as `[y | y]`).
/// Each decoded chunk feeds 8 `sdot` (2 row pairs x 4 columns) into accumulators that start every
/// block at the pack's `sdot` seeds (`MAGIC -+ sum(y)`), so `addp` of a column's two leaves
/// `MAGIC +- isum` and the float step is `fsub`, `fmul`, `fmla` (see [`apply`]). A batch that is
/// not a multiple of 4 runs its last tile on zero-padded columns.
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
            // SAFETY: a register operation (NEON is part of the target).
            let mut sumf = [unsafe { vdupq_n_f32(0.0) }; 4];
            for (b, a) in blocks.iter().zip(acts) {
                // SAFETY: all loads inside this block and this pack entry.
                unsafe {
                    // acc[p][j] starts at dseed[j][p]: [MAGIC -+ sum(y_j), 0, MAGIC -+ sum(y_j), 0]
                    let seeds = pick_seed(D::NEGATED, &a.dseed, &a.ndseed);
                    let acc: [[int32x4_t; 4]; 2] =
                        core::array::from_fn(|p| core::array::from_fn(|j| vld1q_s32(seeds.add(8 * j + 4 * p))));
                    let mut sink = Sdot4x4Sink { acc, qs: a.qs.as_ptr() };
                    D::chunks(b, &mut sink);
                    let acc = sink.acc;
                    let d = D::scales(b);
                    let yd = [vld1q_f32(a.yd[0].as_ptr()), vld1q_f32(a.yd[1].as_ptr())];
                    for j in 0..4 {
                        let v = vpaddq_s32(acc[0][j], acc[1][j]);
                        let scale = vmulq_f32(d, lane_f32(yd, j));
                        sumf[j] = apply(D::NEGATED, sumf[j], scale, v);
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
