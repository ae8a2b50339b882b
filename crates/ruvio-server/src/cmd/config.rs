//! CONFIG: GET, SET, RESETSTAT, REWRITE, HELP, over two tables: every parameter
//! Redis has, with its value type, access and default (`config::params::PARAMS`:
//! how a value is checked, with Redis's error texts), and the parameters that take
//! effect in Ruvio (`LIVE`: where the running value lives and what a change does).
//! A parameter without a `LIVE` row is kept in `Config::params` and shown as set,
//! without effect (docs/config.md says why for each).
//!
//! One server, one configuration: CONFIG SET and RESETSTAT apply on the answering
//! shard and are broadcast to the others as a [`ConfigChange`], which they apply
//! within a loop iteration (`shard/settings.rs`: `apply_config_change`). The same
//! message carries the other server-wide changes a command on one shard makes
//! (CLIENT PAUSE, SAVE, SHUTDOWN, FUNCTION ...).
//!
//! What a parameter's value is on a shard and what setting it does there is the
//! shard's ([`Configured`], implemented with the `LIVE` table in
//! `shard/settings.rs`): this family checks names and values, orders the changes
//! and undoes them, and says what goes to the other shards.

use super::{Ctx, Server, ServerCommand, ServerResult, SharedReads};
use crate::config::change::{ConfigChange, ReloadOutcome};
use crate::config::params::{self, Access, ParamSpec};
use crate::net::tls::Sessions;
use ruvio_engine::command::{command, flags::*, reply_help};
use ruvio_engine::{CmdError, KeySpec};
use ruvio_resp::{Args, Reply};

/// The CONFIG family's table (its subcommands are `CONFIG_SUBCOMMANDS`).
#[rustfmt::skip]
pub const COMMANDS: &[ServerCommand] = &[
    command!("config", -2, 0, KeySpec::NONE, ["slow"], "server", "2.0.0",
        "A container for server configuration commands", "Depends on subcommand.",
        subcommands = CONFIG_SUBCOMMANDS),
];

/// What CONFIG (and the server-wide steps it broadcasts: RESETSTAT, DEBUG
/// RELOAD, SAVE's dump) reads and does on a shard. Defined here, below the
/// shard, and implemented by it (`shard/settings.rs`, with the table of the
/// parameters that take effect), so that this family reaches the shard's parts
/// without naming them; called on the concrete core, never through `dyn`.
pub trait Configured {
    /// Parameter `spec`'s value as CONFIG GET shows it: the running value of one
    /// that takes effect, else the kept one.
    fn param_value(&self, spec: &ParamSpec) -> String;
    /// Give parameter `spec` the checked value `shown` (CONFIG GET's form, see
    /// `config::params::check`): applied, then kept; `Err` with the reason when
    /// Ruvio cannot take it.
    fn apply_param(&mut self, spec: &ParamSpec, shown: &str) -> Result<(), String>;
    /// Whether `spec` takes effect with a running value of its own (CONFIG
    /// REWRITE writes those whatever their value).
    fn param_is_live(&self, spec: &ParamSpec) -> bool;
    /// CONFIG SET applied its changes here: what reads a copy of the settings
    /// (the scripts' host on this shard's thread) takes them again.
    fn settings_changed(&self);
    /// Load the TLS settings again from the parameters, when TLS is on: the
    /// sessions started from now on use them, the open ones keep theirs.
    fn reload_tls(&mut self, sessions: Sessions) -> Result<(), String>;
    /// Zero the counters CONFIG RESETSTAT zeroes and move to statistics epoch `epoch`.
    fn reset_stats(&mut self, epoch: u64);
    /// This shard's part of DEBUG RELOAD, noted in `outcome`.
    fn reload_keyspace(&mut self, outcome: &ReloadOutcome);
    /// This shard's part of the dump at `path`; its changes count as saved.
    fn write_dump_part(&mut self, path: &str) -> std::io::Result<()>;
    /// Every shard wrote its part: put the dump together and move LASTSAVE; the
    /// reply (`answer`, or the error).
    fn finish_dump(&mut self, path: &str, answer: &[u8]) -> Vec<u8>;
}

