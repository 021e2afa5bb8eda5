//! Page-mapped FTL (eMMC/SSD-like): every mapping unit can live anywhere;
//! writes append to an open superblock; greedy garbage collection reclaims
//! the superblock with the fewest valid units; dynamic wear levelling picks
//! the least-worn free superblock, static wear levelling periodically
//! evacuates the coldest one; bad blocks are replaced from per-plane spares.
//!
//! Durability: mapping changes go to an in-RAM journal persisted (one
//! metadata page) on flush, every `journal_interval` updates, and before any
//! erase (so the durable mapping never points into an erased block). A power
//! cut undoes the journal back to the last durable commit.
//!
//! SLC write buffer (`ftl.slc_cache`, off by default): the last superblocks
//! are kept in SLC mode (lower pages only, `slc_program_ns`). Host data lands
//! there; the oldest full buffer superblock is folded into the MLC/TLC array
//! (its valid units read and programmed through the fold write point, the
//! mapping committed, the buffer block erased) in the background once the
//! device has been idle for `slc_idle_ns`, and in the foreground when a host
//! write finds the buffer full: then every buffer block the host fills costs
//! a fold, and the host sees the array's sustained rate. Data in the buffer
//! is ordinary mapped data: durable once programmed and committed, like any
//! other page. With `ftl.slc_bypass`, a sequential stream (a run of
//! logically consecutive units at least that long) goes straight into the
//! array once recognised, as controllers keep the buffer for small, scattered
//! (and soon rewritten) data: a large file then writes at the array's direct
//! rate and leaves the buffer free for the random writes around it (a unit
//! changing paths while its older copy still waits in the other path's page
//! has that page programmed first, so the copies are mapped in order).

use std::collections::{HashSet, VecDeque};

use super::{erase_superblock, Ftl, FtlError, FtlStats, ReadRes, NONE};
use crate::config::DeviceConfig;
use crate::media::Media;
use crate::nand::{ReadOutcome, PAGE_ERASED};
use crate::persist::{Reader, Writer};
use crate::sbt::SbTable;

const FREE: u8 = 0;
const OPEN: u8 = 1;
const CLOSED: u8 = 2;
const RETIRED: u8 = 3;

/// GC runs when fewer free superblocks remain (one for the GC write point,
/// one in hand).
const GC_LOW: usize = 2;
/// Erases between static wear-levelling checks.
const WL_CHECK: u32 = 16;

struct Wp {
    sb: u32,
    next: u32,
    lpns: Vec<u32>,
    data: Vec<u8>,
}

#[derive(Clone, Copy, PartialEq)]
enum Stream {
    Host,
    Gc,
    /// Host data into the SLC buffer.
    Slc,
    /// Buffer contents folded into the array.
    Fold,
}

pub struct PageFtl {
    sbt: SbTable,
    planes: u32,
    sb_pages: u32,
    upp: u32,
    unit: u32,
    page_size: u32,
    sps: u32,
    l2p: Vec<u32>,
    p2l: Vec<u32>,
    valid: Vec<u32>,
    state: Vec<u8>,
    free: Vec<u32>,
    host: Option<Wp>,
    gc: Option<Wp>,
    slc: Option<Wp>,
    fold: Option<Wp>,
    /// First superblock of the SLC buffer (`sbs()` when there is none).
    slc_first: u32,
    /// Superblock page indexes programmable in SLC mode (lower pages).
    slc_idx: Vec<u32>,
    slc_free: Vec<u32>,
    /// Full buffer superblocks, oldest first: the fold order.
    slc_closed: VecDeque<u32>,
    /// The fold under way: (superblock, next slot, its wear when begun).
    fold_cur: Option<(u32, u32, u32)>,
    /// Units of a logically consecutive run after which host data bypasses
    /// the buffer (0: never).
    bypass_units: u32,
    /// The unit that would continue the current run, and the run's length.
    run_next: u32,
    run_len: u32,
    urgent: Vec<u32>,
    /// Units whose data GC found uncorrectable: reads fail until rewritten.
    lost: HashSet<u32>,
    journal: Vec<(u32, u32)>,
    commits: VecDeque<(usize, u64)>,
    since_commit: u32,
    journal_interval: u32,
    wl_threshold: u32,
    erases_since_wl: u32,
    read_only: bool,
    /// The next GC superblock should be the most worn free one (it is about
    /// to receive cold data).
    want_worn: bool,
    st: FtlStats,
    scratch: Vec<u8>,
}

