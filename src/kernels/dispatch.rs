//! The one dispatch table: (level, weight layout, activation format) -> one kernel
//! ([`gemm_raw`]), and the entry points that reach it; level -> Q8_K activation quantizer
//! ([`quantize_q8_k`]). The only module that names ISA files.

use super::act_pack::{ActBlockX4, ActDup, ActFormat, ActTile16, PackedActs, Q8Half};
use super::features::KernelLevel;
use super::operands::{validate, Activations, Job, OutPtr, PackedWeights};
use super::scalar;
#[cfg(target_arch = "aarch64")]
use super::{neon_dotprod, neon_i8mm, neon_quant, ptq1_0_neon};
#[cfg(target_arch = "x86_64")]
use super::{x86_amx, x86_avx2, x86_quant, x86_vnni};
use crate::format::{BlockPtq1_0x4, BlockQ8K, BlockT2p, BlockX16, QK, QK_K};
use crate::reference::{self, Contract};
use crate::Error;
use core::ops::Range;

/// The narrowest batch the [`KernelLevel::Amx`] level runs on tiles (packed as
/// [`ActFormat::T16`]); gemv and narrower batches run its AVX-512 VNNI kernels (Halves pack).
/// 16 = one full `A` tile: a placeholder, NOT measured (the AMX path has not run on AMX hardware
/// yet); the crossover is to be timed against `avx512vnni` on a Sapphire/Emerald Rapids Xeon.
pub const AMX_MIN_COLS: usize = 16;

/// Computes rows `rows` of `dst = W x A` for every activation column, packing the activations
/// for `level` first (a convenience for tests and tools; a matrix multiplication in ggml packs
/// once with [`pack_raw`](super::act_pack::pack_raw) and calls [`gemm_raw`] per row chunk). Element (row `r`,
/// column `j`) goes to `dst[j * col_stride + r]`; nothing else in `dst` is touched. One column
/// runs the gemv kernel of `level`, more run its gemm kernel, zero columns do nothing.
///
/// # Errors
/// [`Error::Unsupported`] if `level` is not available on this CPU or has no kernels for the
/// layout; [`Error::Shape`], [`Error::Range`], [`Error::BufferSize`] for shapes that disagree (see
/// [`gemm_raw`]).
pub fn gemm(
    level: KernelLevel,
    w: &PackedWeights<'_>,
    a: &Activations<'_>,
    dst: &mut [f32],
    col_stride: usize,
    rows: Range<usize>,
) -> Result<(), Error> {
    let pack = a.pack(w.layout(), level)?;
    gemm_packed(level, w, &pack.view(), dst, col_stride, rows)
}

/// [`gemm`] with a single activation column: `dst[r]` for `r` in `rows`.
///
/// # Errors
/// As [`gemm`].
pub fn gemv(
    level: KernelLevel,
    w: &PackedWeights<'_>,
    act: &[BlockQ8K],
    dst: &mut [f32],
    rows: Range<usize>,
) -> Result<(), Error> {
    let a = Activations::new(act, 1, w.k())?;
    gemm(level, w, &a, dst, 0, rows)
}

/// [`gemm`] on activations packed already (for `level`, `w`'s layout and `a.n_cols` columns).
///
/// # Errors
/// As [`gemm`]; [`Error::InvalidArgument`] if `a` is packed in another format than
/// [`ActFormat::for_kernel`] gives.
pub fn gemm_packed(
    level: KernelLevel,
    w: &PackedWeights<'_>,
    a: &PackedActs<'_>,
    dst: &mut [f32],
    col_stride: usize,
    rows: Range<usize>,
) -> Result<(), Error> {
    // SAFETY: dst is a live, uniquely borrowed slice of dst.len() floats.
    unsafe { gemm_raw(level, w, a, dst.as_mut_ptr(), dst.len(), col_stride, rows) }
}

