//! What the C ABI's `ggml_t2p_hybrid_op` (in [`crate::ffi`], declared in `include/ggml_t2p.h`)
//! does: ggml's tensor views in, the op checked and run.

use super::concat::Concat;
use super::rows::{GetRows, Ids};
use super::{split, FloatPath, GatedDeltaNet, SsmConv, View};
use crate::error::Error;
use crate::kernels::KernelLevel;

/// `GGML_T2P_OP_SSM_CONV`: sources `conv_x`, `conv1d.weight`.
pub const OP_SSM_CONV: i32 = 1;
/// `GGML_T2P_OP_GATED_DELTA_NET`: sources `q, k, v, g, beta, state`.
pub const OP_GATED_DELTA_NET: i32 = 2;
/// `GGML_T2P_OP_CONCAT`: sources `a`, `b` (F32, joined along the dimension where their sizes add up).
pub const OP_CONCAT: i32 = 3;
/// `GGML_T2P_OP_GET_ROWS`: sources F32 rows and their I32 ids ([`GetRows`]).
pub const OP_GET_ROWS: i32 = 4;
/// ggml's type id of F32.
pub(crate) const GGML_TYPE_F32: i32 = 0;
/// ggml's type id of I32 (row ids).
pub(crate) const GGML_TYPE_I32: i32 = 26;

/// A tensor as the C ABI passes one (`ggml_t2p_tensor_view` in the header): ggml's `type`, `ne`
/// (elements per dimension) and `nb` (byte strides).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(non_camel_case_types)]
pub struct ggml_t2p_tensor_view {
    /// First byte (ggml's `data`).
    pub data: *mut core::ffi::c_void,
    /// ggml's type id (F32, 0; the ids of `GET_ROWS` I32, 26).
    pub type_: i32,
    /// Elements per dimension.
    pub ne: [i64; 4],
    /// Byte stride per dimension.
    pub nb: [u64; 4],
}

/// `ne` and `nb` of a C view as `usize` ([`Error::Shape`] for a negative or oversized value).
pub(crate) fn dims(v: &ggml_t2p_tensor_view) -> Result<([usize; 4], [usize; 4]), Error> {
    let mut ne = [0usize; 4];
    let mut nb = [0usize; 4];
    for d in 0..4 {
        ne[d] = usize::try_from(v.ne[d]).map_err(|_| Error::Shape)?;
        nb[d] = usize::try_from(v.nb[d]).map_err(|_| Error::Shape)?;
    }
    Ok((ne, nb))
}

/// Converts a C view: F32 only (else [`Error::Unsupported`]), sizes that fit `usize`.
fn view(v: &ggml_t2p_tensor_view) -> Result<View, Error> {
    if v.type_ != GGML_TYPE_F32 {
        return Err(Error::Unsupported);
    }
    let (ne, nb) = dims(v)?;
    Ok(View { data: v.data as *const f32, ne, nb })
}

/// Runs thread `ith` of `nth`'s share of a hybrid op (`op` one of [`OP_SSM_CONV`],
/// [`OP_GATED_DELTA_NET`], [`OP_CONCAT`], [`OP_GET_ROWS`]) at kernel level `kernel`: the body of the C ABI's
/// `ggml_t2p_hybrid_op` (see the header). Every error is found before anything is written, from
/// the arguments (and `GET_ROWS`'s ids, which no thread writes), so every thread gets the same
/// answer; [`Error::Unsupported`] means
/// "decline: let ggml run it".
///
/// # Safety
/// Each view in `srcs` and `dst` describes memory valid for its shape (the sources readable, the
/// destination writable) while the call runs.
pub unsafe fn run_op(
    op: i32,
    kernel: i32,
    srcs: &[ggml_t2p_tensor_view],
    dst: &ggml_t2p_tensor_view,
    ith: i32,
    nth: i32,
) -> Result<(), Error> {
    let level = KernelLevel::from_i32(kernel).ok_or(Error::InvalidArgument)?;
    if !level.is_available() {
        return Err(Error::Unsupported);
    }
    if nth < 1 || ith < 0 || ith >= nth {
        return Err(Error::Range);
    }
    let want = match op {
        OP_SSM_CONV => 2,
        OP_GATED_DELTA_NET => 6,
        OP_CONCAT => 2,
        OP_GET_ROWS => 2,
        _ => return Err(Error::InvalidArgument),
    };
    if srcs.len() != want {
        return Err(Error::InvalidArgument);
    }
    let d = view(dst)?;
    let path = FloatPath::for_level(level);
    let (ith, nth) = (ith as usize, nth as usize);
    if op == OP_GET_ROWS {
        let ids = &srcs[1];
        let (ne, nb) = dims(ids)?;
        if ids.type_ != GGML_TYPE_I32 || ne[3] != 1 {
            return Err(Error::Unsupported);
        }
        let ids = Ids { data: ids.data as *const i32, ne: [ne[0], ne[1], ne[2]], nb: [nb[0], nb[1], nb[2]] };
        // SAFETY: the caller's views describe valid memory.
        let rows = unsafe { GetRows::new(view(&srcs[0])?, ids, d) }?;
        rows.run(split(rows.units(), nth, ith));
        return Ok(());
    }
    if op == OP_CONCAT {
        // SAFETY: the caller's views describe valid memory.
        let cat = unsafe { Concat::new(view(&srcs[0])?, view(&srcs[1])?, d) }?;
        cat.run_with(path, split(cat.units(), nth, ith));
        return Ok(());
    }
    if op == OP_SSM_CONV {
        // SAFETY: the caller's views describe valid memory.
        let conv = unsafe { SsmConv::new(view(&srcs[0])?, view(&srcs[1])?, d) }?;
        conv.run(path, split(conv.units(), nth, ith));
        return Ok(());
    }
    let mut v = [d; 6];
    for (x, c) in v.iter_mut().zip(srcs) {
        *x = view(c)?;
    }
    // The destination holds the outputs, then the new state: dense, that many floats.
    if !d.dense() {
        return Err(Error::Unsupported);
    }
    let len = d.ne.iter().try_fold(1usize, |a, &n| a.checked_mul(n)).ok_or(Error::Shape)?;
    // SAFETY: as above; dst is len writable floats.
    let gdn = unsafe { GatedDeltaNet::new(v, d.data as *mut f32, len) }?;
    gdn.run(path, split(gdn.units(), nth, ith));
    Ok(())
}
