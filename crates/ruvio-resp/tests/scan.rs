//! Reading replies back (`reply_len`, `scan_reply`, `parse_int_reply`,
//! `array_body`): what the server uses to split and merge shard replies.

use proptest::prelude::*;
use ruvio_resp::{
    array_body, parse_int_reply, reply_len, scan_reply, MalformedReply, Protocol, Reply,
};

#[test]
fn lengths_of_every_reply_type() {
    let cases: &[&[u8]] = &[
        b"+OK\r\n",
        b"-ERR no\r\n",
        b":-12\r\n",
        b"$5\r\nhello\r\n",
        b"$0\r\n\r\n",
        b"$-1\r\n",
        b"*-1\r\n",
        b"*0\r\n",
        b"*2\r\n$1\r\na\r\n:1\r\n",
        b"_\r\n",
        b",1.5\r\n",
        b",inf\r\n",
        b"#t\r\n",
        b"(12345678901234567890\r\n",
        b"!3\r\nbad\r\n",
        b"=9\r\ntxt:hello\r\n",
        b"%1\r\n+k\r\n:1\r\n",
        b"~2\r\n:1\r\n:2\r\n",
        b">2\r\n+message\r\n$1\r\nx\r\n",
        b"|1\r\n+ttl\r\n:3\r\n$1\r\nv\r\n",
        b"*2\r\n*2\r\n:1\r\n%1\r\n+a\r\n_\r\n*0\r\n",
    ];
    for &reply in cases {
        let mut stream = reply.to_vec();
        stream.extend_from_slice(b"+NEXT\r\n");
        assert_eq!(
            reply_len(&stream),
            Some(reply.len()),
            "{:?}",
            String::from_utf8_lossy(reply)
        );
        // Every proper prefix is incomplete, not malformed.
        for cut in 0..reply.len() {
            assert_eq!(
                scan_reply(&reply[..cut]),
                Ok(None),
                "{reply:?} cut at {cut}"
            );
        }
    }
}

#[test]
fn malformed_replies() {
    let cases: &[&[u8]] = &[
        b"?x\r\n",
        b"+OK\n",
        b"+OK\rX",
        b":1.5\r\n",
        b":\r\n",
        b"$-2\r\n",
        b"$x\r\n",
        b"$3\r\nabcd\r\n",
        b"*-2\r\n",
        b"~-1\r\n",
        b"_x\r\n",
        b"#x\r\n",
        b"*1\r\n?\r\n",
        b"*9223372036854775807\r\n%9223372036854775807\r\n",
    ];
    for &reply in cases {
        assert_eq!(
            scan_reply(reply),
            Err(MalformedReply),
            "{:?}",
            String::from_utf8_lossy(reply)
        );
        assert_eq!(reply_len(reply), None);
    }
}

#[test]
fn deep_nesting_does_not_recurse() {
    let depth = 1_000_000;
    let mut reply = b"*1\r\n".repeat(depth);
    assert_eq!(scan_reply(&reply), Ok(None));
    reply.extend_from_slice(b":1\r\n");
    assert_eq!(reply_len(&reply), Some(depth * 4 + 4));
}

#[test]
fn integer_replies() {
    assert_eq!(parse_int_reply(b":0\r\n"), Some(0));
    assert_eq!(parse_int_reply(b":-7\r\n"), Some(-7));
    assert_eq!(parse_int_reply(b":9223372036854775807\r\n"), Some(i64::MAX));
    for bad in [
        &b":1"[..],
        b":1\r\n:2\r\n",
        b"+1\r\n",
        b"-ERR x\r\n",
        b":01\r\n",
        b"",
    ] {
        assert_eq!(parse_int_reply(bad), None, "{bad:?}");
    }
}

