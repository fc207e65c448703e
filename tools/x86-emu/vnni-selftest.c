/* The self-test program of tools/x86-emu.py --self-test (built with the host gcc -O2 -static):
   prints what CPUID and gcc's __builtin_cpu_supports report, runs vpdpbusd in its VEX (AVX-VNNI)
   and EVEX (AVX-512 VNNI, ymm and zmm) forms against the scalar sums, with SIGILL caught where a
   form is absent, and AMX-INT8's tdpbssd without and with Linux's tile-data permission, in a thread,
   in a child after fork() and across context switches. `die FORM` runs one form with no SIGILL
   handler (the process must die); `loop N` is a known loop for speed measurements. */
#include <immintrin.h>
#include <cpuid.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static unsigned zero_seed;
static uint8_t A[64];
static int8_t B[64];
static int32_t C0[16];

static void init_inputs(unsigned seed) {
    for (int i = 0; i < 64; i++) {
        A[i] = (uint8_t)(i * 37u + 11u + seed);
        B[i] = (int8_t)(uint8_t)(i * 53u + 100u + seed);
    }
    A[0] = 255; B[0] = -128; A[1] = 255; B[1] = 127; A[2] = 0; A[3] = 255; B[3] = -128;
    for (int j = 0; j < 16; j++) C0[j] = (int32_t)(j * 100003) - 700000;
}

/* The same sums as vpdpbusd: c[j] + sum_k u8 a[4j+k] * s8 b[4j+k], no saturation. */
static void scalar(int n, int32_t *out) {
    for (int j = 0; j < n; j++) {
        int32_t s = C0[j];
        for (int k = 0; k < 4; k++) s += (int32_t)A[4 * j + k] * (int32_t)B[4 * j + k];
        out[j] = s;
    }
}

__attribute__((noinline, target("avxvnni"))) static void vex256(int32_t *out) {
    __m256i c = _mm256_loadu_si256((const __m256i *)C0);
    __m256i a = _mm256_loadu_si256((const __m256i *)A);
    __m256i b = _mm256_loadu_si256((const __m256i *)B);
    _mm256_storeu_si256((__m256i *)out, _mm256_dpbusd_avx_epi32(c, a, b));
}
__attribute__((noinline, target("avx512f,avx512vnni"))) static void evex512(int32_t *out) {
    __m512i c = _mm512_loadu_si512(C0);
    __m512i a = _mm512_loadu_si512(A);
    __m512i b = _mm512_loadu_si512(B);
    _mm512_storeu_si512(out, _mm512_dpbusd_epi32(c, a, b));
}
__attribute__((noinline, target("avx512vl,avx512vnni"))) static void evex256(int32_t *out) {
    __m256i c = _mm256_loadu_si256((const __m256i *)C0);
    __m256i a = _mm256_loadu_si256((const __m256i *)A);
    __m256i b = _mm256_loadu_si256((const __m256i *)B);
    _mm256_storeu_si256((__m256i *)out, _mm256_dpbusd_epi32(c, a, b));
}

/* AMX-INT8: one tdpbssd on 16x64-byte tiles, C[m][n] += sum_k sum_i A[m][4k+i] * B[k][4n+i]
   (all signed bytes), with the configuration in a static (never a stack object). */
static struct { uint8_t palette, start_row, reserved[14]; uint16_t colsb[16]; uint8_t rows[16]; }
    tilecfg = { 1, 0, {0}, {64, 64, 64}, {16, 16, 16} };
static int8_t TA[16][64], TB[16][64];

static void amx_inputs(void) {
    for (int m = 0; m < 16; m++)
        for (int j = 0; j < 64; j++) {
            TA[m][j] = (int8_t)(uint8_t)(m * 29u + j * 7u + 3u + zero_seed);
            TB[m][j] = (int8_t)(uint8_t)(m * 41u + j * 13u + 200u + zero_seed);
        }
    TA[0][0] = -128; TB[0][0] = -128; TA[0][1] = 127; TB[0][4] = -128;
}

