//! The shard's part of whole-slot migration (`cluster/slot_migration.rs`,
//! docs/cluster.md "Whole-slot migration"): on its tick it connects a new
//! export to its target and notices an import whose source went away; on the
//! loop's turns, in slices its clients leave it (`cluster/slot_pace.rs`), it
//! sends the slots' keys, writes the stream and reads the acknowledgments,
//! hands the slots over and deletes what a finished job left behind;
//! after each write command it forwards what the command did to the keys of
//! an export already sent ([`record_write`]); while a handover waits for the
//! target, the writes to its slots wait too ([`holds`], called by the
//! request path beside CLIENT PAUSE's check).
//!
//! Why here: the keyspace, the shard's DEL (logged, fed to replicas), its
//! connections and the node all meet on the shard, and a slot's keys are
//! read on the thread that owns them.

use crate::cluster::slot_migration::{
    Export, JobState, Link, Phase, HANDOVER_REPLIES_MAX, HANDOVER_TIMEOUT_MS, QUEUED_BYTES_MAX,
    SILENT_TARGET_MS_MAX,
};
use crate::cmd::registry::{registry, Command};
use crate::net::caller::{Caller, Tracked};
use crate::net::conn::ClientState;
use crate::net::conn::Conn;
use crate::net::slab::Slab;
use crate::serverlog::{log, Level};
use crate::shard::ShardCore;
use ruvio_engine::command::flags::{MAY_REPLICATE, WRITE};
use ruvio_engine::command::Effects;
use ruvio_engine::slot::key_slot;
use ruvio_engine::Engine;
use ruvio_resp::{Args, OwnedArgs, Protocol};
use std::time::{Duration, Instant};

/// How long connecting to a target may hold the shard.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// Keys read into the stream, or deleted, between two looks at the clock.
const KEYS_PER_CLOCK_CHECK: usize = 16;

/// Unsent bytes below which the handover may start (the rest is written
/// within it).
const HANDOVER_UNSENT_BYTES_MAX: usize = 1 << 20;

/// Some export is running: write commands record what they did for it.
#[inline]
pub(super) fn exporting(core: &ShardCore) -> bool {
    core.cluster_node
        .as_deref()
        .is_some_and(|n| n.slot_migrations.exporting())
}

/// While an export hands its slots over: whether `args` must wait for the
/// handover's end (a write of those slots, or a write whose keys are not
/// known before it runs: EXEC, a script, a keyless write). Left unread, it
/// then runs and finds the slots' new owner. One branch otherwise.
#[inline]
pub(super) fn holds(core: &ShardCore, client: &ClientState, args: Args<'_>) -> bool {
    match core.cluster_node.as_deref() {
        Some(node) if node.slot_migrations.holding() && !client.master => holds_command(node, args),
        _ => false,
    }
}

#[cold]
fn holds_command(node: &crate::cluster::node::ShardNode, args: Args<'_>) -> bool {
    let Some(cmd) = registry().lookup(args.get(0)) else {
        return false;
    };
    let meta = cmd.meta;
    let exec = meta.name == "exec";
    if !exec && !meta.has(WRITE) && !meta.has(MAY_REPLICATE) && meta.group != "scripting" {
        return false;
    }
    match meta.keys.keys(args).next() {
        Some(key) if meta.group != "scripting" => node.slot_migrations.holds_slot(key_slot(key)),
        _ => true,
    }
}

/// Connection `who` waits for the handover's end.
pub(super) fn park(core: &mut ShardCore, who: (u32, u32)) {
    if let Some(node) = core.cluster_node.as_deref_mut() {
        node.slot_migrations.held.push(who);
    }
}

