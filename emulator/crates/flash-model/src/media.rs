//! The NAND array as the FTL sees it: every page read/program and block erase
//! is applied to the array model, stored, scheduled on the timeline, counted,
//! and logged so a power cut can tell which operations were still in flight.

use crate::nand::{Nand, NandError, ReadOutcome};
use crate::store::Store;
use crate::timing::Timeline;

#[derive(Debug, Clone, Default)]
pub struct NandStats {
    pub page_reads: u64,
    pub page_programs: u64,
    /// Mapping-journal pages written (the FTL's own metadata).
    pub meta_programs: u64,
    pub erases: u64,
    pub corrected_bits: u64,
    pub uncorrectable_reads: u64,
    pub program_failures: u64,
    pub erase_failures: u64,
}

#[derive(Clone, Copy)]
struct OpRec {
    start: u64,
    end: u64,
    block: u32,
    /// `ERASE_OP` for an erase.
    page: u32,
}

const ERASE_OP: u32 = u32::MAX;

pub struct Media {
    pub nand: Nand,
    pub store: Box<dyn Store>,
    pub tl: Timeline,
    pub st: NandStats,
    log: Vec<OpRec>,
    last_erase_start: u64,
    meta_plane: usize,
    /// Bumped by every program/erase: lets FTLs reuse a page just read.
    pub epoch: u64,
    /// The page the controller last read into its buffer: (block, page,
    /// epoch, when the data was there). See `read_buffered`.
    page_buffer: Option<(u32, u32, u64, u64)>,
    /// First host-file I/O error of the backing store, reported as EIO.
    pub io_error: Option<String>,
    page_size: u64,
    /// The write log, while one is on (see `crashlog`).
    pub trace: Option<Box<crate::crashlog::Recorder>>,
}

impl Media {
    pub fn new(nand: Nand, store: Box<dyn Store>, tl: Timeline) -> Self {
        let page_size = nand.geo.page_size as u64;
        Media {
            nand,
            store,
            tl,
            st: NandStats::default(),
            log: Vec::new(),
            last_erase_start: 0,
            meta_plane: 0,
            epoch: 0,
            page_buffer: None,
            io_error: None,
            page_size,
            trace: None,
        }
    }

    pub fn keeps_data(&self) -> bool {
        self.store.keeps_data()
    }

    fn io(&mut self, r: std::io::Result<()>) {
        if let Err(e) = r {
            if self.io_error.is_none() {
                self.io_error = Some(format!("backing store: {e}"));
            }
        }
    }

    /// Programs one page. Returns the outcome and the (start, end) times.
    pub fn program(&mut self, block: u32, page: u32, data: Option<&[u8]>, t: u64) -> (Result<(), NandError>, u64, u64) {
        self.program_mode(block, page, data, t, false)
    }

    /// Programs one page, in SLC mode if `slc` (a lower page of a block kept
    /// in SLC mode: one bit per cell, `slc_program_ns`, no upper page shares
    /// its wordline).
    pub fn program_mode(&mut self, block: u32, page: u32, data: Option<&[u8]>, t: u64, slc: bool) -> (Result<(), NandError>, u64, u64) {
        let plane = self.nand.plane_of(block);
        let prog_ns = if slc { self.tl.t.slc_program_ns } else { self.tl.t.program_ns[self.nand.page_type(page)] };
        let (s, e) = self.tl.program(plane, t, self.page_size, prog_ns);
        let r = self.nand.program(block, page);
        self.st.page_programs += 1;
        self.epoch += 1;
        if r.is_err() {
            self.st.program_failures += 1;
        } else if let Some(d) = data {
            let ppn = self.nand.ppn(block, page);
            let res = self.store.write_page(ppn, d);
            self.io(res);
        }
        self.log.push(OpRec { start: s, end: e, block, page });
        if let Some(tr) = self.trace.as_deref_mut() {
            tr.program(block, page, s, e);
        }
        (r, s, e)
    }

    /// Reads `buf.len()` bytes at `offset` within a page (ECC applies to the
    /// whole page). Returns the outcome and the completion time.
    pub fn read(&mut self, block: u32, page: u32, offset: u32, buf: Option<&mut [u8]>, t: u64) -> (ReadOutcome, u64) {
        let plane = self.nand.plane_of(block);
        let (_, e) = self.tl.read(plane, t, self.page_size);
        self.st.page_reads += 1;
        let out = self.nand.read(block, page);
        match out {
            ReadOutcome::Ok(bits) => {
                self.st.corrected_bits += bits as u64;
                if let Some(b) = buf {
                    let ppn = self.nand.ppn(block, page);
                    let res = self.read_at(ppn, offset, b);
                    self.io(res);
                }
            }
            ReadOutcome::Uncorrectable => self.st.uncorrectable_reads += 1,
            ReadOutcome::Erased => {
                if let Some(b) = buf {
                    b.fill(0xFF)
                }
            }
        }
        (out, e)
    }

