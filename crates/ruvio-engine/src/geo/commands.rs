//! The geo commands: thin handlers in Redis's order of checks (geo.c). Every
//! search form (GEORADIUS, GEORADIUSBYMEMBER, their _RO variants, GEOSEARCH,
//! GEOSEARCHSTORE) shares [`search_generic`], as they share
//! `georadiusGeneric` there.

use ruvio_resp::{Args, Reply};
use smallvec::SmallVec;

use super::events;
use super::hash::{self, Shape, ShapeKind};
use super::search::{self, Hit};
use crate::args::{eq_ci, int_arg};
use crate::command::{CmdResult, ExecCtx, Outcome::Done};
use crate::error::CmdError;
use crate::keyspace::Collection;
use crate::zsets::score::parse_score;
use crate::zsets::{self, ZSetValue};
use crate::Engine;

/// GEOADD's scores are kept on the stack up to this many points (one GEOADD of a
/// few points, the common case, allocates nothing for them).
const SCORES_INLINE: usize = 8;

/// A longitude,latitude pair at `args[at..at + 2]` (`extractLongLatOrReply`).
fn lon_lat(args: Args<'_>, at: usize) -> Result<(f64, f64), CmdError> {
    let lon = parse_score(args.get(at))?;
    let lat = parse_score(args.get(at + 1))?;
    if !hash::valid_lon_lat(lon, lat) {
        let pair = format!("{lon:.6},{lat:.6}");
        return Err(CmdError::quoted(
            "ERR invalid longitude,latitude pair ",
            pair.as_bytes(),
            "",
        ));
    }
    Ok((lon, lat))
}

/// Metres per unit (`extractUnitOrReply`: case-insensitive, compared as a C
/// string).
fn unit(arg: &[u8]) -> Result<f64, CmdError> {
    let arg = arg.split(|&b| b == 0).next().unwrap_or_default();
    match () {
        _ if eq_ci(arg, "m") => Ok(1.0),
        _ if eq_ci(arg, "km") => Ok(1000.0),
        _ if eq_ci(arg, "ft") => Ok(0.3048),
        _ if eq_ci(arg, "mi") => Ok(1609.34),
        _ => Err(CmdError::GeoUnit),
    }
}

/// `radius unit` at `args[at..]` (`extractDistanceOrReply`).
fn radius(args: Args<'_>, at: usize) -> Result<(ShapeKind, f64), CmdError> {
    let r = parse_score(args.get(at)).map_err(|_| CmdError::GeoRadiusNotFloat)?;
    if r < 0.0 {
        return Err(CmdError::GeoRadiusNegative);
    }
    Ok((ShapeKind::Radius(r), unit(args.get(at + 1))?))
}

/// `width height unit` at `args[at..]` (`extractBoxOrReply`).
fn bybox(args: Args<'_>, at: usize) -> Result<(ShapeKind, f64), CmdError> {
    let width = parse_score(args.get(at)).map_err(|_| CmdError::GeoWidthNotFloat)?;
    let height = parse_score(args.get(at + 1)).map_err(|_| CmdError::GeoHeightNotFloat)?;
    if height < 0.0 || width < 0.0 {
        return Err(CmdError::GeoBoxNegative);
    }
    Ok((ShapeKind::Box { width, height }, unit(args.get(at + 2))?))
}

/// The position of `member` (`longLatFromMember`).
fn member_position(z: &ZSetValue, member: &[u8]) -> Result<(f64, f64), CmdError> {
    z.score(member)
        .map(hash::decode_score)
        .ok_or(CmdError::GeoMemberNotFound)
}

/// The geo set at `key` for reading: `None` when missing, WRONGTYPE for another
/// type.
fn read_set<'e>(
    e: &'e mut Engine,
    ctx: &mut ExecCtx,
    key: &[u8],
) -> Result<Option<&'e ZSetValue>, CmdError> {
    match e.lookup_read(ctx, key) {
        Some(id) => zsets::zset_at(e, ctx.db, id).map(Some),
        None => Ok(None),
    }
}

