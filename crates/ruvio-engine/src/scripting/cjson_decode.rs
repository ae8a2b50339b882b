//! `cjson.decode` as lua-cjson 2.1 (Redis' build) decodes: its tokenizer, its
//! number syntax (C's `strtod`, so `0x10`, `Infinity`, `NaN`, `+1` and leading zeros
//! are numbers, as Redis' default `decode_invalid_numbers` allows), its error texts
//! (`Expected value but found T_END at character 4`), its nesting limit (1000,
//! `Found too many nested data structures (1001) at character 1001`), and its
//! tables: keys set in document order, JSON null as `cjson.null`.
//!
//! The input is read as the C string lua-cjson sees: a NUL byte ends it. The parser
//! is iterative, so deep nesting never recurses in Rust.

use mlua::{LightUserData, Lua, Table, Value};

use super::luaaux;

/// lua-cjson's `DEFAULT_DECODE_MAX_DEPTH`.
const DEPTH_MAX: usize = 1000;

/// A token (`json_token_type_t`), with the error text of `T_ERROR`.
enum Tok {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    Str(Vec<u8>),
    Num(f64),
    Bool(bool),
    Null,
    Colon,
    Comma,
    End,
    Error(&'static str),
}

impl Tok {
    /// The name lua-cjson's errors print for a token (the text for an error).
    fn name(&self) -> &'static str {
        match self {
            Tok::ObjBegin => "T_OBJ_BEGIN",
            Tok::ObjEnd => "T_OBJ_END",
            Tok::ArrBegin => "T_ARR_BEGIN",
            Tok::ArrEnd => "T_ARR_END",
            Tok::Str(_) => "T_STRING",
            Tok::Num(_) => "T_NUMBER",
            Tok::Bool(_) => "T_BOOLEAN",
            Tok::Null => "T_NULL",
            Tok::Colon => "T_COLON",
            Tok::Comma => "T_COMMA",
            Tok::End => "T_END",
            Tok::Error(text) => text,
        }
    }
}

/// A token and where it starts (0-based; errors print it 1-based).
struct Token {
    tok: Tok,
    index: usize,
}

