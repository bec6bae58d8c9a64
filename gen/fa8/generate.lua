-- `fa8 gen`: enumerate, expand each instance's template, write the descriptor table and manifest, and (for a
-- user bundle) the support headers and build files that make the directory self-contained.
local dir = require("pl.dir")
local path = require("pl.path")
local emit = require("fa8.emit")
local outputs = require("fa8.outputs")
local schema = require("fa8.schema")
local constraints = require("fa8.constraints")

local M = {}

-- backend -> source extension and the support files a bundle carries (relative to the fa8 root)
-- What every bundle carries besides the kernels: the public header and the runtime (validation, dispatch
-- restricted to the bundle's instances by construction, tuned-table lookup, CPU thread pool). The CUDA host
-- side joins when the bundle has CUDA instances; otherwise its stub.
M.runtime_files = { "runtime/include/fa8.h", "runtime/src/fa8_internal.h", "runtime/src/api.c",
  "runtime/src/dispatch.c", "runtime/src/gpu.c", "runtime/src/status.c", "runtime/src/tuned.c", "runtime/src/tuned_parse.c",
  "runtime/src/validate.c", "backends/cpu/cpu_exec.c" }

M.backends = {
  cpu = { ext = "c", support = { "runtime/include/fa8_fp8.h", "runtime/include/fa8_types.h",
    "runtime/include/fa8_kernel_abi.h", "templates/cpu/fa8_cpu_tile.h" } },
  cuda = { ext = "cu", support = { "runtime/include/fa8_fp8.h", "runtime/include/fa8_types.h",
    "runtime/include/fa8_kernel_abi.h", "templates/common/fa8_dev_common.h", "templates/cuda/fa8_cuda_tile.cuh",
    "templates/cuda/fa8_cuda_sm90.cuh", "templates/cuda/fa8_cuda_sm90_bwd.cuh", "templates/cuda/fa8_cuda_sm90_bwd_io.cuh",
    "templates/cuda/fa8_cuda_delta_rowdot.cuh" } },
  -- HIP: the kernel source (device code, built header-free by clang) plus a host launcher in C per instance
  hip = { ext = "hip", host = true, support = { "runtime/include/fa8_fp8.h", "runtime/include/fa8_types.h",
    "runtime/include/fa8_kernel_abi.h", "templates/common/fa8_dev_common.h", "templates/hip/fa8_hip_tile.h",
    "templates/hip/fa8_fnuz_f16.h", "backends/hip/fa8_hip_host.h" } },
}

-- A backend's portable pipeline (scalar, mma, mfma) uses <dir>.<ext>.tpl; others <dir>_<pipeline>.<ext>.tpl.
local BASE_PIPELINE = { scalar = true, mma = true, mfma = true }
local function template_for(c)
  local dir = c.functional.dir
  if not BASE_PIPELINE[c.tuning.pipeline] and dir ~= "quant" then dir = dir .. "_" .. c.tuning.pipeline end
  -- the Hopper backward whose consumer warpgroups split the head dim (d > 128) has a template of its own
  if dir == "bwd_wgmma" and constraints.wgmma_bwd_hdim_split(c.tuning) then dir = "bwd_wgmma_wide" end
  return ("%s/%s.%s.tpl"):format(c.target.backend, dir, M.backends[c.target.backend].ext)
end

function M.instance_file(c) return c.name .. "." .. M.backends[c.target.backend].ext end
-- HIP instances also get NAME_host.c: the launcher (grid, block, kernel names) the C runtime links
function M.host_file(c) return M.backends[c.target.backend].host and (c.name .. "_host.c") or nil end

-- Threads per workgroup of a HIP instance's main kernel: one source for the kernel's launch bound and the
-- host launcher (templates/hip/*: a wave of 64 per 32 rows, the row-mode delta and the quantizer 4 waves).
local function hip_threads(c)
  local f, t = c.functional, c.tuning
  if f.dir == "quant" or (f.dir == "delta" and f.delta ~= "matched") then return 256 end
  if f.dir == "delta" then return t.block_m // 32 * 64 end
  return t.warps * 64
end

-- Values a template sees. Keep logic here, substitutions in templates.
local function template_env(c)
  local f, t = c.functional, c.tuning
  -- the head dims the wgmma templates compute on (rounded up to a 64-byte chunk); quantizers have none
  local dqkp, dvp
  if f.hdim_qk or f.hdim then dqkp, dvp = constraints.wgmma_hdims(f) end
  return {
    c = c, f = f, t = t, name = c.name,
    FMT = "FA8_FMT_" .. f.fmt:upper(),
    FMT_GRAD = "FA8_FMT_" .. (f.fmt_grad or f.fmt):upper(),
    IS_F32 = f.fmt == "f32" and 1 or 0,
    CAUSAL = f.causal and 1 or 0,
    SPLIT = (f.variant == "split" or f.delta == "split") and 1 or 0,
    PER_TENSOR = f.scale == "tensor" and 1 or 0,
    DQK = f.hdim_qk or f.hdim, DV = f.hdim_v or f.hdim,
    DQKP = dqkp, DVP = dvp,
    BM = t.block_m, BN = t.block_n,
    VPERM = t.vperm and 1 or 0,   -- templates/cuda/fwd_wgmma: V^t's keys permuted in shared memory (schema.lua)
    UNITSKIP = t.unitskip and 1 or 0,   -- templates/cuda/fwd_wgmma: O's unit rescales skipped by a warp vote
    -- templates/cuda/fwd_wgmma: O leaves through a TMA store from shared staging (constraints.wgmma_fwd_o_staging)
    O_TMA = c.target.backend == "cuda" and t.pipeline == "wgmma" and f.dir == "fwd" and constraints.wgmma_fwd_o_staging(c) > 0 and 1 or 0,
    QHEADS = t.qheads or 0,   -- templates/cuda/bwd_wgmma*: query heads per CTA of a causal GQA grid (0: the group)
    -- preprocessor switches must be literals: enum constants read as 0 inside #if
    MODE_STALE = f.delta == "stale" and 1 or 0, MODE_DOHAT = f.delta == "dohat" and 1 or 0,
    MODE_MATCHED = f.delta == "matched" and 1 or 0, MODE_SPLIT = f.delta == "split" and 1 or 0,
    INTYPE = f.intype and ("FA8_IN_" .. f.intype:upper()) or "-1",
    -- P is cast to e4m3 under fixed power-of-two scales; quantization off (f32) leaves it uncast
    P_FMT = f.fmt == "f32" and "FA8_FMT_F32" or "FA8_FMT_" .. schema.p_convention(f.fmt).p_fmt:upper(),
    P_SCALE = ("%d.0f"):format(1 << schema.p_convention(f.fmt).p_scale_log2),
    P_SCALE_LOG2 = ("%d.0f"):format(schema.p_convention(f.fmt).p_scale_log2),
    REM_SCALE = ("%d.0f"):format(1 << schema.p_convention(f.fmt).rem_scale_log2),
    REM_FMT = f.fmt == "f32" and "FA8_FMT_F32" or "FA8_FMT_" .. schema.p_convention(f.fmt).rem_fmt:upper(),
    OPND_BYTES = f.fmt == "f32" and 4 or 1,
    HIP_THREADS = c.target.backend == "hip" and hip_threads(c) or nil,
    -- templates/hip/bwd: the LDS layout the model sized (resident or streamed)
    BWD_STREAM = c.tuning.pipeline == "mfma" and f.dir == "bwd" and constraints.mfma_resources(c).stream and 1 or 0,
    -- templates/cuda/bwd_wgmma_wide: its Q^t / dO^t ring depth
    BWD_TSTAGES = f.dir == "bwd" and constraints.wgmma_bwd_hdim_split(c.tuning) and constraints.wgmma_bwd_wide_tstages(c) or 0,
    ARCH = c.target.arch,
    -- templates/cuda: the shared memory the config model counted (constraints.cuda_smem), static_asserted
    -- against the kernel's own layout
    SMEM_MODEL = c.target.backend == "cuda" and f.dir ~= "quant" and constraints.cuda_smem(c) or 0,
  }
end

function M.generator_hash(root)
  local files = {}
  for _, sub in ipairs({ "gen/fa8", "templates/cpu", "templates/cuda", "templates/hip", "templates/common" }) do
    local d = root .. "/" .. sub
    if path.isdir(d) then
      for _, p in ipairs(dir.getfiles(d)) do files[#files + 1] = p end
    end
  end
  table.sort(files)
  local chunks = {}
  for _, p in ipairs(files) do
    chunks[#chunks + 1] = p:sub(#root + 2)
    chunks[#chunks + 1] = emit.read_file(p) or ""
  end
  return outputs.fnv1a64(chunks)
end

-- opts: out, bundle_files (bool), depfile, command (string for the manifest), version
function M.run(res, opts, meta)
  local out = opts.out
  -- fail early with a clear message when a backend has no templates yet (before --out is created, so a
  -- refused run leaves nothing behind)
  for _, c in ipairs(res.instances) do
    local tpl = emit.root .. "/templates/" .. template_for(c)
    if not path.isfile(tpl) then
      error(("no template %s for %s: the %s backend's templates are not in this fa8 yet (`fa8 list` still enumerates its configs)")
        :format("templates/" .. template_for(c), c.name, c.target.backend), 0)
    end
  end
  if path.exists(out) and not path.isdir(out) then error(("--out %s: exists and is not a directory"):format(out), 0) end
  if not path.isdir(out) then
    local ok, err = dir.makepath(out)
    if not ok then error(("--out %s: cannot create directory: %s"):format(out, tostring(err)), 0) end
  end
  local files = {}
  local put_seen = {}
  local function put(name, content)   -- support files shared by backends are written once
    if put_seen[name] then return end
    put_seen[name] = true
    emit.write(out, name, content)
    files[#files + 1] = name
  end
  put("fa8_desc.h", outputs.desc_header(meta))
  put("fa8_instances.h", outputs.instances_header(meta, res))
  put("fa8_instances.c", outputs.instances_table(meta, res))
  for _, c in ipairs(res.instances) do
    put(M.instance_file(c), emit.expand(template_for(c), template_env(c)))
    if M.host_file(c) then put(M.host_file(c), emit.expand(c.target.backend .. "/launch.c.tpl", template_env(c))) end
  end
  local used = {}
  for _, c in ipairs(res.instances) do used[c.target.backend] = true end
  if used.hip then put("fa8_hip_modules.c", M.hip_modules(res)) end
  for _, be in ipairs({ "cpu", "cuda", "hip" }) do
    if used[be] then
      for _, s in ipairs(M.backends[be].support) do
        if opts.bundle_files then put(path.basename(s), emit.read_file(emit.root .. "/" .. s))
        else emit.add_dep(emit.root .. "/" .. s) end
      end
    end
  end
  if opts.bundle_files then
    for _, s in ipairs(M.runtime_files) do put(path.basename(s), emit.read_file(emit.root .. "/" .. s)) end
    local gpu = used.cuda and "backends/cuda/cuda_backend.c" or "backends/cuda/cuda_absent.c"
    put(path.basename(gpu), emit.read_file(emit.root .. "/" .. gpu))
    local hip = used.hip and "backends/hip/hip_backend.c" or "backends/hip/hip_absent.c"
    put(path.basename(hip), emit.read_file(emit.root .. "/" .. hip))
    if used.hip then put("embed", emit.read_file(emit.root .. "/backends/hip/embed")) end
    -- C sources, and CUDA sources grouped by target (each compiled for its own architecture)
    local sources = {}
    for _, name in ipairs(files) do if name:match("%.c$") then sources[#sources + 1] = name end end
    table.sort(sources)
    -- a backend's kernel sources by architecture (sorted), and the architectures (sorted)
    local function by_arch(backend)
      local files_of, archs = {}, {}
      for _, c in ipairs(res.instances) do
        if c.target.backend == backend then
          local arch = c.target.arch
          if not files_of[arch] then files_of[arch] = {}; archs[#archs + 1] = arch end
          table.insert(files_of[arch], M.instance_file(c))
        end
      end
      table.sort(archs)
      for _, a in ipairs(archs) do table.sort(files_of[a]) end
      return files_of, archs
    end
    local cuda, cuda_targets = by_arch("cuda")          -- each compiled for its own architecture
    local hipsrc, hip_targets = by_arch("hip")          -- each compiled to a code object, then embedded
    local env = { sources = sources, cuda = cuda, cuda_targets = cuda_targets, meta = meta, res = res,
                  count = #res.instances, has_cuda = #cuda_targets > 0,
                  hip = hipsrc, hip_targets = hip_targets, has_hip = #hip_targets > 0 }
    put("README.md", emit.expand("bundle/README.md.tpl", env, { no_line = true }))
    put("Makefile", emit.expand("bundle/Makefile.tpl", env, { no_line = true }))
    put("meson.build", emit.expand("bundle/meson.build.tpl", env, { no_line = true }))
  end
  table.sort(files)
  -- the manifest is written last and is the depfile's target: it changes whenever anything else does
  put("manifest.json", outputs.manifest(meta, res, files))
  if opts.depfile then emit.write_depfile(opts.depfile, out .. "/manifest.json") end
  return files
end

-- fa8_hip_modules.c: one module per HIP architecture, which backends/hip/hip_backend.c loads to find out
-- which architecture the device is (the HIP runtime refuses a code object built for another one)
function M.hip_modules(res)
  local seen, lines, refs = {}, { "/* generated by fa8: one HIP module per architecture (device probing). Do not edit. */",
    '#include "fa8_hip_host.h"' }, {}
  for _, c in ipairs(res.instances) do
    if c.target.backend == "hip" and not seen[c.target.arch] then
      seen[c.target.arch] = true
      lines[#lines + 1] = ("extern fa8_hip_module fa8_hipmod_%s;"):format(c.name)
      refs[#refs + 1] = ("&fa8_hipmod_%s, "):format(c.name)
    end
  end
  lines[#lines + 1] = "fa8_hip_module *const fa8_hip_probe_modules[] = { " .. table.concat(refs) .. "NULL };"
  return table.concat(lines, "\n") .. "\n"
end

-- Names of the files a run would write (for Meson's configure step), without writing anything.
function M.list_outputs(res, bundle_files)
  local names = { "manifest.json", "fa8_desc.h", "fa8_instances.h", "fa8_instances.c" }
  for _, c in ipairs(res.instances) do
    names[#names + 1] = M.instance_file(c)
    if M.host_file(c) then names[#names + 1] = M.host_file(c) end
  end
  for _, c in ipairs(res.instances) do
    if c.target.backend == "hip" then names[#names + 1] = "fa8_hip_modules.c"; break end
  end
  return names
end

return M
