//! Raw protocol tests: exact request bytes in, exact reply bytes out, over a plain
//! TcpStream. Every expected reply here was checked against redis-server 7.0
//! (`RUVIO_TEST_TARGET=redis cargo test -p ruvio-server --test protocol`).

mod common;

use common::*;
use std::io::Write;
use std::time::Duration;

/// Sends `request` on a fresh connection, expects exactly `reply`, then the close.
fn expect_error_then_close(server: &Server, request: &[u8], reply: &[u8]) {
    let mut conn = server.raw();
    conn.roundtrip(request, reply);
    conn.expect_closed();
}

/// The server still accepts connections and answers.
fn assert_alive(server: &Server) {
    let mut conn = server.raw();
    conn.roundtrip(b"PING\r\n", b"+PONG\r\n");
}

#[test]
fn ping_and_echo() {
    let server = Server::forward(1);
    let mut conn = server.raw();
    conn.roundtrip(b"*1\r\n$4\r\nPING\r\n", b"+PONG\r\n");
    conn.roundtrip(b"*1\r\n$4\r\nping\r\n", b"+PONG\r\n");
    conn.roundtrip(b"*2\r\n$4\r\nPING\r\n$5\r\nhello\r\n", b"$5\r\nhello\r\n");
    conn.roundtrip(b"*2\r\n$4\r\nECHO\r\n$5\r\nhello\r\n", b"$5\r\nhello\r\n");
    conn.roundtrip(b"*2\r\n$4\r\nECHO\r\n$0\r\n\r\n", b"$0\r\n\r\n");
    // Binary-safe: NUL, CR and LF inside a bulk string.
    conn.roundtrip(
        b"*2\r\n$4\r\nEcHo\r\n$5\r\na\0\r\nb\r\n",
        b"$5\r\na\0\r\nb\r\n",
    );
    conn.roundtrip(
        b"*3\r\n$4\r\nPING\r\n$1\r\na\r\n$1\r\nb\r\n",
        b"-ERR wrong number of arguments for 'ping' command\r\n",
    );
}

#[test]
fn inline_commands() {
    let server = Server::forward(1);
    let mut conn = server.raw();
    conn.roundtrip(b"PING\r\n", b"+PONG\r\n");
    conn.roundtrip(b"ping\r\nPiNg\r\n", b"+PONG\r\n+PONG\r\n");
    // A bare LF also ends an inline command; empty lines are ignored.
    conn.roundtrip(b"PING\n", b"+PONG\r\n");
    conn.roundtrip(b"\r\n\r\nPING\r\n", b"+PONG\r\n");
    conn.roundtrip(b"PING hello\r\n", b"$5\r\nhello\r\n");
    conn.roundtrip(b"SET   k   v  \r\nGET k\r\n", b"+OK\r\n$1\r\nv\r\n");
    // Double quotes group words and understand escapes; single quotes are literal.
    conn.roundtrip(b"SET k \"a b\"\r\nGET k\r\n", b"+OK\r\n$3\r\na b\r\n");
    conn.roundtrip(b"ECHO \"a\\x41\\n\"\r\n", b"$3\r\naA\n\r\n");
    conn.roundtrip(b"ECHO \"a\\tb\\r\\x00\"\r\n", b"$5\r\na\tb\r\x00\r\n");
    conn.roundtrip(b"ECHO '\\x41'\r\n", b"$4\r\n\\x41\r\n");
    conn.roundtrip(b"ECHO 'x y'\r\n", b"$3\r\nx y\r\n");
    conn.roundtrip(b"ECHO \"\"\r\n", b"$0\r\n\r\n");
    // Inline and multibulk requests mix freely in one stream.
    conn.roundtrip(
        b"SET n 10\r\n*2\r\n$4\r\nINCR\r\n$1\r\nn\r\nGET n\r\n",
        b"+OK\r\n:11\r\n$2\r\n11\r\n",
    );
}

