//! The emulated block device: host requests in bytes, broken into mapping
//! units, through the write cache and the FTL onto the NAND model, each with a
//! modelled completion time. Also power cuts, fault injection and statistics.

use crate::cache::Cache;
use crate::config::{DeviceConfig, FtlKind};
use crate::crashlog::ReqKind;
use crate::ftl::hybrid::HybridFtl;
use crate::ftl::page::PageFtl;
use crate::ftl::{Ftl, FtlError, ReadRes};
use crate::hist::Histogram;
use crate::media::Media;
use crate::nand::{Nand, BLOCK_FACTORY_BAD, BLOCK_GROWN_BAD};
use crate::store::Store;
use crate::timing::Timeline;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoError {
    /// Uncorrectable data or backing-store failure.
    Eio,
    /// The device went read-only (spares exhausted).
    ReadOnly,
    /// Power was cut; nothing works until a restart.
    PoweredOff,
    /// Beyond the device's end.
    Range,
}

#[derive(Debug, Clone, Default)]
pub struct HostStats {
    pub reads: u64,
    pub read_bytes: u64,
    pub writes: u64,
    pub write_bytes: u64,
    pub flushes: u64,
    pub discards: u64,
    pub discard_bytes: u64,
    pub errors: u64,
}

#[derive(Default)]
pub struct Latency {
    pub all: Histogram,
    pub read: Histogram,
    pub write: Histogram,
    pub flush: Histogram,
    pub discard: Histogram,
}

pub struct Device {
    pub cfg: DeviceConfig,
    pub media: Media,
    pub ftl: Box<dyn Ftl>,
    cache: Cache,
    pub host: HostStats,
    pub lat: Latency,
    powered: bool,
    unit: u64,
    /// Latest completion handed out: the device's "now" when not paced.
    pub clock: u64,
    busy_base: u64,
    /// Busy time of background work (the SLC buffer's idle-time folds),
    /// part of `busy_ns`, since the last `reset_stats`.
    background_ns: u64,
    tmp: Vec<u8>,
    /// Where the last read / write ended: a request that starts there
    /// continues the same multi-block command (see `command_overhead`).
    read_end: u64,
    write_end: u64,
    /// The last read or write continued the command before it (a stream the
    /// host cut into pieces): its pacing may run ahead (see flashbed-emu).
    pub continued: bool,
}

impl From<FtlError> for IoError {
    fn from(_: FtlError) -> Self {
        IoError::ReadOnly
    }
}

impl Device {
    /// A factory-fresh device.
    pub fn new(cfg: DeviceConfig, store: Box<dyn Store>, seed: u64) -> Self {
        let nand = Nand::new(cfg.geo.clone(), cfg.rel.clone(), seed);
        let media = Media::new(nand, store, Timeline::new(cfg.timing.clone(), cfg.geo.planes));
        let ftl: Box<dyn Ftl> = match cfg.ftl.kind {
            FtlKind::Page => Box::new(PageFtl::new(&cfg, &media)),
            FtlKind::Hybrid => Box::new(HybridFtl::new(&cfg, &media)),
        };
        Self::assemble(cfg, media, ftl)
    }

    /// A device from saved parts (see `state`).
    pub fn assemble(cfg: DeviceConfig, media: Media, ftl: Box<dyn Ftl>) -> Self {
        let unit = cfg.unit_bytes() as u64;
        let cache = Cache::new((cfg.ftl.cache_bytes / unit) as usize, unit as usize, media.keeps_data());
        Device {
            cache,
            host: HostStats::default(),
            lat: Latency::default(),
            powered: true,
            unit,
            clock: 0,
            busy_base: 0,
            background_ns: 0,
            tmp: vec![0; unit as usize],
            read_end: u64::MAX,
            write_end: u64::MAX,
            continued: false,
            cfg,
            media,
            ftl,
        }
    }

    pub fn capacity(&self) -> u64 {
        self.cfg.capacity
    }

    pub fn powered(&self) -> bool {
        self.powered
    }

