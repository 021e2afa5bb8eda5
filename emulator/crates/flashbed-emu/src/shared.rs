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
    /// Virtual time: no sleeps; the host (a lab kernel in time-travel mode)
    /// says through the clock file when each request is submitted in its own
    /// time and learns when it completes (see `VirtualClock`).
    Virtual,
}

impl Pace {
    pub fn name(self) -> &'static str {
        match self {
            Pace::Real => "real",
            Pace::None => "none",
            Pace::Virtual => "virtual",
        }
    }
}

/// The device clock of a virtual-time run, driven by the guest's submit
/// times. The guest's clock and the device's differ by an offset fixed at the
/// guest's first request (the device may have run before the guest booted:
/// preconditioning, an earlier boot), and fixed again when the guest's time
/// goes backwards (a new boot on the same device). A request arrives at
/// max(the guest's submit time, the device clock): after the guest's idle
/// time (idle on the device too, where the model's background work runs) and
/// never before the device finished what it was told earlier.
#[derive(Default, Debug)]
pub struct VirtualClock {
    /// device ns = guest ns + offset
    offset: i128,
    /// The guest's last submit time (guest ns); None before the first.
    last_submit: Option<u64>,
    /// The last submit time on the device's clock.
    submitted: u64,
    /// Latest completion (device ns) of a request since the last submit.
    done: u64,
    /// A power cut armed at this device instant (see `Shared::arm_cut`).
    cut_at: Option<u64>,
    /// The armed cut, once the guest reached it.
    fired: Option<CutFired>,
}

/// A power cut that landed at its armed instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CutFired {
    /// The instant on the device's clock and on the guest's.
    pub device_ns: u64,
    pub guest_ns: u64,
    /// What the write cache held (bytes), lost with it.
    pub cache_bytes_lost: u64,
}

/// Whether the guest may go on after telling the device clock something,
/// or has reached an armed power cut (the device is off; the guest must not
/// see anything after that instant, so the caller holds it there).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    Go,
    Cut,
}

impl VirtualClock {
    fn to_device(&self, guest: u64) -> u64 {
        (guest as i128 + self.offset).max(0) as u64
    }

    fn to_guest(&self, device: u64) -> u64 {
        (device as i128 - self.offset).max(0) as u64
    }

    /// The guest submits a request at `guest` ns; `clock` is the device's.
    pub fn submit(&mut self, guest: u64, clock: u64) {
        if self.last_submit.map_or(true, |last| guest < last) {
            self.offset = clock as i128 - guest as i128;
        }
        self.last_submit = Some(guest);
        self.submitted = self.to_device(guest);
        self.done = self.submitted;
    }

    /// When a request of the last submit arrives on the device.
    pub fn arrival(&self, clock: u64) -> u64 {
        self.submitted.max(clock)
    }

    pub fn completed(&mut self, done: u64) {
        self.done = self.done.max(done);
    }

    /// The guest time at which the last submit's requests are all complete.
    pub fn completion(&self) -> u64 {
        self.to_guest(self.done)
    }

    /// The latest instant the device knows the guest has reached (its last
    /// submit, or the completion it waited for; before the guest's first
    /// request, the device clock): where a cut armed now is measured from.
    fn anchor(&self, clock: u64) -> u64 {
        if self.last_submit.is_some() {
            self.submitted.max(self.done)
        } else {
            clock
        }
    }

    /// The device's present: its latest submit time (before the guest's
    /// first request, the device clock).
    pub fn present(&self, clock: u64) -> u64 {
        if self.last_submit.is_some() {
            self.submitted
        } else {
            clock
        }
    }
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
    /// How late sleeps wake (ns, a moving average): a paced request sleeps
    /// that much less than its lead, so it is acknowledged at its modelled
    /// completion on average instead of a wake-up latency after it.
    oversleep: AtomicU64,
    /// Paced requests that slept (statistics, tests).
    pub sleeps: AtomicU64,
    /// The device clock in virtual time (Pace::Virtual); locked only with `dev`.
    pub vclock: Mutex<VirtualClock>,
}

/// How far ahead of its modelled completion a request may be acknowledged
/// without a sleep: below this, the sleep's own wake-up lateness would make
/// it later than modelled.
pub const PACE_SLACK: Duration = Duration::from_micros(20);

