//! `struct`: Roberto Ierusalimschy's struct library as Redis ships it
//! (`struct.pack`, `struct.unpack`, `struct.size`), on an x86-64 build: `l`, `L`
//! and `T` are 8 bytes, `i` 4 by default, native order little endian, the largest
//! alignment 8. Format letters: `>` `<` endianness, `![n]` alignment, `x` a pad
//! byte, `b B h H l L T i[n] I[n]` integers, `f d` floats, `c[n]` fixed strings
//! (`c0`: the whole string when packing, the previous number as length when
//! unpacking), `s` zero-terminated strings, spaces ignored. The error texts are the
//! library's (`luaL_error`, `luaL_argerror`), with the fixes Redis 7 ships in
//! `unpack` (an offset below 1 is refused, `c0` needs a previous result, room for
//! each result is checked with the next position's).

use mlua::{Lua, MultiValue, Table, Value};

use super::luaaux::{self, C_STACK_SLOTS_MAX};

/// `MAXINTSIZE`: the largest `i[n]` / `I[n]`.
const INT_SIZE_MAX: i32 = 32;
/// `MAXALIGN` on x86-64: a double's alignment after a char (8) is above an int's.
const ALIGN_MAX: i32 = 8;

/// The `struct` table.
pub(super) fn library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("pack", lua.create_function(pack)?)?;
    t.set("unpack", lua.create_function(unpack)?)?;
    t.set("size", lua.create_function(size)?)?;
    Ok(t)
}

#[derive(Clone, Copy, PartialEq)]
enum Endian {
    Big,
    Little,
}

/// The running options: byte order and the largest alignment (`Header`).
struct Header {
    endian: Endian,
    align: usize,
}

impl Default for Header {
    fn default() -> Self {
        Header {
            endian: Endian::Little,
            align: 1,
        }
    }
}

/// A format string, read as C reads it (it ends at the first NUL).
struct Format<'a> {
    bytes: &'a [u8],
}

impl Format<'_> {
    fn next_option(&mut self) -> Option<u8> {
        let (&opt, rest) = self.bytes.split_first()?;
        if opt == 0 {
            return None;
        }
        self.bytes = rest;
        Some(opt)
    }

    /// `getnum`: the digits that follow, or `default` (C `int` arithmetic, wrapping).
    fn number(&mut self, default: i32) -> i32 {
        if !self.bytes.first().is_some_and(u8::is_ascii_digit) {
            return default;
        }
        let mut n: i32 = 0;
        while let Some(&d) = self.bytes.first().filter(|d| d.is_ascii_digit()) {
            n = n.wrapping_mul(10).wrapping_add((d - b'0') as i32);
            self.bytes = &self.bytes[1..];
        }
        n
    }
}

/// `optsize`: the bytes option `opt` takes (0 for options without data).
fn option_size(lua: &Lua, opt: u8, format: &mut Format<'_>) -> mlua::Result<usize> {
    Ok(match opt {
        b'B' | b'b' | b'x' => 1,
        b'H' | b'h' => 2,
        b'L' | b'l' | b'T' | b'd' => 8,
        b'f' => 4,
        b'c' => format.number(1) as isize as usize,
        b'i' | b'I' => {
            let size = format.number(4);
            if size > INT_SIZE_MAX {
                return Err(luaaux::error(
                    lua,
                    format!("integral size {size} is larger than limit of {INT_SIZE_MAX}"),
                ));
            }
            size as isize as usize
        }
        _ => 0,
    })
}

/// `gettoalign`: padding before an item of `size` bytes at offset `len`.
fn padding(len: usize, header: &Header, opt: u8, size: usize) -> usize {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(header.align);
    size.wrapping_sub(len & (size - 1)) & (size - 1)
}

/// `controloptions`: byte order, alignment and spaces; any other letter is an error.
fn control_option(
    lua: &Lua,
    opt: u8,
    format: &mut Format<'_>,
    header: &mut Header,
) -> mlua::Result<()> {
    match opt {
        b' ' => {}
        b'>' => header.endian = Endian::Big,
        b'<' => header.endian = Endian::Little,
        b'!' => {
            let align = format.number(ALIGN_MAX);
            if align <= 0 || align & (align - 1) != 0 {
                return Err(luaaux::error(
                    lua,
                    format!("alignment {align} is not a power of 2"),
                ));
            }
            header.align = align as usize;
        }
        _ => {
            let mut message = b"invalid format option '".to_vec();
            message.extend_from_slice(&[opt, b'\'']);
            return Err(luaaux::arg_error(lua, 1, message));
        }
    }
    Ok(())
}

