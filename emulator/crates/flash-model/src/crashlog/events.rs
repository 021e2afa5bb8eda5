//! The write log on disk: one file of events, one of unit data.
//!
//! `crashlog.events`: the magic, a little-endian u32 length and a JSON header
//! (what device made the log), then events, each a tag byte and fixed
//! little-endian fields. `crashlog.data`: the bytes events refer to by
//! offset (host write data, merged partial units), appended in order.
//! A log cut short (the emulator was killed) ends at its last whole event.

use std::io;

pub const MAGIC: &[u8; 8] = b"FBCRASH1";
pub const EVENTS_FILE: &str = "crashlog.events";
pub const DATA_FILE: &str = "crashlog.data";
/// A data reference meaning "all zeroes" (nothing stored).
pub const ZERO: u64 = u64::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReqKind {
    Write,
    Flush,
    Discard,
    Mark,
}

impl ReqKind {
    fn code(self) -> u8 {
        match self {
            ReqKind::Write => 0,
            ReqKind::Flush => 1,
            ReqKind::Discard => 2,
            ReqKind::Mark => 3,
        }
    }
    fn from_code(c: u8) -> Option<Self> {
        Some(match c {
            0 => ReqKind::Write,
            1 => ReqKind::Flush,
            2 => ReqKind::Discard,
            3 => ReqKind::Mark,
            _ => return None,
        })
    }
    pub fn name(self) -> &'static str {
        match self {
            ReqKind::Write => "write",
            ReqKind::Flush => "flush",
            ReqKind::Discard => "discard",
            ReqKind::Mark => "mark",
        }
    }
}

/// What the device did, in the order it did it. Host requests open with
/// `Begin` and close with `End`; the model events between them are what the
/// request caused (cache write-back, programs, mapping commits, GC).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A host request arrived at `t` (ns of device time). `data`: where a
    /// write's bytes are (or `ZERO`).
    Begin { kind: ReqKind, t: u64, off: u64, len: u64, data: u64 },
    /// The request completed at `done` (its acknowledgement), or failed.
    End { done: u64, ok: bool },
    /// A label the study put into the stream (a record of its own).
    Mark { t: u64, label: String },
    /// The host request gave mapping unit `lpn` new contents (whole unit).
    Unit { lpn: u32, data: u64 },
    /// The host request discarded whole unit `lpn`.
    Trim { lpn: u32 },
    /// The write cache handed unit `lpn` to the FTL.
    Writeback { lpn: u32 },
    /// The FTL's (volatile) mapping now places `lpn` in physical page `ppn`:
    /// `host` for the next version the cache handed over, else a relocation
    /// of the version already mapped (GC, merges).
    Map { lpn: u32, ppn: u64, host: bool },
    /// A NAND page program, from `s` to `e`.
    Program { block: u32, page: u32, s: u64, e: u64 },
    /// A block erase starting at `s`.
    Erase { block: u32, s: u64 },
    /// The FTL's mapping as of now is durable from `d` on (a mapping-journal
    /// commit or a snapshot).
    Commit { d: u64 },
    /// The log was stopped cleanly.
    Stop,
}

impl Event {
    pub fn encode(&self, out: &mut Vec<u8>) {
        let u32_ = |out: &mut Vec<u8>, v: u32| out.extend_from_slice(&v.to_le_bytes());
        let u64_ = |out: &mut Vec<u8>, v: u64| out.extend_from_slice(&v.to_le_bytes());
        match self {
            Event::Begin { kind, t, off, len, data } => {
                out.push(1);
                out.push(kind.code());
                u64_(out, *t);
                u64_(out, *off);
                u64_(out, *len);
                u64_(out, *data);
            }
            Event::End { done, ok } => {
                out.push(2);
                u64_(out, *done);
                out.push(*ok as u8);
            }
            Event::Mark { t, label } => {
                out.push(3);
                u64_(out, *t);
                u32_(out, label.len() as u32);
                out.extend_from_slice(label.as_bytes());
            }
            Event::Unit { lpn, data } => {
                out.push(4);
                u32_(out, *lpn);
                u64_(out, *data);
            }
            Event::Trim { lpn } => {
                out.push(5);
                u32_(out, *lpn);
            }
            Event::Writeback { lpn } => {
                out.push(6);
                u32_(out, *lpn);
            }
            Event::Map { lpn, ppn, host } => {
                out.push(7);
                u32_(out, *lpn);
                u64_(out, *ppn);
                out.push(*host as u8);
            }
            Event::Program { block, page, s, e } => {
                out.push(8);
                u32_(out, *block);
                u32_(out, *page);
                u64_(out, *s);
                u64_(out, *e);
            }
            Event::Erase { block, s } => {
                out.push(9);
                u32_(out, *block);
                u64_(out, *s);
            }
            Event::Commit { d } => {
                out.push(10);
                u64_(out, *d);
            }
            Event::Stop => out.push(11),
        }
    }

