//! Differential corpus for the `cmsgpack` and `struct` script libraries: every line
//! goes to a real `redis-server` 7.0 and to Ruvio (forward mode, 2 shards), in RESP2
//! and RESP3; the replies must be identical byte for byte. Scripts return the packed
//! bytes themselves, so every encoding choice is compared: integers by size and sign,
//! int64-valued doubles as integers, float32 when exact, strings by length class,
//! arrays versus maps, the nesting limit, cycles; unpacking round trips, offsets and
//! limits (`unpack_one`, `unpack_limit`, the `0, 0` case that decodes everything),
//! uint64 wrapping, and every error text (bad arguments with the function's name as
//! the caller names it, missing bytes, bad formats, nil keys, the C stack limits on
//! nesting and on the number of values). `struct`: every format letter, alignment,
//! both byte orders, `c0` both ways, `s`, `size`, and their errors. `cjson` and
//! `bit`: their argument errors; `cjson.decode`'s tokens, numbers, errors and depth.
//!
//! Then seeded random inputs, compared the same way: byte strings biased to
//! MessagePack markers for `unpack` / `unpack_one`, random Lua values for `pack` and
//! a round trip and for `cjson.encode`, random `struct` formats with random data and values, random JSON
//! texts (valid and not) for `cjson.decode`. Reproduce a
//! failure with `RUVIO_DIFF_SEED=<seed> RUVIO_DIFF_COMMANDS=<n>`.

mod common;

use common::*;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};

