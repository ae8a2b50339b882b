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
            encode(&v, &mut out).map_err(|e| luaaux::lift(lua, e))?;
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

/// lua-cjson's default `encode_max_depth`.
const DEPTH_MAX: usize = 1000;
/// lua-cjson's sparse array rule: an array whose largest index is above this many
/// times its items (and above `SPARSE_SAFE`) is refused.
const SPARSE_RATIO: i32 = 2;
const SPARSE_SAFE: i32 = 10;

/// A table being written.
enum Open {
    Array {
        table: Table,
        len: i32,
        next: i32,
    },
    Object {
        pairs: Vec<(Value, Value)>,
        next: usize,
    },
}

/// `json_append_data` for `v` as lua-cjson 2.1 encodes it. Iterative (nesting goes
/// to 1000 tables, too deep to recurse on a shard's stack); pairs are taken in
/// `next` order as the C code walks them.
fn encode(v: &Value, out: &mut Vec<u8>) -> mlua::Result<()> {
    let mut open: Vec<Open> = Vec::new();
    let mut current = Some(v.clone());
    loop {
        match current.take() {
            Some(Value::Table(table)) => {
                let depth = open.len() + 1;
                if depth > DEPTH_MAX {
                    return Err(mlua::Error::runtime(format!(
                        "Cannot serialise, excessive nesting ({depth})"
                    )));
                }
                let len = array_length(&table)?;
                if len > 0 {
                    out.push(b'[');
                    open.push(Open::Array {
                        table,
                        len,
                        next: 1,
                    });
                } else {
                    out.push(b'{');
                    let pairs = table.pairs::<Value, Value>().collect::<mlua::Result<_>>()?;
                    open.push(Open::Object { pairs, next: 0 });
                }
            }
            Some(scalar) => encode_scalar(&scalar, out)?,
            None => {}
        }
        let Some(top) = open.last_mut() else {
            return Ok(());
        };
        match top {
            Open::Array { table, len, next } if *next <= *len => {
                if *next > 1 {
                    out.push(b',');
                }
                current = Some(table.raw_get::<Value>(*next)?);
                *next += 1;
            }
            Open::Object { pairs, next } if *next < pairs.len() => {
                if *next > 0 {
                    out.push(b',');
                }
                let (k, v) = &pairs[*next];
                encode_key(k, out)?;
                current = Some(v.clone());
                *next += 1;
            }
            Open::Array { .. } => {
                out.push(b']');
                open.pop();
            }
            Open::Object { .. } => {
                out.push(b'}');
                open.pop();
            }
        }
    }
}

/// A value that is not a table.
fn encode_scalar(v: &Value, out: &mut Vec<u8>) -> mlua::Result<()> {
    match v {
        Value::String(s) => encode_string(&s.as_bytes(), out),
        Value::Integer(n) => encode_number(*n as f64, out)?,
        Value::Number(n) => encode_number(*n, out)?,
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        other => return Err(unsupported(other, "type not supported")),
    }
    Ok(())
}

/// An object key: a string, or a number written as a string.
fn encode_key(k: &Value, out: &mut Vec<u8>) -> mlua::Result<()> {
    match k {
        Value::Integer(_) | Value::Number(_) => {
            out.push(b'"');
            encode_scalar(k, out)?;
            out.extend_from_slice(b"\":");
        }
        Value::String(s) => {
            encode_string(&s.as_bytes(), out);
            out.push(b':');
        }
        _ => return Err(unsupported(k, "table key must be a number or string")),
    }
    Ok(())
}

/// `json_encode_exception`: `Cannot serialise <type>: <reason>`.
fn unsupported(v: &Value, reason: &str) -> mlua::Error {
    let type_name = luaaux::type_name(Some(v));
    mlua::Error::runtime(format!("Cannot serialise {type_name}: {reason}"))
}

/// `json_append_number`: `%.14g`; NaN and infinities are refused.
fn encode_number(n: f64, out: &mut Vec<u8>) -> mlua::Result<()> {
    if !n.is_finite() {
        return Err(unsupported(&Value::Number(n), "must not be NaN or Inf"));
    }
    out.extend_from_slice(format_g14(n).as_bytes());
    Ok(())
}

/// C's `%.14g`: 14 significant digits, the shorter of fixed and exponent forms
/// as C chooses, trailing zeros dropped.
fn format_g14(n: f64) -> String {
    const DIGITS: i32 = 14;
    let scientific = format!("{:.*e}", (DIGITS - 1) as usize, n);
    let (mantissa, exp) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..DIGITS).contains(&exp) {
        let mantissa = trim_fraction(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    } else {
        let decimals = (DIGITS - 1 - exp).max(0) as usize;
        trim_fraction(&format!("{n:.decimals$}")).to_string()
    }
}

/// Drop a fraction's trailing zeros (and the point when nothing is left of it).
fn trim_fraction(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// C's `(int)d` on x86-64 (`cvttsd2si`): `INT_MIN` out of range.
fn c_int(d: f64) -> i32 {
    if d.is_nan() || d <= i32::MIN as f64 - 1.0 || d >= i32::MAX as f64 + 1.0 {
        return i32::MIN;
    }
    d as i32
}

/// `lua_array_length`: the largest index when every key is a number that is an
/// integer >= 1 (-1 otherwise: an object), refusing excessively sparse arrays. As
/// in the C code the largest index is kept in an `int`.
fn array_length(t: &Table) -> mlua::Result<i32> {
    let (mut max, mut items) = (0i32, 0i32);
    for pair in t.pairs::<Value, Value>() {
        let k = match pair?.0 {
            Value::Integer(i) => i as f64,
            Value::Number(n) => n,
            _ => return Ok(-1),
        };
        if k == 0.0 || k.floor() != k || k < 1.0 {
            return Ok(-1);
        }
        if k > max as f64 {
            max = c_int(k);
        }
        items = items.wrapping_add(1);
    }
    if max > items.wrapping_mul(SPARSE_RATIO) && max > SPARSE_SAFE {
        return Err(unsupported(
            &Value::Table(t.clone()),
            "excessively sparse array",
        ));
    }
    Ok(max)
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