    fn begin(&mut self, t: u64, off: u64, len: u64) -> Result<(), IoError> {
        if !self.powered {
            return Err(IoError::PoweredOff);
        }
        if off.checked_add(len).map_or(true, |e| e > self.cfg.capacity) {
            return Err(IoError::Range);
        }
        if self.media.io_error.is_some() {
            return Err(IoError::Eio);
        }
        self.ftl.prune(t);
        self.media.prune_log(t);
        if self.cfg.ftl.slc_cache_bytes > 0 {
            // background work once the device has been idle long enough
            let from = self.media.tl.drained() + self.cfg.ftl.slc_idle_ns;
            if t > from {
                let busy = self.media.tl.busy_ns;
                self.ftl.idle(&mut self.media, from, t);
                self.background_ns += self.media.tl.busy_ns - busy;
            }
        }
        Ok(())
    }

    fn finish(&mut self, t: u64, done: u64, kind: u8) -> u64 {
        let done = done.max(t);
        let l = done - t;
        self.lat.all.record(l);
        match kind {
            0 => self.lat.read.record(l),
            1 => self.lat.write.record(l),
            2 => self.lat.flush.record(l),
            _ => self.lat.discard.record(l),
        }
        self.clock = self.clock.max(done);
        done
    }

    /// Reads one unit into `tmp`-sized `buf` (or nothing if the store keeps
    /// no data). Returns the completion time.
    fn read_unit(&mut self, lpn: u32, t: u64, buf: Option<&mut [u8]>) -> Result<u64, IoError> {
        if let Some(slot) = self.cache.get(lpn) {
            if let (Some(b), Some(d)) = (buf, self.cache.slot_data(slot)) {
                b.copy_from_slice(d);
            }
            return Ok(t);
        }
        let keeps = buf.is_some();
        let (res, e) = match buf {
            Some(b) => {
                let r = self.ftl.read(&mut self.media, lpn, t, Some(&mut *b));
                if r.0 == ReadRes::Zero {
                    b.fill(0);
                }
                r
            }
            None => self.ftl.read(&mut self.media, lpn, t, None),
        };
        let _ = keeps;
        match res {
            ReadRes::Uncorrectable => Err(IoError::Eio),
            _ => Ok(e),
        }
    }

    /// Firmware time charged for a request: the command's own firmware time,
    /// and one address translation per further erase unit (allocation unit)
    /// the command enters.
    ///
    /// The controller translates a command's logical address an erase unit
    /// at a time (hybrid FTL: the AU's data block and log block; page FTL:
    /// the map segment of that logical range). The first unit's translation
    /// overlaps the command's setup; a request that crosses an erase-unit
    /// boundary stalls mid-command for a second one: firmware time plus a
    /// read of that unit's map page (tR). That is the
    /// latency step at the erase-block size which flashbench's alignment test
    /// (`-a`) finds on real cards: small reads across a boundary of the erase
    /// size or above take longer, those across smaller boundaries do not
    /// (flashbench README, the Linaro flash card survey; A. Bergmann,
    /// "Optimizing Linux with cheap flash drives", LWN, 2011,
    /// https://lwn.net/Articles/428584/).
    ///
    /// A host stack between the filesystem and the device may cut one large
    /// transfer into many small requests (UML's ubd before patch 0003: one
    /// pread/pwrite per 4 KiB page; with it, calls of up to 512 KiB); a request that starts exactly where the previous one of its
    /// kind ended is the same multi-block command continuing (eMMC/SD stream it
    /// as one): it pays only for the erase units it newly enters, so the cost
    /// of a transfer does not depend on how the host split it.
    fn command_overhead(&mut self, write: bool, off: u64, len: u64) -> u64 {
        let t = &self.cfg.timing;
        let (end, ns) = if write { (&mut self.write_end, t.write_overhead_ns) } else { (&mut self.read_end, t.read_overhead_ns) };
        let unit = self.cfg.erase_unit_bytes();
        let continues = *end == off;
        self.continued = continues;
        *end = off.saturating_add(len);
        let first = off / unit;
        let last = (off + len.max(1) - 1) / unit;
        // erase units entered after the command's first: each stalls the
        // transfer for a translation and a read of that unit's map page (tR);
        // the first one's lookup overlaps the command's own setup
        let switches = last - first + continues as u64 - (continues && off % unit != 0) as u64;
        let fresh = !continues as u64;
        fresh * ns + switches * (ns + t.read_ns)
    }

