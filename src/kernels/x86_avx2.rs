//! X16 kernels for AVX2 + FMA + F16C (Haswell, Zen 1 and later): `vpmaddubsw` products summed in
//! int16, widened once per block with `vpmaddwd`.
//!
//! ## The int16 bound that keeps it exact
//! Every slot is shifted down to the code itself (`v & 3`, `(v >> 2) & 3`, `(v >> 4) & 3`,
//! `(v >> 6) & 3`; 16-bit shifts, the mask keeps each byte's own two bits), so the unsigned
//! operand of `vpmaddubsw` is `u <= 3`. It multiplies that with the signed activations
//! (`|y| <= 128`) and adds adjacent pairs into int16 with saturation: one pair is at most
//! `2 * 3 * 128 = 768` in magnitude, so it never saturates. A block adds 32 such pairs into each
//! int16 lane of its sum (8 words x 4 slots, `vpaddw`, wrapping): at most `32 * 768 = 24576 <
//! 32767`, so no sum wraps either, and one `vpmaddwd` by 1 per block widens the lane pairs to the
//! row's int32 `dot(u, y)` exactly. `isum = dot(u, y) - sum(y)`.
//!
//! One int16 register per (8 rows, column) accumulator: a 16-row x 4-column tile holds 8 of them,
//! and its words run in `block_16x4`'s `asm!`, which keeps them and the decoding in the 16 ymm
//! registers (the float sums wait in memory during a block); tiles of 2 and 3 columns (small
//! batches, and a gemm's last columns) run the same `asm!` with fewer columns (`block_16xn!`).
//! The gemv's four row tiles side by side hold 8 too (one per tile and 8-row vector), in
//! `block_16x1_s4`'s `asm!`, which broadcasts each activation group once for the four tiles.
//!
//! ## What bounds it
//! AVX2 has no multiply-accumulate into int32: each `vpmaddubsw` (32 multiply-adds) needs a
//! `vpaddw` to accumulate, so a word of a 16 x 4 tile is 32 `vpmaddubsw`, 32 `vpaddw`, 6 shifts and
//! 8 `and`s: 78 vector ALU instructions, plus 16 broadcasts and 2 loads. Measured on Zen 4 (a C
//! loop of the word's instructions, `vpmaddubsw` 2 per cycle, 4 vector ALU pipes): 21-22 cycles,
//! 73-76% of the `vpmaddubsw` issue limit; the kernel, with the per-block float step and the
//! activation loads, reaches about 60-63% (`cargo run --release --example levels`; it was 52-53%
//! with the generic word order, compiled from intrinsics). Cores with 3 vector ALU ports (Skylake
//! to Ice Lake client) need at least 26 cycles for the 78 (62% of their 2 `vpmaddubsw` per cycle);
//! Haswell issues `vpmaddubsw` once per cycle, so its own limit is the bound there. On a Zen 3 the
//! same loop ran at 67-76% of the limit, 78-95% with half of its `vpaddw` left out, 70-78% with
//! its codes loaded already decoded; on a later, quieter day 68-69%, and 76-77% with the
//! activations taken pre-broadcast as memory operands (a broadcast from memory takes a vector ALU
//! pipe there): every vector instruction counts, the adds most (docs/results.md,
//! "What bounds the kernels"). The kernel reaches 39-63%; a gemm that broadcasts each activation block once for 16
//! row tiles was no faster, a gemv that shares the broadcasts of its four tiles was (docs/results.md,
//! "Decode from DRAM").

use super::act_pack::Q8Half;
use super::operands::Job;
use super::x86::{gemm_x16, words, Isa};
use crate::format::BlockX16;
use core::arch::x86_64::*;
use half::f16;

/// The AVX2 level.
pub(crate) struct Avx2;

/// AVX2 accumulator: the int16 sums of a block (`-sum(y)` is added at the end, so that an
/// accumulator is one register).
#[derive(Clone, Copy)]
pub(crate) struct Acc16 {
    s: __m256i,
}

