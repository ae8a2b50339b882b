//! The ACL check of a script's calls, as Redis's `scriptVerifyACL` and
//! `redis.acl_check_cmd`. Users and rules are the server's: it installs a check
//! for the run of a restricted user's script ([`set_acl_check`]), and without
//! one every call is allowed (the `default` user as it starts pays nothing).

use std::cell::Cell;

use mlua::{Lua, Value};
use ruvio_resp::{Args, OwnedArgs};

use crate::command::{CommandMeta, CommandTree};
use crate::Engine;

/// May the script's caller run `meta` with `args`? `Err`: the error line
/// `redis.call` fails with. `log`: record a refusal in ACL LOG (a call does,
/// `redis.acl_check_cmd` does not).
pub type AclCheck = fn(&CommandMeta, Args<'_>, bool) -> Result<(), &'static str>;

thread_local! {
    static CHECK: Cell<Option<AclCheck>> = const { Cell::new(None) };
}

/// Check the calls of the scripts this thread runs from now on with `check`
/// (`None`: allow all). Returns the check it replaces.
pub fn set_acl_check(check: Option<AclCheck>) -> Option<AclCheck> {
    CHECK.replace(check)
}

/// A call's check before it runs.
pub(super) fn check_call(meta: &CommandMeta, args: Args<'_>) -> Result<(), &'static str> {
    match CHECK.get() {
        Some(check) => check(meta, args, true),
        None => Ok(()),
    }
}

/// `redis.acl_check_cmd(command, ...)`: true when the script's user may run it.
pub(super) fn redis_acl_check_cmd(lua: &Lua, args: mlua::MultiValue) -> mlua::Result<bool> {
    if args.is_empty() {
        return Err(super::api::api_error(
            lua,
            "Please specify at least one argument for this redis lib call",
        )?);
    }
    let mut call = OwnedArgs::default();
    for arg in args {
        match arg {
            Value::String(s) => call.push(&s.as_bytes()),
            Value::Integer(n) => call.push(n.to_string().as_bytes()),
            Value::Number(n) => {
                let mut text = Vec::new();
                ruvio_resp::format_double_g17(n, &mut text);
                call.push(&text);
            }
            _ => {
                return Err(super::api::api_error(
                    lua,
                    "Lua redis lib command arguments must be strings or integers",
                )?)
            }
        }
    }
    let call = call.args();
    let meta = match Engine::find_command(call.get(0)) {
        Some(top) => top.resolve(call).ok().map(|row| &row.meta),
        None => super::server_cmds::lookup(call).and_then(Result::ok),
    };
    let Some(meta) = meta else {
        return Err(super::api::api_error(
            lua,
            "Invalid command passed to redis.acl_check_cmd()",
        )?);
    };
    Ok(match CHECK.get() {
        Some(check) => check(meta, call, false).is_ok(),
        None => true,
    })
}
