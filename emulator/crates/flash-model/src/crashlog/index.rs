//! What a write log says, indexed for crash states: host records, every
//! version of every mapping unit and the mapping commit that made it durable,
//! the NAND programs with their times, and which units each physical page
//! held durably between which commits (for paired-page damage).
//!
//! The same `apply` builds it live (from the recorder's hooks) and offline
//! (from the event file), so a state rebuilt later is the state served.

use std::collections::{HashSet, VecDeque};
use std::path::Path;

use super::events::{Event, ReqKind, DATA_FILE, EVENTS_FILE, MAGIC, ZERO};
use crate::cache::FastMap;
use crate::config::{parse_preset, DeviceConfig, Preset};
use crate::nand::Nand;

pub const NONE: u32 = u32::MAX;

#[derive(Clone, Debug)]
pub struct Rec {
    pub kind: ReqKind,
    /// Arrival and completion (acknowledgement), device time in ns.
    pub t: u64,
    pub done: u64,
    pub ok: bool,
    pub off: u64,
    pub len: u64,
    /// Offset of a write's bytes in the data, or `ZERO`.
    pub data: u64,
}

#[derive(Clone, Copy, Debug)]
pub struct Version {
    pub lpn: u32,
    /// The record that wrote it.
    pub rec: u32,
    /// Offset of the unit's contents in the data, or `ZERO`.
    pub data: u64,
    /// Index of the commit that made it durable; `NONE` if it never was
    /// (superseded first, or the log ended).
    pub commit: u32,
}

#[derive(Clone, Copy, Debug)]
pub struct Commit {
    pub pos: u32,
    pub d: u64,
}

#[derive(Clone, Copy, Debug)]
pub struct Prog {
    pub pos: u32,
    pub block: u32,
    pub page: u32,
    pub s: u64,
    pub e: u64,
}

/// A unit durably in a physical page from commit `from` until commit
/// `until` (exclusive; `NONE`: still at the end of the log).
#[derive(Clone, Copy, Debug)]
pub struct Resident {
    pub lpn: u32,
    pub from: u32,
    pub until: u32,
}

/// The device as the log has seen it so far (the model's volatile state).
#[derive(Default)]
struct Mirror {
    /// Version in the write cache per unit.
    cached: FastMap<u32, u32>,
    /// Versions handed to the FTL and not yet mapped (page FTL write buffer).
    pending: FastMap<u32, VecDeque<u32>>,
    /// Version the FTL's RAM mapping gives per unit.
    mapped: FastMap<u32, u32>,
    /// Physical page per unit in the RAM mapping.
    loc: FastMap<u32, u64>,
    /// Durable physical page per unit and its entry in `res`.
    dloc: FastMap<u32, (u64, u32)>,
    /// Units whose mapping changed since the last commit.
    dirty: HashSet<u32, std::hash::BuildHasherDefault<crate::cache::FastHasher>>,
}

pub struct Index {
    pub cfg: DeviceConfig,
    pub header: serde_json::Value,
    pub unit: u64,
    pub units: u64,
    pub(crate) cache_units: usize,
    pub(crate) protect: bool,
    /// Lower/middle pages an interrupted program of each page (by index in
    /// its block) damages.
    pub(crate) pairs: Vec<Vec<u32>>,
    pub(crate) ppb: u64,
    pub(crate) planes: u32,
    pub recs: Vec<Rec>,
    pub marks: Vec<(u32, String)>,
    /// Acknowledged flushes, by record.
    pub flush_pos: Vec<u32>,
    /// Per record: the latest acknowledgement up to and including it.
    pub(crate) done_max: Vec<u64>,
    pub versions: Vec<Version>,
    pub(crate) hist: FastMap<u32, Vec<u32>>,
    pub commits: Vec<Commit>,
    pub progs: Vec<Prog>,
    /// (record, latest erase start so far), one per erase.
    pub(crate) erases: Vec<(u32, u64)>,
    pub(crate) res: FastMap<u64, Vec<Resident>>,
    pub data: Vec<u8>,
    /// The log was stopped cleanly (not cut short).
    pub complete: bool,
    /// Mapping events the mirror could not place (a host mapping with no
    /// version handed over): zero unless the hooks and the FTLs disagree.
    pub anomalies: u64,
    m: Mirror,
}

fn bad(msg: impl std::fmt::Display) -> String {
    format!("crash log: {msg}")
}