/// The raw-pointer form of [`gemm_packed`], for callers (ggml threads, [`gemm_par`](super::gemm_par)) that write
/// disjoint row ranges of one output buffer at the same time.
///
/// Requirements checked here: `level` available and running `w`'s layout; `a` in the format of
/// [`ActFormat::for_kernel`]; `a.k == w.k()`; `rows` within `0..n_rows`, starting on a row tile
/// boundary (4 rows, 16 for X16) and ending on one or at `n_rows`; `col_stride >= n_rows` when
/// `a.n_cols > 1`; `(n_cols - 1) * col_stride + rows.end <= dst_len`, and that extent no larger
/// than `isize::MAX` bytes; `dst` non-null and 4-byte aligned when anything is written.
///
/// # Errors
/// As [`gemm_packed`].
///
/// # Safety
/// `dst` must be valid for writes of `dst_len` floats, and no other thread may access the
/// elements this call writes (rows `rows` of each column) while it runs.
pub unsafe fn gemm_raw(
    level: KernelLevel,
    w: &PackedWeights<'_>,
    a: &PackedActs<'_>,
    dst: *mut f32,
    dst_len: usize,
    col_stride: usize,
    rows: Range<usize>,
) -> Result<(), Error> {
    if !level.is_available() || !level.runs(w.layout()) {
        return Err(Error::Unsupported);
    }
    if ActFormat::for_kernel(w.layout(), level, a.n_cols)? != a.format {
        return Err(Error::InvalidArgument);
    }
    validate(w, a, dst_len, col_stride, &rows)?;
    if rows.is_empty() || a.n_cols == 0 {
        return Ok(()); // nothing is written: dst may be anything, NULL included
    }
    if dst.is_null() {
        return Err(Error::Null);
    }
    if !(dst as usize).is_multiple_of(core::mem::align_of::<f32>()) {
        return Err(Error::Misaligned);
    }
    let out = OutPtr { ptr: dst, col_stride };
    let nb = w.k() / QK;
    let tile = w.layout().tile_rows();
    let tiles = rows.start / tile..rows.end.div_ceil(tile);
    let (n_cols, n_rows) = (a.n_cols, w.n_rows());
    macro_rules! job {
        ($blocks:expr, $act:ty) => {
            Job { w: $blocks, nb, n_rows, act: a.elements::<$act>(), n_cols, out, tiles }
        };
    }
    // SAFETY: (every arm) validated above; the level is available; the caller owns the rows.
    unsafe {
        match (*w, a.format) {
            (PackedWeights::T2p { blocks, .. }, ActFormat::Halves) => {
                scalar::gemm_t2p_4xn_q8_k_generic(job!(blocks, Q8Half))
            }
            (PackedWeights::Ptq1_0x4 { blocks, .. }, ActFormat::Halves) => {
                scalar::gemm_ptq1_0x4_4xn_q8_k_generic(job!(blocks, Q8Half))
            }
            (PackedWeights::X16 { blocks, .. }, ActFormat::Halves) => run_x16(level, job!(blocks, Q8Half)),
            (PackedWeights::X16 { blocks, .. }, ActFormat::T16) => run_amx(job!(blocks, ActTile16)),
            (PackedWeights::T2p { blocks, .. }, ActFormat::Dup) => run_t2p_gemv(job!(blocks, ActDup)),
            (PackedWeights::T2p { blocks, .. }, ActFormat::X4) => run_t2p_gemm(level, job!(blocks, ActBlockX4)),
            (PackedWeights::Ptq1_0x4 { blocks, .. }, ActFormat::Dup) => run_ptq1_gemv(job!(blocks, ActDup)),
            (PackedWeights::Ptq1_0x4 { blocks, .. }, ActFormat::X4) => run_ptq1_gemm(level, job!(blocks, ActBlockX4)),
            (PackedWeights::X16 { .. }, _) => return Err(Error::InvalidArgument),
            (PackedWeights::T2p { .. } | PackedWeights::Ptq1_0x4 { .. }, ActFormat::T16) => {
                return Err(Error::InvalidArgument)
            }
        }
    }
    Ok(())
}

