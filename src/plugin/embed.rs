//! `GET_ROWS` on a repacked matrix: a token embedding served from the plugin's layout, so that a
//! model whose LM head is its embedding (tied, as the Bonsai 2 2B and 4B) holds that matrix once.
//!
//! llama.cpp places a weight in the buffer type whose `supports_op` accepts the op that uses it:
//! `GET_ROWS` for `token_embd`, `MUL_MAT` for the LM head. When both land in our buffer type the
//! loader's duplicate of a tied embedding is the same tensor (one ggml context per buffer type),
//! repacked once; before, `token_embd` stayed in ggml's CPU buffer and the LM head was a second,
//! repacked copy of the same bytes.

use crate::checked::{blocks, overlaps};
use crate::format::{BlockL64, BlockPtq1_0x4, BlockT2p, BlockX16};
use crate::hybrid::abi::{dims, ggml_t2p_tensor_view, GGML_TYPE_F32, GGML_TYPE_I32};
use crate::hybrid::split;
use crate::repack::{self, dequantize_repacked_row, Layout, RowBlock, SourceType};
use crate::Error;
use core::ffi::c_void;

/// Bytes spanned by `n` items of `item` bytes, `stride` bytes apart (`None` on overflow or past
/// `isize::MAX`).
fn extent(n: usize, stride: usize, item: usize) -> Option<usize> {
    if n == 0 {
        return Some(0);
    }
    (n - 1).checked_mul(stride)?.checked_add(item).filter(|&b| b <= isize::MAX as usize)
}

/// Thread `ith` of `nth`'s share of `GET_ROWS` on an `n_rows x k` matrix of `st` repacked into
/// `lay` at `w` (`w_size` bytes): the body of `ggml_t2p_plugin_get_rows` (see the header). `ids`:
/// I32, `ne = [n_ids, 1, 1, 1]`, any stride that is a multiple of 4; `dst`: F32, `ne = [k, n_ids,
/// 1, 1]`, `nb[0] = 4`, rows `nb[1]` bytes apart (a multiple of 4, at least `4k` when there are
/// two or more). Row `i` of `dst` is row `ids[i]` of the matrix as ggml's `to_float` gives it
/// ([`dequantize_repacked_row`]); ids are split as [`split`] over the threads.
///
/// # Errors
/// Found before this thread writes anything: [`Error::InvalidArgument`] for another type than
/// I32 / F32 or a `dst` overlapping `w` or `ids`; [`Error::Shape`] for views that disagree;
/// [`Error::Misaligned`] for an id or float not 4-byte aligned; [`Error::Null`],
/// [`Error::BufferSize`] for `w` (as the repack's); [`Error::Range`] for `ith >= nth` or an id of
/// this thread's share outside `[0, n_rows)`.
///
/// # Safety
/// `w` valid for reads of `w_size` bytes; `ids` and `dst` describe memory valid for their shapes
/// (ids readable, dst writable, no other thread writing this thread's rows) during the call.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn get_rows(
    st: SourceType,
    lay: Layout,
    w: *const c_void,
    w_size: usize,
    n_rows: usize,
    k: usize,
    ids: &ggml_t2p_tensor_view,
    dst: &ggml_t2p_tensor_view,
    ith: usize,
    nth: usize,
) -> Result<(), Error> {
    let need = repack::repacked_size(st, lay, n_rows, k)?;
    if ids.type_ != GGML_TYPE_I32 || dst.type_ != GGML_TYPE_F32 {
        return Err(Error::InvalidArgument);
    }
    let ((ine, inb), (dne, dnb)) = (dims(ids)?, dims(dst)?);
    let n_ids = ine[0];
    if ine[1..] != [1, 1, 1] || dne != [k, n_ids, 1, 1] || dnb[0] != 4 {
        return Err(Error::Shape);
    }
    if ith >= nth {
        return Err(Error::Range);
    }
    if n_ids == 0 {
        return Ok(());
    }
    let row_bytes = k.checked_mul(4).ok_or(Error::Shape)?;
    if n_ids > 1 && dnb[1] < row_bytes {
        return Err(Error::Shape); // rows that overlap each other
    }
    if ids.data.is_null() || dst.data.is_null() {
        return Err(Error::Null);
    }
    let ids_len = extent(n_ids, inb[0], 4).ok_or(Error::Shape)?;
    let dst_len = extent(n_ids, dnb[1], row_bytes).ok_or(Error::Shape)?;
    let aligned = |p: *mut c_void, stride: usize| (p as usize).is_multiple_of(4) && stride.is_multiple_of(4);
    if !aligned(ids.data, inb[0]) || !aligned(dst.data, dnb[1]) {
        return Err(Error::Misaligned);
    }
    let d = dst.data as usize;
    if overlaps(d, dst_len, w as usize, need) || overlaps(d, dst_len, ids.data as usize, ids_len) {
        return Err(Error::InvalidArgument);
    }
    let share = split(n_ids, nth, ith);
    // SAFETY: id i lies at ids.data + i * nb[0], inside the view the caller vouches for.
    let id = |i: usize| unsafe { ids.data.cast::<u8>().add(i * inb[0]).cast::<i32>().read() };
    let row_of = |i: usize| usize::try_from(id(i)).ok().filter(|&r| r < n_rows).ok_or(Error::Range);
    for i in share.clone() {
        row_of(i)?;
    }
    // SAFETY: the caller's contract on w, forwarded; then rows of this thread's share of dst.
    unsafe {
        match lay {
            Layout::X16 => rows::<BlockX16>(blocks(w, w_size, need)?, n_rows, k, share, row_of, dst.data, dnb[1]),
            Layout::T2p => rows::<BlockT2p>(blocks(w, w_size, need)?, n_rows, k, share, row_of, dst.data, dnb[1]),
            Layout::L64 => rows::<BlockL64>(blocks(w, w_size, need)?, n_rows, k, share, row_of, dst.data, dnb[1]),
            Layout::Ptq1_0x4 => {
                rows::<BlockPtq1_0x4>(blocks(w, w_size, need)?, n_rows, k, share, row_of, dst.data, dnb[1])
            }
        }
    }
}

