/* npy.c — strict NumPy .npy reader/writer. See npy.h for the contract.
 *
 * Format (numpy.lib.format): "\x93NUMPY", major, minor, header length (uint16 LE for 1.0, uint32 LE for
 * 2.0/3.0), then a Python dict literal {'descr': ..., 'fortran_order': ..., 'shape': (...), } padded with
 * spaces and '\n', then the raw data. The header is parsed by a small hand-written recognizer of exactly
 * the literal subset numpy writes (never evaluated), and every size is checked before it is used. */
#define _POSIX_C_SOURCE 200809L /* fileno/fstat in npy_read: size check before reading a huge file */

#include "npy.h"

#include <errno.h>
#include <math.h> /* isfinite: a macro, no libm needed */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
#define NPY_READ_LIMIT ((uint64_t)16 << 30) /* 16 GiB: refuse larger files before reading them */
#define NPY_EXPECTED_DTYPES "expected '<f4', '<f8', '<V2' or '<u2'"

/* ---- error messages --------------------------------------------------------------------------- */

/* Format into err, never overflowing errlen; control characters are replaced so the message stays one
 * line even when it quotes hostile input or an odd path. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void set_err(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || errlen == 0) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    if (n < 0) err[0] = '\0';
    for (char *p = err; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
}

/* Quote up to 40 bytes of untrusted text for a message: printable ASCII as is, others as \xNN. */
static void quote_bytes(char *dst, size_t dstsize, const char *src, size_t n) {
    static const char hex[] = "0123456789abcdef";
    size_t o = 0, limit = n > 40 ? 40 : n;
    for (size_t i = 0; i < limit && o + 5 < dstsize; i++) {
        unsigned char c = (unsigned char)src[i];
        if (c >= 0x20 && c < 0x7f && c != '\\') {
            dst[o++] = (char)c;
        } else {
            dst[o++] = '\\';
            dst[o++] = 'x';
            dst[o++] = hex[c >> 4];
            dst[o++] = hex[c & 15];
        }
    }
    if (limit < n && o + 4 < dstsize) {
        memcpy(dst + o, "...", 3);
        o += 3;
    }
    dst[o] = '\0';
}

/* "(2, 3)" / "(5,)" / "()" — shapes as numpy prints them, for messages and the writer's header. */
static void format_shape(char *dst, size_t dstsize, int ndim, const int64_t *shape) {
    size_t o = 0;
    o += (size_t)snprintf(dst, dstsize, "(");
    for (int i = 0; i < ndim && o < dstsize; i++)
        o += (size_t)snprintf(dst + o, dstsize - o, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (o < dstsize) snprintf(dst + o, dstsize - o, ndim == 1 ? ",)" : ")");
}

/* ---- header recognizer ------------------------------------------------------------------------ */

typedef struct {
    const char *p, *begin, *end;
    char *err;
    size_t errlen;
} lexer;

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }
static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_ident(char c) {
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '.';
}

static void skip_ws(lexer *L) {
    while (L->p < L->end && is_ws(*L->p)) L->p++;
}

static long hdr_off(const lexer *L) { return (long)(L->p - L->begin); }

/* Error "header: expected X at header offset N, found 'c'". */
static int expected(lexer *L, const char *what) {
    if (L->p >= L->end) {
        set_err(L->err, L->errlen, "header is not a valid dict literal: expected %s at header offset %ld, "
                "found end of header", what, hdr_off(L));
    } else {
        char q[16];
        quote_bytes(q, sizeof q, L->p, 1);
        set_err(L->err, L->errlen, "header is not a valid dict literal: expected %s at header offset %ld, "
                "found '%s'", what, hdr_off(L), q);
    }
    return -1;
}

/* Python string literal in ' or " quotes, without escapes (numpy never writes any). */
static int lex_string(lexer *L, const char **s, size_t *n) {
    if (L->p >= L->end || (*L->p != '\'' && *L->p != '"')) return expected(L, "a quoted string");
    char quote = *L->p++;
    const char *start = L->p;
    while (L->p < L->end && *L->p != quote) {
        if (*L->p == '\\' || *L->p == '\n' || *L->p == '\r') {
            set_err(L->err, L->errlen, "header is not a valid dict literal: unsupported character in string "
                    "at header offset %ld", hdr_off(L));
            return -1;
        }
        L->p++;
    }
    if (L->p >= L->end) {
        set_err(L->err, L->errlen, "header is not a valid dict literal: unterminated string starting at "
                "header offset %ld", (long)(start - 1 - L->begin));
        return -1;
    }
    *s = start;
    *n = (size_t)(L->p - start);
    L->p++;
    return 0;
}

