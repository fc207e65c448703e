//! The C ABI (`include/ggml_t2p.h`, ABI version 5): the only `extern "C"` of the crate.
//!
//! Every entry point validates its arguments, maps [`Error`] to a `GGML_T2P_ERR_*` status, and
//! runs inside `catch_unwind`, so no panic crosses into C (a caught panic is
//! `GGML_T2P_ERR_INTERNAL`). With the `abi-check` feature, `build.rs` runs bindgen on the header
//! and the `abi_check` module below fails to compile if a declaration and its export disagree.

use crate::checked::{blocks, blocks_mut, floats, gemm_checked, overlaps, repack_checked};
use crate::format::BlockQ8K;
use crate::kernels::act_pack::{self, ActFormat};
use crate::kernels::{quantize_q8_k, CpuFeatures, KernelLevel};
use crate::reference::Contract;
use crate::repack::{self, Layout, SourceType};
use crate::Error;
use core::ffi::{c_char, c_void, CStr};
use core::mem::size_of;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The header's `GGML_T2P_ABI_VERSION`.
pub const ABI_VERSION: u32 = 5;

/// `GGML_T2P_OK`.
pub const OK: i32 = 0;
/// `GGML_T2P_ERR_INTERNAL`: a caught panic.
pub const ERR_INTERNAL: i32 = -8;

/// `GGML_T2P_KERNEL_AUTO`.
pub const KERNEL_AUTO: i32 = 0;

/// `GGML_T2P_ROUND_FUSED`: [`Contract::Fused`] for [`ggml_t2p_quantize_q8_k`].
pub const ROUND_FUSED: i32 = 1;
/// `GGML_T2P_ROUND_UNFUSED`: [`Contract::Unfused`] for [`ggml_t2p_quantize_q8_k`].
pub const ROUND_UNFUSED: i32 = 2;

/// `GGML_T2P_PREFER_COMPACT`: for [`ggml_t2p_layout_for`], keep PTQ1_0 at 1.75 bits per weight
/// where a layout for that exists (PTQ1_0x4 on ARM, L64 on x86-64 with AVX-512 VBMI).
pub const PREFER_COMPACT: u32 = 1;

/// The status code of an error (the header's `GGML_T2P_ERR_*`): `-1 - index in Error::ALL`.
pub fn status(e: Error) -> i32 {
    -1 - Error::ALL.iter().position(|&x| x == e).expect("every error is in Error::ALL") as i32
}

fn guard(f: impl FnOnce() -> Result<(), Error>) -> i32 {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => OK,
        Ok(Err(e)) => status(e),
        Err(_) => ERR_INTERNAL,
    }
}

/// Writes `v` to `out` (checked non-null).
///
/// # Safety
/// `out` must be null or valid for a write.
unsafe fn put<T>(out: *mut T, v: T) -> Result<(), Error> {
    if out.is_null() {
        return Err(Error::Null);
    }
    // SAFETY: non-null, and the caller guarantees it is writable.
    unsafe { out.write(v) };
    Ok(())
}

/// Writes `v` to `out` unless it is null.
///
/// # Safety
/// `out` must be null or valid for a write.
unsafe fn put_if<T>(out: *mut T, v: T) -> Result<(), Error> {
    if out.is_null() {
        return Ok(());
    }
    // SAFETY: the caller's contract.
    unsafe { put(out, v) }
}

fn dim(v: i64) -> Result<usize, Error> {
    usize::try_from(v).map_err(|_| Error::Shape)
}

fn source(t: i32) -> Result<SourceType, Error> {
    u32::try_from(t).ok().and_then(SourceType::from_ggml).ok_or(Error::InvalidArgument)
}

fn layout(l: i32) -> Result<Layout, Error> {
    Layout::from_i32(l).ok_or(Error::InvalidArgument)
}

fn kernel(k: i32) -> Result<KernelLevel, Error> {
    if k == KERNEL_AUTO {
        return KernelLevel::best().ok_or(Error::Unsupported);
    }
    let level = KernelLevel::from_i32(k).ok_or(Error::InvalidArgument)?;
    if !level.is_available() {
        return Err(Error::Unsupported);
    }
    Ok(level)
}

/// A kernel level that runs `lay` on this CPU.
fn kernel_for(k: i32, lay: Layout) -> Result<KernelLevel, Error> {
    let level = kernel(k)?;
    if !level.runs(lay) {
        return Err(Error::Unsupported);
    }
    Ok(level)
}

/// Library version, NUL-terminated, static storage.
#[no_mangle]
pub extern "C" fn ggml_t2p_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// The ABI version ([`ABI_VERSION`]).
#[no_mangle]
pub extern "C" fn ggml_t2p_abi_version() -> u32 {
    ABI_VERSION
}

/// `GGML_T2P_CPU_*` bits of the running CPU (as reported by the OS, plus promised ones).
#[no_mangle]
pub extern "C" fn ggml_t2p_cpu_features() -> u32 {
    catch_unwind(|| CpuFeatures::detect().bits()).unwrap_or(0)
}

/// `GGML_T2P_CPU_*` bits the OS cannot report either way (Windows on ARM: i8mm without PF 66).
#[no_mangle]
pub extern "C" fn ggml_t2p_cpu_features_unknown() -> u32 {
    catch_unwind(|| CpuFeatures::unknown().bits()).unwrap_or(0)
}

/// The caller promises the CPU runs `kernel` where the OS cannot tell; see the header.
#[no_mangle]
pub extern "C" fn ggml_t2p_assume_kernel(kernel_id: i32) -> i32 {
    guard(|| {
        let level = KernelLevel::from_i32(kernel_id).ok_or(Error::InvalidArgument)?;
        crate::kernels::assume_kernel(level)
    })
}

/// Best kernel level, or 0 when the CPU has none of the SIMD levels (decline).
#[no_mangle]
pub extern "C" fn ggml_t2p_best_kernel() -> i32 {
    catch_unwind(|| KernelLevel::best().map_or(0, |l| l as i32)).unwrap_or(0)
}

/// Name of a kernel level.
#[no_mangle]
pub extern "C" fn ggml_t2p_kernel_name(kernel: i32) -> *const c_char {
    let s = match KernelLevel::from_i32(kernel) {
        Some(level) => level.name_c(),
        None if kernel == KERNEL_AUTO => "auto\0",
        None => "unknown\0",
    };
    s.as_ptr().cast()
}

