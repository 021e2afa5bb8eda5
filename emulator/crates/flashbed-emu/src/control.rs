//! Control socket: one JSON object per line in, one per line out.
//!   {"cmd":"stats"} {"cmd":"reset-stats"} {"cmd":"cut-power"}
//!   (stats carry `request_sizes`: the host's requests per op by size, see reqsize)
//!   {"cmd":"inject","kind":"bad-block","block":N}
//!   {"cmd":"inject","kind":"bit-errors","block":N,"page":P,"bits":K}
//!   {"cmd":"shutdown"}
//!   write log and crash states: log-start, log-mark, log-stop, crash-states,
//!   crash-switch, crash-image (see crash.rs)
//!   virtual time: {"cmd":"cut-at","in_ns":N} arms a power cut N guest ns after
//!   the latest instant the device knows the guest reached; it lands when the
//!   guest gets there, and holds the lab at it until it is killed (fusefs.rs). {"cmd":"cut-state"}
//!   says whether it landed ({"cmd":"cut-disarm"} takes back one that has
//!   not); cut-power then saves what it left and exits.
//! cut-power and shutdown are carried out (and the state saved) before the
//! reply; then the emulator unmounts and exits 0. Both end a write log that
//! is still on (its files are complete up to there).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::mpsc::Sender;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::shared::Shared;

pub enum Event {
    /// Stop now: the state is already saved.
    Exit,
    /// SIGTERM/SIGINT: clean stop.
    Signal,
}

pub struct Control {
    pub sh: Arc<Shared>,
    pub state_dir: PathBuf,
    pub events: Sender<Event>,
}

fn get_u32(v: &Value, k: &str) -> Result<u32, String> {
    v.get(k)
        .and_then(|x| x.as_u64())
        .filter(|&x| x <= u32::MAX as u64)
        .map(|x| x as u32)
        .ok_or_else(|| format!("`{k}` must be a non-negative integer"))
}

impl Control {
    pub fn serve(self: Arc<Self>, listener: UnixListener) {
        for conn in listener.incoming() {
            let Ok(stream) = conn else { continue };
            let me = self.clone();
            std::thread::spawn(move || me.session(stream));
        }
    }

    fn session(&self, stream: UnixStream) {
        let Ok(mut out) = stream.try_clone() else { return };
        let reader = BufReader::new(stream);
        for line in reader.lines() {
            let Ok(line) = line else { return };
            if line.trim().is_empty() {
                continue;
            }
            let (reply, then) = match serde_json::from_str::<Value>(&line) {
                Ok(req) => self.handle(&req),
                Err(e) => (json!({"ok": false, "error": format!("not JSON: {e}")}), None),
            };
            let mut s = reply.to_string();
            s.push('\n');
            let _ = out.write_all(s.as_bytes());
            let _ = out.flush();
            if let Some(ev) = then {
                let _ = self.events.send(ev);
                return;
            }
        }
    }