    /// Host read of `buf.len()` bytes at `off`, arriving at `t` (ns).
    pub fn read(&mut self, t: u64, off: u64, buf: &mut [u8]) -> Result<u64, IoError> {
        self.begin(t, off, buf.len() as u64)?;
        let arrival = t;
        let ovh = self.command_overhead(false, off, buf.len() as u64);
        let t = self.media.tl.command(t, ovh);
        let keeps = self.media.keeps_data();
        let mut done = t;
        let mut pos = 0usize;
        let mut tmp = std::mem::take(&mut self.tmp);
        let mut res = Ok(());
        while pos < buf.len() {
            let a = off + pos as u64;
            let lpn = (a / self.unit) as u32;
            let uo = (a % self.unit) as usize;
            let n = (self.unit as usize - uo).min(buf.len() - pos);
            let target = if keeps { Some(&mut tmp[..]) } else { None };
            match self.read_unit(lpn, t, target) {
                Ok(e) => done = done.max(e),
                Err(e) => {
                    res = Err(e);
                    break;
                }
            }
            if keeps {
                buf[pos..pos + n].copy_from_slice(&tmp[uo..uo + n]);
            } else {
                buf[pos..pos + n].fill(0);
            }
            pos += n;
        }
        self.tmp = tmp;
        if let Err(e) = res {
            self.host.errors += 1;
            return Err(e);
        }
        if self.media.io_error.is_some() {
            return Err(IoError::Eio);
        }
        // The host transfer overlaps the array reads: it ends after the whole
        // request has crossed the bus, and after the last unit read has.
        let last = self.media.tl.host_xfer_ns(self.unit.min(buf.len() as u64));
        let host_end = self.media.tl.host_xfer(t, buf.len() as u64);
        let done = host_end.max(done + last);
        self.host.reads += 1;
        self.host.read_bytes += buf.len() as u64;
        Ok(self.finish(arrival, done, 0))
    }

    /// Writes one whole unit through the cache.
    fn put_unit(&mut self, lpn: u32, data: Option<&[u8]>, t: u64) -> Result<u64, IoError> {
        if self.ftl.read_only() {
            return Err(IoError::ReadOnly);
        }
        if let (Some(tr), Some(d)) = (self.media.trace.as_deref_mut(), data) {
            tr.unit(lpn, d);
        }
        if self.cache.cap == 0 {
            let (_, end) = self.ftl.write(&mut self.media, lpn, data, t)?;
            return Ok(end);
        }
        let mut done = t;
        let slot = match self.cache.get(lpn) {
            Some(s) => s,
            None => {
                while self.cache.is_full() {
                    // Write back the oldest unit; the host waits until the
                    // controller has taken it into a page register.
                    let (l, s) = self.cache.pop_oldest().unwrap();
                    if let Some(tr) = self.media.trace.as_deref_mut() {
                        tr.writeback(l);
                    }
                    let d = self.cache.slot_data(s).map(|d| d.to_vec());
                    let r = self.ftl.write(&mut self.media, l, d.as_deref(), t);
                    self.cache.release(s);
                    let (rel, _) = r?;
                    done = done.max(rel);
                }
                self.cache.insert(lpn)
            }
        };
        if let (Some(dst), Some(src)) = (self.cache.slot_data_mut(slot), data) {
            dst.copy_from_slice(src);
        }
        Ok(done)
    }

    /// Writes bytes, with read-modify-write of partial units.
    fn write_inner(&mut self, t: u64, off: u64, data: &[u8]) -> Result<u64, IoError> {
        let keeps = self.media.keeps_data();
        let mut done = self.media.tl.host_xfer(t, data.len() as u64);
        let mut pos = 0usize;
        let mut tmp = std::mem::take(&mut self.tmp);
        let mut res = Ok(());
        while pos < data.len() {
            let a = off + pos as u64;
            let lpn = (a / self.unit) as u32;
            let uo = (a % self.unit) as usize;
            let n = (self.unit as usize - uo).min(data.len() - pos);
            let r = if n == self.unit as usize {
                self.put_unit(lpn, if keeps { Some(&data[pos..pos + n]) } else { None }, t)
            } else {
                // Partial unit: merge with the current contents.
                let target = if keeps { Some(&mut tmp[..]) } else { None };
                match self.read_unit(lpn, t, target) {
                    Ok(e) => {
                        done = done.max(e);
                        if keeps {
                            tmp[uo..uo + n].copy_from_slice(&data[pos..pos + n]);
                        }
                        let d = if keeps { Some(&tmp[..]) } else { None };
                        let d = d.map(|x| x.to_vec());
                        self.put_unit(lpn, d.as_deref(), e)
                    }
                    Err(e) => Err(e),
                }
            };
            match r {
                Ok(e) => done = done.max(e),
                Err(e) => {
                    res = Err(e);
                    break;
                }
            }
            pos += n;
        }
        self.tmp = tmp;
        res?;
        if self.media.io_error.is_some() {
            return Err(IoError::Eio);
        }
        Ok(done)
    }

