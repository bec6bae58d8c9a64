-- Merge a sweep's table into a committed one (no GPU needed).
--   lua5.4 tune/merge.lua TABLE.csv NEW.csv [--note TEXT]... [--out OUT.csv]
-- Every row of NEW (as `fa8 tune --out` writes it) replaces all rows of TABLE with the same target, SM count, key
-- and bucket; every other line of TABLE stays as it is, comments included. The new rows go at the end, under the
-- --note lines (one comment line each: say which sweep, commit, cache and report they come from, as the committed
-- tables do). OUT defaults to TABLE, rewritten in place. Both files go through the generator's own parser first,
-- so a malformed line stops the merge, naming file:line, before anything is written. Prints one line per key and
-- bucket: what it replaced (instance and median) and with what.
local here = arg[0]:match("^(.*)/tune/[^/]*$") or "."
package.path = here .. "/gen/?.lua;" .. package.path
local tuned = require("fa8.tuned")

local USAGE = "usage: lua5.4 tune/merge.lua TABLE.csv NEW.csv [--note TEXT]... [--out OUT.csv]\n"
local function die(code, msg) io.stderr:write("tune/merge: " .. msg .. "\n" .. (code == 2 and USAGE or "")); os.exit(code) end

local files, notes, out_path = {}, {}, nil
local i = 1
while i <= #arg do
  local a = arg[i]
  if a == "--note" or a == "--out" then
    if arg[i + 1] == nil then die(2, a .. " needs a value") end
    if a == "--note" then
      if arg[i + 1]:find("\n", 1, true) then die(2, "a --note is one line (give several --note)") end
      notes[#notes + 1] = arg[i + 1]
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
-- the lines to drop: every row of TABLE a new row replaces (the parser numbered them)
local drop, replaced = {}, {}
for _, r in ipairs(old_rows) do
  local id = ident(r)
  if incoming[id] then drop[r.line] = true; replaced[id] = replaced[id] or {}; table.insert(replaced[id], r) end
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
for _, id in ipairs(order) do
  local new = {}
  for _, r in ipairs(incoming[id]) do new[#new + 1] = ("%s (%.1f us)"):format(r.instance, r.median_us) end
  local old = {}
  for _, r in ipairs(replaced[id] or {}) do old[#old + 1] = ("%s (%.1f us)"):format(r.instance, r.median_us) end
  local r = incoming[id][1]
  print(("%s %s %s: %s -> %s"):format(#old > 0 and "replaced" or "added", r.key, r.bucket,
    #old > 0 and table.concat(old, ", ") or "(none)", table.concat(new, ", ")))
end
