//! The process's memory pages around a repack: dropping a repacked tensor's file-mapped source
//! from the resident set ([`release_source`]), and transparent huge-page advice on the plugin's
//! own buffers ([`advise_huge_pages`]).
//!
//! With mmap on (llama.cpp's default) the loader hands the plugin a pointer into its read-only,
//! shared mapping of the model file. Once a tensor is repacked into the plugin's buffer, the file
//! pages it came from are no longer read, yet they stay mapped and counted in the process's
//! resident set beside the repacked copy: peak RSS grows by the size of the ternary tensors
//! (issue 19 item 4; llama.cpp #16761, #19578). [`release_source`] unmaps those pages from this
//! process (`madvise(MADV_DONTNEED)`) when, and only when, that cannot lose a byte:
//!
//! - only the page-aligned interior of `[data, data + size)` is touched: the first and last
//!   partial pages may hold neighbouring tensors' bytes and stay as they are;
//! - every page of that interior must lie in a mapping that `/proc/self/maps` lists as shared
//!   (`s`), not writable (no `w`) and file-backed (inode != 0). For a shared mapping
//!   `MADV_DONTNEED` only removes this process's page-table entries: the data stays in the page
//!   cache (or shmem) and the next access faults the same bytes back in from there or from the
//!   file. Anonymous memory (the `--no-mmap` staging buffer, a caller's malloc) would read back as
//!   zeros, and a private file mapping may hold copy-on-write pages (written before an
//!   `mprotect`, or by a debugger) that would revert to the file's bytes: both are declined, as is
//!   any gap;
//! - the range is the caller's source buffer, which must stay mapped and unchanged for the
//!   duration of the call, so no other thread can replace a mapping inside it between the check
//!   and the `madvise`;
//! - `madvise` refuses locked pages (`--mlock`), hugetlbfs pages not aligned to their size and PFN
//!   mappings (`EINVAL`): then nothing is dropped, nothing else is done, and the status says so.
//!   (With `--mlock` llama.cpp locks the mapping as it loads, up to each host tensor it has
//!   loaded: a tensor behind such a range is refused and its pages stay resident, as `--mlock`
//!   asks.)
//!
//! `MAP_POPULATE` (llama.cpp's prefetch) only pre-faults the mapping at mmap time; dropped pages
//! are not faulted in again unless read, or unless a read of a neighbouring page maps the large
//! folio they share with it: a kernel that caches a file in large folios (Linux 6.18 on ext4: 2 MiB)
//! may map a whole folio on one fault, within its mapping. So a released range then gets a mapping
//! of its own (`MADV_NOHUGEPAGE` on exactly the range splits the host's mapping at its ends; the
//! same bytes; the neighbours' pages in the two end regions are unmapped too and refault alone when
//! read), and a fault next door stays next door. About two mappings per released tensor (slices of
//! one tensor merge): some 800 for a 27B model, far below Linux's default limit of 65,530. The page cache keeps the file's pages either way (clean,
//! reclaimable under memory pressure): this is about the process's RSS, not the cache.
//!
//! Linux (and Android) only. macOS: declined - there is no `/proc/self/maps` (the check would need
//! `mach_vm_region`), macOS's `madvise(MADV_DONTNEED)` is documented as a hint that deactivates
//! pages rather than unmapping them, and it could not be tested here. Windows: declined - a view
//! of a file (`MapViewOfFile`) has no documented call that removes a range from the working set
//! (`VirtualUnlock` on unlocked pages does it only as an undocumented side effect;
//! `DiscardVirtualMemory` and `OfferVirtualMemory` are for private memory); the clean file pages
//! are trimmed from the working set by the OS under memory pressure. Both report
//! [`Release::Unsupported`].

use std::io::Read;