static int lex_word(lexer *L, const char *w) {
    size_t n = strlen(w);
    if ((size_t)(L->end - L->p) < n || memcmp(L->p, w, n) != 0) return 0;
    if ((size_t)(L->end - L->p) > n && is_ident(L->p[n])) return 0;
    L->p += n;
    return 1;
}

static int lex_bool(lexer *L, int *v) {
    if (lex_word(L, "True")) { *v = 1; return 0; }
    if (lex_word(L, "False")) { *v = 0; return 0; }
    const char *s = L->p;
    while (L->p < L->end && is_ident(*L->p)) L->p++;
    char q[64];
    quote_bytes(q, sizeof q, s, (size_t)(L->p - s));
    set_err(L->err, L->errlen, "fortran_order must be True or False, found '%s'", q);
    return -1;
}

/* A non-negative decimal Python int that fits int64 (no sign, underscores, leading zeros or suffix). */
static int lex_dim(lexer *L, int64_t *v) {
    const char *s = L->p;
    if (L->p < L->end && *L->p == '-') {
        L->p++;
        while (L->p < L->end && is_ident(*L->p)) L->p++;
        char q[64];
        quote_bytes(q, sizeof q, s, (size_t)(L->p - s));
        set_err(L->err, L->errlen, "shape dimension %s is negative", q);
        return -1;
    }
    if (L->p >= L->end || !is_digit(*L->p)) return expected(L, "a shape dimension (integer)");
    uint64_t x = 0;
    int overflow = 0;
    while (L->p < L->end && is_digit(*L->p)) {
        unsigned d = (unsigned)(*L->p - '0');
        if (x > ((uint64_t)INT64_MAX - d) / 10) overflow = 1;
        else x = x * 10 + d;
        L->p++;
    }
    size_t ndig = (size_t)(L->p - s);
    if ((L->p < L->end && is_ident(*L->p)) || (ndig > 1 && s[0] == '0')) {
        while (L->p < L->end && is_ident(*L->p)) L->p++;
        char q[64];
        quote_bytes(q, sizeof q, s, (size_t)(L->p - s));
        set_err(L->err, L->errlen, "shape dimension '%s' is not a plain non-negative integer", q);
        return -1;
    }
    if (overflow) {
        char q[64];
        quote_bytes(q, sizeof q, s, ndig);
        set_err(L->err, L->errlen, "shape dimension %s overflows int64", q);
        return -1;
    }
    *v = (int64_t)x;
    return 0;
}

/* A tuple of dims: "()", "(5,)", "(2, 3)", "(2, 3,)". "(5)" is an int in Python, so it is rejected. */
static int lex_shape(lexer *L, int *ndim, int64_t *shape) {
    if (L->p >= L->end || *L->p != '(') {
        if (L->p < L->end && *L->p == '[') {
            set_err(L->err, L->errlen, "shape must be a tuple, found a list at header offset %ld", hdr_off(L));
            return -1;
        }
        return expected(L, "a shape tuple '('");
    }
    L->p++;
    skip_ws(L);
    int n = 0, first_had_comma = 0;
    while (L->p < L->end && *L->p != ')') {
        int64_t d = 0;
        if (lex_dim(L, &d) != 0) return -1;
        if (n == NPY_MAX_DIMS) {
            set_err(L->err, L->errlen, "shape has more than %d dimensions", NPY_MAX_DIMS);
            return -1;
        }
        shape[n++] = d;
        skip_ws(L);
        if (L->p < L->end && *L->p == ',') {
            if (n == 1) first_had_comma = 1;
            L->p++;
            skip_ws(L);
        } else if (L->p < L->end && *L->p == ')') {
            break;
        } else {
            return expected(L, "',' or ')' in shape tuple");
        }
    }
    if (L->p >= L->end) return expected(L, "')' closing the shape tuple");
    if (n == 1 && !first_had_comma) {
        set_err(L->err, L->errlen, "shape (%lld) is not a tuple (a 1-tuple needs a trailing comma: (%lld,))",
                (long long)shape[0], (long long)shape[0]);
        return -1;
    }
    L->p++;
    *ndim = n;
    return 0;
}