impl PageFtl {
    pub fn new(cfg: &DeviceConfig, m: &Media) -> Self {
        let sbt = SbTable::new(&cfg.geo, &m.nand);
        Self::with_table(cfg, m, sbt, vec![NONE; cfg.units() as usize], HashSet::new())
    }

    fn with_table(cfg: &DeviceConfig, m: &Media, sbt: SbTable, l2p: Vec<u32>, lost: HashSet<u32>) -> Self {
        let g = &cfg.geo;
        let upp = g.page_size / cfg.unit_bytes();
        let sps = g.sb_pages() * upp;
        let nsb = sbt.sbs();
        let slc_first = nsb - cfg.slc_sbs();
        let nand = &m.nand;
        let slc_idx: Vec<u32> = (0..g.sb_pages()).filter(|&i| nand.page_type(i / g.planes) == 0).collect();
        let mut f = PageFtl {
            planes: g.planes,
            sb_pages: g.sb_pages(),
            upp,
            unit: cfg.unit_bytes(),
            page_size: g.page_size,
            sps,
            p2l: vec![NONE; (nsb * sps) as usize],
            valid: vec![0; nsb as usize],
            state: vec![FREE; nsb as usize],
            free: Vec::new(),
            host: None,
            gc: None,
            slc: None,
            fold: None,
            slc_first,
            slc_idx,
            slc_free: Vec::new(),
            slc_closed: VecDeque::new(),
            fold_cur: None,
            bypass_units: (cfg.ftl.slc_bypass_bytes / cfg.unit_bytes() as u64) as u32,
            run_next: NONE,
            run_len: 0,
            urgent: Vec::new(),
            lost,
            journal: Vec::new(),
            commits: VecDeque::new(),
            since_commit: 0,
            journal_interval: cfg.ftl.journal_interval,
            wl_threshold: cfg.ftl.wear_level_threshold,
            erases_since_wl: 0,
            read_only: false,
            want_worn: false,
            st: FtlStats::default(),
            scratch: vec![0; g.page_size as usize],
            sbt,
            l2p,
        };
        f.rebuild(m);
        f
    }

