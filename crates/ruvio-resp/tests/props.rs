//! Property tests of the request parser: round trips, every split point of a
//! pipelined stream, arbitrary bytes, and the two promises the server relies on:
//! `need_bytes` is a true lower bound, and an answer never changes once given.

mod common;

use common::{encode_multibulk, parse_once, Argv, Outcome};
use proptest::prelude::*;
use ruvio_resp::{CommandParser, Limits, Parsed};

fn argv_strategy() -> impl Strategy<Value = Argv> {
    proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..8)
}

/// Bytes that steer the parser into its interesting paths, mixed with anything.
fn protocolish_bytes(max_len: usize) -> impl Strategy<Value = Vec<u8>> {
    let byte = prop_oneof![
        3 => proptest::sample::select(b"*$\r\n0123456789-+ \t\"'\\x".to_vec()),
        1 => any::<u8>(),
    ];
    proptest::collection::vec(byte, 0..max_len)
}

/// A token with no quote, backslash or whitespace: inline sends it verbatim.
fn safe_token() -> impl Strategy<Value = Vec<u8>> {
    proptest::string::string_regex("[A-Za-z0-9_.:{}-]{1,12}")
        .expect("valid regex")
        .prop_map(String::into_bytes)
}

/// Small limits so that random inputs reach every limit check.
fn small_limits() -> Limits {
    Limits {
        bulk_bytes_max: 40,
        multibulk_len_max: 6,
        inline_bytes_max: 24,
    }
}

/// Parse `buf` command by command: the commands found and what ended the walk.
fn drain(parser: &mut CommandParser, buf: &[u8], limits: &Limits) -> (Vec<Argv>, Outcome) {
    let mut commands = Vec::new();
    let mut offset = 0;
    loop {
        match parse_once(parser, &buf[offset..], limits) {
            Outcome::Complete { argv, consumed } => {
                assert!(consumed > 0 && consumed <= buf.len() - offset);
                commands.push(argv);
                offset += consumed;
            }
            Outcome::Incomplete { need_bytes } => {
                assert!(
                    need_bytes > buf.len() - offset,
                    "need_bytes must exceed what is there"
                );
                return (
                    commands,
                    Outcome::Incomplete {
                        need_bytes: offset + need_bytes,
                    },
                );
            }
            error => return (commands, error),
        }
    }
}

