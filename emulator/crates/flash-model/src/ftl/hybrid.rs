//! Hybrid log-block FTL (cheap SD cards, USB sticks, as characterised with
//! flashbench): the logical space is cut into allocation units (AUs, one
//! superblock each); each AU is mapped as a whole to a data superblock. A
//! small number of AUs can be "open" at a time: writes to an open AU go to
//! its log block (page-mapped within the AU). Opening one AU too many, or
//! filling a log block, merges a log into a new data block:
//!  - switch merge: the log was written fully and in order: it becomes the
//!    data block (just an erase of the old one);
//!  - partial merge: written in order from the start: the rest is copied in;
//!  - full merge: everything copied to a fresh block (the expensive case that
//!    makes random writes over many AUs collapse).
//!
//! Durability: the mapping is snapshotted on flush and before any erase; a
//! power cut returns to the last snapshot durable at the cut.

use std::collections::VecDeque;

use super::{erase_superblock, Ftl, FtlError, FtlStats, ReadRes, NONE};
use crate::config::DeviceConfig;
use crate::media::Media;
use crate::nand::{ReadOutcome, PAGE_ERASED};
use crate::persist::{Reader, Writer};
use crate::sbt::SbTable;

const FREE: u8 = 0;
const DATA: u8 = 1;
const LOG: u8 = 2;
const DIRTY: u8 = 3;
const RETIRED: u8 = 4;

#[derive(Clone, Debug, PartialEq)]
struct Log {
    lau: u32,
    sb: u32,
    next: u32,
    /// AU page offset -> log slot.
    pmap: Vec<u32>,
    /// Every page so far was written at its own offset, in order.
    seq: bool,
    last_use: u64,
}

#[derive(Clone, Debug, PartialEq)]
struct HMap {
    data: Vec<u32>,
    logs: Vec<Log>,
    /// Discarded logical pages (read as zeroes; not copied by merges).
    trimmed: Vec<u64>,
}

impl HMap {
    fn is_trimmed(&self, lpn: u32) -> bool {
        self.trimmed[(lpn / 64) as usize] & (1 << (lpn % 64)) != 0
    }
    fn set_trimmed(&mut self, lpn: u32, v: bool) {
        let w = &mut self.trimmed[(lpn / 64) as usize];
        if v {
            *w |= 1 << (lpn % 64);
        } else {
            *w &= !(1 << (lpn % 64));
        }
    }
}

pub struct HybridFtl {
    sbt: SbTable,
    planes: u32,
    ap: u32,
    page_size: u32,
    open_aus: u32,
    sequential_log: bool,
    map: HMap,
    durable: HMap,
    snapshots: VecDeque<(u64, HMap)>,
    state: Vec<u8>,
    free: Vec<u32>,
    clock: u64,
    read_only: bool,
    copy_failed: bool,
    st: FtlStats,
    buf: Vec<u8>,
}

impl HybridFtl {
    pub fn new(cfg: &DeviceConfig, m: &Media) -> Self {
        let sbt = SbTable::new(&cfg.geo, &m.nand);
        let units = cfg.units();
        let aus = (units / cfg.geo.sb_pages() as u64) as usize;
        let map = HMap { data: vec![NONE; aus], logs: Vec::new(), trimmed: vec![0; (units as usize).div_ceil(64)] };
        Self::with(cfg, m, sbt, map)
    }

    fn with(cfg: &DeviceConfig, m: &Media, sbt: SbTable, map: HMap) -> Self {
        let n = sbt.sbs() as usize;
        let mut f = HybridFtl {
            planes: cfg.geo.planes,
            ap: cfg.geo.sb_pages(),
            page_size: cfg.geo.page_size,
            open_aus: cfg.ftl.open_aus,
            sequential_log: cfg.ftl.sequential_log,
            durable: map.clone(),
            map,
            snapshots: VecDeque::new(),
            state: vec![FREE; n],
            free: Vec::new(),
            clock: 0,
            read_only: false,
            copy_failed: false,
            st: FtlStats::default(),
            buf: vec![0; cfg.geo.page_size as usize],
            sbt,
        };
        f.rebuild(m);
        f
    }

