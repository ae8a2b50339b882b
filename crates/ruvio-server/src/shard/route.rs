//! Where a command runs: here, on another shard (forward mode), split over the
//! owners of its keys, on borrowed keys, on every shard; or `MOVED`/`CROSSSLOT` in
//! per-shard mode, as Redis Cluster answers; on a node of the cluster bus, the
//! node's answers first (in forward mode the node is the process: its slots
//! then go to their shards as without the bus). Apart from `dispatch` because the
//! decision reads only the command's row, its keys and the topology: the one place
//! to read when a command lands on an unexpected shard.

use crate::cluster::slot_map::{NodeRoutes, SlotRoute};
use crate::cmd::registry::{Command, Placement};
use crate::config::PortMode;
use crate::net::conn::Merge;
use crate::shard::ShardCore;
use ruvio_engine::command::flags::{ALL_SHARDS, ASKING, SPLITTABLE, WRITE};
use ruvio_engine::slot::key_slot;
use ruvio_engine::CmdError;
use ruvio_resp::Args;

/// Where a command runs.
pub(super) enum Route {
    Local,
    Moved(u16, usize),
    /// `cluster-enabled yes`: another node serves the slot (its target in the
    /// shard's `ShardNode`).
    MovedToNode(u16, u16),
    /// `cluster-enabled yes`: the slot is migrating and a key is not here.
    Ask(u16),
    /// `cluster-enabled yes`: keys of an importing slot, some not here yet.
    TryAgain,
    /// `cluster-enabled yes`: no node serves the slot.
    SlotNotServed,
    /// `cluster-enabled yes`: the cluster is down.
    ClusterDown,
    /// `cluster-allow-reads-when-down yes`: a write while the cluster is down.
    ClusterDownReadOnly,
    CrossSlot,
    /// Entirely on another shard.
    Remote(usize),
    /// Forward mode: asked of another shard, which routes it again with what
    /// only it knows and runs it: a server command writing its keys (MIGRATE),
    /// or a keyed command of a node's slot in flight (which of its keys that
    /// shard holds decides `-ASK` / `-TRYAGAIN`).
    AskShard(usize),
    /// Keys on several shards: the key positions each shard gets.
    Split(Vec<(usize, Vec<usize>)>),
    /// Keys on several shards, one atomic command: borrow them all and run it here
    /// (see [`crate::mesh::lending`]).
    Lend(Vec<(usize, Vec<usize>)>),
    /// Every shard runs it and the replies merge.
    AllShards,
    /// SCAN: the shard in the cursor's high bits, with the shard-local cursor.
    Scan(usize, u64),
}

/// `-BUSY` when the route needs a shard running a script past
/// `busy-reply-threshold` (its loop is inside Lua; see docs/scripting.md).
pub(super) fn busy_refusal(core: &ShardCore, route: &Route) -> Option<CmdError> {
    let busy = |shard: usize| core.shared.scripts.busy_error(shard);
    let shards = core.topo.nodes.len();
    match route {
        Route::Remote(shard) | Route::AskShard(shard) => busy(*shard),
        Route::Split(groups) | Route::Lend(groups) => groups.iter().find_map(|(s, _)| busy(*s)),
        Route::AllShards => (0..shards).find_map(busy),
        Route::Scan(first, _) => (*first..shards).find_map(busy),
        Route::Local
        | Route::Moved(..)
        | Route::MovedToNode(..)
        | Route::Ask(_)
        | Route::TryAgain
        | Route::SlotNotServed
        | Route::ClusterDown
        | Route::ClusterDownReadOnly
        | Route::CrossSlot => None,
    }
}

/// What a slot in flight (CLUSTER SETSLOT MIGRATING / IMPORTING) lets a
/// command do, besides its keys ([`in_flight_route`]).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum InFlight {
    /// Routed alone, as sent.
    Plain,
    /// The client sent ASKING before it: an importing slot serves it.
    Asking,
    /// A command of an EXEC, whose queue's keys were checked together when EXEC
    /// began (`shard::multi::exec`; Redis checks a transaction once, as a
    /// whole): it runs here, whatever the keys it finds by then.
    ExecChecked,
}

