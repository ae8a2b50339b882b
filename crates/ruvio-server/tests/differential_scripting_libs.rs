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
//! both byte orders, `c0` both ways, `s`, `size`, and their errors.

mod common;

use common::*;

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
    // struct.pack errors.
    "eval|return struct.pack('i33', 1)|0",
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

fn run_corpus(reference: &mut RawConn, target: &mut RawConn, label: &str) {
    for line in CORPUS {
        let words: Vec<&str> = line.split('|').collect();
        let want = reference.cmd(&words);
        let got = target.cmd(&words);
        assert_eq!(
            show(&got),
            show(&want),
            "{label}: {line:?}: Ruvio's reply differs from Redis's"
        );
    }
}

#[test]
fn script_libraries_answer_as_redis() {
    if require_redis_server("script_libraries_answer_as_redis").is_none() {
        return;
    }
    let redis = Server::redis();
    let ruvio = Server::forward(2);
    for resp3 in [false, true] {
        let mut reference = redis.raw();
        let mut target = ruvio.raw();
        if resp3 {
            reference.cmd(&["hello", "3"]);
            target.cmd(&["hello", "3"]);
        }
        let label = if resp3 { "RESP3" } else { "RESP2" };
        run_corpus(&mut reference, &mut target, label);
    }
}
