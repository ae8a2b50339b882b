//! The membership's rules on an in-memory network of nodes (no sockets, no clock).

use super::*;
use crate::cluster::nodes_file::NodesFile;

fn settings(tag: u8, port: u16) -> Settings {
    Settings {
        name: [tag; NAME_LEN],
        ip: "127.0.0.1".into(),
        port,
        pport: 0,
        cport: port + 10000,
        node_timeout: 1000,
        seed: u64::from(tag),
    }
}

/// Runs messages between in-memory nodes: each Connect is a link pair.
struct Net {
    nodes: Vec<Cluster>,
    /// (from node, its link) -> (to node, the accepted link there)
    wires: HashMap<(usize, LinkId), (usize, LinkId)>,
    now: u64,
    /// A node taken off the network: no cron, no connections to it.
    silent: Option<usize>,
}

impl Net {
    fn new(nodes: Vec<Cluster>) -> Net {
        Net {
            nodes,
            wires: HashMap::new(),
            now: 1_000_000,
            silent: None,
        }
    }

    /// `count` nodes on ports `base`.., the first three masters of a third of
    /// the slots each, the others without slots; none has met another yet.
    fn masters_and_more(count: u8, base: u16) -> Net {
        let mut nodes: Vec<Cluster> = (0..count)
            .map(|i| Cluster::new(settings(b'a' + i, base + u16::from(i)), 0))
            .collect();
        nodes[0].add_slots(0..5000);
        nodes[1].add_slots(5000..10000);
        nodes[2].add_slots(10000..16384);
        Net::new(nodes)
    }

    /// Three masters on ports `base`.., node 0 meeting the other two, after
    /// five seconds of gossip.
    fn three_met(base: u16) -> Net {
        let mut net = Net::masters_and_more(3, base);
        for peer in [base + 1, base + 2] {
            net.nodes[0].meet("127.0.0.1", peer, peer + 10000, net.now);
        }
        net.settle();
        net
    }

    /// Five seconds of every node's 100 ms steps: enough for gossip to settle.
    fn settle(&mut self) {
        for _ in 0..50 {
            self.tick(100);
        }
    }

    fn by_cport(&self, cport: u16) -> Option<usize> {
        let found = self.nodes.iter().position(|c| c.settings.cport == cport);
        found.filter(|&i| Some(i) != self.silent)
    }

    fn run(&mut self, from: usize, actions: Vec<Action>) {
        let mut queue: std::collections::VecDeque<(usize, Action)> =
            actions.into_iter().map(|a| (from, a)).collect();
        while let Some((at, action)) = queue.pop_front() {
            match action {
                Action::Connect { link, cport, .. } => {
                    if let Some(to) = self.by_cport(cport) {
                        let there = self.nodes[to].accepted();
                        self.wires.insert((at, link), (to, there));
                        self.wires.insert((to, there), (at, link));
                    } else {
                        self.nodes[at].link_closed(link);
                    }
                }
                Action::Send { link, message } => {
                    if let Some(&(to, there)) = self.wires.get(&(at, link)) {
                        let more =
                            self.nodes[to].on_message(there, &message, "127.0.0.1", self.now);
                        queue.extend(more.into_iter().map(|a| (to, a)));
                    }
                }
                Action::Close { link } => {
                    if let Some((to, there)) = self.wires.remove(&(at, link)) {
                        self.wires.remove(&(to, there));
                        self.nodes[to].link_closed(there);
                    }
                }
                Action::SaveConfig
                | Action::Publish { .. }
                | Action::PauseWrites { .. }
                | Action::Unpause => {}
            }
        }
    }

    /// Takes node `i` off the network: its links cut, no cron, nothing connects to it.
    fn silence(&mut self, i: usize) {
        self.silent = Some(i);
        let cut: Vec<_> = self
            .wires
            .keys()
            .copied()
            .filter(|(at, _)| *at == i)
            .collect();
        for (at, link) in cut {
            self.run(at, vec![Action::Close { link }]);
        }
    }

    fn tick(&mut self, ms: u64) {
        self.now += ms;
        let silent = self.silent;
        for i in (0..self.nodes.len()).filter(|&i| Some(i) != silent) {
            let actions = self.nodes[i].cron(self.now);
            self.run(i, actions);
        }
    }
}

