//! Zero-copy reader for `.xplane.pb` captures (`tensorflow.profiler.XSpace`, field numbers in
//! `../shared/xplane-format.md`).
//!
//! A capture of a 1000-iteration benchmark holds about two million events. Decoding them into
//! owned structs (what `prost::Message` derives do) costs a `Vec` and a `String` per event and
//! several times the file size in memory, so this reader borrows from the file buffer instead:
//! planes, lines and metadata are decoded up front (they are few), while the events of a line
//! are kept as the line's raw bytes and decoded on the fly by [`XLine::events`]. [`parse`]
//! walks every event and stat once to validate the whole file, so that a corrupt or truncated
//! capture fails there with a clear error and the lazy iterators afterwards cannot meet one.
//! Every length is checked against the bytes that remain before it is used: a hostile length
//! field can never cause a large allocation or an out-of-bounds read.

use std::collections::HashMap;

use super::wire::{decode_varint, WireType};

/// Why a capture could not be decoded: the protobuf structure is broken (truncated file, bad
/// length, bad wire type, ...). Boxed, so that the hot decoding functions return a
/// two-word `Result`.
#[derive(Debug, thiserror::Error)]
#[error("corrupt or truncated .xplane.pb: {} at byte {} of {}", .0.what, .0.offset, .0.len)]
pub struct DecodeError(Box<Malformed>);

/// Where and how a capture is broken.
#[derive(Debug)]
pub struct Malformed {
    pub what: String,
    pub offset: usize,
    pub len: usize,
}

impl DecodeError {
    pub fn details(&self) -> &Malformed {
        &self.0
    }
}

type Result<T> = std::result::Result<T, DecodeError>;

/// A bounds-checked cursor over one protobuf message.
#[derive(Clone)]
struct Reader<'a> {
    rest: &'a [u8],
    /// Start address of the whole file buffer, to report absolute offsets in errors.
    file_start: usize,
    file_len: usize,
}

impl std::fmt::Debug for Reader<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "<{} bytes>", self.rest.len())
    }
}

impl<'a> Reader<'a> {
    fn new(data: &'a [u8], file: &'a [u8]) -> Self {
        Reader { rest: data, file_start: file.as_ptr() as usize, file_len: file.len() }
    }

    #[inline(always)]
    fn sub(&self, data: &'a [u8]) -> Self {
        Reader { rest: data, file_start: self.file_start, file_len: self.file_len }
    }

    #[cold]
    #[inline(never)]
    fn err(&self, what: impl Into<String>) -> DecodeError {
        DecodeError(Box::new(Malformed {
            what: what.into(),
            offset: (self.rest.as_ptr() as usize).saturating_sub(self.file_start),
            len: self.file_len,
        }))
    }

    #[inline(always)]
    fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// A varint, bounds-checked (see [`decode_varint`]).
    #[inline(always)]
    fn varint(&mut self) -> Result<u64> {
        match decode_varint(self.rest) {
            Some((v, n)) => {
                self.rest = &self.rest[n..];
                Ok(v)
            }
            None => Err(self.err("truncated or overlong varint")),
        }
    }

    /// Reads a field key; the field number and the wire type.
    #[inline(always)]
    fn key(&mut self) -> Result<(u32, WireType)> {
        let key = self.varint()?;
        let wire = WireType::of_key(key).ok_or_else(|| self.err("invalid wire type"))?;
        let field = key >> 3;
        if field == 0 || field > u64::from(u32::MAX >> 3) {
            return Err(self.err(format!("invalid field number {field}")));
        }
        Ok((field as u32, wire))
    }

