//! Error lines that quote a client's bytes, compared with redis-server: options,
//! names and subcommands holding CR, LF or NUL. Redis builds these lines with
//! `addReplyErrorFormat` and `%s`, so an argument ends at a NUL, CR and LF at the
//! line's end are dropped and the others become spaces; a reply that kept them
//! would not be one RESP line (the dispatch fuzzer found REPLCONF's).

mod common;

use common::*;

/// Commands with one argument (`None`) where a client's bytes end up quoted in
/// an error line.
const COMMANDS: &[&[Option<&[u8]>]] = &[
    &[Some(b"SET"), Some(b"k"), Some(b"v"), None],
    &[Some(b"GETEX"), Some(b"k"), None],
    &[Some(b"ZADD"), Some(b"z"), None, Some(b"1"), Some(b"m")],
    &[Some(b"ZRANGE"), Some(b"z"), Some(b"0"), Some(b"1"), None],
    &[Some(b"SCAN"), Some(b"0"), None],
    &[Some(b"CLIENT"), Some(b"KILL"), None, Some(b"x")],
    &[Some(b"CLIENT"), Some(b"LIST"), Some(b"TYPE"), None],
    &[Some(b"CLIENT"), Some(b"NO-EVICT"), None],
    &[Some(b"CONFIG"), Some(b"GET"), None],
    &[Some(b"CONFIG"), Some(b"SET"), None, Some(b"1")],
    &[Some(b"OBJECT"), None, Some(b"k")],
    &[Some(b"DEBUG"), None],
    &[Some(b"XADD"), Some(b"s"), None, Some(b"f"), Some(b"v")],
    &[Some(b"XREAD"), None, Some(b"1")],
    &[Some(b"SORT"), Some(b"k"), None],
    &[Some(b"BITOP"), None, Some(b"d"), Some(b"k")],
    &[Some(b"HELLO"), Some(b"3"), None],
    &[Some(b"COMMAND"), None],
    &[Some(b"FUNCTION"), None],
    &[Some(b"SCRIPT"), None],
    &[Some(b"MEMORY"), None],
    &[Some(b"LATENCY"), None],
    &[Some(b"SLOWLOG"), None],
    &[Some(b"ACL"), None],
    &[Some(b"PUBSUB"), None],
    &[Some(b"XINFO"), None],
    &[Some(b"EXPIRE"), Some(b"k"), Some(b"10"), None],
    &[Some(b"REPLCONF"), None, Some(b"1")],
    &[Some(b"LPOS"), Some(b"l"), Some(b"x"), None, Some(b"1")],
    &[Some(b"INCRBYFLOAT"), Some(b"k"), None],
    &[
        Some(b"XGROUP"),
        Some(b"CREATE"),
        Some(b"s"),
        Some(b"g"),
        None,
    ],
    &[Some(b"SELECT"), None],
    &[None, Some(b"a\0b"), Some(b"c\r\nd")],
];

/// What the quoted argument holds.
const QUOTED: &[&[u8]] = &[b"X\r\nY", b"Z\0W", b"Q\r", b"R\n\n", b"\r\nS"];

#[test]
fn error_lines_quoting_client_bytes_match_redis() {
    if require_redis_server("error_lines_quoting_client_bytes_match_redis").is_none() {
        return;
    }
    let redis = Server::redis();
    let ruvio = Server::forward(2);
    let (mut expected, mut got) = (redis.raw(), ruvio.raw());
    for command in COMMANDS {
        for quoted in QUOTED {
            let args: Vec<&[u8]> = command.iter().map(|a| a.unwrap_or(quoted)).collect();
            let request = encode(&args);
            got.send(&request);
            expected.send(&request);
            assert_eq!(
                String::from_utf8_lossy(&got.read_reply()),
                String::from_utf8_lossy(&expected.read_reply()),
                "{:?}",
                String::from_utf8_lossy(&request)
            );
        }
    }
}
