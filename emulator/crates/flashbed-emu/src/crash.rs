//! Write log and crash states behind the control socket and the FUSE file.
//!
//! Control calls (JSON lines, see control.rs):
//!   {"cmd":"log-start","dir":PATH}     start the write log (blank device only;
//!                                      default dir: <state>/crashlog)
//!   {"cmd":"log-mark","label":S}       put a labelled record into the log
//!   {"cmd":"log-stop"}                 end the log; its states can be served
//!   {"cmd":"crash-states","after":LABEL|POS,"seed":N,"subsets":N,"tears":N,"marks":BOOL,"images":BOOL}
//!                                      list crash states (default: after the
//!                                      first mark, seed 1, 4 subsets, 2 tears;
//!                                      marks: also cut right after each mark;
//!                                      images: each state's "image" class,
//!                                      equal exactly when two states hold the
//!                                      same device image, and "images", the
//!                                      number of distinct ones)
//!   {"cmd":"crash-switch","state":ID|"live"}
//!                                      serve that state through the device
//!                                      file (writes go to a scratch overlay
//!                                      dropped at the next switch), or the
//!                                      live device again
//!   {"cmd":"crash-image","state":ID,"path":FILE}
//!                                      write the state's device image
//! A device started with `serve --crash-log DIR` serves a kept log's states
//! (crash-switch) without recording one.
//! A state ID is as `cut::StateId` writes it, or `ID+u`: its undamaged twin
//! (the same cut without the flash damage). The replies to crash-switch and
//! crash-image list the byte ranges the state damaged (`damaged_ranges`) and
//! those of them that held flushed data (`damaged_flushed_ranges`).
//! Offline (no running device):
//!   flashbed-emu crash-states --log DIR [--after LABEL|POS] [--seed N] [--subsets N] [--tears N] [--marks true|false] [--images true|false]
//!   flashbed-emu crash-image --log DIR --state ID --image FILE
//!
//! While a state is served the live device gets no I/O and its log (if any)
//! records nothing; state I/O is neither paced nor counted in statistics.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use flash_model::crashlog::{self, cut::enumerate, cut::Bounds, write_image, Cut, Images, Index, View};
use flash_model::Device;
use serde_json::{json, Value};

use crate::shared::Shared;

#[derive(Default)]
struct Inner {
    /// The last stopped log, whose states can be served.
    index: Option<Arc<Index>>,
    dir: Option<PathBuf>,
    view: Option<View>,
}

#[derive(Default)]
pub struct Front {
    serving: AtomicBool,
    inner: Mutex<Inner>,
}

impl Front {
    /// Serves the states of a kept log (`serve --crash-log DIR`): another lab
    /// checks some of a cell's states while the cell's own lab checks the rest.
    pub fn offline(&self, dir: &Path, capacity: u64) -> Result<(), String> {
        let ix = Index::load(dir)?;
        if !ix.complete {
            return Err(format!("crash log {}: the log was not stopped (its states are not final)", dir.display()));
        }
        if ix.units * ix.unit != capacity {
            return Err(format!("crash log {}: its device holds {} bytes, this one {capacity}", dir.display(), ix.units * ix.unit));
        }
        let mut g = self.lock();
        g.index = Some(Arc::new(ix));
        g.dir = Some(dir.to_path_buf());
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// True while a crash state, not the live device, is served.
    #[inline]
    pub fn serving(&self) -> bool {
        self.serving.load(Ordering::Acquire)
    }

    pub fn served(&self) -> String {
        self.lock().view.as_ref().map_or("live".into(), |v| v.cut.label())
    }

    /// Runs a request on the served state (`None` if the live device is served).
    pub fn io<R>(&self, f: impl FnOnce(&mut View) -> Result<R, ()>) -> Option<Result<R, i32>> {
        let mut g = self.lock();
        let v = g.view.as_mut()?;
        Some(f(v).map_err(|_| libc::EIO))
    }
}

/// Ends a log still on (a stop or a cut): its files are complete up to here.
pub fn close(d: &mut Device) {
    if crashlog::recording(d) {
        if let Err(e) = crashlog::stop(d) {
            eprintln!("flashbed-emu: error: {e}");
        }
    }
}

fn fail(e: impl std::fmt::Display) -> Value {
    json!({"ok": false, "error": e.to_string()})
}

fn get_u64(req: &Value, k: &str, default: u64) -> Result<u64, String> {
    match req.get(k) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v.as_u64().ok_or_else(|| format!("`{k}` must be a non-negative integer")),
    }
}