    /// A length-delimited payload, bounded by what remains of the enclosing message.
    #[inline(always)]
    fn len_delimited(&mut self) -> Result<&'a [u8]> {
        let len = self.varint()?;
        if len > self.rest.len() as u64 {
            return Err(self.err(format!("length {len} exceeds the {} bytes left", self.rest.len())));
        }
        let (head, tail) = self.rest.split_at(len as usize);
        self.rest = tail;
        Ok(head)
    }

    #[inline(always)]
    fn fixed64(&mut self) -> Result<u64> {
        if self.rest.len() < 8 {
            return Err(self.err("truncated fixed64"));
        }
        let (head, tail) = self.rest.split_at(8);
        self.rest = tail;
        let mut b = [0u8; 8];
        b.copy_from_slice(head);
        Ok(u64::from_le_bytes(b))
    }

    #[inline(always)]
    fn skip(&mut self, wire: WireType) -> Result<()> {
        match wire {
            WireType::Varint => self.varint().map(drop),
            WireType::SixtyFourBit => self.fixed64().map(drop),
            WireType::LengthDelimited => self.len_delimited().map(drop),
            WireType::ThirtyTwoBit => {
                if self.rest.len() < 4 {
                    return Err(self.err("truncated fixed32"));
                }
                self.rest = &self.rest[4..];
                Ok(())
            }
            // No field of the XSpace schema is a group; a group here means garbage.
            WireType::StartGroup | WireType::EndGroup => Err(self.err("unexpected group")),
        }
    }

    /// An int64 field; wrong wire types are a corruption, not a silent zero.
    #[inline(always)]
    fn int64(&mut self, wire: WireType, name: &str) -> Result<i64> {
        if wire != WireType::Varint {
            return Err(self.err(format!("{name}: expected a varint")));
        }
        Ok(self.varint()? as i64)
    }

    fn string(&mut self, wire: WireType, name: &str) -> Result<&'a str> {
        if wire != WireType::LengthDelimited {
            return Err(self.err(format!("{name}: expected a string")));
        }
        let at = self.clone();
        let bytes = self.len_delimited()?;
        std::str::from_utf8(bytes).map_err(|_| at.err(format!("{name}: invalid UTF-8")))
    }

    #[inline(always)]
    fn message(&mut self, wire: WireType, name: &str) -> Result<Reader<'a>> {
        if wire != WireType::LengthDelimited {
            return Err(self.err(format!("{name}: expected a message")));
        }
        let bytes = self.len_delimited()?;
        Ok(self.sub(bytes))
    }
}

/// The value of one [`XStat`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StatValue<'a> {
    Double(f64),
    Uint64(u64),
    Int64(i64),
    Str(&'a str),
    Bytes(&'a [u8]),
    /// The id of a stat-metadata entry whose name is the string value.
    Ref(u64),
    /// No value set (all fields at their defaults).
    None,
}

impl StatValue<'_> {
    /// The value as a number, when it is one.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            StatValue::Double(v) => Some(v),
            StatValue::Uint64(v) => Some(v as f64),
            StatValue::Int64(v) => Some(v as f64),
            _ => None,
        }
    }

    /// The value as a signed integer; uint64 values above `i64::MAX` wrap, which keeps them
    /// distinct as grouping keys.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            StatValue::Uint64(v) => Some(v as i64),
            StatValue::Int64(v) => Some(v),
            StatValue::Double(v) if v.fract() == 0.0 => Some(v as i64),
            // CPU captures store some integers as strings in the JSON trace; be lenient here too.
            StatValue::Str(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    /// The value as an unsigned integer (program ids exceed 2^63 on TPU).
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            StatValue::Uint64(v) => Some(v),
            StatValue::Int64(v) => Some(v as u64),
            StatValue::Str(s) => s.trim().parse().ok(),
            _ => None,
        }
    }
}

/// One statistic attached to a plane, an event or an event metadata.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct XStat<'a> {
    pub metadata_id: i64,
    pub value: StatValue<'a>,
}

fn decode_stat<'a>(mut r: Reader<'a>) -> Result<XStat<'a>> {
    let mut stat = XStat { metadata_id: 0, value: StatValue::None };
    while !r.is_empty() {
        let (field, wire) = r.key()?;
        match (field, wire) {
            (1, _) => stat.metadata_id = r.int64(wire, "XStat.metadata_id")?,
            (2, WireType::SixtyFourBit) => stat.value = StatValue::Double(f64::from_bits(r.fixed64()?)),
            (3, WireType::Varint) => stat.value = StatValue::Uint64(r.varint()?),
            (4, WireType::Varint) => stat.value = StatValue::Int64(r.varint()? as i64),
            (5, _) => stat.value = StatValue::Str(r.string(wire, "XStat.str_value")?),
            (6, WireType::LengthDelimited) => stat.value = StatValue::Bytes(r.len_delimited()?),
            (7, WireType::Varint) => stat.value = StatValue::Ref(r.varint()?),
            (2..=7, _) => return Err(r.err(format!("XStat field {field}: wrong wire type"))),
            _ => r.skip(wire)?,
        }
    }
    Ok(stat)
}

/// The metadata id of a stat body, found without decoding its value (skipping a
/// length-delimited value is a pointer move; decoding a string checks its UTF-8).
fn stat_id_only(mut r: Reader<'_>) -> Option<i64> {
    while !r.is_empty() {
        let (field, wire) = r.key().ok()?;
        if field == 1 {
            return r.int64(wire, "XStat.metadata_id").ok();
        }
        r.skip(wire).ok()?;
    }
    Some(0)
}