/// Why [`release_source`] did what it did (the C ABI's `GGML_T2P_RELEASE_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum Release {
    /// The interior's pages were unmapped from this process (`bytes > 0`).
    Done = 0,
    /// No whole page lies inside the range (or it is NULL): nothing to do.
    TooSmall = 1,
    /// Part of the interior is not a read-only shared file mapping (anonymous, private, writable,
    /// or not mapped): kept.
    NotShared = 2,
    /// `/proc/self/maps` could not be read (errno in `error`): kept.
    NoMaps = 3,
    /// `madvise` failed (errno in `error`; `EINVAL`: locked, hugetlb or PFN pages): nothing
    /// counted as dropped.
    Refused = 4,
    /// Not Linux: nothing is done (see the top of this module).
    Unsupported = 5,
}

/// What [`release_source`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Released {
    /// Why.
    pub status: Release,
    /// Bytes of the range whose pages were unmapped (a multiple of the page size; 0 unless
    /// [`Release::Done`]).
    pub bytes: usize,
    /// [`Release::Done`]: the end of those pages (`data + size` rounded down to a page); else 0.
    pub until: usize,
    /// errno of the failing call for [`Release::NoMaps`] and [`Release::Refused`], else 0.
    pub error: i32,
}

impl Released {
    fn kept(status: Release, error: i32) -> Self {
        Released { status, bytes: 0, until: 0, error }
    }
}

/// Bytes of a transparent huge page (x86-64 and aarch64 with 4 KiB pages).
pub const HUGE_PAGE: usize = 2 << 20;

/// The whole `page`-sized pages inside `[a, a + size)`: `(lo, hi)`, page-aligned (`page` a power
/// of 2 or not). `None` when there is none or the range wraps around the address space.
pub fn page_interior(a: usize, size: usize, page: usize) -> Option<(usize, usize)> {
    if page == 0 || a > usize::MAX - size || a > usize::MAX - (page - 1) {
        return None;
    }
    let lo = a.div_ceil(page) * page;
    let hi = (a + size) / page * page;
    (lo < hi).then_some((lo, hi))
}

/// One line of `/proc/self/maps` (`start-end perms offset dev inode [path]`): `[start, end)` and
/// whether its pages may be dropped (see the top of this module). `None` when the line does not
/// parse.
pub fn parse_maps_line(line: &[u8]) -> Option<(usize, usize, bool)> {
    let mut fields = line.split(u8::is_ascii_whitespace).filter(|f| !f.is_empty());
    let (range, perms, offset, _dev, inode) =
        (fields.next()?, fields.next()?, fields.next()?, fields.next()?, fields.next()?);
    fn hex(b: &[u8]) -> Option<usize> {
        usize::from_str_radix(core::str::from_utf8(b).ok()?, 16).ok()
    }
    let dash = range.iter().position(|&b| b == b'-')?;
    let (start, end) = (hex(&range[..dash])?, hex(&range[dash + 1..])?);
    u64::from_str_radix(core::str::from_utf8(offset).ok()?, 16).ok()?; // (past 4 GiB on 32-bit targets)
    let inode: u64 = core::str::from_utf8(inode).ok()?.parse().ok()?;
    if end <= start || perms.len() != 4 {
        return None;
    }
    Some((start, end, perms[0] == b'r' && perms[1] != b'w' && perms[3] == b's' && inode != 0))
}

/// One step of the walk over `/proc/self/maps` (ascending addresses): everything below `*cur` is
/// known droppable. `None` to go on, else the verdict for `[*cur, hi)`.
fn step(line: &[u8], cur: &mut usize, hi: usize) -> Option<Release> {
    let Some((start, end, droppable)) = parse_maps_line(line) else {
        return Some(Release::NotShared); // a line we cannot read: decide nothing from it
    };
    if end <= *cur {
        return None; // below the range
    }
    if start > *cur || !droppable {
        return Some(Release::NotShared); // a gap, or a mapping we must not drop
    }
    *cur = end;
    (*cur >= hi).then_some(Release::Done)
}

