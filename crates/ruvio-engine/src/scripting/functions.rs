//! Redis 7 functions: libraries of Lua functions loaded with FUNCTION LOAD
//! (`#!lua name=<lib>` and `redis.register_function`), called with FCALL and
//! FCALL_RO.
//!
//! Why per shard thread: a function runs where its keys live, so every shard
//! holds every library, compiled into its own Lua state (a second state beside the
//! scripts' one, as Redis keeps one for its function engine: SCRIPT FLUSH leaves
//! functions alone). The server keeps the shards' libraries equal: a change made on
//! one shard is sent to the others as the whole set, a FUNCTION DUMP payload
//! restored with FLUSH ([`replace_all`]), so every shard ends with the same
//! libraries whatever the order of changes; the same payload is what the server
//! persists.
//!
//! Loading runs the library's code once with an environment that holds only the
//! load-time API (`functions.lua`); the callbacks it registers keep that
//! environment, which looks up the scripts' full API once loading is over.
//! Libraries are kept by name (Redis' names are case-sensitive), functions are
//! found ignoring case, as in Redis.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};

use mlua::{ChunkMode, Function, MultiValue, Table, Value};
use ruvio_resp::{Args, Reply};

use super::lua::{self, internal};
use super::SHEBANG_FLAGS;
use crate::args::eq_ci;
use crate::command::{CmdResult, ExecCtx, Outcome};
use crate::error::CmdError;
use crate::rdb;
use crate::Engine;

/// RDB's opcode for a function library (`RDB_OPCODE_FUNCTION2`).
const RDB_OPCODE_FUNCTION2: u8 = 245;
/// The record of Redis 7.0's release candidates (`RDB_OPCODE_FUNCTION_PRE_GA`).
const RDB_OPCODE_FUNCTION_PRE_GA: u8 = 246;

/// The one engine Ruvio has, as FUNCTION LIST and STATS name it.
const ENGINE_NAME: &str = "LUA";

/// The flag bit of `no-writes` (the index of the name in [`SHEBANG_FLAGS`]).
const NO_WRITES: u8 = 1;
/// The flag bit of `allow-oom`.
const ALLOW_OOM: u8 = 1 << 1;
/// The flag bit of `allow-stale`.
const ALLOW_STALE: u8 = 1 << 2;
/// The flag bit of `no-cluster`.
const NO_CLUSTER: u8 = 1 << 3;
/// The flag bit of `allow-cross-slot-keys`.
const ALLOW_CROSS_SLOT: u8 = 1 << 4;

/// Whether FCALL / FCALL_RO of this function is refused past `maxmemory`: one
/// that neither allows OOM nor promises no writes (Redis 7). An unknown function
/// is FCALL's own error, later.
pub fn denies_oom(args: Args<'_>) -> bool {
    if args.len() < 2 {
        return false;
    }
    with_libraries(|l| l.find(args.get(1)).map(|func| func.flags))
        .is_some_and(|flags| flags & (ALLOW_OOM | NO_WRITES) == 0)
}

/// Whether FCALL / FCALL_RO of this function counts as a write before it runs:
/// one that does not promise `no-writes` (Redis 7). An unknown function is
/// FCALL's own error, later.
pub fn may_write(args: Args<'_>) -> bool {
    if args.len() < 2 {
        return false;
    }
    with_libraries(|l| l.find(args.get(1)).map(|func| func.flags))
        .is_some_and(|flags| flags & NO_WRITES == 0)
}

/// Whether this FCALL / FCALL_RO (`args`) gets past a stale replica's check
/// before it runs: only a function flagged `allow-stale` (Redis 7's
/// `scriptFlagsToCmdFlags`); an unknown function passes to be the command's own
/// error.
pub fn runs_stale(args: Args<'_>) -> bool {
    if args.len() < 2 {
        return true;
    }
    with_libraries(|l| l.find(args.get(1)).map(|func| func.flags))
        .is_none_or(|flags| flags & ALLOW_STALE != 0)
}

/// A registered function.
struct Func {
    name: String,
    description: Option<Vec<u8>>,
    /// Bit i: `SHEBANG_FLAGS[i]`.
    flags: u8,
    callback: Function,
}

/// A loaded library: its code and its functions, in registration order.
struct Library {
    code: Vec<u8>,
    functions: Vec<Func>,
}

