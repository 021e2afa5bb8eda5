/* SPDX-License-Identifier: GPL-2.0 */
/* flashbed's YAFFS2 in user space: a YAFFS2 device on a yfb_nand. */
#ifndef YFB_YAFFS_H
#define YFB_YAFFS_H

#include "yfb_nand.h"

struct yaffs_dev;

/* the mount point YAFFS2's direct interface knows the device by */
#define YFB_MOUNT "/flash"

/* set up and register (yaffs_add_device) a YAFFS2 device on `nand`; NULL when
 * the free OOB bytes cannot hold YAFFS2's tags */
struct yaffs_dev *yfb_yaffs_device(struct yfb_nand *nand, char *err, size_t errlen);
/* whether the last mount restored the checkpoint (no scan) */
int yfb_yaffs_restored(struct yaffs_dev *dev);
/* one background garbage-collection pass under the direct interface's lock;
 * non-zero when at least half the free space is erased */
int yfb_yaffs_bg_gc(struct yaffs_dev *dev, unsigned urgency);

/* how long the background garbage collector waits before its next pass */
int yfb_yaffs_gc_pause_ms(struct yaffs_dev *dev);

struct yfb_counters {
	unsigned long page_reads, page_writes, erasures, gc_copies, bg_gcs, ecc_fixed, ecc_unfixed;
	unsigned long retired_blocks;	/* marked bad while mounted */
	unsigned long bad_blocks;	/* bad now (0 once unmounted: YAFFS2 has let go of its block table) */
};
void yfb_yaffs_counters(struct yaffs_dev *dev, struct yfb_counters *c);

#endif
