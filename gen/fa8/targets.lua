-- Targets are data: one entry per GPU (or the CPU). A user adds a GPU by writing a Lua file that returns one
-- entry or a list of entries with these fields and passing it to `fa8 gen --targets-file FILE`.
local schema = require("fa8.schema")

local M = {}

-- Field schema of a target entry: name -> {type, required, description}.
M.fields = {
  name            = { "string",  true,  "arch name users type: --target NAME" },
  tag             = { "string",  true,  "[a-z0-9] token used inside instance names" },
  backend         = { "string",  true,  "cpu | cuda | hip" },
  arch            = { "string",  true,  "compiler arch flag value (sm_90a, gfx942, native)" },
  description     = { "string",  false, "one line for `fa8 targets`" },
  smem_bytes      = { "number",  true,  "shared memory / LDS per block (CPU: per-thread working-set budget)" },
  regs_per_thread = { "number",  true,  "register file limit per thread (CPU: unused, set large)" },
  warp_size       = { "number",  true,  "threads per warp / wavefront (CPU: 1)" },
  max_threads     = { "number",  true,  "threads per block" },
  fp8             = { "table",   true,  "formats the matrix unit takes natively (list)" },
  fp8_emulated    = { "table",   false, "formats decoded in software before the matrix unit (list)" },
  fp8_lowered     = { "table",   false, "pipelines whose FP8 instructions the compiler lowers to F16 ones (list): unpacked operands cost registers" },
  mma             = { "table",   true,  "pipeline -> {m=, n=, k=} matrix-instruction shape" },
  pipelines       = { "table",   true,  "pipelines this target can run, in preference order" },
}

M.builtin = {
  {
    name = "cpu", tag = "cpu", backend = "cpu", arch = "native",
    description = "portable C reference kernels (any CPU), ground truth for every GPU backend",
    smem_bytes = 1 << 20, regs_per_thread = 1 << 30, warp_size = 1, max_threads = 1,
    fp8 = { "e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz", "f32" },
    mma = { scalar = { m = 1, n = 1, k = 1 } },
    pipelines = { "scalar" },
  },
  {
    name = "sm_89", tag = "sm89", backend = "cuda", arch = "sm_89",
    description = "NVIDIA Ada (L4, L40S, RTX 40): native FP8 mma.sync",
    smem_bytes = 101376, regs_per_thread = 255, warp_size = 32, max_threads = 1024,
    fp8 = { "e4m3", "e5m2" },
    mma = { mma = { m = 16, n = 8, k = 32 } },
    pipelines = { "mma" },
  },
  {
    name = "sm_90a", tag = "sm90a", backend = "cuda", arch = "sm_90a",
    description = "NVIDIA Hopper (H100, H200): wgmma FP8 + TMA; mma.sync as the portable path",
    smem_bytes = 232448, regs_per_thread = 255, warp_size = 32, max_threads = 1024,
    fp8 = { "e4m3", "e5m2" },
    mma = { mma = { m = 16, n = 8, k = 32 }, wgmma = { m = 64, n = 8, k = 32 } },
    fp8_lowered = { "mma" },   -- ptxas: FP8 mma.sync -> F16 unpacks + HMMA (QGMMA only through wgmma)
    pipelines = { "wgmma", "mma" },
  },
  {
    name = "gfx942", tag = "gfx942", backend = "hip", arch = "gfx942",
    description = "AMD CDNA3 (MI300X/MI300A): FP8 MFMA on FNUZ formats",
    smem_bytes = 65536, regs_per_thread = 512, warp_size = 64, max_threads = 1024,
    fp8 = { "e4m3fnuz", "e5m2fnuz" },
    mma = { mfma = { m = 32, n = 32, k = 16 } },
    pipelines = { "mfma" },
  },
  {
    name = "gfx90a", tag = "gfx90a", backend = "hip", arch = "gfx90a",
    description = "AMD CDNA2 (MI200): no FP8 hardware, FP8 decoded to FP16 for FP16 MFMA",
    smem_bytes = 65536, regs_per_thread = 512, warp_size = 64, max_threads = 1024,
    fp8 = {}, fp8_emulated = { "e4m3fnuz", "e5m2fnuz" },
    mma = { mfma = { m = 32, n = 32, k = 8 } },
    pipelines = { "mfma" },
  },
}

local function fail(src, msg) error(("%s: %s"):format(src, msg), 0) end