    pub fn load(cfg: &DeviceConfig, m: &Media, r: &mut Reader) -> std::io::Result<Self> {
        let sbt = SbTable::load(r)?;
        let data = r.u32s()?;
        let nlogs = r.u32()?;
        let mut logs = Vec::new();
        for _ in 0..nlogs {
            let lau = r.u32()?;
            let sb = r.u32()?;
            let next = r.u32()?;
            let seq = r.u8()? != 0;
            let pmap = r.u32s()?;
            logs.push(Log { lau, sb, next, pmap, seq, last_use: 0 });
        }
        let trimmed = r.u32s()?;
        let trimmed: Vec<u64> = trimmed.chunks(2).map(|c| c[0] as u64 | (*c.get(1).unwrap_or(&0) as u64) << 32).collect();
        let ro = r.u8()? != 0;
        let units = cfg.units();
        if data.len() as u64 != units / cfg.geo.sb_pages() as u64 || trimmed.len() != (units as usize).div_ceil(64) {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "mapping does not match the geometry"));
        }
        let mut f = Self::with(cfg, m, sbt, HMap { data, logs, trimmed });
        f.read_only |= ro;
        Ok(f)
    }

    fn rebuild(&mut self, m: &Media) {
        self.free.clear();
        for sb in 0..self.sbt.sbs() {
            let members: Vec<u32> = (0..self.planes).map(|p| self.sbt.member(sb, p)).collect();
            self.state[sb as usize] = if self.sbt.retired[sb as usize] {
                RETIRED
            } else if members.iter().all(|&b| m.nand.is_clean(b)) {
                FREE
            } else {
                DIRTY
            };
        }
        for &d in &self.map.data {
            if d != NONE {
                self.state[d as usize] = DATA;
            }
        }
        let planes = self.planes;
        for li in 0..self.map.logs.len() {
            let sb = self.map.logs[li].sb;
            self.state[sb as usize] = LOG;
            // Pages programmed after the durable snapshot are used up.
            let mut extent = 0;
            for p in 0..planes {
                let wp = m.nand.blocks[self.sbt.member(sb, p) as usize].write_ptr;
                if wp > 0 {
                    extent = extent.max((wp - 1) * planes + p + 1);
                }
            }
            let l = &mut self.map.logs[li];
            if extent > l.next {
                // Slots past the durable write pointer hold garbage, so the
                // log no longer has page k at slot k.
                l.next = extent;
                l.seq = false;
            }
        }
        for sb in 0..self.sbt.sbs() {
            if self.state[sb as usize] == FREE {
                self.free.push(sb);
            }
        }
    }

    #[inline]
    fn phys(&self, sb: u32, i: u32) -> (u32, u32) {
        (self.sbt.member(sb, i % self.planes), i / self.planes)
    }

    /// Tells the write log (if on) that page `k` of AU `lau` now lives at
    /// slot `i` of superblock `sb`.
    fn trace_map(&self, m: &mut Media, lau: u32, k: u32, sb: u32, i: u32, host: bool) {
        if m.trace.is_some() {
            let (b, p) = self.phys(sb, i);
            let ppn = m.nand.ppn(b, p);
            m.trace.as_deref_mut().unwrap().map(lau * self.ap + k, ppn, host);
        }
    }

    fn commit(&mut self, m: &mut Media, t: u64) -> u64 {
        let d = m.journal_commit(t);
        self.snapshots.push_back((d, self.map.clone()));
        self.st.journal_commits += 1;
        d
    }

    fn retire(&mut self, sb: u32) {
        self.sbt.retired[sb as usize] = true;
        self.state[sb as usize] = RETIRED;
        self.read_only = true;
    }

    /// Erases a superblock (replacing bad members) and returns it to the pool.
    fn erase_sb(&mut self, m: &mut Media, sb: u32, t: u64) -> u64 {
        let (end, retired) = erase_superblock(m, &mut self.sbt, sb, self.planes, t);
        if retired {
            self.retire(sb);
        } else {
            self.state[sb as usize] = FREE;
            self.free.push(sb);
        }
        end
    }

    /// Least-worn free superblock (dynamic wear levelling); erases a dirty one
    /// if none is free.
    fn alloc(&mut self, m: &mut Media, t: u64) -> Result<(u32, u64), FtlError> {
        let mut t = t;
        loop {
            if self.free.is_empty() {
                match (0..self.sbt.sbs()).find(|&s| self.state[s as usize] == DIRTY) {
                    Some(sb) => t = self.erase_sb(m, sb, t),
                    None => {
                        self.read_only = true;
                        return Err(FtlError::ReadOnly);
                    }
                }
                continue;
            }
            let idx = (0..self.free.len())
                .min_by_key(|&i| m.nand.blocks[self.sbt.member(self.free[i], 0) as usize].erase_count)
                .unwrap();
            let sb = self.free.swap_remove(idx);
            let mut ok = true;
            for p in 0..self.planes {
                if m.nand.is_bad(self.sbt.member(sb, p)) && !self.sbt.replace(sb, p) {
                    ok = false;
                }
            }
            if !ok {
                self.retire(sb);
                continue;
            }
            return Ok((sb, t));
        }
    }

    /// Copies one page between superblocks; returns the completion time.
    /// A failed program marks the target block bad and sets `copy_failed`.
    fn copy(&mut self, m: &mut Media, from: (u32, u32), to_sb: u32, to_i: u32, t: u64) -> u64 {
        let keeps = m.keeps_data();
        let mut buf = std::mem::take(&mut self.buf);
        let (out, e) = m.read(from.0, from.1, 0, if keeps { Some(&mut buf[..]) } else { None }, t);
        let (tb, tp) = self.phys(to_sb, to_i);
        let (r, _, e2) = m.program(tb, tp, if keeps { Some(&buf[..]) } else { None }, e);
        self.buf = buf;
        self.st.gc_programs += 1;
        if out == ReadOutcome::Uncorrectable {
            // The copy carries the corruption along.
            m.nand.damage(tb, tp);
        }
        if r.is_err() {
            m.nand.mark_bad(tb);
            self.copy_failed = true;
        }
        e2
    }

    /// Where the current data of an AU page is, if anywhere.
    fn source(&self, m: &Media, lau: u32, k: u32, log: Option<&Log>) -> Option<(u32, u32)> {
        let slot = log.and_then(|l| if l.pmap[k as usize] != NONE { Some((l.sb, l.pmap[k as usize])) } else { None });
        self.source_at(m, lau, k, slot)
    }

    /// `log_slot`: (log superblock, slot) holding the page, if the log has it.
    fn source_at(&self, m: &Media, lau: u32, k: u32, log_slot: Option<(u32, u32)>) -> Option<(u32, u32)> {
        let lpn = lau * self.ap + k;
        if self.map.is_trimmed(lpn) {
            return None;
        }
        if let Some((sb, s)) = log_slot {
            return Some(self.phys(sb, s));
        }
        let d = self.map.data[lau as usize];
        if d == NONE {
            return None;
        }
        let (b, p) = self.phys(d, k);
        if m.nand.pages[m.nand.ppn(b, p) as usize] == PAGE_ERASED {
            return None;
        }
        Some((b, p))
    }

    /// Closes an AU: folds its log (if any) into a data block. A program
    /// failure while copying restarts the merge into a fresh superblock.
    fn merge(&mut self, m: &mut Media, lau: u32, t: u64) -> Result<u64, FtlError> {
        let mut t = t;
        loop {
            match self.merge_once(m, lau, t)? {
                Ok(end) => return Ok(end),
                Err(retry_at) => t = retry_at,
            }
        }
    }

    fn merge_once(&mut self, m: &mut Media, lau: u32, t: u64) -> Result<Result<u64, u64>, FtlError> {
        let t0 = t;
        self.copy_failed = false;
        let li = self.map.logs.iter().position(|l| l.lau == lau);
        let log = li.map(|i| self.map.logs.remove(i));
        let old = self.map.data[lau as usize];
        let mut tc = t;
        let mut to_erase = Vec::new();
        let bad_log = log.as_ref().map_or(false, |l| (0..self.planes).any(|p| m.nand.is_bad(self.sbt.member(l.sb, p))));
        match log {
            Some(mut l) if l.seq && !bad_log => {
                if l.next < self.ap {
                    for k in l.next..self.ap {
                        if let Some(src) = self.source(m, lau, k, None) {
                            tc = tc.max(self.copy(m, src, l.sb, k, t));
                            if self.copy_failed {
                                break;
                            }
                            self.trace_map(m, lau, k, l.sb, k, false);
                        }
                    }
                    if self.copy_failed {
                        // The log is used up and holds a bad block: put it
                        // back and fold it with a full merge instead.
                        l.next = self.ap;
                        l.seq = false;
                        self.map.logs.push(l);
                        return Ok(Err(tc));
                    }
                    self.st.merges_partial += 1;
                } else {
                    self.st.merges_switch += 1;
                }
                self.map.data[lau as usize] = l.sb;
                self.state[l.sb as usize] = DATA;
                if old != NONE {
                    to_erase.push(old);
                }
            }
            log => {
                let (new, t1) = self.alloc(m, t)?;
                tc = tc.max(t1);
                for k in 0..self.ap {
                    if let Some(src) = self.source(m, lau, k, log.as_ref()) {
                        tc = tc.max(self.copy(m, src, new, k, t1));
                        if self.copy_failed {
                            break;
                        }
                        self.trace_map(m, lau, k, new, k, false);
                    }
                }
                if self.copy_failed {
                    // Abandon the new superblock (erased, with its bad block
                    // replaced, before reuse) and try again.
                    self.state[new as usize] = DIRTY;
                    if let Some(l) = log {
                        self.map.logs.push(l);
                    }
                    return Ok(Err(tc));
                }
                self.map.data[lau as usize] = new;
                self.state[new as usize] = DATA;
                if old != NONE {
                    to_erase.push(old);
                }
                if let Some(l) = log {
                    to_erase.push(l.sb);
                }
                self.st.merges_full += 1;
            }
        }
        let d = self.commit(m, tc);
        let mut end = d;
        for sb in to_erase {
            end = end.max(self.erase_sb(m, sb, d));
        }
        self.st.gc_runs += 1;
        self.st.gc_time_ns += end.saturating_sub(t0);
        Ok(Ok(end))
    }

    fn open_log(&mut self, m: &mut Media, lau: u32, t: u64) -> Result<(usize, u64), FtlError> {
        let mut t = t;
        while self.map.logs.len() >= self.open_aus as usize {
            // Close the least recently used AU.
            let lru = self.map.logs.iter().min_by_key(|l| l.last_use).unwrap().lau;
            t = self.merge(m, lru, t)?;
        }
        let (sb, t1) = self.alloc(m, t)?;
        self.state[sb as usize] = LOG;
        self.map.logs.push(Log { lau, sb, next: 0, pmap: vec![NONE; self.ap as usize], seq: true, last_use: self.clock });
        Ok((self.map.logs.len() - 1, t1))
    }
}

