"""The options catalogue: what each filesystem's mkfs and mount take, checked once at the edge.

Every mount option a kernel driver accepts is the name in its parameter table in the lab
kernel's source (fs/<fs>/super.c, Linux 7.3; `fsparam_flag_no` gives the `no` form too),
and the filesystem-independent ones are mount(8)'s. Every mkfs flag is its tool's own (the
usage text of Debian's mkfs). The entries (OPTIONS) say, for the options that matter on
flash, why, the values to try, what they may cost, and whether they can lose data a program
was told is safe, each with its source. A spec naming anything else is refused before a
cell runs (variants.parse); a value the tools or the kernel refuse is found by a trial mkfs
and mount at plan time (optiontrial.py).
"""

from __future__ import annotations

import difflib
import shlex
from dataclasses import dataclass
from enum import StrEnum

from .errors import FlashbedError


class Kind(StrEnum):
    MOUNT = "mount"
    MKFS = "mkfs"


@dataclass(frozen=True)
class Entry:
    """One option that matters on flash: a mount option by name (before '='), or a mkfs flag
    (with the feature or setting it takes, e.g. '-O compression')."""

    name: str
    kind: Kind
    values: tuple[str, ...]  # what to try: full option texts (e.g. 'commit=60')
    why: str  # what it changes for the flash part
    cost: str  # what it may cost: durability, space, CPU
    source: str
    # non-empty: the option can lose data a program was told is safe (fsync returned) by
    # design, and how; `risky_values` narrows it to those values (empty: any use)
    loses_data: str = ""
    risky_values: tuple[str, ...] = ()
    # what `flashbed run --tune` tries, each alone from the defaults (a subset of `values`, never
    # the default): the values whose effect a use case's decisive studies can see on a flash part
    # at the quick profile's sizes (a cleaner that never runs there, an option that only moves CPU
    # time, a destructive switch such as noload: listed, not tried); empty: not tried
    tune: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()  # mkfs arguments the option needs to work (compress_algorithm: the compression feature)
    journal: bool = False  # it acts on a journal: not tried where the filesystem has none (ext2, ext4-nojournal)
    fstypes: tuple[str, ...] = ()  # the `mount -t` types it is tried on (empty: every type the entries serve)

    def risky(self, text: str) -> bool:
        return bool(self.loses_data) and (not self.risky_values or text in self.risky_values)

    def tried_on(self, fstype: str, journalled: bool) -> tuple[str, ...]:
        """The values `--tune` tries on a filesystem of `fstype` (with a journal or not)."""
        if (self.journal and not journalled) or (self.fstypes and fstype not in self.fstypes):
            return ()
        return self.tune


# mount(8), FILESYSTEM-INDEPENDENT MOUNT OPTIONS (the VFS takes them for every filesystem)
VFS_MOUNT = ("async", "atime", "noatime", "diratime", "nodiratime", "dirsync", "lazytime", "nolazytime",
             "relatime", "norelatime", "strictatime", "nostrictatime", "sync", "iversion", "noiversion",
             "suid", "nosuid", "dev", "nodev", "exec", "noexec", "silent", "loud")
VFS_SOURCE = "mount(8), filesystem-independent mount options"

# the names in each driver's fs_parameter_spec table (Linux 7.3), the `no` forms included
_EXT4 = ("abort", "acl", "auto_da_alloc", "barrier", "bh", "block_validity", "bsddf", "bsdgroups", "check",
         "commit", "data", "data_err", "dax", "debug", "debug_want_extra_isize", "delalloc", "dioread_lock",
         "dioread_nolock", "discard", "errors", "fc_debug_force", "fc_debug_max_replay", "grpid", "grpjquota",
         "grpquota", "i_version", "init_itable", "inlinecrypt", "inode_readahead_blks", "journal",
         "journal_async_commit", "journal_checksum", "journal_dev", "journal_ioprio", "journal_path", "jqfmt",
         "max_batch_time", "max_dir_size_kb", "mb_optimize_scan", "mblk_io_submit", "min_batch_time", "minixdf",
         "no_mbcache", "no_prefetch_block_bitmaps", "noauto_da_alloc", "nobarrier", "nobh", "noblock_validity",
         "nocheck", "nodelalloc", "nodioread_nolock", "nodiscard", "nogrpid", "noinit_itable",
         "nojournal_checksum", "noload", "nombcache", "nomblk_io_submit", "noquota", "norecovery",
         "noreservation", "nouid32", "nowarn_on_error", "oldalloc", "orlov", "prefetch_block_bitmaps",
         "prjquota", "quota", "reservation", "resgid", "resuid", "sb", "stripe", "sysvgroups",
         "test_dummy_encryption", "user_xattr", "usrjquota", "usrquota", "warn_on_error")