/// The inline encoding of one argument with double quotes: printable bytes as they
/// are, everything else (and `"`, `\`) escaped.
fn quote(arg: &[u8]) -> Vec<u8> {
    let mut out = vec![b'"'];
    for &b in arg {
        match b {
            b'"' | b'\\' => out.extend_from_slice(&[b'\\', b]),
            0x20..=0x7e => out.push(b),
            _ => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
        }
    }
    out.push(b'"');
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// (1) Any argv, encoded as multibulk, parses back identical.
    #[test]
    fn multibulk_round_trip(argv in argv_strategy()) {
        let encoded = encode_multibulk(&argv);
        let mut parser = CommandParser::new();
        let got = parse_once(&mut parser, &encoded, &Limits::default());
        prop_assert_eq!(got, Outcome::Complete { argv, consumed: encoded.len() });
    }

    /// (2) A pipelined stream fed in two reads, split at every point, yields the
    /// same commands; every `need_bytes` on the way is at most the end of the
    /// command being waited for.
    #[test]
    fn pipelined_stream_split_anywhere(
        commands in proptest::collection::vec(
            prop_oneof![
                3 => argv_strategy().prop_map(|a| (a, false)),
                1 => proptest::collection::vec(safe_token(), 0..4).prop_map(|a| (a, true)),
            ],
            1..5,
        ),
    ) {
        let mut stream = Vec::new();
        let mut ends = Vec::new();
        for (argv, inline) in &commands {
            if *inline {
                stream.extend_from_slice(&argv.join(&b' '));
                stream.extend_from_slice(b"\r\n");
            } else {
                stream.extend_from_slice(&encode_multibulk(argv));
            }
            ends.push(stream.len());
        }
        let expected: Vec<Argv> = commands.into_iter().map(|(argv, _)| argv).collect();
        let limits = Limits::default();
        let mut parser = CommandParser::new();
        for split in 0..=stream.len() {
            let (first, end) = drain(&mut parser, &stream[..split], &limits);
            let Outcome::Incomplete { need_bytes } = end else {
                panic!("split {split}: {end:?}");
            };
            // The command being waited for is the next unfinished one.
            let waiting_for = ends[first.len().min(ends.len() - 1)];
            prop_assert!(first.len() == expected.len() || need_bytes <= waiting_for);
            let consumed: usize = if first.is_empty() { 0 } else { ends[first.len() - 1] };
            let (rest, end) = drain(&mut parser, &stream[consumed..], &limits);
            let ended_waiting = matches!(end, Outcome::Incomplete { .. });
            prop_assert!(ended_waiting);
            let mut all = first;
            all.extend(rest);
            prop_assert_eq!(&all, &expected);
        }
    }

    /// (3) Arbitrary bytes never panic, under default and small limits.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in protocolish_bytes(400)) {
        let mut parser = CommandParser::new();
        drain(&mut parser, &bytes, &Limits::default());
        parser.reset();
        drain(&mut parser, &bytes, &small_limits());
    }

    /// An answer depends only on a prefix: once complete or an error, more bytes
    /// change nothing; while incomplete, nothing changes before `need_bytes`.
    #[test]
    fn answers_are_prefix_stable(bytes in protocolish_bytes(120), small in any::<bool>()) {
        let limits = if small { small_limits() } else { Limits::default() };
        let mut parser = CommandParser::new();
        let outcomes: Vec<Outcome> =
            (0..=bytes.len()).map(|k| parse_once(&mut parser, &bytes[..k], &limits)).collect();
        for (k, outcome) in outcomes.iter().enumerate() {
            match outcome {
                Outcome::Incomplete { need_bytes } => {
                    prop_assert!(*need_bytes > k);
                    for later in outcomes.iter().take(*need_bytes).skip(k) {
                        let still_waiting = matches!(later, Outcome::Incomplete { .. });
                        prop_assert!(still_waiting,
                            "prefix {} said need {} but a shorter prefix gave {:?}", k, need_bytes, later);
                    }
                }
                done => {
                    if let Some(next) = outcomes.get(k + 1) {
                        prop_assert_eq!(next, done);
                    }
                }
            }
        }
    }

    /// (4) Inline commands of plain tokens, with any spacing, round trip.
    #[test]
    fn inline_tokens_round_trip(
        tokens in proptest::collection::vec(safe_token(), 1..8),
        gaps in proptest::collection::vec(proptest::sample::select(vec![" ", "\t", "  ", " \t "]), 9),
        crlf in any::<bool>(),
    ) {
        let mut line = gaps[0].as_bytes().to_vec();
        for (token, gap) in tokens.iter().zip(&gaps[1..]) {
            line.extend_from_slice(token);
            line.extend_from_slice(gap.as_bytes());
        }
        line.extend_from_slice(if crlf { b"\r\n" } else { b"\n" });
        let got = parse_once(&mut CommandParser::new(), &line, &Limits::default());
        prop_assert_eq!(got, Outcome::Complete { argv: tokens, consumed: line.len() });
    }

    /// Any bytes survive double-quoted inline encoding with escapes.
    #[test]
    fn inline_quoted_round_trip(argv in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..20), 1..5)) {
        let mut line = Vec::new();
        for arg in &argv {
            line.extend_from_slice(&quote(arg));
            line.push(b' ');
        }
        line.extend_from_slice(b"\r\n");
        let got = parse_once(&mut CommandParser::new(), &line, &Limits::default());
        prop_assert_eq!(got, Outcome::Complete { argv, consumed: line.len() });
    }

    /// Single quotes keep everything literal except `\'`.
    #[test]
    fn inline_single_quoted_round_trip(arg in proptest::collection::vec(any::<u8>().prop_filter("no LF or backslash", |b| *b != b'\n' && *b != b'\\'), 0..30)) {
        let mut line = b"SET k '".to_vec();
        for &b in &arg {
            if b == b'\'' {
                line.extend_from_slice(b"\\'");
            } else {
                line.push(b);
            }
        }
        line.extend_from_slice(b"'\n");
        let got = parse_once(&mut CommandParser::new(), &line, &Limits::default());
        let argv = vec![b"SET".to_vec(), b"k".to_vec(), arg];
        prop_assert_eq!(got, Outcome::Complete { argv, consumed: line.len() });
    }
}

