//! Kernels and the one place that chooses them.
//!
//! A kernel computes, for weight rows `rows` of a repacked matrix and every activation column,
//! the reference dot of [`crate::reference::vec_dot_pq2_0_q8_k`] (or its PTQ1_0 twin), bit for
//! bit, from activations packed once per matrix multiplication ([`act_pack`]). Levels, from
//! portable to fastest, and the layout each runs on:
//!
//! | level | layouts | gemv (1 column) | gemm (several columns) |
//! |---|---|---|---|
//! | [`KernelLevel::Reference`] | all | `_generic` scalar twins ([`scalar`]) | the same |
//! | [`KernelLevel::Dotprod`] | T2P, PTQ1_0x4 | `sdot`, 4 rows | `sdot`, 4 rows x 4 columns |
//! | [`KernelLevel::I8mm`] | T2P, PTQ1_0x4 | `sdot` (as dotprod) | `smmla`, 4 rows x 16 (then 8, 4) columns |
//! | [`KernelLevel::Avx2`] | X16 | `vpmaddubsw`, 16 rows | `vpmaddubsw`, 16 rows x 4 columns |
//! | [`KernelLevel::AvxVnni`] | X16 | `vpdpbusd` ymm, 16 rows | `vpdpbusd` ymm, 16 rows x 2 columns |
//! | [`KernelLevel::Avx512Vnni`] | X16 | `vpdpbusd` zmm, 16 rows | `vpdpbusd` zmm, 16 rows x 8 columns |
//!
//! [`KernelLevel::best`] is `None` on a CPU without dotprod (ARM) or without AVX2+FMA+F16C (x86):
//! callers then decline and stock code runs. Nothing in here knows about ggml; the C ABI in
//! [`crate::ffi`] is a thin layer on [`gemm_raw`] and [`act_pack::pack_raw`].

use crate::format::{BlockPtq1_0x4, BlockQ8K, BlockT2p, BlockX16, QK};
use crate::repack::{repacked_blocks, Layout, SourceType};
use crate::Error;
use act_pack::{ActBlockX4, ActDup, ActFormat, ActPack, PackedActs, Q8Half};
use core::ops::Range;

pub mod act_pack;
pub mod scalar;

#[cfg(target_arch = "aarch64")]
mod asm;
#[cfg(target_arch = "aarch64")]
mod decode;
#[cfg(target_arch = "aarch64")]
pub mod neon_dotprod;
#[cfg(target_arch = "aarch64")]
pub mod neon_i8mm;
#[cfg(target_arch = "aarch64")]
pub mod ptq1_0_neon;

#[cfg(target_arch = "x86_64")]
mod x86;
#[cfg(target_arch = "x86_64")]
pub mod x86_avx2;
#[cfg(target_arch = "x86_64")]
pub mod x86_avx512vnni;
#[cfg(target_arch = "x86_64")]
pub mod x86_avxvnni;

/// CPU features the kernels care about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct CpuFeatures {
    /// Advanced SIMD (always on aarch64).
    pub neon: bool,
    /// `sdot`/`udot` (FEAT_DotProd, Armv8.2+).
    pub dotprod: bool,
    /// `smmla` and friends (FEAT_I8MM, Armv8.6+).
    pub i8mm: bool,
    /// AVX2 with FMA and F16C (Haswell, Zen 1 and later): the x86 baseline of the X16 kernels.
    pub avx2: bool,
    /// AVX-VNNI (VEX `vpdpbusd` on ymm; Alder Lake, Sapphire Rapids, Zen 5) on top of `avx2`.
    pub avxvnni: bool,
    /// AVX-512 F, BW, VL and VNNI (EVEX `vpdpbusd` on zmm; Ice Lake, Sapphire Rapids, Zen 4) on
    /// top of `avx2`.
    pub avx512vnni: bool,
    /// The CPU vendor is AMD (x86 only; used to choose between ymm and zmm).
    pub amd: bool,
}

