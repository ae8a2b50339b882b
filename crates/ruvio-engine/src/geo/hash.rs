//! Redis's geohash arithmetic (geohash.c, geohash_helper.c), reimplemented
//! operation for operation.
//!
//! Why operation for operation: a geo set is a sorted set whose scores are these
//! hashes, and every reply (scores, positions, distances, which members a search
//! finds and in which order) is Redis's only if each floating-point step is the
//! same one, in the same order. So the constants, the divisions and the truncations
//! below are Redis's, and nothing is "simplified" even where algebra allows it.
//!
//! - A score is a 52-bit interleave of a 26-bit latitude cell (even bits) and a
//!   26-bit longitude cell (odd bits) over Redis's ranges (latitude
//!   ±85.05112878, the Web-Mercator limit; longitude ±180). A coordinate on the
//!   upper limit yields a cell index of 2^26, one bit above the 52, as in Redis.
//! - A search covers the shape with the cell at the estimated step that holds the
//!   centre and its eight neighbours, minus those the bounding box excludes
//!   ([`areas`]).
//! - Distances are the haversine formula on a sphere of radius 6372797.560856 m.

use std::io::Write as _;

use ruvio_resp::{Protocol, Reply};

/// Latitude limits (`GEO_LAT_MIN`/`GEO_LAT_MAX`): the Web-Mercator square.
pub const LAT_MIN: f64 = -85.05112878;
/// See [`LAT_MIN`].
pub const LAT_MAX: f64 = 85.05112878;
/// Longitude limits.
pub const LON_MIN: f64 = -180.0;
/// See [`LON_MIN`].
pub const LON_MAX: f64 = 180.0;
/// Steps (bits per coordinate) of a stored score (`GEO_STEP_MAX`).
pub const STEP_MAX: u8 = 26;
/// Redis's Earth radius (the quadratic mean radius of WGS-84).
pub const EARTH_RADIUS_M: f64 = 6372797.560856;
/// Half the Web-Mercator world width, the start of the step estimate.
const MERCATOR_MAX: f64 = 20037726.37;
/// Degrees to radians as Redis computes it (`M_PI / 180.0`).
const D_R: f64 = std::f64::consts::PI / 180.0;

const _: () = assert!(2 * STEP_MAX as u32 == 52);

/// A coordinate range of the hash.
#[derive(Clone, Copy, Debug)]
pub struct Range {
    /// Lower limit.
    pub min: f64,
    /// Upper limit.
    pub max: f64,
}

/// Redis's ranges (`geohashGetCoordRange`).
pub const LON_RANGE: Range = Range {
    min: LON_MIN,
    max: LON_MAX,
};
/// See [`LON_RANGE`].
pub const LAT_RANGE: Range = Range {
    min: LAT_MIN,
    max: LAT_MAX,
};
/// The standard geohash's latitude range (GEOHASH re-encodes with it).
const STANDARD_LAT_RANGE: Range = Range {
    min: -90.0,
    max: 90.0,
};

/// A geohash cell: `step` bits per coordinate, interleaved in `bits`
/// (`GeoHashBits`). The zero cell (`bits` and `step` 0) is "excluded".
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cell {
    /// Interleaved cell index (latitude on even bits).
    pub bits: u64,
    /// Bits per coordinate.
    pub step: u8,
}

impl Cell {
    /// The excluded cell (`GZERO`).
    pub const ZERO: Cell = Cell { bits: 0, step: 0 };

    /// `HASHISZERO`.
    pub fn is_zero(self) -> bool {
        self.bits == 0 && self.step == 0
    }

    /// The score range `[min, max)` of the members inside (`scoresOfGeoHashBox`).
    pub fn score_range(self) -> (f64, f64) {
        let min = align52(self.bits, self.step);
        let max = align52(self.bits.wrapping_add(1), self.step);
        (min as f64, max as f64)
    }

