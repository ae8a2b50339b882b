-- The environment of function libraries (Redis' function engine, function_lua.c):
-- one table for every library, whose lookups go to the load-time API while
-- FUNCTION LOAD runs a library's code, and to the scripts' globals otherwise, so a
-- callback defined at load time sees the whole API (redis.call ...) when it runs.
-- Loaded into a state made by lua.rs (prelude.lua's sandbox), after the prelude.
local hooks = ...
local globals = hooks.globals
local error, rawget, setmetatable, tostring = error, rawget, setmetatable, tostring

local function missing(name)
  error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 3)
end

-- A read-only table whose missing fields are errors (Redis' error metatable).
local function strict(t)
  return setmetatable({}, {
    __index = function(_, name)
      local v = rawget(t, name)
      if v == nil then missing(name) end
      return v
    end,
    __newindex = function() error('Attempt to modify a readonly table', 2) end,
    __metatable = false,
  })
end

-- What a library's code sees while it loads: redis.register_function, redis.log
-- and the log levels, nothing else (no redis.call, no string, no error ...).
local load_redis = {
  LOG_DEBUG = 0, LOG_VERBOSE = 1, LOG_NOTICE = 2, LOG_WARNING = 3,
  log = globals.redis.log,
}
-- hooks.register is Rust's, set only while a library loads: it records the
-- function or returns the error text to raise.
function load_redis.register_function(...)
  local register = hooks.register
  if not register then
    error('redis.register_function can only be called on FUNCTION LOAD command', 0)
  end
  local err = register(...)
  if err then error(err, 0) end
end
local load_api = { redis = strict(load_redis) }

local current = globals
function hooks.loading(on)
  if on then current = load_api else current = globals end
end

local env = setmetatable({}, {
  __index = function(_, name)
    local v = rawget(current, name)
    if v == nil then missing(name) end
    return v
  end,
  __newindex = function() error('Attempt to modify a readonly table', 2) end,
  __metatable = false,
})
-- Chunks a function makes with loadstring run in this environment too.
hooks.chunk_env = env
return env