/// Parses a kernel name; see the header.
///
/// # Safety
/// `name` must be null or a NUL-terminated string; `out_kernel` null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ggml_t2p_kernel_from_name(name: *const c_char, out_kernel: *mut i32) -> i32 {
    guard(|| {
        if name.is_null() {
            return Err(Error::Null);
        }
        // SAFETY: a NUL-terminated string, per the contract.
        let s = unsafe { CStr::from_ptr(name) }.to_str().map_err(|_| Error::InvalidArgument)?;
        let k = match s {
            "auto" => KERNEL_AUTO,
            _ => KernelLevel::from_name(s).ok_or(Error::InvalidArgument)? as i32,
        };
        // SAFETY: the caller's contract.
        unsafe { put(out_kernel, k) }
    })
}

/// Name of a layout.
#[no_mangle]
pub extern "C" fn ggml_t2p_layout_name(layout_id: i32) -> *const c_char {
    let s = match Layout::from_i32(layout_id) {
        Some(Layout::T2p) => "T2P\0",
        Some(Layout::Ptq1_0x4) => "PTQ1_0x4\0",
        Some(Layout::X16) => "X16\0",
        Some(Layout::L64) => "L64\0",
        None => "unknown\0",
    };
    s.as_ptr().cast()
}

/// Text for a status code.
#[no_mangle]
pub extern "C" fn ggml_t2p_status_string(status: i32) -> *const c_char {
    let s: &'static str = match status {
        OK => "ok\0",
        ERR_INTERNAL => "internal error\0",
        -7..=-1 => Error::ALL[(-1 - status) as usize].message_c(),
        _ => "unknown status\0",
    };
    s.as_ptr().cast()
}

/// The layout the library runs `src_type` weights on with `kernel` on this CPU; see the header.
///
/// # Safety
/// `out_layout` must be null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ggml_t2p_layout_for(src_type: i32, kernel_id: i32, flags: u32, out_layout: *mut i32) -> i32 {
    guard(|| {
        let src = source(src_type)?;
        let level = kernel(kernel_id)?;
        if flags & !PREFER_COMPACT != 0 {
            return Err(Error::InvalidArgument);
        }
        let lay = level.layout_for(src, flags & PREFER_COMPACT != 0);
        // SAFETY: the caller's contract.
        unsafe { put(out_layout, lay as i32) }
    })
}

/// Rows per tile of a layout; see the header.
///
/// # Safety
/// `out_rows` must be null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ggml_t2p_row_tile(layout_id: i32, out_rows: *mut i64) -> i32 {
    guard(|| {
        let rows = layout(layout_id)?.tile_rows() as i64;
        // SAFETY: the caller's contract.
        unsafe { put(out_rows, rows) }
    })
}

/// Whether a matrix can be repacked and run; see the header.
#[no_mangle]
pub extern "C" fn ggml_t2p_supports(src_type: i32, layout_id: i32, kernel_id: i32, n_rows: i64, k: i64) -> i32 {
    guard(|| {
        let (src, lay) = (source(src_type)?, layout(layout_id)?);
        kernel_for(kernel_id, lay)?;
        repack::repacked_size(src, lay, dim(n_rows)?, dim(k)?).map(|_| ())
    })
}

/// Repacked size in bytes; see the header.
///
/// # Safety
/// `out_size` must be null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ggml_t2p_repacked_size(
    src_type: i32,
    layout_id: i32,
    n_rows: i64,
    k: i64,
    out_size: *mut usize,
) -> i32 {
    guard(|| {
        let size = repack::repacked_size(source(src_type)?, layout(layout_id)?, dim(n_rows)?, dim(k)?)?;
        // SAFETY: the caller's contract.
        unsafe { put(out_size, size) }
    })
}

/// Caps the threads of a repack; see the header.
#[no_mangle]
pub extern "C" fn ggml_t2p_set_threads(n_threads: i32) -> i32 {
    guard(|| {
        let n = usize::try_from(n_threads).map_err(|_| Error::InvalidArgument)?;
        repack::set_repack_threads(n);
        Ok(())
    })
}

/// Repacks a matrix; see the header.
///
/// # Safety
/// `src` valid for reads of `src_size` bytes, `dst` for writes of `dst_size` bytes, not
/// overlapping.
#[no_mangle]
pub unsafe extern "C" fn ggml_t2p_repack(
    src_type: i32,
    layout_id: i32,
    src: *const c_void,
    src_size: usize,
    n_rows: i64,
    k: i64,
    dst: *mut c_void,
    dst_size: usize,
) -> i32 {
    guard(|| {
        let (st, lay) = (source(src_type)?, layout(layout_id)?);
        let (n_rows, k) = (dim(n_rows)?, dim(k)?);
        // SAFETY: the caller's contract, forwarded.
        unsafe { repack_checked(st, lay, src, src_size, n_rows, k, dst, dst_size) }
    })
}

fn act_format(layout_id: i32, kernel_id: i32, n_cols: usize) -> Result<(KernelLevel, ActFormat), Error> {
    let lay = layout(layout_id)?;
    let level = kernel_for(kernel_id, lay)?;
    Ok((level, ActFormat::for_kernel(lay, level, n_cols)?))
}

/// Packed activation size in bytes; see the header.
///
/// # Safety
/// `out_size` must be null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ggml_t2p_act_packed_size(
    layout_id: i32,
    kernel_id: i32,
    k: i64,
    n_cols: i64,
    out_size: *mut usize,
) -> i32 {
    guard(|| {
        let n_cols = dim(n_cols)?;
        let (_, fmt) = act_format(layout_id, kernel_id, n_cols)?;
        let size = act_pack::packed_size(fmt, dim(k)?, n_cols)?;
        // SAFETY: the caller's contract.
        unsafe { put(out_size, size) }
    })
}

/// Packs Q8_K blocks of one activation column; see the header.
///
/// # Safety
/// `q8k` valid for reads of `q8k_size` bytes; `packed` valid for writes of `packed_size` bytes;
/// no other thread touches the bytes this call writes (see the header).
#[no_mangle]
pub unsafe extern "C" fn ggml_t2p_act_pack(
    layout_id: i32,
    kernel_id: i32,
    k: i64,
    n_cols: i64,
    col: i64,
    blk_begin: i64,
    blk_end: i64,
    q8k: *const c_void,
    q8k_size: usize,
    packed: *mut c_void,
    packed_size: usize,
) -> i32 {
    guard(|| {
        let (k, n_cols) = (dim(k)?, dim(n_cols)?);
        let (_, fmt) = act_format(layout_id, kernel_id, n_cols)?;
        let (col, b0, b1) = (dim(col)?, dim(blk_begin)?, dim(blk_end)?);
        // The shape first (a block range past k is a SHAPE error whatever q8k_size says).
        act_pack::check_piece(k, n_cols, col, &(b0..b1))?;
        let need = (b1 - b0) * size_of::<BlockQ8K>();
        if need != 0 && overlaps(q8k as usize, need, packed as usize, packed_size) {
            return Err(Error::InvalidArgument); // the pack would overwrite the blocks it reads
        }
        // SAFETY: the caller's contract on q8k.
        let src = unsafe { blocks::<BlockQ8K>(q8k, q8k_size, need)? };
        // SAFETY: the caller's contract on packed (pack_raw checks size, null and alignment).
        unsafe { act_pack::pack_raw(fmt, k, n_cols, col, b0..b1, src, packed.cast(), packed_size) }
    })
}

