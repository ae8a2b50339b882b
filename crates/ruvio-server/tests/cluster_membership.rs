//! `ruvio_server::cluster::membership` with a real redis-server 7.0 in one
//! cluster. Two nodes of Ruvio's membership code (each driven over real TCP by a
//! thread of this test: the code is sans I/O) and a `redis-server
//! --cluster-enabled yes` each take a third of the slots; one Ruvio node MEETs
//! the redis-server, the other MEETs the first, and gossip does the rest: all
//! three end with the same nodes, addresses, roles and slots (CLUSTER NODES of
//! the redis-server, the nodes' own tables), and the redis-server's cluster is
//! `ok` with 3 known nodes. Then the redis-server is killed: both Ruvio nodes
//! mark it `fail?`, exchange failure reports, and one of them marks it `fail`
//! and tells the other (a majority of the masters: FAIL by the rules of
//! `markNodeAsFailingIfNeeded`).

mod common;

use common::*;
use ruvio_server::cluster::bus::message::{frame_len, Message, NAME_LEN};
use ruvio_server::cluster::membership::{Action, Cluster, LinkId, Settings};
use ruvio_server::cluster::nodes_file::{parse_line, NodeLine};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const BUS_OFFSET: u16 = 10000;

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
    Nodes(Sender<String>),
}

/// One node of the membership code over real sockets.
struct Driver {
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
    fn start(name: [u8; NAME_LEN], port: u16, slots: std::ops::Range<u16>) -> Driver {
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

    fn meet(&self, port: u16) {
        self.events.send(Event::Meet(port)).unwrap();
    }

    fn nodes(&self) -> Vec<NodeLine> {
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

fn name(seed: u64) -> [u8; NAME_LEN] {
    let text = format!("{:016x}{:024x}", seed, u128::from(seed) * 0x1_0000_0001);
    text.as_bytes()[..NAME_LEN].try_into().unwrap()
}

/// What every node must agree on: name, address, role and slots of each node.
type Agreed = Vec<(String, String, bool, Vec<(u16, u16)>)>;

fn agreed(lines: &[NodeLine]) -> Agreed {
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

fn wait_for(what: &str, mut check: impl FnMut() -> Result<(), String>) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match check() {
            Ok(()) => return,
            Err(why) if Instant::now() > deadline => panic!("{what}: {why}"),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

#[test]
fn ruvio_nodes_and_a_redis_server_form_one_cluster() {
    if require_redis_server("cluster_membership").is_none() {
        return;
    }
    let redis = Server::redis_with(&[
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--cluster-node-timeout",
        "1000",
    ]);
    let mut conn = redis.raw();
    assert_eq!(
        conn.cmd(&["CLUSTER", "ADDSLOTSRANGE", "10923", "16383"]),
        b"+OK\r\n"
    );
    let (port_a, port_b) = (free_ports(1, true), free_ports(1, true));
    let a = Driver::start(name(u64::from(port_a)), port_a, 0..5461);
    let b = Driver::start(name(u64::from(port_b)), port_b, 5461..10923);
    a.meet(redis.port());
    b.meet(port_a);

    wait_for("one cluster of three", || {
        let text = decode(&conn.cmd(&["CLUSTER", "NODES"])).text();
        let redis_view: Vec<NodeLine> = text.lines().map(|l| parse_line(l).unwrap()).collect();
        let (view_a, view_b) = (a.nodes(), b.nodes());
        let expected = agreed(&redis_view);
        if expected.len() != 3 || redis_view.iter().any(|l| !l.connected) {
            return Err(format!("redis-server sees:\n{text}"));
        }
        if agreed(&view_a) != expected || agreed(&view_b) != expected {
            return Err(format!("views differ:\n{text}\n{view_a:?}\n{view_b:?}"));
        }
        let info = decode(&conn.cmd(&["CLUSTER", "INFO"])).text();
        for field in [
            "cluster_state:ok",
            "cluster_known_nodes:3",
            "cluster_size:3",
        ] {
            if !info.lines().any(|l| l == field) {
                return Err(format!("no {field} in\n{info}"));
            }
        }
        Ok(())
    });
    let redis_id = decode(&conn.cmd(&["CLUSTER", "MYID"])).text();
    let slots_a = a
        .nodes()
        .into_iter()
        .find(|l| l.has_flag("myself"))
        .map(|l| l.slots);
    assert_eq!(slots_a, Some(vec![(0, 5460)]));
    drop(conn);
    drop(redis);

    wait_for("the killed redis-server marked fail by both", || {
        for (who, view) in [("a", a.nodes()), ("b", b.nodes())] {
            let line = view
                .iter()
                .find(|l| l.name == redis_id)
                .expect("still known");
            if !line.has_flag("fail") || line.has_flag("fail?") {
                return Err(format!("{who} sees {line:?}"));
            }
        }
        Ok(())
    });
}
