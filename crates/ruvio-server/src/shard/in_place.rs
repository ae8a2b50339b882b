//! Running a transaction in place (forward mode, the design and why in
//! [`crate::mesh::in_place`]): the coordinator's steps (visit the parts in shard
//! order, release the held keys, answer the client) and each shard's (run its
//! part, hold its keys, free them). Here because it runs commands on the core and
//! answers connections; the messages and tables are the mesh's.

use crate::cmd::registry::registry;
use crate::mesh::forward::ShardMsg;
use crate::mesh::in_place::{InPlaceOp, Part, PartRan, PlannedPart, Release};
use crate::mesh::lending::{Access, JOINS_WHILE_OTHERS_WAIT_MAX};
use crate::mesh::owner_tx::{self, Deferred};
use crate::net::caller::Caller;
use crate::net::conn::{ClientState, Conn, Merge, ReplyQueue};
use crate::net::slab::Slab;
use crate::shard::multi::QueuedRows;
use crate::shard::ShardCore;
use ruvio_engine::CommandTree;
use ruvio_resp::Args;

/// The coordinator's first step: hold the EXEC's reply slot (the client waits
/// for it, as for a transaction with WATCH), then run the first part. The caller
/// counted the transaction as borrowing (`script_lock::begin_borrowing`): a
/// script that takes the lock waits until it is over.
pub fn start(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    (client, replies, who): (&mut ClientState, &mut ReplyQueue, (u32, u32)),
    parts: Vec<PlannedPart>,
    len: usize,
) {
    // The client goes on meanwhile: what it sends next waits only when it may
    // touch this transaction's keys ([`must_wait`]); its reply keeps its place.
    let seq = replies.hold(Merge::Single, 1);
    core.watches.clear_touched(client.id);
    client.watch_epoch += 1;
    let caller = Caller {
        may_block: false,
        ..Caller::of(client, core.id)
    };
    let ticket = core.lending.next_in_place;
    core.lending.next_in_place += 1;
    client.in_place_txs.push((ticket, seq));
    let shards = parts.iter().map(|p| p.shard).collect();
    let op = InPlaceOp {
        conn: who,
        seq,
        caller,
        len,
        parts,
        shards,
        next: 0,
    };
    core.lending.in_place.insert(ticket, op);
    core.stats.exec_in_place += 1;
    advance(core, conns, ticket);
}

/// Send the next part to its shard (or run it here when it is this shard's).
fn advance(core: &mut ShardCore, conns: &mut Slab<Conn>, ticket: u64) {
    let me = core.id;
    let Some(op) = core.lending.in_place.get_mut(&ticket) else {
        return;
    };
    let hold = op.next + 1 < op.parts.len();
    let caller = op.caller;
    let shards = std::sync::Arc::clone(&op.shards);
    let Some(planned) = op.parts.get_mut(op.next) else {
        return;
    };
    let part = Part {
        from: me,
        ticket,
        caller,
        commands: planned.commands.take().unwrap_or_default(),
        // The plan keeps them too: the client's next commands are checked
        // against them while it runs ([`must_wait`]).
        keys: planned.keys.clone(),
        hold,
        shards,
    };
    let shard = planned.shard;
    match shard == me {
        true => part_arrived(core, conns, part),
        false => core.outbox.in_place(shard, ShardMsg::Part(Box::new(part))),
    }
}

/// A shard's side: run `part` now, or wait while one of its keys is lent or
/// held by others (or something its coordinator sent before it waits here).
pub fn part_arrived(core: &mut ShardCore, conns: &mut Slab<Conn>, part: Part) {
    let must_wait = owner_tx::is_waiting(&core.lending, part.from) || must_wait_here(core, &part);
    match must_wait {
        true => owner_tx::defer(&mut core.lending, part.from, Deferred::Part(Box::new(part))),
        false => run_part(core, conns, part),
    }
}

/// `part` may not run now: one of its keys is lent, or held by another
/// coordinator or by a transaction over other shards, or held by its own chain
/// that was joined [`JOINS_WHILE_OTHERS_WAIT_MAX`] times while someone else
/// waits for one of the keys here (then the chain drains and the waiter goes).
pub fn must_wait_here(core: &ShardCore, part: &Part) -> bool {
    let lending = &core.lending;
    if !lending.any_lent() {
        return false;
    }
    let mut joins_max = None;
    for key in &part.keys {
        if lending.lent.contains(key) {
            return true;
        }
        match lending.held.access(key, part.from, &part.shards) {
            Access::Free => {}
            Access::Taken => return true,
            Access::Chain { joined } => joins_max = joins_max.max(Some(joined)),
        }
    }
    joins_max.is_some_and(|joined| {
        joined >= JOINS_WHILE_OTHERS_WAIT_MAX && someone_else_waits(core, part)
    })
}

