//! One Lua 5.1 state per shard thread, and running a script in it.
//!
//! The sandbox is `prelude.lua` (scripts see a read-only proxy of allowed
//! globals). `redis.call` and `redis.pcall` are C functions made once per state
//! (Lua's API through `mlua::ffi`, as Redis writes them): they reach the engine and
//! the command's context through [`RUNNER`], a pointer to the run in progress that
//! a guard sets for the run's length, so nothing outlives the run.
//!
//! Why one file of about a thousand lines: the run (`Runner`), the C functions that
//! reach it and the guard that installs it share [`RUNNER`]'s unsafe contract; kept
//! together, that contract is checked in one place. What does not touch the run
//! lives beside it (`api.rs`, `luaaux.rs`, `resp.rs`, `server_cmds.rs`).

use std::cell::{Cell, RefCell};

use mlua::{
    ffi, ChunkMode, Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Value,
    VmState,
};
use ruvio_resp::{OwnedArgs, Protocol, Reply};
use std::ffi::c_int;

use super::server_cmds::{Elsewhere, Reach, Reaching, Spreading};
use super::{busy, luaaux, resp, server_cmds};
use crate::command::{arity_fits, flags, CommandTree, ExecCtx, KeySpec, Outcome};
use crate::error::CmdError;
use crate::Engine;
use smallvec::SmallVec;

mod migrate;

/// A script to run: its body, SHA1, keys and arguments.
pub(super) struct Call<'a> {
    pub sha: &'a str,
    pub body: &'a [u8],
    pub keys: &'a [&'a [u8]],
    pub argv: &'a [&'a [u8]],
    pub read_only: bool,
    /// Cluster mode without `allow-cross-slot-keys`: every key the script
    /// reaches must be in one slot (its declared keys' slot, or the first key's).
    pub one_slot: bool,
    /// `allow-oom`: writes go on past `maxmemory`.
    pub allow_oom: bool,
    /// A function's registered callback (FCALL): called with the keys and arguments
    /// as its two parameters, no `KEYS` / `ARGV` globals; `sha` is then its name.
    pub callback: Option<Function>,
    /// The command as the client sent it (FUNCTION STATS shows a running FCALL's).
    pub command: ruvio_resp::Args<'a>,
}

/// A shard's interpreter and the scripts compiled in it.
pub(super) struct State {
    pub(super) lua: Lua,
    /// The script cache generation this state was made in (see SCRIPT FLUSH).
    generation: u64,
    pub(super) hooks: Table,
    env: Table,
    functions: ahash::HashMap<String, Function>,
    /// What every run uses, looked up once: the sandbox's globals (where `KEYS` and
    /// `ARGV` go), the error handler and `xpcall`.
    globals: Table,
    handler: Function,
    xpcall: Function,
    /// [`push_sequences`], which makes `KEYS` and `ARGV`.
    push_sequences: Function,
    /// `hooks.pending`'s name, as a Lua string made once.
    pending_name: mlua::String,
    /// The buffers of `redis.call` (its arguments, the command's encoded reply),
    /// kept from run to run.
    buffers: Option<(OwnedArgs, Vec<u8>)>,
}

thread_local! {
    static STATE: RefCell<Option<State>> = const { RefCell::new(None) };
    /// This shard serves every hash slot, for good (a lone shard, no cluster
    /// bus): its scripts' calls skip asking the host where their keys are.
    static EVERY_SLOT_LOCAL: Cell<bool> = const { Cell::new(true) };
    /// `math.random`'s state (Redis' `redisLrand48`): seeded with the shard's Lua
    /// state and carried on from script to script, as Redis 7 does.
    static RAND48: Cell<u64> = const { Cell::new(0) };
    /// The run in progress on this thread (null between runs): what `redis.call`
    /// reaches. Set by [`run_in`] through [`Installed`] for the run's length.
    static RUNNER: Cell<*mut Runner<'static>> = const { Cell::new(std::ptr::null_mut()) };
    /// The protocol of the run in progress (2 or 3): `redis.setresp` sets it.
    static RESP: Cell<u8> = const { Cell::new(2) };
}

