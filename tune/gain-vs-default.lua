-- Gain of a tuned table over the shipping build's choices, from the tuner's own cache (no GPU needed).
--   lua5.4 tune/gain-vs-default.lua TABLE.csv CACHE.tsv [CACHE.tsv ...] [OUT.md]
-- (several caches when a table's rows came from several sweeps: each row's times are looked up in all of them,
-- a later cache winning for the same candidate and problem)
-- For every row of TABLE (written by `fa8 tune`), the instance the `default` profile would dispatch for the row's
-- functional key (the first in dispatch order; for a backward, its bundle with matched delta) is looked up in CACHE
-- under the same problem, so both times come from the same sweep. A default choice the sweep did not time is
-- reported as such, never guessed.
local here = arg[0]:match("^(.*)/tune/[^/]*$") or "."
package.path = here .. "/gen/?.lua;" .. package.path
local enumerate = require("fa8.enumerate")
local tuned = require("fa8.tuned")

local USAGE = "usage: lua5.4 tune/gain-vs-default.lua TABLE.csv CACHE.tsv [CACHE.tsv ...] [OUT.md]\n"
local table_path, cache_paths, out_path = arg[1], {}, nil
for i = 2, #arg do
  if arg[i]:match("%.md$") and not out_path then out_path = arg[i]
  elseif arg[i]:match("%.tsv$") then cache_paths[#cache_paths + 1] = arg[i]
  else io.stderr:write(("gain-vs-default: argument '%s' is neither a cache (.tsv) nor the report (.md)\n"):format(arg[i]) .. USAGE); os.exit(2) end
end
if not table_path or #cache_paths == 0 then
  io.stderr:write(USAGE)
  os.exit(2)
end

local function slurp(p)
  local f, err = io.open(p, "r")
  if not f then io.stderr:write(("gain-vs-default: cannot read %s: %s\n"):format(p, err)); os.exit(1) end
  local s = f:read("a"); f:close(); return s
end

-- the table, through the generator's own parser (it checks every field and names file:line on errors)
local ok, rows = pcall(tuned.parse, table_path, slurp(table_path))
if not ok then io.stderr:write("gain-vs-default: " .. rows .. "\n"); os.exit(1) end

-- cache lines: target|sms|genhash|candidate|B1,H64,Hkv8,S2048,full,matched[,rowsN][,pow2] <TAB> status median p20 p80 err,
-- indexed once by what a table row names: target, SM count, candidate, S, B·H (B = 1: H), the causal flag, and the
-- sweep's quantization (`fa8 tune --scale-rows N` adds ",rowsN", power-of-two scales ",pow2"; 128-row amax scales,
-- the sweeps' quantization before power-of-two scales became the default, add nothing)
local cache, sweeps = {}, { [""] = true }
local function cache_key(target, sms, cand, s, bh, causal, rows)
  return table.concat({ target, tostring(sms), cand, tostring(s), tostring(bh), causal, rows }, "|")
end
for _, cache_path in ipairs(cache_paths) do
  for line in slurp(cache_path):gmatch("[^\n]+") do
    local key, status, med = line:match("^([^\t]+)\t([^\t]+)\t([^\t]+)")
    if key and status == "ok" then
      local target, sms, _, cand, prob = key:match("^([^|]+)|([^|]+)|([^|]+)|([^|]+)|(.+)$")
      local H, S, causal, quant = (prob or ""):match("^B1,H(%d+),Hkv%d+,S(%d+),(%a+),%a+,?(.*)$")
      local rows = quant or ""
      sweeps[rows] = true
      if H then cache[cache_key(target, tonumber(sms), cand, tonumber(S), tonumber(H), causal, rows)] = tonumber(med) end
    end
  end
end
local sweep_list = {}
for rows in pairs(sweeps) do sweep_list[#sweep_list + 1] = rows end
table.sort(sweep_list)   -- "" (128-row amax blocks) first
-- the sweep a table row came from: the one whose cache holds the row's own median for its instance (a table does
-- not say; a per-tensor sweep's rows may name tiles that only per-tensor scales can run)
local function sweep_of(r, s, bh, causal)
  for _, rows in ipairs(sweep_list) do
    local t = cache[cache_key(r.target, r.sm_count, r.instance, s, bh, causal, rows)]
    if t and math.abs(t - r.median_us) <= 1e-4 * r.median_us + 1e-3 then return rows end
  end
  return ""
end

-- a sweep's quantization in words: "rows0,pow2" -> "per-tensor scales, power-of-two"
local function sweep_name(rows)
  local words = {}
  for part in rows:gmatch("[^,]+") do
    words[#words + 1] = part == "rows0" and "per-tensor scales" or part == "pow2" and "power-of-two" or part
  end
  return table.concat(words, ", ")
end

-- what the shipping build dispatches per functional key, per target
local defaults = {}
local function default_for(target, key, hdims_text)
  local memo = target .. "|" .. hdims_text
  if not defaults[memo] then
    local d = {}
    local r = enumerate.run({ profile = "default", targets = { target }, hdims = enumerate.parse_hdims(hdims_text) })
    for _, c in ipairs(r.instances) do if not d[c.key] then d[c.key] = c end end
    for _, b in ipairs(r.bundles) do
      if b.delta.functional.delta == "matched" and d[b.bwd.key] == b.bwd then d["bundle:" .. b.bwd.key] = b end
    end
    defaults[memo] = d
  end
  local d = defaults[memo]
  if key:match("^fa8_bwd_") then return d["bundle:" .. key] and d["bundle:" .. key].name end
  return d[key] and d[key].name
end

local out = {
  "| key | bucket | shipping default | time (us) | tuned | time (us) | gain |",
  "|---|---|---|---|---|---|---|",
}
local n, sum_log = 0, 0.0
for _, r in ipairs(rows) do
  local qk, v = r.key:match("_d(%d+)v(%d+)_")
  local s, bh = r.bucket:match("^s(%d+)_bh(%d+)$")
  local causal = r.key:find("_causal", 1, true) and "causal" or "full"   -- also "_causal_split" keys
  local def = default_for(r.target, r.key, qk .. "x" .. v)
  local tuned_name = r.instance
  local rows = sweep_of(r, tonumber(s), tonumber(bh), causal)
  local t_def = def and cache[cache_key(r.target, r.sm_count, def, tonumber(s), tonumber(bh), causal, rows)]
  local gain = (t_def and r.median_us > 0) and (t_def / r.median_us - 1) * 100 or nil
  if gain and math.abs(gain) < 0.05 then gain = 0.0 end
  if gain then n = n + 1; sum_log = sum_log + math.log(t_def / r.median_us) end
  local bucket = rows == "" and r.bucket or ("%s (%s)"):format(r.bucket, sweep_name(rows))
  out[#out + 1] = ("| %s | %s | %s | %s | %s | %.1f | %s |"):format(r.key, bucket, def or "(none in the default build)",
    t_def and ("%.1f"):format(t_def) or "not timed in this sweep", tuned_name, r.median_us,
    gain and ("%+.1f%%"):format(gain) or "n/a")
end
out[#out + 1] = ""
out[#out + 1] = n > 0 and ("Geometric-mean speed-up over the shipping default across %d rows: %.1f%%."):format(n,
  (math.exp(sum_log / n) - 1) * 100) or "No row could be compared."
local text = table.concat(out, "\n") .. "\n"
if out_path then
  local f = assert(io.open(out_path, "w")); f:write(text); f:close()
else
  io.write(text)
end
