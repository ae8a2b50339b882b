//! The `redis.*` functions of the Lua API that are not commands: `redis.log` and
//! `redis.set_repl`, with Redis's argument checks and error texts (`luaLogCommand`,
//! `luaRedisSetReplCommand`). Apart from `lua.rs`, which runs scripts and their
//! `redis.call`s, because these touch neither the engine nor the running call.

use mlua::{Lua, Table};

use super::luaaux;

/// A `redis.*` function's failure as Redis raises it (`luaPushError`): an error
/// table `{err = "ERR <text>"}` at the script's position, so the script's `pcall`
/// gets Redis's text and an uncaught one names the script's line.
pub(super) fn api_error(lua: &Lua, text: &str) -> mlua::Result<mlua::Error> {
    let hooks: Table = lua.named_registry_value(luaaux::HOOKS)?;
    let err = lua.create_table()?;
    err.raw_set("err", format!("ERR {text}"))?;
    super::lua::raise(lua, &hooks, err)
}

/// `redis.log(level, ...)`, as Redis's `luaLogCommand`: the level a number from
/// `LOG_DEBUG` to `LOG_WARNING` (numeric text too, cut toward zero as C's cast),
/// then every argument Lua can show as text (strings, numbers), each after a space
/// but the first argument's; the line goes to the server log at that level.
pub(super) fn redis_log(lua: &Lua, args: mlua::MultiValue) -> mlua::Result<()> {
    if args.len() < 2 {
        return Err(api_error(
            lua,
            "redis.log() requires two arguments or more.",
        )?);
    }
    let mut args = args.into_iter();
    let level = args.next().expect("two arguments or more");
    let Some(level) = lua.coerce_number(level)? else {
        return Err(api_error(
            lua,
            "First argument must be a number (log level).",
        )?);
    };
    let level = level.trunc();
    if !(0.0..=3.0).contains(&level) {
        return Err(api_error(lua, "Invalid debug level.")?);
    }
    let mut line = Vec::new();
    for (j, arg) in args.enumerate() {
        if let Some(text) = lua.coerce_string(arg)? {
            if j != 0 {
                line.push(b' ');
            }
            line.extend_from_slice(&text.as_bytes());
        }
    }
    super::server_cmds::log(level as u8, &String::from_utf8_lossy(&line));
    Ok(())
}

/// `redis.set_repl(flags)`, as Redis 7's: one argument (its arity error says
/// "two"), flags within `REPL_NONE | REPL_AOF | REPL_REPLICA` (anything that is
/// not a number counts as 0). Redis 7 always replicates a script's effects as
/// commands; Ruvio, with no replicas, has nothing to choose between.
pub(super) fn redis_set_repl(lua: &Lua, args: mlua::MultiValue) -> mlua::Result<()> {
    if args.len() != 1 {
        return Err(api_error(lua, "redis.set_repl() requires two arguments.")?);
    }
    let flags = args.into_iter().next().expect("one argument");
    let flags = lua.coerce_number(flags)?.unwrap_or(0.0).trunc();
    if !(0.0..=3.0).contains(&flags) {
        return Err(api_error(
            lua,
            "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.",
        )?);
    }
    Ok(())
}
