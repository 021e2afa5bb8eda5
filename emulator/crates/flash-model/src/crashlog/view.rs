//! Serving a crash state: reads come from the log (the version each unit
//! holds in the state), writes made while checking it (journal replay, fsck)
//! go to a scratch overlay that the next switch drops. Nothing is copied:
//! a switch costs the state's evaluation, a read one lookup per unit.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use super::cut::{Cut, StateId};
use super::index::Index;
use crate::cache::FastMap;

pub enum UnitContent<'a> {
    Zero,
    Data(&'a [u8]),
    /// Its durable copy was damaged: reads fail (uncorrectable).
    Damaged,
}

pub fn unit_content<'a>(ix: &'a Index, cut: &Cut, lpn: u32) -> UnitContent<'a> {
    match cut.version_of(ix, lpn) {
        Err(()) => UnitContent::Damaged,
        Ok(None) => UnitContent::Zero,
        Ok(Some(v)) => match ix.version_data(v) {
            Some(d) => UnitContent::Data(d),
            None => UnitContent::Zero,
        },
    }
}

pub struct View {
    pub ix: Arc<Index>,
    pub cut: Cut,
    /// Units written while the state is served (`None`: zeroes).
    scratch: FastMap<u32, Option<Box<[u8]>>>,
}

impl View {
    pub fn new(ix: Arc<Index>, id: StateId) -> Result<View, String> {
        let cut = Cut::new(&ix, id)?;
        Ok(View { ix, cut, scratch: FastMap::default() })
    }

    /// Serves another state of the same log; the scratch overlay is dropped.
    pub fn switch(&mut self, id: StateId) -> Result<(), String> {
        self.cut = Cut::new(&self.ix, id)?;
        self.scratch.clear();
        Ok(())
    }

    /// Serves a state already evaluated (an undamaged twin: `Cut::parse`).
    pub fn switch_to(&mut self, cut: Cut) {
        self.cut = cut;
        self.scratch.clear();
    }

    pub fn with_cut(ix: Arc<Index>, cut: Cut) -> View {
        View { ix, cut, scratch: FastMap::default() }
    }

    pub fn capacity(&self) -> u64 {
        self.ix.units * self.ix.unit
    }

    /// Bytes written to the scratch overlay since the switch.
    pub fn scratch_bytes(&self) -> u64 {
        self.scratch.len() as u64 * self.ix.unit
    }

    fn unit(&self, lpn: u32) -> UnitContent<'_> {
        match self.scratch.get(&lpn) {
            Some(Some(d)) => UnitContent::Data(d),
            Some(None) => UnitContent::Zero,
            None => unit_content(&self.ix, &self.cut, lpn),
        }
    }

    fn each_unit(&self, off: u64, len: u64, mut f: impl FnMut(u32, usize, usize, usize) -> Result<(), ()>) -> Result<(), ()> {
        if off.checked_add(len).map_or(true, |e| e > self.capacity()) {
            return Err(());
        }
        let u = self.ix.unit;
        let mut pos = 0u64;
        while pos < len {
            let a = off + pos;
            let uo = a % u;
            let n = (u - uo).min(len - pos);
            f((a / u) as u32, uo as usize, pos as usize, n as usize)?;
            pos += n;
        }
        Ok(())
    }

    /// Reads like the device would: a damaged unit fails the whole request.
    pub fn read(&self, off: u64, buf: &mut [u8]) -> Result<(), ()> {
        self.each_unit(off, buf.len() as u64, |lpn, uo, pos, n| {
            match self.unit(lpn) {
                UnitContent::Zero => buf[pos..pos + n].fill(0),
                UnitContent::Data(d) => buf[pos..pos + n].copy_from_slice(&d[uo..uo + n]),
                UnitContent::Damaged => return Err(()),
            }
            Ok(())
        })
    }

    pub fn write(&mut self, off: u64, data: &[u8]) -> Result<(), ()> {
        let unit = self.ix.unit as usize;
        let mut new: Vec<(u32, Box<[u8]>)> = Vec::new();
        self.each_unit(off, data.len() as u64, |lpn, uo, pos, n| {
            let mut b = vec![0u8; unit].into_boxed_slice();
            if n < unit {
                // Read-modify-write, as the device does for partial units.
                match self.unit(lpn) {
                    UnitContent::Zero => {}
                    UnitContent::Data(d) => b.copy_from_slice(d),
                    UnitContent::Damaged => return Err(()),
                }
            }
            b[uo..uo + n].copy_from_slice(&data[pos..pos + n]);
            new.push((lpn, b));
            Ok(())
        })?;
        for (lpn, b) in new {
            self.scratch.insert(lpn, Some(b));
        }
        Ok(())
    }

    /// Discard: the range reads as zeroes afterwards.
    pub fn discard(&mut self, off: u64, len: u64) -> Result<(), ()> {
        let unit = self.ix.unit as usize;
        let mut whole = Vec::new();
        let mut edges = Vec::new();
        self.each_unit(off, len, |lpn, uo, _, n| {
            if n == unit {
                whole.push(lpn);
            } else {
                edges.push((lpn as u64 * unit as u64 + uo as u64, n));
            }
            Ok(())
        })?;
        for lpn in whole {
            self.scratch.insert(lpn, None);
        }
        for (a, n) in edges {
            self.write(a, &vec![0u8; n])?;
        }
        Ok(())
    }
}

/// Writes the device image of a state to `path` (sparse: zero units are
/// holes). Units the state damaged read as zeroes in the image; the cut
/// lists them (`Cut::damaged`).
pub fn write_image(ix: &Index, cut: &Cut, path: &Path) -> Result<(), String> {
    let err = |e: std::io::Error| format!("{}: {e}", path.display());
    let f = File::create(path).map_err(err)?;
    let u = ix.unit as usize;
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 20);
    let mut at = 0u64;
    let flush = |buf: &mut Vec<u8>, at: u64| -> Result<(), String> {
        if !buf.is_empty() {
            f.write_all_at(buf, at).map_err(err)?;
            buf.clear();
        }
        Ok(())
    };
    for lpn in 0..ix.units as u32 {
        match unit_content(ix, cut, lpn) {
            UnitContent::Data(d) => {
                if buf.is_empty() {
                    at = lpn as u64 * u as u64;
                }
                buf.extend_from_slice(d);
                if buf.len() >= 1 << 20 {
                    flush(&mut buf, at)?;
                }
            }
            UnitContent::Zero | UnitContent::Damaged => flush(&mut buf, at)?,
        }
    }
    flush(&mut buf, at)?;
    f.set_len(ix.units * ix.unit).map_err(err)
}
