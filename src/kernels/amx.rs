//! The AMX-INT8 X16 gemm, written once over a small tile interface ([`Tiles`]) so that the same
//! kernel runs natively (`x86_amx`: `ldtilecfg`, `tileloadd`, `tdpbssd`, ... through `asm!`)
//! and, on every machine, under [`TileModel`], a scalar model of those instructions' exact
//! semantics (Intel SDM / ISE pseudo-code), which the test suite holds against the reference.
//!
//! ## The arithmetic (one 16-row X16 block against 16 activation columns)
//! `tdpbssd C, A, B` adds to each int32 `C[m][n]` the products of the signed bytes
//! `A[m][4k..4k+4]` and `B[k][4n..4n+4]` over `k` (no saturation; the int32 adds wrap).
//! Slot `s` of X16 word `w` holds, in lane `n` (bytes `4n..4n+4`), the codes `u = v + 1` of weights
//! `16w + 4s .. 16w + 4s + 4` of row `n` ([`crate::format::BlockX16`]), so the bytes
//! `((word >> 2s) & 3) - 1` are one row of a `B` tile: row `k = 4w + s` (the 4-weight group
//! `k`), column `n` = weight row `n`. Words 0..4 give `B` rows 0..16 (weights 0..64), words 4..8
//! rows 16..32 (weights 64..128): two `B` tiles of 16 rows x 64 bytes per block, no transpose.
//! `A` is 16 columns (tokens) x 64 int8 activations ([`ActTile16`]), so after two `tdpbssd` the
//! `C` tile holds `isum` of every (column `m`, row `n`) of the block: exact, as
//! `|isum| <= 128 * 2 * 128`. Then the reference float step per 128-block, in block order:
//! `sumf = fma(fp32(d_w) * d_y, (float) isum, sumf)` ([`crate::reference::accumulate_block`] with
//! [`Contract::Fused`](crate::reference::Contract)), so every output has the reference bits.
//!
//! Tiles ([`Blocking::TwoByTwo`], the level's): `tmm0..tmm3` = the `C` tiles of 2 row tiles x 2
//! column groups, `tmm4`/`tmm5` = the two groups' `A` tiles and `tmm6`/`tmm7` = the two row
//! tiles' `B` tiles, for one half-block (64 weights) at a time. Each block is expanded once per
//! pass of up to [`PASS_TILES`] (row tile, column group) accumulators.

use super::act_pack::ActTile16;
use super::operands::{validate, Job, OutPtr, PackedWeights};
use crate::format::{BlockX16, X16_ROWS};
use crate::Error;
use core::ops::Range;

/// Palette 1 tile configuration: the 64-byte memory operand of `ldtilecfg`. `colsb[t]` bytes per
/// row and `rows[t]` rows of tile `t` (0..8; entries 8..16 reserved, zero).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, align(64))]
pub struct TileConfig {
    /// 1 (palette 0 means "release every tile").
    pub palette: u8,
    /// Restart row of an interrupted load/store: 0.
    pub start_row: u8,
    /// Reserved, zero.
    pub reserved: [u8; 14],
    /// Bytes per row of each tile.
    pub colsb: [u16; 16],
    /// Rows of each tile.
    pub rows: [u8; 16],
}

const _: () = assert!(core::mem::size_of::<TileConfig>() == 64);

impl TileConfig {
    /// Tiles `0..n` (`n <= 8`) of 16 rows x 64 bytes (the full tile), the rest unused.
    pub const fn full_tiles(n: usize) -> Self {
        assert!(n <= 8, "palette 1 has 8 tiles");
        let (mut colsb, mut rows) = ([0u16; 16], [0u8; 16]);
        let mut t = 0;
        while t < n {
            colsb[t] = 64;
            rows[t] = 16;
            t += 1;
        }
        TileConfig { palette: 1, start_row: 0, reserved: [0; 14], colsb, rows }
    }
}

/// The kernel's configuration: all 8 tiles of 16 rows x 64 bytes. A `static`:
/// `ldtilecfg` reads it from memory that the compiler cannot elide or leave unwritten (stock
/// ggml's tile configuration on the stack was optimized away: SIGILL at the first `tileloadd`).
pub static X16_TILE_CONFIG: TileConfig = TileConfig::full_tiles(8);

