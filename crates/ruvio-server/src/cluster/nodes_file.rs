//! The text a cluster node keeps of the cluster: `nodes.conf` (Redis's
//! `cluster-config-file`) and the lines of CLUSTER NODES, one format for both.
//!
//! ```text
//! <name> <ip>:<port>@<bus port>[,<hostname>[,<aux>=<value>...]] <flags> <master|-> <ping sent> <pong received> <config epoch> <connected|disconnected> <slots>...
//! vars currentEpoch <n> lastVoteEpoch <n>
//! ```
//!
//! Aux fields (Redis 7.2) follow the hostname, which is then written even when
//! empty (`ip:port@cport,,shard-id=...`). Ruvio keeps `shard-id` and writes it
//! in nodes.conf only: Redis 7.2 shows no aux field to clients (CLUSTER NODES,
//! REPLICAS), so [`NodeLine::shard_id`] is `None` in their lines. The aux fields
//! 7.2 and Valkey write beside it (`tls-port`, `tcp-port`, `nodename`, ...)
//! are read and dropped; a file without `shard-id` (Redis 7.0's) still loads.
//!
//! Slots are single numbers or `first-last` ranges, then the slots being moved:
//! `[slot->-<node>]` (migrating to it) and `[slot-<-<node>]` (importing from it).
//! Flags come in Redis's order (`myself,master,slave,fail?,fail,handshake,noaddr,
//! nofailover`; `noflags` when none). The `vars` line ends the file only.
//!
//! Why apart from the node table that will use it: a Ruvio node must read the
//! nodes.conf a redis-server wrote (a node replaced in place keeps its identity)
//! and write one redis-server reads, and `redis-cli --cluster` parses CLUSTER
//! NODES; the format is tested against real redis-server files
//! (tests/cluster_nodes_file.rs) apart from the membership logic.

use std::fmt::Write as _;

/// A node's flags in Redis's order of showing them.
const FLAG_NAMES: [&str; 8] = [
    "myself",
    "master",
    "slave",
    "fail?",
    "fail",
    "handshake",
    "noaddr",
    "nofailover",
];

/// One node's line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeLine {
    /// 40 hex characters.
    pub name: String,
    pub ip: String,
    pub port: u16,
    /// The plain client port when `port` is a TLS one (`tls-cluster`), else 0.
    /// Not written: Redis 7.0's nodes.conf does not keep it either, and it
    /// comes back with the node's next PING.
    pub pport: u16,
    pub cport: u16,
    /// `cluster-announce-hostname`, when the line carries one.
    pub hostname: Option<String>,
    /// The `shard-id` aux field: 40 hex characters, in nodes.conf's lines only.
    pub shard_id: Option<String>,
    /// Flags by name, in Redis's order (see [`FLAG_NAMES`]).
    pub flags: Vec<&'static str>,
    /// The master's name of a replica.
    pub master: Option<String>,
    /// Unix milliseconds of the PING in flight (0: none).
    pub ping_sent: u64,
    /// Unix milliseconds of the last PONG.
    pub pong_received: u64,
    pub config_epoch: u64,
    pub connected: bool,
    /// Served slots as inclusive ranges, in order.
    pub slots: Vec<(u16, u16)>,
    /// `[slot->-node]`: this (myself) node's slot being migrated to `node`.
    pub migrating: Vec<(u16, String)>,
    /// `[slot-<-node]`: a slot this (myself) node imports from `node`.
    pub importing: Vec<(u16, String)>,
}

impl NodeLine {
    pub fn has_flag(&self, flag: &str) -> bool {
        self.flags.contains(&flag)
    }
}

/// A whole nodes.conf: the lines, then the `vars` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodesFile {
    pub nodes: Vec<NodeLine>,
    pub current_epoch: u64,
    pub last_vote_epoch: u64,
}

/// A slot number of the 16384.
fn slot(text: &str) -> Result<u16, String> {
    match text.parse::<u16>() {
        Ok(n) if n < 16384 => Ok(n),
        _ => Err(format!("bad slot '{text}'")),
    }
}