/// gemv; see the header.
///
/// # Safety
/// As [`ggml_t2p_gemm`] with `n_cols = 1`.
#[no_mangle]
pub unsafe extern "C" fn ggml_t2p_gemv(
    layout_id: i32,
    kernel_id: i32,
    w: *const c_void,
    w_size: usize,
    n_rows: i64,
    k: i64,
    act: *const c_void,
    act_size: usize,
    dst: *mut f32,
    dst_len: usize,
    row_begin: i64,
    row_end: i64,
) -> i32 {
    // SAFETY: forwarded contract.
    unsafe {
        ggml_t2p_gemm(layout_id, kernel_id, w, w_size, n_rows, k, act, act_size, 1, dst, dst_len, 0, row_begin, row_end)
    }
}

/// gemm; see the header.
///
/// # Safety
/// `w` valid for reads of `w_size` bytes, `act` of `act_size` bytes, `dst` for writes of
/// `dst_len` floats; no other thread writes `act` or touches the rows this call writes while it
/// runs.
#[no_mangle]
pub unsafe extern "C" fn ggml_t2p_gemm(
    layout_id: i32,
    kernel_id: i32,
    w: *const c_void,
    w_size: usize,
    n_rows: i64,
    k: i64,
    act: *const c_void,
    act_size: usize,
    n_cols: i64,
    dst: *mut f32,
    dst_len: usize,
    dst_col_stride: i64,
    row_begin: i64,
    row_end: i64,
) -> i32 {
    guard(|| {
        let lay = layout(layout_id)?;
        let (n_rows, k, n_cols) = (dim(n_rows)?, dim(k)?, dim(n_cols)?);
        let (level, _) = act_format(layout_id, kernel_id, n_cols)?;
        let stride = dim(dst_col_stride)?;
        let rows = dim(row_begin).map_err(|_| Error::Range)?..dim(row_end).map_err(|_| Error::Range)?;
        // SAFETY: the caller's contract, forwarded.
        unsafe { gemm_checked(lay, level, w, w_size, n_rows, k, act, act_size, n_cols, dst, dst_len, stride, rows) }
    })
}

/// Quantizes `n` floats to Q8_K; see the header.
///
/// # Safety
/// `x` valid for reads of `n` floats, `y` for writes of `y_size` bytes, not overlapping; no other
/// thread writes `x` or touches `y` during the call.
#[no_mangle]
pub unsafe extern "C" fn ggml_t2p_quantize_q8_k(
    kernel_id: i32,
    rounding: i32,
    x: *const f32,
    n: i64,
    y: *mut c_void,
    y_size: usize,
) -> i32 {
    guard(|| {
        let level = quantizer_level(kernel_id)?;
        let contract = match rounding {
            ROUND_FUSED => Contract::Fused,
            ROUND_UNFUSED => Contract::Unfused,
            _ => return Err(Error::InvalidArgument),
        };
        let n = q8k_values(dim(n)?)?;
        if n == 0 {
            return Ok(()); // nothing is read or written: any pointers, NULL included
        }
        let need = n / crate::format::QK_K * size_of::<BlockQ8K>();
        // SAFETY: the caller's contract on x (floats checks null and alignment).
        let xs = unsafe { floats(x, n)? };
        if overlaps(x as usize, n * size_of::<f32>(), y as usize, need.min(y_size)) {
            return Err(Error::InvalidArgument);
        }
        // SAFETY: the caller's contract on y (blocks_mut checks null, size and alignment).
        let ys = unsafe { blocks_mut::<BlockQ8K>(y, y_size, need)? };
        quantize_q8_k(level, xs, ys, contract)
    })
}

/// The level whose Q8_K quantizer runs for `kernel_id`: AUTO is the fastest of this CPU (the
/// scalar one where there is no SIMD level), any other id must be a level the CPU has.
fn quantizer_level(kernel_id: i32) -> Result<KernelLevel, Error> {
    match kernel_id {
        KERNEL_AUTO => Ok(KernelLevel::best().unwrap_or(KernelLevel::Reference)),
        k => kernel(k),
    }
}

/// `n` as a count of floats to quantize to Q8_K: a multiple of 256 that a buffer can hold, else
/// [`Error::Shape`].
fn q8k_values(n: usize) -> Result<usize, Error> {
    if !n.is_multiple_of(crate::format::QK_K) || n > isize::MAX as usize / size_of::<f32>() {
        return Err(Error::Shape);
    }
    Ok(n)
}

/// An optional C string (NULL or empty: `None`); bytes that are not UTF-8 become U+FFFD, so such a
/// value is an unknown name (a warning), not an error.
///
/// # Safety
/// `p` must be null or a NUL-terminated string.
unsafe fn env_text(p: *const c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: a NUL-terminated string, per the contract.
    let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    (!s.is_empty()).then_some(s)
}

/// Copies `warnings`, then `last` (each line ending in '\n') into `msg` (`size` bytes),
/// NUL-terminated. When they do not all fit, whole warnings are left out from the end so that
/// `last` (the decline reason) is kept; only a `last` longer than `msg` itself is cut.
///
/// # Safety
/// `msg` must be null or valid for writes of `size` bytes.
unsafe fn put_lines(msg: *mut c_char, size: usize, warnings: &[String], last: Option<&str>) -> Result<(), Error> {
    if size == 0 {
        return Ok(());
    }
    if msg.is_null() {
        return Err(Error::Null);
    }
    let line = |l: &str| format!("{l}\n").into_bytes();
    let mut tail = last.map(line).unwrap_or_default();
    tail.truncate(size - 1);
    let mut text = Vec::new();
    for w in warnings {
        let w = line(w);
        if text.len() + w.len() + tail.len() + 1 > size {
            break;
        }
        text.extend_from_slice(&w);
    }
    text.extend_from_slice(&tail);
    text.push(0);
    // SAFETY: text.len() <= size, and msg is writable for size bytes (the caller's contract).
    unsafe { core::ptr::copy_nonoverlapping(text.as_ptr(), msg.cast::<u8>(), text.len()) };
    Ok(())
}

