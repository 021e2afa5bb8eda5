//! The FUSE face of the device: a directory holding one file, `device`, of
//! the device's capacity. Opened with direct I/O so every read and write
//! reaches the model (no host page cache). fsync is a flush, fallocate
//! PUNCH_HOLE / ZERO_RANGE a discard. POSIX locks are left to the kernel's
//! local lock handling (the filesystem does not claim remote locking), so
//! fcntl(F_SETLK) works as on any local file.
//!
//! In virtual time (`--pace virtual`) a second file, `clock`, is the lab
//! kernel's channel to the device clock (its ubd 'v' flag): an 8-byte
//! little-endian write at offset 0 is the guest's submit time (guest ns) of
//! its next request; an 8-byte read at offset 0 returns the guest time at
//! which the requests since then complete on the modelled device. A power
//! cut armed at a device instant (control `cut-at`) lands when the guest
//! submits at or after it, or would see a request complete after it: that
//! clock-file call is answered (EIO) only once the lab has been killed (the
//! lab is held at the cut).
//!
//! A third file, `state`, reads what a crash state serves (its scratch writes
//! included) through the host's page cache, for a checker the host runs on a
//! state (the crash-state loop's fsck): read-only, its cache dropped at each
//! open (a switch comes between two opens), EIO while no state is served (the
//! live device's reads are the lab's alone: paced and counted).

use std::ffi::OsStr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use flash_model::IoError;
use fuser::{
    consts::FOPEN_DIRECT_IO, FileAttr, FileType, Filesystem, KernelConfig, ReplyAttr, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow,
};

use crate::reqsize::Op;
use crate::shared::{Flow, Shared};

pub const DEVICE_NAME: &str = "device";
pub const CLOCK_NAME: &str = "clock";
pub const STATE_NAME: &str = "state";
const ROOT: u64 = 1;
const DEV: u64 = 2;
const CLOCK: u64 = 3;
const STATE: u64 = 4;
const TTL: Duration = Duration::from_secs(1);

const FALLOC_FL_KEEP_SIZE: i32 = 0x01;
const FALLOC_FL_PUNCH_HOLE: i32 = 0x02;
const FALLOC_FL_ZERO_RANGE: i32 = 0x10;

pub struct EmuFs {
    pub sh: Arc<Shared>,
    pub uid: u32,
    pub gid: u32,
    pub created: SystemTime,
}

fn errno(e: IoError) -> i32 {
    match e {
        IoError::Eio | IoError::PoweredOff => libc::EIO,
        IoError::ReadOnly => libc::EROFS,
        IoError::Range => libc::ENOSPC,
    }
}