    /// Host write arriving at `t`; returns its completion time.
    pub fn write(&mut self, t: u64, off: u64, data: &[u8]) -> Result<u64, IoError> {
        self.begin(t, off, data.len() as u64)?;
        let arrival = t;
        let ovh = self.command_overhead(true, off, data.len() as u64);
        let t = self.media.tl.command(t, ovh);
        if let Some(tr) = self.media.trace.as_deref_mut() {
            tr.begin(ReqKind::Write, arrival, off, data.len() as u64, Some(data));
        }
        let r = match self.write_inner(t, off, data) {
            Ok(done) => {
                self.host.writes += 1;
                self.host.write_bytes += data.len() as u64;
                Ok(self.finish(arrival, done, 1))
            }
            Err(e) => {
                self.host.errors += 1;
                Err(e)
            }
        };
        self.trace_end(&r);
        r
    }

    /// Discard (TRIM). Whole units are unmapped and read back as zeroes;
    /// partial units at the edges are written with zeroes so the range reads
    /// as zeroes, as a punched hole in a file must.
    pub fn discard(&mut self, t: u64, off: u64, len: u64) -> Result<u64, IoError> {
        self.continued = false;
        self.begin(t, off, len)?;
        if self.ftl.read_only() {
            return Err(IoError::ReadOnly);
        }
        if let Some(tr) = self.media.trace.as_deref_mut() {
            tr.begin(ReqKind::Discard, t, off, len, None);
        }
        let r = self.discard_inner(t, off, len);
        self.trace_end(&r);
        r
    }

    fn discard_inner(&mut self, t: u64, off: u64, len: u64) -> Result<u64, IoError> {
        let end = off + len;
        let first_full = off.div_ceil(self.unit);
        let last_full = end / self.unit;
        let mut done = t;
        let zeros = vec![0u8; self.unit as usize];
        let mut edge = |dev: &mut Device, a: u64, b: u64| -> Result<(), IoError> {
            if b > a {
                let d = dev.write_inner(t, a, &zeros[..(b - a) as usize])?;
                done = done.max(d);
            }
            Ok(())
        };
        if first_full >= last_full {
            edge(self, off, end)?;
        } else {
            edge(self, off, first_full * self.unit)?;
            edge(self, last_full * self.unit, end)?;
            for lpn in first_full..last_full {
                if let Some(tr) = self.media.trace.as_deref_mut() {
                    tr.trim(lpn as u32);
                }
                self.cache.remove(lpn as u32);
                self.ftl.trim(&mut self.media, lpn as u32, t)?;
            }
        }
        self.host.discards += 1;
        self.host.discard_bytes += len;
        Ok(self.finish(t, done, 3))
    }

    /// Writes back the cache and makes everything written so far durable.
    pub fn flush(&mut self, t: u64) -> Result<u64, IoError> {
        self.continued = false;
        self.begin(t, 0, 0)?;
        if let Some(tr) = self.media.trace.as_deref_mut() {
            tr.begin(ReqKind::Flush, t, 0, 0, None);
        }
        let r = self.flush_inner(t);
        self.trace_end(&r);
        r
    }

    fn trace_end(&mut self, r: &Result<u64, IoError>) {
        if let Some(tr) = self.media.trace.as_deref_mut() {
            match r {
                Ok(done) => tr.end(*done, true),
                Err(_) => tr.end(0, false),
            }
        }
    }

