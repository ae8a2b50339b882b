//! `cmsgpack`: MessagePack for scripts, as Redis' lua-cmsgpack 0.4 encodes and
//! decodes (BullMQ packs job options with it, so its bytes must be Redis' bytes).
//!
//! The wire format's primitives come from `rmp` (markers, the smallest integer
//! and length encodings, which are lua-cmsgpack's choices too); this module keeps
//! lua-cmsgpack's own rules on top:
//! - a number that is an int64 encodes as the smallest integer; any other as a
//!   float32 when that is exact, else a float64;
//! - a table whose keys are exactly 1..n is an array (an empty table too), any other
//!   a map in `next` order; a table nested 16 deep packs as nil (cycles end);
//!   functions, userdata and the like pack as nil;
//! - decoding turns every integer into a Lua number (a uint64 past 2^63 wraps
//!   negative, as lua-cmsgpack's `lua_pushinteger` does), refuses bin and ext types
//!   (`Bad data format in input.`), and counts the C stack slots lua-cmsgpack would
//!   use, so deep nesting or thousands of values fail with its `stack overflow`
//!   errors; the decoder is iterative, so nesting never recurses in Rust.

use mlua::{Lua, MultiValue, Table, Value};
use rmp::Marker;

use super::luaaux::{self, CStack, C_STACK_SLOTS_MAX};

/// lua-cmsgpack's `LUACMSGPACK_MAX_NESTING`: a table this deep packs as nil.
const NESTING_MAX: usize = 16;

/// The `cmsgpack` table: `pack`, `unpack`, `unpack_one`, `unpack_limit` and the
/// module's metadata fields.
pub(super) fn library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("pack", lua.create_function(pack)?)?;
    t.set(
        "unpack",
        lua.create_function(|lua, args: MultiValue| {
            let args: Vec<Value> = args.into_iter().collect();
            unpack_full(lua, &args, args.len(), 0, 0)
        })?,
    )?;
    t.set(
        "unpack_one",
        lua.create_function(|lua, args: MultiValue| {
            let args: Vec<Value> = args.into_iter().collect();
            let offset = luaaux::opt_integer(lua, &args, 2, 0)?;
            unpack_full(lua, &args[..args.len().min(1)], 1, 1, offset)
        })?,
    )?;
    t.set(
        "unpack_limit",
        lua.create_function(|lua, args: MultiValue| {
            let args: Vec<Value> = args.into_iter().collect();
            let limit = luaaux::check_integer(lua, &args, 2)?;
            let offset = luaaux::opt_integer(lua, &args, 3, 0)?;
            unpack_full(lua, &args[..args.len().min(1)], 1, limit, offset)
        })?,
    )?;
    t.set("_NAME", "cmsgpack")?;
    t.set("_VERSION", "lua-cmsgpack 0.4.0")?;
    t.set("_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo")?;
    t.set("_DESCRIPTION", "MessagePack C implementation for Lua")?;
    Ok(t)
}

/// `cmsgpack.pack(v1, v2, ...)`: the encodings of every argument, concatenated.
fn pack(lua: &Lua, args: MultiValue) -> mlua::Result<mlua::String> {
    if args.is_empty() {
        return Err(luaaux::arg_error(lua, 0, "MessagePack pack needs input."));
    }
    // lua-cmsgpack asks for as many free slots as it has arguments.
    if args.len() * 2 > C_STACK_SLOTS_MAX {
        return Err(luaaux::arg_error(
            lua,
            0,
            "Too many arguments for MessagePack pack.",
        ));
    }
    let mut out = Vec::new();
    for v in args.iter() {
        encode(v, 0, &mut out)?;
    }
    lua.create_string(out)
}

/// A Lua number as lua-cmsgpack sees it (`IS_INT64_EQUIVALENT`).
fn as_int64(n: f64) -> Option<i64> {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    (n.is_finite() && n.trunc() == n && (-TWO_63..TWO_63).contains(&n)).then_some(n as i64)
}

