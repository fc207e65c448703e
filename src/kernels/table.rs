//! The kernel table: every kernel level in one place ([`LEVELS`]), and everything that is asked of
//! a level read from it.
//!
//! A row ([`LevelSpec`]) gives a level's name (as the C ABI and `GGML_T2P_KERNEL` spell it), the
//! architecture it is built for, the CPU features it needs, and its kernels ([`KernelSpec`]): for
//! each weight layout and range of batch widths, the activation format it reads, its register
//! tile (weight rows x activation columns) and its entry point; and the level's Q8_K quantizer.
//! [`BEST_ORDER`] is the order in which `auto` tries the levels.
//!
//! Read from here: [`KernelLevel::name`] and [`KernelLevel::from_name`] (the C ABI's
//! `ggml_t2p_kernel_name`/`_from_name`), [`KernelLevel::required`], [`KernelLevel::is_available_on`]
//! (the build's architecture, then [`KernelLevel::required`] within the CPU's features; the two
//! differ in nothing else), [`KernelLevel::is_available`] (plus the OS permission a row asks
//! for), [`KernelLevel::best`], [`KernelLevel::runs`], [`KernelLevel::layout_for`],
//! [`ActFormat::for_kernel`] and the dispatch ([`super::dispatch`]: the entry points).
//!
//! Layers: this module names the ISA files and the shared types below them (operands, activation
//! formats, CPU features); only the dispatch, the driver and the C ABI sit above it.

use super::act_lut::LutHalf;
use super::act_pack::{ActBlockX4, ActDup, ActFormat, ActTile16, Q8Half};
use super::features::{self, CpuFeatures};
use super::operands::Job;
use super::scalar;
#[cfg(target_arch = "aarch64")]
use super::{neon_dotprod, neon_i8mm, neon_quant, ptq1_0_neon};
#[cfg(target_arch = "x86_64")]
use super::{x86_amx, x86_avx2, x86_l64, x86_quant, x86_vnni};
use crate::error::Error;
use crate::format::{BlockL64, BlockPtq1_0x4, BlockQ8K, BlockT2p, BlockX16};
use crate::reference::Contract;
use crate::repack::{Layout, SourceType};
use core::ops::RangeInclusive;

/// Which family of kernels runs. The numeric values are the C header's `GGML_T2P_KERNEL_*`; each
/// level's row in [`LEVELS`] says what it is.
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
    /// x86-64 AMX-INT8 (Sapphire Rapids and later): `tdpbssd` on tiles for gemm of at least
    /// [`AMX_MIN_COLS`] columns (one tile row per column up to [`AMX_WIDE_COLS`], 16x16 tiles
    /// from there), the AVX-512 VNNI kernels below that (gemv, 2-4 columns), X16.
    /// First in [`BEST_ORDER`] where the OS grants the tile state (on Linux, the tile-data
    /// permission, asked when a level is chosen); `GGML_T2P_KERNEL=avx512vnni` opts out.
    Amx = 7,
}

/// The narrowest batch the [`KernelLevel::Amx`] level runs on tiles (packed as
/// [`ActFormat::T16`], padded to whole groups of 16 columns); gemv and narrower batches run its
/// AVX-512 VNNI kernels (Halves pack). Up to [`AMX_WIDE_COLS`] the tiles are
/// [`Blocking::Narrow`](super::amx::Blocking::Narrow)'s, whose `A` and `C` tiles have one row per
/// column. Measured (AMX Xeon VM, one thread, `examples/levels`, best of 5, us; the Bonsai 2 27B's
/// matrices, each from DRAM with `--from-dram`, and 4096 x 4096 in cache), `avx512vnni` gemm /
/// narrow tiles:
///
/// | columns | 17408x5120 DRAM | 5120x17408 DRAM | 10240x5120 DRAM | 17408x5120 cache | 4096x4096 cache |
/// |---|---|---|---|---|---|
/// | 4 | 2141 / 2389 | 1990 / 2228 | 1294 / 1338 | 1589 / 1665 | 311 / 330 |
/// | 5 | 2769 / 2383 | 2685 / 2167 | 1642 / 1373 | 2148 / 1654 | 435 / 334 |
/// | 6 | 3200 / 2380 | 3041 / 2228 | 1857 / 1407 | 2466 / 1718 | 476 / 349 |
/// | 8 | 3120 / 2450 | 3209 / 2346 | 1889 / 1478 | 2536 / 1968 | 474 / 370 |
///
/// (4 columns: the VNNI gemm reads four row tiles side by side in the gemv's order on Intel and
/// wins by 3-12%; the tiles' two `tdpbssd` per block cost the same 16 cycles each for any number
/// of rows, so below 5 columns the VNNI multiplies are the cheaper.) Before the narrow tiles, the
/// 2x2 tiles on padded 16-column groups started at 10 columns: there they took 4096 x 4096 in
/// 0.70x the VNNI gemm's speed at 4 columns and 1.51-1.57x at 10, and in llama.cpp (the 2B, pp N)
/// from 10 columns.
pub const AMX_MIN_COLS: usize = 5;