/// Chooses the kernel level and layouts ([`crate::plugin::choose`]); see the header.
///
/// # Safety
/// `kernel_env`, `ptq1_env` null or NUL-terminated; the out pointers valid for writes; `msg` null
/// or valid for writes of `msg_size` bytes.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn ggml_t2p_choose(
    kernel_env: *const c_char,
    ptq1_env: *const c_char,
    host_has_pq2: i32,
    host_has_ptq1: i32,
    out_kernel: *mut i32,
    out_pq2_layout: *mut i32,
    out_ptq1_layout: *mut i32,
    msg: *mut c_char,
    msg_size: usize,
) -> i32 {
    guard(|| {
        if out_kernel.is_null() || out_pq2_layout.is_null() || out_ptq1_layout.is_null() {
            return Err(Error::Null);
        }
        // SAFETY: the caller's contract on the strings.
        let (k, p) = unsafe { (env_text(kernel_env), env_text(ptq1_env)) };
        let c = crate::plugin::choose(k.as_deref(), p.as_deref(), host_has_pq2 != 0, host_has_ptq1 != 0);
        let lay = |l: Option<Layout>| l.map_or(-1, |l| l as i32);
        // SAFETY: the caller's contract (checked non-null above; msg by put_lines).
        unsafe {
            put(out_kernel, c.kernel.map_or(0, |k| k as i32))?;
            put(out_pq2_layout, lay(c.pq2_layout))?;
            put(out_ptq1_layout, lay(c.ptq1_layout))?;
            put_lines(msg, msg_size, &c.warnings, c.decline.as_deref())?;
        }
        if c.decline.is_some() {
            Err(Error::Unsupported)
        } else {
            Ok(())
        }
    })
}

/// Weights and bytes per block of a source type; see the header.
///
/// # Safety
/// `out_weights` and `out_bytes` null or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ggml_t2p_source_block(src_type: i32, out_weights: *mut i64, out_bytes: *mut usize) -> i32 {
    guard(|| {
        let (w, b) = crate::plugin::source_block_bytes(source(src_type)?);
        // SAFETY: the caller's contract.
        unsafe {
            put(out_weights, w as i64)?;
            put(out_bytes, b)
        }
    })
}

/// The Q8_K rounding probe's values ([`crate::plugin::q8k_probe_input`]); see the header.
///
/// # Safety
/// `x` null or valid for writes of `n` floats.
#[no_mangle]
pub unsafe extern "C" fn ggml_t2p_q8k_probe_input(x: *mut f32, n: usize) -> i32 {
    guard(|| {
        if x.is_null() {
            return Err(Error::Null);
        }
        if n < crate::plugin::Q8K_PROBE_VALUES {
            return Err(Error::BufferSize);
        }
        if !(x as usize).is_multiple_of(core::mem::align_of::<f32>()) {
            return Err(Error::Misaligned);
        }
        let v = crate::plugin::q8k_probe_input();
        // SAFETY: x is valid for n >= v.len() floats (the caller's contract), aligned (checked).
        unsafe { core::ptr::copy_nonoverlapping(v.as_ptr(), x, v.len()) };
        Ok(())
    })
}

/// Which Q8_K rounding reproduces the host's blocks ([`crate::plugin::q8k_rounding_matching`]);
/// see the header.
///
/// # Safety
/// `x` valid for reads of `n` floats, `host_q8k` for reads of `host_size` bytes, `out_rounding`
/// null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ggml_t2p_q8k_probe_rounding(
    kernel_id: i32,
    x: *const f32,
    n: usize,
    host_q8k: *const c_void,
    host_size: usize,
    out_rounding: *mut i32,
) -> i32 {
    guard(|| {
        let level = quantizer_level(kernel_id)?;
        let n = q8k_values(n)?;
        // SAFETY: the caller's contract on x (floats checks null and alignment).
        let xs = unsafe { floats(x, n)? };
        // SAFETY: the caller's contract on host_q8k (blocks checks null, size and alignment).
        let host = unsafe { blocks::<BlockQ8K>(host_q8k, host_size, n / crate::format::QK_K * size_of::<BlockQ8K>())? };
        let r = match crate::plugin::q8k_rounding_matching(level, xs, host)? {
            Some(Contract::Fused) => ROUND_FUSED,
            Some(Contract::Unfused) => ROUND_UNFUSED,
            None => 0,
        };
        // SAFETY: the caller's contract.
        unsafe { put(out_rounding, r) }
    })
}

pub use crate::hybrid::abi::ggml_t2p_tensor_view;
/// `GGML_T2P_LOG_INFO` / `GGML_T2P_LOG_WARN`.
pub use crate::plugin::host::LogLevel;
/// The C ABI's `ggml_t2p_plugin` (opaque to C).
pub use crate::plugin::Plugin;

/// `ggml_t2p_getenv_fn`.
pub type GetenvFn = unsafe extern "C" fn(name: *const c_char) -> *const c_char;
/// `ggml_t2p_host_type_fn`.
pub type HostTypeFn = unsafe extern "C" fn(
    type_id: i32,
    out_weights: *mut i64,
    out_bytes: *mut usize,
    out_name: *mut *const c_char,
) -> i32;
/// `ggml_t2p_quantize_fn`.
pub type QuantizeFn = unsafe extern "C" fn(x: *const f32, y: *mut c_void, n: i64);
/// `ggml_t2p_log_fn`.
pub type LogFn = unsafe extern "C" fn(level: i32, line: *const c_char, user: *mut c_void);

/// A host that is C callbacks ([`ggml_t2p_plugin_new`]).
struct CHost {
    env: GetenvFn,
    host_type: HostTypeFn,
    q8k: QuantizeFn,
    log: Option<LogFn>,
    user: *mut c_void,
}

// SAFETY: the header asks for callbacks that may be called from any thread (ggml's logger,
// getenv, type traits and quantizer are), and log_user is only handed back to log.
unsafe impl Send for CHost {}
// SAFETY: as above.
unsafe impl Sync for CHost {}

impl crate::plugin::host::Host for CHost {
    fn env(&self, name: &str) -> Option<Vec<u8>> {
        let name = std::ffi::CString::new(name).ok()?;
        // SAFETY: the callback takes a NUL-terminated name and answers NULL or a C string.
        let v = unsafe { (self.env)(name.as_ptr()) };
        if v.is_null() {
            return None;
        }
        // SAFETY: a NUL-terminated string (the callback's contract), copied at once.
        let v = unsafe { CStr::from_ptr(v) }.to_bytes().to_vec();
        (!v.is_empty()).then_some(v)
    }

