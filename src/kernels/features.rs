//! CPU features, kernel levels and the choice between them: what the running CPU offers
//! ([`CpuFeatures`]), the level families ([`KernelLevel`]), the fastest one ([`KernelLevel::best`]),
//! and a caller's promise for what the OS cannot tell ([`assume_kernel`]). Depends on no kernel.

use crate::repack::{Layout, SourceType};
use crate::Error;
use core::sync::atomic::{AtomicU32, Ordering};

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
    /// AMX-TILE (`CPUID.(7,0):EDX[24]`) with the tile state enabled by the OS (XCR0 bits 17 and
    /// 18), on Linux; other OSes report it absent (never checked there). The Linux tile-data
    /// permission is not asked here: [`KernelLevel::is_available`] asks it (once per process) only
    /// when the `amx` level itself is wanted, since a granted permission enlarges every signal
    /// frame of the host process.
    pub amx_tile: bool,
    /// AMX-INT8 (`CPUID.(7,0):EDX[25]`: `tdpbssd` and friends), reported only with `amx_tile`.
    pub amx_int8: bool,
    /// The CPU vendor is AMD (x86 only; informational: the level choice is the same on every vendor).
    pub amd: bool,
}

/// Features a caller promised through [`assume_kernel`] (bits as in [`CpuFeatures::bits`]).
static ASSUMED: AtomicU32 = AtomicU32::new(0);

/// What the OS reported ([`CpuFeatures::query_os`]), asked once per process: [`CACHE_VALID`],
/// [`CACHE_AMD`] and the [`CpuFeatures::bits`]; 0 until the first question. Every gemv/gemm call
/// checks its level's features, and `cpuid` exits to the hypervisor in a VM (4-5.5% of decode
/// time when it was asked per call), so the answer is kept. A plain atomic, no lock: threads that
/// race the first question store the same value; a child after `fork()` inherits the parent's
/// value, or asks itself when the parent had not asked yet; nothing can be left half-written.
static OS_CACHE: AtomicU32 = AtomicU32::new(0);
/// [`OS_CACHE`] holds an answer.
const CACHE_VALID: u32 = 1 << 31;
/// [`OS_CACHE`]: the CPU vendor is AMD.
const CACHE_AMD: u32 = 1 << 30;

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

/// Whether the OS lets this process use the AMX tiles: `cpuid`, XCR0 and (Linux) the tile-data
/// permission. Asked from [`CpuFeatures::query_os`] (once per process, through the cache).
#[cfg(target_arch = "x86_64")]
mod amx_os {
    /// `ARCH_REQ_XCOMP_PERM` (`arch/x86/include/uapi/asm/prctl.h`).
    #[cfg(target_os = "linux")]
    const ARCH_REQ_XCOMP_PERM: u64 = 0x1023;
    /// `XFEATURE_XTILEDATA`: the 8 KiB of tile data (XCR0 bit 18).
    #[cfg(target_os = "linux")]
    const XFEATURE_XTILEDATA: u64 = 18;
    /// `__NR_arch_prctl` on x86-64.
    #[cfg(target_os = "linux")]
    const SYS_ARCH_PRCTL: u64 = 158;

    /// `(amx_tile, amx_int8)`: both false unless the CPU reports AMX-TILE, the OS has enabled
    /// XSAVE (`CPUID.1:ECX[27]` OSXSAVE) with the tile config and tile data state (XCR0 bits 17
    /// and 18), and on Linux the kernel granted this process the tile-data permission. Other
    /// OSes: false (Windows enables the state in XCR0 without a request, but that path has not
    /// been checked here, so it is declined).
    pub fn usable() -> (bool, bool) {
        // SAFETY: cpuid leaves 0, 1 and 7 (asked only when leaf 0 says they exist) are safe on
        // every x86-64 CPU.
        #[allow(unused_unsafe)]
        let (l1, l7) = unsafe {
            if core::arch::x86_64::__cpuid(0).eax < 7 {
                return (false, false);
            }
            (core::arch::x86_64::__cpuid(1), core::arch::x86_64::__cpuid_count(7, 0))
        };
        let (tile, int8) = (l7.edx >> 24 & 1 != 0, l7.edx >> 25 & 1 != 0);
        let osxsave = l1.ecx >> 27 & 1 != 0;
        if !tile || !int8 || !osxsave {
            return (false, false);
        }
        let xcr0 = xgetbv0();
        if xcr0 & (0b11 << 17) != 0b11 << 17 || !cfg!(target_os = "linux") {
            return (false, false);
        }
        (true, true)
    }

    /// The tile-data permission of this process: asked the first time (Linux), then kept.
    /// A child after `fork()` inherits both the permission and this answer.
    pub fn permission() -> bool {
        use core::sync::atomic::{AtomicU8, Ordering};
        static ANSWER: AtomicU8 = AtomicU8::new(0); // 0 not asked, 1 granted, 2 refused
        match ANSWER.load(Ordering::Relaxed) {
            1 => true,
            2 => false,
            _ => {
                let granted = request_permission();
                ANSWER.store(if granted { 1 } else { 2 }, Ordering::Relaxed);
                granted
            }
        }
    }

