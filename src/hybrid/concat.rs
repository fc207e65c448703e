//! `GGML_OP_CONCAT` of F32 tensors, as the Gated-DeltaNet blocks use it: the short conv's input is
//! the kept conv state (`d_conv - 1` x channels x seqs) followed along dimension 0 by the new
//! tokens, a TRANSPOSED view of the `qkv` projection (element stride `channels * 4` bytes), so ggml
//! gathers every float from a different cache line, and its CONCAT parallelizes over dimension 2
//! (the sequences: one for a single prompt), so one thread does it all. (Fork `q2_0-prs`,
//! src/models/delta-net-base.cpp and ggml-cpu/ops.cpp; on the AMX Xeon VM it was 8% of a 512-token
//! prompt batch of the 2B at 1 thread, 12% at 2: `docs/results.md`, section 9.4.)
//!
//! Here the destination's rows are split over the threads in blocks of [`CONCAT_UNIT_ROWS`]; a
//! block copies a source column of its rows at a time when the source's elements are strided, so
//! each cache line of a transposed source is read once for 16 rows. A copy: the same bits as
//! ggml's. Any F32 CONCAT with a dense destination is taken, along any dimension (found from the
//! shapes: the one where the sources' sizes add up).

use super::{overlaps, FloatPath, View};
use crate::error::Error;
use core::ops::Range;

/// Destination rows per work unit: 16 rows of a transposed source share each cache line it reads.
pub const CONCAT_UNIT_ROWS: usize = 16;

/// One checked `GGML_OP_CONCAT`: `dst` is `a` then `b` along dimension `dim`, every other
/// dimension the same size.
#[derive(Clone, Copy, Debug)]
pub struct Concat {
    a: View,
    b: View,
    dst: View,
    dim: usize,
}

// SAFETY: the sources are only read and the destination written in disjoint rows per unit (`new`
// checks that nothing overlaps and the destination is dense).
unsafe impl Send for Concat {}
// SAFETY: as above.
unsafe impl Sync for Concat {}

impl Concat {
    /// Checks an op (ggml's sources `a`, `b` and `dst`). Errors (nothing written):
    /// [`Error::Null`] for a null pointer; [`Error::Shape`] when no dimension has
    /// `a.ne + b.ne == dst.ne` with the other dimensions all equal; [`Error::Unsupported`] (let
    /// ggml run it) for an empty tensor, a destination that is not dense, a stride that is not a
    /// whole float, misaligned data, or a destination that overlaps a source.
    ///
    /// # Safety
    /// The views must describe readable memory (`dst` writable), valid while `run` runs.
    pub unsafe fn new(a: View, b: View, dst: View) -> Result<Self, Error> {
        if a.data.is_null() || b.data.is_null() || dst.data.is_null() {
            return Err(Error::Null);
        }
        if [a, b, dst].iter().any(|v| v.ne.contains(&0)) {
            return Err(Error::Unsupported);
        }
        let dim = (0..4)
            .find(|&d| {
                a.ne[d].checked_add(b.ne[d]) == Some(dst.ne[d])
                    && (0..4).filter(|&e| e != d).all(|e| a.ne[e] == dst.ne[e] && b.ne[e] == dst.ne[e])
            })
            .ok_or(Error::Shape)?;
        if ![a, b, dst].iter().all(View::floats_ok) || !dst.dense() {
            return Err(Error::Unsupported);
        }
        if overlaps(dst.span(), a.span()) || overlaps(dst.span(), b.span()) {
            return Err(Error::Unsupported);
        }
        Ok(Concat { a, b, dst, dim })
    }

    /// The dimension the sources are joined along.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Destination rows (`ne1 * ne2 * ne3`).
    fn rows(&self) -> usize {
        self.dst.ne[1] * self.dst.ne[2] * self.dst.ne[3]
    }

    /// Work units: the destination's rows in blocks of [`CONCAT_UNIT_ROWS`].
    pub fn units(&self) -> usize {
        self.rows().div_ceil(CONCAT_UNIT_ROWS)
    }

    /// Copies work units `units` with the portable code ([`Concat::run_with`] `Scalar`).
    pub fn run(&self, units: Range<usize>) {
        self.run_with(FloatPath::Scalar, units);
    }

