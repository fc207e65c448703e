//! Raw-pointer entry points with every check: the layer under both the C ABI ([`crate::ffi`]) and
//! the ggml plugin ([`crate::plugin`]), which take pointers and sizes from C and must answer a
//! status for a null, short, misaligned or overlapping buffer, never undefined behaviour.

use crate::format::{
    cast_blocks, cast_blocks_mut, check_k, BlockL64, BlockPq2_0, BlockPtq1_0, BlockPtq1_0x4, BlockT2p, BlockX16, Pod,
};
use crate::kernels::act_pack::{self, ActFormat, PackedActs};
use crate::kernels::{gemm_raw, KernelLevel, PackedWeights};
use crate::repack::{self, Layout, SourceType};
use crate::Error;
use core::ffi::c_void;
use core::mem::size_of;

/// The first `need` bytes at `p` as blocks of `T`, after checking null, size and alignment.
///
/// # Safety
/// `p` must be valid for reads of `size` bytes for the returned lifetime.
pub(crate) unsafe fn blocks<'a, T: Pod>(p: *const c_void, size: usize, need: usize) -> Result<&'a [T], Error> {
    if need == 0 {
        return Ok(&[]); // nothing is read: any pointer, NULL included, is fine
    }
    if p.is_null() {
        return Err(Error::Null);
    }
    if size < need || need > isize::MAX as usize {
        return Err(Error::BufferSize); // no real buffer is larger than isize::MAX bytes
    }
    // SAFETY: the caller guarantees size readable bytes, and need <= size.
    cast_blocks(unsafe { core::slice::from_raw_parts(p.cast::<u8>(), need) })
}

/// # Safety
/// As [`blocks`], for writes, and the memory must not be aliased during the call.
pub(crate) unsafe fn blocks_mut<'a, T: Pod>(p: *mut c_void, size: usize, need: usize) -> Result<&'a mut [T], Error> {
    if p.is_null() {
        return Err(Error::Null);
    }
    if size < need || need > isize::MAX as usize {
        return Err(Error::BufferSize);
    }
    // SAFETY: as in blocks; unique for the call.
    cast_blocks_mut(unsafe { core::slice::from_raw_parts_mut(p.cast::<u8>(), need) })
}

/// Whether the byte ranges `[a, a + a_len)` and `[b, b + b_len)` share a byte (null or empty:
/// never).
pub(crate) fn overlaps(a: usize, a_len: usize, b: usize, b_len: usize) -> bool {
    a != 0 && b != 0 && a_len != 0 && b_len != 0 && a < b.saturating_add(b_len) && b < a.saturating_add(a_len)
}

/// [`ggml_t2p_repack`](crate::ffi::ggml_t2p_repack) after the conversion of its type, layout and dimensions.
///
/// # Safety
/// As [`ggml_t2p_repack`](crate::ffi::ggml_t2p_repack).
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn repack_checked(
    st: SourceType,
    lay: Layout,
    src: *const c_void,
    src_size: usize,
    n_rows: usize,
    k: usize,
    dst: *mut c_void,
    dst_size: usize,
) -> Result<(), Error> {
    let need_src = repack::source_size(st, n_rows, k)?;
    let need_dst = repack::repacked_size(st, lay, n_rows, k)?;
    // repacking in place would read bytes it has already overwritten
    if overlaps(src as usize, need_src, dst as usize, need_dst) {
        return Err(Error::InvalidArgument);
    }
    // SAFETY: the caller's contract on src/dst, forwarded.
    unsafe {
        match (st, lay) {
            (SourceType::Pq2_0, Layout::T2p) => repack::repack_pq2_0_to_t2p(
                blocks::<BlockPq2_0>(src, src_size, need_src)?,
                n_rows,
                k,
                blocks_mut::<BlockT2p>(dst, dst_size, need_dst)?,
            ),
            (SourceType::Ptq1_0, Layout::T2p) => repack::repack_ptq1_0_to_t2p(
                blocks::<BlockPtq1_0>(src, src_size, need_src)?,
                n_rows,
                k,
                blocks_mut::<BlockT2p>(dst, dst_size, need_dst)?,
            ),
            (SourceType::Ptq1_0, Layout::Ptq1_0x4) => repack::repack_ptq1_0_to_x4(
                blocks::<BlockPtq1_0>(src, src_size, need_src)?,
                n_rows,
                k,
                blocks_mut::<BlockPtq1_0x4>(dst, dst_size, need_dst)?,
            ),
            (SourceType::Pq2_0, Layout::X16) => repack::repack_pq2_0_to_x16(
                blocks::<BlockPq2_0>(src, src_size, need_src)?,
                n_rows,
                k,
                blocks_mut::<BlockX16>(dst, dst_size, need_dst)?,
            ),
            (SourceType::Ptq1_0, Layout::X16) => repack::repack_ptq1_0_to_x16(
                blocks::<BlockPtq1_0>(src, src_size, need_src)?,
                n_rows,
                k,
                blocks_mut::<BlockX16>(dst, dst_size, need_dst)?,
            ),
            (SourceType::Ptq1_0, Layout::L64) => repack::repack_ptq1_0_to_l64(
                blocks::<BlockPtq1_0>(src, src_size, need_src)?,
                n_rows,
                k,
                blocks_mut::<BlockL64>(dst, dst_size, need_dst)?,
            ),
            (SourceType::Pq2_0, Layout::Ptq1_0x4 | Layout::L64) => Err(Error::Unsupported),
        }
    }
}