    /// Decodes the event at the front of `buf` and advances past it. `None`
    /// when `buf` is empty or holds only part of an event (a log cut short).
    pub fn decode(buf: &mut &[u8]) -> io::Result<Option<Event>> {
        let mut r = Cursor { b: buf, p: 0 };
        let Some(tag) = r.u8() else { return Ok(None) };
        let damaged = |what: String| io::Error::new(io::ErrorKind::InvalidData, what);
        if tag == 1 {
            if let Some(&code) = buf.get(1) {
                if ReqKind::from_code(code).is_none() {
                    return Err(damaged(format!("unknown request kind {code}")));
                }
            }
        }
        let ev = (|| {
            Some(match tag {
                1 => {
                    let kind = ReqKind::from_code(r.u8()?)?;
                    Event::Begin { kind, t: r.u64()?, off: r.u64()?, len: r.u64()?, data: r.u64()? }
                }
                2 => Event::End { done: r.u64()?, ok: r.u8()? != 0 },
                3 => {
                    let t = r.u64()?;
                    let n = r.u32()? as usize;
                    let label = String::from_utf8_lossy(r.take(n)?).into_owned();
                    Event::Mark { t, label }
                }
                4 => Event::Unit { lpn: r.u32()?, data: r.u64()? },
                5 => Event::Trim { lpn: r.u32()? },
                6 => Event::Writeback { lpn: r.u32()? },
                7 => Event::Map { lpn: r.u32()?, ppn: r.u64()?, host: r.u8()? != 0 },
                8 => Event::Program { block: r.u32()?, page: r.u32()?, s: r.u64()?, e: r.u64()? },
                9 => Event::Erase { block: r.u32()?, s: r.u64()? },
                10 => Event::Commit { d: r.u64()? },
                11 => Event::Stop,
                _ => return None,
            })
        })();
        match ev {
            Some(e) => {
                *buf = &buf[r.p..];
                Ok(Some(e))
            }
            // An unknown tag is damage, a short read the end of a killed log.
            None if (1..=11).contains(&tag) => Ok(None),
            None => Err(damaged(format!("unknown event tag {tag}"))),
        }
    }
}

struct Cursor<'a> {
    b: &'a [u8],
    p: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.b.get(self.p..self.p.checked_add(n)?)?;
        self.p += n;
        Some(s)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
}

pub fn is_zero(b: &[u8]) -> bool {
    let (head, mid, tail) = unsafe { b.align_to::<u64>() };
    head.iter().all(|&x| x == 0) && mid.iter().all(|&x| x == 0) && tail.iter().all(|&x| x == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip_and_a_short_tail_ends_the_log() {
        let evs = vec![
            Event::Begin { kind: ReqKind::Write, t: 5, off: 4096, len: 8192, data: 0 },
            Event::Unit { lpn: 1, data: 0 },
            Event::Writeback { lpn: 1 },
            Event::Map { lpn: 1, ppn: 77, host: true },
            Event::Program { block: 3, page: 4, s: 10, e: 20 },
            Event::Erase { block: 2, s: 30 },
            Event::Commit { d: 40 },
            Event::Trim { lpn: 9 },
            Event::End { done: 41, ok: true },
            Event::Mark { t: 50, label: "workload".into() },
            Event::Stop,
        ];
        let mut buf = Vec::new();
        for e in &evs {
            e.encode(&mut buf);
        }
        let mut s = &buf[..];
        let mut back = Vec::new();
        while let Some(e) = Event::decode(&mut s).unwrap() {
            back.push(e);
        }
        assert_eq!(back, evs);
        let mut short = &buf[..buf.len() - 3];
        let mut n = 0;
        while Event::decode(&mut short).unwrap().is_some() {
            n += 1;
        }
        assert_eq!(n, evs.len() - 2, "a partial event is not decoded");
        assert!(Event::decode(&mut &[200u8][..]).is_err());
        assert!(Event::decode(&mut &[1u8, 9][..]).is_err(), "an unknown request kind is damage");
    }

    #[test]
    fn zero_detection() {
        let mut b = vec![0u8; 4099];
        assert!(is_zero(&b[1..]));
        b[4098] = 1;
        assert!(!is_zero(&b[1..]));
        assert!(!is_zero(&b));
    }
}