/// Features a caller promised through [`assume_kernel`] (bits as in [`CpuFeatures::bits`]).
static ASSUMED: core::sync::atomic::AtomicU32 = core::sync::atomic::AtomicU32::new(0);

/// Windows on ARM reports CPU features through `IsProcessorFeaturePresent` only. Rust's
/// `is_aarch64_feature_detected!("i8mm")` asks nothing there (std_detect up to at least Rust 1.96
/// queries PF 18, 19, 30, 31, 34, 43-56, not PF 66), so i8mm is asked here; Windows 11 builds that
/// predate the flag answer FALSE for it whatever the CPU has (see [`CpuFeatures::unknown`]).
#[cfg(all(target_arch = "aarch64", target_os = "windows"))]
mod windows_arm {
    /// `PF_ARM_V82_I8MM_INSTRUCTIONS_AVAILABLE` (winnt.h, Windows SDK 10.0.26100 and later).
    const PF_ARM_V82_I8MM_INSTRUCTIONS_AVAILABLE: u32 = 66;

    #[link(name = "kernel32")]
    extern "system" {
        fn IsProcessorFeaturePresent(processor_feature: u32) -> i32;
    }

    /// Whether Windows says the CPU has FEAT_I8MM.
    pub fn i8mm() -> bool {
        // SAFETY: takes a DWORD by value, returns a BOOL; no pointers, any thread. Unknown feature
        // numbers return FALSE.
        unsafe { IsProcessorFeaturePresent(PF_ARM_V82_I8MM_INSTRUCTIONS_AVAILABLE) != 0 }
    }
}

impl CpuFeatures {
    /// Features the kernels may use on the running CPU: what the OS reports ([`CpuFeatures::os`])
    /// plus what a caller promised with [`assume_kernel`].
    pub fn detect() -> Self {
        Self::os().union(Self::from_bits(ASSUMED.load(core::sync::atomic::Ordering::Relaxed)))
    }

    /// Features of the running CPU as the OS reports them (run-time detection): Linux and
    /// Android HWCAPs, macOS `hw.optional.arm.FEAT_*`, Windows `IsProcessorFeaturePresent`
    /// (through std, plus PF 66 for i8mm here), x86 `cpuid`.
    pub fn os() -> Self {
        #[allow(unused_mut)]
        let mut f = CpuFeatures::default();
        #[cfg(target_arch = "aarch64")]
        {
            f.neon = std::arch::is_aarch64_feature_detected!("neon");
            f.dotprod = std::arch::is_aarch64_feature_detected!("dotprod");
            f.i8mm = std::arch::is_aarch64_feature_detected!("i8mm");
            #[cfg(target_os = "windows")]
            {
                f.i8mm = f.i8mm || windows_arm::i8mm();
            }
        }
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            f.avx2 = has!("avx2") && has!("fma") && has!("f16c");
            f.avxvnni = f.avx2 && has!("avxvnni");
            f.avx512vnni = f.avx2 && has!("avx512f") && has!("avx512bw") && has!("avx512vl") && has!("avx512vnni");
            // SAFETY: cpuid leaf 0 exists on every x86-64 CPU (a safe function in newer Rust).
            #[allow(unused_unsafe)]
            let id = unsafe { core::arch::x86_64::__cpuid(0) };
            f.amd = (id.ebx, id.edx, id.ecx) == (0x6874_7541, 0x6974_6E65, 0x444D_4163);
            // "AuthenticAMD"
        }
        f
    }

    /// Features the OS of the running machine cannot report either way: on Windows on ARM, i8mm
    /// when `IsProcessorFeaturePresent(PF_ARM_V82_I8MM_INSTRUCTIONS_AVAILABLE)` says no (Windows
    /// builds older than the flag say no on every CPU); nothing elsewhere.
    pub fn unknown() -> Self {
        #[allow(unused_mut)]
        let mut f = CpuFeatures::default();
        #[cfg(all(target_arch = "aarch64", target_os = "windows"))]
        {
            f.i8mm = !Self::os().i8mm;
        }
        f
    }

    /// The features with bits `b` set (see [`CpuFeatures::bits`]; `amd` is not a bit).
    pub fn from_bits(b: u32) -> Self {
        CpuFeatures {
            neon: b & 1 != 0,
            dotprod: b & 2 != 0,
            i8mm: b & 4 != 0,
            avx2: b & 8 != 0,
            avxvnni: b & 16 != 0,
            avx512vnni: b & 32 != 0,
            amd: false,
        }
    }

    /// Features in `self` or in `o` (`amd` from `self`).
    pub fn union(self, o: Self) -> Self {
        CpuFeatures { amd: self.amd, ..Self::from_bits(self.bits() | o.bits()) }
    }

    /// Bit mask as in the C header: 1 NEON, 2 dotprod, 4 i8mm, 8 AVX2 (+FMA+F16C), 16 AVX-VNNI,
    /// 32 AVX-512 VNNI (+F, BW, VL).
    pub fn bits(self) -> u32 {
        u32::from(self.neon)
            | u32::from(self.dotprod) << 1
            | u32::from(self.i8mm) << 2
            | u32::from(self.avx2) << 3
            | u32::from(self.avxvnni) << 4
            | u32::from(self.avx512vnni) << 5
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
    /// x86-64 AVX2 + FMA + F16C: `vpmaddubsw` on X16 (int16 sums, exact by bound).
    Avx2 = 4,
    /// x86-64 AVX-VNNI: `vpdpbusd` on ymm, X16.
    AvxVnni = 5,
    /// x86-64 AVX-512 VNNI: `vpdpbusd` on zmm, X16.
    Avx512Vnni = 6,
}

