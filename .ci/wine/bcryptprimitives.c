// A stand-in for Windows' bcryptprimitives.dll, for running our Windows build under wine in
// tests only (never shipped in a package). Go >= 1.22 loads ProcessPrng from that DLL at start;
// Debian's wine 8 does not have it. This one fills the buffer from advapi32's RtlGenRandom
// (exported as SystemFunction036), which wine does implement.
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    while (len > 0) {
        ULONG n = len > 0x7fffffff ? 0x7fffffff : (ULONG)len;
        if (!SystemFunction036(data, n)) {
            return FALSE;
        }
        data += n;
        len -= n;
    }
    return TRUE;
}
