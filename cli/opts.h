/* Minimal long-option parser for the C subcommands: --name VALUE, --name=VALUE, --flag. Every rejection
 * names the option and the value. */
#ifndef FA8_OPTS_H
#define FA8_OPTS_H
#include <stdint.h>

typedef enum { OPT_INT, OPT_FLOAT, OPT_STR, OPT_FLAG } opt_kind;
typedef struct {
  const char *name;     /* without the leading dashes */
  opt_kind kind;
  void *dst;            /* int32_t*, float*, const char**, int32_t* (flag: set to 1; --no-NAME sets 0) */
  int64_t min, max;     /* OPT_INT range */
  const char *help;
} opt_spec;

/* 0: parsed; 1: --help printed; -1: error printed. */
int opts_parse(const char *cmd, int argc, char **argv, const opt_spec *specs, int n);
#endif

/* Value parsers shared by the subcommands; each prints an error naming the option and returns -1. */
#include "fa8.h"
int opts_hdim(const char *cmd, const char *s, int32_t *qk, int32_t *v);          /* "128" or "192x128" */
int opts_fmt(const char *cmd, const char *opt, const char *s, fa8_fmt *out);     /* e4m3, e5m2, ... */
int opts_backend(const char *cmd, const char *s, fa8_backend *out);              /* cpu, cuda, hip */
