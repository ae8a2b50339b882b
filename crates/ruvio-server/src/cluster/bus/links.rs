//! The bus's sockets: the listener on `cluster-port`, one non-blocking TCP
//! connection per link, their input and output buffers. [`Links::step`] is
//! called on a tick (a shard's loop, or a test's thread): it accepts, finishes
//! connects, reads whole messages into the membership ([`Cluster`]), runs its
//! cron when due, performs the actions it returns and writes what is queued.
//!
//! Under `tls-cluster yes` every link is TLS ([`BusTls`]): the socket's bytes
//! go through the link's session, and the input and output buffers hold the
//! messages in plain as on a plain link.
//!
//! Why polled on a tick rather than on the loop's ring: the bus carries a few
//! messages per node per second (gossip, votes), never a client's request, so a
//! non-blocking pass every few milliseconds costs nothing the request path would
//! notice and keeps the bus out of the loop's hot code, as the replication link's
//! handshake is (`replication::link`).

use super::super::membership::{Action, Cluster, LinkId};
use super::message::{frame_len, BusError, Message};
use super::tls::BusTls;
use crate::serverlog::{log, Level};
use socket2::Socket;
use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};

/// Output a link may hold before it is dropped (a peer that stopped reading).
const MAX_PENDING_OUTPUT: usize = 64 << 20;
/// Bytes read from a socket per read call.
const READ_CHUNK: usize = 16 << 10;

/// One link's socket and buffers.
struct LinkIo {
    socket: Socket,
    /// The non-blocking connect has not finished yet (outbound links).
    connecting: bool,
    /// The peer's IP (for a MEET that names none).
    peer_ip: String,
    input: Vec<u8>,
    output: Vec<u8>,
    written: usize,
    /// Unix ms the link was opened or accepted (CLUSTER LINKS).
    created: u64,
    /// The link's TLS session (`tls-cluster yes`); `output` and `input` are
    /// its plain side.
    tls: Option<rustls::Connection>,
}

/// What a step leaves for its caller.
#[derive(Default, Debug)]
pub struct Stepped {
    /// nodes.conf should be written.
    pub save_config: bool,
    /// PUBLISH messages from the bus (channel, message).
    pub published: Vec<(Vec<u8>, Vec<u8>)>,
    /// Clients' writes held until this Unix ms (`Some(0)`: let go now).
    pub pause_writes: Option<u64>,
}

/// Message types of the bus (`CLUSTERMSG_TYPE_COUNT`).
pub const KINDS: usize = 11;

/// The bus port and every open link.
pub struct Links {
    listener: TcpListener,
    links: HashMap<LinkId, LinkIo>,
    /// Messages sent and received, by type (CLUSTER INFO's
    /// `cluster_stats_messages_*`).
    pub sent: [u64; KINDS],
    pub received: [u64; KINDS],
    /// The time of the current step (a new link's creation time).
    now: u64,
    /// `tls-cluster yes`: new links run TLS.
    tls: Option<BusTls>,
}

/// One link as CLUSTER LINKS shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkView {
    /// Unix ms it was opened or accepted.
    pub created: u64,
    /// Bytes its output buffer holds allocated, and those still to send.
    pub allocated: usize,
    pub pending: usize,
}

impl Links {
    /// Listens on `ip:cport`.
    pub fn bind(ip: &str, cport: u16) -> std::io::Result<Links> {
        let listener = TcpListener::bind((ip, cport))?;
        listener.set_nonblocking(true)?;
        Ok(Links {
            listener,
            links: HashMap::new(),
            sent: [0; KINDS],
            received: [0; KINDS],
            now: 0,
            tls: None,
        })
    }

    /// Links opened or accepted from now on run TLS with `tls` (`None`: plain);
    /// the open ones keep theirs, as redis-server's do when `tls-cluster` or
    /// the TLS files change.
    pub fn set_tls(&mut self, tls: Option<BusTls>) {
        self.tls = tls;
    }

    /// A new link's session, when the bus runs TLS: `Err` when rustls cannot
    /// start one (logged; the link is not opened).
    fn new_session(&self, connecting_to: Option<&str>) -> Result<Option<rustls::Connection>, ()> {
        let Some(tls) = &self.tls else {
            return Ok(None);
        };
        let session = match connecting_to {
            Some(ip) => tls.connecting(ip),
            None => tls.accepted(),
        };
        session.map(Some).map_err(|e| {
            log(Level::Warning, &format!("Cluster bus TLS session: {e}"));
        })
    }

