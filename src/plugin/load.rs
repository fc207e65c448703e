//! The load accounting of a plugin: what was repacked, how long it took, what became of the
//! source's file pages and of the huge-page advice; and the one line that sums it up at the first
//! matrix multiplication ([`load_line`]).

use super::pages::{Release, Released};
use crate::repack::SourceType;
use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering::Relaxed};

/// Counters of a plugin's load, updated by every repack (from any thread).
#[derive(Debug, Default)]
pub struct LoadStats {
    n_pq2: AtomicU64,
    n_ptq1: AtomicU64,
    bytes: AtomicU64,
    nanos: AtomicU64,
    released: AtomicU64,
    n_released: AtomicU64,
    n_not_mapped: AtomicU64,
    n_refused: AtomicU64,
    refused_errno: AtomicI32,
    release_nanos: AtomicU64,
    huge_advised: AtomicU64,
    huge_errno: AtomicI32,
    reported: AtomicBool,
}

/// A copy of the counters ([`LoadStats::snapshot`]), for the line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadCounts {
    /// PQ2_0 tensors repacked.
    pub n_pq2: u64,
    /// PTQ1_0 tensors repacked.
    pub n_ptq1: u64,
    /// Repacked bytes, over all tensors.
    pub bytes: u64,
    /// Nanoseconds in the repack calls themselves (all threads of each).
    pub nanos: u64,
    /// Bytes whose file pages were unmapped.
    pub released: u64,
    /// Tensors with some pages unmapped.
    pub n_released: u64,
    /// Tensors not in a read-only shared file mapping (`--no-mmap`).
    pub n_not_mapped: u64,
    /// Tensors `madvise` refused (`--mlock`), or whose maps were unreadable.
    pub n_refused: u64,
    /// errno of the last refusal.
    pub refused_errno: i32,
    /// Nanoseconds spent releasing.
    pub release_nanos: u64,
    /// Bytes advised as huge pages.
    pub huge_advised: u64,
    /// errno of the last refused huge-page advice (0: none refused).
    pub huge_errno: i32,
}

/// What became of one tensor's source pages (its slices' [`Released`] folded).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceFate {
    /// The release is off (`GGML_T2P_RELEASE_SOURCE=0`): not counted.
    Off,
    /// Some pages were released: these bytes.
    Released(u64),
    /// Kept: why (the first slice that was not released nor too small), and its errno.
    Kept(Release, i32),
}

impl SourceFate {
    /// Folds a slice's release into the tensor's fate; `false` when the release should stop (the
    /// rest of the tensor is the same memory).
    pub fn add(&mut self, r: Released) -> bool {
        match (r.status, &mut *self) {
            (Release::Done, SourceFate::Released(b)) => *b += r.bytes as u64,
            (Release::TooSmall, _) => {}
            (Release::Done, _) => *self = SourceFate::Released(r.bytes as u64),
            (why, _) => {
                if !matches!(self, SourceFate::Released(_)) {
                    *self = SourceFate::Kept(why, r.error);
                }
                return false;
            }
        }
        true
    }
}

impl LoadStats {
    /// Counts one repacked tensor: its type, repacked bytes and repack time, and its source's fate.
    pub fn add_tensor(&self, src: SourceType, repacked: usize, nanos: u64, release_nanos: u64, fate: SourceFate) {
        match src {
            SourceType::Pq2_0 => &self.n_pq2,
            SourceType::Ptq1_0 => &self.n_ptq1,
        }
        .fetch_add(1, Relaxed);
        self.bytes.fetch_add(repacked as u64, Relaxed);
        self.nanos.fetch_add(nanos, Relaxed);
        self.release_nanos.fetch_add(release_nanos, Relaxed);
        match fate {
            SourceFate::Off | SourceFate::Kept(Release::TooSmall | Release::Done | Release::Unsupported, _) => {}
            SourceFate::Released(0) => {}
            SourceFate::Released(bytes) => {
                self.released.fetch_add(bytes, Relaxed);
                self.n_released.fetch_add(1, Relaxed);
            }
            SourceFate::Kept(Release::NotShared, _) => {
                self.n_not_mapped.fetch_add(1, Relaxed);
            }
            SourceFate::Kept(Release::Refused | Release::NoMaps, error) => {
                self.n_refused.fetch_add(1, Relaxed);
                self.refused_errno.store(error, Relaxed);
            }
        }
    }

    /// Counts one buffer's huge-page advice ([`super::pages::advise_huge_pages`]).
    pub fn add_huge_advice(&self, advice: Option<Result<usize, i32>>) {
        match advice {
            Some(Ok(bytes)) => {
                self.huge_advised.fetch_add(bytes as u64, Relaxed);
            }
            Some(Err(errno)) => self.huge_errno.store(errno, Relaxed),
            None => {}
        }
    }

    /// `true` the first time only (thread-safe): whether the caller should report.
    pub fn first_report(&self) -> bool {
        !self.reported.load(Relaxed) && !self.reported.swap(true, Relaxed)
    }

