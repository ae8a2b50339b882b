//! Command templates, encoded once and stamped per request.
//!
//! A template such as `SET key:__rand_int__ __data__` is turned into RESP bytes
//! a single time. `__data__` becomes the value bytes and `__rand_int__` becomes a
//! 12-digit field, exactly as redis-benchmark does, so every request has the same
//! length and producing one is a `memcpy` plus writing 12 digits per key: no
//! allocation and no formatting on the hot path.

/// Placeholder replaced by a key number from the key space.
pub const RAND_INT: &str = "__rand_int__";
/// Synonym for [`RAND_INT`] that reads better in key position.
pub const RAND_KEY: &str = "__rand_key__";
/// Placeholder replaced by the value bytes (`-d` of them).
pub const DATA: &str = "__data__";
/// Placeholder replaced by the connection's hash tag text (without braces).
pub const TAG: &str = "__tag__";
/// Word that separates the commands of a request made of several
/// (`GET key:__rand_int__ ; SET key:__rand_int__ __data__`): the request is
/// answered by one reply per command, its latency the last one's.
pub const THEN: &str = ";";
/// Width of a stamped key number; redis-benchmark's, so keys look like `key:000000012345`.
pub const DIGITS: usize = 12;
/// Largest key space a 12-digit field can address.
pub const KEYSPACE_MAX: u64 = 1_000_000_000_000;

/// One command ready to stamp.
#[derive(Debug, Clone)]
pub struct Template {
    /// The template as written, for reports.
    pub text: String,
    /// Encoded request with zeroed digit fields.
    bytes: Vec<u8>,
    /// Offsets of the digit fields inside `bytes`.
    slots: Vec<usize>,
    /// For each digit field, the full argument around it split into the text
    /// before and after the digits: cluster routing hashes the real key.
    keys: Vec<(Vec<u8>, Vec<u8>)>,
    /// Replies that answer one request: one per command, and 2 more for a
    /// transaction's MULTI and EXEC.
    pub replies: usize,
}

/// How templates are compiled for one connection.
#[derive(Debug, Clone, Default)]
pub struct Stamp<'a> {
    /// Value bytes for `__data__`.
    pub data: &'a [u8],
    /// Hash tag for `__tag__`, and for `auto_tag`.
    pub tag: Option<&'a str>,
    /// Prefix `{tag}` to every argument holding a key placeholder.
    pub auto_tag: bool,
}

impl Template {
    /// Compile `args` (command name first) for one connection; words [`THEN`]
    /// separate the commands of one request.
    pub fn compile(args: &[String], stamp: &Stamp) -> Template {
        let mut parts = args.split(|a| a == THEN).filter(|p| !p.is_empty());
        let first = Template::compile_one(parts.next().unwrap_or_default(), stamp);
        let mut out = parts.fold(first, |t, part| t.then(Template::compile_one(part, stamp)));
        out.text = args.join(" ");
        out
    }

    /// One command (command name first).
    fn compile_one(args: &[String], stamp: &Stamp) -> Template {
        let mut bytes = format!("*{}\r\n", args.len()).into_bytes();
        let (mut slots, mut keys) = (Vec::new(), Vec::new());
        for arg in args {
            let mut arg = expand(arg, stamp);
            bytes.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            let start = bytes.len();
            let mut from = 0;
            while let Some(at) = find(&arg[from..], RAND_INT.as_bytes()) {
                let at = from + at;
                arg[at..at + DIGITS].fill(b'0');
                slots.push(start + at);
                from = at + DIGITS;
            }
            for &slot in &slots[keys.len()..] {
                let at = slot - start;
                keys.push((arg[..at].to_vec(), arg[at + DIGITS..].to_vec()));
            }
            bytes.extend_from_slice(&arg);
            bytes.extend_from_slice(b"\r\n");
        }
        Template {
            text: args.join(" "),
            bytes,
            slots,
            keys,
            replies: 1,
        }
    }

    /// One request becomes MULTI, `n` copies of this command (each copy's keys
    /// drawn anew) and EXEC: answered by `n + 2` replies, the last EXEC's array.
    pub fn in_transaction(self, n: usize) -> Template {
        let mut bytes = b"*1\r\n$5\r\nMULTI\r\n".to_vec();
        let (mut slots, mut keys) = (Vec::new(), Vec::new());
        for _ in 0..n {
            slots.extend(self.slots.iter().map(|s| s + bytes.len()));
            keys.extend(self.keys.iter().cloned());
            bytes.extend_from_slice(&self.bytes);
        }
        bytes.extend_from_slice(b"*1\r\n$4\r\nEXEC\r\n");
        Template {
            text: format!("MULTI, {n} x {}, EXEC", self.text),
            bytes,
            slots,
            keys,
            replies: n * self.replies + 2,
        }
    }