// ---- GEOADD -----------------------------------------------------------------

/// `GEOADD key [NX|XX] [CH] longitude latitude member [...]`: a ZADD of the
/// members' geohashes (Redis rewrites it into one); the number added (with CH,
/// added or moved).
pub(super) fn geoadd(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let key = args.get(1);
    let (mut nx, mut xx, mut ch) = (false, false, false);
    let mut at = 2;
    while at < args.len() {
        let opt = args.get(at);
        let flag = match () {
            _ if eq_ci(opt, "nx") => &mut nx,
            _ if eq_ci(opt, "xx") => &mut xx,
            _ if eq_ci(opt, "ch") => &mut ch,
            _ => break,
        };
        *flag = true;
        at += 1;
    }
    let rest = args.len() - at;
    // A GEOADD whose options leave no triple becomes a ZADD without pairs: the
    // same syntax error.
    if !rest.is_multiple_of(3) || (nx && xx) || rest == 0 {
        return Err(CmdError::Syntax);
    }
    let triples = rest / 3;
    let mut scores: SmallVec<[f64; SCORES_INLINE]> = SmallVec::with_capacity(triples);
    for i in 0..triples {
        let (lon, lat) = lon_lat(args, at + 3 * i)?;
        scores.push(hash::score_of(lon, lat).unwrap_or_default());
    }
    let member = |i: usize| args.get(at + 3 * i + 2);
    let lim = zsets::limits(e);
    let existing = match e.lookup_write(ctx, key) {
        Some(id) => {
            zsets::zset_at(e, ctx.db, id)?;
            Some(id)
        }
        None if xx => {
            r.int(0);
            return Ok(Done);
        }
        None => None,
    };
    let apply = |z: &mut ZSetValue| {
        let (mut added, mut moved) = (0usize, 0usize);
        for (i, &score) in scores.iter().enumerate() {
            let m = member(i);
            match z.score(m) {
                Some(cur) if !nx && cur != score => {
                    z.update(m, score);
                    moved += 1;
                }
                Some(_) => {}
                None if !xx => {
                    z.insert(m, score, lim);
                    added += 1;
                }
                None => {}
            }
        }
        (added, moved)
    };
    let (added, moved) = match existing {
        Some(id) => zsets::change_zset(e, ctx.db, id, |z| {
            z.maybe_convert(triples, lim);
            apply(z)
        })?,
        None => {
            let longest = (0..triples).map(|i| member(i).len()).max().unwrap_or(0);
            let mut z = ZSetValue::create(triples, longest, lim);
            let counts = apply(&mut z);
            if !z.is_empty() {
                e.add_collection(ctx, key, Collection::ZSet(z));
            }
            counts
        }
    };
    r.int((if ch { added + moved } else { added }) as i64);
    if added + moved > 0 {
        ctx.changed(key, zsets::events::ZADD, (added + moved) as u64);
    }
    Ok(Done)
}

// ---- GEOPOS, GEOHASH, GEODIST -----------------------------------------------

/// `GEOPOS key [member ...]`: `[longitude, latitude]` or a null array per member.
pub(super) fn geopos(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let z = read_set(e, ctx, args.get(1))?;
    r.array(args.len() - 2);
    for member in args.tail(2) {
        match z.and_then(|z| z.score(member)) {
            Some(score) => {
                let (lon, lat) = hash::decode_score(score);
                r.array(2);
                hash::reply_coordinate(r, lon);
                hash::reply_coordinate(r, lat);
            }
            None => r.null_array(),
        }
    }
    Ok(Done)
}

/// `GEOHASH key [member ...]`: the standard 11-character geohash or nil per
/// member.
pub(super) fn geohash(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let z = read_set(e, ctx, args.get(1))?;
    r.array(args.len() - 2);
    for member in args.tail(2) {
        match z.and_then(|z| z.score(member)) {
            Some(score) => r.bulk(&hash::standard_geohash(score)),
            None => r.null(),
        }
    }
    Ok(Done)
}