struct Parser<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    /// The byte at `i`, 0 past the end (the C string's terminator).
    fn at(&self, i: usize) -> u8 {
        self.data.get(i).copied().unwrap_or(0)
    }

    fn error_here(&self, text: &'static str) -> Token {
        Token {
            tok: Tok::Error(text),
            index: self.pos,
        }
    }

    /// `json_next_token`.
    fn next_token(&mut self) -> Token {
        while matches!(self.at(self.pos), b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
        let index = self.pos;
        let ch = self.at(self.pos);
        let single = match ch {
            b'{' => Some(Tok::ObjBegin),
            b'}' => Some(Tok::ObjEnd),
            b'[' => Some(Tok::ArrBegin),
            b']' => Some(Tok::ArrEnd),
            b',' => Some(Tok::Comma),
            b':' => Some(Tok::Colon),
            _ => None,
        };
        if let Some(tok) = single {
            self.pos += 1;
            return Token { tok, index };
        }
        let rest = &self.data[self.pos.min(self.data.len())..];
        match ch {
            0 => Token {
                tok: Tok::End,
                index,
            },
            b'"' => self.string_token(index),
            b'-' | b'0'..=b'9' => self.number_token(index),
            b'f' | b'i' | b'I' | b'n' | b'N' | b't' | b'+' => {
                let word = |w: &[u8], tok: Tok, parser: &mut Self| {
                    parser.pos += w.len();
                    Token { tok, index }
                };
                if rest.starts_with(b"true") {
                    word(b"true", Tok::Bool(true), self)
                } else if rest.starts_with(b"false") {
                    word(b"false", Tok::Bool(false), self)
                } else if rest.starts_with(b"null") {
                    word(b"null", Tok::Null, self)
                } else if invalid_number(rest) {
                    self.number_token(index)
                } else {
                    self.error_here("invalid token")
                }
            }
            _ => self.error_here("invalid token"),
        }
    }

    /// `json_next_number_token`: C's `strtod` from here.
    fn number_token(&mut self, index: usize) -> Token {
        let rest = &self.data[self.pos.min(self.data.len())..];
        match strtod(rest) {
            Some((n, len)) => {
                self.pos += len;
                Token {
                    tok: Tok::Num(n),
                    index,
                }
            }
            None => self.error_here("invalid number"),
        }
    }

    /// `json_next_string_token`.
    fn string_token(&mut self, index: usize) -> Token {
        self.pos += 1;
        let mut out = Vec::new();
        loop {
            match self.at(self.pos) {
                b'"' => {
                    self.pos += 1;
                    return Token {
                        tok: Tok::Str(out),
                        index,
                    };
                }
                0 => return self.error_here("unexpected end of string"),
                b'\\' => {
                    let unescaped = match self.at(self.pos + 1) {
                        b'"' => b'"',
                        b'\\' => b'\\',
                        b'/' => b'/',
                        b'b' => 0x08,
                        b't' => b'\t',
                        b'n' => b'\n',
                        b'f' => 0x0c,
                        b'r' => b'\r',
                        b'u' => match self.unicode_escape() {
                            Some((bytes, len)) => {
                                out.extend_from_slice(&bytes);
                                self.pos += len;
                                continue;
                            }
                            None => return self.error_here("invalid unicode escape code"),
                        },
                        _ => return self.error_here("invalid escape code"),
                    };
                    out.push(unescaped);
                    self.pos += 2;
                }
                ch => {
                    out.push(ch);
                    self.pos += 1;
                }
            }
        }
    }

    /// `\uXXXX` (a surrogate pair: two of them) at `pos` as UTF-8, and the length
    /// of the escape.
    fn unicode_escape(&self) -> Option<(Vec<u8>, usize)> {
        let mut code = self.hex4(self.pos + 2)?;
        let mut len = 6;
        if code & 0xF800 == 0xD800 {
            if code & 0x400 != 0 || self.at(self.pos + 6) != b'\\' || self.at(self.pos + 7) != b'u'
            {
                return None;
            }
            let low = self.hex4(self.pos + 8)?;
            if low & 0xFC00 != 0xDC00 {
                return None;
            }
            code = (((code & 0x3FF) << 10) | (low & 0x3FF)) + 0x10000;
            len = 12;
        }
        Some((utf8(code), len))
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        (0..4).try_fold(0u32, |acc, i| {
            let digit = (self.at(at + i) as char).to_digit(16)?;
            Some((acc << 4) | digit)
        })
    }
}

/// `codepoint_to_utf8` (a code point up to 0x10FFFF, surrogates excluded above).
fn utf8(code: u32) -> Vec<u8> {
    match code {
        0..=0x7F => vec![code as u8],
        0x80..=0x7FF => vec![0xC0 | (code >> 6) as u8, 0x80 | (code & 0x3F) as u8],
        0x800..=0xFFFF => vec![
            0xE0 | (code >> 12) as u8,
            0x80 | ((code >> 6) & 0x3F) as u8,
            0x80 | (code & 0x3F) as u8,
        ],
        _ => vec![
            0xF0 | (code >> 18) as u8,
            0x80 | ((code >> 12) & 0x3F) as u8,
            0x80 | ((code >> 6) & 0x3F) as u8,
            0x80 | (code & 0x3F) as u8,
        ],
    }
}

/// `json_is_invalid_number` for a token that does not start with `-` or a digit:
/// `+...`, `inf...`, `nan...` go to `strtod`.
fn invalid_number(rest: &[u8]) -> bool {
    let starts = |w: &[u8]| rest.len() >= w.len() && rest[..w.len()].eq_ignore_ascii_case(w);
    rest.first() == Some(&b'+') || starts(b"inf") || starts(b"nan")
}