impl Isa for Avx2 {
    type V = __m256i;
    type F = __m256;
    type Acc = Acc16;
    const LANES: usize = 8;
    /// Four row tiles side by side at every row length. On a Zen 3 (2026-12-02, the AVX2 class
    /// this level is the default on; `examples/dram --k K` with about 1.14 GB from DRAM, the one-
    /// and the four-tile order of this kernel interleaved in one process, best of 9, weight GB/s,
    /// one or two runs): 1 thread k 4096 9.1, 8.4 -> 10.8, 8.3; k 5120 8.9 -> 11.7; k 8192
    /// 9.3, 8.7 -> 12.5, 12.4; k 12288 9.0 -> 12.1; 2 threads k 4096 15.7, 16.7 -> 17.7, 20.9; k
    /// 5120 14.4 -> 14.3; k 8192 15.4, 15.5 -> 15.7, 16.9; k 12288 15.4 -> 18.7. One tile at a
    /// time read 52-58% of the same run's fastest plain read on 1 thread (`read X16 4 str`,
    /// 14.3-18.1 GB/s), four 55-78%. (The VNNI levels, measured on a Zen 4, lose with four tiles
    /// below k = 16384: [`super::x86::GEMV_STREAMS`].)
    const STREAMS_MIN_BLOCKS: usize = 0;
    /// The last 3 columns in one 3-column tile ([`block_16x3`]). With the 2- and 3-column tiles
    /// in `asm!` (`block_16xn!`) and prefetching (below), on a Zen 3 (2026-12-03,
    /// `examples/levels --cols 1,2,...,8 --reps 5`, 1 thread, best of 5, against the same
    /// command before, where 2 columns ran [`words`] and 3 columns a 2- and a 1-column tile),
    /// microseconds per call: 4096x4096 2 columns 350 -> 311, 3 columns 541 -> 439 (4 columns:
    /// 527); 17408x5120 2218 -> 1845 and 3228 -> 2459 (4: 2834); 5120x17408 2316 -> 1816 and
    /// 3254 -> 2483 (4: 2895). In llama.cpp (`llama-batched-bench`, the synthetic 8B, 32 tokens
    /// per sequence, 3 interleaved rounds, tokens/s of generation, medians): 2 sequences 10.71 ->
    /// 13.07 on 1 thread and 19.48 -> 24.36 on 2; 3 sequences 10.63 -> 13.99 and 19.99 -> 25.87,
    /// where 3 sequences had been slower than 4 (15.45 and 29.4).
    const TAIL3: bool = true;
    /// Tiles of 2 and 3 columns prefetch too. On a Zen 3 (2026-12-03, `examples/levels` in a
    /// private copy that times both in one process, 1 thread, best of 5, two runs), with the
    /// prefetch against without: 2 columns 1.16-1.22x faster and 3 columns 1.04-1.09x on
    /// matrices of 23.7 MB (17408x5120, 5120x17408) and 143 MB (65536x8192, 16384x32768), and
    /// 0.98-1.00x on 4096x4096 (4.5 MB, in cache). (The VNNI levels' 2-column tiles showed no
    /// gain in llama.cpp: [`super::x86::PF_MIN_COLS`].)
    const PF_MIN_COLS: usize = 2;

