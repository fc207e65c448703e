/*
 * win_bits.c - the bits of the C ABI that must not depend on the operating system.
 *
 * tools/windows-test.py builds this program twice, natively (Linux, gcc) and for Windows
 * (x86_64-w64-mingw32-gcc against the x86_64-pc-windows-gnu libggml_t2p.a), runs the Windows one
 * under Wine, and requires the same output lines from both (lines starting with "# " are
 * informational and not compared: thread counts, timings).
 *
 * What it prints:
 *   - the CPU features and the kernel level the library chose (the Windows build detects them on
 *     its own code path), and for every x86 level whether the library runs it and whether it
 *     accepts a promise of it (ggml_t2p_assume_kernel: a level the OS reports absent is refused);
 *   - with GGML_T2P_KERNEL set, what the plugin's configuration step makes of it through the same
 *     library calls (ggml_t2p_kernel_from_name, ggml_t2p_layout_for, ggml_t2p_assume_kernel):
 *     the level runs, or "declining: this CPU cannot run GGML_T2P_KERNEL=<name>";
 *   - for PQ2_0 and PTQ1_0 matrices on a fixed pseudo-random input: an FNV-1a hash of the
 *     repacked bytes and of the gemv/gemm outputs of every level this CPU runs, for several batch
 *     widths, and whether each level's bytes equal the scalar reference level's;
 *   - a repack large enough to use threads (above the library's 1 MiB threshold): the same bytes
 *     with one thread and with all cores, whether extra threads were seen while it ran, and
 *     whether none was left when it returned (threads counted with /proc/self/task on Linux,
 *     CreateToolhelp32Snapshot on Windows).
 * Exit status 0 when every check passed, 1 otherwise.
 */
#include "ggml_t2p.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(_WIN32)
#    include <windows.h>
#    include <tlhelp32.h>
#else
#    include <dirent.h>
#    include <pthread.h>
#    include <time.h>
#    include <unistd.h>
#endif

static int failures = 0;
#define CHECK(cond, ...) do { if (!(cond)) { failures++; printf("FAIL: " __VA_ARGS__); printf("\n"); } } while (0)

/* ---- portable helpers ------------------------------------------------------------------- */

static void * alloc_aligned(size_t size) {
#if defined(_WIN32)
    return _aligned_malloc(size ? size : 1, 64);
#else
    void * p = NULL;
    return posix_memalign(&p, 64, size ? size : 1) == 0 ? p : NULL;
#endif
}

static void free_aligned(void * p) {
#if defined(_WIN32)
    _aligned_free(p);
#else
    free(p);
#endif
}

static void sleep_ms(int ms) {
#if defined(_WIN32)
    Sleep((DWORD) ms);
#else
    struct timespec ts = { ms / 1000, (long) (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
#endif
}

/* Threads of this process now, or -1 when the OS does not say. */
static int threads_now(void) {
#if defined(_WIN32)
    HANDLE snap = CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0);
    if (snap == INVALID_HANDLE_VALUE) {
        return -1;
    }
    THREADENTRY32 te;
    te.dwSize = sizeof te;
    DWORD me = GetCurrentProcessId();
    int n = 0;
    if (Thread32First(snap, &te)) {
        do {
            if (te.th32OwnerProcessID == me) {
                n++;
            }
            te.dwSize = sizeof te;
        } while (Thread32Next(snap, &te));
    }
    CloseHandle(snap);
    return n;
#else
    DIR * d = opendir("/proc/self/task");
    if (!d) {
        return -1;
    }
    int n = 0;
    struct dirent * e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] != '.') {
            n++;
        }
    }
    closedir(d);
    return n;
#endif
}

/* A watcher thread that records the largest thread count it sees until told to stop. */
static volatile int watch_stop = 0, watch_peak = -1;

static void watch_loop(void) {
    while (!watch_stop) {
        int n = threads_now();
        if (n > watch_peak) {
            watch_peak = n;
        }
    }
}

