//! Multibulk requests: what is accepted, each protocol error with its exact text,
//! and the `need_bytes` hints. Expected behaviour is Redis 7.0's
//! `processMultibulkBuffer`.

mod common;

use common::{argv, error, error_with, need, need_with, owned, parse, Outcome};
use ruvio_resp::{CommandParser, Limits, Parsed, ProtocolError, INLINE_BYTES_MAX};

#[test]
fn parses_a_command_and_reports_bytes_used() {
    let (args, consumed) = argv(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\nEXTRA");
    assert_eq!(args, owned(&[b"SET", b"k", b"value"]));
    assert_eq!(consumed, 31);
}

#[test]
fn pipelined_commands_come_one_at_a_time() {
    let stream = b"*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$1\r\na\r\n";
    let mut parser = CommandParser::new();
    let limits = Limits::default();
    let mut rest = &stream[..];
    let mut seen = Vec::new();
    while !rest.is_empty() {
        match parser.parse(rest, &limits).unwrap() {
            Parsed::Complete { args, consumed } => {
                seen.push(args.iter().map(<[u8]>::to_vec).collect::<Vec<_>>());
                rest = &rest[consumed..];
            }
            Parsed::Incomplete { .. } => panic!("stream is whole"),
        }
    }
    assert_eq!(seen, vec![owned(&[b"PING"]), owned(&[b"GET", b"a"])]);
}

#[test]
fn binary_payloads_are_kept_verbatim() {
    let (args, _) = argv(b"*2\r\n$3\r\nSET\r\n$6\r\n\r\n\0\xff*$\r\n");
    assert_eq!(args, owned(&[b"SET", b"\r\n\0\xff*$"]));
}

#[test]
fn empty_argument_is_allowed() {
    let (args, consumed) = argv(b"*2\r\n$4\r\nECHO\r\n$0\r\n\r\n");
    assert_eq!(args, owned(&[b"ECHO", b""]));
    assert_eq!(consumed, 20);
}

#[test]
fn zero_or_negative_count_is_an_empty_command() {
    for (input, used) in [(&b"*0\r\n"[..], 4), (b"*-1\r\n", 5), (b"*-100\r\nPING", 7)] {
        let (args, consumed) = argv(input);
        assert!(args.is_empty(), "{input:?}");
        assert_eq!(consumed, used, "{input:?}");
    }
}

#[test]
fn redis_skips_the_byte_after_a_header_cr_unchecked() {
    // Redis only checks that a byte follows `\r`; the two bytes after a payload are
    // skipped without looking at them either.
    let (args, consumed) = argv(b"*1\rX$3\rYfooAB");
    assert_eq!(args, owned(&[b"foo"]));
    assert_eq!(consumed, 13);
}

#[test]
fn invalid_multibulk_length() {
    for input in [
        &b"*\r\n"[..],
        b"*abc\r\n",
        b"*01\r\n",
        b"*+1\r\n",
        b"*-0\r\n",
        b"* 1\r\n",
        b"*1 \r\n",
        b"*2147483648\r\n",
        b"*99999999999999999999\r\n",
        b"*100000000000000000000\r\n",
        // The first `\r` ends the count line, whatever came before it.
        b"*1\n$3\r\nfoo\r\n",
        // NUL is an ordinary byte here (Redis would stall on it).
        b"*1\0\r\n",
    ] {
        assert_eq!(
            error(input),
            ProtocolError::InvalidMultibulkLength,
            "{input:?}"
        );
    }
    assert_eq!(
        ProtocolError::InvalidMultibulkLength.message(),
        "ERR Protocol error: invalid multibulk length"
    );
}

#[test]
fn multibulk_count_limit_is_enforced_before_reading_elements() {
    let limits = Limits {
        multibulk_len_max: 3,
        ..Limits::default()
    };
    assert_eq!(
        error_with(b"*4\r\n", &limits),
        ProtocolError::InvalidMultibulkLength
    );
    assert_eq!(need_with(b"*3\r\n", &limits), 6);
    // Redis's INT_MAX bound holds even with a larger configured limit.
    let limits = Limits {
        multibulk_len_max: usize::MAX,
        ..Limits::default()
    };
    assert_eq!(need_with(b"*2147483647\r\n", &limits), 15);
    assert_eq!(
        error_with(b"*2147483648\r\n", &limits),
        ProtocolError::InvalidMultibulkLength
    );
    // The default is 2^30.
    assert_eq!(need(b"*1073741824\r\n"), 15);
    assert_eq!(
        error(b"*1073741825\r\n"),
        ProtocolError::InvalidMultibulkLength
    );
}

#[test]
fn expected_dollar() {
    assert_eq!(error(b"*1\r\nX\r\n"), ProtocolError::ExpectedDollar(b'X'));
    assert_eq!(
        error(b"*2\r\n$1\r\na\r\n:1\r\n"),
        ProtocolError::ExpectedDollar(b':')
    );
    assert_eq!(
        ProtocolError::ExpectedDollar(b'X').message(),
        "ERR Protocol error: expected '$', got 'X'"
    );
    // An empty header line: the "got" byte is the CR, printed as a space the way
    // Redis's addReplyErrorFormat keeps replies on one line.
    assert_eq!(error(b"*1\r\n\r\n"), ProtocolError::ExpectedDollar(b'\r'));
    assert_eq!(
        ProtocolError::ExpectedDollar(b'\r').message(),
        "ERR Protocol error: expected '$', got ' '"
    );
    assert_eq!(
        ProtocolError::ExpectedDollar(b'\n').message(),
        "ERR Protocol error: expected '$', got ' '"
    );
    // A NUL ends the C string Redis builds the message in.
    assert_eq!(
        ProtocolError::ExpectedDollar(0).message(),
        "ERR Protocol error: expected '$', got '"
    );
}

#[test]
fn expected_dollar_waits_for_the_whole_header_line() {
    // Redis judges the first byte only once the line's `\r` and one more byte arrived.
    assert_eq!(need(b"*1\r\nX"), 7);
    assert_eq!(need(b"*1\r\nX\r"), 7);
}

#[test]
fn error_reply_bytes_are_exact() {
    let mut out = Vec::new();
    ProtocolError::ExpectedDollar(0xff).write_reply(&mut out);
    assert_eq!(out, b"-ERR Protocol error: expected '$', got '\xff'\r\n");
    let mut out = Vec::new();
    ProtocolError::TooBigInlineRequest.write_reply(&mut out);
    assert_eq!(out, b"-ERR Protocol error: too big inline request\r\n");
    assert_eq!(
        ProtocolError::ExpectedDollar(0xff).to_string(),
        "ERR Protocol error: expected '$', got '\u{fffd}'"
    );
}

#[test]
fn invalid_bulk_length() {
    for input in [
        &b"*1\r\n$\r\n"[..],
        b"*1\r\n$-1\r\n",
        b"*1\r\n$-5\r\n",
        b"*1\r\n$abc\r\n",
        b"*1\r\n$03\r\n",
        b"*1\r\n$+3\r\n",
        b"*1\r\n$3 \r\n",
        b"*1\r\n$536870913\r\n",
        b"*1\r\n$9223372036854775808\r\n",
        b"*2\r\n$1\r\na\r\n$x\r\n",
    ] {
        assert_eq!(error(input), ProtocolError::InvalidBulkLength, "{input:?}");
    }
    assert_eq!(
        ProtocolError::InvalidBulkLength.message(),
        "ERR Protocol error: invalid bulk length"
    );
    // Exactly proto-max-bulk-len is fine.
    assert_eq!(need(b"*1\r\n$536870912\r\n"), 16 + 536_870_912 + 2);
}

#[test]
fn bulk_limit_is_configurable() {
    let limits = Limits {
        bulk_bytes_max: 10,
        ..Limits::default()
    };
    assert_eq!(
        error_with(b"*1\r\n$11\r\n", &limits),
        ProtocolError::InvalidBulkLength
    );
    assert_eq!(need_with(b"*1\r\n$10\r\n", &limits), 9 + 12);
}

#[test]
fn a_bulk_ending_past_4_gib_is_refused_not_wrapped() {
    // Spans are u32; with the bulk limit lifted, the payload may end exactly at
    // u32::MAX but not one byte later.
    let limits = Limits {
        bulk_bytes_max: usize::MAX,
        ..Limits::default()
    };
    let header = b"*1\r\n$4294967278\r\n";
    assert_eq!(header.len(), 17);
    assert_eq!(need_with(header, &limits), 4_294_967_295 + 2);
    assert_eq!(
        error_with(b"*1\r\n$4294967279\r\n", &limits),
        ProtocolError::InvalidBulkLength
    );
    assert_eq!(
        error_with(b"*1\r\n$9223372036854775807\r\n", &limits),
        ProtocolError::InvalidBulkLength
    );
}

#[test]
fn too_big_mbulk_count_string() {
    let mut input = vec![b'*'];
    input.resize(INLINE_BYTES_MAX, b'1');
    assert_eq!(need(&input), INLINE_BYTES_MAX + 1);
    input.push(b'1');
    assert_eq!(error(&input), ProtocolError::TooBigMbulkCountString);
    assert_eq!(
        ProtocolError::TooBigMbulkCountString.message(),
        "ERR Protocol error: too big mbulk count string"
    );
    // A line end beyond the window does not change the answer.
    input.extend_from_slice(b"\r\n");
    assert_eq!(error(&input), ProtocolError::TooBigMbulkCountString);
}

#[test]
fn too_big_bulk_count_string() {
    let mut input = b"*1\r\n$".to_vec();
    input.resize(4 + INLINE_BYTES_MAX, b'1');
    assert_eq!(need(&input), 4 + INLINE_BYTES_MAX + 1);
    input.push(b'1');
    assert_eq!(error(&input), ProtocolError::TooBigBulkCountString);
    assert_eq!(
        ProtocolError::TooBigBulkCountString.message(),
        "ERR Protocol error: too big bulk count string"
    );
}

#[test]
fn header_size_limit_follows_inline_bytes_max() {
    let limits = Limits {
        inline_bytes_max: 4,
        ..Limits::default()
    };
    assert_eq!(need_with(b"*123", &limits), 5);
    assert_eq!(
        error_with(b"*1234", &limits),
        ProtocolError::TooBigMbulkCountString
    );
    // `\r` as the last byte of the window still counts; it needs one byte more.
    assert_eq!(need_with(b"*123\r", &limits), 6);
    assert_eq!(need_with(b"*123\r\n", &limits), 8);
    assert_eq!(
        error_with(b"*1\r\n$12345", &limits),
        ProtocolError::TooBigBulkCountString
    );
}

#[test]
fn need_bytes_hints() {
    assert_eq!(need(b""), 1);
    assert_eq!(need(b"*"), 3);
    assert_eq!(need(b"*1"), 4);
    assert_eq!(need(b"*1\r"), 4);
    assert_eq!(need(b"*1\r\n"), 6);
    assert_eq!(need(b"*1\r\n$"), 7);
    assert_eq!(need(b"*1\r\n$10"), 9);
    assert_eq!(need(b"*1\r\n$10\r"), 9);
    // Header parsed: wait for the whole payload and its CRLF.
    assert_eq!(need(b"*1\r\n$10\r\n"), 9 + 10 + 2);
    assert_eq!(need(b"*1\r\n$10\r\n0123456789\r"), 21);
    let mut big = b"*2\r\n$3\r\nSET\r\n$100000000\r\n".to_vec();
    let start = big.len();
    big.resize(start + 65536, b'v');
    assert_eq!(need(&big), start + 100_000_000 + 2);
}

#[test]
fn incomplete_never_claims_a_finished_command() {
    let whole = b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n";
    for cut in 0..whole.len() {
        match parse(&whole[..cut]) {
            Outcome::Incomplete { need_bytes } => {
                assert!(need_bytes > cut && need_bytes <= whole.len(), "cut {cut}");
            }
            other => panic!("cut {cut}: {other:?}"),
        }
    }
    assert_eq!(argv(whole).1, whole.len());
}

#[test]
fn parser_is_reusable_after_an_error() {
    let mut parser = CommandParser::new();
    let limits = Limits::default();
    assert!(parser.parse(b"*x\r\n", &limits).is_err());
    match parser.parse(b"*1\r\n$4\r\nPING\r\n", &limits).unwrap() {
        Parsed::Complete { args, consumed } => {
            assert_eq!(args.len(), 1);
            assert_eq!(args.get(0), b"PING");
            assert_eq!(consumed, 14);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn many_arguments_then_few_reuse_the_parser() {
    let big: Vec<Vec<u8>> = (0..10_000).map(|i| i.to_string().into_bytes()).collect();
    let encoded = common::encode_multibulk(&big);
    let mut parser = CommandParser::new();
    let limits = Limits::default();
    match parser.parse(&encoded, &limits).unwrap() {
        Parsed::Complete { args, consumed } => {
            assert_eq!(consumed, encoded.len());
            assert_eq!(args.len(), 10_000);
            assert_eq!(args.get(9_999), b"9999");
            assert_eq!(args.iter().len(), 10_000);
        }
        other => panic!("{other:?}"),
    }
    match parser.parse(b"*1\r\n$4\r\nPING\r\n", &limits).unwrap() {
        Parsed::Complete { args, .. } => assert_eq!(args.get(0), b"PING"),
        other => panic!("{other:?}"),
    }
}