impl InFlight {
    /// What `client`'s next command may do.
    pub(super) fn of(client: &crate::net::conn::ClientState) -> InFlight {
        match (client.in_exec, client.asking) {
            (true, _) => InFlight::ExecChecked,
            (false, true) => InFlight::Asking,
            (false, false) => InFlight::Plain,
        }
    }
}

/// Whether a command runs here whatever its keys: one that runs where the
/// client is, or any command of a single forward-mode shard that is no node
/// of the cluster bus. The request path's first question, inlined (no
/// [`Route`] to build and drop).
#[inline(always)]
pub(super) fn runs_here(core: &ShardCore, cmd: &Command) -> bool {
    let single = core.topo.mode == PortMode::Forward
        && core.topo.nodes.len() == 1
        && core.cluster_node.is_none();
    cmd.placement == Placement::Here || single
}

/// Decide where a command runs (`in_flight`: what a slot in flight lets it do).
pub(super) fn route(core: &ShardCore, cmd: &Command, args: Args<'_>, in_flight: InFlight) -> Route {
    if runs_here(core, cmd) {
        return Route::Local;
    }
    if core.topo.mode == PortMode::Forward {
        if let Some(routes) = core.node_routes() {
            if let Some(elsewhere) = forward_node_route(core, routes, (cmd, args), in_flight) {
                return elsewhere;
            }
        }
    }
    placement(core, cmd, args, in_flight)
}

/// Where a command runs past a forward-mode node's answer (which served it):
/// here, on the shards holding its keys, on every shard; in per-shard mode
/// the node's or the fixed topology's answer, as [`route`].
pub(super) fn placement(
    core: &ShardCore,
    cmd: &Command,
    args: Args<'_>,
    in_flight: InFlight,
) -> Route {
    let shards = core.topo.nodes.len();
    let forward = core.topo.mode == PortMode::Forward;
    if cmd.meta.keys.is_none() {
        if forward && crate::mesh::lending::swaps_dbs(cmd.meta) {
            // Under the script lock in a quiet server, on every shard at once
            // (`lending`): no key is out on loan while databases move.
            return Route::Lend(Vec::new());
        }
        if forward && cmd.meta.has(ALL_SHARDS) {
            return match cmd.merge {
                Some(Merge::Scan { .. }) => scan_route(args, shards),
                _ => Route::AllShards,
            };
        }
        return Route::Local;
    }
    if forward && shards == 1 {
        // A single forward-mode shard that is a node: the node serves them.
        return Route::Local;
    }
    if forward && crate::mesh::script_lock::is_script(cmd.meta) {
        return script_route(core, cmd, args);
    }
    if !forward {
        let mut positions = cmd.meta.keys.positions(args).into_iter();
        let Some(first) = positions.next() else {
            return Route::Local;
        };
        let slot = key_slot(args.get(first));
        if let Some(node) = core.node_routes() {
            return node_route(core, node, (cmd, args), slot, positions, in_flight);
        }
        if positions.any(|p| key_slot(args.get(p)) != slot) {
            return Route::CrossSlot;
        }
        let owner = core.topo.owner(slot);
        return if owner == core.id {
            Route::Local
        } else {
            Route::Moved(slot, owner)
        };
    }
    // The first key's owner, and whether every key is there (every single-key
    // command): no groups to build. This is the path of nearly every request,
    // local or forwarded; building the groups here cost a fifth of a local GET's
    // instructions, and a command of one key skips building its positions too
    // (some 130 instructions a GET; docs/runtime.md).
    let (owner, one_shard) = match cmd.meta.keys.only_key(args.len()) {
        Some(key) => (core.topo.key_owner(args.get(key)), true),
        None => {
            let mut positions = cmd.meta.keys.positions(args).into_iter();
            let Some(first) = positions.next() else {
                return Route::Local;
            };
            let owner = core.topo.key_owner(args.get(first));
            (
                owner,
                positions.all(|p| core.topo.key_owner(args.get(p)) == owner),
            )
        }
    };
    if cmd.placement == Placement::KeysHere {
        // It is not forwarded as an engine command: it runs whole on the shard
        // holding its keys, here or asked of it.
        return match (one_shard, owner == core.id) {
            (true, true) => Route::Local,
            (true, false) => Route::AskShard(owner),
            (false, _) => Route::CrossSlot,
        };
    }
    // SORT ... BY/GET patterns read keys named by the sorted elements, which may
    // live anywhere: borrow them all (the lender finds out which).
    let from_value = cmd.meta.keys.reads_keys_from_value() && ruvio_engine::value_keys_wanted(args);
    if one_shard && !from_value {
        return if owner == core.id {
            Route::Local
        } else {
            Route::Remote(owner)
        };
    }
    let groups = owner_groups(core, cmd, args);
    if !from_value && cmd.meta.has(SPLITTABLE) {
        Route::Split(groups)
    } else {
        Route::Lend(groups)
    }
}