impl KernelLevel {
    /// All levels, portable first.
    pub const ALL: [KernelLevel; 6] = [
        KernelLevel::Reference,
        KernelLevel::Dotprod,
        KernelLevel::I8mm,
        KernelLevel::Avx2,
        KernelLevel::AvxVnni,
        KernelLevel::Avx512Vnni,
    ];

    /// Parses the C value; `None` for anything else.
    pub fn from_i32(v: i32) -> Option<Self> {
        Self::ALL.into_iter().find(|l| *l as i32 == v)
    }

    /// Parses a name as printed by [`KernelLevel::name`]; `None` for anything else.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|l| l.name() == name)
    }

    /// Short name, as printed in logs and accepted by `GGML_T2P_KERNEL` (`ref`, `dotprod`,
    /// `i8mm`, `avx2`, `avxvnni`, `avx512vnni`).
    pub fn name(self) -> &'static str {
        self.name_c().trim_end_matches('\0')
    }

    /// [`KernelLevel::name`] NUL-terminated, for the C ABI.
    pub(crate) fn name_c(self) -> &'static str {
        match self {
            KernelLevel::Reference => "ref\0",
            KernelLevel::Dotprod => "dotprod\0",
            KernelLevel::I8mm => "i8mm\0",
            KernelLevel::Avx2 => "avx2\0",
            KernelLevel::AvxVnni => "avxvnni\0",
            KernelLevel::Avx512Vnni => "avx512vnni\0",
        }
    }

    /// Whether this level has kernels for `layout`.
    pub fn runs(self, layout: Layout) -> bool {
        match self {
            KernelLevel::Reference => true,
            KernelLevel::Dotprod | KernelLevel::I8mm => matches!(layout, Layout::T2p | Layout::Ptq1_0x4),
            KernelLevel::Avx2 | KernelLevel::AvxVnni | KernelLevel::Avx512Vnni => layout == Layout::X16,
        }
    }

    /// Whether this level's kernels can run on the current CPU and build.
    pub fn is_available(self) -> bool {
        self.is_available_on(CpuFeatures::detect())
    }

    /// Whether this level's kernels can run on a CPU with features `f` in this build.
    pub fn is_available_on(self, f: CpuFeatures) -> bool {
        let arm = cfg!(target_arch = "aarch64");
        let x86 = cfg!(target_arch = "x86_64");
        match self {
            KernelLevel::Reference => true,
            KernelLevel::Dotprod => arm && f.neon && f.dotprod,
            KernelLevel::I8mm => arm && f.neon && f.dotprod && f.i8mm,
            KernelLevel::Avx2 => x86 && f.avx2,
            KernelLevel::AvxVnni => x86 && f.avxvnni,
            KernelLevel::Avx512Vnni => x86 && f.avx512vnni,
        }
    }

    /// The features this level needs (the implied ones included: i8mm needs dotprod and NEON).
    pub fn required(self) -> CpuFeatures {
        let f = CpuFeatures::default();
        match self {
            KernelLevel::Reference => f,
            KernelLevel::Dotprod => CpuFeatures { neon: true, dotprod: true, ..f },
            KernelLevel::I8mm => CpuFeatures { neon: true, dotprod: true, i8mm: true, ..f },
            KernelLevel::Avx2 => CpuFeatures { avx2: true, ..f },
            KernelLevel::AvxVnni => CpuFeatures { avx2: true, avxvnni: true, ..f },
            KernelLevel::Avx512Vnni => CpuFeatures { avx2: true, avx512vnni: true, ..f },
        }
    }

    /// The fastest level the CPU runs, or `None` when it has no dotprod (ARM) or no AVX2 + FMA +
    /// F16C (x86). `None` means "decline": the scalar kernels are exact but slower than stock
    /// ggml, so a caller should leave such weights to stock code.
    ///
    /// On x86 with both VNNI forms, ymm (AVX-VNNI) is preferred on Intel and zmm (AVX-512 VNNI) on
    /// AMD: on an Emerald Rapids Xeon the ymm form matched or beat zmm in the issue-8 probe
    /// (vpdpbusd ymm issues on two ports, zmm on one, and ymm keeps clocks up), while Zen 4
    /// lacks AVX-VNNI and Zen 5 runs zmm at full width.
    pub fn best() -> Option<Self> {
        Self::best_on(CpuFeatures::detect())
    }

    /// [`KernelLevel::best`] for a CPU with features `f`.
    pub fn best_on(f: CpuFeatures) -> Option<Self> {
        let order: &[KernelLevel] = if f.amd {
            &[KernelLevel::Avx512Vnni, KernelLevel::AvxVnni, KernelLevel::Avx2]
        } else {
            &[KernelLevel::AvxVnni, KernelLevel::Avx512Vnni, KernelLevel::Avx2]
        };
        [KernelLevel::I8mm, KernelLevel::Dotprod].iter().chain(order).copied().find(|l| l.is_available_on(f))
    }

    /// The layout this level runs weights of `src` on: X16 for the x86 levels, T2P on ARM (or
    /// PTQ1_0x4 for PTQ1_0 with `prefer_compact`, keeping 1.75 bits per weight), and for the
    /// reference level the layout the best level of this CPU would use (X16 on x86, else T2P).
    pub fn layout_for(self, src: SourceType, prefer_compact: bool) -> Layout {
        let arm_layout = if prefer_compact && src == SourceType::Ptq1_0 { Layout::Ptq1_0x4 } else { Layout::T2p };
        match self {
            KernelLevel::Avx2 | KernelLevel::AvxVnni | KernelLevel::Avx512Vnni => Layout::X16,
            KernelLevel::Dotprod | KernelLevel::I8mm => arm_layout,
            KernelLevel::Reference if cfg!(target_arch = "x86_64") => Layout::X16,
            KernelLevel::Reference => arm_layout,
        }
    }
}