    fn host_type(&self, id: u32) -> Option<crate::plugin::host::HostType> {
        let (mut weights, mut bytes, mut name) = (0i64, 0usize, core::ptr::null());
        // SAFETY: the out pointers are valid locals.
        if unsafe { (self.host_type)(id as i32, &mut weights, &mut bytes, &mut name) } == 0 {
            return None;
        }
        // SAFETY: NULL or a NUL-terminated string in static storage (the callback's contract).
        let name = (!name.is_null()).then(|| unsafe { CStr::from_ptr(name) }.to_bytes().to_vec());
        Some(crate::plugin::host::HostType { weights, bytes, name })
    }

    fn quantize_q8k(&self, x: &[f32], y: &mut [BlockQ8K]) {
        // SAFETY: x holds 256 * y.len() floats and y that many blocks (the trait's contract).
        unsafe { (self.q8k)(x.as_ptr(), y.as_mut_ptr().cast(), x.len() as i64) }
    }

    fn log(&self, level: LogLevel, line: &[u8]) {
        if let (Some(log), Ok(line)) = (self.log, std::ffi::CString::new(line)) {
            // SAFETY: a NUL-terminated line and the caller's own user pointer.
            unsafe { log(level as i32, line.as_ptr(), self.user) }
        }
    }
}

/// The plugin behind a C pointer.
///
/// # Safety
/// `p` must be null or from [`ggml_t2p_plugin_new`] and not freed.
unsafe fn plugin<'a>(p: *const Plugin) -> Result<&'a Plugin, Error> {
    // SAFETY: the caller's contract.
    unsafe { p.as_ref() }.ok_or(Error::Null)
}

/// Creates the plugin of a ggml host ([`Plugin::new`]); see the header.
///
/// # Safety
/// The callbacks as the header says; `out_plugin` null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ggml_t2p_plugin_new(
    env: Option<GetenvFn>,
    host_type: Option<HostTypeFn>,
    host_q8k: Option<QuantizeFn>,
    log: Option<LogFn>,
    log_user: *mut c_void,
    out_plugin: *mut *mut Plugin,
) -> i32 {
    guard(|| {
        let (Some(env), Some(host_type), Some(q8k)) = (env, host_type, host_q8k) else {
            return Err(Error::Null);
        };
        if out_plugin.is_null() {
            return Err(Error::Null);
        }
        let host = CHost { env, host_type, q8k, log, user: log_user };
        let p = Plugin::new(Box::new(host)).map_or(core::ptr::null_mut(), |p| Box::into_raw(Box::new(p)));
        // SAFETY: checked non-null; the caller's contract.
        unsafe { put(out_plugin, p)? };
        if p.is_null() {
            Err(Error::Unsupported)
        } else {
            Ok(())
        }
    })
}

/// Frees a plugin; see the header.
///
/// # Safety
/// `plugin` null or from [`ggml_t2p_plugin_new`], not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn ggml_t2p_plugin_free(plugin: *mut Plugin) {
    if !plugin.is_null() {
        // SAFETY: from Box::into_raw in ggml_t2p_plugin_new (the caller's contract).
        let _ = catch_unwind(AssertUnwindSafe(|| drop(unsafe { Box::from_raw(plugin) })));
    }
}

/// The layout a plugin repacks a type into; see the header.
///
/// # Safety
/// `plugin_` null or a plugin from [`ggml_t2p_plugin_new`], not freed; `out_layout` null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ggml_t2p_plugin_layout(plugin_: *const Plugin, src_type: i32, out_layout: *mut i32) -> i32 {
    guard(|| {
        // SAFETY: the caller's contract.
        let (_, lay) = unsafe { plugin(plugin_)? }.layout(src_type)?;
        // SAFETY: the caller's contract.
        unsafe { put(out_layout, lay as i32) }
    })
}

/// Whether a plugin runs a matrix; see the header.
///
/// # Safety
/// `plugin_` null or a plugin from [`ggml_t2p_plugin_new`], not freed.
#[no_mangle]
pub unsafe extern "C" fn ggml_t2p_plugin_supports(plugin_: *const Plugin, src_type: i32, n_rows: i64, k: i64) -> i32 {
    // SAFETY: the caller's contract.
    guard(|| unsafe { plugin(plugin_)? }.supports(src_type, dim(n_rows)?, dim(k)?))
}

/// Repacked size with a plugin's layout; see the header.
///
/// # Safety
/// `plugin_` null or a plugin from [`ggml_t2p_plugin_new`], not freed; `out_size` null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ggml_t2p_plugin_repacked_size(
    plugin_: *const Plugin,
    src_type: i32,
    n_rows: i64,
    k: i64,
    out_size: *mut usize,
) -> i32 {
    guard(|| {
        // SAFETY: the caller's contract.
        let size = unsafe { plugin(plugin_)? }.repacked_size(src_type, dim(n_rows)?, dim(k)?)?;
        // SAFETY: the caller's contract.
        unsafe { put(out_size, size) }
    })
}

/// Repacks a whole tensor ([`Plugin::repack`]); see the header.
///
/// # Safety
/// `plugin_` null or a plugin from [`ggml_t2p_plugin_new`], not freed; `src` valid for reads of `src_size` bytes and mapped and unchanged
/// during the call, `dst` for writes of `dst_size` bytes.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn ggml_t2p_plugin_repack(
    plugin_: *const Plugin,
    src_type: i32,
    src: *const c_void,
    src_size: usize,
    n_rows: i64,
    k: i64,
    dst: *mut c_void,
    dst_size: usize,
) -> i32 {
    guard(|| {
        // SAFETY: the caller's contract.
        let p = unsafe { plugin(plugin_)? };
        // SAFETY: the caller's contract, forwarded.
        unsafe { p.repack(src_type, src.cast(), src_size, dim(n_rows)?, dim(k)?, dst.cast(), dst_size) }
    })
}

/// A repacked tensor's bytes in its source format ([`Plugin::unpack`]); see the header.
///
/// # Safety
/// `plugin_` null or a plugin from [`ggml_t2p_plugin_new`], not freed; `w` valid for reads of `w_size` bytes, `dst`
/// for writes of `dst_size` bytes, not overlapping.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn ggml_t2p_plugin_unpack(
    plugin_: *const Plugin,
    src_type: i32,
    w: *const c_void,
    w_size: usize,
    n_rows: i64,
    k: i64,
    dst: *mut c_void,
    dst_size: usize,
) -> i32 {
    guard(|| {
        // SAFETY: the caller's contract.
        let p = unsafe { plugin(plugin_)? };
        // SAFETY: the caller's contract, forwarded.
        unsafe { p.unpack(src_type, w, w_size, dim(n_rows)?, dim(k)?, dst, dst_size) }
    })
}