/// Each node's name, whether a master, and its slot ranges.
type View = Vec<(String, bool, Vec<(u16, u16)>)>;

fn view(cluster: &Cluster) -> View {
    let mut lines: Vec<_> = cluster
        .nodes_file()
        .nodes
        .into_iter()
        .map(|l| {
            let master = l.has_flag("master");
            (l.name, master, l.slots)
        })
        .collect();
    lines.sort();
    lines
}

#[test]
fn three_nodes_meet_through_gossip_and_agree() {
    let mut net = Net::masters_and_more(3, 7000);
    assert!(net.nodes[0].meet("127.0.0.1", 7001, 17001, net.now));
    assert!(net.nodes[1].meet("127.0.0.1", 7002, 17002, net.now));
    net.settle();
    let first = view(&net.nodes[0]);
    assert_eq!(first.len(), 3, "{}", net.nodes[0].cluster_nodes());
    for node in &net.nodes {
        assert_eq!(view(node), first, "{}", node.cluster_nodes());
        assert_eq!(node.state, State::Ok);
        assert_eq!(node.size(), 3);
    }
    let epochs: std::collections::HashSet<u64> = net
        .nodes
        .iter()
        .map(|c| c.node(MYSELF).config_epoch)
        .collect();
    assert_eq!(
        epochs.len(),
        3,
        "config epochs made unique by the collision rule"
    );
    let (owner, _, port) = net.nodes[0].slot_owner(12000).unwrap();
    assert_eq!((owner, port), ([b'c'; NAME_LEN], 7002));
}

#[test]
fn a_replica_takes_over_its_failed_master() {
    let mut net = replica_of_the_third(7200);
    let seen = net.nodes[0].lookup(&[b'd'; NAME_LEN]).unwrap();
    assert!(
        net.nodes[0].line(seen).has_flag("slave"),
        "{}",
        net.nodes[0].cluster_nodes()
    );
    net.silence(2);
    for _ in 0..80 {
        net.tick(100);
    }
    for i in [0, 1, 3] {
        let node = &net.nodes[i];
        let (owner, _, _) = node.slot_owner(12000).unwrap();
        assert_eq!(owner, [b'd'; NAME_LEN], "{}", node.cluster_nodes());
        assert_eq!(node.state, State::Ok, "{}", node.cluster_nodes());
    }
    assert!(net.nodes[3].node(MYSELF).is_master());
    assert!(net.nodes[0].last_vote_epoch > 0 && net.nodes[1].last_vote_epoch > 0);
}

/// CLUSTER FAILOVER with the master alive: the default one (MFSTART, the
/// paused master's offset reached, votes with FORCEACK), then TAKEOVER back
/// (no votes): each time the slots move and the old master follows the new.
#[test]
fn manual_failover_and_takeover_move_the_slots_and_the_old_master_follows() {
    let mut net = replica_of_the_third(7300);
    assert_eq!(
        net.nodes[0].failover(FailoverMode::Default, net.now).err(),
        Some("ERR You should send CLUSTER FAILOVER to a replica")
    );
    let actions = net.nodes[3]
        .failover(FailoverMode::Default, net.now)
        .unwrap();
    net.run(3, actions);
    for _ in 0..30 {
        net.tick(100);
    }
    let owner = |net: &Net, i: usize| net.nodes[i].slot_owner(12000).unwrap().0;
    for i in 0..4 {
        assert_eq!(
            owner(&net, i),
            [b'd'; NAME_LEN],
            "{}",
            net.nodes[i].cluster_nodes()
        );
    }
    assert_eq!(net.nodes[2].master_name(), Some([b'd'; NAME_LEN]));
    assert!(net.nodes[3].node(MYSELF).is_master());

    let actions = net.nodes[2]
        .failover(FailoverMode::Takeover, net.now)
        .unwrap();
    net.run(2, actions);
    for _ in 0..30 {
        net.tick(100);
    }
    for i in 0..4 {
        assert_eq!(
            owner(&net, i),
            [b'c'; NAME_LEN],
            "{}",
            net.nodes[i].cluster_nodes()
        );
        assert_eq!(net.nodes[i].state, State::Ok);
    }
    assert_eq!(net.nodes[3].master_name(), Some([b'c'; NAME_LEN]));
}

