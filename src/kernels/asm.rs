//! The only inline assembly of the crate: `sdot`, `smmla` and `fcvtl` (fp16 -> f32), whose
//! intrinsics are not stable in Rust. Each wrapper is `#[inline(always)]` and must only be
//! called from functions compiled with the matching target feature (`dotprod`, `i8mm`).

use core::arch::aarch64::{float32x4_t, int32x4_t, int8x16_t};
use core::arch::asm;

/// `sdot acc.4s, a.16b, b.16b`: lane `l` += sum over `i` in 0..4 of `a[4l+i] * b[4l+i]`.
///
/// # Safety
/// The CPU must have FEAT_DotProd and the caller must be compiled with `dotprod` enabled.
#[inline(always)]
pub unsafe fn sdot(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    let mut acc = acc;
    // SAFETY: register-only instruction; feature guaranteed by the caller.
    unsafe {
        asm!(".arch_extension dotprod", "sdot {acc:v}.4s, {a:v}.16b, {b:v}.16b",
             acc = inout(vreg) acc, a = in(vreg) a, b = in(vreg) b,
             options(pure, nomem, nostack, preserves_flags));
    }
    acc
}

/// `smmla acc.4s, a.16b, b.16b`: with `a` and `b` read as 2x8 int8 matrices (rows of 8 bytes),
/// `acc` (2x2 int32, row-major) += `a * b^T`, i.e. lanes `[a0.b0, a0.b1, a1.b0, a1.b1]`.
///
/// # Safety
/// The CPU must have FEAT_I8MM and the caller must be compiled with `i8mm` enabled.
#[inline(always)]
pub unsafe fn smmla(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    let mut acc = acc;
    // SAFETY: register-only instruction; feature guaranteed by the caller.
    unsafe {
        asm!(".arch_extension i8mm", "smmla {acc:v}.4s, {a:v}.16b, {b:v}.16b",
             acc = inout(vreg) acc, a = in(vreg) a, b = in(vreg) b,
             options(pure, nomem, nostack, preserves_flags));
    }
    acc
}

/// Four fp16 scales (raw bits, little-endian, 8 bytes at `p`) to f32, exactly (`fcvtl`).
///
/// # Safety
/// `p` must be valid for reading 8 bytes (no alignment needed).
#[inline(always)]
pub unsafe fn load_f16x4(p: *const u16) -> float32x4_t {
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
