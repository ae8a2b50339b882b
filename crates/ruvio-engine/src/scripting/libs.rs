//! The libraries Redis gives scripts beyond Lua's own: `cjson` (encoder as
//! lua-cjson prints, decoder in `cjson_decode`) and `bit` (LuaBitOp: 32-bit
//! operations on numbers).

use mlua::{Lua, MultiValue, Table, Value};

use super::luaaux;

/// `cjson.encode`, `cjson.decode` and `cjson.null`.
pub(super) fn cjson(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "encode",
        lua.create_function(|lua, args: MultiValue| {
            let v = one_argument(lua, args)?;
            let mut out = Vec::new();
            encode(&v, &mut out, 0).map_err(|e| luaaux::lift(lua, e))?;
            lua.create_string(out)
        })?,
    )?;
    t.set(
        "decode",
        lua.create_function(|lua, args: MultiValue| {
            let s = luaaux::check_string(lua, &[one_argument(lua, args)?], 1)?;
            super::cjson_decode::decode(lua, &s)
        })?,
    )?;
    t.set("null", Value::NULL)?;
    Ok(t)
}

/// lua-cjson takes exactly one argument (`expected 1 argument` otherwise).
fn one_argument(lua: &Lua, args: MultiValue) -> mlua::Result<Value> {
    if args.len() != 1 {
        return Err(luaaux::arg_error(lua, 1, "expected 1 argument"));
    }
    Ok(args.into_iter().next().unwrap_or(Value::Nil))
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

/// LuaBitOp's normalisation of a number to a signed 32-bit integer.
fn tobit(n: f64) -> i32 {
    // Add 2^52 + 2^51 and take the low word, as LuaBitOp does for doubles.
    let biased = n + 6_755_399_441_055_744.0;
    biased.to_bits() as u32 as i32
}

/// LuaBitOp's `barg`: argument `i` (1-based) as a 32-bit integer; anything but a
/// number (or a numeric string) is `number expected`.
fn barg(lua: &Lua, args: &[Value], i: usize) -> mlua::Result<i32> {
    luaaux::check_number(lua, args, i).map(tobit)
}

/// A LuaBitOp function of its arguments.
fn bit_fn(lua: &Lua, f: fn(&Lua, &[Value]) -> mlua::Result<i32>) -> mlua::Result<mlua::Function> {
    lua.create_function(move |lua, args: MultiValue| {
        let args: Vec<Value> = args.into_iter().collect();
        f(lua, &args)
    })
}

/// `band`, `bor`, `bxor`: the first argument, then the others from the last down
/// (LuaBitOp's order, which decides which bad argument is reported).
fn fold_args(lua: &Lua, args: &[Value], op: fn(i32, i32) -> i32) -> mlua::Result<i32> {
    let mut acc = barg(lua, args, 1)?;
    for i in (2..=args.len()).rev() {
        acc = op(acc, barg(lua, args, i)?);
    }
    Ok(acc)
}

/// A shift or rotation: the value, then the count (low 5 bits).
fn shift_args(lua: &Lua, args: &[Value]) -> mlua::Result<(i32, u32)> {
    let n = barg(lua, args, 1)?;
    let s = barg(lua, args, 2)? & 31;
    Ok((n, s as u32))
}

/// `bit.tobit`, `bnot`, `band`, `bor`, `bxor`, `lshift`, `rshift`, `arshift`,
/// `rol`, `ror`, `bswap`, `tohex`, with LuaBitOp's argument errors.
pub(super) fn bit(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("tobit", bit_fn(lua, |lua, a| barg(lua, a, 1))?)?;
    t.set("bnot", bit_fn(lua, |lua, a| Ok(!barg(lua, a, 1)?))?)?;
    t.set(
        "band",
        bit_fn(lua, |lua, a| fold_args(lua, a, |x, y| x & y))?,
    )?;
    t.set(
        "bor",
        bit_fn(lua, |lua, a| fold_args(lua, a, |x, y| x | y))?,
    )?;
    t.set(
        "bxor",
        bit_fn(lua, |lua, a| fold_args(lua, a, |x, y| x ^ y))?,
    )?;
    t.set(
        "lshift",
        bit_fn(lua, |lua, a| {
            let (n, s) = shift_args(lua, a)?;
            Ok(((n as u32) << s) as i32)
        })?,
    )?;
    t.set(
        "rshift",
        bit_fn(lua, |lua, a| {
            let (n, s) = shift_args(lua, a)?;
            Ok(((n as u32) >> s) as i32)
        })?,
    )?;
    t.set(
        "arshift",
        bit_fn(lua, |lua, a| {
            let (n, s) = shift_args(lua, a)?;
            Ok(n >> s)
        })?,
    )?;
    t.set(
        "rol",
        bit_fn(lua, |lua, a| {
            let (n, s) = shift_args(lua, a)?;
            Ok((n as u32).rotate_left(s) as i32)
        })?,
    )?;
    t.set(
        "ror",
        bit_fn(lua, |lua, a| {
            let (n, s) = shift_args(lua, a)?;
            Ok((n as u32).rotate_right(s) as i32)
        })?,
    )?;
    t.set(
        "bswap",
        bit_fn(lua, |lua, a| Ok(barg(lua, a, 1)?.swap_bytes()))?,
    )?;
    t.set(
        "tohex",
        lua.create_function(|lua, args: MultiValue| {
            let args: Vec<Value> = args.into_iter().collect();
            let v = barg(lua, &args, 1)? as u32;
            let d = if args.len() < 2 {
                8
            } else {
                barg(lua, &args, 2)?
            };
            let (upper, width) = if d < 0 {
                (true, (d.unsigned_abs()).min(8) as usize)
            } else {
                (false, d.min(8) as usize)
            };
            let s = format!("{v:08x}");
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
