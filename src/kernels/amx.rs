//! The AMX-INT8 X16 gemm, written once over a small tile interface ([`Tiles`]) so that the same
//! kernel runs natively (`x86_amx`: `ldtilecfg`, `tileloadd`, `tdpbssd`, ... through `asm!`)
//! and, in test builds (feature `testing`: `amx_model`) on every machine, under `TileModel`, a
//! scalar model of those instructions' exact semantics (Intel SDM / ISE pseudo-code), which the
//! test suite holds against the reference. This file holds only what the library runs: the
//! tile interface, the configuration, the blocking and the kernel body.
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
use super::operands::Job;
use crate::format::{BlockX16, X16_ROWS};

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

/// The kernel's vector work around the tiles, 16 lanes = 16 weight rows: expanding a block into
/// its `B` tiles, its row scales, and the per-block float step, the reference's
/// `sumf = fma(fp32(d_w) * d_y, (float) isum, sumf)`, the product rounded first. The native
/// kernel uses AVX-512 (`x86_amx`), which the tests also run under the model where the CPU has
/// AVX-512; `ScalarOps` (test builds, `amx_model`) is the portable one.
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
    /// A hint to bring `blk`'s bytes toward the core (never faults; may do nothing).
    fn prefetch(blk: &BlockX16);
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
    /// pattern with which the `tdpbssd` issue-limit probe (`benches/support/peak.rs`) reaches the
    /// unit's issue limit (its latency is about 52 cycles at one instruction per 16, so one chain
    /// can keep the unit busy at most about a third of the time). A leftover row tile or column group runs 2x1,
    /// 1x2 or 1x1, with the tiles that are then free holding the second halves.
    TwoByTwo,
    /// Narrow batches (a few columns; weights that come from memory and serve few columns each):
    /// per column group (up to 16 columns, the last maybe fewer), [`NARROW_STREAMS`] row tiles at
    /// a time as in the 2x1 case above (`C` = `tmm0`, `tmm1`; `A` halves `tmm4`, `tmm5`; `B`
    /// halves `tmm6`, `tmm7`, `tmm2`, `tmm3`), but with the `A` and `C` tiles configured with as
    /// many rows as the group has columns ([`NARROW_TILE_CONFIGS`]): `tdpbssd` takes the same 16
    /// cycles for fewer rows, but no padding column is loaded, stored or stepped. Each block is
    /// expanded while the previous one's `tdpbssd` run (two sets of expanded tiles), and the
    /// weights are prefetched [`NARROW_PF_BLOCKS`] blocks ahead. Measured against the
    /// `avx512vnni` gemm and the 2x2 tiles: see [`AMX_MIN_COLS`](super::table::AMX_MIN_COLS).
    Narrow,
}

/// Row tiles [`Blocking::Narrow`] runs at a time (its `C` tiles `tmm0`, `tmm1`). Measured with
/// four (`tmm0..tmm3`, each row tile's `B` halves loaded in turn into `tmm6`/`tmm7`) from DRAM:
/// the same times within 2% at 2 to 16 columns.
pub const NARROW_STREAMS: usize = 2;

/// Blocks ahead of the current one whose weights [`Blocking::Narrow`] prefetches in each row
/// tile (the VNNI kernels' distance, `x86::PF_BLOCKS`).
pub const NARROW_PF_BLOCKS: usize = 8;

/// The tile configurations of [`Blocking::Narrow`], entry `m - 1` for a column group of `m`
/// columns: the `C` tiles `tmm0`, `tmm1` and the `A` tiles `tmm4`, `tmm5` of `m` rows x 64 bytes,
/// the `B` tiles `tmm2`, `tmm3`, `tmm6`, `tmm7` of 16 rows x 64 bytes. Statics, as
/// [`X16_TILE_CONFIG`].
pub static NARROW_TILE_CONFIGS: [TileConfig; 16] = narrow_configs();