impl Index {
    /// An empty index for a device made from `header` (see `Recorder::start`).
    pub fn new(header: serde_json::Value) -> Result<Index, String> {
        let s = |k: &str| header.get(k).and_then(|v| v.as_str()).ok_or_else(|| bad(format!("header has no `{k}`")));
        let u = |k: &str| header.get(k).and_then(|v| v.as_u64()).ok_or_else(|| bad(format!("header has no `{k}`")));
        let text = s("preset_text")?;
        let cfg = match parse_preset(text, "crash log header", s("preset_name")?, Some(u("capacity")?)) {
            Ok(Preset::Block(c)) => c,
            Ok(_) => return Err(bad("the header's preset is not a block device")),
            Err(e) => return Err(bad(e.0)),
        };
        let nand = Nand::new(cfg.geo.clone(), cfg.rel.clone(), u("seed")?);
        let ppb = cfg.geo.pages_per_block;
        Ok(Index {
            unit: cfg.unit_bytes() as u64,
            units: cfg.units(),
            cache_units: (cfg.ftl.cache_bytes / cfg.unit_bytes() as u64) as usize,
            protect: cfg.rel.protect_paired_pages,
            pairs: (0..ppb).map(|p| nand.paired_pages(p)).collect(),
            ppb: ppb as u64,
            planes: cfg.geo.planes,
            cfg,
            header,
            recs: Vec::new(),
            marks: Vec::new(),
            flush_pos: Vec::new(),
            done_max: Vec::new(),
            versions: Vec::new(),
            hist: FastMap::default(),
            commits: Vec::new(),
            progs: Vec::new(),
            erases: Vec::new(),
            res: FastMap::default(),
            data: Vec::new(),
            complete: false,
            anomalies: 0,
            m: Mirror::default(),
        })
    }

    /// Reads a log directory written by the recorder.
    pub fn load(dir: &Path) -> Result<Index, String> {
        let ev = std::fs::read(dir.join(EVENTS_FILE)).map_err(|e| bad(format!("{}: {e}", dir.join(EVENTS_FILE).display())))?;
        let data = std::fs::read(dir.join(DATA_FILE)).map_err(|e| bad(format!("{}: {e}", dir.join(DATA_FILE).display())))?;
        if ev.len() < 12 || &ev[..8] != MAGIC {
            return Err(bad(format!("{} is not a flashbed crash log", dir.join(EVENTS_FILE).display())));
        }
        let n = u32::from_le_bytes(ev[8..12].try_into().unwrap()) as usize;
        let hdr = ev.get(12..12 + n).ok_or_else(|| bad("header is truncated"))?;
        let header: serde_json::Value = serde_json::from_slice(hdr).map_err(|e| bad(format!("header: {e}")))?;
        let mut ix = Index::new(header)?;
        ix.data = data;
        let mut rest = &ev[12 + n..];
        while let Some(e) = Event::decode(&mut rest).map_err(|e| bad(format!("{}: {e}", dir.join(EVENTS_FILE).display())))? {
            ix.apply(&e);
        }
        Ok(ix)
    }

    /// The record being processed (events between Begin and End belong to it).
    fn pos(&self) -> u32 {
        self.recs.len().saturating_sub(1) as u32
    }

    fn new_version(&mut self, lpn: u32, data: u64) -> u32 {
        let id = self.versions.len() as u32;
        self.versions.push(Version { lpn, rec: self.pos(), data, commit: NONE });
        self.hist.entry(lpn).or_default().push(id);
        id
    }

    fn push_rec(&mut self, r: Rec) {
        let prev = self.done_max.last().copied().unwrap_or(0);
        self.done_max.push(prev.max(if r.ok { r.done } else { 0 }));
        self.recs.push(r);
    }