/// A shard's function engine: the Lua state the libraries are compiled in and
/// the environment they see.
struct LuaEngine {
    state: lua::State,
    env: Table,
}

/// A shard's libraries by name.
#[derive(Default)]
struct Libraries {
    libraries: BTreeMap<String, Library>,
    /// Every function by its lower-case name: its library and its place there
    /// (FCALL's lookup; remade after each change).
    by_name: HashMap<Vec<u8>, (String, usize)>,
}

// Two cells, so that a running function holds only the engine: what reads the
// libraries (FUNCTION STATS, LIST) can run beside it.
thread_local! {
    static ENGINE: RefCell<Option<LuaEngine>> = const { RefCell::new(None) };
    static LIBRARIES: RefCell<Libraries> = RefCell::default();
}

/// Run `f` on this thread's function engine, made at first use.
fn with_engine<R>(f: impl FnOnce(&mut LuaEngine) -> Result<R, CmdError>) -> Result<R, CmdError> {
    ENGINE.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(LuaEngine::new().map_err(internal)?);
        }
        f(slot.as_mut().expect("made above"))
    })
}

/// Run `f` on this thread's libraries.
fn with_libraries<R>(f: impl FnOnce(&mut Libraries) -> R) -> R {
    LIBRARIES.with(|cell| f(&mut cell.borrow_mut()))
}

/// Redis' `functionsVerifyName`: letters, digits and underscores, at least one.
fn valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_')
}

/// The library name of `code`'s first line (`#!lua name=<lib>`), with Redis'
/// errors, checked in Redis' order.
fn library_name(code: &[u8]) -> Result<String, CmdError> {
    if !code.starts_with(b"#!") {
        return Err(line("ERR Missing library metadata"));
    }
    let end = code
        .iter()
        .position(|&b| b == b'\n')
        .ok_or_else(|| line("ERR Invalid library metadata"))?;
    let mut parts = code[..end]
        .split(|b| b.is_ascii_whitespace())
        .filter(|p| !p.is_empty());
    let engine = parts.next().and_then(|p| p.get(2..)).unwrap_or_default();
    let mut name: Option<&[u8]> = None;
    for part in parts {
        match part.get(..5) {
            Some(key) if eq_ci(key, "name=") => {
                if name.is_some() {
                    return Err(line(
                        "ERR Invalid metadata value, name argument was given multiple times",
                    ));
                }
                name = Some(&part[5..]);
            }
            _ => {
                return Err(CmdError::quoted(
                    "ERR Invalid metadata value given: ",
                    part,
                    "",
                ))
            }
        }
    }
    let name = name.ok_or_else(|| line("ERR Library name was not given"))?;
    if !valid_name(name) {
        return Err(line("ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long"));
    }
    if !eq_ci(engine, ENGINE_NAME) {
        return Err(CmdError::quoted("ERR Engine '", engine, "' not found"));
    }
    Ok(String::from_utf8_lossy(name).into_owned())
}

fn line(text: &str) -> CmdError {
    CmdError::Line(text.as_bytes().to_vec())
}

/// A Lua value Redis reads with `lua_isstring` / `lua_tostring`: strings, and
/// numbers as Lua prints them.
fn lua_string(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        Value::Integer(n) => Some(n.to_string().into_bytes()),
        Value::Number(n) => Some(format!("{n}").into_bytes()),
        _ => None,
    }
}

/// The flags of a `flags = {...}` table (`Err`: Redis' `unknown flag given`).
fn read_flags(table: &Table) -> Result<u8, &'static str> {
    let mut flags = 0;
    for i in 1.. {
        let v: Value = table.raw_get(i).map_err(|_| "unknown flag given")?;
        if v.is_nil() {
            break;
        }
        let name = lua_string(&v).ok_or("unknown flag given")?;
        let bit = SHEBANG_FLAGS
            .iter()
            .position(|f| f.as_bytes().eq_ignore_ascii_case(&name))
            .ok_or("unknown flag given")?;
        flags |= 1 << bit;
    }
    Ok(flags)
}