/// [`ggml_t2p_gemm`](crate::ffi::ggml_t2p_gemm) after the conversion of its layout, level (one that runs `lay`) and
/// dimensions.
///
/// # Safety
/// As [`ggml_t2p_gemm`](crate::ffi::ggml_t2p_gemm).
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemm_checked(
    lay: Layout,
    level: KernelLevel,
    w: *const c_void,
    w_size: usize,
    n_rows: usize,
    k: usize,
    act: *const c_void,
    act_size: usize,
    n_cols: usize,
    dst: *mut f32,
    dst_len: usize,
    stride: usize,
    rows: core::ops::Range<usize>,
) -> Result<(), Error> {
    let fmt = ActFormat::for_kernel(lay, level, n_cols)?;
    let src = match lay {
        Layout::T2p | Layout::X16 => SourceType::Pq2_0,
        Layout::Ptq1_0x4 | Layout::L64 => SourceType::Ptq1_0,
    };
    let w_need = repack::repacked_size(src, lay, n_rows, k)?;
    check_k(k)?;
    let a_need = act_pack::packed_size(fmt, k, n_cols)?;
    // dst is written while w and act are read: they must not share bytes.
    let d_bytes = dst_len.saturating_mul(size_of::<f32>());
    // No real buffer is larger than isize::MAX bytes: refused before the overlap test, whose
    // answer for such an extent would depend on where the OS put the buffers (dst below w
    // and act, as on Windows, where the stack lies below the heap, or above them, as on Linux).
    if !dst.is_null() && d_bytes > isize::MAX as usize {
        return Err(Error::BufferSize);
    }
    if !dst.is_null()
        && d_bytes != 0
        && (overlaps(dst as usize, d_bytes, w as usize, w_need.min(w_size))
            || overlaps(dst as usize, d_bytes, act as usize, a_need.min(act_size)))
    {
        return Err(Error::InvalidArgument);
    }
    // SAFETY: the caller's contract on act (read-only for the call).
    let bytes = unsafe { blocks::<u8>(act, act_size, a_need)? };
    let a = PackedActs::new(fmt, k, n_cols, bytes)?;
    let weights = match lay {
        // SAFETY: the caller's contract on w (valid for reads of w_size bytes during the call).
        Layout::T2p => PackedWeights::t2p(unsafe { blocks(w, w_size, w_need)? }, n_rows, k)?,
        // SAFETY: as above.
        Layout::Ptq1_0x4 => PackedWeights::ptq1_0x4(unsafe { blocks(w, w_size, w_need)? }, n_rows, k)?,
        // SAFETY: as above.
        Layout::X16 => PackedWeights::x16(unsafe { blocks(w, w_size, w_need)? }, n_rows, k)?,
        // SAFETY: as above.
        Layout::L64 => PackedWeights::l64(unsafe { blocks(w, w_size, w_need)? }, n_rows, k)?,
    };
    // SAFETY: dst valid for dst_len floats and the rows are the caller's (contract).
    unsafe { gemm_raw(level, &weights, &a, dst, dst_len, stride, rows) }
}