    /// One request becomes this request followed by `next` (pipelined, each
    /// answered on its own): `GET` then `SET`, so the load writes keys it read.
    pub fn then(self, next: Template) -> Template {
        let base = self.bytes.len();
        let mut bytes = self.bytes;
        bytes.extend_from_slice(&next.bytes);
        let mut slots = self.slots;
        slots.extend(next.slots.iter().map(|s| s + base));
        let mut keys = self.keys;
        keys.extend(next.keys);
        Template {
            text: format!("{} ; {}", self.text, next.text),
            bytes,
            slots,
            keys,
            replies: self.replies + next.replies,
        }
    }

    /// Number of key placeholders.
    pub fn key_count(&self) -> usize {
        self.slots.len()
    }

    /// The key bytes of placeholder `i` stamped with `n`, for slot computation.
    pub fn key_bytes(&self, i: usize, n: u64) -> Vec<u8> {
        let (pre, post) = &self.keys[i];
        let mut key = pre.clone();
        key.extend_from_slice(&digits(n));
        key.extend_from_slice(post);
        key
    }

    /// Append one request to `out`, the key placeholders taking numbers from `next_key`.
    #[inline]
    pub fn stamp_into(&self, out: &mut Vec<u8>, mut next_key: impl FnMut(usize) -> u64) {
        let base = out.len();
        out.extend_from_slice(&self.bytes);
        for (i, &slot) in self.slots.iter().enumerate() {
            let at = base + slot;
            out[at..at + DIGITS].copy_from_slice(&digits(next_key(i)));
        }
    }

    /// Encoded length of one request.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }
}

/// Replace `__data__`, `__tag__` and `__rand_key__` in one argument, and add the
/// automatic hash tag. Key placeholders are normalized to `__rand_int__`, whose
/// length equals [`DIGITS`] so offsets found afterwards are final.
fn expand(arg: &str, stamp: &Stamp) -> Vec<u8> {
    const _: () = assert!(RAND_INT.len() == DIGITS && RAND_KEY.len() == DIGITS);
    let mut text = arg.replace(RAND_KEY, RAND_INT);
    if let Some(tag) = stamp.tag {
        text = text.replace(TAG, tag);
        if stamp.auto_tag && text.contains(RAND_INT) && !text.contains('{') {
            text = format!("{{{tag}}}{text}");
        }
    }
    let mut out = Vec::with_capacity(text.len() + stamp.data.len());
    let mut rest = text.as_str();
    while let Some(at) = rest.find(DATA) {
        out.extend_from_slice(&rest.as_bytes()[..at]);
        out.extend_from_slice(stamp.data);
        rest = &rest[at + DATA.len()..];
    }
    out.extend_from_slice(rest.as_bytes());
    out
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// `n` as 12 zero-padded decimal digits (the key space is capped below 10^12).
#[inline]
pub fn digits(mut n: u64) -> [u8; DIGITS] {
    debug_assert!(n < KEYSPACE_MAX);
    let mut out = [b'0'; DIGITS];
    let mut i = DIGITS;
    while n > 0 && i > 0 {
        i -= 1;
        out[i] = b'0' + (n % 10) as u8;
        n /= 10;
    }
    out
}

/// Split a template string on whitespace, for `--command 'SET k v'`.
pub fn split_words(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_owned).collect()
}