    /// The counters now.
    pub fn snapshot(&self) -> LoadCounts {
        LoadCounts {
            n_pq2: self.n_pq2.load(Relaxed),
            n_ptq1: self.n_ptq1.load(Relaxed),
            bytes: self.bytes.load(Relaxed),
            nanos: self.nanos.load(Relaxed),
            released: self.released.load(Relaxed),
            n_released: self.n_released.load(Relaxed),
            n_not_mapped: self.n_not_mapped.load(Relaxed),
            n_refused: self.n_refused.load(Relaxed),
            refused_errno: self.refused_errno.load(Relaxed),
            release_nanos: self.release_nanos.load(Relaxed),
            huge_advised: self.huge_advised.load(Relaxed),
            huge_errno: self.huge_errno.load(Relaxed),
        }
    }
}

/// What the load line says beside the counters.
#[derive(Clone, Copy, Debug)]
pub struct LineContext<'a> {
    /// The kernel level's name.
    pub kernel: &'a str,
    /// The layouts' names: PQ2_0's and PTQ1_0's (`unknown` where the plugin takes none).
    pub pq2_layout: &'a str,
    /// See `pq2_layout`.
    pub ptq1_layout: &'a str,
    /// `GGML_T2P_RELEASE_SOURCE`.
    pub release_source: bool,
    /// `GGML_T2P_HUGE_PAGES`.
    pub huge_pages: bool,
    /// Whether this OS releases source pages and advises huge pages (Linux).
    pub linux: bool,
}

const MIB: f64 = 1024.0 * 1024.0;