/// The features a caller's promise that the CPU runs `level` adds, given what the OS reports
/// (`os`) and what it cannot tell (`unknown`): none when `level` is available already; the missing
/// features when all of them are unknown to the OS; `Unsupported` when the OS reported one of them
/// absent or the level is for another architecture.
pub fn assume_on(level: KernelLevel, os: CpuFeatures, unknown: CpuFeatures) -> Result<CpuFeatures, Error> {
    if level.is_available_on(os) {
        return Ok(CpuFeatures::default());
    }
    let need = level.required().bits();
    let missing = need & !os.bits();
    let promised = CpuFeatures::from_bits(missing);
    if missing & !unknown.bits() != 0 || !level.is_available_on(os.union(promised)) {
        return Err(Error::Unsupported);
    }
    Ok(promised)
}

/// The caller promises that the CPU runs `level` where the OS cannot tell (Windows on ARM without
/// the i8mm flag: an explicit `GGML_T2P_KERNEL=i8mm`). From then on, for the whole process,
/// [`CpuFeatures::detect`] includes the promised features, so `level` is available (and
/// [`KernelLevel::best`] may choose it). A wrong promise is an illegal instruction (`SIGILL`,
/// `STATUS_ILLEGAL_INSTRUCTION`) at the first kernel call. Features the OS reported absent are
/// never assumed (`Unsupported`); a level that is available already changes nothing.
pub fn assume_kernel(level: KernelLevel) -> Result<(), Error> {
    let add = assume_on(level, CpuFeatures::os(), CpuFeatures::unknown())?;
    ASSUMED.fetch_or(add.bits(), core::sync::atomic::Ordering::Relaxed);
    Ok(())
}

