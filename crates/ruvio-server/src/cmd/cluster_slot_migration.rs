//! CLUSTER MIGRATESLOTS, GETSLOTMIGRATIONS and CANCELSLOTMIGRATIONS (Valkey
//! 9's atomic slot migration, with Valkey 9.1's arity and error texts), and
//! SYNCSLOTS, what the source of a job says to the target.
//!
//! The jobs and the source's connection are `cluster/slot_migration.rs`; the
//! shard drives them on its tick and its loop's turns
//! (`shard/slot_export.rs`, `shard/slot_import.rs`). SYNCSLOTS is this
//! protocol's own (Valkey's internal subcommand of that name speaks another):
//! `START <job> <source-id> <start> <end> [<start> <end> ...]` makes the
//! connection the job's (its commands then run whatever their slot: the keys
//! and the forwarded writes), `FINISH <job>` hands the slots to this node in
//! one step. A START names a known master that owns the slots here; any
//! other client's FINISH is refused.

use super::migrate::MovesKeys;
use super::{parse_i64, Ctx, Server, ServerResult};
use crate::cluster::bus::message::{NodeName, NAME_LEN};
use crate::cluster::node::ShardNode;
use crate::cluster::slot_migration::{job_name, Job, JobState};
use crate::net::conn::Conn;
use crate::net::slab::Slab;
use ruvio_engine::slot::SLOT_COUNT;
use ruvio_engine::CmdError;
use ruvio_resp::{Args, Reply};

/// Inclusive slot ranges, in the order given.
type Ranges = Vec<(u16, u16)>;

/// An error line of its text.
fn error(text: impl Into<String>) -> CmdError {
    CmdError::Line(text.into().into_bytes())
}

/// The shard's node, or `unknown subcommand` without the bus.
fn node<'a, S: Server>(
    ctx: &'a mut Ctx<'_, S>,
    args: Args<'_>,
) -> Result<&'a mut ShardNode, CmdError> {
    match ctx.core.cluster_node_mut() {
        Some(node) => Ok(node),
        None => Err(CmdError::unknown_subcommand(args.get(1), "cluster")),
    }
}

/// One slot of a range argument.
fn slot(value: i64) -> Result<u16, CmdError> {
    u16::try_from(value)
        .ok()
        .filter(|s| *s < SLOT_COUNT)
        .ok_or(CmdError::InvalidOrOutOfRangeSlot)
}

/// `start end [start end ...]` from `args[*at..]`, as Valkey's
/// `SLOTSRANGE` reads them: pairs while the next argument is a number.
fn ranges(args: Args<'_>, at: &mut usize) -> Result<Ranges, CmdError> {
    let mut ranges: Ranges = Vec::new();
    while *at < args.len() {
        let Some(start) = parse_i64(args.get(*at)) else {
            break;
        };
        if *at + 1 >= args.len() {
            return Err(error("ERR No end slot for final slot range"));
        }
        let start = slot(start)?;
        let end = parse_i64(args.get(*at + 1)).ok_or(CmdError::InvalidOrOutOfRangeSlot)?;
        let end = slot(end)?;
        if start > end {
            return Err(error(format!(
                "ERR Start slot number {start} is greater than end slot number {end}."
            )));
        }
        if let Some(&(a, b)) = ranges.iter().find(|&&(a, b)| start <= b && a <= end) {
            return Err(error(format!(
                "ERR Slot range {start}-{end} overlaps with previous range {a}-{b}."
            )));
        }
        ranges.push((start, end));
        *at += 2;
    }
    if ranges.is_empty() {
        return Err(error("ERR No slot ranges specified"));
    }
    Ok(ranges)
}

/// A node name argument: 40 characters of a name.
fn node_name(arg: &[u8]) -> Result<NodeName, CmdError> {
    <NodeName>::try_from(arg)
        .ok()
        .filter(|n| n.iter().all(u8::is_ascii_hexdigit))
        .ok_or_else(|| {
            error(format!(
                "ERR Invalid node name: {}",
                String::from_utf8_lossy(arg)
            ))
        })
}

