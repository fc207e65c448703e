// ggml-t2p-release.h - drops the file pages a repacked weight was read from (header only; C11 and C++).
//
// With mmap on (llama.cpp's default) the loader hands set_tensor a pointer into its read-only,
// shared mapping of the model file. Once the shim has repacked a tensor into its own buffer, the
// file pages it came from are no longer read, yet they stay mapped and counted in the process's
// resident set beside the repacked copy: peak RSS grows by the size of the ternary tensors
// (issue 19 item 4; llama.cpp #16761, #19578). t2p_release_source() unmaps those pages from this
// process (madvise MADV_DONTNEED) when, and only when, that cannot lose a byte:
//
//   - only the page-aligned interior of [data, data + size) is touched: the first and last
//     partial pages may hold neighbouring tensors' bytes and stay as they are;
//   - every page of that interior must lie in a mapping that /proc/self/maps lists as shared
//     ('s'), not writable (no 'w') and file-backed (inode != 0). For a shared mapping
//     MADV_DONTNEED only removes this process's page-table entries: the data stays in the page
//     cache (or shmem) and the next access faults the same bytes back in from there or from the
//     file. Anonymous memory (the --no-mmap staging buffer, a caller's malloc) would read back as
//     zeros, and a private file mapping may hold copy-on-write pages (written before an mprotect,
//     or by a debugger) that would revert to the file's bytes: both are declined, as is any gap;
//   - the range is the caller's source buffer, which must stay mapped and unchanged for the
//     duration of set_tensor, so no other thread can replace a mapping inside it between the
//     check and the madvise;
//   - madvise refuses locked pages (--mlock), hugetlbfs pages not aligned to their size and
//     PFN mappings (EINVAL): then nothing is dropped and the status says so. (With --mlock
//     llama.cpp has locked the mapping before it hands over the tensors: every one is refused
//     and the pages stay resident, as --mlock asks; seen with llama-perplexity on the 0.5B model.)
//
// MAP_POPULATE (llama.cpp's prefetch) only pre-faults the mapping at mmap time; dropped pages
// are not faulted in again unless read. The page cache keeps the file's pages either way
// (clean, reclaimable under memory pressure): this is about the process's RSS, not the cache.
//
// Linux (and Android) only. macOS: declined - there is no /proc/self/maps (the check would need
// mach_vm_region), macOS's madvise(MADV_DONTNEED) is documented as a hint that deactivates pages
// rather than unmapping them, and it could not be tested here. Windows: declined - a view of a
// file (MapViewOfFile) has no documented call that removes a range from the working set
// (VirtualUnlock on unlocked pages does it only as an undocumented side effect; DiscardVirtualMemory
// and OfferVirtualMemory are for private memory); the clean file pages are trimmed from the
// working set by the OS under memory pressure. Both report T2P_RELEASE_UNSUPPORTED.
#pragma once

#include <stddef.h>
#include <stdint.h>

#if defined(__linux__)
#    include <errno.h>
#    include <fcntl.h>
#    include <stdio.h>
#    include <sys/mman.h>
#    include <unistd.h>
#endif

// Why t2p_release_source did what it did.
enum t2p_release_status {
    T2P_RELEASE_DONE        = 0,   // the interior's pages were unmapped from this process (bytes > 0)
    T2P_RELEASE_TOO_SMALL   = 1,   // no whole page lies inside the range (or data is NULL): nothing to do
    T2P_RELEASE_NOT_SHARED  = 2,   // part of the interior is not a read-only shared file mapping
                                   // (anonymous, private, writable, or not mapped): kept
    T2P_RELEASE_NO_MAPS     = 3,   // /proc/self/maps could not be read (errno in .error): kept
    T2P_RELEASE_REFUSED     = 4,   // madvise failed (errno in .error; EINVAL: locked, hugetlb or PFN
                                   // pages): nothing counted as dropped
    T2P_RELEASE_UNSUPPORTED = 5,   // not Linux: nothing is done (see the top of this file)
};

struct t2p_release_result {
    size_t    bytes;    // bytes of the range whose pages were unmapped (a multiple of the page size; 0 unless DONE)
    uintptr_t until;    // DONE: the end of those pages (data + size rounded down to a page); else 0
    int       status;   // enum t2p_release_status
    int       error;    // errno of the failing call for NO_MAPS and REFUSED, else 0
};

#if defined(__linux__)

// One line of /proc/self/maps: [start, end), whether it may be dropped (see the top of this file).
// 0 when the line does not parse.
static inline int t2p_release_parse_line(const char * line, uintptr_t * start, uintptr_t * end, int * droppable) {
    uintmax_t s = 0, e = 0, inode = 0;
    char      perms[5] = { 0 };
    // start-end perms offset dev inode [path]
    if (sscanf(line, "%jx-%jx %4s %*x %*s %ju", &s, &e, perms, &inode) != 4 || e <= s || perms[3] == '\0') {
        return 0;
    }
    *start     = (uintptr_t) s;
    *end       = (uintptr_t) e;
    *droppable = perms[0] == 'r' && perms[1] != 'w' && perms[3] == 's' && inode != 0;
    return 1;
}