    fn handle(&self, req: &Value) -> (Value, Option<Event>) {
        let cmd = req.get("cmd").and_then(|c| c.as_str()).unwrap_or("");
        let fail = |e: String| (json!({"ok": false, "error": e}), None);
        match cmd {
            "stats" => {
                let d = self.sh.lock();
                let mut s = d.stats_json();
                s["ok"] = json!(true);
                s["pace"] = json!(self.sh.pace.name());
                // virtual time: the latest instant the guest reached (ns, the device's clock), the
                // clock a phase's duration, and so its busy share, is measured on
                if self.sh.pace == crate::shared::Pace::Virtual {
                    s["device_ns"] = json!(self.sh.reached(&d));
                }
                s["uptime_ns"] = json!(self.sh.start.elapsed().as_nanos() as u64);
                s["served"] = json!(self.sh.crash.served());
                s["write_log"] = json!(flash_model::crashlog::recording(&d));
                s["request_sizes"] = self.sh.sizes.json();
                s["write_pattern"] = self.sh.sizes.pattern_json();
                (s, None)
            }
            "reset-stats" => {
                self.sh.lock().reset_stats();
                self.sh.sizes.reset();
                (json!({"ok": true}), None)
            }
            "cut-at" => {
                let Some(in_ns) = req.get("in_ns").and_then(|v| v.as_u64()) else {
                    return fail("cut-at needs in_ns (guest ns from the device's present)".into());
                };
                match self.sh.arm_cut(in_ns) {
                    Ok((device_ns, guest_ns)) => (json!({"ok": true, "cut_at_ns": device_ns, "guest_ns": guest_ns}), None),
                    Err(e) => fail(e),
                }
            }
            "cut-disarm" => {
                self.sh.disarm_cut();
                (json!({"ok": true}), None)
            }
            "cut-state" => {
                let (armed, fired) = self.sh.cut_state();
                (json!({"ok": true, "armed_ns": armed, "fired": fired.map(fired_json)}), None)
            }
            "cut-power" => {
                let mut d = self.sh.lock();
                if let (_, Some(f)) = self.sh.cut_state_locked() {
                    // an armed cut landed (the lab is held there): keep what it left, and go
                    return match flash_model::state::save(&d, &self.state_dir) {
                        Ok(()) => (fired_json(f), Some(Event::Exit)),
                        Err(e) => fail(e),
                    };
                }
                if !d.powered() {
                    return fail("power is already off".into());
                }
                crate::crash::close(&mut d);
                let t = self.sh.cut_time(&d);
                let lost = d.cached_units() as u64 * d.cfg.unit_bytes() as u64;
                d.power_cut(t);
                match flash_model::state::save(&d, &self.state_dir) {
                    Ok(()) => (json!({"ok": true, "cut_at_ns": t, "cache_bytes_lost": lost}), Some(Event::Exit)),
                    Err(e) => fail(e),
                }
            }
            "shutdown" => {
                let mut d = self.sh.lock();
                crate::crash::close(&mut d);
                if d.powered() {
                    let t = self.sh.now(&d);
                    if let Err(e) = d.shutdown(t) {
                        // Read-only or failed store: save what is durable.
                        let t = self.sh.cut_time(&d);
                        d.power_cut(t);
                        let _ = flash_model::state::save(&d, &self.state_dir);
                        return (json!({"ok": false, "error": format!("flush before shutdown failed: {e:?}")}), Some(Event::Exit));
                    }
                }
                match flash_model::state::save(&d, &self.state_dir) {
                    Ok(()) => (json!({"ok": true}), Some(Event::Exit)),
                    Err(e) => (json!({"ok": false, "error": e}), Some(Event::Exit)),
                }
            }
            "inject" => {
                let kind = req.get("kind").and_then(|k| k.as_str()).unwrap_or("");
                let mut d = self.sh.lock();
                let r = match kind {
                    "bad-block" => get_u32(req, "block").and_then(|b| d.inject_bad_block(b)),
                    "bit-errors" => (|| {
                        let b = get_u32(req, "block")?;
                        let p = get_u32(req, "page")?;
                        let k = get_u32(req, "bits")?;
                        d.inject_bit_errors(b, p, k)
                    })(),
                    other => Err(format!("unknown inject kind `{other}` (bad-block, bit-errors)")),
                };
                match r {
                    Ok(()) => (json!({"ok": true}), None),
                    Err(e) => fail(e),
                }
            }
            "log-start" | "log-mark" | "log-stop" | "crash-states" | "crash-switch" | "crash-image" => {
                (crate::crash::control(&self.sh, &self.state_dir, cmd, req), None)
            }
            "" => fail("missing `cmd`".into()),
            other => fail(format!(
                "unknown command `{other}` (stats, reset-stats, cut-power, cut-at, cut-state, cut-disarm, inject, shutdown, log-start, log-mark, log-stop, crash-states, crash-switch, crash-image)"
            )),
        }
    }
}

fn fired_json(f: crate::shared::CutFired) -> Value {
    json!({"ok": true, "cut_at_ns": f.device_ns, "guest_ns": f.guest_ns, "cache_bytes_lost": f.cache_bytes_lost, "armed": true})
}