/// `GEODIST key member1 member2 [M|KM|FT|MI]`: the distance with 4 decimals, or
/// nil when a member (or the key) is missing.
pub(super) fn geodist(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let to_metres = match args.len() {
        5 => unit(args.get(4))?,
        n if n > 5 => return Err(CmdError::Syntax),
        _ => 1.0,
    };
    let Some(z) = read_set(e, ctx, args.get(1))? else {
        r.null();
        return Ok(Done);
    };
    match (z.score(args.get(2)), z.score(args.get(3))) {
        (Some(a), Some(b)) => {
            let (a, b) = (hash::decode_score(a), hash::decode_score(b));
            let d = hash::distance(a.0, a.1, b.0, b.1) / to_metres;
            r.bulk(hash::format_distance(d).as_bytes());
        }
        _ => r.null(),
    }
    Ok(Done)
}

// ---- the searches -----------------------------------------------------------

/// Which search command runs (`georadiusGeneric`'s flags).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Variant {
    /// GEORADIUS: centre and radius fixed, STORE allowed.
    Radius,
    /// GEORADIUS_RO.
    RadiusRo,
    /// GEORADIUSBYMEMBER.
    ByMember,
    /// GEORADIUSBYMEMBER_RO.
    ByMemberRo,
    /// GEOSEARCH.
    Search,
    /// GEOSEARCHSTORE.
    SearchStore,
}

