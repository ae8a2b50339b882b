//! The `notify-keyspace-events` setting's value: Redis' `NOTIFY_*` class bits, as
//! parsed from and rendered to its characters (`KEA`, `Ex` ...). Publishing the
//! events is `messaging::notify`.

/// Redis' `NOTIFY_*` bits.
pub const KEYSPACE: u32 = 1 << 0;
pub const KEYEVENT: u32 = 1 << 1;
pub const GENERIC: u32 = 1 << 2;
pub const STRING: u32 = 1 << 3;
pub const LIST: u32 = 1 << 4;
pub const SET: u32 = 1 << 5;
pub const HASH: u32 = 1 << 6;
pub const ZSET: u32 = 1 << 7;
pub const EXPIRED: u32 = 1 << 8;
pub const EVICTED: u32 = 1 << 9;
pub const STREAM: u32 = 1 << 10;
pub const KEY_MISS: u32 = 1 << 11;
pub const MODULE: u32 = 1 << 13;
pub const NEW: u32 = 1 << 14;
/// `A`: every class but key misses and new keys.
pub const ALL: u32 =
    GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// The flag of each character, in Redis' order.
const CHARS: &[(char, u32)] = &[
    ('g', GENERIC),
    ('$', STRING),
    ('l', LIST),
    ('s', SET),
    ('h', HASH),
    ('z', ZSET),
    ('x', EXPIRED),
    ('e', EVICTED),
    ('t', STREAM),
    ('d', MODULE),
    ('n', NEW),
];

/// Parse a `notify-keyspace-events` value; `None` for a character Redis refuses.
pub fn parse(value: &str) -> Option<u32> {
    value.chars().try_fold(0, |flags, c| {
        let bit = match c {
            'A' => ALL,
            'K' => KEYSPACE,
            'E' => KEYEVENT,
            'm' => KEY_MISS,
            _ => CHARS.iter().find(|&&(ch, _)| ch == c)?.1,
        };
        Some(flags | bit)
    })
}

/// Redis' canonical form of the flags (CONFIG GET).
pub fn render(flags: u32) -> String {
    let mut out = String::new();
    if flags & ALL == ALL {
        out.push('A');
    } else {
        CHARS
            .iter()
            .filter(|&&(_, bit)| flags & bit != 0)
            .for_each(|&(c, _)| out.push(c));
    }
    for (c, bit) in [('K', KEYSPACE), ('E', KEYEVENT), ('m', KEY_MISS)] {
        if flags & bit != 0 {
            out.push(c);
        }
    }
    out
}

/// CONFIG SET's reason for a refused value.
pub const INVALID: &str = "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.";