/// The corpus: one command per line, words split on `|`.
const CORPUS: &[&str] = &[
    // cmsgpack.pack: integers at every size boundary.
    "eval|return cmsgpack.pack(0, 1, 127, 128, 255, 256, 65535, 65536, 4294967295, 4294967296)|0",
    "eval|return cmsgpack.pack(-1, -32, -33, -128, -129, -32768, -32769, -2147483648, -2147483649)|0",
    // Doubles: int64-valued ones as integers, float32 when exact, else float64.
    "eval|return cmsgpack.pack(0.5, 3.14, -0.0, 1e300, 1/0, -1/0, 2^63, -2^63, 2^53 + 1, 0/0, 1e-45)|0",
    "eval|return cmsgpack.pack(true, false, nil)|0",
    "eval|return cmsgpack.pack(function() end, cjson.null, coroutine.create(function() end))|0",
    // Strings by length class.
    "eval|return cmsgpack.pack('', 'x', string.rep('a', 31), string.rep('b', 32))|0",
    "eval|return cmsgpack.pack(string.rep('c', 255), string.rep('d', 256))|0",
    "eval|local p = cmsgpack.pack(string.rep('e', 65535)) return {#p, p:sub(1, 4)}|0",
    "eval|local p = cmsgpack.pack(string.rep('f', 65536)) return {#p, p:sub(1, 6)}|0",
    "eval|return cmsgpack.pack('\\0\\255')|0",
    // Tables: arrays only for keys exactly 1..n, maps otherwise (in `next` order).
    "eval|return cmsgpack.pack({}, {1, 2, 3}, {a = 1}, {1, 2, nil, 4}, {[1] = 1, [3] = 3})|0",
    "eval|return cmsgpack.pack({[0] = 1}, {[1.5] = 1}, {[-1] = 2}, {[2^31] = 1}, {x = {y = {z = {}}}})|0",
    "eval|return cmsgpack.pack({a = 1, b = 2, c = 3, d = {1, 2}, [10] = 'ten', [true] = false})|0",
    "eval|local t = {} for i = 1, 20 do t[i] = i end return cmsgpack.pack(t)|0",
    "eval|local t = {} for i = 1, 70000 do t[i] = i % 7 end local p = cmsgpack.pack(t) return {#p, p:sub(1, 8)}|0",
    "eval|local t = {} for i = 1, 20 do t['k' .. i] = i end return cmsgpack.pack(t)|0",
    // The nesting limit: a table 16 deep packs as nil; a cycle ends there too.
    "eval|local t = {} local c = t for i = 1, 20 do c[1] = {} c = c[1] end return cmsgpack.pack(t)|0",
    "eval|local t = {} t[1] = t return cmsgpack.pack(t)|0",
    "eval|local t = {} t.me = t return cmsgpack.pack(t)|0",
    "eval|return cmsgpack.pack(setmetatable({1, 2}, {__index = function() return 'x' end}))|0",
    // Errors of pack.
    "eval|return cmsgpack.pack()|0",
    "eval|local p = cmsgpack.pack return p()|0",
    "eval|local ok, e = pcall(cmsgpack.pack) return e|0",
    "eval|local t = {} for i = 1, 4001 do t[i] = i end return #cmsgpack.pack(unpack(t))|0",
    "eval|local t = {} for i = 1, 4000 do t[i] = i end return #cmsgpack.pack(unpack(t))|0",
    // unpack: round trips.
    "eval|local a, b, c, d, e, f = cmsgpack.unpack(cmsgpack.pack(1, 'two', {3, 4}, {a = 5}, true, 2.5)) return {a, b, c[1], c[2], d.a, tostring(e), tostring(f)}|0",
    "eval|return {cmsgpack.unpack(cmsgpack.pack(-1, -200, -40000, -3000000000, 200, 40000, 3000000000, 2^40))}|0",
    "eval|return tostring(cmsgpack.unpack(cmsgpack.pack(3.14)))|0",
    "eval|return tostring(cmsgpack.unpack(cmsgpack.pack(0.1)))|0",
    "eval|return tostring(cmsgpack.unpack('\\202\\64\\73\\15\\219'))|0",
    "eval|return tostring(cmsgpack.unpack('\\207\\255\\255\\255\\255\\255\\255\\255\\255'))|0",
    "eval|return tostring(cmsgpack.unpack('\\207\\0\\0\\0\\1\\0\\0\\0\\0'))|0",
    "eval|return tostring(cmsgpack.unpack('\\211\\255\\255\\255\\255\\255\\255\\255\\254'))|0",
    "eval|return {cmsgpack.unpack('\\217\\3abc\\218\\0\\2de\\219\\0\\0\\0\\1f\\160')}|0",
    "eval|local t = cmsgpack.unpack('\\220\\0\\3\\1\\2\\3') return {#t, t[3]}|0",
    "eval|local t = cmsgpack.unpack('\\221\\0\\0\\0\\2\\1\\2') return {#t, t[2]}|0",
    "eval|local t = cmsgpack.unpack('\\222\\0\\1\\161a\\7') return t.a|0",
    "eval|local t = cmsgpack.unpack('\\223\\0\\0\\0\\1\\161b\\8') return t.b|0",
    "eval|local t = cmsgpack.unpack('\\130\\1\\192\\161k\\195') return {t[1] == nil, t.k}|0",
    "eval|return cmsgpack.pack(cmsgpack.unpack(cmsgpack.pack({a = 1, b = {2, 3}, c = 'x'})))|0",
    "eval|return select('#', cmsgpack.unpack(''))|0",
    "eval|return select('#', cmsgpack.unpack(cmsgpack.pack(nil, nil)))|0",
    "eval|return cmsgpack.unpack(12)|0",
    // unpack_one and unpack_limit: offsets, -1 at the end, the 0, 0 quirk.
    "eval|local p = cmsgpack.pack(1, 2, 3) local o, v = cmsgpack.unpack_one(p) local o2, v2 = cmsgpack.unpack_one(p, o) local o3, v3 = cmsgpack.unpack_one(p, o2) return {o, v, o2, v2, o3, v3}|0",
    "eval|return {cmsgpack.unpack_one('')}|0",
    "eval|return {cmsgpack.unpack_one('\\1', 1)}|0",
    "eval|return {cmsgpack.unpack_one('\\1\\2', '1')}|0",
    "eval|local p = cmsgpack.pack(1, 2, 3, 4) return {cmsgpack.unpack_limit(p, 2)}|0",
    "eval|local p = cmsgpack.pack(1, 2, 3, 4) return {cmsgpack.unpack_limit(p, 2, 2)}|0",
    "eval|local p = cmsgpack.pack(1, 2, 3, 4) return {cmsgpack.unpack_limit(p, 0, 0)}|0",
    "eval|local p = cmsgpack.pack(1, 2, 3, 4) return {cmsgpack.unpack_limit(p, 0, 1)}|0",
    "eval|local p = cmsgpack.pack(1, 2, 3, 4) return {cmsgpack.unpack_limit(p, 10, 3)}|0",
    "eval|local p = cmsgpack.pack(1, 2) return {cmsgpack.unpack_limit(p, 2.9)}|0",
    // Errors of unpack.
    "eval|return cmsgpack.unpack('\\193')|0",
    "eval|return cmsgpack.unpack('\\196\\1a')|0",
    "eval|return cmsgpack.unpack('\\212\\1\\1')|0",
    "eval|return cmsgpack.unpack('\\205\\1')|0",
    "eval|return cmsgpack.unpack('\\147\\1\\2')|0",
    "eval|return cmsgpack.unpack('\\165abc')|0",
    "eval|return cmsgpack.unpack('\\219\\255\\255\\255\\255ab')|0",
    "eval|return cmsgpack.unpack('\\1\\193')|0",
    "eval|return cmsgpack.unpack('\\129\\192\\1')|0",
    "eval|return cmsgpack.unpack('\\129\\203\\255\\248\\0\\0\\0\\0\\0\\0\\1')|0",
    "eval|return cmsgpack.unpack()|0",
    "eval|return cmsgpack.unpack({})|0",
    "eval|local ok, e = pcall(cmsgpack.unpack, '\\193') return e|0",
    "eval|local ok, e = pcall(cmsgpack.unpack) return e|0",
    "eval|local u = cmsgpack.unpack_one return u(nil)|0",
    "eval|return cmsgpack.unpack_one('x', -1)|0",
    "eval|return cmsgpack.unpack_one('\\1', 5)|0",
    "eval|return cmsgpack.unpack_one(nil, 'x')|0",
    "eval|return cmsgpack.unpack_limit('\\1')|0",
    "eval|return cmsgpack.unpack_limit('\\1', -1)|0",
    "eval|return cmsgpack:unpack_limit(1)|0",
    // The C stack: nesting and number of values.
    "eval|local t = cmsgpack.unpack(string.rep('\\145', 3998) .. '\\1') local d = 0 while type(t) == 'table' do t = t[1] d = d + 1 end return {d, t}|0",
    "eval|local t = cmsgpack.unpack(string.rep('\\145', 3999) .. '\\1') local d = 0 while type(t) == 'table' do t = t[1] d = d + 1 end return {d, t}|0",
    "eval|return cmsgpack.unpack(string.rep('\\145', 4000) .. '\\1')|0",
    "eval|return cmsgpack.unpack(string.rep('\\129\\1', 4000) .. '\\1')|0",
    "eval|return select('#', cmsgpack.unpack(string.rep('\\1', 7998)))|0",
    // 7,999 values (Redis' ceiling) is one more than mlua can return: not compared.
    "eval|return select('#', cmsgpack.unpack(string.rep('\\1', 8000)))|0",
    "eval|return select('#', cmsgpack.unpack(string.rep('\\1', 7999), 'extra'))|0",
    "eval|return select('#', cmsgpack.unpack_limit(string.rep('\\1', 9000), 7990))|0",
    "eval|return select('#', cmsgpack.unpack_limit(string.rep('\\1', 9000), 7999))|0",
    "eval|cmsgpack.pack = nil|0",
    // Library errors are plain strings, as the C libraries raise them (cjson too).
    "eval|return cjson.encode(function() end)|0",
    "eval|local ok, e = pcall(cjson.encode, {f = function() end}) return e|0",
    // cjson.decode: lua-cjson's tokens, numbers (strtod), errors and depth limit.
    "eval|return cjson.decode('x')|0",
    "eval|return cjson.decode('[1,')|0",
    "eval|return cjson.decode('{\"a\" 1}')|0",
    "eval|return cjson.decode('')|0",
    "eval|return cjson.decode('\\0a')|0",
    "eval|return cjson.decode('\"\\ud800\"')|0",
    "eval|local t = cjson.decode(string.rep('[', 1000) .. string.rep(']', 1000)) return type(t)|0",
    "eval|return cjson.decode(string.rep('[', 1001) .. string.rep(']', 1001))|0",
    "eval|return cmsgpack.pack(cjson.decode('[0x10, Infinity, -nan, 1e400, +1, 01, 0x1.8p3, \"\\ud83d\\ude00\"]'))|0",
    "eval|return cjson.encode(cjson.decode('{\"b\":1,\"a\":2,\"c\":[true,false,null],\"d\":{}}'))|0",
    // cjson.encode: %.14g numbers, arrays vs objects (the int index quirk), sparse
    // arrays, key types, nesting.
    "eval|return cjson.encode({-2^63, 2^63, 2^53 + 1, -0.0, 1e15, 0.1, 1/3, 1e-5, 123456789012345})|0",
    "eval|return cjson.encode({[1] = 1, [20] = 2})|0",
    "eval|return cjson.encode({[1] = 1, [2^40] = 2})|0",
    "eval|return cjson.encode({[1/0] = 1})|0",
    "eval|return cjson.encode({1, 2, [3.5] = 3})|0",
    "eval|return cjson.encode({[true] = 1})|0",
    "eval|local t = {} t[1] = t return cjson.encode(t)|0",
    "eval|return cjson.encode({'\\0\\1\\127/\\\\\"\\8\\12'})|0",
    "eval|return cjson.encode()|0",
    "eval|return cjson.encode(1, 2)|0",
    "eval|return cjson.decode()|0",
    "eval|return cjson.decode({})|0",
    "eval|return cjson.decode(12)|0",
    // bit: LuaBitOp's argument errors (the last bad argument of band is reported).
    "eval|return bit.band()|0",
    "eval|return bit.band(1, 'x', {})|0",
    "eval|return bit.bor('3', 4)|0",
    "eval|return bit.tohex('x')|0",
    "eval|return bit.tohex(255, nil)|0",
    "eval|return {bit.tohex(255, 2), bit.tohex(-1, -3), bit.tohex(1, 0), bit.tohex(1, 20)}|0",
    "eval|return bit.lshift(1)|0",
    "eval|return {bit.tobit(2^32 + 5), bit.bswap(1), bit.rol(1, 33), bit.ror(1, 1)}|0",
    "eval|return {cmsgpack._NAME, cmsgpack._VERSION, cmsgpack._COPYRIGHT, cmsgpack._DESCRIPTION}|0",
    // struct.pack: every letter, both orders, alignment.
    "eval|return struct.pack('>I2', 258)|0",
    "eval|return struct.pack('<i4', -2)|0",
    "eval|return struct.pack('bBhHlLT', -1, 255, -2, 65535, -3, 4, 5)|0",
    "eval|return struct.pack('>bBhHlLT', -1, 255, -2, 65535, -3, 4, 5)|0",
    "eval|return struct.pack('i1i2i3i5i8', 1, 2, 3, 5, 8)|0",
    "eval|return struct.pack('>i16 <i12', -1, -2)|0",
    "eval|return struct.pack('!4 b i4 b h b d', 1, 2, 3, 4, 5, 6)|0",
    "eval|return struct.pack('! b d >! b i2', 1, 2, 3, 4)|0",
    "eval|return struct.pack('>d f <d f', 1.5, 0.25, -2.75, 1e10)|0",
    "eval|return struct.pack('c5 s c0', 'hello world', 'zs', 'all')|0",
    "eval|return struct.pack('xx b x', 7)|0",
    "eval|return struct.pack('i', '12')|0",
    "eval|return struct.pack('c', 7)|0",
    "eval|return struct.pack(5)|0",
    "eval|return struct.pack('b\\0b', 1, 2)|0",
    "eval|return struct.pack('I4', 2^32 + 5)|0",
    "eval|return struct.pack('i4', 3.9)|0",
    "eval|return struct.pack('i4', -3.9)|0",
    // Doubles out of an integer's range convert as C on x86-64 does.
    "eval|return struct.pack('>I5 H l', 2^64, 2^64, -2^70)|0",
    "eval|return struct.pack('i4 I4', 0/0, 2^63)|0",
    "eval|return {struct.unpack('d c0', struct.pack('d', -1) .. 'abc')}|0",
    "eval|return {struct.unpack('b c0', struct.pack('b', 0) .. 'abc')}|0",
    // struct.pack errors.
    "eval|return struct.pack('i33', 1)|0",
    "eval|return struct.pack('i99999999999', 1)|0",
    "eval|return struct.unpack('c2147483648', 'x')|0",
    "eval|return struct.size('!99999999999')|0",
    "eval|return struct.pack('!3')|0",
    "eval|return struct.pack('y')|0",
    "eval|return struct.pack('c5', 'abc')|0",
    "eval|return struct.pack('b c5', 1, 'abc')|0",
    "eval|return struct.pack('i')|0",
    "eval|return struct.pack('i', {})|0",
    "eval|return struct.pack('s', nil)|0",
    "eval|return struct.pack()|0",
    "eval|local ok, e = pcall(struct.pack, 'q') return e|0",
    // struct.unpack.
    "eval|return {struct.unpack('>I2 b', '\\1\\2\\255')}|0",
    "eval|return {struct.unpack('<I2 B h', '\\1\\2\\255\\254\\255')}|0",
    "eval|return {struct.unpack('b c0', '\\3abcdef')}|0",
    "eval|return {struct.unpack('s s', 'ab\\0cd\\0')}|0",
    "eval|return {struct.unpack('b', '\\1\\2', 2)}|0",
    "eval|return {struct.unpack('!4 b i4', '\\1\\0\\0\\0\\2\\0\\0\\0')}|0",
    "eval|return {struct.unpack('xxb', '\\1\\2\\3')}|0",
    "eval|return {struct.unpack('c3 c2', 'abcde')}|0",
    "eval|return tostring(struct.unpack('<d', struct.pack('<d', 0.1)))|0",
    "eval|return tostring(struct.unpack('>f', struct.pack('>f', 0.1)))|0",
    "eval|return tostring(struct.unpack('<L', '\\255\\255\\255\\255\\255\\255\\255\\255'))|0",
    "eval|return tostring(struct.unpack('<l', '\\254\\255\\255\\255\\255\\255\\255\\255'))|0",
    "eval|return {struct.unpack('i3', '\\255\\255\\255')}|0",
    "eval|return {struct.unpack('I3', '\\255\\255\\255')}|0",
    "eval|return {struct.unpack('>i12', string.rep('\\255', 12))}|0",
    "eval|return {struct.unpack('b', 5)}|0",
    // struct.unpack errors.
    "eval|return struct.unpack('i4', 'ab')|0",
    "eval|return struct.unpack('s', 'abc')|0",
    "eval|return struct.unpack('c0', 'x')|0",
    "eval|return struct.unpack('c0', '3')|0",
    "eval|return struct.unpack('b', '\\1', 5)|0",
    "eval|return struct.unpack('b', '\\1', 0)|0",
    "eval|return struct.unpack('b')|0",
    "eval|return struct.unpack('w', 'x')|0",
    "eval|return select('#', struct.unpack(string.rep('b', 7998), string.rep('\\1', 7998)))|0",
    "eval|return select('#', struct.unpack(string.rep('b', 7999), string.rep('\\1', 7999)))|0",
    // struct.size.
    "eval|return struct.size('>i4 h !8 d')|0",
    "eval|return struct.size('c3 x z 9')|0",
    "eval|return struct.size('bhi')|0",
    "eval|return struct.size('!bhi')|0",
    "eval|return struct.size('s')|0",
    "eval|return struct.size('c0')|0",
    "eval|return struct.size('@')|0",
    "eval|return struct.size('i40')|0",
    "eval|return struct.size()|0",
    "eval|struct.size = nil|0",
];

