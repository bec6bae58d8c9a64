-- Constraints: derived resource figures plus named predicates. Each predicate returns ok, reason; the reason
-- names the figure and the limit so `fa8 list --rejected` and the tests can say why a config was pruned.
local targets = require("fa8.targets")

local M = {}

local FP8, F32 = 1, 4

-- The Hopper backward's two layouts, told apart by the tile: 64 keys per consumer warpgroup (BLOCK_N = 64 x
-- consumers, templates/cuda/bwd_wgmma) or one 64-key tile whose head dim the two consumer warpgroups split
-- (BLOCK_N 64 with two of them, templates/cuda/bwd_wgmma_wide: d > 128, where dK + dV of 64 keys do not fit a
-- warpgroup's registers). The matched delta prep (delta_wgmma) has one layout for both: 64 queries per consumer
-- warpgroup over all BLOCK_N keys of a tile.
function M.wgmma_bwd_hdim_split(t)
  return t.pipeline == "wgmma" and t.warps == 12 and t.block_n == 64
end

-- templates/cuda/bwd_wgmma_wide's shared memory, exactly as its Smem struct lays it out, with `ts` buffers of
-- Q^t / dO^t: K, V, K^t; the Q / dO ring (+ row data); Q^t, dO^t; P^t, dS^t, dS^; one dQ staging buffer per
-- warpgroup (64 x qk/2 FP32); dS maxima, diagnostics (5 doubles per query), V scales, mbarriers; + 1024 slack.
function M.wgmma_bwd_wide_smem(qk, v, bm, bn, st, ts)
  return bn * (2 * qk + v) + st * bm * (qk + v) + ts * bm * (qk + v) + 3 * bm * bn + bm * qk * F32
    + st * 5 * bm * F32 + 2 * 8 * F32 + 5 * bm * 8 + bn * F32 + 8 * (1 + 2 * st + 2 * ts) + 1024
end

-- The dynamic shared memory each CUDA template launches with, as its Smem struct lays it out (each template
-- static_asserts sizeof(Smem) against this figure, SMEM_MODEL, so the two cannot drift apart: a config this
-- model lets through always launches). PAD: fa8_cuda_tile.cuh's FA8_PAD, the portable path's row padding. The
-- wgmma kernels align their base to 1024 at run time (+ 1024) and round the struct to 16 bytes.
local PAD = 16
local function up(x, a) return (x + a - 1) // a * a end
-- The head dims a wgmma kernel computes with: the real ones rounded up to the 64-byte swizzle chunk (d96 runs as
-- d128; TMA zero-fills the boxes past the real columns, which add nothing to any product). generate.lua passes
-- them as DQKP / DVP.
function M.wgmma_hdims(f)
  local qk, v = f.hdim_qk or f.hdim, f.hdim_v or f.hdim
  return up(qk, 64), up(v, 64)
end
-- templates/cuda/fwd_wgmma's O staging (its O_TMA): one 64 x v BF16 tile per consumer warpgroup, two for split (O and
-- its remainder), written by stmatrix and stored by TMA; 0 where Q and the K / V ring leave no room (the kernel keeps
-- plain stores). Same-call H100 A/B at S=8K d128 (bench/NOTES.md, v30): forward -1.1 % stale, -1.7 % causal, split -3.2 %
-- and causal split -3.8 %.
function M.wgmma_fwd_o_staging(cfg)
  local f, t = cfg.functional, cfg.tuning
  local qk, v = M.wgmma_hdims(f)
  local bytes = (t.warps // 4 - 1) * (f.variant == "split" and 2 or 1) * 64 * v * 2
  local ring = t.block_m * qk + t.stages * t.block_n * (qk + v)
  return ring + bytes + 2048 <= cfg.target.smem_bytes and bytes or 0
end
local QROWS_BYTES = 5 * 64 * F32   -- fa8_cuda_sm90_bwd.cuh's fa8_qrows (64 queries)
-- templates/cuda/fwd (mma): warps per 16-row group (1, or 2 that split O's columns and both compute S)
function M.mma_fwd_vsplit(t) return math.max(t.warps // math.max(t.block_m // 16, 1), 1) end

-- Whether a target's compiler lowers the FP8 instructions of a pipeline to F16 ones (targets.lua fp8_lowered)
function M.lowers_fp8(tg, pipeline)
  for _, p in ipairs(tg.fp8_lowered or {}) do if p == pipeline then return true end end
  return false
end

function M.cuda_smem(cfg)
  local f, t = cfg.functional, cfg.tuning
  local bm, bn, st, w = t.block_m, t.block_n, t.stages, t.warps
  local qk, v = f.hdim_qk or f.hdim, f.hdim_v or f.hdim
  if t.pipeline == "mma" then
    if f.dir == "fwd" then   -- templates/cuda/fwd.cu.tpl: q, k ring, vt ring, p (16 rows a warp), ks ring, vs
      return up(bm * (qk + PAD) + st * bn * (qk + PAD) + st * v * (bn + PAD) + w * 16 * (bn + PAD), 4) + st * bn * F32 + st * F32
    elseif f.dir == "bwd" then   -- templates/cuda/bwd.cu.tpl: k, v, kt; q, dout, qt, dot; ds, dst, pt; row data
      return bn * (qk + PAD) + bn * (v + PAD) + qk * (bn + PAD) + bm * (qk + PAD) + bm * (v + PAD) + qk * (bm + PAD)
        + v * (bm + PAD) + bm * (bn + PAD) + 2 * bn * (bm + PAD) + (2 * bn + 4 * bm + w) * F32
    else   -- templates/cuda/delta.cu.tpl: q, dout of one pass (<= 64 rows), k, v, their scales
      local rows = math.min(bm, 64)
      return rows * (qk + PAD) + rows * (v + PAD) + bn * (qk + PAD) + bn * (v + PAD) + 2 * bn * F32
    end
  end
  local nc = w // 4 - 1
  qk, v = M.wgmma_hdims(f)
  local bytes
  if f.dir == "fwd" then   -- templates/cuda/fwd_wgmma.cu.tpl: q, k ring, vt ring, kvs, mbarriers, last[], q_empty
    -- + O's staging for the TMA store, or the 1 KB placeholder where it does not fit
    bytes = bm * qk + st * bn * (qk + v) + st * 4 * F32 + 8 + 3 * st * 8 + up(st * 4, 8) + 8
      + math.max(M.wgmma_fwd_o_staging(cfg), 1024)
  elseif f.dir == "bwd" then   -- templates/cuda/bwd_wgmma.cu.tpl
    local nq = qk // nc
    local dqs = nq % 32 == 0 and 2 * qk * bm * F32 or 2 * nc * F32   -- dQ staging slabs (or one float each)
    bytes = bn * (2 * qk + v) + st * 2 * bm * (qk + v) + bm * bn + dqs + st * QROWS_BYTES + 2 * 4 * nc * F32
      + 5 * bm * 8 + bn * F32 + 8 * (1 + 3 * st)
  else   -- templates/cuda/delta_wgmma.cu.tpl (matched): one 64-query tile of Q, dO per consumer warpgroup, the K / V
    -- ring, row data, scales
    bytes = nc * 64 * (qk + v) + st * bn * (qk + v) + nc * QROWS_BYTES + st * (bn + 4) * F32 + 8 * (1 + 2 * st)
  end
  return up(bytes, 16) + 1024
end

-- Its Q^t / dO^t ring depth: two buffers where they fit the target's shared memory (d192, MLA), else one (d256:
-- they are read last in a tile, so one buffer refills while the next tile's S^t / dP^t run).
function M.wgmma_bwd_wide_tstages(cfg)
  local f, t = cfg.functional, cfg.tuning
  local fits = M.wgmma_bwd_wide_smem(f.hdim_qk, f.hdim_v, t.block_m, t.block_n, t.stages, 2) <= cfg.target.smem_bytes
  return fits and 2 or 1
end

-- Resource model. GPU: shared memory per block and accumulator registers per thread; CPU: the per-thread
-- working set of one tile step (decoded FP32 tiles), which should stay within L2.
function M.resources(cfg)
  local f, t, tg = cfg.functional, cfg.tuning, cfg.target
  local bm, bn, st = t.block_m, t.block_n, t.stages
  local threads = t.warps * tg.warp_size
  local r = { smem_bytes = 0, regs = 0 }
  if tg.backend == "cpu" then
    local qk, v = f.hdim_qk or f.hdim, f.hdim_v or f.hdim
    if f.dir == "quant" then
      r.smem_bytes = bm * bn * (F32 + 2)
    else
      -- decoded Q, K, V (+dO) tiles and the S/P (+dP, dS) tiles, all FP32
      local tiles = bm * qk + bn * qk + bn * v + bm * v + bm * bn
      if f.dir == "bwd" or f.dir == "delta" then tiles = tiles + bm * v + 2 * bm * bn + bn * (qk + v) end
      r.smem_bytes = tiles * F32
    end
    r.regs = 0
    return r
  end
  if f.dir == "quant" then
    r.smem_bytes = bm * bn * FP8            -- transpose staging tile
    r.regs = 32
    return r
  end
  local qk, v = f.hdim_qk, f.hdim_v
  if t.pipeline == "mfma" then return M.mfma_resources(cfg) end
  if t.pipeline == "wgmma" then qk, v = M.wgmma_hdims(f) end
  -- shared memory: each CUDA kernel's own layout (the head-dim-split backward's in wgmma_bwd_wide_smem)
  if f.dir == "bwd" and M.wgmma_bwd_hdim_split(t) then
    r.smem_bytes = M.wgmma_bwd_wide_smem(qk, v, bm, bn, st, M.wgmma_bwd_wide_tstages(cfg))
  else
    r.smem_bytes = M.cuda_smem(cfg)
  end
  if f.dir == "fwd" then
    if t.pipeline == "wgmma" then
      -- templates/cuda/fwd_wgmma: a consumer thread holds O (v/2) and S (bn/2) in FP32, the P^ fragments
      -- (bn/8 words; split at v <= 128: R^ too) and ~24 registers of addressing and softmax state. Highest
      -- consumer register in the SASS (nvcc 13, 2026-11-30): d128 n128 R167, n192 R207; d64 n192 R195; d256
      -- n128 R231, n192 spills; split d128 n192 R236, d256 n128 R235 (one tile at a time: no R^ next to S).
      -- The budget is what setmaxnreg can give each consumer warpgroup after the producer keeps 24: 240 for up
      -- to two, 160 for three.
      local nc = t.warps // 4 - 1
      -- split (v <= 128) also holds R^ (R^ V^ joins P^ V^'s accumulator since 6178efa: no fresh one in S's place)
      local split = f.variant == "split" and v <= 128
      r.regs = v // 2 + bn // 2 + bn // 8 + 24 + (split and bn // 8 or 0)
      r.reg_budget = math.min(240, ((65536 - 128 * 24) // (math.max(nc, 1) * 128)) // 8 * 8)
      -- three consumer warpgroups run their GEMMs one after the other where the tile's registers do not fit side
      -- by side (the template's SERIAL_GEMMS, the same test): P^ (split: and R^, packed into S's registers) is
      -- dead before S takes its registers (d128 x 128 keys: R157 of 160, no spills, nvcc 13)
      if nc == 3 and r.regs > r.reg_budget then
        r.regs = v // 2 + bn // 2 + 24
        -- split with vperm and a wider Q K^t (MLA 192/128) spilled 8-16 bytes there (nvcc 13, 2026-12-02); at
        -- d <= 128 it fits since split's R^ joins P^'s accumulator (it spilled 80-96 bytes before that)
        if split and t.vperm and qk > 128 then r.regs = r.reg_budget + 8 end
      end
    else
      -- templates/cuda/fwd: a thread holds its warp's 16 rows of S (bn/2) and of O (v/2, or v/4 where two warps
      -- share a row group: M.mma_fwd_vsplit) in FP32, plus ~48 of fragments and state (split: R^'s codes). Where
      -- the compiler lowers FP8 mma.sync to F16 (target.fp8_lowered: sm_90a) it also holds unpacked operands:
      -- nvcc 13 used d64 138-149, d128 194-216, d192 210-254 registers there (half of O again + 64 over S and O),
      -- and spilled 260-544 bytes at d256 on one warp per 16 rows (two: 162-178 registers, no spills).
      local vs = M.mma_fwd_vsplit(t)
      local o, sp = bm * v / threads, bm * bn * vs / threads   -- O's and S's FP32 values a thread
      r.regs = math.ceil(o + sp) + 48
      if M.lowers_fp8(cfg.target, t.pipeline) then r.regs = math.ceil(1.5 * o + sp) + 64 end
      if f.variant == "split" then r.regs = r.regs + math.ceil(sp / 2) end
    end
  elseif t.pipeline == "wgmma" then
    -- templates/cuda/{bwd,delta}_wgmma: a consumer warpgroup owns 64 keys. The backward keeps dK (qk/2) and dV
    -- (v/2) per thread, then either S^t and dP^t (bm/2 each) or its dQ columns (qk/consumers/2) with the P^ and
    -- dS^ fragments (bm/4), plus ~40 of addressing; the matched prep only S and dP^ (bn/2 each) and row sums.
    local nc = math.max(t.warps // 4 - 1, 1)
    r.reg_budget = math.min(240, ((65536 - 128 * 24) // (nc * 128)) // 8 * 8)
    local split = M.wgmma_bwd_hdim_split(t)
    if f.dir == "bwd" and split then
      -- its producer keeps 40 registers (24 spilled there), so the consumers get 232
      r.reg_budget = 232
      -- bwd_wgmma_wide: dK (qk/4) and dV (v/4) per thread (a warpgroup holds 64 keys x half the head dim), then
      -- S^t and dP^t of 64 keys x 32 queries (bm/4 each) or its dQ columns (64 x qk/2: qk/4), + ~40 of
      -- addressing.
      r.regs = qk // 4 + v // 4 + math.max(bm // 2, qk // 4) + 40
    elseif f.dir == "bwd" then
      r.regs = qk // 2 + v // 2 + math.max(bm, qk // nc // 2 + bm // 4) + 40
    else
      -- the matched prep: S and dP^ of its 64 queries x BLOCK_N keys per warpgroup (bn/2 each), a few row sums
      r.regs = bn + 40
    end
  else
    -- delta (matched) and bwd (the portable path): accumulators per thread
    local consumers = t.pipeline == "wgmma" and (threads - 128) or threads
    local acc = f.dir == "bwd" and bn * (qk + v) or bm
    r.regs = math.ceil((acc + 2 * bm * bn) / math.max(consumers, 1)) + 48
  end
  return r
end

-- templates/hip (MFMA 32x32, wave64): LDS exactly as the kernels lay it out (FP8 tiles padded by 8 bytes
-- per row; the compiler refuses a kernel over the target's LDS, so the model must not be optimistic), and
-- VGPRs + AGPRs per lane (CDNA: 512 in all at one wave per SIMD): FP32 C fragments hold 16 values per lane
-- per 32 x 32 chunk, i.e. rows x cols / 64 per wave.
function M.mfma_resources(cfg)
  local f, t = cfg.functional, cfg.tuning
  local bm, bn, w = t.block_m, t.block_n, t.warps
  local P = 8
  local r = {}
  if f.dir == "quant" then return { smem_bytes = 64, regs = 32 } end
  local qk, v = f.hdim_qk, f.hdim_v
  if f.dir == "fwd" then
    -- q, k, v^t, P^ tiles + key scales; O (v/2) and S (bn/2) fragments, 16 rows x (index, q scale, max, sum,
    -- running max, rescale) and addressing; split keeps R^ and a copy of P^ codes (bn/32 x 16 bytes each)
    r.smem_bytes = bm * (qk + P) + bn * (qk + P) + v * (bn + P) + bm * (bn + P) + 4 * bn + 4
    r.regs = v // 2 + bn // 2 + 6 * 16 + 32 + (f.variant == "split" and bn // 4 or 0)
  elseif f.dir == "delta" then
    -- matched (the largest mode; the delta prep shares the backward's tile): q, dO, k, v tiles + scales;
    -- 16 rows x 6 row values, one S and one dP chunk
    r.smem_bytes = bm * (qk + P) + bm * (v + P) + bn * (qk + P) + bn * (v + P) + 8 * bn
    r.regs = 6 * 16 + 32 + 32
  else
    -- resident k, v, k^t; q, dO, q^t, dO^t per query tile; dS, dS^t, P^t; FP32 row values. Where that is over
    -- the target's LDS the kernel streams (r.stream): k, v stay and one region holds, phase by phase, q + dO,
    -- q^t + dO^t, then k^t + the waves' 32 x 32 FP32 dQ staging. Per lane: dK, dV fragments (bn x hdim/warps
    -- / 64 each), P and dP^ of the wave's 32 x SN tile (SN = bn / column waves)
    local wn = math.max(w // math.max(bm // 32, 1), 1)
    local keys, kt = bn * (qk + P) + bn * (v + P), qk * (bn + P)
    local rows, cols = bm * (qk + P) + bm * (v + P), qk * (bm + P) + v * (bm + P)
    local rest = bm * (bn + P) + 2 * bn * (bm + P) + 4 * (2 * bn + 4 * bm + w) + 16   -- + 16-byte alignment
    r.smem_bytes = keys + kt + rows + cols + rest
    if r.smem_bytes > cfg.target.smem_bytes then
      local up16 = function(x) return (x + 15) // 16 * 16 end
      r.stream = true
      r.smem_bytes = up16(keys) + math.max(rows, cols, up16(kt) + w * 32 * 32 * 4) + rest
    end
    -- (+ ~220 + qk/4 of addresses, row values and MFMA operands: calibrated on clang-19's counts, e.g. d192x128
    -- at 32x32 uses 497 of 512 and d192x192 spills to scratch; d256 at 64x32 x 2 waves uses 455-463 of 476)
    r.regs = bn * (qk // w) // 64 + bn * (v // w) // 64 + 2 * (bn // wn) + 220 + qk // 4
  end
  return r
end

-- Head dims a config uses. (Not `{ f.hdim, f.hdim_qk, f.hdim_v }`: ipairs stops at the first nil, which for
-- attention configs is f.hdim, so their head dims would never be checked.)
local function head_dims(f)
  if f.dir == "quant" then return { f.hdim } end
  return { f.hdim_qk, f.hdim_v }
end

-- Named predicates. Order matters only for the first reason reported.
-- A predicate for a boolean tuning field only the wgmma forward implements (named <field>_wgmma_fwd).
local function wgmma_fwd_option(field)
  return { name = field .. "_wgmma_fwd", fn = function(cfg)
      local t, f = cfg.tuning, cfg.functional
      if t[field] and (t.pipeline ~= "wgmma" or f.dir ~= "fwd") then
        return false, ("%s is a wgmma forward option, not for a %s %s instance"):format(field, t.pipeline, f.dir)
      end
      return true
    end }
end

M.predicates = {
  { name = "pipeline_on_target", fn = function(cfg)
      for _, p in ipairs(cfg.target.pipelines) do if p == cfg.tuning.pipeline then return true end end
      return false, ("pipeline %s is not available on %s"):format(cfg.tuning.pipeline, cfg.target.name)
    end },
  { name = "fmt_supported", fn = function(cfg)
      local f, tg = cfg.functional, cfg.target
      for _, fmt in ipairs({ f.fmt, f.fmt_grad }) do
        if not targets.supports_fmt(tg, fmt) then
          return false, ("format %s is not supported on %s"):format(fmt, tg.name)
        end
      end
      return true
    end },
  { name = "hdim_limits", fn = function(cfg)
      for _, d in ipairs(head_dims(cfg.functional)) do
        if d % 16 ~= 0 then return false, ("head dim %d is not a multiple of 16"):format(d) end
        if d > 256 then return false, ("head dim %d exceeds 256"):format(d) end
      end
      return true
    end },
  { name = "hdim_divides_mma_k", fn = function(cfg)
      local k = cfg.target.mma[cfg.tuning.pipeline].k
      for _, d in ipairs(head_dims(cfg.functional)) do
        if d % k ~= 0 then return false, ("head dim %d is not a multiple of the MMA K=%d"):format(d, k) end
      end
      return true
    end },
  { name = "tile_divides_mma", fn = function(cfg)
      local t, shape = cfg.tuning, cfg.target.mma[cfg.tuning.pipeline]
      if cfg.functional.dir == "quant" then return true end
      if t.block_m % shape.m ~= 0 then return false, ("BLOCK_M %d is not a multiple of MMA M=%d"):format(t.block_m, shape.m) end
      if t.block_n % shape.n ~= 0 then return false, ("BLOCK_N %d is not a multiple of MMA N=%d"):format(t.block_n, shape.n) end
      -- P (and dS) become the A operand of the next MMA, reduced over BLOCK_N (resp. BLOCK_M) in K-steps
      if t.block_n % shape.k ~= 0 then return false, ("BLOCK_N %d is not a multiple of MMA K=%d"):format(t.block_n, shape.k) end
      return true
    end },
  { name = "warps_cover_tile", fn = function(cfg)
      local t, tg = cfg.tuning, cfg.target
      if tg.backend == "cpu" then
        if t.warps ~= 1 or t.stages ~= 1 then return false, "the cpu target runs one thread per tile, one stage (w1s1)" end
        return true
      end
      if cfg.functional.dir == "quant" then return true end
      if t.pipeline == "wgmma" then
        -- one producer warpgroup + consumers, each consumer warpgroup owns 64 rows
        if t.warps % 4 ~= 0 or t.warps < 8 then return false, ("wgmma needs whole warpgroups (>=2), got %d warps"):format(t.warps) end
        local consumers = t.warps // 4 - 1
        if cfg.functional.dir == "fwd" and t.block_m ~= 64 * consumers then
          return false, ("BLOCK_M %d must be 64 x %d consumer warpgroups"):format(t.block_m, consumers)
        end
        -- the backward and its delta prep: 64-query tiles and 64 keys per consumer warpgroup, or one 64-key
        -- tile split by head dim between two consumer warpgroups (M.wgmma_bwd_hdim_split)
        if cfg.functional.dir ~= "fwd" and (t.block_m ~= 64 or (t.block_n ~= 64 * consumers and not M.wgmma_bwd_hdim_split(t))) then
          return false, ("the wgmma backward needs BLOCK_M 64 and BLOCK_N 64 x %d consumer warpgroups (or 64 with 2), got %dx%d"):format(
            consumers, t.block_m, t.block_n)
        end
      elseif t.pipeline == "mma" then
        -- templates/cuda: the forward gives each warp 16 whole rows; the backward tiles S/dP as
        -- (BLOCK_M/16 row warps) x (the rest along keys) and splits dK/dV columns over all warps
        local dir, wm = cfg.functional.dir, t.block_m // 16
        if t.block_m % 16 ~= 0 then return false, ("BLOCK_M %d is not a multiple of 16"):format(t.block_m) end
        if dir == "fwd" and t.warps ~= wm and t.warps ~= 2 * wm then
          return false, ("BLOCK_M %d is not covered by %d warps: the forward takes one or two warps per 16 rows (%d or %d)"):format(
            t.block_m, t.warps, wm, 2 * wm)
        end
        if dir == "fwd" and (cfg.functional.hdim_v // M.mma_fwd_vsplit(t)) % 8 ~= 0 then
          return false, ("head dim %d does not split into %d column groups of 8"):format(cfg.functional.hdim_v, M.mma_fwd_vsplit(t))
        end
        if dir == "bwd" or dir == "delta" then
          if t.warps % wm ~= 0 then return false, ("%d warps do not split into %d row groups"):format(t.warps, wm) end
          local wn = t.warps // wm
          if (t.block_n // wn) % 8 ~= 0 or t.block_n % wn ~= 0 then
            return false, ("BLOCK_N %d does not split into %d column groups of 8"):format(t.block_n, wn)
          end
          for _, d in ipairs({ cfg.functional.hdim_qk, cfg.functional.hdim_v }) do
            if d % (t.warps * 8) ~= 0 then return false, ("head dim %d does not split over %d warps x 8 columns"):format(d, t.warps) end
          end
        end
      elseif t.pipeline == "mfma" then
        -- templates/hip: the forward gives each wave 32 whole rows; the backward tiles S/dP as (BLOCK_M/32 row
        -- waves) x (the rest along keys) in 32-column chunks and splits dK/dV (and dQ) columns in 32s
        local dir, rows = cfg.functional.dir, tg.mma[t.pipeline].m
        if t.block_m % rows ~= 0 then return false, ("BLOCK_M %d is not a multiple of %d"):format(t.block_m, rows) end
        local wm = t.block_m // rows
        if dir == "fwd" and t.warps ~= wm then
          return false, ("BLOCK_M %d is not covered by %d waves of %d rows (the forward needs %d)"):format(t.block_m, t.warps, rows, wm)
        end
        if dir == "bwd" or dir == "delta" then
          if t.warps % wm ~= 0 then return false, ("%d waves do not split into %d row groups of %d"):format(t.warps, wm, rows) end
          local wn = t.warps // wm
          if t.block_n % (wn * 32) ~= 0 then
            return false, ("BLOCK_N %d does not split into %d column groups of 32"):format(t.block_n, wn)
          end
          for _, d in ipairs({ cfg.functional.hdim_qk, cfg.functional.hdim_v }) do
            if d % (t.warps * 32) ~= 0 then return false, ("head dim %d does not split over %d waves x 32 columns"):format(d, t.warps) end
          end
        end
      end
      return true
    end },
  { name = "wgmma_swizzle_chunks", fn = function(cfg)
      -- templates/cuda/*_wgmma: K-major operands travel as TMA boxes of 64-byte swizzle chunks (head dims
      -- of Q/K, and keys of V^t), and one wgmma N covers BLOCK_N or the V head dim (<= 256)
      local t, f = cfg.tuning, cfg.functional
      if t.pipeline ~= "wgmma" or f.dir == "quant" then return true end
      -- head dims that are not whole chunks run padded (wgmma_hdims) in the d <= 128 kernels; the wide backward
      -- and the d > 128 forwards take whole chunks only
      local qk, v = M.wgmma_hdims(f)
      local padded = qk ~= f.hdim_qk or v ~= f.hdim_v
      if padded and (qk > 128 or v > 128) then
        return false, ("wgmma: head dims %dx%d above 128 must be multiples of the 64-byte swizzle chunk"):format(f.hdim_qk, f.hdim_v)
      end
      if t.block_n % 64 ~= 0 then return false, ("wgmma: BLOCK_N %d is not a multiple of the 64-byte swizzle chunk"):format(t.block_n) end
      if t.block_n > 256 or v > 256 then return false, "wgmma: N (BLOCK_N, head dim of V) is at most 256" end
      if f.dir ~= "fwd" then
        -- the backward splits dQ's (padded) columns over its consumers
        local nc = math.max(t.warps // 4 - 1, 1)
        if qk % (8 * nc) ~= 0 then return false, ("wgmma backward: head dim %d does not split into %d dQ column groups of 8"):format(qk, nc) end
      end
      return true
    end },
  -- only the wgmma forward has the spare producer warps and the register A operand vperm serves
  wgmma_fwd_option("vperm"),
  -- the vote guards the wgmma forward's O rescale (templates/cuda/fwd_wgmma.cu.tpl, Consumer::rescale_o)
  wgmma_fwd_option("unitskip"),
  -- query heads per CTA: the causal wgmma backward's grid (templates/cuda/bwd_wgmma*.cu.tpl); a non-causal grid
  -- keeps its CTAs in step (every key tile has the same length), the other pipelines walk the whole group, and an
  -- MHA instance's group is one head
  { name = "qheads_wgmma_bwd_causal", fn = function(cfg)
      local t, f = cfg.tuning, cfg.functional
      if (t.qheads or 0) == 0 then return true end
      if t.pipeline ~= "wgmma" or f.dir ~= "bwd" or not f.causal or f.layout == "mha" then
        return false, ("qheads %d is an option of causal wgmma backwards with head groups, not of a %s %s %s %s instance")
          :format(t.qheads, t.pipeline, f.causal and "causal" or "non-causal", f.layout or "-", f.dir)
      end
      return true
    end },
  { name = "wave_size", fn = function(cfg)
      -- the HIP kernels are written for wave64 (MFMA fragments span 64 lanes)
      local tg = cfg.target
      if cfg.tuning.pipeline == "mfma" and tg.warp_size ~= 64 then
        return false, ("the mfma kernels need a wave size of 64, %s has %d"):format(tg.name, tg.warp_size)
      end
      return true
    end },
  { name = "threads_fit", fn = function(cfg)
      local n = cfg.tuning.warps * cfg.target.warp_size
      if n > cfg.target.max_threads then
        return false, ("%d threads exceed %d per block on %s"):format(n, cfg.target.max_threads, cfg.target.name)
      end
      return true
    end },
  { name = "smem_fits", fn = function(cfg)
      local r = M.resources(cfg)
      if r.smem_bytes > cfg.target.smem_bytes then
        return false, ("shared memory %d B exceeds %d B on %s"):format(r.smem_bytes, cfg.target.smem_bytes, cfg.target.name)
      end
      return true
    end },
  { name = "regs_fit", fn = function(cfg)
      local r = M.resources(cfg)
      if r.reg_budget and r.regs > r.reg_budget then
        return false, ("register estimate %d exceeds the %d a consumer warpgroup gets (setmaxnreg) on %s"):format(r.regs, r.reg_budget, cfg.target.name)
      end
      if r.regs > cfg.target.regs_per_thread then
        return false, ("register estimate %d exceeds %d per thread on %s"):format(r.regs, cfg.target.regs_per_thread, cfg.target.name)
      end
      return true
    end },
  { name = "test_format_cpu_only", fn = function(cfg)
      local f = cfg.functional
      if (f.fmt == "f32" or f.fmt_grad == "f32") and cfg.target.backend ~= "cpu" then
        return false, "the f32 pseudo-format (quantization off) exists on the cpu target only"
      end
      return true
    end },
}

M.by_name = {}
for _, p in ipairs(M.predicates) do M.by_name[p.name] = p end

-- All predicates; returns true or false, "predicate: reason".
function M.check(cfg)
  for _, p in ipairs(M.predicates) do
    local ok, why = p.fn(cfg)
    if not ok then return false, p.name .. ": " .. why end
  end
  return true
end

return M