/// After write command `cmd` ran (its effects recorded keys and records):
/// what it did to an export's keys already sent goes to the target, as its
/// records, or as the state of the keys it wrote when a record could not be
/// replayed there (a key named not sent yet, a script, keys outside the
/// job). A flush fails the job.
#[cold]
pub(super) fn record_write(core: &mut ShardCore, cmd: &Command, args: Args<'_>, effects: &Effects) {
    let now_ms = core.now_ms;
    let keyless = cmd.meta.keys.is_none();
    let script = cmd.meta.group == "scripting";
    let engine = &core.engine;
    let Some(node) = core.cluster_node.as_deref_mut() else {
        return;
    };
    for job in node.slot_migrations.jobs.iter_mut() {
        let Some(run) = job.run.as_deref_mut() else {
            continue;
        };
        if keyless && !script && effects.dirty > 0 {
            job.set_state(JobState::Failed, "the keyspace was flushed", now_ms / 1000);
            continue;
        }
        let sent = |run: &Export, key: &[u8]| {
            matches!(run.phase(key_slot(key)), Phase::Current | Phase::Sent)
        };
        let touched: Vec<&[u8]> = effects
            .modified_keys()
            .map(|(_, key)| key)
            .filter(|key| sent(run, key))
            .collect();
        if touched.is_empty() {
            continue;
        }
        let by_state = script
            || effects.modified_keys().any(|(_, key)| !sent(run, key))
            || touched.iter().any(|key| run.is_pending(key))
            || cmd.meta.keys.keys(args).any(|key| run.is_pending(key));
        if by_state {
            for key in touched {
                run.take_pending(key);
                queue_state(&mut run.link, engine, key, now_ms, true);
            }
            continue;
        }
        let link = &mut run.link;
        effects.visit_log_records(args, |record| {
            let parts: smallvec::SmallVec<[&[u8]; 8]> = record.collect();
            link.queue(parts.iter().copied());
        });
    }
}

/// A key as it is now, at the end of the stream: RESTORE with its DUMP
/// payload and absolute expiry; when it is gone, DEL if `gone_as_del` (a
/// write deleted it) or nothing (a key of the snapshot that expired).
fn queue_state(link: &mut Link, engine: &Engine, key: &[u8], now_ms: u64, gone_as_del: bool) {
    match engine.peek_entry(0, key, now_ms) {
        Some(entry) => {
            let payload = ruvio_engine::rdb::dump_payload(entry.value());
            let expire_at = entry.expire_at().unwrap_or(0).to_string();
            let args: [&[u8]; 6] = [
                b"RESTORE",
                key,
                expire_at.as_bytes(),
                &payload,
                b"REPLACE",
                b"ABSTTL",
            ];
            link.queue(args.into_iter());
        }
        None if gone_as_del => link.queue([&b"DEL"[..], key].into_iter()),
        None => {}
    }
}

/// The shard's tick: new exports connect, an import whose source went away
/// fails, and the flags [`turn`] reads are recounted.
pub(super) fn tick(core: &mut ShardCore, conns: &mut Slab<Conn>) {
    let busy = core
        .cluster_node
        .as_deref()
        .is_some_and(|n| n.slot_migrations.busy() || n.slot_migrations.working());
    if !busy {
        return;
    }
    let jobs = core
        .cluster_node
        .as_deref()
        .map_or(0, |n| n.slot_migrations.jobs.len());
    for i in 0..jobs {
        step(core, conns, i);
    }
    release_held(core, conns);
}

/// On every turn of the shard's loop while an export or a deletion works
/// here: FINISH's
/// answer is looked for at once while an export hands over (the held writes
/// wait about a round trip under traffic rather than a tick), and when the
/// pace allows, a slice of the jobs' work runs (keys sent, the stream
/// written, replies read, the source's copies deleted).
#[inline]
pub(super) fn turn(core: &mut ShardCore, conns: &mut Slab<Conn>) {
    if core
        .cluster_node
        .as_deref()
        .is_some_and(|n| n.slot_migrations.exports_or_deletes())
    {
        work(core, conns);
    }
}

