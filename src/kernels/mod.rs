//! Kernels and the one place that chooses them.
//!
//! A kernel computes, for weight rows `rows` of a repacked matrix and every activation column,
//! the reference dot of [`crate::reference::vec_dot_pq2_0_q8_k`] (or its PTQ1_0 twin), bit for
//! bit. Levels, from portable to fastest:
//!
//! | level | gemv (1 column) | gemm (several columns) |
//! |---|---|---|
//! | [`KernelLevel::Reference`] | `_generic` scalar twins ([`scalar`]) | the same, per column |
//! | [`KernelLevel::Dotprod`] | `sdot`, 4 rows x 16-byte words | `sdot`, 4 rows x 4 columns |
//! | [`KernelLevel::I8mm`] | `sdot` (as dotprod) | `smmla`, 4 rows x 16 (then 8, 4) columns |
//!
//! [`KernelLevel::best`] is `None` on a CPU without dotprod: callers then decline and stock code
//! runs. Nothing in here knows about ggml; the C ABI in [`crate::ffi`] is a thin layer on
//! [`gemm_raw`].

use crate::format::{q8k_blocks_per_row, BlockPtq1_0x4, BlockQ8K, BlockT2p, QK};
use crate::Error;
use core::ops::Range;

pub mod act_pack;
pub mod scalar;

#[cfg(target_arch = "aarch64")]
mod asm;
#[cfg(target_arch = "aarch64")]
pub mod neon_dotprod;
#[cfg(target_arch = "aarch64")]
pub mod neon_i8mm;
#[cfg(target_arch = "aarch64")]
pub mod ptq1_0_neon;

/// CPU features the kernels care about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct CpuFeatures {
    /// Advanced SIMD (always on aarch64).
    pub neon: bool,
    /// `sdot`/`udot` (FEAT_DotProd, Armv8.2+).
    pub dotprod: bool,
    /// `smmla` and friends (FEAT_I8MM, Armv8.6+).
    pub i8mm: bool,
}

impl CpuFeatures {
    /// Features of the running CPU (run-time detection; all false off aarch64).
    pub fn detect() -> Self {
        #[cfg(target_arch = "aarch64")]
        {
            CpuFeatures {
                neon: std::arch::is_aarch64_feature_detected!("neon"),
                dotprod: std::arch::is_aarch64_feature_detected!("dotprod"),
                i8mm: std::arch::is_aarch64_feature_detected!("i8mm"),
            }
        }
        #[cfg(not(target_arch = "aarch64"))]
        {
            CpuFeatures::default()
        }
    }

    /// Bit mask as in the C header: 1 = NEON, 2 = dotprod, 4 = i8mm.
    pub fn bits(self) -> u32 {
        u32::from(self.neon) | u32::from(self.dotprod) << 1 | u32::from(self.i8mm) << 2
    }
}

/// Which family of kernels runs. The numeric values are the C header's `GGML_T2P_KERNEL_*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(i32)]
pub enum KernelLevel {
    /// The portable scalar kernels (`_generic`): always available, slow, the bit-exact twin.
    Reference = 1,
    /// NEON with `sdot`: gemv and a dotprod-only gemm (Cortex-A76, Neoverse-N1, Pi 5).
    Dotprod = 2,
    /// NEON with `sdot` and `smmla` (Armv8.6 i8mm: Neoverse-V2, Apple M2+, Oryon).
    I8mm = 3,
}

impl KernelLevel {
    /// All levels, portable first.
    pub const ALL: [KernelLevel; 3] = [KernelLevel::Reference, KernelLevel::Dotprod, KernelLevel::I8mm];

    /// Parses the C value; `None` for anything else.
    pub fn from_i32(v: i32) -> Option<Self> {
        Self::ALL.into_iter().find(|l| *l as i32 == v)
    }

    /// Short name, as printed in logs (`ref`, `dotprod`, `i8mm`).
    pub fn name(self) -> &'static str {
        match self {
            KernelLevel::Reference => "ref",
            KernelLevel::Dotprod => "dotprod",
            KernelLevel::I8mm => "i8mm",
        }
    }

    /// Whether this level's kernels can run on the current CPU and build.
    pub fn is_available(self) -> bool {
        let f = CpuFeatures::detect();
        match self {
            KernelLevel::Reference => true,
            KernelLevel::Dotprod => cfg!(target_arch = "aarch64") && f.neon && f.dotprod,
            KernelLevel::I8mm => cfg!(target_arch = "aarch64") && f.neon && f.dotprod && f.i8mm,
        }
    }

    /// The fastest level the CPU runs, or `None` when it has no dotprod. `None` means "decline":
    /// the scalar kernels are exact but slower than stock ggml, so a caller should leave such
    /// weights to stock code.
    pub fn best() -> Option<Self> {
        [KernelLevel::I8mm, KernelLevel::Dotprod].into_iter().find(|l| l.is_available())
    }
}