fn number(text: &str, what: &str) -> Result<u64, String> {
    text.parse::<u64>()
        .map_err(|_| format!("bad {what} '{text}'"))
}

/// The flags field, checked against Redis's names and put in its order.
fn parse_flags(field: &str) -> Result<Vec<&'static str>, String> {
    if field == "noflags" {
        return Ok(Vec::new());
    }
    let mut flags = Vec::new();
    for name in field.split(',') {
        match FLAG_NAMES.iter().find(|f| **f == name) {
            Some(f) => flags.push(*f),
            None => return Err(format!("unknown node flag '{name}'")),
        }
    }
    flags.sort_by_key(|f| FLAG_NAMES.iter().position(|n| n == f));
    Ok(flags)
}

/// A node's address field, read.
struct Address {
    ip: String,
    port: u16,
    cport: u16,
    hostname: Option<String>,
    shard_id: Option<String>,
}

/// `ip:port@cport[,hostname[,aux=value...]]` (IPv6 addresses keep their
/// colons: the port is after the last one). An aux field without `=` is refused
/// (Redis's `clusterLoadConfig` too); one other than `shard-id` is skipped.
fn parse_address(field: &str) -> Result<Address, String> {
    let mut parts = field.split(',');
    let address = parts.next().unwrap_or_default();
    let hostname = parts.next().filter(|h| !h.is_empty()).map(str::to_string);
    let mut shard_id = None;
    for aux in parts {
        match aux.split_once('=') {
            Some(("shard-id", id)) if id.len() == 40 => shard_id = Some(id.to_string()),
            Some(("shard-id", _)) | None => return Err(format!("bad aux field '{aux}'")),
            Some(_) => {}
        }
    }
    let bad = || format!("bad node address '{field}'");
    let (ip_port, cport) = address.split_once('@').ok_or_else(bad)?;
    let (ip, port) = ip_port.rsplit_once(':').ok_or_else(bad)?;
    let port = port.parse::<u16>().map_err(|_| bad())?;
    let cport = cport.parse::<u16>().map_err(|_| bad())?;
    Ok(Address {
        ip: ip.to_string(),
        port,
        cport,
        hostname,
        shard_id,
    })
}

/// One slot field: `n`, `a-b`, `[n->-node]` or `[n-<-node]`.
fn parse_slot_field(line: &mut NodeLine, field: &str) -> Result<(), String> {
    if let Some(inner) = field.strip_prefix('[').and_then(|f| f.strip_suffix(']')) {
        if let Some((n, node)) = inner.split_once("->-") {
            line.migrating.push((slot(n)?, node.to_string()));
        } else if let Some((n, node)) = inner.split_once("-<-") {
            line.importing.push((slot(n)?, node.to_string()));
        } else {
            return Err(format!("bad slot move '{field}'"));
        }
        return Ok(());
    }
    let range = match field.split_once('-') {
        Some((a, b)) => (slot(a)?, slot(b)?),
        None => (slot(field)?, slot(field)?),
    };
    if range.0 > range.1 {
        return Err(format!("bad slot range '{field}'"));
    }
    line.slots.push(range);
    Ok(())
}

/// Reads one node line (nodes.conf's or CLUSTER NODES's).
pub fn parse_line(text: &str) -> Result<NodeLine, String> {
    let fields: Vec<&str> = text.split(' ').collect();
    if fields.len() < 8 {
        return Err(format!("node line of {} fields: '{text}'", fields.len()));
    }
    let address = parse_address(fields[1])?;
    let mut line = NodeLine {
        name: fields[0].to_string(),
        ip: address.ip,
        port: address.port,
        pport: 0,
        cport: address.cport,
        hostname: address.hostname,
        shard_id: address.shard_id,
        flags: parse_flags(fields[2])?,
        master: (fields[3] != "-").then(|| fields[3].to_string()),
        ping_sent: number(fields[4], "ping time")?,
        pong_received: number(fields[5], "pong time")?,
        config_epoch: number(fields[6], "config epoch")?,
        connected: match fields[7] {
            "connected" => true,
            "disconnected" => false,
            other => return Err(format!("bad link state '{other}'")),
        },
        slots: Vec::new(),
        migrating: Vec::new(),
        importing: Vec::new(),
    };
    for field in &fields[8..] {
        parse_slot_field(&mut line, field)?;
    }
    Ok(line)
}