/// Empty lines between commands of other shards, as redis-cli --pipe sends
/// before its closing ECHO, and during a CLIENT PAUSE: skipped, as by Redis
/// (an empty line after forwarded writes closed the connection with
/// "-ERR internal error": the WAIT check read its missing name).
#[test]
fn empty_lines_are_skipped_while_replies_are_outstanding_or_clients_paused() {
    let server = Server::forward(2);
    let mut conn = server.raw();
    let mut request = Vec::new();
    let mut reply = Vec::new();
    for i in 0..20 {
        request.extend_from_slice(format!("SET empty:{i} {i}\r\n\r\n").as_bytes());
        reply.extend_from_slice(b"+OK\r\n");
    }
    request.extend_from_slice(b"\r\n*2\r\n$4\r\nECHO\r\n$3\r\nend\r\n");
    reply.extend_from_slice(b"$3\r\nend\r\n");
    conn.roundtrip(&request, &reply);
    let mut admin = server.raw();
    admin.roundtrip(b"CLIENT PAUSE 200 WRITE\r\n", b"+OK\r\n");
    conn.roundtrip(b"\r\nPING\r\n\r\n", b"+PONG\r\n");
    assert_alive(&server);
}

/// Error lines that quote a client's bytes, as Redis's `addReplyErrorFormat`:
/// up to a NUL (`%s`), CR and LF at the end dropped, the others spaces
/// (REPLCONF put them in its error as they came, found by the dispatch fuzzer).
#[test]
fn error_lines_quoting_client_bytes_stay_one_line() {
    let server = Server::forward(2);
    let mut conn = server.raw();
    conn.roundtrip(
        b"*3\r\n$8\r\nREPLCONF\r\n$2\r\n2\r\r\n$1\r\n1\r\n",
        b"-ERR Unrecognized REPLCONF option: 2\r\n",
    );
    conn.roundtrip(
        b"*3\r\n$8\r\nREPLCONF\r\n$5\r\na\nb\r\n\r\n$1\r\n1\r\n",
        b"-ERR Unrecognized REPLCONF option: a b\r\n",
    );
    conn.roundtrip(
        b"*3\r\n$8\r\nREPLCONF\r\n$3\r\na\0b\r\n$1\r\n1\r\n",
        b"-ERR Unrecognized REPLCONF option: a\r\n",
    );
    conn.roundtrip(
        b"*4\r\n$6\r\nEXPIRE\r\n$1\r\nk\r\n$2\r\n10\r\n$3\r\nNX\n\r\n",
        b"-ERR Unsupported option NX\r\n",
    );
}

/// A name or argument in an error line ends at a NUL (Redis prints it with
/// `%s`). A NUL in a request line itself is not followed: Redis looks for the
/// line's end with `strchr` and so waits for more bytes until the line is too
/// big; Ruvio answers the line (a TLS client on the plain port, whose hello holds
/// NULs, gets its protocol error at once instead of hanging).
#[test]
fn error_lines_quote_names_up_to_a_nul() {
    let server = Server::forward(1);
    let mut conn = server.raw();
    conn.roundtrip(
        b"*2\r\n$4\r\nPI\0G\r\n$3\r\na\0b\r\n",
        b"-ERR unknown command 'PI', with args beginning with: 'a' \r\n",
    );
    conn.roundtrip(
        b"*4\r\n$6\r\nCLIENT\r\n$4\r\nLIST\r\n$4\r\nTYPE\r\n$3\r\nZ\0W\r\n",
        b"-ERR Unknown client type 'Z'\r\n",
    );
    conn.roundtrip(
        b"*4\r\n$6\r\nCONFIG\r\n$3\r\nSET\r\n$3\r\nZ\0W\r\n$1\r\n1\r\n",
        b"-ERR Unknown option or number of arguments for CONFIG SET - 'Z'\r\n",
    );
    conn.roundtrip(
        b"*3\r\n$5\r\nHELLO\r\n$1\r\n3\r\n$3\r\nZ\0W\r\n",
        b"-ERR Syntax error in HELLO option 'Z'\r\n",
    );
}

