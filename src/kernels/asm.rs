//! The aarch64 inline assembly of the crate: `sdot`, `smmla` and `fcvtl` (fp16 -> f32), whose
//! intrinsics are not stable in Rust, and one `ldp` + 4 `smmla` step whose load must stay where
//! it is written (see [`smmla_2x2_ldp`]). Each wrapper is `#[inline(always)]` and must only be
//! called from functions compiled with the matching target feature (`dotprod`, `i8mm`).

use core::arch::aarch64::{float32x4_t, int32x4_t, int8x16_t};
use core::arch::asm;

/// `sdot acc.4s, a.16b, b.16b`: lane `l` += sum over `i` in 0..4 of `a[4l+i] * b[4l+i]`.
///
/// # Safety
/// The CPU must have FEAT_DotProd and the caller must be compiled with `dotprod` enabled.
#[inline(always)]
pub(crate) unsafe fn sdot(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    let mut acc = acc;
    // SAFETY: register-only instruction; feature guaranteed by the caller.
    unsafe {
        asm!(".arch_extension dotprod", "sdot {acc:v}.4s, {a:v}.16b, {b:v}.16b",
             acc = inout(vreg) acc, a = in(vreg) a, b = in(vreg) b,
             options(pure, nomem, nostack, preserves_flags));
    }
    acc
}

/// `ldp x0, x1, [p, #32 * C]` (chunk `C` of a Q8_Kx4 pack's values), then `acc[0] += x0 . w0`, `acc[1] += x1 . w0`, `acc[2] += x0 . w1`,
/// `acc[3] += x1 . w1` (four `smmla` instructions).
///
/// One asm block, not marked pure: the compiler keeps these loads in program order instead of
/// hoisting all activation loads of a 4x16 tile to the top of the block, which needs more vector
/// registers than there are and spills (the 4x16 `smmla` tile's 16 accumulators leave few free).
///
/// # Safety
/// The CPU must have FEAT_I8MM and the caller must be compiled with `i8mm` enabled; `p + 32 * C` must
/// be valid for reading 32 bytes.
#[inline(always)]
pub(crate) unsafe fn smmla_2x2_ldp<const C: usize>(
    acc: [int32x4_t; 4],
    w0: int8x16_t,
    w1: int8x16_t,
    p: *const i8,
) -> [int32x4_t; 4] {
    let [mut a0, mut a1, mut a2, mut a3] = acc;
    // SAFETY: reads 32 bytes at p + 32 * C (the caller's contract); feature guaranteed by the caller.
    unsafe {
        asm!(".arch_extension i8mm",
             "ldp {x0:q}, {x1:q}, [{p}, #{off}]",
             "smmla {a0:v}.4s, {w0:v}.16b, {x0:v}.16b",
             "smmla {a1:v}.4s, {w0:v}.16b, {x1:v}.16b",
             "smmla {a2:v}.4s, {w1:v}.16b, {x0:v}.16b",
             "smmla {a3:v}.4s, {w1:v}.16b, {x1:v}.16b",
             p = in(reg) p, off = const 32 * C, x0 = out(vreg) _, x1 = out(vreg) _,
             w0 = in(vreg) w0, w1 = in(vreg) w1,
             a0 = inout(vreg) a0, a1 = inout(vreg) a1, a2 = inout(vreg) a2, a3 = inout(vreg) a3,
             options(readonly, nostack, preserves_flags));
    }
    [a0, a1, a2, a3]
}

/// Four fp16 scales (raw bits, little-endian, 8 bytes at `p`) to f32, exactly (`fcvtl`).
///
/// # Safety
/// `p` must be valid for reading 8 bytes (no alignment needed).
#[inline(always)]
pub(crate) unsafe fn load_f16x4(p: *const u16) -> float32x4_t {
    let out: float32x4_t;
    // SAFETY: the caller guarantees 8 readable bytes; `ldr d` needs no alignment for normal memory.
    unsafe {
        asm!("ldr {t:d}, [{p}]",
             "fcvtl {out:v}.4s, {t:v}.4h",
             p = in(reg) p, t = out(vreg) _, out = lateout(vreg) out,
             options(pure, readonly, nostack, preserves_flags));
    }
    out
}