/// Makes a [`Runner`] the one `redis.call` reaches, until dropped.
struct Installed(*mut Runner<'static>);

impl Installed {
    fn new(runner: &mut Runner<'_>) -> Installed {
        let ptr = std::ptr::from_mut(runner).cast::<Runner<'static>>();
        Installed(RUNNER.with(|r| r.replace(ptr)))
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        RUNNER.with(|r| r.set(self.0));
    }
}

/// The protocol `redis.setresp` chose for this run.
fn resp_of() -> u8 {
    RESP.with(|r| r.get())
}

/// The registry name of the sandbox's set of read-only views (`prelude.lua`).
const PROTECTED: &std::ffi::CStr = c"ruvio.protected";

/// Raise Redis' read-only error if argument 1 is one of the sandbox's read-only
/// views (no position: Redis raises it from inside the Lua API).
///
/// SAFETY: `state` is a Lua state inside a C function's call with an argument 1.
unsafe fn refuse_protected(state: *mut ffi::lua_State) {
    // SAFETY: see above; two slots, popped again.
    unsafe {
        ffi::luaL_checkstack(state, 2, std::ptr::null());
        ffi::lua_getfield(state, ffi::LUA_REGISTRYINDEX, PROTECTED.as_ptr());
        ffi::lua_pushvalue(state, 1);
        ffi::lua_rawget(state, -2);
        let protected = ffi::lua_toboolean(state, -1) != 0;
        ffi::lua_pop(state, 2);
        if protected {
            ffi::lua_pushstring(state, c"Attempt to modify a readonly table".as_ptr());
            ffi::lua_error(state);
        }
    }
}

/// The sandbox's `rawset`: Lua's (`luaB_rawset`), refusing the read-only views.
/// A C function, as in Redis, so `return rawset(...)` keeps the script's frame.
unsafe extern "C-unwind" fn sandbox_rawset(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: called by Lua with its state; Lua's own checks first.
    unsafe {
        ffi::luaL_checktype(state, 1, ffi::LUA_TTABLE);
        ffi::luaL_checkany(state, 2);
        ffi::luaL_checkany(state, 3);
        refuse_protected(state);
        ffi::lua_settop(state, 3);
        ffi::lua_rawset(state, 1);
        1
    }
}

/// The sandbox's `setmetatable`: Lua's (`luaB_setmetatable`), refusing the
/// read-only views.
unsafe extern "C-unwind" fn sandbox_setmetatable(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: called by Lua with its state; Lua's own checks first.
    unsafe {
        let kind = ffi::lua_type(state, 2);
        ffi::luaL_checktype(state, 1, ffi::LUA_TTABLE);
        if kind != ffi::LUA_TNIL && kind != ffi::LUA_TTABLE {
            ffi::luaL_argerror(state, 2, c"nil or table expected".as_ptr());
        }
        refuse_protected(state);
        if ffi::luaL_getmetafield_(state, 1, c"__metatable".as_ptr()) != 0 {
            ffi::luaL_error(state, c"cannot change a protected metatable".as_ptr());
        }
        ffi::lua_settop(state, 2);
        ffi::lua_setmetatable(state, 1);
        1
    }
}

/// The registry name of [`convert_reply`].
const CONVERT: &std::ffi::CStr = c"ruvio.convert_reply";

/// `redis.call` as a C function: a failing command raises its error.
unsafe extern "C-unwind" fn c_redis_call(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: called by Lua with its state.
    unsafe { redis_call_on_stack(state, Failure::Raise) }
}

/// `redis.pcall` as a C function: a failing command's error table is returned.
unsafe extern "C-unwind" fn c_redis_pcall(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: called by Lua with its state.
    unsafe { redis_call_on_stack(state, Failure::Return) }
}

/// What `redis.call` (raise) and `redis.pcall` (return) do with an error reply.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Failure {
    Raise,
    Return,
}

/// `redis.call` / `redis.pcall` on Lua's stack, as Redis does: the
/// arguments are read off the stack and the reply pushed onto it, with no mlua
/// handle per value (through mlua, a call's conversions cost more than its
/// command). Errors and the rarer reply types go through [`convert_reply`].
///
/// SAFETY: `state` is the running script's. This frame and the ones above it hold
/// nothing to drop when Lua raises an error across them (an allocation failure,
/// or `convert_reply`'s raise): the runner is a reference into `run_in`'s frame.
unsafe fn redis_call_on_stack(state: *mut ffi::lua_State, failure: Failure) -> c_int {
    // SAFETY: see above; the runner lives until `run_in`'s guard resets RUNNER, after
    // the script ends, and nothing else uses it while a call runs (a command called
    // from a script cannot run a script).
    unsafe {
        let runner = RUNNER.with(|r| r.get());
        if runner.is_null() {
            ffi::lua_pushstring(state, c"redis.call used outside a script run".as_ptr());
            ffi::lua_error(state);
        }
        let runner = &mut *runner;
        runner.call_from_stack(state);
        let out = runner.out.as_slice();
        let top = ffi::lua_gettop(state);
        if out.first() != Some(&b'-') && push_reply(state, out).is_some() {
            return 1;
        }
        ffi::lua_settop(state, top);
        ffi::luaL_checkstack(state, 3, std::ptr::null());
        ffi::lua_getfield(state, ffi::LUA_REGISTRYINDEX, CONVERT.as_ptr());
        ffi::lua_pushboolean(state, (failure == Failure::Raise) as c_int);
        ffi::lua_pushlstring(state, out.as_ptr().cast(), out.len());
        ffi::lua_call(state, 2, 1);
        1
    }
}

/// Push the reply at the start of `buf` as `redis.call` returns it, for the common
/// types (integers, bulk strings and nil, status, arrays of them); `None` for the
/// others (what is left pushed is dropped by the caller). Returns the bytes used.
///
/// SAFETY: `state` is a Lua state; the stack is checked before each push.
unsafe fn push_reply(state: *mut ffi::lua_State, buf: &[u8]) -> Option<usize> {
    let line_end = buf.windows(2).position(|w| w == b"\r\n")?;
    let line = buf.get(1..line_end)?;
    let after = line_end + 2;
    let number = || ruvio_resp::string2ll(line);
    // SAFETY: see above.
    unsafe {
        if ffi::lua_checkstack(state, 3) == 0 {
            return None;
        }
        match buf[0] {
            b':' => ffi::lua_pushnumber(state, number()? as f64),
            b'$' => {
                let n = number()?;
                if n < 0 {
                    ffi::lua_pushboolean(state, 0);
                    return Some(after);
                }
                let bytes = buf.get(after..after.checked_add(n as usize)?)?;
                ffi::lua_pushlstring(state, bytes.as_ptr().cast(), bytes.len());
                return Some(after + bytes.len() + 2);
            }
            b'+' => {
                ffi::lua_createtable(state, 0, 1);
                ffi::lua_pushlstring(state, line.as_ptr().cast(), line.len());
                ffi::lua_setfield(state, -2, c"ok".as_ptr());
            }
            b'*' => {
                let n = number()?;
                if n < 0 {
                    ffi::lua_pushboolean(state, 0);
                    return Some(after);
                }
                ffi::lua_createtable(state, n.min(1 << 16) as c_int, 0);
                let mut at = after;
                for i in 1..=n {
                    at += push_reply(state, buf.get(at..)?)?;
                    ffi::lua_rawseti(state, -2, i as ffi::lua_Integer);
                }
                return Some(at);
            }
            _ => return None,
        }
    }
    Some(after)
}

