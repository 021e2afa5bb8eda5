//! FTL personalities behind one trait. A logical page number (lpn) is in the
//! FTL's mapping unit (see `DeviceConfig::unit_bytes`); the device layer above
//! does read-modify-write for smaller host requests.

pub mod hybrid;
pub mod page;

use crate::media::Media;
use crate::nand::NandError;
use crate::persist::Writer;
use crate::sbt::SbTable;

pub const NONE: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadRes {
    Data,
    /// Never written or discarded: reads as zeroes.
    Zero,
    Uncorrectable,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FtlError {
    /// Spare blocks are exhausted; the device accepts no more writes.
    ReadOnly,
}

#[derive(Debug, Clone, Default)]
pub struct FtlStats {
    /// NAND pages programmed with host data.
    pub host_programs: u64,
    /// NAND pages programmed by garbage collection / merges.
    pub gc_programs: u64,
    pub gc_runs: u64,
    pub gc_time_ns: u64,
    pub wear_level_moves: u64,
    pub journal_commits: u64,
    pub merges_switch: u64,
    pub merges_partial: u64,
    pub merges_full: u64,
    /// Page FTL with an SLC buffer: host pages programmed in SLC mode (also
    /// counted in `host_programs`), buffer superblocks folded into the array
    /// and the array pages the folds programmed.
    pub slc_programs: u64,
    pub folds: u64,
    pub fold_programs: u64,
}

/// Erases every member block of superblock `sb` from `t`, a member that is bad or whose
/// erase fails (then marked bad) replaced by one of its plane's spares. Returns when the
/// erases end, and whether the superblock must be retired (a plane had no spare left).
/// Both personalities reclaim a superblock this way.
pub(crate) fn erase_superblock(m: &mut Media, sbt: &mut SbTable, sb: u32, planes: u32, t: u64) -> (u64, bool) {
    let mut end = t;
    let mut retired = false;
    for p in 0..planes {
        let b = sbt.member(sb, p);
        let failed = if m.nand.is_bad(b) {
            true
        } else {
            let (r, e) = m.erase(b, t);
            end = end.max(e);
            if r == Err(NandError::EraseFail) {
                m.nand.mark_bad(b);
                true
            } else {
                false
            }
        };
        if failed && !sbt.replace(sb, p) {
            retired = true;
        }
    }
    (end, retired)
}

pub trait Ftl: Send {
    fn read(&mut self, m: &mut Media, lpn: u32, t: u64, buf: Option<&mut [u8]>) -> (ReadRes, u64);
    /// Writes one unit. Returns (release, end): when the controller has taken
    /// the data off the host's hands, and when it is on the array.
    fn write(&mut self, m: &mut Media, lpn: u32, data: Option<&[u8]>, t: u64) -> Result<(u64, u64), FtlError>;
    fn trim(&mut self, m: &mut Media, lpn: u32, t: u64) -> Result<(), FtlError>;
    /// Programs anything buffered and persists the mapping; returns the time
    /// at which everything written so far is durable.
    fn flush(&mut self, m: &mut Media, t: u64) -> u64;
    /// Mapping-journal commits durable by `now` become the power-cut baseline.
    fn prune(&mut self, now: u64);
    /// Reverts to the mapping durable at `t_eff` (after `Media::power_cut`).
    fn power_cut(&mut self, m: &mut Media, t_eff: u64);
    /// A block went bad (injected): move its data away and replace it.
    fn block_failed(&mut self, m: &mut Media, block: u32);
    fn read_only(&self) -> bool;
    fn sbt(&self) -> &SbTable;
    fn stats(&self) -> &FtlStats;
    fn reset_stats(&mut self);
    /// Physical location of a unit, if mapped: (block, page).
    fn locate(&self, lpn: u32) -> Option<(u32, u32)>;
    fn save(&self, w: &mut Writer);
    /// Internal consistency check (tests).
    fn check(&self, m: &Media) -> Result<(), String>;
    /// The device has been idle since `from` (nothing issued after it) and
    /// the next request arrives at `until`: background work (the SLC
    /// buffer's fold) may run in between. Returns when it ends.
    fn idle(&mut self, _m: &mut Media, from: u64, _until: u64) -> u64 {
        from
    }
    /// Over-provisioning greedy GC effectively works with (page FTL).
    fn effective_op(&self) -> Option<f64> {
        None
    }
}