#[test]
fn a_silent_node_is_failed_by_a_majority() {
    let mut net = Net::three_met(7100);
    // Node 2 goes silent: its links are cut and it is no longer reachable.
    net.silence(2);
    for _ in 0..60 {
        net.tick(100);
    }
    for node in &net.nodes[..2] {
        let silent = node.lookup(&[b'c'; NAME_LEN]).expect("known");
        let line = node.line(silent);
        assert!(
            line.has_flag("fail"),
            "{}\nreports {:?}\nother:\n{}",
            node.cluster_nodes(),
            node.node(silent).fail_reports,
            net.nodes[1].cluster_nodes()
        );
        assert_eq!(
            node.state,
            State::Fail,
            "its slots are served by a failing node"
        );
    }
}

#[test]
fn the_node_timeout_can_change_while_running() {
    let mut net = Net::masters_and_more(3, 7500);
    for node in &mut net.nodes {
        node.set_node_timeout(60_000);
    }
    net.nodes[0].meet("127.0.0.1", 7501, 17501, net.now);
    net.nodes[0].meet("127.0.0.1", 7502, 17502, net.now);
    net.settle();
    net.silence(2);
    let suspects = |net: &Net| {
        let silent = net.nodes[0].lookup(&[b'c'; NAME_LEN]).expect("known");
        net.nodes[0].line(silent).has_flag("fail?") || net.nodes[0].line(silent).has_flag("fail")
    };
    for _ in 0..40 {
        net.tick(100);
    }
    assert!(!suspects(&net), "{}", net.nodes[0].cluster_nodes());
    net.nodes[0].set_node_timeout(1000);
    for _ in 0..40 {
        net.tick(100);
    }
    assert!(suspects(&net), "{}", net.nodes[0].cluster_nodes());
}

#[test]
fn a_node_back_at_another_address_is_reached_there() {
    let mut net = Net::three_met(7600);
    // Node 1 comes back on port 7611, with its name and slots (its nodes.conf),
    // and meets node 0 again.
    net.silence(1);
    let file = net.nodes[1].nodes_file();
    let again = Cluster::from_file(settings(b'b', 7611), &file, net.now).unwrap();
    net.nodes[1] = again;
    net.silent = None;
    net.nodes[1].meet("127.0.0.1", 7600, 17600, net.now);
    for _ in 0..80 {
        net.tick(100);
    }
    for node in &net.nodes {
        let (_, _, port) = node.slot_owner(5000).unwrap();
        assert_eq!(port, 7611, "{}", node.cluster_nodes());
    }
}

#[test]
fn the_header_carries_the_announced_ports_and_the_peers_take_them() {
    let mut net = Net::three_met(7700);
    let ports = |h: &Header| (h.port, h.pport, h.cport);
    assert_eq!(ports(&net.nodes[1].header()), (7701, 0, 17701));
    // As under tls-cluster with cluster-announce-tls-port: the TLS port, the
    // plain one as pport, and another bus port.
    assert!(net.nodes[1].announce_ports(8701, 7701, 18701));
    assert!(!net.nodes[1].announce_ports(8701, 7701, 18701), "unchanged");
    assert_eq!(ports(&net.nodes[1].header()), (8701, 7701, 18701));
    let own = net.nodes[1].nodes_file();
    let own = own.myself().unwrap();
    assert_eq!((own.port, own.pport, own.cport), (8701, 7701, 18701));
    for _ in 0..30 {
        net.tick(100);
    }
    let b = [b'b'; NAME_LEN];
    for i in [0, 2] {
        let peer = &net.nodes[i];
        let node = peer.node(peer.lookup(&b).unwrap());
        assert_eq!((node.port, node.pport, node.cport), (8701, 7701, 18701));
        // Reached at the new bus port (the net connects by it).
        assert!(node.link.is_some(), "{}", peer.cluster_nodes());
        assert_eq!(peer.slot_owner(5000).unwrap().2, 8701);
    }
}

