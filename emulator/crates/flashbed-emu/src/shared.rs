//! State shared by the FUSE thread, the control socket and the main thread:
//! the device behind a mutex and the clock that paces it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use flash_model::{Device, IoError};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Pace {
    /// A request completes when the modelled device would have completed it.
    Real,
    /// As fast as possible; modelled time is still accounted.
    None,
}

pub struct Shared {
    pub dev: Mutex<Device>,
    pub pace: Pace,
    pub start: Instant,
    pub capacity: u64,
    /// Latest modelled completion of a request the host was told is done.
    /// Written only with `dev` locked.
    acked: AtomicU64,
    /// Crash states served instead of the live device (see crash.rs).
    pub crash: crate::crash::Front,
    /// Sizes of the requests the host sent (reset with the device's stats).
    pub sizes: crate::reqsize::RequestSizes,
}

/// How far the modelled device may run ahead of the wall clock before a
/// request is held back.
pub const PACE_SLACK: Duration = Duration::from_micros(500);

impl Shared {
    pub fn new(dev: Device, pace: Pace, capacity: u64) -> Shared {
        Shared { dev: Mutex::new(dev), pace, start: Instant::now(), capacity, acked: AtomicU64::new(0), crash: Default::default(), sizes: Default::default() }
    }

    pub fn lock(&self) -> MutexGuard<'_, Device> {
        self.dev.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The device's present: wall-clock time since start when paced, the
    /// latest modelled completion otherwise.
    pub fn now(&self, d: &Device) -> u64 {
        match self.pace {
            Pace::Real => (self.start.elapsed().as_nanos() as u64).max(0),
            Pace::None => d.clock,
        }
    }

    /// When a power cut that comes now takes effect: now, but never before the
    /// completion of a request already acknowledged. Paced requests are
    /// acknowledged up to PACE_SLACK ahead of their modelled completion; a cut
    /// in that window must not undo what the host was told is done (an
    /// acknowledged flush tearing its own programs lost fsync'ed data).
    pub fn cut_time(&self, d: &Device) -> u64 {
        self.now(d).max(self.acked.load(Ordering::Acquire))
    }

    /// Runs one host request on the device and, when paced, returns only at
    /// its modelled completion (sleeping without holding the lock, so the
    /// control socket can still cut power meanwhile).
    pub fn io<F>(&self, f: F) -> Result<(), IoError>
    where
        F: FnOnce(&mut Device, u64) -> Result<u64, IoError>,
    {
        let mut d = self.lock();
        let t = self.now(&d);
        let done = f(&mut d, t)?;
        if self.pace == Pace::None {
            return Ok(()); // a cut is taken at the device clock, never before `done`
        }
        // Short requests return at once and leave the device's timeline ahead
        // of the wall clock; the next request queues behind it, and once the
        // lead passes PACE_SLACK the host waits it out. A sleep per 4 KiB
        // request would add the scheduler's wake-up latency (tens of µs) to
        // every one of them and undercut the modelled rates.
        //
        // Acknowledging is recorded under the device lock, so a cut either
        // came first and fails the request, or comes after and is taken no
        // earlier than the request's completion.
        let target = self.start + Duration::from_nanos(done);
        let now = Instant::now();
        if target > now + PACE_SLACK {
            drop(d);
            std::thread::sleep(target - now);
            d = self.lock();
            if !d.powered() {
                return Err(IoError::PoweredOff);
            }
        }
        self.acked.fetch_max(done, Ordering::AcqRel);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flash_model::config::{parse_preset, Preset};
    use flash_model::store::MemStore;

    /// Fast SLC without a write cache: a write and its flush each take less
    /// than PACE_SLACK, so both are acknowledged before their modelled end.
    const FAST_SLC: &str = r#"
name = "fast-slc"
[nand]
cell = "slc"
page_size = 4096
pages_per_block = 16
planes = 1
endurance = 100000
[nand.timing]
read_us = 25
program_us = [150]
erase_us = 1500
bus_mb_s = 400
[ftl]
type = "page"
capacity = "2M"
over_provisioning = 0.25
cache = 0
journal_interval = 64
"#;

    fn fast() -> Device {
        let Preset::Block(cfg) = parse_preset(FAST_SLC, "fast.toml", "fast", None).unwrap() else { unreachable!() };
        let ps = cfg.geo.page_size;
        Device::new(cfg, Box::new(MemStore::new(ps)), 1)
    }

    /// A cut right after an acknowledged flush keeps what the flush made
    /// durable. Taken at the wall clock instead (as before), it fell inside
    /// the flush's own programs and tore them.
    #[test]
    fn a_cut_right_after_an_acknowledged_flush_keeps_the_flushed_data() {
        let mut lost = 0;
        for round in 0..100u64 {
            let sh = Shared::new(fast(), Pace::Real, 2 << 20);
            let data = vec![(round % 251) as u8 + 1; 4096];
            sh.io(|d, t| d.write(t, 0, &data)).unwrap();
            sh.io(|d, t| d.flush(t)).unwrap();
            let mut d = sh.lock();
            let t = sh.cut_time(&d);
            d.power_cut(t);
            d.restart();
            let mut back = vec![0u8; 4096];
            let t = sh.now(&d);
            d.read(t, 0, &mut back).unwrap();
            if back != data {
                lost += 1;
            }
        }
        assert_eq!(lost, 0, "{lost} of 100 acknowledged flushes lost their data at a cut right after them");
    }
}