/// How far the device may run ahead of the wall clock while the host streams
/// one command in pieces: the pieces queue on the device's timeline instead
/// of each waiting out its own completion, so the lab's round trip per piece
/// does not idle the device. With request-sized ubd I/O (patch 0003) the lab
/// still cuts a 1 MiB request into two host calls of 512 KiB (an SDHCI
/// host's request limit, so a real card sees the same two), and a QD1
/// sequential stream's next request starts where the last ended; a host
/// that cuts finer (the older ubd: one call per 4 KiB) needs it most. The
/// lead does not add up over a stream: each piece queues behind the last.
pub const STREAM_SLACK: Duration = Duration::from_micros(500);

/// First guess of how late the scheduler wakes a sleeping request (learnt as
/// the pacing goes, see `Shared::io`).
const OVERSLEEP_GUESS_NS: u64 = 60_000;

impl Shared {
    pub fn new(dev: Device, pace: Pace, capacity: u64) -> Shared {
        Shared {
            dev: Mutex::new(dev),
            pace,
            start: Instant::now(),
            capacity,
            acked: AtomicU64::new(0),
            crash: Default::default(),
            sizes: Default::default(),
            oversleep: AtomicU64::new(OVERSLEEP_GUESS_NS),
            sleeps: AtomicU64::new(0),
            vclock: Mutex::new(VirtualClock::default()),
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, Device> {
        self.dev.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn vclock(&self) -> MutexGuard<'_, VirtualClock> {
        self.vclock.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The device's present: wall-clock time since start when paced, the
    /// latest modelled completion when not, the guest's latest submit time
    /// (on the device clock) in virtual time.
    pub fn now(&self, d: &Device) -> u64 {
        match self.pace {
            Pace::Real => (self.start.elapsed().as_nanos() as u64).max(0),
            Pace::None => d.clock,
            Pace::Virtual => self.vclock().present(d.clock),
        }
    }

    /// Virtual time: the latest instant (device ns) the device knows the guest
    /// reached: its last submit, or the completion it waited for. A phase the
    /// guest times ends there (after a final flush's completion, not before).
    pub fn reached(&self, d: &Device) -> u64 {
        self.vclock().anchor(d.clock)
    }

    /// Virtual time: the guest submits its next request at `guest` ns (its
    /// write to the clock file). `Flow::Cut`: that is at or after an armed
    /// power cut, which has now landed at its instant.
    pub fn submit(&self, guest: u64) -> Flow {
        let mut d = self.lock();
        let mut vc = self.vclock();
        if vc.fired.is_some() {
            return Flow::Cut;
        }
        vc.submit(guest, d.clock);
        match vc.cut_at {
            Some(at) if vc.submitted >= at => Self::fire(&mut d, &mut vc, at),
            _ => Flow::Go,
        }
    }

    /// Virtual time: the guest time at which the requests since the last
    /// submit complete (its read of the clock file); None when they complete
    /// after an armed power cut, which has now landed at its instant (the
    /// guest must not see them complete).
    pub fn completion(&self) -> Option<u64> {
        let mut d = self.lock();
        let mut vc = self.vclock();
        if vc.fired.is_some() {
            return None;
        }
        match vc.cut_at {
            Some(at) if vc.done > at => {
                Self::fire(&mut d, &mut vc, at);
                None
            }
            _ => Some(vc.completion()),
        }
    }

    /// Virtual time: arms a power cut `in_ns` of guest time after the latest
    /// instant the device knows the guest has reached. The guest is held at
    /// the cut (see `Flow`), so what it saw, and what the device kept, is the
    /// same on every run of the same requests. Returns the instant (device
    /// ns, guest ns).
    pub fn arm_cut(&self, in_ns: u64) -> Result<(u64, u64), String> {
        if self.pace != Pace::Virtual {
            return Err("a cut at a device instant needs virtual time (--pace virtual)".into());
        }
        let d = self.lock();
        if !d.powered() {
            return Err("power is already off".into());
        }
        let mut vc = self.vclock();
        if vc.cut_at.is_some() {
            return Err("a power cut is already armed".into());
        }
        let at = vc.anchor(d.clock).saturating_add(in_ns);
        vc.cut_at = Some(at);
        Ok((at, vc.to_guest(at)))
    }

    /// Takes back a cut that has not landed (the workload ended first): it
    /// must not land in a later boot.
    pub fn disarm_cut(&self) {
        let _d = self.lock();
        let mut vc = self.vclock();
        if vc.fired.is_none() {
            vc.cut_at = None;
        }
    }

    /// The armed cut's instant (device ns) and, once it landed, what it did.
    pub fn cut_state(&self) -> (Option<u64>, Option<CutFired>) {
        let _d = self.lock();
        self.cut_state_locked()
    }

    /// `cut_state` with the device already locked by the caller.
    pub fn cut_state_locked(&self) -> (Option<u64>, Option<CutFired>) {
        let vc = self.vclock();
        (vc.cut_at, vc.fired)
    }

    fn fire(d: &mut Device, vc: &mut VirtualClock, at: u64) -> Flow {
        crate::crash::close(d);
        let lost = d.cached_units() as u64 * d.cfg.unit_bytes() as u64;
        d.power_cut(at);
        vc.fired = Some(CutFired { device_ns: at, guest_ns: vc.to_guest(at), cache_bytes_lost: lost });
        Flow::Cut
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
        if self.pace == Pace::Virtual {
            // no sleep: the guest waits out the completion in its own time
            let t = self.vclock().arrival(d.clock);
            let done = f(&mut d, t)?;
            self.vclock().completed(done);
            self.acked.fetch_max(done, Ordering::AcqRel);
            return Ok(());
        }
        let t = self.now(&d);
        let done = f(&mut d, t)?;
        if self.pace == Pace::None {
            return Ok(()); // a cut is taken at the device clock, never before `done`
        }
        // A request is acknowledged at its modelled completion, so the host
        // sees each request's latency (flashbench's alignment test compares
        // single reads), not only the average rate; only the later pieces of
        // a stream the host cut up (or a sequential request continuing the
        // last) may run up to STREAM_SLACK ahead. A sleep wakes
        // a scheduler's wake-up latency (tens of µs) late, which per 4 KiB
        // request would undercut the modelled rates: sleeps aim that much
        // early, as learnt from the sleeps so far; a lead under half that
        // returns at once.
        //
        // Acknowledging is recorded under the device lock, so a cut either
        // came first and fails the request, or comes after and is taken no
        // earlier than the request's completion.
        let target = self.start + Duration::from_nanos(done);
        let now = Instant::now();
        let late = Duration::from_nanos(self.oversleep.load(Ordering::Relaxed));
        // a lead under half the wake-up lateness is closer to on time
        // returned at once than slept
        let slack = if d.continued { STREAM_SLACK } else { PACE_SLACK.max(late / 2) };
        if target > now + slack {
            drop(d);
            let wake = (target - late).max(now);
            self.sleeps.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(wake - now);
            let woke = Instant::now().saturating_duration_since(wake).as_nanos() as u64;
            let avg = self.oversleep.load(Ordering::Relaxed);
            // a moving average over ~8 sleeps; one long preemption must not
            // make every later request early
            let woke = woke.min(4 * avg.max(OVERSLEEP_GUESS_NS));
            self.oversleep.store(avg - avg / 8 + woke / 8, Ordering::Relaxed);
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

    /// Fast SLC without a write cache: a write and its flush may each be
    /// acknowledged a wake-up latency before their modelled end.
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
        fast_with("")
    }

    /// FAST_SLC with more [ftl] lines.
    fn fast_with(ftl: &str) -> Device {
        let text = FAST_SLC.replace("journal_interval = 64", &format!("journal_interval = 64\n{ftl}"));
        let Preset::Block(cfg) = parse_preset(&text, "fast.toml", "fast", None).unwrap() else { unreachable!() };
        let ps = cfg.geo.page_size;
        Device::new(cfg, Box::new(MemStore::new(ps)), 1)
    }

    /// An isolated request is acknowledged at its modelled completion, not at
    /// once: flashbench times single reads.
    #[test]
    fn an_isolated_read_takes_its_modelled_latency() {
        let sh = Shared::new(fast_with("read_overhead_us = 400"), Pace::Real, 2 << 20);
        let data = vec![7u8; 4096];
        sh.io(|d, t| d.write(t, 0, &data)).unwrap();
        std::thread::sleep(Duration::from_millis(20)); // the device is idle again
        let mut back = vec![0u8; 4096];
        let started = Instant::now();
        sh.io(|d, t| d.read(t, 0, &mut back)).unwrap();
        let took = started.elapsed();
        // modelled: 400 us firmware + tR + transfers; acknowledged at most a
        // (learnt, bounded) wake-up latency early
        assert!(took >= Duration::from_micros(250), "an isolated 400+ us read came back after {took:?}");
    }

    /// FAST_SLC on a 40 MB/s host bus, its first MiB written, idle again.
    fn one_mib_written_at_40_mb_s() -> Shared {
        let sh = Shared::new(fast_with("host_mb_s = 40"), Pace::Real, 2 << 20);
        let data = vec![7u8; 1 << 20];
        sh.io(|d, t| d.write(t, 0, &data)).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        sh
    }

    /// A stream the host cuts into 4 KiB pieces runs at the modelled rate:
    /// the pieces queue on the device's timeline instead of each waiting out
    /// a wake-up.
    #[test]
    fn a_stream_in_pieces_runs_at_the_modelled_rate() {
        let sh = one_mib_written_at_40_mb_s();
        let mut piece = vec![0u8; 4096];
        let started = Instant::now();
        for i in 0..256u64 {
            sh.io(|d, t| d.read(t, i * 4096, &mut piece)).unwrap();
            // the host's own round trip between pieces (UML, FUSE): ~50 us
            let gap = Instant::now();
            while gap.elapsed() < Duration::from_micros(50) {}
        }
        let took = started.elapsed();
        // 1 MiB over a 40 MB/s host bus: 26 ms modelled (100 us a piece); the
        // pieces run ahead of the clock and sleep now and then, not each
        let slept = sh.sleeps.load(Ordering::Relaxed);
        assert!(took >= Duration::from_millis(20), "{took:?}: faster than the bus");
        assert!(slept <= 64, "{slept} of 256 pieces slept: the device idled through the host's gaps");
    }

    /// A stream in request-sized pieces (the lab's ubd: a 1 MiB request as
    /// two 512 KiB calls, then the next request where that one ended) is
    /// acknowledged at most STREAM_SLACK ahead of its modelled completion as
    /// a whole: the pieces' leads do not add up.
    #[test]
    fn a_stream_in_request_sized_pieces_ends_no_earlier_than_modelled() {
        let sh = one_mib_written_at_40_mb_s();
        let mut piece = vec![0u8; 512 << 10];
        let (mut first, mut last) = (None, 0u64);
        let started = Instant::now();
        for i in 0..4u64 {
            sh.io(|d, t| {
                first.get_or_insert(t);
                last = d.read(t, (i % 2) * (512 << 10), &mut piece)?;
                Ok(last)
            })
            .unwrap();
        }
        let took = started.elapsed();
        let modelled = Duration::from_nanos(last - first.unwrap());
        // the same 1 MiB twice (the third piece starts a fresh command), 2 MiB
        // over a 40 MB/s bus: ~52 ms modelled; a sleep aims a learnt
        // wake-up latency early (first guess 60 us)
        assert!(modelled >= Duration::from_millis(50), "{modelled:?} modelled for 2 MiB at 40 MB/s");
        assert!(took + STREAM_SLACK + Duration::from_micros(250) >= modelled,
                "acknowledged after {took:?}, modelled {modelled:?}: the stream ran ahead by more than STREAM_SLACK");
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

    /// One request in virtual time: the guest submits at `guest` ns, the
    /// request runs, the guest reads its completion (guest ns).
    fn virtual_request<F>(sh: &Shared, guest: u64, f: F) -> u64
    where
        F: FnOnce(&mut Device, u64) -> Result<u64, IoError>,
    {
        assert_eq!(sh.submit(guest), Flow::Go);
        sh.io(f).unwrap();
        sh.completion().expect("no cut armed")
    }

    /// Virtual time sleeps nowhere: a write the model says takes tens of ms
    /// returns at once in wall time, and the guest learns its modelled latency.
    #[test]
    fn virtual_time_does_not_sleep_and_reports_the_modelled_completion() {
        let sh = Shared::new(fast_with("host_mb_s = 40"), Pace::Virtual, 2 << 20);
        let data = vec![7u8; 1 << 20];
        let started = Instant::now();
        let done = virtual_request(&sh, 5_000_000, |d, t| d.write(t, 0, &data));
        let wall = started.elapsed();
        let modelled = done - 5_000_000;
        // 1 MiB over a 40 MB/s host bus: at least 26 ms of device time
        assert!(modelled >= 26_000_000, "modelled {modelled} ns for 1 MiB at 40 MB/s");
        assert!(wall < Duration::from_nanos(modelled), "{wall:?} of wall time for {modelled} ns modelled: it slept");
        assert_eq!(sh.sleeps.load(Ordering::Relaxed), 0);
        let lat = sh.lock().lat.write.max;
        assert_eq!(lat, modelled, "the device's own latency record and the guest's differ");
    }

    /// Guest idle time is device idle time: a read submitted long after the
    /// last request finished starts at its submit time, so it takes an idle
    /// device's latency; submitted while the device is still busy, it waits.
    #[test]
    fn virtual_time_follows_the_guests_submit_times() {
        let sh = Shared::new(fast_with("read_overhead_us = 400"), Pace::Virtual, 2 << 20);
        let data = vec![7u8; 4096];
        virtual_request(&sh, 1_000, |d, t| d.write(t, 0, &data));
        let w = virtual_request(&sh, 2_000, |d, t| d.write(t, 1 << 20, &data));
        let w = virtual_request(&sh, w, |d, t| d.flush(t));
        let mut back = vec![0u8; 4096];
        let idle_submit = w + 50_000_000;
        let r1 = virtual_request(&sh, idle_submit, |d, t| d.read(t, 0, &mut back)) - idle_submit;
        let later = idle_submit + r1 + 30_000_000;
        let r2 = virtual_request(&sh, later, |d, t| d.read(t, 1 << 20, &mut back)) - later;
        assert!(r1 >= 400_000, "an isolated read took {r1} ns, below its 400 us firmware time");
        assert_eq!(r1, r2, "two isolated reads of two pages after idle time took {r1} and {r2} ns");
        assert_eq!(sh.now(&sh.lock()), {
            let vc = sh.vclock();
            vc.to_device(later)
        });
        // a second request submitted before the first completes queues behind it
        let at = later + r2 + 10_000_000;
        sh.submit(at);
        sh.io(|d, t| d.read(t, 0, &mut back)).unwrap();
        let first = sh.completion().unwrap();
        sh.submit(at + 1);
        sh.io(|d, t| d.read(t, 0, &mut back)).unwrap();
        let second = sh.completion().unwrap();
        assert!(second >= first + 400_000, "queued read completed at {second}, the first at {first}");
    }

    /// The same requests at the same guest times give the same completions,
    /// whatever the host's speed; a new boot (guest time going back) starts
    /// on the device clock where the last left off, not in its past.
    #[test]
    fn virtual_time_is_deterministic_and_survives_a_new_boot() {
        let run = || {
            let sh = Shared::new(fast_with("host_mb_s = 40"), Pace::Virtual, 2 << 20);
            let data = vec![3u8; 64 << 10];
            let mut g = 1_000_000;
            let mut out = vec![];
            for i in 0..20u64 {
                let done = virtual_request(&sh, g, |d, t| d.write(t, (i % 8) * (64 << 10), &data));
                out.push(done - g);
                g = done + 1_000 * i;
                if i % 5 == 0 {
                    let f = virtual_request(&sh, g, |d, t| d.flush(t));
                    out.push(f - g);
                    g = f;
                }
            }
            (sh, out)
        };
        let (sh, a) = run();
        let (_, b) = run();
        assert_eq!(a, b, "two virtual runs of the same requests differ");
        let before = sh.lock().clock;
        let mut back = vec![0u8; 4096];
        // a new boot: guest time starts again near zero
        let done = virtual_request(&sh, 2_000, |d, t| d.read(t, 0, &mut back));
        assert!(done > 2_000 && done - 2_000 < 10_000_000, "first request of a new boot completed {done} ns into it");
        assert!(sh.now(&sh.lock()) >= before, "the device clock went back at a new boot");
    }

    /// A guest workload of 64 KiB writes, a flush after every fourth, against
    /// a cut armed `cut_in` ns after its first request: each write's data
    /// tagged with its number. Returns what the guest saw complete (write
    /// numbers and flushes), where it was held, and the device's 512 KiB after
    /// the cut and a restart.
    fn cut_run(cut_in: u64) -> (Vec<u64>, CutFired, Vec<u8>) {
        let sh = Shared::new(fast_with("host_mb_s = 40"), Pace::Virtual, 2 << 20);
        let mut seen = vec![];
        let mut g = 1_000_000;
        for i in 0..200u64 {
            if sh.submit(g) == Flow::Cut {
                break;
            }
            if i == 0 {
                sh.arm_cut(cut_in).unwrap();
            }
            let flush = i % 5 == 4;
            let data = vec![(i % 250) as u8 + 1; 64 << 10];
            let _ = sh.io(|d, t| if flush { d.flush(t) } else { d.write(t, (i % 8) * (64 << 10), &data) });
            match sh.completion() {
                Some(done) => {
                    seen.push(i);
                    g = done + 3_000; // the guest's own time between requests
                }
                None => break,
            }
        }
        let (_, fired) = sh.cut_state();
        let fired = fired.expect("the workload ran past its cut, which never landed");
        let mut d = sh.lock();
        assert!(!d.powered(), "the device is still on after its cut");
        d.restart();
        let mut image = vec![0u8; 512 << 10];
        let t = d.clock;
        d.read(t, 0, &mut image).unwrap();
        (seen, fired, image)
    }

    /// A cut armed at a device instant lands there: the guest never sees a
    /// request complete after it, every write a flush the guest saw
    /// complete covered is kept, and two runs of the same requests leave the
    /// same device and stop the guest at the same request.
    #[test]
    fn an_armed_cut_lands_at_its_instant_and_replays_exactly() {
        for cut_in in [5_000_000u64, 17_345_678, 40_000_001] {
            let (seen, fired, image) = cut_run(cut_in);
            assert_eq!(fired.guest_ns, 1_000_000 + cut_in, "the cut landed at guest {} ns", fired.guest_ns);
            // the guest was held at the cut: it saw only requests that completed before it
            assert!(!seen.is_empty() && seen.len() < 200, "{} requests completed around a cut", seen.len());
            let (seen2, fired2, image2) = cut_run(cut_in);
            assert_eq!((&seen, fired), (&seen2, fired2), "two runs with the same cut saw different requests");
            assert!(image == image2, "two runs with the same cut left different devices");
            // what the last flush the guest saw complete covered is on the device
            if let Some(&f) = seen.iter().rev().find(|&&i| i % 5 == 4) {
                for slot in 0..8u64 {
                    if let Some(&w) = seen.iter().rev().find(|&&i| i < f && i % 5 != 4 && i % 8 == slot) {
                        let at = (slot * (64 << 10)) as usize;
                        let kept = image[at];
                        // this slot holds write w's data, or a later write's (never older)
                        let ok = (w..200).any(|i| i % 5 != 4 && i % 8 == slot && (i % 250) as u8 + 1 == kept);
                        assert!(ok,
                                "slot {slot}: write {w} was flushed (flush {f} completed) but the device holds {kept}");
                    }
                }
            }
        }
        // different instants, different outcomes (the cut is where it was armed)
        assert_ne!(cut_run(5_000_000).0, cut_run(40_000_001).0);
    }

    /// An armed cut needs virtual time, and one at a time.
    #[test]
    fn a_cut_is_armed_once_and_only_in_virtual_time() {
        let real = Shared::new(fast(), Pace::Real, 2 << 20);
        assert!(real.arm_cut(1_000).is_err());
        let sh = Shared::new(fast(), Pace::Virtual, 2 << 20);
        let (device, guest) = sh.arm_cut(5_000).unwrap();
        assert_eq!((device, guest), (5_000, 5_000));
        assert!(sh.arm_cut(5_000).is_err(), "a second cut was armed over the first");
        assert_eq!(sh.cut_state(), (Some(5_000), None));
        sh.disarm_cut();
        assert_eq!(sh.cut_state(), (None, None));
        // disarmed, a request past the old instant goes on
        assert_eq!(sh.submit(10_000), Flow::Go);
    }
}