typedef struct {
    const char *descr;
    size_t descr_len;
    int fortran;
    int ndim;
    int64_t shape[NPY_MAX_DIMS];
} npy_header;

enum { KEY_DESCR = 1, KEY_FORTRAN = 2, KEY_SHAPE = 4 };

/* {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } + whitespace, keys in any order. */
static int parse_header(const char *text, size_t n, npy_header *h, char *err, size_t errlen) {
    lexer L = {text, text, text + n, err, errlen};
    int seen = 0;
    skip_ws(&L);
    if (L.p >= L.end || *L.p != '{') return expected(&L, "'{' opening the header dict");
    L.p++;
    skip_ws(&L);
    while (L.p < L.end && *L.p != '}') {
        const char *key;
        size_t klen;
        const char *kpos = L.p;
        if (lex_string(&L, &key, &klen) != 0) return -1;
        int k = 0;
        if (klen == 5 && memcmp(key, "descr", 5) == 0) k = KEY_DESCR;
        else if (klen == 13 && memcmp(key, "fortran_order", 13) == 0) k = KEY_FORTRAN;
        else if (klen == 5 && memcmp(key, "shape", 5) == 0) k = KEY_SHAPE;
        char q[64];
        quote_bytes(q, sizeof q, key, klen);
        if (k == 0) {
            set_err(err, errlen, "header has unexpected key '%s' at header offset %ld (expected exactly "
                    "'descr', 'fortran_order' and 'shape')", q, (long)(kpos - text));
            return -1;
        }
        if (seen & k) {
            set_err(err, errlen, "header has duplicate key '%s' at header offset %ld", q, (long)(kpos - text));
            return -1;
        }
        seen |= k;
        skip_ws(&L);
        if (L.p >= L.end || *L.p != ':') return expected(&L, "':' after a key");
        L.p++;
        skip_ws(&L);
        if (k == KEY_DESCR) {
            if (L.p < L.end && *L.p == '[') {
                set_err(err, errlen, "dtype is a structured (record) descr, which is not supported ("
                        NPY_EXPECTED_DTYPES ")");
                return -1;
            }
            if (lex_string(&L, &h->descr, &h->descr_len) != 0) return -1;
        } else if (k == KEY_FORTRAN) {
            if (lex_bool(&L, &h->fortran) != 0) return -1;
        } else {
            if (lex_shape(&L, &h->ndim, h->shape) != 0) return -1;
        }
        skip_ws(&L);
        if (L.p < L.end && *L.p == ',') {
            L.p++;
            skip_ws(&L);
        } else if (L.p >= L.end || *L.p != '}') {
            return expected(&L, "',' or '}' after a value");
        }
    }
    if (L.p >= L.end) return expected(&L, "'}' closing the header dict");
    L.p++;
    skip_ws(&L);
    if (L.p < L.end) {
        char q[64];
        quote_bytes(q, sizeof q, L.p, (size_t)(L.end - L.p));
        set_err(err, errlen, "header has unexpected text after the dict at header offset %ld: '%s'",
                hdr_off(&L), q);
        return -1;
    }
    static const struct { int bit; const char *name; } keys[] = {
        {KEY_DESCR, "descr"}, {KEY_FORTRAN, "fortran_order"}, {KEY_SHAPE, "shape"}};
    for (size_t i = 0; i < 3; i++) {
        if (!(seen & keys[i].bit)) {
            set_err(err, errlen, "header is missing key '%s'", keys[i].name);
            return -1;
        }
    }
    return 0;
}

/* ---- data decoding ---------------------------------------------------------------------------- */

typedef enum { DT_F4, DT_F8, DT_BF16 } npy_dtype;

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | ((uint64_t)rd32(p + 4) << 32); }

static float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static int dtype_from_descr(const char *d, size_t n, npy_dtype *dt, size_t *itemsize, char *err,
                            size_t errlen) {
    if (n == 3 && memcmp(d, "<f4", 3) == 0) { *dt = DT_F4; *itemsize = 4; return 0; }
    if (n == 3 && memcmp(d, "<f8", 3) == 0) { *dt = DT_F8; *itemsize = 8; return 0; }
    if (n == 3 && (memcmp(d, "<V2", 3) == 0 || memcmp(d, "<u2", 3) == 0)) {
        *dt = DT_BF16;
        *itemsize = 2;
        return 0;
    }
    char q[64];
    quote_bytes(q, sizeof q, d, n);
    const char *why = "";
    if (n > 0 && d[0] == '>') why = " (big-endian)";
    else if (n == 2 && d[1] == 'O') why = " (object array)";
    set_err(err, errlen, "dtype '%s'%s is not supported (" NPY_EXPECTED_DTYPES ")", q, why);
    return -1;
}

