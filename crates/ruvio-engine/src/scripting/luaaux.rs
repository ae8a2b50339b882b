//! Lua's auxiliary library (`lauxlib`) as seen from the libraries written in Rust
//! (`cmsgpack`, `struct`): argument checks with `luaL_check*`'s exact error texts,
//! and raising an error whose text reaches the script as a C library's would.
//!
//! Why: a Rust function can only raise a userdata (mlua's wrapped error, printed
//! with "runtime error:" and a traceback), while Redis' libraries raise plain
//! strings (`luaL_error`, `luaL_argerror`). The text waits in the sandbox's
//! `hooks.pending`, where the error handler and the script's `pcall` take it, as
//! `redis.call`'s error tables do.

use mlua::{Lua, Table, Value};

/// Lua 5.1's `LUAI_MAXCSTACK`: the most slots a C function may hold on its stack
/// (`lua_checkstack` refuses past it). The libraries count the slots a C
/// implementation would use, so they fail where Redis fails, and a hostile input
/// (thousands of nested arrays, thousands of values) ends in Redis' error, not in
/// exhausting the Rust stack.
pub(super) const C_STACK_SLOTS_MAX: usize = 8000;

/// The registry name of the sandbox's `hooks` table (see `prelude.lua`).
pub(super) const HOOKS: &str = "ruvio.hooks";

/// `luaL_error`: raise `text` after the position of the calling Lua code
/// (`user_script:3: `; nothing when a C function such as `pcall` called).
pub(super) fn error(lua: &Lua, text: impl AsRef<[u8]>) -> mlua::Error {
    let position = lua
        .inspect_stack(1, |d| {
            let line = d.current_line()?;
            let source = d.source().short_src?.into_owned();
            Some(format!("{source}:{line}: "))
        })
        .flatten()
        .unwrap_or_default();
    let mut located = position.into_bytes();
    located.extend_from_slice(text.as_ref());
    raise(lua, located)
}

/// Raise `text` as a Lua error with a string value, without a position (Lua's own
/// errors inside a C function, such as `table index is nil`).
pub(super) fn raise(lua: &Lua, text: impl Into<Vec<u8>>) -> mlua::Error {
    let text = text.into();
    let left = lua
        .named_registry_value::<Table>(HOOKS)
        .and_then(|hooks| hooks.raw_set("pending", lua.create_string(&text)?));
    match left {
        Ok(()) => mlua::Error::runtime(String::from_utf8_lossy(&text)),
        Err(e) => e,
    }
}

/// An error a library function made with `mlua::Error::runtime`, raised as its
/// plain text (any other error as it is).
pub(super) fn lift(lua: &Lua, e: mlua::Error) -> mlua::Error {
    match e {
        mlua::Error::RuntimeError(text) => error(lua, text),
        other => other,
    }
}

/// `luaL_argerror`: `bad argument #<n> to '<function>' (<message>)`, the function
/// named as the calling code names it (Lua's `getinfo "n"`).
pub(super) fn arg_error(lua: &Lua, arg: usize, message: impl AsRef<[u8]>) -> mlua::Error {
    let (name, what) = lua
        .inspect_stack(0, |d| {
            let names = d.names();
            (
                names.name.map(|n| n.into_owned()),
                names.name_what.unwrap_or(""),
            )
        })
        .unwrap_or((None, ""));
    let name = name.unwrap_or_else(|| "?".to_owned());
    let head = match (what, arg) {
        ("method", 1) => format!("calling '{name}' on bad self ("),
        ("method", _) => format!("bad argument #{} to '{name}' (", arg - 1),
        _ => format!("bad argument #{arg} to '{name}' ("),
    };
    let mut text = head.into_bytes();
    text.extend_from_slice(message.as_ref());
    text.push(b')');
    error(lua, text)
}

/// `luaL_typename`: the type name Lua's messages use (`no value` for an absent
/// argument).
fn type_name(v: Option<&Value>) -> &'static str {
    match v {
        None => "no value",
        Some(Value::Nil) => "nil",
        Some(Value::Boolean(_)) => "boolean",
        Some(Value::LightUserData(_) | Value::UserData(_)) => "userdata",
        Some(Value::Integer(_) | Value::Number(_)) => "number",
        Some(Value::String(_)) => "string",
        Some(Value::Table(_)) => "table",
        Some(Value::Function(_)) => "function",
        Some(Value::Thread(_)) => "thread",
        Some(_) => "userdata",
    }
}

/// `luaL_typerror`: `bad argument #<n> to '<f>' (<expected> expected, got <type>)`.
fn type_error(lua: &Lua, args: &[Value], arg: usize, expected: &str) -> mlua::Error {
    let got = type_name(args.get(arg - 1));
    arg_error(lua, arg, format!("{expected} expected, got {got}"))
}

/// `luaL_checklstring`: argument `arg` (1-based) as bytes; numbers convert as
/// Lua prints them.
pub(super) fn check_string(lua: &Lua, args: &[Value], arg: usize) -> mlua::Result<Vec<u8>> {
    let value = args.get(arg - 1).cloned().unwrap_or(Value::Nil);
    match lua.coerce_string(value)? {
        Some(s) => Ok(s.as_bytes().to_vec()),
        None => Err(type_error(lua, args, arg, "string")),
    }
}

/// `luaL_checknumber`: argument `arg` as a number (numeric strings convert).
pub(super) fn check_number(lua: &Lua, args: &[Value], arg: usize) -> mlua::Result<f64> {
    let value = args.get(arg - 1).cloned().unwrap_or(Value::Nil);
    match lua.coerce_number(value)? {
        Some(n) => Ok(n),
        None => Err(type_error(lua, args, arg, "number")),
    }
}

/// `luaL_checkinteger`: a number truncated toward zero (`lua_tointeger`).
pub(super) fn check_integer(lua: &Lua, args: &[Value], arg: usize) -> mlua::Result<i64> {
    check_number(lua, args, arg).map(|n| n as i64)
}

/// `luaL_optinteger`: `default` for an absent or nil argument.
pub(super) fn opt_integer(
    lua: &Lua,
    args: &[Value],
    arg: usize,
    default: i64,
) -> mlua::Result<i64> {
    match args.get(arg - 1) {
        None | Some(Value::Nil) => Ok(default),
        Some(_) => check_integer(lua, args, arg),
    }
}

/// The slots a C function's stack holds, checked as `luaL_checkstack` does.
pub(super) struct CStack {
    pub top: usize,
}

impl CStack {
    /// `luaL_checkstack(L, space, message)`.
    pub fn check(&self, lua: &Lua, space: usize, message: &str) -> mlua::Result<()> {
        if self.top + space > C_STACK_SLOTS_MAX {
            return Err(error(lua, format!("stack overflow ({message})")));
        }
        Ok(())
    }
}