_F2FS = ("acl", "active_logs", "age_extent_cache", "alloc_mode", "atgc", "background_gc", "barrier", "checkpoint",
         "checkpoint_merge", "compress_algorithm", "compress_cache", "compress_chksum", "compress_extension",
         "compress_log_size", "compress_mode", "data_flush", "disable_ext_identify", "disable_roll_forward",
         "discard", "discard_unit", "errors", "extent_cache", "fastboot", "fault_injection", "fault_type",
         "flush_merge", "fsync_mode", "gc_merge", "grpjquota", "grpquota", "heap", "inline_data", "inline_dentry",
         "inline_xattr", "inline_xattr_size", "inlinecrypt", "jqfmt", "lookup_mode", "memory", "mode",
         "nat_bits", "no_heap", "noacl", "nobarrier", "nocheckpoint_merge", "nocompress_extension", "nodiscard",
         "noextent_cache", "noflush_merge", "nogc_merge", "noinline_data", "noinline_dentry", "noinline_xattr",
         "noquota", "norecovery", "nouser_xattr", "prjjquota", "prjquota", "quota", "reserve_node",
         "reserve_root", "resgid", "resizable_tail_secno", "resuid", "test_dummy_encryption", "user_xattr",
         "usrjquota", "usrquota")
_BTRFS = ("acl", "autodefrag", "barrier", "clear_cache", "commit", "compress", "compress-force", "datacow",
          "datasum", "degraded", "device", "discard", "enospc_debug", "fatal_errors", "flushoncommit", "fragment",
          "max_inline", "metadata_ratio", "noacl", "noautodefrag", "nobarrier", "nodatacow", "nodatasum",
          "nodiscard", "noenospc_debug", "noflushoncommit", "norecovery", "nospace_cache", "nossd",
          "nossd_spread", "notreelog", "ref_tracker", "ref_verify", "rescan_uuid_tree", "rescue", "skip_balance",
          "space_cache", "ssd", "ssd_spread", "subvol", "subvolid", "thread_pool", "treelog",
          "user_subvol_rm_allowed")
_XFS = ("allocsize", "attr2", "bsdgroups", "dax", "discard", "errortag", "filestreams", "gqnoenforce", "gquota",
        "grpid", "grpquota", "ikeep", "inode32", "inode64", "largeio", "lifetime", "logbsize", "logbufs", "logdev",
        "max_atomic_write", "max_open_zones", "noalign", "noattr2", "nodiscard", "nogrpid", "noikeep",
        "nolargeio", "nolifetime", "noquota", "norecovery", "nouuid", "pqnoenforce", "pquota", "prjquota",
        "qnoenforce", "quota", "rtdev", "sunit", "swalloc", "swidth", "sysvgroups", "uqnoenforce", "uquota",
        "usrquota", "wsync")
_NILFS2 = ("barrier", "cp", "discard", "errors", "nobarrier", "nodiscard", "norecovery", "order")
_FAT = ("allow_utime", "blocksize", "check", "codepage", "conv", "cvf_format", "cvf_options", "debug", "discard",
        "dmask", "dos1xfloppy", "errors", "fat", "flush", "fmask", "gid", "nfs", "nocase", "posix", "quiet",
        "showexec", "sys_immutable", "time_offset", "tz", "uid", "umask", "usefree",
        # vfat's own (vfat_param_spec)
        "iocharset", "nonumtail", "rodir", "shortname", "uni_xlate", "utf8")
