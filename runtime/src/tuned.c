/* Tuned-table lookup (docs/tuning.md). Two sources, searched in this order: a user overlay (a CSV file named
 * by FA8_TUNED_TABLE or loaded with fa8_tuning_overlay) and the table compiled into the build
 * (fa8_tuned_rows, from the CSV files in tune/tables). Within a source the hierarchy is
 *   0 exact: same target, same SM count, same shape bucket
 *   1 same target, a row for any SM count (or another one), same bucket
 *   2 same target, the nearest bucket (|log2 S ratio| + |log2 BH ratio|)
 * and the heuristic (the first instance that fits) when no row of any fitting key exists. Ties are broken by
 * exact SM count, then the faster median, then the instance name, so the choice never depends on row order. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fa8_internal.h"

#define MAX_TABLE_BYTES (16u << 20)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static const fa8_kernel_desc *find_instance(const char *name) {
  for (size_t i = 0; i < fa8_instance_count; ++i)
    if (!strcmp(fa8_instances[i].name, name)) return &fa8_instances[i];
  return NULL;
}
static fa8__trow *overlay;
static size_t overlay_n;
static int enabled = 1, env_loaded;

static fa8_status load_file(const char *path, fa8__trow **rows, size_t *n) {
  FILE *fh = fopen(path, "rb");
  if (!fh) return fa8__fail(FA8_ERR_INVALID_ARGUMENT, "tuned table '%s': cannot open: %s", path, strerror(errno));
  char *buf = malloc(MAX_TABLE_BYTES + 1);
  if (!buf) { fclose(fh); return fa8__fail(FA8_ERR_OUT_OF_MEMORY, "tuned table '%s': out of memory", path); }
  size_t len = fread(buf, 1, MAX_TABLE_BYTES + 1, fh);
  const int err = ferror(fh);
  fclose(fh);
  if (err) { free(buf); return fa8__fail(FA8_ERR_INVALID_ARGUMENT, "tuned table '%s': read error", path); }
  if (len > MAX_TABLE_BYTES) { free(buf); return fa8__fail(FA8_ERR_INVALID_ARGUMENT, "tuned table '%s' is larger than %u bytes", path, MAX_TABLE_BYTES); }
  fa8_status st = fa8__tuned_parse(buf, len, path, find_instance, rows, n);
  free(buf);
  return st;
}

fa8_status fa8_tuning_overlay(const char *path) {
  fa8__clear_error();
  fa8__trow *rows = NULL;
  size_t n = 0;
  if (path) FA8_TRY(load_file(path, &rows, &n));
  pthread_mutex_lock(&lock);
  free(overlay);
  overlay = rows;
  overlay_n = n;
  env_loaded = 1;   /* an explicit call wins over FA8_TUNED_TABLE */
  pthread_mutex_unlock(&lock);
  return FA8_OK;
}

void fa8_tuning_enable(int on) {
  pthread_mutex_lock(&lock);
  enabled = on != 0;
  pthread_mutex_unlock(&lock);
}

/* ---- lookup ---- */

static int64_t next_pow2(int64_t x) {
  int64_t p = 1;
  while (p < x && p < ((int64_t)1 << 40)) p <<= 1;
  return p;
}
static int ilog2(int64_t x) { int l = 0; while (x > 1) { x >>= 1; ++l; } return l; }

typedef struct {
  const char *target, *key;
  int32_t sm_count;
  int64_t seq, bh;
  const fa8_kernel_desc *instance;
  double median_us;
  const char *source;
} row_view;

typedef struct {
  int found, level, dist, sm_exact;
  row_view r;
} best_t;

/* is a better than b */
static int better(const best_t *a, const best_t *b) {
  if (!b->found) return 1;
  if (a->level != b->level) return a->level < b->level;
  if (a->dist != b->dist) return a->dist < b->dist;
  if (a->sm_exact != b->sm_exact) return a->sm_exact > b->sm_exact;
  if (a->r.median_us != b->r.median_us) return a->r.median_us < b->r.median_us;
  const int c = strcmp(a->r.instance->name, b->r.instance->name);
  if (c) return c < 0;
  return strcmp(a->r.source, b->r.source) < 0;   /* the same row twice: the first file:line, whatever the order */
}

typedef struct {
  const fa8_problem *p;
  const fa8__fit *fit;
  fa8_dir dir;
  const char *arch;
  int32_t sm;
  int64_t seq, bh;
} query;