    pub fn load(cfg: &DeviceConfig, m: &Media, r: &mut Reader) -> std::io::Result<Self> {
        let sbt = SbTable::load(r)?;
        let l2p = r.u32s()?;
        let lost: HashSet<u32> = r.u32s()?.into_iter().collect();
        let ro = r.u8()? != 0;
        if l2p.len() as u64 != cfg.units() || sbt.sbs() != cfg.geo.data_rows {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "mapping does not match the geometry"));
        }
        let mut f = Self::with_table(cfg, m, sbt, l2p, lost);
        f.read_only |= ro;
        Ok(f)
    }

    /// Derives everything else from the durable mapping and the array state.
    fn rebuild(&mut self, m: &Media) {
        self.p2l.iter_mut().for_each(|x| *x = NONE);
        self.valid.iter_mut().for_each(|x| *x = 0);
        for (lpn, &s) in self.l2p.iter().enumerate() {
            if s != NONE {
                self.p2l[s as usize] = lpn as u32;
                self.valid[(s / self.sps) as usize] += 1;
            }
        }
        self.free.clear();
        self.slc_free.clear();
        self.slc_closed.clear();
        self.fold_cur = None;
        self.urgent.clear();
        self.host = None;
        self.gc = None;
        self.slc = None;
        self.fold = None;
        for sb in 0..self.sbt.sbs() {
            let members: Vec<u32> = (0..self.planes).map(|p| self.sbt.member(sb, p)).collect();
            self.state[sb as usize] = if self.sbt.retired[sb as usize] {
                RETIRED
            } else if members.iter().all(|&b| m.nand.is_clean(b)) && self.valid[sb as usize] == 0 {
                if self.is_slc(sb) {
                    self.slc_free.push(sb);
                } else {
                    self.free.push(sb);
                }
                FREE
            } else {
                if self.is_slc(sb) {
                    self.slc_closed.push_back(sb);
                }
                CLOSED
            };
            if self.state[sb as usize] != RETIRED && members.iter().any(|&b| m.nand.is_bad(b)) {
                self.urgent.push(sb);
            }
        }
    }

    #[inline]
    fn is_slc(&self, sb: u32) -> bool {
        sb >= self.slc_first
    }

    fn slc_on(&self) -> bool {
        self.slc_first < self.sbt.sbs()
    }

    /// Pages a write point of this stream fills before its superblock closes.
    fn wp_pages(&self, stream: Stream) -> u32 {
        if stream == Stream::Slc {
            self.slc_idx.len() as u32
        } else {
            self.sb_pages
        }
    }

    /// A free buffer superblock for the SLC write point, folding the oldest
    /// full one first if there is none (the foreground fold).
    fn open_slc_sb(&mut self, m: &mut Media, t: u64) -> Result<u32, FtlError> {
        loop {
            if self.slc_free.is_empty() && !self.fold_once(m, t) {
                // Nothing left to fold: the buffer is unusable (bad blocks).
                self.read_only = true;
                return Err(FtlError::ReadOnly);
            }
            let Some(sb) = self.slc_free.pop() else { continue };
            if self.claim(m, sb) {
                return Ok(sb);
            }
        }
    }

    /// Folds buffer superblocks until one is free again (what the paced
    /// foreground fold in `write` left, a partly folded one first). False
    /// when there is nothing to fold.
    fn fold_once(&mut self, m: &mut Media, t: u64) -> bool {
        let free = self.slc_free.len();
        while self.slc_free.len() == free {
            if !self.fold_step(m, t) {
                return false;
            }
        }
        true
    }

    /// One step of folding the oldest full buffer superblock into the array:
    /// its valid units are read and appended to the fold write point until
    /// that programs an array page (so nothing is left buffered between
    /// steps, when host writes may change the mapping); the last step makes
    /// the mapping durable and erases the buffer superblock. A host request
    /// arriving meanwhile waits for one step, not for a whole superblock.
    /// False when there is nothing to fold.
    fn fold_step(&mut self, m: &mut Media, t: u64) -> bool {
        let (sb, mut k, wear) = match self.fold_cur.take() {
            // still the superblock the fold began on (not evacuated by GC
            // and reused since)
            Some((sb, k, w)) if self.state[sb as usize] == CLOSED && self.sb_wear(m, sb) == w => (sb, k, w),
            _ => loop {
                let Some(sb) = self.slc_closed.pop_front() else { return false };
                if self.state[sb as usize] == CLOSED {
                    break (sb, 0, self.sb_wear(m, sb));
                }
            },
        };
        let keeps = m.keeps_data();
        let unit = self.unit as usize;
        let mut buf = std::mem::take(&mut self.scratch);
        if buf.len() < self.page_size as usize {
            buf = vec![0; self.page_size as usize];
        }
        let mut loaded = u32::MAX;
        let mut tc = t;
        let base = sb * self.sps;
        while k < self.sps {
            let lpn = self.p2l[(base + k) as usize];
            if lpn == NONE {
                k += 1;
                continue;
            }
            let i = k / self.upp;
            let u = k % self.upp;
            if loaded != i {
                let block = self.sbt.member(sb, i % self.planes);
                let (out, e) = m.read(block, i / self.planes, 0, if keeps { Some(&mut buf[..]) } else { None }, t);
                tc = tc.max(e);
                if out == ReadOutcome::Uncorrectable {
                    for x in 0..self.upp {
                        let l = self.p2l[(base + i * self.upp + x) as usize];
                        if l != NONE {
                            self.lost.insert(l);
                        }
                    }
                }
                loaded = i;
            }
            let data = if keeps { Some(&buf[u as usize * unit..(u as usize + 1) * unit]) } else { None };
            if self.append(m, Stream::Fold, lpn, data, tc).is_err() {
                self.scratch = buf;
                return false;
            }
            k += 1;
            if self.fold.as_ref().map_or(true, |w| w.lpns.is_empty()) {
                // an array page was programmed: the step ends here
                self.scratch = buf;
                self.fold_cur = Some((sb, k, wear));
                return true;
            }
        }
        self.scratch = buf;
        let Ok(e) = self.pad(m, Stream::Fold, tc) else { return false };
        if self.valid[sb as usize] != 0 {
            // units of it were still buffered elsewhere; go round again
            self.fold_cur = Some((sb, 0, wear));
            return true;
        }
        let d = self.commit(m, e.max(tc));
        self.release(m, sb, d);
        self.st.folds += 1;
        true
    }

    #[inline]
    fn slot(&self, sb: u32, i: u32, u: u32) -> u32 {
        sb * self.sps + i * self.upp + u
    }

    /// Slot -> (block, page, unit within page).
    #[inline]
    fn decode(&self, s: u32) -> (u32, u32, u32) {
        let sb = s / self.sps;
        let r = s % self.sps;
        let i = r / self.upp;
        (self.sbt.member(sb, i % self.planes), i / self.planes, r % self.upp)
    }

    fn sb_wear(&self, m: &Media, sb: u32) -> u32 {
        m.nand.blocks[self.sbt.member(sb, 0) as usize].erase_count
    }

    fn map(&mut self, lpn: u32, s: u32) {
        let old = self.l2p[lpn as usize];
        if old != NONE {
            self.p2l[old as usize] = NONE;
            self.valid[(old / self.sps) as usize] -= 1;
        }
        self.l2p[lpn as usize] = s;
        self.p2l[s as usize] = lpn;
        self.valid[(s / self.sps) as usize] += 1;
        self.journal.push((lpn, old));
        self.since_commit += 1;
        if !self.lost.is_empty() {
            self.lost.remove(&lpn);
        }
    }

    fn commit(&mut self, m: &mut Media, t: u64) -> u64 {
        let d = m.journal_commit(t);
        self.commits.push_back((self.journal.len(), d));
        self.since_commit = 0;
        self.st.journal_commits += 1;
        d
    }

    /// Takes the least-worn free superblock (dynamic wear levelling). Host
    /// allocations first let GC refill the free pool.
    fn open_sb(&mut self, m: &mut Media, stream: Stream, t: u64) -> Result<u32, FtlError> {
        if stream == Stream::Slc {
            return self.open_slc_sb(m, t);
        }
        if stream == Stream::Host || stream == Stream::Fold {
            while self.free.len() < GC_LOW {
                if !self.gc_once(m, t) {
                    break;
                }
            }
        }
        let worn = stream == Stream::Gc && std::mem::take(&mut self.want_worn);
        loop {
            let best = if worn {
                (0..self.free.len()).max_by_key(|&i| self.sb_wear(m, self.free[i]))
            } else {
                (0..self.free.len()).min_by_key(|&i| self.sb_wear(m, self.free[i]))
            };
            let Some(idx) = best else {
                self.read_only = true;
                return Err(FtlError::ReadOnly);
            };
            let sb = self.free.swap_remove(idx);
            if self.claim(m, sb) {
                return Ok(sb);
            }
        }
    }

    /// Opens a superblock taken from a free pool, replacing members declared bad while it
    /// was free; one it cannot make whole is retired (false: take another).
    fn claim(&mut self, m: &Media, sb: u32) -> bool {
        let mut ok = true;
        for p in 0..self.planes {
            if m.nand.is_bad(self.sbt.member(sb, p)) && !self.sbt.replace(sb, p) {
                ok = false;
            }
        }
        if !ok {
            self.retire(sb);
            return false;
        }
        self.state[sb as usize] = OPEN;
        true
    }

    fn retire(&mut self, sb: u32) {
        self.sbt.retired[sb as usize] = true;
        self.state[sb as usize] = RETIRED;
        // Spares are gone: behave like eMMC/SD parts at end of life.
        self.read_only = true;
    }

    fn wp_mut(&mut self, stream: Stream) -> &mut Option<Wp> {
        match stream {
            Stream::Host => &mut self.host,
            Stream::Gc => &mut self.gc,
            Stream::Slc => &mut self.slc,
            Stream::Fold => &mut self.fold,
        }
    }

    /// Appends a unit to a stream's open page; programs the page when full.
    fn append(&mut self, m: &mut Media, stream: Stream, lpn: u32, data: Option<&[u8]>, t: u64) -> Result<(u64, u64), FtlError> {
        if self.wp_mut(stream).is_none() {
            let sb = self.open_sb(m, stream, t)?;
            let cap = if m.keeps_data() { self.page_size as usize } else { 0 };
            *self.wp_mut(stream) = Some(Wp { sb, next: 0, lpns: Vec::with_capacity(self.upp as usize), data: Vec::with_capacity(cap) });
        }
        let keeps = m.keeps_data();
        let unit = self.unit as usize;
        let wp = self.wp_mut(stream).as_mut().unwrap();
        wp.lpns.push(lpn);
        if keeps {
            match data {
                Some(d) => wp.data.extend_from_slice(&d[..unit]),
                None => wp.data.resize(wp.data.len() + unit, 0),
            }
        }
        if wp.lpns.len() as u32 == self.upp {
            self.program_wp(m, stream, t)
        } else {
            Ok((t, t))
        }
    }

    /// Programs the stream's buffered page (padding a partial one), retrying
    /// on a fresh superblock if the program fails.
    fn program_wp(&mut self, m: &mut Media, stream: Stream, t: u64) -> Result<(u64, u64), FtlError> {
        loop {
            if self.wp_mut(stream).is_none() {
                // The previous superblock failed; move the buffer to a new one.
                return Err(FtlError::ReadOnly);
            }
            let mut wp = self.wp_mut(stream).take().unwrap();
            if m.keeps_data() {
                wp.data.resize(self.page_size as usize, 0);
            }
            let slc = stream == Stream::Slc;
            let i = if slc { self.slc_idx[wp.next as usize] } else { wp.next };
            let block = self.sbt.member(wp.sb, i % self.planes);
            let page = i / self.planes;
            let data = if m.keeps_data() { Some(&wp.data[..]) } else { None };
            let (r, s, e) = m.program_mode(block, page, data, t, slc);
            match r {
                Ok(()) => {
                    for u in 0..wp.lpns.len() as u32 {
                        let lpn = wp.lpns[u as usize];
                        if lpn != NONE {
                            let sl = self.slot(wp.sb, i, u);
                            self.map(lpn, sl);
                            if m.trace.is_some() {
                                let ppn = m.nand.ppn(block, page);
                                let host = matches!(stream, Stream::Host | Stream::Slc);
                                m.trace.as_deref_mut().unwrap().map(lpn, ppn, host);
                            }
                        }
                    }
                    match stream {
                        Stream::Host => self.st.host_programs += 1,
                        Stream::Slc => {
                            self.st.host_programs += 1;
                            self.st.slc_programs += 1;
                        }
                        Stream::Gc => self.st.gc_programs += 1,
                        Stream::Fold => self.st.fold_programs += 1,
                    }
                    wp.lpns.clear();
                    wp.data.clear();
                    wp.next += 1;
                    if wp.next == self.wp_pages(stream) {
                        self.state[wp.sb as usize] = CLOSED;
                        if slc {
                            self.slc_closed.push_back(wp.sb);
                        }
                    } else {
                        *self.wp_mut(stream) = Some(wp);
                    }
                    return Ok((s, e));
                }
                Err(_) => {
                    // Grown bad block: close this superblock, evacuate it at
                    // the next GC, and program the same data elsewhere.
                    m.nand.mark_bad(block);
                    self.state[wp.sb as usize] = CLOSED;
                    self.urgent.push(wp.sb);
                    let sb = self.open_sb(m, stream, t)?;
                    wp.sb = sb;
                    wp.next = 0;
                    *self.wp_mut(stream) = Some(wp);
                }
            }
        }
    }

    fn pad(&mut self, m: &mut Media, stream: Stream, t: u64) -> Result<u64, FtlError> {
        let pending = self.wp_mut(stream).as_ref().map_or(false, |w| !w.lpns.is_empty());
        if pending {
            while self.wp_mut(stream).as_ref().unwrap().lpns.len() < self.upp as usize {
                let keeps = m.keeps_data();
                let unit = self.unit as usize;
                let wp = self.wp_mut(stream).as_mut().unwrap();
                wp.lpns.push(NONE);
                if keeps {
                    wp.data.resize(wp.data.len() + unit, 0);
                }
            }
            return self.program_wp(m, stream, t).map(|(_, e)| e);
        }
        Ok(t)
    }

    fn pick_victim(&mut self, m: &Media) -> Option<u32> {
        while let Some(sb) = self.urgent.pop() {
            if self.state[sb as usize] == CLOSED {
                return Some(sb);
            }
        }
        if self.erases_since_wl >= WL_CHECK {
            self.erases_since_wl = 0;
            // the SLC buffer's blocks cycle by design (and wear less in SLC
            // mode): static levelling is for the array
            let live = (0..self.slc_first).filter(|&s| self.state[s as usize] != RETIRED);
            let (mut lo, mut hi) = (u32::MAX, 0);
            for sb in live {
                let w = self.sb_wear(m, sb);
                lo = lo.min(w);
                hi = hi.max(w);
            }
            if hi.saturating_sub(lo) > self.wl_threshold {
                // Static wear levelling: the coldest closed superblock holds
                // data that never changes; moving it lets that block age too.
                let cold = (0..self.slc_first)
                    .filter(|&s| self.state[s as usize] == CLOSED)
                    .min_by_key(|&s| self.sb_wear(m, s));
                if let Some(c) = cold {
                    if self.sb_wear(m, c) + self.wl_threshold / 2 < hi {
                        self.st.wear_level_moves += 1;
                        self.want_worn = true;
                        return Some(c);
                    }
                }
            }
        }
        let mut best = None;
        let mut best_valid = self.sps;
        for sb in 0..self.slc_first {
            if self.state[sb as usize] == CLOSED && self.valid[sb as usize] < best_valid {
                best_valid = self.valid[sb as usize];
                best = Some(sb);
                if best_valid == 0 {
                    break;
                }
            }
        }
        best
    }

    /// One garbage collection: relocate the victim's valid units through the
    /// GC write point, make the mapping durable, erase.
    fn gc_once(&mut self, m: &mut Media, t: u64) -> bool {
        let Some(victim) = self.pick_victim(m) else { return false };
        let mut tc = t;
        if self.want_worn {
            // Park the cold data in a worn superblock: close the current GC
            // write point so the next one is chosen for wear.
            match self.pad(m, Stream::Gc, t) {
                Ok(e) => tc = e,
                Err(_) => return false,
            }
            if let Some(w) = self.gc.take() {
                self.state[w.sb as usize] = CLOSED;
            }
        }
        match self.evacuate(m, victim, Stream::Gc, tc) {
            Some(end) => {
                self.st.gc_runs += 1;
                self.st.gc_time_ns += end.saturating_sub(t);
                true
            }
            None => false,
        }
    }

    /// Moves a closed superblock's valid units through `stream`'s write
    /// point, makes the mapping durable, erases the superblock and returns it
    /// to its free pool. Returns when the erase ends.
    fn evacuate(&mut self, m: &mut Media, victim: u32, stream: Stream, t: u64) -> Option<u64> {
        let mut tc = t;
        let unit = self.unit as usize;
        let keeps = m.keeps_data();
        for i in 0..self.sb_pages {
            let base = self.slot(victim, i, 0);
            if (0..self.upp).all(|u| self.p2l[(base + u) as usize] == NONE) {
                continue;
            }
            let block = self.sbt.member(victim, i % self.planes);
            let page = i / self.planes;
            let mut buf = std::mem::take(&mut self.scratch);
            if buf.len() < self.page_size as usize {
                // a GC nested in a fold (its write point needed a free
                // superblock) holds the scratch page
                buf = vec![0; self.page_size as usize];
            }
            let (out, e) = m.read(block, page, 0, if keeps { Some(&mut buf[..]) } else { None }, t);
            tc = tc.max(e);
            for u in 0..self.upp {
                let lpn = self.p2l[(base + u) as usize];
                if lpn == NONE {
                    continue;
                }
                let data = if keeps { Some(&buf[u as usize * unit..(u as usize + 1) * unit]) } else { None };
                match self.append(m, stream, lpn, data, e) {
                    Ok((_, pe)) => tc = tc.max(pe),
                    Err(_) => {
                        self.scratch = buf;
                        return None;
                    }
                }
                if out == ReadOutcome::Uncorrectable {
                    self.lost.insert(lpn);
                }
            }
            self.scratch = buf;
        }
        match self.pad(m, stream, tc) {
            Ok(e) => tc = tc.max(e),
            Err(_) => return None,
        }
        // Units still buffered were moved into the stream's page and are
        // mapped now; the victim must be empty before it is erased.
        debug_assert_eq!(self.valid[victim as usize], 0, "victim still holds data");
        let d = self.commit(m, tc);
        Some(self.release(m, victim, d))
    }

    /// Erases an emptied superblock once the mapping is durable (at `d`)
    /// and returns it to its free pool (or retires it). Returns when the
    /// erase ends.
    fn release(&mut self, m: &mut Media, victim: u32, d: u64) -> u64 {
        let (end, retired) = erase_superblock(m, &mut self.sbt, victim, self.planes, d);
        self.erases_since_wl += 1;
        if retired {
            self.retire(victim);
        } else {
            self.state[victim as usize] = FREE;
            if self.is_slc(victim) {
                self.slc_free.push(victim);
            } else {
                self.free.push(victim);
            }
        }
        end
    }

    /// Where a host unit goes: the array without a buffer; with one, the
    /// buffer, unless it continues a sequential run past `bypass_units`.
    /// Returns the other host path too when an older copy of the unit still
    /// waits in that path's page: the caller programs that page first, so
    /// the two copies reach the array (and the mapping) in the order written.
    fn host_stream(&mut self, lpn: u32) -> (Stream, Option<Stream>) {
        if !self.slc_on() {
            return (Stream::Host, None);
        }
        self.run_len = if lpn == self.run_next { self.run_len.saturating_add(1) } else { 1 };
        self.run_next = lpn.wrapping_add(1);
        let (stream, other) = if self.bypass_units > 0 && self.run_len > self.bypass_units {
            (Stream::Host, Stream::Slc)
        } else {
            (Stream::Slc, Stream::Host)
        };
        let waiting = self.wp_mut(other).as_ref().map_or(false, |w| w.lpns.contains(&lpn));
        (stream, waiting.then_some(other))
    }

    fn find_buffered(&self, lpn: u32) -> Option<(Stream, usize)> {
        for (stream, wp) in [(Stream::Host, &self.host), (Stream::Gc, &self.gc), (Stream::Slc, &self.slc), (Stream::Fold, &self.fold)] {
            if let Some(w) = wp {
                if let Some(i) = w.lpns.iter().rposition(|&l| l == lpn) {
                    return Some((stream, i));
                }
            }
        }
        None
    }
}

