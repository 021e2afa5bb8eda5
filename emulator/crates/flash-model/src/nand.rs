//! The NAND array: per-block wear and state, per-page state, reliability
//! (bit errors growing with wear, program/erase failures, bad blocks) and
//! the cell-type specifics (page types, paired pages).
//!
//! Data bytes live in a [`crate::store::Store`]; this module only decides
//! what the array would do.

use std::collections::HashMap;

use crate::config::{CellType, Geometry, Reliability};
use crate::rng::{prob_threshold, Rng};

pub const PAGE_ERASED: u8 = 0;
pub const PAGE_PROGRAMMED: u8 = 1;
/// Torn by a power cut, damaged through a paired page, or failed to program:
/// reads are uncorrectable.
pub const PAGE_DAMAGED: u8 = 2;

pub const BLOCK_FACTORY_BAD: u8 = 1;
pub const BLOCK_GROWN_BAD: u8 = 2;
/// An erase was interrupted: contents undefined until erased again.
pub const BLOCK_NEEDS_ERASE: u8 = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NandError {
    ProgramFail,
    EraseFail,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadOutcome {
    Erased,
    /// Correctable; the number of bit errors ECC fixed.
    Ok(u32),
    Uncorrectable,
}

#[derive(Debug, Clone, Default)]
pub struct BlockInfo {
    pub erase_count: u32,
    /// Next page that may be programmed (NAND programs pages in order).
    pub write_ptr: u32,
    pub flags: u8,
    // Failure and error thresholds depend only on the erase count, so they
    // are computed once per erase rather than per operation.
    prog_fail_thr: u64,
    erase_fail_thr: u64,
    uncorr_thr: u64,
    /// Mean raw bit errors per page read at this wear.
    mean_bit_errors: f64,
}

impl BlockInfo {
    pub fn is_bad(&self) -> bool {
        self.flags & (BLOCK_FACTORY_BAD | BLOCK_GROWN_BAD) != 0
    }
}

pub struct Nand {
    pub geo: Geometry,
    pub rel: Reliability,
    pub blocks: Vec<BlockInfo>,
    pub pages: Vec<u8>,
    /// Injected bit errors per physical page (cleared by erase).
    pub injected: HashMap<u64, u32>,
    pub rng: Rng,
}

/// P(X > t) for X ~ Poisson(lambda), summed from the tail so tiny
/// probabilities keep their precision.
fn poisson_tail(lambda: f64, t: u32) -> f64 {
    if lambda <= 0.0 {
        return 0.0;
    }
    let k0 = t as f64 + 1.0;
    let ln_fact: f64 = (1..=t + 1).map(|i| (i as f64).ln()).sum();
    let mut term = (-lambda + k0 * lambda.ln() - ln_fact).exp();
    let mut sum = 0.0;
    let mut k = k0;
    for _ in 0..200 {
        sum += term;
        k += 1.0;
        term *= lambda / k;
        if term < sum * 1e-12 {
            break;
        }
    }
    sum.min(1.0)
}

impl Nand {
    /// A fresh array; factory bad blocks are drawn from `seed`. Block 0 of each
    /// plane is guaranteed good, as ONFI guarantees for block 0.
    pub fn new(geo: Geometry, rel: Reliability, seed: u64) -> Self {
        let nblocks = geo.blocks() as usize;
        let mut factory = Rng::new(seed ^ 0xFAC7_0121);
        let bad_thr = prob_threshold(rel.factory_bad_ratio);
        let mut blocks = vec![BlockInfo::default(); nblocks];
        for (b, info) in blocks.iter_mut().enumerate() {
            if b >= geo.planes as usize && factory.hit(bad_thr) {
                info.flags |= BLOCK_FACTORY_BAD;
            }
        }
        let mut n = Nand {
            pages: vec![PAGE_ERASED; geo.pages() as usize],
            geo,
            rel,
            blocks,
            injected: HashMap::new(),
            rng: Rng::new(seed),
        };
        for b in 0..nblocks {
            n.refresh(b as u32);
        }
        n
    }

    /// Wear-dependent raw bit error rate: grows from `rber_fresh` to `rber_eol`
    /// at the rated endurance, quadratically (published characterisations of
    /// MLC/TLC show a super-linear rise), and keeps rising beyond it.
    pub fn rber(&self, erase_count: u32) -> f64 {
        let x = erase_count as f64 / self.rel.endurance as f64;
        self.rel.rber_fresh + (self.rel.rber_eol - self.rel.rber_fresh) * x * x
    }

    /// Program/erase failure probability: negligible on young blocks, rising
    /// steeply towards the end of life (reaches the `_eol` value at the rated
    /// endurance, e^-4 of it at half of it).
    fn wear_fail(&self, eol: f64, erase_count: u32) -> f64 {
        let x = erase_count as f64 / self.rel.endurance as f64;
        (eol * (8.0 * (x - 1.0)).exp()).min(1.0)
    }

    fn refresh(&mut self, b: u32) {
        let ec = self.blocks[b as usize].erase_count;
        let rber = self.rber(ec);
        let cw_bits = self.rel.ecc_codeword as f64 * 8.0;
        let ncw = (self.geo.page_size / self.rel.ecc_codeword) as f64;
        let p_cw = poisson_tail(rber * cw_bits, self.rel.ecc_bits);
        let p_page = 1.0 - (1.0 - p_cw).powf(ncw);
        let pf = self.wear_fail(self.rel.program_fail_eol, ec);
        let ef = self.wear_fail(self.rel.erase_fail_eol, ec);
        let info = &mut self.blocks[b as usize];
        info.mean_bit_errors = rber * cw_bits * ncw;
        info.uncorr_thr = prob_threshold(p_page);
        info.prog_fail_thr = prob_threshold(pf);
        info.erase_fail_thr = prob_threshold(ef);
    }

    #[inline]
    pub fn ppn(&self, block: u32, page: u32) -> u64 {
        block as u64 * self.geo.pages_per_block as u64 + page as u64
    }

    #[inline]
    pub fn plane_of(&self, block: u32) -> usize {
        (block % self.geo.planes) as usize
    }

    /// Page type within its wordline: 0 = lower (fast), last = upper (slow).
    pub fn page_type(&self, page: u32) -> usize {
        match self.geo.cell {
            CellType::Slc => 0,
            CellType::Mlc => {
                // Program order L0 L1 U0 L2 U1 ... L(n-1) U(n-2) U(n-1): a
                // wordline's upper page is written after the next lower page,
                // the common MLC scheme that limits cell-to-cell coupling.
                let last = self.geo.pages_per_block - 1;
                if page == 0 || (page != last && page % 2 == 1) {
                    0
                } else {
                    1
                }
            }
            CellType::Tlc => (page % 3) as usize,
        }
    }

    /// Pages already holding data that an interrupted program of `page` can
    /// corrupt (the lower/middle pages sharing its wordline).
    pub fn paired_pages(&self, page: u32) -> Vec<u32> {
        match self.geo.cell {
            CellType::Slc => vec![],
            CellType::Mlc => {
                if self.page_type(page) == 0 {
                    return vec![];
                }
                let last = self.geo.pages_per_block - 1;
                let wl = if page == last { self.geo.pages_per_block / 2 - 1 } else { page / 2 - 1 };
                vec![if wl == 0 { 0 } else { 2 * wl - 1 }]
            }
            CellType::Tlc => {
                let j = page % 3;
                (page - j..page).collect()
            }
        }
    }

    /// Programs a page. On failure the page is left damaged and the caller
    /// must retire the block.
    pub fn program(&mut self, block: u32, page: u32) -> Result<(), NandError> {
        let ppn = self.ppn(block, page);
        let info = &mut self.blocks[block as usize];
        debug_assert!(!info.is_bad(), "program of bad block {block}");
        debug_assert!(page >= info.write_ptr, "out-of-order program {block}/{page} wp {}", info.write_ptr);
        info.write_ptr = page + 1;
        let fail = self.rng.hit(info.prog_fail_thr);
        self.pages[ppn as usize] = if fail { PAGE_DAMAGED } else { PAGE_PROGRAMMED };
        if fail {
            Err(NandError::ProgramFail)
        } else {
            Ok(())
        }
    }

    pub fn read(&mut self, block: u32, page: u32) -> ReadOutcome {
        let ppn = self.ppn(block, page);
        match self.pages[ppn as usize] {
            PAGE_ERASED => return ReadOutcome::Erased,
            PAGE_DAMAGED => return ReadOutcome::Uncorrectable,
            _ => {}
        }
        let info = &self.blocks[block as usize];
        let (thr, mean) = (info.uncorr_thr, info.mean_bit_errors);
        if self.rng.hit(thr) {
            return ReadOutcome::Uncorrectable;
        }
        let mut bits = if mean > 0.0 { self.rng.poisson(mean) } else { 0 };
        if let Some(&inj) = self.injected.get(&ppn) {
            // Injected errors land in one codeword.
            if inj > self.rel.ecc_bits {
                return ReadOutcome::Uncorrectable;
            }
            bits += inj;
        }
        ReadOutcome::Ok(bits)
    }

    pub fn erase(&mut self, block: u32) -> Result<(), NandError> {
        let ppb = self.geo.pages_per_block as u64;
        let first = block as u64 * ppb;
        for p in &mut self.pages[first as usize..(first + ppb) as usize] {
            *p = PAGE_ERASED;
        }
        if !self.injected.is_empty() {
            self.injected.retain(|&k, _| k < first || k >= first + ppb);
        }
        let info = &mut self.blocks[block as usize];
        info.erase_count += 1;
        info.write_ptr = 0;
        info.flags &= !BLOCK_NEEDS_ERASE;
        let fail = self.rng.hit(info.erase_fail_thr);
        self.refresh(block);
        if fail {
            Err(NandError::EraseFail)
        } else {
            Ok(())
        }
    }

    pub fn mark_bad(&mut self, block: u32) {
        self.blocks[block as usize].flags |= BLOCK_GROWN_BAD;
    }

    pub fn is_bad(&self, block: u32) -> bool {
        self.blocks[block as usize].is_bad()
    }

    pub fn damage(&mut self, block: u32, page: u32) {
        let ppn = self.ppn(block, page) as usize;
        if self.pages[ppn] != PAGE_ERASED {
            self.pages[ppn] = PAGE_DAMAGED;
        }
    }

    /// A page whose program "did not happen" at a power cut: consumed but
    /// holding nothing readable.
    pub fn void_page(&mut self, block: u32, page: u32) {
        let ppn = self.ppn(block, page) as usize;
        self.pages[ppn] = PAGE_DAMAGED;
    }

    pub fn set_needs_erase(&mut self, block: u32) {
        let ppb = self.geo.pages_per_block;
        let first = block as u64 * ppb as u64;
        for p in &mut self.pages[first as usize..(first + ppb as u64) as usize] {
            *p = PAGE_DAMAGED;
        }
        let info = &mut self.blocks[block as usize];
        info.flags |= BLOCK_NEEDS_ERASE;
        info.write_ptr = ppb;
    }

    /// Rebuilds the derived per-block thresholds after loading saved state.
    pub fn refresh_all(&mut self) {
        for b in 0..self.blocks.len() {
            self.refresh(b as u32);
        }
    }

    pub fn inject_bit_errors(&mut self, block: u32, page: u32, bits: u32) {
        let ppn = self.ppn(block, page);
        *self.injected.entry(ppn).or_insert(0) += bits;
    }

    /// True if every page of the block is erased and the block is usable.
    pub fn is_clean(&self, block: u32) -> bool {
        let info = &self.blocks[block as usize];
        info.write_ptr == 0 && info.flags & BLOCK_NEEDS_ERASE == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Geometry, Reliability};

    fn geo(cell: CellType, ppb: u32) -> Geometry {
        Geometry { cell, page_size: 4096, oob_size: 128, pages_per_block: ppb, planes: 2, data_rows: 32, spare_rows: 2 }
    }

    fn rel() -> Reliability {
        Reliability {
            endurance: 3000,
            rber_fresh: 1e-7,
            rber_eol: 1e-3,
            ecc_bits: 8,
            ecc_codeword: 1024,
            factory_bad_ratio: 0.05,
            program_fail_eol: 0.01,
            erase_fail_eol: 0.02,
            protect_paired_pages: false,
        }
    }

    #[test]
    fn mlc_page_types_and_pairs_cover_every_wordline_once() {
        let n = Nand::new(geo(CellType::Mlc, 8), rel(), 1);
        let types: Vec<usize> = (0..8).map(|p| n.page_type(p)).collect();
        assert_eq!(types, vec![0, 0, 1, 0, 1, 0, 1, 1]);
        // Each upper page pairs with a lower page programmed before it.
        let mut lowers = Vec::new();
        for p in 0..8 {
            for l in n.paired_pages(p) {
                assert!(l < p && n.page_type(l) == 0);
                lowers.push(l);
            }
        }
        lowers.sort();
        assert_eq!(lowers, vec![0, 1, 3, 5]);
    }

    #[test]
    fn tlc_pairs_are_the_same_wordline() {
        let n = Nand::new(geo(CellType::Tlc, 9), rel(), 1);
        assert_eq!(n.paired_pages(5), vec![3, 4]);
        assert_eq!(n.paired_pages(3), Vec::<u32>::new());
        assert_eq!(n.page_type(8), 2);
    }

    #[test]
    fn factory_bad_blocks_are_deterministic_and_spare_block_zero() {
        let a = Nand::new(geo(CellType::Slc, 8), rel(), 42);
        let b = Nand::new(geo(CellType::Slc, 8), rel(), 42);
        let c = Nand::new(geo(CellType::Slc, 8), rel(), 43);
        let bad = |n: &Nand| (0..n.blocks.len()).filter(|&i| n.blocks[i].is_bad()).collect::<Vec<_>>();
        assert_eq!(bad(&a), bad(&b));
        assert_ne!(bad(&a), bad(&c));
        assert!(!a.blocks[0].is_bad() && !a.blocks[1].is_bad());
    }

    #[test]
    fn bit_errors_grow_with_wear_until_uncorrectable() {
        let mut n = Nand::new(geo(CellType::Slc, 8), rel(), 5);
        let b = 0;
        let sample = |n: &mut Nand, ec: u32| {
            let (mut bits, mut unc) = (0u64, 0u64);
            for _ in 0..2000 {
                n.blocks[b as usize].erase_count = ec;
                n.blocks[b as usize].flags = 0;
                n.erase(b).ok();
                n.program(b, 0).ok();
                match n.read(b, 0) {
                    ReadOutcome::Ok(k) => bits += k as u64,
                    ReadOutcome::Uncorrectable => unc += 1,
                    ReadOutcome::Erased => {}
                }
            }
            (bits, unc)
        };
        let (young_bits, young_unc) = sample(&mut n, 10);
        let (mid_bits, _) = sample(&mut n, 1500);
        let (_, old_unc) = sample(&mut n, 6000);
        assert!(mid_bits > 10 * young_bits.max(1), "{young_bits} {mid_bits}");
        assert_eq!(young_unc, 0);
        assert!(old_unc > 1000, "{old_unc}");
        assert!(n.rber(6000) > n.rber(3000) && n.rber(3000) > n.rber(0));
    }

    #[test]
    fn failures_rise_near_end_of_life() {
        let mut n = Nand::new(geo(CellType::Slc, 8), rel(), 9);
        let count = |n: &mut Nand, ec: u32| {
            let mut fails = 0;
            for _ in 0..20_000 {
                n.blocks[2].erase_count = ec;
                n.blocks[2].flags = 0;
                if n.erase(2).is_err() {
                    fails += 1;
                }
            }
            fails
        };
        let young = count(&mut n, 10);
        let old = count(&mut n, 3000);
        assert!(old > 100 && young < old / 20, "{young} {old}");
    }

    #[test]
    fn injected_errors_beyond_ecc_are_uncorrectable() {
        let mut r = rel();
        r.rber_fresh = 0.0;
        r.rber_eol = 0.0;
        let mut n = Nand::new(geo(CellType::Slc, 8), r, 1);
        n.program(0, 0).unwrap();
        n.inject_bit_errors(0, 0, 3);
        assert_eq!(n.read(0, 0), ReadOutcome::Ok(3));
        n.inject_bit_errors(0, 0, 6);
        assert_eq!(n.read(0, 0), ReadOutcome::Uncorrectable);
        n.erase(0).unwrap();
        assert_eq!(n.read(0, 0), ReadOutcome::Erased);
        assert!(n.injected.is_empty());
    }
}
