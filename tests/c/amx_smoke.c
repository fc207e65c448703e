/*
 * The amx level's hygiene through the C ABI (x86-64 Linux; elsewhere it prints that it is skipped):
 * what a host process (llama.cpp with its thread pool, a prefork server) needs from a library that
 * uses the AMX tiles. Whether the CPU and OS offer AMX is found here, independently of the library:
 * CPUID.(7,0):EDX AMX-TILE and AMX-INT8 with AVX-512 VNNI, XCR0 bits 17 and 18, and the kernel's
 * ARCH_GET_XCOMP_SUPP listing the tile data (bit 18).
 *
 *   amx_smoke          Where AMX is offered: the amx level must be accepted, and a 40-column gemm
 *                      (two full 16-column tiles and a padded one; 20 rows: a full and a padded
 *                      16-row tile; K = 384, an odd number of 128-blocks) must give the reference
 *                      bits on the main thread, on a thread created before the library's first
 *                      call (ggml starts its thread pool before the model loads), on a thread
 *                      created after, and in a child after fork(); after each call the tiles must
 *                      be back in their init state (XGETBV(1), where the CPU has it: the kernel
 *                      released them). Where AMX is not offered: the amx level must be refused.
 *   amx_smoke --deny   First installs a seccomp filter that refuses ARCH_REQ_XCOMP_PERM with EPERM
 *                      (a container's policy): the amx level must be refused, and the gemm
 *                      through the best level the library has must still give the reference bits.
 *
 * Exit status 0 when every check passed. tools/x86-emu-test.py runs both forms under an emulated
 * Sapphire Rapids with AMX (Bochs with XFD); cargo test runs them natively (tests/rust/c_abi.rs).
 */
#define _GNU_SOURCE
#include "ggml_t2p.h"
#include "smoke_ref.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if !(defined(__x86_64__) && defined(__linux__))
int main(void) {
    printf("amx smoke: skipped (AMX is used on x86-64 Linux only)\n");
    return 0;
}
#else
#include <cpuid.h>
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define K      384
#define NB     (K / 128)
#define NQ     ((NB + 1) / 2)
#define NROWS  20
#define NCOLS  40

#define ARCH_GET_XCOMP_SUPP 0x1021
#define ARCH_REQ_XCOMP_PERM 0x1023

static pq2_0_block w[NROWS * NB];
static q8_k_block act[NCOLS * NQ];
static float want[NCOLS][NROWS];
static void * x16; /* the X16 repack of w */
static size_t x16_size;
static int has_xinuse; /* XGETBV with ECX = 1 */

static uint64_t xgetbv(unsigned ecx) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(ecx));
    return ((uint64_t) hi << 32) | lo;
}

/* 1 when this CPU and kernel offer AMX-INT8 to a process that asks; the reason when not. */
static int amx_offered(const char ** why) {
    unsigned a, b, c, d;
    __cpuid(0, a, b, c, d);
    if (a < 0xd) return *why = "cpuid has no leaf 0xd", 0;
    __cpuid(1, a, b, c, d);
    if (!((c >> 27) & 1)) return *why = "no OSXSAVE", 0;
    const uint64_t xcr0 = xgetbv(0);
    __cpuid_count(7, 0, a, b, c, d);
    const int vnni512 = ((b >> 16) & 1) && ((b >> 30) & 1) && ((b >> 31) & 1) && ((c >> 11) & 1) && ((b >> 5) & 1)
                        && (xcr0 & 0xe6) == 0xe6;
    if (!((d >> 24) & 1) || !((d >> 25) & 1)) return *why = "no AMX-TILE/AMX-INT8 in cpuid", 0;
    if (!vnni512) return *why = "AMX without AVX-512 VNNI", 0;
    if ((xcr0 & 0x60000) != 0x60000) return *why = "the OS has not enabled the tile state (XCR0)", 0;
    __cpuid_count(0xd, 1, a, b, c, d);
    has_xinuse = (a >> 2) & 1;
    unsigned long supp = 0;
    if (syscall(SYS_arch_prctl, ARCH_GET_XCOMP_SUPP, &supp) != 0 || !((supp >> 18) & 1))
        return *why = "the kernel does not offer the tile data (ARCH_GET_XCOMP_SUPP)", 0;
    return *why = "cpuid, XCR0 and ARCH_GET_XCOMP_SUPP", 1;
}