_EXFAT = ("allow_utime", "codepage", "debug", "discard", "dmask", "errors", "fmask", "gid", "iocharset",
          "keep_last_dots", "namecase", "nodiscard", "nozero_size_dir", "sys_tz", "time_offset", "uid", "umask",
          "utf8", "zero_size_dir")
_UBIFS = ("fast_unmount", "norm_unmount", "bulk_read", "no_bulk_read", "chk_data_crc", "no_chk_data_crc",
          "compr", "assert", "auth_key", "auth_hash_name")
_JFFS2 = ("compr", "rp_size")

# by `mount -t` type: ext2 and ext3 are served by the ext4 driver in the lab kernel
KERNEL_MOUNT: dict[str, tuple[tuple[str, ...], str]] = {
    "ext2": (_EXT4, "fs/ext4/super.c ext4_param_specs (Linux 7.3)"),
    "ext3": (_EXT4, "fs/ext4/super.c ext4_param_specs (Linux 7.3)"),
    "ext4": (_EXT4, "fs/ext4/super.c ext4_param_specs (Linux 7.3)"),
    "f2fs": (_F2FS, "fs/f2fs/super.c f2fs_param_specs (Linux 7.3)"),
    "btrfs": (_BTRFS, "fs/btrfs/super.c btrfs_fs_parameters (Linux 7.3)"),
    "xfs": (_XFS, "fs/xfs/xfs_super.c xfs_fs_parameters (Linux 7.3)"),
    "nilfs2": (_NILFS2, "fs/nilfs2/super.c nilfs_param_spec (Linux 7.3)"),
    "vfat": (_FAT, "fs/fat/inode.c fat_param_spec and vfat_param_spec (Linux 7.3)"),
    "exfat": (_EXFAT, "fs/exfat/super.c exfat_parameters (Linux 7.3)"),
    "ubifs": (_UBIFS, "Documentation/filesystems/ubifs.rst, mount options (Linux 7.3)"),
    "jffs2": (_JFFS2, "Documentation/filesystems/jffs2.rst, mount options (Linux 7.3)"),
}

# each mkfs's flags: True where the flag takes a value (its usage text, Debian's packages)
_MKE2FS = {f: True for f in ("-b", "-C", "-d", "-e", "-E", "-g", "-G", "-i", "-I", "-J", "-l", "-L", "-m", "-M",
                             "-N", "-o", "-O", "-r", "-t", "-T", "-U", "-z")} | \
          {f: False for f in ("-c", "-j", "-n", "-q", "-v", "-D", "-F", "-S", "-V")}
MKFS_FLAGS: dict[str, tuple[dict[str, bool], str]] = {
    "mkfs.ext2": (_MKE2FS, "mke2fs(8), e2fsprogs"),
    "mkfs.ext3": (_MKE2FS, "mke2fs(8), e2fsprogs"),
    "mkfs.ext4": (_MKE2FS, "mke2fs(8), e2fsprogs"),
    "mkfs.btrfs": ({**{f: True for f in ("-d", "--data", "-m", "--metadata", "--csum", "--checksum", "-n",
                                         "--nodesize", "-s", "--sectorsize", "-O", "--features", "-R",
                                         "--runtime-features", "-L", "--label", "-U", "--uuid", "-b",
                                         "--byte-count")},
                    **{f: False for f in ("-M", "--mixed", "-K", "--nodiscard", "-f", "--force", "-q", "--quiet",
                                          "-v", "--verbose")}}, "mkfs.btrfs(8), btrfs-progs"),
    "mkfs.xfs": ({**{f: True for f in ("-b", "-c", "-m", "-d", "-i", "-l", "-L", "-n", "-r", "-s")},
                  **{f: False for f in ("-f", "-K", "-q")}}, "mkfs.xfs(8), xfsprogs"),
    "mkfs.f2fs": ({**{f: True for f in ("-c", "-d", "-e", "-E", "-l", "-U", "-m", "-o", "-O", "-C", "-R", "-s",
                                        "-t", "-T", "-w", "-z")},
                   **{f: False for f in ("-a", "-f", "-g", "-i", "-q", "-r", "-S")}}, "mkfs.f2fs(8), f2fs-tools"),
    "mkfs.nilfs2": ({**{f: True for f in ("-b", "-B", "-L", "-m", "-O")},
                     **{f: False for f in ("-c", "-f", "-n", "-q", "-v", "-K")}}, "mkfs.nilfs2(8), nilfs-tools"),
    "mkfs.vfat": ({**{f: True for f in ("-b", "-D", "-f", "-F", "-g", "-h", "-i", "-M", "-n", "-r", "-R", "-s",
                                        "-S")},
                   **{f: False for f in ("-a", "-A", "-I", "-v", "--invariant")}}, "mkfs.fat(8), dosfstools"),
    "mkfs.exfat": ({**{f: True for f in ("-L", "--volume-label", "-c", "--cluster-size", "-b",
                                         "--boundary-align")},
                    **{f: False for f in ("--pack-bitmap", "-f", "--full-format", "-v", "--verbose")}},
                   "mkfs.exfat(8), exfatprogs"),
}