/// [`NARROW_TILE_CONFIGS`]' entries.
const fn narrow_configs() -> [TileConfig; 16] {
    // the tiles with one row per column: C0, C1 and the A halves
    const PER_COLUMN: [usize; 4] = [0, 1, 4, 5];
    let mut out = [TileConfig::full_tiles(8); 16];
    let mut m = 1;
    while m <= 16 {
        let mut j = 0;
        while j < PER_COLUMN.len() {
            out[m - 1].rows[PER_COLUMN[j]] = m as u8;
            j += 1;
        }
        m += 1;
    }
    out
}

/// The blocking of the `amx` level. Measured (`examples/levels`, one thread, an AMX Xeon under
/// KVM, 4096 x 4096): 2x2 ran 1.01-1.31x as fast as 1x1 from 16 to 512 columns;
/// `examples/levels` times the other one beside it on any CPU with AMX (`amx_model::gemm_native`,
/// test builds).
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
/// Tile `T` configured with at most 16 rows of 64 bytes (see [`Tiles`]).
#[inline(always)]
unsafe fn store_c<X: Tiles, const T: u8>(t: &mut X, c: &mut CTiles) {
    // SAFETY: c[T] is 16 rows of 64 writable bytes, as many as any configuration stores.
    unsafe { t.store::<T>(c[usize::from(T)].as_mut_ptr().cast(), 64) }
}

/// 1 row tile x 1 column group: `C` = `tmm0`, the block's `B` halves resident in `tmm6`/`tmm7`.
///
/// # Safety
/// [`X16_TILE_CONFIG`] or a [`NARROW_TILE_CONFIGS`] entry loaded (`C` and `A` tiles of the same
/// rows, at most 16, `B` tiles 16 x 64); `tmm6`/`tmm7` hold the block's `B` halves.
#[inline(always)]
unsafe fn sums_1x1<X: Tiles>(t: &mut X, a: &ActTile16, c: &mut CTiles) {
    // SAFETY: the shapes agree (the caller's configuration); each operand in memory is 16 rows of
    // 64 bytes, as many as any configured tile reads or writes.
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
/// As [`sums_1x1`] (without its resident `B` halves).
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

/// The X16 x Q8_K gemm on tiles: column groups of 16 (the last one padded) in passes of
/// [`pass_groups`] (the outer loop), the job's row tiles one or two at a time (`blocking`) inside
/// each, each block's `isum` tiles from two `tdpbssd` each ([`Blocking`]), then the reference float
/// step in block order. Loads the configuration for every (pass, row tiles) before its first tile
/// instruction (after the calls that zero its sums) and releases the tiles at exit.
///
/// # Safety
/// `job` validated by `gemm_raw` (or the test entry points of `amx_model`) with a
/// [`ActFormat::T16`](super::act_pack::ActFormat::T16) pack;
/// for the native tiles, AMX usable on this thread's process (see [`Tiles`]).
#[inline(always)]
pub(crate) unsafe fn gemm_x16_tiles<T: Tiles, S: VectorOps>(
    tiles: &mut T,
    job: &Job<'_, BlockX16, ActTile16>,
    blocking: Blocking,
) {
    // The configuration is loaded per pass (below), not here: see there.
    let s = Session(tiles);
    if blocking == Blocking::Narrow {
        // SAFETY: forwarded.
        unsafe { narrow::<T, S>(s.0, job) };
        return;
    }
    let nb = job.nb;
    let groups = job.n_cols.div_ceil(16);
    let (max_r, max_g) = match blocking {
        Blocking::OneByOne => (1, 1),
        // (Narrow returned above)
        Blocking::TwoByTwo | Blocking::Narrow => (2, 2),
    };
    let mut b = Aligned([[[0i8; 64]; 32]; 2]);
    let mut c = Aligned([[[0i32; 16]; 16]; 4]);
    // accumulator of (column group g of the pass, row tile r): sumf[g * nr + r], [column][row];
    // aligned, so that each column's 16 rows are one cache line
    let mut sumf = Aligned([[[0.0f32; 16]; 16]; PASS_TILES]);
    // Column groups per pass: the pass is the outer loop, so that its activations stay in L2
    // while every row tile of the job passes (the weights stream once per pass).
    let pass = pass_groups(nb, max_r);
    let mut g0 = 0;
    while g0 < groups {
        let ng = pass.min(groups - g0);
        let mut t = job.tiles.start;
        while t < job.tiles.end {
            let nr = max_r.min(job.tiles.end - t);
            for acc in sumf.0.iter_mut().take(ng * nr) {
                *acc = [[0.0; 16]; 16];
            }
            // (Re)load the configuration after the zeroing above, right before the pass's first
            // tile instruction. The psABI makes the tile state caller-saved, so a configuration
            // need not survive a call, and rustc emits that zeroing and the initialization of
            // the arrays above as `memset`/`memcpy` calls (LLVM's own AMX code re-issues
            // `ldtilecfg` after calls for the same reason). No tile data lives across passes;
            // `ldtilecfg` zeroes every tile. `tests/rust/amx_calls.rs` checks the compiled kernel.
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
                    // SAFETY: the job's row tile t + r, columns c0 .. n_cols.
                    unsafe { write_sums(job, &sumf.0[gl * nr + r], t + r, c0, job.n_cols - c0) };
                }
            }
            t += nr;
        }
        g0 += ng;
    }
    drop(s);
}