/// Someone other than `part`'s chain waits here for one of its keys: a parked
/// command, a lend request, or anything another coordinator sent (counted
/// whatever its keys: a transaction or a forwarded request behind one).
fn someone_else_waits(core: &ShardCore, part: &Part) -> bool {
    let lending = &core.lending;
    let others_queued = lending
        .deferred
        .iter()
        .enumerate()
        .any(|(from, queue)| from != part.from && !queue.is_empty());
    others_queued
        || part.keys.iter().any(|key| {
            core.blocking.is_waited(key)
                || lending
                    .waiting
                    .iter()
                    .any(|request| request.keys.contains(key))
        })
}

/// Run `part`'s commands with nothing in between, hold its keys if it is not the
/// last part, and answer the coordinator with the replies.
pub fn run_part(core: &mut ShardCore, conns: &mut Slab<Conn>, part: Part) {
    let mut replies = Vec::new();
    let mut ends = Vec::with_capacity(part.commands.len());
    // Its commands run on the keys its chain holds here, and wait for no one
    // (it ran because none of its keys is taken by others).
    core.lending.running_chain = Some((part.from, std::sync::Arc::clone(&part.shards)));
    super::messages::run_queue(core, part.caller, &part.commands, &mut replies, &mut ends);
    core.lending.running_chain = None;
    if part.hold {
        let held = &mut core.lending.held;
        if held.hold(&part.keys, part.from, &part.shards) {
            core.stats.in_place_joins += 1;
        }
        core.lending
            .held_for
            .insert((part.from, part.ticket), part.keys);
        super::lending::count_lent(core);
    }
    // Clients blocked on keys this part wrote try again now: on a held key they
    // park again until the release.
    super::exec::serve_ready(core, conns);
    let ran = PartRan {
        ticket: part.ticket,
        replies,
        ends,
    };
    match part.from == core.id {
        true => part_ran(core, conns, ran),
        false => core
            .outbox
            .in_place(part.from, ShardMsg::PartRan(Box::new(ran))),
    }
}

/// The coordinator's side: a part ran. Run the next one, or (the last ran) release
/// the held keys and answer the client.
pub fn part_ran(core: &mut ShardCore, conns: &mut Slab<Conn>, ran: PartRan) {
    let Some(op) = core.lending.in_place.get_mut(&ran.ticket) else {
        return;
    };
    if let Some(part) = op.parts.get_mut(op.next) {
        part.replies = ran.replies;
        part.ends = ran.ends;
    }
    op.next += 1;
    if op.next < op.parts.len() {
        return advance(core, conns, ran.ticket);
    }
    let Some(op) = core.lending.in_place.remove(&ran.ticket) else {
        return;
    };
    let me = core.id;
    for part in &op.parts[..op.parts.len() - 1] {
        let release = Release {
            from: me,
            ticket: ran.ticket,
        };
        match part.shard == me {
            true => self::release(core, conns, release),
            false => core.outbox.in_place(part.shard, ShardMsg::Release(release)),
        }
    }
    crate::mesh::script_lock::end_borrowing(core.script_server());
    let reply = op.reply();
    let (index, gen) = op.conn;
    if let Some(conn) = conns.get_mut(index, gen) {
        conn.client.in_place_txs.retain(|&(t, _)| t != ran.ticket);
        conn.replies.fill(op.seq, 0, reply);
        core.reply_filled(conn, op.conn, op.seq);
    }
}