fn state_id(req: &Value) -> Result<&str, String> {
    req.get("state").and_then(|s| s.as_str()).ok_or_else(|| "`state` must be a crash state id (e.g. \"812\" or \"812+k5\")".to_string())
}

/// Byte ranges of units, adjacent ones merged.
fn ranges(ix: &Index, lpns: impl Iterator<Item = u32>) -> Vec<[u64; 2]> {
    let mut out: Vec<[u64; 2]> = Vec::new();
    for l in lpns {
        let off = l as u64 * ix.unit;
        match out.last_mut() {
            Some(r) if r[0] + r[1] == off => r[1] += ix.unit,
            _ => out.push([off, ix.unit]),
        }
    }
    out
}

/// What a state damaged: every damaged unit's bytes (zeroes in an image, EIO
/// when served), and those whose lost version had been flushed.
fn damage(ix: &Index, cut: &Cut, v: &mut Value) {
    let units = cut.damaged_units(ix);
    v["damaged_ranges"] = json!(ranges(ix, units.iter().map(|u| u.0)));
    v["damaged_flushed_ranges"] = json!(ranges(ix, units.iter().filter(|u| u.1).map(|u| u.0)));
    v["damaged_flushed"] = json!(units.iter().filter(|u| u.1).count());
}

/// The record after which crash points are listed: a mark's label, a
/// record number, or by default the first mark (none: from the start).
fn after(ix: &Index, v: Option<&Value>) -> Result<Option<u32>, String> {
    match v {
        None | Some(Value::Null) => Ok(ix.marks.first().map(|m| m.0)),
        Some(Value::String(label)) => ix
            .marks
            .iter()
            .find(|m| &m.1 == label)
            .map(|m| Some(m.0))
            .ok_or_else(|| format!("the log has no mark `{label}` (marks: {})", ix.marks.iter().map(|m| m.1.as_str()).collect::<Vec<_>>().join(", "))),
        Some(v) => v.as_u64().map(|p| Some(p as u32)).ok_or_else(|| "`after` must be a mark's label or a record number".into()),
    }
}

fn bounds(ix: &Index, req: &Value) -> Result<Bounds, String> {
    Ok(Bounds {
        after: after(ix, req.get("after"))?,
        seed: get_u64(req, "seed", 1)?,
        subsets: get_u64(req, "subsets", 4)? as u32,
        tears: get_u64(req, "tears", 2)? as u32,
        at_marks: match req.get("marks") {
            None | Some(Value::Null) => false,
            Some(v) => v.as_bool().ok_or("`marks` must be true or false")?,
        },
    })
}

fn summary(ix: &Index) -> Value {
    json!({
        "records": ix.recs.len(),
        "flushes": ix.flush_pos.len(),
        "flush_pos": ix.flush_pos,
        "versions": ix.versions.len(),
        "programs": ix.progs.len(),
        "commits": ix.commits.len(),
        "data_bytes": ix.bytes(),
        "marks": ix.marks.iter().map(|(p, l)| json!({"pos": p, "label": l})).collect::<Vec<_>>(),
        "complete": ix.complete,
    })
}

/// The states of a log as JSON (control reply and offline listing).
pub fn listing(ix: &Index, req: &Value) -> Value {
    match bounds(ix, req) {
        Ok(b) => {
            let found = enumerate(ix, &b);
            let mut states: Vec<Value> = found.iter().map(|s| s.to_json()).collect();
            let mut distinct = None;
            if req.get("images").and_then(|i| i.as_bool()) == Some(true) {
                match Images::new(ix).classes(&found) {
                    Ok(classes) => {
                        distinct = Some(classes.iter().max().map_or(0, |&c| c + 1));
                        for (s, c) in states.iter_mut().zip(classes) {
                            s["image"] = json!(c);
                        }
                    }
                    Err(e) => return fail(e),
                }
            }
            let mut v = summary(ix);
            if let Some(n) = distinct {
                v["images"] = json!(n);
            }
            v["ok"] = json!(true);
            v["after"] = json!(b.after);
            v["states"] = json!(states);
            v
        }
        Err(e) => fail(e),
    }
}

