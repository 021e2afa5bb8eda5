//! The controller's volatile write cache: whole mapping units, written back
//! oldest first when full or on flush, lost on a power cut.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

/// Multiplicative hash for u32 keys: the default SipHash costs more than
/// the rest of a cached write.
#[derive(Default)]
pub struct FastHasher(u64);

impl Hasher for FastHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ b as u64).wrapping_mul(0x51_7CC1_B727_220A_95);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.0 = (v as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;

pub struct Cache {
    pub cap: usize,
    unit: usize,
    keeps: bool,
    map: FastMap<u32, (u32, u64)>,
    fifo: VecDeque<(u32, u64)>,
    data: Vec<u8>,
    free: Vec<u32>,
    gen: u64,
}

impl Cache {
    pub fn new(cap_units: usize, unit: usize, keeps: bool) -> Self {
        Cache {
            cap: cap_units,
            unit,
            keeps,
            map: FastMap::default(),
            fifo: VecDeque::with_capacity(cap_units + 1),
            data: if keeps { vec![0; cap_units * unit] } else { Vec::new() },
            free: (0..cap_units as u32).rev().collect(),
            gen: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_full(&self) -> bool {
        self.map.len() >= self.cap
    }

    #[inline]
    pub fn get(&self, lpn: u32) -> Option<u32> {
        self.map.get(&lpn).map(|e| e.0)
    }

    pub fn slot_data(&self, slot: u32) -> Option<&[u8]> {
        if self.keeps {
            Some(&self.data[slot as usize * self.unit..(slot as usize + 1) * self.unit])
        } else {
            None
        }
    }

    pub fn slot_data_mut(&mut self, slot: u32) -> Option<&mut [u8]> {
        if self.keeps {
            Some(&mut self.data[slot as usize * self.unit..(slot as usize + 1) * self.unit])
        } else {
            None
        }
    }

    /// Inserts a new unit (caller made room). Returns its slot.
    pub fn insert(&mut self, lpn: u32) -> u32 {
        let slot = self.free.pop().expect("cache full");
        self.gen += 1;
        self.map.insert(lpn, (slot, self.gen));
        self.fifo.push_back((lpn, self.gen));
        slot
    }

    /// Removes the oldest unit; its slot stays readable until `release`.
    pub fn pop_oldest(&mut self) -> Option<(u32, u32)> {
        while let Some((lpn, gen)) = self.fifo.pop_front() {
            if let Some(&(slot, g)) = self.map.get(&lpn) {
                if g == gen {
                    self.map.remove(&lpn);
                    return Some((lpn, slot));
                }
            }
        }
        None
    }

    pub fn release(&mut self, slot: u32) {
        self.free.push(slot);
    }

    pub fn remove(&mut self, lpn: u32) {
        if let Some((slot, _)) = self.map.remove(&lpn) {
            self.free.push(slot);
        }
    }

    /// Power cut: everything is gone.
    pub fn clear(&mut self) {
        self.map.clear();
        self.fifo.clear();
        self.free = (0..self.cap as u32).rev().collect();
    }
}
