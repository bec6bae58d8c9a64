/* Status strings and the thread-local detailed error of the last failing call. */
#include <stdarg.h>
#include <stdio.h>
#include "fa8.h"
#include "fa8_internal.h"

static _Thread_local char last_error[512];

const char *fa8_status_string(fa8_status s) {
  switch (s) {
    case FA8_OK: return "success";
    case FA8_ERR_INVALID_ARGUMENT: return "invalid argument";
    case FA8_ERR_NULL_POINTER: return "null pointer";
    case FA8_ERR_MISALIGNED: return "misaligned pointer";
    case FA8_ERR_BAD_STRIDES: return "bad strides";
    case FA8_ERR_UNSUPPORTED: return "unsupported problem (no built instance covers it)";
    case FA8_ERR_WORKSPACE: return "workspace missing or too small";
    case FA8_ERR_NONFINITE: return "non-finite input";
    case FA8_ERR_BACKEND: return "backend failure";
    case FA8_ERR_OUT_OF_MEMORY: return "out of memory";
  }
  return "unknown status";
}

const char *fa8_last_error(void) { return last_error; }

fa8_status fa8__fail(fa8_status s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  return s;
}

void fa8__clear_error(void) { last_error[0] = '\0'; }
