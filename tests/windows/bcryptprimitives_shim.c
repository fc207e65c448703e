/*
 * bcryptprimitives_shim.c - a stand-in bcryptprimitives.dll for Wine releases that lack one
 * (Wine 8.0, Debian bookworm's). Not for Windows: Windows 10 and later ship the real DLL.
 *
 * Rust's standard library (1.78 and later) imports ProcessPrng from bcryptprimitives.dll on
 * *-pc-windows-* for its hash map keys, so every Windows program that links libggml_t2p imports
 * it; a Wine without the DLL stops such a program before main (status c0000135, exit code 53).
 * tools/windows-test.py builds this file into the private Wine prefix's system32 only when that
 * Wine has no bcryptprimitives.dll of its own. It answers with RtlGenRandom (advapi32's
 * SystemFunction036), the generator Rust used before ProcessPrng.
 */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    while (len > 0) {
        ULONG chunk = len > 0x10000000u ? 0x10000000u : (ULONG) len;
        if (!SystemFunction036(data, chunk)) {
            return FALSE;
        }
        data += chunk;
        len -= chunk;
    }
    return TRUE;
}
