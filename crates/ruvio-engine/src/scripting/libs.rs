//! The libraries Redis gives scripts beyond Lua's own: `cjson` (encode/decode
//! over serde_json's parser, encoder as lua-cjson prints) and `bit` (LuaBitOp:
//! 32-bit operations on numbers).

use mlua::{Lua, Table, Value, Variadic};

/// `cjson.encode`, `cjson.decode` and `cjson.null`.
pub(super) fn cjson(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "encode",
        lua.create_function(|lua, v: Value| {
            let mut out = Vec::new();
            encode(&v, &mut out, 0).map_err(|e| super::luaaux::lift(lua, e))?;
            lua.create_string(out)
        })?,
    )?;
    t.set(
        "decode",
        lua.create_function(|lua, s: mlua::String| {
            let json: serde_json::Value = serde_json::from_slice(&s.as_bytes()).map_err(|e| {
                mlua::Error::runtime(format!("Expected value but found invalid token: {e}"))
            })?;
            decode(lua, &json)
        })?,
    )?;
    t.set("null", Value::NULL)?;
    Ok(t)
}

/// lua-cjson's default nesting limit.
const DEPTH_MAX: usize = 1000;

fn encode(v: &Value, out: &mut Vec<u8>, depth: usize) -> mlua::Result<()> {
    match v {
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Integer(n) => out.extend_from_slice(n.to_string().as_bytes()),
        Value::Number(n) => encode_number(*n, out)?,
        Value::String(s) => encode_string(&s.as_bytes(), out),
        Value::Table(t) => {
            if depth >= DEPTH_MAX {
                return Err(mlua::Error::runtime(
                    "Cannot serialise, excessive nesting (1001)",
                ));
            }
            encode_table(t, out, depth + 1)?
        }
        other => {
            return Err(mlua::Error::runtime(format!(
                "Cannot serialise {}: type not supported",
                other.type_name()
            )))
        }
    }
    Ok(())
}

/// Numbers as lua-cjson prints them (`%.14g`).
fn encode_number(n: f64, out: &mut Vec<u8>) -> mlua::Result<()> {
    if !n.is_finite() {
        return Err(mlua::Error::runtime(
            "Cannot serialise number: must not be NaN or Inf",
        ));
    }
    if n.fract() == 0.0 && n.abs() < 1e14 {
        out.extend_from_slice((n as i64).to_string().as_bytes());
    } else {
        out.extend_from_slice(format_g14(n).as_bytes());
    }
    Ok(())
}

/// C's `%.14g`.
fn format_g14(n: f64) -> String {
    let exp = n.abs().log10().floor() as i32;
    if !(-4..14).contains(&exp) {
        let s = format!("{:.13e}", n);
        let (mantissa, e) = s.split_once('e').unwrap_or((&s, "0"));
        let mantissa = mantissa.trim_end_matches('0').trim_end_matches('.');
        let e: i32 = e.parse().unwrap_or(0);
        format!("{mantissa}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
    } else {
        let decimals = (13 - exp).max(0) as usize;
        let s = format!("{:.*}", decimals, n);
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    }
}

fn encode_string(s: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &b in s {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            0..=0x1f | 0x7f => out.extend_from_slice(format!("\\u{b:04x}").as_bytes()),
            _ => out.push(b),
        }
    }
    out.push(b'"');
}

/// A table with only positive integer keys is an array (holes as null), any
/// other non-empty table an object; an empty table is `{}` (lua-cjson's default).
fn encode_table(t: &Table, out: &mut Vec<u8>, depth: usize) -> mlua::Result<()> {
    let pairs: Vec<(Value, Value)> = t.pairs::<Value, Value>().collect::<mlua::Result<_>>()?;
    let array_len = pairs.iter().try_fold(0usize, |max, (k, _)| match k {
        Value::Integer(i) if *i >= 1 => Some(max.max(*i as usize)),
        Value::Number(n) if *n >= 1.0 && n.fract() == 0.0 => Some(max.max(*n as usize)),
        _ => None,
    });
    match array_len {
        Some(n) if n > 0 && n <= pairs.len().max(1) * 2 + 10 => {
            out.push(b'[');
            for i in 1..=n {
                if i > 1 {
                    out.push(b',');
                }
                encode(&t.raw_get::<Value>(i)?, out, depth)?;
            }
            out.push(b']');
        }
        Some(n) if n > 0 => {
            return Err(mlua::Error::runtime(
                "Cannot serialise table: excessively sparse array",
            ))
        }
        _ => {
            out.push(b'{');
            for (i, (k, v)) in pairs.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                match k {
                    Value::String(s) => encode_string(&s.as_bytes(), out),
                    Value::Integer(_) | Value::Number(_) => {
                        let mut key = Vec::new();
                        encode(k, &mut key, depth)?;
                        encode_string(&key, out);
                    }
                    _ => {
                        return Err(mlua::Error::runtime(
                            "Cannot serialise table: table key must be a number or string",
                        ))
                    }
                }
                out.push(b':');
                encode(v, out, depth)?;
            }
            out.push(b'}');
        }
    }
    Ok(())
}

