/* fa8: the command-line tool. */
#include <stdio.h>
#include <string.h>
#include "cli.h"
#include "fa8.h"

static void usage(FILE *f) {
  fprintf(f,
    "usage: fa8 <command> [options]   (fa8 <command> --help for its options)\n"
    "  probe     run a realistic problem in every delta mode; print dS row-sum residuals and errors\n"
    "  run       attention forward+backward on .npy inputs: fa8 run --in DIR --out DIR\n"
    "  bench     time forward and backward on a GPU (JSON lines)\n"
    "  tune      measure every candidate instance on this device; write a tuned table + gain report\n"
    "  gen       generate kernel sources + descriptor table + manifest into a directory\n"
    "  list      list the instances a profile/filter selects (--rejected: what was pruned and why;\n"
    "            --tuned: what this build's runtime picks for a problem, and why)\n"
    "  targets   list the known targets (GPUs and cpu)\n"
    "  decode    decode instance names into their configs\n"
    "  version   print the version\n");
}

int main(int argc, char **argv) {
  if (argc < 2) { usage(stderr); return 2; }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "list"))
    for (int i = 2; i < argc; ++i)
      if (!strcmp(argv[i], "--tuned")) return cli_list_tuned(argc - 2, argv + 2);
  if (!strcmp(cmd, "tune")) return cli_tune(argc - 2, argv + 2);
  if (!strcmp(cmd, "gen") || !strcmp(cmd, "list") || !strcmp(cmd, "targets") || !strcmp(cmd, "decode"))
    return cli_lua(argc - 1, argv + 1);
  if (!strcmp(cmd, "probe")) return cli_probe(argc - 2, argv + 2);
  if (!strcmp(cmd, "run")) return cli_run(argc - 2, argv + 2);
  if (!strcmp(cmd, "bench")) return cli_bench(argc - 2, argv + 2);
  if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) { printf("fa8 %s\n", FA8_VERSION_STRING); return 0; }
  if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) { usage(stdout); return 0; }
  fprintf(stderr, "fa8: unknown command '%s'\n", cmd);
  usage(stderr);
  return 2;
}