/// A client with transactions running in place goes on meanwhile; a command it
/// sends then waits (the held slot it waits for is returned) when it may touch
/// their keys: a key in common, a command that is not a plain keyspace command
/// ([`super::lending::touches_only_named_keys`]), or an EXEC that would not run
/// in place. So its commands take effect in the order it sent them wherever they
/// share keys, as [`super::lending::must_wait_for_transaction`] keeps it for
/// borrowing, and a pipeline of transactions on other keys runs them side by
/// side. An EXEC that runs in place over the same shards as the transactions it
/// shares keys with goes on too: it is of their chain, and meets them in the
/// order sent on every shard ([`crate::mesh::lending::HeldKeys`]).
pub fn must_wait(core: &ShardCore, client: &ClientState, args: Args<'_>) -> Option<u64> {
    let &(_, oldest) = client.in_place_txs.first()?;
    let cmd = registry()
        .lookup(args.get(0))
        .and_then(|c| c.resolve(args).ok());
    // Unknown or refused: answered at once, touching nothing.
    let cmd = cmd?;
    // The EXEC reply the client must wait for before touching `key`: that of
    // the oldest transaction naming it and not over `chain`'s shards.
    let in_flight = |db: usize, key: &[u8], chain: Option<&[usize]>| {
        client.in_place_txs.iter().find_map(|&(ticket, seq)| {
            let op = core.lending.in_place.get(&ticket)?;
            let named = op.parts.iter().any(|p| {
                p.keys
                    .binary_search_by(|(d, k)| (*d, k.as_slice()).cmp(&(db, key)))
                    .is_ok()
            });
            (named && chain != Some(&*op.shards)).then_some(seq)
        })
    };
    if let Some(queued) = &client.multi {
        if cmd.meta.name != "exec" {
            // Queued: it touches nothing yet.
            return None;
        }
        // An EXEC (in place or not) whose queue shares no key with them: the
        // two transactions commute. A queue that SELECTs or runs anything else
        // waits.
        let mut rows = queued.commands.rows();
        if !rows.all(|(cmd, _)| super::lending::touches_only_named_keys(cmd)) {
            return Some(oldest);
        }
        let chain = super::multi::in_place_shards(core, client, queued);
        return queued.commands.rows().find_map(|(cmd, args)| {
            cmd.meta
                .keys
                .keys(args)
                .find_map(|key| in_flight(client.db, key, chain.as_deref()))
        });
    }
    if cmd.meta.name == "multi" {
        return None;
    }
    if !super::lending::touches_only_named_keys(cmd) {
        return Some(oldest);
    }
    cmd.meta
        .keys
        .keys(args)
        .find_map(|key| in_flight(client.db, key, None))
}

/// A shard's side: the transaction is over, its keys here are free. Whoever
/// waited on them goes on, as when lent keys come home.
pub fn release(core: &mut ShardCore, conns: &mut Slab<Conn>, release: Release) {
    let Some(keys) = core
        .lending
        .held_for
        .remove(&(release.from, release.ticket))
    else {
        return;
    };
    let free = core.lending.held.release(keys);
    if free.is_empty() {
        // Later transactions of its chain hold them still.
        return;
    }
    for (db, key) in free {
        core.signal_key(db, &key);
    }
    super::lending::keys_free(core, conns);
}

#[cfg(test)]
mod tests {
    use crate::mesh::lending::JOINS_WHILE_OTHERS_WAIT_MAX;
    use crate::shard::inproc::{pipeline, TwoShards};

    // "b" and "c" live on shard 0, "a" and "d" on shard 1; client c is on shard c.

    fn info_stat(server: &mut TwoShards, name: &str) -> String {
        server.clear_replies(0);
        server.send(0, &["INFO", "stats"]);
        let info = String::from_utf8_lossy(server.view(0).replies).into_owned();
        let line = info
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")));
        line.unwrap_or_else(|| panic!("no {name} in {info}"))
            .to_owned()
    }

    /// Each shard runs its commands in place and the replies come back in queue
    /// order, on either shard's connection; nothing was borrowed.
    #[test]
    fn parts_run_on_their_shards_and_merge_in_queue_order() {
        let mut server = TwoShards::new();
        for c in 0..2 {
            server.clear_replies(c);
            server.receive(
                c,
                &pipeline(&[
                    &["MULTI"],
                    &["INCR", "a"],
                    &["INCR", "b"],
                    &["MGET", "a", "d"],
                    &["GET", "b"],
                    &["EXEC"],
                ]),
            );
        }
        assert_eq!(
            server.view(1).replies,
            b"+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n\
              *4\r\n:2\r\n:2\r\n*2\r\n$1\r\n2\r\n$-1\r\n$1\r\n2\r\n"
        );
        server.send(0, &["INFO", "stats"]);
        let info = String::from_utf8_lossy(server.view(0).replies).into_owned();
        assert!(info.contains("cross_shard_exec_in_place:2\r\n"), "{info}");
        assert!(info.contains("cross_shard_exec_borrowed:0\r\n"), "{info}");
    }

    /// A client goes on while its transaction runs in place: a pipelined
    /// transaction on other keys starts at once, a read of the first one's key
    /// waits for it; the replies stay in the order sent.
    #[test]
    fn a_pipeline_goes_on_past_an_exec_running_in_place() {
        let mut server = TwoShards::new();
        let reads = pipeline(&[&["GET", "a"], &["GET", "d"]]);
        let mut sent = pipeline(&[
            &["MULTI"],
            &["INCR", "b"],
            &["INCR", "a"],
            &["EXEC"],
            &["MULTI"],
            &["INCR", "c"],
            &["INCR", "d"],
            &["EXEC"],
        ]);
        sent.extend_from_slice(&reads);
        server.clear_replies(1);
        server.receive_unsettled(1, &sent);
        // The second EXEC started without waiting for the first; GET a waits.
        let view = server.view(1);
        assert!(view.blocked);
        assert_eq!(view.unparsed, reads.len());
        server.settle();
        assert_eq!(
            server.view(1).replies,
            b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n:1\r\n:1\r\n\
              +OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n:1\r\n:1\r\n\
              $1\r\n1\r\n$1\r\n1\r\n"
        );
        server.send(0, &["INFO", "stats"]);
        let info = String::from_utf8_lossy(server.view(0).replies).into_owned();
        assert!(info.contains("cross_shard_exec_in_place:2\r\n"), "{info}");
    }

