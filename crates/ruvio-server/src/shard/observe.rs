//! Recording what a command did into the command clock's logs and INFO
//! commandstats (see [`crate::observability`]): a command that ran here
//! ([`observe`]), one answered once other shards answered ([`awaited`],
//! [`observe_answered`]), one parked and later served ([`observe_parked`],
//! [`observe_served`]). Apart from `exec.rs` because it is the observability
//! side of running a command, called from dispatch, the mesh and lending as
//! well, and knows nothing of the handler or its effects.

use crate::cmd::registry::Command;
use crate::shard::ShardCore;
use ruvio_engine::command::flags::{FAST, SKIP_SLOWLOG};
use ruvio_resp::{Args, OwnedArgs};

/// Record command `cmd` of client `who` that ran here for `ns` (when timed) and
/// answered `reply_bytes` (see [`crate::observability`]): where the client is
/// (`shard::dispatch`), on the owner of a command forwarded whole
/// (`shard::messages`), or once borrowed keys arrived (`mesh::lending`).
#[inline(never)]
pub fn observe(
    core: &mut ShardCore,
    cmd: &Command,
    who: crate::observability::Who<'_>,
    args: Args<'_>,
    (ns, reply_bytes): (Option<u64>, usize),
) {
    let ran = crate::observability::Ran {
        shard: core.id,
        stat: cmd.stat,
        fast: cmd.meta.has(FAST),
        loggable: !cmd.meta.has(SKIP_SLOWLOG),
        args,
        reply_bytes,
        client: who,
        now_ms: core.now_ms,
    };
    core.timing.finish(&core.shared.observatory, ns, ran);
}

/// The record of command `cmd` (`args`), which ran here for `ns` (when timed,
/// else `sampled_usec` for INFO commandstats) and answers once other shards
/// answered: kept with its held reply slot ([`observe_answered`]). Its
/// arguments are copied: the logs may want them then (a CONFIG SET may have
/// turned them on meanwhile, and Redis logs that CONFIG SET).
pub fn awaited(
    cmd: &Command,
    args: Args<'_>,
    ns: Option<u64>,
    sampled_usec: u64,
) -> Box<crate::observability::Awaited> {
    Box::new(crate::observability::Awaited {
        stat: cmd.stat,
        fast: cmd.meta.has(FAST),
        loggable: !cmd.meta.has(SKIP_SLOWLOG),
        args: OwnedArgs::from_args(args),
        ns,
        sampled_usec,
        reply_bytes: 0,
    })
}

/// Record a gathered or split command of `client` whose answer is complete
/// now (see [`crate::observability::Awaited`]): INFO commandstats counts its
/// call and time, and it is recorded as [`observe`] records any command, with
/// its whole reply's size.
pub fn observe_answered(
    core: &mut ShardCore,
    client: &crate::net::conn::ClientState,
    record: &crate::observability::Awaited,
) {
    core.stats.commands += 1;
    let stat = &mut core.stats.per_command[record.stat];
    stat.calls += 1;
    stat.usec += record.ns.map_or(record.sampled_usec, |ns| ns / 1000);
    if !core.timing.active() {
        return;
    }
    let who = crate::observability::Who::Here(crate::observability::commandlog::Client {
        peer: &client.peer,
        name: &client.name,
    });
    let ran = crate::observability::Ran {
        shard: core.id,
        stat: record.stat,
        fast: record.fast,
        loggable: record.loggable,
        args: record.args.args(),
        reply_bytes: record.reply_bytes,
        client: who,
        now_ms: core.now_ms,
    };
    core.timing.finish(&core.shared.observatory, record.ns, ran);
}

/// Record command `cmd` that ran here for `ns` (when timed) and parked: only
/// the latency monitor's sample, as Redis 7.0's `call()` for a client it
/// blocked; the rest waits until it is served ([`observe_unblocked`]). Its first
/// run's time is kept with ticket `ticket` (WAIT has none: Redis never records
/// it further).
pub fn observe_parked(core: &mut ShardCore, cmd: &Command, ticket: Option<u64>, ns: Option<u64>) {
    if let Some(ticket) = ticket {
        core.blocking.note_first_run(ticket, ns.unwrap_or(0));
    }
    if let Some(ns) = ns {
        let observatory = &core.shared.observatory;
        core.timing
            .sample_command(observatory, cmd.meta.has(FAST), ns, core.now_ms);
    }
}

/// Record blocked command `cmd` (ticket `ticket`, run again as `argv`), served
/// now by a run of `ns` that answered `reply_bytes`, as Redis 7.0's
/// `updateStatsOnUnblock`: INFO commandstats adds the first run's time and this
/// run's (its call was counted when it parked), and the histogram, the slow log
/// and the size logs record it as one command of their sum (see
/// [`crate::observability::Timing::finish_unblocked`]).
///
/// `argv` is `None` for a command CLIENT UNBLOCK answered: Redis 7.0 records it
/// too, as a failed call of its first run's time whose arguments it already
/// freed (its slow log entry has no arguments). A command that timed out is not
/// recorded again.
#[inline(never)]
pub(super) fn observe_unblocked(
    core: &mut ShardCore,
    cmd: &Command,
    ticket: u64,
    argv: Option<&OwnedArgs>,
    (ns, reply_bytes): (Option<u64>, usize),
) {
    let Some(blocked) = core.blocking.get(ticket) else {
        return;
    };
    let Some(first_ns) = blocked.first_run_ns else {
        return;
    };
    let client_id = blocked.client_id;
    let sent = argv.and(blocked.sent_argv.clone());
    let args = sent.as_ref().or(argv);
    let served = Served {
        client_id,
        first_ns,
        ns,
        reply_bytes,
    };
    observe_served(core, cmd, args.map(|a| a.args()), served);
}

/// A parked command answered now (see [`observe_served`]).
#[derive(Clone, Copy, Debug)]
pub struct Served {
    pub client_id: u64,
    /// Its first run's time, ns.
    pub first_ns: u64,
    /// The serving run's time, when timed (CLIENT UNBLOCK: 0).
    pub ns: Option<u64>,
    pub reply_bytes: usize,
}

/// Record parked command `cmd`, answered now as `served` says, with arguments
/// `args` (`None`: CLIENT UNBLOCK answered it, a failed call without
/// arguments): [`observe_unblocked`] for a command parked here,
/// `mesh::lending` for one over several shards' keys.
pub fn observe_served(core: &mut ShardCore, cmd: &Command, args: Option<Args<'_>>, served: Served) {
    let stat = &mut core.stats.per_command[cmd.stat];
    if let Some(ns) = served.ns {
        stat.usec += served.first_ns / 1000 + ns / 1000;
    }
    if args.is_none() {
        stat.failed += 1;
    }
    if !core.timing.active() {
        return;
    }
    let none = OwnedArgs::default();
    let ran = crate::observability::Ran {
        shard: core.id,
        stat: cmd.stat,
        fast: cmd.meta.has(FAST),
        loggable: !cmd.meta.has(SKIP_SLOWLOG),
        args: args.unwrap_or_else(|| none.args()),
        reply_bytes: served.reply_bytes,
        client: crate::observability::Who::Id(served.client_id),
        now_ms: core.now_ms,
    };
    let (first_ns, ns) = (served.first_ns, served.ns);
    core.timing
        .finish_unblocked(&core.shared.observatory, first_ns, ns, ran);
}