#[cold]
fn work(core: &mut ShardCore, conns: &mut Slab<Conn>) {
    let commands = core.stats.commands;
    let Some(node) = core.cluster_node.as_deref_mut() else {
        return;
    };
    let holding = node.slot_migrations.holding();
    let jobs = node.slot_migrations.jobs.len();
    if holding {
        for i in 0..jobs {
            let handing_over = core
                .cluster_node
                .as_deref()
                .is_some_and(|n| n.slot_migrations.jobs[i].state == JobState::HandingOver);
            if handing_over {
                send(core, i, Instant::now());
            }
        }
    }
    let began = Instant::now();
    let slice = core
        .cluster_node
        .as_deref_mut()
        .and_then(|n| n.slot_migrations.pace.slice(began, commands));
    if let Some(slice) = slice {
        let until = began + slice;
        // Each job does some of its work, however little time is left (a
        // shard descheduled between the clock's reads must still progress).
        for i in 0..jobs {
            let sending = core.cluster_node.as_deref().is_some_and(|n| {
                let job = &n.slot_migrations.jobs[i];
                job.run.is_some() && job.state != JobState::HandingOver
            });
            if sending {
                send(core, i, until);
            }
            delete_left(core, i, until);
        }
        let commands = core.stats.commands;
        if let Some(node) = core.cluster_node.as_deref_mut() {
            node.slot_migrations
                .pace
                .spent(slice, began.elapsed(), commands);
        }
    }
    if holding || slice.is_some() {
        release_held(core, conns);
    }
}

/// How long the loop may sleep at most while a job works here: not at all
/// when the clients are idle and the work goes on, else a millisecond
/// (FINISH's answer and the stream's socket are off the ring, and the pace
/// earns its slices by the clock).
pub(super) fn sleep_ms_max(core: &ShardCore) -> Option<u64> {
    let migrations = &core.cluster_node.as_deref()?.slot_migrations;
    if !migrations.working() {
        return None;
    }
    Some(match migrations.pace.eager(Instant::now()) {
        true => 0,
        false => 1,
    })
}

/// The flags recounted; once no handover is left, the held writes run.
fn release_held(core: &mut ShardCore, conns: &mut Slab<Conn>) {
    let Some(node) = core.cluster_node.as_deref_mut() else {
        return;
    };
    node.slot_migrations.recount();
    if node.slot_migrations.holding() || node.slot_migrations.held.is_empty() {
        return;
    }
    // The handover is over (or failed): the held writes run, here or by
    // `-MOVED` to the slots' new owner.
    for who in std::mem::take(&mut node.slot_migrations.held) {
        if let Some(conn) = conns.get_mut(who.0, who.1) {
            conn.client.paused = false;
            core.resume.push(who);
        }
    }
}

/// One job's step on the tick.
fn step(core: &mut ShardCore, conns: &mut Slab<Conn>, i: usize) {
    let now_ms = core.now_ms;
    let Some(node) = core.cluster_node.as_deref_mut() else {
        return;
    };
    let job = &mut node.slot_migrations.jobs[i];
    if job.export && job.state == JobState::Connecting {
        connect(core, i);
    } else if let Some(importer) = job.importer {
        if !conns.iter().any(|(_, c)| c.client.id == importer) {
            job.deleting = job.slots();
            job.set_state(
                JobState::Failed,
                "the source's connection closed",
                now_ms / 1000,
            );
        }
    }
}