/// 100 commands of several kinds in one write; the replies come back in order.
fn pipeline_100(server: &Server) {
    let mut request = Vec::new();
    let mut expected = Vec::new();
    let mut counter = 0;
    for i in 0..100 {
        match i % 5 {
            0 => {
                request.extend(encode(&[
                    b"SET".to_vec(),
                    format!("key:{i}").into_bytes(),
                    format!("value-{i}").into_bytes(),
                ]));
                expected.extend_from_slice(b"+OK\r\n");
            }
            1 => {
                let value = format!("value-{}", i - 1);
                request.extend(encode(&[
                    b"GET".to_vec(),
                    format!("key:{}", i - 1).into_bytes(),
                ]));
                expected.extend(format!("${}\r\n{value}\r\n", value.len()).into_bytes());
            }
            2 => {
                counter += 1;
                request.extend(encode(&["INCR", "counter"]));
                expected.extend(format!(":{counter}\r\n").into_bytes());
            }
            3 => {
                request.extend_from_slice(b"PING\r\n");
                expected.extend_from_slice(b"+PONG\r\n");
            }
            _ => {
                request.extend(encode(&[
                    b"GET".to_vec(),
                    format!("missing:{i}").into_bytes(),
                ]));
                expected.extend_from_slice(b"$-1\r\n");
            }
        }
    }
    let mut conn = server.raw();
    conn.roundtrip(&request, &expected);
    // And a multi-key read across all of them afterwards.
    let keys: Vec<String> = (0..100).step_by(5).map(|i| format!("key:{i}")).collect();
    let mut mget = vec!["MGET".to_string()];
    mget.extend(keys.iter().cloned());
    let mut reply = format!("*{}\r\n", keys.len()).into_bytes();
    for i in (0..100).step_by(5) {
        let value = format!("value-{i}");
        reply.extend(format!("${}\r\n{value}\r\n", value.len()).into_bytes());
    }
    conn.roundtrip(&encode(&mget), &reply);
}

#[test]
fn pipeline_of_100_commands_one_shard() {
    pipeline_100(&Server::forward(1));
}

#[test]
fn pipeline_of_100_commands_two_shards_forward() {
    let server = Server::forward(2);
    pipeline_100(&server);
    // The keys of the pipeline really did land on both shards.
    let shards: std::collections::HashSet<usize> = (0..100)
        .step_by(5)
        .map(|i| shard_of_key(&format!("key:{i}"), 2))
        .collect();
    assert_eq!(shards.len(), 2);
}

/// A pipeline much deeper than any read buffer, written from another thread so that
/// neither side's socket buffer can deadlock the test.
#[test]
fn deep_pipeline_10000_commands() {
    let server = Server::forward(2);
    let total: u32 = 10_000;
    // Alternate two keys that land on different shards.
    let keys = [key_on_shard("deep", 0, 2), key_on_shard("deep", 1, 2)];
    let mut request = Vec::new();
    let mut expected = Vec::new();
    for i in 1..=total {
        let key = &keys[(i % 2) as usize];
        request.extend(encode(&["INCR", key.as_str()]));
        expected.extend(format!(":{}\r\n", i.div_ceil(2)).into_bytes());
    }
    let mut conn = server.raw();
    let mut writer = conn.stream().try_clone().expect("clone stream");
    let handle = std::thread::spawn(move || writer.write_all(&request).expect("write pipeline"));
    conn.expect(&expected);
    handle.join().expect("writer thread");
}

/// Requests split at every byte still parse (the server waits for the rest).
#[test]
fn request_split_byte_by_byte() {
    let server = Server::forward(1);
    let mut conn = server.raw();
    let request = b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nva\r\nl\r\nGET key\r\n*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n";
    for byte in request.iter() {
        conn.send(std::slice::from_ref(byte));
        std::thread::sleep(Duration::from_micros(200));
    }
    conn.expect(b"+OK\r\n$5\r\nva\r\nl\r\n$5\r\nva\r\nl\r\n");
    // Half a request gets no reply until the rest arrives.
    conn.send(b"*2\r\n$4\r\nECHO\r\n$3\r\nab");
    conn.expect_silence(Duration::from_millis(200));
    conn.roundtrip(b"c\r\n", b"$3\r\nabc\r\n");
}