static unsigned long long xinuse_during, xinuse_after;
static int yields;
static unsigned long long xgetbv1(void) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
    return ((unsigned long long)hi << 32) | lo;
}

/* out = TA x TB on the tiles, with `yields` sched_yield() calls between loading the tiles and
   using them (another process using the tiles runs in between: the kernel must save and restore
   them), and XINUSE (XGETBV with ECX = 1) read while the tiles are live and after they are
   released. */
__attribute__((noinline, target("amx-tile,amx-int8"))) static void amx16(int32_t out[16][16]) {
    _tile_loadconfig(&tilecfg);
    _tile_zero(0);
    _tile_loadd(1, TA, 64);
    _tile_loadd(2, TB, 64);
    for (int y = 0; y < yields; y++) sched_yield();
    xinuse_during = xgetbv1();
    _tile_dpbssd(0, 1, 2);
    _tile_stored(0, out, 64);
    _tile_release();
    xinuse_after = xgetbv1();
}

/* 0: every sum matches the scalar formula, 1: a mismatch. */
static int amx_check(void) {
    int32_t out[16][16];
    memset(out, 0x55, sizeof out);
    amx16(out);
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 16; n++) {
            int32_t s = 0;
            for (int k = 0; k < 16; k++)
                for (int i = 0; i < 4; i++) s += (int32_t)TA[m][4 * k + i] * (int32_t)TB[k][4 * n + i];
            if (out[m][n] != s) return 1;
        }
    return 0;
}

static void *amx_thread(void *arg) { *(int *)arg = amx_check(); return 0; }

struct form { const char *name; int lanes; void (*fn)(int32_t *); };
static const struct form forms[] = {
    {"vex256", 8, vex256}, {"evex512", 16, evex512}, {"evex256", 8, evex256},
};

static sigjmp_buf jb;
static void on_sigill(int sig) { (void)sig; siglongjmp(jb, 1); }