/// `redis.register_function{function_name=..., callback=..., flags=..., description=...}`.
fn named_registration(arg: &Value) -> Result<Func, &'static str> {
    let Value::Table(table) = arg else {
        return Err("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).");
    };
    let (mut name, mut description, mut callback, mut flags) = (None, None, None, 0);
    for pair in table.pairs::<Value, Value>() {
        let (key, value) = pair.map_err(|_| "unknown argument given to redis.register_function")?;
        let key = lua_string(&key)
            .ok_or("named argument key given to redis.register_function is not a string")?;
        if key.eq_ignore_ascii_case(b"function_name") {
            name = Some(lua_string(&value).ok_or(
                "function_name argument given to redis.register_function must be a string",
            )?);
        } else if key.eq_ignore_ascii_case(b"description") {
            description =
                Some(lua_string(&value).ok_or(
                    "description argument given to redis.register_function must be a string",
                )?);
        } else if key.eq_ignore_ascii_case(b"callback") {
            let Value::Function(f) = value else {
                return Err(
                    "callback argument given to redis.register_function must be a function",
                );
            };
            callback = Some(f);
        } else if key.eq_ignore_ascii_case(b"flags") {
            let Value::Table(t) = value else {
                return Err("flags argument to redis.register_function must be a table representing function flags");
            };
            flags = read_flags(&t)?;
        } else {
            return Err("unknown argument given to redis.register_function");
        }
    }
    let name = name.ok_or("redis.register_function must get a function name argument")?;
    let callback = callback.ok_or("redis.register_function must get a callback argument")?;
    Ok(Func {
        name: String::from_utf8_lossy(&name).into_owned(),
        description,
        flags,
        callback,
    })
}

/// `redis.register_function(name, callback)`.
fn positional_registration(name: &Value, callback: &Value) -> Result<Func, &'static str> {
    let name =
        lua_string(name).ok_or("first argument to redis.register_function must be a string")?;
    let Value::Function(callback) = callback else {
        return Err("second argument to redis.register_function must be a function");
    };
    Ok(Func {
        name: String::from_utf8_lossy(&name).into_owned(),
        description: None,
        flags: 0,
        callback: callback.clone(),
    })
}

/// One `redis.register_function` call while a library loads: the function is
/// added to `registered`, or the error text the call raises is returned.
fn register(registered: &mut Vec<Func>, args: MultiValue) -> Option<&'static str> {
    let args: Vec<Value> = args.into_iter().collect();
    let func = match args.as_slice() {
        [arg] => named_registration(arg),
        [name, callback] => positional_registration(name, callback),
        _ => Err("wrong number of arguments to redis.register_function"),
    };
    let func = match func {
        Ok(func) => func,
        Err(e) => return Some(e),
    };
    if !valid_name(func.name.as_bytes()) {
        return Some("Function names can only contain letters, numbers, or underscores(_) and must be at least one character long");
    }
    if registered.iter().any(|f| f.name == func.name) {
        return Some("Function already exists in the library");
    }
    registered.push(func);
    None
}

impl LuaEngine {
    fn new() -> mlua::Result<LuaEngine> {
        let state = lua::State::new(0)?;
        let env: Table = state
            .lua
            .load(include_str!("functions.lua"))
            .set_name("=functions")
            .call(state.hooks.clone())?;
        Ok(LuaEngine { state, env })
    }

    /// Compile and run a library's code, collecting the functions it registers.
    fn compile(&self, code: &[u8]) -> Result<Library, CmdError> {
        let lua = &self.state.lua;
        let hooks = &self.state.hooks;
        // The metadata line becomes a comment, so line numbers stay the code's.
        let source = [b"--", code].concat();
        let chunk = lua
            .load(source)
            .set_name("@user_function")
            .set_mode(ChunkMode::Text)
            .set_environment(self.env.clone())
            .into_function()
            .map_err(|e| {
                let message = match &e {
                    mlua::Error::SyntaxError { message, .. } => message.clone(),
                    other => other.to_string(),
                };
                CmdError::quoted("ERR Error compiling function: ", message.as_bytes(), "")
            })?;
        let registered = RefCell::new(Vec::new());
        let loading: Function = hooks.raw_get("loading").map_err(internal)?;
        let pcall: Function = lua.globals().get("pcall").map_err(internal)?;
        let (ok, error): (bool, Value) = lua
            .scope(|scope| {
                let record = scope.create_function(|_, args: MultiValue| {
                    Ok(register(&mut registered.borrow_mut(), args))
                })?;
                hooks.raw_set("register", record)?;
                loading.call::<()>(true)?;
                let outcome = pcall.call::<(bool, Value)>(chunk);
                loading.call::<()>(false)?;
                hooks.raw_set("register", Value::Nil)?;
                outcome
            })
            .map_err(internal)?;
        if !ok {
            // A `redis.*` function (redis.log ...) raised Redis's error table, left
            // in `hooks.pending`: its text, less the `ERR ` the prefix repeats.
            let pending: Value = hooks.raw_get("pending").map_err(internal)?;
            let _ = hooks.raw_set("pending", Value::Nil);
            let raised = match (&error, &pending) {
                (Value::Error(_) | Value::UserData(_), Value::Table(t)) => {
                    t.raw_get::<mlua::String>("err").ok().map(|e| {
                        e.as_bytes()
                            .strip_prefix(b"ERR ")
                            .unwrap_or(&e.as_bytes())
                            .to_vec()
                    })
                }
                _ => None,
            };
            let text = raised
                .or_else(|| lua_string(&error))
                .unwrap_or_else(|| format!("{error:?}").into_bytes());
            return Err(CmdError::quoted(
                "ERR Error registering functions: ERR ",
                &text,
                "",
            ));
        }
        let functions = registered.into_inner();
        if functions.is_empty() {
            return Err(line("ERR No functions registered"));
        }
        Ok(Library {
            code: code.to_vec(),
            functions,
        })
    }
}

