-- A backward is a bundle, not a kernel: delta prep + main backward (+ a convert step where a backend needs
-- one), consuming one forward. The parts must agree on the conventions the forward produces (LSE form, P
-- scale, which outputs exist) and on the geometry; the generator refuses a bundle where they do not.
local schema = require("fa8.schema")
local naming = require("fa8.naming")

local M = {}

-- What a forward instance produces, as the backward sees it.
function M.forward_conventions(fwd)
  local f = fwd.functional
  return {
    lse = schema.conventions.lse,
    p_scale_log2 = schema.p_convention(f.fmt).p_scale_log2,
    rem_scale_log2 = f.variant == "split" and schema.p_convention(f.fmt).rem_scale_log2 or nil,
    writes_o_rem = f.variant == "split",
    fmt = f.fmt, hdim_qk = f.hdim_qk, hdim_v = f.hdim_v, layout = f.layout, causal = f.causal, scale = f.scale,
  }
end

-- What a delta/bwd pair expects of the forward it consumes.
function M.expected_conventions(delta, bwd)
  local d = delta.functional
  return {
    lse = schema.conventions.lse,
    p_scale_log2 = schema.p_convention(d.fmt).p_scale_log2,
    rem_scale_log2 = d.delta == "split" and schema.p_convention(d.fmt).rem_scale_log2 or nil,
    writes_o_rem = d.delta == "split",
    fmt = d.fmt, hdim_qk = d.hdim_qk, hdim_v = d.hdim_v, layout = d.layout, causal = d.causal, scale = d.scale,
  }
end

local CONVENTION_KEYS = { "lse", "p_scale_log2", "rem_scale_log2", "writes_o_rem", "fmt", "hdim_qk", "hdim_v",
  "layout", "causal", "scale" }

-- Raises a message naming the bundle, the mismatched convention and both values.
function M.check(b)
  local name = b.name or "bundle"
  for _, part in ipairs({ "fwd", "delta", "bwd" }) do
    if not b[part] then error(("%s: missing %s part"):format(name, part), 0) end
  end
  if b.fwd.functional.dir ~= "fwd" or b.delta.functional.dir ~= "delta" or b.bwd.functional.dir ~= "bwd" then
    error(("%s: parts must be fwd, delta and bwd instances"):format(name), 0)
  end
  local d, k = b.delta.functional, b.bwd.functional
  -- delta prep and main backward: same functional key, same row tiling (delta is written per BLOCK_M rows)
  for _, key in ipairs({ "fmt", "fmt_grad", "hdim_qk", "hdim_v", "layout", "causal", "scale" }) do
    if d[key] ~= k[key] then
      error(("%s: delta prep has %s=%s but the backward has %s=%s"):format(name, key, tostring(d[key]), key,
        tostring(k[key])), 0)
    end
  end
  if b.delta.tuning.block_m ~= b.bwd.tuning.block_m then
    error(("%s: delta prep BLOCK_M %d differs from the backward's %d (delta rows are padded per BLOCK_M)")
      :format(name, b.delta.tuning.block_m, b.bwd.tuning.block_m), 0)
  end
  if b.delta.target ~= b.bwd.target or b.fwd.target ~= b.bwd.target then
    error(("%s: parts target different architectures"):format(name), 0)
  end
  local have, want = M.forward_conventions(b.fwd), M.expected_conventions(b.delta, b.bwd)
  for _, key in ipairs(CONVENTION_KEYS) do
    if have[key] ~= want[key] then
      error(("%s: the backward expects %s=%s but forward %s produces %s=%s"):format(name, key, tostring(want[key]),
        naming.encode(b.fwd), key, tostring(have[key])), 0)
    end
  end
  return b
end

-- Build the bundle for one delta mode from configs; name it after the delta instance.
function M.make(fwd, delta, bwd)
  local b = { fwd = fwd, delta = delta, bwd = bwd, mode = delta.functional.delta }
  -- named by its delta prep, plus the backward's qheads (bundles of one prep differ in that only)
  local t = schema.copy(delta.tuning)
  t.qheads = bwd.tuning.qheads
  b.name = naming.encode({ functional = delta.functional, tuning = t, target = delta.target }):gsub("^fa8_delta_", "fa8_bundle_", 1)
  return M.check(b)
end

return M
