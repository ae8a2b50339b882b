//! The replica's side of the handshake with a Redis primary, stepped from shard
//! 0's tick on a non-blocking socket: connect, PING, AUTH (`masterauth`),
//! REPLCONF listening-port, REPLCONF capa eof capa psync2, PSYNC, then the RDB
//! in either of Redis's forms (`$<len>` from a disk save, `$EOF:<40 bytes>` from
//! a diskless one).
//!
//! A state machine rather than a task or a thread: the shard's loop already wakes
//! every tick, each step reads what the socket holds and never waits, so the
//! link costs the loop nothing while it waits for the primary and a bounded
//! slice ([`READ_PER_STEP_BYTES`]) while the RDB arrives. Once the RDB is in,
//! every shard loads its keys ([`super::State::publish_dataset`]) and the socket
//! goes to the shard as the master client's connection ([`Handover`]): from then
//! on the stream takes the ordinary request path.
//!
//! A shard link (`super::shard_links`) is the same machine stepped by its own
//! shard: its handshake adds `REPLCONF ruvio-shard i/n`, its history is its
//! book's, and its RDB (the primary shard's keys only) goes to its shard with
//! the socket, which loads it alone.

use super::state::{LinkState, State};
use crate::config::Config;
use socket2::Socket;
use std::io::{ErrorKind, Read, Write};
use std::net::ToSocketAddrs;

/// What one step reads at most: the RDB arrives over several ticks, and the
/// shard's clients are served in between.
pub const READ_PER_STEP_BYTES: usize = 64 << 20;
/// One read's buffer.
const READ_CHUNK_BYTES: usize = 256 << 10;
/// A handshake reply line longer than this is not Redis talking.
const LINE_BYTES_MAX: usize = 4096;
/// Redis's replicationCron retries a failed link about once a second.
const RETRY_MS: u64 = 1000;
/// The length of the diskless form's end mark (`$EOF:<mark>`).
const EOF_MARK_BYTES: usize = 40;

/// What the handshake waits for.
#[derive(Debug)]
enum Phase {
    /// Not connected: connect at `retry_at_ms`.
    Idle,
    /// The non-blocking connect is in progress.
    Connecting,
    /// The reply to a handshake command.
    Reply(Expect),
    /// `$<len>` or `$EOF:<mark>` after `+FULLRESYNC` (newlines before it are the
    /// primary's keep-alives while it prepares the RDB).
    BulkHeader,
    /// `left` bytes of the RDB still to come.
    Bulk { left: usize },
    /// The diskless form: the RDB ends with the mark.
    BulkEof { mark: [u8; EOF_MARK_BYTES] },
    /// Every shard is loading dataset `id`.
    Loading { id: u64 },
    /// The socket belongs to the shard now.
    Streaming,
}

#[derive(Debug, Clone, Copy)]
enum Expect {
    Pong,
    Auth,
    Port,
    /// The reply to `REPLCONF ip-address` (`replica-announce-ip`).
    Ip,
    Capa,
    Psync,
    /// The reply to `REPLCONF ruvio-shard i/n`.
    Shard,
}

/// The socket handed to the shard, with bytes of the stream already read.
pub struct Handover {
    pub socket: Socket,
    pub leftover: Vec<u8>,
    /// A partial resync (`+CONTINUE`): nothing was loaded.
    pub continued: bool,
    /// A shard link's full sync: the RDB its shard loads before the stream.
    pub rdb: Option<Vec<u8>>,
}

/// A link to the primary REPLICAOF named: shard 0's single stream, or one
/// shard's own on shard links.
pub struct Link {
    /// The [`super::state::Ids::epoch`] this link serves.
    pub epoch: u64,
    host: String,
    port: u16,
    phase: Phase,
    socket: Option<Socket>,
    input: Vec<u8>,
    /// One read's buffer, kept while the link is being made.
    chunk: Vec<u8>,
    rdb: Vec<u8>,
    retry_at_ms: u64,
    /// When the primary last sent anything during the handshake or the sync.
    last_read_ms: u64,
    /// The primary's replid and the next offset, for PSYNC after a lost link.
    resume: Option<(String, u64)>,
    /// `+CONTINUE`: the socket goes to the shard without a load.
    continued: bool,
    /// FAILOVER: PSYNC asks the target to take over (`PSYNC ... FAILOVER`).
    failover: bool,
    /// A shard link: this shard and the shard count (`REPLCONF ruvio-shard`).
    shard: Option<(usize, usize)>,
    /// A cluster node's link to its master node: Redis's plain handshake (no
    /// `REPLCONF ruvio-shard`), its history the shard's book as a shard
    /// link's.
    plain: bool,
}