/// CONFIG's subcommands, with Redis' arity, flags and ACL categories.
#[rustfmt::skip]
const CONFIG_SUBCOMMANDS: &[ServerCommand] = &[
    command!("config|get", -3, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE, ["admin", "slow", "dangerous"],
        "server", "2.0.0", "Get the values of configuration parameters",
        "O(N) when N is the number of configuration parameters provided", config_get),
    command!("config|set", -4, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE, ["admin", "slow", "dangerous"],
        "server", "2.0.0", "Set configuration parameters to the given values",
        "O(N) when N is the number of configuration parameters provided", config_set),
    command!("config|resetstat", 2, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE,
        ["admin", "slow", "dangerous"], "server", "2.0.0", "Reset the stats returned by INFO", "O(1)",
        config_resetstat),
    command!("config|rewrite", 2, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE,
        ["admin", "slow", "dangerous"], "server", "2.8.0",
        "Rewrite the configuration file with the in memory configuration", "O(1)", config_rewrite),
    command!("config|help", 2, LOADING | STALE, KeySpec::NONE, ["slow"], "server", "5.0.0",
        "Show helpful text about the different subcommands", "O(1)", config_help),
];

/// `CONFIG GET pattern [pattern ...]`: each parameter once, under the spelling of
/// the first pattern that matched it when that one is a plain name (Redis 7.0 keeps
/// the name as typed: `CONFIG GET HZ` answers `HZ`), else under its own name. A plain
/// name is compared without case, a pattern with `[`, `*` or `?` is a glob (which
/// skips Redis's hidden parameters, as Redis does).
fn config_get<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let patterns: Vec<&[u8]> = args.iter().skip(2).collect();
    let matched: Vec<(&ParamSpec, &[u8])> = params::PARAMS
        .iter()
        .filter_map(|p| {
            let name = p.name.as_bytes();
            patterns.iter().find_map(|&pattern| {
                if !pattern.iter().any(|b| matches!(b, b'[' | b'*' | b'?')) {
                    pattern.eq_ignore_ascii_case(name).then_some((p, pattern))
                } else {
                    (!p.hidden && ruvio_engine::glob_match(&pattern.to_ascii_lowercase(), name))
                        .then_some((p, name))
                }
            })
        })
        .collect();
    reply.map(matched.len());
    for (p, shown) in matched {
        reply.bulk(shown);
        reply.bulk(ctx.core.param_value(p).as_bytes());
    }
    Ok(())
}

/// Whether this client may set a protected parameter (`dir`, `dbfilename`):
/// `enable-protected-configs` yes, or local and the client is on loopback.
fn protected_allowed<S: Server>(ctx: &Ctx<'_, S>) -> bool {
    match ctx.core.settings().param("enable-protected-configs") {
        "yes" => true,
        "local" => {
            let peer = &ctx.client.peer;
            peer.starts_with("127.") || peer.starts_with("[::1]") || peer.starts_with("::1")
        }
        _ => false,
    }
}

/// `CONFIG SET parameter value [parameter value ...]`: all or nothing, as Redis 7:
/// names are checked first (unknown, immutable, protected, given twice: quoted as
/// typed), then values checked and applied in order (a bad one quoted by its
/// parameter's own name, with Redis's reason); when one fails, the ones applied
/// before it get their old values back. A name without a value is a syntax error.
fn config_set<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    if !args.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    let mut changes: Vec<(&ParamSpec, String)> = Vec::new();
    for pair in (2..args.len()).step_by(2) {
        let typed = args.get(pair);
        let value = String::from_utf8_lossy(args.get(pair + 1)).into_owned();
        let spec = params::PARAMS
            .iter()
            .find(|p| p.name.as_bytes().eq_ignore_ascii_case(typed))
            .ok_or_else(|| CmdError::config_unknown(typed))?;
        match spec.access {
            Access::Mutable => {}
            Access::Immutable => return Err(CmdError::config_immutable(typed)),
            Access::Protected if protected_allowed(ctx) => {}
            Access::Protected => {
                return Err(CmdError::config_failed(typed, "can't set protected config"))
            }
        }
        // As Redis 7.0: a name given twice is refused, an alias beside its name
        // is not (the later pair wins).
        if changes.iter().any(|(p, _)| p.name == spec.name) {
            return Err(CmdError::config_duplicate(typed));
        }
        changes.push((spec, value));
    }
    let before: Vec<String> = changes
        .iter()
        .map(|(p, _)| ctx.core.param_value(p))
        .collect();
    let mut applied = Vec::with_capacity(changes.len());
    for (i, (spec, value)) in changes.iter().enumerate() {
        let outcome = params::check(spec, value)
            .and_then(|shown| ctx.core.apply_param(spec, &shown).map(|()| shown));
        match outcome {
            Ok(shown) => applied.push((spec.name.to_string(), shown)),
            Err(why) => {
                for ((undo, _), old) in changes[..i].iter().zip(&before).rev() {
                    let _ = ctx.core.apply_param(undo, old);
                }
                return Err(CmdError::config_failed(spec.name.as_bytes(), &why));
            }
        }
    }
    if let Some(tls_name) = applied
        .iter()
        .map(|(n, _)| n.as_str())
        .find(|n| is_tls_file(n))
    {
        // The certificate settings apply together, once all are in (Redis's
        // applyTlsCfg): new sessions use them, open ones keep theirs.
        if let Err(why) = ctx.core.reload_tls(Sessions::Renew) {
            crate::serverlog::log(
                crate::serverlog::Level::Warning,
                &format!("Failed applying new configuration. Possibly related to new {tls_name} setting: {why}"),
            );
            for ((undo, _), old) in changes.iter().zip(&before).rev() {
                let _ = ctx.core.apply_param(undo, old);
            }
            return Err(CmdError::config_failed(
                tls_name.as_bytes(),
                "Unable to update TLS configuration. Check server logs.",
            ));
        }
    }
    ctx.core.broadcast(ConfigChange::Set(applied));
    ctx.core.settings_changed();
    super::ok_everywhere(ctx, reply);
    Ok(())
}