impl Ftl for PageFtl {
    fn read(&mut self, m: &mut Media, lpn: u32, t: u64, buf: Option<&mut [u8]>) -> (ReadRes, u64) {
        if let Some((stream, i)) = self.find_buffered(lpn) {
            if let Some(b) = buf {
                let unit = self.unit as usize;
                let w = match stream {
                    Stream::Host => self.host.as_ref(),
                    Stream::Gc => self.gc.as_ref(),
                    Stream::Slc => self.slc.as_ref(),
                    Stream::Fold => self.fold.as_ref(),
                }
                .unwrap();
                if w.data.len() >= (i + 1) * unit {
                    b.copy_from_slice(&w.data[i * unit..(i + 1) * unit]);
                } else {
                    b.fill(0);
                }
            }
            return (ReadRes::Data, t);
        }
        if !self.lost.is_empty() && self.lost.contains(&lpn) {
            return (ReadRes::Uncorrectable, t);
        }
        let s = self.l2p[lpn as usize];
        if s == NONE {
            return (ReadRes::Zero, t);
        }
        let (block, page, u) = self.decode(s);
        let (out, e) = m.read_buffered(block, page, u * self.unit, buf, t);
        match out {
            ReadOutcome::Ok(_) => (ReadRes::Data, e),
            ReadOutcome::Erased | ReadOutcome::Uncorrectable => (ReadRes::Uncorrectable, e),
        }
    }