/// The stats of an event whose metadata id `want` accepts; the others are skipped undecoded.
/// The hot loops of the analysis read a few stats of millions of events.
pub struct WantedStats<'a, F> {
    reader: Reader<'a>,
    want: F,
}

impl<'a, F: Fn(i64) -> bool> Iterator for WantedStats<'a, F> {
    type Item = XStat<'a>;

    fn next(&mut self) -> Option<XStat<'a>> {
        while !self.reader.is_empty() {
            let (field, wire) = self.reader.key().ok()?;
            if field == 4 && wire == WireType::LengthDelimited {
                let bytes = self.reader.len_delimited().ok()?;
                let body = self.reader.sub(bytes);
                if (self.want)(stat_id_only(body.clone())?) {
                    return decode_stat(body).ok();
                }
                continue;
            }
            self.reader.skip(wire).ok()?;
        }
        None
    }
}

/// Iterates the stats stored under `field` in a message body that [`parse`] has validated.
#[derive(Clone)]
pub struct StatIter<'a> {
    reader: Reader<'a>,
    field: u32,
}

impl<'a> Iterator for StatIter<'a> {
    type Item = XStat<'a>;

    fn next(&mut self) -> Option<XStat<'a>> {
        // The body was validated by `parse`, so errors cannot happen here; if one did (a bug),
        // ending the iteration is safer than panicking.
        while !self.reader.is_empty() {
            let (field, wire) = self.reader.key().ok()?;
            if field == self.field && wire == WireType::LengthDelimited {
                let body = self.reader.len_delimited().ok()?;
                return decode_stat(self.reader.sub(body)).ok();
            }
            self.reader.skip(wire).ok()?;
        }
        None
    }
}

/// One event of a line. Its stats are decoded lazily by [`XEvent::stats`].
#[derive(Clone, Debug)]
pub struct XEvent<'a> {
    pub metadata_id: i64,
    pub offset_ps: i64,
    pub num_occurrences: i64,
    pub duration_ps: i64,
    body: Reader<'a>,
}

impl<'a> XEvent<'a> {
    /// The event's stats, in file order (the same stat may appear twice).
    pub fn stats(&self) -> StatIter<'a> {
        StatIter { reader: self.body.clone(), field: 4 }
    }

    /// The event's stats whose metadata id `want` accepts, without decoding the others.
    pub fn stats_where<F: Fn(i64) -> bool>(&self, want: F) -> WantedStats<'a, F> {
        WantedStats { reader: self.body.clone(), want }
    }
}

fn decode_event<'a>(mut r: Reader<'a>) -> Result<XEvent<'a>> {
    let body = r.clone();
    let mut ev = XEvent { metadata_id: 0, offset_ps: 0, num_occurrences: 0, duration_ps: 0, body };
    while !r.is_empty() {
        let (field, wire) = r.key()?;
        match field {
            1 => ev.metadata_id = r.int64(wire, "XEvent.metadata_id")?,
            2 => ev.offset_ps = r.int64(wire, "XEvent.offset_ps")?,
            3 => ev.duration_ps = r.int64(wire, "XEvent.duration_ps")?,
            5 => ev.num_occurrences = r.int64(wire, "XEvent.num_occurrences")?,
            _ => r.skip(wire)?,
        }
    }
    Ok(ev)
}

/// Iterates the events of a validated line.
pub struct EventIter<'a> {
    reader: Reader<'a>,
}

impl<'a> Iterator for EventIter<'a> {
    type Item = XEvent<'a>;

    fn next(&mut self) -> Option<XEvent<'a>> {
        while !self.reader.is_empty() {
            let (field, wire) = self.reader.key().ok()?;
            if field == 4 && wire == WireType::LengthDelimited {
                let body = self.reader.len_delimited().ok()?;
                return decode_event(self.reader.sub(body)).ok();
            }
            self.reader.skip(wire).ok()?;
        }
        None
    }
}

/// A timeline (a thread, a stream, or a kind of device activity) of a plane.
#[derive(Debug)]
pub struct XLine<'a> {
    pub id: i64,
    pub display_id: i64,
    pub name: &'a str,
    pub display_name: &'a str,
    pub timestamp_ns: i64,
    pub duration_ps: i64,
    /// Number of events, counted by [`parse`].
    pub event_count: usize,
    /// Events whose duration the last [`XLine::scan_events`] found impossible (negative, or
    /// longer than [`MAX_EVENT_PS`]) and handed over as 0.
    pub impossible_durations: std::cell::Cell<usize>,
    body: Reader<'a>,
}