    #[inline(always)]
    unsafe fn load(p: *const u8) -> __m256i {
        // SAFETY: the caller passes 32 readable bytes.
        unsafe { _mm256_loadu_si256(p.cast()) }
    }
    #[inline(always)]
    unsafe fn slots(v: __m256i) -> [__m256i; 4] {
        // SAFETY: register operations (AVX2 enabled by the caller).
        unsafe {
            let m = _mm256_set1_epi8(0x03);
            [
                _mm256_and_si256(v, m),
                _mm256_and_si256(_mm256_srli_epi16::<2>(v), m),
                _mm256_and_si256(_mm256_srli_epi16::<4>(v), m),
                _mm256_and_si256(_mm256_srli_epi16::<6>(v), m),
            ]
        }
    }
    #[inline(always)]
    unsafe fn block_words<const R: usize, const NC: usize>(
        acc: &mut [[Acc16; NC]; R],
        b: &BlockX16,
        a: &[&Q8Half; NC],
    ) {
        // Block `b` through `$f`, the tile of `$n` columns: only where R == 2 and NC == $n (the
        // match below), so the casts are to the same types.
        macro_rules! tile {
            ($n:literal, $f:ident) => {
                $f(
                    &mut *(acc as *mut [[Acc16; NC]; R]).cast::<[[Acc16; $n]; 2]>(),
                    b,
                    &*(a as *const [&Q8Half; NC]).cast::<[&Q8Half; $n]>(),
                )
            };
        }
        // SAFETY: forwarded; 16 x 2..4 tiles go through `block_16xN`, whose reads are the same.
        unsafe {
            match (R, NC) {
                (2, 4) => tile!(4, block_16x4),
                (2, 3) => tile!(3, block_16x3),
                (2, 2) => tile!(2, block_16x2),
                _ => words::<Self, R, NC>(acc, b, a),
            }
        }
    }
    /// The gemv's four tiles share each broadcast ([`block_16x1_s4`]).
    const SHARED_S4: bool = true;
    #[inline(always)]
    unsafe fn block_words_s4<const R: usize>(acc: &mut [[[Acc16; 1]; R]; 4], b: [&BlockX16; 4], a: &Q8Half) {
        const { assert!(R == 2) };
        // SAFETY: R == 2 (16 rows in two 8-lane vectors, checked at compile time), so the cast
        // is to the same type; the rest is forwarded.
        unsafe {
            let acc = &mut *(acc as *mut [[[Acc16; 1]; R]; 4]).cast::<[[[Acc16; 1]; 2]; 4]>();
            block_16x1_s4(acc, b, a);
        }
    }
    #[inline(always)]
    unsafe fn bcast(p: *const i8) -> __m256i {
        // SAFETY: the caller passes 4 readable bytes.
        unsafe { _mm256_set1_epi32(p.cast::<i32>().read_unaligned()) }
    }
    #[inline(always)]
    unsafe fn acc_new(_: i32) -> Acc16 {
        // SAFETY: register operation.
        unsafe { Acc16 { s: _mm256_setzero_si256() } }
    }
    #[inline(always)]
    unsafe fn dot<const S: usize>(acc: &mut Acc16, u: __m256i, y: __m256i) {
        // SAFETY: register operations.
        unsafe { acc.s = _mm256_add_epi16(acc.s, _mm256_maddubs_epi16(u, y)) }
    }
    #[inline(always)]
    unsafe fn acc_merge(a: Acc16, b: Acc16) -> Acc16 {
        // SAFETY: register operation. int16 wrapping adds are associative, so the merged lanes
        // equal the one-chain lanes (which stay in range: see the module's bound).
        unsafe { Acc16 { s: _mm256_add_epi16(a.s, b.s) } }
    }
    #[inline(always)]
    unsafe fn isum(acc: Acc16, nysum: i32) -> __m256i {
        // SAFETY: register operations.
        unsafe { _mm256_add_epi32(_mm256_madd_epi16(acc.s, _mm256_set1_epi16(1)), _mm256_set1_epi32(nysum)) }
    }
    #[inline(always)]
    unsafe fn scales(p: *const f16) -> __m256 {
        // SAFETY: the caller passes 8 readable fp16 values; F16C enabled by the caller.
        unsafe { _mm256_cvtph_ps(_mm_loadu_si128(p.cast())) }
    }
    #[inline(always)]
    unsafe fn fzero() -> __m256 {
        // SAFETY: register operation.
        unsafe { _mm256_setzero_ps() }
    }
    #[inline(always)]
    unsafe fn fstep(sumf: __m256, d: __m256, dy: f32, isum: __m256i) -> __m256 {
        // SAFETY: register operations; FMA enabled by the caller.
        unsafe { _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(dy)), _mm256_cvtepi32_ps(isum), sumf) }
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: __m256) {
        // SAFETY: the caller passes 8 writable floats.
        unsafe { _mm256_storeu_ps(p, v) }
    }
}