/// A repacked weight matrix of `n_rows x k` weights (`n_rows % 4 == 0`, `k % 128 == 0`), stored
/// tile major: all `k/128` blocks of rows `0..tile`, then the next tile (tile = 4 rows for T2P and
/// PTQ1_0x4, 16 for X16, whose last tile may be padded).
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
    /// X16 blocks (from PQ2_0 or PTQ1_0; x86-64).
    X16 {
        /// `ceil(n_rows/16) * k/128` blocks.
        blocks: &'a [BlockX16],
        /// Output rows.
        n_rows: usize,
        /// Weights per row.
        k: usize,
    },
}

fn check_matrix(layout: Layout, n_rows: usize, k: usize, n_blocks: usize) -> Result<(), Error> {
    if n_blocks < repacked_blocks(layout, n_rows, k)? {
        return Err(Error::BufferSize);
    }
    Ok(())
}

impl<'a> PackedWeights<'a> {
    /// A T2P matrix; extra trailing blocks are ignored.
    ///
    /// # Errors
    /// [`Error::Shape`] for a shape outside [`crate::format::check_shape`]; [`Error::BufferSize`] if `blocks` is
    /// shorter than [`repacked_blocks`].
    pub fn t2p(blocks: &'a [BlockT2p], n_rows: usize, k: usize) -> Result<Self, Error> {
        check_matrix(Layout::T2p, n_rows, k, blocks.len())?;
        Ok(PackedWeights::T2p { blocks, n_rows, k })
    }

    /// A PTQ1_0x4 matrix; errors as [`PackedWeights::t2p`].
    ///
    /// # Errors
    /// As [`PackedWeights::t2p`].
    pub fn ptq1_0x4(blocks: &'a [BlockPtq1_0x4], n_rows: usize, k: usize) -> Result<Self, Error> {
        check_matrix(Layout::Ptq1_0x4, n_rows, k, blocks.len())?;
        Ok(PackedWeights::Ptq1_0x4 { blocks, n_rows, k })
    }

    /// An X16 matrix; errors as [`PackedWeights::t2p`].
    ///
    /// # Errors
    /// As [`PackedWeights::t2p`].
    pub fn x16(blocks: &'a [BlockX16], n_rows: usize, k: usize) -> Result<Self, Error> {
        check_matrix(Layout::X16, n_rows, k, blocks.len())?;
        Ok(PackedWeights::X16 { blocks, n_rows, k })
    }