/// `CLUSTER MIGRATESLOTS SLOTSRANGE start end [start end ...] NODE node-id
/// [SLOTSRANGE ... NODE node-id ...]`: one job per target, started on the
/// shard's next tick.
pub(super) fn migrateslots<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let now_ms = ctx.core.now_ms();
    let shard = ctx.core.shard_id() as u64;
    let node = node(ctx, args)?;
    let mut groups: Vec<(Ranges, &[u8])> = Vec::new();
    let mut at = 2;
    while at < args.len() {
        if !args.get(at).eq_ignore_ascii_case(b"SLOTSRANGE") {
            return Err(CmdError::Syntax);
        }
        at += 1;
        let ranges = ranges(args, &mut at)?;
        if at + 1 >= args.len() || !args.get(at).eq_ignore_ascii_case(b"NODE") {
            return Err(CmdError::Syntax);
        }
        groups.push((ranges, args.get(at + 1)));
        at += 2;
    }
    let myself = node.cluster.myself();
    let mut jobs = Vec::new();
    for (ranges, target) in groups {
        let target_name = node_name(target)?;
        let Some((master, _, _)) = node.cluster.node_named(&target_name) else {
            return Err(error(format!(
                "ERR Unknown node name: {}",
                String::from_utf8_lossy(target)
            )));
        };
        if target_name == myself {
            return Err(error("ERR Target node can not be this node."));
        }
        if !master {
            return Err(error("ERR Target node is not a primary."));
        }
        let slots = || ranges.iter().flat_map(|&(a, b)| a..=b);
        if !slots().all(|s| node.serves(s)) {
            return Err(match slots().any(|s| node.serves(s)) {
                true => error("ERR Requested slots span multiple shards"),
                false => error("ERR Slots are not served by this node."),
            });
        }
        jobs.push((ranges, target_name));
    }
    for (i, (ranges, _)) in jobs.iter().enumerate() {
        let overlaps = |other: &[(u16, u16)]| {
            ranges
                .iter()
                .any(|&(a, b)| other.iter().any(|&(c, d)| a <= d && c <= b))
        };
        let active = node
            .slot_migrations
            .jobs
            .iter()
            .any(|j| j.state.active() && overlaps(&j.ranges));
        if active || jobs[..i].iter().any(|(other, _)| overlaps(other)) {
            return Err(error("ERR Slot ranges in migrations overlap"));
        }
    }
    let now_s = now_ms / 1000;
    for (n, (ranges, target)) in jobs.into_iter().enumerate() {
        let seed =
            now_ms ^ (shard << 48) ^ ((n as u64) << 40) ^ node.slot_migrations.jobs.len() as u64;
        node.slot_migrations.add(Job {
            name: job_name(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            export: true,
            ranges,
            source: myself,
            target,
            created_s: now_s,
            updated_s: now_s,
            acked_s: now_s,
            state: JobState::Connecting,
            message: String::new(),
            run: None,
            importer: None,
            deleting: Vec::new(),
        });
    }
    reply.ok();
    Ok(())
}

/// `CLUSTER GETSLOTMIGRATIONS`: every job this node runs or ran, newest
/// first.
pub(super) fn getslotmigrations<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let node = node(ctx, args)?;
    reply.array(node.slot_migrations.jobs.len());
    for job in &node.slot_migrations.jobs {
        job.render(reply);
    }
    Ok(())
}

/// `CLUSTER CANCELSLOTMIGRATIONS`: every active job stops, but one handing
/// over. An export keeps its slots and keys (its connection closes: the
/// target drops what it imported); an import drops its keys and refuses its
/// source's next commands.
pub(super) fn cancelslotmigrations<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let now_s = ctx.core.now_ms() / 1000;
    let node = node(ctx, args)?;
    let mut importers = Vec::new();
    let mut active = 0;
    for job in node.slot_migrations.jobs.iter_mut() {
        if !job.state.active() {
            continue;
        }
        active += 1;
        if job.state == JobState::HandingOver {
            // The target may have taken the slots already: the handover
            // ends within its timeout either way.
            continue;
        }
        if let Some(importer) = job.importer {
            importers.push(importer);
            job.deleting = job.slots();
        }
        job.set_state(JobState::Cancelled, "", now_s);
    }
    if active == 0 {
        return Err(error("ERR No migrations ongoing"));
    }
    for importer in importers {
        release_importer(ctx.conns, importer);
    }
    reply.ok();
    Ok(())
}