    /// Child `quadrant` (0..4, in score order) one step finer.
    pub fn child(self, quadrant: u64) -> Cell {
        Cell {
            bits: (self.bits << 2) | quadrant,
            step: self.step + 1,
        }
    }
}

/// `geohashAlign52Bits`.
fn align52(bits: u64, step: u8) -> u64 {
    bits.wrapping_shl(52 - 2 * u32::from(step.min(STEP_MAX)))
}

/// The even bits of `x` moved to bits 0..32 of a `u64`.
fn spread(x: u32) -> u64 {
    let mut v = u64::from(x);
    v = (v | (v << 16)) & 0x0000_FFFF_0000_FFFF;
    v = (v | (v << 8)) & 0x00FF_00FF_00FF_00FF;
    v = (v | (v << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
    v = (v | (v << 2)) & 0x3333_3333_3333_3333;
    (v | (v << 1)) & 0x5555_5555_5555_5555
}

/// The inverse of [`spread`]: bits 0, 2, 4 ... of `v` packed into 32 bits.
fn squeeze(v: u64) -> u32 {
    let mut v = v & 0x5555_5555_5555_5555;
    v = (v | (v >> 1)) & 0x3333_3333_3333_3333;
    v = (v | (v >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
    v = (v | (v >> 4)) & 0x00FF_00FF_00FF_00FF;
    v = (v | (v >> 8)) & 0x0000_FFFF_0000_FFFF;
    v = (v | (v >> 16)) & 0x0000_0000_FFFF_FFFF;
    v as u32
}

/// `interleave64`: latitude on the even bits, longitude on the odd.
fn interleave(lat: u32, lon: u32) -> u64 {
    spread(lat) | (spread(lon) << 1)
}

/// True when the point is inside Redis's limits (what GEOADD and a search centre
/// must satisfy).
pub fn valid_lon_lat(lon: f64, lat: f64) -> bool {
    (LON_MIN..=LON_MAX).contains(&lon) && (LAT_MIN..=LAT_MAX).contains(&lat)
}

/// `geohashEncode`: the cell of `step` bits holding the point, or `None` outside
/// the limits or the ranges.
pub fn encode(lon_range: Range, lat_range: Range, lon: f64, lat: f64, step: u8) -> Option<Cell> {
    if step == 0 || step > 32 || !valid_lon_lat(lon, lat) {
        return None;
    }
    if lat < lat_range.min || lat > lat_range.max || lon < lon_range.min || lon > lon_range.max {
        return None;
    }
    let mut lat_offset = (lat - lat_range.min) / (lat_range.max - lat_range.min);
    let mut lon_offset = (lon - lon_range.min) / (lon_range.max - lon_range.min);
    let scale = (1u64 << step) as f64;
    lat_offset *= scale;
    lon_offset *= scale;
    // C's double -> uint32_t truncation; both are within 0..=2^step here.
    Some(Cell {
        bits: interleave(lat_offset as u32, lon_offset as u32),
        step,
    })
}

/// The score GEOADD stores for a valid point.
pub fn score_of(lon: f64, lat: f64) -> Option<f64> {
    encode(LON_RANGE, LAT_RANGE, lon, lat, STEP_MAX).map(|c| align52(c.bits, c.step) as f64)
}

/// A cell's extent (`GeoHashArea`), in degrees.
#[derive(Clone, Copy, Debug)]
pub struct Area {
    /// Longitude `(min, max)`.
    pub lon: (f64, f64),
    /// Latitude `(min, max)`.
    pub lat: (f64, f64),
}

/// `geohashDecode` over Redis's ranges (the zero cell is never decoded here).
pub fn decode(cell: Cell) -> Area {
    decode_in(LON_RANGE, LAT_RANGE, cell)
}

fn decode_in(lon_range: Range, lat_range: Range, cell: Cell) -> Area {
    let lat_scale = lat_range.max - lat_range.min;
    let lon_scale = lon_range.max - lon_range.min;
    let ilat = squeeze(cell.bits);
    let ilon = squeeze(cell.bits >> 1);
    let cells = (1u64 << cell.step) as f64;
    // `ilato + 1` is C `uint32_t` arithmetic: it wraps.
    let edge = |i: u32, min: f64, scale: f64| min + (f64::from(i) * 1.0 / cells) * scale;
    Area {
        lat: (
            edge(ilat, lat_range.min, lat_scale),
            edge(ilat.wrapping_add(1), lat_range.min, lat_scale),
        ),
        lon: (
            edge(ilon, lon_range.min, lon_scale),
            edge(ilon.wrapping_add(1), lon_range.min, lon_scale),
        ),
    }
}

/// C's `(uint64_t)` of a double as gcc compiles it for x86-64 (the reference's
/// build): below 2^63 a signed truncation (`cvttsd2si`, whose out-of-range and
/// NaN answer is 2^63), from 2^63 up the same of `d - 2^63` with bit 63 flipped.
/// Undefined behaviour in C for negative and huge values, so this is what Redis
/// does with a score that is no geohash (ZADD of -1 or 1e300 into a geo set).
fn c_double_to_u64(d: f64) -> u64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    let truncate = |x: f64| -> u64 {
        if x.is_nan() || !(-TWO_63..TWO_63).contains(&x) {
            1 << 63
        } else {
            x as i64 as u64
        }
    };
    if d >= TWO_63 {
        truncate(d - TWO_63) ^ (1 << 63)
    } else {
        truncate(d)
    }
}

/// The position of a stored score (`decodeGeohash`): the centre of its cell,
/// clamped to the limits. A score that is not a geohash decodes too, through
/// [`c_double_to_u64`].
pub fn decode_score(score: f64) -> (f64, f64) {
    let area = decode(Cell {
        bits: c_double_to_u64(score),
        step: STEP_MAX,
    });
    let lon = ((area.lon.0 + area.lon.1) / 2.0).clamp(LON_MIN, LON_MAX);
    let lat = ((area.lat.0 + area.lat.1) / 2.0).clamp(LAT_MIN, LAT_MAX);
    (lon, lat)
}

/// GEOHASH's 11 characters: the position re-encoded over the standard latitude
/// range, 52 bits in base 32, the 11th character always `0`.
pub fn standard_geohash(score: f64) -> [u8; 11] {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let (lon, lat) = decode_score(score);
    // The decoded position is always within the limits, so this always encodes.
    let bits = encode(LON_RANGE, STANDARD_LAT_RANGE, lon, lat, STEP_MAX).map_or(0, |c| c.bits);
    let mut out = [b'0'; 11];
    for (i, slot) in out.iter_mut().enumerate().take(10) {
        let idx = (bits >> (52 - (i + 1) * 5)) & 0x1f;
        *slot = ALPHABET[idx as usize];
    }
    out
}

/// `geohash_move_x`: one cell east (`d > 0`) or west, wrapping around.
fn move_x(cell: &mut Cell, d: i8) {
    let shift = 64 - 2 * u32::from(cell.step);
    let mut x = cell.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let y = cell.bits & 0x5555_5555_5555_5555;
    let zz = 0x5555_5555_5555_5555u64.wrapping_shr(shift);
    if d > 0 {
        x = x.wrapping_add(zz.wrapping_add(1));
    } else {
        x |= zz;
        x = x.wrapping_sub(zz.wrapping_add(1));
    }
    x &= 0xaaaa_aaaa_aaaa_aaaau64.wrapping_shr(shift);
    cell.bits = x | y;
}

/// `geohash_move_y`: one cell north (`d > 0`) or south, wrapping around.
fn move_y(cell: &mut Cell, d: i8) {
    let shift = 64 - 2 * u32::from(cell.step);
    let x = cell.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let mut y = cell.bits & 0x5555_5555_5555_5555;
    let zz = 0xaaaa_aaaa_aaaa_aaaau64.wrapping_shr(shift);
    if d > 0 {
        y = y.wrapping_add(zz.wrapping_add(1));
    } else {
        y |= zz;
        y = y.wrapping_sub(zz.wrapping_add(1));
    }
    y &= 0x5555_5555_5555_5555u64.wrapping_shr(shift);
    cell.bits = x | y;
}

/// A cell moved by `dx` columns and `dy` rows (`geohashNeighbors`' moves).
fn neighbour(cell: Cell, dx: i8, dy: i8) -> Cell {
    let mut n = cell;
    if dx != 0 {
        move_x(&mut n, dx);
    }
    if dy != 0 {
        move_y(&mut n, dy);
    }
    n
}

/// `deg_rad`.
fn deg_rad(deg: f64) -> f64 {
    deg * D_R
}

/// `rad_deg`.
fn rad_deg(rad: f64) -> f64 {
    rad / D_R
}

/// `geohashGetLatDistance`: metres between two latitudes on a meridian.
pub fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS_M * (deg_rad(lat2) - deg_rad(lat1)).abs()
}

/// `geohashGetDistance`: haversine metres between two points.
pub fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let lon1r = deg_rad(lon1);
    let lon2r = deg_rad(lon2);
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let lat1r = deg_rad(lat1);
    let lat2r = deg_rad(lat2);
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_M * a.sqrt().asin()
}

/// `geohashEstimateStepsByRadius`.
fn estimate_steps(range_m: f64, lat: f64) -> u8 {
    if range_m == 0.0 {
        return STEP_MAX;
    }
    let mut range_m = range_m;
    let mut step: i32 = 1;
    // Bounded: doubling reaches MERCATOR_MAX from the least positive double in
    // about 1100 rounds (and an infinite range never enters the loop).
    while range_m < MERCATOR_MAX {
        range_m *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, i32::from(STEP_MAX)) as u8
}

/// What a search covers around its centre.
#[derive(Clone, Copy, Debug)]
pub enum ShapeKind {
    /// BYRADIUS: a radius in the unit.
    Radius(f64),
    /// BYBOX: width and height in the unit.
    Box {
        /// East-west extent.
        width: f64,
        /// North-south extent.
        height: f64,
    },
}

/// A search shape (`GeoShape`): centre, extent, and the unit's metres.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Centre longitude.
    pub lon: f64,
    /// Centre latitude.
    pub lat: f64,
    /// The extent.
    pub kind: ShapeKind,
    /// Metres per unit.
    pub conversion: f64,
}

