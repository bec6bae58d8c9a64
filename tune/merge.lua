-- Merge a sweep's table into a committed one (no GPU needed).
--   lua5.4 tune/merge.lua TABLE.csv NEW.csv [--note TEXT]... [--scale-rows N] [--out OUT.csv]
-- Every row of NEW (as `fa8 tune --out` writes it) replaces the rows of TABLE with the same target, SM count, key
-- and bucket that its sweep speaks for; every other line of TABLE stays as it is, comments included. A table holds
-- rows of sweeps under different quantizations side by side (docs/tuning.md), so --scale-rows names the sweep's
-- (`fa8 tune --scale-rows`, default 128): an N-row sweep replaces the rows whose instance can run N-row scales and
-- keeps the others (a 192-key tile serves per-tensor scales only: a 128-row sweep could not have chosen it); a
-- per-tensor sweep (0) replaces only the rows that cannot run fa8_quantize's default 128-row blocks, the rows that
-- exist for per-tensor problems. The new rows go at the end, under the --note lines (one comment line each: say
-- which sweep, commit, cache and report they come from, as the committed tables do). OUT defaults to TABLE,
-- rewritten in place. Both files go through the generator's own parser first, so a malformed line stops the
-- merge, naming file:line, before anything is written. Prints one line per key and bucket: what it replaced
-- (instance and median), what it kept, and with what.
local here = arg[0]:match("^(.*)/tune/[^/]*$") or "."
package.path = here .. "/gen/?.lua;" .. package.path
local tuned = require("fa8.tuned")
local naming, targets = require("fa8.naming"), require("fa8.targets")

local USAGE = "usage: lua5.4 tune/merge.lua TABLE.csv NEW.csv [--note TEXT]... [--scale-rows N] [--out OUT.csv]\n"
local function die(code, msg) io.stderr:write("tune/merge: " .. msg .. "\n" .. (code == 2 and USAGE or "")); os.exit(code) end

local DEFAULT_ROWS = 128   -- fa8_quantize's and fa8 tune's default scale block
local files, notes, out_path, scale_rows = {}, {}, nil, DEFAULT_ROWS
local i = 1
while i <= #arg do
  local a = arg[i]
  if a == "--note" or a == "--out" or a == "--scale-rows" then
    if arg[i + 1] == nil then die(2, a .. " needs a value") end
    if a == "--note" then
      if arg[i + 1]:find("\n", 1, true) then die(2, "a --note is one line (give several --note)") end
      notes[#notes + 1] = arg[i + 1]
    elseif a == "--scale-rows" then
      scale_rows = math.tointeger(tonumber(arg[i + 1]))
      if not scale_rows or scale_rows < 0 then die(2, ("--scale-rows '%s' is not a whole number >= 0"):format(arg[i + 1])) end
    else out_path = arg[i + 1] end
    i = i + 2
  elseif a:sub(1, 2) == "--" then die(2, ("unknown option '%s'"):format(a))
  else files[#files + 1] = a; i = i + 1 end
end
if #files ~= 2 then die(2, ("expected TABLE.csv and NEW.csv, got %d file argument(s)"):format(#files)) end
local table_path, new_path = files[1], files[2]
out_path = out_path or table_path

local function slurp(p)
  local f, err = io.open(p, "r")
  if not f then die(1, ("cannot read %s: %s"):format(p, err)) end
  local s = f:read("a"); f:close(); return s
end
local function parse(p, text)
  local ok, rows = pcall(tuned.parse, p, text)
  if not ok then die(1, rows) end
  return rows
end

local old_text, new_text = slurp(table_path), slurp(new_path)
local old_rows, new_rows = parse(table_path, old_text), parse(new_path, new_text)
if #new_rows == 0 then die(1, new_path .. ": no rows to merge") end

local function ident(r) return table.concat({ r.target, r.sm_count, r.key, r.bucket }, "|") end
local incoming, order = {}, {}
for _, r in ipairs(new_rows) do
  local id = ident(r)
  if not incoming[id] then incoming[id] = {}; order[#order + 1] = id end
  table.insert(incoming[id], r)
end
-- Whether an instance can run under `rows`-row scales: runtime/src/dispatch.c's scale checks (a forward reduces
-- K's and V's scales over key tiles, a backward also Q's and dO's over query tiles; a `pt` instance takes one
-- scale per tensor). A name this generator cannot decode counts as runnable, so its row is replaced.
local reg = targets.registry()
local function runs_under(instance, rows)
  local ok, cfg = pcall(naming.decode, instance, reg)
  if not ok then return true end
  local f, t = cfg.functional, cfg.tuning
  if f.scale == "tensor" then return rows == 0 end
  local function fits(tile) return rows == 0 or rows % tile == 0 end
  if f.dir == "fwd" then return fits(t.block_n) end
  if f.dir == "bwd" then return fits(t.block_m) and fits(t.block_n) end
  return true
end
local function sweep_speaks_for(r)
  if scale_rows > 0 then return runs_under(r.instance, scale_rows) end
  return not runs_under(r.instance, DEFAULT_ROWS)
end
-- the lines to drop: every row of TABLE a new row replaces (the parser numbered them)
local drop, replaced, kept = {}, {}, {}
for _, r in ipairs(old_rows) do
  local id = ident(r)
  if incoming[id] then
    local into = sweep_speaks_for(r) and replaced or kept
    if into == replaced then drop[r.line] = true end
    into[id] = into[id] or {}; table.insert(into[id], r)
  end
end

-- a text's lines, numbered as the parser numbers them (a last line without its newline included)
local function lines_of(text)
  local out = {}
  for line in (text .. (text:sub(-1) == "\n" and "" or "\n")):gmatch("([^\n]*)\n") do out[#out + 1] = line end
  return out
end
local lines = {}
for ln, line in ipairs(lines_of(old_text)) do
  if not drop[ln] then lines[#lines + 1] = line end
end
while #lines > 0 and lines[#lines]:match("^%s*$") do lines[#lines] = nil end
for _, n in ipairs(notes) do lines[#lines + 1] = "# " .. n end
-- the new rows as NEW spells them (its own data lines, in its order)
local new_lines = lines_of(new_text)
for n, line in ipairs(new_lines) do new_lines[n] = line:gsub("\r$", "") end
for _, id in ipairs(order) do
  for _, r in ipairs(incoming[id]) do lines[#lines + 1] = new_lines[r.line] end
end
local text = table.concat(lines, "\n") .. "\n"
parse(out_path, text)   -- what is written must read back

local f, err = io.open(out_path, "w")
if not f then die(1, ("cannot write %s: %s"):format(out_path, err)) end
f:write(text)
f:close()
-- "instance (median us), ..." of a list of rows; nil for none
local function listed(rows)
  if not rows or #rows == 0 then return nil end
  local out = {}
  for _, r in ipairs(rows) do out[#out + 1] = ("%s (%.1f us)"):format(r.instance, r.median_us) end
  return table.concat(out, ", ")
end
for _, id in ipairs(order) do
  local old, keep, r = listed(replaced[id]), listed(kept[id]), incoming[id][1]
  print(("%s %s %s: %s -> %s%s"):format(old and "replaced" or "added", r.key, r.bucket, old or "(none)",
    listed(incoming[id]), keep and ("; kept %s (not a %s-row sweep's choice)"):format(keep, scale_rows) or ""))
end