/// The reply `redis.call` got, for what [`push_reply`] leaves (errors, RESP3's
/// types): `redis.call` raises an error reply, `redis.pcall` returns its table.
fn convert_reply(lua: &Lua, (raise_error, reply): (bool, mlua::String)) -> mlua::Result<Value> {
    match reply_value(lua, &reply.as_bytes())? {
        (false, Value::Table(err)) if raise_error => {
            let hooks: Table = lua.named_registry_value(luaaux::HOOKS)?;
            Err(raise(lua, &hooks, err)?)
        }
        (_, value) => Ok(value),
    }
}

/// Tell this shard thread whether it serves every slot for good: if so, no key
/// a script touches is another shard's or node's, and its calls skip asking the
/// host ([`ScriptHost::reach`]).
pub fn set_every_slot_local(every: bool) {
    EVERY_SLOT_LOCAL.with(|s| s.set(every));
}

/// This shard serves every slot for good (a lone shard): no key is another's.
fn every_slot_is_local() -> bool {
    EVERY_SLOT_LOCAL.with(|s| s.get())
}

/// Redis' `redisSrand48`.
fn srand48(seed: i32) {
    RAND48.with(|r| r.set(((seed as u32 as u64) << 16) | 0x330E));
}

/// Redis' `redisLrand48`: the 48-bit LCG of POSIX `lrand48`, top 31 bits.
fn lrand48() -> i32 {
    RAND48.with(|r| {
        let x = r.get().wrapping_mul(0x5DEE_CE66D).wrapping_add(0xB) & ((1 << 48) - 1);
        r.set(x);
        (x >> 17) as i32
    })
}

/// `math.random([m [, n]])` over `redisLrand48`, as Redis' `redis_math_random`.
fn math_random(_: &Lua, args: MultiValue) -> mlua::Result<f64> {
    let r = (lrand48() % i32::MAX) as f64 / i32::MAX as f64;
    let ints: Vec<f64> = args
        .iter()
        .map(|v| match v {
            Value::Integer(n) => *n as f64,
            Value::Number(n) => *n,
            _ => f64::NAN,
        })
        .collect();
    match ints.as_slice() {
        [] => Ok(r),
        [u] => {
            let u = u.floor();
            if u < 1.0 {
                return Err(mlua::Error::runtime(
                    "bad argument #1 to 'random' (interval is empty)",
                ));
            }
            Ok((r * u).floor() + 1.0)
        }
        [l, u] => {
            let (l, u) = (l.floor(), u.floor());
            if l > u {
                return Err(mlua::Error::runtime(
                    "bad argument #2 to 'random' (interval is empty)",
                ));
            }
            Ok((r * (u - l + 1.0)).floor() + l)
        }
        _ => Err(mlua::Error::runtime("wrong number of arguments")),
    }
}

/// The source and line of the innermost frame of the script (for error texts;
/// level 0 is the script itself when a hook asks).
fn script_position(lua: &Lua, _: ()) -> mlua::Result<(Option<String>, Option<i64>)> {
    for level in 0..64 {
        let found = lua.inspect_stack(level, |d| {
            let source = d.source().source.map(|s| s.into_owned());
            (source, d.current_line())
        });
        match found {
            None => break,
            // The script, a library, or a chunk they made with loadstring; not a
            // C function (`=[C]`) nor the sandbox's own code (`=prelude` ...).
            Some((Some(source), line)) if !source.starts_with('=') => {
                return Ok((Some(source), line.map(|l| l as i64)));
            }
            Some(_) => {}
        }
    }
    Ok((None, None))
}