/// The float sums of row tile `t` for columns `c0 ..` (`acc[column][row]`, at most `cols` of its 16
/// columns) into the job's output; a partial last tile's padding rows are never stored.
///
/// # Safety
/// The job owns row tile `t`, and columns `c0 .. c0 + min(cols, 16)` are inside its output.
#[inline(always)]
unsafe fn write_sums(job: &Job<'_, BlockX16, ActTile16>, acc: &[[f32; 16]; 16], t: usize, c0: usize, cols: usize) {
    let r0 = X16_ROWS * t;
    let n_rows = X16_ROWS.min(job.n_rows - r0);
    for (m, srow) in acc.iter().enumerate().take(cols) {
        for (n, &v) in srow.iter().enumerate().take(n_rows) {
            // SAFETY: the job owns rows r0 .. r0 + n_rows of these columns (the caller's contract).
            unsafe { job.out.write(r0 + n, c0 + m, v) };
        }
    }
}

/// Block `i` of row tiles `t .. t + nr` expanded into `b` and its scales into `dw`, the weights
/// [`NARROW_PF_BLOCKS`] blocks ahead prefetched (from `job_blocks`, the job's own blocks: into the
/// next tile at a tile's end). A function, not a closure: a closure is not inlined into the
/// caller's `#[target_feature]` function, and every intrinsic in it would become a call.
///
/// # Safety
/// As [`gemm_x16_tiles`]; the job owns tiles `t .. t + nr`, `i < job.nb`.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // index loops on purpose (see the body)
unsafe fn narrow_expand<S: VectorOps>(
    job: &Job<'_, BlockX16, ActTile16>,
    job_blocks: &[BlockX16],
    b: &mut [BTiles; NARROW_STREAMS],
    dw: &mut [[f32; 16]; NARROW_STREAMS],
    t: usize,
    nr: usize,
    i: usize,
) {
    // (index loops: iterator adapters left as calls at the test profile's opt-level would end the
    // tile configuration, see gemm_x16_tiles)
    for r in 0..nr {
        if let Some(ahead) = job_blocks.get((t + r) * job.nb + i + NARROW_PF_BLOCKS) {
            S::prefetch(ahead);
        }
        let blk = &job.tile(t + r)[i];
        // SAFETY: S's instructions are available (the caller's target features).
        unsafe {
            S::expand(blk, &mut b[r]);
            dw[r] = S::scales(&blk.d);
        }
    }
}

