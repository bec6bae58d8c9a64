/* fuzz_npy.c — libFuzzer target for the .npy parser, which reads untrusted user files.
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Icli tests/fuzz/fuzz_npy.c cli/npy.c -o fuzz_npy
 *   ./fuzz_npy -max_total_time=60 tests/fuzz/corpus_npy
 * Seeds in corpus_npy/ are numpy-written files (f4 2x3, f8 with an FLT_MAX-rounding value, '<V2' bf16,
 * format 3.0), so mutations start from deep inside the accepted grammar. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* Exact-size heap copy: libFuzzer's buffer is already exact, but this keeps the target honest if
     * it is ever driven by another harness. */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) return 0;
    if (size) memcpy(copy, data, size);
    npy_array a;
    char err[128];
    int rc = npy_parse(copy, size, &a, err, sizeof err);
    if (rc == 0) {
        /* A success must describe a buffer we can read entirely, with a consistent count. */
        int64_t count = 1;
        for (int i = 0; i < a.ndim; i++) count *= a.shape[i];
        if (a.ndim < 0 || a.ndim > NPY_MAX_DIMS || count != a.count || !a.data) abort();
        (void)npy_first_nonfinite(&a); /* touches every element */
    } else {
        /* Failures leave a zeroed array and a non-empty, terminated, one-line message. */
        const char *nul = memchr(err, '\0', sizeof err);
        if (a.data || !nul || nul == err || memchr(err, '\n', (size_t)(nul - err))) abort();
    }
    npy_free(&a);
    free(copy);
    return 0;
}
