-- Enumeration: product -> predicates -> dedupe -> order/shadow check.
-- Bundles (one per delta mode) are the unit of the product: each yields its forward, delta prep and backward
-- instances, so forwards and backwards shared by several modes collapse in the dedupe step.
local schema = require("fa8.schema")
local naming = require("fa8.naming")
local constraints = require("fa8.constraints")
local profiles = require("fa8.profiles")
local bundle = require("fa8.bundle")
local targets = require("fa8.targets")
local tuned = require("fa8.tuned")

local M = {}
local note_mirror, tiles_for   -- per-run helpers defined in M.run

local LAYOUT_RANK = { mha = 0, mqa = 1, mla = 2, gqa = 3 }   -- most specialized first
local SCALE_RANK = { tensor = 0, block = 1 }
local DIR_RANK = { quant = 0, fwd = 1, delta = 2, bwd = 3 }

-- Parse "--hdim 128,256,192x128" into geometry pairs; raises naming the bad entry.
function M.parse_hdims(s)
  local out = {}
  for item in tostring(s):gmatch("[^,]+") do
    local qk, v = item:match("^%s*(%d+)x(%d+)%s*$")
    if not qk then qk = item:match("^%s*(%d+)%s*$"); v = qk end
    if not qk then error(("--hdim '%s': expected N or QKxV (e.g. 128 or 192x128)"):format(item), 0) end
    qk, v = tonumber(qk), tonumber(v)
    for _, d in ipairs({ qk, v }) do
      if d % 16 ~= 0 or d < 16 or d > 256 then
        error(("--hdim %s: head dim %d is not supported (multiples of 16 up to 256; shipped: 64, 96, 128, 192, 256, 192x128)")
          :format(item, d), 0)
      end
    end
    out[#out + 1] = { qk, v }
  end
  if #out == 0 then error("--hdim: empty list", 0) end
  return out
end

local function set_of(list)
  if not list then return nil end
  local s = {}
  for _, v in ipairs(list) do s[v] = true end
  return s
end

local function cfg(dir, target, functional, tile, pipeline)
  functional.dir = dir
  return {
    functional = functional,
    -- qheads shapes the backward's grid only: a backward tile's delta prep is the one of its tile without it
    tuning = { block_m = tile[1], block_n = tile[2], warps = tile[3], stages = tile[4], pipeline = pipeline,
               vperm = tile.vperm == true, unitskip = tile.unitskip == true,
               qheads = dir == "bwd" and tile.qheads or 0 },
    target = target,
  }
end

-- layout_j covers layout_i when every problem i accepts is accepted by j.
local function layout_covers(j, i)
  if j == i then return true end
  return j == "gqa" and (i == "mha" or i == "mqa")
end

function M.covers(a, b)
  local fa, fb = a.functional, b.functional
  if a.target ~= b.target or fa.dir ~= fb.dir then return false end
  for _, k in ipairs({ "fmt", "fmt_grad", "hdim", "hdim_qk", "hdim_v", "causal", "variant", "delta", "intype" }) do
    if fa[k] ~= fb[k] then return false end
  end
  for _, k in ipairs(schema.tuning_fields) do
    if a.tuning[k] ~= b.tuning[k] then return false end
  end
  if fa.layout and not layout_covers(fa.layout, fb.layout) then return false end
  if not (fa.scale == fb.scale or fa.scale == "block") then return false end
  return true
end

-- Raises if an instance can never be selected because an earlier, more permissive one shadows it.
function M.shadow_check(list)
  for i = 2, #list do
    for j = 1, i - 1 do
      if M.covers(list[j], list[i]) then
        error(("instance %s can never be selected: the earlier, more permissive %s shadows it")
          :format(list[i].name, list[j].name), 0)
      end
    end
  end
end

-- position of the config's pipeline in its target's preference order (wgmma before mma on sm_90a)
local function pipeline_rank(c)
  for i, p in ipairs(c.target.pipelines) do if p == c.tuning.pipeline then return i end end
  return 9
end

-- position of the config's tile in the shipping (default) profile's list for its pipeline, direction and head dim:
-- a build with several tiles per key (the tuning profile) then dispatches, untuned, the tile the shipping build
-- would, so `fa8 tune` reports its gain against the real default and not against the smallest tile. It ranks
-- before the pipeline: a tuning-only pipeline (the wgmma backward) never becomes a tuning build's default.
local function default_tile_rank(c)
  local f, t = c.functional, c.tuning
  local hd = math.max(f.hdim_qk or f.hdim or 0, f.hdim_v or f.hdim or 0)
  for i, d in ipairs(profiles.tiles("default", t.pipeline, f.dir, hd)) do
    if d[1] == t.block_m and d[2] == t.block_n and d[3] == t.warps and d[4] == t.stages and (d.vperm == true) == t.vperm
        and (d.unitskip == true) == t.unitskip and (d.qheads or 0) == t.qheads then
      return i
    end
  end
  return 99
end

local function sort_key(c)
  local f, t = c.functional, c.tuning
  return table.concat({
    c.target.name, DIR_RANK[f.dir], f.fmt, f.fmt_grad or "", ("%03d"):format(f.hdim_qk or f.hdim),
    ("%03d"):format(f.hdim_v or f.hdim), f.causal and 1 or 0, f.variant or "", f.delta or "", f.intype or "",
    LAYOUT_RANK[f.layout] or 0, SCALE_RANK[f.scale], ("%02d"):format(default_tile_rank(c)), pipeline_rank(c),
    ("%04d%04d%03d%02d"):format(t.block_m, t.block_n, t.warps, t.stages), t.vperm and 1 or 0, t.unitskip and 1 or 0,
    ("%02d"):format(t.qheads), t.pipeline,
  }, "|")
end

-- opts: profile, targets (list of names), hdims (list of pairs), layouts, deltas, kernels (glob), registry,
--       pipelines (list), mirror_cpu (bool), no_test_formats (bool: leave out the test-only f32 instances),
--       tuned_rows (from fa8.tuned)
function M.run(opts)
  local reg = opts.registry or targets.registry()
  local pname = opts.profile or "default"
  local prof = profiles.get(pname)
  local tnames = opts.targets or { "cpu" }
  local geoms = opts.hdims or prof.geometries
  local want_layouts, want_deltas = set_of(opts.layouts), set_of(opts.deltas)
  local result = { instances = {}, bundles = {}, rejected = {}, profile = pname }
  local seen, seen_rej, seen_bundle = {}, {}, {}

  local function add(c)
    local ok, why = pcall(schema.check, c)
    if not ok then error("internal: generated an invalid config: " .. why, 0) end
    c.name = naming.encode(c)
    if seen[c.name] then return seen[c.name] end            -- dedupe
    local pass, reason = constraints.check(c)
    if not pass then
      if not seen_rej[c.name] then
        seen_rej[c.name] = true
        result.rejected[#result.rejected + 1] = { name = c.name, reason = reason }
      end
      return nil
    end
    c.resources = constraints.resources(c)
    c.key = naming.functional_key(c)
    seen[c.name] = c
    result.instances[#result.instances + 1] = c
    return c
  end

  -- CPU mirrors: with opts.mirror_cpu the cpu target also gets every (BLOCK_M, BLOCK_N) the GPU targets use,
  -- so each GPU instance has a CPU twin with the same tiling (tiles change P and dS quantization) to be
  -- checked against. GPU targets are therefore enumerated first.
  local mirror = { fwd = {}, bwd = {} }
  note_mirror = function(dir, gkey, c, paired_fwd)
    if c.target.backend == "cpu" then return end
    local l = mirror[dir][gkey] or {}
    mirror[dir][gkey] = l
    local k = c.tuning.block_m .. "x" .. c.tuning.block_n
    if not l[k] then
      l[k] = true
      l[#l + 1] = { c.tuning.block_m, c.tuning.block_n, 1, 1, mirror = true,
                    fwd_tile = paired_fwd and (paired_fwd.tuning.block_m .. "x" .. paired_fwd.tuning.block_n) or nil }
    end
  end
  tiles_for = function(pn, pipe, dir, qk, v, tg, gkey)
    local list = profiles.tiles(pn, pipe, dir, math.max(qk, v))
    if opts.mirror_cpu and tg.backend == "cpu" then
      list = { table.unpack(list) }
      for _, t in ipairs(mirror[dir][gkey] or {}) do list[#list + 1] = t end
    end
    return list
  end
  local ordered = {}
  for _, tname in ipairs(tnames) do if targets.lookup(reg, tname).backend ~= "cpu" then ordered[#ordered + 1] = tname end end
  for _, tname in ipairs(tnames) do if targets.lookup(reg, tname).backend == "cpu" then ordered[#ordered + 1] = tname end end
  local want_pipes = set_of(opts.pipelines)

  for _, tname in ipairs(ordered) do
    local tg = targets.lookup(reg, tname)
    local qkv_fmts, grad_fmts = profiles.formats(prof, tg)
    local fmt_list = {}
    for _, f in ipairs(qkv_fmts) do fmt_list[#fmt_list + 1] = { f, grad_fmts } end
    if prof.test_f32 and tg.backend == "cpu" and not opts.no_test_formats then fmt_list[#fmt_list + 1] = { "f32", { "f32" }, test = true } end
    -- the CPU also runs AMD's FNUZ formats (its P convention included) for d64 and d128, so the numerics the
    -- HIP kernels must follow are tested here
    if prof.test_fnuz and tg.backend == "cpu" and not opts.no_test_formats then
      fmt_list[#fmt_list + 1] = { "e4m3fnuz", { "e4m3fnuz", "e5m2fnuz" }, fnuz = true }
    end
    for _, pipe in ipairs(tg.pipelines) do
      if not want_pipes or want_pipes[pipe] then
      -- quantizer: one per (format, head dim, input type)
      local dims, dseen = {}, {}
      for _, g in ipairs(geoms) do
        for _, d in ipairs(g) do if not dseen[d] then dseen[d] = true; dims[#dims + 1] = d end end
      end
      table.sort(dims)
      local qfmts, qseen = {}, {}
      for _, fl in ipairs(fmt_list) do
        if not fl.test then
          for _, f in ipairs({ fl[1], table.unpack(fl[2]) }) do
            if not qseen[f] then qseen[f] = true; qfmts[#qfmts + 1] = f end
          end
        end
      end
      -- the quantizer uses no matrix unit: one per target, under its preferred pipeline among those enabled
      local first_pipe
      for _, pp in ipairs(tg.pipelines) do
        if not first_pipe and (not want_pipes or want_pipes[pp]) then first_pipe = pp end
      end
      for _, f in ipairs(pipe == first_pipe and qfmts or {}) do
        for _, d in ipairs(dims) do
          -- the CPU's FNUZ test instances cover d64 and d128 only
          if tg.backend == "cpu" and f:match("fnuz$") and d ~= 64 and d ~= 128 then goto next_dim end
          for _, it in ipairs(prof.intypes) do
            for _, sc in ipairs(prof.scales) do
              for _, tile in ipairs(profiles.tiles(pname, pipe, "quant", d)) do
                add(cfg("quant", tg, { fmt = f, hdim = d, intype = it, scale = sc }, tile, pipe))
              end
            end
          end
          ::next_dim::
        end
      end
      -- attention bundles
      for _, g in ipairs(geoms) do
        local qk, v = g[1], g[2]
        for _, fl in ipairs(fmt_list) do
          local fmt, grads = fl[1], fl[2]
          local geo_ok = (fl.test and qk == 64 and v == 64) or (fl.fnuz and qk == v and (qk == 64 or qk == 128))
            or not (fl.test or fl.fnuz)
          if geo_ok then
            local layouts = qk ~= v and { "mla" } or prof.layouts
            for _, layout in ipairs(layouts) do
              if not want_layouts or want_layouts[layout] then
                for _, causal in ipairs(prof.causal) do
                  for _, sc in ipairs(prof.scales) do
                    local base = { fmt = fmt, hdim_qk = qk, hdim_v = v, layout = layout, causal = causal, scale = sc }
                    local gkey = qk .. "x" .. v
                    -- forwards: both variants; first_fit profiles keep the first tile that fits (mirrors extra)
                    local fwd_of, fwd_by_tile = {}, {}
                    for _, variant in ipairs({ "std", "split" }) do
                      local have = false
                      for _, tile in ipairs(tiles_for(pname, pipe, "fwd", qk, v, tg, gkey)) do
                        if not (have and prof.first_fit and not tile.mirror) then
                          local f = schema.copy(base); f.variant = variant
                          local c = add(cfg("fwd", tg, f, tile, pipe))
                          if c then
                            have = have or not tile.mirror
                            fwd_of[variant] = fwd_of[variant] or c
                            fwd_by_tile[variant .. c.tuning.block_m .. "x" .. c.tuning.block_n] = c
                            note_mirror("fwd", gkey, c)
                          end
                        end
                      end
                    end
                    for _, gf in ipairs(grads) do
                      local have = false
                      for _, tile in ipairs(tiles_for(pname, pipe, "bwd", qk, v, tg, gkey)) do
                        local bf = schema.copy(base); bf.fmt_grad = gf
                        local bwd = not (have and prof.first_fit and not tile.mirror) and add(cfg("bwd", tg, bf, tile, pipe)) or nil
                        if bwd then
                          have = have or not tile.mirror
                          note_mirror("bwd", gkey, bwd, fwd_of.std)
                        end
                        for _, mode in ipairs(prof.deltas) do
                          if bwd and (not want_deltas or want_deltas[mode]) then
                            local df = schema.copy(bf); df.delta = mode
                            local delta = add(cfg("delta", tg, df, tile, pipe))
                            local variant = mode == "split" and "split" or "std"
                            local fwd = fwd_of[variant]
                            if tile.fwd_tile then   -- a CPU twin: the forward tile of the GPU bundle it mirrors
                              fwd = fwd_by_tile[variant .. tile.fwd_tile] or fwd
                            end
                            if delta and fwd then
                              local bd = bundle.make(fwd, delta, bwd)
                              if not seen_bundle[bd.name] then   -- a CPU tile mirrored from a GPU tile it already has
                                seen_bundle[bd.name] = true
                                result.bundles[#result.bundles + 1] = bd
                              end
                            end
                          end
                        end
                      end
                    end
                  end
                end
              end
            end
          end
        end
      end
      end
    end
  end

  -- Instances the tuned tables name (often from the tuning profile) are built too, with their parts: a
  -- backward gets its delta preps and bundles, a GPU instance its CPU twin. Rows for targets or head
  -- geometries this build does not cover are left out; a row naming what cannot be built is an error.
  result.tuned = {}
  if opts.tuned_rows then
    local built_targets, geo_built = set_of(tnames), {}
    for _, c in ipairs(result.instances) do
      local f = c.functional
      if f.dir ~= "quant" then geo_built[c.target.name .. ":" .. f.hdim_qk .. "x" .. f.hdim_v] = true end
    end
    local function bundle_fwd_for(c, mode)
      local key = naming.functional_key(c)
      for _, b in ipairs(result.bundles) do
        if b.bwd.target == c.target and b.mode == mode and naming.functional_key(b.bwd) == key then return b.fwd end
      end
    end
    local add_with_parts
    add_with_parts = function(c, row)
      local ok, why = constraints.check(c)
      if not ok then
        error(("%s:%d: instance '%s' cannot be built for %s: %s"):format(row.path, row.line, naming.encode(c), c.target.name, why), 0)
      end
      add(c)
      if c.functional.dir == "bwd" then
        for _, mode in ipairs(prof.deltas) do
          local df = schema.copy(c.functional); df.delta = mode
          local t = c.tuning
          local d = add(cfg("delta", c.target, df, { t.block_m, t.block_n, t.warps, t.stages }, t.pipeline))
          local fwd = bundle_fwd_for(c, mode)
          if not d or not fwd then
            error(("%s:%d: no delta prep or forward for backward '%s' (mode %s) in this build"):format(row.path, row.line, c.name, mode), 0)
          end
          local bd = bundle.make(fwd, d, c)
          if not seen_bundle[bd.name] then seen_bundle[bd.name] = true; result.bundles[#result.bundles + 1] = bd end
        end
      end
      if opts.mirror_cpu and c.target.backend ~= "cpu" and built_targets.cpu then
        local cpu = targets.lookup(reg, "cpu")
        local tw = cfg(c.functional.dir, cpu, schema.copy(c.functional), { c.tuning.block_m, c.tuning.block_n, 1, 1 }, "scalar")
        add_with_parts(tw, row)
      end
    end
    for _, row in ipairs(opts.tuned_rows) do
      if built_targets[row.target] then
        local c = tuned.config_of(row, reg)
        -- rows for geometries or pipelines this build leaves out are left out too
        if geo_built[row.target .. ":" .. c.functional.hdim_qk .. "x" .. c.functional.hdim_v]
            and (not want_pipes or want_pipes[c.tuning.pipeline]) then
          add_with_parts(c, row)
          result.tuned[#result.tuned + 1] = row
        end
      end
    end
  end

  local emitted = #result.instances      -- before the name filter
  -- filters that act on names
  if opts.kernels then
    local keep, kept = {}, {}
    for _, c in ipairs(result.instances) do
      if naming.glob_matches(opts.kernels, c.name) then keep[#keep + 1] = c; kept[c.name] = true end
    end
    result.instances = keep
    local bkeep = {}
    for _, b in ipairs(result.bundles) do
      if kept[b.fwd.name] and kept[b.delta.name] and kept[b.bwd.name] then bkeep[#bkeep + 1] = b end
    end
    result.bundles = bkeep
    -- a tuned row can only dispatch to an instance the build keeps (the registry points at it)
    local tkeep = {}
    for _, row in ipairs(result.tuned) do if kept[row.instance] then tkeep[#tkeep + 1] = row end end
    result.tuned = tkeep
  end
  if #result.instances == 0 then
    -- when the constraints pruned everything, say why (`fa8 list --rejected` cannot: it fails here too)
    local why = ""
    if emitted == 0 and #result.rejected > 0 then
      local r = result.rejected[1]
      why = ("; %d config(s) rejected by the constraints, e.g. %s: %s"):format(#result.rejected, r.name, r.reason)
    end
    error(("no instance matches (profile %s, target %s%s%s)%s"):format(pname, table.concat(tnames, ","),
      opts.hdim_text and (", hdim " .. opts.hdim_text) or "", opts.kernels and (", kernels " .. opts.kernels) or "",
      why), 0)
  end
  -- each key once (it walks the default profile's tile list), not once per comparison
  local keys = {}
  for _, c in ipairs(result.instances) do keys[c] = sort_key(c) end
  table.sort(result.instances, function(a, b) return keys[a] < keys[b] end)
  table.sort(result.bundles, function(a, b) return a.name < b.name end)
  M.shadow_check(result.instances)
  return result
end

return M
