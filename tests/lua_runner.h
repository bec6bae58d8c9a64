/* Run Lua checks against the generator's modules (the gen/fa8 Lua modules) from Criterion tests.
 *
 * Each call gets a fresh lua_State with the standard libraries, package.path = FA8_SOURCE_ROOT/gen/?.lua
 * followed by Lua's default path (Penlight, dkjson, argparse), and require("fa8.emit").root set to
 * FA8_SOURCE_ROOT, exactly as gen/main.lua sets them up. Lua-side checks use assert()/error(). */
#ifndef FA8_TESTS_LUA_RUNNER_H
#define FA8_TESTS_LUA_RUNNER_H
#include <stddef.h>

/* Runs `code` as one chunk. Returns 0 when it completes without error; otherwise nonzero, with the error
 * message (followed by a Lua traceback) copied into err[errlen] (always NUL-terminated when errlen > 0). */
int lua_check(const char *code, char *err, size_t errlen);

#endif