    /// XCR0 (`xgetbv` with ECX = 0).
    fn xgetbv0() -> u64 {
        let (lo, hi): (u32, u32);
        // SAFETY: xgetbv with ECX = 0 reads XCR0; it is valid when CPUID.1:ECX.OSXSAVE is set,
        // which the caller checked. No memory, no stack.
        unsafe {
            core::arch::asm!("xgetbv", in("ecx") 0u32, out("eax") lo, out("edx") hi,
                options(nomem, nostack, preserves_flags));
        }
        u64::from(hi) << 32 | u64::from(lo)
    }

    /// Asks Linux for the tile-data permission for the whole process (threads created before or
    /// after, and children after `fork()`, share or inherit it). Idempotent: asking again when
    /// granted succeeds. `false` when refused (a kernel before 5.16, seccomp, a container policy).
    #[cfg(target_os = "linux")]
    fn request_permission() -> bool {
        let ret: i64;
        // SAFETY: the raw arch_prctl system call (std links no libc wrapper for it that Rust can
        // name without the libc crate): rax = number, rdi/rsi = arguments; the kernel clobbers
        // rcx and r11 and returns in rax. It changes only the process's permission mask.
        unsafe {
            core::arch::asm!("syscall",
                inlateout("rax") SYS_ARCH_PRCTL as i64 => ret,
                in("rdi") ARCH_REQ_XCOMP_PERM,
                in("rsi") XFEATURE_XTILEDATA,
                lateout("rcx") _, lateout("r11") _,
                options(nostack));
        }
        ret == 0
    }

    /// Not Linux: declined (see [`usable`]).
    #[cfg(not(target_os = "linux"))]
    fn request_permission() -> bool {
        false
    }
}

impl CpuFeatures {
    /// Features the kernels may use on the running CPU: what the OS reports ([`CpuFeatures::os`])
    /// plus what a caller promised with [`assume_kernel`].
    /// Two atomic loads once the OS has been asked (the first call in the process asks).
    #[inline]
    pub fn detect() -> Self {
        Self::os().union(Self::from_bits(ASSUMED.load(Ordering::Relaxed)))
    }

    /// Features of the running CPU as the OS reports them ([`CpuFeatures::query_os`]), asked
    /// once per process and kept.
    #[inline]
    pub fn os() -> Self {
        let c = OS_CACHE.load(Ordering::Relaxed);
        if c & CACHE_VALID != 0 {
            return CpuFeatures { amd: c & CACHE_AMD != 0, ..Self::from_bits(c & !(CACHE_VALID | CACHE_AMD)) };
        }
        let f = Self::query_os();
        OS_CACHE.store(CACHE_VALID | if f.amd { CACHE_AMD } else { 0 } | f.bits(), Ordering::Relaxed);
        f
    }

    /// Asks the OS, every time (run-time detection): Linux and Android HWCAPs, macOS
    /// `hw.optional.arm.FEAT_*`, Windows `IsProcessorFeaturePresent` (through std, plus PF 66 for
    /// i8mm here), x86 `cpuid`. [`CpuFeatures::os`] keeps the first answer.
    #[cold]
    pub fn query_os() -> Self {
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
            let (tile, int8) = amx_os::usable();
            f.amx_tile = tile;
            f.amx_int8 = tile && int8;
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
            amx_tile: b & 64 != 0,
            amx_int8: b & 128 != 0,
            amd: false,
        }
    }

    /// Features in `self` or in `o` (`amd` from `self`).
    pub fn union(self, o: Self) -> Self {
        CpuFeatures { amd: self.amd, ..Self::from_bits(self.bits() | o.bits()) }
    }

    /// Bit mask as in the C header: 1 NEON, 2 dotprod, 4 i8mm, 8 AVX2 (+FMA+F16C), 16 AVX-VNNI,
    /// 32 AVX-512 VNNI (+F, BW, VL), 64 AMX-TILE (with the OS state; the Linux permission is not
    /// part of it, see [`CpuFeatures::amx_tile`]), 128 AMX-INT8.
    pub fn bits(self) -> u32 {
        u32::from(self.neon)
            | u32::from(self.dotprod) << 1
            | u32::from(self.i8mm) << 2
            | u32::from(self.avx2) << 3
            | u32::from(self.avxvnni) << 4
            | u32::from(self.avx512vnni) << 5
            | u32::from(self.amx_tile) << 6
            | u32::from(self.amx_int8) << 7
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
    /// x86-64 AMX-INT8 (Sapphire Rapids and later): `tdpbssd` on 16x16 tiles for gemm of at least
    /// [`AMX_MIN_COLS`](super::dispatch::AMX_MIN_COLS) columns, the AVX-512 VNNI kernels below
    /// that (gemv, narrow batches), X16. Only by request (`GGML_T2P_KERNEL=amx`): never chosen
    /// by [`KernelLevel::best`], as it has not been timed on AMX hardware yet.
    Amx = 7,
}

