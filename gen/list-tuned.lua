-- Prints the tuned tables (*.csv) of a directory, one path per line, sorted. gen/meson.build reads each one so
-- that editing a table reconfigures the build: its rows decide which instances exist.
local dir = require("pl.dir")
local files = dir.getfiles(assert(arg[1], "usage: list-tuned.lua DIR"), "*.csv")
table.sort(files)
for _, f in ipairs(files) do print(f) end