impl State {
    pub(super) fn new(generation: u64) -> mlua::Result<State> {
        srand48(0);
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH,
            LuaOptions::default(),
        )?;
        let host = lua.create_table()?;
        host.set(
            "sha1hex",
            lua.create_function(|lua, s: mlua::String| {
                lua.create_string(super::sha1_hex(&s.as_bytes()))
            })?,
        )?;
        host.set("random", lua.create_function(math_random)?)?;
        host.set(
            "randomseed",
            lua.create_function(|_, seed: f64| {
                srand48(seed as i64 as i32);
                Ok(())
            })?,
        )?;
        host.set("where", lua.create_function(script_position)?)?;
        host.set(
            "setresp",
            lua.create_function(|_, n: u8| {
                RESP.with(|r| r.set(n));
                Ok(())
            })?,
        )?;
        host.set("log", lua.create_function(super::api::redis_log)?)?;
        host.set("set_repl", lua.create_function(super::api::redis_set_repl)?)?;
        host.set(
            "acl_check_cmd",
            lua.create_function(super::acl::redis_acl_check_cmd)?,
        )?;
        host.set("REDIS_VERSION", crate::REDIS_VERSION)?;
        host.set("REDIS_VERSION_NUM", crate::REDIS_VERSION_NUM)?;
        host.set("cjson", super::libs::cjson(&lua)?)?;
        host.set("bit", super::libs::bit(&lua)?)?;
        host.set("cmsgpack", super::cmsgpack::library(&lua)?)?;
        host.set("struct", super::luastruct::library(&lua)?)?;
        let hooks = lua.create_table()?;
        lua.set_named_registry_value(luaaux::HOOKS, hooks.clone())?;
        // C functions that reach the run in progress through RUNNER (a library's
        // load-time code cannot see them: functions.lua gives it its own `redis`).
        // SAFETY: Lua calls them with its state (see redis_call_on_stack).
        unsafe {
            host.set("call", lua.create_c_function(c_redis_call)?)?;
            host.set("pcall", lua.create_c_function(c_redis_pcall)?)?;
        }
        lua.set_named_registry_value(
            CONVERT.to_str().expect("ASCII"),
            lua.create_function(convert_reply)?,
        )?;
        // SAFETY: Lua calls them with its state.
        unsafe {
            host.set("rawset", lua.create_c_function(sandbox_rawset)?)?;
            host.set("setmetatable", lua.create_c_function(sandbox_setmetatable)?)?;
        }
        // Global: coroutines a script creates inherit it (a per-thread hook would be
        // dropped in them, and a loop inside one could not be killed).
        lua.set_global_hook(
            HookTriggers::new().every_nth_instruction(busy::HOOK_INSTRUCTIONS),
            stop_if_killed,
        )?;
        let env: Table = lua
            .load(include_str!("prelude.lua"))
            .set_name("=prelude")
            .call((hooks.clone(), host))?;
        lua.set_type_metatable::<mlua::String>(Some(hooks.get("string_metatable")?));
        lua.set_named_registry_value(
            PROTECTED.to_str().expect("ASCII"),
            hooks.get::<Table>("protected")?,
        )?;
        Ok(State {
            generation,
            env,
            functions: Default::default(),
            globals: hooks.get("globals")?,
            handler: hooks.get("handler")?,
            xpcall: lua.globals().get("xpcall")?,
            // SAFETY: push_sequences is only called with a live `Sequences`.
            push_sequences: unsafe { lua.create_c_function(push_sequences)? },
            pending_name: lua.create_string("pending")?,
            buffers: None,
            hooks,
            lua,
        })
    }

    /// The compiled function of a script (Redis' `f_<sha>`), compiling it once.
    fn function(&mut self, sha: &str, body: &[u8]) -> Result<Function, CmdError> {
        if let Some(f) = self.functions.get(sha) {
            return Ok(f.clone());
        }
        // A shebang line becomes a comment, so line numbers stay the script's.
        let source: std::borrow::Cow<'_, [u8]> = if body.starts_with(b"#!") {
            [b"--", body].concat().into()
        } else {
            body.into()
        };
        let f = self
            .lua
            .load(source.as_ref())
            .set_name("@user_script")
            .set_mode(ChunkMode::Text)
            .set_environment(self.env.clone())
            .into_function()
            .map_err(|e| {
                let message = match &e {
                    mlua::Error::SyntaxError { message, .. } => message.clone(),
                    other => other.to_string(),
                };
                CmdError::quoted(
                    "ERR Error compiling script (new function): ",
                    message.as_bytes(),
                    "",
                )
            })?;
        self.functions.insert(sha.to_owned(), f.clone());
        Ok(f)
    }
}

/// The count hook: past `busy-reply-threshold` the shard's other clients are
/// answered first (see `busy.rs`); then a script SCRIPT KILL stopped raises Redis'
/// error. The request stays, so the next check raises again: a script's `pcall`
/// cannot swallow it.
fn stop_if_killed(lua: &Lua, _: &mlua::Debug<'_>) -> mlua::Result<VmState> {
    busy::serve_others_if_busy();
    if !busy::kill_requested() {
        return Ok(VmState::Continue);
    }
    let hooks: Table = lua.named_registry_value(luaaux::HOOKS)?;
    let (_, err) = error_table(lua, busy::KILLED.as_bytes())?;
    match err {
        Value::Table(err) => Err(raise(lua, &hooks, err)?),
        _ => Ok(VmState::Continue),
    }
}

/// Run `f` on this thread's state, made (or remade after SCRIPT FLUSH) first.
fn with_state<R>(
    generation: u64,
    f: impl FnOnce(&mut State) -> Result<R, CmdError>,
) -> Result<R, CmdError> {
    STATE.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.as_ref().is_none_or(|s| s.generation != generation) {
            *slot = Some(State::new(generation).map_err(internal)?);
        }
        f(slot.as_mut().expect("state made above"))
    })
}

pub(super) fn internal(e: mlua::Error) -> CmdError {
    CmdError::quoted("ERR ", e.to_string().as_bytes(), "")
}

/// Compile `body` on this shard (SCRIPT LOAD reports syntax errors).
pub(super) fn compile_check(generation: u64, sha: &str, body: &[u8]) -> Result<(), CmdError> {
    with_state(generation, |state| state.function(sha, body).map(|_| ()))
}