/// Forward mode as one node: the node's refusal of `cmd` as queued in MULTI
/// (`-MOVED`, `-CROSSSLOT`, `-CLUSTERDOWN`, `-ASK` ...), if any; a command
/// this shard cannot decide (a slot in flight whose keys are on another
/// shard) is left to EXEC. `client_tls`: the client came in on the TLS port.
pub(super) fn node_refusal(
    core: &ShardCore,
    cmd: &Command,
    args: Args<'_>,
    client_tls: bool,
) -> Option<CmdError> {
    let routes = core.node_routes()?;
    if cmd.meta.keys.is_none() {
        return None;
    }
    match forward_node_route(core, routes, (cmd, args), InFlight::Plain)? {
        Route::AskShard(_) => None,
        refused => Some(refusal(core, refused, client_tls)),
    }
}

/// Forward mode as one node: the node's answer for a keyed command (`-MOVED`,
/// `-CROSSSLOT`, `-CLUSTERDOWN` ... as [`node_route`] gives them), or `None`
/// when the node serves it: its keys then go to the shards that hold them.
fn forward_node_route(
    core: &ShardCore,
    routes: &NodeRoutes,
    (cmd, args): (&Command, Args<'_>),
    in_flight: InFlight,
) -> Option<Route> {
    let mut positions = cmd.meta.keys.positions(args).into_iter();
    let slot = key_slot(args.get(positions.next()?));
    match node_route(core, routes, (cmd, args), slot, positions, in_flight) {
        Route::Local => None,
        elsewhere => Some(elsewhere),
    }
}

/// A keyed command's route on a node of the cluster bus, checked in Redis's
/// order (`getNodeByQuery`): the first key's slot without owner, keys of
/// several slots, the cluster down (reads go on with
/// `cluster-allow-reads-when-down yes`), a slot in flight, then the owner.
fn node_route(
    core: &ShardCore,
    node: &NodeRoutes,
    (cmd, args): (&Command, Args<'_>),
    slot: u16,
    mut others: impl Iterator<Item = usize>,
    in_flight: InFlight,
) -> Route {
    let first = node.slot_route(slot);
    if first == SlotRoute::Unbound {
        return Route::SlotNotServed;
    }
    if others.any(|p| key_slot(args.get(p)) != slot) {
        return Route::CrossSlot;
    }
    let owner = match first {
        SlotRoute::Down if !node.reads_when_down() => return Route::ClusterDown,
        SlotRoute::Down if cmd.meta.has(WRITE) => return Route::ClusterDownReadOnly,
        SlotRoute::Down => node.owner_route(slot),
        route => route,
    };
    let map = node.map();
    // Only a command whose own slot is in flight looks at its keys: the rest of
    // the node's traffic during a reshard routes as usual.
    if map.slots_in_flight() && (map.migrating(slot) || map.importing(slot)) {
        if in_flight == InFlight::ExecChecked {
            return Route::Local;
        }
        let holder = core.topo.owner(slot);
        if core.topo.mode == PortMode::Forward && holder != core.id {
            // Forward mode: only the shard holding the slot's keys knows
            // which are there.
            return Route::AskShard(holder);
        }
        let asking = in_flight == InFlight::Asking || cmd.meta.has(ASKING);
        let keys: Vec<&[u8]> = cmd.meta.keys.keys(args).collect();
        let server_write = cmd.placement == Placement::KeysHere;
        if let Some(route) = in_flight_route(core, node, &keys, slot, owner, (asking, server_write))
        {
            return route;
        }
    }
    match owner {
        SlotRoute::Here => Route::Local,
        SlotRoute::Moved(target) => Route::MovedToNode(slot, target),
        SlotRoute::Unbound | SlotRoute::Down => Route::SlotNotServed,
    }
}

/// A slot in flight (CLUSTER SETSLOT), as Redis 7.0 routes it: this node's
/// migrating slot sends a command whose keys are not here any more to the
/// target (`-ASK`; `-TRYAGAIN` when only some are); an importing slot serves
/// a command sent after ASKING (or RESTORE-ASKING), unless it names several
/// keys and some are not here yet (`-TRYAGAIN`). Keys are looked up in
/// database 0, the only one in cluster mode.
fn in_flight_route(
    core: &ShardCore,
    node: &NodeRoutes,
    keys: &[&[u8]],
    slot: u16,
    owner: SlotRoute,
    (asking, server_write): (bool, bool),
) -> Option<Route> {
    let map = node.map();
    let migrating = owner == SlotRoute::Here && map.migrating(slot);
    let importing = !migrating && map.importing(slot);
    if !migrating && !importing {
        return None;
    }
    if server_write {
        // MIGRATE moves the slot's keys: Redis runs it here whatever is left.
        return Some(Route::Local);
    }
    let first = *keys.first()?;
    let here = |key: &&[u8]| core.engine.exists(0, key, core.now_ms);
    let missing = !keys.iter().all(here);
    let several = keys.iter().any(|&k| k != first);
    if migrating && missing {
        // Some keys here and some gone: neither node has them all.
        return Some(match keys.iter().any(here) {
            true => Route::TryAgain,
            false => Route::Ask(slot),
        });
    }
    if importing && asking {
        return Some(match several && missing {
            true => Route::TryAgain,
            false => Route::Local,
        });
    }
    None
}

/// A transaction's keys `keys` of `slot` (a queued command's, a WATCH's, or
/// every key of the queue when EXEC begins) on a node of the bus while slots
/// are in flight: `-ASK` / `-TRYAGAIN` as [`in_flight_route`] decides for a
/// command, `Some(Ok)` when an importing slot serves them after ASKING (no
/// `-MOVED` then), `None` when the slot's owner decides. `(asking,
/// client_tls)`: the client sent ASKING, came in on the TLS port.
pub(super) fn in_flight_keys<'a>(
    core: &ShardCore,
    slot: u16,
    keys: impl FnOnce() -> Vec<&'a [u8]>,
    (asking, client_tls): (bool, bool),
) -> Option<Result<(), CmdError>> {
    let node = core.node_routes()?;
    if !node.map().slots_in_flight() {
        return None;
    }
    let owner = match node.slot_route(slot) {
        SlotRoute::Down | SlotRoute::Unbound => return None,
        owner => owner,
    };
    match in_flight_route(core, node, &keys(), slot, owner, (asking, false))? {
        Route::Ask(slot) => Some(Err(ask(core, slot, client_tls))),
        Route::TryAgain => Some(Err(CmdError::TryAgain)),
        _ => Some(Ok(())),
    }
}

/// The error a route that runs nowhere answers (a redirection, a refusal);
/// a route that runs somewhere has none to give here: asked of a shard for
/// its keys (`shard::node_forward`), the command's keys are its own.
pub(super) fn refusal(core: &ShardCore, route: Route, client_tls: bool) -> CmdError {
    match route {
        Route::MovedToNode(slot, target) => moved_to_node(core, slot, target, client_tls),
        Route::Ask(slot) => ask(core, slot, client_tls),
        Route::TryAgain => CmdError::TryAgain,
        Route::SlotNotServed => CmdError::SlotNotServed,
        Route::ClusterDown => CmdError::ClusterDown,
        Route::ClusterDownReadOnly => CmdError::ClusterDownReadOnly,
        Route::CrossSlot => CmdError::CrossSlot,
        Route::Local
        | Route::Moved(..)
        | Route::Remote(_)
        | Route::AskShard(_)
        | Route::Split(_)
        | Route::Lend(_)
        | Route::AllShards
        | Route::Scan(..) => {
            CmdError::Line(b"ERR internal: the command's keys are not on the shard asked".to_vec())
        }
    }
}

/// `-MOVED` to another node of the bus ([`Route::MovedToNode`]), as a client
/// of that transport is told it (`client_tls`: `NodeRoutes::moved`).
pub(super) fn moved_to_node(
    core: &ShardCore,
    slot: u16,
    target: u16,
    client_tls: bool,
) -> CmdError {
    match core.node_routes() {
        Some(node) => node.moved(slot, target, client_tls),
        None => CmdError::SlotNotServed,
    }
}

/// `-ASK` to the node a migrating slot goes to ([`Route::Ask`]), as a client
/// of that transport is told it.
pub(super) fn ask(core: &ShardCore, slot: u16, client_tls: bool) -> CmdError {
    match core.node_routes() {
        Some(node) => node.ask(slot, client_tls),
        None => CmdError::SlotNotServed,
    }
}

/// The owners of a command's keys, each with the argument positions of its keys,
/// in the order the keys come (forward mode).
pub(super) fn owner_groups(
    core: &ShardCore,
    cmd: &Command,
    args: Args<'_>,
) -> Vec<(usize, Vec<usize>)> {
    let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
    for p in cmd.meta.keys.positions(args) {
        let o = core.topo.key_owner(args.get(p));
        match groups.iter_mut().find(|(s, _)| *s == o) {
            Some((_, ps)) => ps.push(p),
            None => groups.push((o, vec![p])),
        }
    }
    groups
}

/// Where a script runs in forward mode with several shards: where its declared
/// keys are, unless they are on several shards, or it is known to reach
/// undeclared keys of other shards or new here; then it borrows them under the
/// script lock (see [`crate::mesh::script_lock`]).
pub(super) fn script_route(core: &ShardCore, cmd: &Command, args: Args<'_>) -> Route {
    let groups = owner_groups(core, cmd, args);
    if groups.len() > 1 || crate::mesh::script_lock::must_lock(&core.shared.script_lock, args) {
        return Route::Lend(groups);
    }
    match groups.first() {
        Some(&(owner, _)) if owner != core.id => Route::Remote(owner),
        _ => Route::Local,
    }
}

/// Route a SCAN by the shard named in its cursor; an unparsable cursor runs here
/// so the engine answers with Redis' error.
/// A cursor naming a shard that does not exist runs here too: the engine finds
/// nothing past the end and answers cursor 0 (the scan is over), as Redis does for
/// a cursor past its table.
pub(super) fn scan_route(args: Args<'_>, shards: usize) -> Route {
    let cursor = ruvio_engine::parse_cursor(args.get(1));
    match cursor.and_then(|c| crate::net::conn::scan_cursor(c, shards)) {
        Some((shard, inner)) => Route::Scan(shard, inner),
        None => Route::Local,
    }
}