/// A repacked weight matrix of `n_rows x k` weights (`n_rows % 4 == 0`, `k % 128 == 0`), stored
/// row-group major: all `k/128` blocks of rows 0..4, then rows 4..8, and so on.
#[derive(Clone, Copy, Debug)]
pub enum PackedWeights<'a> {
    /// T2P blocks (from PQ2_0 or PTQ1_0).
    T2p {
        /// `n_rows/4 * k/128` blocks.
        blocks: &'a [BlockT2p],
        /// Output rows.
        n_rows: usize,
        /// Weights per row.
        k: usize,
    },
    /// PTQ1_0x4 blocks (native 1.75 bits per weight).
    Ptq1_0x4 {
        /// `n_rows/4 * k/128` blocks.
        blocks: &'a [BlockPtq1_0x4],
        /// Output rows.
        n_rows: usize,
        /// Weights per row.
        k: usize,
    },
}

fn check_matrix(n_rows: usize, k: usize, n_blocks: usize) -> Result<(), Error> {
    if n_rows == 0 || k == 0 || n_rows % 4 != 0 || k % QK != 0 {
        return Err(Error::Shape);
    }
    let need = (n_rows / 4).checked_mul(k / QK).ok_or(Error::Shape)?;
    if n_blocks < need {
        return Err(Error::BufferSize);
    }
    Ok(())
}

impl<'a> PackedWeights<'a> {
    /// A T2P matrix; extra trailing blocks are ignored.
    ///
    /// # Errors
    /// [`Error::Shape`] for `n_rows % 4 != 0`, `k % 128 != 0` or zero sizes; [`Error::BufferSize`]
    /// if `blocks` is shorter than `n_rows/4 * k/128`.
    pub fn t2p(blocks: &'a [BlockT2p], n_rows: usize, k: usize) -> Result<Self, Error> {
        check_matrix(n_rows, k, blocks.len())?;
        Ok(PackedWeights::T2p { blocks, n_rows, k })
    }

    /// A PTQ1_0x4 matrix; errors as [`PackedWeights::t2p`].
    ///
    /// # Errors
    /// As [`PackedWeights::t2p`].
    pub fn ptq1_0x4(blocks: &'a [BlockPtq1_0x4], n_rows: usize, k: usize) -> Result<Self, Error> {
        check_matrix(n_rows, k, blocks.len())?;
        Ok(PackedWeights::Ptq1_0x4 { blocks, n_rows, k })
    }

    /// Output rows.
    pub fn n_rows(&self) -> usize {
        match *self {
            PackedWeights::T2p { n_rows, .. } | PackedWeights::Ptq1_0x4 { n_rows, .. } => n_rows,
        }
    }

    /// Weights per row.
    pub fn k(&self) -> usize {
        match *self {
            PackedWeights::T2p { k, .. } | PackedWeights::Ptq1_0x4 { k, .. } => k,
        }
    }
}

/// `n_cols` activation rows (one per token), each `ceil(k/256)` consecutive Q8_K blocks.
#[derive(Clone, Copy, Debug)]
pub struct Activations<'a> {
    /// At least `n_cols * ceil(k/256)` blocks.
    pub blocks: &'a [BlockQ8K],
    /// Columns (tokens).
    pub n_cols: usize,
    /// Values per row before padding (a multiple of 128).
    pub k: usize,
}

impl<'a> Activations<'a> {
    /// Checks the shape. Zero columns (an empty batch, as ggml produces for a layer whose
    /// outputs are all skipped) is allowed and computes nothing.
    ///
    /// # Errors
    /// [`Error::Shape`] for `k == 0` or `k % 128 != 0`; [`Error::BufferSize`] if `blocks` is too
    /// short.
    pub fn new(blocks: &'a [BlockQ8K], n_cols: usize, k: usize) -> Result<Self, Error> {
        if k == 0 || k % QK != 0 {
            return Err(Error::Shape);
        }
        let need = n_cols.checked_mul(q8k_blocks_per_row(k)).ok_or(Error::Shape)?;
        if blocks.len() < need {
            return Err(Error::BufferSize);
        }
        Ok(Activations { blocks, n_cols, k })
    }

    /// Column `j`'s blocks.
    pub fn col(&self, j: usize) -> &'a [BlockQ8K] {
        let n = q8k_blocks_per_row(self.k);
        &self.blocks[j * n..(j + 1) * n]
    }
}

/// Where outputs go: element (row `r`, column `j`) at `ptr + j * col_stride + r`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OutPtr {
    pub ptr: *mut f32,
    pub col_stride: usize,
}