/// Appends one node line, without its newline, as Redis writes it.
pub fn render_line(line: &NodeLine, out: &mut String) {
    let _ = write!(
        out,
        "{} {}:{}@{}",
        line.name, line.ip, line.port, line.cport
    );
    if let Some(host) = &line.hostname {
        let _ = write!(out, ",{host}");
    }
    if let Some(shard_id) = &line.shard_id {
        if line.hostname.is_none() {
            // The hostname's place stays, empty: aux fields come third.
            out.push(',');
        }
        let _ = write!(out, ",shard-id={shard_id}");
    }
    out.push(' ');
    if line.flags.is_empty() {
        out.push_str("noflags");
    } else {
        out.push_str(&line.flags.join(","));
    }
    let _ = write!(
        out,
        " {} {} {} {} {}",
        line.master.as_deref().unwrap_or("-"),
        line.ping_sent,
        line.pong_received,
        line.config_epoch,
        if line.connected {
            "connected"
        } else {
            "disconnected"
        }
    );
    for &(first, last) in &line.slots {
        if first == last {
            let _ = write!(out, " {first}");
        } else {
            let _ = write!(out, " {first}-{last}");
        }
    }
    for (n, node) in &line.migrating {
        let _ = write!(out, " [{n}->-{node}]");
    }
    for (n, node) in &line.importing {
        let _ = write!(out, " [{n}-<-{node}]");
    }
}

impl NodesFile {
    /// Reads a nodes.conf. Blank lines are skipped; the `vars` line may be
    /// anywhere (Redis writes it last).
    pub fn parse(text: &str) -> Result<NodesFile, String> {
        let mut file = NodesFile {
            nodes: Vec::new(),
            current_epoch: 0,
            last_vote_epoch: 0,
        };
        for raw in text.lines() {
            let raw = raw.trim_end_matches('\r');
            if raw.trim().is_empty() {
                continue;
            }
            if let Some(vars) = raw.strip_prefix("vars ") {
                let words: Vec<&str> = vars.split(' ').collect();
                for pair in words.chunks(2) {
                    match pair {
                        ["currentEpoch", n] => file.current_epoch = number(n, "currentEpoch")?,
                        ["lastVoteEpoch", n] => file.last_vote_epoch = number(n, "lastVoteEpoch")?,
                        // Redis skips variables it does not know.
                        [_, _] => {}
                        _ => return Err(format!("bad vars line '{raw}'")),
                    }
                }
                continue;
            }
            file.nodes.push(parse_line(raw)?);
        }
        if file.nodes.iter().filter(|n| n.has_flag("myself")).count() != 1 {
            return Err("a nodes.conf names exactly one node myself".into());
        }
        Ok(file)
    }