proptest! {
    /// A pipelined stream trickled in reads of random sizes, the connection's way:
    /// the unread bytes are moved to a fresh buffer between reads (compaction), and a
    /// look-ahead `peek` at the command behind the front runs before each `parse`. The
    /// parser resumes the front command's kept progress and yields exactly the
    /// commands a one-shot parse gives.
    #[test]
    fn trickled_stream_resumes_across_reads(
        commands in proptest::collection::vec(argv_strategy(), 1..4),
        chunks in proptest::collection::vec(1usize..9, 1..400),
    ) {
        let stream: Vec<u8> = commands.iter().flat_map(|argv| encode_multibulk(argv)).collect();
        let limits = Limits::default();
        let mut parser = CommandParser::new();
        let mut unread: Vec<u8> = Vec::new();
        let mut got: Vec<Argv> = Vec::new();
        let mut fed = 0;
        let mut chunk = chunks.iter().cycle();
        while fed < stream.len() {
            let take = (*chunk.next().unwrap()).min(stream.len() - fed);
            // A fresh allocation each read: progress is kept as offsets, not addresses.
            let mut buffer = std::mem::take(&mut unread);
            buffer.extend_from_slice(&stream[fed..fed + take]);
            fed += take;
            let mut pos = 0;
            while let Outcome::Complete { consumed, .. } = parse_once(&mut parser, &buffer[pos..], &limits) {
                // Peeking at the next command must not disturb what parse keeps.
                let _ = parser.peek(&buffer[pos + consumed..], &limits);
                let Outcome::Complete { argv, consumed } = parse_once(&mut parser, &buffer[pos..], &limits) else {
                    panic!("a complete command parsed again must stay complete");
                };
                got.push(argv);
                pos += consumed;
            }
            unread = buffer[pos..].to_vec();
        }
        prop_assert!(unread.is_empty());
        prop_assert_eq!(got, commands);
    }
}