    pub fn apply(&mut self, e: &Event) {
        match *e {
            Event::Begin { kind, t, off, len, data } => {
                self.push_rec(Rec { kind, t, done: t, ok: false, off, len, data });
            }
            Event::End { done, ok } => {
                let pos = self.pos();
                if let Some(r) = self.recs.last_mut() {
                    r.done = done;
                    r.ok = ok;
                    if ok && r.kind == ReqKind::Flush {
                        self.flush_pos.push(pos);
                    }
                    let prev = if self.done_max.len() >= 2 { self.done_max[self.done_max.len() - 2] } else { 0 };
                    *self.done_max.last_mut().unwrap() = prev.max(done);
                }
            }
            Event::Mark { t, ref label } => {
                self.push_rec(Rec { kind: ReqKind::Mark, t, done: t, ok: true, off: 0, len: 0, data: ZERO });
                self.marks.push((self.pos(), label.clone()));
            }
            Event::Unit { lpn, data } => {
                let v = self.new_version(lpn, data);
                if self.cache_units == 0 {
                    self.m.pending.entry(lpn).or_default().push_back(v);
                } else {
                    // A unit still cached is overwritten in place: the
                    // older version never reaches the array.
                    self.m.cached.insert(lpn, v);
                }
            }
            Event::Trim { lpn } => {
                // Both FTLs unmap at once and drop what they buffered.
                let v = self.new_version(lpn, ZERO);
                self.m.cached.remove(&lpn);
                self.m.pending.remove(&lpn);
                self.m.mapped.insert(lpn, v);
                self.m.loc.remove(&lpn);
                self.m.dirty.insert(lpn);
            }
            Event::Writeback { lpn } => {
                if let Some(v) = self.m.cached.remove(&lpn) {
                    self.m.pending.entry(lpn).or_default().push_back(v);
                }
            }
            Event::Map { lpn, ppn, host } => {
                if host {
                    match self.m.pending.get_mut(&lpn) {
                        Some(q) => {
                            let v = q.pop_front().unwrap();
                            self.m.mapped.insert(lpn, v);
                            if q.is_empty() {
                                self.m.pending.remove(&lpn);
                            }
                        }
                        None => self.anomalies += 1,
                    }
                }
                self.m.loc.insert(lpn, ppn);
                self.m.dirty.insert(lpn);
            }
            Event::Program { block, page, s, e } => {
                let pos = self.pos();
                self.progs.push(Prog { pos, block, page, s, e });
            }
            Event::Erase { s, .. } => {
                let prev = self.erases.last().map_or(0, |e| e.1);
                let pos = self.pos();
                self.erases.push((pos, prev.max(s)));
            }
            Event::Commit { d } => self.commit(d),
            Event::Stop => self.complete = true,
        }
    }

    /// The RAM mapping becomes the durable one: each changed unit's mapped
    /// version is durable from this commit on (if it was not already), and
    /// its durable page moves.
    fn commit(&mut self, d: u64) {
        let c = self.commits.len() as u32;
        let dirty: Vec<u32> = self.m.dirty.drain().collect();
        for lpn in dirty {
            if let Some(&v) = self.m.mapped.get(&lpn) {
                let ver = &mut self.versions[v as usize];
                if ver.commit == NONE {
                    ver.commit = c;
                }
            }
            let new = self.m.loc.get(&lpn).copied();
            let old = self.m.dloc.get(&lpn).copied();
            if old.map(|o| o.0) == new {
                continue;
            }
            if let Some((ppn, i)) = old {
                self.res.get_mut(&ppn).unwrap()[i as usize].until = c;
                self.m.dloc.remove(&lpn);
            }
            if let Some(ppn) = new {
                let list = self.res.entry(ppn).or_default();
                list.push(Resident { lpn, from: c, until: NONE });
                self.m.dloc.insert(lpn, (ppn, list.len() as u32 - 1));
            }
        }
        let pos = self.pos();
        self.commits.push(Commit { pos, d });
    }

    /// Contents of a version (`None`: zeroes).
    pub fn version_data(&self, v: u32) -> Option<&[u8]> {
        let d = self.versions[v as usize].data;
        if d == ZERO {
            None
        } else {
            Some(&self.data[d as usize..(d + self.unit) as usize])
        }
    }

    /// The latest erase start among erases issued up to record `pos`.
    pub(crate) fn erase_max(&self, pos: u32) -> u64 {
        let i = self.erases.partition_point(|e| e.0 <= pos);
        if i == 0 {
            0
        } else {
            self.erases[i - 1].1
        }
    }

    /// Versions written by records up to `pos`, as an index range.
    pub(crate) fn versions_upto(&self, pos: u32) -> usize {
        self.versions.partition_point(|v| v.rec <= pos)
    }

    pub(crate) fn hist(&self, lpn: u32) -> &[u32] {
        self.hist.get(&lpn).map_or(&[], |v| &v[..])
    }

    /// The last acknowledged flush before record `before`.
    pub fn last_flush(&self, before: u32) -> Option<u32> {
        let i = self.flush_pos.partition_point(|&f| f < before);
        if i == 0 {
            None
        } else {
            Some(self.flush_pos[i - 1])
        }
    }

    pub fn bytes(&self) -> u64 {
        self.data.len() as u64
    }
}