/// Quantizes one row of `x.len() = 256 * y.len()` floats to Q8_K blocks with the quantizer of
/// `level`: bit for bit [`reference::quantize_row_q8_k`] with the same `contract` (zero blocks
/// leave their `bsums` untouched, as there). The reference level runs the reference itself; the
/// x86 levels run AVX2 + FMA (`avx2`, `avxvnni`) or AVX-512 F/BW (`avx512vnni`) code; the ARM
/// levels run NEON code.
///
/// # Errors
/// [`Error::Unsupported`] if `level` is not available on this CPU; [`Error::Shape`] if
/// `x.len() != 256 * y.len()`.
pub fn quantize_q8_k(level: KernelLevel, x: &[f32], y: &mut [BlockQ8K], contract: Contract) -> Result<(), Error> {
    if !level.is_available() {
        return Err(Error::Unsupported);
    }
    if y.len().checked_mul(QK_K) != Some(x.len()) {
        return Err(Error::Shape);
    }
    match level {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2 and FMA available (the level is); the lengths agree (checked above).
        KernelLevel::Avx2 | KernelLevel::AvxVnni => unsafe { x86_quant::quantize_q8_k_avx2(x, y, contract) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX-512 F and BW available (the level is); the lengths agree (checked above).
        KernelLevel::Avx512Vnni | KernelLevel::Amx => unsafe { x86_quant::quantize_q8_k_avx512(x, y, contract) },
        #[cfg(target_arch = "aarch64")]
        // SAFETY: NEON available (the level is); the lengths agree (checked above).
        KernelLevel::Dotprod | KernelLevel::I8mm => unsafe { neon_quant::quantize_q8_k_neon(x, y, contract) },
        _ => return reference::quantize_row_q8_k(x, y, contract),
    }
    Ok(())
}

/// [`quantize_q8_k`] at this CPU's best level ([`KernelLevel::best`], asked from the features kept
/// once per process; the reference where there is none): the fast way to the reference's bits.
///
/// # Errors
/// [`Error::Shape`] if `x.len() != 256 * y.len()`.
pub fn quantize_row_q8_k_fast(x: &[f32], y: &mut [BlockQ8K], contract: Contract) -> Result<(), Error> {
    quantize_q8_k(KernelLevel::best().unwrap_or(KernelLevel::Reference), x, y, contract)
}

/// # Safety
/// `job` validated by `gemm_raw`; `level` available and one of the x86 levels (or the reference).
unsafe fn run_x16(level: KernelLevel, job: Job<'_, BlockX16, Q8Half>) {
    match level {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2, FMA and F16C available (the level is); `job` validated (function contract).
        KernelLevel::Avx2 => unsafe { x86_avx2::run(job) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX-VNNI and the AVX2 set available (the level is); `job` validated.
        KernelLevel::AvxVnni => unsafe { x86_vnni::run_avxvnni(job) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX-512 F/BW/VL/VNNI and the AVX2 set available (the level is); `job` validated.
        KernelLevel::Avx512Vnni => unsafe { x86_vnni::run_avx512vnni(job) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the Amx level includes AVX-512 VNNI (its narrow batches run there); `job`
        // validated.
        KernelLevel::Amx => unsafe { x86_vnni::run_avx512vnni(job) },
        _ => scalar::gemm_x16_16xn_q8_k_generic(job),
    }
}

/// # Safety
/// `job` validated by `gemm_raw` with a T16 pack; the Amx level available (T16 is only chosen
/// for it).
#[allow(unused_variables)]
unsafe fn run_amx(job: Job<'_, BlockX16, ActTile16>) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: AMX-TILE/INT8 usable and permitted, AVX-512 available (the level is); validated.
    unsafe {
        x86_amx::gemm_x16_16x16_q8_k_amx(&job, super::amx::BLOCKING)
    }
    #[cfg(not(target_arch = "x86_64"))]
    unreachable!("the T16 format is only used by the x86 AMX level");
}

/// # Safety
/// `job` validated by `gemm_raw` with one column; dotprod available.
#[allow(unused_variables)]
unsafe fn run_t2p_gemv(job: Job<'_, BlockT2p, ActDup>) {
    #[cfg(target_arch = "aarch64")]
    // SAFETY: dotprod available (the Dup format is only chosen for the ARM levels).
    unsafe {
        neon_dotprod::gemv_t2p_4x1_q8_k_dotprod(job)
    }
    #[cfg(not(target_arch = "aarch64"))]
    unreachable!("the Dup format is only used by the ARM levels");
}

/// # Safety
/// `job` validated by `gemm_raw`; `level` is Dotprod or I8mm and available.
#[allow(unused_variables)]
unsafe fn run_t2p_gemm(level: KernelLevel, job: Job<'_, BlockT2p, ActBlockX4>) {
    #[cfg(target_arch = "aarch64")]
    // SAFETY: the level's features are available.
    unsafe {
        if level == KernelLevel::I8mm {
            neon_i8mm::gemm_t2p_4x16_q8_k_i8mm(job)
        } else {
            neon_dotprod::gemm_t2p_4x4_q8_k_dotprod(job)
        }
    }
    #[cfg(not(target_arch = "aarch64"))]
    unreachable!("the X4 format is only used by the ARM levels");
}

/// # Safety
/// As [`run_t2p_gemv`].
#[allow(unused_variables)]
unsafe fn run_ptq1_gemv(job: Job<'_, BlockPtq1_0x4, ActDup>) {
    #[cfg(target_arch = "aarch64")]
    // SAFETY: dotprod available.
    unsafe {
        ptq1_0_neon::gemv_ptq1_0x4_4x1_q8_k_dotprod(job)
    }
    #[cfg(not(target_arch = "aarch64"))]
    unreachable!("the Dup format is only used by the ARM levels");
}

/// # Safety
/// As [`run_t2p_gemm`].
#[allow(unused_variables)]
unsafe fn run_ptq1_gemm(level: KernelLevel, job: Job<'_, BlockPtq1_0x4, ActBlockX4>) {
    #[cfg(target_arch = "aarch64")]
    // SAFETY: the level's features are available.
    unsafe {
        if level == KernelLevel::I8mm {
            ptq1_0_neon::gemm_ptq1_0x4_4x16_q8_k_i8mm(job)
        } else {
            ptq1_0_neon::gemm_ptq1_0x4_4x4_q8_k_dotprod(job)
        }
    }
    #[cfg(not(target_arch = "aarch64"))]
    unreachable!("the X4 format is only used by the ARM levels");
}