# mount options that undo one another: a spec may not name both (nor a tag and its opposite)
OPPOSITES: tuple[tuple[str, ...], ...] = (
    ("barrier", "nobarrier"), ("discard", "nodiscard"), ("sync", "async"),
    ("noatime", "atime", "relatime", "strictatime"), ("ssd", "nossd"), ("datacow", "nodatacow"),
    ("datasum", "nodatasum"), ("auto_da_alloc", "noauto_da_alloc"), ("delalloc", "nodelalloc"),
    ("lazytime", "nolazytime"), ("treelog", "notreelog"), ("flush_merge", "noflush_merge"),
    ("ssd_spread", "nossd_spread"),
)


def mount_names(fstype: str) -> tuple[str, ...]:
    """Every mount option name `fstype` takes (its driver's and the VFS's)."""
    return (*KERNEL_MOUNT.get(fstype, ((), ""))[0], *VFS_MOUNT)


def option_name(text: str) -> str:
    """A mount option's name: 'commit' of 'commit=60'."""
    return text.partition("=")[0]


def _close(word: str, names) -> str:
    close = difflib.get_close_matches(word, list(names), n=3, cutoff=0.6)
    return f"did you mean {' or '.join(close)}?" if close else "none is close"


def check_mount(spec: str, fs_label: str, fstype: str, opts: tuple[str, ...]) -> None:
    """One line for a mount option `fstype` does not take, or two that contradict each other."""
    names = mount_names(fstype)
    for o in opts:
        n = option_name(o)
        if not n:
            raise FlashbedError(f"'{spec}': an empty mount option: write o:NAME[=VALUE],... e.g. {fs_label}+o:noatime")
        if n not in names:
            raise FlashbedError(f"'{spec}': {fs_label} has no mount option '{n}' ({_close(n, names)}); "
                                f"`flashbed filesystems {fs_label}` lists them")
    seen: dict[str, str] = {}
    for o in opts:
        n = option_name(o)
        if n in seen and seen[n] != o:
            raise FlashbedError(f"'{spec}': '{seen[n]}' and '{o}' set {n} twice: keep one")
        seen[n] = o
    for group in OPPOSITES:
        both = [o for o in opts if option_name(o) in group]
        if len({option_name(o) for o in both}) > 1:
            raise FlashbedError(f"'{spec}': {' and '.join(both)} contradict each other: keep one")


def split_mkfs(spec: str, text: str) -> tuple[str, ...]:
    """The words of a `mkfs:` part (shell quoting, so a value may hold a space)."""
    try:
        words = tuple(shlex.split(text))
    except ValueError as e:
        raise FlashbedError(f"'{spec}': mkfs:{text}: {e}") from None
    if not words:
        raise FlashbedError(f"'{spec}': an empty mkfs: part: write mkfs:FLAGS, e.g. ext4+mkfs:-O ^metadata_csum")
    return words