/// A new buffer of a plugin ([`Plugin::new_buffer`]); see the header.
///
/// # Safety
/// `plugin_` null or a plugin from [`ggml_t2p_plugin_new`], not freed; `[base, base + size)` memory of this process (or `base` NULL).
#[no_mangle]
pub unsafe extern "C" fn ggml_t2p_plugin_new_buffer(plugin_: *const Plugin, base: *mut c_void, size: usize) -> i32 {
    guard(|| {
        // SAFETY: the caller's contract.
        unsafe { plugin(plugin_)?.new_buffer(base.cast(), size) };
        Ok(())
    })
}

/// Logs a plugin's load line once ([`Plugin::report`]); see the header.
///
/// # Safety
/// `plugin_` null or a plugin from [`ggml_t2p_plugin_new`], not freed.
#[no_mangle]
pub unsafe extern "C" fn ggml_t2p_plugin_report(plugin_: *const Plugin) -> i32 {
    guard(|| {
        // SAFETY: the caller's contract.
        unsafe { plugin(plugin_)? }.report();
        Ok(())
    })
}

/// Thread `ith` of `nth`'s share of a hybrid float op ([`Plugin::hybrid_op`]); see the header.
///
/// # Safety
/// `plugin_` null or a plugin from [`ggml_t2p_plugin_new`], not freed; `srcs` null or `n_srcs`
/// views, `dst` null or one view, each describing memory valid for its shape during the call.
#[no_mangle]
pub unsafe extern "C" fn ggml_t2p_plugin_hybrid_op(
    plugin_: *const Plugin,
    op: i32,
    srcs: *const ggml_t2p_tensor_view,
    n_srcs: i32,
    dst: *const ggml_t2p_tensor_view,
    ith: i32,
    nth: i32,
) -> i32 {
    guard(|| {
        // SAFETY: the caller's contract.
        let p = unsafe { plugin(plugin_)? };
        let n = usize::try_from(n_srcs).map_err(|_| Error::InvalidArgument)?;
        if srcs.is_null() || dst.is_null() {
            return Err(Error::Null);
        }
        // SAFETY: the caller passes n_srcs views at srcs and one at dst, valid as stated.
        unsafe { p.hybrid_op(op, core::slice::from_raw_parts(srcs, n), &*dst, ith, nth) }
    })
}

/// Whether a plugin serves `GET_ROWS` on a matrix ([`Plugin::get_rows_supported`]); see the header.
///
/// # Safety
/// `plugin_` null or a plugin from [`ggml_t2p_plugin_new`], not freed.
#[no_mangle]
pub unsafe extern "C" fn ggml_t2p_plugin_get_rows_supported(
    plugin_: *const Plugin,
    src_type: i32,
    n_rows: i64,
    k: i64,
) -> i32 {
    guard(|| {
        // SAFETY: the caller's contract.
        unsafe { plugin(plugin_)? }.get_rows_supported(src_type, dim(n_rows)?, dim(k)?)
    })
}

/// Thread `ith` of `nth`'s share of `GET_ROWS` on a repacked matrix ([`Plugin::get_rows`]); see
/// the header.
///
/// # Safety
/// `plugin_` null or a plugin from [`ggml_t2p_plugin_new`], not freed; `w` valid for reads of
/// `w_size` bytes; `ids` and `dst` null or views describing memory valid for their shapes during
/// the call.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn ggml_t2p_plugin_get_rows(
    plugin_: *const Plugin,
    src_type: i32,
    w: *const c_void,
    w_size: usize,
    n_rows: i64,
    k: i64,
    ids: *const ggml_t2p_tensor_view,
    dst: *const ggml_t2p_tensor_view,
    ith: i32,
    nth: i32,
) -> i32 {
    guard(|| {
        // SAFETY: the caller's contract.
        let p = unsafe { plugin(plugin_)? };
        let (ith, nth) =
            (usize::try_from(ith).map_err(|_| Error::Range)?, usize::try_from(nth).map_err(|_| Error::Range)?);
        if ids.is_null() || dst.is_null() {
            return Err(Error::Null);
        }
        // SAFETY: the caller's contract, forwarded (one view at ids and one at dst).
        unsafe { p.get_rows(src_type, w, w_size, dim(n_rows)?, dim(k)?, &*ids, &*dst, ith, nth) }
    })
}

/// The plan of one matrix multiplication ([`Plugin::mul_mat_plan`]); see the header.
///
/// # Safety
/// `plugin_` null or a plugin from [`ggml_t2p_plugin_new`], not freed; each out pointer null or valid for a write.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn ggml_t2p_plugin_mul_mat_plan(
    plugin_: *const Plugin,
    src_type: i32,
    n_rows: i64,
    k: i64,
    n_cols: i64,
    n_threads: i32,
    numa: i32,
    out_work_size: *mut usize,
    out_n_chunks: *mut i64,
    out_chunk_rows: *mut i64,
) -> i32 {
    guard(|| {
        // SAFETY: the caller's contract.
        let p = unsafe { plugin(plugin_)? };
        let threads = usize::try_from(n_threads).map_err(|_| Error::InvalidArgument)?;
        let (size, n_chunks, rows) =
            p.mul_mat_plan(src_type, dim(n_rows)?, dim(k)?, dim(n_cols)?, threads, numa != 0)?;
        // SAFETY: the caller's contract (NULL: not asked).
        unsafe {
            put_if(out_work_size, size)?;
            put_if(out_n_chunks, n_chunks as i64)?;
            put_if(out_chunk_rows, rows as i64)
        }
    })
}

/// Quantizes and packs one thread's share of the activations ([`Plugin::act_prepare`]); see the
/// header.
///
/// # Safety
/// `plugin_` null or a plugin from [`ggml_t2p_plugin_new`], not freed; the activation columns valid for reads; `work` valid for writes of
/// `work_size` bytes, shared with the other threads of the multiplication as the header says.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn ggml_t2p_plugin_act_prepare(
    plugin_: *const Plugin,
    src_type: i32,
    k: i64,
    act: *const f32,
    ne1: i64,
    ne2: i64,
    ne3: i64,
    nb1: usize,
    nb2: usize,
    nb3: usize,
    ith: i32,
    nth: i32,
    work: *mut c_void,
    work_size: usize,
) -> i32 {
    guard(|| {
        // SAFETY: the caller's contract.
        let p = unsafe { plugin(plugin_)? };
        let thread = |t: i32| usize::try_from(t).map_err(|_| Error::InvalidArgument);
        let ne = [dim(ne1)?, dim(ne2)?, dim(ne3)?];
        // SAFETY: the caller's contract, forwarded.
        unsafe {
            p.act_prepare(
                src_type,
                dim(k)?,
                act,
                ne,
                [nb1, nb2, nb3],
                thread(ith)?,
                thread(nth)?,
                work.cast(),
                work_size,
            )
        }
    })
}