    /// Performs `actions` of the membership (and what they lead to), then writes.
    pub fn perform(&mut self, cluster: &mut Cluster, actions: Vec<Action>, out: &mut Stepped) {
        for action in actions {
            match action {
                Action::Connect { link, ip, cport } => match self
                    .new_session(Some(&ip))
                    .and_then(|tls| Ok((connect(&ip, cport).map_err(|_| ())?, tls)))
                {
                    Ok((socket, tls)) => {
                        self.links.insert(
                            link,
                            LinkIo {
                                socket,
                                connecting: true,
                                peer_ip: ip,
                                input: Vec::new(),
                                output: Vec::new(),
                                written: 0,
                                created: self.now,
                                tls,
                            },
                        );
                    }
                    Err(_) => cluster.link_closed(link),
                },
                Action::Send { link, message } => {
                    if let Some(io) = self.links.get_mut(&link) {
                        // Every message this node builds encodes (its lengths fit).
                        let _ = message.encode(&mut io.output);
                        self.sent[usize::from(message.kind.code()) % KINDS] += 1;
                    }
                }
                Action::Close { link } => {
                    self.links.remove(&link);
                }
                Action::SaveConfig => out.save_config = true,
                Action::Publish { channel, message } => out.published.push((channel, message)),
                Action::PauseWrites { until } => out.pause_writes = Some(until),
                Action::Unpause => out.pause_writes = Some(0),
            }
        }
    }

    /// One pass: accept, connect, read and hand messages over, run the cron
    /// when `cron` says so, write.
    pub fn step(&mut self, cluster: &mut Cluster, now: u64, cron: bool) -> Stepped {
        let mut out = Stepped::default();
        self.now = now;
        let pending = cluster.take_pending();
        self.perform(cluster, pending, &mut out);
        while let Ok((stream, _)) = self.listener.accept() {
            if stream.set_nonblocking(true).is_err() {
                continue;
            }
            let _ = stream.set_nodelay(true);
            let Ok(tls) = self.new_session(None) else {
                continue;
            };
            let link = cluster.accepted();
            let mut io = LinkIo::from(stream);
            io.created = now;
            io.tls = tls;
            self.links.insert(link, io);
        }
        let ids: Vec<LinkId> = self.links.keys().copied().collect();
        for link in ids {
            let Some(io) = self.links.get_mut(&link) else {
                continue;
            };
            if io.connecting {
                match crate::dial::connect_finished(&io.socket) {
                    Ok(false) => continue,
                    Ok(true) => io.connecting = false,
                    Err(_) => {
                        self.drop_link(cluster, link);
                        continue;
                    }
                }
            }
            let Ok(read) = read_messages(io) else {
                self.drop_link(cluster, link);
                continue;
            };
            let peer_ip = io.peer_ip.clone();
            for message in read.messages {
                self.received[usize::from(message.kind.code()) % KINDS] += 1;
                let actions = cluster.on_message(link, &message, &peer_ip, now);
                self.perform(cluster, actions, &mut out);
            }
            if read.closed {
                self.drop_link(cluster, link);
            }
        }
        if cron {
            let actions = cluster.cron(now);
            self.perform(cluster, actions, &mut out);
        }
        let ids: Vec<LinkId> = self.links.keys().copied().collect();
        for link in ids {
            let io = self.links.get_mut(&link).expect("listed");
            if !io.connecting && write_out(io).is_err() {
                self.drop_link(cluster, link);
            }
        }
        out
    }

    fn drop_link(&mut self, cluster: &mut Cluster, link: LinkId) {
        self.links.remove(&link);
        cluster.link_closed(link);
    }

    /// Open links (accepted and connected), for CLUSTER LINKS and tests.
    pub fn count(&self) -> usize {
        self.links.len()
    }

    /// Link `link`'s age and output, if it is open.
    pub fn view(&self, link: LinkId) -> Option<LinkView> {
        self.links.get(&link).map(|io| LinkView {
            created: io.created,
            allocated: io.output.capacity(),
            pending: io.output.len() - io.written,
        })
    }
}

/// A non-blocking connect to `ip:cport`.
fn connect(ip: &str, cport: u16) -> std::io::Result<Socket> {
    let ip = ip
        .parse()
        .map_err(|_| std::io::Error::new(ErrorKind::InvalidInput, "not an IP address"))?;
    crate::dial::start_connect(SocketAddr::new(ip, cport))
}

/// Reads what the socket has and takes every whole message out of the input.
/// `Err` when the link is over at once: a socket error, or bytes that are not
/// a bus message. What Redis 7.0 does with bad input, and logs:
/// a wrong signature or an impossible total length ends the link
/// (`clusterReadHandler`); a whole message whose length disagrees with its
/// type, or of a type it does not know, is dropped and the link kept
/// (`clusterProcessPacket` returns 1); another protocol version is skipped
/// without a word.
fn read_messages(io: &mut LinkIo) -> Result<LinkRead, ()> {
    let closed = match io.tls.as_mut() {
        Some(tls) => read_tls(&io.socket, tls, &mut io.input)?,
        None => read_plain(&io.socket, &mut io.input)?,
    };
    let mut messages = Vec::new();
    let mut at = 0;
    while let Some(total) = frame_len(&io.input[at..]) {
        let Ok(total) = total else {
            log(
                Level::Warning,
                "Bad message length or signature received from Cluster bus.",
            );
            return Err(());
        };
        if io.input.len() - at < total {
            break;
        }
        match Message::decode(&io.input[at..at + total]) {
            Ok(message) => messages.push(message),
            Err(BusError::Version(_)) => {}
            Err(BusError::UnknownType(code)) => log(
                Level::Warning,
                &format!("Received unknown packet type: {code}"),
            ),
            Err(invalid) => log(Level::Warning, &invalid.to_string()),
        }
        at += total;
    }
    io.input.drain(..at);
    if closed {
        // The messages the peer finished still count (Redis reads them before
        // it sees the end); a message it left unfinished is dropped.
        match io.input.len() {
            0 => log(Level::Debug, "I/O error reading from node link: connection closed"),
            cut => log(
                Level::Verbose,
                &format!("Cluster bus link closed in the middle of a message ({cut} bytes of it dropped)"),
            ),
        }
        io.input.clear();
    }
    Ok(LinkRead { messages, closed })
}