def check_mkfs(spec: str, fs_label: str, tool: str, words: tuple[str, ...]) -> None:
    """One line for a flag `tool` does not have, or a word that is no flag's value."""
    flags, source = MKFS_FLAGS.get(tool, ({}, ""))
    if not flags:
        raise FlashbedError(f"'{spec}': flashbed knows no flags of {tool} ({fs_label}): drop the mkfs: part")
    i = 0
    while i < len(words):
        w = words[i]
        flag, eq, _ = w.partition("=") if w.startswith("--") else (w, "", "")
        if flag not in flags:
            if not w.startswith("-"):
                raise FlashbedError(f"'{spec}': '{w}' in mkfs: is no flag's value ({tool} takes the device from "
                                    f"flashbed): write flags and their values, e.g. -O feature")
            raise FlashbedError(f"'{spec}': {tool} ({fs_label}) has no flag '{flag}' ({_close(flag, flags)}); "
                                f"its flags: {' '.join(sorted(flags))} ({source})")
        if flags[flag] and not eq:
            if i + 1 >= len(words):
                raise FlashbedError(f"'{spec}': {tool}'s {flag} takes a value: give it after the flag")
            i += 1
        i += 1


def mkfs_flags_given(words: tuple[str, ...]) -> set[str]:
    return {w.partition("=")[0] for w in words if w.startswith("-")}


# --- the entries that matter on flash, with their sources -----------------------------------
_E4 = "Documentation/admin-guide/ext4.rst (Linux 7.3), ext4(5)"
_F2 = "Documentation/filesystems/f2fs.rst (Linux 7.3)"
_F2MK = "mkfs.f2fs(8)"
_BT = "Documentation/filesystems/btrfs.rst, btrfs(5) mount options"
_XF = "Documentation/admin-guide/xfs.rst (Linux 7.3), xfs(5)"
_NI = "Documentation/filesystems/nilfs2.rst (Linux 7.3), nilfs(5)"
_FAT = "Documentation/filesystems/vfat.rst (Linux 7.3), mount(8) fat options"
_M, _K = Kind.MOUNT, Kind.MKFS
_NO_FLUSH = "no cache flush: what fsync acknowledged can sit in a volatile device cache and be lost at a cut"