/// A command's progress survives many reads: 10,000 empty arguments fed three bytes
/// at a time arrive whole.
#[test]
fn many_arguments_trickled_arrive_whole() {
    let argv: Argv = std::iter::once(b"DEL".to_vec())
        .chain(std::iter::repeat_n(Vec::new(), 10_000))
        .collect();
    let stream = encode_multibulk(&argv);
    let mut parser = CommandParser::new();
    let limits = Limits::default();
    for end in (3..stream.len()).step_by(3) {
        let outcome = parse_once(&mut parser, &stream[..end], &limits);
        assert!(
            matches!(outcome, Outcome::Incomplete { .. }),
            "at {end}: {outcome:?}"
        );
    }
    let outcome = parse_once(&mut parser, &stream, &limits);
    assert_eq!(
        outcome,
        Outcome::Complete {
            argv,
            consumed: stream.len()
        }
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// A canonical multibulk request's arguments give back its exact bytes (the
    /// replication stream copies them); the same arguments parsed from an inline
    /// request, copied into an `OwnedArgs`, or sent with a length padded by a
    /// leading zero give none.
    #[test]
    fn as_multibulk_is_the_canonical_request_or_nothing(
        argv in argv_strategy(),
        padded in any::<prop::sample::Index>(),
    ) {
        let encoded = encode_multibulk(&argv);
        let mut parser = CommandParser::new();
        let mut buf = encoded.clone();
        buf.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
        let Ok(Parsed::Complete { args, .. }) = parser.parse(&buf, &Limits::default()) else {
            panic!("a whole request");
        };
        prop_assert_eq!(args.as_multibulk(), Some(&encoded[..]));
        let owned = ruvio_resp::OwnedArgs::from_args(args);
        prop_assert_eq!(owned.args().as_multibulk(), None);

        let which = padded.index(argv.len());
        let mut zeroed = format!("*{}\r\n", argv.len()).into_bytes();
        for (i, arg) in argv.iter().enumerate() {
            let zero = if i == which { "0" } else { "" };
            zeroed.extend_from_slice(format!("${zero}{}\r\n", arg.len()).as_bytes());
            zeroed.extend_from_slice(arg);
            zeroed.extend_from_slice(b"\r\n");
        }
        let mut parser = CommandParser::new();
        if let Ok(Parsed::Complete { args, .. }) = parser.parse(&zeroed, &Limits::default()) {
            prop_assert_eq!(args.as_multibulk(), None);
        }
    }

    /// Redis skips the byte after each header's `\r` and the two after each
    /// payload unchecked: a request with anything else there parses to the
    /// same arguments but has no canonical form; one that arrives in pieces
    /// (resumed from the parser's kept progress) keeps its form.
    #[test]
    fn as_multibulk_follows_the_skipped_bytes_and_the_pieces(
        argv in argv_strategy(),
        spoiled in any::<prop::sample::Index>(),
        cut in any::<prop::sample::Index>(),
    ) {
        let encoded = encode_multibulk(&argv);
        // The skipped bytes: after every `\r` of a header, and each payload's two.
        let mut skipped = Vec::new();
        let mut at = encoded.iter().position(|&b| b == b'\r').unwrap() + 1;
        skipped.push(at);
        at += 1;
        for arg in &argv {
            let cr = at + encoded[at..].iter().position(|&b| b == b'\r').unwrap();
            skipped.push(cr + 1);
            let end = cr + 2 + arg.len();
            skipped.extend([end, end + 1]);
            at = end + 2;
        }
        let mut spoilt = encoded.clone();
        spoilt[skipped[spoiled.index(skipped.len())]] = b'x';
        let mut parser = CommandParser::new();
        let Ok(Parsed::Complete { args, .. }) = parser.parse(&spoilt, &Limits::default()) else {
            panic!("Redis parses it too");
        };
        prop_assert_eq!(args.iter().collect::<Vec<_>>(), argv.iter().map(|a| &a[..]).collect::<Vec<_>>());
        prop_assert_eq!(args.as_multibulk(), None);

        let split = 1 + cut.index(encoded.len() - 1);
        let mut parser = CommandParser::new();
        let first = parser.parse(&encoded[..split], &Limits::default());
        let incomplete = matches!(first, Ok(Parsed::Incomplete { .. }));
        prop_assert!(incomplete);
        let Ok(Parsed::Complete { args, .. }) = parser.parse(&encoded, &Limits::default()) else {
            panic!("a whole request");
        };
        prop_assert_eq!(args.as_multibulk(), Some(&encoded[..]));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A batch between shards gives back every command's arguments in order,
    /// however each was pushed; a command pushed as its request keeps its
    /// exact bytes (the owner's replication stream copies them), one pushed
    /// as arguments or parsed from an inline request has none.
    #[test]
    fn a_batch_keeps_the_requests_pushed_whole(
        commands in prop::collection::vec((argv_strategy(), 0..3u8), 1..6),
    ) {
        let mut batch = ruvio_resp::ArgsBatch::default();
        let mut expected = Vec::new();
        for (argv, how) in &commands {
            // 0: arguments, 1: a multibulk request, 2: an inline request.
            let request = match how {
                2 => {
                    let word = |a: &Vec<u8>| !a.is_empty() && a.iter().all(u8::is_ascii_alphanumeric);
                    if !argv.iter().all(word) {
                        continue;
                    }
                    let mut inline = argv.join(&b' ');
                    inline.extend_from_slice(b"\r\n");
                    inline
                }
                _ => encode_multibulk(argv),
            };
            let mut parser = CommandParser::new();
            let Ok(Parsed::Complete { args, .. }) = parser.parse(&request, &Limits::default()) else {
                panic!("a whole request");
            };
            match how {
                0 => batch.push(args.iter()),
                _ => batch.push_request(args),
            }
            let whole = (*how == 1).then(|| encode_multibulk(argv));
            expected.push((argv.clone(), whole));
        }
        prop_assert_eq!(batch.len(), expected.len());
        let got: Vec<_> = batch.iter().collect();
        for (i, (args, (argv, whole))) in got.iter().zip(&expected).enumerate() {
            let back: Vec<Vec<u8>> = args.iter().map(<[u8]>::to_vec).collect();
            prop_assert_eq!(&back, argv);
            prop_assert_eq!(args.as_multibulk(), whole.as_deref());
            let again = batch.get(i).unwrap();
            prop_assert_eq!(again.as_multibulk(), whole.as_deref());
        }
    }
}

#[test]
fn an_inline_request_has_no_multibulk_form() {
    let mut parser = CommandParser::new();
    let Ok(Parsed::Complete { args, .. }) = parser.parse(b"SET k v\r\n", &Limits::default()) else {
        panic!("a whole request");
    };
    assert_eq!(args.len(), 3);
    assert_eq!(args.as_multibulk(), None);
}

/// One command of a pipeline, multibulk or inline (quoted arguments).
fn encoded(argv: &Argv, inline: bool) -> Vec<u8> {
    if !inline {
        return encode_multibulk(argv);
    }
    let mut line: Vec<u8> = argv
        .iter()
        .flat_map(|arg| [quote(arg), b" ".to_vec()].concat())
        .collect();
    line.extend_from_slice(b"\r\n");
    line
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// A look-ahead over the front of a pipeline (the server's prefetch pass),
    /// then the commands parsed in order, one of them twice (a run that stops
    /// before a command and comes back to it): the same commands and the same
    /// end (incomplete, or an error) as parsing without it.
    #[test]
    fn looked_ahead_commands_parse_as_without(
        commands in proptest::collection::vec((argv_strategy(), any::<bool>()), 1..10),
        junk in protocolish_bytes(12),
        looked in 0usize..12,
        again in 0usize..12,
        cut in 0usize..30,
    ) {
        let mut stream: Vec<u8> = commands.iter().flat_map(|(argv, inline)| encoded(argv, *inline)).collect();
        stream.extend_from_slice(&junk);
        stream.truncate(stream.len().saturating_sub(cut));
        let limits = small_limits();
        let expected = drain(&mut CommandParser::new(), &stream, &limits);

        let mut parser = CommandParser::new();
        let mut offset = 0;
        for _ in 0..looked {
            match parser.look_ahead(&stream, offset, &limits) {
                Ok(Parsed::Complete { consumed, .. }) => offset += consumed,
                _ => break,
            }
        }
        let mut got = Vec::new();
        let mut pos = 0;
        let end = loop {
            match parse_once(&mut parser, &stream[pos..], &limits) {
                Outcome::Complete { argv, consumed } => {
                    if got.len() == again {
                        let twice = parse_once(&mut parser, &stream[pos..], &limits);
                        prop_assert_eq!(twice, Outcome::Complete { argv: argv.clone(), consumed });
                    }
                    got.push(argv);
                    pos += consumed;
                }
                Outcome::Incomplete { need_bytes } => {
                    break Outcome::Incomplete { need_bytes: pos + need_bytes }
                }
                error => break error,
            }
        };
        prop_assert_eq!((got, end), expected);
    }
}

/// What a look-ahead kept is answered only at its own address: bytes moved to
/// a new buffer (the caller forgot to say so) are parsed afresh, not taken for
/// the commands kept.
#[test]
fn looked_ahead_commands_are_kept_by_address() {
    let limits = Limits::default();
    let first = encode_multibulk(&[b"GET".to_vec(), b"a".to_vec()]);
    let second = encode_multibulk(&[b"SET".to_vec(), b"b".to_vec(), b"c".to_vec()]);
    let stream = [first.clone(), second.clone()].concat();
    let mut parser = CommandParser::new();
    for offset in [0, first.len()] {
        assert!(matches!(
            parser.look_ahead(&stream, offset, &limits),
            Ok(Parsed::Complete { .. })
        ));
    }
    // Other bytes elsewhere: read as they are.
    let other = encode_multibulk(&[b"DEL".to_vec(), b"x".to_vec()]);
    let (argv, _) = match parse_once(&mut parser, &other, &limits) {
        Outcome::Complete { argv, consumed } => (argv, consumed),
        outcome => panic!("{outcome:?}"),
    };
    assert_eq!(argv, vec![b"DEL".to_vec(), b"x".to_vec()]);
    // The kept ones were forgotten: the stream parses from scratch.
    assert_eq!(
        parse_once(&mut parser, &stream[first.len()..], &limits),
        Outcome::Complete {
            argv: vec![b"SET".to_vec(), b"b".to_vec(), b"c".to_vec()],
            consumed: second.len()
        }
    );
}