/// A new export connects to its target and asks it to import the slots.
fn connect(core: &mut ShardCore, i: usize) {
    let now_ms = core.now_ms;
    let text = |name: &str| Some(core.cfg.param(name).to_string()).filter(|v| !v.is_empty());
    let (user, password) = (text("masteruser"), text("masterauth"));
    let Some(node) = core.cluster_node.as_deref_mut() else {
        return;
    };
    let address = {
        let job = &node.slot_migrations.jobs[i];
        node.cluster
            .node_named(&job.target)
            .map(|(_, ip, port)| (ip.to_string(), port))
    };
    let job = &mut node.slot_migrations.jobs[i];
    let Some((ip, port)) = address else {
        job.set_state(JobState::Failed, "the target node is gone", now_ms / 1000);
        return;
    };
    let mut link = match Link::connect(&ip, port, CONNECT_TIMEOUT, now_ms) {
        Ok(link) => link,
        Err(e) => {
            let why = format!("could not connect to the target: {e}");
            job.set_state(JobState::Failed, &why, now_ms / 1000);
            return;
        }
    };
    if let Some(password) = &password {
        match &user {
            Some(user) => {
                link.queue([&b"AUTH"[..], user.as_bytes(), password.as_bytes()].into_iter())
            }
            None => link.queue([&b"AUTH"[..], password.as_bytes()].into_iter()),
        }
    }
    let mut start: Vec<Vec<u8>> = vec![
        b"CLUSTER".to_vec(),
        b"SYNCSLOTS".to_vec(),
        b"START".to_vec(),
        job.name.as_bytes().to_vec(),
        job.source.to_vec(),
    ];
    for &(a, b) in &job.ranges {
        start.push(a.to_string().into_bytes());
        start.push(b.to_string().into_bytes());
    }
    link.queue(start.iter().map(Vec::as_slice));
    job.run = Some(Box::new(Export::new(link, job.slots())));
    job.set_state(JobState::Snapshotting, "", now_ms / 1000);
    node.slot_migrations.export_started();
}

/// An export's step: keys read into the stream until `until`, the stream
/// written, the acknowledgments read, and the handover once every key is
/// sent and little is left.
fn send(core: &mut ShardCore, i: usize, until: Instant) {
    let now_ms = core.now_ms;
    let engine = &mut core.engine;
    let Some(node) = core.cluster_node.as_deref_mut() else {
        return;
    };
    let job = &mut node.slot_migrations.jobs[i];
    let Some(run) = job.run.as_deref_mut() else {
        return;
    };
    if job.state == JobState::Snapshotting {
        let mut sent = 0usize;
        while run.link.unsent_bytes() < QUEUED_BYTES_MAX {
            if let Some(slot) = run.slot_to_start() {
                let keys = engine.keys_in_slot(0, slot, usize::MAX);
                run.start_slot(slot, keys);
            }
            if run.all_sent() {
                job.state = JobState::Streaming;
                break;
            }
            let Some(key) = run.next_key() else {
                continue;
            };
            queue_state(&mut run.link, engine, &key, now_ms, false);
            sent += 1;
            if sent.is_multiple_of(KEYS_PER_CLOCK_CHECK) && Instant::now() >= until {
                break;
            }
        }
    }
    let mut last = Vec::new();
    let stepped = run
        .link
        .flush()
        .and_then(|_| run.link.read_replies(now_ms, &mut last));
    job.acked_s = run.link.last_reply_ms / 1000;
    if let Err(why) = stepped {
        job.set_state(JobState::Failed, &why, now_ms / 1000);
        return;
    }
    let silent_ms = now_ms.saturating_sub(run.link.last_reply_ms);
    if run.link.replies_owed > 0 && silent_ms > SILENT_TARGET_MS_MAX {
        job.set_state(
            JobState::Failed,
            "the target stopped answering",
            now_ms / 1000,
        );
        return;
    }
    if job.state == JobState::HandingOver {
        let answered = run.link.replies_owed == 0 && run.link.unsent_bytes() == 0;
        if answered && last != b"+OK\r\n" {
            let why = format!(
                "the target answered FINISH with {}",
                String::from_utf8_lossy(&last).trim_end()
            );
            job.set_state(JobState::Failed, &why, now_ms / 1000);
        } else if answered {
            handed_over(node, i, now_ms);
        } else if now_ms.saturating_sub(run.handover_at_ms) > HANDOVER_TIMEOUT_MS {
            let why = "the target did not finish in time";
            job.set_state(JobState::Failed, why, now_ms / 1000);
        }
        return;
    }
    let ready = job.state == JobState::Streaming
        && run.link.unsent_bytes() < HANDOVER_UNSENT_BYTES_MAX
        && run.link.replies_owed < HANDOVER_REPLIES_MAX;
    if ready {
        // From now on the writes to the slots wait (`holds`): none can slip
        // between the last one forwarded and the change of owner.
        let finish: [&[u8]; 4] = [b"CLUSTER", b"SYNCSLOTS", b"FINISH", job.name.as_bytes()];
        run.link.queue(finish.into_iter());
        run.handover_at_ms = now_ms;
        let flushed = run.link.flush();
        job.state = JobState::HandingOver;
        job.updated_s = now_ms / 1000;
        match flushed {
            Ok(()) => node.slot_migrations.hold(),
            Err(why) => job.set_state(JobState::Failed, &why, now_ms / 1000),
        }
    }
}