/// The tile operations the kernel uses, with the semantics of the AMX instructions of the same
/// names. Tile numbers are const parameters (they are part of the instruction encoding).
///
/// # Safety (every method)
/// The native implementation executes AMX instructions: the CPU must have AMX-TILE and AMX-INT8
/// with the tile state enabled and permitted (`KernelLevel::Amx` available); tile operations
/// other than [`Tiles::config`] need a configuration loaded, and shapes must agree with it
/// (else `#UD`). Pointers must be valid for the configured rows x bytes at `stride`.
pub trait Tiles {
    /// `ldtilecfg [cfg]`: loads the configuration and zeroes every tile.
    ///
    /// # Safety
    /// See the trait.
    unsafe fn config(&mut self, cfg: &'static TileConfig);
    /// `tilezero tmmT`.
    ///
    /// # Safety
    /// See the trait.
    unsafe fn zero<const T: u8>(&mut self);
    /// `tileloadd tmmT, [p + stride]`: row `r` from `p + r * stride` (configured bytes per row;
    /// the rest of the tile zeroed).
    ///
    /// # Safety
    /// See the trait.
    unsafe fn load<const T: u8>(&mut self, p: *const u8, stride: usize);
    /// `tdpbssd tmmC, tmmA, tmmB`: `C[m][n] += sum_k A[m][4k..4k+4] . B[k][4n..4n+4]`, signed
    /// bytes, int32 wrapping.
    ///
    /// # Safety
    /// See the trait.
    unsafe fn dpbssd<const C: u8, const A: u8, const B: u8>(&mut self);
    /// `tilestored [p + stride], tmmT`.
    ///
    /// # Safety
    /// See the trait.
    unsafe fn store<const T: u8>(&mut self, p: *mut u8, stride: usize);
    /// `tilerelease`: back to the init state (no configuration, tiles zero).
    ///
    /// # Safety
    /// See the trait.
    unsafe fn release(&mut self);
}

/// A scalar model of the tile unit (palette 1: 8 tiles of up to 16 rows x 64 bytes), exact per
/// the instructions' pseudo-code, and strict: every condition under which the hardware raises
/// `#UD` or `#GP` (no configuration, an unconfigured tile, shapes that disagree, a reserved
/// field set) panics instead, so the model also checks the kernel's configuration.
#[derive(Clone, Debug)]
pub struct TileModel {
    cfg: Option<TileConfig>,
    t: [[[u8; 64]; 16]; 8],
}

impl Default for TileModel {
    fn default() -> Self {
        TileModel { cfg: None, t: [[[0; 64]; 16]; 8] }
    }
}

impl TileModel {
    /// A model in the init state (no configuration).
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether a configuration is loaded (false after [`Tiles::release`]).
    pub fn configured(&self) -> bool {
        self.cfg.is_some()
    }

    /// `(rows, bytes per row)` of configured tile `t`; panics where the hardware faults.
    fn shape(&self, t: u8) -> (usize, usize) {
        let cfg = self.cfg.as_ref().expect("tile instruction without a configuration (#UD)");
        let t = usize::from(t);
        assert!(t < 8, "tile {t} does not exist");
        let (rows, colsb) = (usize::from(cfg.rows[t]), usize::from(cfg.colsb[t]));
        assert!(rows > 0 && colsb > 0, "tile {t} is not configured (#UD)");
        (rows, colsb)
    }

    /// Tile `t`'s row `r` as int32 lanes.
    fn dword(&self, t: u8, r: usize, i: usize) -> i32 {
        let b = &self.t[usize::from(t)][r][4 * i..4 * i + 4];
        i32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }
}

impl Tiles for TileModel {
    unsafe fn config(&mut self, cfg: &'static TileConfig) {
        assert_eq!(cfg.palette, 1, "only palette 1 is modelled");
        assert_eq!(cfg.start_row, 0);
        assert!(cfg.reserved.iter().all(|&b| b == 0), "reserved bytes set (#GP)");
        for t in 0..16 {
            let (rows, colsb) = (cfg.rows[t], cfg.colsb[t]);
            if t >= 8 {
                assert!(rows == 0 && colsb == 0, "tile {t} does not exist in palette 1 (#GP)");
            }
            assert!(rows <= 16 && colsb <= 64, "tile {t} too large (#GP)");
            assert_eq!(rows == 0, colsb == 0, "tile {t} half configured (#GP)");
        }
        self.cfg = Some(*cfg);
        self.t = [[[0; 64]; 16]; 8];
    }

    unsafe fn zero<const T: u8>(&mut self) {
        self.shape(T);
        self.t[usize::from(T)] = [[0; 64]; 16];
    }

    unsafe fn load<const T: u8>(&mut self, p: *const u8, stride: usize) {
        let (rows, colsb) = self.shape(T);
        let tile = &mut self.t[usize::from(T)];
        *tile = [[0; 64]; 16];
        for (r, row) in tile.iter_mut().enumerate().take(rows) {
            // SAFETY: the caller passes rows x colsb readable bytes at `stride` (trait contract).
            unsafe { core::ptr::copy_nonoverlapping(p.add(r * stride), row.as_mut_ptr(), colsb) };
        }
    }