    /// The layout.
    pub fn layout(&self) -> Layout {
        match self {
            PackedWeights::T2p { .. } => Layout::T2p,
            PackedWeights::Ptq1_0x4 { .. } => Layout::Ptq1_0x4,
            PackedWeights::X16 { .. } => Layout::X16,
        }
    }

    /// Output rows.
    pub fn n_rows(&self) -> usize {
        match *self {
            PackedWeights::T2p { n_rows, .. }
            | PackedWeights::Ptq1_0x4 { n_rows, .. }
            | PackedWeights::X16 { n_rows, .. } => n_rows,
        }
    }

    /// Weights per row.
    pub fn k(&self) -> usize {
        match *self {
            PackedWeights::T2p { k, .. } | PackedWeights::Ptq1_0x4 { k, .. } | PackedWeights::X16 { k, .. } => k,
        }
    }
}

/// `n_cols` Q8_K activation rows (one per token), each `ceil(k/256)` consecutive blocks: the input
/// of the activation pack ([`ActPack::new`]) and of the convenience [`gemm`].
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
    /// [`Error::Shape`] for `k` outside [`crate::format::check_k`]; [`Error::BufferSize`] if
    /// `blocks` is too short.
    pub fn new(blocks: &'a [BlockQ8K], n_cols: usize, k: usize) -> Result<Self, Error> {
        crate::format::check_k(k)?;
        let need = n_cols.checked_mul(crate::format::q8k_blocks_per_row(k)).ok_or(Error::Shape)?;
        if blocks.len() < need {
            return Err(Error::BufferSize);
        }
        Ok(Activations { blocks, n_cols, k })
    }

    /// Column `j`'s blocks.
    pub fn col(&self, j: usize) -> &'a [BlockQ8K] {
        let n = crate::format::q8k_blocks_per_row(self.k);
        &self.blocks[j * n..(j + 1) * n]
    }

    /// Packs these activations for `level`'s kernels on `layout`.
    ///
    /// # Errors
    /// As [`ActFormat::for_kernel`] and [`ActPack::new`].
    pub fn pack(&self, layout: Layout, level: KernelLevel) -> Result<ActPack, Error> {
        ActPack::new(ActFormat::for_kernel(layout, level, self.n_cols)?, self.k, self.n_cols, self.blocks)
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

/// One unit of work handed to a kernel: row tiles `tiles` (`B`'s tile of rows each; rows at or
/// past `n_rows` are padding and never stored) of a matrix with `nb` blocks per tile, against
/// `n_cols` columns of packed activations `act` (elements of type `A`, laid out as its
/// [`ActFormat`] says).
pub(crate) struct Job<'a, B, A> {
    pub w: &'a [B],
    pub nb: usize,
    pub n_rows: usize,
    pub act: &'a [A],
    pub n_cols: usize,
    pub out: OutPtr,
    pub tiles: Range<usize>,
}

impl<'a, B, A> Job<'a, B, A> {
    /// The weight blocks of row tile `t`.
    #[inline]
    pub fn tile(&self, t: usize) -> &'a [B] {
        &self.w[t * self.nb..(t + 1) * self.nb]
    }
    /// Column `j`'s elements (formats with one element per column and block: Halves, Dup).
    #[inline]
    pub fn col(&self, j: usize) -> &'a [A] {
        &self.act[j * self.nb..(j + 1) * self.nb]
    }
}

