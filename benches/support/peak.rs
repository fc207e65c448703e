//! Issue-limit probes: the peak multiply-accumulate rate of the instruction each x86 level is built
//! on, measured on the running machine, so that a benchmark can report a kernel as a share of what
//! the core can issue (`cargo bench`'s `issue_limit/*`, `tools/bench-report.py`).
//!
//! Each probe runs `iters` rounds of independent accumulations with register (or tile) operands
//! only: no loads, no dependency chain shorter than the instruction's latency, so the time is the
//! issue rate alone. The result is the number of 8-bit multiply-accumulates performed (MAC), to be
//! divided by the measured time:
//!
//! | probe | instruction | MAC per instruction | level it bounds |
//! |---|---|---|---|
//! | [`Probe::VpdpbusdZmm`] | `vpdpbusd zmm` (EVEX) | 64 | `avx512vnni` |
//! | [`Probe::VpdpbusdYmm`] | `{vex} vpdpbusd ymm` (AVX-VNNI) | 32 | `avxvnni` |
//! | [`Probe::VpmaddubswYmm`] | `vpmaddubsw ymm` | 32 | `avx2` (its first step) |
//! | [`Probe::Tdpbssd`] | `tdpbssd` 16x16x64 | 16384 | `amx` |
//!
//! Twelve vector accumulators (four tiles for AMX) cover the latency of every core we know
//! (`vpdpbusd`: 4-5 cycles at 2 per cycle; `tdpbssd`: about 52 cycles at one per 16).
//!
//! Benchmark support, not part of the library: one file included (`#[path]`) by
//! `benches/kernels.rs`, `examples/levels.rs`, `tests/rust/amx_calls.rs` (which checks the compiled
//! `tdpbssd` loop) and `tests/rust/peak.rs` (which tests it). It uses the library's public API only.

use ggml_t2p::KernelLevel;

/// One issue-limit probe (see the module table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    /// `vpdpbusd zmm` (AVX-512 VNNI), 64 MAC per instruction.
    VpdpbusdZmm,
    /// `vpdpbusd ymm` with the VEX encoding (AVX-VNNI), 32 MAC per instruction.
    VpdpbusdYmm,
    /// `vpmaddubsw ymm` (AVX2), 32 multiplies (pairs added to 16-bit) per instruction.
    VpmaddubswYmm,
    /// `tdpbssd` on 16 x 64-byte tiles (AMX-INT8), 16 x 16 x 64 MAC per instruction.
    Tdpbssd,
}

impl Probe {
    /// Every probe, in the order of the module table.
    pub const ALL: [Probe; 4] = [Probe::VpdpbusdZmm, Probe::VpdpbusdYmm, Probe::VpmaddubswYmm, Probe::Tdpbssd];