impl Shape {
    /// `geohashBoundingBox`: `[min lon, min lat, max lon, max lat]`.
    fn bounding_box(&self) -> [f64; 4] {
        let (height, width) = match self.kind {
            ShapeKind::Radius(r) => (self.conversion * r, self.conversion * r),
            ShapeKind::Box { width, height } => (
                self.conversion * (height / 2.0),
                self.conversion * (width / 2.0),
            ),
        };
        let lat_delta = rad_deg(height / EARTH_RADIUS_M);
        let lon_delta_top = rad_deg(width / EARTH_RADIUS_M / deg_rad(self.lat + lat_delta).cos());
        let lon_delta_bottom =
            rad_deg(width / EARTH_RADIUS_M / deg_rad(self.lat - lat_delta).cos());
        let lon_delta = if self.lat < 0.0 {
            lon_delta_bottom
        } else {
            lon_delta_top
        };
        [
            self.lon - lon_delta,
            self.lat - lat_delta,
            self.lon + lon_delta,
            self.lat + lat_delta,
        ]
    }

    /// The metres from the centre that decide the step.
    fn reach_m(&self) -> f64 {
        let reach = match self.kind {
            ShapeKind::Radius(r) => r,
            ShapeKind::Box { width, height } => {
                ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
            }
        };
        reach * self.conversion
    }