fn encode(v: &Value, level: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    match v {
        Value::String(s) => {
            let s = s.as_bytes();
            written(rmp::encode::write_str_len(out, s.len() as u32))?;
            out.extend_from_slice(&s);
        }
        Value::Boolean(b) => written(rmp::encode::write_bool(out, *b))?,
        Value::Integer(i) => written(rmp::encode::write_sint(out, *i))?,
        Value::Number(n) => match as_int64(*n) {
            Some(i) => written(rmp::encode::write_sint(out, i))?,
            None if (*n as f32) as f64 == *n => written(rmp::encode::write_f32(out, *n as f32))?,
            None => written(rmp::encode::write_f64(out, *n))?,
        },
        Value::Table(t) if level < NESTING_MAX => encode_table(t, level, out)?,
        _ => written(rmp::encode::write_nil(out))?,
    }
    Ok(())
}

/// Writing to a `Vec` cannot fail; rmp's writers still return a `Result`.
fn written<T, E: std::fmt::Display>(r: Result<T, E>) -> mlua::Result<()> {
    r.map(|_| ())
        .map_err(|e| mlua::Error::runtime(e.to_string()))
}

/// lua-cmsgpack's `table_is_an_array`: every key a number that is an int in
/// 1..=i32::MAX, and the largest equal to the count (so 1..n, no holes).
fn array_length(t: &Table) -> mlua::Result<Option<usize>> {
    let (mut count, mut max) = (0usize, 0usize);
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair?;
        let n = match k {
            Value::Integer(i) => i as f64,
            Value::Number(n) => n,
            _ => return Ok(None),
        };
        if n <= 0.0 || n > i32::MAX as f64 || n.trunc() != n {
            return Ok(None);
        }
        max = max.max(n as usize);
        count += 1;
    }
    Ok((max == count).then_some(count))
}

fn encode_table(t: &Table, level: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    if let Some(len) = array_length(t)? {
        written(rmp::encode::write_array_len(out, len as u32))?;
        for i in 1..=len {
            // lua_gettable: an __index metamethod answers for a hole, as in Redis.
            encode(&t.get::<Value>(i)?, level + 1, out)?;
        }
        return Ok(());
    }
    let pairs: Vec<(Value, Value)> = t.pairs::<Value, Value>().collect::<mlua::Result<_>>()?;
    written(rmp::encode::write_map_len(out, pairs.len() as u32))?;
    for (k, v) in &pairs {
        encode(k, level + 1, out)?;
        encode(v, level + 1, out)?;
    }
    Ok(())
}

/// lua-cmsgpack's `mp_unpack_full`: decode up to `limit` objects from `offset`
/// (both 0: every object, and no offset in the results). `base` is the number of
/// arguments left on the C function's stack (its slot count starts there).
fn unpack_full(
    lua: &Lua,
    args: &[Value],
    base: usize,
    limit: i64,
    offset: i64,
) -> mlua::Result<MultiValue> {
    let data = luaaux::check_string(lua, args, 1)?;
    let len = data.len();
    if offset < 0 || limit < 0 {
        return Err(luaaux::error(
            lua,
            format!(
                "Invalid request to unpack with offset of {} and limit of {}.",
                offset as i32, len as i32
            ),
        ));
    }
    if offset as u64 > len as u64 {
        return Err(luaaux::error(
            lua,
            format!(
                "Start offset {} greater than input length {}.",
                offset as i32, len as i32
            ),
        ));
    }
    let decode_all = limit == 0 && offset == 0;
    let limit = if decode_all { i32::MAX as i64 } else { limit };
    let mut cursor = Cursor {
        data: &data[offset as usize..],
    };
    let mut stack = CStack { top: base };
    let mut values = Vec::new();
    while !cursor.data.is_empty() && (values.len() as i64) < limit {
        match decode(lua, &mut cursor, &mut stack) {
            Ok(v) => values.push(v),
            Err(Failure::Lua(e)) => return Err(e),
            Err(Failure::MissingBytes) => {
                return Err(luaaux::error(lua, "Missing bytes in input."))
            }
            Err(Failure::BadFormat) => return Err(luaaux::error(lua, "Bad data format in input.")),
        }
    }
    if !decode_all {
        stack.check(lua, 1, "in function mp_unpack_full")?;
        let next = if cursor.data.is_empty() {
            -1
        } else {
            (len - cursor.data.len()) as i64
        };
        values.insert(0, Value::Integer(next));
    }
    Ok(MultiValue::from_iter(values))
}