/// A setting the TLS sessions start from (certificate, key, CAs, client
/// certificates, protocols, suites, session cache, the certificate the
/// cluster bus's outgoing links show).
pub fn is_tls_file(name: &str) -> bool {
    matches!(
        name,
        "tls-cert-file"
            | "tls-key-file"
            | "tls-key-file-pass"
            | "tls-client-cert-file"
            | "tls-client-key-file"
            | "tls-client-key-file-pass"
            | "tls-ca-cert-file"
            | "tls-ca-cert-dir"
            | "tls-auth-clients"
            | "tls-protocols"
            | "tls-ciphersuites"
            | "tls-ciphers"
            | "tls-prefer-server-ciphers"
            | "tls-session-caching"
            | "tls-session-cache-size"
            | "tls-session-cache-timeout"
    )
}

fn config_resetstat<S: Server>(
    ctx: &mut Ctx<'_, S>,
    _args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let epoch = ctx.core.shared().next_stats_epoch();
    ctx.core.reset_stats(epoch);
    ctx.core.broadcast(ConfigChange::ResetStats { epoch });
    // Answered once every shard reset: a command sent after the OK, on whichever
    // shard it runs, counts in the new epoch.
    super::ok_everywhere(ctx, reply);
    Ok(())
}

/// `CONFIG REWRITE`: the config file Ruvio started with gets the running values of
/// the settings CONFIG SET can change, in place: its comments, order and other
/// settings stay as they are; a setting the file lacks is appended. The new file
/// replaces the old one by a rename, so a crash leaves one or the other.
fn config_rewrite<S: Server>(
    ctx: &mut Ctx<'_, S>,
    _args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let Some(path) = ctx.core.settings().config_file.clone() else {
        return Err(CmdError::NoConfigFile);
    };
    // The settings that take effect, and the others set away from their default.
    let settings: Vec<(String, String)> = params::PARAMS
        .iter()
        .filter(|p| p.access == Access::Mutable && params::storage_name(p.name) == p.name)
        .filter(|p| ctx.core.param_is_live(p) || ctx.core.settings().params.contains_key(p.name))
        .map(|p| (p.name.replace('-', "_"), ctx.core.param_value(p)))
        .collect();
    // The users go to the file as `user` lines unless they live in `aclfile`.
    let users = ctx.core.settings().param("aclfile").is_empty().then(|| {
        let acl = ctx.core.shared().acl();
        let users = acl.users();
        let lines = users.values().map(|u| {
            let line = crate::acl::describe::user_line(acl.catalog(), u);
            String::from_utf8_lossy(&line["user ".len()..]).into_owned()
        });
        lines.collect::<Vec<_>>()
    });
    crate::config::rewrite(&path, &settings, users.as_deref())
        .map_err(|e| CmdError::rewrite_failed(&e))?;
    reply.ok();
    Ok(())
}

fn config_help<S: Server>(
    _ctx: &mut Ctx<'_, S>,
    _args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    reply_help(
        reply,
        b"config",
        &[
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "REWRITE",
            "    Rewrite the configuration file.",
        ],
    );
    Ok(())
}