function M.validate(t, src)
  src = src or "target"
  if type(t) ~= "table" then fail(src, "a target entry must be a table") end
  local where = ("%s: target '%s'"):format(src, tostring(t.name))
  for k in pairs(t) do
    if not M.fields[k] then fail(where, ("unknown field '%s'"):format(tostring(k))) end
  end
  -- sorted, so an entry missing several fields always reports the same one
  local names = {}
  for k in pairs(M.fields) do names[#names + 1] = k end
  table.sort(names)
  for _, k in ipairs(names) do
    local spec, v = M.fields[k], t[k]
    if v == nil then
      if spec[2] then fail(where, ("missing field '%s' (%s)"):format(k, spec[3])) end
    elseif type(v) ~= spec[1] then
      fail(where, ("field '%s' must be a %s, got %s"):format(k, spec[1], type(v)))
    end
  end
  if not t.tag:match("^[a-z][a-z0-9]*$") then
    fail(where, ("tag '%s' must match [a-z][a-z0-9]* (it appears inside C identifiers)"):format(t.tag))
  end
  if t.backend ~= "cpu" and t.backend ~= "cuda" and t.backend ~= "hip" then
    fail(where, ("backend '%s' is not one of cpu, cuda, hip"):format(t.backend))
  end
  for _, k in ipairs({ "smem_bytes", "regs_per_thread", "warp_size", "max_threads" }) do
    if math.type(t[k]) ~= "integer" or t[k] <= 0 then
      fail(where, ("field '%s' must be a positive integer, got %s"):format(k, tostring(t[k])))
    end
  end
  -- formats and pipelines must be values the config model knows, or every config built from them is
  -- invalid (unknown pipelines have no tiles, so enumeration would only say "no instance matches")
  for _, k in ipairs({ "fp8", "fp8_emulated" }) do
    for _, f in ipairs(t[k] or {}) do
      if schema.enum_index("fmt", f) == nil then
        fail(where, ("field '%s': format '%s' is not one of %s"):format(k, tostring(f),
          table.concat(schema.enums.fmt.values, ", ")))
      end
    end
  end
  if #t.pipelines == 0 then fail(where, "pipelines is empty") end
  -- fp8_lowered names pipelines of this target: a misspelt one would leave the register model silently unaware
  local runs = {}
  for _, p in ipairs(t.pipelines) do runs[p] = true end
  for _, p in ipairs(t.fp8_lowered or {}) do
    if not runs[p] then
      fail(where, ("field 'fp8_lowered': pipeline '%s' is not one of this target's pipelines (%s)"):format(tostring(p),
        table.concat(t.pipelines, ", ")))
    end
  end
  for _, p in ipairs(t.pipelines) do
    if schema.enum_index("pipeline", p) == nil then
      fail(where, ("field 'pipelines': pipeline '%s' is not one of %s"):format(tostring(p),
        table.concat(schema.enums.pipeline.values, ", ")))
    end
    local shape = t.mma[p]
    if type(shape) ~= "table" or math.type(shape.m) ~= "integer" or math.type(shape.n) ~= "integer"
        or math.type(shape.k) ~= "integer" then
      fail(where, ("pipeline '%s' needs mma.%s = {m=, n=, k=} (integers)"):format(p, p))
    end
  end
  return t
end

-- A registry: built-ins plus user files. Names and tags must be unique.
function M.registry(user_files)
  local reg = { list = {}, by_name = {} }
  local function add(t, src)
    M.validate(t, src)
    if reg.by_name[t.name] then fail(src, ("target '%s' is defined twice"):format(t.name)) end
    for _, o in ipairs(reg.list) do
      if o.tag == t.tag then fail(src, ("tag '%s' of target '%s' is already used by '%s'"):format(t.tag, t.name, o.name)) end
    end
    t.user_file = src ~= "builtin" and src or nil
    reg.list[#reg.list + 1] = t
    reg.by_name[t.name] = t
  end
  for _, t in ipairs(M.builtin) do add(t, "builtin") end
  for _, path in ipairs(user_files or {}) do
    local chunk, err = loadfile(path, "t", {})   -- empty env: a target file is data, not a program
    if not chunk then fail(path, "cannot load targets file: " .. err) end
    local ok, res = pcall(chunk)
    if not ok then fail(path, "error while reading targets file: " .. tostring(res)) end
    if type(res) ~= "table" then fail(path, "a targets file must return a target entry or a list of them") end
    -- one entry or a list: a table with no array part is one entry (so an entry lacking `name` is
    -- reported as such instead of being read as an empty list and silently ignored)
    if res.name ~= nil or res[1] == nil then res = { res } end
    for _, t in ipairs(res) do add(t, path) end
  end
  return reg
end

function M.lookup(reg, name)
  local t = reg.by_name[name]
  if not t then
    local names = {}
    for _, o in ipairs(reg.list) do names[#names + 1] = o.name end
    error(("unknown target '%s' (known: %s; add one with --targets-file)"):format(tostring(name),
      table.concat(names, ", ")), 0)
  end
  return t
end

function M.supports_fmt(t, fmt)
  for _, f in ipairs(t.fp8) do if f == fmt then return true end end
  for _, f in ipairs(t.fp8_emulated or {}) do if f == fmt then return true end end
  return false
end

return M
