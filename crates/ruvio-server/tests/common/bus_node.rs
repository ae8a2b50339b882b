//! A cluster node of Ruvio's membership code (`ruvio_server::cluster::membership`,
//! sans I/O) driven over real TCP by threads of a test: an accept thread, a
//! reader thread per link, and the node's loop (events in, the cron every 100
//! ms, the actions out). Used to put Ruvio's rules in one cluster with real
//! redis-server nodes before the binary runs them itself.

use ruvio_server::cluster::bus::message::{frame_len, Message, NAME_LEN};
use ruvio_server::cluster::membership::{Action, Cluster, LinkId, Settings};
use ruvio_server::cluster::nodes_file::{parse_line, NodeLine};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub const BUS_OFFSET: u16 = 10000;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

enum Event {
    Accepted(TcpStream),
    Connected(LinkId, TcpStream),
    Message(LinkId, Box<Message>, String),
    Closed(LinkId),
    Meet(u16),
    Replicate([u8; NAME_LEN], Sender<Result<(), String>>),
    Nodes(Sender<String>),
}

/// One node of the membership code over real sockets.
pub struct Driver {
    events: Sender<Event>,
}

fn read_message(stream: &mut TcpStream) -> Option<Message> {
    let mut buf = vec![0; 8];
    stream.read_exact(&mut buf).ok()?;
    let total = frame_len(&buf)?.ok()?;
    buf.resize(total, 0);
    stream.read_exact(&mut buf[8..]).ok()?;
    Message::decode(&buf).ok()
}

fn spawn_reader(mut stream: TcpStream, link: LinkId, events: Sender<Event>) {
    std::thread::spawn(move || {
        let peer = stream
            .peer_addr()
            .map(|a| a.ip().to_string())
            .unwrap_or_default();
        while let Some(message) = read_message(&mut stream) {
            if events
                .send(Event::Message(link, Box::new(message), peer.clone()))
                .is_err()
            {
                return;
            }
        }
        let _ = events.send(Event::Closed(link));
    });
}

impl Driver {
    pub fn start(name: [u8; NAME_LEN], port: u16, slots: std::ops::Range<u16>) -> Driver {
        let listener = TcpListener::bind(("127.0.0.1", port + BUS_OFFSET)).expect("bus port");
        let (events, inbox) = mpsc::channel();
        let accepts = events.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                if accepts.send(Event::Accepted(stream)).is_err() {
                    return;
                }
            }
        });
        let settings = Settings {
            name,
            ip: "127.0.0.1".into(),
            port,
            cport: port + BUS_OFFSET,
            node_timeout: 1000,
            seed: u64::from(port),
        };
        let mut cluster = Cluster::new(settings, now_ms());
        cluster.add_slots(slots);
        let loop_events = events.clone();
        std::thread::spawn(move || run(cluster, inbox, loop_events));
        Driver { events }
    }

    pub fn meet(&self, port: u16) {
        self.events.send(Event::Meet(port)).unwrap();
    }

    /// CLUSTER REPLICATE on this node.
    pub fn replicate(&self, master: &str) -> Result<(), String> {
        let (tx, rx) = mpsc::channel();
        let name = master
            .as_bytes()
            .try_into()
            .map_err(|_| "not a node name".to_string())?;
        self.events.send(Event::Replicate(name, tx)).unwrap();
        rx.recv_timeout(Duration::from_secs(5))
            .expect("the node answers")
    }

    /// The node's CLUSTER NODES, read.
    pub fn nodes(&self) -> Vec<NodeLine> {
        let (tx, rx) = mpsc::channel();
        self.events.send(Event::Nodes(tx)).unwrap();
        let text = rx
            .recv_timeout(Duration::from_secs(5))
            .expect("the node answers");
        text.lines()
            .map(|l| parse_line(l).expect("a node line"))
            .collect()
    }
}

/// The node's loop: events in, the cron every 100 ms, actions out.
fn run(mut cluster: Cluster, inbox: Receiver<Event>, events: Sender<Event>) {
    let mut streams: HashMap<LinkId, TcpStream> = HashMap::new();
    let mut waiting: HashMap<LinkId, Vec<u8>> = HashMap::new();
    let mut next_cron = Instant::now();
    loop {
        let wait = next_cron.saturating_duration_since(Instant::now());
        let actions = match inbox.recv_timeout(wait) {
            Ok(Event::Accepted(stream)) => {
                let link = cluster.accepted();
                if let Ok(reader) = stream.try_clone() {
                    spawn_reader(reader, link, events.clone());
                }
                streams.insert(link, stream);
                Vec::new()
            }
            Ok(Event::Connected(link, mut stream)) => {
                if let Some(bytes) = waiting.remove(&link) {
                    let _ = stream.write_all(&bytes);
                    if let Ok(reader) = stream.try_clone() {
                        spawn_reader(reader, link, events.clone());
                    }
                    streams.insert(link, stream);
                }
                Vec::new()
            }
            Ok(Event::Message(link, message, peer)) => {
                cluster.on_message(link, &message, &peer, now_ms())
            }
            Ok(Event::Closed(link)) => {
                streams.remove(&link);
                waiting.remove(&link);
                cluster.link_closed(link);
                Vec::new()
            }
            Ok(Event::Meet(port)) => {
                cluster.meet("127.0.0.1", port, port + BUS_OFFSET, now_ms());
                Vec::new()
            }
            Ok(Event::Replicate(master, reply)) => {
                let _ = reply.send(cluster.replicate(&master).map_err(str::to_string));
                Vec::new()
            }
            Ok(Event::Nodes(reply)) => {
                let _ = reply.send(cluster.cluster_nodes());
                Vec::new()
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                next_cron = Instant::now() + Duration::from_millis(100);
                cluster.cron(now_ms())
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        };
        for action in actions {
            match action {
                Action::Connect { link, ip, cport } => {
                    waiting.insert(link, Vec::new());
                    let events = events.clone();
                    std::thread::spawn(move || {
                        let address = format!("{ip}:{cport}").parse().expect("an address");
                        match TcpStream::connect_timeout(&address, Duration::from_millis(500)) {
                            Ok(stream) => events.send(Event::Connected(link, stream)),
                            Err(_) => events.send(Event::Closed(link)),
                        }
                    });
                }
                Action::Send { link, message } => {
                    let mut bytes = Vec::new();
                    message.encode(&mut bytes).expect("encodes");
                    if let Some(pending) = waiting.get_mut(&link) {
                        pending.extend_from_slice(&bytes);
                    } else if let Some(stream) = streams.get_mut(&link) {
                        let _ = stream.write_all(&bytes);
                    }
                }
                Action::Close { link } => {
                    if let Some(stream) = streams.remove(&link) {
                        let _ = stream.shutdown(Shutdown::Both);
                    }
                    waiting.remove(&link);
                }
                Action::SaveConfig | Action::Publish { .. } => {}
            }
        }
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
