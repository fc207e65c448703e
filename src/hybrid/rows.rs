//! `GGML_OP_GET_ROWS` of F32 rows on every thread. ggml-cpu splits a GET_ROWS by whole rows, so
//! the gather of a recurrent state (one row per sequence: the Gated-DeltaNet blocks' state is a
//! single row of `S x S x H` floats, 1 MiB in the Bonsai 2 2B and 2 MiB in the 9B, per linear
//! block and token) runs on one thread while the others wait (fork `q2_0-prs`, ggml-cpu/ops.cpp,
//! `ggml_compute_forward_get_rows_f32`, and src/llama-graph.cpp, `build_rs`). Here the rows are
//! cut into pieces of [`ROWS_PIECE`] floats and the pieces split over the threads. A copy: the
//! same bits as ggml's.
//!
//! Stock's formula, which this keeps: `dst[:, i10, i11, i12] = src[:, ids[i10, i11, i12], i11,
//! i12]`. Declined (stock runs, and asserts where it must): anything but F32 rows and I32 ids,
//! strided elements, a shape stock would not index the same way, an id out of range, a
//! destination overlapping a source.

use super::abi::{dims, ggml_t2p_tensor_view};
use super::{overlaps, View};
use crate::error::Error;
use core::ops::Range;

/// ggml's type id of I32 (the row ids).
const GGML_TYPE_I32: i32 = 26;

/// Floats per work unit: a row is copied in pieces of 16384 floats (64 KiB), so a single 1 MiB
/// row gives 16 units to share.
pub const ROWS_PIECE: usize = 16384;

/// One checked F32 `GGML_OP_GET_ROWS`.
#[derive(Clone, Copy, Debug)]
pub struct GetRows {
    src: View,
    ids: *const u8,
    ids_ne: [usize; 3],
    ids_nb: [usize; 3],
    dst: View,
}

// SAFETY: the sources are only read and the destination written in disjoint pieces per unit
// (`new` checks that nothing overlaps).
unsafe impl Send for GetRows {}
// SAFETY: as above.
unsafe impl Sync for GetRows {}

impl GetRows {
    /// Checks an op: `src` (F32, `k x n_rows x ne2 x ne3`, contiguous rows), `ids` (I32, `n x ne2 x
    /// ne3`) and `dst` (F32, `k x n x ne2 x ne3`, contiguous rows). [`Error::Unsupported`] for
    /// what stock must run (other types, strided elements, ids of more than three dimensions,
    /// overlap), [`Error::Shape`] for shapes that disagree, [`Error::Range`] for an id outside
    /// `0 .. n_rows` (stock asserts on it), [`Error::Null`] for a null pointer.
    ///
    /// # Safety
    /// The views must describe readable memory (`dst` writable), valid while `run` runs.
    pub unsafe fn new(src: View, ids: &ggml_t2p_tensor_view, dst: View) -> Result<Self, Error> {
        if src.data.is_null() || ids.data.is_null() || dst.data.is_null() {
            return Err(Error::Null);
        }
        if ids.type_ != GGML_TYPE_I32 {
            return Err(Error::Unsupported);
        }
        let (ine, inb) = dims(ids)?;
        if ine[3] != 1 || !inb.iter().all(|b| b % 4 == 0) || !(ids.data as usize).is_multiple_of(4) {
            return Err(Error::Unsupported);
        }
        if !src.rows_contiguous() || !dst.rows_contiguous() {
            return Err(Error::Unsupported);
        }
        if dst.ne != [src.ne[0], ine[0], ine[1], ine[2]] || src.ne[2] != ine[1] {
            return Err(Error::Shape); // (stock asserts the second)
        }
        if src.ne[3] != ine[2] {
            return Err(Error::Unsupported); // stock indexes a part of src's fourth dimension
        }
        let ids_span = if ine.contains(&0) {
            None
        } else {
            let last = (0..3).try_fold(0usize, |a, d| a.checked_add((ine[d] - 1).checked_mul(inb[d])?));
            let start = ids.data as usize;
            Some((start, last.and_then(|l| start.checked_add(l)?.checked_add(4)).ok_or(Error::Shape)?))
        };
        if overlaps(dst.span(), src.span()) || overlaps(dst.span(), ids_span) {
            return Err(Error::Unsupported);
        }
        let op = GetRows {
            src,
            ids: ids.data as *const u8,
            ids_ne: [ine[0], ine[1], ine[2]],
            ids_nb: [inb[0], inb[1], inb[2]],
            dst,
        };
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
        self.ids_ne[0] * self.ids_ne[1] * self.ids_ne[2]
    }

    /// Pieces per row.
    fn pieces(&self) -> usize {
        self.src.ne[0].div_ceil(ROWS_PIECE).max(1)
    }

    /// `(i10, i11, i12)` of destination row `i`.
    fn index(&self, i: usize) -> (usize, usize, usize) {
        let [n0, n1, _] = self.ids_ne;
        (i % n0, (i / n0) % n1, i / (n0 * n1))
    }

