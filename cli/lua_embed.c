/* `fa8 gen|list|targets|decode`: run the Lua generator inside this process, so users need no Lua
 * interpreter on PATH. The generator's root is FA8_ROOT (env); else, for the installed executable, the
 * install's share/fa8; else the source tree compiled in. */
#define _XOPEN_SOURCE 700   /* realpath */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include "cli.h"

#ifndef FA8_DEFAULT_ROOT
#define FA8_DEFAULT_ROOT "."
#endif
#ifndef FA8_INSTALL_ROOT
#define FA8_INSTALL_ROOT ""
#endif
#ifndef FA8_INSTALL_BIN
#define FA8_INSTALL_BIN ""
#endif

/* Is this process the installed executable (meson install copies the same binary)? */
static int running_installed(void) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 0;
  self[n] = '\0';
  char inst[4096];
  if (!realpath(FA8_INSTALL_BIN, inst)) return 0;
  return strcmp(self, inst) == 0;
}

int cli_lua(int argc, char **argv) {
  const char *root = getenv("FA8_ROOT");
  if (!root || !*root) root = running_installed() ? FA8_INSTALL_ROOT : FA8_DEFAULT_ROOT;
  char main_lua[4096];
  snprintf(main_lua, sizeof main_lua, "%s/gen/main.lua", root);
  lua_State *L = luaL_newstate();
  if (!L) { fprintf(stderr, "fa8: cannot create a Lua state\n"); return 1; }
  luaL_openlibs(L);
  lua_createtable(L, argc, 1);
  lua_pushstring(L, main_lua);
  lua_rawseti(L, -2, 0);
  for (int i = 0; i < argc; ++i) { lua_pushstring(L, argv[i]); lua_rawseti(L, -2, i + 1); }
  lua_setglobal(L, "arg");
  int rc = 0;
  if (luaL_dofile(L, main_lua) != LUA_OK) {   /* main.lua normally ends in os.exit */
    fprintf(stderr, "fa8: generator failed: %s\n(generator root %s; set FA8_ROOT to the fa8 source or install tree)\n",
            lua_tostring(L, -1), root);
    rc = 2;
  }
  lua_close(L);
  return rc;
}