#if defined(_WIN32)
static DWORD WINAPI watch_main(LPVOID arg) { (void) arg; watch_loop(); return 0; }
typedef HANDLE watcher_t;
static int watcher_start(watcher_t * w) { *w = CreateThread(NULL, 0, watch_main, NULL, 0, NULL); return *w != NULL; }
static void watcher_join(watcher_t w) { WaitForSingleObject(w, INFINITE); CloseHandle(w); }
#else
static void * watch_main(void * arg) { (void) arg; watch_loop(); return NULL; }
typedef pthread_t watcher_t;
static int watcher_start(watcher_t * w) { return pthread_create(w, NULL, watch_main, NULL) == 0; }
static void watcher_join(watcher_t w) { pthread_join(w, NULL); }
#endif

static uint64_t fnv1a(const void * p, size_t n) {
    const unsigned char * b = (const unsigned char *) p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ b[i]) * 0x100000001b3ull;
    }
    return h;
}

static uint64_t rng_state;
static uint32_t rnd(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t) (rng_state >> 33);
}

/* ---- inputs ------------------------------------------------------------------------------ */

typedef struct { float d; int8_t qs[256]; int16_t bsums[16]; } q8_k_block; /* 292 bytes */

/* A row-major matrix of type ty (PQ2_0: 34-byte blocks, fp16 d first; PTQ1_0: 28-byte blocks,
 * fp16 d last), every byte pattern valid, scales positive fp16 around 2^-7. */
static unsigned char * make_weights(int ty, int64_t rows, int64_t k, size_t * size) {
    const size_t bs = ty == GGML_T2P_TYPE_PQ2_0 ? 34 : 28, nb = (size_t) (rows * (k / 128));
    unsigned char * w = (unsigned char *) alloc_aligned(nb * bs);
    for (size_t i = 0; i < nb; i++) {
        unsigned char * b = w + i * bs;
        for (size_t j = 0; j < bs; j++) {
            b[j] = (unsigned char) rnd();
        }
        uint16_t d = (uint16_t) (0x2000 + rnd() % 0x1000);
        memcpy(ty == GGML_T2P_TYPE_PQ2_0 ? b : b + 26, &d, 2);
    }
    *size = nb * bs;
    return w;
}

/* ceil(k/256) Q8_K blocks per column; a column of k % 256 == 128 has its last half zero. */
static q8_k_block * make_act(int64_t k, int64_t cols) {
    const int64_t nq = (k + 255) / 256;
    q8_k_block * a = (q8_k_block *) alloc_aligned(sizeof(q8_k_block) * (size_t) (nq * cols));
    for (int64_t c = 0; c < cols; c++) {
        for (int64_t q = 0; q < nq; q++) {
            q8_k_block * b = &a[c * nq + q];
            b->d = 0.01f + (float) (rnd() % 1000) * 1e-5f;
            for (int j = 0; j < 256; j++) {
                int64_t e = q * 256 + j;
                b->qs[j] = e < k ? (int8_t) (rnd() % 255 - 127) : 0;
            }
            for (int g = 0; g < 16; g++) {
                int s = 0;
                for (int j = 0; j < 16; j++) {
                    s += b->qs[16 * g + j];
                }
                b->bsums[g] = (int16_t) s;
            }
        }
    }
    return a;
}

/* ---- parts ------------------------------------------------------------------------------- */

static const int x86_levels[] = { GGML_T2P_KERNEL_REF, GGML_T2P_KERNEL_AVX2, GGML_T2P_KERNEL_AVXVNNI,
                                  GGML_T2P_KERNEL_AVX512VNNI };
#define N_LEVELS ((int) (sizeof x86_levels / sizeof x86_levels[0]))