/// The narrowest batch the [`KernelLevel::Amx`] level runs with its 2x2 tiles
/// ([`BLOCKING`](super::amx::BLOCKING)); [`AMX_MIN_COLS`] up to this run the narrow tiles. Measured
/// as for [`AMX_MIN_COLS`], 2x2 / narrow: 16 columns from DRAM 3270 / 3085 (17408x5120), 2986 /
/// 2724, 1914 / 1818; in cache 2412 / 2598 (17408x5120), 470 / 485 (4096x4096); 12 columns from
/// DRAM 3141 / 2732, 2989 / 2536, 1889 / 1594, in cache 2303 / 2267, 437 / 407; 32 columns in
/// cache 4055 / 5404, 741 / 996. The 2x2 tiles reuse each expanded block for two column groups
/// and keep their activations per pass; from a full group on they are the ones for prompt batches.
pub const AMX_WIDE_COLS: usize = 16;

/// The architecture a level's kernels are built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// Every architecture (portable Rust).
    Any,
    /// aarch64 (NEON).
    Aarch64,
    /// x86-64.
    X86_64,
}

impl Arch {
    /// Whether this build is for this architecture.
    pub const fn is_build(self) -> bool {
        match self {
            Arch::Any => true,
            Arch::Aarch64 => cfg!(target_arch = "aarch64"),
            Arch::X86_64 => cfg!(target_arch = "x86_64"),
        }
    }
}

/// A kernel's register tile: `rows` weight rows x `cols` activation columns computed together
/// (narrower leftovers of a batch run smaller tiles of the same kernel).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tile {
    /// Weight rows (the layout's row tile: 4 for T2P and PTQ1_0x4, 16 for X16, 64 for L64).
    pub rows: usize,
    /// Activation columns (1: one column at a time).
    pub cols: usize,
}

