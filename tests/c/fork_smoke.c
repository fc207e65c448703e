/*
 * Load, fork, load again: a host process (a prefork server, Python multiprocessing) repacks a
 * matrix big enough to use several threads, forks, and the child repacks again. The child must
 * finish (a library that keeps a thread pool across fork() hangs here: the pool's threads do not
 * exist in the child) and produce the parent's bytes. On Linux it also checks that no thread of
 * the library outlives a repack (the process is back to one thread after each call).
 *
 * Uses only ggml_t2p_repacked_size / ggml_t2p_repack, whose signatures are the same in ABI 1 and
 * ABI 2, so the same program shows the behaviour of older libraries too.
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

static int repack(int layout, const uint8_t * src, uint8_t ** out, size_t * size) {
    if (ggml_t2p_repacked_size(GGML_T2P_TYPE_PQ2_0, layout, NROWS, K, size) != GGML_T2P_OK) return 0;
    *out = malloc(*size);
    return ggml_t2p_repack(GGML_T2P_TYPE_PQ2_0, layout, src, (size_t) NROWS * (K / 128) * BLOCK, NROWS, K, *out, *size) == GGML_T2P_OK;
}

int main(int argc, char ** argv) {
    const int layout  = argc > 1 ? atoi(argv[1]) : 1; /* GGML_T2P_LAYOUT_T2P */
    const int timeout = argc > 2 ? atoi(argv[2]) : 120;
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
    /* the library joins its threads (pthread_join) before a repack returns: the count is exact */
    const int t1 = threads_now();
    printf("fork smoke: layout %d, %zu bytes repacked in the parent; threads before %d, after %d\n", layout, size, t0, t1);
    if (t0 > 0 && t1 != t0) {
        printf("FAIL: the repack left %d thread(s) running\n", t1 - t0);
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
    /* and the parent can still repack after the fork */
    /* and the parent can still repack after the fork, many times, never keeping a thread */
    for (int i = 0; i < 20; i++) {
        free(b);
        if (!repack(layout, src, &b, &size) || memcmp(a, b, size) != 0) {
            printf("FAIL: the parent's repack %d differs\n", i + 2);
            failures++;
            break;
        }
        if (t0 > 0 && threads_now() != t0) {
            printf("FAIL: %d thread(s) still running right after repack %d returned\n", threads_now() - t0, i + 2);
            failures++;
            break;
        }
    }
    printf("fork smoke: %s\n", failures == 0 ? "load, fork, load: PASS" : "FAIL");
    return failures == 0 ? 0 : 1;
}
#endif