/// Whether every byte of `[lo, hi)` lies in droppable mappings of `maps` (the text of
/// `/proc/self/maps`), without gaps: [`Release::Done`] when it does, [`Release::NotShared`] when
/// not, `Err(errno)` when reading fails. Reads in pieces into fixed buffers (lines are cut at 255
/// bytes, past the fields used).
pub fn check_maps(mut maps: impl Read, lo: usize, hi: usize) -> Result<Release, i32> {
    let mut buf = [0u8; 4096];
    let mut line = [0u8; 256];
    let mut len = 0;
    let mut cur = lo;
    loop {
        let n = match maps.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.raw_os_error().unwrap_or(0)),
        };
        if n == 0 {
            // the end: a last line without '\n', then the range runs past every mapping
            let last = if len > 0 { step(&line[..len], &mut cur, hi) } else { None };
            return Ok(last.unwrap_or(Release::NotShared));
        }
        for &b in &buf[..n] {
            if b != b'\n' {
                if len + 1 < line.len() {
                    line[len] = b;
                    len += 1;
                }
                continue;
            }
            let verdict = step(&line[..len], &mut cur, hi);
            len = 0;
            if let Some(v) = verdict {
                return Ok(v);
            }
        }
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) mod os {
    use core::ffi::{c_char, c_int, c_ulong, c_void};

    // The values of every Linux architecture Rust targets (asm-generic/mman-common.h).
    pub const MADV_DONTNEED: c_int = 4;
    pub const MADV_HUGEPAGE: c_int = 14;
    pub const MADV_NOHUGEPAGE: c_int = 15;
    const AT_PAGESZ: c_ulong = 6;

    extern "C" {
        fn madvise(addr: *mut c_void, len: usize, advice: c_int) -> c_int;
        fn getauxval(kind: c_ulong) -> c_ulong;
        fn strerror(errnum: c_int) -> *const c_char;
    }

    /// The page size (`AT_PAGESZ`, what `sysconf(_SC_PAGESIZE)` answers).
    pub fn page_size() -> usize {
        // SAFETY: getauxval reads the process's auxiliary vector; no memory is passed.
        unsafe { getauxval(AT_PAGESZ) as usize }
    }

    /// `madvise(lo, hi - lo, advice)`: `Err(errno)` when refused.
    ///
    /// # Safety
    /// `[lo, hi)` must be page-aligned memory of this process whose contents `advice` keeps
    /// (`MADV_DONTNEED` only on read-only shared file mappings, see the module's top).
    pub unsafe fn advise(lo: usize, hi: usize, advice: c_int) -> Result<(), i32> {
        // SAFETY: the caller's contract.
        if unsafe { madvise(lo as *mut c_void, hi - lo, advice) } == 0 {
            return Ok(());
        }
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    }

    /// The C library's text for an errno, as `strerror` gives it.
    pub fn error_text(errnum: i32) -> String {
        // SAFETY: strerror returns a NUL-terminated string that stays valid until the next call
        // on this thread (glibc: static for known values, a thread-local buffer otherwise).
        unsafe { core::ffi::CStr::from_ptr(strerror(errnum)) }.to_string_lossy().into_owned()
    }
}

/// The C library's text for an errno (`strerror`), for the load line (Linux; elsewhere the
/// number).
pub fn error_text(errnum: i32) -> String {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    return os::error_text(errnum);
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    return format!("error {errnum}");
}

