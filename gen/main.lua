-- Entry point of the generator: `lua5.4 gen/main.lua <command> ...` (the `fa8` CLI embeds the same).
-- The fa8 root is the parent of this file's folder unless FA8_ROOT says otherwise.
local script = arg and arg[0] or "gen/main.lua"
local here = script:match("^(.*)/[^/]*$") or "."
local root = os.getenv("FA8_ROOT") or (here .. "/..")
package.path = here .. "/?.lua;" .. package.path
require("fa8.emit").root = root
local argv = {}
for i = 1, #arg do argv[i] = arg[i] end
os.exit(require("fa8.cli").main(argv))