impl Link {
    /// A link to `host:port` for REPLICAOF epoch `epoch`, connecting at once.
    pub fn new(epoch: u64, host: String, port: u16) -> Link {
        Link {
            epoch,
            host,
            port,
            phase: Phase::Idle,
            socket: None,
            input: Vec::new(),
            chunk: Vec::new(),
            rdb: Vec::new(),
            retry_at_ms: 0,
            last_read_ms: 0,
            resume: None,
            continued: false,
            failover: false,
            shard: None,
            plain: false,
        }
    }

    /// Shard `shard`'s link to the master node it replicates (CLUSTER
    /// REPLICATE, per-shard mode): the master is any Redis node, asked in
    /// Redis's own words; the RDB and the stream are this shard's alone.
    pub fn for_node(epoch: u64, host: String, port: u16, shard: usize, state: &State) -> Link {
        let mut link = Link::for_shard(epoch, host, port, (shard, 1), state);
        link.plain = true;
        link
    }

    /// The primary's address.
    pub fn target(&self) -> (&str, u16) {
        (&self.host, self.port)
    }

    /// Shard `shard`'s link (of `shards`) to the same shard of a Ruvio
    /// primary, continuing its book's history.
    pub fn for_shard(
        epoch: u64,
        host: String,
        port: u16,
        (shard, shards): (usize, usize),
        state: &State,
    ) -> Link {
        let book = state.shard_links.book(shard);
        let mut link = Link::new(epoch, host, port);
        link.shard = Some((shard, shards));
        let node = state.node_history(shard);
        // A primary with replicas on links turned replica (a FAILOVER's
        // hand-over, REPLICAOF): its shards' own histories, which a replica
        // of it promoted since continues (Redis's
        // replicationCacheMasterUsingMyself).
        let own = !node.is_following() && node.primary.active();
        if !book.replid().is_empty() || own {
            // The shard's own history: its link's while it followed, its
            // own since a promotion (the new primary may continue either).
            let (replid, offset) = (node.ids().replid, node.offset());
            book.resume_at(&replid, offset);
            link.resume = Some((replid, offset + 1));
        }
        link
    }

    /// The shard whose book this link keeps (`None`: the single stream).
    fn link_shard(&self) -> Option<usize> {
        self.shard.map(|(shard, _)| shard)
    }

    /// This link's state changed: the server's, or its shard's book.
    fn set_link(&self, state: &State, link: LinkState, now_ms: u64) {
        match self.shard {
            Some((shard, _)) => state.shard_link_state(shard, link, now_ms),
            None => state.set_link(link, now_ms),
        }
    }

    /// Its shard could not load the RDB a shard link brought: a full sync
    /// again.
    pub fn load_failed(&mut self, state: &State, why: &str, now_ms: u64) {
        crate::serverlog::log(
            crate::serverlog::Level::Warning,
            &format!(
                "MASTER <-> REPLICA sync with {}:{}: {why}",
                self.host, self.port
            ),
        );
        self.resume = None;
        self.fail(state, now_ms);
    }

    /// Ask to continue `replid`'s history from `next_offset` (PSYNC), as a replica
    /// that changes primary does with its cached one.
    pub fn resume_from(&mut self, replid: String, next_offset: u64) {
        self.resume = Some((replid, next_offset));
    }

    /// FAILOVER: this server, a primary until now, asks its replica to take over
    /// and continue from this server's own history (`PSYNC <replid> <offset+1>
    /// FAILOVER`, as Redis's failover).
    pub fn ask_to_take_over(&mut self, replid: String, next_offset: u64) {
        self.resume = Some((replid, next_offset));
        self.failover = true;
    }

    /// FAILOVER to a replica on shard links: this link's PSYNC (shard 0's)
    /// asks the target to take over, continuing the shard's own history
    /// ([`Self::for_shard`]'s).
    pub fn take_over(&mut self) {
        self.failover = self.resume.is_some();
    }