impl Ftl for HybridFtl {
    fn read(&mut self, m: &mut Media, lpn: u32, t: u64, buf: Option<&mut [u8]>) -> (ReadRes, u64) {
        let lau = lpn / self.ap;
        let k = lpn % self.ap;
        let slot = self.map.logs.iter().find(|l| l.lau == lau).and_then(|l| {
            let s = l.pmap[k as usize];
            if s != NONE { Some((l.sb, s)) } else { None }
        });
        let src = self.source_at(m, lau, k, slot);
        let Some((b, p)) = src else { return (ReadRes::Zero, t) };
        let (out, e) = m.read_buffered(b, p, 0, buf, t);
        match out {
            ReadOutcome::Ok(_) => (ReadRes::Data, e),
            ReadOutcome::Erased => (ReadRes::Zero, e),
            ReadOutcome::Uncorrectable => (ReadRes::Uncorrectable, e),
        }
    }

    fn write(&mut self, m: &mut Media, lpn: u32, data: Option<&[u8]>, t: u64) -> Result<(u64, u64), FtlError> {
        if self.read_only {
            return Err(FtlError::ReadOnly);
        }
        self.clock += 1;
        let lau = lpn / self.ap;
        let k = lpn % self.ap;
        let mut t = t;
        loop {
            let li = match self.map.logs.iter().position(|l| l.lau == lau) {
                // A log that only takes pages in order: a backward write
                // closes the AU first.
                Some(i) if self.sequential_log && (k < self.map.logs[i].next || !self.map.logs[i].seq) => {
                    t = self.merge(m, lau, t)?;
                    continue;
                }
                Some(i) if self.map.logs[i].next < self.ap => i,
                Some(_) => {
                    t = self.merge(m, lau, t)?;
                    continue;
                }
                None => {
                    let (i, t1) = self.open_log(m, lau, t)?;
                    t = t1;
                    i
                }
            };
            if self.sequential_log {
                // Fill the gap up to page k from the current data.
                let sb = self.map.logs[li].sb;
                self.copy_failed = false;
                while self.map.logs[li].next < k {
                    let j = self.map.logs[li].next;
                    if let Some(src) = self.source(m, lau, j, None) {
                        t = t.max(self.copy(m, src, sb, j, t));
                        if self.copy_failed {
                            // Bad block in the log: fold the AU and retry.
                            self.map.logs[li].next += 1;
                            self.map.logs[li].seq = false;
                            break;
                        }
                        self.map.logs[li].pmap[j as usize] = j;
                        self.trace_map(m, lau, j, sb, j, false);
                    }
                    self.map.logs[li].next += 1;
                }
                if self.copy_failed {
                    continue;
                }
            }
            let (sb, slot) = (self.map.logs[li].sb, self.map.logs[li].next);
            let (b, p) = self.phys(sb, slot);
            let (r, s, e) = m.program(b, p, data, t);
            self.map.logs[li].next += 1;
            if r.is_err() {
                self.map.logs[li].seq = false;
            }
            match r {
                Ok(()) => {
                    self.trace_map(m, lau, k, sb, slot, true);
                    let l = &mut self.map.logs[li];
                    l.pmap[k as usize] = slot;
                    l.seq &= k == slot;
                    l.last_use = self.clock;
                    self.map.set_trimmed(lpn, false);
                    self.st.host_programs += 1;
                    return Ok((s, e));
                }
                Err(_) => {
                    // Grown bad block in the log: fold the AU into a new
                    // data block (the bad block is replaced at its erase)
                    // and write again.
                    m.nand.mark_bad(b);
                    t = self.merge(m, lau, e)?;
                }
            }
        }
    }