/// The load line, with the `ggml-t2p: ` prefix and the final `'\n'`, e.g. `ggml-t2p: 168 tensors
/// repacked (168 PQ2_0 -> X16; 90.6 MiB) in 0.36 s (252 MiB/s); kernel avx512vnni; released 90.0
/// MiB of file-mapped source (168 tensors) in 0.015 s`. `error_text` names an errno (`strerror`).
pub fn load_line(c: &LoadCounts, x: &LineContext, error_text: &dyn Fn(i32) -> String) -> String {
    let mut to = String::new();
    if c.n_pq2 > 0 {
        to = format!("{} PQ2_0 -> {}", c.n_pq2, x.pq2_layout);
    }
    if c.n_ptq1 > 0 {
        to += &format!("{}{} PTQ1_0 -> {}", if to.is_empty() { "" } else { ", " }, c.n_ptq1, x.ptq1_layout);
    }
    // what became of the source's pages: "released X MiB of file-mapped source in T s (N kept: why)"
    let src = if !x.release_source {
        "source pages kept (GGML_T2P_RELEASE_SOURCE=0)".to_string()
    } else if x.linux {
        let mut s = format!(
            "released {:.1} MiB of file-mapped source ({} tensors) in {:.3} s",
            c.released as f64 / MIB,
            c.n_released,
            c.release_nanos as f64 * 1e-9
        );
        let mut kept = Vec::new();
        if c.n_not_mapped > 0 {
            kept.push(format!("{} not in a read-only shared file mapping", c.n_not_mapped));
        }
        if c.n_refused > 0 {
            kept.push(format!("{} refused: {}", c.n_refused, error_text(c.refused_errno)));
        }
        if !kept.is_empty() {
            s += &format!(" (tensors kept: {})", kept.join(", "));
        }
        s
    } else {
        "source pages kept (not supported on this OS)".to_string()
    };
    // the huge page advice on the buffers: "; huge pages advised for X MiB" (Linux, when asked)
    let mut huge = String::new();
    if x.linux && x.huge_pages {
        huge = format!("; huge pages advised for {:.1} MiB", c.huge_advised as f64 / MIB);
        if c.huge_errno != 0 {
            huge += &format!(" (advice refused: {})", error_text(c.huge_errno));
        }
    }
    // the repack's own time (the repack calls, all threads of each) and its rate in MiB of
    // repacked bytes per second
    let n = c.n_pq2 + c.n_ptq1;
    let (mib, sec) = (c.bytes as f64 / MIB, c.nanos as f64 * 1e-9);
    format!(
        "ggml-t2p: {n} tensor{} repacked ({to}; {mib:.1} MiB) in {sec:.2} s ({:.0} MiB/s); kernel {}; {src}{huge}\n",
        if n == 1 { "" } else { "s" },
        if sec > 0.0 { mib / sec } else { 0.0 },
        x.kernel
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const X: LineContext = LineContext {
        kernel: "avx512vnni",
        pq2_layout: "X16",
        ptq1_layout: "unknown",
        release_source: true,
        huge_pages: false,
        linux: true,
    };

    fn text(e: i32) -> String {
        format!("E{e}")
    }

    fn mib(m: f64) -> u64 {
        (m * MIB) as u64
    }

    #[test]
    fn the_line_of_a_mapped_load() {
        let c = LoadCounts {
            n_pq2: 168,
            bytes: mib(90.6),
            nanos: 360_000_000,
            released: mib(90.0),
            n_released: 168,
            release_nanos: 15_000_000,
            ..Default::default()
        };
        assert_eq!(
            load_line(&c, &X, &text),
            "ggml-t2p: 168 tensors repacked (168 PQ2_0 -> X16; 90.6 MiB) in 0.36 s (252 MiB/s); kernel avx512vnni; \
             released 90.0 MiB of file-mapped source (168 tensors) in 0.015 s\n"
        );
    }

    #[test]
    fn kept_sources_huge_pages_and_both_types() {
        let c = LoadCounts {
            n_pq2: 1,
            bytes: 3 << 20,
            nanos: 0,
            n_not_mapped: 1,
            n_refused: 2,
            refused_errno: 22,
            huge_advised: 2 << 20,
            huge_errno: 12,
            ..Default::default()
        };
        let x = LineContext { huge_pages: true, ..X };
        assert_eq!(
            load_line(&c, &x, &text),
            "ggml-t2p: 1 tensor repacked (1 PQ2_0 -> X16; 3.0 MiB) in 0.00 s (0 MiB/s); kernel avx512vnni; released 0.0 \
             MiB of file-mapped source (0 tensors) in 0.000 s (tensors kept: 1 not in a read-only shared file mapping, \
             2 refused: E22); huge pages advised for 2.0 MiB (advice refused: E12)\n"
        );
        let c = LoadCounts { n_pq2: 2, n_ptq1: 3, bytes: 5 << 20, nanos: 2_000_000_000, ..Default::default() };
        let x = LineContext { ptq1_layout: "PTQ1_0x4", release_source: false, huge_pages: true, linux: false, ..X };
        assert_eq!(
            load_line(&c, &x, &text),
            "ggml-t2p: 5 tensors repacked (2 PQ2_0 -> X16, 3 PTQ1_0 -> PTQ1_0x4; 5.0 MiB) in 2.00 s (2 MiB/s); kernel \
             avx512vnni; source pages kept (GGML_T2P_RELEASE_SOURCE=0)\n"
        );
        let c = LoadCounts { n_ptq1: 1, bytes: 1 << 20, nanos: 1, ..Default::default() };
        let x = LineContext { ptq1_layout: "X16", linux: false, ..X };
        assert!(load_line(&c, &x, &text).ends_with(
            "(1 PTQ1_0 -> X16; 1.0 MiB) in 0.00 s (1000000000 MiB/s); kernel \
             avx512vnni; source pages kept (not supported on this OS)\n"
        ));
    }

    #[test]
    fn fates_are_counted_per_tensor() {
        let s = LoadStats::default();
        let done = |b| Released { status: Release::Done, bytes: b, until: 0, error: 0 };
        let kept = |st, e| Released { status: st, bytes: 0, until: 0, error: e };
        // slices: released, too small, released again
        let mut f = SourceFate::Kept(Release::TooSmall, 0);
        assert!(f.add(done(4096)) && f.add(kept(Release::TooSmall, 0)) && f.add(done(8192)));
        assert_eq!(f, SourceFate::Released(12288));
        s.add_tensor(SourceType::Pq2_0, 100, 5, 1, f);
        // refused after a released slice: still released, the rest kept
        let mut f = SourceFate::Kept(Release::TooSmall, 0);
        assert!(f.add(done(4096)));
        assert!(!f.add(kept(Release::Refused, 22)));
        assert_eq!(f, SourceFate::Released(4096));
        s.add_tensor(SourceType::Ptq1_0, 100, 5, 1, f);
        // not shared; refused; no maps; unsupported; too small; off
        for (st, e) in
            [(Release::NotShared, 0), (Release::Refused, 22), (Release::NoMaps, 13), (Release::Unsupported, 0)]
        {
            let mut f = SourceFate::Kept(Release::TooSmall, 0);
            assert!(!f.add(kept(st, e)));
            s.add_tensor(SourceType::Pq2_0, 1, 1, 1, f);
        }
        s.add_tensor(SourceType::Pq2_0, 1, 1, 1, SourceFate::Kept(Release::TooSmall, 0));
        s.add_tensor(SourceType::Pq2_0, 1, 1, 0, SourceFate::Off);
        s.add_huge_advice(Some(Ok(4 << 20)));
        s.add_huge_advice(None);
        s.add_huge_advice(Some(Err(22)));
        let c = s.snapshot();
        assert_eq!(
            c,
            LoadCounts {
                n_pq2: 7,
                n_ptq1: 1,
                bytes: 206,
                nanos: 16,
                released: 16384,
                n_released: 2,
                n_not_mapped: 1,
                n_refused: 2,
                refused_errno: 13,
                release_nanos: 7,
                huge_advised: 4 << 20,
                huge_errno: 22,
            }
        );
        assert!(s.first_report() && !s.first_report());
    }
}