/// The target answered FINISH: the slots are its own from now on; this
/// node's clients of them get `-MOVED`, its copies are deleted.
fn handed_over(node: &mut crate::cluster::node::ShardNode, i: usize, now_ms: u64) {
    let job = &mut node.slot_migrations.jobs[i];
    let held_ms = job
        .run
        .as_ref()
        .map_or(0, |r| now_ms.saturating_sub(r.handover_at_ms));
    let slots = job.slots();
    let now_s = now_ms / 1000;
    if !node.cluster.give_slots(&slots, &job.target) {
        job.set_state(JobState::Failed, "the target node is gone", now_s);
        return;
    }
    let line = format!(
        "Slot migration {} handed over; writes to its slots were held for {held_ms} ms",
        job.name
    );
    log(Level::Notice, &line);
    job.acked_s = now_s;
    job.deleting = slots;
    job.set_state(JobState::Success, "", now_s);
    node.changed();
}

/// Keys of a finished job's slots that this node does not serve (the
/// source's copies after a success, a failed import's) are deleted until
/// `until` (a batch at least), as DELs the shard logs and feeds to its
/// replicas.
fn delete_left(core: &mut ShardCore, i: usize, until: Instant) {
    while delete_batch(core, i) && Instant::now() < until {}
}

/// Up to [`KEYS_PER_CLOCK_CHECK`] of those keys deleted by one DEL; false
/// when none was left.
fn delete_batch(core: &mut ShardCore, i: usize) -> bool {
    let mut keys = Vec::new();
    {
        let Some(node) = core.cluster_node.as_deref_mut() else {
            return false;
        };
        let job = &node.slot_migrations.jobs[i];
        if job.state.active() || job.deleting.is_empty() {
            return false;
        }
        // The first slot with keys gives the batch; the slots before it are
        // done, and so is one served here (taken back by a later job: its
        // keys stay).
        let mut done = 0;
        for &slot in &job.deleting {
            if node.serves(slot) {
                done += 1;
                continue;
            }
            keys = core.engine.keys_in_slot(0, slot, KEYS_PER_CLOCK_CHECK);
            if core.engine.count_keys_in_slot(0, slot) == keys.len() {
                done += 1;
            }
            if !keys.is_empty() {
                break;
            }
        }
        node.slot_migrations.jobs[i].deleting.drain(..done);
    }
    if keys.is_empty() {
        return false;
    }
    let Some(del) = crate::cmd::registry::registry().lookup(b"del") else {
        return false;
    };
    let argv: OwnedArgs = std::iter::once(b"DEL".as_slice())
        .chain(keys.iter().map(Vec::as_slice))
        .collect();
    let caller = Caller {
        client_id: 0,
        db: 0,
        proto: Protocol::Resp2,
        no_touch: false,
        may_block: false,
        borrowing: false,
        tracking: Tracked::default(),
    };
    let mut discarded = Vec::new();
    super::exec::run_engine(core, del, caller, argv.args(), &mut discarded);
    true
}
