//! Which crash states hold the same device image, without materializing any.
//!
//! A state's image is, per unit, what a read returns: zeroes, a version's
//! bytes, or EIO (a durable copy a torn program damaged). Units no record of
//! the log ever wrote read as zeroes in every state, so a state is told by the
//! units the log wrote: its key is the sequence, in unit order, of each such
//! unit's content class (0: zeroes; u32::MAX: damaged; else the class of the
//! version's bytes, equal bytes one class whatever version wrote them).
//!
//! Two states get the same image class exactly when their keys are equal:
//! keys are hashed to find candidates, and a candidate is compared unit by
//! unit with the state that opened the class (rebuilt from its id), so a
//! hash collision can never merge two different images.

use super::cut::{Cut, StateId, StateInfo};
use super::index::Index;
use crate::cache::FastMap;

const ZEROES: u32 = 0;
const DAMAGED: u32 = u32::MAX;

fn hash_bytes(b: &[u8]) -> u64 {
    let mut h: u64 = 0x243F_6A88_85A3_08D3;
    let mut words = b.chunks_exact(8);
    for w in &mut words {
        h = (h ^ u64::from_le_bytes(w.try_into().unwrap())).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29);
    }
    for &x in words.remainder() {
        h = (h ^ x as u64).wrapping_mul(0x51_7CC1_B727_220A_95);
    }
    h ^ (h >> 31)
}

/// The content class of every version of a log, and the units it wrote.
pub struct Images<'a> {
    ix: &'a Index,
    /// Content class per version (`ZEROES` for a zero version).
    content: Vec<u32>,
    /// Every unit some record wrote or trimmed, in unit order.
    written: Vec<u32>,
}

impl<'a> Images<'a> {
    pub fn new(ix: &'a Index) -> Images<'a> {
        // data offset -> class: versions referring to the same logged bytes
        let mut by_offset: FastMap<u64, u32> = FastMap::default();
        // hash of the bytes -> (a version holding them, its class)
        let mut by_hash: FastMap<u64, Vec<(u32, u32)>> = FastMap::default();
        let mut classes = 0u32;
        let mut content = Vec::with_capacity(ix.versions.len());
        for (v, ver) in ix.versions.iter().enumerate() {
            let Some(bytes) = ix.version_data(v as u32).filter(|b| b.iter().any(|&x| x != 0)) else {
                content.push(ZEROES);
                continue;
            };
            if let Some(&c) = by_offset.get(&ver.data) {
                content.push(c);
                continue;
            }
            let same = by_hash.entry(hash_bytes(bytes)).or_default();
            let c = match same.iter().find(|(w, _)| ix.version_data(*w) == Some(bytes)) {
                Some(&(_, c)) => c,
                None => {
                    classes += 1;
                    same.push((v as u32, classes));
                    classes
                }
            };
            by_offset.insert(ver.data, c);
            content.push(c);
        }
        let mut written: Vec<u32> = ix.versions.iter().map(|v| v.lpn).collect();
        written.sort_unstable();
        written.dedup();
        Images { ix, content, written }
    }

    fn unit(&self, cut: &Cut, lpn: u32) -> u32 {
        match cut.version_of(self.ix, lpn) {
            Err(()) => DAMAGED,
            Ok(None) => ZEROES,
            Ok(Some(v)) => self.content[v as usize],
        }
    }

    fn key_hash(&self, cut: &Cut) -> u64 {
        let mut h: u64 = 0x1319_8A2E_0370_7344;
        for &l in &self.written {
            h = (h ^ self.unit(cut, l) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(31);
        }
        h
    }

    /// The state's key: (unit, content class) for every unit the log wrote;
    /// the class of a damaged unit is `u32::MAX`, of zeroes 0.
    pub fn key(&self, cut: &Cut) -> Vec<(u32, u32)> {
        self.written.iter().map(|&l| (l, self.unit(cut, l))).collect()
    }

    /// True if the two states hold the same image (unit by unit).
    pub fn same(&self, a: &Cut, b: &Cut) -> bool {
        self.written.iter().all(|&l| self.unit(a, l) == self.unit(b, l))
    }

    /// One image class per state, in the order given: equal exactly when the
    /// states hold the same image. Classes are numbered from 0 in order of
    /// first appearance.
    pub fn classes(&self, states: &[StateInfo]) -> Result<Vec<u32>, String> {
        let mut seen: FastMap<u64, Vec<(StateId, u32)>> = FastMap::default();
        let mut next = 0u32;
        let mut out = Vec::with_capacity(states.len());
        for s in states {
            let cut = Cut::new(self.ix, s.id)?;
            let cands = seen.entry(self.key_hash(&cut)).or_default();
            let mut class = None;
            for &(rep, c) in cands.iter() {
                if self.same(&cut, &Cut::new(self.ix, rep)?) {
                    class = Some(c);
                    break;
                }
            }
            let c = class.unwrap_or_else(|| {
                cands.push((s.id, next));
                next += 1;
                next - 1
            });
            out.push(c);
        }
        Ok(out)
    }
}