/// C's `strtod` on `s` (glibc): the value and the bytes it used, `None` when no
/// number starts here.
fn strtod(s: &[u8]) -> Option<(f64, usize)> {
    let (negative, sign) = match s.first() {
        Some(b'-') => (true, 1),
        Some(b'+') => (false, 1),
        _ => (false, 0),
    };
    let body = &s[sign..];
    let starts = |w: &[u8]| body.len() >= w.len() && body[..w.len()].eq_ignore_ascii_case(w);
    let signed = |n: f64| if negative { -n } else { n };
    if starts(b"infinity") {
        return Some((signed(f64::INFINITY), sign + 8));
    }
    if starts(b"inf") {
        return Some((signed(f64::INFINITY), sign + 3));
    }
    if starts(b"nan") {
        let mut len = 3;
        let mut nan = f64::NAN;
        if body.get(3) == Some(&b'(') {
            let inner = body[4..]
                .iter()
                .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
                .count();
            if body.get(4 + inner) == Some(&b')') {
                len = 5 + inner;
                nan = nan_with_payload(&body[4..4 + inner]);
            }
        }
        return Some((signed(nan), sign + len));
    }
    if let Some((n, len)) = hex_float(body) {
        return Some((signed(n), sign + len));
    }
    let digits = |from: usize| {
        body[from..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count()
    };
    let whole = digits(0);
    let mut len = whole;
    let mut fraction = 0;
    if body.get(len) == Some(&b'.') {
        fraction = digits(len + 1);
        len += 1 + fraction;
    }
    if whole + fraction == 0 {
        return None;
    }
    if matches!(body.get(len), Some(b'e' | b'E')) {
        let exp_sign = usize::from(matches!(body.get(len + 1), Some(b'+' | b'-')));
        let exp_digits = digits(len + 1 + exp_sign);
        if exp_digits > 0 {
            len += 1 + exp_sign + exp_digits;
        }
    }
    let text = std::str::from_utf8(&body[..len]).ok()?;
    let n: f64 = text.parse().ok()?;
    Some((signed(n), sign + len))
}

/// glibc's `nan(chars)`: a quiet NaN whose low mantissa bits are `chars` read as
/// `strtoull(chars, 0)` when all of it is a number.
fn nan_with_payload(chars: &[u8]) -> f64 {
    let text = std::str::from_utf8(chars).unwrap_or("");
    let payload = if let Some(hex) = text.strip_prefix("0x").or(text.strip_prefix("0X")) {
        u64::from_str_radix(hex, 16).ok()
    } else if text.len() > 1 && text.starts_with('0') {
        u64::from_str_radix(&text[1..], 8).ok()
    } else {
        text.parse::<u64>().ok()
    };
    match payload {
        Some(p) => f64::from_bits(f64::NAN.to_bits() | (p & ((1 << 51) - 1))),
        None => f64::NAN,
    }
}

/// A C99 hexadecimal float (`0x1.8p3`), as `strtod` reads one.
fn hex_float(body: &[u8]) -> Option<(f64, usize)> {
    if body.len() < 3 || body[0] != b'0' || (body[1] | 0x20) != b'x' {
        return None;
    }
    let mut mantissa: u64 = 0;
    let mut exponent: i64 = 0;
    let mut any = false;
    let mut i = 2;
    let mut seen_point = false;
    loop {
        match body.get(i) {
            Some(b'.') if !seen_point => seen_point = true,
            Some(&c) if c.is_ascii_hexdigit() => {
                let digit = (c as char).to_digit(16).unwrap_or(0) as u64;
                any = true;
                if mantissa >> 56 == 0 {
                    mantissa = (mantissa << 4) | digit;
                    if seen_point {
                        exponent -= 4;
                    }
                } else if !seen_point {
                    // Digits past the precision kept: they only scale the value.
                    exponent += 4;
                }
            }
            _ => break,
        }
        i += 1;
    }
    if !any {
        return None;
    }
    if matches!(body.get(i), Some(b'p' | b'P')) {
        let exp_negative = body.get(i + 1) == Some(&b'-');
        let exp_sign = usize::from(matches!(body.get(i + 1), Some(b'+' | b'-')));
        let start = i + 1 + exp_sign;
        let count = body[start.min(body.len())..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        if count > 0 {
            let e = body[start..start + count]
                .iter()
                .fold(0i64, |acc, d| (acc * 10 + (d - b'0') as i64).min(1 << 20));
            exponent += if exp_negative { -e } else { e };
            i = start + count;
        }
    }
    let value = mantissa as f64 * 2f64.powi(exponent.clamp(-2000, 2000) as i32);
    Some((value, i))
}

/// A container being filled.
enum Open {
    Array { table: Table, next: i64 },
    Object { table: Table, key: Vec<u8> },
}

/// `cjson.decode(text)`.
pub(super) fn decode(lua: &Lua, text: &[u8]) -> mlua::Result<Value> {
    if text.len() >= 2 && (text[0] == 0 || text[1] == 0) {
        return Err(luaaux::error(
            lua,
            "JSON parser does not support UTF-16 or UTF-32",
        ));
    }
    let mut parser = Parser { data: text, pos: 0 };
    let parse_error = |lua: &Lua, expected: &str, token: &Token| {
        luaaux::error(
            lua,
            format!(
                "Expected {expected} but found {} at character {}",
                token.tok.name(),
                token.index + 1
            ),
        )
    };
    let mut open: Vec<Open> = Vec::new();
    let mut token = parser.next_token();
    loop {
        let mut value = match token.tok {
            Tok::Str(s) => Value::String(lua.create_string(s)?),
            Tok::Num(n) => Value::Number(n),
            Tok::Bool(b) => Value::Boolean(b),
            Tok::Null => Value::LightUserData(LightUserData(std::ptr::null_mut())),
            Tok::ObjBegin | Tok::ArrBegin => {
                if open.len() + 1 > DEPTH_MAX {
                    return Err(luaaux::error(
                        lua,
                        format!(
                            "Found too many nested data structures ({}) at character {}",
                            open.len() + 1,
                            parser.pos
                        ),
                    ));
                }
                let table = lua.create_table()?;
                let is_object = matches!(token.tok, Tok::ObjBegin);
                token = parser.next_token();
                match (is_object, &token.tok) {
                    (true, Tok::ObjEnd) | (false, Tok::ArrEnd) => Value::Table(table),
                    (false, _) => {
                        open.push(Open::Array { table, next: 1 });
                        continue;
                    }
                    (true, _) => {
                        let Tok::Str(key) = &token.tok else {
                            return Err(parse_error(lua, "object key string", &token));
                        };
                        let key = key.clone();
                        token = parser.next_token();
                        if !matches!(token.tok, Tok::Colon) {
                            return Err(parse_error(lua, "colon", &token));
                        }
                        open.push(Open::Object { table, key });
                        token = parser.next_token();
                        continue;
                    }
                }
            }
            _ => return Err(parse_error(lua, "value", &token)),
        };
        // Hand the value to its container; a container that ends is a value too.
        loop {
            match open.last_mut() {
                None => {
                    let end = parser.next_token();
                    if !matches!(end.tok, Tok::End) {
                        return Err(parse_error(lua, "the end", &end));
                    }
                    return Ok(value);
                }
                Some(Open::Array { table, next }) => {
                    table.raw_set(*next, value)?;
                    *next += 1;
                    token = parser.next_token();
                    match token.tok {
                        Tok::ArrEnd => value = Value::Table(table.clone()),
                        Tok::Comma => {
                            token = parser.next_token();
                            break;
                        }
                        _ => return Err(parse_error(lua, "comma or array end", &token)),
                    }
                }
                Some(Open::Object { table, key }) => {
                    table.raw_set(lua.create_string(&*key)?, value)?;
                    token = parser.next_token();
                    match token.tok {
                        Tok::ObjEnd => value = Value::Table(table.clone()),
                        Tok::Comma => {
                            token = parser.next_token();
                            let Tok::Str(next_key) = &token.tok else {
                                return Err(parse_error(lua, "object key string", &token));
                            };
                            *key = next_key.clone();
                            token = parser.next_token();
                            if !matches!(token.tok, Tok::Colon) {
                                return Err(parse_error(lua, "colon", &token));
                            }
                            token = parser.next_token();
                            break;
                        }
                        _ => return Err(parse_error(lua, "comma or object end", &token)),
                    }
                }
            }
            open.pop();
        }
    }
}