/* Largest double that still rounds to a finite float32 is just below FLT_MAX + half an ulp (2^128 -
 * 2^103 rounds to even, i.e. up to infinity). Finite values at or beyond it would silently become Inf. */
#define F32_OVERFLOW_AT 0x1.ffffffp+127

int npy_parse(const uint8_t *buf, size_t len, npy_array *out, char *err, size_t errlen) {
    if (err && errlen) err[0] = '\0';
    if (!out) {
        set_err(err, errlen, "npy_parse: no output array given");
        return -1;
    }
    memset(out, 0, sizeof *out);
    if (!buf) len = 0;
    if (len < NPY_MAGIC_LEN && len > 0 && memcmp(buf, NPY_MAGIC, len) == 0) {
        set_err(err, errlen, "file is truncated: %zu bytes, shorter than the .npy magic", len);
        return -1;
    }
    if (len < NPY_MAGIC_LEN || memcmp(buf, NPY_MAGIC, NPY_MAGIC_LEN) != 0) {
        set_err(err, errlen, "not a .npy file: bad magic (expected \\x93NUMPY at the start)");
        return -1;
    }
    if (len < 8) {
        set_err(err, errlen, "file is truncated: %zu bytes, no format version", len);
        return -1;
    }
    unsigned major = buf[6], minor = buf[7];
    if ((major != 1 && major != 2 && major != 3) || minor != 0) {
        set_err(err, errlen, "unsupported .npy format version %u.%u (expected 1.0, 2.0 or 3.0)", major, minor);
        return -1;
    }
    size_t prefix = major == 1 ? 10 : 12;
    if (len < prefix) {
        set_err(err, errlen, "file is truncated: %zu bytes, header length field needs %zu", len, prefix);
        return -1;
    }
    uint64_t hlen = major == 1 ? rd16(buf + 8) : rd32(buf + 8);
    if (hlen > (uint64_t)(len - prefix)) {
        set_err(err, errlen, "header length %llu overflows the file: header would end at byte %llu, file has "
                "%zu bytes", (unsigned long long)hlen, (unsigned long long)(prefix + hlen), len);
        return -1;
    }

    npy_header h;
    memset(&h, 0, sizeof h);
    if (parse_header((const char *)buf + prefix, (size_t)hlen, &h, err, errlen) != 0) return -1;

    npy_dtype dt;
    size_t itemsize;
    if (dtype_from_descr(h.descr, h.descr_len, &dt, &itemsize, err, errlen) != 0) return -1;
    if (h.fortran) {
        set_err(err, errlen, "fortran_order True is not supported (save a C-contiguous array, e.g. "
                "np.ascontiguousarray)");
        return -1;
    }

    /* Element count, as numpy does it: zero-size dims give count 0, but the non-zero dims' product must
     * still fit, and both the input bytes and the float32 output bytes must fit in size_t. */
    char shp[256];
    uint64_t nz = 1;
    int zero = 0;
    for (int i = 0; i < h.ndim; i++) {
        uint64_t d = (uint64_t)h.shape[i];
        if (d == 0) { zero = 1; continue; }
        if (nz > (uint64_t)INT64_MAX / d) {
            format_shape(shp, sizeof shp, h.ndim, h.shape);
            set_err(err, errlen, "shape %s is too large: element count overflows int64", shp);
            return -1;
        }
        nz *= d;
    }
    uint64_t count = zero ? 0 : nz;
    size_t outsize = itemsize > 4 ? itemsize : 4;
    if (nz > (uint64_t)SIZE_MAX / outsize) {
        format_shape(shp, sizeof shp, h.ndim, h.shape);
        set_err(err, errlen, "shape %s is too large: byte size overflows size_t", shp);
        return -1;
    }
    uint64_t nbytes = count * itemsize;
    size_t data_off = prefix + (size_t)hlen;
    size_t avail = len - data_off;
    if (avail < nbytes) {
        set_err(err, errlen, "data is truncated: expected %llu bytes, found %zu", (unsigned long long)nbytes,
                avail);
        return -1;
    }
    if (avail > nbytes) {
        set_err(err, errlen, "trailing garbage: %llu extra bytes after the data (expected %llu bytes of data, "
                "found %zu)", (unsigned long long)(avail - nbytes), (unsigned long long)nbytes, avail);
        return -1;
    }

    /* Only now, with the data known to be present, allocate (at least one float so data is never NULL). */
    size_t alloc = (size_t)(count ? count : 1) * sizeof(float);
    float *data = malloc(alloc);
    if (!data) {
        set_err(err, errlen, "out of memory allocating %zu bytes", alloc);
        return -1;
    }
    const uint8_t *src = buf + data_off;
    for (uint64_t i = 0; i < count; i++) {
        switch (dt) {
        case DT_F4:
            data[i] = f32_from_bits(rd32(src + 4 * i));
            break;
        case DT_BF16:
            data[i] = f32_from_bits((uint32_t)rd16(src + 2 * i) << 16);
            break;
        case DT_F8: {
            uint64_t u = rd64(src + 8 * i);
            double x;
            memcpy(&x, &u, sizeof x);
            /* Only finite out-of-range values are errors; NaN and ±Inf pass through (callers report them via
             * npy_first_nonfinite). */
            if (x >= F32_OVERFLOW_AT || x <= -F32_OVERFLOW_AT) {
                if (isfinite(x)) {
                    free(data);
                    set_err(err, errlen, "value %.17g at element %llu overflows float32 (dtype '<f8')", x,
                            (unsigned long long)i);
                    return -1;
                }
            }
            data[i] = (float)x;
            break;
        }
        }
    }
    out->ndim = h.ndim;
    memcpy(out->shape, h.shape, sizeof h.shape);
    out->count = (int64_t)count;
    out->data = data;
    return 0;
}