    unsafe fn dpbssd<const C: u8, const A: u8, const B: u8>(&mut self) {
        let (c_rows, c_colsb) = self.shape(C);
        let (a_rows, a_colsb) = self.shape(A);
        let (b_rows, b_colsb) = self.shape(B);
        assert!(C != A && C != B && A != B, "tdpbssd needs three different tiles (#UD)");
        assert!(c_colsb % 4 == 0 && a_colsb % 4 == 0 && b_colsb % 4 == 0, "colsb not a multiple of 4 (#UD)");
        assert_eq!(a_colsb / 4, b_rows, "A's K/4 != B's rows (#UD)");
        assert_eq!(c_colsb, b_colsb, "C and B column bytes differ (#UD)");
        assert_eq!(c_rows, a_rows, "C and A rows differ (#UD)");
        MODEL_DPBSSD.with(|n| {
            let mut v = n.get();
            v[usize::from(C)] += 1;
            n.set(v);
        });
        for m in 0..c_rows {
            let mut tmp = [0i32; 16];
            for (n, v) in tmp.iter_mut().enumerate().take(c_colsb / 4) {
                *v = self.dword(C, m, n);
            }
            for k in 0..a_colsb / 4 {
                for (n, v) in tmp.iter_mut().enumerate().take(c_colsb / 4) {
                    let a = &self.t[usize::from(A)][m][4 * k..4 * k + 4];
                    let b = &self.t[usize::from(B)][k][4 * n..4 * n + 4];
                    // DPBD: four products of sign-extended bytes (each exact in 16 bits), added
                    // to the dword with 32-bit wrap-around.
                    let p: i32 = (0..4).map(|e| i32::from(a[e] as i8) * i32::from(b[e] as i8)).sum();
                    *v = v.wrapping_add(p);
                }
            }
            let row = &mut self.t[usize::from(C)][m];
            *row = [0; 64];
            for (n, v) in tmp.iter().enumerate().take(c_colsb / 4) {
                row[4 * n..4 * n + 4].copy_from_slice(&v.to_le_bytes());
            }
        }
    }

    unsafe fn store<const T: u8>(&mut self, p: *mut u8, stride: usize) {
        let (rows, colsb) = self.shape(T);
        for (r, row) in self.t[usize::from(T)].iter().enumerate().take(rows) {
            // SAFETY: the caller passes rows x colsb writable bytes at `stride` (trait contract).
            unsafe { core::ptr::copy_nonoverlapping(row.as_ptr(), p.add(r * stride), colsb) };
        }
    }

    unsafe fn release(&mut self) {
        self.cfg = None;
        self.t = [[[0; 64]; 16]; 8];
    }
}

std::thread_local! {
    /// `tdpbssd` run by this thread's [`TileModel`]s, by `C` tile ([`model_dpbssd_counts`]).
    static MODEL_DPBSSD: core::cell::Cell<[u64; 8]> = const { core::cell::Cell::new([0; 8]) };
}

/// How many `tdpbssd` the [`TileModel`]s of the calling thread have run, by `C` tile
/// (`tmm0..tmm7`), since the thread started. For tests: the [`Blocking`]s give the same bits, so
/// only this tells which arrangement of the chains ran (in [`gemm_model`]'s model).
pub fn model_dpbssd_counts() -> [u64; 8] {
    MODEL_DPBSSD.with(|n| n.get())
}

/// The kernel's vector work around the tiles, 16 lanes = 16 weight rows: expanding a block into
/// its `B` tiles, its row scales, and the per-block float step, the reference's
/// `sumf = fma(fp32(d_w) * d_y, (float) isum, sumf)`, the product rounded first. [`ScalarOps`]
/// is the portable one (under the model in tests); the native kernel uses AVX-512 (`x86_amx`),
/// which the tests also run under the model where the CPU has AVX-512.
pub trait VectorOps {
    /// `b[4w + s][j] = ((qs[w][j] >> 2s) & 3) - 1`: the block's two `B` tiles.
    ///
    /// # Safety
    /// The implementation's instructions are available.
    unsafe fn expand(blk: &BlockX16, b: &mut BTiles);
    /// The 16 fp16 row scales as f32 (exact).
    ///
    /// # Safety
    /// The implementation's instructions are available.
    unsafe fn scales(d: &[half::f16; 16]) -> [f32; 16];
    /// `acc[n] = fma(dw[n] * dy, isum[n] as f32, acc[n])` for every `n`.
    ///
    /// # Safety
    /// The implementation's instructions are available.
    unsafe fn step(acc: &mut [f32; 16], isum: &[i32; 16], dw: &[f32; 16], dy: f32);
}

/// [`VectorOps`] in plain Rust (`f32::mul_add`: one rounding, as the reference's
/// [`Contract::Fused`](crate::reference::Contract)).
pub struct ScalarOps;

impl VectorOps for ScalarOps {
    #[inline(always)]
    unsafe fn expand(blk: &BlockX16, b: &mut BTiles) {
        expand(blk, b)
    }
    #[inline(always)]
    unsafe fn scales(d: &[half::f16; 16]) -> [f32; 16] {
        let mut out = [0.0f32; 16];
        for (o, h) in out.iter_mut().zip(d.iter()) {
            *o = h.to_f32();
        }
        out
    }
    #[inline(always)]
    unsafe fn step(acc: &mut [f32; 16], isum: &[i32; 16], dw: &[f32; 16], dy: f32) {
        for ((a, &i), &d) in acc.iter_mut().zip(isum.iter()).zip(dw.iter()) {
            *a = (d * dy).mul_add(i as f32, *a);
        }
    }
}

/// How the kernel arranges its `tdpbssd` chains: the `C` tiles that hold one 128-block's int32
/// sums at a time. Both give the same bits (each output's sums and float steps do not depend on
/// it); they differ in how long a `tdpbssd` waits for the previous one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Blocking {
    /// One `C` tile at a time (16 weight rows x 16 columns, `tmm0`): a block's two `tdpbssd` form
    /// one dependent chain, and the next column group's `tilezero` waits for the store of the
    /// sums before it. The block's two `B` tiles stay resident (`tmm6`, `tmm7`) while the column
    /// groups pass.
    OneByOne,
    /// Up to four `C` tiles, 2 row tiles x 2 column groups (`C` = `tmm0..tmm3`, `A` = `tmm4`,
    /// `tmm5`, `B` = `tmm6`, `tmm7`, reloaded for the block's second half): four independent
    /// chains, so a `tdpbssd` does not wait for the sums of the one before it. The register
    /// blocking of oneDNN's and ONNX Runtime's AMX int8 kernels (2 x 2 accumulators), and the
    /// pattern with which [`peak`](super::peak)'s `tdpbssd` probe reaches the unit's issue limit
    /// (its latency is about 52 cycles at one instruction per 16, so one chain can keep the unit
    /// busy at most about a third of the time). A leftover row tile or column group runs 2x1,
    /// 1x2 or 1x1, with the tiles that are then free holding the second halves.
    TwoByTwo,
}