#[test]
fn array_bodies() {
    assert_eq!(array_body(b"*0\r\n"), Some((0, &b""[..])));
    assert_eq!(
        array_body(b"*2\r\n$1\r\na\r\n$-1\r\n"),
        Some((2, &b"$1\r\na\r\n$-1\r\n"[..]))
    );
    for bad in [
        &b"*-1\r\n"[..],
        b"*2\r\n$1\r\na\r\n",
        b"*1\r\n:1\r\n:2\r\n",
        b"~1\r\n:1\r\n",
        b":1\r\n",
        b"*x\r\n",
        b"",
    ] {
        assert_eq!(array_body(bad), None, "{bad:?}");
    }
}

#[test]
fn merging_shard_replies_like_mget_and_del() {
    // Two shards answered parts of an MGET; the client sees one array in order.
    let shard_a = b"*2\r\n$1\r\n1\r\n$-1\r\n";
    let shard_b = b"*1\r\n$1\r\n3\r\n";
    let (count_a, body_a) = array_body(shard_a).unwrap();
    let (count_b, body_b) = array_body(shard_b).unwrap();
    let mut out = Vec::new();
    let mut reply = Reply::new(&mut out, Protocol::Resp2);
    reply.array(count_a + count_b);
    reply.raw(body_a);
    reply.raw(body_b);
    assert_eq!(out, b"*3\r\n$1\r\n1\r\n$-1\r\n$1\r\n3\r\n");
    // DEL counts add up.
    let total: i64 = [&b":2\r\n"[..], b":0\r\n", b":1\r\n"]
        .iter()
        .map(|r| parse_int_reply(r).unwrap())
        .sum();
    assert_eq!(total, 3);
}

/// A reply tree to encode with `Reply`.
#[derive(Clone, Debug)]
enum Value {
    Int(i64),
    Bulk(Vec<u8>),
    Null,
    Double(f64),
    Bool(bool),
    Array(Vec<Value>),
    Map(Vec<(Value, Value)>),
}

fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        any::<i64>().prop_map(Value::Int),
        proptest::collection::vec(any::<u8>(), 0..20).prop_map(Value::Bulk),
        Just(Value::Null),
        any::<f64>().prop_map(Value::Double),
        any::<bool>().prop_map(Value::Bool),
    ];
    leaf.prop_recursive(4, 40, 5, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            proptest::collection::vec((inner.clone(), inner), 0..3).prop_map(Value::Map),
        ]
    })
}

fn encode(value: &Value, reply: &mut Reply) {
    match value {
        Value::Int(n) => reply.int(*n),
        Value::Bulk(b) => reply.bulk(b),
        Value::Null => reply.null(),
        Value::Double(d) => reply.double(*d),
        Value::Bool(b) => reply.boolean(*b),
        Value::Array(items) => {
            reply.array(items.len());
            items.iter().for_each(|v| encode(v, reply));
        }
        Value::Map(pairs) => {
            reply.map(pairs.len());
            for (k, v) in pairs {
                encode(k, reply);
                encode(v, reply);
            }
        }
    }
}

proptest! {
    /// Whatever the encoder writes, in either protocol, the reader finds its end,
    /// and no prefix looks complete.
    #[test]
    fn reader_agrees_with_encoder(values in proptest::collection::vec(value(), 1..4), resp3 in any::<bool>()) {
        let proto = if resp3 { Protocol::Resp3 } else { Protocol::Resp2 };
        let mut stream = Vec::new();
        let mut ends = Vec::new();
        for v in &values {
            encode(v, &mut Reply::new(&mut stream, proto));
            ends.push(stream.len());
        }
        let mut start = 0;
        for end in ends {
            prop_assert_eq!(reply_len(&stream[start..]), Some(end - start));
            for cut in start..end {
                prop_assert_eq!(scan_reply(&stream[start..cut]), Ok(None));
            }
            start = end;
        }
    }

    /// Arbitrary bytes never panic and a claimed length is within the buffer.
    #[test]
    fn reader_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(Some(n)) = scan_reply(&bytes) {
            prop_assert!(n <= bytes.len() && n > 0);
        }
        let _ = parse_int_reply(&bytes);
        if let Some((_, body)) = array_body(&bytes) {
            prop_assert!(body.len() < bytes.len());
        }
    }
}