#[test]
fn protocol_errors_reply_then_close() {
    let server = Server::forward(1);
    let cases: &[(&[u8], &[u8])] = &[
        (
            b"*abc\r\n",
            b"-ERR Protocol error: invalid multibulk length\r\n",
        ),
        (
            b"*2147483648\r\n",
            b"-ERR Protocol error: invalid multibulk length\r\n",
        ),
        (
            b"*1\r\n$abc\r\n",
            b"-ERR Protocol error: invalid bulk length\r\n",
        ),
        (
            b"*1\r\n$-5\r\n",
            b"-ERR Protocol error: invalid bulk length\r\n",
        ),
        // proto-max-bulk-len is 512 MB: one byte more is refused before any allocation.
        (
            b"*1\r\n$536870913\r\n",
            b"-ERR Protocol error: invalid bulk length\r\n",
        ),
        (
            b"*2\r\n$3\r\nGET\r\n$600000000\r\n",
            b"-ERR Protocol error: invalid bulk length\r\n",
        ),
        (
            b"*1\r\nPING\r\n",
            b"-ERR Protocol error: expected '$', got 'P'\r\n",
        ),
        (
            b"SET \"a b\r\n",
            b"-ERR Protocol error: unbalanced quotes in request\r\n",
        ),
        (
            b"ECHO 'abc\r\n",
            b"-ERR Protocol error: unbalanced quotes in request\r\n",
        ),
        (
            b"ECHO \"a\"b\r\n",
            b"-ERR Protocol error: unbalanced quotes in request\r\n",
        ),
        // Replies to the requests before the bad one are still delivered, in order.
        (
            b"PING\r\n*abc\r\nPING\r\n",
            b"+PONG\r\n-ERR Protocol error: invalid multibulk length\r\n",
        ),
        (
            b"PING\r\nECHO hi\r\n*1\r\n$abc\r\nPING\r\n",
            b"+PONG\r\n$2\r\nhi\r\n-ERR Protocol error: invalid bulk length\r\n",
        ),
    ];
    for (request, reply) in cases {
        expect_error_then_close(&server, request, reply);
    }
    assert_alive(&server);
}

#[test]
fn oversized_inline_and_count_lines_are_refused() {
    let server = Server::forward(1);
    // Inline requests and multibulk headers are capped at 64 KB without a newline:
    // 64 KB waits for more, one byte more is refused. (Exactly one byte over, so the
    // server has read everything sent and closes cleanly rather than with a reset.)
    const INLINE_MAX: usize = 64 * 1024;
    for (first, error) in [
        (
            b'x',
            &b"-ERR Protocol error: too big inline request\r\n"[..],
        ),
        (b'*', b"-ERR Protocol error: too big mbulk count string\r\n"),
    ] {
        let mut request = vec![first];
        request.extend(std::iter::repeat_n(b'1', INLINE_MAX - 1));
        let mut conn = server.raw();
        conn.send(&request);
        conn.expect_silence(Duration::from_millis(200));
        conn.roundtrip(b"1", error);
        conn.expect_closed();
    }
    assert_alive(&server);
}

#[test]
fn incomplete_requests_wait_instead_of_failing() {
    let server = Server::forward(1);
    // A large but legal bulk length, or a large multibulk count, just waits for data.
    for request in [
        &b"*1\r\n$536870912\r\n"[..],
        b"*1048577\r\n",
        b"*2\r\n$4\r\nPING\r\n",
    ] {
        let mut conn = server.raw();
        conn.send(request);
        conn.expect_silence(Duration::from_millis(200));
    }
    assert_alive(&server);
}

#[test]
fn unknown_command_error_text() {
    let server = Server::forward(1);
    let mut conn = server.raw();
    conn.roundtrip(
        b"*3\r\n$3\r\nfoo\r\n$1\r\na\r\n$1\r\nb\r\n",
        b"-ERR unknown command 'foo', with args beginning with: 'a' 'b' \r\n",
    );
    conn.roundtrip(
        b"foo a b\r\n",
        b"-ERR unknown command 'foo', with args beginning with: 'a' 'b' \r\n",
    );
    conn.roundtrip(
        b"foo\r\n",
        b"-ERR unknown command 'foo', with args beginning with: \r\n",
    );
    // The name keeps the client's case.
    conn.roundtrip(
        b"FOO bar\r\n",
        b"-ERR unknown command 'FOO', with args beginning with: 'bar' \r\n",
    );
    conn.roundtrip(
        b"*1\r\n$0\r\n\r\n",
        b"-ERR unknown command '', with args beginning with: \r\n",
    );
    // The argument list is cut at 128 characters, the name too.
    let mut request = b"foo ".to_vec();
    request.extend(vec![b'x'; 200]);
    request.extend_from_slice(b"\r\n");
    let mut reply = b"-ERR unknown command 'foo', with args beginning with: '".to_vec();
    reply.extend(vec![b'x'; 128]);
    reply.extend_from_slice(b"' \r\n");
    conn.roundtrip(&request, &reply);
    let (a, b, c) = ("a".repeat(60), "b".repeat(60), "c".repeat(60));
    conn.roundtrip(
        format!("foo {a} {b} {c}\r\n").as_bytes(),
        format!("-ERR unknown command 'foo', with args beginning with: '{a}' '{b}' 'cc' \r\n")
            .as_bytes(),
    );
    conn.roundtrip(
        format!("{} a\r\n", "f".repeat(200)).as_bytes(),
        format!(
            "-ERR unknown command '{}', with args beginning with: 'a' \r\n",
            "f".repeat(128)
        )
        .as_bytes(),
    );
    // Newlines in the echoed arguments become spaces: an error line cannot hold them.
    conn.roundtrip(
        b"*2\r\n$3\r\nfoo\r\n$3\r\na\nb\r\n",
        b"-ERR unknown command 'foo', with args beginning with: 'a b' \r\n",
    );
    conn.roundtrip(
        b"CONFIG FOO\r\n",
        b"-ERR unknown subcommand 'FOO'. Try CONFIG HELP.\r\n",
    );
    conn.roundtrip(b"PING\r\n", b"+PONG\r\n");
}