/// Writes a state's image; the reply names the units it damaged (zeroes in
/// the image, unreadable on the served device).
pub fn image(ix: &Index, state: &str, path: &Path) -> Value {
    let cut = match Cut::parse(ix, state) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    if let Err(e) = write_image(ix, &cut, path) {
        return fail(e);
    }
    let mut v = cut.info(ix).to_json();
    v["ok"] = json!(true);
    v["path"] = json!(path);
    damage(ix, &cut, &mut v);
    v
}

pub fn control(sh: &Shared, state_dir: &Path, cmd: &str, req: &Value) -> Value {
    let front = &sh.crash;
    match cmd {
        "log-start" => {
            if front.serving() {
                return fail("a crash state is served: switch back to live first");
            }
            let dir = req.get("dir").and_then(|d| d.as_str()).map(PathBuf::from).unwrap_or_else(|| state_dir.join("crashlog"));
            let meta = match flash_model::state::read_meta(state_dir) {
                Ok(m) => m,
                Err(e) => return fail(e),
            };
            let r = crashlog::start(&mut sh.lock(), &dir, &meta.preset_text, meta.seed);
            match r {
                Ok(()) => {
                    front.lock().dir = Some(dir.clone());
                    json!({"ok": true, "dir": dir})
                }
                Err(e) => fail(e),
            }
        }
        "log-mark" => {
            let Some(label) = req.get("label").and_then(|l| l.as_str()) else { return fail("`label` must be a string") };
            let mut d = sh.lock();
            let t = sh.now(&d).max(d.clock);
            match crashlog::mark(&mut d, t, label) {
                Ok(pos) => json!({"ok": true, "pos": pos}),
                Err(e) => fail(e),
            }
        }
        "log-stop" => {
            let mut d = sh.lock();
            match crashlog::stop(&mut d) {
                Ok(ix) => {
                    drop(d);
                    let mut v = summary(&ix);
                    let mut g = front.lock();
                    v["ok"] = json!(true);
                    v["dir"] = json!(g.dir);
                    g.index = Some(Arc::new(ix));
                    v
                }
                Err(e) => fail(e),
            }
        }
        "crash-states" => match front.lock().index.clone() {
            Some(ix) => listing(&ix, req),
            None => fail("no stopped write log (log-start, then log-stop)"),
        },
        "crash-switch" => {
            let started = Instant::now();
            let recording = crashlog::recording(&sh.lock());
            let mut g = front.lock();
            if req.get("state").and_then(|s| s.as_str()) == Some("live") {
                g.view = None;
                front.serving.store(false, Ordering::Release);
                return json!({"ok": true, "state": "live", "switch_ns": started.elapsed().as_nanos() as u64});
            }
            let id = match state_id(req) {
                Ok(id) => id,
                Err(e) => return fail(e),
            };
            let Some(ix) = g.index.clone() else { return fail("no stopped write log (log-start, then log-stop)") };
            if recording {
                return fail("the write log is still on: log-stop first");
            }
            let cut = match Cut::parse(&ix, id) {
                Ok(c) => c,
                Err(e) => return fail(e),
            };
            match g.view.as_mut() {
                Some(v) => v.switch_to(cut),
                None => g.view = Some(View::with_cut(ix.clone(), cut)),
            }
            front.serving.store(true, Ordering::Release);
            let v = g.view.as_ref().unwrap();
            let mut out = v.cut.info(&ix).to_json();
            damage(&ix, &v.cut, &mut out);
            out["ok"] = json!(true);
            out["state"] = json!(v.cut.label());
            out["switch_ns"] = json!(started.elapsed().as_nanos() as u64);
            out
        }
        "crash-image" => {
            let Some(ix) = front.lock().index.clone() else { return fail("no stopped write log (log-start, then log-stop)") };
            let id = match state_id(req) {
                Ok(id) => id,
                Err(e) => return fail(e),
            };
            let Some(path) = req.get("path").and_then(|p| p.as_str()) else { return fail("`path` must be a file name") };
            image(&ix, id, Path::new(path))
        }
        other => fail(format!("unknown command `{other}`")),
    }
}