static void print_cpu(void) {
    int32_t best = ggml_t2p_best_kernel(), lay = -1;
    printf("ggml-t2p %s abi %u: cpu features 0x%x, unknown 0x%x, best kernel %s", ggml_t2p_version(),
           ggml_t2p_abi_version(), ggml_t2p_cpu_features(), ggml_t2p_cpu_features_unknown(),
           best ? ggml_t2p_kernel_name(best) : "none (callers decline)");
    if (best && ggml_t2p_layout_for(GGML_T2P_TYPE_PQ2_0, GGML_T2P_KERNEL_AUTO, 0, &lay) == GGML_T2P_OK) {
        printf(", layout %s", ggml_t2p_layout_name(lay));
    }
    printf("\n");
    CHECK(ggml_t2p_abi_version() == GGML_T2P_ABI_VERSION, "abi version %u, header %d", ggml_t2p_abi_version(), GGML_T2P_ABI_VERSION);
    for (int l = 0; l < N_LEVELS; l++) {
        int32_t lv = x86_levels[l];
        int32_t st = ggml_t2p_supports(GGML_T2P_TYPE_PQ2_0, GGML_T2P_LAYOUT_X16, lv, 64, 256);
        printf("level %-10s: %s", ggml_t2p_kernel_name(lv), st == GGML_T2P_OK ? "runs" : "not available");
        if (lv != GGML_T2P_KERNEL_REF) {
            int32_t as = ggml_t2p_assume_kernel(lv);
            printf(", a promise of it %s (%s)", as == GGML_T2P_OK ? "accepted" : "refused", ggml_t2p_status_string(as));
            /* a level the OS reports absent is never assumed: it stays unsupported */
            CHECK(as == GGML_T2P_OK || ggml_t2p_supports(GGML_T2P_TYPE_PQ2_0, GGML_T2P_LAYOUT_X16, lv, 64, 256) != GGML_T2P_OK,
                  "%s refused as a promise but runs", ggml_t2p_kernel_name(lv));
            CHECK((as == GGML_T2P_OK) == (st == GGML_T2P_OK), "%s: promise and support disagree", ggml_t2p_kernel_name(lv));
        }
        printf("\n");
    }
}

/* The plugin's handling of GGML_T2P_KERNEL (ggml-glue/ggml-t2p-glue.cpp, make_config), through
 * the same library calls. */
static void print_env_kernel(void) {
    const char * v = getenv("GGML_T2P_KERNEL");
    if (v == NULL || *v == '\0') {
        printf("GGML_T2P_KERNEL unset\n");
        return;
    }
    int32_t requested = 0, lay = -1;
    if (ggml_t2p_kernel_from_name(v, &requested) != GGML_T2P_OK) {
        printf("unknown GGML_T2P_KERNEL=%s, using auto\n", v);
        requested = GGML_T2P_KERNEL_AUTO;
    }
    if (requested == GGML_T2P_KERNEL_AUTO) {
        int32_t best = ggml_t2p_best_kernel();
        printf("GGML_T2P_KERNEL=%s: %s\n", v, best ? ggml_t2p_kernel_name(best) : "declining: no SIMD level");
        return;
    }
    if (ggml_t2p_layout_for(GGML_T2P_TYPE_PQ2_0, requested, 0, &lay) != GGML_T2P_OK &&
        (ggml_t2p_assume_kernel(requested) != GGML_T2P_OK ||
         ggml_t2p_layout_for(GGML_T2P_TYPE_PQ2_0, requested, 0, &lay) != GGML_T2P_OK)) {
        printf("declining: this CPU cannot run GGML_T2P_KERNEL=%s\n", ggml_t2p_kernel_name(requested));
        return;
    }
    printf("GGML_T2P_KERNEL=%s: runs, layout %s\n", ggml_t2p_kernel_name(requested), ggml_t2p_layout_name(lay));
}