/// Writes rows `share` of `dst` (`stride` bytes apart): row `i` is matrix row `row_of(i)`.
///
/// # Safety
/// Each row `i` of `share`, `k` floats at `dst + i * stride`, is writable and not aliased.
unsafe fn rows<B: RowBlock>(
    w: &[B],
    n_rows: usize,
    k: usize,
    share: core::ops::Range<usize>,
    row_of: impl Fn(usize) -> Result<usize, Error>,
    dst: *mut c_void,
    stride: usize,
) -> Result<(), Error> {
    for i in share {
        // SAFETY: the caller's contract.
        let out = unsafe { core::slice::from_raw_parts_mut(dst.cast::<u8>().add(i * stride).cast::<f32>(), k) };
        dequantize_repacked_row(w, n_rows, k, row_of(i)?, out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checked::repack_checked;
    use crate::format::{as_bytes, BlockPq2_0, BlockPtq1_0};
    use crate::reference::{dequantize_row_pq2_0, dequantize_row_ptq1_0};
    use half::f16;

    /// Deterministic bytes (xorshift).
    fn bytes(n: usize, mut s: u64) -> Vec<u8> {
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 24) as u8
            })
            .collect()
    }

    /// Each row of `nb` blocks as floats, through the reference's `dequantize`.
    fn rows_of<B>(b: &[B], nb: usize, dequantize: fn(&[B], &mut [f32]) -> Result<(), Error>) -> Vec<Vec<f32>> {
        b.chunks(nb)
            .map(|r| {
                let mut y = vec![0f32; nb * 128];
                dequantize(r, &mut y).unwrap();
                y
            })
            .collect()
    }

    /// A source matrix of `st` (every PQ2_0 code, 3 included; any PTQ1_0 byte; scales of both
    /// signs, a zero among them) as bytes, and its rows as ggml's `to_float` gives them.
    fn source(st: SourceType, n_rows: usize, k: usize, seed: u64) -> (Vec<u8>, Vec<Vec<f32>>) {
        let nb = k / 128;
        let scale = |i: usize| f16::from_f32([0.0137, -0.0049, 0.0, 1.5e-5, 0.031][i % 5]);
        let (raw, rows): (Vec<u8>, Vec<Vec<f32>>) = match st {
            SourceType::Pq2_0 => {
                let b: Vec<BlockPq2_0> = bytes(n_rows * nb * 32, seed)
                    .chunks(32)
                    .enumerate()
                    .map(|(i, q)| BlockPq2_0 { d: scale(i), qs: q.try_into().unwrap() })
                    .collect();
                (as_bytes(&b).to_vec(), rows_of(&b, nb, dequantize_row_pq2_0))
            }
            SourceType::Ptq1_0 => {
                let b: Vec<BlockPtq1_0> = bytes(n_rows * nb * 26, seed)
                    .chunks(26)
                    .enumerate()
                    .map(|(i, q)| BlockPtq1_0 { qs: q[..24].try_into().unwrap(), qh: [q[24], q[25]], d: scale(i) })
                    .collect();
                (as_bytes(&b).to_vec(), rows_of(&b, nb, dequantize_row_ptq1_0))
            }
        };
        (raw, rows)
    }

    /// The repacked matrix in 4-byte aligned storage, and its size in bytes.
    fn repacked(st: SourceType, lay: Layout, src: &[u8], n_rows: usize, k: usize) -> (Vec<f32>, usize) {
        let n = repack::repacked_size(st, lay, n_rows, k).unwrap();
        let mut w = vec![0f32; n.div_ceil(4)];
        // SAFETY: buffers of the stated sizes.
        unsafe { repack_checked(st, lay, src.as_ptr().cast(), src.len(), n_rows, k, w.as_mut_ptr().cast(), n) }
            .unwrap();
        (w, n)
    }

    fn view(data: *mut c_void, type_: i32, ne: [i64; 4], nb: [u64; 4]) -> ggml_t2p_tensor_view {
        ggml_t2p_tensor_view { data, type_, ne, nb }
    }

    /// Runs every thread's share; returns each call's result and the destination's bits.
    #[allow(clippy::too_many_arguments)]
    fn run(
        st: SourceType,
        lay: Layout,
        w: &[u8],
        n_rows: usize,
        k: usize,
        ids: &[i32],
        id_stride: usize,
        row_stride: usize,
        nth: usize,
    ) -> (Vec<Result<(), Error>>, Vec<u32>) {
        let mut idv = vec![-7i32; ids.len() * id_stride + 1];
        for (i, &id) in ids.iter().enumerate() {
            idv[i * id_stride] = id;
        }
        let mut dst = vec![f32::from_bits(0x7fc0_dead); ids.len() * row_stride + 3];
        let iv = view(idv.as_mut_ptr().cast(), GGML_TYPE_I32, [ids.len() as i64, 1, 1, 1], [4 * id_stride as u64; 4]);
        let dv = view(
            dst.as_mut_ptr().cast(),
            GGML_TYPE_F32,
            [k as i64, ids.len() as i64, 1, 1],
            [4, 4 * row_stride as u64, 4 * (row_stride * ids.len()) as u64, 4 * (row_stride * ids.len()) as u64],
        );
        let r = (0..nth)
            // SAFETY: the views describe the vectors above; w is the whole repacked matrix.
            .map(|ith| unsafe { get_rows(st, lay, w.as_ptr().cast(), w.len(), n_rows, k, &iv, &dv, ith, nth) })
            .collect();
        (r, dst.iter().map(|v| v.to_bits()).collect())
    }

    #[test]
    fn every_layout_gives_the_source_rows_bit_for_bit() {
        let mut cases = 0;
        for st in [SourceType::Pq2_0, SourceType::Ptq1_0] {
            for lay in Layout::ALL.into_iter().filter(|l| l.accepts(st)) {
                // row counts on and off the X16 tile (a padded last tile; every L64 tile is padded
                // here), one and several blocks
                for (n_rows, k) in [(4, 128), (20, 384), (36, 256), (48, 128)] {
                    let (src, rows) = source(st, n_rows, k, (n_rows * k + cases) as u64 + 1);
                    let (store, n) = repacked(st, lay, &src, n_rows, k);
                    let w = &as_bytes(&store)[..n];
                    // first, last, repeated rows, every row of the last tile
                    let mut ids: Vec<i32> = vec![0, n_rows as i32 - 1, 3, 3, 0];
                    ids.extend((n_rows.saturating_sub(5)..n_rows).rev().map(|r| r as i32));
                    for (id_stride, row_stride, nth) in [(1, k, 1), (3, k + 5, 2), (1, k, 3), (2, k, 13)] {
                        let (r, got) = run(st, lay, w, n_rows, k, &ids, id_stride, row_stride, nth);
                        assert!(r.iter().all(|r| r.is_ok()), "{st:?} {lay:?} {r:?}");
                        for (i, &id) in ids.iter().enumerate() {
                            let want: Vec<u32> = rows[id as usize].iter().map(|v| v.to_bits()).collect();
                            assert_eq!(&got[i * row_stride..i * row_stride + k], &want[..], "{st:?} {lay:?} id {id}");
                            // the gap between rows is left alone
                            let gap_end = ((i + 1) * row_stride).min(got.len());
                            assert!(got[i * row_stride + k..gap_end].iter().all(|&b| b == 0x7fc0_dead));
                        }
                        cases += 1;
                    }
                }
            }
        }
        assert_eq!(cases, 6 * 4 * 4); // PQ2_0: T2P, X16; PTQ1_0: T2P, PTQ1_0x4, X16, L64
    }

    #[test]
    fn bad_calls_are_refused_before_anything_is_written() {
        let (st, lay, n_rows, k) = (SourceType::Pq2_0, Layout::X16, 20, 256);
        let (src, _) = source(st, n_rows, k, 9);
        let (store, n) = repacked(st, lay, &src, n_rows, k);
        let w = &as_bytes(&store)[..n];
        let untouched = |got: &[u32]| got.iter().all(|&b| b == 0x7fc0_dead);
        // an id out of range, in this thread's share or another's
        for bad in [-1, n_rows as i32, i32::MAX, i32::MIN] {
            let (r, got) = run(st, lay, w, n_rows, k, &[1, 2, bad, 4], 1, k, 1);
            assert_eq!(r, [Err(Error::Range)]);
            assert!(untouched(&got));
            let (r, _) = run(st, lay, w, n_rows, k, &[1, 2, bad, 4], 1, k, 2);
            assert_eq!(r, [Ok(()), Err(Error::Range)]);
        }
        // no ids: nothing to do
        let (r, _) = run(st, lay, w, n_rows, k, &[], 1, k, 2);
        assert_eq!(r, [Ok(()), Ok(())]);

        let mut ids = [1i32, 5, 7];
        let mut dst = vec![f32::from_bits(0x7fc0_dead); 3 * k + 1];
        let good_i = view(ids.as_mut_ptr().cast(), GGML_TYPE_I32, [3, 1, 1, 1], [4, 12, 12, 12]);
        let nbd = [4, 4 * k as u64, 12 * k as u64, 12 * k as u64];
        let good_d = view(dst.as_mut_ptr().cast(), GGML_TYPE_F32, [k as i64, 3, 1, 1], nbd);
        let call = |w: &[u8], i: &ggml_t2p_tensor_view, d: &ggml_t2p_tensor_view, ith, nth| {
            // SAFETY: the views describe live vectors (or are refused before any read).
            unsafe { get_rows(st, lay, w.as_ptr().cast(), w.len(), n_rows, k, i, d, ith, nth) }
        };
        let with = |v: &ggml_t2p_tensor_view, f: &dyn Fn(&mut ggml_t2p_tensor_view)| {
            let mut v = *v;
            f(&mut v);
            v
        };
        let cases: Vec<(&str, ggml_t2p_tensor_view, ggml_t2p_tensor_view, Error)> = vec![
            ("ids not I32", with(&good_i, &|v| v.type_ = 0), good_d, Error::InvalidArgument),
            ("dst not F32", good_i, with(&good_d, &|v| v.type_ = 1), Error::InvalidArgument),
            ("2-D ids", with(&good_i, &|v| v.ne[1] = 2), good_d, Error::Shape),
            ("row length", good_i, with(&good_d, &|v| v.ne[0] = 128), Error::Shape),
            ("row count", good_i, with(&good_d, &|v| v.ne[1] = 2), Error::Shape),
            ("3-D dst", good_i, with(&good_d, &|v| v.ne[2] = 2), Error::Shape),
            ("strided floats", good_i, with(&good_d, &|v| v.nb[0] = 8), Error::Shape),
            ("overlapping rows", good_i, with(&good_d, &|v| v.nb[1] = 4 * k as u64 - 4), Error::Shape),
            ("negative size", with(&good_i, &|v| v.ne[0] = -3), good_d, Error::Shape),
            ("huge stride", good_i, with(&good_d, &|v| v.nb[1] = u64::MAX / 2), Error::Shape),
            ("misaligned ids", with(&good_i, &|v| v.nb[0] = 6), good_d, Error::Misaligned),
            (
                "misaligned dst",
                good_i,
                with(&good_d, &|v| v.data = v.data.cast::<u8>().wrapping_add(2).cast()),
                Error::Misaligned,
            ),
            ("null ids", with(&good_i, &|v| v.data = core::ptr::null_mut()), good_d, Error::Null),
            ("null dst", good_i, with(&good_d, &|v| v.data = core::ptr::null_mut()), Error::Null),
            (
                "dst over the ids",
                good_i,
                with(&good_d, &|v| v.data = ids.as_ptr().cast_mut().cast::<u8>().wrapping_sub(4 * k).cast()),
                Error::InvalidArgument,
            ),
        ];
        for (what, i, d, e) in cases {
            assert_eq!(call(w, &i, &d, 0, 1), Err(e), "{what}");
        }
        assert!(dst.iter().all(|v| v.to_bits() == 0x7fc0_dead));
        // the weights: short, NULL, and a destination inside them
        assert_eq!(call(&w[..w.len() - 1], &good_i, &good_d, 0, 1), Err(Error::BufferSize));
        // SAFETY: NULL is refused before any read.
        let null = unsafe { get_rows(st, lay, core::ptr::null(), w.len(), n_rows, k, &good_i, &good_d, 0, 1) };
        assert_eq!(null, Err(Error::Null));
        let mut big = vec![0f32; store.len() + 3 * k + 16];
        big[..store.len()].copy_from_slice(&store);
        let big_ptr = big.as_mut_ptr();
        let inside = with(&good_d, &|v| v.data = big_ptr.wrapping_add(16).cast());
        assert_eq!(call(as_bytes(&big), &good_i, &inside, 0, 1), Err(Error::InvalidArgument));
        // threads
        assert_eq!(call(w, &good_i, &good_d, 2, 2), Err(Error::Range));
        assert_eq!(call(w, &good_i, &good_d, 0, 0), Err(Error::Range));
        // the good call works, and writes its rows
        assert_eq!(call(w, &good_i, &good_d, 0, 1), Ok(()));
        assert!(dst[..3 * k].iter().all(|v| v.to_bits() != 0x7fc0_dead));
        // a shape the layout does not take
        // SAFETY: refused before any read.
        let shape = unsafe { get_rows(st, lay, w.as_ptr().cast(), w.len(), n_rows, 100, &good_i, &good_d, 0, 1) };
        assert_eq!(shape, Err(Error::Shape));
    }
}