static int usable(const query *q, const fa8_kernel_desc *d) {
  if (d->dir != q->dir || fa8__misfit(d, q->p, q->dir, q->fit)) return 0;
  if (q->dir == FA8_DIR_BWD) {   /* the delta prep comes from its bundle: one must exist for the mode */
    for (size_t i = 0; i < fa8_bundle_count; ++i)
      if (fa8_bundles[i].bwd == d && fa8_bundles[i].mode == q->p->delta) return 1;
    return 0;
  }
  return 1;
}

static void consider(const query *q, const row_view *r, best_t *best) {
  if (strcmp(r->target, q->arch) || !usable(q, r->instance)) return;
  best_t c;
  memset(&c, 0, sizeof c);
  c.found = 1;
  c.r = *r;
  const int same_bucket = r->seq == q->seq && r->bh == q->bh;
  c.sm_exact = r->sm_count == q->sm;
  c.level = same_bucket ? (c.sm_exact ? 0 : 1) : 2;
  c.dist = same_bucket ? 0 : abs(ilog2(r->seq) - ilog2(q->seq)) + abs(ilog2(r->bh) - ilog2(q->bh));
  if (better(&c, best)) *best = c;
}

/* rows of the built-in table with this (target, key): binary search for the first, then walk */
static void search_builtin(const query *q, const char *key, best_t *best) {
  size_t lo = 0, hi = fa8_tuned_count;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    const fa8_tuned_row *r = &fa8_tuned_rows[mid];
    int c = strcmp(r->target, q->arch);
    if (!c) c = strcmp(r->key, key);
    if (c < 0) lo = mid + 1; else hi = mid;
  }
  for (size_t i = lo; i < fa8_tuned_count; ++i) {
    const fa8_tuned_row *r = &fa8_tuned_rows[i];
    if (strcmp(r->target, q->arch) || strcmp(r->key, key)) break;
    const row_view v = { r->target, r->key, r->sm_count, r->seq, r->bh, r->instance, r->median_us, r->source };
    consider(q, &v, best);
  }
}

static void describe(const best_t *b, const query *q, const char *which, char *why, size_t n) {
  const char *units = strcmp(q->arch, "cpu") ? "SMs" : "threads";
  if (b->level == 0)
    snprintf(why, n, "tuned (%s): exact row %s (%s, %d %s, s%lld_bh%lld)", which, b->r.source, q->arch, q->sm, units,
             (long long)q->seq, (long long)q->bh);
  else if (b->level == 1)
    snprintf(why, n, "tuned (%s): row %s for %s with %d %s (%s), here %d", which, b->r.source, q->arch,
             b->r.sm_count, units, b->r.sm_count ? "another count" : "any count", q->sm);
  else
    snprintf(why, n, "tuned (%s): nearest bucket s%lld_bh%lld for s%lld_bh%lld, row %s", which, (long long)b->r.seq,
             (long long)b->r.bh, (long long)q->seq, (long long)q->bh, b->r.source);
}

static void heuristic_why(char *why, size_t n, const char *arch) {
  snprintf(why, n, "heuristic: no tuned row for this key on %s: the first instance that fits", arch);
}

void fa8_tuning_bucket(const fa8_problem *p, int64_t *seq, int64_t *bh) {
  *seq = next_pow2(p->seqlen_q > p->seqlen_k ? p->seqlen_q : p->seqlen_k);
  *bh = next_pow2((int64_t)p->batch * p->heads);
}

static query make_query(const fa8_problem *p, const fa8__fit *fit, fa8_dir dir, const char *arch, int32_t sm) {
  query q = { p, fit, dir, arch, sm, 0, 0 };
  fa8_tuning_bucket(p, &q.seq, &q.bh);
  return q;
}

/* every row of a parsed table (the overlay, or a test's table) */
static void search_rows(const query *q, const fa8__trow *rows, size_t n, best_t *best) {
  for (size_t i = 0; i < n; ++i) {
    const fa8__trow *r = &rows[i];
    const row_view v = { r->target, r->key, r->sm_count, r->seq, r->bh, r->instance, r->median_us, r->source };
    consider(q, &v, best);
  }
}

