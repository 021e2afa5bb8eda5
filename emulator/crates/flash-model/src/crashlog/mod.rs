//! Write log and crash states.
//!
//! While a log is on, the device records the host stream (writes with their
//! data, flushes, discards, and labels the study puts in) together with what
//! the model did about each request: which units the write cache handed to
//! the FTL, where the FTL mapped them, every NAND program with its times,
//! erases, and mapping commits. From that, any crash state is rebuilt without
//! copying the device: a state is a cut position in the log plus a damage
//! choice (`cut::StateId`), and its image is served unit by unit from the
//! log (`view::View`), the same way live and offline (`Index::load`).
//!
//! What is durable, per the model (the rules `cut::Cut` applies):
//!  - A version of a unit is durable once a mapping commit that includes it
//!    is on the array: the page FTL's mapping-journal commits (on flush,
//!    every `journal_interval` updates, and before every GC erase), the
//!    hybrid FTL's snapshots (on flush and at every merge). A commit issued
//!    by record `p` at time `d` counts for a cut after `p` at `t >= d`.
//!  - A cut at time `t` takes effect no earlier than the last erase started
//!    (the model's rule: a controller erases only what a durable mapping has
//!    freed), and never before a request the host was told is complete.
//!  - Everything else is volatile: units in the write cache, in the page
//!    FTL's write buffer, or programmed with an uncommitted mapping. The
//!    model's own cut loses all of it; a real controller may write back and
//!    commit in another order, and the block layer promises nothing between
//!    flushes, so subset states keep any chosen subset of it.
//!  - Programs under way at the cut are torn; without `protect_paired_pages`
//!    they damage the lower (and middle) pages of their wordline, and the
//!    units durably stored there read as uncorrectable: the one case where a
//!    state loses data an earlier flush made durable. Plain cuts and torn-
//!    program states carry this damage; subset states do not (see `cut`).
//! Not modelled in states: random bit errors (the live device draws them),
//! program/erase failures during the log (the FTL retries elsewhere; the
//! states follow the mapping it ends up with), injected faults.

pub mod cut;
pub mod events;
pub mod images;
pub mod index;
pub mod view;

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

pub use cut::{Choice, Cut, StateId, StateInfo};
pub use events::{Event, ReqKind};
pub use images::Images;
pub use index::Index;
pub use view::{write_image, UnitContent, View};

use crate::config::{parse_preset, Preset};
use crate::device::Device;
use events::{is_zero, DATA_FILE, EVENTS_FILE, MAGIC, ZERO};

const FORMAT: u64 = 1;

/// Attached to the device's media while a log is on; the model calls its
/// hooks. Every hook writes one event and applies it to the index. Hooks are
/// kept out of line so that, with the log off, the model's hot paths stay as
/// they were (one untaken branch each).
pub struct Recorder {
    pub ix: Index,
    dir: PathBuf,
    ev: BufWriter<File>,
    data: BufWriter<File>,
    buf: Vec<u8>,
    /// The host request under way: kind, offset, length, data reference.
    cur: (ReqKind, u64, u64, u64),
    error: Option<String>,
}

impl Recorder {
    fn emit(&mut self, e: Event) {
        self.buf.clear();
        e.encode(&mut self.buf);
        if let Err(err) = self.ev.write_all(&self.buf) {
            self.error.get_or_insert(format!("{}: {err}", self.dir.join(EVENTS_FILE).display()));
        }
        self.ix.apply(&e);
    }

    fn store(&mut self, bytes: &[u8]) -> u64 {
        if is_zero(bytes) {
            return ZERO;
        }
        let at = self.ix.data.len() as u64;
        self.ix.data.extend_from_slice(bytes);
        if let Err(err) = self.data.write_all(bytes) {
            self.error.get_or_insert(format!("{}: {err}", self.dir.join(DATA_FILE).display()));
        }
        at
    }

    /// A host request arrives (after the device accepted it).
    #[cold]
    #[inline(never)]
    pub fn begin(&mut self, kind: ReqKind, t: u64, off: u64, len: u64, data: Option<&[u8]>) {
        let d = data.map_or(ZERO, |b| self.store(b));
        self.cur = (kind, off, len, d);
        self.emit(Event::Begin { kind, t, off, len, data: d });
    }

    #[cold]
    #[inline(never)]
    pub fn end(&mut self, done: u64, ok: bool) {
        self.emit(Event::End { done, ok });
        if self.cur.0 == ReqKind::Flush {
            // The log on disk keeps up with what the device made durable.
            let _ = self.ev.flush();
            let _ = self.data.flush();
        }
    }

    /// The current request gives unit `lpn` these whole-unit contents.
    #[cold]
    #[inline(never)]
    pub fn unit(&mut self, lpn: u32, contents: &[u8]) {
        let (kind, off, len, d) = self.cur;
        let start = lpn as u64 * self.ix.unit;
        let data = if kind == ReqKind::Write && start >= off && start + self.ix.unit <= off + len {
            // A whole unit of the host's data: refer to it.
            if d == ZERO || is_zero(contents) {
                ZERO
            } else {
                d + (start - off)
            }
        } else {
            self.store(contents)
        };
        self.emit(Event::Unit { lpn, data });
    }

