-- Canonical instance names: decodable, C-identifier safe, one per config. The name is the file name, the
-- symbol prefix, the tuned-table key and the test name at once.
--
--   fa8_<dir>_<tag>_<fmt>[x<fmt_grad>]_<geometry>_<functional flags>_m<BM>n<BN>_w<W>s<S>[_vperm][_unitskip][_qh<N>][_<pipeline>]
--
--   quant : geometry d<D>,          flags <intype>[_pt]
--   fwd   : geometry d<QK>v<V>,     flags <layout>_<causal|full>[_split][_pt]
--   delta : geometry d<QK>v<V>,     flags <layout>_<causal|full>_<stale|dohat|matched|split>[_pt]
--   bwd   : geometry d<QK>v<V>,     flags <layout>_<causal|full>[_pt]
-- The pipeline token is omitted when it is the target's first (preferred) pipeline; vperm and unitskip (schema.lua)
-- appear only when on.
local schema = require("fa8.schema")
local targets = require("fa8.targets")

local M = {}

local function fmt_token(f)
  if f.fmt_grad and f.fmt_grad ~= f.fmt then return f.fmt .. "x" .. f.fmt_grad end
  return f.fmt
end

function M.encode(cfg)
  local f, t, tg = cfg.functional, cfg.tuning, cfg.target
  local parts = { "fa8", f.dir, tg.tag, fmt_token(f) }
  if f.dir == "quant" then
    parts[#parts + 1] = ("d%d"):format(f.hdim)
    parts[#parts + 1] = f.intype
  else
    parts[#parts + 1] = ("d%dv%d"):format(f.hdim_qk, f.hdim_v)
    parts[#parts + 1] = f.layout
    parts[#parts + 1] = f.causal and "causal" or "full"
    if f.dir == "fwd" and f.variant == "split" then parts[#parts + 1] = "split" end
    if f.dir == "delta" then parts[#parts + 1] = f.delta end
  end
  if f.scale == "tensor" then parts[#parts + 1] = "pt" end
  parts[#parts + 1] = ("m%dn%d"):format(t.block_m, t.block_n)
  parts[#parts + 1] = ("w%ds%d"):format(t.warps, t.stages)
  if t.vperm then parts[#parts + 1] = "vperm" end
  if t.unitskip then parts[#parts + 1] = "unitskip" end
  if (t.qheads or 0) > 0 then parts[#parts + 1] = ("qh%d"):format(t.qheads) end
  if t.pipeline ~= tg.pipelines[1] then parts[#parts + 1] = t.pipeline end
  return table.concat(parts, "_")
end

local function bad(name, why) error(("cannot decode instance name '%s': %s"):format(name, why), 0) end

local function is_fmt(s) return schema.enum_index("fmt", s) ~= nil end

-- name -> config (functional, tuning, target). `reg` is a target registry (targets.registry()).
function M.decode(name, reg)
  if type(name) ~= "string" or not name:match("^[a-z0-9_]+$") then bad(tostring(name), "not a lower-case identifier") end
  local tok = {}
  for s in name:gmatch("[^_]+") do tok[#tok + 1] = s end
  local i = 1
  local function take(what)
    local s = tok[i]
    if s == nil then bad(name, "missing " .. what) end
    i = i + 1
    return s
  end
  local function peek() return tok[i] end
  if take("prefix") ~= "fa8" then bad(name, "does not start with fa8_") end
  local f = {}
  f.dir = take("direction")
  if schema.enum_index("dir", f.dir) == nil then bad(name, ("unknown direction '%s'"):format(f.dir)) end
  local tag = take("target")
  local target
  for _, tgt in ipairs(reg.list) do if tgt.tag == tag then target = tgt end end
  if not target then bad(name, ("unknown target tag '%s'"):format(tag)) end
  local ft = take("format")
  local a, b = ft:match("^([a-z0-9]+)x([a-z0-9]+)$")
  if a and is_fmt(a) and is_fmt(b) then f.fmt, f.fmt_grad = a, b
  elseif is_fmt(ft) then f.fmt = ft
  else bad(name, ("unknown format token '%s'"):format(ft)) end
  if f.dir == "delta" or f.dir == "bwd" then f.fmt_grad = f.fmt_grad or f.fmt
  elseif f.fmt_grad then bad(name, "a gradient format only belongs to delta and bwd names") end
  local geo = take("geometry")
  if f.dir == "quant" then
    local d = geo:match("^d(%d+)$")
    if not d then bad(name, ("geometry '%s' is not d<D>"):format(geo)) end
    f.hdim = tonumber(d)
    f.intype = take("input type")
    if schema.enum_index("intype", f.intype) == nil then bad(name, ("unknown input type '%s'"):format(f.intype)) end
  else
    local qk, v = geo:match("^d(%d+)v(%d+)$")
    if not qk then bad(name, ("geometry '%s' is not d<QK>v<V>"):format(geo)) end
    f.hdim_qk, f.hdim_v = tonumber(qk), tonumber(v)
    f.layout = take("layout")
    if schema.enum_index("layout", f.layout) == nil then bad(name, ("unknown layout '%s'"):format(f.layout)) end
    local mask = take("mask")
    if mask ~= "causal" and mask ~= "full" then bad(name, ("mask '%s' is not causal or full"):format(mask)) end
    f.causal = mask == "causal"
    if f.dir == "fwd" then
      f.variant = "std"
      if peek() == "split" then f.variant = "split"; i = i + 1 end
    elseif f.dir == "delta" then
      f.delta = take("delta mode")
      if schema.enum_index("delta", f.delta) == nil then bad(name, ("unknown delta mode '%s'"):format(f.delta)) end
    end
  end
  f.scale = "block"
  if peek() == "pt" then f.scale = "tensor"; i = i + 1 end
  local t = {}
  local bm, bn = take("tile"):match("^m(%d+)n(%d+)$")
  if not bm then bad(name, ("tile token '%s' is not m<BM>n<BN>"):format(tok[i - 1])) end
  local w, s = take("warps/stages"):match("^w(%d+)s(%d+)$")
  if not w then bad(name, ("token '%s' is not w<W>s<S>"):format(tok[i - 1])) end
  t.block_m, t.block_n, t.warps, t.stages = tonumber(bm), tonumber(bn), tonumber(w), tonumber(s)
  t.vperm = peek() == "vperm"
  if t.vperm then i = i + 1 end
  t.unitskip = peek() == "unitskip"
  if t.unitskip then i = i + 1 end
  t.qheads = 0
  local qh = peek() and peek():match("^qh(%d+)$")
  if qh then
    t.qheads = math.tointeger(tonumber(qh))
    if t.qheads == 0 then bad(name, "qh0 (the whole group) is never spelled out") end
    i = i + 1
  end
  t.pipeline = target.pipelines[1]
  if peek() then
    t.pipeline = take("pipeline")
    if t.pipeline == target.pipelines[1] then bad(name, "the default pipeline is never spelled out") end
    if schema.enum_index("pipeline", t.pipeline) == nil then
      bad(name, ("unexpected token '%s' after w<W>s<S> (only vperm, unitskip, qh<N> and a pipeline may follow: %s)"):format(t.pipeline,
        table.concat(schema.enums.pipeline.values, ", ")))
    end
    -- a pipeline the target lacks names no instance (encode would print it, enumeration never makes it)
    local known = false
    for _, p in ipairs(target.pipelines) do if p == t.pipeline then known = true end end
    if not known then
      bad(name, ("pipeline '%s' is not available on target %s (pipelines: %s)"):format(t.pipeline, target.name,
        table.concat(target.pipelines, ", ")))
    end
  end
  if peek() then bad(name, ("unexpected trailing token '%s'"):format(peek())) end
  local cfg = { functional = f, tuning = t, target = target }
  schema.check(cfg, name)
  if M.encode(cfg) ~= name then bad(name, "not canonical (re-encodes as " .. M.encode(cfg) .. ")") end
  return cfg
end

-- Glob match for --kernels: '*' any run, '?' one character; comma-separated alternatives.
function M.glob_matches(patterns, name)
  for pat in tostring(patterns):gmatch("[^,]+") do
    local lp = "^" .. pat:gsub("[%^%$%(%)%%%.%[%]%+%-]", "%%%0"):gsub("%*", ".*"):gsub("%?", ".") .. "$"
    if name:match(lp) then return true end
  end
  return false
end

-- A short functional key (no target, no tuning): what the tuned table and dispatcher group by.
function M.functional_key(cfg)
  local name = M.encode(cfg)
  local tag = "_" .. cfg.target.tag .. "_"
  local key = name:gsub(tag, "_", 1):gsub("_m%d+n%d+_w%d+s%d+.*$", "")
  return key
end

return M