impl Libraries {
    /// Function `name` (any case).
    fn find(&self, name: &[u8]) -> Option<&Func> {
        let (library, i) = self.by_name.get(&name.to_ascii_lowercase())?;
        self.libraries.get(library)?.functions.get(*i)
    }

    /// Remake [`Self::by_name`] after the libraries changed (a library may hold two
    /// functions differing in case only, as in Redis: the first one is found).
    fn reindex(&mut self) {
        self.by_name.clear();
        for (library, lib) in &self.libraries {
            for (i, func) in lib.functions.iter().enumerate() {
                self.by_name
                    .entry(func.name.to_ascii_lowercase().into_bytes())
                    .or_insert_with(|| (library.clone(), i));
            }
        }
    }

    /// `ERR Function <name> already exists` when a function of `library` is also
    /// in a library of `existing` other than the ones `ignored` names.
    fn clash(
        existing: &BTreeMap<String, Library>,
        library: &Library,
        ignored: impl Fn(&str) -> bool,
    ) -> Result<(), CmdError> {
        for func in &library.functions {
            let taken = existing
                .iter()
                .filter(|(name, _)| !ignored(name.as_str()))
                .flat_map(|(_, lib)| &lib.functions)
                .any(|f| f.name.eq_ignore_ascii_case(&func.name));
            if taken {
                return Err(CmdError::quoted(
                    "ERR Function ",
                    func.name.as_bytes(),
                    " already exists",
                ));
            }
        }
        Ok(())
    }
}

/// The libraries of a FUNCTION DUMP payload, loaded (not yet installed).
fn read_payload(payload: &[u8], check_crc: bool) -> Result<BTreeMap<String, Library>, CmdError> {
    let body = rdb::verify_payload_with(payload, check_crc)
        .ok_or_else(|| line("ERR DUMP payload version or checksum are wrong"))?;
    let mut reader = rdb::decode::Reader::new(body);
    let mut loaded = BTreeMap::new();
    while reader.remaining() > 0 {
        let kind = reader
            .u8()
            .map_err(|_| line("ERR can not read data type"))?;
        if kind == RDB_OPCODE_FUNCTION_PRE_GA {
            // Redis 7.2's answer (7.0 tries to read the old record).
            return Err(line("ERR Pre-GA function format not supported"));
        }
        if kind != RDB_OPCODE_FUNCTION2 {
            return Err(line("ERR given type is not a function"));
        }
        let code = reader
            .string()
            .map_err(|_| line("ERR Failed loading library payload"))?;
        let name = library_name(&code)?;
        if loaded.contains_key(&name) {
            return Err(CmdError::quoted(
                "ERR Library '",
                name.as_bytes(),
                "' already exists",
            ));
        }
        let library = with_engine(|e| e.compile(&code))?;
        Libraries::clash(&loaded, &library, |_| false)?;
        loaded.insert(name, library);
    }
    Ok(loaded)
}