    fn write(&mut self, m: &mut Media, lpn: u32, data: Option<&[u8]>, t: u64) -> Result<(u64, u64), FtlError> {
        if self.read_only {
            return Err(FtlError::ReadOnly);
        }
        let (stream, older) = self.host_stream(lpn);
        if let Some(other) = older {
            self.pad(m, other, t)?;
        }
        if stream == Stream::Slc
            && self.slc_free.is_empty()
            && self.slc.as_ref().map_or(false, |w| w.lpns.len() as u32 + 1 == self.upp)
        {
            // The buffer's last superblock is filling: fold a step per page
            // the host fills, so the oldest one is free about when this one
            // is full (the controller paces its foreground fold; the host
            // sees the sustained rate evenly, not a whole fold's stall every
            // superblock).
            self.fold_step(m, t);
        }
        let r = self.append(m, stream, lpn, data, t)?;
        if self.since_commit >= self.journal_interval {
            self.commit(m, r.1);
        }
        Ok(r)
    }

    fn trim(&mut self, _m: &mut Media, lpn: u32, _t: u64) -> Result<(), FtlError> {
        if self.read_only {
            return Err(FtlError::ReadOnly);
        }
        while let Some((stream, i)) = self.find_buffered(lpn) {
            self.wp_mut(stream).as_mut().unwrap().lpns[i] = NONE;
        }
        self.lost.remove(&lpn);
        let old = self.l2p[lpn as usize];
        if old != NONE {
            self.p2l[old as usize] = NONE;
            self.valid[(old / self.sps) as usize] -= 1;
            self.l2p[lpn as usize] = NONE;
            self.journal.push((lpn, old));
            self.since_commit += 1;
        }
        Ok(())
    }

