//! CPU features: what the running CPU and OS offer ([`CpuFeatures`]), asked once per process,
//! plus what a caller promised where the OS cannot tell (recorded here, decided by the kernel
//! table's `assume_kernel`). Depends on no kernel and on no level: which level needs which
//! features is written in the kernel table (`table.rs`), which reads this module.

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
    /// permission is not asked here: `KernelLevel::is_available` asks it (once per process) only
    /// when the `amx` level itself is wanted, since a granted permission enlarges every signal
    /// frame of the host process.
    pub amx_tile: bool,
    /// AMX-INT8 (`CPUID.(7,0):EDX[25]`: `tdpbssd` and friends), reported only with `amx_tile`.
    pub amx_int8: bool,
    /// AVX-512 VBMI (`vpermi2b`, `vpermb`; Ice Lake, Sapphire Rapids, Zen 4) on top of
    /// `avx512vnni`: what the L64 layout's kernels need besides their level's features.
    pub avx512vbmi: bool,
    /// The CPU vendor is AMD (x86 only; informational: the level choice is the same on every vendor).
    pub amd: bool,
}

/// Features a caller promised through `assume_kernel` (bits as in [`CpuFeatures::bits`]).
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
    /// plus what a caller promised with `assume_kernel`.
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
            f.avx512vbmi = f.avx512vnni && has!("avx512vbmi");
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
    pub const fn from_bits(b: u32) -> Self {
        CpuFeatures {
            neon: b & 1 != 0,
            dotprod: b & 2 != 0,
            i8mm: b & 4 != 0,
            avx2: b & 8 != 0,
            avxvnni: b & 16 != 0,
            avx512vnni: b & 32 != 0,
            amx_tile: b & 64 != 0,
            amx_int8: b & 128 != 0,
            avx512vbmi: b & 256 != 0,
            amd: false,
        }
    }

    /// Features in `self` or in `o` (`amd` from `self`).
    pub fn union(self, o: Self) -> Self {
        CpuFeatures { amd: self.amd, ..Self::from_bits(self.bits() | o.bits()) }
    }

    /// Bit mask as in the C header: 1 NEON, 2 dotprod, 4 i8mm, 8 AVX2 (+FMA+F16C), 16 AVX-VNNI,
    /// 32 AVX-512 VNNI (+F, BW, VL), 64 AMX-TILE (with the OS state; the Linux permission is not
    /// part of it, see [`CpuFeatures::amx_tile`]), 128 AMX-INT8, 256 AVX-512 VBMI.
    pub fn bits(self) -> u32 {
        u32::from(self.neon)
            | u32::from(self.dotprod) << 1
            | u32::from(self.i8mm) << 2
            | u32::from(self.avx2) << 3
            | u32::from(self.avxvnni) << 4
            | u32::from(self.avx512vnni) << 5
            | u32::from(self.amx_tile) << 6
            | u32::from(self.amx_int8) << 7
            | u32::from(self.avx512vbmi) << 8
    }

    /// Whether every feature of `need` is in `self` (`amd` is not a feature and is ignored).
    pub fn contains(self, need: CpuFeatures) -> bool {
        self.bits() & need.bits() == need.bits()
    }
}

/// Adds `add` to the features [`CpuFeatures::detect`] reports from now on, for the whole process:
/// a caller's promise, checked by `assume_kernel`.
pub(crate) fn promise(add: CpuFeatures) {
    ASSUMED.fetch_or(add.bits(), Ordering::Relaxed);
}

/// The Linux tile-data permission for this process (AMX): asked the first time, then kept;
/// `false` on other OSes and architectures. Asked by `KernelLevel::is_available`
/// for a level whose table row says so, only when that level is wanted.
pub(crate) fn tile_permission() -> bool {
    #[cfg(target_arch = "x86_64")]
    return amx_os::permission();
    #[cfg(not(target_arch = "x86_64"))]
    false
}

#[cfg(test)]
mod tests {
    use super::*;

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
        for b in 0..512 {
            assert_eq!(CpuFeatures::from_bits(b).bits(), b);
        }
        let amd = CpuFeatures { avx2: true, amd: true, ..CpuFeatures::default() };
        assert!(amd.union(CpuFeatures::from_bits(16)).amd);
        assert_eq!(amd.union(CpuFeatures::from_bits(16)).bits(), 8 | 16);
    }
}