    /// Copies work units `units`; on the AVX-512F path (which the CPU must have) a unit of 16
    /// rows whose source is a transposed view (16 adjacent floats per column, the conv input's new
    /// tokens) is copied 16 x 16 floats at a time through registers. The same bits on every path.
    pub fn run_with(&self, path: FloatPath, units: Range<usize>) {
        let (rows, d) = (self.rows(), self.dst);
        for u in units.start..units.end.min(self.units()) {
            let block = u * CONCAT_UNIT_ROWS..((u + 1) * CONCAT_UNIT_ROWS).min(rows);
            // the block's first row as (i1, i2, i3), then counted on (no division per row)
            let r0 = block.start;
            let mut i = [0, r0 % d.ne[1], (r0 / d.ne[1]) % d.ne[2], r0 / (d.ne[1] * d.ne[2])];
            // Per destination row: its index, its first float, and the source row it copies
            // from (dim 0: the row of `a` then the row of `b` at column a.ne0).
            let mut seg_a: [(*const f32, *mut f32); CONCAT_UNIT_ROWS] =
                [(core::ptr::null(), core::ptr::null_mut()); CONCAT_UNIT_ROWS];
            let mut seg_b = seg_a;
            let (mut na, mut nb) = (0, 0);
            for _ in block {
                // SAFETY: the row is one of the destination's (r < rows), inside the dense view.
                let out = unsafe { (d.data as *mut f32).add(d.at(i[1], i[2], i[3])) };
                if self.dim == 0 {
                    seg_a[na] = (self.src_row(&self.a, i), out);
                    // SAFETY: a.ne0 < dst.ne0: column a.ne0 of the row.
                    seg_b[nb] = (self.src_row(&self.b, i), unsafe { out.add(self.a.ne[0]) });
                    na += 1;
                    nb += 1;
                } else if i[self.dim] < self.a.ne[self.dim] {
                    seg_a[na] = (self.src_row(&self.a, i), out);
                    na += 1;
                } else {
                    let mut j = i;
                    j[self.dim] -= self.a.ne[self.dim];
                    seg_b[nb] = (self.src_row(&self.b, j), out);
                    nb += 1;
                }
                i[1] += 1;
                if i[1] == d.ne[1] {
                    i[1] = 0;
                    i[2] += 1;
                    if i[2] == d.ne[2] {
                        i[2] = 0;
                        i[3] += 1;
                    }
                }
            }
            // SAFETY: each pair is a source row of `ne0` elements (the view's stride) and a
            // destination row with room for them; `new` checked every view.
            unsafe {
                copy_rows(&seg_a[..na], self.a.ne[0], self.a.nb[0]);
                if !self.transposed_block(path, &seg_b[..nb], &self.b) {
                    copy_rows(&seg_b[..nb], self.b.ne[0], self.b.nb[0]);
                }
            }
        }
    }

    /// Copies 16 rows from a transposed source (row `r`'s source row starts `r` floats after row
    /// 0's, its elements `src.nb[0]` bytes apart) on the AVX-512F path; false (nothing copied)
    /// when `path`, the rows or the source do not fit that.
    ///
    /// # Safety
    /// As `copy_rows` for `pairs`, which must come from `src`.
    #[allow(unused_variables)]
    unsafe fn transposed_block(&self, path: FloatPath, pairs: &[(*const f32, *mut f32)], src: &View) -> bool {
        #[cfg(target_arch = "x86_64")]
        if path == FloatPath::Avx512 && pairs.len() == 16 && src.nb[0] != 4 && src.nb[0].is_multiple_of(4) {
            let s0 = pairs[0].0;
            if pairs.iter().enumerate().all(|(r, p)| p.0 == s0.wrapping_add(r)) {
                let dst: [*mut f32; 16] = core::array::from_fn(|r| pairs[r].1);
                // SAFETY: the caller's contract, and the rows' sources are the 16 adjacent floats
                // of each column (checked just above).
                unsafe { super::x86::transpose_copy_avx512(s0, src.nb[0] / 4, src.ne[0], &dst) };
                return true;
            }
        }
        false
    }

    /// The first float of row `(i1, i2, i3)` of `src` (the indices inside its shape).
    fn src_row(&self, src: &View, i: [usize; 4]) -> *const f32 {
        // SAFETY: the indices are inside src's shape, so the address is inside its checked span.
        unsafe { src.data.add(src.at(i[1], i[2], i[3])) }
    }
}

/// Copies `n` floats of each pair's source row (element stride `stride` bytes) to its
/// destination row (contiguous). A contiguous source of 16 or more floats a row goes row by row
/// (`memcpy`); a strided one, or short rows (a decoded token's conv state: 3 floats), a column at
/// a time over all the rows, so rows whose sources are neighbours in memory (a transposed view)
/// share each cache line read, and no call is made per short row.
///
/// # Safety
/// Every source row holds `n` floats at `stride`, every destination row has room for `n` floats,
/// and none of them overlap.
unsafe fn copy_rows(pairs: &[(*const f32, *mut f32)], n: usize, stride: usize) {
    // SAFETY: the caller's contract.
    unsafe {
        if stride == 4 && n >= 16 {
            for &(s, d) in pairs {
                core::ptr::copy_nonoverlapping(s, d, n);
            }
        } else {
            for i in 0..n {
                for &(s, d) in pairs {
                    *d.add(i) = *s.byte_add(i * stride);
                }
            }
        }
    }
}
