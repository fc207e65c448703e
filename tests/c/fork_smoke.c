/*
 * Load, fork, load again: a host process (a prefork server, Python multiprocessing) repacks a
 * matrix big enough to use several threads, forks, and the child repacks again. The child must
 * finish (a library that keeps a thread pool across fork() hangs here: the pool's threads do not
 * exist in the child) and produce the parent's bytes. On Linux it also checks that no thread of
 * the library outlives a repack (the process is back to one thread after each call).
 *
 * The thread count comes from /proc/self/status, which lags pthread_join: a joined thread is
 * counted until its kernel exit path has run (natively microseconds, longer when the machine is
 * loaded and the exiting thread waits for a core; under qemu-user up to 67 ms was seen on a loaded
 * machine, where an exact check failed 8 runs of 8). So after each repack the program polls, every millisecond, until the count is back,
 * for at most GRACE_MS milliseconds, prints how long it took when it was not back at once, and
 * fails only when it is still higher after that: a worker that outlives the call (a pool, a
 * detached thread) stays listed and fails; a joined one never does.
 *
 * usage: fork_smoke [LAYOUT [TIMEOUT_S [GRACE_MS]]]   (defaults 1 = T2P, 120 s, 1000 ms;
 *        tools/qemu-test.py passes a longer grace under the emulator)
 *
 * Uses only ggml_t2p_repacked_size / ggml_t2p_repack, whose signatures are the same in ABI 1, 2
 * and 3, so the same program shows the behaviour of older libraries too.
 * Exit status 0: pass; 1: a check failed; 2: the child hung (killed after the timeout).
 */
#include "ggml_t2p.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(_WIN32)
int main(void) {
    printf("fork smoke: skipped (no fork() on Windows)\n");
    return 0;
}
#else
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NROWS 8192
#define K     1024 /* 8192 x 1024 PQ2_0 = 2.2 MB: above the library's 1 MiB threshold for threads */
#define BLOCK 34

static int threads_now(void) {
#if defined(__linux__)
    FILE * f = fopen("/proc/self/status", "r");
    char   line[256];
    int    n = -1;
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "Threads:", 8) == 0) {
            n = atoi(line + 8);
        }
    }
    if (f) fclose(f);
    return n;
#else
    return -1;
#endif
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* Polls until the process is back to `want` threads or `grace_ms` passed; the last count seen.
 * Prints how long it waited when the first count was not `want` (what: which repack). */
static int threads_back(int want, int grace_ms, const char * what) {
    const double t0    = now_ms();
    const int    first = threads_now();
    int          n     = first;
    while (n > want && now_ms() - t0 < grace_ms) {
        struct timespec ms = { 0, 1000000 };
        nanosleep(&ms, NULL);
        n = threads_now();
    }
    if (first != want) {
        printf("fork smoke: after %s %d thread(s) listed at first, %d after %.1f ms (grace %d ms)\n", what, first, n,
               now_ms() - t0, grace_ms);
    }
    return n;
}

static int repack(int layout, const uint8_t * src, uint8_t ** out, size_t * size) {
    if (ggml_t2p_repacked_size(GGML_T2P_TYPE_PQ2_0, layout, NROWS, K, size) != GGML_T2P_OK) return 0;
    *out = malloc(*size);
    return ggml_t2p_repack(GGML_T2P_TYPE_PQ2_0, layout, src, (size_t) NROWS * (K / 128) * BLOCK, NROWS, K, *out, *size) == GGML_T2P_OK;
}

int main(int argc, char ** argv) {
    const int layout  = argc > 1 ? atoi(argv[1]) : 1; /* GGML_T2P_LAYOUT_T2P */
    const int timeout = argc > 2 ? atoi(argv[2]) : 120;
    const int grace   = argc > 3 ? atoi(argv[3]) : 1000;
    setvbuf(stdout, NULL, _IONBF, 0);
    size_t    n   = (size_t) NROWS * (K / 128) * BLOCK;
    uint8_t * src = malloc(n);
    uint64_t  s   = 0x5EED;
    for (size_t i = 0; i < n; i++) {
        s   = s * 6364136223846793005ull + 1442695040888963407ull;
        src[i] = (uint8_t) (s >> 56);
    }
    for (size_t b = 0; b < n; b += BLOCK) { /* a sane fp16 scale per block */
        src[b]     = 0x00;
        src[b + 1] = 0x20;
    }

    int      failures = 0;
    uint8_t *a = NULL, *b = NULL;
    size_t   size = 0;
    const int t0 = threads_now();
    if (!repack(layout, src, &a, &size)) {
        printf("fork smoke: repack failed in the parent (layout %d)\n", layout);
        return 1;
    }
    /* the library joins its threads (pthread_join) before a repack returns */
    const int t1 = t0 > 0 ? threads_back(t0, grace, "the first repack") : threads_now();
    printf("fork smoke: layout %d, %zu bytes repacked in the parent; threads before %d, after %d\n", layout, size, t0, t1);
    if (t0 > 0 && t1 != t0) {
        printf("FAIL: the repack left %d thread(s) running %d ms after it returned\n", t1 - t0, grace);
        failures++;
    }

    pid_t pid = fork();
    if (pid == 0) {
        alarm((unsigned) timeout); /* a hang ends here, with SIGALRM */
        int ok = repack(layout, src, &b, &size) && memcmp(a, b, size) == 0;
        printf("fork smoke: child repack %s (threads after: %d)\n", ok ? "returned, bytes identical" : "FAILED", threads_now());
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {
        printf("FAIL: the child's repack hung (killed after %d s)\n", timeout);
        return 2;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        printf("FAIL: child status %d\n", status);
        failures++;
    }
    /* and the parent can still repack after the fork, many times, never keeping a thread */
    for (int i = 0; i < 20; i++) {
        free(b);
        if (!repack(layout, src, &b, &size) || memcmp(a, b, size) != 0) {
            printf("FAIL: the parent's repack %d differs\n", i + 2);
            failures++;
            break;
        }
        char what[32];
        snprintf(what, sizeof what, "repack %d", i + 2);
        const int n = t0 > 0 ? threads_back(t0, grace, what) : -1;
        if (t0 > 0 && n != t0) {
            printf("FAIL: %d thread(s) still running %d ms after repack %d returned\n", n - t0, grace, i + 2);
            failures++;
            break;
        }
    }
    printf("fork smoke: %s\n", failures == 0 ? "load, fork, load: PASS" : "FAIL");
    return failures == 0 ? 0 : 1;
}
#endif