    fn trim(&mut self, _m: &mut Media, lpn: u32, _t: u64) -> Result<(), FtlError> {
        if self.read_only {
            return Err(FtlError::ReadOnly);
        }
        self.map.set_trimmed(lpn, true);
        Ok(())
    }

    fn flush(&mut self, m: &mut Media, t: u64) -> u64 {
        if self.snapshots.back().map_or(false, |s| s.1 == self.map) || (self.snapshots.is_empty() && self.durable == self.map) {
            return t.max(m.tl.drained());
        }
        self.commit(m, t)
    }

    fn prune(&mut self, now: u64) {
        while self.snapshots.front().map_or(false, |s| s.0 <= now) {
            self.durable = self.snapshots.pop_front().unwrap().1;
        }
    }

    fn power_cut(&mut self, m: &mut Media, t_eff: u64) {
        let mut base = std::mem::replace(&mut self.durable, HMap { data: vec![], logs: vec![], trimmed: vec![] });
        for (d, snap) in self.snapshots.drain(..) {
            if d <= t_eff {
                base = snap;
            }
        }
        self.map = base;
        self.durable = self.map.clone();
        self.rebuild(m);
    }

    fn block_failed(&mut self, m: &mut Media, block: u32) {
        m.nand.mark_bad(block);
        let Some(i) = self.sbt.members.iter().position(|&b| b == block) else {
            for s in self.sbt.spares.iter_mut() {
                s.retain(|&b| b != block);
            }
            return;
        };
        let sb = i as u32 / self.planes;
        let lau = self
            .map
            .data
            .iter()
            .position(|&d| d == sb)
            .map(|x| x as u32)
            .or_else(|| self.map.logs.iter().find(|l| l.sb == sb).map(|l| l.lau));
        match lau {
            // Relocate the AU; the bad block is replaced when its superblock
            // is erased.
            Some(lau) => {
                let _ = self.merge(m, lau, m.tl.drained());
            }
            None => {
                if self.state[sb as usize] == FREE || self.state[sb as usize] == DIRTY {
                    self.free.retain(|&s| s != sb);
                    let t = m.tl.drained();
                    self.erase_sb(m, sb, t);
                }
            }
        }
    }

