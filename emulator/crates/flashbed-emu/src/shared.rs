//! State shared by the FUSE thread, the control socket and the main thread:
//! the device behind a mutex and the clock that paces it.

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
}

/// How far the modelled device may run ahead of the wall clock before a
/// request is held back.
pub const PACE_SLACK: Duration = Duration::from_micros(500);

impl Shared {
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

    /// Runs one host request on the device and, when paced, returns only at
    /// its modelled completion (sleeping without holding the lock, so the
    /// control socket can still cut power meanwhile).
    pub fn io<F>(&self, f: F) -> Result<(), IoError>
    where
        F: FnOnce(&mut Device, u64) -> Result<u64, IoError>,
    {
        let done = {
            let mut d = self.lock();
            let t = self.now(&d);
            f(&mut d, t)?
        };
        if self.pace == Pace::Real {
            let target = self.start + Duration::from_nanos(done);
            let now = Instant::now();
            // Short requests return at once and leave the device's timeline
            // ahead of the wall clock; the next request queues behind it, and
            // once the lead passes PACE_SLACK the host waits it out. A sleep per
            // 4 KiB request would add the scheduler's wake-up latency (tens of
            // µs) to every one of them and undercut the modelled rates.
            if target > now + PACE_SLACK {
                std::thread::sleep(target - now);
            }
            // A cut that came while the request was in flight fails it.
            if !self.lock().powered() {
                return Err(IoError::PoweredOff);
            }
        }
        Ok(())
    }
}