/// [`Blocking::Narrow`]'s kernel (see there): the same `isum` per (column, row, block) and the
/// same float steps in block order as the other blockings, so the same bits.
///
/// # Safety
/// As [`gemm_x16_tiles`]; called with the session open (the tiles released by the caller).
#[inline(always)]
#[allow(clippy::needless_range_loop)] // index loops on purpose: see narrow_expand
unsafe fn narrow<T: Tiles, S: VectorOps>(tiles: &mut T, job: &Job<'_, BlockX16, ActTile16>) {
    let nb = job.nb;
    // the expanded blocks, two sets: block i's tiles are read from one while block i + 1 is
    // expanded into the other (so the tile unit multiplies while the vector units expand)
    let mut b = Aligned([[[[0i8; 64]; 32]; NARROW_STREAMS]; 2]);
    let mut dw = [[[0.0f32; 16]; NARROW_STREAMS]; 2];
    let mut c = Aligned([[[0i32; 16]; 16]; 4]);
    // sumf[r][m]: row tile t + r, column m of the group, its 16 rows
    let mut sumf = Aligned([[[0.0f32; 16]; 16]; NARROW_STREAMS]);
    // the job's weight blocks, for the prefetch past the end of a tile (never past the job's own)
    let job_blocks = &job.w[..job.tiles.end * nb];
    for g in 0..job.n_cols.div_ceil(16) {
        let c0 = 16 * g;
        let m = (job.n_cols - c0).min(16);
        let mut t = job.tiles.start;
        while t < job.tiles.end {
            let nr = NARROW_STREAMS.min(job.tiles.end - t);
            for acc in sumf.0.iter_mut().take(nr) {
                for col in acc.iter_mut().take(m) {
                    *col = [0.0; 16];
                }
            }
            // SAFETY: the job owns tiles t .. t + nr; block 0 exists (nb >= 1, validated).
            unsafe { narrow_expand::<S>(job, job_blocks, &mut b.0[0], &mut dw[0], t, nr, 0) };
            // after the zeroing and the first expansion (possible memset/memcpy calls), before the
            // first tile instruction: see gemm_x16_tiles
            // SAFETY: the configuration is a static; the caller guarantees the tile unit is usable.
            unsafe { tiles.config(&NARROW_TILE_CONFIGS[m - 1]) };
            for i in 0..nb {
                let a = &job.act[g * nb + i];
                let cur = &b.0[i % 2];
                // SAFETY: the configuration is loaded; a's halves are 16 rows of 64 bytes (m read).
                unsafe {
                    if nr == 2 {
                        sums_2x1(tiles, a, cur, &mut c.0);
                    } else {
                        tiles.load::<6>(tile_ptr(&cur[0]), 64);
                        tiles.load::<7>(cur[0][16..].as_ptr().cast(), 64);
                        sums_1x1(tiles, a, &mut c.0);
                    }
                }
                if i + 1 < nb {
                    let (lo, hi) = b.0.split_at_mut(1);
                    let next = if i % 2 == 0 { &mut hi[0] } else { &mut lo[0] };
                    // SAFETY: as above, i + 1 < nb.
                    unsafe { narrow_expand::<S>(job, job_blocks, next, &mut dw[(i + 1) % 2], t, nr, i + 1) };
                }
                let dwi = &dw[i % 2];
                for r in 0..nr {
                    for col in 0..m {
                        // SAFETY: as for S::scales.
                        unsafe { S::step(&mut sumf.0[r][col], &c.0[r][col], &dwi[r], a.d[col]) };
                    }
                }
            }
            for (r, acc) in sumf.0.iter().enumerate().take(nr) {
                // SAFETY: the job's row tile t + r, columns c0 .. c0 + m.
                unsafe { write_sums(job, acc, t + r, c0, m) };
            }
            t += nr;
        }
    }
}

/// Activation bytes one pass of the tile kernel may hold (its column groups' [`ActTile16`]s for
/// every block): every row tile of the job reuses them, so they should stay in L2 (2 MiB a core
/// on the Xeons with AMX; half of it leaves room for the weights passing through).
pub const PASS_ACT_BYTES: usize = 1 << 20;

/// Column groups per pass for `nb` blocks and up to `max_r` row tiles at a time: as many as
/// [`PASS_ACT_BYTES`] holds and [`PASS_TILES`] accumulators allow, even (so that only the last
/// pass of a batch can leave a lone group), and at least 2.
pub fn pass_groups(nb: usize, max_r: usize) -> usize {
    let fit = PASS_ACT_BYTES / (nb.max(1) * core::mem::size_of::<ActTile16>());
    (fit & !1).clamp(2, PASS_TILES / max_r)
}