#[test]
fn wrong_arity_error_text() {
    let server = Server::forward(1);
    let mut conn = server.raw();
    conn.roundtrip(
        b"*1\r\n$3\r\nget\r\n",
        b"-ERR wrong number of arguments for 'get' command\r\n",
    );
    conn.roundtrip(
        b"GET a b\r\n",
        b"-ERR wrong number of arguments for 'get' command\r\n",
    );
    // The command's own (lower case) name, whatever case the client used.
    conn.roundtrip(
        b"SET k\r\n",
        b"-ERR wrong number of arguments for 'set' command\r\n",
    );
    conn.roundtrip(
        b"SET\r\n",
        b"-ERR wrong number of arguments for 'set' command\r\n",
    );
    conn.roundtrip(
        b"mget\r\n",
        b"-ERR wrong number of arguments for 'mget' command\r\n",
    );
    conn.roundtrip(
        b"MSET a\r\n",
        b"-ERR wrong number of arguments for 'mset' command\r\n",
    );
    conn.roundtrip(
        b"MSET a 1 b\r\n",
        b"-ERR wrong number of arguments for 'mset' command\r\n",
    );
    conn.roundtrip(
        b"ECHO\r\n",
        b"-ERR wrong number of arguments for 'echo' command\r\n",
    );
    conn.roundtrip(
        b"ECHO a b\r\n",
        b"-ERR wrong number of arguments for 'echo' command\r\n",
    );
    conn.roundtrip(
        b"CONFIG\r\n",
        b"-ERR wrong number of arguments for 'config' command\r\n",
    );
    conn.roundtrip(
        b"CONFIG GET\r\n",
        b"-ERR wrong number of arguments for 'config|get' command\r\n",
    );
    conn.roundtrip(b"PING\r\n", b"+PONG\r\n");
}