fn decode(lua: &Lua, json: &serde_json::Value) -> mlua::Result<Value> {
    Ok(match json {
        serde_json::Value::Null => Value::NULL,
        serde_json::Value::Bool(b) => Value::Boolean(*b),
        serde_json::Value::Number(n) => Value::Number(n.as_f64().unwrap_or(0.0)),
        serde_json::Value::String(s) => Value::String(lua.create_string(s)?),
        serde_json::Value::Array(items) => {
            let t = lua.create_table()?;
            for (i, item) in items.iter().enumerate() {
                t.raw_set(i + 1, decode(lua, item)?)?;
            }
            Value::Table(t)
        }
        serde_json::Value::Object(map) => {
            let t = lua.create_table()?;
            for (k, v) in map {
                t.raw_set(k.as_str(), decode(lua, v)?)?;
            }
            Value::Table(t)
        }
    })
}

/// LuaBitOp's normalisation of a number to a signed 32-bit integer.
fn tobit(n: f64) -> i32 {
    // Add 2^52 + 2^51 and take the low word, as LuaBitOp does for doubles.
    let biased = n + 6_755_399_441_055_744.0;
    biased.to_bits() as u32 as i32
}

/// `bit.tobit`, `bnot`, `band`, `bor`, `bxor`, `lshift`, `rshift`, `arshift`,
/// `rol`, `ror`, `bswap`, `tohex`.
pub(super) fn bit(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("tobit", lua.create_function(|_, n: f64| Ok(tobit(n)))?)?;
    t.set("bnot", lua.create_function(|_, n: f64| Ok(!tobit(n)))?)?;
    t.set(
        "band",
        lua.create_function(|_, ns: Variadic<f64>| {
            Ok(ns.iter().fold(-1i32, |a, &n| a & tobit(n)))
        })?,
    )?;
    t.set(
        "bor",
        lua.create_function(|_, ns: Variadic<f64>| Ok(ns.iter().fold(0i32, |a, &n| a | tobit(n))))?,
    )?;
    t.set(
        "bxor",
        lua.create_function(|_, ns: Variadic<f64>| Ok(ns.iter().fold(0i32, |a, &n| a ^ tobit(n))))?,
    )?;
    t.set(
        "lshift",
        lua.create_function(|_, (n, s): (f64, f64)| {
            Ok(((tobit(n) as u32) << (tobit(s) & 31)) as i32)
        })?,
    )?;
    t.set(
        "rshift",
        lua.create_function(|_, (n, s): (f64, f64)| {
            Ok(((tobit(n) as u32) >> (tobit(s) & 31)) as i32)
        })?,
    )?;
    t.set(
        "arshift",
        lua.create_function(|_, (n, s): (f64, f64)| Ok(tobit(n) >> (tobit(s) & 31)))?,
    )?;
    t.set(
        "rol",
        lua.create_function(|_, (n, s): (f64, f64)| {
            Ok((tobit(n) as u32).rotate_left((tobit(s) & 31) as u32) as i32)
        })?,
    )?;
    t.set(
        "ror",
        lua.create_function(|_, (n, s): (f64, f64)| {
            Ok((tobit(n) as u32).rotate_right((tobit(s) & 31) as u32) as i32)
        })?,
    )?;
    t.set(
        "bswap",
        lua.create_function(|_, n: f64| Ok(tobit(n).swap_bytes()))?,
    )?;
    t.set(
        "tohex",
        lua.create_function(|_, (n, digits): (f64, Option<f64>)| {
            let d = digits.map(tobit).unwrap_or(8);
            let (upper, width) = if d < 0 {
                (true, (-d).min(8) as usize)
            } else {
                (false, d.min(8) as usize)
            };
            let v = tobit(n) as u32 as u64;
            let s = format!("{:08x}", v);
            let s = &s[8 - width..];
            Ok(if upper {
                s.to_ascii_uppercase()
            } else {
                s.to_string()
            })
        })?,
    )?;
    Ok(t)
}
