/* npy.h — strict NumPy .npy reader/writer for `fa8 run --in DIR --out DIR`.
 *
 * Inputs come from users' files, so the reader treats every byte as hostile: it accepts only the small
 * subset of the format that fa8 needs (C-order little-endian float32/float64/bfloat16, format 1.0-3.0),
 * validates sizes before allocating, and reports a one-line message naming what is wrong.
 * No dependencies beyond libc (plus POSIX fstat in npy_read). */
#ifndef FA8_CLI_NPY_H
#define FA8_CLI_NPY_H

#include <stddef.h>
#include <stdint.h>

#define NPY_MAX_DIMS 8

/* A decoded array: always float32, C order. data is malloc'd (never NULL after a successful parse,
 * even when count == 0, so callers may pass it to memcpy); release with npy_free. */
typedef struct {
    int ndim;
    int64_t shape[NPY_MAX_DIMS];
    int64_t count; /* product of shape; 1 for a 0-d array */
    float *data;
} npy_array;

/* Parse a whole .npy file image held in buf[0..len).
 * Accepted: format versions 1.0, 2.0, 3.0; descr '<f4', '<f8' (converted to float32; finite values that
 * overflow float32 are an error), '<V2' and '<u2' (bfloat16 bit patterns); fortran_order False; a shape
 * tuple of 0..NPY_MAX_DIMS non-negative ints; data exactly as long as the shape implies.
 * Returns 0 on success. On error returns -1, leaves *out zeroed (npy_free-safe) and writes a one-line
 * message into err (truncated to errlen; err may be NULL when errlen is 0). */
int npy_parse(const uint8_t *buf, size_t len, npy_array *out, char *err, size_t errlen);

/* Read a whole file (rejecting files larger than 16 GiB) and parse it. Error messages are prefixed with
 * the path: "q.npy: cannot open: No such file or directory". */
int npy_read(const char *path, npy_array *out, char *err, size_t errlen);

/* Write float32 '<f4' C-order, format 1.0, byte-identical to numpy's np.save (header padded with spaces
 * and terminated by '\n' so the data starts at a multiple of 64 bytes). data may be NULL when the shape
 * has zero elements. On failure the partial file is removed. Errors are prefixed with the path. */
int npy_write_f32(const char *path, int ndim, const int64_t *shape, const float *data, char *err,
                  size_t errlen);

/* Free a's data and zero it; safe on a zeroed or already-freed array and on NULL. */
void npy_free(npy_array *a);

/* Index of the first NaN/Inf element, or -1 if all are finite. */
int64_t npy_first_nonfinite(const npy_array *a);

#endif