/// The largest `redis.call` buffer kept for the next run (a big reply's is freed).
const KEPT_BUFFER_BYTES: usize = 64 * 1024;

/// What `redis.call` needs during one run.
struct Runner<'e> {
    engine: &'e mut Engine,
    ctx: &'e mut ExecCtx,
    keys: &'e [&'e [u8]],
    /// The database the script started in: its declared keys are there (after
    /// SELECT, a key of the same name is another key).
    start_db: usize,
    read_only: bool,
    /// The arguments of the call in progress, and its encoded reply: buffers reused
    /// from call to call.
    args: OwnedArgs,
    out: Vec<u8>,
    /// The script called a write command (or published): it cannot start over.
    wrote: bool,
    /// The script is starting over elsewhere ([`Reach::StartOver`]): every later
    /// call fails, so nothing more changes.
    starting_over: bool,
    /// [`Call::one_slot`].
    one_slot: bool,
    /// Past `maxmemory` when the script started and without `allow-oom`: its
    /// first write that may grow memory is refused (Redis's `scriptVerifyOOM`).
    oom_refuses_first_write: bool,
    /// The slot the script's keys are in so far (Redis's `original_c->slot`).
    slot: Option<u16>,
}

thread_local! {
    /// The server was past `maxmemory` when the script about to run was called
    /// ([`set_oom_at_start`]).
    static OOM_AT_START: Cell<bool> = const { Cell::new(false) };
    /// The last script run on this thread stopped to start over ([`take_start_over`]).
    static STARTING_OVER: Cell<bool> = const { Cell::new(false) };
}

/// Tell the script about to run on this thread whether the server is past
/// `maxmemory` (Redis's `pre_command_oom_state`): a script without `allow-oom`
/// then gets OOM for its first write that may grow memory.
pub fn set_oom_at_start(over: bool) {
    OOM_AT_START.with(|o| o.set(over));
}

/// True when the script that just ran stopped to start over where it can reach
/// every key ([`Reach::StartOver`]): its reply is to be discarded (it changed
/// nothing).
pub fn take_start_over() -> bool {
    STARTING_OVER.with(|s| s.replace(false))
}

/// The error a call of a script that is starting over gets (no client sees it).
const STARTING_OVER_TEXT: &[u8] = b"ERR the script starts over on another shard";
const NON_LOCAL: &[u8] = b"ERR Script attempted to access a non local key in a cluster node";

/// Run a script and write its reply.
pub(super) fn run(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    reply: &mut Reply<'_>,
    generation: u64,
    call: &Call<'_>,
) -> Result<(), CmdError> {
    with_state(generation, |state| run_in(state, engine, ctx, reply, call))
}

/// Run a script, or a function's callback, in `state` and write its reply.
pub(super) fn run_in(
    state: &mut State,
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    reply: &mut Reply<'_>,
    call: &Call<'_>,
) -> Result<(), CmdError> {
    let f = match &call.callback {
        Some(callback) => {
            let (keys, argv) = string_sequences(state, call.keys, call.argv).map_err(internal)?;
            callback.bind((keys, argv)).map_err(internal)?
        }
        None => {
            set_keys_and_argv(state, call.keys, call.argv).map_err(internal)?;
            state.function(call.sha, call.body)?
        }
    };
    RESP.with(|r| r.set(2));
    state
        .hooks
        .raw_set(&state.pending_name, Value::Nil)
        .map_err(internal)?;
    let (args, out) = state.buffers.take().unwrap_or_default();
    let start_db = ctx.db;
    let mut runner = Runner {
        engine,
        ctx,
        keys: call.keys,
        start_db,
        read_only: call.read_only,
        args,
        out,
        wrote: false,
        starting_over: false,
        one_slot: call.one_slot,
        oom_refuses_first_write: !call.allow_oom && OOM_AT_START.with(|o| o.get()),
        slot: call.keys.first().map(|k| crate::slot::key_slot(k)),
    };
    let outcome = {
        let _installed = Installed::new(&mut runner);
        let function = call.callback.is_some().then_some((call.sha, call.command));
        let running = busy::Running::start(function);
        let result = state.xpcall.call::<(bool, Value)>((f, &state.handler));
        drop(running);
        result.map_err(internal)?
    };
    if runner.starting_over {
        STARTING_OVER.with(|s| s.set(true));
    }
    if runner.out.capacity() <= KEPT_BUFFER_BYTES && runner.args.capacity() <= KEPT_BUFFER_BYTES {
        state.buffers = Some((runner.args, runner.out));
    }
    let resp_version = resp_of();
    match outcome {
        (true, value) => {
            resp::lua_to_reply(&value, resp_version, reply);
            Ok(())
        }
        (false, Value::Table(err)) => Err(script_error(&err, call.sha)),
        (false, other) => Err(CmdError::quoted(
            "ERR ",
            format!("{other:?}").as_bytes(),
            "",
        )),
    }
}

/// A script's keys and arguments, handed to [`push_sequences`] by address.
struct Sequences<'a> {
    keys: &'a [&'a [u8]],
    argv: &'a [&'a [u8]],
}