    /// `geoWithinShape` for a decoded point: its distance from the centre in
    /// metres when inside.
    pub fn contains(&self, lon: f64, lat: f64) -> Option<f64> {
        match self.kind {
            ShapeKind::Radius(r) => {
                let d = distance(self.lon, self.lat, lon, lat);
                (d <= r * self.conversion).then_some(d)
            }
            ShapeKind::Box { width, height } => {
                let (width_m, height_m) = (width * self.conversion, height * self.conversion);
                if lat_distance(lat, self.lat) > height_m / 2.0 {
                    return None;
                }
                if distance(lon, lat, self.lon, lat) > width_m / 2.0 {
                    return None;
                }
                Some(distance(self.lon, self.lat, lon, lat))
            }
        }
    }
}

/// The cells a search scans, in Redis's order: centre, N, S, E, W, NE, NW, SE, SW
/// (`geohashCalculateAreasByShapeWGS84`); excluded ones are [`Cell::ZERO`].
pub fn areas(shape: &Shape) -> [Cell; 9] {
    let [min_lon, min_lat, max_lon, max_lat] = shape.bounding_box();
    let mut step = estimate_steps(shape.reach_m(), shape.lat);
    let center = |step| encode(LON_RANGE, LAT_RANGE, shape.lon, shape.lat, step);
    // The centre is within the limits (checked when parsed or decoded from a
    // member), so it always encodes.
    let mut hash = center(step).unwrap_or(Cell { bits: 0, step });
    let north = decode(neighbour(hash, 0, 1));
    let south = decode(neighbour(hash, 0, -1));
    let east = decode(neighbour(hash, 1, 0));
    let west = decode(neighbour(hash, -1, 0));
    let decrease = north.lat.1 < max_lat
        || south.lat.0 > min_lat
        || east.lon.1 < max_lon
        || west.lon.0 > min_lon;
    if step > 1 && decrease {
        step -= 1;
        hash = center(step).unwrap_or(Cell { bits: 0, step });
    }
    let area = decode(hash);
    let mut cells = [
        hash,
        neighbour(hash, 0, 1),
        neighbour(hash, 0, -1),
        neighbour(hash, 1, 0),
        neighbour(hash, -1, 0),
        neighbour(hash, 1, 1),
        neighbour(hash, -1, 1),
        neighbour(hash, 1, -1),
        neighbour(hash, -1, -1),
    ];
    const N: usize = 1;
    const S: usize = 2;
    const E: usize = 3;
    const W: usize = 4;
    const NE: usize = 5;
    const NW: usize = 6;
    const SE: usize = 7;
    const SW: usize = 8;
    if step >= 2 {
        let mut exclude = |which: [usize; 3]| which.iter().for_each(|&i| cells[i] = Cell::ZERO);
        if area.lat.0 < min_lat {
            exclude([S, SW, SE]);
        }
        if area.lat.1 > max_lat {
            exclude([N, NE, NW]);
        }
        if area.lon.0 < min_lon {
            exclude([W, SW, NW]);
        }
        if area.lon.1 > max_lon {
            exclude([E, SE, NE]);
        }
    }
    cells
}

