//! MIGRATE: keys leave this instance for another one (a Ruvio or a Redis), the
//! command `redis-cli --cluster reshard`, `rebalance` and `del-node` move slots
//! with, key batch by key batch.
//!
//! As redis-server's `migrateCommand`: each key's DUMP payload (the engine's,
//! Redis' format) goes to the target as `RESTORE` (`RESTORE-ASKING` from a
//! cluster node, per-shard mode, so an importing target takes it) with its remaining TTL and
//! REPLACE, after `AUTH`/`AUTH2` when given and `SELECT` when the cached
//! connection has another database selected, all in one write; then one reply
//! line each is read. The keys the target accepted are deleted here unless
//! COPY, as a `DEL` this shard runs (`MovesKeys`): logged, sent to replicas,
//! seen by WATCH, tracking and keyspace events, as Redis propagates MIGRATE as
//! DEL. A socket error before any reply is retried once on a new connection
//! (not after a timeout); the errors are Redis' own texts. The connection and
//! why it blocks: [`target`].
//!
//! A script's MIGRATE (Redis allows it) is [`send`] alone, handed to scripts
//! through `ServerCommands`: the script deletes the accepted keys as its own DEL
//! (the engine's `scripting/lua/migrate.rs`).
//!
//! Routing (`shard/route.rs`): the keys route as any keyed command's in
//! per-shard mode (MOVED, CROSSSLOT, CLUSTERDOWN; a slot in flight runs here,
//! as Redis' `getNodeByQuery` lets MIGRATE through). The command runs on the
//! shard its keys are on and talks to the target itself, so in forward mode
//! with several shards its keys must all be on the client's shard; others get
//! `-CROSSSLOT`, as a Redis Cluster node answers keys it cannot move together
//! (a server command cannot be forwarded to the owner, and borrowing keys for
//! the seconds a transfer may take would stall their shard's clients).

mod target;

use super::{Ctx, Server, ServerCommand, ServerResult};
use crate::net::conn::ClientState;
use ruvio_engine::command::{command, flags::*, KeyShape};
use ruvio_engine::scripting::Migrated;
use ruvio_engine::{CmdError, KeySpec};
use ruvio_resp::{Args, Protocol, Reply};
use std::time::Duration;
use target::{IoFailure, Request};

pub use target::close_idle as close_idle_targets;

/// What MIGRATE asks of the shard beyond [`Server`]: deleting the keys the
/// target accepted the way a client's DEL deletes them. Implemented by the
/// shard (`shard/families.rs`).
pub trait MovesKeys: Server {
    /// Delete `keys` of `client`'s database as `DEL key ...` run by `client`:
    /// logged and fed to replicas as that DEL, watchers, tracking and keyspace
    /// events told.
    fn delete_moved(&mut self, client: &ClientState, keys: &[&[u8]]);
}

/// MIGRATE's keys (Redis' key specs): the key at 3, or the list after KEYS in
/// its place (the key at 3 then empty). The options before KEYS are skipped
/// with their arguments, as Redis' `migrateGetKeys` does.
const MIGRATE_KEYS: KeySpec = KeySpec(&[
    KeyShape::Range {
        first: 3,
        last: 3,
        step: 1,
    },
    KeyShape::KeysReplacing {
        key_at: 3,
        keyword: "KEYS",
        from: 6,
        skips: &[("AUTH", 1), ("AUTH2", 2)],
    },
]);

/// The migrate family's table.
#[rustfmt::skip]
pub const COMMANDS: &[ServerCommand] = &[
    command!("migrate", -6, WRITE, MIGRATE_KEYS, ["keyspace", "write", "slow", "dangerous"], "generic",
        "2.6.0", "Atomically transfer a key from a Redis instance to another one.",
        "This command actually executes a DUMP+DEL in the source instance, and a RESTORE in the target instance. See the pages of these commands for time complexity. Also an O(N) data transfer between the two instances is performed.",
        migrate),
];