/* ---- files ------------------------------------------------------------------------------------ */

/* Read a whole stream. Regular files are size-checked before anything is read; other streams (pipes)
 * are read in growing chunks and cut off at the same limit. */
static int read_all(FILE *f, uint8_t **bufp, size_t *lenp, char *msg, size_t msglen) {
    *bufp = NULL;
    *lenp = 0;
    struct stat st;
    size_t cap = 1 << 16;
    if (fstat(fileno(f), &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            set_err(msg, msglen, "cannot read: Is a directory");
            return -1;
        }
        if (S_ISREG(st.st_mode)) {
            if ((uint64_t)st.st_size > NPY_READ_LIMIT) {
                set_err(msg, msglen, "file is too large: %lld bytes (limit 16 GiB)", (long long)st.st_size);
                return -1;
            }
            if ((uint64_t)st.st_size >= SIZE_MAX) {
                set_err(msg, msglen, "file is too large for this platform: %lld bytes", (long long)st.st_size);
                return -1;
            }
            cap = (size_t)st.st_size + 1; /* +1: EOF is seen without a second allocation */
        }
    }
    uint8_t *buf = malloc(cap);
    if (!buf) {
        set_err(msg, msglen, "out of memory allocating %zu bytes", cap);
        return -1;
    }
    size_t len = 0;
    for (;;) {
        if (len == cap) {
            if ((uint64_t)cap > NPY_READ_LIMIT) {
                free(buf);
                set_err(msg, msglen, "file is too large (limit 16 GiB)");
                return -1;
            }
            /* Grow to at most limit+1 bytes: reaching that proves the stream is too large. */
            uint64_t want = (uint64_t)cap * 2;
            if (want > NPY_READ_LIMIT + 1) want = NPY_READ_LIMIT + 1;
            if (want > SIZE_MAX) want = SIZE_MAX;
            size_t ncap = (size_t)want;
            uint8_t *nb = realloc(buf, ncap);
            if (!nb) {
                free(buf);
                set_err(msg, msglen, "out of memory allocating %zu bytes", ncap);
                return -1;
            }
            buf = nb;
            cap = ncap;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0 || len < cap) {
            if (ferror(f)) {
                int e = errno;
                free(buf);
                set_err(msg, msglen, "read error: %s", strerror(e));
                return -1;
            }
            if (feof(f)) break;
        }
    }
    if ((uint64_t)len > NPY_READ_LIMIT) {
        free(buf);
        set_err(msg, msglen, "file is too large (limit 16 GiB)");
        return -1;
    }
    *bufp = buf;
    *lenp = len;
    return 0;
}

