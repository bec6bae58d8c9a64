/* Runtime internals shared by the API, validation, dispatch and backends. */
#ifndef FA8_INTERNAL_H
#define FA8_INTERNAL_H

#include "fa8.h"
#include "fa8_instances.h"

/* Record a detailed message (printf-style) for fa8_last_error() and return s. */
fa8_status fa8__fail(fa8_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void fa8__clear_error(void);

#define FA8_TRY(expr) do { fa8_status fa8__s = (expr); if (fa8__s != FA8_OK) return fa8__s; } while (0)

/* validate.c */
fa8_status fa8__check_problem(const fa8_problem *p);
fa8_status fa8__check_seq_tensor(const char *name, const fa8_tensor *t, int nd_dtypes, const fa8_dtype *dtypes,
                                 int64_t B, int64_t S, int64_t H, int64_t D);
fa8_status fa8__check_row_tensor(const char *name, const fa8_tensor *t, int64_t B, int64_t H, int64_t S);
fa8_status fa8__check_qtensor(const char *name, const fa8_qtensor *q, fa8_fmt fmt, int64_t B, int64_t S, int64_t H,
                              int64_t D);
int64_t fa8__nblocks(int64_t S, int32_t scale_rows);

/* dispatch.c */
typedef struct {
  const fa8_kernel_desc *fwd, *delta, *bwd;
  char fwd_why[400], bwd_why[400];   /* how each was chosen */
} fa8__plan;
/* What decides the fit beyond the problem: scale_rows of q, k, v, dO and whether the FP8 operands can be read
 * through TMA tensor maps (16-byte aligned bases and byte strides, transposed copies present). */
typedef struct {
  int32_t rows[4];
  int tma_ready;
} fa8__fit;
/* The fit the queries without tensors (fa8_dispatch, fa8_candidates) assume: tensors as fa8_quantize lays them
 * out (aligned, transposed copies present) with the problem's scale_rows */
static inline fa8__fit fa8__fit_of_problem(const fa8_problem *p) {
  const fa8__fit f = { { p->scale_rows, p->scale_rows, p->scale_rows, p->scale_rows }, 1 };
  return f;
}
fa8_status fa8__plan_attention(const fa8_problem *p, const fa8__fit *fit, fa8__plan *out);
fa8_status fa8__require(const fa8_problem *p, const fa8__fit *fit, fa8_dir dir, const fa8_kernel_desc *d);
const char *fa8__misfit(const fa8_kernel_desc *d, const fa8_problem *p, fa8_dir dir, const fa8__fit *fit);

/* tuned.c: the tuned-table lookup. Returns the instance the tables choose for (problem, dir), or NULL (then
 * the heuristic applies); `why` gets the reason either way. *st is set when an overlay file failed to load. */
const fa8_kernel_desc *fa8__tuned_pick(const fa8_problem *p, const fa8__fit *fit, fa8_dir dir, char *why, size_t n,
                                       fa8_status *st);
/* Parse a tuned table's text (the CSV `fa8 tune` writes) into heap rows; errors name source:line. */
typedef struct {
  char target[32], key[128], source[320];
  int32_t sm_count;
  int64_t seq, bh;
  const fa8_kernel_desc *instance;
  double median_us;
} fa8__trow;
typedef const fa8_kernel_desc *(*fa8__find_fn)(const char *name);
fa8_status fa8__tuned_parse(const char *text, size_t len, const char *source, fa8__find_fn find, fa8__trow **rows,
                            size_t *count);
/* The lookup policy on explicit rows (overlay first, then table), for tests; NULL: the heuristic. */
const fa8_kernel_desc *fa8__tuned_select(const fa8__trow *overlay_rows, size_t n_overlay, const fa8__trow *table_rows,
                                         size_t n_table, const fa8_problem *p, const fa8__fit *fit, fa8_dir dir,
                                         const char *arch, int32_t sm, char *why, size_t n);
const fa8_kernel_desc *fa8__find_quant(fa8_backend be, fa8_fmt fmt, int32_t hdim, fa8_intype in, fa8_status *st);

/* backends */
fa8_status fa8__cpu_run(const fa8_kernel_desc *d, const void *args, int32_t num_threads);
/* GPU hooks: runtime/src/gpu.c routes each to the backend's (backends/cuda/cuda_backend.c or cuda_absent.c,
 * backends/hip/hip_backend.c or hip_absent.c) */
const char *fa8__gpu_arch(fa8_backend be);          /* fa8 target of the current device ("sm_90a"), or NULL */
int32_t fa8__gpu_sm_count(fa8_backend be);          /* multiprocessors of the current device (0: none) */
const char *fa8__gpu_name(fa8_backend be);          /* its name ("" when none) */
fa8_status fa8__gpu_check_device(fa8_backend be);   /* is there a device with kernels in this build? */
fa8_status fa8__gpu_run(const fa8_kernel_desc *d, const void *args, void *stream);
fa8_status fa8__gpu_memset(fa8_backend be, void *p, size_t n, void *stream);
fa8_status fa8__gpu_download(fa8_backend be, void *host, const void *dev, size_t n, void *stream);
#define FA8__GPU_HOOKS(P)                                                                        \
  const char *P##_arch(fa8_backend be);                                                          \
  int32_t P##_sm_count(fa8_backend be);                                                          \
  const char *P##_name(fa8_backend be);                                                          \
  fa8_status P##_check_device(fa8_backend be);                                                   \
  fa8_status P##_run(const fa8_kernel_desc *d, const void *args, void *stream);                  \
  fa8_status P##_memset(void *p, size_t n, void *stream);                                        \
  fa8_status P##_download(void *host, const void *dev, size_t n, void *stream);
FA8__GPU_HOOKS(fa8__cuda)
FA8__GPU_HOOKS(fa8__hip)
fa8_status fa8__check_gpu_fp8(const char *name, const fa8_qtensor *q, int need_t);
int32_t fa8__cpu_threads(int32_t requested);

#endif