    fn flush_inner(&mut self, t: u64) -> Result<u64, IoError> {
        let mut tc = t;
        while let Some((l, s)) = self.cache.pop_oldest() {
            if let Some(tr) = self.media.trace.as_deref_mut() {
                tr.writeback(l);
            }
            let d = self.cache.slot_data(s).map(|d| d.to_vec());
            let r = self.ftl.write(&mut self.media, l, d.as_deref(), t);
            self.cache.release(s);
            match r {
                Ok((_, e)) => tc = tc.max(e),
                Err(e) => {
                    // Read-only: cached data cannot reach the array.
                    self.host.errors += 1;
                    return Err(e.into());
                }
            }
        }
        let d = self.ftl.flush(&mut self.media, tc);
        if self.media.io_error.is_some() {
            return Err(IoError::Eio);
        }
        let r = self.media.store.sync();
        if r.is_err() {
            return Err(IoError::Eio);
        }
        self.host.flushes += 1;
        Ok(self.finish(t, d, 2))
    }

    /// Power is cut at time `t`: the cache is lost, in-flight NAND operations
    /// are torn, the mapping reverts to what was durable. I/O then fails
    /// until `restart`.
    pub fn power_cut(&mut self, t: u64) {
        if !self.powered {
            return;
        }
        self.powered = false;
        self.cache.clear();
        let t_eff = self.media.power_cut(t);
        self.ftl.power_cut(&mut self.media, t_eff);
    }

    /// Power comes back (in-process restart, for tests).
    pub fn restart(&mut self) {
        self.powered = true;
        let t = self.clock.max(self.media.tl.drained());
        self.media.reset_after_restart(t);
        self.clock = t;
    }

    /// Clean shutdown: everything is written back and durable.
    pub fn shutdown(&mut self, t: u64) -> Result<u64, IoError> {
        let d = self.flush(t)?;
        self.ftl.prune(u64::MAX);
        self.powered = false;
        Ok(d)
    }

    pub fn inject_bad_block(&mut self, block: u32) -> Result<(), String> {
        if block >= self.cfg.geo.blocks() {
            return Err(format!("block {block} is out of range (the device has {} blocks)", self.cfg.geo.blocks()));
        }
        if self.media.nand.is_bad(block) {
            return Err(format!("block {block} is already bad"));
        }
        self.ftl.block_failed(&mut self.media, block);
        Ok(())
    }

    pub fn inject_bit_errors(&mut self, block: u32, page: u32, bits: u32) -> Result<(), String> {
        if block >= self.cfg.geo.blocks() {
            return Err(format!("block {block} is out of range (the device has {} blocks)", self.cfg.geo.blocks()));
        }
        if page >= self.cfg.geo.pages_per_block {
            return Err(format!("page {page} is out of range (blocks have {} pages)", self.cfg.geo.pages_per_block));
        }
        self.media.nand.inject_bit_errors(block, page, bits);
        // The controller's page register must not hide the new errors.
        self.media.epoch += 1;
        Ok(())
    }

    /// Physical (block, page) holding byte offset `off`, if mapped.
    pub fn locate(&self, off: u64) -> Option<(u32, u32)> {
        self.ftl.locate((off / self.unit) as u32)
    }

    pub fn reset_stats(&mut self) {
        self.host = HostStats::default();
        self.lat = Latency::default();
        self.media.st = Default::default();
        self.ftl.reset_stats();
        self.busy_base = self.media.tl.busy_ns;
        self.background_ns = 0;
    }

    pub fn busy_ns(&self) -> u64 {
        self.media.tl.busy_ns - self.busy_base
    }

    pub fn cached_units(&self) -> usize {
        self.cache.len()
    }