/* Repack, then gemv/gemm for each batch width on every level that runs here; print the hashes. */
static void bits(int ty, int layout, int64_t rows, int64_t k) {
    const char * tyname = ty == GGML_T2P_TYPE_PQ2_0 ? "PQ2_0" : "PTQ1_0";
    size_t src_size = 0, wsize = 0;
    rng_state = 0x9e3779b97f4a7c15ull ^ (uint64_t) (ty * 1000 + layout);
    unsigned char * src = make_weights(ty, rows, k, &src_size);
    if (ggml_t2p_repacked_size(ty, layout, rows, k, &wsize) != GGML_T2P_OK) {
        printf("%s %s: no such layout here\n", tyname, ggml_t2p_layout_name(layout));
        free_aligned(src);
        return;
    }
    unsigned char * w = (unsigned char *) alloc_aligned(wsize);
    int32_t st = ggml_t2p_repack(ty, layout, src, src_size, rows, k, w, wsize);
    CHECK(st == GGML_T2P_OK, "repack %s %s: %s", tyname, ggml_t2p_layout_name(layout), ggml_t2p_status_string(st));
    printf("%s %s %lldx%lld: repacked %zu bytes, fnv %016llx\n", tyname, ggml_t2p_layout_name(layout), (long long) rows,
           (long long) k, wsize, (unsigned long long) fnv1a(w, wsize));

    static const int64_t widths[] = { 1, 3, 8, 17 };
    const int64_t max_cols = 17, nq = (k + 255) / 256;
    q8_k_block * act = make_act(k, max_cols);
    float * ref = (float *) alloc_aligned(sizeof(float) * (size_t) (rows * max_cols));
    float * y = (float *) alloc_aligned(sizeof(float) * (size_t) (rows * max_cols));
    for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++) {
        const int64_t cols = widths[wi];
        for (int l = 0; l < N_LEVELS; l++) {
            const int32_t lv = x86_levels[l];
            if (ggml_t2p_supports(ty, layout, lv, rows, k) != GGML_T2P_OK) {
                continue;
            }
            size_t asize = 0;
            CHECK(ggml_t2p_act_packed_size(layout, lv, k, cols, &asize) == GGML_T2P_OK, "act size");
            void * a = alloc_aligned(asize);
            for (int64_t c = 0; c < cols; c++) {
                st = ggml_t2p_act_pack(layout, lv, k, cols, c, 0, nq, &act[c * nq], sizeof(q8_k_block) * (size_t) nq, a, asize);
                CHECK(st == GGML_T2P_OK, "act pack col %lld: %s", (long long) c, ggml_t2p_status_string(st));
            }
            memset(y, 0xff, sizeof(float) * (size_t) (rows * cols));
            if (cols == 1) {
                st = ggml_t2p_gemv(layout, lv, w, wsize, rows, k, a, asize, y, (size_t) rows, 0, rows);
            } else {
                /* two row ranges split on the layout's tile, as two ggml threads would */
                int64_t tile = 0, split;
                ggml_t2p_row_tile(layout, &tile);
                split = (rows / 2) / tile * tile;
                st = ggml_t2p_gemm(layout, lv, w, wsize, rows, k, a, asize, cols, y, (size_t) (rows * cols), rows, 0, split);
                if (st == GGML_T2P_OK) {
                    st = ggml_t2p_gemm(layout, lv, w, wsize, rows, k, a, asize, cols, y, (size_t) (rows * cols), rows, split, rows);
                }
            }
            CHECK(st == GGML_T2P_OK, "%s %s: %s", cols == 1 ? "gemv" : "gemm", ggml_t2p_kernel_name(lv), ggml_t2p_status_string(st));
            const size_t nbytes = sizeof(float) * (size_t) (rows * cols);
            if (lv == GGML_T2P_KERNEL_REF) {
                memcpy(ref, y, nbytes);
            }
            const int same = memcmp(ref, y, nbytes) == 0;
            CHECK(same, "%s %s %s cols %lld: bits differ from ref", tyname, ggml_t2p_layout_name(layout), ggml_t2p_kernel_name(lv),
                  (long long) cols);
            printf("%s %s %-10s cols %2lld: fnv %016llx%s\n", tyname, ggml_t2p_layout_name(layout), ggml_t2p_kernel_name(lv),
                   (long long) cols, (unsigned long long) fnv1a(y, nbytes), lv == GGML_T2P_KERNEL_REF ? "" : same ? " = ref" : " != ref");
            free_aligned(a);
        }
    }
    free_aligned(y);
    free_aligned(ref);
    free_aligned(act);
    free_aligned(w);
    free_aligned(src);
}

