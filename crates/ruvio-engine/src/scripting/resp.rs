//! Redis' conversions between replies and Lua values (`script_lua.c`):
//! a command's reply, as the engine wrote it, becomes a Lua value for `redis.call`;
//! the script's result becomes the client's reply.

use mlua::{Lua, Table, Value};
use ruvio_resp::{Protocol, Reply};

/// Turn one encoded reply at the start of `buf` into a Lua value (Redis'
/// `redisProtocolToLuaType`); returns the value and the bytes it took.
pub(super) fn reply_to_lua(lua: &Lua, buf: &[u8]) -> mlua::Result<(Value, usize)> {
    let line_end = buf
        .windows(2)
        .position(|w| w == b"\r\n")
        .ok_or_else(|| mlua::Error::runtime("truncated reply"))?;
    let line = &buf[1..line_end];
    let after = line_end + 2;
    let number = || -> i64 {
        std::str::from_utf8(line)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    };
    let text = || lua.create_string(line);
    Ok(match buf[0] {
        b':' => (Value::Number(number() as f64), after),
        b'+' => (
            Value::Table(single(lua, "ok", Value::String(text()?))?),
            after,
        ),
        b'-' => (
            Value::Table(single(lua, "err", Value::String(text()?))?),
            after,
        ),
        b'$' | b'=' if number() < 0 => (Value::Boolean(false), after),
        b'$' => {
            let len = number() as usize;
            let bytes = buf
                .get(after..after + len)
                .ok_or_else(|| mlua::Error::runtime("truncated bulk"))?;
            (Value::String(lua.create_string(bytes)?), after + len + 2)
        }
        b'=' => {
            let len = number() as usize;
            let bytes = buf
                .get(after..after + len)
                .ok_or_else(|| mlua::Error::runtime("truncated verbatim"))?;
            let inner = lua.create_table()?;
            inner.raw_set("format", lua.create_string(&bytes[..3.min(bytes.len())])?)?;
            inner.raw_set(
                "string",
                lua.create_string(bytes.get(4..).unwrap_or_default())?,
            )?;
            (
                Value::Table(single(lua, "verbatim_string", Value::Table(inner))?),
                after + len + 2,
            )
        }
        b'*' | b'>' if number() < 0 => (Value::Boolean(false), after),
        b'*' | b'~' | b'>' => {
            let is_set = buf[0] == b'~';
            let table = lua.create_table()?;
            let mut at = after;
            for i in 1..=number().max(0) {
                let (v, used) = reply_to_lua(lua, &buf[at..])?;
                at += used;
                if is_set {
                    table.raw_set(v, true)?;
                } else {
                    table.raw_set(i, v)?;
                }
            }
            let value = if is_set {
                Value::Table(single(lua, "set", Value::Table(table))?)
            } else {
                Value::Table(table)
            };
            (value, at)
        }
        b'%' => {
            let table = lua.create_table()?;
            let mut at = after;
            for _ in 0..number().max(0) {
                let (k, used) = reply_to_lua(lua, &buf[at..])?;
                at += used;
                let (v, used) = reply_to_lua(lua, &buf[at..])?;
                at += used;
                table.raw_set(k, v)?;
            }
            (Value::Table(single(lua, "map", Value::Table(table))?), at)
        }
        b'_' => (Value::Nil, after),
        b'#' => (Value::Boolean(line == b"t"), after),
        b',' => {
            let d = std::str::from_utf8(line)
                .ok()
                .and_then(parse_double)
                .unwrap_or(0.0);
            (
                Value::Table(single(lua, "double", Value::Number(d))?),
                after,
            )
        }
        b'(' => (
            Value::Table(single(lua, "big_number", Value::String(text()?))?),
            after,
        ),
        _ => return Err(mlua::Error::runtime("unknown reply type")),
    })
}

/// A RESP3 double's text (`inf`, `-inf`, `nan` included).
fn parse_double(s: &str) -> Option<f64> {
    match s {
        "inf" => Some(f64::INFINITY),
        "-inf" => Some(f64::NEG_INFINITY),
        "nan" => Some(f64::NAN),
        _ => s.parse().ok(),
    }
}

/// `{name = value}`.
fn single(lua: &Lua, name: &str, value: Value) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(name, value)?;
    Ok(t)
}

