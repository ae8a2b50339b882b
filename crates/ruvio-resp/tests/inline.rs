//! Inline requests: line splitting, `sdssplitargs` quoting, and their errors.
//! Expected behaviour is Redis 7.0's `processInlineBuffer` and `sdssplitargs`.

mod common;

use common::{argv, error, error_with, need, need_with, owned};
use ruvio_resp::{Limits, ProtocolError, INLINE_BYTES_MAX};

#[test]
fn splits_on_spaces_and_ends_at_newline() {
    assert_eq!(argv(b"PING\r\n"), (owned(&[b"PING"]), 6));
    assert_eq!(argv(b"PING\n"), (owned(&[b"PING"]), 5));
    assert_eq!(
        argv(b"SET  k \t v\r\nGET k\r\n"),
        (owned(&[b"SET", b"k", b"v"]), 12)
    );
    assert_eq!(argv(b"  GET k  \r\n"), (owned(&[b"GET", b"k"]), 11));
}

#[test]
fn empty_lines_are_empty_commands() {
    assert_eq!(argv(b"\r\n"), (vec![], 2));
    assert_eq!(argv(b"\n"), (vec![], 1));
    assert_eq!(argv(b"   \t \r\n"), (vec![], 7));
}

#[test]
fn only_one_cr_before_the_newline_is_dropped() {
    // The remaining CR separates arguments like a space.
    assert_eq!(argv(b"GET a\r\r\n"), (owned(&[b"GET", b"a"]), 8));
    assert_eq!(argv(b"GET a\rb\r\n"), (owned(&[b"GET", b"a", b"b"]), 9));
}

#[test]
fn vertical_tab_and_form_feed_separate_only_between_tokens() {
    // isspace() skips them before a token, but only ' ', \t, \r, \n end a bare token.
    assert_eq!(argv(b"\x0bGET\x0c k\n").0, owned(&[b"GET\x0c", b"k"]));
}

#[test]
fn double_quotes_and_escapes() {
    assert_eq!(argv(b"SET \"a b\" c\r\n").0, owned(&[b"SET", b"a b", b"c"]));
    assert_eq!(
        argv(b"\"\\x41\\x4a\\x4A\\n\\r\\t\\b\\a\\\\\\\"\\q\"\n").0,
        owned(&[b"AJJ\n\r\t\x08\x07\\\"q"])
    );
    // \x needs two hex digits, else it is just an escaped 'x'.
    assert_eq!(argv(b"\"\\x4g\"\n").0, owned(&[b"x4g"]));
    assert_eq!(argv(b"\"\\x4\"\n").0, owned(&[b"x4"]));
    assert_eq!(argv(b"\"\\x00\\xff\"\n").0, owned(&[b"\0\xff"]));
    assert_eq!(argv(b"\"\"\n").0, owned(&[b""]));
    assert_eq!(argv(b"\"a\"\t\"b\"\n").0, owned(&[b"a", b"b"]));
}

#[test]
fn single_quotes_only_escape_the_quote() {
    assert_eq!(argv(b"'it\\'s' x\n").0, owned(&[b"it's", b"x"]));
    assert_eq!(argv(b"'a\\nb\\x41'\n").0, owned(&[b"a\\nb\\x41"]));
    assert_eq!(argv(b"'' x\n").0, owned(&[b"", b"x"]));
    assert_eq!(argv(b"'say \"hi\"'\n").0, owned(&[b"say \"hi\""]));
}

#[test]
fn quotes_may_open_inside_a_token() {
    assert_eq!(argv(b"a\"b c\" d\n").0, owned(&[b"ab c", b"d"]));
    assert_eq!(argv(b"key'x y'\n").0, owned(&[b"keyx y"]));
}

#[test]
fn nul_is_an_ordinary_byte() {
    assert_eq!(argv(b"GET a\0b\r\n").0, owned(&[b"GET", b"a\0b"]));
}

#[test]
fn unbalanced_quotes() {
    for input in [
        &b"SET \"a\r\n"[..],
        b"'a\n",
        b"\"a\"b\n",
        b"'a'b\n",
        b"x\"a\"b\n",
        b"\"a\\\"\n",
        b"\"a\\\n",
        b"'a\\'\n",
        b"\"\n",
    ] {
        assert_eq!(error(input), ProtocolError::UnbalancedQuotes, "{input:?}");
    }
    assert_eq!(
        ProtocolError::UnbalancedQuotes.message(),
        "ERR Protocol error: unbalanced quotes in request"
    );
}

#[test]
fn waits_for_the_newline() {
    assert_eq!(need(b"PING"), 5);
    assert_eq!(need(b"PING\r"), 6);
    assert_eq!(need(b"\"unclosed"), 10);
}

#[test]
fn too_big_inline_request() {
    let mut line = vec![b'a'; INLINE_BYTES_MAX];
    assert_eq!(need(&line), INLINE_BYTES_MAX + 1);
    line.push(b'a');
    assert_eq!(error(&line), ProtocolError::TooBigInlineRequest);
    assert_eq!(
        ProtocolError::TooBigInlineRequest.message(),
        "ERR Protocol error: too big inline request"
    );
    // A line longer than the limit is refused even when its newline is there.
    line.push(b'\n');
    assert_eq!(error(&line), ProtocolError::TooBigInlineRequest);
}

#[test]
fn a_line_at_the_limit_is_accepted() {
    let mut line = vec![b'a'; INLINE_BYTES_MAX];
    line.push(b'\n');
    let (args, consumed) = argv(&line);
    assert_eq!(consumed, INLINE_BYTES_MAX + 1);
    assert_eq!(args[0].len(), INLINE_BYTES_MAX);
}

#[test]
fn inline_limit_is_configurable() {
    let limits = Limits {
        inline_bytes_max: 4,
        ..Limits::default()
    };
    assert_eq!(need_with(b"PING", &limits), 5);
    assert_eq!(
        error_with(b"PINGS", &limits),
        ProtocolError::TooBigInlineRequest
    );
    assert_eq!(
        error_with(b"PINGS\n", &limits),
        ProtocolError::TooBigInlineRequest
    );
    assert!(matches!(
        common::parse_once(&mut Default::default(), b"PING\n", &limits),
        common::Outcome::Complete { consumed: 5, .. }
    ));
}

#[test]
fn anything_not_starting_with_star_is_inline() {
    assert_eq!(argv(b"$3\r\n").0, owned(&[b"$3"]));
    assert_eq!(argv(b" *1\r\n").0, owned(&[b"*1"]));
}