/// Why decoding stopped.
enum Failure {
    /// `MP_CUR_ERROR_EOF`.
    MissingBytes,
    /// `MP_CUR_ERROR_BADFMT`: a type lua-cmsgpack does not know (bin, ext, 0xc1).
    BadFormat,
    /// An error lua-cmsgpack raises at once (stack overflow, a nil table key).
    Lua(mlua::Error),
}

impl From<mlua::Error> for Failure {
    fn from(e: mlua::Error) -> Self {
        Failure::Lua(e)
    }
}

/// The bytes not decoded yet.
struct Cursor<'a> {
    data: &'a [u8],
}

impl<'a> Cursor<'a> {
    /// `mp_cur_need` then consume: the next `n` bytes.
    fn take(&mut self, n: usize) -> Result<&'a [u8], Failure> {
        if self.data.len() < n {
            return Err(Failure::MissingBytes);
        }
        let (head, rest) = self.data.split_at(n);
        self.data = rest;
        Ok(head)
    }

    fn take_array<const N: usize>(&mut self) -> Result<[u8; N], Failure> {
        let bytes = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(bytes);
        Ok(a)
    }

    fn u8(&mut self) -> Result<u8, Failure> {
        Ok(self.take_array::<1>()?[0])
    }

    fn u16(&mut self) -> Result<u16, Failure> {
        Ok(u16::from_be_bytes(self.take_array()?))
    }

    fn u32(&mut self) -> Result<u32, Failure> {
        Ok(u32::from_be_bytes(self.take_array()?))
    }

    fn u64(&mut self) -> Result<u64, Failure> {
        Ok(u64::from_be_bytes(self.take_array()?))
    }
}

/// What the next encoded item is.
enum Item {
    Scalar(Value),
    Array(usize),
    Map(usize),
}

/// A container being filled.
enum Open {
    Array {
        table: Table,
        next_index: usize,
        left: usize,
    },
    Map {
        table: Table,
        key: Option<Value>,
        left: usize,
    },
}

/// Decode one object (iteratively: containers are kept in `open`).
fn decode(lua: &Lua, cursor: &mut Cursor<'_>, stack: &mut CStack) -> Result<Value, Failure> {
    let mut open: Vec<Open> = Vec::new();
    loop {
        if cursor.data.is_empty() {
            return Err(Failure::MissingBytes);
        }
        stack.check(
            lua,
            1,
            "too many return values at once; use unpack_one or unpack_limit instead.",
        )?;
        let mut value = match item(lua, cursor)? {
            Item::Scalar(v) => {
                stack.top += 1;
                v
            }
            Item::Array(len) => {
                stack.top += 1;
                stack.check(lua, 1, "in function mp_decode_to_lua_array")?;
                let table = lua.create_table()?;
                if len > 0 {
                    open.push(Open::Array {
                        table,
                        next_index: 1,
                        left: len,
                    });
                    stack.top += 1; // the index pushed before each element
                    continue;
                }
                Value::Table(table)
            }
            Item::Map(len) => {
                stack.top += 1;
                let table = lua.create_table()?;
                if len > 0 {
                    open.push(Open::Map {
                        table,
                        key: None,
                        left: len,
                    });
                    continue;
                }
                Value::Table(table)
            }
        };
        // Hand the finished value to its container; a container that is full is
        // finished in turn.
        loop {
            value = match open.last_mut() {
                None => return Ok(value),
                Some(Open::Array {
                    table,
                    next_index,
                    left,
                }) => {
                    table.raw_set(*next_index, value)?;
                    stack.top -= 2;
                    *next_index += 1;
                    *left -= 1;
                    if *left > 0 {
                        stack.top += 1;
                        break;
                    }
                    Value::Table(table.clone())
                }
                Some(Open::Map { table, key, left }) => {
                    let Some(k) = key.take() else {
                        *key = Some(value);
                        break;
                    };
                    set_field(lua, table, k, value)?;
                    stack.top -= 2;
                    *left -= 1;
                    if *left > 0 {
                        break;
                    }
                    Value::Table(table.clone())
                }
            };
            open.pop();
        }
    }
}

