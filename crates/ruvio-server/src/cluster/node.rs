//! One shard as a node of a Redis Cluster (`cluster-enabled yes`, per-shard
//! mode): its membership ([`Cluster`]), its bus port and links ([`Links`]),
//! its nodes.conf, and the slot map routing reads.
//!
//! Why each shard owns all of it: a shard is a node, with its own name, epochs
//! and slots, so nothing here crosses threads; the shard steps it on its 10 ms
//! tick (the membership's cron every tenth step, Redis's 100 ms `clusterCron`).
//! The process's shards find each other as any nodes do, by CLUSTER MEET from
//! the operator (docs/cluster.md).
//!
//! Why a slot map beside the membership: routing runs on every keyed command
//! and must stay one array lookup. The map ([`super::slot_map`]) is rebuilt
//! from the membership only when its [`Cluster::generation`] moved (a slot
//! changed owner, a node its address, the cluster its state), which is rare.
//!
//! In forward mode the process is one node: shard 0 owns it (its membership,
//! bus port and nodes.conf) and hands the other shards a copy of its slot map
//! whenever the map changed ([`ShardNode::map_to_publish`]).

use super::bus::links::{Links, Stepped};
use super::bus::message::{NodeName, NAME_LEN};
use super::membership::{Cluster, Settings};
use super::nodes_file::NodesFile;
pub use super::slot_map::SlotRoute;
use super::slot_map::{NodeRoutes, SlotMap};
use super::slot_migration::SlotMigrations;
use crate::config::Config;
use crate::serverlog::{log, Level};
use ruvio_engine::slot::SLOT_COUNT;
use std::cell::Cell;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

/// Shard ticks per run of the membership's cron (10 ms ticks: every 100 ms).
pub const CRON_EVERY_TICKS: u64 = 10;

/// The slots this node serves (whatever the cluster state), one bit each,
/// shared with the shard's script host (`scripting::host`): a script may touch
/// keys it did not declare only in them (Redis Cluster's rule), and the host
/// cannot reach the [`ShardNode`] from inside a script. Rewritten with the slot
/// map; read and written on the shard's thread only.
pub struct ServedSlots {
    words: Box<[Cell<u64>]>,
}

impl ServedSlots {
    pub(super) fn new() -> ServedSlots {
        let words = usize::from(SLOT_COUNT).div_ceil(64);
        ServedSlots {
            words: (0..words).map(|_| Cell::new(0)).collect(),
        }
    }

    /// This node serves `slot`.
    pub fn contains(&self, slot: u16) -> bool {
        let word = self.words.get(usize::from(slot) / 64).map_or(0, Cell::get);
        word & (1 << (slot % 64)) != 0
    }

    pub(super) fn set(&self, slot: u16, served: bool) {
        if let Some(word) = self.words.get(usize::from(slot) / 64) {
            let bit = 1u64 << (slot % 64);
            word.set(if served {
                word.get() | bit
            } else {
                word.get() & !bit
            });
        }
    }
}

/// A shard's node.
pub struct ShardNode {
    pub cluster: Cluster,
    pub links: Links,
    config_path: PathBuf,
    ticks: u64,
    /// The slot map routing reads, built from `cluster`.
    routes: NodeRoutes,
    /// The generation of the map last handed to the process's other shards
    /// (forward mode).
    published: u64,
    /// Clients' writes to hold until this Unix ms (`Some(0)`: let them go),
    /// for the shard to apply: a replica's manual failover.
    pause_writes: Option<u64>,
    /// Whole-slot migrations this node runs or ran, either way
    /// (`slot_migration.rs`; driven by the shard: `shard/slot_export.rs`).
    pub slot_migrations: SlotMigrations,
    /// The address this node started at, its own when `cluster-announce-ip`
    /// is emptied.
    host: String,
    /// The bus port it listens on (fixed at the start, as Redis's
    /// `cluster_port`, whatever `tls-cluster` becomes).
    cport: u16,
}