/// The `asm!` of one column of one slot of a [`block_16x4`] word: the column's group at byte
/// `$off` of `$a` broadcast once, multiplied with the slot's codes of both 8-row vectors (`u0`,
/// `u1`) and added to the column's accumulators `$c0` (rows 0..8) and `$c1` (rows 8..16).
macro_rules! col_16x4 {
    ($a:ident, $c0:ident, $c1:ident, $off:literal) => {
        concat!(
            "vpbroadcastd {y}, dword ptr [{",
            stringify!($a),
            "} + ",
            $off,
            "]\n",
            "vpmaddubsw {p}, {u0}, {y}\n",
            "vpaddw {",
            stringify!($c0),
            "}, {",
            stringify!($c0),
            "}, {p}\n",
            "vpmaddubsw {y}, {u1}, {y}\n",
            "vpaddw {",
            stringify!($c1),
            "}, {",
            stringify!($c1),
            "}, {y}\n",
        )
    };
}

/// The `asm!` of one slot of a `block_16xN` word: [`col_16x4`] for each column `(a, c0, c1)`.
macro_rules! slot_16xn {
    ($off:literal; $(($a:ident, $c0:ident, $c1:ident)),+) => {
        concat!($(col_16x4!($a, $c0, $c1, $off)),+)
    };
}

/// The next slot's codes of both word vectors: a 2-bit shift in place, then the mask.
macro_rules! next_slot_16x4 {
    () => {
        concat!("vpsrlw {v0}, {v0}, 2\n", "vpsrlw {v1}, {v1}, 2\n", "vpand {u0}, {v0}, {m}\n", "vpand {u1}, {v1}, {m}",)
    };
}

