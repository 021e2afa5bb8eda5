//! Superblock table: which physical block stands in each plane of each
//! superblock, and the per-plane pool of spare blocks that replaces factory
//! and grown bad blocks.

use crate::config::Geometry;
use crate::nand::Nand;
use crate::persist::{Reader, Writer};

#[derive(Clone, Debug, PartialEq)]
pub struct SbTable {
    pub planes: u32,
    pub members: Vec<u32>,
    pub spares: Vec<Vec<u32>>,
    pub retired: Vec<bool>,
}

impl SbTable {
    /// Builds the table for a fresh array, replacing factory bad blocks.
    pub fn new(geo: &Geometry, nand: &Nand) -> Self {
        let planes = geo.planes;
        let mut spares: Vec<Vec<u32>> = vec![Vec::new(); planes as usize];
        for row in (geo.data_rows..geo.rows()).rev() {
            for p in 0..planes {
                let b = row * planes + p;
                if !nand.is_bad(b) {
                    spares[p as usize].push(b);
                }
            }
        }
        let mut t = SbTable {
            planes,
            members: (0..geo.data_rows * planes).collect(),
            spares,
            retired: vec![false; geo.data_rows as usize],
        };
        for sb in 0..geo.data_rows {
            for p in 0..planes {
                if nand.is_bad(t.member(sb, p)) && !t.replace(sb, p) {
                    t.retired[sb as usize] = true;
                }
            }
        }
        t
    }

    #[inline]
    pub fn member(&self, sb: u32, plane: u32) -> u32 {
        self.members[(sb * self.planes + plane) as usize]
    }

    pub fn sbs(&self) -> u32 {
        self.retired.len() as u32
    }

    /// Puts a spare in place of the block in `plane` of `sb`. False when the
    /// plane has no spare left.
    pub fn replace(&mut self, sb: u32, plane: u32) -> bool {
        match self.spares[plane as usize].pop() {
            Some(b) => {
                self.members[(sb * self.planes + plane) as usize] = b;
                true
            }
            None => false,
        }
    }

    pub fn spares_left(&self) -> usize {
        self.spares.iter().map(|s| s.len()).sum()
    }

    pub fn save(&self, w: &mut Writer) {
        w.u32(self.planes);
        w.u32s(&self.members);
        for s in &self.spares {
            w.u32s(s);
        }
        w.bools(&self.retired);
    }

    pub fn load(r: &mut Reader) -> std::io::Result<Self> {
        let planes = r.u32()?;
        let members = r.u32s()?;
        let mut spares = Vec::new();
        for _ in 0..planes {
            spares.push(r.u32s()?);
        }
        let retired = r.bools()?;
        Ok(SbTable { planes, members, spares, retired })
    }
}