/// The blocking of the `amx` level. NOT measured yet (no AMX hardware has run the kernel): chosen
/// from the instruction's latency and throughput above; `examples/levels` times both on a CPU
/// with AMX ([`gemm_native`]).
pub const BLOCKING: Blocking = Blocking::TwoByTwo;

/// (Row tile, column group) accumulators per pass over a row tile's blocks: 16 of 16 x 16 float
/// sums (16 KiB), i.e. 16 column groups of one row tile or 8 of two. Each block's `B` tiles are
/// expanded once per pass and used by every column group of the pass.
pub const PASS_TILES: usize = 16;

/// `N` bytes aligned to 64 (a tile row per 64 bytes).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Aligned<T>(T);

/// One expanded X16 block: the two `B` tiles (rows 0..16 = weights 0..64, rows 16..32 = 64..128;
/// row `k` holds the 4-weight group `k` of each of the 16 weight rows, see the module docs).
pub type BTiles = [[i8; 64]; 32];

/// The int32 sums of one block, `C` tile `2g + r` for column group `g` and row tile `r`.
type CTiles = [[[i32; 16]; 16]; 4];

/// Expands an X16 block into the two `B` tiles: `b[4w + s][j] = ((qs[w][j] >> 2s) & 3) - 1`
/// ([`ScalarOps`]; the tests' statement of the layout).
#[inline(always)]
fn expand(blk: &BlockX16, b: &mut BTiles) {
    for (w, word) in blk.qs.iter().enumerate() {
        for s in 0..4 {
            let row = &mut b[4 * w + s];
            for (dst, &x) in row.iter_mut().zip(word.iter()) {
                *dst = ((x >> (2 * s)) & 3) as i8 - 1;
            }
        }
    }
}

/// Releases the tiles when dropped: at the kernel's exit, and on an unwinding panic too.
struct Session<'a, T: Tiles>(&'a mut T);

impl<T: Tiles> Drop for Session<'_, T> {
    #[inline(always)]
    fn drop(&mut self) {
        // SAFETY: the session was opened by loading a configuration on this thread.
        unsafe { self.0.release() }
    }
}

/// `p`'s first byte, for a tile load of 16 rows x 64 bytes at stride 64.
#[inline(always)]
fn tile_ptr<const N: usize>(p: &[[i8; 64]; N]) -> *const u8 {
    p.as_ptr().cast()
}

/// `C` tile `T` into `c[T]`.
///
/// # Safety
/// Tile `T` configured 16 x 64 (see [`Tiles`]).
#[inline(always)]
unsafe fn store_c<X: Tiles, const T: u8>(t: &mut X, c: &mut CTiles) {
    // SAFETY: c[T] is 16 rows of 64 writable bytes.
    unsafe { t.store::<T>(c[usize::from(T)].as_mut_ptr().cast(), 64) }
}

/// 1 row tile x 1 column group: `C` = `tmm0`, the block's `B` halves resident in `tmm6`/`tmm7`.
///
/// # Safety
/// [`X16_TILE_CONFIG`] loaded; `tmm6`/`tmm7` hold the block's `B` halves.
#[inline(always)]
unsafe fn sums_1x1<X: Tiles>(t: &mut X, a: &ActTile16, c: &mut CTiles) {
    // SAFETY: every tile is configured 16 x 64; each operand is 16 rows of 64 bytes.
    unsafe {
        t.zero::<0>();
        t.load::<4>(tile_ptr(&a.qs[0]), 64);
        t.load::<5>(tile_ptr(&a.qs[1]), 64);
        t.dpbssd::<0, 4, 6>();
        t.dpbssd::<0, 5, 7>();
        store_c::<_, 0>(t, c);
    }
}

/// 1 row tile x 2 column groups: `C` = `tmm0`, `tmm2`; `A` halves in `tmm4`, `tmm5` (first) and
/// `tmm1`, `tmm3` (second); the block's `B` halves resident in `tmm6`/`tmm7`.
///
/// # Safety
/// As [`sums_1x1`].
#[inline(always)]
unsafe fn sums_1x2<X: Tiles>(t: &mut X, a0: &ActTile16, a1: &ActTile16, c: &mut CTiles) {
    // SAFETY: as in sums_1x1.
    unsafe {
        t.zero::<0>();
        t.zero::<2>();
        t.load::<4>(tile_ptr(&a0.qs[0]), 64);
        t.load::<5>(tile_ptr(&a1.qs[0]), 64);
        t.dpbssd::<0, 4, 6>();
        t.dpbssd::<2, 5, 6>();
        t.load::<1>(tile_ptr(&a0.qs[1]), 64);
        t.load::<3>(tile_ptr(&a1.qs[1]), 64);
        t.dpbssd::<0, 1, 7>();
        t.dpbssd::<2, 3, 7>();
        store_c::<_, 0>(t, c);
        store_c::<_, 2>(t, c);
    }
}

