/* See lua_runner.h. */
#include "lua_runner.h"

#include <stdio.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#ifndef FA8_SOURCE_ROOT
#error "FA8_SOURCE_ROOT must name the fa8 source tree (tests/meson.build defines it)"
#endif

static void copy_msg(char *err, size_t errlen, const char *msg) {
    if (!err || errlen == 0) return;
    snprintf(err, errlen, "%s", msg ? msg : "(error object is not a string)");
}

/* Message handler: keep the message, append where it was raised (assert() messages carry no position). */
static int traceback(lua_State *L) {
    const char *msg = lua_tostring(L, 1);
    if (!msg) msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    luaL_traceback(L, L, msg, 1);
    return 1;
}

/* package.path = ROOT/gen/?.lua;<default>; require("fa8.emit").root = ROOT */
static const char *const SETUP =
    "local root = ...\n"
    "package.path = root .. '/gen/?.lua;' .. package.path\n"
    "require('fa8.emit').root = root\n";

static int run(lua_State *L, const char *code, size_t len, const char *chunkname, int nargs_root) {
    lua_pushcfunction(L, traceback);
    int h = lua_gettop(L);
    int rc = luaL_loadbuffer(L, code, len, chunkname);
    if (rc != LUA_OK) return rc;
    if (nargs_root) lua_pushstring(L, FA8_SOURCE_ROOT);
    rc = lua_pcall(L, nargs_root, 0, h);
    if (rc == LUA_OK) lua_remove(L, h);
    return rc;
}

int lua_check(const char *code, char *err, size_t errlen) {
    if (err && errlen) err[0] = '\0';
    lua_State *L = luaL_newstate();
    if (!L) { copy_msg(err, errlen, "lua_check: cannot create a Lua state"); return -1; }
    luaL_openlibs(L);
    int rc = run(L, SETUP, strlen(SETUP), "=lua_runner setup", 1);
    if (rc == LUA_OK) rc = run(L, code, strlen(code), "=test chunk", 0);
    if (rc != LUA_OK) copy_msg(err, errlen, lua_tostring(L, -1));
    lua_close(L);
    return rc == LUA_OK ? 0 : (rc ? rc : -1);
}
