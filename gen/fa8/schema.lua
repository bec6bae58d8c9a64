-- The kernel config model: one record per kernel instance, split into four parts.
--   functional  : what is computed (changing it changes the answer's meaning)
--   tuning      : how it is computed (changing it may change FP32 rounding, never the meaning)
--   target      : where it runs (a target entry from targets.lua or a user file)
--   constraints : derived resource figures, checked by named predicates (constraints.lua)
-- Everything else (names, C descriptors, manifests, the runtime's dispatch) is derived from these records.
local M = {}

-- Enumerations. `c` is the C enumerator the generated header asserts against runtime/include/fa8_types.h,
-- so Lua and C can never drift apart silently.
M.enums = {
  dir      = { values = { "quant", "fwd", "delta", "bwd" }, c = "FA8_DIR_" },
  fmt      = { values = { "e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz", "f32" }, c = "FA8_FMT_" },
  layout   = { values = { "mha", "gqa", "mqa", "mla" }, c = "FA8_LAYOUT_" },
  delta    = { values = { "stale", "dohat", "matched", "split" }, c = "FA8_DELTA_" },
  variant  = { values = { "std", "split" }, c = "FA8_FWD_" },           -- forward flavour
  scale    = { values = { "block", "tensor" }, c = "FA8_SCALE_" },
  intype   = { values = { "f32", "bf16" }, c = "FA8_IN_" },             -- quantizer input dtype
  backend  = { values = { "cpu", "cuda", "hip" }, c = "FA8_BACKEND_" },
  pipeline = { values = { "scalar", "mma", "wgmma", "mfma" }, c = "FA8_PIPE_" },
  lse      = { values = { "ln_scaled" }, c = "FA8_LSE_" },
}

function M.enum_index(enum, value)
  for i, v in ipairs(M.enums[enum].values) do
    if v == value then return i - 1 end
  end
  return nil
end

-- Formats that can be stored in a byte. "f32" is a CPU-only, test-only pseudo-format: quantization off.
M.fp8_formats = { e4m3 = true, e5m2 = true, e4m3fnuz = true, e5m2fnuz = true }

-- Head geometries every backend must support (qk x v); MLA is the one with qk ~= v.
M.head_geometries = { { 64, 64 }, { 96, 96 }, { 128, 128 }, { 192, 192 }, { 256, 256 }, { 192, 128 } }

-- Which functional fields each direction uses. Fields a direction does not use are absent from its record
-- (dedupe and naming rely on that).
M.functional_fields = {
  quant = { "dir", "fmt", "hdim", "intype", "scale" },
  fwd   = { "dir", "fmt", "hdim_qk", "hdim_v", "layout", "causal", "variant", "scale" },
  delta = { "dir", "fmt", "fmt_grad", "hdim_qk", "hdim_v", "layout", "causal", "delta", "scale" },
  bwd   = { "dir", "fmt", "fmt_grad", "hdim_qk", "hdim_v", "layout", "causal", "scale" },
}
-- vperm (wgmma forward only): the producer warpgroup's spare warps permute each V^t stage's keys in shared memory
-- into the order of P's accumulator registers, so P^ (and split's R^) reach the PV wgmma as A fragments without
-- quad shuffles. It pays where the fragments per V byte are many (d <= 128, split) and loses where V is wide
-- (d256: the permute pass costs more than the shuffles it saves): a tuning choice, timed by `fa8 tune`.
-- unitskip (wgmma forward only): O's per-tile rescale sits behind a warp vote that skips it where the factor is
-- exactly 1 for all of a warp's rows (no row's max rose, the tile's V scale equal to the previous one). The codes are
-- bit-identical either way; the vote changes ptxas's schedule of the whole key-tile step, by -4 to +5 % depending
-- on geometry and scales (bench/NOTES.md, v27), so the tuner decides.
-- qheads (wgmma backward, causal only): the query heads one CTA of a GQA grid carries (0: the whole group, one CTA per
-- kv head and key tile; n: the largest divisor of the group not above n, the CTAs of a key tile adding their dK/dV
-- shares). A CTA walking 8 query heads drifts away from its neighbours (a causal key tile's length per head differs
-- by tile), so the grid's query-side working set outgrows L2 (ncu, d128 S=8K: L2 hit 83 % against 93-95 % with 2
-- or 4 heads, bench/NOTES.md backward v18); fewer heads per CTA cost dK/dV atomics. The tuner decides.
M.tuning_fields = { "block_m", "block_n", "warps", "stages", "pipeline", "vperm", "unitskip", "qheads" }

-- Fixed numerics conventions a forward produces and a backward bundle consumes (docs/numerics.md).
-- A bundle whose parts disagree on any of these is refused by bundle.lua.
M.conventions = {
  lse = "ln_scaled",        -- LSE = log sum exp(c * q.k), natural log
  p_scale_log2 = 8,         -- OCP family: P is cast as e4m3(P * 2^8)
  rem_scale_log2 = 8,       -- OCP family, split: remainder cast as e5m2((P - P^) * 2^8), P^'s scale
  p_fmt = "e4m3",
  rem_fmt = "e5m2",
}