/// Checks everything a kernel relies on; after this, kernels index without further checks
/// failing.
fn validate(
    w: &PackedWeights<'_>,
    a: &PackedActs<'_>,
    dst_len: usize,
    col_stride: usize,
    rows: &Range<usize>,
) -> Result<(), Error> {
    let n_rows = w.n_rows();
    if a.k != w.k() {
        return Err(Error::Shape);
    }
    let tile = w.layout().tile_rows();
    let end_ok = rows.end.is_multiple_of(tile) || rows.end == n_rows;
    if rows.start > rows.end || rows.end > n_rows {
        return Err(Error::Range);
    }
    // An empty range computes nothing, wherever it sits; a non-empty one covers whole row tiles.
    if !rows.is_empty() && (!rows.start.is_multiple_of(tile) || !end_ok) {
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

/// Computes rows `rows` of `dst = W x A` for every activation column, packing the activations
/// for `level` first (a convenience for tests and tools; a matrix multiplication in ggml packs
/// once with [`act_pack::pack_raw`] and calls [`gemm_raw`] per row chunk). Element (row `r`,
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

/// The raw-pointer form of [`gemm_packed`], for callers (ggml threads, [`gemm_par`]) that write
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
    // SAFETY (every arm): validated above; the level is available; the caller owns the rows.
    unsafe {
        match (*w, a.format) {
            (PackedWeights::T2p { blocks, .. }, ActFormat::Halves) => {
                scalar::gemm_t2p_4xn_q8_k_generic(job!(blocks, Q8Half))
            }
            (PackedWeights::Ptq1_0x4 { blocks, .. }, ActFormat::Halves) => {
                scalar::gemm_ptq1_0x4_4xn_q8_k_generic(job!(blocks, Q8Half))
            }
            (PackedWeights::X16 { blocks, .. }, ActFormat::Halves) => run_x16(level, job!(blocks, Q8Half)),
            (PackedWeights::T2p { blocks, .. }, ActFormat::Dup) => run_t2p_gemv(job!(blocks, ActDup)),
            (PackedWeights::T2p { blocks, .. }, ActFormat::X4) => run_t2p_gemm(level, job!(blocks, ActBlockX4)),
            (PackedWeights::Ptq1_0x4 { blocks, .. }, ActFormat::Dup) => run_ptq1_gemv(job!(blocks, ActDup)),
            (PackedWeights::Ptq1_0x4 { blocks, .. }, ActFormat::X4) => run_ptq1_gemm(level, job!(blocks, ActBlockX4)),
            (PackedWeights::X16 { .. }, _) => return Err(Error::InvalidArgument),
        }
    }
    Ok(())
}

/// # Safety
/// `job` validated by `gemm_raw`; `level` available and one of the x86 levels (or the reference).
unsafe fn run_x16(level: KernelLevel, job: Job<'_, BlockX16, Q8Half>) {
    match level {
        #[cfg(target_arch = "x86_64")]
        KernelLevel::Avx2 => unsafe { x86_avx2::run(job) },
        #[cfg(target_arch = "x86_64")]
        KernelLevel::AvxVnni => unsafe { x86_avxvnni::run(job) },
        #[cfg(target_arch = "x86_64")]
        KernelLevel::Avx512Vnni => unsafe { x86_avx512vnni::run(job) },
        _ => scalar::gemm_x16_16xn_q8_k_generic(job),
    }
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

/// [`gemm`] over all rows, split into `n_splits` row ranges (on row tile boundaries) run on the
/// current rayon pool, with the activations packed once. The result does not depend on
/// `n_splits`.
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
    let pack = a.pack(w.layout(), level)?;
    gemm_par_packed(level, w, &pack.view(), dst, col_stride, n_splits)
}

/// [`gemm_par`] on activations packed already.
///
/// # Errors
/// As [`gemm_packed`].
pub fn gemm_par_packed(
    level: KernelLevel,
    w: &PackedWeights<'_>,
    a: &PackedActs<'_>,
    dst: &mut [f32],
    col_stride: usize,
    n_splits: usize,
) -> Result<(), Error> {
    let n_rows = w.n_rows();
    validate(w, a, dst.len(), col_stride, &(0..n_rows))?;
    if a.n_cols == 0 {
        return Ok(());
    }
    let tile = w.layout().tile_rows();
    let tiles = n_rows.div_ceil(tile);
    let n_splits = n_splits.clamp(1, tiles);
    let out = OutPtr { ptr: dst.as_mut_ptr(), col_stride };
    let len = dst.len();
    use rayon::prelude::*;
    (0..n_splits).into_par_iter().try_for_each(|s| {
        let (t0, t1) = (tiles * s / n_splits, tiles * (s + 1) / n_splits);
        let o = out;
        // SAFETY: the splits own disjoint row ranges of one live buffer of `len` floats.
        unsafe { gemm_raw(level, w, a, o.ptr, len, col_stride, tile * t0..(tile * t1).min(n_rows)) }
    })
}

#[cfg(test)]
mod assume_tests {
    use super::*;

    fn arm(neon: bool, dotprod: bool, i8mm: bool) -> CpuFeatures {
        CpuFeatures { neon, dotprod, i8mm, ..CpuFeatures::default() }
    }

    #[test]
    fn bits_round_trip() {
        for b in 0..64 {
            assert_eq!(CpuFeatures::from_bits(b).bits(), b);
        }
        let amd = CpuFeatures { avx2: true, amd: true, ..CpuFeatures::default() };
        assert!(amd.union(CpuFeatures::from_bits(16)).amd);
        assert_eq!(amd.union(CpuFeatures::from_bits(16)).bits(), 8 | 16);
    }

    /// Windows on ARM before the i8mm flag: dotprod reported, i8mm unknown. An explicit i8mm is
    /// taken as the caller's promise; on an OS that reports i8mm absent it is refused.
    #[test]
    fn promise_only_what_the_os_cannot_tell() {
        let win_old = arm(true, true, false);
        let unknown_i8mm = arm(false, false, true);
        let arm_build = cfg!(target_arch = "aarch64");
        let r = assume_on(KernelLevel::I8mm, win_old, unknown_i8mm);
        if arm_build {
            assert_eq!(r, Ok(arm(false, false, true)));
            assert!(KernelLevel::I8mm.is_available_on(win_old.union(r.unwrap())));
        } else {
            assert_eq!(r, Err(Error::Unsupported), "an ARM level is never available on x86");
        }
        // Linux, macOS, Windows with the flag: the OS knows, nothing is assumed.
        assert_eq!(assume_on(KernelLevel::I8mm, win_old, CpuFeatures::default()), Err(Error::Unsupported));
        // dotprod absent as reported: i8mm needs it, so no promise helps.
        assert_eq!(assume_on(KernelLevel::I8mm, arm(true, false, false), unknown_i8mm), Err(Error::Unsupported));
        // Available already: nothing to add.
        if arm_build {
            assert_eq!(assume_on(KernelLevel::Dotprod, win_old, unknown_i8mm), Ok(CpuFeatures::default()));
        }
        assert_eq!(assume_on(KernelLevel::Reference, CpuFeatures::default(), unknown_i8mm), Ok(CpuFeatures::default()));
        // x86 features are never unknown, so x86 levels are never assumed.
        let x86_unknown = CpuFeatures::from_bits(8 | 16 | 32);
        let x86_ok = cfg!(target_arch = "x86_64");
        assert_eq!(
            assume_on(KernelLevel::AvxVnni, CpuFeatures::from_bits(8), x86_unknown).is_ok(),
            x86_ok,
            "only the build's architecture"
        );
    }

    /// On this machine the OS can tell everything except Windows on ARM's i8mm, so assuming a
    /// level that is not available fails and changes nothing.
    #[test]
    fn assume_kernel_here() {
        let before = CpuFeatures::detect();
        for level in KernelLevel::ALL {
            let r = assume_kernel(level);
            if level.is_available_on(before) {
                assert_eq!(r, Ok(()), "{level:?}");
            } else if !cfg!(all(target_arch = "aarch64", target_os = "windows")) {
                assert_eq!(r, Err(Error::Unsupported), "{level:?}");
            }
        }
        if !cfg!(all(target_arch = "aarch64", target_os = "windows")) {
            assert_eq!(CpuFeatures::detect(), before);
            assert_eq!(CpuFeatures::unknown(), CpuFeatures::default());
        }
    }
}