    /// The id at `(i10, i11, i12)`.
    ///
    /// # Safety
    /// The index is inside the ids' shape.
    unsafe fn id(&self, i10: usize, i11: usize, i12: usize) -> i32 {
        let off = i10 * self.ids_nb[0] + i11 * self.ids_nb[1] + i12 * self.ids_nb[2];
        // SAFETY: per the caller; `new` checked the alignment.
        unsafe { *(self.ids.add(off) as *const i32) }
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

    fn view(data: *const u8, type_: i32, ne: [usize; 4], nb: [usize; 4]) -> ggml_t2p_tensor_view {
        ggml_t2p_tensor_view {
            data: data as *mut core::ffi::c_void,
            type_,
            ne: ne.map(|x| x as i64),
            nb: nb.map(|x| x as u64),
        }
    }

    /// Stock's loop: dst row (i10, i11, i12) = src row ids[i10, i11, i12] of (i11, i12).
    #[test]
    fn every_split_is_stocks_copy() {
        for &(k, n_rows, n, ne2, ne3) in &[
            (5usize, 3usize, 2usize, 1usize, 1usize),
            (ROWS_PIECE * 2 + 7, 2, 1, 1, 1),
            (ROWS_PIECE, 4, 3, 2, 2),
            (1, 7, 9, 1, 1),
            (40000, 3, 2, 2, 1),
        ] {
            let src: Vec<f32> = (0..k * n_rows * ne2 * ne3).map(|i| i as f32 * 0.5 - 3.0).collect();
            // ids strided: every other i32 of a longer vector
            let ids_all: Vec<i32> = (0..2 * n * ne2 * ne3).map(|i| ((i * 7 + 3) % n_rows) as i32).collect();
            let sv = View::contiguous(src.as_ptr(), [k, n_rows, ne2, ne3]);
            let iv = view(ids_all.as_ptr().cast(), 26, [n, ne2, ne3, 1], [8, 8 * n, 8 * n * ne2, 8 * n * ne2 * ne3]);
            let mut want = vec![0f32; k * n * ne2 * ne3];
            for i12 in 0..ne3 {
                for i11 in 0..ne2 {
                    for i10 in 0..n {
                        let id = ids_all[2 * (i10 + n * (i11 + ne2 * i12))] as usize;
                        let s = &src[k * (id + n_rows * (i11 + ne2 * i12))..][..k];
                        want[k * (i10 + n * (i11 + ne2 * i12))..][..k].copy_from_slice(s);
                    }
                }
            }
            for nth in [1, 2, 3, 16] {
                let mut dst = vec![f32::NAN; want.len() + 3];
                let dv = View::contiguous(dst.as_mut_ptr().cast_const(), [k, n, ne2, ne3]);
                // SAFETY: the views describe the vectors above.
                let op = unsafe { GetRows::new(sv, &iv, dv) }.unwrap();
                for ith in (0..nth).rev() {
                    op.run(split(op.units(), nth, ith));
                }
                assert!(
                    dst[..want.len()].iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()),
                    "k {k} nth {nth}"
                );
                assert!(dst[want.len()..].iter().all(|x| x.is_nan()), "written past dst");
            }
        }
    }

    #[test]
    fn declines_and_refuses_before_writing() {
        let src = [1.0f32; 8 * 4];
        let ids = [0i32, 3, 4, -1];
        let dst = [0f32; 8 * 2];
        let sv = View::contiguous(src.as_ptr(), [8, 4, 1, 1]);
        let dv = View::contiguous(dst.as_ptr(), [8, 2, 1, 1]);
        let iv = |off: usize, type_: i32| view(ids[off..].as_ptr().cast(), type_, [2, 1, 1, 1], [4, 8, 8, 8]);
        // SAFETY: every view lies inside the arrays above.
        unsafe {
            assert!(GetRows::new(sv, &iv(0, 26), dv).is_ok());
            assert_eq!(GetRows::new(sv, &iv(1, 26), dv).err(), Some(Error::Range)); // id 4 of 4 rows
            assert_eq!(GetRows::new(sv, &iv(2, 26), dv).err(), Some(Error::Range)); // id -1
            assert_eq!(GetRows::new(sv, &iv(0, 0), dv).err(), Some(Error::Unsupported)); // ids F32
            let mut d3 = dv;
            d3.ne[1] = 3;
            assert_eq!(GetRows::new(sv, &iv(0, 26), d3).err(), Some(Error::Shape));
            let mut strided = sv;
            strided.nb[0] = 8;
            assert_eq!(GetRows::new(strided, &iv(0, 26), dv).err(), Some(Error::Unsupported));
            let over = View::contiguous(src.as_ptr(), [8, 2, 1, 1]);
            assert_eq!(GetRows::new(sv, &iv(0, 26), over).err(), Some(Error::Unsupported));
            let null = View::contiguous(core::ptr::null(), [8, 4, 1, 1]);
            assert_eq!(GetRows::new(null, &iv(0, 26), dv).err(), Some(Error::Null));
        }
    }
}