#[test]
fn a_node_read_back_from_its_nodes_conf_is_the_node_it_was() {
    let mut net = Net::masters_and_more(3, 7300);
    net.nodes[0].meet("127.0.0.1", 7301, 17301, net.now);
    net.nodes[1].meet("127.0.0.1", 7302, 17302, net.now);
    net.settle();
    let before = &net.nodes[2];
    let text = before.nodes_file().render();
    let file = NodesFile::parse(&text).unwrap();
    // A restart: another random name in the settings, the file's wins.
    let again = Cluster::from_file(settings(b'z', 7302), &file, net.now).unwrap();
    assert_eq!(again.myself(), before.myself());
    assert_eq!(view(&again), view(before));
    assert_eq!(again.epochs(), before.epochs());
    // Links are made again by the cron: what was saved, less them, is back.
    let (saved, read) = (before.nodes_file(), again.nodes_file());
    assert_eq!(
        (read.current_epoch, read.last_vote_epoch),
        (saved.current_epoch, saved.last_vote_epoch)
    );
    assert_eq!(again.state, State::Ok);
    let generation = again.generation();
    let mut again = again;
    again.del_slots([0]);
    assert!(
        again.generation() > generation,
        "routing must see the change"
    );
    assert_eq!(again.state, State::Fail);
    let no_myself = NodesFile {
        nodes: Vec::new(),
        current_epoch: 0,
        last_vote_epoch: 0,
    };
    assert!(Cluster::from_file(settings(b'z', 1), &no_myself, 0).is_err());
}

#[test]
fn operator_changes_follow_redis_rules() {
    let mut net = Net::masters_and_more(3, 7400);
    net.nodes[0].meet("127.0.0.1", 7401, 17401, net.now);
    assert_eq!(
        net.nodes[0].set_config_epoch(5),
        Err("ERR The user can assign a config epoch only when the node does not know any other node.")
    );
    assert_eq!(net.nodes[2].set_config_epoch(5), Ok(()));
    assert_eq!(
        net.nodes[2].set_config_epoch(6),
        Err("ERR Node config epoch is already non-zero")
    );
    assert_eq!(
        net.nodes[2].bump_epoch(),
        (false, 5),
        "already the greatest"
    );
    assert_eq!(net.nodes[1].bump_epoch(), (true, 1));
    for _ in 0..30 {
        net.tick(100);
    }
    let b = [b'b'; NAME_LEN];
    let a = &mut net.nodes[0];
    assert_eq!(a.failure_reports(&b, net.now), Some(0));
    assert_eq!(a.failure_reports(b"nobody", net.now), None);
    let now = net.now;
    assert!(a
        .forget(&a.myself(), now)
        .unwrap_err()
        .contains("forget myself"));
    assert_eq!(
        a.forget(b"nobody", now).unwrap_err(),
        "ERR Unknown node nobody"
    );
    a.forget(&b, now).unwrap();
    assert_eq!(a.known_nodes(), 1);
    assert!(
        !a.slot_assigned(5000),
        "a forgotten node's slots have no owner"
    );
    assert!(a.slot_assigned(0));
    let name = a.myself();
    a.reset(false, net.now);
    assert_eq!((a.myself(), a.slot_health().0), (name, 0));
    a.reset(true, net.now);
    assert_ne!(a.myself(), name, "a hard reset takes a new name");
    assert_eq!(a.epochs(), (0, 0));
}