// ---- conservative bounds for skipping parts of a cell -----------------------

/// Relative slack on every bound: far above the rounding of Redis's own
/// distance (a few ulps), far below anything that matters for pruning.
const BOUND_SLACK_REL: f64 = 1e-9;
/// Absolute slack in metres (the rounding of a latitude difference near 0).
const BOUND_SLACK_M: f64 = 1e-6;

/// A lower bound in metres, shrunk by the slack so that a point Redis finds at
/// distance `d` always has `bound <= d`.
fn slackened(metres: f64) -> f64 {
    metres * (1.0 - BOUND_SLACK_REL) - BOUND_SLACK_M
}

/// Metres of the chord-angle `a` of the haversine formula.
fn metres_of_haversine(a: f64) -> f64 {
    2.0 * EARTH_RADIUS_M * a.clamp(0.0, 1.0).sqrt().asin()
}

/// Degrees between `x` and the interval `[lo, hi]`.
fn gap(x: f64, lo: f64, hi: f64) -> f64 {
    if x < lo {
        lo - x
    } else if x > hi {
        x - hi
    } else {
        0.0
    }
}

/// Degrees of longitude between `x` and `[lo, hi]` around the circle (0..=180).
fn lon_gap(x: f64, lo: f64, hi: f64) -> f64 {
    if (lo..=hi).contains(&x) {
        return 0.0;
    }
    let east = (lo - x).rem_euclid(360.0);
    let west = (x - hi).rem_euclid(360.0);
    east.min(west).min(180.0)
}