#[test]
fn script_libraries_answer_as_redis() {
    if require_redis_server("script_libraries_answer_as_redis").is_none() {
        return;
    }
    let servers = (&Server::redis(), &Server::forward(2));
    for resp3 in [false, true] {
        run_corpus(CORPUS, servers, resp3, protocol_name(resp3));
    }
}

/// Unpack `ARGV[1]` whole; the values (or the error) packed again for comparison.
const UNPACK_ALL: &str = "local ok, r = pcall(function() return {cmsgpack.unpack(ARGV[1])} end) \
    if not ok then return r end return cmsgpack.pack(r)";
/// `unpack_one(ARGV[1], ARGV[2])`, packed again.
const UNPACK_ONE: &str = "local ok, o, v = pcall(cmsgpack.unpack_one, ARGV[1], tonumber(ARGV[2])) \
    if not ok then return o end return cmsgpack.pack(o, v)";
const STRUCT_UNPACK: &str = "local ok, r = pcall(function() \
    return {struct.unpack(ARGV[1], ARGV[2], tonumber(ARGV[3]))} end) \
    if not ok then return r end return cmsgpack.pack(r)";
/// `struct.pack(ARGV[1], ...)` with numeric arguments as numbers.
const STRUCT_PACK: &str =
    "local args = {} for i = 2, #ARGV do args[#args + 1] = tonumber(ARGV[i]) or ARGV[i] end \
    local ok, r = pcall(struct.pack, ARGV[1], unpack(args)) return r";