/// FUNCTION LOAD [REPLACE] code: the library's name.
pub fn load(code: &[u8], replace: bool) -> Result<String, CmdError> {
    let name = library_name(code)?;
    if !replace && with_libraries(|l| l.libraries.contains_key(&name)) {
        return Err(CmdError::quoted(
            "ERR Library '",
            name.as_bytes(),
            "' already exists",
        ));
    }
    let library = with_engine(|e| e.compile(code))?;
    with_libraries(|l| {
        Libraries::clash(&l.libraries, &library, |lib| lib == name)?;
        l.libraries.insert(name.clone(), library);
        l.reindex();
        Ok(name)
    })
}

/// FUNCTION DELETE name.
pub fn delete(name: &[u8]) -> Result<(), CmdError> {
    with_libraries(|l| {
        let name = std::str::from_utf8(name).unwrap_or_default();
        l.libraries
            .remove(name)
            .ok_or_else(|| line("ERR Library not found"))?;
        l.reindex();
        Ok(())
    })
}

/// FUNCTION FLUSH: every library goes, and the Lua state with them.
pub fn flush() {
    with_libraries(|l| *l = Libraries::default());
    ENGINE.with(|cell| drop(cell.borrow_mut().take()));
}

/// How FUNCTION RESTORE treats the libraries already loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestorePolicy {
    /// Add the payload's libraries; a name already loaded is an error (default).
    Append,
    /// The payload's libraries replace those of the same name.
    Replace,
    /// Delete every library first.
    Flush,
}

impl RestorePolicy {
    /// The policy named by FUNCTION RESTORE's last argument, any case.
    pub fn parse(arg: &[u8]) -> Option<RestorePolicy> {
        [
            ("append", RestorePolicy::Append),
            ("replace", RestorePolicy::Replace),
            ("flush", RestorePolicy::Flush),
        ]
        .into_iter()
        .find(|(name, _)| eq_ci(arg, name))
        .map(|(_, policy)| policy)
    }
}

/// FUNCTION RESTORE payload [policy]: all of the payload's libraries, or none.
pub fn restore(payload: &[u8], policy: RestorePolicy, check_crc: bool) -> Result<(), CmdError> {
    let loaded = read_payload(payload, check_crc)?;
    with_libraries(|f| {
        match policy {
            RestorePolicy::Flush => f.libraries = loaded,
            RestorePolicy::Append | RestorePolicy::Replace => {
                for (name, library) in &loaded {
                    if policy == RestorePolicy::Append && f.libraries.contains_key(name) {
                        return Err(CmdError::quoted(
                            "ERR Library ",
                            name.as_bytes(),
                            " already exists",
                        ));
                    }
                    Libraries::clash(&f.libraries, library, |lib| loaded.contains_key(lib))?;
                }
                f.libraries.extend(loaded);
            }
        }
        f.reindex();
        Ok(())
    })
}

/// Make this shard's libraries those of `payload` (a FUNCTION DUMP): how another
/// shard's change, or the saved set at start, is applied.
pub fn replace_all(payload: &[u8]) -> Result<(), CmdError> {
    restore(payload, RestorePolicy::Flush, true)
}

/// Every library as an `RDB_OPCODE_FUNCTION2` record (its code as an RDB string),
/// as in Redis' RDB files and FUNCTION DUMP payloads.
pub fn rdb_records() -> Vec<u8> {
    let mut out = Vec::new();
    with_libraries(|l| {
        for library in l.libraries.values() {
            out.push(RDB_OPCODE_FUNCTION2);
            rdb::encode::write_string(&mut out, &library.code);
        }
    });
    out
}

/// FUNCTION DUMP: the records, then the RDB version and CRC-64.
pub fn dump() -> Vec<u8> {
    rdb::seal(rdb_records(), rdb::RDB_VERSION)
}

/// FUNCTION LIST: the libraries whose name matches `pattern` (a glob, any case),
/// their functions, and their code when `with_code`.
pub fn list(reply: &mut Reply<'_>, pattern: Option<&[u8]>, with_code: bool) {
    with_libraries(|l| {
        let matches = |name: &str| {
            pattern.is_none_or(|p| {
                crate::glob_match(
                    &p.to_ascii_lowercase(),
                    name.to_ascii_lowercase().as_bytes(),
                )
            })
        };
        let libraries: Vec<(&String, &Library)> = l
            .libraries
            .iter()
            .filter(|(name, _)| matches(name.as_str()))
            .collect();
        reply.array(libraries.len());
        for (name, library) in libraries {
            reply.map(if with_code { 4 } else { 3 });
            reply.bulk(b"library_name");
            reply.bulk(name.as_bytes());
            reply.bulk(b"engine");
            reply.bulk(ENGINE_NAME.as_bytes());
            reply.bulk(b"functions");
            reply.array(library.functions.len());
            for func in &library.functions {
                list_function(reply, func);
            }
            if with_code {
                reply.bulk(b"library_code");
                reply.bulk(&library.code);
            }
        }
    });
}