#[test]
fn hello_3_map_and_resp3_types() {
    let server = Server::forward(1);
    let mut conn = server.raw();
    conn.send(b"HELLO 3\r\n");
    let hello = conn.read_reply();
    assert!(
        hello.starts_with(b"%7\r\n"),
        "HELLO 3 is a map of 7: {}",
        show(&hello)
    );
    let value = decode(&hello);
    let Value::Map(pairs) = &value else {
        unreachable!()
    };
    let keys: Vec<String> = pairs.iter().map(|(k, _)| k.text()).collect();
    assert_eq!(
        keys,
        ["server", "version", "proto", "id", "mode", "role", "modules"]
    );
    assert_eq!(value.get("proto"), Some(&Value::Int(3)));
    assert_eq!(
        value.get("role").map(Value::text).as_deref(),
        Some("master")
    );
    assert_eq!(
        value.get("mode").map(Value::text).as_deref(),
        Some("standalone")
    );
    assert_eq!(value.get("modules"), Some(&Value::Array(vec![])));
    assert!(matches!(value.get("id"), Some(Value::Int(_))));
    assert_eq!(
        value.get("version").unwrap().text(),
        ruvio_engine::REDIS_VERSION
    );

    // RESP3 null for a missing key, alone and inside an array.
    conn.roundtrip(b"GET missing\r\n", b"_\r\n");
    conn.roundtrip(
        b"SET a 1\r\nMGET a missing\r\n",
        b"+OK\r\n*2\r\n$1\r\n1\r\n_\r\n",
    );
    // Maps for CONFIG GET.
    conn.roundtrip(
        b"CONFIG GET appendonly\r\n",
        b"%1\r\n$10\r\nappendonly\r\n$2\r\nno\r\n",
    );
    // Integers and simple strings do not change.
    conn.roundtrip(b"EXISTS a\r\nTTL a\r\nPING\r\n", b":1\r\n:-1\r\n+PONG\r\n");

    // Back to RESP2: an array of 14, and the RESP2 null bulk.
    conn.send(b"HELLO 2\r\n");
    let hello2 = conn.read_reply();
    assert!(
        hello2.starts_with(b"*14\r\n"),
        "HELLO 2 is a flat array: {}",
        show(&hello2)
    );
    assert_eq!(decode(&hello2).get("proto"), Some(&Value::Int(2)));
    conn.roundtrip(b"GET missing\r\n", b"$-1\r\n");
    conn.roundtrip(b"MGET a missing\r\n", b"*2\r\n$1\r\n1\r\n$-1\r\n");
    conn.roundtrip(
        b"CONFIG GET appendonly\r\n",
        b"*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n",
    );
    // HELLO without a version keeps the current protocol.
    conn.send(b"HELLO\r\n");
    assert!(conn.read_reply().starts_with(b"*14\r\n"));
}

/// `DEBUG PROTOCOL <type>` is Redis's own probe of the RESP3 encodings; within the
/// strings and keyspace commands it is the only way to get a double.
#[test]
fn resp3_double_map_set_via_debug_protocol() {
    let server = Server::forward(1);
    let mut conn = server.raw();
    conn.send(b"HELLO 3\r\n");
    conn.read_reply();
    conn.roundtrip(b"DEBUG PROTOCOL double\r\n", b",3.141\r\n");
    conn.roundtrip(b"DEBUG PROTOCOL null\r\n", b"_\r\n");
    conn.roundtrip(
        b"DEBUG PROTOCOL map\r\n",
        b"%3\r\n:0\r\n#f\r\n:1\r\n#t\r\n:2\r\n#f\r\n",
    );
    conn.roundtrip(b"DEBUG PROTOCOL set\r\n", b"~3\r\n:0\r\n:1\r\n:2\r\n");
    conn.send(b"HELLO 2\r\n");
    conn.read_reply();
    conn.roundtrip(b"DEBUG PROTOCOL double\r\n", b"$5\r\n3.141\r\n");
    conn.roundtrip(b"DEBUG PROTOCOL null\r\n", b"$-1\r\n");
    conn.roundtrip(
        b"DEBUG PROTOCOL map\r\n",
        b"*6\r\n:0\r\n:0\r\n:1\r\n:1\r\n:2\r\n:0\r\n",
    );
}

#[test]
fn hello_options_and_errors() {
    let server = Server::forward(1);
    let mut conn = server.raw();
    conn.roundtrip(b"HELLO 4\r\n", b"-NOPROTO unsupported protocol version\r\n");
    conn.roundtrip(b"HELLO 1\r\n", b"-NOPROTO unsupported protocol version\r\n");
    conn.roundtrip(
        b"HELLO x\r\n",
        b"-ERR Protocol version is not an integer or out of range\r\n",
    );
    conn.roundtrip(
        b"HELLO 3 foo\r\n",
        b"-ERR Syntax error in HELLO option 'foo'\r\n",
    );
    conn.roundtrip(
        b"HELLO 3 AUTH default\r\n",
        b"-ERR Syntax error in HELLO option 'AUTH'\r\n",
    );
    conn.roundtrip(
        b"HELLO 3 SETNAME \"a b\"\r\n",
        b"-ERR Client names cannot contain spaces, newlines or special characters.\r\n",
    );
    // Failed HELLOs leave the connection on RESP2.
    conn.roundtrip(b"GET missing\r\n", b"$-1\r\n");
    // No password is configured: the default user accepts any password in HELLO AUTH.
    conn.send(b"HELLO 3 AUTH default secret SETNAME conn1\r\n");
    assert!(conn.read_reply().starts_with(b"%7\r\n"));
    conn.roundtrip(b"CLIENT GETNAME\r\n", b"$5\r\nconn1\r\n");
    conn.roundtrip(
        b"AUTH pw\r\n",
        b"-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n",
    );
    conn.roundtrip(
        b"AUTH u pw\r\n",
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    );
    // RESET goes back to RESP2 and drops the name.
    conn.roundtrip(b"RESET\r\n", b"+RESET\r\n");
    conn.roundtrip(b"GET missing\r\nCLIENT GETNAME\r\n", b"$-1\r\n$-1\r\n");
}