    fn read_only(&self) -> bool {
        self.read_only
    }

    fn sbt(&self) -> &SbTable {
        &self.sbt
    }

    fn stats(&self) -> &FtlStats {
        &self.st
    }

    fn reset_stats(&mut self) {
        self.st = FtlStats::default();
    }

    fn locate(&self, lpn: u32) -> Option<(u32, u32)> {
        let lau = lpn / self.ap;
        let k = lpn % self.ap;
        if self.map.is_trimmed(lpn) {
            return None;
        }
        if let Some(l) = self.map.logs.iter().find(|l| l.lau == lau) {
            if l.pmap[k as usize] != NONE {
                return Some(self.phys(l.sb, l.pmap[k as usize]));
            }
        }
        let d = *self.map.data.get(lau as usize)?;
        if d == NONE {
            None
        } else {
            Some(self.phys(d, k))
        }
    }

    fn save(&self, w: &mut Writer) {
        self.sbt.save(w);
        w.u32s(&self.map.data);
        w.u32(self.map.logs.len() as u32);
        for l in &self.map.logs {
            w.u32(l.lau);
            w.u32(l.sb);
            w.u32(l.next);
            w.u8(l.seq as u8);
            w.u32s(&l.pmap);
        }
        let words: Vec<u32> = self.map.trimmed.iter().flat_map(|&x| [x as u32, (x >> 32) as u32]).collect();
        w.u32s(&words);
        w.u8(self.read_only as u8);
    }