/// Unmaps from this process the whole pages inside `[data, data + size)` when they come from a
/// read-only shared file mapping (see the top of this module); never touches anything else. Cost:
/// one read of `/proc/self/maps` and two `madvise` calls (the release, then the split).
/// Thread-safe; sets no global state (errno
/// aside).
///
/// # Safety
/// `[data, data + size)` must be memory of this process that stays mapped and unchanged during
/// the call (or `data` NULL).
pub unsafe fn release_source(data: *const u8, size: usize) -> Released {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let ps = os::page_size();
        if data.is_null() || ps == 0 || size < ps {
            return Released::kept(Release::TooSmall, 0);
        }
        let Some((lo, hi)) = page_interior(data as usize, size, ps) else {
            return Released::kept(Release::TooSmall, 0); // no whole page, or it wraps around
        };
        let verdict = match std::fs::File::open("/proc/self/maps") {
            Ok(maps) => check_maps(maps, lo, hi),
            Err(e) => Err(e.raw_os_error().unwrap_or(0)),
        };
        match verdict {
            Err(error) => return Released::kept(Release::NoMaps, error),
            Ok(Release::Done) => {}
            Ok(other) => return Released::kept(other, 0),
        }
        // SAFETY: [lo, hi) lies in read-only shared file mappings (checked above), which the
        // caller keeps mapped: dropping its pages loses nothing (they refault from the file).
        if let Err(error) = unsafe { os::advise(lo, hi, os::MADV_DONTNEED) } {
            return Released::kept(Release::Refused, error); // (locked pages: nothing else done)
        }
        // Then a mapping of its own for [lo, hi): a flag on exactly that range splits the host's
        // mapping at lo and hi. Else a kernel that maps a file's large folios whole (Linux 6.18
        // on ext4 maps 2 MiB of them at once; MADV_DONTNEED zaps such a mapping whole too) brings
        // the released pages back the first time the host reads a neighbouring page, a small
        // tensor sharing the folio: 114 MiB of them on the Bonsai 2 2B, 10% of its peak RSS
        // (docs/results.md section 10.1). The split also unmaps the neighbours' pages in the two
        // 2 MiB regions at the ends; they refault, alone, when read. Only after a release that
        // succeeded: on locked pages (--mlock) the split would unmap locked neighbours. Refused
        // (a kernel without THP): released all the same.
        // SAFETY: whole pages of the caller's mapping; MADV_NOHUGEPAGE changes no contents.
        let _ = unsafe { os::advise(lo, hi, os::MADV_NOHUGEPAGE) };
        Released { status: Release::Done, bytes: hi - lo, until: hi, error: 0 }
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        let _ = (data, size);
        Released::kept(Release::Unsupported, 0)
    }
}

