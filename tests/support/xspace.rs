//! A small XSpace writer for tests: builds real `.xplane.pb` bytes (the wire schema of
//! ../shared/xplane-format.md, field numbers from tensorflow/tsl's `xplane.proto`) for capture
//! layouts no shared fixture has, so the parser reads them exactly as it reads a real capture.

#![allow(dead_code)]

use std::collections::HashMap;

/// Protobuf bytes being written.
#[derive(Default, Clone)]
struct W(Vec<u8>);

impl W {
    fn raw_varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }
    fn varint(&mut self, field: u32, v: u64) -> &mut Self {
        self.raw_varint(u64::from(field << 3));
        self.raw_varint(v);
        self
    }
    fn bytes(&mut self, field: u32, b: &[u8]) -> &mut Self {
        self.raw_varint(u64::from(field << 3 | 2));
        self.raw_varint(b.len() as u64);
        self.0.extend_from_slice(b);
        self
    }
    fn double(&mut self, field: u32, v: f64) -> &mut Self {
        self.raw_varint(u64::from(field << 3 | 1));
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn msg(&mut self, field: u32, m: &W) -> &mut Self {
        self.bytes(field, &m.0)
    }
}

/// A stat value as the capture stores it.
#[derive(Clone, Debug)]
pub enum V {
    I(i64),
    U(u64),
    F(f64),
    S(String),
    /// A string stored as a reference to a stat metadata name (how `hlo_op` is stored).
    Ref(String),
}

pub fn s(x: &str) -> V {
    V::S(x.to_string())
}

pub fn r(x: &str) -> V {
    V::Ref(x.to_string())
}

/// An event metadata entry: id, name, display name, stats on the metadata.
type EventMeta = (i64, String, String, Vec<(String, V)>);

/// One plane under construction: event and stat metadata are created by name as used.
pub struct Plane {
    name: String,
    event_ids: HashMap<String, i64>,
    /// (id, name, display name, metadata stats)
    event_md: Vec<EventMeta>,
    stat_ids: HashMap<String, i64>,
    stat_md: Vec<(i64, String)>,
    lines: Vec<(i64, String, Vec<W>)>,
    stats: Vec<(String, V)>,
}

impl Plane {
    pub fn new(name: &str) -> Plane {
        Plane {
            name: name.to_string(),
            event_ids: HashMap::new(),
            event_md: Vec::new(),
            stat_ids: HashMap::new(),
            stat_md: Vec::new(),
            lines: Vec::new(),
            stats: Vec::new(),
        }
    }

    fn stat_id(&mut self, name: &str) -> i64 {
        if let Some(&id) = self.stat_ids.get(name) {
            return id;
        }
        let id = self.stat_md.len() as i64 + 1;
        self.stat_md.push((id, name.to_string()));
        self.stat_ids.insert(name.to_string(), id);
        id
    }

    /// Event metadata `name` (display name, stats), created on first use.
    pub fn event_meta(&mut self, name: &str, display: &str, stats: &[(&str, V)]) -> i64 {
        if let Some(&id) = self.event_ids.get(name) {
            return id;
        }
        let id = self.event_md.len() as i64 + 1;
        for (k, v) in stats {
            self.stat_id(k);
            if let V::Ref(s) = v {
                self.stat_id(s);
            }
        }
        self.event_md.push((id, name.to_string(), display.to_string(), stats.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()));
        self.event_ids.insert(name.to_string(), id);
        id
    }

    /// A plane-level stat (peaks of a TPU, ...).
    pub fn plane_stat(&mut self, name: &str, v: V) -> &mut Self {
        self.stat_id(name);
        self.stats.push((name.to_string(), v));
        self
    }

    fn stat(&mut self, name: &str, v: &V) -> W {
        let id = self.stat_id(name);
        let mut st = W::default();
        st.varint(1, id as u64);
        match v {
            V::I(x) => st.varint(4, *x as u64),
            V::U(x) => st.varint(3, *x),
            V::F(x) => st.double(2, *x),
            V::S(x) => st.bytes(5, x.as_bytes()),
            V::Ref(x) => {
                let rid = self.stat_id(x);
                st.varint(7, rid as u64)
            }
        };
        st
    }

    /// Adds an event on line `line` (created on first use): `start_ps` from the profile start,
    /// `dur_ps` long.
    pub fn event(&mut self, line: &str, name: &str, start_ps: i64, dur_ps: i64, stats: &[(&str, V)]) -> &mut Self {
        let md = self.event_meta(name, "", &[]);
        let mut e = W::default();
        e.varint(1, md as u64).varint(2, start_ps as u64).varint(3, dur_ps as u64);
        for (k, v) in stats {
            let st = self.stat(k, v);
            e.msg(4, &st);
        }
        let n = self.lines.len() as i64;
        match self.lines.iter_mut().find(|l| l.1 == line) {
            Some(l) => l.2.push(e),
            None => self.lines.push((n + 1, line.to_string(), vec![e])),
        }
        self
    }

    fn encode(&mut self) -> W {
        let mut p = W::default();
        p.bytes(2, self.name.as_bytes());
        for (id, name, events) in &self.lines {
            let mut l = W::default();
            l.varint(1, *id as u64).bytes(2, name.as_bytes()).varint(3, 0);
            for e in events {
                l.msg(4, e);
            }
            p.msg(3, &l);
        }
        let event_md = std::mem::take(&mut self.event_md);
        for (id, name, display, stats) in &event_md {
            let mut m = W::default();
            m.varint(1, *id as u64).bytes(2, name.as_bytes());
            if !display.is_empty() {
                m.bytes(4, display.as_bytes());
            }
            for (k, v) in stats {
                let st = self.stat(k, v);
                m.msg(5, &st);
            }
            let mut entry = W::default();
            entry.varint(1, *id as u64).msg(2, &m);
            p.msg(4, &entry);
        }
        let stats = std::mem::take(&mut self.stats);
        for (k, v) in &stats {
            let st = self.stat(k, v);
            p.msg(6, &st);
        }
        for (id, name) in &self.stat_md {
            let mut m = W::default();
            m.varint(1, *id as u64).bytes(2, name.as_bytes());
            let mut entry = W::default();
            entry.varint(1, *id as u64).msg(2, &m);
            p.msg(5, &entry);
        }
        p
    }
}

/// The capture's bytes from its planes.
pub fn space(planes: Vec<Plane>) -> Vec<u8> {
    let mut s = W::default();
    for mut p in planes {
        let enc = p.encode();
        s.msg(1, &enc);
    }
    s.0
}