/// `lua_settable` on a fresh table: a nil or NaN key is Lua's error.
fn set_field(lua: &Lua, table: &Table, key: Value, value: Value) -> Result<(), Failure> {
    match key {
        Value::Nil => Err(luaaux::raise(lua, "table index is nil").into()),
        Value::Number(n) if n.is_nan() => Err(luaaux::raise(lua, "table index is NaN").into()),
        key => Ok(table.raw_set(key, value)?),
    }
}

/// Read the next item's marker and, for a scalar, its value.
fn item(lua: &Lua, cursor: &mut Cursor<'_>) -> Result<Item, Failure> {
    let marker = Marker::from_u8(cursor.u8()?);
    let number = |n: f64| -> Result<Item, Failure> { Ok(Item::Scalar(Value::Number(n))) };
    match marker {
        Marker::FixPos(n) => number(n as f64),
        Marker::FixNeg(n) => number(n as f64),
        Marker::U8 => number(cursor.u8()? as f64),
        Marker::U16 => number(cursor.u16()? as f64),
        Marker::U32 => number(cursor.u32()? as f64),
        // lua_pushunsigned is lua_pushinteger: past 2^63 the value wraps negative.
        Marker::U64 => number(cursor.u64()? as i64 as f64),
        Marker::I8 => number(cursor.u8()? as i8 as f64),
        Marker::I16 => number(cursor.u16()? as i16 as f64),
        Marker::I32 => number(cursor.u32()? as i32 as f64),
        Marker::I64 => number(cursor.u64()? as i64 as f64),
        Marker::Null => Ok(Item::Scalar(Value::Nil)),
        Marker::True => Ok(Item::Scalar(Value::Boolean(true))),
        Marker::False => Ok(Item::Scalar(Value::Boolean(false))),
        Marker::F32 => number(f32::from_bits(cursor.u32()?) as f64),
        Marker::F64 => number(f64::from_bits(cursor.u64()?)),
        Marker::FixStr(n) => string(lua, cursor, n as usize),
        Marker::Str8 => {
            let n = cursor.u8()? as usize;
            string(lua, cursor, n)
        }
        Marker::Str16 => {
            let n = cursor.u16()? as usize;
            string(lua, cursor, n)
        }
        Marker::Str32 => {
            let n = cursor.u32()? as usize;
            string(lua, cursor, n)
        }
        Marker::FixArray(n) => Ok(Item::Array(n as usize)),
        Marker::Array16 => Ok(Item::Array(cursor.u16()? as usize)),
        Marker::Array32 => Ok(Item::Array(cursor.u32()? as usize)),
        Marker::FixMap(n) => Ok(Item::Map(n as usize)),
        Marker::Map16 => Ok(Item::Map(cursor.u16()? as usize)),
        Marker::Map32 => Ok(Item::Map(cursor.u32()? as usize)),
        _ => Err(Failure::BadFormat),
    }
}

fn string(lua: &Lua, cursor: &mut Cursor<'_>, len: usize) -> Result<Item, Failure> {
    let bytes = cursor.take(len)?;
    Ok(Item::Scalar(Value::String(lua.create_string(bytes)?)))
}
