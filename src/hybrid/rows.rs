//! `GGML_OP_GET_ROWS` of F32 rows on every thread. ggml-cpu splits a GET_ROWS by whole rows, so
//! the gather of a recurrent state (one row per sequence: the Gated-DeltaNet blocks' state is a
//! single row of `S x S x H` floats, 1 MiB in the Bonsai 2 2B and 2 MiB in the 9B, per linear
//! block and token) runs on one thread while the others wait (fork `q2_0-prs`, ggml-cpu/ops.cpp,
//! `ggml_compute_forward_get_rows_f32`, and src/llama-graph.cpp, `build_rs`). Here the rows are
//! cut into pieces of [`ROWS_PIECE`] floats and the pieces split over the threads. A copy: the
//! same bits as ggml's.
//!
//! Stock's formula, which this keeps: `dst[:, i10, i11, i12] = src[:, ids[i10, i11, i12], i11,
//! i12]`. Declined (stock runs): anything but F32 rows and I32 ids, strided elements, a
//! destination that is not dense (ggml's is a new tensor) or overlaps a source, a shape stock
//! would not index the same way. An id out of range is refused (`Error::Range`, logged once):
//! stock then runs and asserts, as it does on its own.

use super::{overlaps, View};
use crate::error::Error;
use core::ops::Range;

/// The I32 row ids of a GET_ROWS as ggml describes them (three dimensions; byte strides).
#[derive(Clone, Copy, Debug)]
pub struct Ids {
    /// First id.
    pub data: *const i32,
    /// Ids per dimension (ggml's `ne[0..3]`; `ne[3]` must be 1, checked by the caller).
    pub ne: [usize; 3],
    /// Byte stride per dimension (ggml's `nb[0..3]`).
    pub nb: [usize; 3],
}

/// Floats per work unit: a row is copied in pieces of 16384 floats (64 KiB), so a single 1 MiB
/// row gives 16 units to share.
pub const ROWS_PIECE: usize = 16384;

/// One checked F32 `GGML_OP_GET_ROWS`.
#[derive(Clone, Copy, Debug)]
pub struct GetRows {
    src: View,
    ids: Ids,
    dst: View,
}

// SAFETY: the sources are only read and the destination written in disjoint pieces per unit
// (`new` checks that the destination is dense and overlaps no source).
unsafe impl Send for GetRows {}
// SAFETY: as above.
unsafe impl Sync for GetRows {}

impl GetRows {
    /// Checks an op: `src` (F32, `k x n_rows x ne2 x ne3`, contiguous rows), `ids` (`n x ne2 x
    /// ne3`) and `dst` (F32, `k x n x ne2 x ne3`, dense). [`Error::Unsupported`] for what stock
    /// must run (strided elements, misaligned ids or ids whose extent overflows, overlap, a `src`
    /// whose fourth dimension stock would index in part), [`Error::Shape`] for shapes that
    /// disagree, [`Error::Range`] for an id outside `0 .. n_rows` (stock asserts on it),
    /// [`Error::Null`] for a null pointer.
    ///
    /// # Safety
    /// The views must describe readable memory (`dst` writable), valid while `run` runs.
    pub unsafe fn new(src: View, ids: Ids, dst: View) -> Result<Self, Error> {
        if src.data.is_null() || ids.data.is_null() || dst.data.is_null() {
            return Err(Error::Null);
        }
        let ine = ids.ne;
        // The ids as a view of 4-byte elements (one plane in dimension 3), for View's checks of
        // alignment, strides and extent, and its span.
        let iv =
            View { data: ids.data.cast(), ne: [ine[0], ine[1], ine[2], 1], nb: [ids.nb[0], ids.nb[1], ids.nb[2], 0] };
        if !iv.floats_ok() {
            return Err(Error::Unsupported);
        }
        if !src.rows_contiguous() || !dst.rows_contiguous() || !dst.dense() {
            return Err(Error::Unsupported); // (ggml's GET_ROWS writes a new, dense tensor)
        }
        if dst.ne != [src.ne[0], ine[0], ine[1], ine[2]] || src.ne[2] != ine[1] {
            return Err(Error::Shape); // (stock asserts the second)
        }
        if src.ne[3] != ine[2] {
            return Err(Error::Unsupported); // stock indexes a part of src's fourth dimension
        }
        if overlaps(dst.span(), src.span()) || overlaps(dst.span(), iv.span()) {
            return Err(Error::Unsupported);
        }
        let op = GetRows { src, ids, dst };
        // every id checked before anything is written (every thread sees the same answer)
        for i in 0..op.rows() {
            let (i10, i11, i12) = op.index(i);
            // SAFETY: the id is inside the checked ids view.
            let id = unsafe { op.id(i10, i11, i12) };
            if id < 0 || id as usize >= src.ne[1] {
                return Err(Error::Range);
            }
        }
        Ok(op)
    }