/* A container's policy: arch_prctl(ARCH_REQ_XCOMP_PERM, ...) fails with EPERM. */
static int deny_tile_permission(void) {
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_arch_prctl, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH_REQ_XCOMP_PERM, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = { (unsigned short) (sizeof f / sizeof f[0]), f };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return 0;
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) return 0;
    errno = 0;
    /* the filter works: the request itself is refused with EPERM */
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, 18) != 0 && errno == EPERM;
}

/* The 40-column gemm on `level`, rows split in two calls at 16 as two threads would; returns the
 * number of outputs that differ from the reference bits (or -1 when a call failed), and checks
 * that the tiles are in their init state afterwards where XGETBV(1) can tell. */
static int wide_gemm(int32_t level, const char * where) {
    size_t asize = 0;
    if (ggml_t2p_act_packed_size(GGML_T2P_LAYOUT_X16, level, K, NCOLS, &asize) != GGML_T2P_OK) return -1;
    void * an = aligned_alloc(64, asize + 64);
    static __thread float ys[NCOLS * (NROWS + 1)];
    int bad = -1;
    if (!an) return -1;
    for (int c = 0; c < NCOLS; c++)
        if (ggml_t2p_act_pack(GGML_T2P_LAYOUT_X16, level, K, NCOLS, c, 0, NQ, &act[c * NQ], NQ * sizeof(q8_k_block), an, asize) != GGML_T2P_OK)
            goto out;
    for (int i = 0; i < NCOLS * (NROWS + 1); i++) ys[i] = -1.0f;
    if (ggml_t2p_gemm(GGML_T2P_LAYOUT_X16, level, x16, x16_size, NROWS, K, an, asize, NCOLS, ys, NCOLS * (NROWS + 1), NROWS + 1, 0, 16) != GGML_T2P_OK ||
        ggml_t2p_gemm(GGML_T2P_LAYOUT_X16, level, x16, x16_size, NROWS, K, an, asize, NCOLS, ys, NCOLS * (NROWS + 1), NROWS + 1, 16, NROWS) != GGML_T2P_OK)
        goto out;
    const uint64_t inuse = has_xinuse && level == GGML_T2P_KERNEL_AMX ? xgetbv(1) & 0x60000 : 0;
    int differ = 0;
    for (int c = 0; c < NCOLS; c++) {
        for (int r = 0; r < NROWS; r++) differ += memcmp(&ys[c * (NROWS + 1) + r], &want[c][r], 4) != 0;
        differ += ys[c * (NROWS + 1) + NROWS] != -1.0f;
    }
    printf("amx smoke: %s: %s gemm, %d columns x %d rows: %s", where, ggml_t2p_kernel_name(level), NCOLS, NROWS,
           differ == 0 ? "bit-identical to the reference" : "MISMATCH");
    if (inuse) printf("; TILES LEFT IN USE after the call (XINUSE 0x%llx)", (unsigned long long) inuse);
    printf("\n");
    bad = differ + (inuse != 0);
out:
    free(an);
    return bad;
}

static pthread_barrier_t early_go;
static int early_result = -2;
static void * early_thread(void * arg) {
    (void) arg;
    pthread_barrier_wait(&early_go); /* until the main thread has set everything up */
    early_result = wide_gemm(GGML_T2P_KERNEL_AMX, "thread created before the library's first call");
    return 0;
}
static int late_result = -2;
static void * late_thread(void * arg) {
    (void) arg;
    late_result = wide_gemm(GGML_T2P_KERNEL_AMX, "thread created after");
    return 0;
}

