//! Reply encoding: exact bytes in RESP2 and RESP3, as Redis 7.0 writes them.

use ruvio_resp::{Protocol, Reply};

/// Encode with `write` in both protocols: (RESP2 bytes, RESP3 bytes).
fn both(write: impl Fn(&mut Reply)) -> (Vec<u8>, Vec<u8>) {
    let mut resp2 = Vec::new();
    write(&mut Reply::new(&mut resp2, Protocol::Resp2));
    let mut resp3 = Vec::new();
    write(&mut Reply::new(&mut resp3, Protocol::Resp3));
    (resp2, resp3)
}

fn same(write: impl Fn(&mut Reply), expected: &[u8]) {
    let (resp2, resp3) = both(write);
    assert_eq!(resp2, expected, "RESP2");
    assert_eq!(resp3, expected, "RESP3");
}

fn differs(write: impl Fn(&mut Reply), resp2: &[u8], resp3: &[u8]) {
    let got = both(write);
    assert_eq!(got.0, resp2, "RESP2");
    assert_eq!(got.1, resp3, "RESP3");
}

#[test]
fn default_protocol_is_resp2() {
    assert_eq!(Protocol::default(), Protocol::Resp2);
}

#[test]
fn simple_strings_and_errors() {
    same(|r| r.ok(), b"+OK\r\n");
    same(|r| r.simple("PONG"), b"+PONG\r\n");
    same(|r| r.simple("a\r\nb"), b"+a  b\r\n");
    same(|r| r.error("ERR syntax error"), b"-ERR syntax error\r\n");
    same(|r| r.error("-WRONGTYPE x"), b"-WRONGTYPE x\r\n");
    same(|r| r.error("ERR bad\nline"), b"-ERR bad line\r\n");
    // As `addReplyErrorFormat`: CR and LF at the end dropped, the others spaces.
    same(
        |r| r.error_bytes(b"ERR Unknown node a\r\nb\r\r\n"),
        b"-ERR Unknown node a  b\r\n",
    );
    same(|r| r.error_bytes(b"\r\n"), b"-\r\n");
}

#[test]
fn integers() {
    same(|r| r.int(0), b":0\r\n");
    same(|r| r.int(-42), b":-42\r\n");
    same(|r| r.int(i64::MAX), b":9223372036854775807\r\n");
    same(|r| r.int(i64::MIN), b":-9223372036854775808\r\n");
}

#[test]
fn bulk_strings() {
    same(|r| r.bulk(b"hello"), b"$5\r\nhello\r\n");
    same(|r| r.bulk(b""), b"$0\r\n\r\n");
    same(|r| r.bulk(b"a\r\nb"), b"$4\r\na\r\nb\r\n");
    same(|r| r.bulk_int(-17), b"$3\r\n-17\r\n");
    same(|r| r.bulk_int(i64::MIN), b"$20\r\n-9223372036854775808\r\n");
}

#[test]
fn nulls() {
    differs(|r| r.null(), b"$-1\r\n", b"_\r\n");
    differs(|r| r.null_array(), b"*-1\r\n", b"_\r\n");
}

#[test]
fn aggregates() {
    same(|r| r.array(3), b"*3\r\n");
    same(|r| r.array(0), b"*0\r\n");
    differs(|r| r.map(2), b"*4\r\n", b"%2\r\n");
    differs(|r| r.set(5), b"*5\r\n", b"~5\r\n");
    differs(|r| r.push(3), b"*3\r\n", b">3\r\n");
}

#[test]
fn a_map_with_its_elements() {
    let write = |r: &mut Reply| {
        r.map(1);
        r.bulk(b"k");
        r.int(1);
    };
    differs(
        write,
        b"*2\r\n$1\r\nk\r\n:1\r\n",
        b"%1\r\n$1\r\nk\r\n:1\r\n",
    );
}

#[test]
fn doubles() {
    differs(|r| r.double(3.0), b"$1\r\n3\r\n", b",3\r\n");
    differs(
        |r| r.double(0.1),
        b"$19\r\n0.10000000000000001\r\n",
        b",0.10000000000000001\r\n",
    );
    differs(|r| r.double(1e20), b"$5\r\n1e+20\r\n", b",1e+20\r\n");
    differs(|r| r.double(f64::INFINITY), b"$3\r\ninf\r\n", b",inf\r\n");
    differs(
        |r| r.double(f64::NEG_INFINITY),
        b"$4\r\n-inf\r\n",
        b",-inf\r\n",
    );
    differs(|r| r.double(f64::NAN), b"$3\r\nnan\r\n", b",nan\r\n");
    differs(|r| r.double(-0.0), b"$2\r\n-0\r\n", b",-0\r\n");
}

#[test]
fn booleans() {
    differs(|r| r.boolean(true), b":1\r\n", b"#t\r\n");
    differs(|r| r.boolean(false), b":0\r\n", b"#f\r\n");
}

#[test]
fn verbatim_strings() {
    differs(
        |r| r.verbatim("txt", b"hello"),
        b"$5\r\nhello\r\n",
        b"=9\r\ntxt:hello\r\n",
    );
    differs(|r| r.verbatim("mkd", b""), b"$0\r\n\r\n", b"=4\r\nmkd:\r\n");
    // Redis pads a short format with spaces and uses only three bytes of a long one.
    differs(
        |r| r.verbatim("x", b"a"),
        b"$1\r\na\r\n",
        b"=5\r\nx  :a\r\n",
    );
    differs(
        |r| r.verbatim("text", b"a"),
        b"$1\r\na\r\n",
        b"=5\r\ntex:a\r\n",
    );
}

#[test]
fn raw_is_copied_and_replies_append() {
    let mut out = b"+OK\r\n".to_vec();
    let mut reply = Reply::new(&mut out, Protocol::Resp3);
    reply.raw(b":1\r\n");
    reply.int(2);
    assert_eq!(out, b"+OK\r\n:1\r\n:2\r\n");
}

/// The length written in place (under 1,000) and through the formatter (above)
/// gives the same bytes at every edge, for bulk strings and aggregate headers.
#[test]
fn lengths_at_every_digit_count() {
    let lengths = (0..1_100).chain([9_999, 10_000, 65_536, 1_000_000]);
    for n in lengths {
        let value = vec![b'x'; n];
        let mut expected = format!("${n}\r\n").into_bytes();
        expected.extend_from_slice(&value);
        expected.extend_from_slice(b"\r\n");
        same(|r| r.bulk(&value), &expected);
        let mut written = b"before".to_vec();
        ruvio_resp::put_bulk(&mut written, &value);
        assert_eq!(&written[6..], &expected[..], "put_bulk, length {n}");
        same(|r| r.array(n), format!("*{n}\r\n").as_bytes());
    }
}