/// Write the script's result as the client's reply (Redis' `luaReplyToRedisReply`);
/// `resp` is the protocol the script chose with `redis.setresp` (2 or 3).
pub(super) fn lua_to_reply(value: &Value, resp: u8, reply: &mut Reply<'_>) {
    write_value(value, resp, reply, 0)
}

/// Nesting past which a reply element is an error instead (Redis' `reached lua
/// stack limit`): a table that contains itself must not recurse forever.
const DEPTH_MAX: usize = 1000;

fn write_value(value: &Value, resp: u8, reply: &mut Reply<'_>, depth: usize) {
    if depth > DEPTH_MAX {
        reply.error("ERR reached lua stack limit");
        return;
    }
    match value {
        Value::String(s) => reply.bulk(&s.as_bytes()),
        Value::Boolean(b) if resp == 2 => {
            if *b {
                reply.int(1)
            } else {
                reply.null()
            }
        }
        Value::Boolean(b) => reply.boolean(*b),
        Value::Integer(n) => reply.int(*n),
        Value::Number(n) => reply.int(number_to_int(*n)),
        Value::Table(t) => table_to_reply(t, resp, reply, depth + 1),
        _ => reply.null(),
    }
}

/// Lua number to integer reply: truncated toward zero, as C's `(long long)` cast.
fn number_to_int(n: f64) -> i64 {
    n as i64
}

fn table_to_reply(t: &Table, resp: u8, reply: &mut Reply<'_>, depth: usize) {
    if let Ok(Value::String(err)) = t.raw_get::<Value>("err") {
        reply.raw(&error_line(&err.as_bytes()));
        return;
    }
    if let Ok(Value::String(ok)) = t.raw_get::<Value>("ok") {
        reply.simple(&String::from_utf8_lossy(&status_text(&ok.as_bytes())));
        return;
    }
    if resp == 3 && resp3_table_to_reply(t, reply, depth) {
        return;
    }
    let mut items = Vec::new();
    for i in 1.. {
        match t.raw_get::<Value>(i) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(v) => items.push(v),
        }
    }
    reply.array(items.len());
    for v in &items {
        write_value(v, resp, reply, depth);
    }
}

/// The RESP3-only tables (`double`, `map`, `set`, `big_number`,
/// `verbatim_string`); false if `t` is none of them.
fn resp3_table_to_reply(t: &Table, reply: &mut Reply<'_>, depth: usize) -> bool {
    if let Ok(Value::Number(d)) = t.raw_get::<Value>("double") {
        reply.double(d);
    } else if let Ok(Value::Integer(d)) = t.raw_get::<Value>("double") {
        reply.double(d as f64);
    } else if let Ok(Value::Table(map)) = t.raw_get::<Value>("map") {
        let pairs: Vec<(Value, Value)> = map.pairs::<Value, Value>().flatten().collect();
        reply.map(pairs.len());
        for (k, v) in &pairs {
            write_value(k, 3, reply, depth);
            write_value(v, 3, reply, depth);
        }
    } else if let Ok(Value::Table(set)) = t.raw_get::<Value>("set") {
        let members: Vec<Value> = set
            .pairs::<Value, Value>()
            .flatten()
            .map(|(k, _)| k)
            .collect();
        reply.set(members.len());
        for k in &members {
            write_value(k, 3, reply, depth);
        }
    } else if let Ok(Value::String(big)) = t.raw_get::<Value>("big_number") {
        let text = status_text(&big.as_bytes());
        if reply.proto == Protocol::Resp3 {
            reply.raw(&[b"(", text.as_slice(), b"\r\n"].concat());
        } else {
            reply.bulk(&text);
        }
    } else if let Ok(Value::Table(v)) = t.raw_get::<Value>("verbatim_string") {
        let format = v.raw_get::<mlua::String>("format");
        let text = v.raw_get::<mlua::String>("string");
        let (Ok(format), Ok(text)) = (format, text) else {
            return false;
        };
        reply.verbatim(&format.to_string_lossy(), &text.as_bytes());
    } else {
        return false;
    }
    true
}

/// A status line keeps no CR or LF (Redis replaces them with spaces).
fn status_text(bytes: &[u8]) -> Vec<u8> {
    bytes
        .iter()
        .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b })
        .collect()
}

/// `-<err>\r\n`, the text made safe for one line.
pub(super) fn error_line(err: &[u8]) -> Vec<u8> {
    let mut line = Vec::with_capacity(err.len() + 3);
    line.push(b'-');
    line.extend(status_text(err));
    line.extend_from_slice(b"\r\n");
    line
}
