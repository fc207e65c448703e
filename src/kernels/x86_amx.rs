//! The native AMX-INT8 tile operations ([`Tiles`] through `asm!`: Rust's AMX intrinsics are
//! unstable) and the level's gemm, the kernel of [`super::amx`] compiled for AVX-512 (its
//! expansion and float step) with these tiles.
//!
//! Faults avoided by construction (stock ggml's AMX path raised SIGILL on both): the
//! configuration is read by `ldtilecfg` from a `static` (`amx::X16_TILE_CONFIG`), never from a stack
//! object the optimizer may drop, at the start of every pass, after the last call before the pass's
//! tile instructions (the psABI makes the tile state caller-saved, and the kernel's zeroing and
//! copies compile to `memset`/`memcpy` calls; `tests/rust/amx_calls.rs` follows the compiled code's
//! control flow for a path from a call to a tile instruction without an `ldtilecfg` in between),
//! and the tiles are released at exit; the
//! Linux tile-data permission is asked for the whole process the first time the `amx` level is
//! wanted (`KernelLevel::is_available`, before any kernel runs), so it holds on every thread,
//! ggml's included, and in children after `fork()`; a process that never asks for `amx` is left
//! unchanged (`auto` asks for it on a CPU with AMX: the level is first in `BEST_ORDER`). It
//! runs natively wherever the CPU has AMX (the test suite with `GGML_T2P_TEST_LEVELS=amx`, timed by
//! `examples/levels`), and under an emulated Sapphire Rapids with AMX (`tools/x86-emu-test.py`, set `amx`: Bochs with XFD added), where
//! the oracle, `tests/rust/amx.rs` (against the scalar model, with `NATIVE_CALLS` counted: test
//! builds, feature `testing`, as are `NoTiles` and the model's AVX-512 kernel) and
//! `tests/c/amx_smoke.c` (threads, `fork()`, release, a refused permission) check it, and on
//! every machine the same kernel runs under the scalar model.

use super::act_pack::ActTile16;
use super::amx::{gemm_x16_tiles, BTiles, Blocking, TileConfig, Tiles, VectorOps, BLOCKING};
use super::operands::Job;
use crate::format::BlockX16;
use core::arch::asm;
use core::arch::x86_64::*;
use half::f16;

/// Implements [`Tiles`] for `$ty` with each instruction's `asm!` block, its template wrapped in
/// `$open` .. `$close` (nothing for the real instructions, an assembler comment for `NoTiles`):
/// the same operands and options either way. Never `pure`: tile state is invisible to the
/// compiler, so every tile asm must keep its program order, which the compiler keeps for asm
/// blocks with side effects. The memory options state what memory each instruction touches
/// (`tilezero`, `tdpbssd`, `tilerelease` none; `ldtilecfg`, `tileloadd` read; `tilestored` writes),
/// so the compiler keeps the expansion's stores before the tile loads and the float step's reads
/// after the tile stores.
macro_rules! tile_asm {
    ($ty:ty, $open:literal, $close:literal) => {
        impl Tiles for $ty {
            #[inline(always)]
            unsafe fn config(&mut self, cfg: &'static TileConfig) {
                // SAFETY: AMX usable (trait contract); `cfg` is 64 readable bytes.
                unsafe {
                    asm!(concat!($open, "ldtilecfg [{p}]", $close), p = in(reg) cfg as *const TileConfig,
                        options(readonly, nostack, preserves_flags))
                }
            }
            #[inline(always)]
            unsafe fn zero<const T: u8>(&mut self) {
                // SAFETY: configured tile (trait contract).
                unsafe { asm!(concat!($open, "tilezero tmm{t}", $close), t = const T, options(nomem, nostack, preserves_flags)) }
            }
            #[inline(always)]
            unsafe fn load<const T: u8>(&mut self, p: *const u8, stride: usize) {
                // SAFETY: rows x colsb readable bytes at `stride` (trait contract).
                unsafe {
                    asm!(concat!($open, "tileloadd tmm{t}, [{p} + {s} * 1]", $close), t = const T, p = in(reg) p,
                        s = in(reg) stride, options(readonly, nostack, preserves_flags))
                }
            }
            #[inline(always)]
            unsafe fn dpbssd<const C: u8, const A: u8, const B: u8>(&mut self) {
                // SAFETY: configured tiles with agreeing shapes (trait contract).
                unsafe {
                    asm!(concat!($open, "tdpbssd tmm{c}, tmm{a}, tmm{b}", $close), c = const C, a = const A,
                        b = const B, options(nomem, nostack, preserves_flags))
                }
            }
            #[inline(always)]
            unsafe fn store<const T: u8>(&mut self, p: *mut u8, stride: usize) {
                // SAFETY: rows x colsb writable bytes at `stride` (trait contract).
                unsafe {
                    asm!(concat!($open, "tilestored [{p} + {s} * 1], tmm{t}", $close), t = const T, p = in(reg) p,
                        s = in(reg) stride, options(nostack, preserves_flags))
                }
            }
            #[inline(always)]
            unsafe fn release(&mut self) {
                // SAFETY: AMX usable (trait contract); releasing is always allowed then.
                unsafe { asm!(concat!($open, "tilerelease", $close), options(nomem, nostack, preserves_flags)) }
            }
        }
    };
}