    /// The shard lost the stream's connection: connect again at once and ask to
    /// continue from the offset applied (PSYNC replid offset+1).
    pub fn lost(&mut self, state: &State, now_ms: u64) {
        self.resume = Some(match self.shard {
            Some((shard, _)) => {
                let book = state.shard_links.book(shard);
                (book.replid(), book.offset() + 1)
            }
            None => (state.ids().replid, state.offset() + 1),
        });
        self.phase = Phase::Idle;
        self.retry_at_ms = now_ms;
        self.set_link(state, LinkState::Connect, now_ms);
    }

    /// The stream is the shard's.
    pub fn streaming(&self) -> bool {
        matches!(self.phase, Phase::Streaming)
    }

    /// One step: read what the socket holds and answer it. Returns the socket once
    /// the stream is to start.
    pub fn step(&mut self, state: &State, cfg: &Config, now_ms: u64) -> Option<Handover> {
        match self.advance(state, cfg, now_ms) {
            Ok(handover) => handover,
            Err(why) => {
                crate::serverlog::log(
                    crate::serverlog::Level::Warning,
                    &format!(
                        "MASTER <-> REPLICA sync with {}:{}: {why}",
                        self.host, self.port
                    ),
                );
                self.fail(state, now_ms);
                None
            }
        }
    }

    fn fail(&mut self, state: &State, now_ms: u64) {
        self.socket = None;
        self.input.clear();
        self.rdb = Vec::new();
        self.phase = Phase::Idle;
        self.retry_at_ms = now_ms + RETRY_MS;
        self.set_link(state, LinkState::Connect, now_ms);
    }

    fn advance(
        &mut self,
        state: &State,
        cfg: &Config,
        now_ms: u64,
    ) -> Result<Option<Handover>, String> {
        match self.phase {
            Phase::Streaming => return Ok(None),
            Phase::Idle => {
                if now_ms >= self.retry_at_ms {
                    self.connect(state, now_ms)?;
                }
                return Ok(None);
            }
            Phase::Connecting => {
                if !self.connected()? {
                    return self.check_timeout(cfg, now_ms).map(|_| None);
                }
                crate::serverlog::log(
                    crate::serverlog::Level::Notice,
                    "Non blocking connect for SYNC fired the event.",
                );
                self.set_link(state, LinkState::Handshake, now_ms);
                self.send(&[b"PING"])?;
                self.phase = Phase::Reply(Expect::Pong);
                self.last_read_ms = now_ms;
            }
            Phase::Loading { id } => {
                if !state.all_loaded(id) {
                    return Ok(None);
                }
                state.drop_dataset();
                if state.load_failed(id) {
                    // The stream is not applied over a dataset that did not load:
                    // a full sync again.
                    self.resume = None;
                    return Err("the MASTER's RDB did not load on every shard".into());
                }
                return Ok(self.hand_over());
            }
            _ => {}
        }
        if self.read(now_ms)? == 0 {
            self.check_timeout(cfg, now_ms)?;
        }
        self.parse(state, cfg, now_ms)
    }

    fn check_timeout(&self, cfg: &Config, now_ms: u64) -> Result<(), String> {
        let timeout_ms = cfg.param("repl-timeout").parse::<u64>().unwrap_or(60) * 1000;
        if now_ms.saturating_sub(self.last_read_ms) > timeout_ms {
            return Err("Timeout connecting to the MASTER...".into());
        }
        Ok(())
    }

    fn connect(&mut self, state: &State, now_ms: u64) -> Result<(), String> {
        crate::serverlog::log(
            crate::serverlog::Level::Notice,
            &format!("Connecting to MASTER {}:{}", self.host, self.port),
        );
        self.set_link(state, LinkState::Connecting, now_ms);
        self.last_read_ms = now_ms;
        self.retry_at_ms = now_ms + RETRY_MS;
        let addr = (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|e| format!("Unable to connect to MASTER: {e}"))?
            .next()
            .ok_or("Unable to connect to MASTER: no address")?;
        let socket = crate::dial::start_connect(addr)
            .map_err(|e| format!("Unable to connect to MASTER: {e}"))?;
        self.socket = Some(socket);
        self.input.clear();
        self.phase = Phase::Connecting;
        Ok(())
    }