    fn check(&self, m: &Media) -> Result<(), String> {
        let mut owner = vec![0u8; self.state.len()];
        for (lau, &d) in self.map.data.iter().enumerate() {
            if d != NONE {
                owner[d as usize] += 1;
                if self.state[d as usize] != DATA {
                    return Err(format!("AU {lau} data superblock {d} is not in DATA state"));
                }
            }
        }
        for l in &self.map.logs {
            owner[l.sb as usize] += 1;
            if l.next > self.ap {
                return Err("log write pointer past the end".into());
            }
            for (k, &s) in l.pmap.iter().enumerate() {
                if s != NONE {
                    if s >= l.next {
                        return Err(format!("AU {} page {k} maps past the log's write pointer", l.lau));
                    }
                    let (b, p) = self.phys(l.sb, s);
                    if m.nand.pages[m.nand.ppn(b, p) as usize] == PAGE_ERASED {
                        return Err(format!("AU {} page {k} maps to an erased page", l.lau));
                    }
                }
            }
        }
        if owner.iter().any(|&o| o > 1) {
            return Err("a superblock is used twice".into());
        }
        if self.map.logs.len() > self.open_aus as usize {
            return Err("too many open AUs".into());
        }
        for &sb in &self.free {
            if owner[sb as usize] != 0 {
                return Err(format!("free superblock {sb} is in use"));
            }
            for p in 0..self.planes {
                if !m.nand.is_clean(self.sbt.member(sb, p)) {
                    return Err(format!("free superblock {sb} is not erased"));
                }
            }
        }
        let _ = self.page_size;
        Ok(())
    }
}
