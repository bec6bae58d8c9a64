-- Prints the tuned tables of a directory, one path per line, as the generator reads them (fa8.tuned.table_files).
-- gen/meson.build reads each one so that editing a table reconfigures the build: its rows decide which instances exist.
local here = (arg and arg[0] or "gen/list-tuned.lua"):match("^(.*)/[^/]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local ok, files = pcall(require("fa8.tuned").table_files, assert(arg[1], "usage: list-tuned.lua DIR"))
if not ok then
  io.stderr:write("list-tuned: ", tostring(files), "\n")
  os.exit(2)
end
for _, f in ipairs(files) do print(f) end