const STRUCT_SIZE: &str = "local ok, r = pcall(struct.size, ARGV[1]) return r";

/// Bytes that start MessagePack items, including ones lua-cmsgpack refuses.
const MARKERS: &[u8] = &[
    0xc0, 0xc2, 0xc3, 0xca, 0xcb, 0xcc, 0xcd, 0xce, 0xcf, 0xd0, 0xd1, 0xd2, 0xd3, 0xd9, 0xda, 0xdb,
    0xdc, 0xdd, 0xde, 0xdf, 0xc1, 0xc4, 0xd4, 0x90, 0x91, 0x92, 0x81, 0x82, 0xa1, 0xa3, 0x00, 0x7f,
    0xe0, 0xff, 0x05,
];
const LUA_SCALARS: &[&str] = &[
    "1",
    "-1",
    "0",
    "127",
    "128",
    "-33",
    "65536",
    "2^31",
    "-2^31-1",
    "2^53",
    "2^63",
    "-2^63",
    "0.5",
    "1/3",
    "-0.0",
    "1e38",
    "1e39",
    "0/0",
    "1/0",
    "'a'",
    "''",
    "string.rep('x', 40)",
    "true",
    "false",
    "nil",
    "cjson.null",
];
const LUA_KEYS: &[&str] = &["1", "2", "3", "5", "0", "-1", "1.5", "'k'", "true", "2^40"];
/// Pieces of JSON texts, valid and not.
const JSON_PIECES: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"a\"",
    "\"b\"",
    "\"\\u00e9\"",
    "\"\\ud83d\\ude00\"",
    "\"\\ud800\"",
    "\"\\x\"",
    "\"\\n\\t\\/\"",
    "\"open",
    "1",
    "-1",
    "0",
    "01",
    "1.5",
    "-0.0",
    "1e400",
    "-1e-400",
    "1e",
    ".5",
    "-.5",
    "0x1F",
    "-0x10",
    "0x1.8p3",
    "0x",
    "Infinity",
    "-inf",
    "NaN",
    "nan(12)",
    "+1",
    "+",
    "true",
    "false",
    "null",
    "tru",
    "nul",
    "x",
    " ",
    "\n",
    "12345678901234567890",
    "1E+2",
    "\"\\u12\"",
    "\0",
    "\"a\0b\"",
];
const JSON_DECODE: &str = "local ok, r = pcall(cjson.decode, ARGV[1]) \
    if not ok then return r end return cmsgpack.pack(r)";

