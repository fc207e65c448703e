//! The portable `_generic` kernels: the same results as the NEON kernels, computed the obvious
//! way from the repacked layouts. They are the twin the SIMD kernels are held against, the
//! `GGML_T2P_KERNEL=ref` path, and the only kernels off aarch64.

use super::Job;
use crate::format::{ptq1_0_digit, BlockPtq1_0x4, BlockT2p};
use crate::reference::{accumulate_block, q8k_half, Contract};

/// Row `r`'s 128 weights of a T2P block as signed values `code - 1` (-1..=2).
#[inline]
pub fn t2p_row_values(b: &BlockT2p, r: usize) -> [i8; 128] {
    let (p, side) = (r / 2, 8 * (r % 2));
    let mut v = [0i8; 128];
    for w in 0..4 {
        let word = &b.qs[p][w];
        for s in 0..4 {
            let c = 4 * w + s;
            for e in 0..8 {
                v[8 * c + e] = ((word[side + e] >> (2 * s)) & 3) as i8 - 1;
            }
        }
    }
    v
}

/// Row `r`'s 128 weights of a PTQ1_0x4 block as signed values `digit - 1` (-1..=1).
#[inline]
pub fn ptq1_0x4_row_values(b: &BlockPtq1_0x4, r: usize) -> [i8; 128] {
    let (p, side) = (r / 2, 8 * (r % 2));
    let mut v = [0i8; 128];
    for n in 0..5u32 {
        for h in 0..2 {
            let c = 2 * n as usize + h;
            for e in 0..8 {
                v[8 * c + e] = ptq1_0_digit(b.lo[p][h][side + e], n) as i8 - 1;
            }
        }
        for e in 0..8 {
            v[80 + 8 * n as usize + e] = ptq1_0_digit(b.hi[p][side + e], n) as i8 - 1;
        }
    }
    for n in 0..4u32 {
        for h in 0..2 {
            v[120 + 2 * n as usize + h] = ptq1_0_digit(b.qh[r][h], n) as i8 - 1;
        }
    }
    v
}

#[inline]
fn dot_i8(w: &[i8; 128], y: &[i8]) -> i32 {
    w.iter().zip(y).map(|(&a, &b)| i32::from(a) * i32::from(b)).sum()
}

/// Shared body: decode each block's four rows once, then run every column over them.
#[inline]
fn gemm_generic<B>(job: Job<'_, B>, values: impl Fn(&B, usize) -> [i8; 128], scale: impl Fn(&B, usize) -> f32) {
    let mut sumf = vec![0.0f32; 4 * job.n_cols];
    for g in job.groups.clone() {
        sumf.fill(0.0);
        for (i, b) in job.group(g).iter().enumerate() {
            for r in 0..4 {
                let v = values(b, r);
                let d = scale(b, r);
                for j in 0..job.n_cols {
                    let (q, dy) = q8k_half(job.col(j), i);
                    let acc = &mut sumf[4 * j + r];
                    *acc = accumulate_block(*acc, d, dy, dot_i8(&v, q), Contract::Fused);
                }
            }
        }
        for j in 0..job.n_cols {
            for r in 0..4 {
                // SAFETY: the job's rows were validated by gemm_raw and are owned by its caller.
                unsafe { job.out.write(4 * g + r, j, sumf[4 * j + r]) };
            }
        }
    }
}

/// Scalar T2P x Q8_K for any number of columns (gemv is the one-column case).
pub(crate) fn gemm_t2p_4x128_q8_k_generic(job: Job<'_, BlockT2p>) {
    gemm_generic(job, t2p_row_values, |b, r| b.d_f32(r));
}

/// Scalar PTQ1_0x4 x Q8_K for any number of columns.
pub(crate) fn gemm_ptq1_0x4_q8_k_generic(job: Job<'_, BlockPtq1_0x4>) {
    gemm_generic(job, ptq1_0x4_row_values, |b, r| b.d[r].to_f32());
}
