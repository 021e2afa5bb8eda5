//! Device timeline: when each plane, the NAND bus and the host interface are
//! free. Operations are scheduled at max(arrival, resource free), which gives
//! plane parallelism for striped writes and queueing behind GC for free.

use crate::config::Timing;

pub struct Timeline {
    pub t: Timing,
    plane_free: Vec<u64>,
    bus_free: u64,
    host_free: u64,
    ctl_free: u64,
    busy_until: u64,
    /// Time during which the device was doing something (approximate union of
    /// NAND and host-transfer activity), ns.
    pub busy_ns: u64,
}

#[inline]
fn xfer_ns(bytes: u64, rate: u64) -> u64 {
    if rate == 0 {
        0
    } else {
        ((bytes as u128 * 1_000_000_000u128) / rate as u128) as u64
    }
}

impl Timeline {
    pub fn new(t: Timing, planes: u32) -> Self {
        Timeline { t, plane_free: vec![0; planes as usize], bus_free: 0, host_free: 0, ctl_free: 0, busy_until: 0, busy_ns: 0 }
    }

    #[inline]
    fn account(&mut self, s: u64, e: u64) {
        if e > self.busy_until {
            self.busy_ns += e - s.max(self.busy_until);
            self.busy_until = e;
        }
    }

    /// Data in over the NAND bus, then the cell program. Returns (start, end).
    pub fn program(&mut self, plane: usize, t: u64, bytes: u64, prog_ns: u64) -> (u64, u64) {
        let xs = t.max(self.plane_free[plane]).max(self.bus_free);
        let xe = xs + xfer_ns(bytes, self.t.bus_bytes_per_s);
        self.bus_free = xe;
        let end = xe + prog_ns;
        self.plane_free[plane] = end;
        self.account(xs, end);
        (xs, end)
    }

    /// Cell read (tR), then data out over the NAND bus. Returns (start, end).
    pub fn read(&mut self, plane: usize, t: u64, bytes: u64) -> (u64, u64) {
        let s = t.max(self.plane_free[plane]);
        let sensed = s + self.t.read_ns;
        let xs = sensed.max(self.bus_free);
        let e = xs + xfer_ns(bytes, self.t.bus_bytes_per_s);
        self.bus_free = e;
        self.plane_free[plane] = e;
        self.account(s, e);
        (s, e)
    }

    pub fn erase(&mut self, plane: usize, t: u64) -> (u64, u64) {
        let s = t.max(self.plane_free[plane]);
        let e = s + self.t.erase_ns;
        self.plane_free[plane] = e;
        self.account(s, e);
        (s, e)
    }

    /// Transfer between host and controller (cache hits, cached writes).
    pub fn host_xfer(&mut self, t: u64, bytes: u64) -> u64 {
        let s = t.max(self.host_free);
        let e = s + xfer_ns(bytes, self.t.host_bytes_per_s);
        self.host_free = e;
        self.account(s, e);
        e
    }

    /// Host-interface transfer time of `bytes`.
    pub fn host_xfer_ns(&self, bytes: u64) -> u64 {
        xfer_ns(bytes, self.t.host_bytes_per_s)
    }

    /// Controller firmware time for one command; returns when the command
    /// can start on the array.
    pub fn command(&mut self, t: u64, ns: u64) -> u64 {
        if ns == 0 {
            return t;
        }
        let s = t.max(self.ctl_free);
        let e = s + ns;
        self.ctl_free = e;
        self.account(s, e);
        e
    }

    /// When everything issued so far has finished.
    pub fn drained(&self) -> u64 {
        self.plane_free.iter().copied().max().unwrap_or(0).max(self.bus_free).max(self.host_free)
    }

    /// After a restart every resource is idle and time starts from `t`.
    pub fn reset(&mut self, t: u64) {
        self.plane_free.iter_mut().for_each(|p| *p = t);
        self.bus_free = t;
        self.host_free = t;
        self.ctl_free = t;
        self.busy_until = t;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing() -> Timing {
        Timing {
            read_ns: 50_000,
            program_ns: vec![1_000_000],
            erase_ns: 3_000_000,
            bus_bytes_per_s: 100_000_000,
            host_bytes_per_s: 0,
            read_overhead_ns: 0,
            write_overhead_ns: 0,
            slc_program_ns: 0,
        }
    }

    #[test]
    fn planes_program_in_parallel_but_share_the_bus() {
        let mut tl = Timeline::new(timing(), 2);
        let (_, e0) = tl.program(0, 0, 4096, 1_000_000);
        let (s1, e1) = tl.program(1, 0, 4096, 1_000_000);
        // Second transfer waits for the first on the bus, not for the program.
        assert_eq!(s1, 40_960);
        assert!(e1 < e0 + 100_000);
        let (s2, _) = tl.program(0, 0, 4096, 1_000_000);
        assert_eq!(s2, e0, "same plane queues behind its program");
        assert!(tl.busy_ns <= tl.drained());
    }

    #[test]
    fn busy_time_is_a_union() {
        let mut tl = Timeline::new(timing(), 2);
        tl.erase(0, 0);
        tl.erase(1, 0);
        assert_eq!(tl.busy_ns, 3_000_000);
        tl.erase(0, 10_000_000);
        assert_eq!(tl.busy_ns, 6_000_000);
    }
}