impl ShardNode {
    /// Shard `shard`'s node (in forward mode the process's, on shard 0): from its nodes.conf when there is one (its name,
    /// epochs, slots and known nodes), else new and alone; listening on its
    /// bus port. The nodes.conf is written at once, as redis-server does.
    pub fn start(cfg: &Config, shard: usize, host: &str, now: u64) -> Result<ShardNode, String> {
        let port = cfg.shard_port(shard);
        let cport = cfg.cluster_bus_port(shard);
        let config_path = cfg.cluster_config_path(shard);
        let seed = now ^ (u64::from(port) << 32) ^ u64::from(std::process::id());
        let ip = match cfg.cluster_announce_ip.as_str() {
            "" => host.to_string(),
            announced => announced.to_string(),
        };
        let announced = cfg.announced_ports(shard, cport);
        let settings = Settings {
            name: random_name(seed),
            ip,
            port: announced.port,
            pport: announced.pport,
            cport: announced.cport,
            node_timeout: cfg.cluster_node_timeout_ms(),
            seed,
        };
        let mut cluster = match std::fs::read_to_string(&config_path) {
            Ok(text) => NodesFile::parse(&text)
                .and_then(|file| Cluster::from_file(settings, &file, now))
                .map_err(|why| format!("{}: {why}", config_path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Cluster::new(settings, now),
            Err(e) => return Err(format!("{}: {e}", config_path.display())),
        };
        if !cfg.cluster_announce_ip.is_empty() {
            cluster.set_own_ip(&cfg.cluster_announce_ip, true);
        }
        // The setting's, not what nodes.conf kept (Redis 7.0's clusterInit).
        cluster.set_own_hostname(cfg.param("cluster-announce-hostname"));
        let links = Links::bind(&cfg.bind, cport)
            .map_err(|e| format!("cluster bus port {}:{cport}: {e}", cfg.bind))?;
        let mut node = ShardNode {
            cluster,
            links,
            config_path,
            ticks: 0,
            routes: NodeRoutes::new(),
            published: u64::MAX,
            pause_writes: None,
            slot_migrations: SlotMigrations::default(),
            host: host.to_string(),
            cport,
        };
        node.save()
            .map_err(|e| format!("{}: {e}", node.config_path.display()))?;
        node.rebuild_slot_map();
        Ok(node)
    }

    /// One step of the bus on the shard's tick; the cron every tenth. What
    /// comes back are the PUBLISH messages other nodes sent (channel, message),
    /// for this node's subscribers.
    pub fn tick(&mut self, now: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.ticks += 1;
        let cron = self.ticks.is_multiple_of(CRON_EVERY_TICKS);
        let stepped = self.links.step(&mut self.cluster, now, cron);
        if stepped.save_config {
            self.save_or_log(Fsync::Yes);
        }
        if stepped.pause_writes.is_some() {
            self.pause_writes = stepped.pause_writes;
        }
        self.rebuild_slot_map();
        stepped.published
    }

    /// A PUBLISH on this node, for every other node's subscribers (queued on
    /// the links, written at the next step), as Redis Cluster propagates it.
    pub fn publish(&mut self, channel: &[u8], message: &[u8]) {
        let actions = self.cluster.publish(channel, message);
        let mut stepped = Stepped::default();
        self.links.perform(&mut self.cluster, actions, &mut stepped);
    }

    /// CLUSTER FAILOVER's actions: sent now, saved and synced (a TAKEOVER
    /// takes an epoch), routed by.
    pub fn perform(&mut self, actions: Vec<super::membership::Action>) {
        let mut stepped = Stepped::default();
        self.links.perform(&mut self.cluster, actions, &mut stepped);
        if stepped.pause_writes.is_some() {
            self.pause_writes = stepped.pause_writes;
        }
        self.changed_durably();
    }

    /// A pause of clients' writes the membership asked for since the last
    /// call (`Some(0)`: end it).
    pub fn take_pause_writes(&mut self) -> Option<u64> {
        self.pause_writes.take()
    }

    /// After an operator's change of slots or nodes (CLUSTER ADDSLOTS,
    /// SETSLOT, MEET, REPLICATE ...): saved, not synced (Redis's
    /// `CLUSTER_TODO_SAVE_CONFIG` without `_FSYNC_CONFIG`: a crashed process
    /// still finds the old file or the new one whole; only a lost machine may
    /// lose the change, and its peers' gossip brings it back), and routed by
    /// from the next command on. `redis-cli --cluster reshard` sends four
    /// SETSLOTs per slot: a sync each cost 6.5 ms here, 27 s per 1,000 slots.
    pub fn changed(&mut self) {
        self.save_or_log(Fsync::No);
        self.rebuild_slot_map();
    }

    /// After a change of epochs or a reset (SET-CONFIG-EPOCH, BUMPEPOCH,
    /// RESET): saved and synced before the reply, as Redis syncs them
    /// (`CLUSTER_TODO_FSYNC_CONFIG`): an epoch must never go back after a
    /// crash, or two nodes could claim one slot with the same epoch.
    pub fn changed_durably(&mut self) {
        self.save_or_log(Fsync::Yes);
        self.rebuild_slot_map();
    }

    /// What routing reads of this node.
    pub fn routes(&self) -> &NodeRoutes {
        &self.routes
    }

    /// Where a keyed command of `slot` goes: one array lookup.
    #[inline]
    pub fn slot_route(&self, slot: u16) -> SlotRoute {
        self.routes.slot_route(slot)
    }

    /// CONFIG SET cluster-announce-port, -bus-port, -tls-port (and
    /// `tls-cluster`): the node's ports as `cfg` now announces them, shown and
    /// sent from now on, and saved in nodes.conf when they changed.
    pub fn announce_ports(&mut self, cfg: &Config, shard: usize) {
        let ports = cfg.announced_ports(shard, self.cport);
        if self
            .cluster
            .announce_ports(ports.port, ports.pport, ports.cport)
        {
            self.changed();
        }
    }

    /// CONFIG SET cluster-announce-ip: the address this node sends in every
    /// header and keeps in nodes.conf from now on (Redis 7.0's clusterCron
    /// takes the new value on its next run); empty, the one it started at,
    /// and no address in the headers (the peers take the connection's).
    pub fn announce_ip(&mut self, announced: &str) {
        let ip = match announced {
            "" => self.host.clone(),
            announced => announced.to_string(),
        };
        if self.cluster.set_own_ip(&ip, !announced.is_empty()) {
            self.changed();
        }
    }

    /// CONFIG SET cluster-allow-reads-when-down.
    pub fn set_reads_when_down(&mut self, allowed: bool) {
        self.routes.set_reads_when_down(allowed);
    }

    /// CONFIG SET tls-cluster: what redirections name to plain clients.
    pub fn set_tls_cluster(&mut self, on: bool) {
        self.routes.set_tls_cluster(on);
    }

    /// CONFIG SET cluster-preferred-endpoint-type: what redirections name a
    /// node by.
    pub fn set_endpoint(&mut self, endpoint: crate::config::cluster::Endpoint) {
        self.routes.set_endpoint(endpoint);
    }

    /// CONFIG SET cluster-announce-hostname: sent from the next PING on,
    /// shown and saved at once.
    pub fn announce_hostname(&mut self, hostname: &str) {
        if self.cluster.set_own_hostname(hostname) {
            self.changed();
        }
    }

    /// CONFIG SET cluster-require-full-coverage: the state, and the routes,
    /// from the next command on.
    pub fn set_require_full_coverage(&mut self, required: bool) {
        self.cluster.set_require_full_coverage(required);
        self.rebuild_slot_map();
    }

    /// This node owns `slot` (whatever the cluster state).
    pub fn serves(&self, slot: u16) -> bool {
        let myself = self.cluster.myself();
        matches!(self.cluster.slot_owner(slot), Some((name, _, _)) if name == myself)
    }

    /// The slots this node serves, as the shard's scripts read them.
    pub fn served_slots(&self) -> Rc<ServedSlots> {
        self.routes.served_slots()
    }

    /// The slot map, when it changed since it was last handed out (forward
    /// mode: shard 0 gives it to the process's other shards, which route by
    /// it).
    pub fn map_to_publish(&mut self) -> Option<Arc<SlotMap>> {
        let map = self.routes.map();
        if map.generation() == self.published {
            return None;
        }
        self.published = map.generation();
        Some(map.clone())
    }

    /// nodes.conf, written to a temporary file, synced and renamed over the
    /// old one: a crash leaves the old file or the new, never half of one.
    pub fn save(&self) -> std::io::Result<()> {
        self.save_as(Fsync::Yes)
    }

    fn save_as(&self, sync: Fsync) -> std::io::Result<()> {
        let text = self.cluster.nodes_file().render();
        write_atomically(&self.config_path, text.as_bytes(), sync)
    }

    fn save_or_log(&self, sync: Fsync) {
        if let Err(e) = self.save_as(sync) {
            let path = self.config_path.display();
            log(Level::Warning, &format!("Could not save {path}: {e}"));
        }
    }

    fn rebuild_slot_map(&mut self) {
        self.routes.follow(&self.cluster);
    }
}

/// Whether a save of nodes.conf waits for the disk (`fsync`) before the rename.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fsync {
    Yes,
    No,
}

/// Writes `bytes` to `path` by way of a temporary file and a rename, so a
/// crash leaves the old file or the new one, never half of one.
///
/// Synced (`Fsync::Yes`): the file is synced, then renamed over the old one.
/// Not synced: renamed with the old one *exchanged* (`renameat2`'s
/// `RENAME_EXCHANGE`), then the old one unlinked. Why: ext4 (`auto_da_alloc`)
/// flushes a file renamed over another before the rename returns, which is what
/// `fsync` would have cost: 0.2-3 ms on this machine against 0.02-0.04 ms for the
/// exchange, and `redis-cli --cluster reshard` saves four times per slot. A file
/// system without the exchange (or no old file yet) gets the plain rename.
fn write_atomically(path: &Path, bytes: &[u8], sync: Fsync) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(format!(".tmp-{}", std::process::id()));
    let temporary = PathBuf::from(temporary);
    let mut file = std::fs::File::create(&temporary)?;
    file.write_all(bytes)?;
    if sync == Fsync::Yes {
        file.sync_all()?;
    } else if exchange(&temporary, path).is_ok() {
        return std::fs::remove_file(&temporary);
    }
    std::fs::rename(&temporary, path)
}

