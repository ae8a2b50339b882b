//! A cluster node of Ruvio's bus code (`ruvio_server::cluster::membership`, sans
//! I/O, over `cluster::bus::links`, the product's non-blocking sockets) stepped
//! by a thread of a test every 2 ms, the cron every 100 ms: Ruvio's rules and
//! sockets in one cluster with real redis-server nodes, before the binary runs
//! them on a shard's loop.

use ruvio_server::cluster::bus::links::Links;
use ruvio_server::cluster::bus::message::NAME_LEN;
use ruvio_server::cluster::membership::{Cluster, Settings};
use ruvio_server::cluster::nodes_file::{parse_line, NodeLine};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub const BUS_OFFSET: u16 = 10000;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

enum Command {
    Meet(u16),
    Replicate([u8; NAME_LEN], Sender<Result<(), String>>),
    Nodes(Sender<String>),
}

/// One node; dropping it stops its thread and closes its sockets.
pub struct Driver {
    commands: Sender<Command>,
}

impl Driver {
    pub fn start(name: [u8; NAME_LEN], port: u16, slots: std::ops::Range<u16>) -> Driver {
        let links = Links::bind("127.0.0.1", port + BUS_OFFSET).expect("bus port");
        let settings = Settings {
            name,
            ip: "127.0.0.1".into(),
            port,
            pport: 0,
            cport: port + BUS_OFFSET,
            node_timeout: 1000,
            seed: u64::from(port),
        };
        let mut cluster = Cluster::new(settings, now_ms());
        cluster.add_slots(slots);
        let (commands, inbox) = mpsc::channel();
        std::thread::spawn(move || run(cluster, links, inbox));
        Driver { commands }
    }

    pub fn meet(&self, port: u16) {
        self.commands.send(Command::Meet(port)).unwrap();
    }

    /// CLUSTER REPLICATE on this node.
    pub fn replicate(&self, master: &str) -> Result<(), String> {
        let (tx, rx) = mpsc::channel();
        let name = master
            .as_bytes()
            .try_into()
            .map_err(|_| "not a node name".to_string())?;
        self.commands.send(Command::Replicate(name, tx)).unwrap();
        rx.recv_timeout(Duration::from_secs(5))
            .expect("the node answers")
    }

    /// The node's CLUSTER NODES, read.
    pub fn nodes(&self) -> Vec<NodeLine> {
        let (tx, rx) = mpsc::channel();
        self.commands.send(Command::Nodes(tx)).unwrap();
        let text = rx
            .recv_timeout(Duration::from_secs(5))
            .expect("the node answers");
        text.lines()
            .map(|l| parse_line(l).expect("a node line"))
            .collect()
    }
}

/// The node's thread: commands, then a step of the links; the cron every 100 ms.
fn run(mut cluster: Cluster, mut links: Links, inbox: Receiver<Command>) {
    let mut next_cron = Instant::now();
    loop {
        match inbox.try_recv() {
            Ok(Command::Meet(port)) => {
                cluster.meet("127.0.0.1", port, port + BUS_OFFSET, now_ms());
            }
            Ok(Command::Replicate(master, reply)) => {
                let _ = reply.send(cluster.replicate(&master).map_err(str::to_string));
            }
            Ok(Command::Nodes(reply)) => {
                let _ = reply.send(cluster.cluster_nodes());
            }
            Err(TryRecvError::Empty) => {}
            Err(TryRecvError::Disconnected) => return,
        }
        let cron = Instant::now() >= next_cron;
        if cron {
            next_cron += Duration::from_millis(100);
        }
        links.step(&mut cluster, now_ms(), cron);
        std::thread::sleep(Duration::from_millis(2));
    }
}

pub fn name(seed: u64) -> [u8; NAME_LEN] {
    let text = format!("{:016x}{:024x}", seed, u128::from(seed) * 0x1_0000_0001);
    text.as_bytes()[..NAME_LEN].try_into().unwrap()
}

/// What every node must agree on: name, address, role and slots of each node.
pub type Agreed = Vec<(String, String, bool, Vec<(u16, u16)>)>;

pub fn agreed(lines: &[NodeLine]) -> Agreed {
    let mut view: Vec<_> = lines
        .iter()
        .map(|l| {
            let address = format!("{}:{}@{}", l.ip, l.port, l.cport);
            (
                l.name.clone(),
                address,
                l.has_flag("master"),
                l.slots.clone(),
            )
        })
        .collect();
    view.sort();
    view
}

pub fn wait_for(what: &str, mut check: impl FnMut() -> Result<(), String>) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match check() {
            Ok(()) => return,
            Err(why) if Instant::now() > deadline => panic!("{what}: {why}"),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}