/// `x` as `n` floats, after checking null and alignment.
///
/// # Safety
/// `x` must be null or valid for reads of `n` floats for the returned lifetime.
pub(crate) unsafe fn floats<'a>(x: *const f32, n: usize) -> Result<&'a [f32], Error> {
    if x.is_null() {
        return Err(Error::Null);
    }
    if !(x as usize).is_multiple_of(core::mem::align_of::<f32>()) {
        return Err(Error::Misaligned);
    }
    // SAFETY: non-null, aligned, and n readable floats (the caller's contract).
    Ok(unsafe { core::slice::from_raw_parts(x, n) })
}

/// The inverse of [`repack_checked`]: the `n_rows x k` matrix of `st` repacked into `lay` at `src`
/// (`src_size` bytes) written back in the source format to `dst` (`dst_size` bytes, at least
/// [`repack::source_size`]), row-major, as `ggml_t2p_plugin_unpack` says: PQ2_0 bytes exactly (codes
/// and scales are kept by every layout); PTQ1_0 from PTQ1_0x4 exactly (its bytes only move), from
/// T2P, X16 or L64 through its digits, re-encoded as the fork's quantizer writes them
/// ([`BlockPtq1_0::from_digits`]), so the same weights and scales (and the file's own bytes
/// wherever it holds the quantizer's encoding).
///
/// # Errors
/// As [`repack_checked`] with the roles of the buffers swapped; [`Error::InvalidArgument`] for a
/// PTQ1_0 matrix whose repacked codes are not digits (code 3: bytes no PTQ1_0 repack writes).
///
/// # Safety
/// `src` valid for reads of `src_size` bytes, `dst` for writes of `dst_size` bytes, not aliased.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn unpack_checked(
    st: SourceType,
    lay: Layout,
    src: *const c_void,
    src_size: usize,
    n_rows: usize,
    k: usize,
    dst: *mut c_void,
    dst_size: usize,
) -> Result<(), Error> {
    let need_src = repack::repacked_size(st, lay, n_rows, k)?;
    let need_dst = repack::source_size(st, n_rows, k)?;
    if overlaps(src as usize, need_src, dst as usize, need_dst) {
        return Err(Error::InvalidArgument);
    }
    // PQ2_0 rows of a T2P or X16 matrix (the codes of a PTQ1_0 source are its digits)
    let pq2_rows = |out: &mut [BlockPq2_0]| -> Result<(), Error> {
        // SAFETY: the caller's contract on src, forwarded.
        unsafe {
            match lay {
                Layout::T2p => {
                    repack::unpack_t2p_to_pq2_0(blocks::<BlockT2p>(src, src_size, need_src)?, n_rows, k, out)
                }
                Layout::X16 => {
                    repack::unpack_x16_to_pq2_0(blocks::<BlockX16>(src, src_size, need_src)?, n_rows, k, out)
                }
                Layout::L64 => {
                    repack::unpack_l64_to_pq2_0(blocks::<BlockL64>(src, src_size, need_src)?, n_rows, k, out)
                }
                Layout::Ptq1_0x4 => Err(Error::Unsupported),
            }
        }
    };
    // SAFETY: the caller's contract on dst, forwarded.
    unsafe {
        match (st, lay) {
            (SourceType::Pq2_0, Layout::Ptq1_0x4 | Layout::L64) => Err(Error::Unsupported),
            (SourceType::Pq2_0, _) => pq2_rows(blocks_mut::<BlockPq2_0>(dst, dst_size, need_dst)?),
            (SourceType::Ptq1_0, Layout::Ptq1_0x4) => repack::unpack_x4_to_ptq1_0(
                blocks::<BlockPtq1_0x4>(src, src_size, need_src)?,
                n_rows,
                k,
                blocks_mut::<BlockPtq1_0>(dst, dst_size, need_dst)?,
            ),
            (SourceType::Ptq1_0, _) => {
                let out = blocks_mut::<BlockPtq1_0>(dst, dst_size, need_dst)?;
                let mut rows = vec![BlockPq2_0::default(); out.len()];
                pq2_rows(&mut rows)?;
                for (o, r) in out.iter_mut().zip(&rows) {
                    *o = BlockPtq1_0::from_digits(r.d, &r.codes()).ok_or(Error::InvalidArgument)?;
                }
                Ok(())
            }
        }
    }
}