OPTIONS: dict[str, tuple[Entry, ...]] = {
    "ext4": (
        Entry("commit", _M, ("commit=5", "commit=60"), "seconds between journal commits (default 5): longer "
              "batches metadata into fewer, larger NAND writes", "up to that many seconds of un-fsynced work "
              "lost at a cut", _E4, tune=("commit=60",), journal=True),
        Entry("data", _M, ("data=ordered", "data=journal", "data=writeback"), "journal=file data written twice "
              "(journal then home): about double the NAND writes of data; writeback: no ordering of data before "
              "metadata", "journal: write amplification, no delalloc; writeback: stale data in files after a cut",
              _E4, loses_data="data=writeback: metadata may commit before its data, so a file can show old "
              "blocks' contents after a cut", risky_values=("data=writeback",), tune=("data=journal",),
              journal=True),
        Entry("auto_da_alloc", _M, ("auto_da_alloc", "noauto_da_alloc"), "the default forces a file replaced by "
              "rename (or truncate) to its blocks before the commit; noauto_da_alloc skips that flush",
              "noauto_da_alloc: a file replaced by rename without fsync can be zero-length after a cut", _E4,
              tune=("noauto_da_alloc",), fstypes=("ext4",)),  # ext3 has no delayed allocation
        Entry("barrier", _M, ("barrier", "nobarrier"), "cache flushes and FUA around journal commits",
              "nobarrier: fewer flushes, but " + _NO_FLUSH, _E4, loses_data=_NO_FLUSH,
              risky_values=("nobarrier", "barrier=0"), tune=("nobarrier",), journal=True),
        Entry("discard", _M, ("discard",), "TRIM of freed blocks as they are freed: the FTL learns free space "
              "(less GC copying)", "latency of every delete (fstrim is the batched alternative)", _E4),
        Entry("journal_checksum", _M, ("journal_checksum", "journal_async_commit"), "checksummed journal "
              "transactions; async commit writes the commit block without waiting", "CPU; a torn commit is "
              "detected and dropped", _E4),
        Entry("delalloc", _M, ("nodelalloc",), "delayed allocation batches writes into extents (default)",
              "nodelalloc: more, smaller writes, more fragmentation", _E4),
        Entry("noload", _M, ("noload",), "skips journal replay at mount", "everything the journal held",
              _E4, loses_data="no journal replay: committed transactions are not applied"),
        Entry("-E stride,stripe_width", _K, ("-E stride=128,stripe_width=128",), "aligns allocation to the "
              "erase block (blocks per erase block)", "none", "mke2fs(8) -E"),
        Entry("-O ^has_journal", _K, ("-O ^has_journal",), "no journal: no double writes of metadata",
              "no crash consistency: fsck after every cut", "mke2fs(8), ext4(5)"),
        Entry("-O fast_commit", _K, ("-O fast_commit",), "fsync writes a small delta, not a full commit",
              "a little space", "ext4(5), Documentation/filesystems/ext4/journal.rst", tune=("-O fast_commit",),
              journal=True, fstypes=("ext4",)),
    ),
    "f2fs": (
        Entry("fsync_mode", _M, ("fsync_mode=posix", "fsync_mode=strict", "fsync_mode=nobarrier"), "posix "
              "(default) or strict (more flushes) semantics of fsync; nobarrier skips the flush",
              "strict: more flushes; nobarrier: " + _NO_FLUSH, _F2, loses_data=_NO_FLUSH,
              risky_values=("fsync_mode=nobarrier",), tune=("fsync_mode=strict", "fsync_mode=nobarrier")),
        Entry("mode", _M, ("mode=adaptive", "mode=lfs"), "lfs: only log-structured writes (no in-place "
              "threaded logging): sequential for the FTL", "lfs: more cleaning (GC) when the disk fills", _F2, tune=("mode=lfs",)),
        Entry("background_gc", _M, ("background_gc=on", "background_gc=off", "background_gc=sync"), "when the "
              "cleaner moves blocks: in the background, never, or synchronously", "off: writes stall on "
              "foreground GC when full", _F2, tune=("background_gc=off",)),
        Entry("atgc", _M, ("atgc",), "age-threshold victim selection for background GC: fewer hot blocks moved",
              "memory for the age table", _F2),
        Entry("compress_algorithm", _M, ("compress_algorithm=lz4", "compress_algorithm=zstd"), "compresses "
              "files' clusters: fewer NAND writes for compressible data", "CPU; needs mkfs -O "
              "extra_attr,compression (an image without it mounts without compression)", _F2,
              tune=("compress_algorithm=lz4",), needs=("-O", "extra_attr,compression")),
        Entry("discard", _M, ("discard", "nodiscard"), "TRIM of freed segments (default on)", "none; nodiscard: "
              "the FTL does not learn free space", _F2),
        Entry("barrier", _M, ("nobarrier",), "cache flushes", _NO_FLUSH, _F2, loses_data=_NO_FLUSH,
              risky_values=("nobarrier",)),
        Entry("disable_roll_forward", _M, ("disable_roll_forward",), "no roll-forward of fsynced data at mount",
              "fsynced data written since the last checkpoint", _F2,
              loses_data="fsynced data since the last checkpoint is not recovered"),
        Entry("checkpoint_merge", _M, ("checkpoint_merge",), "merges concurrent checkpoint requests",
              "a kernel thread", _F2),
        Entry("-O extra_attr,compression", _K, ("-O extra_attr,compression",), "lets compress_algorithm= work",
              "inode space", _F2MK),
        Entry("-s", _K, ("-s 2",), "segments (2 MiB) per section, the GC unit: a section of whole erase blocks",
              "none", _F2MK),
        Entry("-o", _K, ("-o 5", "-o 10"), "over-provision percentage: room for the cleaner", "space", _F2MK),
    ),
    "btrfs": (
        Entry("compress", _M, ("compress=zstd:1", "compress=lzo", "compress-force=zstd:1"), "compresses "
              "extents: fewer NAND writes for compressible data", "CPU", _BT, tune=("compress=zstd:1",)),
        Entry("commit", _M, ("commit=30", "commit=120"), "seconds between transaction commits (default 30)",
              "that many seconds of un-fsynced work lost at a cut", _BT, tune=("commit=120",)),
        Entry("ssd", _M, ("ssd", "ssd_spread", "nossd"), "allocation tuned for SSDs; ssd_spread looks for large "
              "free areas", "ssd_spread: more space fragmentation", _BT, tune=("ssd_spread",)),
        Entry("discard", _M, ("discard=async", "discard=sync", "nodiscard"), "TRIM of freed extents, batched "
              "(async) or inline", "sync: latency of every free", _BT),  # async: already btrfs's default where the device discards
        Entry("datasum", _M, ("nodatasum",), "no data checksums", "corruption of data goes undetected", _BT,
              loses_data="data corruption is neither detected nor repaired", risky_values=("nodatasum",)),
        Entry("datacow", _M, ("nodatacow",), "overwrites in place (implies nodatasum)", "torn overwrites at a "
              "cut; no checksums", _BT, loses_data="in-place overwrites can be torn at a cut",
              risky_values=("nodatacow",)),
        Entry("barrier", _M, ("nobarrier",), "cache flushes", _NO_FLUSH, _BT, loses_data=_NO_FLUSH,
              risky_values=("nobarrier",)),
        Entry("flushoncommit", _M, ("flushoncommit",), "data flushed with every commit", "more writes per "
              "commit", _BT),
    ),
    "xfs": (
        Entry("logbsize", _M, ("logbsize=32k", "logbsize=256k"), "in-memory log buffer size: larger buffers, "
              "fewer log writes", "memory; more log lost with a cut before a flush", _XF,
              tune=("logbsize=256k",)),
        Entry("logbufs", _M, ("logbufs=2", "logbufs=8"), "number of log buffers", "memory", _XF),
        Entry("discard", _M, ("discard",), "TRIM of freed extents", "latency", _XF, tune=("discard",)),
        Entry("allocsize", _M, ("allocsize=64k",), "speculative preallocation size for appending writers",
              "space held until close", _XF),
    ),
    "nilfs2": (
        Entry("-B", _K, ("-B 128", "-B 512"), "blocks per segment, the unit of log writing and cleaning: one "
              "erase block", "space", "mkfs.nilfs2(8)", tune=("-B 128",)),
        Entry("barrier", _M, ("nobarrier",), "cache flushes", _NO_FLUSH, _NI, loses_data=_NO_FLUSH,
              risky_values=("nobarrier",), tune=("nobarrier",)),
        Entry("discard", _M, ("discard",), "TRIM of cleaned segments", "latency", _NI),
        Entry("order", _M, ("order=relaxed", "order=strict"), "strict: data written with metadata in order",
              "strict: slower", _NI, tune=("order=strict",)),
    ),
    "vfat": (
        Entry("flush", _M, ("flush",), "writes back at close, not later: less lost at a removal or cut",
              "more, smaller writes", _FAT, tune=("flush",)),
        Entry("-s", _K, ("-s 64",), "sectors per cluster: clusters of the allocation unit", "space for small "
              "files", "mkfs.fat(8)"),
    ),
    "exfat": (
        Entry("discard", _M, ("discard",), "TRIM of freed clusters", "latency",
              "Documentation/filesystems/exfat (fs/exfat/super.c), mount(8) exfat"),
        Entry("-c", _K, ("-c 128K",), "cluster size: the allocation unit", "space for small files",
              "mkfs.exfat(8)"),
    ),
}


def entries(fstype: str) -> tuple[Entry, ...]:
    """The catalogue's entries for `fstype` (ext2 and ext3: ext4's, whose driver serves them)."""
    return OPTIONS.get("ext4" if fstype in ("ext2", "ext3") else fstype, ())


def risk(fstype: str, option: str) -> str:
    """Why a mount option can lose data a program was told is safe ('' if it cannot by design)."""
    name = option_name(option)
    for e in entries(fstype):
        if e.kind == Kind.MOUNT and e.risky(option) and (name == e.name or option in e.risky_values):
            return e.loses_data
    return ""