/// Lower bounds on where the members of a cell can be, relative to a shape's
/// centre. Every member of a cell decodes inside the cell's extent clamped to the
/// limits (a decoded position is the clamped centre of its 26-step cell, which
/// lies in every coarser cell that holds it).
pub struct CellBounds {
    /// Least metres from the centre (great-circle), slackened.
    pub distance_m: f64,
    /// Least metres from the centre's latitude along a meridian, slackened.
    pub lat_m: f64,
    /// Least metres east-west along the member's own parallel, slackened.
    pub lon_m: f64,
}

/// The bounds of `cell` for a search centred at `(lon, lat)` whose centre
/// latitude has cosine `cos_lat`.
pub fn cell_bounds(cell: Cell, lon: f64, lat: f64, cos_lat: f64) -> CellBounds {
    let area = decode(cell);
    let lat_lo = area.lat.0.clamp(LAT_MIN, LAT_MAX);
    let lat_hi = area.lat.1.clamp(LAT_MIN, LAT_MAX);
    let lon_lo = area.lon.0.clamp(LON_MIN, LON_MAX);
    let lon_hi = area.lon.1.clamp(LON_MIN, LON_MAX);
    let dlat = deg_rad(gap(lat, lat_lo, lat_hi));
    let dlon = deg_rad(lon_gap(lon, lon_lo, lon_hi));
    // cos is concave on the latitudes of the limits: least at an end.
    let cos_min = deg_rad(lat_lo).cos().min(deg_rad(lat_hi).cos()).max(0.0);
    let (sin_lat, sin_lon) = ((dlat / 2.0).sin(), (dlon / 2.0).sin());
    let a = sin_lat * sin_lat + cos_lat.max(0.0) * cos_min * sin_lon * sin_lon;
    let along_parallel = cos_min * cos_min * sin_lon * sin_lon;
    CellBounds {
        distance_m: slackened(metres_of_haversine(a)),
        lat_m: slackened(EARTH_RADIUS_M * dlat),
        lon_m: slackened(metres_of_haversine(along_parallel)),
    }
}

impl Shape {
    /// The cosine of the centre's latitude, for [`cell_bounds`].
    pub fn cos_lat(&self) -> f64 {
        deg_rad(self.lat).cos()
    }

    /// False when no member of a cell with these bounds can be inside the shape.
    pub fn may_contain(&self, b: &CellBounds) -> bool {
        match self.kind {
            ShapeKind::Radius(r) => b.distance_m <= r * self.conversion,
            ShapeKind::Box { width, height } => {
                b.lat_m <= height * self.conversion / 2.0
                    && b.lon_m <= width * self.conversion / 2.0
            }
        }
    }
}

// ---- reply formatting -------------------------------------------------------

/// Longest text of a formatted coordinate or distance: `-180.` and 17 digits, or
/// a distance below 10^15 m with 4 decimals.
const NUMBER_TEXT_BYTES: usize = 40;

/// A number's text on the stack.
pub struct NumberText {
    bytes: [u8; NUMBER_TEXT_BYTES],
    len: usize,
}

impl NumberText {
    /// The text.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    fn write(args: std::fmt::Arguments<'_>) -> NumberText {
        let mut bytes = [0u8; NUMBER_TEXT_BYTES];
        let mut rest = &mut bytes[..];
        // A text longer than the buffer is cut (never the case for the values
        // formatted here: coordinates and distances on Earth).
        let _ = rest.write_fmt(args);
        let len = NUMBER_TEXT_BYTES - rest.len();
        NumberText { bytes, len }
    }
}