/// The longest duration an event may have: 7 days in picoseconds (ours; no profiler capture
/// runs that long, while a corrupt `2^63` or a negative duration would make negative or
/// overflowing execution times).
pub const MAX_EVENT_PS: i64 = 7 * 24 * 3600 * 1_000_000_000_000;

impl<'a> XLine<'a> {
    /// The line's events, decoded on the fly.
    pub fn events(&self) -> EventIter<'a> {
        EventIter { reader: self.body.clone() }
    }

    /// Start of an event in picoseconds since the profile start.
    pub fn start_ps(&self, ev: &XEvent<'_>) -> i64 {
        self.start_ps_of(ev.offset_ps)
    }

    /// Start in picoseconds since the profile start of an event at `offset_ps` on this line.
    #[inline(always)]
    pub fn start_ps_of(&self, offset_ps: i64) -> i64 {
        self.timestamp_ns.saturating_mul(1000).saturating_add(offset_ps)
    }
}

/// Maps a stat metadata id to a small code (0: not wanted): a dense table for the small
/// non-negative ids captures use, a hash map for the rest. Looked up once per stat.
#[derive(Debug, Default, Clone)]
pub struct StatCodes {
    dense: Vec<u8>,
    sparse: HashMap<i64, u8>,
}

/// Codes run from 1 to `MAX_CODES - 1`.
pub const MAX_CODES: usize = 8;

impl StatCodes {
    /// Wants the stat `id` under `code` (1..MAX_CODES).
    pub fn set(&mut self, id: i64, code: u8) {
        debug_assert!((1..MAX_CODES as u8).contains(&code));
        if (0..4096).contains(&id) {
            let i = id as usize;
            if self.dense.len() <= i {
                self.dense.resize(i + 1, 0);
            }
            self.dense[i] = code;
        } else {
            self.sparse.insert(id, code);
        }
    }

    #[inline(always)]
    pub fn get(&self, id: i64) -> u8 {
        match self.dense.get(id as usize) {
            Some(&c) if id >= 0 => c,
            _ if self.sparse.is_empty() => 0,
            _ => self.sparse.get(&id).copied().unwrap_or(0),
        }
    }

    /// Whether any stat is wanted.
    pub fn is_empty(&self) -> bool {
        self.sparse.is_empty() && self.dense.iter().all(|&c| c == 0)
    }
}

/// One event as [`XLine::scan_events`] hands it over: its fields and the values of the wanted
/// stats by code (the first occurrence of a stat wins).
#[derive(Debug, Clone)]
pub struct ScannedEvent<'a> {
    pub metadata_id: i64,
    pub offset_ps: i64,
    pub duration_ps: i64,
    pub stats: [Option<StatValue<'a>>; MAX_CODES],
}

