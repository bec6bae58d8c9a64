/* CPU executor: runs an instance's work items on a pool of pthreads. Items are independent by construction
 * (see each template), so the result does not depend on the thread count or the schedule. Threads pull
 * items from an atomic counter: causal problems have uneven items. */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>
#include "fa8_internal.h"

typedef struct {
  fa8_cpu_run_fn run;
  const void *args;
  int64_t n;
  atomic_llong next;
} job;

static void *worker(void *arg) {
  job *j = (job *)arg;
  for (;;) {
    const int64_t i = (int64_t)atomic_fetch_add(&j->next, 1);
    if (i >= j->n) break;
    j->run(j->args, i);
  }
  return NULL;
}

int32_t fa8__cpu_threads(int32_t requested) {
  if (requested > 0) return requested;
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int32_t)(n < 256 ? n : 256) : 1;
}

fa8_status fa8__cpu_run(const fa8_kernel_desc *d, const void *args, int32_t num_threads) {
  if (!d->cpu_run || !d->cpu_items)
    return fa8__fail(FA8_ERR_BACKEND, "instance %s has no CPU entry point", d->name);
  job j = { d->cpu_run, args, d->cpu_items(args), 0 };
  if (j.n <= 0) return FA8_OK;
  int64_t t = fa8__cpu_threads(num_threads);
  if (t > j.n) t = j.n;
  pthread_t tid[256];
  int started = 0;
  for (int64_t i = 1; i < t; ++i) {
    if (pthread_create(&tid[started], NULL, worker, &j) != 0) break;   /* fewer threads still finish the job */
    ++started;
  }
  worker(&j);
  for (int i = 0; i < started; ++i) pthread_join(tid[i], NULL);
  return FA8_OK;
}