#[test]
fn connection_survives_garbage_but_valid_requests() {
    let server = Server::forward(2);
    let mut conn = server.raw();
    // Empty multibulks are skipped silently.
    conn.roundtrip(b"*0\r\n*-1\r\nPING\r\n", b"+PONG\r\n");
    // A command with a thousand arguments.
    let mut args = vec!["GET".to_string()];
    args.extend((0..1000).map(|i| format!("k{i}")));
    conn.roundtrip(
        &encode(&args),
        b"-ERR wrong number of arguments for 'get' command\r\n",
    );
    // Keys and values with every byte value.
    let key: Vec<u8> = (0..=255u8).collect();
    let value: Vec<u8> = (0..=255u8).rev().cycle().take(1000).collect();
    conn.roundtrip(&encode(&[b"SET".as_slice(), &key, &value]), b"+OK\r\n");
    let mut expected = format!("${}\r\n", value.len()).into_bytes();
    expected.extend_from_slice(&value);
    expected.extend_from_slice(b"\r\n");
    conn.roundtrip(&encode(&[b"GET".as_slice(), &key]), &expected);
    // Syntax and range errors keep the connection.
    conn.roundtrip(b"SET k v EX\r\n", b"-ERR syntax error\r\n");
    conn.roundtrip(
        b"SET k v EX 0\r\n",
        b"-ERR invalid expire time in 'set' command\r\n",
    );
    conn.roundtrip(
        b"SET k v EX abc\r\n",
        b"-ERR value is not an integer or out of range\r\n",
    );
    conn.roundtrip(b"SET k v NX XX\r\n", b"-ERR syntax error\r\n");
    conn.roundtrip(
        b"SET k v\r\nINCR k\r\n",
        b"+OK\r\n-ERR value is not an integer or out of range\r\n",
    );
    conn.roundtrip(b"SELECT 16\r\n", b"-ERR DB index is out of range\r\n");
    conn.roundtrip(b"SELECT -1\r\n", b"-ERR DB index is out of range\r\n");
    conn.roundtrip(
        b"SELECT x\r\n",
        b"-ERR value is not an integer or out of range\r\n",
    );
    conn.roundtrip(
        b"SELECT 15\r\nGET k\r\nSELECT 0\r\nGET k\r\n",
        b"+OK\r\n$-1\r\n+OK\r\n$1\r\nv\r\n",
    );
    // A 4 MB value, sent in one write and echoed back.
    let big = vec![b'z'; 4 << 20];
    conn.roundtrip(&encode(&[b"SET".as_slice(), b"big", &big]), b"+OK\r\n");
    conn.roundtrip(b"STRLEN big\r\n", format!(":{}\r\n", big.len()).as_bytes());
    let mut expected = format!("${}\r\n", big.len()).into_bytes();
    expected.extend_from_slice(&big);
    expected.extend_from_slice(b"\r\n");
    conn.roundtrip(b"GET big\r\n", &expected);
    conn.roundtrip(b"PING\r\n", b"+PONG\r\n");
}

#[test]
fn quit_replies_ok_then_closes() {
    let server = Server::forward(1);
    let mut conn = server.raw();
    conn.roundtrip(b"QUIT\r\nPING\r\n", b"+OK\r\n");
    conn.expect_closed();
    assert_alive(&server);
}

#[test]
fn many_connections_at_once() {
    let server = Server::forward(2);
    let mut conns: Vec<RawConn> = (0..50).map(|_| server.raw()).collect();
    for (i, conn) in conns.iter_mut().enumerate() {
        conn.send(format!("SET c{i} {i}\r\n").as_bytes());
    }
    for (i, conn) in conns.iter_mut().enumerate() {
        conn.expect(b"+OK\r\n");
        conn.roundtrip(
            format!("GET c{i}\r\n").as_bytes(),
            format!("${}\r\n{i}\r\n", i.to_string().len()).as_bytes(),
        );
    }
    // Dropping clients abruptly, with requests in flight, is harmless.
    for conn in conns.iter_mut().take(10) {
        conn.send(b"SET x y\r\nGET x\r\n");
    }
    drop(conns);
    assert_alive(&server);
}