impl<'a> XLine<'a> {
    /// Decodes the line's events one by one, handing each to `f`, and returns how many there
    /// were. Only the stats that `codes` wants are decoded; the others are skipped by their
    /// (checked) length. A corrupt event is an error, never a panic. This is the hot loop of a
    /// large capture: no allocation, one pass.
    pub fn scan_events(&self, codes: &StatCodes, mut f: impl FnMut(&ScannedEvent<'a>)) -> Result<usize> {
        let mut r = self.body.clone();
        let (mut n, mut impossible) = (0usize, 0usize);
        let mut ev = ScannedEvent { metadata_id: 0, offset_ps: 0, duration_ps: 0, stats: [None; MAX_CODES] };
        while !r.is_empty() {
            let (field, wire) = r.key()?;
            if field != 4 {
                r.skip(wire)?;
                continue;
            }
            let mut e = r.message(wire, "XLine.events")?;
            ev.metadata_id = 0;
            ev.offset_ps = 0;
            ev.duration_ps = 0;
            ev.stats = [None; MAX_CODES];
            while let Some(&tag) = e.rest.first() {
                // Writers emit the fields in number order, each with a one-byte tag: test for
                // those tags first (predictable compares), and fall back to the general path.
                if tag == 0x22 {
                    e.rest = &e.rest[1..];
                    let body = e.len_delimited()?;
                    scan_stat(e.sub(body), codes, &mut ev.stats)?;
                } else if tag == 0x08 {
                    e.rest = &e.rest[1..];
                    ev.metadata_id = e.varint()? as i64;
                } else if tag == 0x10 {
                    e.rest = &e.rest[1..];
                    ev.offset_ps = e.varint()? as i64;
                } else if tag == 0x18 {
                    e.rest = &e.rest[1..];
                    ev.duration_ps = e.varint()? as i64;
                } else {
                    let (f, w) = e.key()?;
                    match f {
                        1 => ev.metadata_id = e.int64(w, "XEvent.metadata_id")?,
                        2 => ev.offset_ps = e.int64(w, "XEvent.offset_ps")?,
                        3 => ev.duration_ps = e.int64(w, "XEvent.duration_ps")?,
                        4 => scan_stat(e.message(w, "XEvent.stats")?, codes, &mut ev.stats)?,
                        5 => {
                            e.int64(w, "XEvent.num_occurrences")?;
                        }
                        _ => e.skip(w)?,
                    }
                }
            }
            n += 1;
            if !(0..=MAX_EVENT_PS).contains(&ev.duration_ps) {
                ev.duration_ps = 0;
                impossible += 1;
            }
            f(&ev);
        }
        self.impossible_durations.set(impossible);
        Ok(n)
    }
}

/// Decodes one stat into `out` when its id is wanted; an unwanted stat is left after its id.
#[inline(always)]
fn scan_stat<'a>(mut r: Reader<'a>, codes: &StatCodes, out: &mut [Option<StatValue<'a>>; MAX_CODES]) -> Result<()> {
    // The usual shape: tag 0x08 and the stat's id first; an unwanted stat ends right there.
    let mut code = None;
    if r.rest.first() == Some(&0x08) {
        r.rest = &r.rest[1..];
        let c = codes.get(r.varint()? as i64);
        if c == 0 {
            return Ok(());
        }
        code = Some(c);
    }
    let mut value = StatValue::None;
    while !r.is_empty() {
        let (field, wire) = r.key()?;
        match (field, wire) {
            (1, _) => {
                let c = codes.get(r.int64(wire, "XStat.metadata_id")?);
                if c == 0 {
                    return Ok(());
                }
                code = Some(c);
            }
            (2, WireType::SixtyFourBit) => value = StatValue::Double(f64::from_bits(r.fixed64()?)),
            (3, WireType::Varint) => value = StatValue::Uint64(r.varint()?),
            (4, WireType::Varint) => value = StatValue::Int64(r.varint()? as i64),
            (5, _) => value = StatValue::Str(r.string(wire, "XStat.str_value")?),
            (6, WireType::LengthDelimited) => value = StatValue::Bytes(r.len_delimited()?),
            (7, WireType::Varint) => value = StatValue::Ref(r.varint()?),
            (2..=7, _) => return Err(r.err(format!("XStat field {field}: wrong wire type"))),
            _ => r.skip(wire)?,
        }
    }
    // A stat without an id is stat 0.
    let c = code.unwrap_or_else(|| codes.get(0));
    if c != 0 {
        let slot = &mut out[usize::from(c) % MAX_CODES];
        if slot.is_none() {
            *slot = Some(value);
        }
    }
    Ok(())
}

/// What an event id stands for: its name, display name and the stats shared by all its events.
#[derive(Debug)]
pub struct XEventMetadata<'a> {
    pub id: i64,
    pub name: &'a str,
    pub display_name: &'a str,
    pub stats: Vec<XStat<'a>>,
}

/// The name of a stat id.
#[derive(Debug)]
pub struct XStatMetadata<'a> {
    pub id: i64,
    pub name: &'a str,
    pub description: &'a str,
}

/// One device or host of the capture.
#[derive(Debug)]
pub struct XPlane<'a> {
    pub id: i64,
    pub name: &'a str,
    pub lines: Vec<XLine<'a>>,
    pub event_metadata: HashMap<i64, XEventMetadata<'a>>,
    pub stat_metadata: HashMap<i64, XStatMetadata<'a>>,
    pub stats: Vec<XStat<'a>>,
}

impl<'a> XPlane<'a> {
    /// The id of the stat named `name` in this plane (stat ids are per plane).
    pub fn stat_id(&self, name: &str) -> Option<i64> {
        self.stat_metadata.values().filter(|m| m.name == name).map(|m| m.id).min()
    }