/// 2 row tiles x 1 column group: `C` = `tmm0`, `tmm1`; `A` halves in `tmm4`, `tmm5`; `B` first
/// halves in `tmm6`, `tmm7`, second halves in `tmm2`, `tmm3`.
///
/// # Safety
/// [`X16_TILE_CONFIG`] loaded.
#[inline(always)]
unsafe fn sums_2x1<X: Tiles>(t: &mut X, a: &ActTile16, b: &[BTiles; 2], c: &mut CTiles) {
    // SAFETY: as in sums_1x1.
    unsafe {
        t.zero::<0>();
        t.zero::<1>();
        t.load::<4>(tile_ptr(&a.qs[0]), 64);
        t.load::<6>(tile_ptr(&b[0]), 64);
        t.load::<7>(tile_ptr(&b[1]), 64);
        t.dpbssd::<0, 4, 6>();
        t.dpbssd::<1, 4, 7>();
        t.load::<5>(tile_ptr(&a.qs[1]), 64);
        t.load::<2>(b[0][16..].as_ptr().cast(), 64);
        t.load::<3>(b[1][16..].as_ptr().cast(), 64);
        t.dpbssd::<0, 5, 2>();
        t.dpbssd::<1, 5, 3>();
        store_c::<_, 0>(t, c);
        store_c::<_, 1>(t, c);
    }
}

/// 2 row tiles x 2 column groups: `C` = `tmm0..tmm3`, `A` = `tmm4`, `tmm5` and `B` = `tmm6`,
/// `tmm7`, each loaded again for the block's second half.
///
/// # Safety
/// [`X16_TILE_CONFIG`] loaded.
#[inline(always)]
unsafe fn sums_2x2<X: Tiles>(t: &mut X, a0: &ActTile16, a1: &ActTile16, b: &[BTiles; 2], c: &mut CTiles) {
    // SAFETY: as in sums_1x1.
    unsafe {
        t.zero::<0>();
        t.zero::<1>();
        t.zero::<2>();
        t.zero::<3>();
        for h in 0..2 {
            t.load::<4>(tile_ptr(&a0.qs[h]), 64);
            t.load::<5>(tile_ptr(&a1.qs[h]), 64);
            t.load::<6>(b[0][16 * h..].as_ptr().cast(), 64);
            t.load::<7>(b[1][16 * h..].as_ptr().cast(), 64);
            t.dpbssd::<0, 4, 6>();
            t.dpbssd::<1, 4, 7>();
            t.dpbssd::<2, 5, 6>();
            t.dpbssd::<3, 5, 7>();
        }
        store_c::<_, 0>(t, c);
        store_c::<_, 1>(t, c);
        store_c::<_, 2>(t, c);
        store_c::<_, 3>(t, c);
    }
}