/// Built-in tests named as redis-benchmark's `-t` names them, with its templates.
///
/// Returns (report name, arguments). `lrange_*` rely on the list that `lpush`
/// builds, as in redis-benchmark.
pub fn builtin(name: &str) -> Option<(String, Vec<String>)> {
    let (label, text) = match name.to_ascii_lowercase().as_str() {
        "ping" | "ping_mbulk" => ("PING_MBULK", "PING"),
        "set" => ("SET", "SET key:__rand_int__ __data__"),
        "get" => ("GET", "GET key:__rand_int__"),
        "incr" => ("INCR", "INCR counter:__rand_int__"),
        "lpush" => ("LPUSH", "LPUSH mylist __data__"),
        "rpush" => ("RPUSH", "RPUSH mylist __data__"),
        "lpop" => ("LPOP", "LPOP mylist"),
        "rpop" => ("RPOP", "RPOP mylist"),
        "sadd" => ("SADD", "SADD myset element:__rand_int__"),
        "hset" => ("HSET", "HSET myhash element:__rand_int__ __data__"),
        "spop" => ("SPOP", "SPOP myset"),
        "zadd" => ("ZADD", "ZADD myzset 0 element:__rand_int__"),
        "zpopmin" => ("ZPOPMIN", "ZPOPMIN myzset"),
        "lrange" | "lrange_100" => ("LRANGE_100", "LRANGE mylist 0 99"),
        "lrange_300" => ("LRANGE_300", "LRANGE mylist 0 299"),
        "lrange_500" => ("LRANGE_500", "LRANGE mylist 0 499"),
        "lrange_600" => ("LRANGE_600", "LRANGE mylist 0 599"),
        // With --tracking: each connection reads a random key and writes
        // another, so the writes hit keys some connection read (remembered by
        // the server) and every SET owes invalidations: the cost of writing
        // tracked keys with the pushes delivered (and counted).
        "get_set" | "tracked_set" => (
            "GET then SET",
            "GET key:__rand_int__ ; SET key:__rand_int__ __data__",
        ),
        "mset" => (
            "MSET (10 keys)",
            "MSET key:__rand_int__ __data__ key:__rand_int__ __data__ key:__rand_int__ __data__ \
             key:__rand_int__ __data__ key:__rand_int__ __data__ key:__rand_int__ __data__ \
             key:__rand_int__ __data__ key:__rand_int__ __data__ key:__rand_int__ __data__ \
             key:__rand_int__ __data__",
        ),
        _ => return None,
    };
    Some((label.to_string(), split_words(text)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        split_words(s)
    }

    #[test]
    fn stamps_keys_and_data() {
        let stamp = Stamp {
            data: b"xyz",
            ..Default::default()
        };
        let t = Template::compile(&words("SET key:__rand_int__ __data__"), &stamp);
        let mut out = Vec::new();
        t.stamp_into(&mut out, |_| 12345);
        assert_eq!(
            out,
            b"*3\r\n$3\r\nSET\r\n$16\r\nkey:000000012345\r\n$3\r\nxyz\r\n"
        );
        assert_eq!(out.len(), t.len());
        assert_eq!(t.key_bytes(0, 7), b"key:000000000007");
    }

    #[test]
    fn each_placeholder_gets_its_own_number() {
        let t = Template::compile(
            &words("MSET a__rand_int__ 1 b__rand_key__ 2"),
            &Stamp::default(),
        );
        assert_eq!(t.key_count(), 2);
        let mut out = Vec::new();
        t.stamp_into(&mut out, |i| i as u64 + 1);
        let s = String::from_utf8(out).unwrap();
        assert!(
            s.contains("a000000000001") && s.contains("b000000000002"),
            "{s}"
        );
    }

    #[test]
    fn tags_keys_for_a_shard() {
        let stamp = Stamp {
            data: b"v",
            tag: Some("42"),
            auto_tag: true,
        };
        let t = Template::compile(&words("SET key:__rand_int__ __data__"), &stamp);
        assert_eq!(t.key_bytes(0, 1), b"{42}key:000000000001");
        let explicit = Stamp {
            data: b"v",
            tag: Some("7"),
            auto_tag: false,
        };
        let t = Template::compile(&words("HSET h{__tag__}:__rand_int__ f __data__"), &explicit);
        assert_eq!(t.key_bytes(0, 3), b"h{7}:000000000003");
    }

    #[test]
    fn a_transaction_wraps_copies_with_their_own_keys() {
        let stamp = Stamp {
            data: b"v",
            ..Stamp::default()
        };
        let t = Template::compile(&words("SET k:__rand_int__ __data__"), &stamp).in_transaction(2);
        assert_eq!(t.replies, 4);
        assert_eq!(t.key_count(), 2);
        let mut out = Vec::new();
        let mut n = 0;
        t.stamp_into(&mut out, |_| {
            n += 1;
            n
        });
        let expected = "*1\r\n$5\r\nMULTI\r\n\
                        *3\r\n$3\r\nSET\r\n$14\r\nk:000000000001\r\n$1\r\nv\r\n\
                        *3\r\n$3\r\nSET\r\n$14\r\nk:000000000002\r\n$1\r\nv\r\n\
                        *1\r\n$4\r\nEXEC\r\n";
        assert_eq!(String::from_utf8(out).unwrap(), expected);
    }

    #[test]
    fn commands_separated_by_then_make_one_request() {
        let stamp = Stamp {
            data: b"v",
            ..Stamp::default()
        };
        let (_, args) = builtin("get_set").unwrap();
        let t = Template::compile(&args, &stamp);
        assert_eq!((t.replies, t.key_count()), (2, 2));
        let mut out = Vec::new();
        t.stamp_into(&mut out, |i| i as u64 + 1);
        let expected = "*2\r\n$3\r\nGET\r\n$16\r\nkey:000000000001\r\n\
                        *3\r\n$3\r\nSET\r\n$16\r\nkey:000000000002\r\n$1\r\nv\r\n";
        assert_eq!(String::from_utf8(out).unwrap(), expected);
        assert_eq!(t.len(), expected.len());
        assert_eq!(t.key_bytes(1, 3), b"key:000000000003");
        assert_eq!(
            t.text,
            "GET key:__rand_int__ ; SET key:__rand_int__ __data__"
        );
        // Wrapped in a transaction, each copy keeps both commands.
        assert_eq!(t.in_transaction(2).replies, 6);
    }

    #[test]
    fn digits_are_fixed_width() {
        assert_eq!(&digits(0), b"000000000000");
        assert_eq!(&digits(999_999_999_999), b"999999999999");
    }

    #[test]
    fn builtins_match_redis_benchmark_names() {
        assert_eq!(builtin("GET").unwrap().1, words("GET key:__rand_int__"));
        assert_eq!(builtin("mset").unwrap().1.len(), 21);
        assert!(builtin("nope").is_none());
    }
}
