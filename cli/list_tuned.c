/* `fa8 list --tuned`: what this build's runtime picks for one problem, forward and backward, and why (a
 * tuned-table row with its file:line, the overlay, or the heuristic). FA8_TUNED_TABLE / --overlay FILE add a
 * user table on top of the built-in one. */
#include <stdio.h>
#include <string.h>
#include "cli.h"
#include "harness.h"
#include "opts.h"

int cli_list_tuned(int argc, char **argv) {
  fa8_problem p;
  fa8_problem_init(&p);
  p.batch = 1; p.heads = 64; p.kv_heads = 8; p.seqlen_q = p.seqlen_k = 4096;
  int32_t seqlen = 0, tuned = 0, heuristic = 0;
  const char *hdim = "128", *backend = "cpu", *delta = "matched", *overlay = NULL, *device = NULL;
  const opt_spec specs[] = {
    { "tuned", OPT_FLAG, &tuned, 0, 0, "(this listing)" },
    { "backend", OPT_STR, &backend, 0, 0, "cpu (default) | cuda" },
    { "batch", OPT_INT, &p.batch, 1, 1 << 20, "batch (1)" },
    { "heads", OPT_INT, &p.heads, 1, 1 << 16, "query heads (64)" },
    { "kv-heads", OPT_INT, &p.kv_heads, 1, 1 << 16, "key/value heads (8)" },
    { "seqlen", OPT_INT, &seqlen, 1, 1 << 24, "sequence length (4096)" },
    { "hdim", OPT_STR, &hdim, 0, 0, "head dim N or QKxV (128)" },
    { "causal", OPT_FLAG, &p.causal, 0, 0, "causal (off)" },
    { "delta", OPT_STR, &delta, 0, 0, "delta mode (matched)" },
    { "threads", OPT_INT, &p.num_threads, 0, 4096, "CPU threads (0: all cores)" },
    { "overlay", OPT_STR, &overlay, 0, 0, "a tuned table (CSV) searched before the built-in one" },
    { "heuristic", OPT_FLAG, &heuristic, 0, 0, "ignore every tuned table" },
    { "device", OPT_STR, &device, 0, 0, "TARGET:SMS: what a GPU backend would pick on that device, without one (sm_90a:132)" },
  };
  const int pr = opts_parse("list --tuned", argc, argv, specs, (int)(sizeof specs / sizeof specs[0]));
  if (pr) return pr > 0 ? 0 : 2;
  if (seqlen) p.seqlen_q = p.seqlen_k = seqlen;
  if (opts_hdim("list --tuned", hdim, &p.hdim_qk, &p.hdim_v) || opts_backend("list --tuned", backend, &p.backend)) return 2;
  fa8_delta_mode m;
  if (h_delta_from_name(delta, &m)) { fprintf(stderr, "fa8 list --tuned: --delta '%s' is not a delta mode\n", delta); return 2; }
  p.delta = m;
  if (device) {   /* plan for a device this machine need not have */
    char arch[32];
    int sms = -1, used = 0;
    if (sscanf(device, "%31[^:]:%d%n", arch, &sms, &used) != 2 || device[used] != '\0' || sms < 0) {
      fprintf(stderr, "fa8 list --tuned: --device '%s' is not TARGET:SMS (e.g. sm_90a:132)\n", device);
      return 2;
    }
    if (fa8_plan_for_device(p.backend, arch, sms) != FA8_OK) { fprintf(stderr, "fa8 list --tuned: --device: %s\n", fa8_last_error()); return 2; }
  }
  if (overlay && fa8_tuning_overlay(overlay) != FA8_OK) { fprintf(stderr, "fa8 list --tuned: %s\n", fa8_last_error()); return 2; }
  if (heuristic) fa8_tuning_enable(0);
  fa8_dispatch_names n;
  if (fa8_dispatch(&p, &n) != FA8_OK) { fprintf(stderr, "fa8 list --tuned: %s\n", fa8_last_error()); return 1; }
  const char *target = "?", *dev = "?";
  int32_t sms = 0;
  fa8_device_info(&p, &target, &sms, &dev);
  int64_t sb, bb;
  fa8_tuning_bucket(&p, &sb, &bb);
  printf("problem: B=%d H=%d/%d S=%d d=%dx%d %s delta=%s on %s (%d %s), bucket s%lld_bh%lld\n", p.batch, p.heads,
         p.kv_heads, p.seqlen_q, p.hdim_qk, p.hdim_v, p.causal ? "causal" : "full", delta, target, sms,
         p.backend == FA8_BACKEND_CPU ? "threads" : "SMs", (long long)sb, (long long)bb);
  printf("fwd   %s\n      %s\n", n.fwd, n.fwd_why);
  printf("bwd   %s\n      %s\n", n.bwd, n.bwd_why);
  printf("delta %s (from the backward's bundle)\n", n.delta);
  return 0;
}
