-- Tuned tables: the autotuner's files of record (tune/tables/*.csv, written by `fa8 tune`), read at build
-- time. Every row names the instance `fa8 tune` chose for (target, SM count, functional key, shape bucket);
-- the build compiles that instance even when the profile would not, and emits the rows as a sorted C array
-- the runtime searches (runtime/src/tuned.c has the same parser for user overlay files).
--
-- Format: comment lines start with '#'; the first other line is the header, exactly M.columns joined by ','.
-- Fields hold no commas. bucket is "s<S>_bh<BH>": S and BH are powers of two, the upper ends of the
-- sequence-length (max of Sq, Sk) and batch x heads ranges the row covers. sm_count 0 means any.
local naming = require("fa8.naming")

local M = {}

M.columns = { "target", "sm_count", "device", "key", "bucket", "instance", "median_us", "p20_us", "p80_us", "err",
  "runner_up", "runner_up_us", "fa8_commit", "cuda", "driver", "date" }

local function is_pow2(n) return n >= 1 and n & (n - 1) == 0 end

-- "s8192_bh64" -> 8192, 64; or nil, reason
function M.parse_bucket(s)
  local a, b = tostring(s):match("^s(%d+)_bh(%d+)$")
  if not a then return nil, ("bucket '%s' is not s<S>_bh<BH>"):format(tostring(s)) end
  a, b = tonumber(a), tonumber(b)
  if not (is_pow2(a) and is_pow2(b)) or a > (1 << 24) or b > (1 << 24) then
    return nil, ("bucket '%s': S and BH must be powers of two up to 2^24"):format(s)
  end
  return a, b
end

local function num(v, what, min)
  local x = tonumber(v)
  if x == nil or x ~= x or x == math.huge or x == -math.huge then return nil, ("%s '%s' is not a number"):format(what, v) end
  if min and x < min then return nil, ("%s %s is below %s"):format(what, v, tostring(min)) end
  return x
end

-- Parse one table's text; raises "path:line: reason" on the first malformed line.
function M.parse(path, text)
  local rows, header_seen, ln = {}, false, 0
  local function fail(msg) error(("%s:%d: %s"):format(path, ln, msg), 0) end
  for line in (text .. (text:sub(-1) == "\n" and "" or "\n")):gmatch("([^\n]*)\n") do
    ln = ln + 1
    line = line:gsub("\r$", "")
    if line:match("^%s*$") or line:match("^%s*#") then goto continue end
    if not header_seen then
      if line ~= table.concat(M.columns, ",") then
        fail("the header must be exactly: " .. table.concat(M.columns, ","))
      end
      header_seen = true
      goto continue
    end
    do
      local f = {}
      for x in (line .. ","):gmatch("([^,]*),") do f[#f + 1] = x end
      if #f ~= #M.columns then fail(("%d fields, the header has %d"):format(#f, #M.columns)) end
      local r = { path = path, line = ln }
      for i, c in ipairs(M.columns) do r[c] = f[i] end
      if not r.target:match("^[a-z][a-z0-9_]*$") then fail(("target '%s' is not a target name"):format(r.target)) end
      local sm = tonumber(r.sm_count)
      if not sm or math.type(sm) ~= "integer" or sm < 0 then fail(("sm_count '%s' is not an integer >= 0"):format(r.sm_count)) end
      r.sm_count = sm
      if not r.key:match("^fa8_fwd_[a-z0-9_]+$") and not r.key:match("^fa8_bwd_[a-z0-9_]+$") then
        fail(("key '%s' is not a forward or backward functional key"):format(r.key))
      end
      local s, bh = M.parse_bucket(r.bucket)
      if not s then fail(bh) end
      r.seq, r.bh = s, bh
      if not r.instance:match("^fa8_[a-z0-9_]+$") then fail(("instance '%s' is not an instance name"):format(r.instance)) end
      local why
      r.median_us, why = num(r.median_us, "median_us", 0)
      if not r.median_us or r.median_us <= 0 then fail(why or "median_us must be > 0") end
      for _, c in ipairs({ "p20_us", "p80_us", "err", "runner_up_us" }) do
        if r[c] ~= "" then
          r[c], why = num(r[c], c, 0)
          if not r[c] then fail(why) end
        end
      end
      rows[#rows + 1] = r
    end
    ::continue::
  end
  if not header_seen then error(("%s: no header line (an empty table)"):format(path), 0) end
  return rows
end

-- The tuned tables of a directory: every *.csv, in name order (also gen/list-tuned.lua's answer to meson).
function M.table_files(dirpath)
  local pldir, plpath = require("pl.dir"), require("pl.path")
  if not plpath.isdir(dirpath) then error(("--tuned-dir %s: not a directory"):format(dirpath), 0) end
  local files = pldir.getfiles(dirpath, "*.csv")
  table.sort(files)
  return files
end

-- Every table of a directory (M.table_files), parsed.
function M.load_dir(dirpath, emit)
  local plpath = require("pl.path")
  local files = M.table_files(dirpath)
  local rows = {}
  if emit then emit.add_dep(dirpath) end
  for _, p in ipairs(files) do
    local fh = assert(io.open(p, "rb"))
    local text = fh:read("a")
    fh:close()
    if emit then emit.add_dep(p) end
    -- the generated table names rows by a path relative to the fa8 root, so builds are byte-identical anywhere
    local rel = plpath.basename(p)
    if emit and emit.root then
      local root, abs = plpath.normpath(plpath.abspath(emit.root)), plpath.normpath(plpath.abspath(p))
      if abs:sub(1, #root + 1) == root .. "/" then rel = abs:sub(#root + 2) end
    end
    for _, r in ipairs(M.parse(p, text)) do r.source = rel; rows[#rows + 1] = r end
  end
  return rows
end

-- The config a row names, checked against its key; raises "path:line: ..." when the name does not decode,
-- is not canonical, or belongs to another key.
function M.config_of(row, reg)
  local ok, c = pcall(naming.decode, row.instance, reg)
  if not ok then error(("%s:%d: %s"):format(row.path, row.line, c), 0) end
  if naming.encode(c) ~= row.instance then
    error(("%s:%d: instance '%s' is not canonical (it encodes as %s)"):format(row.path, row.line, row.instance, naming.encode(c)), 0)
  end
  if c.target.name ~= row.target then
    error(("%s:%d: instance '%s' is for target %s, the row says %s"):format(row.path, row.line, row.instance, c.target.name, row.target), 0)
  end
  local key = naming.functional_key(c)
  if key ~= row.key then
    error(("%s:%d: instance '%s' has key %s, the row says %s"):format(row.path, row.line, row.instance, key, row.key), 0)
  end
  if c.functional.dir ~= "fwd" and c.functional.dir ~= "bwd" then
    error(("%s:%d: only forward and backward instances are tuned, not %s"):format(row.path, row.line, c.functional.dir), 0)
  end
  return c
end

-- Order of the C array: (target, key, seq, bh, sm_count, median, instance); the runtime binary-searches
-- (target, key) and walks that range.
function M.sorted(rows)
  local l = { table.unpack(rows) }
  table.sort(l, function(a, b)
    if a.target ~= b.target then return a.target < b.target end
    if a.key ~= b.key then return a.key < b.key end
    if a.seq ~= b.seq then return a.seq < b.seq end
    if a.bh ~= b.bh then return a.bh < b.bh end
    if a.sm_count ~= b.sm_count then return a.sm_count > b.sm_count end
    if a.median_us ~= b.median_us then return a.median_us < b.median_us end
    return a.instance < b.instance
  end)
  return l
end

return M