// One step of the walk over /proc/self/maps (ascending addresses): everything below *cur is known
// droppable. -1 to go on, else the verdict for [*cur, hi).
static inline int t2p_release_step(const char * line, uintptr_t * cur, uintptr_t hi) {
    uintptr_t start = 0, end = 0;
    int       droppable = 0;
    if (!t2p_release_parse_line(line, &start, &end, &droppable)) {
        return T2P_RELEASE_NOT_SHARED;   // a line we cannot read: decide nothing from it
    }
    if (end <= *cur) {
        return -1;                       // below the range
    }
    if (start > *cur || !droppable) {
        return T2P_RELEASE_NOT_SHARED;   // a gap, or a mapping we must not drop
    }
    *cur = end;
    return *cur >= hi ? T2P_RELEASE_DONE : -1;
}

// Whether every byte of [lo, hi) lies in droppable mappings, without gaps: T2P_RELEASE_DONE when
// it does, T2P_RELEASE_NOT_SHARED or T2P_RELEASE_NO_MAPS (*error set) when not. Reads
// /proc/self/maps in pieces (no allocation; lines are cut at 255 bytes, past the fields used).
static inline int t2p_release_check(uintptr_t lo, uintptr_t hi, int * error) {
    int fd;
    do {
        fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        *error = errno;
        return T2P_RELEASE_NO_MAPS;
    }
    char      buf[4096];
    char      line[256];
    size_t    len    = 0;
    uintptr_t cur    = lo;
    int       status = -1;   // -1: undecided
    while (status < 0) {
        const ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            *error = errno;
            status = T2P_RELEASE_NO_MAPS;
            break;
        }
        if (n == 0) {   // the end: a last line without '\n', then the range runs past every mapping
            line[len] = '\0';
            status    = len > 0 ? t2p_release_step(line, &cur, hi) : -1;
            if (status < 0) {
                status = T2P_RELEASE_NOT_SHARED;
            }
            break;
        }
        for (ssize_t i = 0; i < n && status < 0; i++) {
            if (buf[i] != '\n') {
                if (len + 1 < sizeof line) {
                    line[len++] = buf[i];
                }
                continue;
            }
            line[len] = '\0';
            len       = 0;
            status    = t2p_release_step(line, &cur, hi);
        }
    }
    close(fd);
    return status;
}

#endif

// The whole `page`-sized pages inside [a, a + size): [*lo, *hi), page-aligned (page a power of 2
// or not). False, with nothing written, when there is none or the range wraps around the address
// space. Also used by the shim for its 2 MiB huge-page advice.
static inline int t2p_page_interior(uintptr_t a, size_t size, uintptr_t page, uintptr_t * lo, uintptr_t * hi) {
    if (page == 0 || a > UINTPTR_MAX - size || a > UINTPTR_MAX - (page - 1)) {
        return 0;
    }
    const uintptr_t l = (a + page - 1) / page * page;
    const uintptr_t h = (a + size) / page * page;
    if (l >= h) {
        return 0;
    }
    *lo = l;
    *hi = h;
    return 1;
}

// Unmaps from this process the whole pages inside [data, data + size) when they come from a
// read-only shared file mapping (see the top of this file); never touches anything else. Cost: one
// read of /proc/self/maps and one madvise. Thread-safe; sets no global state (errno aside).
static inline struct t2p_release_result t2p_release_source(const void * data, size_t size) {
    struct t2p_release_result r = { 0, 0, T2P_RELEASE_TOO_SMALL, 0 };
#if defined(__linux__)
    const long ps = sysconf(_SC_PAGESIZE);
    if (data == NULL || ps <= 0 || size < (size_t) ps) {
        return r;
    }
    uintptr_t lo = 0;
    uintptr_t hi = 0;
    if (!t2p_page_interior((uintptr_t) data, size, (uintptr_t) ps, &lo, &hi)) {
        return r;   // no whole page, or it wraps around: not a real buffer
    }
    r.status = t2p_release_check(lo, hi, &r.error);
    if (r.status != T2P_RELEASE_DONE) {
        return r;
    }
    if (madvise((void *) lo, (size_t) (hi - lo), MADV_DONTNEED) != 0) {
        r.status = T2P_RELEASE_REFUSED;
        r.error  = errno;
        return r;
    }
    r.bytes = (size_t) (hi - lo);
    r.until = hi;
#else
    (void) data;
    (void) size;
    r.status = T2P_RELEASE_UNSUPPORTED;
#endif
    return r;
}

// A short name for a status, for log lines.
static inline const char * t2p_release_status_name(int status) {
    switch (status) {
        case T2P_RELEASE_DONE:        return "released";
        case T2P_RELEASE_TOO_SMALL:   return "no whole page";
        case T2P_RELEASE_NOT_SHARED:  return "not a read-only shared file mapping";
        case T2P_RELEASE_NO_MAPS:     return "/proc/self/maps unreadable";
        case T2P_RELEASE_REFUSED:     return "madvise refused";
        case T2P_RELEASE_UNSUPPORTED: return "not supported on this OS";
        default:                      return "unknown";
    }
}