// SAFETY: an OutPtr is only written through at rows a job owns; parallel jobs own disjoint row
// ranges (see gemm_par), so sharing it across threads cannot race.
unsafe impl Send for OutPtr {}
unsafe impl Sync for OutPtr {}

impl OutPtr {
    /// # Safety
    /// `ptr + j * col_stride + r` must be valid for writes and owned by the caller's job.
    #[inline(always)]
    pub unsafe fn write(self, r: usize, j: usize, v: f32) {
        // SAFETY: per the function contract.
        unsafe { *self.ptr.add(j * self.col_stride + r) = v };
    }
}

/// One unit of work handed to a kernel: row groups `groups` (4 rows each) of a matrix with `nb`
/// blocks per row group, against `n_cols` activation columns.
pub(crate) struct Job<'a, B> {
    pub w: &'a [B],
    pub nb: usize,
    pub act: &'a [BlockQ8K],
    pub n_cols: usize,
    pub out: OutPtr,
    pub groups: Range<usize>,
}

impl<B> Clone for Job<'_, B> {
    fn clone(&self) -> Self {
        Job { groups: self.groups.clone(), ..*self }
    }
}

impl<'a, B> Job<'a, B> {
    /// Q8_K blocks per activation column.
    #[inline]
    pub fn act_stride(&self) -> usize {
        self.nb.div_ceil(2)
    }
    /// The weight blocks of row group `g`.
    #[inline]
    pub fn group(&self, g: usize) -> &'a [B] {
        &self.w[g * self.nb..(g + 1) * self.nb]
    }
    /// Column `j`'s Q8_K blocks.
    #[inline]
    pub fn col(&self, j: usize) -> &'a [BlockQ8K] {
        let s = self.act_stride();
        &self.act[j * s..(j + 1) * s]
    }
}

/// Checks everything a kernel relies on; after this, kernels index without further checks
/// failing.
fn validate(
    w: &PackedWeights<'_>,
    a: &Activations<'_>,
    dst_len: usize,
    col_stride: usize,
    rows: &Range<usize>,
) -> Result<(), Error> {
    let n_rows = w.n_rows();
    if a.k != w.k() {
        return Err(Error::Shape);
    }
    if rows.start > rows.end || rows.end > n_rows || rows.start % 4 != 0 || rows.end % 4 != 0 {
        return Err(Error::Range);
    }
    if a.n_cols > 1 && col_stride < n_rows {
        return Err(Error::Shape);
    }
    if rows.is_empty() || a.n_cols == 0 {
        return Ok(());
    }
    let need = (a.n_cols - 1).checked_mul(col_stride).and_then(|v| v.checked_add(rows.end)).ok_or(Error::Shape)?;
    // no real buffer holds more than isize::MAX bytes: a larger claim would make offsets wrap
    if dst_len < need || need > isize::MAX as usize / core::mem::size_of::<f32>() {
        return Err(Error::BufferSize);
    }
    Ok(())
}