/// The guest reached an armed power cut: its request is answered only once
/// the process that made it has been sent SIGKILL (the host kills the lab
/// when it learns of the cut), so the lab stands still at the cut's instant
/// (it makes its host calls one at a time, inline, in virtual time) and
/// never runs past it. A FUSE request a killed process already handed over is
/// waited out by its kernel, so the hold must end for the lab to die.
fn hold_at_cut(pid: u32) {
    while !fatal_signal_pending(pid) {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Whether SIGKILL is pending for `pid` (thread or process), or it is gone.
fn fatal_signal_pending(pid: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return true;
    };
    const SIGKILL_BIT: u64 = 1 << (libc::SIGKILL - 1);
    status.lines().any(|l| {
        let Some((key, value)) = l.split_once(':') else { return false };
        matches!(key, "SigPnd" | "ShdPnd")
            && u64::from_str_radix(value.trim(), 16).map_or(false, |m| m & SIGKILL_BIT != 0)
    }) || status.lines().any(|l| l.starts_with("State:") && (l.contains("zombie") || l.contains("dead")))
}

impl EmuFs {
    fn virtual_time(&self) -> bool {
        self.sh.pace == crate::shared::Pace::Virtual
    }

    fn attr(&self, ino: u64) -> FileAttr {
        let (kind, perm, size, nlink) = match ino {
            ROOT => (FileType::Directory, 0o755, 0, 2),
            CLOCK => (FileType::RegularFile, 0o644, 8, 1),
            STATE => (FileType::RegularFile, 0o444, self.sh.capacity, 1),
            _ => (FileType::RegularFile, 0o644, self.sh.capacity, 1),
        };
        FileAttr {
            ino,
            size,
            blocks: size.div_ceil(512),
            atime: self.created,
            mtime: self.created,
            ctime: self.created,
            crtime: self.created,
            kind,
            perm,
            nlink,
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }
}

impl Filesystem for EmuFs {
    fn init(&mut self, _req: &Request<'_>, config: &mut KernelConfig) -> Result<(), libc::c_int> {
        // Large requests in one piece, as a block device would see them.
        let _ = config.set_max_write(1 << 20);
        // The device file is direct I/O (no readahead applies); `state` is read through the
        // page cache, a checker's small reads in large requests.
        let _ = config.set_max_readahead(1 << 17);
        Ok(())
    }

    fn lookup(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEntry) {
        if parent == ROOT && name == DEVICE_NAME {
            reply.entry(&TTL, &self.attr(DEV), 0);
        } else if parent == ROOT && name == CLOCK_NAME && self.virtual_time() {
            reply.entry(&TTL, &self.attr(CLOCK), 0);
        } else if parent == ROOT && name == STATE_NAME {
            reply.entry(&TTL, &self.attr(STATE), 0);
        } else {
            reply.error(libc::ENOENT);
        }
    }

    fn getattr(&mut self, _req: &Request<'_>, ino: u64, _fh: Option<u64>, reply: ReplyAttr) {
        match ino {
            ROOT | DEV | STATE => reply.attr(&TTL, &self.attr(ino)),
            CLOCK if self.virtual_time() => reply.attr(&TTL, &self.attr(ino)),
            _ => reply.error(libc::ENOENT),
        }
    }

    fn setattr(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<u64>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<u32>,
        reply: ReplyAttr,
    ) {
        // A device has a fixed size; timestamps and modes are not kept.
        if let Some(s) = size {
            if !((ino == DEV || ino == STATE) && s == self.sh.capacity || ino == CLOCK && s == 8) {
                reply.error(libc::EINVAL);
                return;
            }
        }
        reply.attr(&TTL, &self.attr(ino));
    }

    fn open(&mut self, _req: &Request<'_>, ino: u64, _flags: i32, reply: ReplyOpen) {
        if ino == DEV || ino == CLOCK && self.virtual_time() {
            reply.opened(0, FOPEN_DIRECT_IO);
        } else if ino == STATE {
            // no FOPEN_KEEP_CACHE: the kernel drops the file's cached pages at each open
            reply.opened(0, 0);
        } else {
            reply.error(libc::EISDIR);
        }
    }

    fn read(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        size: u32,
        _flags: i32,
        _lock: Option<u64>,
        reply: ReplyData,
    ) {
        if ino == CLOCK && self.virtual_time() {
            // the guest time at which the last submit's requests complete
            let Some(done) = self.sh.completion() else {
                hold_at_cut(_req.pid());
                reply.error(libc::EIO);
                return;
            };
            let b = done.to_le_bytes();
            let from = (offset.max(0) as usize).min(8);
            reply.data(&b[from..(from + size as usize).min(8)]);
            return;
        }
        if ino == STATE && offset >= 0 {
            let off = offset as u64;
            let len = (size as u64).min(self.sh.capacity.saturating_sub(off)) as usize;
            let mut buf = vec![0u8; len];
            if len == 0 {
                reply.data(&buf);
                return;
            }
            match self.sh.crash.io(|v| v.read(off, &mut buf)) {
                Some(Ok(())) => reply.data(&buf),
                Some(Err(e)) => reply.error(e),
                None => reply.error(libc::EIO),
            }
            return;
        }
        if ino != DEV || offset < 0 {
            reply.error(libc::EINVAL);
            return;
        }
        let off = offset as u64;
        self.sh.sizes.record(Op::Read, size as u64);
        let len = (size as u64).min(self.sh.capacity.saturating_sub(off)) as usize;
        let mut buf = vec![0u8; len];
        if len == 0 {
            reply.data(&buf);
            return;
        }
        if self.sh.crash.serving() {
            if let Some(r) = self.sh.crash.io(|v| v.read(off, &mut buf)) {
                match r {
                    Ok(()) => reply.data(&buf),
                    Err(e) => reply.error(e),
                }
                return;
            }
        }
        match self.sh.io(|d, t| d.read(t, off, &mut buf)) {
            Ok(()) => reply.data(&buf),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn write(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        data: &[u8],
        _write_flags: u32,
        flags: i32,
        _lock: Option<u64>,
        reply: ReplyWrite,
    ) {
        if ino == CLOCK && self.virtual_time() {
            // the guest's submit time of its next request, whole or not at all
            match <[u8; 8]>::try_from(data) {
                Ok(b) if offset == 0 => {
                    if self.sh.submit(u64::from_le_bytes(b)) == Flow::Cut {
                        hold_at_cut(_req.pid());
                        reply.error(libc::EIO);
                        return;
                    }
                    reply.written(8);
                }
                _ => reply.error(libc::EINVAL),
            }
            return;
        }
        if ino == STATE {
            reply.error(libc::EROFS);
            return;
        }
        if ino != DEV || offset < 0 {
            reply.error(libc::EINVAL);
            return;
        }
        let off = offset as u64;
        self.sh.sizes.record_write(off, data.len() as u64);
        if off + data.len() as u64 > self.sh.capacity {
            reply.error(libc::ENOSPC);
            return;
        }
        if self.sh.crash.serving() {
            if let Some(r) = self.sh.crash.io(|v| v.write(off, data)) {
                match r {
                    Ok(()) => reply.written(data.len() as u32),
                    Err(e) => reply.error(e),
                }
                return;
            }
        }
        // O_SYNC/O_DSYNC writes are forced unit access: durable on return.
        let fua = flags & (libc::O_SYNC | libc::O_DSYNC) != 0;
        let r = self.sh.io(|d, t| {
            let e = d.write(t, off, data)?;
            if fua {
                d.flush(e)
            } else {
                Ok(e)
            }
        });
        match r {
            Ok(()) => reply.written(data.len() as u32),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn flush(&mut self, _req: &Request<'_>, _ino: u64, _fh: u64, _lock_owner: u64, reply: ReplyEmpty) {
        // close(): no durability implied.
        reply.ok();
    }

    fn fsync(&mut self, _req: &Request<'_>, ino: u64, _fh: u64, _datasync: bool, reply: ReplyEmpty) {
        if ino == STATE {
            reply.ok(); // nothing written, and the live device is not this file
            return;
        }
        if self.sh.crash.serving() {
            // A served state keeps its scratch writes until the next switch.
            reply.ok();
            return;
        }
        match self.sh.io(|d, t| d.flush(t)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn fallocate(&mut self, _req: &Request<'_>, ino: u64, _fh: u64, offset: i64, length: i64, mode: i32, reply: ReplyEmpty) {
        if ino != DEV || offset < 0 || length <= 0 {
            reply.error(libc::EINVAL);
            return;
        }
        let (off, len) = (offset as u64, length as u64);
        let end = off.saturating_add(len);
        let discard = mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE) != 0;
        if mode & !(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE) != 0 {
            reply.error(libc::EOPNOTSUPP);
            return;
        }
        if !discard {
            // Preallocation: a device's blocks always exist.
            if end <= self.sh.capacity || mode & FALLOC_FL_KEEP_SIZE != 0 {
                reply.ok();
            } else {
                reply.error(libc::EFBIG);
            }
            return;
        }
        self.sh.sizes.record(Op::Discard, len);
        let end = end.min(self.sh.capacity);
        if end <= off {
            reply.ok();
            return;
        }
        // Punch hole (discard) and zero range (write-zeroes) both leave the
        // range reading as zeroes: whole units are trimmed, edges zeroed.
        if self.sh.crash.serving() {
            if let Some(r) = self.sh.crash.io(|v| v.discard(off, end - off)) {
                match r {
                    Ok(()) => reply.ok(),
                    Err(e) => reply.error(e),
                }
                return;
            }
        }
        match self.sh.io(|d, t| d.discard(t, off, end - off)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn readdir(&mut self, _req: &Request<'_>, ino: u64, _fh: u64, offset: i64, mut reply: ReplyDirectory) {
        if ino != ROOT {
            reply.error(libc::ENOTDIR);
            return;
        }
        let mut entries = vec![
            (ROOT, FileType::Directory, "."),
            (ROOT, FileType::Directory, ".."),
            (DEV, FileType::RegularFile, DEVICE_NAME),
            (STATE, FileType::RegularFile, STATE_NAME),
        ];
        if self.virtual_time() {
            entries.push((CLOCK, FileType::RegularFile, CLOCK_NAME));
        }
        for (i, (ino, kind, name)) in entries.iter().enumerate().skip(offset as usize) {
            if reply.add(*ino, (i + 1) as i64, *kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn statfs(&mut self, _req: &Request<'_>, _ino: u64, reply: ReplyStatfs) {
        let blocks = self.sh.capacity / 4096;
        reply.statfs(blocks, 0, 0, 2, 0, 4096, 255, 4096);
    }

    fn access(&mut self, _req: &Request<'_>, _ino: u64, _mask: i32, reply: ReplyEmpty) {
        reply.ok();
    }
}