/// Swaps the files at `a` and `b` (both must exist), atomically.
fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let a = std::ffi::CString::new(a.as_os_str().as_bytes())?;
    let b = std::ffi::CString::new(b.as_os_str().as_bytes())?;
    // SAFETY: two NUL-terminated paths that live across the call.
    let done = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    match done {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// A node name of 40 hex characters from `seed` (splitmix64 steps).
pub(crate) fn random_name(seed: u64) -> NodeName {
    let mut state = seed;
    let mut name = [0u8; NAME_LEN];
    for chunk in name.chunks_mut(16) {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        let hex = format!("{z:016x}");
        chunk.copy_from_slice(&hex.as_bytes()[..chunk.len()]);
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Cli;

    fn node(dir: &Path, bus_port: u16) -> ShardNode {
        let cfg = Config::load(Cli {
            port: Some(7000),
            shards: Some(1),
            dir: Some(dir.to_path_buf()),
            redis: vec![
                ("cluster-enabled".into(), "yes".into()),
                ("cluster-port".into(), bus_port.to_string()),
            ],
            ..Cli::default()
        })
        .unwrap();
        ShardNode::start(&cfg, 0, "127.0.0.1", 1_000).unwrap()
    }

    #[test]
    fn the_slot_map_follows_the_membership() {
        let dir = std::env::temp_dir().join(format!("ruvio-node-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let bus_port = free.local_addr().unwrap().port();
        drop(free);
        let mut node = node(&dir, bus_port);
        assert_eq!(node.slot_route(0), SlotRoute::Unbound);
        node.cluster.add_slots(0..100);
        node.changed();
        // Part of the slots served: the cluster is down for the ones it has.
        assert_eq!(node.slot_route(5), SlotRoute::Down);
        assert_eq!(node.slot_route(100), SlotRoute::Unbound);
        assert!(node.serves(5) && !node.serves(100));
        let served = node.served_slots();
        assert!(served.contains(5) && served.contains(99) && !served.contains(100));
        node.cluster.add_slots(100..SLOT_COUNT);
        node.changed();
        assert_eq!(node.slot_route(16_383), SlotRoute::Here);
        // Saved on the change, and read back by the next start.
        let name = node.cluster.myself();
        drop(node);
        let again = super::tests::node(&dir, bus_port);
        assert_eq!(again.cluster.myself(), name);
        assert_eq!(again.slot_route(0), SlotRoute::Here);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_published_map_routes_another_shard_as_the_node() {
        let dir = std::env::temp_dir().join(format!("ruvio-publish-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let bus_port = free.local_addr().unwrap().port();
        drop(free);
        let mut node = node(&dir, bus_port);
        let mut follower = NodeRoutes::new();
        assert!(follower.served_slots().contains(0) == node.serves(0));
        let first = node.map_to_publish().expect("the first map");
        follower.adopt(first);
        assert!(
            node.map_to_publish().is_none(),
            "unchanged: nothing to hand out"
        );
        node.cluster.add_slots(0..SLOT_COUNT);
        node.changed();
        follower.adopt(node.map_to_publish().expect("a changed map"));
        for slot in [0, 8191, 16_383] {
            assert_eq!(follower.slot_route(slot), node.slot_route(slot));
            assert_eq!(follower.slot_route(slot), SlotRoute::Here);
            assert!(follower.served_slots().contains(slot));
        }
        assert_eq!(
            follower.map().generation(),
            node.routes().map().generation()
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_save_replaces_the_file_whole_and_leaves_no_temporary() {
        let dir = std::env::temp_dir().join(format!("ruvio-save-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("nodes.conf");
        for (text, sync) in [
            ("first, no old file\n", Fsync::No),
            ("second, a longer text than the first one\n", Fsync::No),
            ("third\n", Fsync::Yes),
            ("fourth\n", Fsync::No),
        ] {
            write_atomically(&path, text.as_bytes(), sync).unwrap();
            assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
            let names: Vec<_> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            assert_eq!(names, ["nodes.conf"], "after {text:?}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