/// A link's read failed: logged as Redis does; the link ends.
fn read_failed(e: &std::io::Error) {
    log(
        Level::Debug,
        &format!("I/O error reading from node link: {e}"),
    );
}

/// Appends what the socket has to `input`; true when the peer closed it.
fn read_plain(socket: &Socket, input: &mut Vec<u8>) -> Result<bool, ()> {
    let mut chunk = [0u8; READ_CHUNK];
    loop {
        match (&*socket).read(&mut chunk) {
            Ok(0) => return Ok(true),
            Ok(n) => input.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => {
                read_failed(&e);
                return Err(());
            }
        }
    }
}

/// [`read_plain`] through the link's TLS session: the records the socket has
/// go into the session, what they decrypt to into `input` (a handshake's
/// records decrypt to nothing and leave the session wanting to write). A
/// record or certificate the session refuses ends the link, logged.
fn read_tls(
    socket: &Socket,
    tls: &mut rustls::Connection,
    input: &mut Vec<u8>,
) -> Result<bool, ()> {
    let mut chunk = [0u8; READ_CHUNK];
    loop {
        let mut from = socket;
        let (closed, drained) = match tls.read_tls(&mut from) {
            Ok(0) => (true, true),
            Ok(_) => (false, false),
            Err(e) if e.kind() == ErrorKind::WouldBlock => (false, true),
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => {
                read_failed(&e);
                return Err(());
            }
        };
        if let Err(e) = tls.process_new_packets() {
            log(
                Level::Verbose,
                &format!("Error on TLS cluster bus link: {e}"),
            );
            return Err(());
        }
        loop {
            match tls.reader().read(&mut chunk) {
                Ok(0) => return Ok(true),
                Ok(n) => input.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(_) => return Ok(true),
            }
        }
        if closed || drained {
            return Ok(closed);
        }
    }
}

/// What one read of a link gave.
struct LinkRead {
    /// Its whole messages, in order.
    messages: Vec<Message>,
    /// The peer closed the link after them.
    closed: bool,
}

/// Writes what the link has queued, as far as the socket takes it.
fn write_out(io: &mut LinkIo) -> Result<(), ()> {
    if io.output.len() - io.written > MAX_PENDING_OUTPUT {
        return Err(());
    }
    if let Some(tls) = io.tls.as_mut() {
        return write_tls(&io.socket, tls, &mut io.output, &mut io.written);
    }
    while io.written < io.output.len() {
        match (&io.socket).write(&io.output[io.written..]) {
            Ok(0) => return Err(()),
            Ok(n) => io.written += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return Err(()),
        }
    }
    if io.written == io.output.len() {
        io.output.clear();
        io.written = 0;
    }
    Ok(())
}

/// [`write_out`] through the link's TLS session: the queued messages go into
/// the session as far as it takes them (it holds a bounded amount before the
/// handshake ends), its records to the socket as far as it takes them.
fn write_tls(
    socket: &Socket,
    tls: &mut rustls::Connection,
    output: &mut Vec<u8>,
    written: &mut usize,
) -> Result<(), ()> {
    while *written < output.len() {
        match tls.writer().write(&output[*written..]) {
            Ok(0) => break,
            Ok(n) => *written += n,
            Err(_) => return Err(()),
        }
    }
    if *written == output.len() {
        output.clear();
        *written = 0;
    }
    while tls.wants_write() {
        let mut to = socket;
        match tls.write_tls(&mut to) {
            Ok(0) => return Err(()),
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return Err(()),
        }
    }
    Ok(())
}

impl From<TcpStream> for LinkIo {
    fn from(stream: TcpStream) -> LinkIo {
        let peer_ip = stream
            .peer_addr()
            .map(|a| a.ip().to_string())
            .unwrap_or_default();
        LinkIo {
            socket: Socket::from(stream),
            connecting: false,
            peer_ip,
            input: Vec::new(),
            output: Vec::new(),
            written: 0,
            created: 0,
            tls: None,
        }
    }
}