/// Redis' timeout when MIGRATE's is 0 or negative.
const TIMEOUT_DEFAULT_MS: u64 = 1000;

/// A MIGRATE call's arguments.
struct Migration<'a> {
    host: &'a [u8],
    port: &'a [u8],
    /// The target's database.
    db: i64,
    timeout: Duration,
    copy: bool,
    replace: bool,
    /// AUTH's password, AUTH2's user and password (a later AUTH keeps AUTH2's
    /// user, as Redis' option loop does).
    username: Option<&'a [u8]>,
    password: Option<&'a [u8]>,
    keys: Vec<&'a [u8]>,
}

/// Redis' option loop, then the timeout and database checks, in its order.
fn parse(args: Args<'_>) -> Result<Migration<'_>, CmdError> {
    let (mut copy, mut replace) = (false, false);
    let (mut username, mut password) = (None, None);
    let (mut first_key, mut key_count) = (3, 1);
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - 1 - j;
        let option = args.get(j);
        if option.eq_ignore_ascii_case(b"COPY") {
            copy = true;
        } else if option.eq_ignore_ascii_case(b"REPLACE") {
            replace = true;
        } else if option.eq_ignore_ascii_case(b"AUTH") {
            if more == 0 {
                return Err(CmdError::Syntax);
            }
            j += 1;
            password = Some(args.get(j));
        } else if option.eq_ignore_ascii_case(b"AUTH2") {
            if more < 2 {
                return Err(CmdError::Syntax);
            }
            username = Some(args.get(j + 1));
            password = Some(args.get(j + 2));
            j += 2;
        } else if option.eq_ignore_ascii_case(b"KEYS") {
            if !args.get(3).is_empty() {
                return Err(CmdError::Line(
                    b"ERR When using MIGRATE KEYS option, the key argument must be set to the empty string"
                        .to_vec(),
                ));
            }
            first_key = j + 1;
            key_count = args.len() - j - 1;
            break;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let timeout_ms = super::parse_i64(args.get(5)).ok_or(CmdError::NotInteger)?;
    let db = super::parse_i64(args.get(4)).ok_or(CmdError::NotInteger)?;
    let timeout_ms = u64::try_from(timeout_ms)
        .ok()
        .filter(|&ms| ms > 0)
        .unwrap_or(TIMEOUT_DEFAULT_MS);
    Ok(Migration {
        host: args.get(1),
        port: args.get(2),
        db,
        timeout: Duration::from_millis(timeout_ms),
        copy,
        replace,
        username,
        password,
        keys: (first_key..first_key + key_count)
            .map(|i| args.get(i))
            .collect(),
    })
}

/// A key that moves: its name, remaining TTL (0: none) and DUMP payload.
struct Moving<'a> {
    key: &'a [u8],
    ttl_ms: u64,
    payload: Vec<u8>,
}

/// `MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE]
/// [AUTH password | AUTH2 username password] [KEYS key [key ...]]`
fn migrate<S: MovesKeys>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let (db, now_ms) = (ctx.client.db, ctx.core.now_ms());
    let cluster_mode = ctx.core.settings().cluster_mode();
    let migrated = send(cluster_mode, ctx.core.engine(), db, now_ms, args);
    if !migrated.moved.is_empty() {
        let keys: Vec<&[u8]> = migrated.moved.iter().map(Vec::as_slice).collect();
        ctx.core.delete_moved(ctx.client, &keys);
    }
    reply.simple(migrated.reply?);
    Ok(())
}