/// A C function: `(sequences)` returns the Lua sequences of a [`Sequences`]' keys
/// and arguments as strings (a script's `KEYS` and `ARGV`); given a table as a
/// second argument, stores them in it as `KEYS` and `ARGV` instead. Built on the
/// stack with Lua's API, as Redis does: through mlua's handles each string and
/// table cost several steps, and they were a sixth of a short script's time.
///
/// SAFETY (for Lua): argument 1 is the address of a live `Sequences` (only
/// [`string_sequences`] and [`set_keys_and_argv`] call it); a C function may use
/// 20 stack slots and this one uses at most 5. An allocation failure raises a Lua
/// error across this frame, which holds nothing to drop.
unsafe extern "C-unwind" fn push_sequences(state: *mut mlua::ffi::lua_State) -> std::ffi::c_int {
    // SAFETY: see above.
    unsafe {
        let sequences = &*(ffi::lua_touserdata(state, 1) as *const Sequences<'_>);
        let into_table = ffi::lua_type(state, 2) == ffi::LUA_TTABLE;
        for (name, items) in [(c"KEYS", sequences.keys), (c"ARGV", sequences.argv)] {
            if into_table {
                ffi::lua_pushstring(state, name.as_ptr());
            }
            ffi::lua_createtable(state, items.len().try_into().unwrap_or(0), 0);
            for (i, item) in items.iter().enumerate() {
                ffi::lua_pushlstring(state, item.as_ptr().cast(), item.len());
                ffi::lua_rawseti(state, -2, (i + 1) as ffi::lua_Integer);
            }
            if into_table {
                ffi::lua_rawset(state, 2);
            }
        }
        if into_table {
            0
        } else {
            2
        }
    }
}

/// Lua sequences of `keys` and of `argv` as strings (a function's two arguments).
fn string_sequences(state: &State, keys: &[&[u8]], argv: &[&[u8]]) -> mlua::Result<(Table, Table)> {
    let sequences = Sequences { keys, argv };
    let address = mlua::LightUserData(std::ptr::from_ref(&sequences).cast_mut().cast());
    state.push_sequences.call(address)
}

/// A script's `KEYS` and `ARGV` globals.
fn set_keys_and_argv(state: &State, keys: &[&[u8]], argv: &[&[u8]]) -> mlua::Result<()> {
    let sequences = Sequences { keys, argv };
    let address = mlua::LightUserData(std::ptr::from_ref(&sequences).cast_mut().cast());
    state.push_sequences.call((address, &state.globals))
}

/// `<err> script: <sha>, on <source>:<line>.` (Redis 7's text for an error that
/// escaped the script).
fn script_error(err: &Table, sha: &str) -> CmdError {
    let text = err
        .raw_get::<mlua::String>("err")
        .map(|s| s.as_bytes().to_vec())
        .unwrap_or_default();
    let source = err.raw_get::<String>("source");
    let line = err.raw_get::<i64>("line");
    let suffix = match (source, line) {
        (Ok(source), Ok(line)) => format!(" script: {sha}, on {source}:{line}."),
        _ => format!(" script: {sha}"),
    };
    CmdError::quoted("", &text, &suffix)
}

/// `redis.call`'s failure: the error table, with the script's position (the
/// calling frame, kept even in a tail call since redis.call is a C function), left in
/// `hooks.pending` for the error handler; a Rust function can only raise a
/// userdata, which the handler swaps for it.
pub(super) fn raise(lua: &Lua, hooks: &Table, err: Table) -> mlua::Result<mlua::Error> {
    let (source, line) = script_position(lua, ())?;
    err.raw_set("source", source)?;
    err.raw_set("line", line)?;
    let text = err.raw_get::<mlua::String>("err")?.to_string_lossy();
    hooks.raw_set("pending", err)?;
    Ok(mlua::Error::runtime(text))
}

/// A `redis.call` / `redis.pcall` failure: the error table the script sees.
fn error_table(lua: &Lua, text: &[u8]) -> mlua::Result<(bool, Value)> {
    let t = lua.create_table()?;
    t.raw_set("err", lua.create_string(text)?)?;
    Ok((false, Value::Table(t)))
}

/// A Lua number as `redis.call` passes it: `%.17g`, as Redis 7.0 prints it
/// (`0.10000000000000001`, `1e+20`, `-0`), written through `scratch` (left empty).
fn push_number(args: &mut OwnedArgs, scratch: &mut Vec<u8>, n: f64) {
    scratch.clear();
    ruvio_resp::format_double_g17(n, scratch);
    args.push(scratch);
    scratch.clear();
}

impl Runner<'_> {
    /// `redis.call(name, args...)` / `redis.pcall` with the arguments on `state`'s
    /// stack, in the protocol `redis.setresp` chose: the command's reply, or the
    /// error the script's call gets, encoded in `self.out`.
    ///
    /// SAFETY: `state` is the running script's, inside a C function's call.
    unsafe fn call_from_stack(&mut self, state: *mut ffi::lua_State) {
        let resp = match resp_of() {
            3 => Protocol::Resp3,
            _ => Protocol::Resp2,
        };
        self.out.clear();
        if busy::kill_requested() {
            // A killed script that caught the error runs no more commands (Redis
            // checks on every line from then on).
            return self.fail(busy::KILLED.as_bytes());
        }
        // SAFETY: see above.
        let (count, all_usable) = unsafe { self.read_arguments(state) };
        if count == 0 {
            return self.fail(b"ERR Please specify at least one argument for this redis lib call");
        }
        if !all_usable {
            return self.fail(b"ERR Lua redis lib command arguments must be strings or integers");
        }
        let args = std::mem::take(&mut self.args);
        self.run(resp, args.args());
        self.args = args;
    }

    /// The call's arguments into `self.args`: their count, and whether every one
    /// was a string or a number.
    ///
    /// SAFETY: `state` is a Lua state.
    unsafe fn read_arguments(&mut self, state: *mut ffi::lua_State) -> (c_int, bool) {
        self.args.clear();
        // SAFETY: see above; indexes 1..=top are the call's arguments.
        unsafe {
            let count = ffi::lua_gettop(state);
            for i in 1..=count {
                match ffi::lua_type(state, i) {
                    ffi::LUA_TSTRING => {
                        let mut len = 0;
                        let ptr = ffi::lua_tolstring(state, i, &mut len);
                        self.args.push(std::slice::from_raw_parts(ptr.cast(), len));
                    }
                    ffi::LUA_TNUMBER => {
                        // `out` is empty until the call's reply.
                        push_number(&mut self.args, &mut self.out, ffi::lua_tonumber(state, i))
                    }
                    _ => return (count, false),
                }
            }
            (count, true)
        }
    }

    /// The call's answer: the error reply `text` (a table `{err = text}` in Lua).
    fn fail(&mut self, text: &[u8]) {
        self.out.clear();
        self.out.push(b'-');
        self.out.extend_from_slice(text);
        self.out.extend_from_slice(b"\r\n");
    }

    /// Run the command `args` as a script's call may, its reply into `self.out`.
    fn run(&mut self, resp: Protocol, args: ruvio_resp::Args<'_>) {
        if self.starting_over {
            return self.fail(STARTING_OVER_TEXT);
        }
        let Some(top) = Engine::find_command(args.get(0)) else {
            return self.call_server(resp, args);
        };
        if !arity_fits(top.meta.arity, args.len()) {
            return self.fail(b"ERR Wrong number of args calling Redis command from script");
        }
        let row = match top.resolve(args) {
            Ok(row) => row,
            Err(CmdError::WrongArity(_)) => {
                return self.fail(b"ERR Wrong number of args calling Redis command from script")
            }
            Err(e) => return self.fail(e.message().as_bytes()),
        };
        if row.meta.has(flags::NOSCRIPT) {
            return self.fail(b"ERR This Redis command is not allowed from script");
        }
        if let Err(text) = super::acl::check_call(&row.meta, args) {
            return self.fail(text.as_bytes());
        }
        if self.read_only && row.meta.has(flags::WRITE) {
            return self.fail(b"ERR Write commands are not allowed from read-only scripts.");
        }
        if row.meta.has(flags::WRITE) && server_cmds::refuses_writes() {
            return self.fail(server_cmds::READONLY_REPLICA);
        }
        if !row.meta.has(flags::STALE) && server_cmds::refuses_stale() {
            return self.fail(server_cmds::STALE_REPLICA);
        }
        if !every_slot_is_local() {
            if let Err(text) = self.reach_foreign_keys(&row.meta.keys, args) {
                return self.fail(text);
            }
        }
        if self.oom_refuses_first_write && !self.wrote && row.meta.has(flags::DENYOOM) {
            return self.fail(b"OOM command not allowed when used memory > 'maxmemory'.");
        }
        if self.one_slot {
            if let Err(text) = self.keep_one_slot(&row.meta.keys, args) {
                return self.fail(text);
            }
        }
        let Some(handler) = row.handler else {
            return self.fail(b"ERR Unknown Redis command called from script");
        };
        server_cmds::monitor(self.ctx.db, args);
        if !every_slot_is_local() && server_cmds::SPREAD.contains(&row.meta.name) {
            return self.run_spread(resp, handler, args);
        }
        let others = match self.other_shards_parts(row.meta.name, args, resp) {
            Ok(others) => others,
            Err(text) => return self.fail(text),
        };
        if row.meta.name == "dbsize" {
            // The whole server's count, not only this shard's (see `server_cmds`).
            let here = self.engine.db(self.ctx.db).len();
            let mut reply = Reply::new(&mut self.out, resp);
            reply.int(server_cmds::dbsize(here, self.ctx.db) as i64);
            return;
        }
        if row.meta.has(flags::WRITE) {
            busy::note_write();
            self.wrote = true;
        }
        let engine = &mut *self.engine;
        let mut reply = Reply::new(&mut self.out, resp);
        match self
            .ctx
            .run_inner(args, |ctx| handler(engine, ctx, args, &mut reply))
        {
            Ok(Outcome::Done) if row.meta.has(flags::READONLY) => {
                self.ctx.read(&row.meta.keys, args)
            }
            Ok(Outcome::Done) => {}
            Ok(Outcome::Block(_)) => reply.null_array(),
            Err(e) => e.write(&mut reply),
        }
        if let Some(parts) = others {
            server_cmds::merge_parts(&mut self.out, parts);
        }
    }

    /// SCAN or RANDOMKEY when other shards hold keys ([`server_cmds::SPREAD`]): the
    /// host asks the shards that answer, this one through the engine here.
    fn run_spread(
        &mut self,
        resp: Protocol,
        handler: crate::command::EngineFn,
        args: ruvio_resp::Args<'_>,
    ) {
        let call = Spreading {
            call: Elsewhere {
                db: self.ctx.db,
                args,
                resp3: resp == Protocol::Resp3,
                wrote: self.wrote || !self.ctx.effects.published.is_empty(),
            },
            here_keys: self.engine.db(self.ctx.db).len() as u64,
            pick: self.engine.next_random() as u32,
        };
        let (engine, ctx) = (&mut *self.engine, &mut *self.ctx);
        let mut here = |args: ruvio_resp::Args<'_>| {
            let mut out = Vec::new();
            let mut reply = Reply::new(&mut out, resp);
            match ctx.run_inner(args, |ctx| handler(engine, ctx, args, &mut reply)) {
                Ok(_) => {}
                Err(e) => e.write(&mut reply),
            }
            out
        };
        match server_cmds::spread(call, &mut here) {
            Ok(reply) => {
                self.out.clear();
                self.out.extend_from_slice(&reply);
            }
            Err(Reach::StartOver) => {
                self.starting_over = true;
                self.fail(STARTING_OVER_TEXT);
            }
            Err(_) => self.fail(NON_LOCAL),
        }
    }

    /// For a command each shard answers for its part (KEYS, FLUSHDB, FLUSHALL) when
    /// other shards hold keys: their replies, from the host (which may take the
    /// script lock for them); or the error the call gets.
    fn other_shards_parts(
        &mut self,
        name: &str,
        args: ruvio_resp::Args<'_>,
        resp: Protocol,
    ) -> Result<Option<Vec<Vec<u8>>>, &'static [u8]> {
        if every_slot_is_local() || !server_cmds::EVERY_SHARD.contains(&name) {
            return Ok(None);
        }
        let call = Elsewhere {
            db: self.ctx.db,
            args,
            resp3: resp == Protocol::Resp3,
            wrote: self.wrote || !self.ctx.effects.published.is_empty(),
        };
        match server_cmds::elsewhere(call) {
            Ok(parts) => Ok(Some(parts)),
            Err(Reach::StartOver) => {
                self.starting_over = true;
                Err(STARTING_OVER_TEXT)
            }
            Err(Reach::Unsupported) => Err(server_cmds::SWAPDB_HOLDING),
            Err(_) => Err(NON_LOCAL),
        }
    }

    /// The keys of `args` (at the positions `keys` gives) that the script did not
    /// declare, shown to the host, which brings those of other shards here
    /// ([`ScriptHost::reach`]) and notes whether some are outside the declared keys'
    /// slots (Redis Cluster's rule); or the error the call gets.
    fn reach_foreign_keys(
        &mut self,
        keys: &KeySpec,
        args: ruvio_resp::Args<'_>,
    ) -> Result<(), &'static [u8]> {
        let declared = if self.ctx.db == self.start_db {
            self.keys
        } else {
            &[]
        };
        let undeclared: SmallVec<[&[u8]; 4]> = keys
            .positions(args)
            .into_iter()
            .map(|p| args.get(p))
            .filter(|key| !declared.contains(key))
            .collect();
        if undeclared.is_empty() {
            return Ok(());
        }
        let outside = undeclared.iter().any(|key| {
            let slot = crate::slot::key_slot(key);
            !declared.iter().any(|d| crate::slot::key_slot(d) == slot)
        });
        let wrote = self.wrote || !self.ctx.effects.published.is_empty();
        let call = Reaching {
            db: self.ctx.db,
            keys: &undeclared,
            outside,
            wrote,
        };
        match server_cmds::reach(self.engine, call) {
            Reach::Here => Ok(()),
            Reach::StartOver => {
                self.starting_over = true;
                Err(STARTING_OVER_TEXT)
            }
            Reach::Refused | Reach::Unsupported => Err(NON_LOCAL),
        }
    }

    /// Cluster mode without `allow-cross-slot-keys`: the call's keys must be in
    /// the slot the script's keys are in so far (the first key's sets it).
    fn keep_one_slot(
        &mut self,
        keys: &KeySpec,
        args: ruvio_resp::Args<'_>,
    ) -> Result<(), &'static [u8]> {
        for position in keys.positions(args) {
            let slot = crate::slot::key_slot(args.get(position));
            match self.slot {
                None => self.slot = Some(slot),
                Some(held) if held != slot => {
                    return Err(
                        b"ERR Script attempted to access keys that do not hash to the same slot",
                    )
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// A server command (TIME, PING, ...: see `server_cmds`; MIGRATE: `migrate`).
    fn call_server(&mut self, resp: Protocol, args: ruvio_resp::Args<'_>) {
        let meta = match server_cmds::checked(args, self.read_only) {
            Ok(meta) => meta,
            Err(text) => return self.fail(text.as_bytes()),
        };
        if meta.name == "migrate" {
            return self.migrate(resp, meta, args);
        }
        let mut reply = Reply::new(&mut self.out, resp);
        if let Err(text) = server_cmds::call(self.engine, self.ctx, meta, args, &mut reply) {
            self.fail(text.as_bytes());
        }
    }
}

/// A command's reply as `redis.call` returns it: `(false, error table)` for an error.
fn reply_value(lua: &Lua, out: &[u8]) -> mlua::Result<(bool, Value)> {
    let (value, _) = resp::reply_to_lua(lua, out)?;
    // An error reply is the only one that becomes an `{err = ...}` table.
    Ok((out.first() != Some(&b'-'), value))
}