fn json_text(rng: &mut StdRng) -> String {
    (0..rng.random_range(0..10))
        .map(|_| *JSON_PIECES.choose(rng).unwrap_or(&"1"))
        .collect()
}

const STRUCT_OPTIONS: &[&str] = &[
    "<", ">", "!", " ", "x", "b", "B", "h", "H", "l", "L", "T", "i", "I", "f", "d", "c", "s", "i3",
    "I5", "i8", "I16", "c0", "c3", "!4", "!2", "!8", "!3", "i33", "c10", "z", "0",
];

fn message_bytes(rng: &mut StdRng) -> Vec<u8> {
    (0..rng.random_range(0..24))
        .map(|_| match rng.random_bool(0.5) {
            true => *MARKERS.choose(rng).unwrap_or(&0),
            false => rng.random(),
        })
        .collect()
}

fn lua_value(rng: &mut StdRng, depth: usize) -> String {
    if depth > 3 || rng.random_bool(0.35) {
        return LUA_SCALARS.choose(rng).unwrap_or(&"1").to_string();
    }
    let items: Vec<String> = (0..rng.random_range(0..6))
        .map(|_| match rng.random_range(0..10) {
            0..5 => lua_value(rng, depth + 1),
            5..8 => format!(
                "{} = {}",
                ["a", "b", "x", "y"].choose(rng).unwrap_or(&"a"),
                lua_value(rng, depth + 1)
            ),
            _ => format!(
                "[{}] = {}",
                LUA_KEYS.choose(rng).unwrap_or(&"1"),
                lua_value(rng, depth + 1)
            ),
        })
        .collect();
    format!("{{{}}}", items.join(", "))
}