int npy_read(const char *path, npy_array *out, char *err, size_t errlen) {
    char msg[512];
    if (out) memset(out, 0, sizeof *out);
    if (!path) {
        set_err(err, errlen, "npy_read: no path given");
        return -1;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        set_err(err, errlen, "%s: cannot open: %s", path, strerror(e));
        return -1;
    }
    uint8_t *buf;
    size_t len;
    int rc = read_all(f, &buf, &len, msg, sizeof msg);
    fclose(f);
    if (rc == 0) {
        rc = npy_parse(buf, len, out, msg, sizeof msg);
        free(buf);
    }
    if (rc != 0) set_err(err, errlen, "%s: %s", path, msg);
    return rc;
}

int npy_write_f32(const char *path, int ndim, const int64_t *shape, const float *data, char *err,
                  size_t errlen) {
    if (!path) {
        set_err(err, errlen, "npy_write_f32: no path given");
        return -1;
    }
    if (ndim < 0 || ndim > NPY_MAX_DIMS || (ndim > 0 && !shape)) {
        set_err(err, errlen, "%s: cannot write: ndim %d out of range (0..%d)", path, ndim, NPY_MAX_DIMS);
        return -1;
    }
    uint64_t nz = 1;
    int zero = 0;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) {
            set_err(err, errlen, "%s: cannot write: shape dimension %lld is negative", path,
                    (long long)shape[i]);
            return -1;
        }
        uint64_t d = (uint64_t)shape[i];
        if (d == 0) { zero = 1; continue; }
        if (nz > (uint64_t)INT64_MAX / d || nz * d > (uint64_t)SIZE_MAX / 4) {
            set_err(err, errlen, "%s: cannot write: element count overflows", path);
            return -1;
        }
        nz *= d;
    }
    uint64_t count = zero ? 0 : nz;
    if (count > 0 && !data) {
        set_err(err, errlen, "%s: cannot write: no data for %llu elements", path, (unsigned long long)count);
        return -1;
    }

    /* Header exactly as numpy's _write_array_header: sorted keys, repr(shape), then spare spaces so the
     * first dim can grow to 21 digits in place (GROWTH_AXIS_MAX_DIGITS), then pad to 64 with ' ' + '\n'. */
    char shp[256], hdr[512];
    format_shape(shp, sizeof shp, ndim, shape);
    int n = snprintf(hdr, sizeof hdr, "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }", shp);
    if (ndim > 0) {
        char first[32];
        int dl = snprintf(first, sizeof first, "%lld", (long long)shape[0]);
        for (int i = dl; i < 21; i++) hdr[n++] = ' ';
    }
    int pad = 64 - (10 + n + 1) % 64; /* numpy pads a full 64 when already aligned */
    for (int i = 0; i < pad; i++) hdr[n++] = ' ';
    hdr[n++] = '\n';
    uint8_t pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (uint8_t)(n & 0xff), (uint8_t)(n >> 8)};

    FILE *f = fopen(path, "wb");
    if (!f) {
        int e = errno;
        set_err(err, errlen, "%s: cannot create: %s", path, strerror(e));
        return -1;
    }
    int ok = fwrite(pre, 1, sizeof pre, f) == sizeof pre && fwrite(hdr, 1, (size_t)n, f) == (size_t)n;
    /* Encode little-endian explicitly so the file is right on any host. */
    uint8_t chunk[4096 * 4];
    for (uint64_t i = 0; ok && i < count;) {
        size_t m = 0;
        for (; m < 4096 && i < count; m++, i++) {
            uint32_t u;
            memcpy(&u, &data[i], sizeof u);
            chunk[4 * m] = (uint8_t)u;
            chunk[4 * m + 1] = (uint8_t)(u >> 8);
            chunk[4 * m + 2] = (uint8_t)(u >> 16);
            chunk[4 * m + 3] = (uint8_t)(u >> 24);
        }
        ok = fwrite(chunk, 4, m, f) == m;
    }
    int e = errno;
    if (fclose(f) != 0 && ok) {
        ok = 0;
        e = errno;
    }
    if (!ok) {
        remove(path);
        set_err(err, errlen, "%s: write failed: %s", path, strerror(e));
        return -1;
    }
    return 0;
}

void npy_free(npy_array *a) {
    if (!a) return;
    free(a->data);
    memset(a, 0, sizeof *a);
}

int64_t npy_first_nonfinite(const npy_array *a) {
    if (!a || !a->data) return -1;
    for (int64_t i = 0; i < a->count; i++) {
        if (!isfinite(a->data[i])) return i;
    }
    return -1;
}