int main(int argc, char ** argv) {
    const int deny = argc > 1 && strcmp(argv[1], "--deny") == 0;
    if (argc > 1 && !deny) {
        fprintf(stderr, "usage: amx_smoke [--deny]\n");
        return 2;
    }
    /* before any library call: the thread that uses the tiles only later */
    pthread_t early;
    pthread_barrier_init(&early_go, 0, 2);
    const int have_early = !deny && pthread_create(&early, 0, early_thread, 0) == 0;
    if (deny) CHECK(deny_tile_permission(), "installing the seccomp filter (or its EPERM) failed");

    const char * why = "";
    const int offered = !deny && amx_offered(&why);
    if (deny) why = "the tile-data permission is refused (seccomp)";
    printf("amx smoke: AMX %s here (%s); cpu features 0x%x\n", offered ? "offered" : "not usable", why, ggml_t2p_cpu_features());

    random_operands(w, NROWS * NB, act, NCOLS, NB);
    for (int c = 0; c < NCOLS; c++)
        for (int r = 0; r < NROWS; r++) want[c][r] = reference_dot(&w[r * NB], &act[c * NQ], NB);
    CHECK(ggml_t2p_repacked_size(GGML_T2P_TYPE_PQ2_0, GGML_T2P_LAYOUT_X16, NROWS, K, &x16_size) == GGML_T2P_OK, "size");
    x16 = malloc(x16_size);
    CHECK(x16 && ggml_t2p_repack(GGML_T2P_TYPE_PQ2_0, GGML_T2P_LAYOUT_X16, w, sizeof w, NROWS, K, x16, x16_size) == GGML_T2P_OK, "repack");

    const int st = ggml_t2p_supports(GGML_T2P_TYPE_PQ2_0, GGML_T2P_LAYOUT_X16, GGML_T2P_KERNEL_AMX, NROWS, K);
    CHECK((st == GGML_T2P_OK) == offered, "the amx level: the CPU/OS %s it but the library says %s",
          offered ? "offers" : "does not offer", ggml_t2p_status_string(st));
    const int32_t best = ggml_t2p_best_kernel();
    CHECK((best == GGML_T2P_KERNEL_AMX) == offered, "auto must pick amx exactly where it is usable (picked %s)",
          best ? ggml_t2p_kernel_name(best) : "none");
    if (st != GGML_T2P_OK) {
        size_t s = 0;
        CHECK(ggml_t2p_act_packed_size(GGML_T2P_LAYOUT_X16, GGML_T2P_KERNEL_AMX, K, NCOLS, &s) == GGML_T2P_ERR_UNSUPPORTED, "act size for a refused amx");
        if (best >= GGML_T2P_KERNEL_AVX2) /* what the shim falls back to: the best level, still exact */
            CHECK(wide_gemm(best, deny ? "permission refused, the best level instead" : "no AMX, the best level instead") == 0, "gemm on %s", ggml_t2p_kernel_name(best));
    } else {
        CHECK(wide_gemm(GGML_T2P_KERNEL_AMX, "main thread") == 0, "amx gemm on the main thread");
        pthread_t late;
        CHECK(pthread_create(&late, 0, late_thread, 0) == 0 && pthread_join(late, 0) == 0 && late_result == 0, "amx gemm on a new thread");
        fflush(stdout);
        const pid_t pid = fork();
        if (pid == 0) {
            const int bad = wide_gemm(GGML_T2P_KERNEL_AMX, "child after fork()");
            fflush(stdout);
            _exit(bad == 0 ? 0 : 1);
        }
        int status = 0;
        CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "the child after fork(): %s %d", WIFSIGNALED(status) ? "killed by signal" : "exit status",
              WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    }
    if (have_early) {
        pthread_barrier_wait(&early_go);
        pthread_join(early, 0);
        if (offered) CHECK(early_result == 0, "amx gemm on the thread created before the first call");
        else CHECK(early_result == -1, "the early thread's amx gemm must be refused, got %d", early_result);
    }
    free(x16);
    printf("amx smoke: %d/%d checks passed\n", checks - failures, checks);
    return failures == 0 ? 0 : 1;
}
#endif