fn list_function(reply: &mut Reply<'_>, func: &Func) {
    reply.map(3);
    reply.bulk(b"name");
    reply.bulk(func.name.as_bytes());
    reply.bulk(b"description");
    match &func.description {
        Some(d) => reply.bulk(d),
        None => reply.null(),
    }
    reply.bulk(b"flags");
    let names: Vec<&str> = SHEBANG_FLAGS
        .iter()
        .enumerate()
        .filter(|(i, _)| func.flags & (1 << i) != 0)
        .map(|(_, name)| *name)
        .collect();
    reply.set(names.len());
    for name in names {
        reply.simple(name);
    }
}

/// Bytes of the libraries' code and names (MEMORY STATS' `functions.caches`).
pub fn code_bytes() -> usize {
    with_libraries(|l| {
        l.libraries
            .iter()
            .map(|(name, lib)| name.len() + lib.code.len())
            .sum()
    })
}

/// How many libraries and functions this shard holds (FUNCTION STATS).
pub fn counts() -> (usize, usize) {
    with_libraries(|l| {
        let functions = l.libraries.values().map(|lib| lib.functions.len()).sum();
        (l.libraries.len(), functions)
    })
}

/// FUNCTION STATS: `running_script` (a function running on any shard: its name,
/// command and run time; nil when none runs; `-BUSY` while an EVAL script runs past
/// the threshold, as Redis), then the engine's counts.
pub fn stats(reply: &mut Reply<'_>) -> Result<(), CmdError> {
    let running = super::busy::running_function()?;
    let (libraries, functions) = counts();
    reply.map(2);
    reply.bulk(b"running_script");
    match running {
        None => reply.null(),
        Some(f) => {
            reply.map(3);
            reply.bulk(b"name");
            reply.bulk(&f.name);
            reply.bulk(b"command");
            reply.array(f.command.len());
            f.command.iter().for_each(|arg| reply.bulk(arg));
            reply.bulk(b"duration_ms");
            reply.int(f.duration_ms as i64);
        }
    }
    reply.bulk(b"engines");
    reply.map(1);
    reply.bulk(ENGINE_NAME.as_bytes());
    reply.map(2);
    reply.bulk(b"libraries_count");
    reply.int(libraries as i64);
    reply.bulk(b"functions_count");
    reply.int(functions as i64);
    Ok(())
}

/// FCALL / FCALL_RO function numkeys key... arg...
fn fcall_generic(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
    read_only_command: bool,
) -> CmdResult {
    let (name, flags, callback) = with_libraries(|l| {
        l.find(args.get(1))
            .map(|func| (func.name.clone(), func.flags, func.callback.clone()))
    })
    .ok_or_else(|| line("ERR Function not found"))?;
    let numkeys = crate::args::parse_i64(args.get(2))
        .ok_or_else(|| line("ERR Bad number of keys provided"))?;
    if numkeys > (args.len() - 3) as i64 {
        return Err(CmdError::ScriptTooManyKeys);
    }
    if numkeys < 0 {
        return Err(CmdError::ScriptNegativeKeys);
    }
    let no_writes = flags & NO_WRITES != 0;
    if read_only_command && !no_writes {
        return Err(line(
            "ERR Can not execute a script with write flag using *_ro command.",
        ));
    }
    let cluster = engine.config().cluster_enabled;
    if cluster && flags & NO_CLUSTER != 0 {
        return Err(super::no_cluster_error());
    }
    let numkeys = numkeys as usize;
    let keys: Vec<&[u8]> = (3..3 + numkeys).map(|i| args.get(i)).collect();
    let argv: Vec<&[u8]> = (3 + numkeys..args.len()).map(|i| args.get(i)).collect();
    let call = lua::Call {
        sha: &name,
        body: b"",
        keys: &keys,
        argv: &argv,
        read_only: read_only_command || no_writes,
        one_slot: cluster && flags & ALLOW_CROSS_SLOT == 0,
        allow_oom: flags & ALLOW_OOM != 0,
        callback: Some(callback),
        command: args,
    };
    let may_block = std::mem::replace(&mut ctx.may_block, false);
    let result = with_engine(|e| lua::run_in(&mut e.state, engine, ctx, reply, &call));
    ctx.may_block = may_block;
    result?;
    Ok(Outcome::Done)
}