fn is_integer_option(opt: u8) -> bool {
    matches!(
        opt,
        b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I'
    )
}

/// `putinteger`: `n` as a `size`-byte integer (negative numbers through `long`).
fn put_integer(out: &mut Vec<u8>, n: f64, endian: Endian, size: usize) {
    let mut value = if n < 0.0 { n as i64 as u64 } else { n as u64 };
    let mut bytes = [0u8; INT_SIZE_MAX as usize];
    let bytes = &mut bytes[..size.min(INT_SIZE_MAX as usize)];
    for b in bytes.iter_mut() {
        *b = value as u8;
        value >>= 8;
    }
    if endian == Endian::Big {
        bytes.reverse();
    }
    out.extend_from_slice(bytes);
}

/// `struct.pack(format, values...)`.
fn pack(lua: &Lua, args: MultiValue) -> mlua::Result<mlua::String> {
    let mut args: Vec<Value> = args.into_iter().collect();
    let fmt = luaaux::check_string(lua, &args, 1)?;
    // The library pushes a nil after the arguments: one too few reads as nil.
    args.push(Value::Nil);
    let mut format = Format { bytes: &fmt };
    let mut header = Header::default();
    let mut arg = 2;
    let mut out = Vec::new();
    while let Some(opt) = format.next_option() {
        let mut size = option_size(lua, opt, &mut format)?;
        let pad = padding(out.len(), &header, opt, size);
        out.resize(out.len() + pad, 0);
        match opt {
            _ if is_integer_option(opt) => {
                let n = luaaux::check_number(lua, &args, arg)?;
                arg += 1;
                put_integer(&mut out, n, header.endian, size);
            }
            b'x' => out.push(0),
            b'f' => {
                let f = luaaux::check_number(lua, &args, arg)? as f32;
                arg += 1;
                out.extend_from_slice(&match header.endian {
                    Endian::Big => f.to_be_bytes(),
                    Endian::Little => f.to_le_bytes(),
                });
            }
            b'd' => {
                let d = luaaux::check_number(lua, &args, arg)?;
                arg += 1;
                out.extend_from_slice(&match header.endian {
                    Endian::Big => d.to_be_bytes(),
                    Endian::Little => d.to_le_bytes(),
                });
            }
            b'c' | b's' => {
                let s = luaaux::check_string(lua, &args, arg)?;
                arg += 1;
                if size == 0 {
                    size = s.len();
                }
                // The library names the argument after the string (its `arg++`).
                let Some(head) = s.get(..size) else {
                    return Err(luaaux::arg_error(lua, arg, "string too short"));
                };
                out.extend_from_slice(head);
                if opt == b's' {
                    out.push(0);
                }
            }
            _ => control_option(lua, opt, &mut format, &mut header)?,
        }
    }
    lua.create_string(out)
}

/// `getinteger`: `bytes` as an integer of their length (sign-extended when `signed`).
fn get_integer(bytes: &[u8], endian: Endian, signed: bool) -> f64 {
    let mut value: u64 = 0;
    let mut add = |b: &u8| value = (value << 8) | *b as u64;
    match endian {
        Endian::Big => bytes.iter().for_each(&mut add),
        Endian::Little => bytes.iter().rev().for_each(&mut add),
    }
    if !signed {
        return value as f64;
    }
    // The sign bit of a `size`-byte value (shift counts past 63 wrap as on x86).
    let shift = ((bytes.len() as i64 * 8 - 1) & 63) as u32;
    let mask = u64::MAX << shift;
    if value & mask != 0 {
        value |= mask;
    }
    value as i64 as f64
}