int main(int argc, char **argv) {
    static volatile unsigned zero = 0;
    init_inputs(zero);  /* runtime inputs: nothing can be constant-folded */
    zero_seed = zero;
    amx_inputs();
    if (argc == 3 && strcmp(argv[1], "die") == 0) {
        for (unsigned i = 0; i < sizeof forms / sizeof forms[0]; i++)
            if (strcmp(argv[2], forms[i].name) == 0) {
                int32_t out[16];
                printf("executing %s with no SIGILL handler\n", forms[i].name);
                fflush(stdout);
                forms[i].fn(out);
                printf("survived %s: out[0]=%d\n", forms[i].name, out[0]);
                return 0;
            }
        return 2;
    }
    if (argc == 3 && strcmp(argv[1], "loop") == 0) {
        /* a known loop for speed measurements: N iterations of a dependent multiply-add */
        unsigned long n = strtoul(argv[2], 0, 10);
        volatile unsigned long acc = 1;
        unsigned long x = acc;
        for (unsigned long i = 0; i < n; i++) x = x * 6364136223846793005ul + i;
        acc = x;
        printf("loop %lu done %lu\n", n, (unsigned long)acc);
        return 0;
    }
    unsigned a, b, c, d, b7 = 0, c7 = 0, a71 = 0, osx;
    __cpuid(1, a, b, c, d);
    osx = (c >> 27) & 1;
    unsigned long long xcr0 = 0;
    if (osx) {
        unsigned lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        xcr0 = ((unsigned long long)hi << 32) | lo;
    }
    __cpuid_count(7, 0, a, b7, c7, d);
    __cpuid_count(7, 1, a71, b, c, d);
    unsigned d7, xfd;
    __cpuid_count(7, 0, a, b, c, d7);
    __cpuid_count(0xd, 1, xfd, b, c, d);
    printf("cpuid osxsave=%u xcr0=0x%llx avx2=%u avx512f=%u avx512bw=%u avx512vl=%u "
           "avx512vnni=%u avxvnni=%u amx=%u xfd=%u\n", osx, xcr0, (b7 >> 5) & 1, (b7 >> 16) & 1,
           (b7 >> 30) & 1, (b7 >> 31) & 1, (c7 >> 11) & 1, (a71 >> 4) & 1,
           ((d7 >> 24) & 1) & ((d7 >> 25) & 1), (xfd >> 4) & 1);
    __builtin_cpu_init();
    printf("builtin avx2=%d fma=%d f16c=%d avx512f=%d avx512bw=%d avx512vl=%d avx512vnni=%d "
           "avxvnni=%d\n",
           !!__builtin_cpu_supports("avx2"), !!__builtin_cpu_supports("fma"),
           !!__builtin_cpu_supports("f16c"), !!__builtin_cpu_supports("avx512f"),
           !!__builtin_cpu_supports("avx512bw"), !!__builtin_cpu_supports("avx512vl"),
           !!__builtin_cpu_supports("avx512vnni"), !!__builtin_cpu_supports("avxvnni"));
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigill;
    sigaction(SIGILL, &sa, 0);
    int32_t want[16];
    scalar(16, want);
    for (unsigned i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        int32_t out[16];
        memset(out, 0, sizeof out);
        if (sigsetjmp(jb, 1) == 0) {
            forms[i].fn(out);
            int ok = memcmp(out, want, forms[i].lanes * 4) == 0;
            printf("form %s %s out=%d,%d,%d,%d,%d want=%d,%d,%d,%d,%d\n", forms[i].name,
                   ok ? "ok" : "MISMATCH", out[0], out[1], out[2], out[3], out[forms[i].lanes - 1],
                   want[0], want[1], want[2], want[3], want[forms[i].lanes - 1]);
        } else {
            printf("form %s SIGILL\n", forms[i].name);
        }
    }
    /* AMX under Linux: without the tile-data permission the first tile instruction must end in
       SIGILL (XFD's #NM, refused by the kernel; #UD where there is no AMX); with it (asked for
       once, by this thread) the sums must be exact here, in a thread created after, and in a
       child after fork(). */
    if (sigsetjmp(jb, 1) == 0)
        printf("form amx-noperm %s\n", amx_check() ? "MISMATCH" : "ok");
    else
        printf("form amx-noperm SIGILL\n");
    long perm = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */);
    printf("amx permission %s\n", perm == 0 ? "granted" : "refused");
    if (sigsetjmp(jb, 1) == 0)
        printf("form amx %s\n", amx_check() ? "MISMATCH" : "ok");
    else
        printf("form amx SIGILL\n");
    if (perm != 0) {  /* no AMX: the thread's SIGILL could not be caught there */
        printf("form amx-thread skipped\nform amx-fork skipped\nform amx-switch skipped\n");
        return 0;
    }
    int tres = -1;
    pthread_t th;
    if (pthread_create(&th, 0, amx_thread, &tres) == 0) {
        void *ret;
        pthread_join(th, &ret);
        printf("form amx-thread %s\n", tres == 0 ? "ok" : "MISMATCH");
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGILL, SIG_DFL);
        _exit(amx_check());
    }
    int st = 0;
    waitpid(pid, &st, 0);
    printf("form amx-fork %s\n", WIFEXITED(st) ? (WEXITSTATUS(st) == 0 ? "ok" : "MISMATCH")
                                              : (WTERMSIG(st) == SIGILL ? "SIGILL" : "killed"));
    /* two processes, each with its own tile contents, yielding to each other while the tiles are
       live: each must get its own sums (the kernel saves/restores the tile data) */
    yields = 20;
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        zero_seed = 77;
        amx_inputs();
        int bad = 0;
        for (int r = 0; r < 10; r++) bad |= amx_check();
        _exit(bad);
    }
    int bad = 0;
    for (int r = 0; r < 10; r++) bad |= amx_check();
    waitpid(pid, &st, 0);
    printf("form amx-switch %s\n", !bad && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "ok" : "MISMATCH");
    printf("amx xinuse during=0x%llx after=0x%llx\n", xinuse_during & 0x60000, xinuse_after & 0x60000);
    return 0;
}