/// Declares `block_16xN`, one block of a 16-row x N-column tile, for the columns listed as
/// `(index, pointer, accumulator of rows 0..8, accumulator of rows 8..16)`: for each word, its
/// two 8-row vectors are loaded and decoded slot by slot (`and` with 3, then a 2-bit shift in
/// place for the next slot), and each slot meets one broadcast of each column's group: 2
/// `vpmaddubsw` and 2 `vpaddw` per broadcast. One `asm!` block per word keeps the 2N
/// accumulators, the two word vectors, the mask and 4 temporaries in the 16 ymm registers without
/// spilling (N <= 4; compiled from intrinsics, LLVM hoisted loads and decoding and spilled
/// accumulators to the stack for 4 columns, and the intrinsics' 2-column tile, and 3 columns as a
/// 2- and a 1-column tile, ran at 37-47% of the issue limit).
macro_rules! block_16xn {
    ($(#[$doc:meta])* $name:ident, $n:literal, $(($i:literal, $a:ident, $c0:ident, $c1:ident)),+) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// AVX2 available; `b` and every `a[c]` valid.
        #[target_feature(enable = "avx2")]
        #[inline]
        unsafe fn $name(acc: &mut [[Acc16; $n]; 2], b: &BlockX16, a: &[&Q8Half; $n]) {
            $(let (mut $c0, mut $c1) = (acc[0][$i].s, acc[1][$i].s);)+
            let m = _mm256_set1_epi8(0x03);
            for w in 0..8 {
                // SAFETY: reads the 64 bytes of word `w` of `b` and bytes 16w .. 16w + 16 of each
                // column's 128 values (w < 8); register-only otherwise. AVX2 is enabled by the
                // caller.
                unsafe {
                    core::arch::asm!(
                        "vmovdqu {v0}, ymmword ptr [{q}]",
                        "vmovdqu {v1}, ymmword ptr [{q} + 32]",
                        "vpand {u0}, {v0}, {m}",
                        "vpand {u1}, {v1}, {m}",
                        slot_16xn!("0"; $(($a, $c0, $c1)),+),
                        next_slot_16x4!(),
                        slot_16xn!("4"; $(($a, $c0, $c1)),+),
                        next_slot_16x4!(),
                        slot_16xn!("8"; $(($a, $c0, $c1)),+),
                        next_slot_16x4!(),
                        slot_16xn!("12"; $(($a, $c0, $c1)),+),
                        q = in(reg) b.qs[w].as_ptr(),
                        $($a = in(reg) a[$i].qs.as_ptr().add(16 * w),)+
                        m = in(ymm_reg) m,
                        v0 = out(ymm_reg) _, v1 = out(ymm_reg) _, u0 = out(ymm_reg) _, u1 = out(ymm_reg) _,
                        y = out(ymm_reg) _, p = out(ymm_reg) _,
                        $($c0 = inout(ymm_reg) $c0, $c1 = inout(ymm_reg) $c1,)+
                        options(pure, readonly, nostack, preserves_flags),
                    );
                }
            }
            $((acc[0][$i], acc[1][$i]) = (Acc16 { s: $c0 }, Acc16 { s: $c1 });)+
        }
    };
}

block_16xn!(
    /// One block of a 16-row x 4-column tile (the gemm's tile; see `block_16xn!`).
    block_16x4, 4, (0, a0, c00, c10), (1, a1, c01, c11), (2, a2, c02, c12), (3, a3, c03, c13)
);
block_16xn!(
    /// One block of a 16-row x 3-column tile (a batch of 3 columns, or the last 3 of a gemm's
    /// columns: [`Isa::TAIL3`]; see `block_16xn!`).
    block_16x3, 3, (0, a0, c00, c10), (1, a1, c01, c11), (2, a2, c02, c12)
);
block_16xn!(
    /// One block of a 16-row x 2-column tile (a batch of 2 columns, or the last 2 of a gemm's
    /// columns; see `block_16xn!`).
    block_16x2, 2, (0, a0, c00, c10), (1, a1, c01, c11)
);

/// The `asm!` of one slot of a `vec_16x1_s4` vector: the codes `{v} & 3` into temporary `$u`, times
/// broadcast group `$y`, added to accumulator `$c`.
macro_rules! slot_16x1_s4 {
    ($u:literal, $y:literal, $c:ident) => {
        concat!(
            "vpand {",
            $u,
            "}, {v}, {m}\n",
            "vpmaddubsw {",
            $u,
            "}, {",
            $u,
            "}, {",
            $y,
            "}\n",
            "vpaddw {",
            stringify!($c),
            "}, {",
            stringify!($c),
            "}, {",
            $u,
            "}\n",
        )
    };
}

/// The `asm!` of one 8-row vector of a [`block_16x1_s4`] word: loaded from byte `$off` of word
/// `$q`, then slot by slot ([`slot_16x1_s4`], with a 2-bit shift in place between slots) into the
/// vector's accumulator `$c`.
macro_rules! vec_16x1_s4 {
    ($q:ident, $off:literal, $c:ident) => {
        concat!(
            "vmovdqu {v}, ymmword ptr [{",
            stringify!($q),
            "} + ",
            $off,
            "]\n",
            slot_16x1_s4!("u", "y0", $c),
            "vpsrlw {v}, {v}, 2\n",
            slot_16x1_s4!("t", "y1", $c),
            "vpsrlw {v}, {v}, 2\n",
            slot_16x1_s4!("u", "y2", $c),
            "vpsrlw {v}, {v}, 2\n",
            slot_16x1_s4!("t", "y3", $c),
        )
    };
}

/// One block of four row tiles side by side (the gemv's streams) against one column: per word,
/// the column's four activation groups are broadcast once and meet both 8-row vectors of all four
/// tiles (8 `vpmaddubsw` + 8 `vpaddw` per tile, as [`words`]; 1 broadcast per tile-word instead
/// of 4). The integer sums are those of [`words`] per tile: one int16 accumulator per 8-row
/// vector and block, the same products (the module's bound). On Zen 3 a broadcast from memory
/// takes a vector ALU pipe, and the gemv is bound by those pipes (docs/results.md, "Decode from
/// DRAM"): this word runs 33 vector instructions per tile-word where [`words`] runs 36.
/// Registers: 8 accumulators, 4 broadcasts, the mask and 3 temporaries (all 16 ymm).
///
/// # Safety
/// AVX2 available; every `b[j]` and `a` valid.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn block_16x1_s4(acc: &mut [[[Acc16; 1]; 2]; 4], b: [&BlockX16; 4], a: &Q8Half) {
    let [[mut c00, mut c01], [mut c10, mut c11], [mut c20, mut c21], [mut c30, mut c31]] =
        acc.map(|t| t.map(|r| r[0].s));
    let m = _mm256_set1_epi8(0x03);
    for w in 0..8 {
        // SAFETY: reads the 64 bytes of word `w` (w < 8) of each block and bytes 16w .. 16w + 16
        // of the column's 128 values; register-only otherwise. AVX2 is enabled by the caller.
        unsafe {
            core::arch::asm!(
                "vpbroadcastd {y0}, dword ptr [{a}]",
                "vpbroadcastd {y1}, dword ptr [{a} + 4]",
                "vpbroadcastd {y2}, dword ptr [{a} + 8]",
                "vpbroadcastd {y3}, dword ptr [{a} + 12]",
                vec_16x1_s4!(q0, "0", c00),
                vec_16x1_s4!(q0, "32", c01),
                vec_16x1_s4!(q1, "0", c10),
                vec_16x1_s4!(q1, "32", c11),
                vec_16x1_s4!(q2, "0", c20),
                vec_16x1_s4!(q2, "32", c21),
                vec_16x1_s4!(q3, "0", c30),
                vec_16x1_s4!(q3, "32", c31),
                a = in(reg) a.qs.as_ptr().add(16 * w),
                q0 = in(reg) b[0].qs[w].as_ptr(),
                q1 = in(reg) b[1].qs[w].as_ptr(),
                q2 = in(reg) b[2].qs[w].as_ptr(),
                q3 = in(reg) b[3].qs[w].as_ptr(),
                m = in(ymm_reg) m,
                y0 = out(ymm_reg) _, y1 = out(ymm_reg) _, y2 = out(ymm_reg) _, y3 = out(ymm_reg) _,
                v = out(ymm_reg) _, u = out(ymm_reg) _, t = out(ymm_reg) _,
                c00 = inout(ymm_reg) c00, c01 = inout(ymm_reg) c01, c10 = inout(ymm_reg) c10, c11 = inout(ymm_reg) c11,
                c20 = inout(ymm_reg) c20, c21 = inout(ymm_reg) c21, c30 = inout(ymm_reg) c30, c31 = inout(ymm_reg) c31,
                options(pure, readonly, nostack, preserves_flags),
            );
        }
    }
    *acc = [[c00, c01], [c10, c11], [c20, c21], [c30, c31]].map(|t| t.map(|s| [Acc16 { s }]));
}

/// X16 x Q8_K, one column (decode), 16 rows per tile.
///
/// # Safety
/// AVX2, FMA and F16C available; `job` validated by `gemm_raw` with one column.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn gemv_x16_16x1_q8_k_avx2(job: Job<'_, BlockX16, Q8Half>) {
    // SAFETY: forwarded.
    unsafe { gemm_x16::<Avx2, 2, 1>(&job) }
}

/// X16 x Q8_K, several columns: 16 rows x 4 columns per tile (then one of 3, 2 or 1).
///
/// # Safety
/// AVX2, FMA and F16C available; `job` validated by `gemm_raw`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn gemm_x16_16x4_q8_k_avx2(job: Job<'_, BlockX16, Q8Half>) {
    // SAFETY: forwarded.
    unsafe { gemm_x16::<Avx2, 2, 4>(&job) }
}