/// The X16 x Q8_K gemm on tiles: the job's row tiles one or two at a time (`blocking`), column
/// groups of 16 (the last one padded) in passes of [`PASS_TILES`] accumulators, each block's
/// `isum` tiles from two `tdpbssd` each ([`Blocking`]), then the reference float step in block
/// order. Loads the configuration at the start of every pass (after the calls that zero its sums) and
/// releases the tiles at exit.
///
/// # Safety
/// `job` validated by `gemm_raw` (or [`gemm_model`]) with a [`ActFormat::T16`](super::act_pack::ActFormat::T16) pack;
/// for the native tiles, AMX usable on this thread's process (see [`Tiles`]).
#[inline(always)]
pub(crate) unsafe fn gemm_x16_tiles<T: Tiles, S: VectorOps>(
    tiles: &mut T,
    job: &Job<'_, BlockX16, ActTile16>,
    blocking: Blocking,
) {
    // The configuration is loaded per pass (below), not here: see there.
    let s = Session(tiles);
    let nb = job.nb;
    let groups = job.n_cols.div_ceil(16);
    let (max_r, max_g) = match blocking {
        Blocking::OneByOne => (1, 1),
        Blocking::TwoByTwo => (2, 2),
    };
    let mut b = Aligned([[[0i8; 64]; 32]; 2]);
    let mut c = Aligned([[[0i32; 16]; 16]; 4]);
    // accumulator of (column group g of the pass, row tile r): sumf[g * nr + r], [column][row];
    // aligned, so that each column's 16 rows are one cache line
    let mut sumf = Aligned([[[0.0f32; 16]; 16]; PASS_TILES]);
    let mut t = job.tiles.start;
    while t < job.tiles.end {
        let nr = max_r.min(job.tiles.end - t);
        let mut g0 = 0;
        while g0 < groups {
            let ng = (PASS_TILES / nr).min(groups - g0);
            for acc in sumf.0.iter_mut().take(ng * nr) {
                *acc = [[0.0; 16]; 16];
            }
            // (Re)load the configuration after the zeroing above, right before the pass's first
            // tile instruction. The psABI makes the tile state caller-saved, so a configuration
            // need not survive a call, and rustc emits that zeroing and the initialization of
            // the arrays above as `memset`/`memcpy` calls (LLVM's own AMX code re-issues
            // `ldtilecfg` after calls for the same reason). No tile data lives across passes;
            // `ldtilecfg` zeroes every tile. `tests/amx_calls.rs` checks the compiled kernel.
            // SAFETY: the configuration is a static; the caller guarantees the tile unit is usable.
            unsafe { s.0.config(&X16_TILE_CONFIG) };
            for i in 0..nb {
                let mut dw = [[0.0f32; 16]; 2];
                for (r, (br, dwr)) in b.0.iter_mut().zip(dw.iter_mut()).enumerate().take(nr) {
                    let blk = &job.tile(t + r)[i];
                    // SAFETY: S's instructions are available (the caller's target features).
                    unsafe {
                        S::expand(blk, br);
                        *dwr = S::scales(&blk.d);
                    }
                }
                if nr == 1 {
                    // SAFETY: b[0] holds 32 rows of 64 bytes; tiles 6 and 7 are 16 x 64.
                    unsafe {
                        s.0.load::<6>(tile_ptr(&b.0[0]), 64);
                        s.0.load::<7>(b.0[0][16..].as_ptr().cast(), 64);
                    }
                }
                let mut g = 0;
                while g < ng {
                    let pair = max_g == 2 && g + 1 < ng;
                    let a0 = &job.act[(g0 + g) * nb + i];
                    let a1 = if pair { &job.act[(g0 + g + 1) * nb + i] } else { a0 };
                    // SAFETY: the configuration is loaded; with one row tile its B halves are in
                    // tmm6/tmm7 (just above).
                    unsafe {
                        match (nr, pair) {
                            (1, false) => sums_1x1(s.0, a0, &mut c.0),
                            (1, true) => sums_1x2(s.0, a0, a1, &mut c.0),
                            (_, false) => sums_2x1(s.0, a0, &b.0, &mut c.0),
                            (_, true) => sums_2x2(s.0, a0, a1, &b.0, &mut c.0),
                        }
                    }
                    for (gg, a) in [a0, a1].into_iter().enumerate().take(1 + usize::from(pair)) {
                        for (r, dwr) in dw.iter().enumerate().take(nr) {
                            let acc = &mut sumf.0[(g + gg) * nr + r];
                            for ((srow, crow), &dy) in acc.iter_mut().zip(c.0[2 * gg + r].iter()).zip(a.d.iter()) {
                                // SAFETY: as for S::scales.
                                unsafe { S::step(srow, crow, dwr, dy) };
                            }
                        }
                    }
                    g += 1 + usize::from(pair);
                }
            }
            for gl in 0..ng {
                let c0 = 16 * (g0 + gl);
                for r in 0..nr {
                    let r0 = X16_ROWS * (t + r);
                    let n_rows = X16_ROWS.min(job.n_rows - r0);
                    for (m, srow) in sumf.0[gl * nr + r].iter().enumerate().take(job.n_cols - c0) {
                        for (n, &v) in srow.iter().enumerate().take(n_rows) {
                            // SAFETY: the job owns rows r0 .. r0 + n_rows of every column (validated).
                            unsafe { job.out.write(r0 + n, c0 + m, v) };
                        }
                    }
                }
            }
            g0 += ng;
        }
        t += nr;
    }
    drop(s);
}

/// Checks a call of [`gemm_model`] or [`gemm_native`] and builds its job; `None` when there is
/// nothing to compute.
fn tile_job<'a>(
    w: &PackedWeights<'a>,
    a: &super::act_pack::PackedActs<'a>,
    dst: &mut [f32],
    col_stride: usize,
    rows: &Range<usize>,
) -> Result<Option<Job<'a, BlockX16, ActTile16>>, Error> {
    let PackedWeights::X16 { blocks, n_rows, k } = *w else {
        return Err(Error::InvalidArgument);
    };
    if a.format != super::act_pack::ActFormat::T16 {
        return Err(Error::InvalidArgument);
    }
    validate(w, a, dst.len(), col_stride, rows)?;
    if rows.is_empty() || a.n_cols == 0 {
        return Ok(None);
    }
    let tiles = rows.start / X16_ROWS..rows.end.div_ceil(X16_ROWS);
    let out = OutPtr { ptr: dst.as_mut_ptr(), col_stride };
    Ok(Some(Job { w: blocks, nb: k / crate::format::QK, n_rows, act: a.elements(), n_cols: a.n_cols, out, tiles }))
}