/// `struct.unpack(format, data [, init])`: the values, then the position after them.
fn unpack(lua: &Lua, args: MultiValue) -> mlua::Result<MultiValue> {
    let args: Vec<Value> = args.into_iter().collect();
    let fmt = luaaux::check_string(lua, &args, 1)?;
    let data = luaaux::check_string(lua, &args, 2)?;
    let pos = luaaux::opt_integer(lua, &args, 3, 1)? as usize;
    if pos == 0 {
        return Err(luaaux::arg_error(lua, 3, "offset must be 1 or greater"));
    }
    let mut pos = pos - 1;
    let mut format = Format { bytes: &fmt };
    let mut header = Header::default();
    let mut results: Vec<Value> = Vec::new();
    let too_short = |lua: &Lua| luaaux::arg_error(lua, 2, "data string too short");
    while let Some(opt) = format.next_option() {
        let mut size = option_size(lua, opt, &mut format)?;
        pos = pos.wrapping_add(padding(pos, &header, opt, size));
        let field =
            |pos: usize, size: usize| pos.checked_add(size).and_then(|end| data.get(pos..end));
        if field(pos, size).is_none() {
            return Err(too_short(lua));
        }
        // Room for the item and the next position, above the arguments.
        if args.len() + results.len() + 2 > C_STACK_SLOTS_MAX {
            return Err(luaaux::error(lua, "stack overflow (too many results)"));
        }
        match opt {
            _ if is_integer_option(opt) => {
                let bytes = field(pos, size).unwrap_or_default();
                let signed = opt.is_ascii_lowercase();
                results.push(Value::Number(get_integer(bytes, header.endian, signed)));
            }
            b'x' => {}
            b'f' => {
                let mut bytes = [0u8; 4];
                bytes.copy_from_slice(field(pos, 4).unwrap_or(&[0; 4]));
                let f = match header.endian {
                    Endian::Big => f32::from_be_bytes(bytes),
                    Endian::Little => f32::from_le_bytes(bytes),
                };
                results.push(Value::Number(f as f64));
            }
            b'd' => {
                let mut bytes = [0u8; 8];
                bytes.copy_from_slice(field(pos, 8).unwrap_or(&[0; 8]));
                let d = match header.endian {
                    Endian::Big => f64::from_be_bytes(bytes),
                    Endian::Little => f64::from_le_bytes(bytes),
                };
                results.push(Value::Number(d));
            }
            b'c' => {
                if size == 0 {
                    let previous = results.last().cloned().unwrap_or(Value::Nil);
                    let Some(n) = lua.coerce_number(previous)? else {
                        return Err(luaaux::error(lua, "format 'c0' needs a previous size"));
                    };
                    size = n as usize;
                    results.pop();
                }
                let Some(bytes) = field(pos, size) else {
                    return Err(too_short(lua));
                };
                results.push(Value::String(lua.create_string(bytes)?));
            }
            b's' => {
                let rest = data.get(pos..).unwrap_or_default();
                let Some(end) = rest.iter().position(|&b| b == 0) else {
                    return Err(luaaux::error(lua, "unfinished string in data"));
                };
                size = end + 1;
                results.push(Value::String(lua.create_string(&rest[..end])?));
            }
            _ => control_option(lua, opt, &mut format, &mut header)?,
        }
        pos = pos.wrapping_add(size);
    }
    results.push(Value::Integer(pos.wrapping_add(1) as i64));
    Ok(MultiValue::from_iter(results))
}

/// `struct.size(format)`: the bytes a format packs to (no `s`, no `c0`).
fn size(lua: &Lua, args: MultiValue) -> mlua::Result<i64> {
    let args: Vec<Value> = args.into_iter().collect();
    let fmt = luaaux::check_string(lua, &args, 1)?;
    let mut format = Format { bytes: &fmt };
    let mut header = Header::default();
    let mut pos: usize = 0;
    while let Some(opt) = format.next_option() {
        let size = option_size(lua, opt, &mut format)?;
        pos = pos.wrapping_add(padding(pos, &header, opt, size));
        if opt == b's' {
            return Err(luaaux::arg_error(lua, 1, "option 's' has no fixed size"));
        }
        if opt == b'c' && size == 0 {
            return Err(luaaux::arg_error(lua, 1, "option 'c0' has no fixed size"));
        }
        if !opt.is_ascii_alphanumeric() {
            control_option(lua, opt, &mut format, &mut header)?;
        }
        pos = pos.wrapping_add(size);
    }
    Ok(pos as i64)
}