pub(super) fn fcall(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    fcall_generic(engine, ctx, args, reply, false)
}

pub(super) fn fcall_ro(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    fcall_generic(engine, ctx, args, reply, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_names_follow_redis_metadata_rules() {
        let err = |code: &str| {
            library_name(code.as_bytes())
                .unwrap_err()
                .message()
                .into_owned()
        };
        assert_eq!(library_name(b"#!lua name=mylib\n").unwrap(), "mylib");
        assert_eq!(library_name(b"#!LUA  name=a_1\nx").unwrap(), "a_1");
        assert_eq!(err("return 1"), "ERR Missing library metadata");
        assert_eq!(err("#!lua name=a"), "ERR Invalid library metadata");
        assert_eq!(err("#!lua\n"), "ERR Library name was not given");
        assert_eq!(err("#!luax name=a\n"), "ERR Engine 'luax' not found");
        assert_eq!(
            err("#!lua name=a flags=x\n"),
            "ERR Invalid metadata value given: flags=x"
        );
        assert_eq!(
            err("#!lua name=a name=b\n"),
            "ERR Invalid metadata value, name argument was given multiple times"
        );
        assert!(err("#!lua name=a-b\n").starts_with("ERR Library names can only contain"));
    }

    #[test]
    fn a_library_registers_its_functions_with_their_flags() {
        flush();
        let code = "#!lua name=lib\nredis.register_function('f1', function() return 1 end)\n\
                    redis.register_function{function_name='f2', callback=function() end, \
                    flags={'no-writes', 'ALLOW-OOM'}, description='d'}";
        assert_eq!(load(code.as_bytes(), false).unwrap(), "lib");
        assert_eq!(counts(), (1, 2));
        let again = load(code.as_bytes(), false).unwrap_err();
        assert_eq!(again.message(), "ERR Library 'lib' already exists");
        assert_eq!(load(code.as_bytes(), true).unwrap(), "lib");
        let other = "#!lua name=other\nredis.register_function('F1', function() end)";
        let clash = load(other.as_bytes(), false).unwrap_err();
        assert_eq!(clash.message(), "ERR Function F1 already exists");
        let payload = dump();
        flush();
        assert_eq!(counts(), (0, 0));
        restore(&payload, RestorePolicy::Append, true).unwrap();
        assert_eq!(counts(), (1, 2));
        let twice = restore(&payload, RestorePolicy::Append, true).unwrap_err();
        assert_eq!(twice.message(), "ERR Library lib already exists");
        restore(&payload, RestorePolicy::Replace, true).unwrap();
        delete(b"lib").unwrap();
        assert_eq!(
            delete(b"lib").unwrap_err().message(),
            "ERR Library not found"
        );
    }

    #[test]
    fn load_time_sees_only_the_load_api() {
        flush();
        let err = |body: &str| {
            load(format!("#!lua name=t\n{body}").as_bytes(), false)
                .unwrap_err()
                .message()
                .into_owned()
        };
        assert_eq!(
            err("redis.call('ping')"),
            "ERR Error registering functions: ERR user_function:2: Script attempted to access nonexistent global variable 'call'"
        );
        assert_eq!(
            err("math.random()"),
            "ERR Error registering functions: ERR user_function:2: Script attempted to access nonexistent global variable 'math'"
        );
        assert_eq!(
            err("redis.register_function{function_name='x', callback=function() end, flags={'bad'}}"),
            "ERR Error registering functions: ERR unknown flag given"
        );
        assert_eq!(err("local x = 1"), "ERR No functions registered");
        // Redis 7.2's text (7.0 repeats the library-name one).
        assert_eq!(
            err("redis.register_function('a-b', function() end)"),
            "ERR Error registering functions: ERR Function names can only contain letters, numbers, or underscores(_) and must be at least one character long"
        );
        assert_eq!(
            err("return 1 +"),
            "ERR Error compiling function: user_function:2: unexpected symbol near '<eof>'"
        );
    }
}