/// A distance with 4 decimals as Redis 7.2's `fixedpoint_d2string(d, 4)` (since
/// 7.0.6): scaled by 10^4, rounded to nearest-even (`llrint`), then printed.
pub fn format_distance(d: f64) -> NumberText {
    let scaled = (d * 10000.0).round_ties_even();
    // Distances are non-negative and below 10^15 (metres on Earth in any unit).
    let units = scaled.max(0.0) as u64;
    NumberText::write(format_args!("{}.{:04}", units / 10000, units % 10000))
}

/// A coordinate as `addReplyHumanLongDouble`: `%.17Lf` with trailing zeros and a
/// trailing point removed, `-0` as `0`.
pub fn format_coordinate(x: f64) -> NumberText {
    let mut t = NumberText::write(format_args!("{x:.17}"));
    while t.len > 0 && t.bytes[t.len - 1] == b'0' {
        t.len -= 1;
    }
    if t.len > 0 && t.bytes[t.len - 1] == b'.' {
        t.len -= 1;
    }
    if t.as_bytes() == b"-0" {
        t.bytes[0] = b'0';
        t.len = 1;
    }
    t
}

/// Reply with a coordinate: a bulk string in RESP2, a double in RESP3.
pub fn reply_coordinate(r: &mut Reply<'_>, x: f64) {
    let text = format_coordinate(x);
    match r.proto {
        Protocol::Resp2 => r.bulk(text.as_bytes()),
        Protocol::Resp3 => {
            r.raw(b",");
            r.raw(text.as_bytes());
            r.raw(b"\r\n");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_are_redis_scores() {
        // GEOADD g 13.361389 38.115556 Palermo 15.087269 37.502669 Catania
        // 180 85.05112878 top -180 -85.05112878 bot, on redis-server 7.0.
        assert_eq!(score_of(13.361389, 38.115556), Some(3479099956230698.0));
        assert_eq!(score_of(15.087269, 37.502669), Some(3479447370796909.0));
        assert_eq!(score_of(180.0, 85.05112878), Some(13510798882111488.0));
        assert_eq!(score_of(-180.0, -85.05112878), Some(0.0));
        assert_eq!(score_of(180.1, 0.0), None);
        assert_eq!(score_of(0.0, -85.06), None);
    }

    #[test]
    fn positions_are_redis_positions() {
        let text = |x: f64| String::from_utf8(format_coordinate(x).as_bytes().to_vec()).unwrap();
        let (lon, lat) = decode_score(3479099956230698.0);
        assert_eq!(
            (text(lon), text(lat)),
            ("13.36138933897018433".into(), "38.11555639549629859".into())
        );
        let (lon, lat) = decode_score(13510798882111488.0);
        assert_eq!(
            (text(lon), text(lat)),
            ("180".into(), "85.0511287799999991".into())
        );
        let (lon, lat) = decode_score(0.0);
        assert_eq!(
            (text(lon), text(lat)),
            (
                "-179.99999731779098511".into(),
                "-85.05112751263942528".into()
            )
        );
        // Scores that are no geohash (ZADD -1, 1e300, inf, -inf, 2^52, 1.5).
        assert_eq!(decode_score(-1.0), (180.0, LAT_MAX));
        assert_eq!(decode_score(1e300), decode_score(0.0));
        assert_eq!(decode_score(f64::INFINITY), decode_score(0.0));
        assert_eq!(text(decode_score(f64::NEG_INFINITY).0), "180");
        assert_eq!(
            text(decode_score(f64::NEG_INFINITY).1),
            "-85.05112751263942528"
        );
        assert_eq!(
            text(decode_score(4503599627370496.0).1),
            "85.0511287799999991"
        );
        assert_eq!(text(decode_score(1.5).1), "-85.05112497791824921");
    }

    #[test]
    fn geohash_strings_are_redis_strings() {
        let s = |score: f64| String::from_utf8(standard_geohash(score).to_vec()).unwrap();
        assert_eq!(s(3479099956230698.0), "sqc8b49rny0");
        assert_eq!(s(13510798882111488.0), "bp05b5048p0");
        assert_eq!(s(0.0), "00bh0hbj200");
        assert_eq!(s(1.5), "00bh0hbj210");
    }

    #[test]
    fn distances_are_redis_distances() {
        let (a, b) = (
            decode_score(3479099956230698.0),
            decode_score(3479447370796909.0),
        );
        let d = distance(a.0, a.1, b.0, b.1);
        assert_eq!(format_distance(d / 1000.0).as_bytes(), b"166.2742");
        assert_eq!(format_distance(d).as_bytes(), b"166274.1516");
        assert_eq!(format_distance(0.0).as_bytes(), b"0.0000");
        assert_eq!(format_distance(0.00005).as_bytes(), b"0.0000");
        assert_eq!(format_distance(0.00015).as_bytes(), b"0.0001");
        // llrint of the scaled value: 0.00025 * 10^4 rounds to 2.5, a tie to even
        // (printf's "%.4f" of the exact binary value would say 0.0003).
        assert_eq!(format_distance(0.00025).as_bytes(), b"0.0002");
        assert_eq!(format_distance(12.5).as_bytes(), b"12.5000");
        // Same longitude: the meridian shortcut.
        assert_eq!(distance(10.0, 0.0, 10.0, 1.0), lat_distance(0.0, 1.0));
    }

    #[test]
    fn neighbours_wrap_around_the_antimeridian_and_the_poles() {
        let west_edge = encode(LON_RANGE, LAT_RANGE, -179.9, 0.0, 4).unwrap();
        let east = decode(neighbour(west_edge, -1, 0));
        assert_eq!(east.lon.1, 180.0);
        let top = encode(LON_RANGE, LAT_RANGE, 0.0, 85.0, 4).unwrap();
        assert_eq!(decode(neighbour(top, 0, 1)).lat.0, LAT_MIN);
        let c = encode(LON_RANGE, LAT_RANGE, 10.0, 10.0, 8).unwrap();
        for (dx, dy) in [(1, 0), (-1, 0), (0, 1), (0, -1)] {
            let n = neighbour(c, dx, dy);
            assert_eq!(neighbour(n, -dx, -dy), c);
        }
    }

    #[test]
    fn areas_estimate_the_step_as_redis() {
        let shape = Shape {
            lon: 15.0,
            lat: 37.0,
            kind: ShapeKind::Radius(200.0),
            conversion: 1000.0,
        };
        let cells = areas(&shape);
        assert!(cells.iter().all(|c| c.is_zero() || c.step == cells[0].step));
        assert_eq!(estimate_steps(0.0, 0.0), 26);
        assert_eq!(estimate_steps(50_000.0, 0.0), 8);
        assert_eq!(estimate_steps(50_000.0, 70.0), 7);
        assert_eq!(estimate_steps(50_000.0, -85.0), 6);
        assert_eq!(estimate_steps(f64::INFINITY, 0.0), 1);
        assert_eq!(estimate_steps(1e-300, 0.0), 26);
    }

    #[test]
    fn cell_bounds_never_exceed_a_members_distance() {
        // Members all over a coarse cell and its children: the bound of every
        // cell holding a member is at most the member's distance.
        let shape = Shape {
            lon: 179.9,
            lat: 84.0,
            kind: ShapeKind::Radius(1.0),
            conversion: 1.0,
        };
        let cos_lat = shape.cos_lat();
        for i in 0..2000u64 {
            let score = (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 12) as f64;
            let (lon, lat) = decode_score(score);
            let d = distance(shape.lon, shape.lat, lon, lat);
            for step in 1..=STEP_MAX {
                let cell = Cell {
                    bits: (score as u64) >> (52 - 2 * u32::from(step)),
                    step,
                };
                assert!(cell_bounds(cell, shape.lon, shape.lat, cos_lat).distance_m <= d);
            }
        }
    }
}