/// The tile kernel under [`TileModel`], on any machine: rows `rows` of `dst = W x A` from X16
/// weights and a [`ActFormat::T16`](super::act_pack::ActFormat::T16) pack, element (row `r`,
/// column `j`) at `dst[j * col_stride + r]`, with the tile chains arranged as `blocking` says.
/// What `GGML_T2P_KERNEL=amx` computes natively (with [`BLOCKING`]) for batches of
/// [`AMX_MIN_COLS`](super::dispatch::AMX_MIN_COLS) or more columns, for tests.
///
/// With `simd_step`, the expansion, scale conversion and float step are the native kernel's AVX-512 code
/// (x86-64 with AVX-512 VNNI only: [`Error::Unsupported`] elsewhere), so on such a CPU everything
/// but the tile instructions is the native kernel's machine code; else [`ScalarOps`].
///
/// # Errors
/// [`Error::InvalidArgument`] unless `w` is X16 and `a` is a T16 pack; otherwise as
/// [`gemm_raw`](super::gemm_raw) (shape, range, buffer checks).
pub fn gemm_model(
    w: &PackedWeights<'_>,
    a: &super::act_pack::PackedActs<'_>,
    dst: &mut [f32],
    col_stride: usize,
    rows: Range<usize>,
    simd_step: bool,
    blocking: Blocking,
) -> Result<(), Error> {
    let Some(job) = tile_job(w, a, dst, col_stride, &rows)? else {
        return Ok(());
    };
    let mut model = TileModel::new();
    #[cfg(target_arch = "x86_64")]
    if simd_step {
        if !super::KernelLevel::Avx512Vnni.is_available() {
            return Err(Error::Unsupported);
        }
        // SAFETY: validated above; AVX-512 available (checked); dst is uniquely borrowed.
        unsafe { super::x86_amx::gemm_x16_model_avx512(&mut model, &job, blocking) };
        return Ok(());
    }
    if simd_step {
        return Err(Error::Unsupported);
    }
    // SAFETY: validated above; the model needs no hardware; dst is uniquely borrowed.
    unsafe { gemm_x16_tiles::<_, ScalarOps>(&mut model, &job, blocking) };
    debug_assert!(!model.configured());
    Ok(())
}

/// The native tile kernel with the chains arranged as `blocking` says, on one thread: what the
/// `amx` level runs (with [`BLOCKING`]) for batches of
/// [`AMX_MIN_COLS`](super::dispatch::AMX_MIN_COLS) or more columns; arguments as [`gemm_model`].
/// For comparing blockings on AMX hardware (`examples/levels`) and for tests; counts in
/// [`native_tile_calls`].
///
/// # Errors
/// [`Error::Unsupported`] unless the `amx` level is available (CPU, OS, permission); otherwise
/// as [`gemm_model`].
pub fn gemm_native(
    w: &PackedWeights<'_>,
    a: &super::act_pack::PackedActs<'_>,
    dst: &mut [f32],
    col_stride: usize,
    rows: Range<usize>,
    blocking: Blocking,
) -> Result<(), Error> {
    gemm_x86(true, w, a, dst, col_stride, rows, blocking)
}

/// The native kernel with its tile instructions left out (`x86_amx::NoTiles`: the loads,
/// `tdpbssd` and stores of tiles do nothing), on one thread: its expansion, float step and loop
/// exactly as the `amx` level compiles them, on any CPU with AVX-512 VNNI, for timing the floor
/// under the tile kernel's time (`examples/levels`: `amx -tiles`). Arguments as [`gemm_native`].
/// The outputs are NOT products: the float step reads whatever the `C` buffer holds (zeros).
///
/// # Errors
/// [`Error::Unsupported`] unless the `avx512vnni` level is available (x86-64 only); otherwise as
/// [`gemm_model`].
pub fn gemm_without_tiles(
    w: &PackedWeights<'_>,
    a: &super::act_pack::PackedActs<'_>,
    dst: &mut [f32],
    col_stride: usize,
    rows: Range<usize>,
    blocking: Blocking,
) -> Result<(), Error> {
    gemm_x86(false, w, a, dst, col_stride, rows, blocking)
}

