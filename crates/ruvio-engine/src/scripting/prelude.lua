-- The sandbox every script runs in (Redis' script_lua.c rules on stock Lua 5.1):
-- scripts see a read-only proxy of an allow-list of globals; reading a missing
-- global or writing any global is an error, library tables are read-only too.
local hooks, host = ...
local G = _G
local error, rawget, setmetatable, tostring, type = error, rawget, setmetatable, tostring, type

-- Every read-only view handed to scripts: rawset and setmetatable (C functions in
-- lua.rs, which find this set in the registry) refuse them too, as Redis'
-- read-only tables refuse every write.
local protected = setmetatable({}, {__mode = 'k'})
hooks.protected = protected

local function readonly(t)
  local view = setmetatable({}, {
    __index = t,
    __newindex = function() error('Attempt to modify a readonly table', 2) end,
    __metatable = false,
  })
  protected[view] = true
  return view
end

-- loadstring compiles text only (Redis' Lua cannot load bytecode: a binary chunk is
-- parsed as text, and fails as text does), and the chunk runs in the caller's
-- sandbox (hooks.chunk_env), not in the real globals.
local function script_loadstring(source, name)
  local text = source
  if type(source) == 'string' and source:byte(1) == 27 then
    text = ' ' .. source
    name = name or source
  end
  local f, err = G.loadstring(text, name)
  if f then G.setfenv(f, hooks.chunk_env) end
  return f, err
end

local redis = {
  LOG_DEBUG = 0, LOG_VERBOSE = 1, LOG_NOTICE = 2, LOG_WARNING = 3,
  REPL_NONE = 0, REPL_AOF = 1, REPL_SLAVE = 2, REPL_REPLICA = 2, REPL_ALL = 3,
  REDIS_VERSION = host.REDIS_VERSION, REDIS_VERSION_NUM = host.REDIS_VERSION_NUM,
}
-- redis.call and redis.pcall are C functions (so a tail call
-- `return redis.call(...)` keeps the script's frame for the error position).
redis.call = host.call
redis.pcall = host.pcall
function redis.error_reply(e)
  if type(e) ~= 'string' then error('wrong number or type of arguments', 0) end
  if e:sub(1, 1) == '-' then e = e:sub(2) end
  return {err = e}
end
function redis.status_reply(s)
  if type(s) ~= 'string' then error('wrong number or type of arguments', 0) end
  return {ok = s}
end
redis.sha1hex = host.sha1hex
-- C functions (Rust), as Redis's: a tail call `return redis.log(...)` keeps the
-- script's frame, so an error names the script's line as Redis's does.
redis.log = host.log
function redis.setresp(...)
  if select('#', ...) ~= 1 then error('redis.setresp() requires one argument.', 0) end
  local n = tonumber((...))
  if n ~= 2 and n ~= 3 then error('RESP version must be 2 or 3.', 0) end
  host.setresp(n)
end
redis.set_repl = host.set_repl
redis.acl_check_cmd = host.acl_check_cmd
function redis.replicate_commands() return true end
function redis.breakpoint() return false end
function redis.debug() end

local math = {}
for k, v in pairs(G.math) do math[k] = v end
math.random = host.random
math.randomseed = host.randomseed

-- pcall(redis.call, ...) hands the script the error's text, as Redis 7.0 does
-- (a Rust function raises a userdata; its error table waits in hooks.pending).
local function pcall_results(ok, ...)
  if not ok and type((...)) == 'userdata' and hooks.pending then
    local e = hooks.pending
    hooks.pending = nil
    if type(e) == 'table' then e = e.err end
    return false, e
  end
  return ok, ...
end
local function script_pcall(...)
  return pcall_results(G.pcall(...))
end

local globals = {
  assert = G.assert, error = G.error, ipairs = G.ipairs, next = G.next, pairs = G.pairs,
  pcall = script_pcall, xpcall = G.xpcall, rawequal = G.rawequal, rawget = G.rawget,
  rawset = host.rawset, select = G.select, setmetatable = host.setmetatable,
  getmetatable = G.getmetatable, tonumber = G.tonumber, tostring = G.tostring,
  type = G.type, unpack = G.unpack, loadstring = script_loadstring, gcinfo = G.gcinfo,
  _VERSION = G._VERSION,
  coroutine = readonly(G.coroutine), string = readonly(G.string),
  table = readonly(G.table), math = readonly(math), redis = readonly(redis),
  cjson = readonly(host.cjson), bit = readonly(host.bit),
  cmsgpack = readonly(host.cmsgpack), struct = readonly(host.struct),
}
hooks.globals = globals

-- env's __index is the globals table itself (a hit costs no Lua call); a miss falls
-- through to globals' own metatable, which raises Redis' error.
setmetatable(globals, {
  __index = function(_, name)
    error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
  end,
  __metatable = false,
})
local env = setmetatable({}, {
  __index = globals,
  __newindex = function() error('Attempt to modify a readonly table', 2) end,
  __metatable = false,
})
protected[env] = true
hooks.chunk_env = env

-- The strings' metatable: its __index is the read-only string library, and
-- getmetatable('') hands out a read-only view of it (lua.rs installs it).
local string_meta = {__index = globals.string}
string_meta.__metatable = readonly(string_meta)
hooks.string_metatable = string_meta

globals._G = env

-- Redis' error handler: an error becomes {err=..., source=..., line=...}.
function hooks.handler(e)
  -- A Rust function raises a userdata: redis.call's failure left its error table,
  -- a library (cmsgpack, struct) the text a C library would raise.
  if type(e) == 'userdata' and hooks.pending then
    e = hooks.pending
    hooks.pending = nil
    if type(e) == 'table' then return e end
  end
  if type(e) ~= 'table' then e = {err = 'ERR ' .. tostring(e)} end
  local source, line = host.where()
  if source then e.source = source; e.line = line end
  return e
end

return env