impl Variant {
    fn is_search(self) -> bool {
        matches!(self, Variant::Search | Variant::SearchStore)
    }
    fn takes_store(self) -> bool {
        matches!(self, Variant::Radius | Variant::ByMember)
    }
    fn source_at(self) -> usize {
        if self == Variant::SearchStore {
            2
        } else {
            1
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Sort {
    None,
    Asc,
    Desc,
}

/// A parsed search.
struct Request<'a> {
    shape: Shape,
    withdist: bool,
    withhash: bool,
    withcoord: bool,
    sort: Sort,
    /// 0: no COUNT.
    count: usize,
    any: bool,
    store: Option<&'a [u8]>,
    storedist: bool,
}

/// `georadiusGeneric`'s parsing, in its order. With the source missing (`z`
/// `None`), a member to search from is not looked up (nor GEORADIUSBYMEMBER's
/// radius parsed), so that the reply can still depend on STORE.
fn parse_search<'a>(
    args: Args<'a>,
    v: Variant,
    z: Option<&ZSetValue>,
) -> Result<Request<'a>, CmdError> {
    let mut req = Request {
        shape: Shape {
            lon: 0.0,
            lat: 0.0,
            kind: ShapeKind::Radius(0.0),
            conversion: 1.0,
        },
        withdist: false,
        withhash: false,
        withcoord: false,
        sort: Sort::None,
        count: 0,
        any: false,
        store: None,
        storedist: false,
    };
    let set_shape = |req: &mut Request<'_>, (kind, conversion): (ShapeKind, f64)| {
        req.shape.kind = kind;
        req.shape.conversion = conversion;
    };
    let set_centre = |req: &mut Request<'_>, (lon, lat): (f64, f64)| {
        req.shape.lon = lon;
        req.shape.lat = lat;
    };
    let base = match v {
        Variant::Radius | Variant::RadiusRo => {
            set_centre(&mut req, lon_lat(args, 2)?);
            set_shape(&mut req, radius(args, 4)?);
            6
        }
        Variant::ByMember | Variant::ByMemberRo => {
            if let Some(z) = z {
                set_centre(&mut req, member_position(z, args.get(2))?);
                set_shape(&mut req, radius(args, 3)?);
            }
            5
        }
        Variant::Search => 2,
        Variant::SearchStore => {
            req.store = Some(args.get(1));
            3
        }
    };
    let search = v.is_search();
    let (mut from_member, mut from_lonlat, mut by_radius, mut by_box) =
        (false, false, false, false);
    let remaining = args.len().saturating_sub(base);
    let mut i = 0;
    while i < remaining {
        let at = base + i;
        let arg = args.get(at);
        if eq_ci(arg, "withdist") {
            req.withdist = true;
        } else if eq_ci(arg, "withhash") {
            req.withhash = true;
        } else if eq_ci(arg, "withcoord") {
            req.withcoord = true;
        } else if eq_ci(arg, "any") {
            req.any = true;
        } else if eq_ci(arg, "asc") {
            req.sort = Sort::Asc;
        } else if eq_ci(arg, "desc") {
            req.sort = Sort::Desc;
        } else if eq_ci(arg, "count") && i + 1 < remaining {
            let n = int_arg(args.get(at + 1))?;
            if n <= 0 {
                return Err(CmdError::GeoCountNotPositive);
            }
            req.count = usize::try_from(n).unwrap_or(usize::MAX);
            i += 1;
        } else if (eq_ci(arg, "store") || eq_ci(arg, "storedist"))
            && i + 1 < remaining
            && v.takes_store()
        {
            req.store = Some(args.get(at + 1));
            req.storedist = eq_ci(arg, "storedist");
            i += 1;
        } else if eq_ci(arg, "storedist") && v == Variant::SearchStore {
            req.storedist = true;
        } else if eq_ci(arg, "frommember") && i + 1 < remaining && search && !from_lonlat {
            if let Some(z) = z {
                set_centre(&mut req, member_position(z, args.get(at + 1))?);
            }
            from_member = true;
            i += 1;
        } else if eq_ci(arg, "fromlonlat") && i + 2 < remaining && search && !from_member {
            set_centre(&mut req, lon_lat(args, at + 1)?);
            from_lonlat = true;
            i += 2;
        } else if eq_ci(arg, "byradius") && i + 2 < remaining && search && !by_box {
            set_shape(&mut req, radius(args, at + 1)?);
            by_radius = true;
            i += 2;
        } else if eq_ci(arg, "bybox") && i + 3 < remaining && search && !by_radius {
            set_shape(&mut req, bybox(args, at + 1)?);
            by_box = true;
            i += 3;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if req.store.is_some() && (req.withdist || req.withhash || req.withcoord) {
        return Err(if v == Variant::SearchStore {
            CmdError::GeoSearchStoreWithOptions
        } else {
            CmdError::GeoStoreWithOptions
        });
    }
    if search && !(from_member || from_lonlat) {
        return Err(CmdError::quoted(
            "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for ",
            args.get(0),
            "",
        ));
    }
    if search && !(by_radius || by_box) {
        return Err(CmdError::quoted(
            "ERR exactly one of BYRADIUS and BYBOX can be specified for ",
            args.get(0),
            "",
        ));
    }
    if req.any && req.count == 0 {
        return Err(CmdError::GeoAnyNeedsCount);
    }
    Ok(req)
}

/// The members Redis answers, in its reply order (see [`search`]).
fn find<'a>(z: &'a ZSetValue, req: &Request<'_>) -> Vec<Hit<'a>> {
    // COUNT without ANY means the nearest ones (Redis sorts ASC then).
    let sort = match req.sort {
        Sort::None if req.count > 0 && !req.any => Sort::Asc,
        s => s,
    };
    if sort == Sort::Asc && req.count > 0 && !req.any {
        return search::nearest(z, &req.shape, req.count);
    }
    let limit = if req.any { req.count } else { usize::MAX };
    let mut hits = Vec::new();
    search::walk(z, &req.shape, |hit| {
        hits.push(hit);
        hits.len() < limit
    });
    match sort {
        Sort::Asc => hits.sort_by(Hit::cmp_near),
        Sort::Desc => hits.sort_by(Hit::cmp_far),
        Sort::None => {}
    }
    if req.count > 0 {
        hits.truncate(req.count);
    }
    hits
}

/// The reply of a search without STORE.
fn reply_hits(r: &mut Reply<'_>, req: &Request<'_>, hits: &[Hit<'_>]) {
    let options =
        usize::from(req.withdist) + usize::from(req.withhash) + usize::from(req.withcoord);
    r.array(hits.len());
    for hit in hits {
        if options > 0 {
            r.array(options + 1);
        }
        r.bulk(hit.member);
        if req.withdist {
            r.bulk(hash::format_distance(hit.dist_m / req.shape.conversion).as_bytes());
        }
        if req.withhash {
            r.int(hit.score as i64);
        }
        if req.withcoord {
            r.array(2);
            hash::reply_coordinate(r, hit.lon);
            hash::reply_coordinate(r, hit.lat);
        }
    }
}

/// `georadiusGeneric`: parse, find, then reply or store.
fn search_generic(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
    v: Variant,
) -> CmdResult {
    let (dst, entries) = {
        let z = read_set(e, ctx, args.get(v.source_at()))?;
        let req = parse_search(args, v, z)?;
        let hits = z.map(|z| find(z, &req)).unwrap_or_default();
        let Some(dst) = req.store else {
            reply_hits(r, &req, &hits);
            return Ok(Done);
        };
        let conversion = req.shape.conversion;
        let mut entries: Vec<(Vec<u8>, f64)> = hits
            .iter()
            .map(|h| {
                let score = if req.storedist {
                    h.dist_m / conversion
                } else {
                    h.score
                };
                (h.member.to_vec(), score)
            })
            .collect();
        entries.sort_by(zsets::redis_order);
        entries.dedup_by(|a, b| a.0 == b.0);
        (dst, entries)
    };
    let event = if v.is_search() {
        events::GEOSEARCHSTORE
    } else {
        events::GEORADIUSSTORE
    };
    let old = e.lookup_write(ctx, dst);
    if let Some(id) = old {
        e.delete(ctx.db, id);
    }
    if entries.is_empty() {
        if old.is_some() {
            ctx.changed(dst, crate::keys::events::DEL, 1);
        }
        r.int(0);
        return Ok(Done);
    }
    let value = ZSetValue::from_sorted(&entries, zsets::limits(e));
    e.add_collection(ctx, dst, Collection::ZSet(value));
    r.int(entries.len() as i64);
    ctx.changed(dst, event, entries.len() as u64);
    Ok(Done)
}

/// `GEORADIUS key longitude latitude radius M|KM|FT|MI [WITHCOORD] [WITHDIST]
/// [WITHHASH] [COUNT count [ANY]] [ASC|DESC] [STORE key|STOREDIST key]`.
pub(super) fn georadius(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    search_generic(e, ctx, args, r, Variant::Radius)
}

/// `GEORADIUS_RO key longitude latitude radius unit [options]` (no STORE).
pub(super) fn georadius_ro(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    search_generic(e, ctx, args, r, Variant::RadiusRo)
}

/// `GEORADIUSBYMEMBER key member radius unit [options] [STORE key|STOREDIST key]`.
pub(super) fn georadiusbymember(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    search_generic(e, ctx, args, r, Variant::ByMember)
}

/// `GEORADIUSBYMEMBER_RO key member radius unit [options]` (no STORE).
pub(super) fn georadiusbymember_ro(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    search_generic(e, ctx, args, r, Variant::ByMemberRo)
}

/// `GEOSEARCH key FROMMEMBER member|FROMLONLAT longitude latitude BYRADIUS radius
/// unit|BYBOX width height unit [ASC|DESC] [COUNT count [ANY]] [WITHCOORD]
/// [WITHDIST] [WITHHASH]`.
pub(super) fn geosearch(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    search_generic(e, ctx, args, r, Variant::Search)
}

/// `GEOSEARCHSTORE destination source FROM... BY... [ASC|DESC] [COUNT count
/// [ANY]] [STOREDIST]`: the number stored; an empty result deletes `destination`.
pub(super) fn geosearchstore(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    search_generic(e, ctx, args, r, Variant::SearchStore)
}