/// Runs rows of one matrix multiplication ([`Plugin::mul_mat_rows`]); see the header.
///
/// # Safety
/// `plugin_` null or a plugin from [`ggml_t2p_plugin_new`], not freed; `w` valid for reads of the repacked size, `work` of `work_size` bytes,
/// `dst` for writes of `dst_len` floats; no other thread writes `work` or these rows meanwhile.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn ggml_t2p_plugin_mul_mat_rows(
    plugin_: *const Plugin,
    src_type: i32,
    w: *const c_void,
    n_rows: i64,
    k: i64,
    n_cols: i64,
    work: *const c_void,
    work_size: usize,
    dst: *mut f32,
    dst_len: usize,
    dst_col_stride: i64,
    row_begin: i64,
    row_end: i64,
) -> i32 {
    guard(|| {
        // SAFETY: the caller's contract.
        let p = unsafe { plugin(plugin_)? };
        let (n_rows, k, n_cols, stride) = (dim(n_rows)?, dim(k)?, dim(n_cols)?, dim(dst_col_stride)?);
        let rows = dim(row_begin).map_err(|_| Error::Range)?..dim(row_end).map_err(|_| Error::Range)?;
        // SAFETY: the caller's contract, forwarded.
        unsafe {
            p.mul_mat_rows(src_type, w.cast(), n_rows, k, n_cols, work.cast(), work_size, dst, dst_len, stride, rows)
        }
    })
}

/// Releases a source buffer's file pages ([`crate::plugin::pages::release_source`]); see the
/// header.
///
/// # Safety
/// `[data, data + size)` memory of this process, mapped and unchanged during the call (or `data`
/// NULL); the out pointers null or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ggml_t2p_release_source(
    data: *const c_void,
    size: usize,
    out_why: *mut i32,
    out_bytes: *mut usize,
    out_error: *mut i32,
) -> i32 {
    guard(|| {
        if out_why.is_null() || out_bytes.is_null() || out_error.is_null() {
            return Err(Error::Null);
        }
        // SAFETY: the caller's contract.
        let r = unsafe { crate::plugin::pages::release_source(data.cast(), size) };
        // SAFETY: checked non-null; the caller's contract.
        unsafe {
            put(out_why, r.status as i32)?;
            put(out_bytes, r.bytes)?;
            put(out_error, r.error)
        }
    })
}

/// Compile-time proof that the header and these exports agree (feature `abi-check`).
#[cfg(feature = "abi-check")]
#[allow(non_camel_case_types, non_upper_case_globals, dead_code, missing_docs, improper_ctypes, clippy::all)]
pub mod abi_check {
    mod c {
        // the opaque type of the header is the crate's own (bindgen leaves it out)
        pub use super::super::ggml_t2p_tensor_view;
        pub use crate::plugin::Plugin as ggml_t2p_plugin;
        include!(concat!(env!("OUT_DIR"), "/ggml_t2p_bindings.rs"));
    }

    /// Both arguments must have the same type.
    fn same<T>(_: T, _: T) {}

    macro_rules! same_signature {
        ($($name:ident($($arg:tt),*);)*) => {
            /// Referenced so the checks are compiled.
            pub fn check() {
                $(
                    same(
                        c::$name as unsafe extern "C" fn($($arg),*) -> _,
                        super::$name as unsafe extern "C" fn($($arg),*) -> _,
                    );
                )*
            }
        };
    }

    same_signature! {
        ggml_t2p_version();
        ggml_t2p_abi_version();
        ggml_t2p_cpu_features();
        ggml_t2p_cpu_features_unknown();
        ggml_t2p_assume_kernel(_);
        ggml_t2p_best_kernel();
        ggml_t2p_kernel_name(_);
        ggml_t2p_kernel_from_name(_, _);
        ggml_t2p_layout_name(_);
        ggml_t2p_status_string(_);
        ggml_t2p_layout_for(_, _, _, _);
        ggml_t2p_row_tile(_, _);
        ggml_t2p_supports(_, _, _, _, _);
        ggml_t2p_repacked_size(_, _, _, _, _);
        ggml_t2p_set_threads(_);
        ggml_t2p_repack(_, _, _, _, _, _, _, _);
        ggml_t2p_act_packed_size(_, _, _, _, _);
        ggml_t2p_act_pack(_, _, _, _, _, _, _, _, _, _, _);
        ggml_t2p_gemv(_, _, _, _, _, _, _, _, _, _, _, _);
        ggml_t2p_gemm(_, _, _, _, _, _, _, _, _, _, _, _, _, _);
        ggml_t2p_quantize_q8_k(_, _, _, _, _, _);
        ggml_t2p_choose(_, _, _, _, _, _, _, _, _);
        ggml_t2p_source_block(_, _, _);
        ggml_t2p_q8k_probe_input(_, _);
        ggml_t2p_q8k_probe_rounding(_, _, _, _, _, _);
        ggml_t2p_plugin_new(_, _, _, _, _, _);
        ggml_t2p_plugin_free(_);
        ggml_t2p_plugin_layout(_, _, _);
        ggml_t2p_plugin_supports(_, _, _, _);
        ggml_t2p_plugin_repacked_size(_, _, _, _, _);
        ggml_t2p_plugin_repack(_, _, _, _, _, _, _, _);
        ggml_t2p_plugin_unpack(_, _, _, _, _, _, _, _);
        ggml_t2p_plugin_new_buffer(_, _, _);
        ggml_t2p_plugin_report(_);
        ggml_t2p_plugin_hybrid_op(_, _, _, _, _, _, _);
        ggml_t2p_plugin_get_rows_supported(_, _, _, _);
        ggml_t2p_plugin_get_rows(_, _, _, _, _, _, _, _, _, _);
        ggml_t2p_plugin_mul_mat_plan(_, _, _, _, _, _, _, _, _, _);
        ggml_t2p_plugin_act_prepare(_, _, _, _, _, _, _, _, _, _, _, _, _, _);
        ggml_t2p_plugin_mul_mat_rows(_, _, _, _, _, _, _, _, _, _, _, _, _);
        ggml_t2p_release_source(_, _, _, _, _);
    }