    /// A command on a key the first part holds waits for the release: a client
    /// never sees the first part done and the second not.
    #[test]
    fn a_held_key_waits_for_the_whole_transaction() {
        let mut server = TwoShards::new();
        server.send(1, &["SET", "b", "0"]);
        server.send(1, &["SET", "a", "0"]);
        server.receive_unsettled(
            1,
            &pipeline(&[&["MULTI"], &["INCR", "b"], &["INCR", "a"], &["EXEC"]]),
        );
        // Shard 1 sends shard 0 its part; shard 0 runs it and holds "b".
        server.deliver_from(1);
        server.clear_replies(0);
        server.receive_unsettled(0, &pipeline(&[&["GET", "b"]]));
        assert!(server.view(0).replies.is_empty());
        server.settle();
        assert_eq!(server.view(0).replies, b"$1\r\n1\r\n");
        server.send(0, &["GET", "a"]);
        assert!(server.view(0).replies.ends_with(b"$1\r\n1\r\n"));
    }

    /// A client's pipelined transactions on the same keys pass them down their
    /// chain (each part after the first joins the hold on "b"); once a reader
    /// waits for "b", at most JOINS_WHILE_OTHERS_WAIT_MAX transactions joined
    /// before it: the later ones wait, and the reader sees the earlier ones
    /// whole and none of the later ones.
    #[test]
    fn a_waiting_reader_stops_the_chain_joining() {
        let mut server = TwoShards::new();
        let tx = pipeline(&[&["MULTI"], &["INCR", "b"], &["INCR", "a"], &["EXEC"]]);
        let before_reader = JOINS_WHILE_OTHERS_WAIT_MAX as usize + 8;
        server.receive_unsettled(1, &tx.repeat(before_reader));
        // Shard 0 runs every part as it comes: one hold, joined by all but the first.
        server.deliver_from(1);
        server.clear_replies(0);
        server.receive_unsettled(0, &pipeline(&[&["GET", "b"]]));
        assert!(
            server.view(0).replies.is_empty(),
            "GET b waits for the holders"
        );
        let after_reader = 8;
        server.receive_unsettled(1, &tx.repeat(after_reader));
        server.deliver_from(1);
        server.settle();
        assert_eq!(
            String::from_utf8_lossy(server.view(0).replies),
            format!("$2\r\n{before_reader}\r\n"),
        );
        // The later ones ran after the reader: their first took the key again,
        // the rest joined it.
        let joined = before_reader - 1 + after_reader - 1;
        assert_eq!(
            info_stat(&mut server, "cross_shard_exec_parts_joined"),
            joined.to_string()
        );
        let total = before_reader + after_reader;
        server.clear_replies(0);
        server.send(0, &["MGET", "a", "b"]);
        assert_eq!(
            String::from_utf8_lossy(server.view(0).replies),
            format!("*2\r\n$2\r\n{total}\r\n$2\r\n{total}\r\n"),
        );
    }

    /// Clients of both shards pipeline transactions on the same two keys: two
    /// chains take turns on "b", and every transaction sees both keys at the
    /// same count (none ran between another's parts).
    #[test]
    fn two_coordinators_chains_take_turns_whole() {
        let mut server = TwoShards::new();
        let tx = pipeline(&[&["MULTI"], &["INCR", "b"], &["INCR", "a"], &["EXEC"]]);
        let per_client = 50;
        for c in 0..2 {
            server.clear_replies(c);
            server.receive_unsettled(c, &tx.repeat(per_client));
        }
        server.settle();
        let mut seen = Vec::new();
        for c in 0..2 {
            let replies = String::from_utf8_lossy(server.view(c).replies).into_owned();
            let counts: Vec<&str> = replies
                .split("\r\n")
                .filter_map(|l| l.strip_prefix(':'))
                .collect();
            assert_eq!(counts.len(), 2 * per_client, "{replies}");
            for pair in counts.chunks(2) {
                assert_eq!(pair[0], pair[1], "half a transaction seen: {replies}");
                seen.push(pair[0].parse::<usize>().expect("a count"));
            }
        }
        seen.sort_unstable();
        assert_eq!(seen, (1..=2 * per_client).collect::<Vec<_>>());
    }
}