const fa8_kernel_desc *fa8__tuned_select(const fa8__trow *overlay_rows, size_t n_overlay, const fa8__trow *table_rows,
                                         size_t n_table, const fa8_problem *p, const fa8__fit *fit, fa8_dir dir,
                                         const char *arch, int32_t sm, char *why, size_t n) {
  const query q = make_query(p, fit, dir, arch, sm);
  const fa8__trow *src[2] = { overlay_rows, table_rows };
  const size_t cnt[2] = { n_overlay, n_table };
  for (int k = 0; k < 2; ++k) {
    best_t best;
    memset(&best, 0, sizeof best);
    search_rows(&q, src[k], cnt[k], &best);
    if (best.found) {
      describe(&best, &q, k ? "built in" : "overlay", why, n);
      return best.r.instance;
    }
  }
  heuristic_why(why, n, arch);
  return NULL;
}

const fa8_kernel_desc *fa8__tuned_pick(const fa8_problem *p, const fa8__fit *fit, fa8_dir dir, char *why, size_t n,
                                       fa8_status *st) {
  *st = FA8_OK;
  pthread_mutex_lock(&lock);
  if (!env_loaded) {
    env_loaded = 1;
    const char *env = getenv("FA8_TUNED_TABLE");
    if (env && *env) {
      fa8__trow *rows;
      size_t cnt;
      fa8_status s = load_file(env, &rows, &cnt);
      if (s != FA8_OK) {
        env_loaded = 0;   /* report it again on the next call, never silently drop the user's table */
        pthread_mutex_unlock(&lock);
        char msg[600];
        snprintf(msg, sizeof msg, "%s", fa8_last_error());   /* fa8__fail rewrites the buffer it would read */
        *st = fa8__fail(s, "FA8_TUNED_TABLE: %s", msg);
        snprintf(why, n, "FA8_TUNED_TABLE could not be loaded");
        return NULL;
      }
      overlay = rows;
      overlay_n = cnt;
    }
  }
  if (!enabled) {
    pthread_mutex_unlock(&lock);
    snprintf(why, n, "heuristic: tuned tables disabled (fa8_tuning_enable(0))");
    return NULL;
  }
  const int cpu = p->backend == FA8_BACKEND_CPU;
  const query q = make_query(p, fit, dir, cpu ? "cpu" : fa8__gpu_arch(p->backend),
                             cpu ? fa8__cpu_threads(p->num_threads) : fa8__gpu_sm_count(p->backend));
  if (!q.arch) {
    pthread_mutex_unlock(&lock);
    snprintf(why, n, "heuristic: no device architecture");
    return NULL;
  }
  best_t best;
  memset(&best, 0, sizeof best);
  search_rows(&q, overlay, overlay_n, &best);
  if (best.found) {
    describe(&best, &q, "overlay", why, n);
    pthread_mutex_unlock(&lock);
    return best.r.instance;
  }
  pthread_mutex_unlock(&lock);
  if (fa8_tuned_count == 0) {   /* no built-in table: skip the walk over the instances (every dispatch comes here) */
    heuristic_why(why, n, q.arch);
    return NULL;
  }
  /* the keys of the instances that fit, each searched once */
  const char *keys[64];
  int nk = 0;
  for (size_t i = 0; i < fa8_instance_count && nk < 64; ++i) {
    const fa8_kernel_desc *d = &fa8_instances[i];
    if (d->backend != p->backend || strcmp(d->target, q.arch) || !usable(&q, d)) continue;
    int dup = 0;
    for (int k = 0; k < nk; ++k) dup |= !strcmp(keys[k], d->key);
    if (!dup) keys[nk++] = d->key;
  }
  for (int k = 0; k < nk; ++k) search_builtin(&q, keys[k], &best);
  if (best.found) {
    describe(&best, &q, "built in", why, n);
    return best.r.instance;
  }
  heuristic_why(why, n, q.arch);
  return NULL;
}

/* ---- tuner support ---- */