    pub fn stats_json(&self) -> serde_json::Value {
        use serde_json::json;
        let n = &self.media.nand;
        let st = &self.media.st;
        let fs = self.ftl.stats();
        let ps = self.cfg.geo.page_size as u64;
        let ec: Vec<u32> = n.blocks.iter().map(|b| b.erase_count).collect();
        // Wear spread over the blocks in service (spares not yet used would
        // pull the minimum to zero).
        let sbt = self.ftl.sbt();
        let live: Vec<u32> = sbt
            .members
            .iter()
            .enumerate()
            .filter(|&(i, &b)| !sbt.retired[i / sbt.planes as usize] && !n.blocks[b as usize].is_bad())
            .map(|(_, &b)| n.blocks[b as usize].erase_count)
            .collect();
        let mean = if live.is_empty() { 0.0 } else { live.iter().map(|&x| x as f64).sum::<f64>() / live.len() as f64 };
        let factory: Vec<u32> = (0..n.blocks.len() as u32).filter(|&b| n.blocks[b as usize].flags & BLOCK_FACTORY_BAD != 0).collect();
        let grown: Vec<u32> = (0..n.blocks.len() as u32).filter(|&b| n.blocks[b as usize].flags & BLOCK_GROWN_BAD != 0).collect();
        let nand_bytes = (st.page_programs + st.meta_programs) * ps;
        let wa = if self.host.write_bytes > 0 { Some(nand_bytes as f64 / self.host.write_bytes as f64) } else { None };
        let ftl_wa = if fs.host_programs > 0 {
            Some((fs.host_programs + fs.gc_programs + fs.fold_programs) as f64 / fs.host_programs as f64)
        } else {
            None
        };
        let lat_all = &self.lat.all;
        json!({
            // Flat headline figures (the nested sections below have them all).
            "nand_program_pages": st.page_programs + st.meta_programs,
            "nand_read_pages": st.page_reads,
            "busy_seconds": self.busy_ns() as f64 / 1e9,
            "erase_count_min": live.iter().min().copied().unwrap_or(0),
            "erase_count_max": live.iter().max().copied().unwrap_or(0),
            "erase_count_mean": mean,
            "latency_p50_us": lat_all.quantile(0.5) as f64 / 1000.0,
            "latency_p99_us": lat_all.quantile(0.99) as f64 / 1000.0,
            "device": self.cfg.name,
            "capacity_bytes": self.cfg.capacity,
            "powered": self.powered,
            "read_only": self.ftl.read_only(),
            "host": {
                "reads": self.host.reads, "read_bytes": self.host.read_bytes,
                "writes": self.host.writes, "write_bytes": self.host.write_bytes,
                "flushes": self.host.flushes,
                "discards": self.host.discards, "discard_bytes": self.host.discard_bytes,
                "errors": self.host.errors,
            },
            "nand": {
                "page_reads": st.page_reads,
                "page_programs": st.page_programs,
                "meta_programs": st.meta_programs,
                "host_page_programs": fs.host_programs,
                "gc_page_programs": fs.gc_programs,
                "fold_page_programs": fs.fold_programs,
                "erases": st.erases,
                "program_failures": st.program_failures,
                "erase_failures": st.erase_failures,
                "corrected_bits": st.corrected_bits,
                "uncorrectable_reads": st.uncorrectable_reads,
            },
            "write_amplification": wa,
            "ftl_write_amplification": ftl_wa,
            "gc": {
                "count": fs.gc_runs,
                "time_ns": fs.gc_time_ns,
                "wear_level_moves": fs.wear_level_moves,
                "journal_commits": fs.journal_commits,
                "merges_switch": fs.merges_switch,
                "merges_partial": fs.merges_partial,
                "merges_full": fs.merges_full,
            },
            "erase_counts": ec,
            "erase_count_summary": {
                "min": live.iter().min().copied().unwrap_or(0),
                "max": live.iter().max().copied().unwrap_or(0),
                "mean": mean,
            },
            "bad_blocks": {
                "factory": factory,
                "grown": grown,
                "spares_left": self.ftl.sbt().spares_left(),
            },
            "latency_us": {
                "all": self.lat.all.summary_us(),
                "read": self.lat.read.summary_us(),
                "write": self.lat.write.summary_us(),
                "flush": self.lat.flush.summary_us(),
                "discard": self.lat.discard.summary_us(),
            },
            "busy_ns": self.busy_ns(),
            // of which background work no request asked for (idle-time folds)
            "background_busy_ns": self.background_ns,
            "device_time_ns": self.clock,
            "cache": { "bytes": self.cfg.ftl.cache_bytes, "dirty_bytes": self.cache.len() as u64 * self.unit },
            "slc": {
                "bytes": self.cfg.ftl.slc_cache_bytes,
                "page_programs": fs.slc_programs,
                "folds": fs.folds,
                "fold_page_programs": fs.fold_programs,
            },
        })
    }
}
