//! One shard's engine driven by commands, the way the server runs them (table
//! lookup, arity, subcommand, handler), with replies decoded for comparison with a
//! plain model. Encoding thresholds can change between commands, as CONFIG SET
//! changes them on a live server.

use crate::resp::encode_request;
use arbitrary::Arbitrary;
use ruvio_engine::command::{CommandTree, Outcome};
use ruvio_engine::{CmdError, Engine, EngineConfig, ExecCtx};
use ruvio_resp::{CommandParser, Limits, Parsed, Protocol, Reply};

/// The engine's clock (fixed: no key expires on its own).
const NOW_MS: u64 = 1_700_000_000_000;

/// A decoded RESP2 reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Int(i64),
    Bulk(Vec<u8>),
    Nil,
    Status(String),
    Error(String),
    Array(Vec<Value>),
}

impl Value {
    pub fn int(&self) -> i64 {
        match self {
            Value::Int(n) => *n,
            other => panic!("expected an integer, got {other:?}"),
        }
    }

    pub fn bulk(&self) -> Option<&[u8]> {
        match self {
            Value::Bulk(b) => Some(b),
            Value::Nil => None,
            other => panic!("expected a bulk string, got {other:?}"),
        }
    }

    pub fn array(&self) -> &[Value] {
        match self {
            Value::Array(items) => items,
            Value::Nil => &[],
            other => panic!("expected an array, got {other:?}"),
        }
    }

    /// The bulk strings of an array.
    pub fn strings(&self) -> Vec<Vec<u8>> {
        self.array()
            .iter()
            .map(|v| v.bulk().expect("no nil element").to_vec())
            .collect()
    }

    pub fn is_error(&self) -> bool {
        matches!(self, Value::Error(_))
    }
}

/// An engine with one database.
pub struct EngineRun {
    pub engine: Engine,
    parser: CommandParser,
}

impl Default for EngineRun {
    fn default() -> Self {
        EngineRun {
            engine: Engine::new(1),
            parser: CommandParser::new(),
        }
    }
}

impl EngineRun {
    /// Run one command and decode its reply.
    pub fn call<A: AsRef<[u8]>>(&mut self, argv: &[A]) -> Value {
        let request = encode_request(argv);
        let mut out = Vec::new();
        let Ok(Parsed::Complete { args, .. }) = self.parser.parse(&request, &Limits::default())
        else {
            panic!("an encoded request parses");
        };
        let mut reply = Reply::new(&mut out, Protocol::Resp2);
        let resolved = match Engine::find_command(args.get(0)) {
            Some(row) if !row.meta.arity_ok(args.len()) => Err(CmdError::WrongArity(row.meta.name)),
            Some(row) => row.resolve(args),
            None => Err(CmdError::unknown_command(args)),
        };
        match resolved {
            Ok(cmd) => {
                let handler = cmd.handler.expect("a resolved row has a handler");
                let mut ctx = ExecCtx::new(0, NOW_MS);
                match handler(&mut self.engine, &mut ctx, args, &mut reply) {
                    Ok(Outcome::Done) => {}
                    Ok(Outcome::Block(_)) => panic!("no blocking command here"),
                    Err(e) => e.write(&mut reply),
                }
            }
            Err(e) => e.write(&mut reply),
        }
        let (value, used) = decode(&out);
        assert_eq!(
            used,
            out.len(),
            "one reply: {:?}",
            String::from_utf8_lossy(&out)
        );
        value
    }

    /// The value's encoding (OBJECT ENCODING), `None` when the key is absent.
    pub fn encoding(&mut self, key: &[u8]) -> Option<String> {
        match self.call(&[b"OBJECT".as_slice(), b"ENCODING", key]) {
            Value::Bulk(b) => Some(String::from_utf8_lossy(&b).into_owned()),
            _ => None,
        }
    }
}

/// One RESP2 reply at the front of `buf` and its length.
pub fn decode(buf: &[u8]) -> (Value, usize) {
    let line_end = buf
        .windows(2)
        .position(|w| w == b"\r\n")
        .expect("a complete reply line");
    let line = &buf[1..line_end];
    let text = || String::from_utf8_lossy(line).into_owned();
    let number = || text().parse::<i64>().expect("a number");
    let mut used = line_end + 2;
    let value = match buf[0] {
        b':' => Value::Int(number()),
        b'+' => Value::Status(text()),
        b'-' => Value::Error(text()),
        b'$' if line == b"-1" => Value::Nil,
        b'*' if line == b"-1" => Value::Nil,
        b'$' => {
            let len = number() as usize;
            let body = buf[used..used + len].to_vec();
            assert_eq!(&buf[used + len..used + len + 2], b"\r\n");
            used += len + 2;
            Value::Bulk(body)
        }
        b'*' => {
            let mut items = Vec::new();
            for _ in 0..number() {
                let (item, n) = decode(&buf[used..]);
                items.push(item);
                used += n;
            }
            Value::Array(items)
        }
        other => panic!("unexpected reply type {:?}", other as char),
    };
    (value, used)
}

/// An element the fuzzer picks: small and large integers (intsets, integer
/// listpack entries), short strings and strings long enough to pass the value
/// limits, drawn from few enough values that they repeat.
#[derive(Arbitrary, Clone, Copy, Debug)]
pub struct Elem(pub u8);

impl Elem {
    pub fn bytes(self) -> Vec<u8> {
        let n = self.0 / 4;
        match self.0 % 4 {
            0 => (i64::from(n) - 10).to_string().into_bytes(),
            1 => vec![b'a' + n % 8],
            2 => {
                let mut long = vec![b'x'; 40 + usize::from(n % 8) * 8];
                long.push(b'a' + n % 4);
                long
            }
            _ => [
                i64::MAX - i64::from(n % 4),
                i64::MIN + i64::from(n % 4),
                1 << 40,
                -(1 << 33),
            ][usize::from(n % 4)]
            .to_string()
            .into_bytes(),
        }
    }
}

/// A change of the encoding thresholds, picked from around the defaults and the
/// extremes.
#[derive(Arbitrary, Clone, Copy, Debug)]
pub struct Thresholds {
    pub entries: u8,
    pub value: u8,
    pub list_size: i8,
}

impl Thresholds {
    /// Apply to every type's thresholds.
    pub fn apply(self, config: &mut EngineConfig) {
        let entries = usize::from(self.entries % 16);
        let value = usize::from(self.value % 80);
        config.list_max_listpack_size = i32::from(self.list_size).clamp(-5, 12);
        config.hash_max_listpack_entries = entries;
        config.hash_max_listpack_value = value;
        config.zset_max_listpack_entries = entries;
        config.zset_max_listpack_value = value;
        config.set_max_intset_entries = entries;
        config.set_max_listpack_entries = entries;
        config.set_max_listpack_value = value;
        config.hll_sparse_max_bytes = usize::from(self.entries) * 16;
    }
}