    /// Short name (benchmark ids): `vpdpbusd_zmm`, `vpdpbusd_ymm`, `vpmaddubsw_ymm`, `tdpbssd`.
    pub fn name(self) -> &'static str {
        match self {
            Probe::VpdpbusdZmm => "vpdpbusd_zmm",
            Probe::VpdpbusdYmm => "vpdpbusd_ymm",
            Probe::VpmaddubswYmm => "vpmaddubsw_ymm",
            Probe::Tdpbssd => "tdpbssd",
        }
    }

    /// The kernel level whose inner product this instruction is.
    pub fn level(self) -> KernelLevel {
        match self {
            Probe::VpdpbusdZmm => KernelLevel::Avx512Vnni,
            Probe::VpdpbusdYmm => KernelLevel::AvxVnni,
            Probe::VpmaddubswYmm => KernelLevel::Avx2,
            Probe::Tdpbssd => KernelLevel::Amx,
        }
    }

    /// MAC per probe round ([`Probe::run`] returns `iters` times this).
    pub fn macs_per_round(self) -> u64 {
        match self {
            Probe::VpdpbusdZmm => 12 * 64,
            Probe::VpdpbusdYmm | Probe::VpmaddubswYmm => 12 * 32,
            Probe::Tdpbssd => 4 * 16 * 16 * 64,
        }
    }

    /// Whether this CPU (and OS: AMX needs the tile-data permission, asked here once per process
    /// as for the `amx` level) can run the probe.
    pub fn is_available(self) -> bool {
        self.level().is_available()
    }

    /// Runs `iters` rounds and returns the MAC performed, or `None` when the probe cannot run
    /// here ([`Probe::is_available`]) or on other architectures. Time it from outside.
    pub fn run(self, iters: u64) -> Option<u64> {
        if !self.is_available() || iters == 0 {
            return None;
        }
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: each probe's CPU features (and for AMX the tile permission) were checked by
            // `is_available` above; the probes touch registers (and tiles) only.
            unsafe {
                match self {
                    Probe::VpdpbusdZmm => x86::vpdpbusd_zmm(iters),
                    Probe::VpdpbusdYmm => x86::vpdpbusd_ymm_vex(iters),
                    Probe::VpmaddubswYmm => x86::vpmaddubsw_ymm(iters),
                    Probe::Tdpbssd => x86::tdpbssd(iters),
                }
            }
            Some(iters * self.macs_per_round())
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            None
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use core::arch::asm;
    use ggml_t2p::kernels::amx::TileConfig;

    /// Eight 16-row x 64-byte tiles: C = tmm0..3, A = tmm4..5, B = tmm6..7. A `static`, so that
    /// `ldtilecfg` reads memory the compiler cannot drop.
    static PROBE_TILES: TileConfig = TileConfig::full_tiles(8);

    /// # Safety
    /// The CPU must have AVX-512F/BW/VNNI; `iters` > 0.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn vpdpbusd_zmm(iters: u64) {
        // SAFETY: register-only loop; features enabled by the caller's check.
        unsafe {
            asm!(
                "vpternlogd zmm12, zmm12, zmm12, 0xff",
                "vpabsb zmm13, zmm12",
                "vpxord zmm0, zmm0, zmm0", "vpxord zmm1, zmm1, zmm1", "vpxord zmm2, zmm2, zmm2",
                "vpxord zmm3, zmm3, zmm3", "vpxord zmm4, zmm4, zmm4", "vpxord zmm5, zmm5, zmm5",
                "vpxord zmm6, zmm6, zmm6", "vpxord zmm7, zmm7, zmm7", "vpxord zmm8, zmm8, zmm8",
                "vpxord zmm9, zmm9, zmm9", "vpxord zmm10, zmm10, zmm10", "vpxord zmm11, zmm11, zmm11",
                "2:",
                "vpdpbusd zmm0, zmm13, zmm12", "vpdpbusd zmm1, zmm13, zmm12", "vpdpbusd zmm2, zmm13, zmm12",
                "vpdpbusd zmm3, zmm13, zmm12", "vpdpbusd zmm4, zmm13, zmm12", "vpdpbusd zmm5, zmm13, zmm12",
                "vpdpbusd zmm6, zmm13, zmm12", "vpdpbusd zmm7, zmm13, zmm12", "vpdpbusd zmm8, zmm13, zmm12",
                "vpdpbusd zmm9, zmm13, zmm12", "vpdpbusd zmm10, zmm13, zmm12", "vpdpbusd zmm11, zmm13, zmm12",
                "dec {n}",
                "jnz 2b",
                n = inout(reg) iters => _,
                out("zmm0") _, out("zmm1") _, out("zmm2") _, out("zmm3") _, out("zmm4") _, out("zmm5") _,
                out("zmm6") _, out("zmm7") _, out("zmm8") _, out("zmm9") _, out("zmm10") _, out("zmm11") _,
                out("zmm12") _, out("zmm13") _,
                options(nostack, nomem),
            );
        }
    }

    /// # Safety
    /// The CPU must have AVX-VNNI; `iters` > 0.
    #[target_feature(enable = "avx2,avxvnni")]
    pub(super) unsafe fn vpdpbusd_ymm_vex(iters: u64) {
        // SAFETY: register-only loop; features enabled by the caller's check.
        unsafe {
            asm!(
                "vpcmpeqb ymm12, ymm12, ymm12",
                "vpabsb ymm13, ymm12",
                "vpxor ymm0, ymm0, ymm0", "vpxor ymm1, ymm1, ymm1", "vpxor ymm2, ymm2, ymm2",
                "vpxor ymm3, ymm3, ymm3", "vpxor ymm4, ymm4, ymm4", "vpxor ymm5, ymm5, ymm5",
                "vpxor ymm6, ymm6, ymm6", "vpxor ymm7, ymm7, ymm7", "vpxor ymm8, ymm8, ymm8",
                "vpxor ymm9, ymm9, ymm9", "vpxor ymm10, ymm10, ymm10", "vpxor ymm11, ymm11, ymm11",
                "2:",
                "{{vex}} vpdpbusd ymm0, ymm13, ymm12", "{{vex}} vpdpbusd ymm1, ymm13, ymm12",
                "{{vex}} vpdpbusd ymm2, ymm13, ymm12", "{{vex}} vpdpbusd ymm3, ymm13, ymm12",
                "{{vex}} vpdpbusd ymm4, ymm13, ymm12", "{{vex}} vpdpbusd ymm5, ymm13, ymm12",
                "{{vex}} vpdpbusd ymm6, ymm13, ymm12", "{{vex}} vpdpbusd ymm7, ymm13, ymm12",
                "{{vex}} vpdpbusd ymm8, ymm13, ymm12", "{{vex}} vpdpbusd ymm9, ymm13, ymm12",
                "{{vex}} vpdpbusd ymm10, ymm13, ymm12", "{{vex}} vpdpbusd ymm11, ymm13, ymm12",
                "dec {n}",
                "jnz 2b",
                n = inout(reg) iters => _,
                out("ymm0") _, out("ymm1") _, out("ymm2") _, out("ymm3") _, out("ymm4") _, out("ymm5") _,
                out("ymm6") _, out("ymm7") _, out("ymm8") _, out("ymm9") _, out("ymm10") _, out("ymm11") _,
                out("ymm12") _, out("ymm13") _,
                options(nostack, nomem),
            );
        }
    }

    /// # Safety
    /// The CPU must have AVX2; `iters` > 0.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn vpmaddubsw_ymm(iters: u64) {
        // SAFETY: register-only loop; features enabled by the caller's check. vpmaddubsw writes
        // its destination (no accumulation), so twelve destinations keep the issue independent.
        unsafe {
            asm!(
                "vpcmpeqb ymm12, ymm12, ymm12",
                "vpabsb ymm13, ymm12",
                "2:",
                "vpmaddubsw ymm0, ymm13, ymm12", "vpmaddubsw ymm1, ymm13, ymm12", "vpmaddubsw ymm2, ymm13, ymm12",
                "vpmaddubsw ymm3, ymm13, ymm12", "vpmaddubsw ymm4, ymm13, ymm12", "vpmaddubsw ymm5, ymm13, ymm12",
                "vpmaddubsw ymm6, ymm13, ymm12", "vpmaddubsw ymm7, ymm13, ymm12", "vpmaddubsw ymm8, ymm13, ymm12",
                "vpmaddubsw ymm9, ymm13, ymm12", "vpmaddubsw ymm10, ymm13, ymm12", "vpmaddubsw ymm11, ymm13, ymm12",
                "dec {n}",
                "jnz 2b",
                n = inout(reg) iters => _,
                out("ymm0") _, out("ymm1") _, out("ymm2") _, out("ymm3") _, out("ymm4") _, out("ymm5") _,
                out("ymm6") _, out("ymm7") _, out("ymm8") _, out("ymm9") _, out("ymm10") _, out("ymm11") _,
                out("ymm12") _, out("ymm13") _,
                options(nostack, nomem),
            );
        }
    }

    /// Not inlined: a function of its own, without the jump table of [`super::Probe::run`]'s
    /// `match`, so that `tests/rust/amx_calls.rs` can follow the control flow of every function with
    /// tile instructions (it refuses indirect jumps).
    ///
    /// # Safety
    /// The CPU must have AMX-TILE and AMX-INT8 with the tile state enabled and permitted
    /// (`KernelLevel::Amx` available); `iters` > 0.
    #[inline(never)]
    pub(super) unsafe fn tdpbssd(iters: u64) {
        // SAFETY: the configuration is a static of eight 16 x 64-byte tiles (every operand shape
        // below agrees with it); ldtilecfg zeroes the tiles, the loop uses tiles only, and
        // tilerelease returns the tile state to init before the block ends.
        unsafe {
            asm!(
                "ldtilecfg [{cfg}]",
                "2:",
                "tdpbssd tmm0, tmm4, tmm6",
                "tdpbssd tmm1, tmm4, tmm7",
                "tdpbssd tmm2, tmm5, tmm6",
                "tdpbssd tmm3, tmm5, tmm7",
                "dec {n}",
                "jnz 2b",
                "tilerelease",
                cfg = in(reg) &PROBE_TILES as *const TileConfig,
                n = inout(reg) iters => _,
                options(nostack),
            );
        }
    }
}
