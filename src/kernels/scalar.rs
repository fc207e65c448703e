//! The portable `_generic` kernels: the same results as the SIMD kernels, computed the obvious
//! way from the repacked layouts and the [`Q8Half`] activation pack. They are the twin the SIMD
//! kernels are held against, the `GGML_T2P_KERNEL=ref` path, and the only kernels on CPUs that
//! have no SIMD level.

use super::act_pack::Q8Half;
use super::operands::Job;
use crate::format::{ptq1_0_digit, BlockL64, BlockPtq1_0x4, BlockT2p, BlockX16, L64_ROWS, X16_ROWS};
use crate::reference::{accumulate_block, Contract};

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

/// Row `r`'s 128 weights of an X16 block as signed values `code - 1` (-1..=2).
#[inline]
pub fn x16_row_values(b: &BlockX16, r: usize) -> [i8; 128] {
    let mut v = [0i8; 128];
    for w in 0..8 {
        for s in 0..4 {
            for e in 0..4 {
                v[16 * w + 4 * s + e] = ((b.qs[w][4 * r + e] >> (2 * s)) & 3) as i8 - 1;
            }
        }
    }
    v
}

#[inline]
fn dot_i8(w: &[i8; 128], y: &[i8; 128]) -> i32 {
    w.iter().zip(y).map(|(&a, &b)| i32::from(a) * i32::from(b)).sum()
}

/// Shared body: decode each block's rows once, then run every column over them (rows of an
/// `R`-row tile at or past `n_rows` are padding: skipped).
#[inline]
fn gemm_generic<B, const R: usize>(
    job: Job<'_, B, Q8Half>,
    values: impl Fn(&B, usize) -> [i8; 128],
    scale: impl Fn(&B, usize) -> f32,
) {
    let mut sumf = vec![0.0f32; R * job.n_cols];
    for t in job.tiles.clone() {
        let rows = R.min(job.n_rows - R * t);
        sumf.fill(0.0);
        for (i, b) in job.tile(t).iter().enumerate() {
            for r in 0..rows {
                let v = values(b, r);
                let d = scale(b, r);
                for j in 0..job.n_cols {
                    let h = &job.col(j)[i];
                    let isum = dot_i8(&v, &h.qs);
                    let acc = &mut sumf[R * j + r];
                    *acc = accumulate_block(*acc, d, h.d, isum, Contract::Fused);
                }
            }
        }
        for j in 0..job.n_cols {
            for r in 0..rows {
                // SAFETY: the job's rows were validated by gemm_raw and are owned by its caller.
                unsafe { job.out.write(R * t + r, j, sumf[R * j + r]) };
            }
        }
    }
}

/// Scalar T2P x Q8_K for any number of columns (gemv is the one-column case).
pub(crate) fn gemm_t2p_4xn_q8_k_generic(job: Job<'_, BlockT2p, Q8Half>) {
    gemm_generic::<_, 4>(job, t2p_row_values, |b, r| b.d_f32(r));
}

/// Scalar PTQ1_0x4 x Q8_K for any number of columns.
pub(crate) fn gemm_ptq1_0x4_4xn_q8_k_generic(job: Job<'_, BlockPtq1_0x4, Q8Half>) {
    gemm_generic::<_, 4>(job, ptq1_0x4_row_values, |b, r| b.d[r].to_f32());
}

/// Scalar X16 x Q8_K for any number of columns.
pub(crate) fn gemm_x16_16xn_q8_k_generic(job: Job<'_, BlockX16, Q8Half>) {
    gemm_generic::<_, X16_ROWS>(job, x16_row_values, |b, r| b.d_f32(r));
}

/// Scalar L64 x Q8_K for any number of columns (every byte decoded as
/// [`crate::format::decode_group`] reads it).
pub(crate) fn gemm_l64_64xn_q8_k_generic(job: Job<'_, BlockL64, Q8Half>) {
    gemm_generic::<_, L64_ROWS>(job, |b, r| b.row_codes(r).map(|c| c as i8 - 1), |b, r| b.row_d(r).to_f32());
}