fa8_status fa8_candidates(const fa8_problem *p, int backward, const char **names, int max, int *count) {
  fa8__clear_error();
  if (!p || !count || (max > 0 && !names)) return fa8__fail(FA8_ERR_NULL_POINTER, "p, names or count is NULL");
  FA8_TRY(fa8__check_problem(p));
  *count = 0;
  const char *arch = p->backend == FA8_BACKEND_CPU ? "cpu" : fa8__gpu_arch(p->backend);
  if (!arch) return fa8__fail(FA8_ERR_UNSUPPORTED, "no device for this backend");
  const fa8__fit fit = fa8__fit_of_problem(p);
  if (!backward) {
    for (size_t i = 0; i < fa8_instance_count; ++i) {
      const fa8_kernel_desc *d = &fa8_instances[i];
      if (d->dir != FA8_DIR_FWD || d->backend != p->backend || strcmp(d->target, arch) || fa8__misfit(d, p, FA8_DIR_FWD, &fit)) continue;
      if (*count < max) names[*count] = d->name;
      ++*count;
    }
  } else {
    for (size_t i = 0; i < fa8_bundle_count; ++i) {
      const fa8_bundle_desc *b = &fa8_bundles[i];
      if (b->mode != p->delta || b->bwd->backend != p->backend || strcmp(b->bwd->target, arch) ||
          fa8__misfit(b->bwd, p, FA8_DIR_BWD, &fit) || fa8__misfit(b->delta, p, FA8_DIR_DELTA, &fit) ||
          fa8__misfit(b->fwd, p, FA8_DIR_FWD, &fit))
        continue;
      if (*count < max) names[*count] = b->name;
      ++*count;
    }
  }
  return FA8_OK;
}

static const fa8_bundle_desc *find_bundle(const char *name) {
  for (size_t i = 0; name && i < fa8_bundle_count; ++i)
    if (!strcmp(fa8_bundles[i].name, name)) return &fa8_bundles[i];
  return NULL;
}

const char *fa8_instance_key(const char *name) {
  if (!name) return NULL;
  const fa8_kernel_desc *d = find_instance(name);
  if (d) return d->key;
  const fa8_bundle_desc *b = find_bundle(name);
  return b ? b->bwd->key : NULL;
}

const char *fa8_bundle_backward(const char *bundle) {
  const fa8_bundle_desc *b = find_bundle(bundle);
  return b ? b->bwd->name : NULL;
}

fa8_status fa8_instance_resources(const char *name, int32_t *regs, int32_t *local_bytes, const char **which) {
  fa8__clear_error();
  if (!name || !regs || !local_bytes || !which) return fa8__fail(FA8_ERR_NULL_POINTER, "an argument is NULL");
  const fa8_kernel_desc *ks[2] = { find_instance(name), NULL };
  if (!ks[0]) {
    const fa8_bundle_desc *b = find_bundle(name);
    if (!b) return fa8__fail(FA8_ERR_INVALID_ARGUMENT, "'%s' is not an instance or bundle of this build", name);
    ks[0] = b->delta;
    ks[1] = b->bwd;
  }
  *regs = *local_bytes = 0;
  *which = NULL;
  for (int i = 0; i < 2 && ks[i]; ++i) {
    const fa8_kernel_desc *d = ks[i];
    if (d->backend != FA8_BACKEND_CUDA || !d->gpu_attrs)
      return fa8__fail(FA8_ERR_UNSUPPORTED, "%s: resources are reported for CUDA instances only", d->name);
    const fa8_status st = fa8__gpu_check_device(d->backend);
    if (st != FA8_OK) return st;
    fa8_gpu_attrs at;
    const int rc = d->gpu_attrs(&at);
    if (rc != 0) return fa8__fail(FA8_ERR_BACKEND, "%s: cudaFuncGetAttributes failed (CUDA error %d)", d->name, rc);
    if (!*which || at.local_bytes > *local_bytes || (at.local_bytes == *local_bytes && at.regs > *regs)) {
      *regs = at.regs;
      *local_bytes = at.local_bytes;
      *which = d->name;
    }
  }
  return FA8_OK;
}

fa8_status fa8_device_info(const fa8_problem *p, const char **target, int32_t *sm_count, const char **name) {
  fa8__clear_error();
  if (!p || !target || !sm_count || !name) return fa8__fail(FA8_ERR_NULL_POINTER, "an argument is NULL");
  if (p->backend == FA8_BACKEND_CPU) {
    *target = "cpu";
    *sm_count = fa8__cpu_threads(p->num_threads);
    *name = "cpu";
    return FA8_OK;
  }
  *target = fa8__gpu_arch(p->backend);
  if (!*target || !**target) return fa8__fail(FA8_ERR_UNSUPPORTED, "no device with kernels in this build for this backend");
  *sm_count = fa8__gpu_sm_count(p->backend);
  *name = fa8__gpu_name(p->backend);
  return FA8_OK;
}

const char *fa8_generator_hash(void) { return FA8_GEN_HASH; }
