-- Named profiles: which functional axes and which tiles get generated.
--   minimal : one tile per (format, geometry) for CI, few geometries
--   default : the shipping set, every head geometry
--   tuning  : the autotuner's candidate set (several tiles per key; pruned by constraints before building)
-- Tiles are {block_m, block_n, warps, stages, dmin = , dmax = , vperm = , unitskip = , qheads = } per (pipeline, direction);
-- dmin/dmax restrict a tile to head dims (the larger of qk and v) in that range, vperm, unitskip and qheads are the tuning
-- fields of those names (schema.lua).
-- Profiles with `first_fit` keep, per functional key, only the first tile that passes every constraint (one
-- instance per key: the shipping set); `tuning` keeps all.
local schema = require("fa8.schema")

local M = {}

local ALL_DELTAS = { "stale", "dohat", "matched", "split" }

-- Tile lists keyed by pipeline, then direction. `cpu` uses the scalar pipeline.
local tiles = {
  default = {
    scalar = { quant = { { 64, 64, 1, 1 } }, fwd = { { 64, 64, 1, 1 } }, bwd = { { 64, 64, 1, 1 } } },
    -- portable mma.sync: 16 rows per warp; large head dims shrink the key tile (registers) or both tiles (smem);
    -- where O's columns still do not fit one warp's registers (d256 on sm_90a: constraints' register model), two
    -- warps share each 16 rows (64 x 32 x 8 warps)
    mma    = { quant = { { 64, 64, 4, 1 } }, fwd = { { 64, 64, 4, 2, dmax = 128 }, { 64, 32, 4, 2, dmin = 129 },
                                                 { 64, 32, 8, 2, dmin = 129 } },
               bwd = { { 64, 64, 8, 1, dmax = 128 }, { 64, 32, 4, 1, dmax = 128 }, { 64, 32, 8, 1, dmin = 129 },
                      { 32, 32, 4, 1, dmin = 129 } } },
    -- Hopper: a producer warpgroup + 2 consumer warpgroups of 64 rows. Above d128 the forward keeps the 128-key
    -- tile with a third stage (each ping-pong warpgroup holds two stages; d256 fwd 128x128x3 4.26 ms against
    -- 128x64x2 6.89, tune/reports/2026-11-30-h200-fwd-tiles.md); 128x64 is the fallback. The wgmma backward: up to d128 each consumer warpgroup owns
    -- 64 keys (dK and dV of them in registers); above, one 64-key tile per CTA whose head dim the two consumer
    -- warpgroups split (bwd_wgmma_wide: 64 keys x d/2 of dK and of dV each)
    -- The shipping tiles leave vperm and unitskip (schema.lua) off: the tuned table turns them on where timed faster
    -- (vperm up to d128; d256 ran 8-10 % slower with it), so a default is always a tile every sweep has timed.
    wgmma  = { quant = { { 64, 64, 4, 1 } }, fwd = { { 128, 128, 12, 2, dmax = 128 }, { 128, 128, 12, 3, dmin = 129 },
                                                  { 128, 64, 12, 2, dmin = 129 } },
               bwd = { { 64, 128, 12, 2, dmax = 128 }, { 64, 64, 12, 2, dmin = 129 } } },
    -- AMD CDNA (templates/hip): 32 rows per wave; first fit within 64 KiB of LDS and the register file, so
    -- large head dims take the smaller tiles (the forward's 64 x 32 keeps d > 128 out of scratch). The backward
    -- keeps its tiles resident up to d128 and d192x128 (one wave there: dK, dV fit 512 registers); d192 and
    -- d256 take two waves (half the dK/dV columns each) and stream the query side through LDS
    mfma   = { quant = { { 64, 64, 4, 1 } }, fwd = { { 128, 64, 4, 1, dmax = 128 }, { 64, 32, 2, 1, dmin = 129 } },
               bwd = { { 64, 64, 2, 1, dmax = 64 }, { 64, 32, 2, 1, dmax = 128 }, { 32, 32, 1, 1 },
                       { 64, 32, 2, 1, dmin = 129 } } },
  },
  tuning = {
    scalar = { quant = { { 64, 64, 1, 1 } },
               fwd = { { 64, 64, 1, 1 }, { 64, 128, 1, 1 }, { 128, 64, 1, 1 }, { 128, 128, 1, 1 } },
               bwd = { { 64, 64, 1, 1 }, { 64, 128, 1, 1 }, { 128, 64, 1, 1 }, { 128, 128, 1, 1 } } },
    mma    = { quant = { { 64, 64, 4, 1 } },
               fwd = { { 64, 64, 4, 2 }, { 64, 128, 4, 2 }, { 128, 64, 8, 2 }, { 128, 128, 8, 2 }, { 64, 32, 4, 2 },
                       { 64, 32, 8, 2 }, { 64, 64, 8, 2 } },
               bwd = { { 64, 64, 4, 1 }, { 64, 32, 8, 1 }, { 32, 32, 4, 1 }, { 64, 64, 8, 1 }, { 128, 64, 8, 1 } } },
    -- BLOCK_N 192 (fewer barrier turns, row reductions and O rescales per logit) fits at d <= 128; the register
    -- model prunes what does not fit setmaxnreg's budget (d256 x 192).
    wgmma  = { quant = { { 64, 64, 4, 1 } },
               fwd = { { 128, 128, 12, 2 }, { 128, 128, 12, 3 }, { 128, 192, 12, 2 }, { 128, 192, 12, 3 },
                       { 192, 128, 16, 2 }, { 192, 128, 16, 3 }, { 128, 64, 12, 3 }, { 128, 64, 12, 2 }, { 64, 128, 8, 2 } },
               -- (192x64, three consumer warpgroups at d128, ran 13 % behind 128x128x3 and lost at d64 too:
               -- tune/reports/2026-11-30-h200-fwd-m192n64.md)
               -- (3 ring stages for the d<=128 backward and its prep measured 2-3 % slower, 4 do not fit:
               -- tune/reports/2026-11-30-h200-bwd-stages.md)
               bwd = { { 64, 128, 12, 2 }, { 64, 64, 12, 2, dmin = 129 } } },
    mfma   = { quant = { { 64, 64, 4, 1 } },
               fwd = { { 128, 64, 4, 1 }, { 128, 128, 4, 1 }, { 64, 64, 2, 1 } },
               bwd = { { 64, 64, 2, 1 }, { 64, 32, 2, 1 }, { 32, 32, 1, 1 }, { 128, 64, 4, 1 } } },
  },
}
-- every wgmma forward tile of the tuning set also with vperm (schema.lua): whether the permute pass pays
-- depends on the head dim and variant; and each of those also with unitskip: the vote's effect on the schedule
-- is per tile and geometry. The tuner times every combination.
do
  local fwd = tiles.tuning.wgmma.fwd
  for _, field in ipairs({ "vperm", "unitskip" }) do
    for i = 1, #fwd do
      local t = fwd[i]
      local twin = { t[1], t[2], t[3], t[4], dmin = t.dmin, dmax = t.dmax, vperm = t.vperm, unitskip = t.unitskip }
      twin[field] = true
      fwd[#fwd + 1] = twin
    end
  end
end
-- every wgmma backward tile also with 4, 2 and 1 query heads per CTA (qheads, schema.lua; causal instances only, the
-- constraints drop the non-causal twins): whether the L2 reuse and the CTAs it buys outweigh its dK/dV atomics is
-- per geometry (one head a CTA wins where the grid is small: one kv head per GPU)
do
  local bwd = tiles.tuning.wgmma.bwd
  for i = 1, #bwd do
    local t = bwd[i]
    for _, q in ipairs({ 4, 2, 1 }) do
      bwd[#bwd + 1] = { t[1], t[2], t[3], t[4], dmin = t.dmin, dmax = t.dmax, qheads = q }
    end
  end
end
tiles.minimal = tiles.default

-- Functional axes per profile. Formats are per backend family: NVIDIA and the CPU speak OCP E4M3/E5M2,
-- CDNA3 the FNUZ variants. The CPU also gets test-only "f32" (quantization off) instances for d64.
local function fmts(backend)
  if backend == "hip" then return { "e4m3fnuz" }, { "e4m3fnuz", "e5m2fnuz" } end
  return { "e4m3" }, { "e4m3", "e5m2" }
end

M.defs = {
  minimal = {
    description = "CI: three geometries, one tile, E4M3 gradients",
    geometries = { { 64, 64 }, { 128, 128 }, { 192, 128 } },
    layouts = { "gqa" }, causal = { false, true }, deltas = ALL_DELTAS, grad_fmts = "first",
    intypes = { "f32", "bf16" }, scales = { "block" }, test_f32 = true, test_fnuz = true, first_fit = true,
  },
  default = {
    description = "shipping set: every head geometry, E4M3 and E5M2 gradients",
    geometries = schema.head_geometries,
    layouts = { "gqa" }, causal = { false, true }, deltas = ALL_DELTAS, grad_fmts = "all",
    intypes = { "f32", "bf16" }, scales = { "block" }, test_f32 = true, test_fnuz = true, first_fit = true,
  },
  tuning = {
    description = "autotuner candidates: several tiles per key, MHA-specialized instances too",
    geometries = schema.head_geometries,
    layouts = { "mha", "gqa" }, causal = { false, true }, deltas = ALL_DELTAS, grad_fmts = "first",
    -- f32 input too: `fa8 tune` checks every candidate on an f32 problem against the FP64 reference
    intypes = { "f32", "bf16" }, scales = { "block" }, test_f32 = false,
  },
}
M.order = { "minimal", "default", "tuning" }

function M.get(name)
  local p = M.defs[name]
  if not p then
    error(("unknown profile '%s' (known: %s)"):format(tostring(name), table.concat(M.order, ", ")), 0)
  end
  return p
end

function M.formats(profile, target)
  local qkv, grads = fmts(target.backend)
  if profile.grad_fmts == "first" then grads = { grads[1] } end
  return qkv, grads
end

-- Tiles for (profile, pipeline, direction) and a head geometry (the larger head dim decides dmin/dmax).
function M.tiles(profile_name, pipeline, dir, hdim)
  local set = tiles[profile_name][pipeline]
  if not set then return {} end
  if dir == "delta" then dir = "bwd" end      -- the delta prep shares the backward's tile (bundle rule)
  local out = {}
  for _, t in ipairs(set[dir] or {}) do
    if not hdim or ((t.dmin or 0) <= hdim and hdim <= (t.dmax or math.huge)) then out[#out + 1] = t end
  end
  return out
end

return M