/// The source's connection of a stopped import: its commands route as any
/// client's again, and it is closed (the source sees its job fail).
pub fn release_importer(conns: &mut Slab<Conn>, client_id: u64) {
    for (_, conn) in conns.iter_mut() {
        if conn.client.id == client_id {
            conn.client.slot_import = false;
            conn.client.closing = true;
            conn.client.killed = true;
        }
    }
}

/// `CLUSTER SYNCSLOTS START <job> <source-id> <start> <end> ...` and
/// `CLUSTER SYNCSLOTS FINISH <job>`: the target's side of a job.
pub(super) fn syncslots<S: MovesKeys>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let word = args.get(2);
    if word.eq_ignore_ascii_case(b"START") && args.len() >= 7 {
        start(ctx, args)?;
    } else if word.eq_ignore_ascii_case(b"FINISH") && args.len() == 4 {
        finish(ctx, args)?;
    } else {
        return Err(CmdError::Syntax);
    }
    reply.ok();
    Ok(())
}

/// SYNCSLOTS START: this connection is the job's; keys a failed job left
/// in those slots are dropped first.
fn start<S: MovesKeys>(ctx: &mut Ctx<'_, S>, args: Args<'_>) -> ServerResult {
    let now_s = ctx.core.now_ms() / 1000;
    let client_id = ctx.client.id;
    let mut at = 5;
    let ranges = ranges(args, &mut at)?;
    if at != args.len() || args.get(3).len() != NAME_LEN {
        return Err(CmdError::Syntax);
    }
    let source = node_name(args.get(4))?;
    let node = node(ctx, args)?;
    if node.cluster.is_replica() {
        return Err(error("ERR Please use SYNCSLOTS only with masters."));
    }
    let slots: Vec<u16> = ranges.iter().flat_map(|&(a, b)| a..=b).collect();
    for &slot in &slots {
        let owner = node.cluster.slot_owner(slot).map(|(name, _, _)| name);
        if owner != Some(source) {
            return Err(error(format!(
                "ERR Hash slot {slot} is not served by the source node"
            )));
        }
        if node.slot_migrations.active_covers(slot) {
            return Err(error("ERR Slot ranges in migrations overlap"));
        }
    }
    let myself = node.cluster.myself();
    node.slot_migrations.add(Job {
        name: String::from_utf8_lossy(args.get(3)).into_owned(),
        export: false,
        ranges,
        source,
        target: myself,
        created_s: now_s,
        updated_s: now_s,
        acked_s: now_s,
        state: JobState::Importing,
        message: String::new(),
        run: None,
        importer: Some(client_id),
        deleting: Vec::new(),
    });
    let mut left = Vec::new();
    for &slot in &slots {
        left.extend(ctx.core.engine_mut().keys_in_slot(0, slot, usize::MAX));
    }
    if !left.is_empty() {
        let keys: Vec<&[u8]> = left.iter().map(Vec::as_slice).collect();
        ctx.core.delete_moved(ctx.client, &keys);
    }
    ctx.client.slot_import = true;
    Ok(())
}

/// SYNCSLOTS FINISH: every command before it has run (one connection, in
/// order), so the slots are this node's now, under a new config epoch.
fn finish<S: Server>(ctx: &mut Ctx<'_, S>, args: Args<'_>) -> ServerResult {
    let now_ms = ctx.core.now_ms();
    let client_id = ctx.client.id;
    let node = node(ctx, args)?;
    let Some(job) = node
        .slot_migrations
        .named(args.get(3))
        .filter(|j| !j.export && j.importer == Some(client_id))
    else {
        return Err(error("ERR No such slot import on this connection"));
    };
    let slots = job.slots();
    job.set_state(JobState::Success, "", now_ms / 1000);
    job.acked_s = now_ms / 1000;
    node.cluster.claim_slots(&slots, now_ms);
    node.changed_durably();
    ctx.client.slot_import = false;
    Ok(())
}