    fn flush(&mut self, m: &mut Media, t: u64) -> u64 {
        let mut e = t;
        if let Ok(x) = self.pad(m, Stream::Host, t) {
            e = e.max(x);
        }
        if let Ok(x) = self.pad(m, Stream::Gc, t) {
            e = e.max(x);
        }
        if self.slc_on() {
            for stream in [Stream::Slc, Stream::Fold] {
                if let Ok(x) = self.pad(m, stream, t) {
                    e = e.max(x);
                }
            }
        }
        if self.since_commit == 0 && self.commits.is_empty() {
            return e.max(m.tl.drained());
        }
        self.commit(m, e)
    }

    fn prune(&mut self, now: u64) {
        while let Some(&(len, d)) = self.commits.front() {
            if d > now {
                break;
            }
            self.commits.pop_front();
            self.journal.drain(..len);
            for c in self.commits.iter_mut() {
                c.0 -= len;
            }
        }
    }

    fn power_cut(&mut self, m: &mut Media, t_eff: u64) {
        let keep = self.commits.iter().filter(|c| c.1 <= t_eff).map(|c| c.0).last().unwrap_or(0);
        for &(lpn, old) in self.journal[keep..].iter().rev() {
            self.l2p[lpn as usize] = old;
        }
        self.journal.clear();
        self.commits.clear();
        self.since_commit = 0;
        self.rebuild(m);
    }