    /// Rows of the destination.
    fn rows(&self) -> usize {
        self.ids.ne[0] * self.ids.ne[1] * self.ids.ne[2]
    }

    /// Pieces per row.
    fn pieces(&self) -> usize {
        self.src.ne[0].div_ceil(ROWS_PIECE).max(1)
    }

    /// `(i10, i11, i12)` of destination row `i`.
    fn index(&self, i: usize) -> (usize, usize, usize) {
        let [n0, n1, _] = self.ids.ne;
        (i % n0, (i / n0) % n1, i / (n0 * n1))
    }

    /// The id at `(i10, i11, i12)`.
    ///
    /// # Safety
    /// The index is inside the ids' shape.
    unsafe fn id(&self, i10: usize, i11: usize, i12: usize) -> i32 {
        let off = i10 * self.ids.nb[0] + i11 * self.ids.nb[1] + i12 * self.ids.nb[2];
        // SAFETY: per the caller; `new` checked the alignment.
        unsafe { *self.ids.data.byte_add(off) }
    }

    /// Work units: every destination row in pieces of [`ROWS_PIECE`] floats.
    pub fn units(&self) -> usize {
        if self.src.ne[0] == 0 {
            return 0;
        }
        self.rows() * self.pieces()
    }

    /// Copies work units `units`.
    pub fn run(&self, units: Range<usize>) {
        let (k, pieces) = (self.src.ne[0], self.pieces());
        for u in units.start..units.end.min(self.units()) {
            let (i, p) = (u / pieces, u % pieces);
            let (i10, i11, i12) = self.index(i);
            let cols = p * ROWS_PIECE..((p + 1) * ROWS_PIECE).min(k);
            // SAFETY: `new` checked the id's range and every shape; the piece is inside both rows,
            // and units write disjoint pieces.
            unsafe {
                let row = self.id(i10, i11, i12) as usize;
                let s = self.src.data.add(self.src.at(row, i11, i12) + cols.start);
                let d = (self.dst.data as *mut f32).add(self.dst.at(i10, i11, i12) + cols.start);
                core::ptr::copy_nonoverlapping(s, d, cols.len());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hybrid::split;

    /// Stock's loop: dst row (i10, i11, i12) = src row ids[i10, i11, i12] of (i11, i12), for
    /// sources with padded rows and planes (and planes of dimension 3 inside those of dimension
    /// 2), strided ids, 1-16 threads; nothing written past the destination.
    #[test]
    fn every_split_is_stocks_copy() {
        for &(k, n_rows, n, ne2, ne3, swap) in &[
            (5usize, 3usize, 2usize, 1usize, 1usize, false),
            (ROWS_PIECE * 2 + 7, 2, 1, 1, 1, false),
            (ROWS_PIECE, 4, 3, 2, 2, false),
            (ROWS_PIECE + 1, 3, 2, 2, 3, true),
            (1, 7, 9, 1, 1, false),
            (40000, 3, 2, 2, 1, true),
        ] {
            // src strides in floats: rows k + 3 apart, planes with gaps, dimension 3 either
            // outside dimension 2 or inside it (swap)
            let srow = k + 3;
            let plane = srow * n_rows + 5;
            let (s2, s3) = if swap { (plane * ne3 + 11, plane) } else { (plane, plane * ne2 + 7) };
            let len = (n_rows - 1) * srow + (ne2 - 1) * s2 + (ne3 - 1) * s3 + k;
            let src: Vec<f32> = (0..len).map(|i| i as f32 * 0.5 - 3.0).collect();
            let sv = View { data: src.as_ptr(), ne: [k, n_rows, ne2, ne3], nb: [4, 4 * srow, 4 * s2, 4 * s3] };
            // ids strided: every other i32 of a longer vector
            let ids_all: Vec<i32> = (0..2 * n * ne2 * ne3).map(|i| ((i * 7 + 3) % n_rows) as i32).collect();
            let iv = Ids { data: ids_all.as_ptr(), ne: [n, ne2, ne3], nb: [8, 8 * n, 8 * n * ne2] };
            let mut want = vec![0f32; k * n * ne2 * ne3];
            for i12 in 0..ne3 {
                for i11 in 0..ne2 {
                    for i10 in 0..n {
                        let id = ids_all[2 * (i10 + n * (i11 + ne2 * i12))] as usize;
                        let s = &src[id * srow + i11 * s2 + i12 * s3..][..k];
                        want[k * (i10 + n * (i11 + ne2 * i12))..][..k].copy_from_slice(s);
                    }
                }
            }
            for nth in [1, 2, 3, 16] {
                let mut dst = vec![f32::NAN; want.len() + 3];
                let dv = View::contiguous(dst.as_mut_ptr().cast_const(), [k, n, ne2, ne3]);
                // SAFETY: the views describe the vectors above.
                let op = unsafe { GetRows::new(sv, iv, dv) }.unwrap();
                for ith in (0..nth).rev() {
                    op.run(split(op.units(), nth, ith));
                }
                assert!(
                    dst[..want.len()].iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()),
                    "k {k} swap {swap} nth {nth}"
                );
                assert!(dst[want.len()..].iter().all(|x| x.is_nan()), "written past dst");
            }
        }
    }

    #[test]
    fn declines_and_refuses_before_writing() {
        let src = [1.0f32; 8 * 4];
        let ids = [0i32, 3, -1, 4, 1];
        let dst = [0f32; 8 * 3];
        let sv = View::contiguous(src.as_ptr(), [8, 4, 1, 1]);
        let dv = View::contiguous(dst.as_ptr(), [8, 2, 1, 1]);
        let iv = |off: usize| Ids { data: ids[off..].as_ptr(), ne: [2, 1, 1], nb: [4, 8, 8] };
        // SAFETY: every view lies inside the arrays above.
        unsafe {
            assert!(GetRows::new(sv, iv(0), dv).is_ok());
            assert_eq!(GetRows::new(sv, iv(1), dv).err(), Some(Error::Range)); // id -1
            assert_eq!(GetRows::new(sv, iv(3), dv).err(), Some(Error::Range)); // id 4 of 4 rows
            let on_ids = View::contiguous(ids.as_ptr().cast(), [2, 2, 1, 1]);
            assert_eq!(
                GetRows::new(View::contiguous(src.as_ptr(), [2, 4, 1, 1]), iv(0), on_ids).err(),
                Some(Error::Unsupported)
            ); // dst over the ids
            let mut gaps = dv;
            gaps.ne[1] = 1;
            gaps.nb[1] = 64;
            let one = Ids { ne: [1, 1, 1], ..iv(0) };
            assert_eq!(GetRows::new(sv, one, gaps).err(), Some(Error::Unsupported)); // dst not dense
            let mut planes = sv;
            planes.ne[3] = 2;
            let mut d4 = dv;
            d4.ne[3] = 1;
            assert_eq!(GetRows::new(planes, iv(0), d4).err(), Some(Error::Unsupported)); // src.ne3 != ids.ne2
            let mut odd = iv(0);
            odd.nb[0] = 6;
            assert_eq!(GetRows::new(sv, odd, dv).err(), Some(Error::Unsupported)); // a stride of 1.5 ids
            let d3 = View::contiguous(dst.as_ptr(), [8, 3, 1, 1]);
            assert_eq!(GetRows::new(sv, iv(0), d3).err(), Some(Error::Shape)); // 3 rows for 2 ids
            let mut strided = sv;
            strided.nb[0] = 8;
            assert_eq!(GetRows::new(strided, iv(0), dv).err(), Some(Error::Unsupported));
            let over = View::contiguous(src.as_ptr(), [8, 2, 1, 1]);
            assert_eq!(GetRows::new(sv, iv(0), over).err(), Some(Error::Unsupported));
            let null = View::contiguous(core::ptr::null(), [8, 4, 1, 1]);
            assert_eq!(GetRows::new(null, iv(0), dv).err(), Some(Error::Null));
        }
    }
}