/// A kernel's entry point, typed by the weight blocks and activation elements it reads. Each
/// takes a [`Job`] validated by [`gemm_raw`](super::dispatch::gemm_raw) for a level that is
/// available (its features present), so calling one is `unsafe`.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Entry {
    /// T2P weights, [`ActFormat::Halves`].
    T2pHalves(unsafe fn(Job<'_, BlockT2p, Q8Half>)),
    /// PTQ1_0x4 weights, [`ActFormat::Halves`].
    Ptq1Halves(unsafe fn(Job<'_, BlockPtq1_0x4, Q8Half>)),
    /// X16 weights, [`ActFormat::Halves`].
    X16Halves(unsafe fn(Job<'_, BlockX16, Q8Half>)),
    /// X16 weights, [`ActFormat::T16`].
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))] // built only on x86-64
    X16Tile16(unsafe fn(Job<'_, BlockX16, ActTile16>)),
    /// T2P weights, [`ActFormat::Dup`].
    #[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))] // built only on ARM
    T2pDup(unsafe fn(Job<'_, BlockT2p, ActDup>)),
    /// T2P weights, [`ActFormat::X4`].
    #[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))] // built only on ARM
    T2pX4(unsafe fn(Job<'_, BlockT2p, ActBlockX4>)),
    /// PTQ1_0x4 weights, [`ActFormat::Dup`].
    #[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))] // built only on ARM
    Ptq1Dup(unsafe fn(Job<'_, BlockPtq1_0x4, ActDup>)),
    /// PTQ1_0x4 weights, [`ActFormat::X4`].
    #[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))] // built only on ARM
    Ptq1X4(unsafe fn(Job<'_, BlockPtq1_0x4, ActBlockX4>)),
    /// L64 weights, [`ActFormat::Halves`].
    L64Halves(unsafe fn(Job<'_, BlockL64, Q8Half>)),
    /// L64 weights, [`ActFormat::Lut`].
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))] // built only on x86-64
    L64Lut(unsafe fn(Job<'_, BlockL64, LutHalf>)),
    /// L64 weights, [`ActFormat::T16`].
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))] // built only on x86-64
    L64Tile16(unsafe fn(Job<'_, BlockL64, ActTile16>)),
}

/// A Q8_K quantizer: `x.len() == 256 * y.len()` floats into `y` (the caller checks the lengths
/// and the level's features).
pub(crate) type QuantizeFn = unsafe fn(&[f32], &mut [BlockQ8K], Contract);

/// One kernel of a level: what it runs on and what it reads.
#[derive(Clone, Debug)]
pub struct KernelSpec {
    /// The weight layout it reads.
    pub layout: Layout,
    /// The batch widths (activation columns) it runs: a level runs, for a layout and a width, the
    /// first of its kernels whose range holds the width. (Zero columns compute nothing; the
    /// kernel whose range holds 0 only names the pack format.)
    pub cols: RangeInclusive<usize>,
    /// The activation format it reads.
    pub act: ActFormat,
    /// Its register tile.
    pub tile: Tile,
    /// Its entry point's path in `src/kernels` (for logs and tools).
    pub entry_name: &'static str,
    /// CPU features it needs besides its level's (the L64 kernels: AVX-512 VBMI); a level runs
    /// a layout only where the CPU has them.
    pub extra: CpuFeatures,
    /// The entry point; `None` in a build for another architecture than the level's.
    pub(crate) entry: Option<Entry>,
}

/// One row of the kernel table: a level.
#[derive(Clone, Debug)]
pub struct LevelSpec {
    /// The level.
    pub level: KernelLevel,
    /// Its name NUL-terminated, as the C ABI and `GGML_T2P_KERNEL` spell it.
    name_c: &'static str,
    /// The architecture its kernels are built for.
    pub arch: Arch,
    /// The CPU features it needs, the implied ones included (i8mm: dotprod and NEON too).
    pub needs: CpuFeatures,
    /// Whether it also needs the OS's permission for the AMX tile data (Linux; asked once per
    /// process, and only when this level is wanted: see [`KernelLevel::is_available`]).
    pub tile_permission: bool,
    /// Its kernels, in the order they are tried (see [`KernelSpec::cols`]).
    pub kernels: &'static [KernelSpec],
    /// Its Q8_K quantizer's path in `src/kernels` (`reference` for the scalar reference).
    pub quantize_name: &'static str,
    /// The quantizer; `None`: the scalar reference ([`crate::reference::quantize_row_q8_k`]).
    pub(crate) quantize: Option<QuantizeFn>,
}

/// `Some(f)` in a build for `arch` (`any`, or a `target_arch` string), else `None`: the ISA
/// file that defines `f` exists only there.
macro_rules! on {
    (any, $f:expr) => {
        Some($f)
    };
    ($arch:literal, $f:expr) => {{
        #[cfg(target_arch = $arch)]
        let f = Some($f);
        #[cfg(not(target_arch = $arch))]
        let f = None;
        f
    }};
}

/// One [`KernelSpec`]: `layout, cols, act format, rows x cols, arch, Entry variant(path)`.
macro_rules! kernel {
    ($layout:ident, $cols:expr, $act:ident, $rows:literal x $tc:literal, $arch:tt, $variant:ident($f:path)) => {
        kernel!($layout, $cols, $act, $rows x $tc, $arch, $variant($f), 0)
    };
    ($layout:ident, $cols:expr, $act:ident, $rows:literal x $tc:literal, $arch:tt, $variant:ident($f:path), $extra:expr) => {
        KernelSpec {
            layout: Layout::$layout,
            cols: $cols,
            act: ActFormat::$act,
            tile: Tile { rows: $rows, cols: $tc },
            entry_name: stringify!($f),
            extra: CpuFeatures::from_bits($extra),
            entry: on!($arch, Entry::$variant($f)),
        }
    };
}

/// Every batch width.
const ANY: RangeInclusive<usize> = 0..=usize::MAX;
/// One column (gemv).
const ONE: RangeInclusive<usize> = 1..=1;
/// Below [`AMX_MIN_COLS`] (the `amx` level's AVX-512 VNNI gemm).
const AMX_VNNI: RangeInclusive<usize> = 0..=AMX_MIN_COLS - 1;
/// [`AMX_MIN_COLS`] to [`AMX_WIDE_COLS`] - 1 (the `amx` level's narrow tiles).
const AMX_NARROW: RangeInclusive<usize> = AMX_MIN_COLS..=AMX_WIDE_COLS - 1;
/// [`AMX_WIDE_COLS`] and more (the `amx` level's 2x2 tiles).
const AMX_WIDE: RangeInclusive<usize> = AMX_WIDE_COLS..=usize::MAX;

// feature bits (as in `CpuFeatures::bits`) for the table
const NEON: u32 = 1;
const DOTPROD: u32 = 2;
const I8MM: u32 = 4;
const AVX2: u32 = 8;
const AVXVNNI: u32 = 16;
const AVX512VNNI: u32 = 32;
const AMX_TILE: u32 = 64;
const AMX_INT8: u32 = 128;
const AVX512VBMI: u32 = 256;

/// The kernel table, one row per level in [`KernelLevel`] order (`LEVELS[level as usize - 1]`).
pub static LEVELS: [LevelSpec; 7] = [
    LevelSpec {
        level: KernelLevel::Reference,
        name_c: "ref\0",
        arch: Arch::Any,
        needs: CpuFeatures::from_bits(0),
        tile_permission: false,
        kernels: &[
            kernel!(T2p, ANY, Halves, 4 x 1, any, T2pHalves(scalar::gemm_t2p_4xn_q8_k_generic)),
            kernel!(Ptq1_0x4, ANY, Halves, 4 x 1, any, Ptq1Halves(scalar::gemm_ptq1_0x4_4xn_q8_k_generic)),
            kernel!(X16, ANY, Halves, 16 x 1, any, X16Halves(scalar::gemm_x16_16xn_q8_k_generic)),
            kernel!(L64, ANY, Halves, 64 x 1, any, L64Halves(scalar::gemm_l64_64xn_q8_k_generic)),
        ],
        quantize_name: "reference",
        quantize: None,
    },
    LevelSpec {
        level: KernelLevel::Dotprod,
        name_c: "dotprod\0",
        arch: Arch::Aarch64,
        needs: CpuFeatures::from_bits(NEON | DOTPROD),
        tile_permission: false,
        kernels: &[
            kernel!(T2p, ONE, Dup, 4 x 1, "aarch64", T2pDup(neon_dotprod::gemv_t2p_4x1_q8_k_dotprod)),
            kernel!(T2p, ANY, X4, 4 x 4, "aarch64", T2pX4(neon_dotprod::gemm_t2p_4x4_q8_k_dotprod)),
            kernel!(Ptq1_0x4, ONE, Dup, 4 x 1, "aarch64", Ptq1Dup(ptq1_0_neon::gemv_ptq1_0x4_4x1_q8_k_dotprod)),
            kernel!(Ptq1_0x4, ANY, X4, 4 x 4, "aarch64", Ptq1X4(ptq1_0_neon::gemm_ptq1_0x4_4x4_q8_k_dotprod)),
        ],
        quantize_name: "neon_quant::quantize_q8_k_neon",
        quantize: on!("aarch64", neon_quant::quantize_q8_k_neon as QuantizeFn),
    },
    LevelSpec {
        level: KernelLevel::I8mm,
        name_c: "i8mm\0",
        arch: Arch::Aarch64,
        needs: CpuFeatures::from_bits(NEON | DOTPROD | I8MM),
        tile_permission: false,
        kernels: &[
            // gemv is the sdot kernel on both ARM levels
            kernel!(T2p, ONE, Dup, 4 x 1, "aarch64", T2pDup(neon_dotprod::gemv_t2p_4x1_q8_k_dotprod)),
            kernel!(T2p, ANY, X4, 4 x 16, "aarch64", T2pX4(neon_i8mm::gemm_t2p_4x16_q8_k_i8mm)),
            kernel!(Ptq1_0x4, ONE, Dup, 4 x 1, "aarch64", Ptq1Dup(ptq1_0_neon::gemv_ptq1_0x4_4x1_q8_k_dotprod)),
            kernel!(Ptq1_0x4, ANY, X4, 4 x 16, "aarch64", Ptq1X4(ptq1_0_neon::gemm_ptq1_0x4_4x16_q8_k_i8mm)),
        ],
        quantize_name: "neon_quant::quantize_q8_k_neon",
        quantize: on!("aarch64", neon_quant::quantize_q8_k_neon as QuantizeFn),
    },
    LevelSpec {
        level: KernelLevel::Avx2,
        name_c: "avx2\0",
        arch: Arch::X86_64,
        needs: CpuFeatures::from_bits(AVX2),
        tile_permission: false,
        kernels: &[
            kernel!(X16, ONE, Halves, 16 x 1, "x86_64", X16Halves(x86_avx2::gemv_x16_16x1_q8_k_avx2)),
            kernel!(X16, ANY, Halves, 16 x 4, "x86_64", X16Halves(x86_avx2::gemm_x16_16x4_q8_k_avx2)),
        ],
        quantize_name: "x86_quant::quantize_q8_k_avx2",
        quantize: on!("x86_64", x86_quant::quantize_q8_k_avx2 as QuantizeFn),
    },
    LevelSpec {
        level: KernelLevel::AvxVnni,
        name_c: "avxvnni\0",
        arch: Arch::X86_64,
        needs: CpuFeatures::from_bits(AVX2 | AVXVNNI),
        tile_permission: false,
        kernels: &[
            kernel!(X16, ONE, Halves, 16 x 1, "x86_64", X16Halves(x86_vnni::gemv_x16_16x1_q8_k_avxvnni)),
            kernel!(X16, ANY, Halves, 16 x 2, "x86_64", X16Halves(x86_vnni::gemm_x16_16x2_q8_k_avxvnni)),
        ],
        quantize_name: "x86_quant::quantize_q8_k_avx2",
        quantize: on!("x86_64", x86_quant::quantize_q8_k_avx2 as QuantizeFn),
    },
    LevelSpec {
        level: KernelLevel::Avx512Vnni,
        name_c: "avx512vnni\0",
        arch: Arch::X86_64,
        needs: CpuFeatures::from_bits(AVX2 | AVX512VNNI),
        tile_permission: false,
        kernels: &[
            kernel!(X16, ONE, Halves, 16 x 1, "x86_64", X16Halves(x86_vnni::gemv_x16_16x1_q8_k_avx512vnni)),
            kernel!(X16, ANY, Halves, 16 x 8, "x86_64", X16Halves(x86_vnni::gemm_x16_16x8_q8_k_avx512vnni)),
            // L64 (with VBMI): the table-lookup gemv; gemm through X16 tiles expanded per 64 rows
            kernel!(L64, ONE, Lut, 64 x 1, "x86_64", L64Lut(x86_l64::gemv_l64_64x1_q8_k_avx512vbmi), AVX512VBMI),
            kernel!(L64, ANY, Halves, 64 x 8, "x86_64", L64Halves(x86_l64::gemm_l64_64x8_q8_k_avx512vbmi), AVX512VBMI),
        ],
        quantize_name: "x86_quant::quantize_q8_k_avx512",
        quantize: on!("x86_64", x86_quant::quantize_q8_k_avx512 as QuantizeFn),
    },
    LevelSpec {
        level: KernelLevel::Amx,
        name_c: "amx\0",
        arch: Arch::X86_64,
        needs: CpuFeatures::from_bits(AVX2 | AVX512VNNI | AMX_TILE | AMX_INT8),
        tile_permission: true,
        kernels: &[
            // below AMX_MIN_COLS columns: the avx512vnni kernels
            kernel!(X16, ONE, Halves, 16 x 1, "x86_64", X16Halves(x86_vnni::gemv_x16_16x1_q8_k_avx512vnni)),
            kernel!(X16, AMX_VNNI, Halves, 16 x 8, "x86_64", X16Halves(x86_vnni::gemm_x16_16x8_q8_k_avx512vnni)),
            // 16 rows x the batch's columns per tdpbssd pair, 2 row tiles at a time (amx::Blocking::Narrow)
            kernel!(X16, AMX_NARROW, T16, 16 x 15, "x86_64", X16Tile16(x86_amx::gemm_x16_narrow_q8_k_amx_level)),
            // 16 x 16 per tdpbssd pair, 2 x 2 such tiles at a time (amx::BLOCKING)
            kernel!(X16, AMX_WIDE, T16, 16 x 16, "x86_64", X16Tile16(x86_amx::gemm_x16_16x16_q8_k_amx_level)),
            // L64 (with VBMI): as avx512vnni's, the tiles' gemm on the expanded X16 tiles
            kernel!(L64, ONE, Lut, 64 x 1, "x86_64", L64Lut(x86_l64::gemv_l64_64x1_q8_k_avx512vbmi), AVX512VBMI),
            kernel!(L64, AMX_VNNI, Halves, 64 x 8, "x86_64", L64Halves(x86_l64::gemm_l64_64x8_q8_k_avx512vbmi), AVX512VBMI),
            kernel!(L64, AMX_NARROW, T16, 64 x 15, "x86_64", L64Tile16(x86_l64::gemm_l64_narrow_q8_k_amx), AVX512VBMI),
            kernel!(L64, AMX_WIDE, T16, 64 x 16, "x86_64", L64Tile16(x86_l64::gemm_l64_64x16_q8_k_amx), AVX512VBMI),
        ],
        quantize_name: "x86_quant::quantize_q8_k_avx512",
        quantize: on!("x86_64", x86_quant::quantize_q8_k_avx512 as QuantizeFn),
    },
];

/// The order in which [`KernelLevel::best`] tries the levels: on ARM i8mm, dotprod; on x86 AMX,
/// AVX-512 VNNI (zmm), AVX-VNNI (ymm), AVX2 on every vendor, by side-by-side timing of these
/// kernels (`cargo run --release --example levels`; docs/architecture.md, "Kernel levels"): on
/// AMX Xeons the tiles ran 2.0-2.8x the AVX-512 VNNI gemm from 16 to 512 columns (one thread) and
/// llama-bench's pp512 1.22x at 16 threads, with the same bits; on an Emerald Rapids Xeon zmm won
/// 14 of 15 gemv cells and its gemm ran 1.3-2.3x ymm, on Zen 4 zmm ran 1.1-1.6x AVX2 at gemv and
/// 1.6-1.8x at 64+ columns. Alder/Arrow Lake have AVX-VNNI without AVX-512, so they get ymm. The
/// reference is not in the order (a CPU without any of these declines).
pub const BEST_ORDER: [KernelLevel; 6] = [
    KernelLevel::I8mm,
    KernelLevel::Dotprod,
    KernelLevel::Amx,
    KernelLevel::Avx512Vnni,
    KernelLevel::AvxVnni,
    KernelLevel::Avx2,
];

impl KernelLevel {
    /// All levels, portable first (the order of [`LEVELS`]).
    pub const ALL: [KernelLevel; 7] = [
        KernelLevel::Reference,
        KernelLevel::Dotprod,
        KernelLevel::I8mm,
        KernelLevel::Avx2,
        KernelLevel::AvxVnni,
        KernelLevel::Avx512Vnni,
        KernelLevel::Amx,
    ];

    /// This level's row of the kernel table.
    #[inline]
    pub fn spec(self) -> &'static LevelSpec {
        &LEVELS[self as usize - 1]
    }

    /// Parses the C value; `None` for anything else.
    pub fn from_i32(v: i32) -> Option<Self> {
        Self::ALL.into_iter().find(|l| *l as i32 == v)
    }

    /// Parses a name as printed by [`KernelLevel::name`]; `None` for anything else.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|l| l.name() == name)
    }

    /// Short name, as printed in logs and accepted by `GGML_T2P_KERNEL` (`ref`, `dotprod`,
    /// `i8mm`, `avx2`, `avxvnni`, `avx512vnni`, `amx`).
    pub fn name(self) -> &'static str {
        self.name_c().trim_end_matches('\0')
    }

    /// [`KernelLevel::name`] NUL-terminated, for the C ABI.
    pub(crate) fn name_c(self) -> &'static str {
        self.spec().name_c
    }

    /// Whether this level has kernels for `layout` (on this CPU: see [`KernelSpec::extra`]).
    pub fn runs(self, layout: Layout) -> bool {
        self.runs_on(layout, CpuFeatures::detect())
    }

    /// [`KernelLevel::runs`] on a CPU with features `f`.
    pub fn runs_on(self, layout: Layout, f: CpuFeatures) -> bool {
        self.spec().kernels.iter().any(|k| k.layout == layout && f.contains(k.extra))
    }

    /// The kernel this level runs for `layout` and a batch of `n_cols` columns (see
    /// [`KernelSpec::cols`]); `None` when it has no kernels for `layout` (on this CPU: see
    /// [`KernelSpec::extra`]).
    pub fn kernel(self, layout: Layout, n_cols: usize) -> Option<&'static KernelSpec> {
        let f = CpuFeatures::detect();
        self.spec().kernels.iter().find(|k| k.layout == layout && k.cols.contains(&n_cols) && f.contains(k.extra))
    }

    /// Whether this level's kernels can run on the current CPU and build. For a level whose row
    /// asks for the tile permission (`amx`) this also asks Linux for it (once per process;
    /// refused: unavailable), so the host process is changed only when that level is asked for.
    pub fn is_available(self) -> bool {
        let on_cpu = self.is_available_on(CpuFeatures::detect());
        if on_cpu && self.spec().tile_permission {
            return features::tile_permission();
        }
        on_cpu
    }

    /// Whether this level's kernels can run on a CPU with features `f` in this build: the build
    /// is for the level's architecture and `f` has every feature of [`KernelLevel::required`].
    pub fn is_available_on(self, f: CpuFeatures) -> bool {
        let spec = self.spec();
        spec.arch.is_build() && f.contains(spec.needs)
    }

    /// The features this level needs (the implied ones included: i8mm needs dotprod and NEON).
    pub fn required(self) -> CpuFeatures {
        self.spec().needs
    }

    /// The fastest level the CPU runs, or `None` when it has no dotprod (ARM) or no AVX2 + FMA +
    /// F16C (x86). `None` means "decline": the scalar kernels are exact but slower than stock
    /// ggml, so a caller should leave such weights to stock code. The order is [`BEST_ORDER`].
    /// A level that needs the tile permission (`amx`) is asked for it here, once per process, and
    /// skipped when the OS refuses it ([`KernelLevel::is_available`]).
    pub fn best() -> Option<Self> {
        BEST_ORDER.into_iter().find(|l| l.is_available())
    }

    /// [`KernelLevel::best`] for a CPU with features `f`, the OS granting every permission.
    pub fn best_on(f: CpuFeatures) -> Option<Self> {
        BEST_ORDER.into_iter().find(|l| l.is_available_on(f))
    }

    /// The layout this level runs weights of `src` on: X16 for the x86 levels (or L64 for PTQ1_0
    /// with `prefer_compact` where the level runs it: AVX-512 VBMI), T2P on ARM (or PTQ1_0x4 for
    /// PTQ1_0 with `prefer_compact`); both compact layouts keep 1.75 bits per weight. For the
    /// reference level, the layout the best level of this CPU would use (X16 or L64 on x86, else
    /// T2P or PTQ1_0x4): L64 where the CPU has AVX-512 VBMI, which only the L64-running levels
    /// (`avx512vnni`, `amx`) come with, asked without [`KernelLevel::best`] (which would ask Linux
    /// for the AMX tile permission).
    pub fn layout_for(self, src: SourceType, prefer_compact: bool) -> Layout {
        let compact = prefer_compact && src == SourceType::Ptq1_0;
        let arm_layout = if compact { Layout::Ptq1_0x4 } else { Layout::T2p };
        let x86_layout = |l64: bool| if compact && l64 { Layout::L64 } else { Layout::X16 };
        match self.spec().arch {
            Arch::X86_64 => x86_layout(compact && self.runs(Layout::L64)),
            Arch::Aarch64 => arm_layout,
            Arch::Any if cfg!(target_arch = "x86_64") => x86_layout(compact && CpuFeatures::detect().avx512vbmi),
            Arch::Any => arm_layout,
        }
    }
}

impl ActFormat {
    /// The format the kernels of `level` read for `layout` and `n_cols` columns (the table's
    /// [`KernelSpec::act`]).
    ///
    /// # Errors
    /// [`Error::Unsupported`] if `level` has no kernels for `layout`.
    pub fn for_kernel(layout: Layout, level: KernelLevel, n_cols: usize) -> Result<Self, Error> {
        level.kernel(layout, n_cols).map(|k| k.act).ok_or(Error::Unsupported)
    }
}

/// The features a caller's promise that the CPU runs `level` adds, given what the OS reports
/// (`os`) and what it cannot tell (`unknown`): none when `level` is available already; the missing
/// features when all of them are unknown to the OS.
///
/// # Errors
/// [`Error::Unsupported`] when the OS reported one of them absent or the level is for another
/// architecture.
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
/// `STATUS_ILLEGAL_INSTRUCTION`) at the first kernel call. A level that is available already
/// changes nothing.
///
/// # Errors
/// [`Error::Unsupported`]: features the OS reported absent are never assumed (see [`assume_on`]).
pub fn assume_kernel(level: KernelLevel) -> Result<(), Error> {
    let add = assume_on(level, CpuFeatures::os(), CpuFeatures::unknown())?;
    features::promise(add);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arm(neon: bool, dotprod: bool, i8mm: bool) -> CpuFeatures {
        CpuFeatures { neon, dotprod, i8mm, ..CpuFeatures::default() }
    }

    /// The layout and activation format an entry point's type says it reads.
    fn entry_reads(e: Entry) -> (Layout, ActFormat) {
        match e {
            Entry::T2pHalves(_) => (Layout::T2p, ActFormat::Halves),
            Entry::Ptq1Halves(_) => (Layout::Ptq1_0x4, ActFormat::Halves),
            Entry::X16Halves(_) => (Layout::X16, ActFormat::Halves),
            Entry::X16Tile16(_) => (Layout::X16, ActFormat::T16),
            Entry::T2pDup(_) => (Layout::T2p, ActFormat::Dup),
            Entry::T2pX4(_) => (Layout::T2p, ActFormat::X4),
            Entry::Ptq1Dup(_) => (Layout::Ptq1_0x4, ActFormat::Dup),
            Entry::Ptq1X4(_) => (Layout::Ptq1_0x4, ActFormat::X4),
            Entry::L64Halves(_) => (Layout::L64, ActFormat::Halves),
            Entry::L64Lut(_) => (Layout::L64, ActFormat::Lut),
            Entry::L64Tile16(_) => (Layout::L64, ActFormat::T16),
        }
    }

    /// Every row is where [`KernelLevel::spec`] looks for it, and says what its entry points'
    /// types say; the entry points exist exactly in a build for the level's architecture.
    #[test]
    fn table_rows_agree_with_their_entries() {
        for (i, level) in KernelLevel::ALL.into_iter().enumerate() {
            let spec = level.spec();
            assert_eq!(LEVELS[i].level, level);
            assert_eq!(spec.level, level);
            assert_eq!(level as usize, i + 1);
            assert!(spec.name_c.ends_with('\0') && !level.name().is_empty());
            assert!(!spec.kernels.is_empty());
            for k in spec.kernels {
                assert_eq!(k.entry.is_some(), spec.arch.is_build(), "{level:?} {}", k.entry_name);
                if let Some(e) = k.entry {
                    assert_eq!(entry_reads(e), (k.layout, k.act), "{level:?} {}", k.entry_name);
                }
                assert_eq!(k.tile.rows, k.layout.tile_rows(), "{level:?} {}", k.entry_name);
                assert!(k.tile.cols >= 1);
            }
            assert_eq!(spec.quantize.is_some(), spec.arch.is_build() && spec.arch != Arch::Any, "{level:?}");
        }
    }

    /// For every layout a level runs, every batch width finds a kernel (one column: its gemv), and
    /// the format is the one the level's pack uses.
    #[test]
    fn every_width_has_one_kernel() {
        let widths = [0, 1, 2, 3, 4, 15, 16, 17, 64, usize::MAX];
        for level in KernelLevel::ALL {
            for layout in Layout::ALL {
                for n in widths {
                    let k = level.kernel(layout, n);
                    assert_eq!(k.is_some(), level.runs(layout), "{level:?} {layout:?} {n}");
                    assert_eq!(ActFormat::for_kernel(layout, level, n).ok(), k.map(|k| k.act));
                }
            }
        }
        let amx = |n| ActFormat::for_kernel(Layout::X16, KernelLevel::Amx, n).unwrap();
        assert_eq!((amx(AMX_MIN_COLS - 1), amx(AMX_MIN_COLS)), (ActFormat::Halves, ActFormat::T16));
        // the tiles: narrow from AMX_MIN_COLS, 2x2 from AMX_WIDE_COLS
        let entry = |n| KernelLevel::Amx.kernel(Layout::X16, n).unwrap().entry_name;
        for n in [AMX_MIN_COLS, AMX_WIDE_COLS - 1] {
            assert!(entry(n).ends_with("gemm_x16_narrow_q8_k_amx_level"), "{n} columns: {}", entry(n));
        }
        for n in [AMX_WIDE_COLS, 512] {
            assert!(entry(n).ends_with("gemm_x16_16x16_q8_k_amx_level"), "{n} columns: {}", entry(n));
        }
        let dot = |n| ActFormat::for_kernel(Layout::T2p, KernelLevel::Dotprod, n).unwrap();
        assert_eq!((dot(0), dot(1), dot(2)), (ActFormat::X4, ActFormat::Dup, ActFormat::X4));
    }

    /// Available on exactly the required features in a build for the level's architecture:
    /// without any one of them, not.
    #[test]
    fn available_means_required_features_on_its_architecture() {
        for level in KernelLevel::ALL {
            let req = level.required();
            assert_eq!(level.is_available_on(req), level.spec().arch.is_build(), "{level:?}");
            assert_eq!(level.is_available_on(CpuFeatures::from_bits(0xFF)), level.spec().arch.is_build());
            for bit in 0..8 {
                if req.bits() & 1 << bit != 0 {
                    let less = CpuFeatures::from_bits(req.bits() & !(1 << bit));
                    assert!(!level.is_available_on(less), "{level:?} without bit {bit}");
                }
            }
        }
        assert!(BEST_ORDER.iter().all(|l| *l != KernelLevel::Reference));
        // AMX first on x86 where it exists, AVX-512 VNNI on the same CPU without the AMX bits
        if cfg!(target_arch = "x86_64") {
            let amx = KernelLevel::Amx.required();
            assert_eq!(KernelLevel::best_on(amx), Some(KernelLevel::Amx));
            let no_tiles = CpuFeatures { amx_tile: false, amx_int8: false, ..amx };
            assert_eq!(KernelLevel::best_on(no_tiles), Some(KernelLevel::Avx512Vnni));
        }
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