    /// The name of an event's metadata ("" when unknown).
    pub fn event_name(&self, metadata_id: i64) -> &'a str {
        self.event_metadata.get(&metadata_id).map_or("", |m| m.name)
    }

    /// The string a `Ref` stat points to, or the string of a `Str` stat.
    pub fn stat_str(&self, value: &StatValue<'a>) -> Option<&'a str> {
        match *value {
            StatValue::Str(s) => Some(s),
            StatValue::Ref(id) => self.stat_metadata.get(&(id as i64)).map(|m| m.name),
            _ => None,
        }
    }

    /// Value of the plane-level stat named `name`.
    pub fn plane_stat(&self, name: &str) -> Option<StatValue<'a>> {
        let id = self.stat_id(name)?;
        self.stats.iter().find(|s| s.metadata_id == id).map(|s| s.value)
    }

    /// Total events on all lines.
    pub fn event_count(&self) -> usize {
        self.lines.iter().map(|l| l.event_count).sum()
    }
}

/// A whole capture.
#[derive(Debug)]
pub struct XSpace<'a> {
    pub planes: Vec<XPlane<'a>>,
    pub errors: Vec<&'a str>,
    pub warnings: Vec<&'a str>,
    pub hostnames: Vec<&'a str>,
}

impl<'a> XSpace<'a> {
    /// Total events on all planes.
    pub fn event_count(&self) -> usize {
        self.planes.iter().map(|p| p.event_count()).sum()
    }

    /// The first plane with this exact name.
    pub fn plane(&self, name: &str) -> Option<&XPlane<'a>> {
        self.planes.iter().find(|p| p.name == name)
    }
}

/// Decodes a whole `XSpace` borrowed from `data`, validating every event and stat.
pub fn parse(data: &[u8]) -> Result<XSpace<'_>> {
    parse_with(data, true)
}

/// Decodes planes, lines and metadata but leaves the events undecoded (and their lines'
/// `event_count` at 0): the skeleton that [`XLine::scan_events`] walks in one pass, checking
/// every length as it goes. Skipping a line is one length check, so this touches only the
/// metadata's bytes.
pub fn parse_skeleton(data: &[u8]) -> Result<XSpace<'_>> {
    parse_with(data, false)
}

fn parse_with(data: &[u8], validate: bool) -> Result<XSpace<'_>> {
    let mut r = Reader::new(data, data);
    let mut space = XSpace { planes: Vec::new(), errors: Vec::new(), warnings: Vec::new(), hostnames: Vec::new() };
    while !r.is_empty() {
        let (field, wire) = r.key()?;
        match field {
            1 => {
                let m = r.message(wire, "XSpace.planes")?;
                space.planes.push(decode_plane(m, validate)?);
            }
            2 => space.errors.push(r.string(wire, "XSpace.errors")?),
            3 => space.warnings.push(r.string(wire, "XSpace.warnings")?),
            4 => space.hostnames.push(r.string(wire, "XSpace.hostnames")?),
            _ => r.skip(wire)?,
        }
    }
    Ok(space)
}

fn decode_plane<'a>(mut r: Reader<'a>, validate: bool) -> Result<XPlane<'a>> {
    let mut plane =
        XPlane { id: 0, name: "", lines: Vec::new(), event_metadata: HashMap::new(), stat_metadata: HashMap::new(), stats: Vec::new() };
    while !r.is_empty() {
        let (field, wire) = r.key()?;
        match field {
            1 => plane.id = r.int64(wire, "XPlane.id")?,
            2 => plane.name = r.string(wire, "XPlane.name")?,
            3 => {
                let m = r.message(wire, "XPlane.lines")?;
                plane.lines.push(decode_line(m, validate)?);
            }
            4 => {
                let m = r.message(wire, "XPlane.event_metadata")?;
                let (key, value) = decode_map_entry(m, decode_event_metadata)?;
                let mut value = value.unwrap_or(XEventMetadata { id: key, name: "", display_name: "", stats: Vec::new() });
                // The map key is what events refer to; trust it over the value's own id.
                value.id = key;
                plane.event_metadata.insert(key, value);
            }
            5 => {
                let m = r.message(wire, "XPlane.stat_metadata")?;
                let (key, value) = decode_map_entry(m, decode_stat_metadata)?;
                let mut value = value.unwrap_or(XStatMetadata { id: key, name: "", description: "" });
                value.id = key;
                plane.stat_metadata.insert(key, value);
            }
            6 => {
                let m = r.message(wire, "XPlane.stats")?;
                plane.stats.push(decode_stat(m)?);
            }
            _ => r.skip(wire)?,
        }
    }
    Ok(plane)
}