#[test]
fn a_slot_moved_by_setslot_is_the_target_s_in_every_view() {
    let mut net = Net::masters_and_more(3, 7700);
    net.nodes[0].meet("127.0.0.1", 7701, 17701, net.now);
    net.nodes[1].meet("127.0.0.1", 7702, 17702, net.now);
    net.settle();
    let (source, target) = ([b'a'; NAME_LEN], [b'b'; NAME_LEN]);
    let now = net.now;
    net.nodes[1]
        .set_slot(42, SetSlot::Importing(&source), now)
        .unwrap();
    net.nodes[0]
        .set_slot(42, SetSlot::Migrating(&target), now)
        .unwrap();
    assert!(net.nodes[1].importing(42) && net.nodes[1].slots_in_flight());
    assert_eq!(net.nodes[0].migrating_to(42).map(|t| t.0), Some(target));
    // Slots in flight survive a restart from nodes.conf.
    for (at, tag) in [(0, b'y'), (1, b'z')] {
        let file = NodesFile::parse(&net.nodes[at].nodes_file().render()).unwrap();
        let again = Cluster::from_file(settings(tag, 1), &file, now).unwrap();
        assert_eq!(again.in_flight_lines(), net.nodes[at].in_flight_lines());
    }
    // The target takes it under a new config epoch; the others learn it by
    // its PONGs, the source too once its keys are gone (no SETSLOT there).
    net.nodes[1]
        .set_slot(42, SetSlot::Node(&target, false), now)
        .unwrap();
    assert!(!net.nodes[1].importing(42));
    let pending = net.nodes[1].take_pending();
    assert!(!pending.is_empty(), "a PONG to every node");
    net.run(1, pending);
    for _ in 0..20 {
        net.tick(100);
    }
    for node in &net.nodes {
        let (owner, _, _) = node.slot_owner(42).unwrap();
        assert_eq!(owner, target, "{}", node.cluster_nodes());
        assert_eq!(node.state, State::Ok);
    }
    // Refusals, in Redis's words.
    assert_eq!(
        net.nodes[0].set_slot(42, SetSlot::Migrating(&target), now),
        Err("ERR I'm not the owner of hash slot 42".to_string())
    );
    assert_eq!(
        net.nodes[1].set_slot(42, SetSlot::Importing(&source), now),
        Err("ERR I'm already the owner of hash slot 42".to_string())
    );
    assert_eq!(
        net.nodes[1].set_slot(43, SetSlot::Node(b"nobody", false), now),
        Err("ERR Unknown node nobody".to_string())
    );
}

/// A known node's UPDATE about this node itself, even under a newer epoch,
/// moves no slot (Redis: "Discarding UPDATE message about myself."); one
/// about another node under an epoch not newer than known is ignored.
#[test]
fn updates_about_myself_or_with_old_epochs_move_no_slot() {
    let mut net = Net::masters_and_more(3, 7500);
    for port in [7501, 7502] {
        net.nodes[0].meet("127.0.0.1", port, port + 10000, net.now);
    }
    for _ in 0..30 {
        net.tick(100);
    }
    let before = view(&net.nodes[0]);
    assert_eq!(before.len(), 3, "{}", net.nodes[0].cluster_nodes());
    let mut claim = [0; SLOT_BYTES];
    for slot in 0..10000 {
        set_slot_bit(&mut claim, slot);
    }
    let update = |about: u8, config_epoch: u64| {
        let body = Body::Update {
            config_epoch,
            node: [about; NAME_LEN],
            slots: Box::new(claim),
        };
        Message::new(Kind::Update, Header::new([b'b'; NAME_LEN]), body)
    };
    let link = net.nodes[0].accepted();
    let now = net.now;
    let b = net.nodes[0].lookup(&[b'b'; NAME_LEN]).unwrap();
    let b_epoch = net.nodes[0].node(b).config_epoch;
    for message in [update(b'a', 1000), update(b'b', b_epoch)] {
        net.nodes[0].on_message(link, &message, "127.0.0.1", now);
        assert_eq!(
            view(&net.nodes[0]),
            before,
            "{}",
            net.nodes[0].cluster_nodes()
        );
    }
    let (owner, _, _) = net.nodes[0].slot_owner(7000).unwrap();
    assert_eq!(owner, [b'b'; NAME_LEN]);
}

/// Four nodes on ports from `base`, met and settled, the fourth a replica of
/// the third.
fn replica_of_the_third(base: u16) -> Net {
    let mut net = Net::masters_and_more(4, base);
    for port in [base + 1, base + 2, base + 3] {
        net.nodes[0].meet("127.0.0.1", port, port + 10000, net.now);
    }
    for _ in 0..30 {
        net.tick(100);
    }
    net.nodes[3].replicate(&[b'c'; NAME_LEN]).unwrap();
    for _ in 0..20 {
        net.tick(100);
    }
    net
}

/// [`replica_of_the_third`], the third then silenced (its FAIL to come); the
/// replica has run `prepare` first.
fn replica_of_a_silenced_master(base: u16, prepare: impl FnOnce(&mut Cluster, u64)) -> Net {
    let mut net = replica_of_the_third(base);
    let now = net.now;
    prepare(&mut net.nodes[3], now);
    net.silence(2);
    for _ in 0..80 {
        net.tick(100);
    }
    net
}