/* A repack above the 1 MiB threshold: one thread vs all cores, the same bytes; threads seen. */
static void threads(void) {
    const int64_t rows = 4096, k = 4096; /* 4.25 MiB of PQ2_0 */
    size_t src_size = 0, wsize = 0;
    rng_state = 0x5eed;
    unsigned char * src = make_weights(GGML_T2P_TYPE_PQ2_0, rows, k, &src_size);
    ggml_t2p_repacked_size(GGML_T2P_TYPE_PQ2_0, GGML_T2P_LAYOUT_X16, rows, k, &wsize);
    unsigned char * one = (unsigned char *) alloc_aligned(wsize), * all = (unsigned char *) alloc_aligned(wsize);

    const int base = threads_now();
    int extra_one = 0, extra_all = 0, left = 0, tries = 0;
    for (int pass = 0; pass < 2; pass++) {
        unsigned char * dst = pass == 0 ? one : all;
        ggml_t2p_set_threads(pass == 0 ? 1 : 0);
        /* the watcher polls while the repack runs (a few milliseconds), and repeats until it has
         * seen a worker: under Wine each poll is a round trip to wineserver, and on a loaded
         * machine one run needed 15 repeats (the limit was 20; a CI run on such a machine failed
         * in this program under Wine without saying which check, see windows-test.py) */
        for (int rep = 0; rep < (pass == 0 ? 3 : 200); rep++) {
            watcher_t wt;
            watch_stop = 0;
            watch_peak = -1;
            if (!watcher_start(&wt)) {
                printf("FAIL: cannot start the watcher thread\n");
                failures++;
                break;
            }
            while (watch_peak < 0) {
                sleep_ms(1);
            }
            memset(dst, 0, wsize);
            int32_t st = ggml_t2p_repack(GGML_T2P_TYPE_PQ2_0, GGML_T2P_LAYOUT_X16, src, src_size, rows, k, dst, wsize);
            CHECK(st == GGML_T2P_OK, "big repack: %s", ggml_t2p_status_string(st));
            watch_stop = 1;
            watcher_join(wt);
            /* peak counts the watcher itself */
            int extra = watch_peak - (base + 1);
            if (pass == 0) {
                extra_one = extra > extra_one ? extra : extra_one;
            } else {
                extra_all = extra > extra_all ? extra : extra_all;
                tries = rep + 1;
            }
            /* every repack thread is joined before ggml_t2p_repack returns (the OS may list an
             * exited thread a moment longer: wait up to 2 s before calling it left over) */
            int now = threads_now(), waited = 0;
            while (now > base && waited < 2000) {
                sleep_ms(10);
                waited += 10;
                now = threads_now();
            }
            left = now - base > left ? now - base : left;
            if (pass == 1 && extra > 0) {
                break;
            }
        }
    }
    ggml_t2p_set_threads(0);
#if defined(_WIN32)
    SYSTEM_INFO si;
    GetSystemInfo(&si);
    const int cores = (int) si.dwNumberOfProcessors;
#else
    const int cores = (int) sysconf(_SC_NPROCESSORS_ONLN);
#endif
    printf("# repack threads: %d before, extra seen %d with ggml_t2p_set_threads(1), %d with all %d cores (%d tries)\n", base,
           extra_one, extra_all, cores, tries);
    const int same = memcmp(one, all, wsize) == 0;
    printf("PQ2_0 X16 %lldx%lld repack: fnv %016llx with 1 thread, %s with all cores\n", (long long) rows, (long long) k,
           (unsigned long long) fnv1a(one, wsize), same ? "the same bytes" : "OTHER BYTES");
    CHECK(same, "threaded repack differs from the one-thread repack");
    CHECK(base > 0, "cannot count this process's threads");
    CHECK(extra_one == 0, "a one-thread repack started %d threads", extra_one);
    if (cores > 1) {
        printf("repack on %s cores: extra threads while it ran: %s; left after it returned: %s\n", "several",
               extra_all > 0 ? "yes" : "no", left > 0 ? "yes" : "none");
        CHECK(extra_all > 0, "no repack thread seen on %d cores", cores);
    } else {
        printf("repack on one core: no threads expected; left after it returned: %s\n", left > 0 ? "yes" : "none");
    }
    CHECK(left == 0, "%d threads outlived a repack", left);
    free_aligned(all);
    free_aligned(one);
    free_aligned(src);
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    print_cpu();
    print_env_kernel();
    bits(GGML_T2P_TYPE_PQ2_0, GGML_T2P_LAYOUT_X16, 48, 1152);  /* 3 tiles; k % 256 == 128: the padded half block */
    bits(GGML_T2P_TYPE_PQ2_0, GGML_T2P_LAYOUT_X16, 40, 512);   /* a zero-padded last tile */
    bits(GGML_T2P_TYPE_PTQ1_0, GGML_T2P_LAYOUT_X16, 32, 1152);
    bits(GGML_T2P_TYPE_PQ2_0, GGML_T2P_LAYOUT_T2P, 24, 640);    /* the ARM layout, run by the scalar level here */
    threads();
    printf("win bits: %s\n", failures == 0 ? "all checks passed" : "FAILED");
    return failures == 0 ? 0 : 1;
}