fn struct_format(rng: &mut StdRng) -> String {
    (0..rng.random_range(0..8))
        .map(|_| *STRUCT_OPTIONS.choose(rng).unwrap_or(&"b"))
        .collect()
}

fn struct_value(rng: &mut StdRng) -> String {
    match rng.random_range(0..10) {
        0..4 => rng.random_range(-300i64..70_000).to_string(),
        4..6 => rng.random_range(-1e6..1e6f64).to_string(),
        6 => [
            "9223372036854775808",
            "18446744073709551616",
            "-1",
            "4294967303",
        ]
        .choose(rng)
        .unwrap_or(&"0")
        .to_string(),
        _ => (0..rng.random_range(0..6))
            .map(|_| {
                *[b'a', b'b', 0, b'x', b'0', b'3']
                    .choose(rng)
                    .unwrap_or(&b'a') as char
            })
            .collect(),
    }
}

/// One random EVAL: its arguments.
fn random_call(rng: &mut StdRng) -> Vec<Vec<u8>> {
    let words = |w: &[&[u8]]| w.iter().map(|w| w.to_vec()).collect::<Vec<_>>();
    match rng.random_range(0..12) {
        0..2 => {
            let data = message_bytes(rng);
            words(&[b"eval", UNPACK_ALL.as_bytes(), b"0", &data])
        }
        2 => {
            let data = message_bytes(rng);
            let offset = rng.random_range(-1..data.len() as i64 + 2).to_string();
            words(&[
                b"eval",
                UNPACK_ONE.as_bytes(),
                b"0",
                &data,
                offset.as_bytes(),
            ])
        }
        3..5 => {
            let values: Vec<String> = (0..rng.random_range(1..4))
                .map(|_| lua_value(rng, 0))
                .collect();
            let script = if rng.random_bool(0.5) {
                format!(
                    "local p = cmsgpack.pack({}) return {{p, cmsgpack.pack({{cmsgpack.unpack(p)}})}}",
                    values.join(", ")
                )
            } else {
                format!("local ok, r = pcall(cjson.encode, {}) return r", values[0])
            };
            words(&[b"eval", script.as_bytes(), b"0"])
        }
        5..7 => {
            let data: Vec<u8> = (0..rng.random_range(0..30))
                .map(|_| {
                    if rng.random_bool(0.7) {
                        rng.random()
                    } else {
                        0
                    }
                })
                .collect();
            let init = ["1", "1", "2", "3", "0", "-1", "40"]
                .choose(rng)
                .unwrap_or(&"1");
            let format = struct_format(rng);
            words(&[
                b"eval",
                STRUCT_UNPACK.as_bytes(),
                b"0",
                format.as_bytes(),
                &data,
                init.as_bytes(),
            ])
        }
        7..9 => {
            let mut call = words(&[b"eval", STRUCT_PACK.as_bytes(), b"0"]);
            call.push(struct_format(rng).into_bytes());
            for _ in 0..rng.random_range(0..6) {
                call.push(struct_value(rng).into_bytes());
            }
            call
        }
        9 => {
            let format = struct_format(rng);
            words(&[b"eval", STRUCT_SIZE.as_bytes(), b"0", format.as_bytes()])
        }
        _ => {
            let text = json_text(rng);
            words(&[b"eval", JSON_DECODE.as_bytes(), b"0", text.as_bytes()])
        }
    }
}

#[test]
fn random_library_inputs_answer_as_redis() {
    if require_redis_server("random_library_inputs_answer_as_redis").is_none() {
        return;
    }
    let settings = DiffSettings::from_env(&[1, 2], 1500);
    let redis = Server::redis();
    let ruvio = Server::forward(2);
    let mut reference = redis.raw();
    let mut target = ruvio.raw();
    for &seed in &settings.seeds {
        let mut rng = StdRng::seed_from_u64(seed);
        for index in 0..settings.commands {
            let call = random_call(&mut rng);
            let want = reference.cmd(&call);
            let got = target.cmd(&call);
            assert_eq!(
                show(&got),
                show(&want),
                "seed {seed}, call #{index}: {}\nreproduce: RUVIO_DIFF_SEED={seed} RUVIO_DIFF_COMMANDS={}",
                show_cmd(&call),
                index + 1
            );
        }
    }
}