    /// The non-blocking connect finished (an error if it failed).
    fn connected(&self) -> Result<bool, String> {
        let Some(socket) = &self.socket else {
            return Ok(false);
        };
        crate::dial::connect_finished(socket)
            .map_err(|e| format!("Error condition on socket for SYNC: {e}"))
    }

    /// Send one command as a RESP array (handshake commands are a few dozen bytes:
    /// a fresh socket's buffer takes them whole).
    fn send(&mut self, args: &[&[u8]]) -> Result<(), String> {
        let socket = self.socket.as_mut().ok_or("no socket")?;
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for arg in args {
            out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            out.extend_from_slice(arg);
            out.extend_from_slice(b"\r\n");
        }
        socket
            .write_all(&out)
            .map_err(|e| format!("Error writing to MASTER: {e}"))
    }

    /// Read what the socket holds, up to [`READ_PER_STEP_BYTES`]; the bytes read.
    fn read(&mut self, now_ms: u64) -> Result<usize, String> {
        let socket = self.socket.as_mut().ok_or("no socket")?;
        let mut total = 0;
        self.chunk.resize(READ_CHUNK_BYTES, 0);
        while total < READ_PER_STEP_BYTES {
            match socket.read(&mut self.chunk) {
                Ok(0) => return Err("MASTER closed the connection".into()),
                Ok(n) => {
                    self.input.extend_from_slice(&self.chunk[..n]);
                    total += n;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("I/O error reading from MASTER: {e}")),
            }
        }
        if total > 0 {
            self.last_read_ms = now_ms;
        }
        Ok(total)
    }