    fn read_at(&mut self, ppn: u64, offset: u32, buf: &mut [u8]) -> std::io::Result<()> {
        if offset == 0 && buf.len() as u64 == self.page_size {
            return self.store.read_page(ppn, buf);
        }
        let mut page = vec![0u8; self.page_size as usize];
        self.store.read_page(ppn, &mut page)?;
        buf.copy_from_slice(&page[offset as usize..offset as usize + buf.len()]);
        Ok(())
    }

    pub fn erase(&mut self, block: u32, t: u64) -> (Result<(), NandError>, u64) {
        let plane = self.nand.plane_of(block);
        let (s, e) = self.tl.erase(plane, t);
        let r = self.nand.erase(block);
        self.st.erases += 1;
        self.epoch += 1;
        if r.is_err() {
            self.st.erase_failures += 1;
        }
        let ppb = self.nand.geo.pages_per_block as u64;
        let res = self.store.erase_block(block as u64 * ppb, ppb);
        self.io(res);
        self.last_erase_start = self.last_erase_start.max(s);
        self.log.push(OpRec { start: s, end: e, block, page: ERASE_OP });
        if let Some(tr) = self.trace.as_deref_mut() {
            tr.erase(block, s);
        }
        (r, e)
    }

    /// Writes one mapping-journal page once everything issued so far is on
    /// the array; returns when it is durable. The journal area is kept in
    /// SLC mode and outside the modelled blocks (its wear is not tracked).
    pub fn journal_commit(&mut self, t: u64) -> u64 {
        let start = t.max(self.tl.drained());
        let plane = self.meta_plane;
        self.meta_plane = (self.meta_plane + 1) % self.nand.geo.planes as usize;
        let (_, e) = self.tl.program(plane, start, self.page_size, self.tl.t.program_ns[0]);
        self.st.meta_programs += 1;
        if let Some(tr) = self.trace.as_deref_mut() {
            tr.commit(e);
        }
        e
    }

    /// Forgets operations that finished by `now`: a power cut cannot come
    /// earlier than the present.
    pub fn prune_log(&mut self, now: u64) {
        if self.log.len() > 4096 {
            self.log.retain(|o| o.end > now);
        }
    }

    /// Applies a power cut at time `t` to the array and returns the effective
    /// cut time. Operations are applied eagerly by the model, but a real
    /// controller starts an erase only after the mapping that frees the block
    /// is durable; so the cut is taken no earlier than the last erase issued.
    /// Programs not started by then never happened; programs under way are
    /// torn (and, without paired-page protection, corrupt the lower pages
    /// sharing their wordline); erases under way leave the block undefined.
    pub fn power_cut(&mut self, t: u64) -> u64 {
        let t_eff = t.max(self.last_erase_start);
        let log = std::mem::take(&mut self.log);
        for o in &log {
            if o.page == ERASE_OP {
                if o.end > t_eff {
                    self.nand.set_needs_erase(o.block);
                }
            } else if o.start > t_eff {
                self.nand.void_page(o.block, o.page);
            } else if o.end > t_eff {
                self.nand.damage(o.block, o.page);
                if !self.nand.rel.protect_paired_pages {
                    for p in self.nand.paired_pages(o.page) {
                        self.nand.damage(o.block, p);
                    }
                }
            }
        }
        t_eff
    }

    pub fn reset_after_restart(&mut self, t: u64) {
        self.log.clear();
        self.page_buffer = None;
        self.last_erase_start = 0;
        self.tl.reset(t);
    }
}

impl Media {
    /// A host read of part of a page, through the controller's page buffer:
    /// the last page read stays in the controller's buffer until the array
    /// changes, so reading more of it costs no new tR nor NAND-bus transfer
    /// (a 4 KiB read of a 16 KiB page brings in the whole page; the next 4 KiB
    /// of it are already there). Only correctable reads are kept.
    pub fn read_buffered(&mut self, block: u32, page: u32, offset: u32, buf: Option<&mut [u8]>, t: u64) -> (ReadOutcome, u64) {
        if let Some((b, p, epoch, end)) = self.page_buffer {
            if b == block && p == page && epoch == self.epoch {
                if let Some(buf) = buf {
                    let ppn = self.nand.ppn(block, page);
                    let res = self.read_at(ppn, offset, buf);
                    self.io(res);
                }
                return (ReadOutcome::Ok(0), t.max(end));
            }
        }
        let (out, end) = self.read(block, page, offset, buf, t);
        self.page_buffer = match out {
            ReadOutcome::Ok(_) => Some((block, page, self.epoch, end)),
            _ => None,
        };
        (out, end)
    }
}