/// The tile unit of the running CPU.
pub(crate) struct Native;

tile_asm!(Native, "", "");

/// [`Native`] with every tile instruction left out (test builds: feature `testing`): each method is the same `asm!` block with the
/// instruction commented out (the same operands and options), so the compiler treats memory
/// exactly as for the native kernel (a "store" may write the `C` buffer, a "load" reads its rows)
/// and the kernel compiles to the native machine code minus the tile instructions. For timing the
/// kernel's AVX-512 part (expansion, float step, loop) on any AVX-512 CPU; its outputs are
/// meaningless. (Its methods' safety conditions are those of the trait, though nothing runs.)
#[cfg(feature = "testing")]
pub(crate) struct NoTiles;

#[cfg(feature = "testing")]
tile_asm!(NoTiles, "/* ", " */");

/// The vector work in AVX-512: a block's expansion as one zmm per `B` row (4 per X16 word), the
/// float step as one zmm of 16 rows per (block, column).
pub(crate) struct Avx512Ops;

impl VectorOps for Avx512Ops {
    #[inline(always)]
    unsafe fn expand(blk: &BlockX16, b: &mut BTiles) {
        // SAFETY: 64 readable bytes per word, 64 writable per row; AVX-512 F/BW enabled by the
        // caller. The 16-bit shifts bring the next byte's low bits into bits 6..7 (and 4..7,
        // 2..7), which the mask removes: each byte keeps its own code, 0..3, then minus 1.
        unsafe {
            let (m3, one) = (_mm512_set1_epi8(3), _mm512_set1_epi8(1));
            for (word, rows) in blk.qs.iter().zip(b.chunks_exact_mut(4)) {
                let x = _mm512_loadu_si512(word.as_ptr().cast());
                let slots = [x, _mm512_srli_epi16(x, 2), _mm512_srli_epi16(x, 4), _mm512_srli_epi16(x, 6)];
                for (row, v) in rows.iter_mut().zip(slots) {
                    _mm512_storeu_si512(row.as_mut_ptr().cast(), _mm512_sub_epi8(_mm512_and_si512(v, m3), one));
                }
            }
        }
    }
    #[inline(always)]
    unsafe fn scales(d: &[f16; 16]) -> [f32; 16] {
        let mut out = [0.0f32; 16];
        // SAFETY: 32 readable bytes in, 64 writable out; F16C/AVX-512 F enabled by the caller.
        unsafe { _mm512_storeu_ps(out.as_mut_ptr(), _mm512_cvtph_ps(_mm256_loadu_si256(d.as_ptr().cast()))) };
        out
    }
    #[inline(always)]
    unsafe fn step(acc: &mut [f32; 16], isum: &[i32; 16], dw: &[f32; 16], dy: f32) {
        // SAFETY: 64 readable bytes each, acc writable; AVX-512 F and FMA enabled by the caller.
        // vmulps rounds d * dy, vfmadd231ps rounds once: the reference step.
        unsafe {
            let d = _mm512_mul_ps(_mm512_loadu_ps(dw.as_ptr()), _mm512_set1_ps(dy));
            let v = _mm512_cvtepi32_ps(_mm512_loadu_si512(isum.as_ptr().cast()));
            _mm512_storeu_ps(acc.as_mut_ptr(), _mm512_fmadd_ps(d, v, _mm512_loadu_ps(acc.as_ptr())));
        }
    }
    #[inline(always)]
    fn prefetch(blk: &BlockX16) {
        super::x86::prefetch_block(blk)
    }
}