    /// The next reply line, keep-alive newlines skipped (`None`: not whole yet).
    fn line(&mut self) -> Result<Option<String>, String> {
        let skip = self.input.iter().take_while(|&&b| b == b'\n').count();
        self.input.drain(..skip);
        let Some(end) = self.input.iter().position(|&b| b == b'\n') else {
            if self.input.len() > LINE_BYTES_MAX {
                return Err("Protocol error: reply line too long".into());
            }
            return Ok(None);
        };
        let line: Vec<u8> = self.input.drain(..=end).collect();
        let line = line.strip_suffix(b"\n").unwrap_or(&line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        Ok(Some(String::from_utf8_lossy(line).into_owned()))
    }

    fn parse(
        &mut self,
        state: &State,
        cfg: &Config,
        now_ms: u64,
    ) -> Result<Option<Handover>, String> {
        loop {
            match self.phase {
                Phase::Reply(expect) => {
                    let Some(line) = self.line()? else {
                        return Ok(None);
                    };
                    if let Some(handover) = self.answered(expect, &line, state, cfg, now_ms)? {
                        return Ok(Some(handover));
                    }
                }
                Phase::BulkHeader => {
                    let Some(line) = self.line()? else {
                        return Ok(None);
                    };
                    self.bulk_header(&line, state, now_ms)?;
                }
                Phase::Bulk { left } => {
                    let n = left.min(self.input.len());
                    self.rdb.extend(self.input.drain(..n));
                    state.transfer_read(self.link_shard(), n, now_ms);
                    if n < left {
                        self.phase = Phase::Bulk { left: left - n };
                        return Ok(None);
                    }
                    return Ok(self.rdb_done(state));
                }
                Phase::BulkEof { mark } => {
                    let from = self.rdb.len().saturating_sub(EOF_MARK_BYTES);
                    state.transfer_read(self.link_shard(), self.input.len(), now_ms);
                    self.rdb.append(&mut self.input);
                    let found = self.rdb[from..]
                        .windows(EOF_MARK_BYTES)
                        .position(|w| w == mark);
                    let Some(at) = found else {
                        return Ok(None);
                    };
                    let end = from + at;
                    self.input = self.rdb.split_off(end + EOF_MARK_BYTES);
                    self.rdb.truncate(end);
                    return Ok(self.rdb_done(state));
                }
                _ => return Ok(None),
            }
        }
    }

    /// A handshake reply arrived: send the next command.
    fn answered(
        &mut self,
        expect: Expect,
        line: &str,
        state: &State,
        cfg: &Config,
        now_ms: u64,
    ) -> Result<Option<Handover>, String> {
        let error = line.starts_with('-');
        match expect {
            Expect::Pong => {
                // -NOAUTH is expected before AUTH; any other error is not.
                if error && !line.starts_with("-NOAUTH") && !line.starts_with("-NOPERM") {
                    return Err(format!("Error reply to PING from master: '{line}'"));
                }
                let auth = cfg.param("masterauth");
                if auth.is_empty() {
                    return self.listening_port(cfg).map(|_| None);
                }
                let user = cfg.param("masteruser");
                let (user, auth) = (user.to_string(), auth.to_string());
                match user.is_empty() {
                    true => self.send(&[b"AUTH", auth.as_bytes()])?,
                    false => self.send(&[b"AUTH", user.as_bytes(), auth.as_bytes()])?,
                }
                self.phase = Phase::Reply(Expect::Auth);
            }
            Expect::Auth => {
                if error {
                    return Err(format!("Unable to AUTH to MASTER: {line}"));
                }
                self.listening_port(cfg)?;
            }
            Expect::Port => {
                // Redis ignores an error here: old primaries lack the option.
                let announced = cfg.param("replica-announce-ip");
                if announced.is_empty() {
                    return self.capabilities().map(|_| None);
                }
                let ip = announced.to_string();
                self.send(&[b"REPLCONF", b"ip-address", ip.as_bytes()])?;
                self.phase = Phase::Reply(Expect::Ip);
            }
            Expect::Ip => {
                if error {
                    crate::serverlog::log(
                        crate::serverlog::Level::Notice,
                        &format!(
                            "(Non critical) Master does not understand REPLCONF ip-address: {line}"
                        ),
                    );
                }
                self.capabilities()?;
            }
            Expect::Capa => {
                if let Some((shard, shards)) = self.shard.filter(|_| !self.plain) {
                    let value = format!("{shard}/{shards}");
                    self.send(&[b"REPLCONF", b"ruvio-shard", value.as_bytes()])?;
                    self.phase = Phase::Reply(Expect::Shard);
                    return Ok(None);
                }
                self.psync()?;
            }
            Expect::Shard => {
                if line.contains("this connection is on shard") {
                    // SO_REUSEPORT put the connection on another shard of the
                    // primary: connect again until one lands on this one.
                    self.socket = None;
                    self.input.clear();
                    self.phase = Phase::Idle;
                    self.retry_at_ms = now_ms;
                    return Ok(None);
                }
                if error {
                    state.shard_links.refuse(self.epoch);
                    return Err(format!(
                        "the MASTER refused a shard link ({line}): the single stream"
                    ));
                }
                self.psync()?;
            }
            Expect::Psync => return self.psync_reply(line, state, now_ms),
        }
        Ok(None)
    }

    /// `PSYNC <replid> <offset>` (`? -1` for a full sync).
    fn psync(&mut self) -> Result<(), String> {
        let (replid, offset) = match &self.resume {
            Some((id, offset)) => (id.clone(), offset.to_string()),
            None => ("?".to_string(), "-1".to_string()),
        };
        crate::serverlog::log(
            crate::serverlog::Level::Notice,
            &format!("Trying a partial resynchronization (request {replid}:{offset})."),
        );
        match self.failover {
            true => self.send(&[b"PSYNC", replid.as_bytes(), offset.as_bytes(), b"FAILOVER"])?,
            false => self.send(&[b"PSYNC", replid.as_bytes(), offset.as_bytes()])?,
        }
        self.phase = Phase::Reply(Expect::Psync);
        Ok(())
    }

    /// `REPLCONF listening-port`: `replica-announce-port` when set (a replica
    /// behind NAT or a container's port map), else its own port, as Redis.
    fn listening_port(&mut self, cfg: &Config) -> Result<(), String> {
        let port = match cfg.param("replica-announce-port") {
            "" | "0" => cfg.port.to_string(),
            announced => announced.to_string(),
        };
        self.send(&[b"REPLCONF", b"listening-port", port.as_bytes()])?;
        self.phase = Phase::Reply(Expect::Port);
        Ok(())
    }

    fn capabilities(&mut self) -> Result<(), String> {
        self.send(&[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"])?;
        self.phase = Phase::Reply(Expect::Capa);
        Ok(())
    }

    /// `+FULLRESYNC <replid> <offset>` or `+CONTINUE [<replid>]`.
    fn psync_reply(
        &mut self,
        line: &str,
        state: &State,
        now_ms: u64,
    ) -> Result<Option<Handover>, String> {
        let mut words = line.split(' ');
        let accepted = matches!(words.clone().next(), Some("+FULLRESYNC" | "+CONTINUE"));
        if std::mem::take(&mut self.failover) {
            match accepted {
                true => state.end_failover(None),
                false => state.end_failover(Some("Failover target rejected psync request")),
            }
        }
        match words.next() {
            Some("+FULLRESYNC") => {
                let replid = words.next().filter(|id| id.len() == 40);
                let offset = words.next().and_then(|o| o.parse::<u64>().ok());
                let (Some(replid), Some(offset)) = (replid, offset) else {
                    return Err(format!("Bad +FULLRESYNC reply: '{line}'"));
                };
                crate::serverlog::log(
                    crate::serverlog::Level::Notice,
                    &format!("Full resync from master: {replid}:{offset}"),
                );
                state.forget_recovered();
                match self.shard {
                    Some((shard, _)) => {
                        state.shard_link_full_sync(shard, replid, offset);
                        state.transfer_started(Some(shard), None, now_ms);
                    }
                    None => {
                        state.full_sync(replid, offset);
                        state.transfer_started(None, None, now_ms);
                    }
                }
                self.set_link(state, LinkState::Sync, now_ms);
                self.phase = Phase::BulkHeader;
                Ok(None)
            }
            Some("+CONTINUE") => {
                crate::serverlog::log(
                    crate::serverlog::Level::Notice,
                    "Successful partial resynchronization with master.",
                );
                let replid = words.next().filter(|id| id.len() == 40);
                state.forget_recovered();
                match self.shard {
                    Some((shard, _)) => state.shard_link_continued(shard, replid),
                    None => state.continued(replid),
                }
                self.continued = true;
                Ok(self.hand_over())
            }
            _ => Err(format!("Unexpected reply to PSYNC from master: {line}")),
        }
    }

    fn bulk_header(&mut self, line: &str, state: &State, now_ms: u64) -> Result<(), String> {
        if line.starts_with('-') {
            return Err(format!("MASTER aborted replication with an error: {line}"));
        }
        let Some(rest) = line.strip_prefix('$') else {
            return Err(format!(
                "Bad protocol from MASTER, the first byte is not '$': {line}"
            ));
        };
        self.rdb = Vec::new();
        if let Some(mark) = rest.strip_prefix("EOF:") {
            let mark: [u8; EOF_MARK_BYTES] = mark
                .as_bytes()
                .try_into()
                .map_err(|_| format!("Bad EOF mark from MASTER: {line}"))?;
            crate::serverlog::log(
                crate::serverlog::Level::Notice,
                "MASTER <-> REPLICA sync: receiving streamed RDB from master with EOF to disk",
            );
            self.phase = Phase::BulkEof { mark };
            state.transfer_started(self.link_shard(), Some(0), now_ms);
            return Ok(());
        }
        let len: usize = rest
            .parse()
            .map_err(|_| format!("Bad RDB length from MASTER: {line}"))?;
        crate::serverlog::log(
            crate::serverlog::Level::Notice,
            &format!("MASTER <-> REPLICA sync: receiving {len} bytes from master to disk"),
        );
        self.phase = Phase::Bulk { left: len };
        state.transfer_started(self.link_shard(), Some(len as i64), now_ms);
        Ok(())
    }

    /// The RDB is in: every shard loads it, then the stream starts.
    fn rdb_done(&mut self, state: &State) -> Option<Handover> {
        crate::serverlog::log(
            crate::serverlog::Level::Notice,
            "MASTER <-> REPLICA sync: Loading DB in memory",
        );
        if self.shard.is_some() {
            // A shard link's RDB is its shard's alone: it goes with the socket.
            self.continued = false;
            let rdb = std::mem::take(&mut self.rdb);
            let mut handover = self.hand_over()?;
            handover.rdb = Some(rdb);
            return Some(handover);
        }
        let id = state.publish_dataset(std::mem::take(&mut self.rdb));
        self.continued = false;
        self.phase = Phase::Loading { id };
        None
    }

    fn hand_over(&mut self) -> Option<Handover> {
        let socket = self.socket.take()?;
        self.chunk = Vec::new();
        self.phase = Phase::Streaming;
        Some(Handover {
            socket,
            leftover: std::mem::take(&mut self.input),
            continued: self.continued,
            rdb: None,
        })
    }
}
