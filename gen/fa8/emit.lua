-- Template expansion and file output.
-- Templates are Penlight templates with C-friendly escapes: lines starting with '%' are Lua, `$(expr)` is
-- substituted, nothing is HTML-escaped. Before expansion every run of literal lines that follows Lua code gets
-- a `#line N "templates/..."` directive, so compiler errors point at template lines, loops included.
local template = require("pl.template")

local M = {}

M.root = nil          -- fa8 source root (set by main.lua); template paths in #line are relative to it
M.line_root = nil     -- prefix of the #line paths (`gen --line-root`); nil: relative to the source root
M.written, M.unchanged = 0, 0
local deps, outputs = {}, {}

local function read_file(path)
  local fh, err = io.open(path, "rb")
  if not fh then return nil, err end
  local s = fh:read("a")
  fh:close()
  return s
end
M.read_file = read_file

function M.add_dep(path) deps[path] = true end

-- Insert #line directives; `relpath` is what the compiler will print.
function M.add_line_directives(text, relpath)
  local out, need, n = {}, true, 0
  for line in (text .. (text:sub(-1) == "\n" and "" or "\n")):gmatch("([^\n]*)\n") do
    n = n + 1
    if line:sub(1, 1) == "%" then
      need = true
    elseif need then
      out[#out + 1] = ('#line %d "%s"'):format(n, relpath)
      need = false
    end
    out[#out + 1] = line
  end
  return table.concat(out, "\n") .. "\n"
end

local compiled = {}

-- Expand templates/<relpath> with `env` (plus the Lua standard library).
function M.expand(relpath, env, opts)
  local path = M.root .. "/templates/" .. relpath
  M.add_dep(path)
  local text, err = read_file(path)
  if not text then error(("template %s: cannot read: %s"):format(path, err), 0) end
  if not (opts and opts.no_line) then
    text = M.add_line_directives(text, (M.line_root and M.line_root .. "/" or "") .. "templates/" .. relpath)
  end
  local e = setmetatable({ _escape = "%%", _parent = _G, _debug = false }, { __index = env })
  for k, v in pairs(env) do e[k] = v end
  local out, terr = template.substitute(text, e)
  if not out then error(("template %s: %s"):format(relpath, tostring(terr)), 0) end
  compiled[relpath] = true
  return out
end

-- Write only when the content differs, so Ninja does not rebuild what did not change.
function M.write(dir, name, content)
  local path = dir .. "/" .. name
  outputs[#outputs + 1] = path
  if read_file(path) == content then M.unchanged = M.unchanged + 1; return path end
  local fh, err = io.open(path, "wb")
  if not fh then error(("--out %s: cannot write %s: %s"):format(dir, name, err), 0) end
  fh:write(content)
  fh:close()
  M.written = M.written + 1
  return path
end

function M.copy(dir, src, name)
  M.add_dep(src)
  local s, err = read_file(src)
  if not s then error(("cannot read %s: %s"):format(src, err), 0) end
  return M.write(dir, name, s)
end

-- Make-style depfile: the first output depends on every template, support file and generator module read.
function M.write_depfile(path, target)
  for name, _ in pairs(package.loaded) do
    if type(name) == "string" and name:match("^fa8%.") then
      local p = package.searchpath(name, package.path)
      if p then deps[p] = true end
    end
  end
  local list = {}
  for p in pairs(deps) do list[#list + 1] = (p:gsub(" ", "\\ ")) end
  table.sort(list)
  local fh, err = io.open(path, "wb")
  if not fh then error(("--depfile %s: cannot write: %s"):format(path, err), 0) end
  fh:write(target:gsub(" ", "\\ "), ": ", table.concat(list, " \\\n  "), "\n")
  fh:close()
end

function M.outputs() return outputs end

return M