fn owner_of_12000(net: &Net, i: usize) -> NodeName {
    net.nodes[i].slot_owner(12000).unwrap().0
}

/// `cluster-replica-no-failover yes`: the replica of a FAILed master stays a
/// replica (flagged `nofailover` in every view) until the setting is `no`.
#[test]
fn a_replica_with_no_failover_never_starts_an_election() {
    let mut net = replica_of_a_silenced_master(7600, |replica, _| {
        replica.set_failover_rules(FailoverRules {
            no_failover: true,
            ..FailoverRules::default()
        });
    });
    assert!(!net.nodes[3].node(MYSELF).is_master());
    assert_eq!(owner_of_12000(&net, 0), [b'c'; NAME_LEN]);
    assert_eq!(net.nodes[0].state, State::Fail);
    let seen = net.nodes[0].lookup(&[b'd'; NAME_LEN]).unwrap();
    assert!(net.nodes[0].line(seen).has_flag("nofailover"));
    net.nodes[3].set_failover_rules(FailoverRules::default());
    for _ in 0..40 {
        net.tick(100);
    }
    assert!(net.nodes[3].node(MYSELF).is_master());
    assert_eq!(owner_of_12000(&net, 0), [b'd'; NAME_LEN]);
}

/// The data-age check: a replica whose link to its master has been down past
/// `repl-ping-replica-period` + node timeout x `cluster-replica-validity-factor`
/// (beyond the node timeout) does not run; with the factor 0 it does.
#[test]
fn a_replica_with_old_data_does_not_fail_over() {
    // Down 22 s at the silence, more at the election: past the 1 s node
    // timeout, above the 10 s + 1 s x 10 allowed.
    let mut net = replica_of_a_silenced_master(7700, |replica, now| {
        replica.set_master_link(Some(now - 22_000));
    });
    assert!(!net.nodes[3].node(MYSELF).is_master());
    assert_eq!(owner_of_12000(&net, 0), [b'c'; NAME_LEN]);
    let rules = net.nodes[3].failover_rules();
    net.nodes[3].set_failover_rules(FailoverRules {
        validity_factor: 0,
        ..rules
    });
    for _ in 0..40 {
        net.tick(100);
    }
    assert!(net.nodes[3].node(MYSELF).is_master());
    assert_eq!(owner_of_12000(&net, 0), [b'd'; NAME_LEN]);

    // Down 20 s at the silence, 28 s at the end: within 10 s + 1 s x 20.
    let net = replica_of_a_silenced_master(7800, |replica, now| {
        replica.set_master_link(Some(now - 20_000));
        let rules = replica.failover_rules();
        replica.set_failover_rules(FailoverRules {
            validity_factor: 20,
            ..rules
        });
    });
    assert!(net.nodes[3].node(MYSELF).is_master());
}

/// Masters a, b, c; d and e replicas of a, f of b; f then silenced (FAIL).
/// Returns whom d and e follow 12 s later, after `rules` on d and e.
fn after_the_lone_replica_fails(base: u16, rules: FailoverRules) -> (NodeName, NodeName) {
    let mut net = Net::masters_and_more(6, base);
    for port in base + 1..base + 6 {
        net.nodes[0].meet("127.0.0.1", port, port + 10000, net.now);
    }
    for _ in 0..30 {
        net.tick(100);
    }
    for (replica, master) in [(3, b'a'), (4, b'a'), (5, b'b')] {
        net.nodes[replica].replicate(&[master; NAME_LEN]).unwrap();
        net.nodes[replica].set_failover_rules(rules);
    }
    for _ in 0..20 {
        net.tick(100);
    }
    net.silence(5);
    for _ in 0..120 {
        net.tick(100);
    }
    let master_of = |i: usize| net.nodes[i].master_name().unwrap();
    (master_of(3), master_of(4))
}