    fn block_failed(&mut self, m: &mut Media, block: u32) {
        m.nand.mark_bad(block);
        if let Some(i) = self.sbt.members.iter().position(|&b| b == block) {
            let sb = i as u32 / self.planes;
            for wp in [&mut self.host, &mut self.gc, &mut self.slc, &mut self.fold] {
                if wp.as_ref().map_or(false, |w| w.sb == sb) {
                    // Buffered units stay; they go to a new superblock.
                    let w = wp.as_mut().unwrap();
                    if w.lpns.is_empty() {
                        *wp = None;
                    } else {
                        w.next = u32::MAX; // forces a move on the next program
                    }
                }
            }
            if self.state[sb as usize] == OPEN || self.state[sb as usize] == CLOSED {
                self.state[sb as usize] = CLOSED;
                self.urgent.push(sb);
            }
            let _ = m;
        } else {
            for s in self.sbt.spares.iter_mut() {
                s.retain(|&b| b != block);
            }
        }
        // Superblocks whose write point was forced past the end reopen.
        for stream in [Stream::Host, Stream::Gc, Stream::Slc, Stream::Fold] {
            let full = self.wp_mut(stream).as_ref().map_or(false, |w| w.next == u32::MAX);
            if full {
                let mut w = self.wp_mut(stream).take().unwrap();
                match self.open_sb(m, stream, 0) {
                    Ok(sb) => {
                        w.sb = sb;
                        w.next = 0;
                        *self.wp_mut(stream) = Some(w);
                    }
                    Err(_) => {}
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
        let s = *self.l2p.get(lpn as usize)?;
        if s == NONE {
            return None;
        }
        let (b, p, _) = self.decode(s);
        Some((b, p))
    }

    fn save(&self, w: &mut Writer) {
        self.sbt.save(w);
        w.u32s(&self.l2p);
        let mut lost: Vec<u32> = self.lost.iter().copied().collect();
        lost.sort();
        w.u32s(&lost);
        w.u8(self.read_only as u8);
    }

    fn check(&self, m: &Media) -> Result<(), String> {
        let mut valid = vec![0u32; self.valid.len()];
        for (lpn, &s) in self.l2p.iter().enumerate() {
            if s == NONE {
                continue;
            }
            if self.p2l[s as usize] != lpn as u32 {
                return Err(format!("lpn {lpn} -> slot {s} but slot -> {}", self.p2l[s as usize]));
            }
            let (b, p, _) = self.decode(s);
            if m.nand.pages[m.nand.ppn(b, p) as usize] == PAGE_ERASED {
                return Err(format!("lpn {lpn} maps to erased page {b}/{p}"));
            }
            valid[(s / self.sps) as usize] += 1;
        }
        for (s, &l) in self.p2l.iter().enumerate() {
            if l != NONE && self.l2p[l as usize] != s as u32 {
                return Err(format!("slot {s} claims lpn {l} which maps elsewhere"));
            }
        }
        if valid != self.valid {
            return Err("valid counts disagree with the mapping".into());
        }
        for &sb in self.free.iter().chain(self.slc_free.iter()) {
            if self.valid[sb as usize] != 0 || self.state[sb as usize] != FREE {
                return Err(format!("free superblock {sb} is not empty"));
            }
            for p in 0..self.planes {
                if !m.nand.is_clean(self.sbt.member(sb, p)) {
                    return Err(format!("free superblock {sb} is not erased"));
                }
            }
        }
        Ok(())
    }

    fn idle(&mut self, m: &mut Media, from: u64, until: u64) -> u64 {
        // Fold a step at a time while the device stays idle: a step under
        // way when the host's next request arrives delays it (NAND
        // operations are not interrupted).
        let mut t = from;
        while t < until && self.fold_step(m, t) {
            t = t.max(m.tl.drained());
        }
        t
    }

    fn effective_op(&self) -> Option<f64> {
        let usable = self.state[..self.slc_first as usize].iter().filter(|&&s| s != RETIRED).count() as f64 - GC_LOW as f64 - 1.0;
        Some(usable * self.sps as f64 / self.l2p.len() as f64 - 1.0)
    }
}