    /// The file's text, as Redis writes it: a line per node, then `vars`.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for node in &self.nodes {
            render_line(node, &mut out);
            out.push('\n');
        }
        let _ = writeln!(
            out,
            "vars currentEpoch {} lastVoteEpoch {}",
            self.current_epoch, self.last_vote_epoch
        );
        out
    }

    /// The node marked `myself`.
    pub fn myself(&self) -> Option<&NodeLine> {
        self.nodes.iter().find(|n| n.has_flag("myself"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "\
b72919408e8812c7d686013b7309a1fa53776178 127.0.0.1:31003@41003 master - 0 1796439909959 0 connected 10001-10002 12000
29811f39f05572ed68b93005e948832950e652c5 127.0.0.1:31001@41001 myself,master - 0 0 1 connected 0-5000 [100->-0e02e642fca7c197b20eb845a3541a467c386c6c]
0e02e642fca7c197b20eb845a3541a467c386c6c 127.0.0.1:31002@41002 slave,fail? 29811f39f05572ed68b93005e948832950e652c5 1796439909001 1796439908955 1 disconnected
d0e02e642fca7c197b20eb845a3541a467c386c6 ::1:31004@41004,host-4 noflags - 0 0 0 connected [7-<-29811f39f05572ed68b93005e948832950e652c5]
vars currentEpoch 1 lastVoteEpoch 0
";

    #[test]
    fn a_file_round_trips_byte_for_byte() {
        let file = NodesFile::parse(FILE).unwrap();
        assert_eq!(file.render(), FILE);
        let me = file.myself().unwrap();
        assert_eq!(me.port, 31001);
        assert_eq!(me.slots, vec![(0, 5000)]);
        assert_eq!(me.migrating[0].0, 100);
        let replica = &file.nodes[2];
        assert_eq!(replica.flags, vec!["slave", "fail?"]);
        assert!(!replica.connected);
        assert_eq!(replica.master.as_deref(), Some(me.name.as_str()));
        let v6 = &file.nodes[3];
        assert_eq!((v6.ip.as_str(), v6.port, v6.cport), ("::1", 31004, 41004));
        assert_eq!(v6.hostname.as_deref(), Some("host-4"));
        assert_eq!(v6.importing, vec![(7, me.name.clone())]);
        assert_eq!(file.current_epoch, 1);
    }

    #[test]
    fn a_shard_id_is_the_third_part_of_the_address_as_redis_7_2_writes_it() {
        let id = "9d1f5c4b8a7e6d5c4b3a29180706f5e4d3c2b1a0";
        let written = format!(
            "29811f39f05572ed68b93005e948832950e652c5 127.0.0.1:31001@41001,,tls-port=0,shard-id={id} myself,master - 0 0 1 connected 0-5000"
        );
        let line = parse_line(&written).unwrap();
        assert_eq!(line.shard_id.as_deref(), Some(id));
        assert_eq!(line.hostname, None);
        assert_eq!((line.port, line.cport), (31001, 41001));
        let mut again = String::new();
        render_line(&line, &mut again);
        assert_eq!(
            again,
            format!("29811f39f05572ed68b93005e948832950e652c5 127.0.0.1:31001@41001,,shard-id={id} myself,master - 0 0 1 connected 0-5000")
        );
        let mut hosted = line.clone();
        hosted.hostname = Some("host-1".into());
        let mut text = String::new();
        render_line(&hosted, &mut text);
        assert!(text.contains("@41001,host-1,shard-id=9d1f"), "{text}");
        assert_eq!(parse_line(&text).unwrap(), hosted);
        // Valkey's fields beside it are skipped.
        let valkey = "abc 127.0.0.1:1@2,,tls-port=0,shard-id=9d1f5c4b8a7e6d5c4b3a29180706f5e4d3c2b1a0,nodename=n1,availability-zone= master - 0 0 0 connected";
        assert_eq!(parse_line(valkey).unwrap().shard_id.as_deref(), Some(id));
    }

    #[test]
    fn bad_lines_are_refused_with_a_reason() {
        for bad in [
            "abc 127.0.0.1:1@2 master - 0 0 0 connected 16384",
            "abc 127.0.0.1:1@2 master - 0 0 0 connected 9-3",
            "abc 127.0.0.1:1 master - 0 0 0 connected",
            "abc 127.0.0.1:1@2 boss - 0 0 0 connected",
            "abc 127.0.0.1:1@2 master - 0 0 0 linked",
            "abc 127.0.0.1:1@2 master - x 0 0 connected",
            "abc 127.0.0.1:1@2 master - 0 0",
            "abc 127.0.0.1:1@2 master - 0 0 0 connected [5=>x]",
            "abc 127.0.0.1:1@2,,shard-id master - 0 0 0 connected",
            "abc 127.0.0.1:1@2,,shard-id=abc master - 0 0 0 connected",
        ] {
            assert!(parse_line(bad).is_err(), "{bad}");
        }
        assert!(NodesFile::parse("vars currentEpoch 1 lastVoteEpoch 0\n").is_err());
    }
}