fn decode_map_entry<'a, T>(mut r: Reader<'a>, decode_value: fn(Reader<'a>) -> Result<T>) -> Result<(i64, Option<T>)> {
    let mut key = 0;
    let mut value = None;
    while !r.is_empty() {
        let (field, wire) = r.key()?;
        match field {
            1 => key = r.int64(wire, "map key")?,
            2 => value = Some(decode_value(r.message(wire, "map value")?)?),
            _ => r.skip(wire)?,
        }
    }
    Ok((key, value))
}

fn decode_event_metadata<'a>(mut r: Reader<'a>) -> Result<XEventMetadata<'a>> {
    let mut md = XEventMetadata { id: 0, name: "", display_name: "", stats: Vec::new() };
    while !r.is_empty() {
        let (field, wire) = r.key()?;
        match field {
            1 => md.id = r.int64(wire, "XEventMetadata.id")?,
            2 => md.name = r.string(wire, "XEventMetadata.name")?,
            4 => md.display_name = r.string(wire, "XEventMetadata.display_name")?,
            5 => {
                let m = r.message(wire, "XEventMetadata.stats")?;
                md.stats.push(decode_stat(m)?);
            }
            _ => r.skip(wire)?,
        }
    }
    Ok(md)
}

fn decode_stat_metadata<'a>(mut r: Reader<'a>) -> Result<XStatMetadata<'a>> {
    let mut md = XStatMetadata { id: 0, name: "", description: "" };
    while !r.is_empty() {
        let (field, wire) = r.key()?;
        match field {
            1 => md.id = r.int64(wire, "XStatMetadata.id")?,
            2 => md.name = r.string(wire, "XStatMetadata.name")?,
            3 => md.description = r.string(wire, "XStatMetadata.description")?,
            _ => r.skip(wire)?,
        }
    }
    Ok(md)
}