/// Computes rows `rows` of `dst = W x A` for every activation column: element (row `r`, column
/// `j`) goes to `dst[j * col_stride + r]`; nothing else in `dst` is touched. One column runs the
/// gemv kernel of `level`, more run its gemm kernel, zero columns do nothing.
///
/// # Errors
/// [`Error::Unsupported`] if `level` is not available on this CPU; [`Error::Shape`],
/// [`Error::Range`], [`Error::BufferSize`] for shapes that disagree (see [`gemm_raw`]).
pub fn gemm(
    level: KernelLevel,
    w: &PackedWeights<'_>,
    a: &Activations<'_>,
    dst: &mut [f32],
    col_stride: usize,
    rows: Range<usize>,
) -> Result<(), Error> {
    // SAFETY: dst is a live, uniquely borrowed slice of dst.len() floats.
    unsafe { gemm_raw(level, w, a, dst.as_mut_ptr(), dst.len(), col_stride, rows) }
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

/// The raw-pointer form of [`gemm`], for callers (ggml threads, [`gemm_par`]) that write
/// disjoint row ranges of one output buffer at the same time.
///
/// Requirements checked here: `a.k == w.k()`; `rows` within `0..n_rows` on 4-row boundaries;
/// `col_stride >= n_rows` when `a.n_cols > 1`; `(n_cols - 1) * col_stride + rows.end <= dst_len`,
/// and that extent no larger than `isize::MAX` bytes; `dst` non-null and 4-byte aligned when
/// anything is written.
///
/// # Errors
/// As [`gemm`].
///
/// # Safety
/// `dst` must be valid for writes of `dst_len` floats, and no other thread may access the
/// elements this call writes (rows `rows` of each column) while it runs.
pub unsafe fn gemm_raw(
    level: KernelLevel,
    w: &PackedWeights<'_>,
    a: &Activations<'_>,
    dst: *mut f32,
    dst_len: usize,
    col_stride: usize,
    rows: Range<usize>,
) -> Result<(), Error> {
    if !level.is_available() {
        return Err(Error::Unsupported);
    }
    validate(w, a, dst_len, col_stride, &rows)?;
    if rows.is_empty() || a.n_cols == 0 {
        return Ok(()); // nothing is written: dst may be anything, NULL included
    }
    if dst.is_null() {
        return Err(Error::Null);
    }
    if dst as usize % core::mem::align_of::<f32>() != 0 {
        return Err(Error::Misaligned);
    }
    let out = OutPtr { ptr: dst, col_stride };
    let nb = w.k() / QK;
    let groups = rows.start / 4..rows.end / 4;
    let n_cols = a.n_cols;
    match *w {
        PackedWeights::T2p { blocks, .. } => {
            let job = Job { w: blocks, nb, act: a.blocks, n_cols, out, groups };
            // SAFETY: validated above; the caller owns the rows written.
            unsafe { run_t2p(level, job) }
        }
        PackedWeights::Ptq1_0x4 { blocks, .. } => {
            let job = Job { w: blocks, nb, act: a.blocks, n_cols, out, groups };
            // SAFETY: as above.
            unsafe { run_ptq1_0x4(level, job) }
        }
    }
    Ok(())
}

/// # Safety
/// `job` validated by `gemm_raw`; `level` available.
unsafe fn run_t2p(level: KernelLevel, job: Job<'_, BlockT2p>) {
    match level {
        KernelLevel::Reference => scalar::gemm_t2p_4x128_q8_k_generic(job),
        #[cfg(target_arch = "aarch64")]
        KernelLevel::Dotprod | KernelLevel::I8mm if job.n_cols == 1 => {
            // SAFETY: dotprod is available (checked by the caller).
            unsafe { neon_dotprod::gemv_t2p_4x16_q8_k_dotprod(job) }
        }
        #[cfg(target_arch = "aarch64")]
        KernelLevel::Dotprod => unsafe { neon_dotprod::gemm_t2p_4x4_q8_k_dotprod(job) },
        #[cfg(target_arch = "aarch64")]
        KernelLevel::I8mm => unsafe { neon_i8mm::gemm_t2p_4x16_q8_k_i8mm(job) },
        #[cfg(not(target_arch = "aarch64"))]
        _ => unreachable!("only the reference level is available off aarch64"),
    }
}

/// # Safety
/// As [`run_t2p`].
unsafe fn run_ptq1_0x4(level: KernelLevel, job: Job<'_, BlockPtq1_0x4>) {
    match level {
        KernelLevel::Reference => scalar::gemm_ptq1_0x4_q8_k_generic(job),
        #[cfg(target_arch = "aarch64")]
        KernelLevel::Dotprod | KernelLevel::I8mm if job.n_cols == 1 => {
            // SAFETY: dotprod is available.
            unsafe { ptq1_0_neon::gemv_ptq1_0x4_q8_k_dotprod(job) }
        }
        #[cfg(target_arch = "aarch64")]
        KernelLevel::Dotprod => unsafe { ptq1_0_neon::gemm_ptq1_0x4_4x4_q8_k_dotprod(job) },
        #[cfg(target_arch = "aarch64")]
        KernelLevel::I8mm => unsafe { ptq1_0_neon::gemm_ptq1_0x4_4x16_q8_k_i8mm(job) },
        #[cfg(not(target_arch = "aarch64"))]
        _ => unreachable!("only the reference level is available off aarch64"),
    }
}

/// [`gemm`] over all rows, split into `n_splits` row ranges (on 4-row boundaries) run on the
/// current rayon pool. The result does not depend on `n_splits`.
///
/// # Errors
/// As [`gemm`].
pub fn gemm_par(
    level: KernelLevel,
    w: &PackedWeights<'_>,
    a: &Activations<'_>,
    dst: &mut [f32],
    col_stride: usize,
    n_splits: usize,
) -> Result<(), Error> {
    let n_rows = w.n_rows();
    validate(w, a, dst.len(), col_stride, &(0..n_rows))?;
    if a.n_cols == 0 {
        return Ok(());
    }
    let groups = n_rows / 4;
    let n_splits = n_splits.clamp(1, groups);
    let out = OutPtr { ptr: dst.as_mut_ptr(), col_stride };
    let len = dst.len();
    use rayon::prelude::*;
    (0..n_splits).into_par_iter().try_for_each(|s| {
        let (g0, g1) = (groups * s / n_splits, groups * (s + 1) / n_splits);
        let o = out;
        // SAFETY: the splits own disjoint row ranges of one live buffer of `len` floats.
        unsafe { gemm_raw(level, w, a, o.ptr, len, col_stride, 4 * g0..4 * g1) }
    })
}