    #[cold]
    #[inline(never)]
    pub fn trim(&mut self, lpn: u32) {
        self.emit(Event::Trim { lpn });
    }

    #[cold]
    #[inline(never)]
    pub fn writeback(&mut self, lpn: u32) {
        self.emit(Event::Writeback { lpn });
    }

    #[cold]
    #[inline(never)]
    pub fn map(&mut self, lpn: u32, ppn: u64, host: bool) {
        self.emit(Event::Map { lpn, ppn, host });
    }

    #[cold]
    #[inline(never)]
    pub fn program(&mut self, block: u32, page: u32, s: u64, e: u64) {
        self.emit(Event::Program { block, page, s, e });
    }

    #[cold]
    #[inline(never)]
    pub fn erase(&mut self, block: u32, s: u64) {
        self.emit(Event::Erase { block, s });
    }

    #[cold]
    #[inline(never)]
    pub fn commit(&mut self, d: u64) {
        self.emit(Event::Commit { d });
    }
}

fn create(dir: &Path, name: &str) -> Result<BufWriter<File>, String> {
    let p = dir.join(name);
    File::create(&p).map(|f| BufWriter::with_capacity(1 << 20, f)).map_err(|e| format!("crash log: cannot create {}: {e}", p.display()))
}

/// True if every unit reads as zeroes without touching the array: nothing
/// mapped, cached or buffered. A log starts only on such a device, so that
/// the log alone rebuilds any state.
fn blank(dev: &mut Device) -> bool {
    if dev.cached_units() != 0 {
        return false;
    }
    let units = dev.cfg.units() as u32;
    if (0..units).any(|l| dev.ftl.locate(l).is_some()) {
        return false;
    }
    // Nothing is mapped, so reads answer from the FTL's buffers or as zeroes.
    (0..units).all(|l| dev.ftl.read(&mut dev.media, l, 0, None).0 == crate::ftl::ReadRes::Zero)
}

/// Starts a log in `dir` (created if needed). `preset_text` must be the
/// preset the device was made from (the log carries it, so offline rebuilds
/// need nothing else).
pub fn start(dev: &mut Device, dir: &Path, preset_text: &str, seed: u64) -> Result<(), String> {
    if dev.media.trace.is_some() {
        return Err("a write log is already on".into());
    }
    if !dev.media.keeps_data() {
        return Err("a write log needs a device that stores data".into());
    }
    if !dev.powered() {
        return Err("the device is powered off".into());
    }
    if !blank(dev) {
        return Err("a write log starts on a blank device (nothing written yet): start the emulator on a new --state directory".into());
    }
    match parse_preset(preset_text, "the device's preset", &dev.cfg.name, Some(dev.cfg.capacity)) {
        Ok(Preset::Block(c)) if c == dev.cfg => {}
        _ => return Err("the preset text given does not describe this device".into()),
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("crash log: cannot create {}: {e}", dir.display()))?;
    let header = serde_json::json!({
        "format": FORMAT,
        "preset_name": dev.cfg.name,
        "preset_text": preset_text,
        "capacity": dev.cfg.capacity,
        "seed": seed,
        "unit_bytes": dev.cfg.unit_bytes(),
        "ftl": dev.cfg.ftl.kind.name(),
        "cell": dev.cfg.geo.cell.name(),
        "cache_bytes": dev.cfg.ftl.cache_bytes,
        "protect_paired_pages": dev.cfg.rel.protect_paired_pages,
    });
    let ix = Index::new(header.clone())?;
    let mut ev = create(dir, EVENTS_FILE)?;
    let data = create(dir, DATA_FILE)?;
    let h = header.to_string();
    let mut head = MAGIC.to_vec();
    head.extend_from_slice(&(h.len() as u32).to_le_bytes());
    head.extend_from_slice(h.as_bytes());
    ev.write_all(&head).map_err(|e| format!("crash log: {}: {e}", dir.join(EVENTS_FILE).display()))?;
    dev.media.trace = Some(Box::new(Recorder {
        ix,
        dir: dir.to_path_buf(),
        ev,
        data,
        buf: Vec::with_capacity(64),
        cur: (ReqKind::Mark, 0, 0, ZERO),
        error: None,
    }));
    Ok(())
}

pub fn recording(dev: &Device) -> bool {
    dev.media.trace.is_some()
}

/// Puts a labelled record into the log at device time `t`; returns its position.
pub fn mark(dev: &mut Device, t: u64, label: &str) -> Result<u32, String> {
    let r = dev.media.trace.as_deref_mut().ok_or("no write log is on")?;
    r.emit(Event::Mark { t, label: label.to_string() });
    let _ = r.ev.flush();
    Ok(r.ix.recs.len() as u32 - 1)
}

/// Ends the log: the files are complete; the index is returned for serving.
pub fn stop(dev: &mut Device) -> Result<Index, String> {
    let mut r = dev.media.trace.take().ok_or("no write log is on")?;
    r.emit(Event::Stop);
    let dir = r.dir.clone();
    let mut res = r.ev.flush().and_then(|_| r.data.flush()).map_err(|e| format!("crash log in {}: {e}", dir.display()));
    if let Some(e) = r.error.take() {
        res = Err(e);
    }
    res.map(|_| r.ix)
}