    const _: () = {
        use crate::kernels::KernelLevel as K;
        use crate::repack::Layout as L;
        assert!(c::GGML_T2P_ABI_VERSION as u32 == super::ABI_VERSION);
        assert!(c::GGML_T2P_OK == super::OK);
        // ggml_t2p_tensor_view as the header lays it out: a pointer, an int32 (padded), 4 int64, 4 uint64.
        {
            use super::ggml_t2p_tensor_view as V;
            use core::mem::{offset_of, size_of};
            assert!(size_of::<*mut core::ffi::c_void>() != 8 || size_of::<V>() == 80);
            assert!(offset_of!(V, type_) == size_of::<*mut core::ffi::c_void>());
            assert!(offset_of!(V, ne) == 2 * size_of::<*mut core::ffi::c_void>());
            assert!(offset_of!(V, nb) == offset_of!(V, ne) + 32);
        }
        assert!(c::GGML_T2P_OP_SSM_CONV == crate::hybrid::abi::OP_SSM_CONV);
        assert!(c::GGML_T2P_OP_GATED_DELTA_NET == crate::hybrid::abi::OP_GATED_DELTA_NET);
        assert!(c::GGML_T2P_OP_CONCAT == crate::hybrid::abi::OP_CONCAT);
        assert!(c::GGML_T2P_OP_GET_ROWS == crate::hybrid::abi::OP_GET_ROWS);
        assert!(c::GGML_T2P_ERR_INTERNAL == super::ERR_INTERNAL);
        assert!(c::GGML_T2P_KERNEL_AUTO == super::KERNEL_AUTO);
        assert!(c::GGML_T2P_KERNEL_REF == K::Reference as i32);
        assert!(c::GGML_T2P_KERNEL_DOTPROD == K::Dotprod as i32);
        assert!(c::GGML_T2P_KERNEL_I8MM == K::I8mm as i32);
        assert!(c::GGML_T2P_KERNEL_AVX2 == K::Avx2 as i32);
        assert!(c::GGML_T2P_KERNEL_AVXVNNI == K::AvxVnni as i32);
        assert!(c::GGML_T2P_KERNEL_AVX512VNNI == K::Avx512Vnni as i32);
        assert!(c::GGML_T2P_KERNEL_AMX == K::Amx as i32);
        assert!(c::GGML_T2P_LAYOUT_T2P == L::T2p as i32);
        assert!(c::GGML_T2P_LAYOUT_PTQ1_0X4 == L::Ptq1_0x4 as i32);
        assert!(c::GGML_T2P_LAYOUT_X16 == L::X16 as i32);
        assert!(c::GGML_T2P_LAYOUT_L64 == L::L64 as i32);
        assert!(c::GGML_T2P_PREFER_COMPACT as u32 == super::PREFER_COMPACT);
        assert!(c::GGML_T2P_TYPE_PQ2_0 as u32 == crate::format::GGML_TYPE_PQ2_0);
        assert!(c::GGML_T2P_TYPE_PTQ1_0 as u32 == crate::format::GGML_TYPE_PTQ1_0);
        assert!(c::GGML_T2P_ROUND_FUSED == super::ROUND_FUSED);
        assert!(c::GGML_T2P_ROUND_UNFUSED == super::ROUND_UNFUSED);
        assert!(c::GGML_T2P_HAVE_QUANTIZE_Q8_K == 1);
        assert!(c::GGML_T2P_Q8K_PROBE_VALUES as usize == crate::plugin::Q8K_PROBE_VALUES);
        assert!(c::GGML_T2P_ACT_ALIGN as usize == crate::kernels::act_pack::PACKED_ALIGN);
        assert!(c::GGML_T2P_LOG_INFO == super::LogLevel::Info as i32);
        assert!(c::GGML_T2P_LOG_WARN == super::LogLevel::Warn as i32);
        {
            use crate::plugin::pages::Release as R;
            assert!(c::GGML_T2P_RELEASE_DONE == R::Done as i32);
            assert!(c::GGML_T2P_RELEASE_TOO_SMALL == R::TooSmall as i32);
            assert!(c::GGML_T2P_RELEASE_NOT_SHARED == R::NotShared as i32);
            assert!(c::GGML_T2P_RELEASE_NO_MAPS == R::NoMaps as i32);
            assert!(c::GGML_T2P_RELEASE_REFUSED == R::Refused as i32);
            assert!(c::GGML_T2P_RELEASE_UNSUPPORTED == R::Unsupported as i32);
        }
    };

    /// Each error's status code must be the header's constant.
    pub const STATUS: [(crate::Error, i32); 7] = [
        (crate::Error::Null, c::GGML_T2P_ERR_NULL),
        (crate::Error::Shape, c::GGML_T2P_ERR_SHAPE),
        (crate::Error::BufferSize, c::GGML_T2P_ERR_BUFFER_SIZE),
        (crate::Error::Misaligned, c::GGML_T2P_ERR_MISALIGNED),
        (crate::Error::Range, c::GGML_T2P_ERR_RANGE),
        (crate::Error::Unsupported, c::GGML_T2P_ERR_UNSUPPORTED),
        (crate::Error::InvalidArgument, c::GGML_T2P_ERR_INVALID_ARGUMENT),
    ];

    /// CPU feature bits: the header's constants against [`crate::CpuFeatures::bits`].
    #[test]
    fn cpu_bits_match_header() {
        use crate::CpuFeatures as F;
        let one = |f: F| f.bits() as i32;
        assert_eq!(one(F { neon: true, ..F::default() }), c::GGML_T2P_CPU_NEON);
        assert_eq!(one(F { dotprod: true, ..F::default() }), c::GGML_T2P_CPU_DOTPROD);
        assert_eq!(one(F { i8mm: true, ..F::default() }), c::GGML_T2P_CPU_I8MM);
        assert_eq!(one(F { avx2: true, ..F::default() }), c::GGML_T2P_CPU_AVX2);
        assert_eq!(one(F { avxvnni: true, ..F::default() }), c::GGML_T2P_CPU_AVXVNNI);
        assert_eq!(one(F { avx512vnni: true, ..F::default() }), c::GGML_T2P_CPU_AVX512VNNI);
        assert_eq!(one(F { amx_tile: true, ..F::default() }), c::GGML_T2P_CPU_AMX_TILE);
        assert_eq!(one(F { amx_int8: true, ..F::default() }), c::GGML_T2P_CPU_AMX_INT8);
        assert_eq!(one(F { avx512vbmi: true, ..F::default() }), c::GGML_T2P_CPU_AVX512VBMI);
    }

    #[test]
    fn status_codes_match_header() {
        check();
        for (e, code) in STATUS {
            assert_eq!(super::status(e), code, "{e:?}");
        }
    }
}
