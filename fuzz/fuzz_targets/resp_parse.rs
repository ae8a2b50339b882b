//! The RESP request parser on arbitrary bytes, delivered whole and in arbitrary
//! pieces the way the server reads them (docs/fuzzing.md).
//!
//! Checks: no panic, no hang; the pieces (each read looked ahead over first, as
//! the server's prefetch pass does) give exactly the commands, and the same
//! final answer (error, or waiting for bytes), as the whole input; every command
//! respects the limits; `Incomplete` always asks for more than it has; a parsed
//! multibulk command encoded again parses to the same arguments.

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use ruvio_fuzz::resp::{encode_request, parse_all, parse_in_pieces, Outcome};
use ruvio_resp::{CommandParser, Limits, Parsed};

#[derive(Arbitrary, Debug)]
struct Input {
    /// Small limits (so the size checks fire) instead of the defaults.
    small_limits: Option<(u8, u8, u16)>,
    /// Where the reads end, as offsets into `data` (taken modulo its length).
    cuts: Vec<u16>,
    data: Vec<u8>,
}

fn limits(small: Option<(u8, u8, u16)>) -> Limits {
    match small {
        None => Limits::default(),
        Some((inline, count, bulk)) => Limits {
            inline_bytes_max: usize::from(inline) + 1,
            multibulk_len_max: usize::from(count),
            bulk_bytes_max: usize::from(bulk),
        },
    }
}

fuzz_target!(|input: Input| {
    let limits = limits(input.small_limits);
    let whole = parse_all(&input.data, &limits);
    let pieces = parse_in_pieces(&input.data, &input.cuts, &limits);
    assert_eq!(whole, pieces, "reads split at {:?}", input.cuts);
    for command in &whole.commands {
        if !command.inline {
            assert!(command.args.len() <= limits.multibulk_len_max);
            assert!(command
                .args
                .iter()
                .all(|a| a.len() <= limits.bulk_bytes_max));
            let again = encode_request(&command.args);
            let mut parser = CommandParser::new();
            match parser.parse(&again, &Limits::default()) {
                Ok(Parsed::Complete { args, consumed }) => {
                    assert_eq!(consumed, again.len());
                    assert!(args.iter().eq(command.args.iter().map(Vec::as_slice)));
                }
                other => panic!("re-encoded command does not parse: {other:?}"),
            }
        } else {
            assert!(command.consumed <= limits.inline_bytes_max + 1);
        }
    }
    if let Outcome::Incomplete {
        need_bytes,
        pending,
    } = whole.end
    {
        assert!(
            need_bytes > pending,
            "need {need_bytes} with {pending} pending"
        );
    }
});