/// X16 x Q8_K on AMX-INT8 tiles: 16 rows x 16 columns per `tdpbssd` pair (padded columns), up to
/// four such tiles at a time as `blocking` says, the reference float step in AVX-512.
///
/// # Safety
/// `KernelLevel::Amx` available (AMX-TILE, AMX-INT8 permitted; AVX-512 F/BW/VL/VNNI, AVX2, FMA,
/// F16C); `job` validated by `gemm_raw` with a T16 pack.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(crate) unsafe fn gemm_x16_16x16_q8_k_amx(job: &Job<'_, BlockX16, ActTile16>, blocking: Blocking) {
    #[cfg(feature = "testing")]
    NATIVE_CALLS[blocking as usize].fetch_add(1, core::sync::atomic::Ordering::Relaxed);
    // SAFETY: forwarded; the configuration is the static one.
    unsafe { gemm_x16_tiles::<_, Avx512Ops>(&mut Native, job, blocking) }
}

/// The `amx` level's entry in the kernel table: [`gemm_x16_16x16_q8_k_amx`] with the level's
/// [`BLOCKING`].
///
/// # Safety
/// As [`gemm_x16_16x16_q8_k_amx`].
pub(crate) unsafe fn gemm_x16_16x16_q8_k_amx_level(job: Job<'_, BlockX16, ActTile16>) {
    // SAFETY: forwarded.
    unsafe { gemm_x16_16x16_q8_k_amx(&job, BLOCKING) }
}

/// The `amx` level's entry for narrow batches ([`AMX_MIN_COLS`](super::table::AMX_MIN_COLS) up
/// to [`AMX_WIDE_COLS`](super::table::AMX_WIDE_COLS) columns): [`gemm_x16_16x16_q8_k_amx`] with
/// [`Blocking::Narrow`].
///
/// # Safety
/// As [`gemm_x16_16x16_q8_k_amx`].
pub(crate) unsafe fn gemm_x16_narrow_q8_k_amx_level(job: Job<'_, BlockX16, ActTile16>) {
    // SAFETY: forwarded.
    unsafe { gemm_x16_16x16_q8_k_amx(&job, Blocking::Narrow) }
}

/// The tile kernel exactly as [`gemm_x16_16x16_q8_k_amx`] compiles it (the AVX-512 expansion and
/// float step), on other tiles `T` (test builds: feature `testing`): on the scalar tile model
/// (`amx_model::TileModel`), the test path for everything except the tile instructions on any
/// AVX-512 CPU; on `NoTiles`, everything but the tile instructions, natively (a timing floor).
///
/// # Safety
/// AVX-512 F/BW/VL/VNNI, AVX2, FMA, F16C available; `job` validated with a T16 pack; `tiles`
/// usable as [`Tiles`] says (nothing for the model and `NoTiles`).
#[cfg(feature = "testing")]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(crate) unsafe fn gemm_x16_tiles_avx512<T: Tiles>(
    tiles: &mut T,
    job: &Job<'_, BlockX16, ActTile16>,
    blocking: Blocking,
) {
    // SAFETY: forwarded.
    unsafe { gemm_x16_tiles::<_, Avx512Ops>(tiles, job, blocking) }
}

/// Calls of the native tile kernel in this process by blocking (`Blocking as usize`; one relaxed
/// add per call, i.e. per job, not per block), so that a test can show the tile instructions ran,
/// with each blocking: the scalar model gives the same bits, and so do the blockings, so equal
/// outputs alone cannot tell them apart. Read by `amx_model::native_tile_calls`. Test builds only
/// (feature `testing`): the library users link has no counter on its hot path.
#[cfg(feature = "testing")]
pub(crate) static NATIVE_CALLS: [core::sync::atomic::AtomicU64; 3] =
    [const { core::sync::atomic::AtomicU64::new(0) }; 3];