/// MIGRATE `args` of database `db`'s keys as they are at `now_ms`: the keys the
/// target accepted, which the caller deletes unless COPY (a client's MIGRATE as
/// its shard's DEL, a script's as the script's DEL: `ScriptHost::migrate`), and
/// the reply. `cluster_mode`: this server is a cluster node (RESTORE-ASKING).
pub fn send(
    cluster_mode: bool,
    engine: &ruvio_engine::Engine,
    db: usize,
    now_ms: u64,
    args: Args<'_>,
) -> Migrated {
    let m = match parse(args) {
        Ok(m) => m,
        Err(e) => {
            return Migrated {
                moved: Vec::new(),
                reply: Err(e),
            }
        }
    };
    let moving: Vec<Moving<'_>> = m
        .keys
        .iter()
        .filter_map(|&key| {
            let entry = engine.peek_entry(db, key, now_ms)?;
            Some(Moving {
                key,
                ttl_ms: entry
                    .expire_at()
                    .map_or(0, |at| at.saturating_sub(now_ms).max(1)),
                payload: ruvio_engine::rdb::dump_payload(entry.value()),
            })
        })
        .collect();
    if moving.is_empty() {
        // Often a key that expired meanwhile: not an error.
        return Migrated {
            moved: Vec::new(),
            reply: Ok("NOKEY"),
        };
    }
    // Redis sends RESTORE-ASKING whenever it is a cluster node (INFO's
    // `cluster_enabled`): per-shard mode, with or without the bus, or
    // forward mode as one node of the bus.
    let restore: &[u8] = match cluster_mode {
        true => b"RESTORE-ASKING",
        false => b"RESTORE",
    };
    let mut may_retry = true;
    loop {
        let exchanged = target::exchange(m.host, m.port, m.timeout, m.db, |selected| {
            request(&m, &moving, restore, selected)
        });
        let exchanged = match exchanged {
            Ok(exchanged) => exchanged,
            // A cached connection the target closed is common: open a new one
            // once, unless the target timed out.
            Err(failed)
                if may_retry && !failed.timed_out && failed.failure != IoFailure::Connecting =>
            {
                may_retry = false;
                continue;
            }
            Err(failed) => {
                let error = CmdError::Line(failed.failure.line().to_vec());
                return Migrated {
                    moved: Vec::new(),
                    reply: Err(error),
                };
            }
        };
        if let Some((0, failed)) = exchanged.failed_at {
            // Nothing was restored: as safe to retry as a failed write.
            if may_retry && !failed.timed_out && exchanged.target_error.is_none() {
                may_retry = false;
                continue;
            }
        }
        let moved = match m.copy {
            true => Vec::new(),
            false => exchanged
                .accepted
                .iter()
                .map(|&i| moving[i].key.to_vec())
                .collect(),
        };
        let reply = if let Some(error) = exchanged.target_error {
            Err(CmdError::quoted(
                "ERR Target instance replied with error: ",
                &error,
                "",
            ))
        } else if exchanged.failed_at.is_some() {
            Err(CmdError::Line(IoFailure::Reading.line().to_vec()))
        } else {
            Ok("OK")
        };
        return Migrated { moved, reply };
    }
}

/// The bytes sent to the target: AUTH, SELECT unless the connection has `m.db`
/// selected, then each key's RESTORE.
fn request(
    m: &Migration<'_>,
    moving: &[Moving<'_>],
    restore: &[u8],
    selected: Option<i64>,
) -> Request {
    let mut bytes = Vec::with_capacity(
        moving
            .iter()
            .map(|k| k.payload.len() + k.key.len() + 64)
            .sum(),
    );
    let mut out = Reply::new(&mut bytes, Protocol::Resp2);
    if let Some(password) = m.password {
        out.array(if m.username.is_some() { 3 } else { 2 });
        out.bulk(b"AUTH");
        if let Some(username) = m.username {
            out.bulk(username);
        }
        out.bulk(password);
    }
    let select = selected != Some(m.db);
    if select {
        out.array(2);
        out.bulk(b"SELECT");
        out.bulk(m.db.to_string().as_bytes());
    }
    for key in moving {
        out.array(if m.replace { 5 } else { 4 });
        out.bulk(restore);
        out.bulk(key.key);
        out.bulk(key.ttl_ms.to_string().as_bytes());
        out.bulk(&key.payload);
        if m.replace {
            out.bulk(b"REPLACE");
        }
    }
    Request {
        bytes,
        auth: m.password.is_some(),
        select,
        keys: moving.len(),
    }
}