#[test]
fn client_reply_skip_hides_rejected_commands_too() {
    let server = Server::forward(2);
    let mut c = server.raw();
    c.roundtrip(
        b"CLIENT REPLY SKIP\r\nFOO a\r\nGET\r\nCLIENT REPLY SKIP\r\nGET\r\nPING\r\n",
        b"-ERR wrong number of arguments for 'get' command\r\n+PONG\r\n",
    );
}

#[test]
fn client_reply_off_hides_replies_answered_by_another_shard() {
    let server = Server::forward(2);
    let mut c = server.raw();
    let (a, b) = (key_on_shard("off", 0, 2), key_on_shard("off", 1, 2));
    let mut request = encode(&["CLIENT", "REPLY", "OFF"]);
    for (key, value) in [(&a, "1"), (&b, "2")] {
        request.extend(encode(&["SET", key, value]));
        request.extend(encode(&["GET", key]));
    }
    request.extend(encode(&["MGET", &a, &b]));
    request.extend(encode(&["CLIENT", "REPLY", "ON"]));
    request.extend(encode(&["MGET", &a, &b]));
    c.roundtrip(&request, b"+OK\r\n*2\r\n$1\r\n1\r\n$1\r\n2\r\n");
}

/// Under `--durability always` a write waits behind a gate for its log group,
/// and one that logged nothing (a DEL of a missing key, a SET NX that did not
/// set) opens its gate at once, within the command: CLIENT REPLY OFF still
/// hides its reply, and a transaction's over keys of both shards (a replica's
/// master client is silenced the same way: its stream's replies reached the
/// primary, which dropped the link on them). Connections of both shards.
#[test]
fn client_reply_off_hides_replies_behind_gates_opened_at_once() {
    let dir = std::env::temp_dir().join(format!("ruvio-reply-off-always-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let args = ["--durability", "always", "--dir", dir.to_str().unwrap()];
    let server = Server::ruvio_with(PortMode::Forward, 2, &args);
    for round in 0..8 {
        let mut c = server.raw();
        let prefix = format!("gate{round}");
        let (a, b) = (key_on_shard(&prefix, 0, 2), key_on_shard(&prefix, 1, 2));
        let mut request = encode(&["CLIENT", "REPLY", "OFF"]);
        for key in [&a, &b] {
            request.extend(encode(&["DEL", key]));
            request.extend(encode(&["SET", key, "1"]));
            request.extend(encode(&["SET", key, "2", "NX"]));
            request.extend(encode(&["DEL", &format!("{key}:missing")]));
        }
        for command in [&["MULTI"][..], &["INCR", &a], &["DEL", &b], &["EXEC"]] {
            request.extend(encode(command));
        }
        request.extend(encode(&["CLIENT", "REPLY", "ON"]));
        request.extend(encode(&["MGET", &a, &b]));
        c.roundtrip(&request, b"+OK\r\n*2\r\n$1\r\n2\r\n$-1\r\n");
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn scan_cursor_naming_a_missing_shard_ends_the_scan() {
    let server = Server::forward(2);
    let mut c = server.raw();
    for cursor in ["18446744073709551615", "-1", "1099511627776000"] {
        c.roundtrip(&encode(&["SCAN", cursor]), b"*2\r\n$1\r\n0\r\n*0\r\n");
    }
    c.roundtrip(&encode(&["SCAN", "x"]), b"-ERR invalid cursor\r\n");
    c.roundtrip(&encode(&["PING"]), b"+PONG\r\n");
}

#[test]
fn client_reply_skip_hides_a_reply_completed_within_the_command() {
    // SCAN 0 runs on shard 0: on connections of shard 0 its held slot fills before
    // the command returns; on the others it fills later. Both must stay hidden.
    let server = Server::forward(2);
    for _ in 0..6 {
        let mut c = server.raw();
        c.roundtrip(
            b"CLIENT REPLY SKIP\r\nSCAN 0\r\nCLIENT REPLY SKIP\r\nDBSIZE\r\nPING\r\n",
            b"+PONG\r\n",
        );
    }
}