fn decode_line<'a>(mut r: Reader<'a>, validate: bool) -> Result<XLine<'a>> {
    let body = r.clone();
    let mut line = XLine {
        id: 0,
        display_id: 0,
        name: "",
        display_name: "",
        timestamp_ns: 0,
        duration_ps: 0,
        event_count: 0,
        impossible_durations: std::cell::Cell::new(0),
        body,
    };
    while !r.is_empty() {
        let (field, wire) = r.key()?;
        match field {
            1 => line.id = r.int64(wire, "XLine.id")?,
            10 => line.display_id = r.int64(wire, "XLine.display_id")?,
            2 => line.name = r.string(wire, "XLine.name")?,
            11 => line.display_name = r.string(wire, "XLine.display_name")?,
            3 => line.timestamp_ns = r.int64(wire, "XLine.timestamp_ns")?,
            9 => line.duration_ps = r.int64(wire, "XLine.duration_ps")?,
            4 if !validate => {
                r.message(wire, "XLine.events")?;
                // The events that follow in a run: one-byte tag and a length each, skipped here
                // without the general key path (the pass over them comes later).
                while r.rest.first() == Some(&0x22) {
                    r.rest = &r.rest[1..];
                    r.len_delimited()?;
                }
            }
            4 => {
                // Validate the event and its stats now, so the lazy iterators never fail.
                let mut ev = r.message(wire, "XLine.events")?;
                while !ev.is_empty() {
                    let (f, w) = ev.key()?;
                    match f {
                        1 | 2 | 3 | 5 => {
                            ev.int64(w, "XEvent field")?;
                        }
                        4 => {
                            decode_stat(ev.message(w, "XEvent.stats")?)?;
                        }
                        _ => ev.skip(w)?,
                    }
                }
                line.event_count += 1;
            }
            _ => r.skip(wire)?,
        }
    }
    Ok(line)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::trace::wire::encode_varint;

    /// Minimal protobuf writer for hand-made captures in tests.
    #[derive(Default)]
    pub(crate) struct W(pub Vec<u8>);

    impl W {
        pub fn varint(&mut self, field: u32, v: u64) -> &mut Self {
            encode_varint(u64::from(field << 3), &mut self.0);
            encode_varint(v, &mut self.0);
            self
        }
        pub fn bytes(&mut self, field: u32, b: &[u8]) -> &mut Self {
            encode_varint(u64::from(field << 3 | 2), &mut self.0);
            encode_varint(b.len() as u64, &mut self.0);
            self.0.extend_from_slice(b);
            self
        }
        pub fn double(&mut self, field: u32, v: f64) -> &mut Self {
            encode_varint(u64::from(field << 3 | 1), &mut self.0);
            self.0.extend_from_slice(&v.to_le_bytes());
            self
        }
        pub fn msg(&mut self, field: u32, m: &W) -> &mut Self {
            self.bytes(field, &m.0)
        }
    }

    fn sample() -> Vec<u8> {
        let mut stat_md = W::default();
        stat_md.varint(1, 7).bytes(2, b"run_id");
        let mut entry = W::default();
        entry.varint(1, 7).msg(2, &stat_md);
        let mut ev_md = W::default();
        ev_md.varint(1, (-3i64) as u64).bytes(2, b"op.1");
        let mut ev_entry = W::default();
        ev_entry.varint(1, (-3i64) as u64).msg(2, &ev_md);
        let mut s1 = W::default();
        s1.varint(1, 7).varint(4, (-5i64) as u64);
        let mut s2 = W::default();
        s2.varint(1, 7).varint(3, u64::MAX);
        let mut s3 = W::default();
        s3.varint(1, 7).double(2, 2.5);
        let mut ev = W::default();
        ev.varint(1, (-3i64) as u64).varint(2, 1500).varint(3, 250).msg(4, &s1).msg(4, &s2).msg(4, &s3);
        let mut line = W::default();
        line.varint(1, (-9i64) as u64).bytes(2, b"tf_XLAPjRtCpuClient/-9").varint(3, 2).msg(4, &ev).msg(4, &ev);
        let mut plane = W::default();
        plane.bytes(2, b"/host:CPU").msg(3, &line).msg(4, &ev_entry).msg(5, &entry);
        let mut space = W::default();
        space.msg(1, &plane).bytes(4, b"host");
        space.0
    }

    #[test]
    fn decodes_negative_ids_large_uints_and_repeated_stats() {
        let data = sample();
        let space = parse(&data).unwrap();
        assert_eq!(space.hostnames, vec!["host"]);
        let plane = &space.planes[0];
        assert_eq!(plane.name, "/host:CPU");
        assert_eq!(plane.event_name(-3), "op.1");
        assert_eq!(plane.stat_id("run_id"), Some(7));
        let line = &plane.lines[0];
        assert_eq!(line.id, -9);
        assert_eq!(line.event_count, 2);
        let evs: Vec<_> = line.events().collect();
        assert_eq!(evs.len(), 2);
        assert_eq!(evs[0].metadata_id, -3);
        assert_eq!(line.start_ps(&evs[0]), 3500);
        assert_eq!(evs[0].duration_ps, 250);
        let stats: Vec<_> = evs[0].stats().collect();
        assert_eq!(stats.len(), 3);
        assert_eq!(stats[0].value, StatValue::Int64(-5));
        assert_eq!(stats[1].value, StatValue::Uint64(u64::MAX));
        assert_eq!(stats[1].value.as_u64(), Some(u64::MAX));
        assert_eq!(stats[2].value, StatValue::Double(2.5));
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        let data = sample();
        for cut in 0..data.len() {
            // Cutting at a field boundary of the top-level message can leave a valid (shorter)
            // space; anything else must be reported as corrupt.
            if let Err(e) = parse(&data[..cut]) {
                assert!(e.to_string().contains("corrupt or truncated"), "{e}");
            }
        }
        // Cutting inside the only plane is always an error.
        assert!(parse(&data[..data.len() - 8]).is_err());
    }

    #[test]
    fn huge_length_is_rejected_without_allocating() {
        let mut w = W::default();
        // Field 1 (planes) claiming 2^60 bytes.
        encode_varint(u64::from(1u32 << 3 | 2), &mut w.0);
        encode_varint(1 << 60, &mut w.0);
        w.0.extend_from_slice(&[0; 16]);
        let err = parse(&w.0).unwrap_err().to_string();
        assert!(err.contains("exceeds the 16 bytes left"), "{err}");
    }

    #[test]
    fn random_bytes_never_panic() {
        // A fixed-seed xorshift stream; parse must return Ok or Err for each, never panic.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let base = sample();
        for round in 0..2000 {
            let mut data = base.clone();
            for _ in 0..(1 + round % 5) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let i = (x as usize) % data.len();
                data[i] = (x >> 32) as u8;
            }
            if let Ok(space) = parse(&data) {
                // Whatever decoded must iterate cleanly too.
                for p in &space.planes {
                    for l in &p.lines {
                        assert_eq!(l.events().count(), l.event_count);
                        for e in l.events() {
                            e.stats().for_each(drop);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn invalid_utf8_name_is_an_error() {
        let mut plane = W::default();
        plane.bytes(2, &[0xff, 0xfe]);
        let mut space = W::default();
        space.msg(1, &plane);
        let err = parse(&space.0).unwrap_err().to_string();
        assert!(err.contains("invalid UTF-8"), "{err}");
    }
}