/// Replica migration: the orphaned master b gets the replica of a with the
/// smallest name (d), a keeping one; not when the barrier would leave a with
/// fewer, nor with `cluster-allow-replica-migration no`.
#[test]
fn an_orphaned_master_gets_a_replica_from_the_master_with_the_most() {
    let (a, b) = ([b'a'; NAME_LEN], [b'b'; NAME_LEN]);
    let rules = FailoverRules::default();
    assert_eq!(after_the_lone_replica_fails(7900, rules), (b, a));
    let barrier = FailoverRules {
        migration_barrier: 2,
        ..rules
    };
    assert_eq!(after_the_lone_replica_fails(7910, barrier), (a, a));
    let not_allowed = FailoverRules {
        allow_migration: false,
        ..rules
    };
    assert_eq!(after_the_lone_replica_fails(7920, not_allowed), (a, a));
}

/// A master back after its replica took its slots follows it even with
/// `cluster-allow-replica-migration no`: the new owner holds exactly the
/// slots it took from it (Redis's `clusterUpdateSlotsConfigWith`). A master
/// whose last slot an operator gives away with SETSLOT NODE follows the
/// slot's new owner only with the setting `yes`.
#[test]
fn an_emptied_master_follows_the_new_owner_as_the_rules_say() {
    let not_allowed = FailoverRules {
        allow_migration: false,
        ..FailoverRules::default()
    };
    let mut net = replica_of_a_silenced_master(8000, |_, _| {});
    assert!(net.nodes[3].node(MYSELF).is_master());
    net.nodes[2].set_failover_rules(not_allowed);
    net.silent = None;
    for _ in 0..60 {
        net.tick(100);
    }
    assert_eq!(net.nodes[2].master_name(), Some([b'd'; NAME_LEN]));

    for (allowed, base) in [(true, 8010), (false, 8020)] {
        let mut net = Net::masters_and_more(3, base);
        for port in [base + 1, base + 2] {
            net.nodes[0].meet("127.0.0.1", port, port + 10000, net.now);
        }
        for _ in 0..30 {
            net.tick(100);
        }
        if !allowed {
            net.nodes[0].set_failover_rules(not_allowed);
        }
        // a serves 0-4999: all but slot 0 unassigned first.
        net.nodes[0].del_slots(1..5000);
        assert!(net.nodes[0].master_name().is_none());
        net.nodes[0]
            .set_slot(0, SetSlot::Node(&[b'b'; NAME_LEN], false), net.now)
            .unwrap();
        let expected = allowed.then_some([b'b'; NAME_LEN]);
        assert_eq!(net.nodes[0].master_name(), expected, "allowed: {allowed}");
    }
}

/// A master whose last slot, migrating, goes to its target (SETSLOT NODE
/// there, learnt from the target's PONGs) follows the target and keeps no
/// slot in flight, as redis-server's `clusterSetMaster` (CI saw `redis-cli
/// --cluster check` warn about such a slot after a rebalance).
#[test]
fn an_emptied_master_turned_replica_keeps_no_slot_in_flight() {
    let mut net = Net::masters_and_more(3, 8030);
    for port in [8031, 8032] {
        net.nodes[0].meet("127.0.0.1", port, port + 10000, net.now);
    }
    net.settle();
    let (source, target) = ([b'a'; NAME_LEN], [b'b'; NAME_LEN]);
    // a serves 0-4999: all but slot 0 unassigned first.
    net.nodes[0].del_slots(1..5000);
    let now = net.now;
    net.nodes[1]
        .set_slot(0, SetSlot::Importing(&source), now)
        .unwrap();
    net.nodes[0]
        .set_slot(0, SetSlot::Migrating(&target), now)
        .unwrap();
    net.nodes[0]
        .set_slot(1, SetSlot::Importing(&target), now)
        .unwrap();
    assert!(net.nodes[0].slots_in_flight());
    net.nodes[1]
        .set_slot(0, SetSlot::Node(&target, false), now)
        .unwrap();
    let pending = net.nodes[1].take_pending();
    net.run(1, pending);
    for _ in 0..20 {
        net.tick(100);
    }
    assert_eq!(net.nodes[0].master_name(), Some(target));
    assert_eq!(net.nodes[0].migrating_to(0), None);
    assert!(!net.nodes[0].importing(1));
    assert!(
        !net.nodes[0].slots_in_flight(),
        "{:?}",
        net.nodes[0].in_flight_lines()
    );
}