/// Decode streams every repacked byte once per token, so the weights' pages decide how often the
/// CPU walks page tables and where its hardware prefetchers stop (they do not cross a 4 KiB
/// page). On Linux, asks for transparent huge pages on the whole 2 MiB pages inside a fresh
/// buffer, before the repack writes (and so faults) them: with THP in "madvise" mode (Debian's and
/// Ubuntu's default) they are 4 KiB pages otherwise; in "always" mode this changes nothing; in
/// "never" mode the kernel ignores it. `MADV_HUGEPAGE` changes no contents. `None`: nothing asked
/// (no whole huge page inside, not Linux); `Some(Ok(bytes))` advised; `Some(Err(errno))` refused
/// (`EINVAL` on a kernel without THP). Measured in docs/results.md ("Huge pages").
///
/// # Safety
/// `[base, base + size)` must be memory of this process (or `base` NULL).
pub unsafe fn advise_huge_pages(base: *mut u8, size: usize) -> Option<Result<usize, i32>> {
    if base.is_null() {
        return None;
    }
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let (lo, hi) = page_interior(base as usize, size, HUGE_PAGE)?;
        // SAFETY: whole pages of the caller's memory; MADV_HUGEPAGE changes no contents.
        Some(unsafe { os::advise(lo, hi, os::MADV_HUGEPAGE) }.map(|()| hi - lo))
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        let _ = size;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interior_pages() {
        assert_eq!(page_interior(100, 8192, 4096), Some((4096, 8192)));
        assert_eq!(page_interior(4096, 8192, 4096), Some((4096, 12288)));
        assert_eq!(page_interior(100, 4096, 4096), None); // a page's worth across two pages
        assert_eq!(page_interior(0, 4095, 4096), None);
        assert_eq!(page_interior(3000, 10000, 3000), Some((3000, 12000))); // not a power of 2
        assert_eq!(page_interior(usize::MAX - 10, 20, 4096), None); // wraps
        assert_eq!(page_interior(1, 10, 0), None);
        assert_eq!(page_interior(1 << 20, 5 << 20, HUGE_PAGE), Some((2 << 20, 6 << 20)));
    }

    #[test]
    fn maps_lines() {
        let l = b"7f0000000000-7f0000004000 r--s 00000000 08:01 1234   /models/m.gguf";
        assert_eq!(parse_maps_line(l), Some((0x7f00_0000_0000, 0x7f00_0000_4000, true)));
        for (line, droppable) in [
            (&b"1000-2000 r--p 00000000 08:01 1234 /m"[..], false), // private
            (b"1000-2000 rw-s 00000000 08:01 1234 /m", false),      // writable
            (b"1000-2000 r--s 00000000 00:00 0", false),            // anonymous shared
            (b"1000-2000 ---s 00000000 08:01 1234 /m", false),      // not readable
            (b"1000-2000 r-xs 00001000 08:01 99", true),
        ] {
            assert_eq!(parse_maps_line(line), Some((0x1000, 0x2000, droppable)), "{}", String::from_utf8_lossy(line));
        }
        for bad in
            [&b""[..], b"1000-2000 r--s", b"2000-1000 r--s 0 08:01 1", b"1000-2000 r-s 0 08:01 1", b"x-2000 r--s 0 0 1"]
        {
            assert_eq!(parse_maps_line(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    fn walk(maps: &str, lo: usize, hi: usize) -> Result<Release, i32> {
        check_maps(maps.as_bytes(), lo, hi)
    }

    #[test]
    fn the_walk_needs_droppable_mappings_without_gaps() {
        let maps = "0-1000 r-xp 00000000 08:01 7 /bin/x\n\
                    1000-3000 r--s 00000000 08:01 9 /m\n\
                    3000-5000 r--s 00002000 08:01 9 /m\n\
                    6000-7000 r--s 00000000 08:01 9 /m\n\
                    7000-8000 rw-p 00000000 00:00 0\n\
                    8000-9000 r--s 00000000 08:01 9 /m";
        assert_eq!(walk(maps, 0x1000, 0x5000), Ok(Release::Done)); // across two mappings
        assert_eq!(walk(maps, 0x2000, 0x3000), Ok(Release::Done));
        assert_eq!(walk(maps, 0x2000, 0x6000), Ok(Release::NotShared)); // a gap
        assert_eq!(walk(maps, 0x6000, 0x8000), Ok(Release::NotShared)); // into anonymous memory
        assert_eq!(walk(maps, 0x0, 0x2000), Ok(Release::NotShared)); // a private mapping first
        assert_eq!(walk(maps, 0x8000, 0x9000), Ok(Release::Done)); // the last line has no '\n'
        assert_eq!(walk(maps, 0x8000, 0xa000), Ok(Release::NotShared)); // past every mapping
        assert_eq!(walk("1000-2000 r--s 0 8:1 9 /m\ngarbage\n", 0x1000, 0x3000), Ok(Release::NotShared));
        // a line longer than the buffer keeps its fields
        let long = format!("1000-3000 r--s 00000000 08:01 9 /{}\n", "p".repeat(5000));
        assert_eq!(walk(&long, 0x1000, 0x3000), Ok(Release::Done));
        // read in pieces that cut lines
        struct Dribble<'a>(&'a [u8]);
        impl Read for Dribble<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = self.0.len().min(3).min(buf.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        assert_eq!(check_maps(Dribble(maps.as_bytes()), 0x1000, 0x5000), Ok(Release::Done));
        struct Broken;
        impl Read for Broken {
            fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
                Err(std::io::Error::from_raw_os_error(13))
            }
        }
        assert_eq!(check_maps(Broken, 0, 1), Err(13));
    }

    #[test]
    fn anonymous_memory_is_kept_and_null_is_too_small() {
        let v = vec![7u8; 1 << 20];
        // SAFETY: a live buffer of this process.
        let r = unsafe { release_source(v.as_ptr(), v.len()) };
        if cfg!(any(target_os = "linux", target_os = "android")) {
            assert_eq!(r, Released::kept(Release::NotShared, 0));
        } else {
            assert_eq!(r.status, Release::Unsupported);
        }
        assert!(v.iter().all(|&b| b == 7));
        // SAFETY: NULL is allowed.
        let r = unsafe { release_source(core::ptr::null(), 1 << 20) };
        assert!(matches!(r.status, Release::TooSmall | Release::Unsupported));
        // SAFETY: NULL is allowed.
        assert_eq!(unsafe { advise_huge_pages(core::ptr::null_mut(), 4 << 20) }, None);
    }
}
