-- Command line of the generator: `fa8 gen`, `fa8 list`, `fa8 targets`.
local argparse = require("argparse")
local targets = require("fa8.targets")
local enumerate = require("fa8.enumerate")
local naming = require("fa8.naming")
local generate = require("fa8.generate")
local outputs = require("fa8.outputs")
local profiles = require("fa8.profiles")
local emit = require("fa8.emit")
local schema = require("fa8.schema")

local M = {}

local function csv(s)
  local t = {}
  for x in tostring(s):gmatch("[^,]+") do t[#t + 1] = x:match("^%s*(.-)%s*$") end
  return t
end

local function check_values(flag, list, enum)
  for _, v in ipairs(list) do
    if schema.enum_index(enum, v) == nil then
      error(("%s '%s' is not one of %s"):format(flag, v, table.concat(schema.enums[enum].values, ", ")), 0)
    end
  end
  return list
end

local function add_filters(cmd)
  cmd:option("--target", "Targets, comma separated (see `fa8 targets`).", "cpu")
  cmd:option("--hdim", "Head dims: N or QKxV, comma separated (e.g. 128,256,192x128). Default: the profile's.")
  cmd:option("--layout", "Layouts: mha, gqa, mqa, mla (comma separated). Default: the profile's.")
  cmd:option("--delta", "Delta modes: stale, dohat, matched, split. Default: all.")
  cmd:option("--profile", "Profile: " .. table.concat(profiles.order, ", ") .. ".", "default")
  cmd:option("--kernels", "Instance-name globs, comma separated (e.g. 'fa8_fwd_*d128*').")
  cmd:option("--pipelines", "Only these pipelines (scalar, mma, wgmma, mfma), comma separated.")
  cmd:flag("--mirror-cpu", "Add CPU instances with every tile the GPU targets use (GPU checks need them).")
    :target("mirror_cpu")
  cmd:option("--targets-file", "A Lua file defining more targets (repeatable).")
    :count("*"):target("targets_file")
  cmd:option("--tuned-dir", "Tuned tables (*.csv from `fa8 tune`) to build in: their instances and lookup rows.")
    :target("tuned_dir")
end

local function enumerate_from(args)
  local reg = targets.registry(args.targets_file)
  local opts = { registry = reg, profile = args.profile, targets = csv(args.target), kernels = args.kernels }
  profiles.get(args.profile)
  for _, t in ipairs(opts.targets) do targets.lookup(reg, t) end
  if args.hdim then opts.hdims = enumerate.parse_hdims(args.hdim); opts.hdim_text = args.hdim end
  if args.layout then opts.layouts = check_values("--layout", csv(args.layout), "layout") end
  if args.delta then opts.deltas = check_values("--delta", csv(args.delta), "delta") end
  if args.pipelines then opts.pipelines = check_values("--pipelines", csv(args.pipelines), "pipeline") end
  opts.mirror_cpu = args.mirror_cpu
  -- a user bundle carries what consumers run, not fa8's test-only f32 (quantization off) instances
  opts.no_test_formats = args.command == "gen" and not args.no_bundle_files
  -- tuned tables: --tuned-dir, else the ones shipped with fa8 (tune/tables), so bundles carry the rows that apply
  local tdir = args.tuned_dir
  if not tdir and require("pl.path").isdir(emit.root .. "/tune/tables") then tdir = emit.root .. "/tune/tables" end
  if tdir then opts.tuned_rows = require("fa8.tuned").load_dir(tdir, emit) end
  return enumerate.run(opts), reg
end

local function meta_for(args, reg, argv)
  local ver = (emit.read_file(emit.root .. "/VERSION") or "0.0.0"):gsub("%s+", "")
  local used = {}
  for _, t in ipairs(csv(args.target)) do used[#used + 1] = targets.lookup(reg, t) end
  -- the recorded command omits --out/--depfile/--line-root (where files go and where the templates were, not
  -- what is generated) so regenerating elsewhere records the same command
  local cmd, skip = { "fa8" }, false
  for _, a in ipairs(argv) do
    if skip then skip = false
    elseif a == "--out" or a == "--depfile" or a == "--line-root" then skip = true
    elseif not (a:match("^%-%-out=") or a:match("^%-%-depfile=") or a:match("^%-%-line%-root=")) then cmd[#cmd + 1] = a end
  end
  return { version = ver, gen_hash = generate.generator_hash(emit.root), targets = used, command = table.concat(cmd, " ") }
end

function M.main(argv)
  local parser = argparse("fa8", "fa8: FP8 attention kernels for training, generated per GPU and head geometry.")
  parser:command_target("command")
  local gen = parser:command("gen", "Generate kernel sources, descriptor table and manifest into a directory.")
  add_filters(gen)
  gen:option("--out", "Output directory (created if missing)."):args(1)
  gen:option("--depfile", "Also write a Make-style depfile (for Ninja).")
  gen:option("--line-root", "Prefix of the template paths in #line directives (default: relative to the "
    .. "source root). The fa8 build passes the source root, so nvcc's dependency files name templates that exist.")
    :target("line_root")
  gen:flag("--no-bundle-files", "Only sources, tables and manifest (the fa8 build uses this).")
    :target("no_bundle_files")
  gen:flag("--list-outputs", "Print the file names a run would write, and exit."):target("list_outputs")
  gen:flag("-q --quiet", "No summary line.")
  local list = parser:command("list", "Print the instances a profile/filter selects.")
  add_filters(list)
  list:flag("--rejected", "Show the configs the constraints pruned, with the reason.")
  list:flag("--bundles", "Show backward bundles instead of instances.")
  list:flag("--json", "Print the selected configs as JSON.")
  list:flag("--tuned", "What this build's runtime picks for a problem, and why (see `fa8 list --tuned --help`).")
  local tcmd = parser:command("targets", "Print the known targets.")
  tcmd:option("--targets-file", "A Lua file defining more targets (repeatable)."):count("*"):target("targets_file")
  local dec = parser:command("decode", "Decode instance names into their configs (JSON).")
  dec:argument("names", "Instance names."):args("+")
  dec:option("--targets-file", "A Lua file defining more targets (repeatable)."):count("*"):target("targets_file")

  local ok, args = parser:pparse(argv)
  if not ok then
    io.stderr:write(parser:get_usage(), "\n\nfa8: error: ", args, "\n")
    return 2
  end
  local run_ok, err = pcall(function()
    if args.command == "gen" then
      if not args.out and not args.list_outputs then error("gen needs --out DIR", 0) end
      local res, reg = enumerate_from(args)
      if args.list_outputs then
        for _, n in ipairs(generate.list_outputs(res)) do print(n) end
        return
      end
      if args.line_root and not require("pl.path").isdir(args.line_root .. "/templates") then
        error(("gen --line-root '%s': no templates/ directory there (pass the fa8 source root)"):format(args.line_root), 0)
      end
      emit.line_root = args.line_root
      local meta = meta_for(args, reg, argv)
      local files = generate.run(res, { out = args.out, depfile = args.depfile, bundle_files = not args.no_bundle_files }, meta)
      if not args.quiet then
        io.stdout:write(("fa8 gen: %d instances, %d bundles -> %s (%d files, %d written, %d unchanged)\n")
          :format(#res.instances, #res.bundles, args.out, #files, emit.written, emit.unchanged))
      end
    elseif args.command == "list" then
      local res = enumerate_from(args)
      if args.json then
        local l = {}
        for _, c in ipairs(res.instances) do l[#l + 1] = outputs.config_json(c) end
        io.stdout:write(outputs.stable_json(l))
      elseif args.rejected then
        for _, r in ipairs(res.rejected) do print(r.name .. "  " .. r.reason) end
      elseif args.bundles then
        for _, b in ipairs(res.bundles) do print(("%s  fwd=%s delta=%s bwd=%s"):format(b.name, b.fwd.name, b.delta.name, b.bwd.name)) end
      else
        for _, c in ipairs(res.instances) do
          print(("%-64s smem=%-7d regs=%d"):format(c.name, c.resources.smem_bytes, c.resources.regs))
        end
      end
    elseif args.command == "targets" then
      local reg = targets.registry(args.targets_file)
      for _, t in ipairs(reg.list) do
        print(("%-8s %-5s %-7s smem=%-7d fp8=%s%s  %s"):format(t.name, t.backend, t.arch, t.smem_bytes,
          table.concat(t.fp8, ","), t.fp8_emulated and ("(+sw " .. table.concat(t.fp8_emulated, ",") .. ")") or "",
          t.description or ""))
      end
    elseif args.command == "decode" then
      local reg = targets.registry(args.targets_file)
      local l = {}
      for _, n in ipairs(args.names) do
        local c = naming.decode(n, reg)
        c.name = n
        c.key = naming.functional_key(c)
        c.resources = require("fa8.constraints").resources(c)
        l[#l + 1] = outputs.config_json(c)
      end
      io.stdout:write(outputs.stable_json(l))
    end
  end)
  if not run_ok then
    io.stderr:write(("fa8 %s: error: %s\n"):format(args.command, tostring(err)))
    return 2
  end
  return 0
end

return M