impl KernelLevel {
    /// All levels, portable first.
    pub const ALL: [KernelLevel; 7] = [
        KernelLevel::Reference,
        KernelLevel::Dotprod,
        KernelLevel::I8mm,
        KernelLevel::Avx2,
        KernelLevel::AvxVnni,
        KernelLevel::Avx512Vnni,
        KernelLevel::Amx,
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
    /// `i8mm`, `avx2`, `avxvnni`, `avx512vnni`, `amx`).
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
            KernelLevel::Amx => "amx\0",
        }
    }

    /// Whether this level has kernels for `layout`.
    pub fn runs(self, layout: Layout) -> bool {
        match self {
            KernelLevel::Reference => true,
            KernelLevel::Dotprod | KernelLevel::I8mm => matches!(layout, Layout::T2p | Layout::Ptq1_0x4),
            KernelLevel::Avx2 | KernelLevel::AvxVnni | KernelLevel::Avx512Vnni | KernelLevel::Amx => {
                layout == Layout::X16
            }
        }
    }

    /// Whether this level's kernels can run on the current CPU and build. For `amx` this also
    /// asks Linux for the tile-data permission (once per process; refused: unavailable), so the
    /// host process is changed only when the `amx` level is asked for.
    pub fn is_available(self) -> bool {
        let on_cpu = self.is_available_on(CpuFeatures::detect());
        #[cfg(target_arch = "x86_64")]
        if self == KernelLevel::Amx && on_cpu {
            return amx_os::permission();
        }
        on_cpu
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
            KernelLevel::Amx => x86 && f.avx2 && f.avx512vnni && f.amx_tile && f.amx_int8,
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
            KernelLevel::Amx => CpuFeatures { avx2: true, avx512vnni: true, amx_tile: true, amx_int8: true, ..f },
        }
    }

    /// The fastest level the CPU runs, or `None` when it has no dotprod (ARM) or no AVX2 + FMA +
    /// F16C (x86). `None` means "decline": the scalar kernels are exact but slower than stock
    /// ggml, so a caller should leave such weights to stock code.
    ///
    /// On x86 the order is AVX-512 VNNI (zmm), AVX-VNNI (ymm), AVX2 on every vendor, by side-by-side
    /// timing of these kernels (`cargo run --release --example levels`; README, "Which level `auto`
    /// picks"): on an Emerald Rapids Xeon zmm won 14 of 15 gemv cells and its gemm ran 1.3-2.3x
    /// ymm (issue 18), on Zen 4 zmm ran 1.1-1.6x AVX2 at gemv and 1.6-1.8x at 64+ columns.
    /// Alder/Arrow Lake have AVX-VNNI without AVX-512, so they get ymm. [`KernelLevel::Amx`] is
    /// not in the order: it has never been timed on AMX hardware, so it runs only when forced.
    pub fn best() -> Option<Self> {
        Self::best_on(CpuFeatures::detect())
    }

    /// [`KernelLevel::best`] for a CPU with features `f`.
    pub fn best_on(f: CpuFeatures) -> Option<Self> {
        const ORDER: [KernelLevel; 5] =
            [KernelLevel::I8mm, KernelLevel::Dotprod, KernelLevel::Avx512Vnni, KernelLevel::AvxVnni, KernelLevel::Avx2];
        ORDER.into_iter().find(|l| l.is_available_on(f))
    }

    /// The layout this level runs weights of `src` on: X16 for the x86 levels, T2P on ARM (or
    /// PTQ1_0x4 for PTQ1_0 with `prefer_compact`, keeping 1.75 bits per weight), and for the
    /// reference level the layout the best level of this CPU would use (X16 on x86, else T2P).
    pub fn layout_for(self, src: SourceType, prefer_compact: bool) -> Layout {
        let arm_layout = if prefer_compact && src == SourceType::Ptq1_0 { Layout::Ptq1_0x4 } else { Layout::T2p };
        match self {
            KernelLevel::Avx2 | KernelLevel::AvxVnni | KernelLevel::Avx512Vnni | KernelLevel::Amx => Layout::X16,
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
    ASSUMED.fetch_or(add.bits(), Ordering::Relaxed);
    Ok(())
}

#[cfg(test)]
mod assume_tests {
    use super::*;

    fn arm(neon: bool, dotprod: bool, i8mm: bool) -> CpuFeatures {
        CpuFeatures { neon, dotprod, i8mm, ..CpuFeatures::default() }
    }

    /// The kept answer is the OS's (the vendor included), call after call.
    #[test]
    fn os_features_asked_once_and_kept() {
        let asked = CpuFeatures::query_os();
        for _ in 0..3 {
            assert_eq!(CpuFeatures::os(), asked);
        }
        let c = OS_CACHE.load(Ordering::Relaxed);
        assert_ne!(c & CACHE_VALID, 0, "the answer is cached after the first call");
        assert_eq!(c & !(CACHE_VALID | CACHE_AMD), asked.bits());
        assert_eq!(c & CACHE_AMD != 0, asked.amd);
        assert_eq!(CpuFeatures::detect().bits() & asked.bits(), asked.bits());
    }

    #[test]
    fn bits_round_trip() {
        for b in 0..256 {
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