/// The shard id each node of `net` has for the node named `name`.
fn shard_ids_of(net: &Net, name: NodeName) -> Vec<String> {
    let name = String::from_utf8_lossy(&name).into_owned();
    net.nodes
        .iter()
        .map(|c| {
            let file = c.nodes_file();
            let line = file.nodes.iter().find(|l| l.name == name).expect("known");
            line.shard_id.clone().expect("nodes.conf keeps shard ids")
        })
        .collect()
}

#[test]
fn shard_ids_travel_on_the_bus_and_a_replica_takes_its_masters() {
    let mut net = Net::masters_and_more(4, 7400);
    for i in 1..4 {
        let port = 7400 + i;
        assert!(net.nodes[0].meet("127.0.0.1", port, port + 10000, net.now));
    }
    for _ in 0..30 {
        net.tick(100);
    }
    let (a, d) = (net.nodes[0].myself(), net.nodes[3].myself());
    let a_shard = String::from_utf8_lossy(&net.nodes[0].my_shard_id()).into_owned();
    // Every node learnt a's own id from its PINGs (each drew a random one
    // when it first heard of a).
    assert_eq!(shard_ids_of(&net, a), vec![a_shard.clone(); 4]);
    assert_ne!(net.nodes[1].my_shard_id(), net.nodes[0].my_shard_id());

    net.nodes[3].replicate(&a).unwrap();
    assert_eq!(net.nodes[3].my_shard_id(), net.nodes[0].my_shard_id());
    for _ in 0..30 {
        net.tick(100);
    }
    assert_eq!(shard_ids_of(&net, d), vec![a_shard.clone(); 4]);

    // Promoted, the replica keeps the id; its old master follows it into it.
    let actions = net.nodes[3]
        .failover(FailoverMode::Takeover, net.now)
        .unwrap();
    net.run(3, actions);
    for _ in 0..30 {
        net.tick(100);
    }
    assert!(!net.nodes[3].is_replica() && net.nodes[0].is_replica());
    assert_eq!(shard_ids_of(&net, d), vec![a_shard.clone(); 4]);
    assert_eq!(shard_ids_of(&net, a), vec![a_shard.clone(); 4]);

    // Read back from nodes.conf; a file without ids (Redis 7.0's) gives the
    // replica its master's.
    let text = net.nodes[0].nodes_file().render();
    assert!(text.contains(&format!(",,shard-id={a_shard} ")), "{text}");
    let again = Cluster::from_file(settings(b'a', 7400), &NodesFile::parse(&text).unwrap(), 0);
    assert_eq!(again.unwrap().my_shard_id(), net.nodes[0].my_shard_id());
    let mut old = NodesFile::parse(&text).unwrap();
    for line in &mut old.nodes {
        line.shard_id = None;
    }
    let again = Cluster::from_file(settings(b'a', 7400), &old, 0).unwrap();
    let master = again.master_name().expect("a replica");
    let file = again.nodes_file();
    let shard_of = |name: &str| {
        file.nodes
            .iter()
            .find(|l| l.name == name)
            .unwrap()
            .shard_id
            .clone()
    };
    assert_eq!(
        shard_of(&String::from_utf8_lossy(&again.myself())),
        shard_of(&String::from_utf8_lossy(&master))
    );
}

#[test]
fn a_forgotten_node_stays_out_of_gossip_for_a_minute() {
    let mut net = Net::three_met(7300);
    let c = [b'c'; NAME_LEN];
    assert_eq!(net.nodes[0].known_nodes(), 3);
    let now = net.now;
    net.nodes[0].forget(&c, now).unwrap();
    assert_eq!(net.nodes[0].known_nodes(), 2);
    // b still knows c and gossips about it: a does not take it back.
    for _ in 0..100 {
        net.tick(100);
    }
    assert_eq!(
        net.nodes[0].known_nodes(),
        2,
        "{}",
        net.nodes[0].cluster_nodes()
    );
    // A minute after the FORGET, b's gossip brings it back (as on Redis).
    for _ in 0..600 {
        net.tick(100);
    }
    assert_eq!(
        net.nodes[0].known_nodes(),
        3,
        "{}",
        net.nodes[0].cluster_nodes()
    );
}