/// [`gemm_native`] (`tiles`) or [`gemm_without_tiles`]: checks the level each needs (`amx`, or
/// `avx512vnni` for the kernel that runs no tile instruction), then runs the job.
fn gemm_x86(
    tiles: bool,
    w: &PackedWeights<'_>,
    a: &super::act_pack::PackedActs<'_>,
    dst: &mut [f32],
    col_stride: usize,
    rows: Range<usize>,
    blocking: Blocking,
) -> Result<(), Error> {
    let need = if tiles { super::KernelLevel::Amx } else { super::KernelLevel::Avx512Vnni };
    if !need.is_available() {
        return Err(Error::Unsupported);
    }
    let Some(job) = tile_job(w, a, dst, col_stride, &rows)? else {
        return Ok(());
    };
    #[cfg(target_arch = "x86_64")]
    // SAFETY: validated above; the level each kernel needs is available (checked); dst is
    // uniquely borrowed.
    unsafe {
        if tiles {
            super::x86_amx::gemm_x16_16x16_q8_k_amx(&job, blocking)
        } else {
            super::x86_amx::gemm_x16_no_tiles_avx512(&job, blocking)
        }
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (job, blocking);
    Ok(())
}

/// How many times the native AMX tile kernel (`tdpbssd` through `asm!`) has run in this process
/// with `blocking`: one per job of a gemm on the `amx` level (with [`BLOCKING`]) with at least
/// [`AMX_MIN_COLS`](super::dispatch::AMX_MIN_COLS) columns, and one per [`gemm_native`] call; 0
/// where the level never ran (and on other architectures). For tests: the scalar model gives the
/// same bits, and so do the blockings, so only this tells that the tile instructions themselves
/// ran, and with which blocking.
pub fn native_tile_calls(blocking: Blocking) -> u64 {
    #[cfg(target_arch = "x86_64")]
    return super::x86_amx::NATIVE_CALLS[blocking as usize].load(core::sync::atomic::Ordering::Relaxed);
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = blocking;
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic byte stream.
    fn bytes(seed: u64, n: usize) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 32) as u8
            })
            .collect()
    }

    /// The model's `tdpbssd` against the formula written out directly, from a C tile that starts
    /// next to the int32 limits so that the adds wrap both ways.
    #[test]
    fn model_tdpbssd_is_the_formula_with_wrapping() {
        let a = bytes(1, 16 * 64);
        let mut bb = bytes(2, 16 * 64);
        bb[0..4].copy_from_slice(&[0x80; 4]); // -128 x A: large products
        let mut c0 = vec![0u8; 16 * 64];
        for m in 0..16 {
            for n in 0..16 {
                let v: i32 = match (m + n) % 3 {
                    0 => i32::MAX - 1000,
                    1 => i32::MIN + 1000,
                    _ => (m * 1000 + n) as i32 - 5000,
                };
                c0[64 * m + 4 * n..64 * m + 4 * n + 4].copy_from_slice(&v.to_le_bytes());
            }
        }
        let mut t = TileModel::new();
        let mut out = vec![0u8; 16 * 64];
        // SAFETY: the model; every buffer is 16 x 64 bytes.
        unsafe {
            t.config(&X16_TILE_CONFIG);
            t.load::<0>(c0.as_ptr(), 64);
            t.load::<1>(a.as_ptr(), 64);
            t.load::<3>(bb.as_ptr(), 64);
            t.dpbssd::<0, 1, 3>();
            t.store::<0>(out.as_mut_ptr(), 64);
            t.release();
        }
        assert!(!t.configured());
        let mut wrapped = 0;
        for m in 0..16 {
            for n in 0..16 {
                let start = i64::from(i32::from_le_bytes(c0[64 * m + 4 * n..][..4].try_into().unwrap()));
                let mut exact = start;
                for k in 0..16 {
                    for e in 0..4 {
                        exact += i64::from(a[64 * m + 4 * k + e] as i8) * i64::from(bb[64 * k + 4 * n + e] as i8);
                    }
                }
                let want = exact as i32; // two's complement wrap-around
                wrapped += usize::from(i64::from(want) != exact);
                let got = i32::from_le_bytes(out[64 * m + 4 * n..][..4].try_into().unwrap());
                assert_eq!(got, want, "C[{m}][{n}]");
            }
        }
        assert!(wrapped > 0, "the test data must make some sums wrap");
    }

    /// Loads honour the stride and zero the columns past the configured width; stores write only
    /// the configured bytes.
    #[test]
    fn model_load_store_stride() {
        static NARROW: TileConfig = TileConfig {
            palette: 1,
            start_row: 0,
            reserved: [0; 14],
            colsb: [8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            rows: [3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        };
        let src: Vec<u8> = (0..100).collect();
        let mut dst = vec![0xFFu8; 60];
        let mut t = TileModel::new();
        // SAFETY: the model; 3 rows of 8 bytes at strides 20 and 16 fit both buffers.
        unsafe {
            t.config(&NARROW);
            t.load::<0>(src.as_ptr().add(1), 20);
            t.store::<0>(dst.as_mut_ptr(), 16);
        }
        for r in 0..3 {
            assert_eq!(&dst[16 * r..16 * r + 8], &src[1 + 20 * r..1 + 20 * r + 8]);
            assert!(dst[16 * r + 8..16 * r + 16].iter().all(|&b| b == 0xFF), "bytes past colsb untouched");
        }
        assert!(t.t[0][0][8..].iter().all(|&b| b == 0) && t.t[0][3].iter().all(|&b| b == 0));
    }

    /// The model refuses what the hardware refuses.
    #[test]
    #[should_panic(expected = "without a configuration")]
    fn model_needs_a_configuration() {
        let mut t = TileModel::new();
        // SAFETY: the model (it panics, as the hardware would fault).
        unsafe { t.zero::<0>() };
    }

    /// Expansion: B row `4w + s`, byte `4n + e` is row `n`'s weight `16w + 4s + e`, i.e. `A`'s
    /// value index `4k + e` for B row `k` (checked against the layout's own accessor).
    #[test]
    fn expansion_is_the_x16_layout() {
        let raw = bytes(7, 512);
        let mut blk = BlockX16::default();
        for (w, word) in blk.qs.iter_mut().enumerate() {
            word.copy_from_slice(&raw[64 * w..64 * w + 64]);
        }
        let mut b = [[0i8; 64]; 32];
        expand(&blk, &mut b);
        for n in 0..16 {
            for j in 0..128 {
                let (k, e) = (j / 4, j % 4);
                assert_eq!(i32::from(b[k][4 * n + e]), i32::from(blk.code(n, j)) - 1, "row {n} weight {j}");
            }
        }
    }
}
