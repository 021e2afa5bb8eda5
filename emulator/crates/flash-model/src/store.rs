//! Where page data lives. The model writes each programmed NAND page at its
//! physical position, so old versions stay readable until their block is
//! erased -- exactly what a power cut that reverts the mapping needs.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;

pub trait Store: Send {
    /// False for the benchmark store that keeps no bytes.
    fn keeps_data(&self) -> bool;
    fn read_page(&mut self, ppn: u64, buf: &mut [u8]) -> io::Result<()>;
    fn write_page(&mut self, ppn: u64, data: &[u8]) -> io::Result<()>;
    fn erase_block(&mut self, first_ppn: u64, pages: u64) -> io::Result<()>;
    fn sync(&mut self) -> io::Result<()>;
}

/// Keeps nothing: for measuring the model core alone.
pub struct NullStore;

impl Store for NullStore {
    fn keeps_data(&self) -> bool {
        false
    }
    fn read_page(&mut self, _: u64, buf: &mut [u8]) -> io::Result<()> {
        buf.fill(0);
        Ok(())
    }
    fn write_page(&mut self, _: u64, _: &[u8]) -> io::Result<()> {
        Ok(())
    }
    fn erase_block(&mut self, _: u64, _: u64) -> io::Result<()> {
        Ok(())
    }
    fn sync(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// In-memory pages, for tests.
pub struct MemStore {
    page_size: usize,
    pages: HashMap<u64, Box<[u8]>>,
}

impl MemStore {
    pub fn new(page_size: u32) -> Self {
        MemStore { page_size: page_size as usize, pages: HashMap::new() }
    }
}

impl Store for MemStore {
    fn keeps_data(&self) -> bool {
        true
    }
    fn read_page(&mut self, ppn: u64, buf: &mut [u8]) -> io::Result<()> {
        match self.pages.get(&ppn) {
            Some(p) => buf.copy_from_slice(&p[..buf.len()]),
            None => buf.fill(0xFF),
        }
        Ok(())
    }
    fn write_page(&mut self, ppn: u64, data: &[u8]) -> io::Result<()> {
        let mut b = vec![0u8; self.page_size].into_boxed_slice();
        b[..data.len()].copy_from_slice(data);
        self.pages.insert(ppn, b);
        Ok(())
    }
    fn erase_block(&mut self, first: u64, pages: u64) -> io::Result<()> {
        for p in first..first + pages {
            self.pages.remove(&p);
        }
        Ok(())
    }
    fn sync(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A sparse file with one slot per physical page; erased blocks are punched
/// out so the file's disk usage follows the data the device holds.
pub struct FileStore {
    file: File,
    page_size: u64,
}

impl FileStore {
    pub fn open(path: &Path, page_size: u32, physical_pages: u64) -> io::Result<Self> {
        let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)?;
        let len = physical_pages * page_size as u64;
        if file.metadata()?.len() != len {
            file.set_len(len)?;
        }
        Ok(FileStore { file, page_size: page_size as u64 })
    }
}

impl Store for FileStore {
    fn keeps_data(&self) -> bool {
        true
    }
    fn read_page(&mut self, ppn: u64, buf: &mut [u8]) -> io::Result<()> {
        self.file.read_exact_at(buf, ppn * self.page_size)
    }
    fn write_page(&mut self, ppn: u64, data: &[u8]) -> io::Result<()> {
        self.file.write_all_at(data, ppn * self.page_size)
    }
    fn erase_block(&mut self, first: u64, pages: u64) -> io::Result<()> {
        let r = unsafe {
            libc_fallocate(
                self.file.as_raw_fd(),
                FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                (first * self.page_size) as i64,
                (pages * self.page_size) as i64,
            )
        };
        // Punching is only about disk usage; a filesystem without it is fine.
        let _ = r;
        Ok(())
    }
    fn sync(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }
}

const FALLOC_FL_KEEP_SIZE: i32 = 1;
const FALLOC_FL_PUNCH_HOLE: i32 = 2;

extern "C" {
    #[link_name = "fallocate"]
    fn libc_fallocate(fd: i32, mode: i32, offset: i64, len: i64) -> i32;
}