-- P's FP8 format and fixed scales per format family (docs/numerics.md "P per FP8 family"): the matrix unit
-- takes P and V in the same family, so FNUZ operands (AMD CDNA3) cast P to e4m3fnuz. Its largest value is
-- 240, so the scale is 2^7 (P <= 1 maps to <= 128); the smallest normal, 2^-7, then covers P >= 2^-14,
-- exactly the range OCP e4m3 covers under 2^8.
-- Split's remainder P - P^ is cast to the family's e5m2 under P's own scale: its five exponent bits cover the
-- remainder of every P >= 2^-18 with normal numbers and no scale of its own, so R^ V^ adds into P^ V^'s
-- accumulator in the same GEMM (docs/numerics.md "Forward"; e4m3 needed a 2^4 larger scale and a second
-- accumulator joined in FP32).
M.p_families = {
  ocp  = { p_fmt = "e4m3",     p_scale_log2 = 8, rem_fmt = "e5m2",     rem_scale_log2 = 8 },
  fnuz = { p_fmt = "e4m3fnuz", p_scale_log2 = 7, rem_fmt = "e5m2fnuz", rem_scale_log2 = 7 },
}
function M.p_convention(fmt)
  return (type(fmt) == "string" and fmt:match("fnuz$")) and M.p_families.fnuz or M.p_families.ocp
end

local function fail(where, msg) error(("%s: %s"):format(where, msg), 0) end

local function check_enum(where, enum, v)
  if M.enum_index(enum, v) == nil then
    fail(where, ("%s '%s' is not one of %s"):format(enum, tostring(v), table.concat(M.enums[enum].values, ", ")))
  end
end

local function check_posint(where, field, v)
  if math.type(v) ~= "integer" or v <= 0 then
    fail(where, ("%s must be a positive integer, got %s"):format(field, tostring(v)))
  end
end

-- Validate one config record {functional=, tuning=, target=}. Raises a message naming the bad field.
function M.check(cfg, where)
  where = where or "config"
  local f, t = cfg.functional, cfg.tuning
  if type(f) ~= "table" or type(t) ~= "table" or type(cfg.target) ~= "table" then
    fail(where, "a config needs functional, tuning and target tables")
  end
  check_enum(where, "dir", f.dir)
  local allowed = {}
  for _, k in ipairs(M.functional_fields[f.dir]) do allowed[k] = true end
  for k in pairs(f) do
    if not allowed[k] then fail(where, ("field '%s' does not belong to a %s config"):format(k, f.dir)) end
  end
  for k in pairs(allowed) do
    if f[k] == nil then fail(where, ("%s config lacks field '%s'"):format(f.dir, k)) end
  end
  check_enum(where, "fmt", f.fmt)
  if f.fmt_grad then check_enum(where, "fmt", f.fmt_grad) end
  check_enum(where, "scale", f.scale)
  if f.dir == "quant" then
    check_posint(where, "hdim", f.hdim)
    check_enum(where, "intype", f.intype)
  else
    check_posint(where, "hdim_qk", f.hdim_qk)
    check_posint(where, "hdim_v", f.hdim_v)
    check_enum(where, "layout", f.layout)
    if type(f.causal) ~= "boolean" then fail(where, "causal must be true or false") end
    if (f.layout == "mla") ~= (f.hdim_qk ~= f.hdim_v) then
      fail(where, ("layout '%s' with hdim %dx%d: MLA is exactly the case hdim_qk ~= hdim_v")
        :format(f.layout, f.hdim_qk, f.hdim_v))
    end
  end
  if f.variant then check_enum(where, "variant", f.variant) end
  if f.delta then check_enum(where, "delta", f.delta) end
  for _, k in ipairs(M.tuning_fields) do
    if t[k] == nil then fail(where, ("tuning lacks field '%s'"):format(k)) end
  end
  check_posint(where, "block_m", t.block_m)
  check_posint(where, "block_n", t.block_n)
  check_posint(where, "warps", t.warps)
  check_posint(where, "stages", t.stages)
  check_enum(where, "pipeline", t.pipeline)
  for _, k in ipairs({ "vperm", "unitskip" }) do
    if type(t[k]) ~= "boolean" then fail(where, ("%s must be true or false, got %s"):format(k, tostring(t[k]))) end
  end
  if math.type(t.qheads) ~= "integer" or t.qheads < 0 then
    fail(where, ("qheads must be a non-negative integer (0: the whole group), got %s"):format(tostring(t.qheads)))
  end
  return cfg
end

-- Deep copy of plain tables (configs are small trees of strings, numbers, booleans).
function M.copy(x)
  if type(x) ~= "table" then return x end
  local y = {}
  for k, v in pairs(x) do y[k] = M.copy(v) end
  return y
end

return M
