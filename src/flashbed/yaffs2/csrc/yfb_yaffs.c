// SPDX-License-Identifier: GPL-2.0
/* flashbed's YAFFS2 in user space: the driver hooks of a YAFFS2 device on a
 * yfb_nand, and the OS glue YAFFS2's direct interface asks for.
 *
 * YAFFS2's tags (packed tags 2, with their own ECC when they fit) go in the free
 * OOB bytes; the NAND's ECC verdict on a read becomes the tags' ECC result, as
 * the Linux MTD interface of YAFFS2 reports it: YAFFS2 then collects the block
 * early and retires it (marks it bad) after a few such strikes. A failed program
 * or erase retires the block too. Each fault the NAND reports is one "yaffs:" line
 * on stdout, beside YAFFS2's own trace lines (its bad-block lines included). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "yportenv.h"
#include "yaffs_guts.h"
#include "yaffs_getblockinfo.h"
#include "yaffs_packedtags2.h"
#include "yaffs_trace.h"
#include "yaffsfs.h"

#include "yfb_yaffs.h"

/* --- OS glue ------------------------------------------------------------------ */
unsigned int yaffs_trace_mask = YAFFS_TRACE_BAD_BLOCKS | YAFFS_TRACE_ALWAYS;

static pthread_mutex_t yfb_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread int yfb_errno;

void yaffsfs_Lock(void)
{
	pthread_mutex_lock(&yfb_lock);
}

void yaffsfs_Unlock(void)
{
	pthread_mutex_unlock(&yfb_lock);
}

u32 yaffsfs_CurrentTime(void)
{
	return (u32)time(NULL);
}

void yaffsfs_SetError(int err)
{
	yfb_errno = err;
}

int yaffsfs_GetLastError(void)
{
	return yfb_errno;
}

void *yaffsfs_malloc(size_t size)
{
	return malloc(size);
}

void yaffsfs_free(void *ptr)
{
	free(ptr);
}

void yaffsfs_OSInitialisation(void)
{
}

void yaffs_bug_fn(const char *file_name, int line_no)
{
	fprintf(stderr, "yaffs2: bug at %s:%d\n", file_name, line_no);
}

/* --- driver hooks -------------------------------------------------------------- */
static struct yfb_nand *nand_of(struct yaffs_dev *dev)
{
	return dev->driver_context;
}

static unsigned tags_len(struct yaffs_dev *dev)
{
	return dev->param.no_tags_ecc ? sizeof(struct yaffs_packed_tags2_tags_only)
				      : sizeof(struct yaffs_packed_tags2);
}

static int yfb_write_chunk(struct yaffs_dev *dev, int chunk, const u8 *data,
			   const struct yaffs_ext_tags *tags)
{
	struct yaffs_packed_tags2 pt;
	struct yfb_nand *n = nand_of(dev);

	int r;

	memset(&pt, 0xff, sizeof(pt));
	yaffs_pack_tags2(&pt, tags, !dev->param.no_tags_ecc);
	r = n->write(n, chunk, data, (const u8 *)&pt, tags_len(dev));
	if (r == 0)
		return YAFFS_OK;
	printf("yaffs: program of page %d failed: %s\n", chunk, strerror(-r));
	return YAFFS_FAIL;
}

static int yfb_read_chunk(struct yaffs_dev *dev, int chunk, u8 *data, struct yaffs_ext_tags *tags)
{
	struct yaffs_packed_tags2 pt;
	struct yfb_nand *n = nand_of(dev);
	int r;

	memset(&pt, 0xff, sizeof(pt));
	r = n->read(n, chunk, data, tags ? (u8 *)&pt : NULL, tags ? tags_len(dev) : 0);

	if (r < 0) {
		printf("yaffs: read of page %d failed: %s\n", chunk, strerror(-r));
		if (tags) {
			memset(tags, 0, sizeof(*tags));
			tags->ecc_result = YAFFS_ECC_RESULT_UNKNOWN;
		}
		return YAFFS_FAIL;
	}
	if (r == YFB_ECC_UNCORRECTABLE)
		printf("yaffs: page %d: uncorrectable ECC error\n", chunk);
	else if (r == YFB_ECC_CORRECTED)
		printf("yaffs: page %d: bit flips corrected by ECC\n", chunk);
	if (tags) {
		yaffs_unpack_tags2(tags, &pt, !dev->param.no_tags_ecc);
		if (tags->ecc_result == YAFFS_ECC_RESULT_NO_ERROR) {
			if (r == YFB_ECC_UNCORRECTABLE) {
				tags->ecc_result = YAFFS_ECC_RESULT_UNFIXED;
				dev->n_ecc_unfixed++;
			} else if (r == YFB_ECC_CORRECTED) {
				tags->ecc_result = YAFFS_ECC_RESULT_FIXED;
				dev->n_ecc_fixed++;
			}
		}
	}
	/* wrong data is a failed read (as YAFFS2's Linux MTD interface says it); a
	 * corrected one is good data, its strike counted through the tags */
	return r == YFB_ECC_UNCORRECTABLE ? YAFFS_FAIL : YAFFS_OK;
}

static int yfb_erase(struct yaffs_dev *dev, int block)
{
	struct yfb_nand *n = nand_of(dev);
	int r = n->erase(n, block);

	if (r == 0)
		return YAFFS_OK;
	printf("yaffs: erase of block %d failed: %s\n", block, strerror(-r));
	return YAFFS_FAIL;
}

static int yfb_mark_bad(struct yaffs_dev *dev, int block)
{
	struct yfb_nand *n = nand_of(dev);
	int r = n->mark_bad(n, block);

	if (r == 0) {
		printf("yaffs: block %d marked bad\n", block);
		return YAFFS_OK;
	}
	printf("yaffs: marking block %d bad failed: %s\n", block, strerror(-r));
	return YAFFS_FAIL;
}

static int yfb_query_block(struct yaffs_dev *dev, int block, enum yaffs_block_state *state,
			   u32 *seq_number)
{
	struct yfb_nand *n = nand_of(dev);
	struct yaffs_ext_tags t;
	int bad = n->is_bad(n, block);

	*seq_number = 0;
	if (bad < 0)
		return YAFFS_FAIL;
	if (bad) {
		*state = YAFFS_BLOCK_STATE_DEAD;
		return YAFFS_OK;
	}
	/* a block's first page says whether it holds anything, and of which sequence */
	if (yfb_read_chunk(dev, block * dev->param.chunks_per_block, NULL, &t) != YAFFS_OK)
		return YAFFS_FAIL;
	if (t.chunk_used) {
		*seq_number = t.seq_number;
		*state = YAFFS_BLOCK_STATE_NEEDS_SCAN;
	} else {
		*state = YAFFS_BLOCK_STATE_EMPTY;
	}
	return YAFFS_OK;
}

static int yfb_init_flash(struct yaffs_dev *dev)
{
	(void)dev;
	return YAFFS_OK;
}

struct yaffs_dev *yfb_yaffs_device(struct yfb_nand *nand, char *err, size_t errlen)
{
	struct yaffs_dev *dev = calloc(1, sizeof(*dev));
	struct yaffs_param *p;

	if (!dev) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (nand->oob_avail < sizeof(struct yaffs_packed_tags2_tags_only)) {
		snprintf(err, errlen, "%u free OOB bytes cannot hold YAFFS2's %zu-byte tags", nand->oob_avail,
			 sizeof(struct yaffs_packed_tags2_tags_only));
		free(dev);
		return NULL;
	}
	p = &dev->param;
	p->name = YFB_MOUNT;
	p->is_yaffs2 = 1;
	p->total_bytes_per_chunk = nand->page_size;
	p->chunks_per_block = nand->pages_per_block;
	p->spare_bytes_per_chunk = nand->oob_avail;
	p->start_block = 0;
	p->end_block = nand->blocks - 1;
	p->n_reserved_blocks = 5;	/* the Linux YAFFS2's default */
	p->n_caches = 10;
	/* tags' own ECC when the free OOB bytes hold it (28 bytes), else the bare tags */
	p->no_tags_ecc = nand->oob_avail < sizeof(struct yaffs_packed_tags2);
	p->write_chunk_tags_fn = yfb_write_chunk;
	p->read_chunk_tags_fn = yfb_read_chunk;
	p->erase_fn = yfb_erase;
	p->bad_block_fn = yfb_mark_bad;
	p->query_block_fn = yfb_query_block;
	p->initialise_flash_fn = yfb_init_flash;
	dev->driver_context = nand;
	yaffs_add_device(dev);
	return dev;
}

int yfb_yaffs_restored(struct yaffs_dev *dev)
{
	return dev->is_checkpointed;
}

int yfb_yaffs_bg_gc(struct yaffs_dev *dev, unsigned urgency)
{
	int r;

	yaffsfs_Lock();
	r = dev->is_mounted ? yaffs_bg_gc(dev, urgency) : 1;
	yaffsfs_Unlock();
	return r;
}

int yfb_yaffs_gc_pause_ms(struct yaffs_dev *dev)
{
	int erased, free_chunks, ms;

	yaffsfs_Lock();
	if (!dev->is_mounted) {
		yaffsfs_Unlock();
		return 1000;
	}
	erased = dev->n_erased_blocks * dev->param.chunks_per_block;
	free_chunks = dev->n_free_chunks;
	/* the less of the free space is erased, the sooner the next pass (the
	 * Linux YAFFS2's background thread paces itself the same way) */
	ms = erased > free_chunks / 2 ? 2000 : erased > free_chunks / 4 ? 100 : 20;
	yaffsfs_Unlock();
	return ms;
}

static unsigned dead_blocks(struct yaffs_dev *dev)
{
	unsigned dead = 0;
	int b;

	if (!dev->is_mounted)
		return 0;
	for (b = dev->internal_start_block; b <= dev->internal_end_block; b++)
		dead += yaffs_get_block_info(dev, b)->block_state == YAFFS_BLOCK_STATE_DEAD;
	return dead;
}

void yfb_yaffs_counters(struct yaffs_dev *dev, struct yfb_counters *c)
{
	yaffsfs_Lock();
	c->bad_blocks = dead_blocks(dev);
	c->retired_blocks = dev->n_retired_blocks;
	c->page_reads = dev->n_page_reads;
	c->page_writes = dev->n_page_writes;
	c->erasures = dev->n_erasures;
	c->gc_copies = dev->n_gc_copies;
	c->bg_gcs = dev->bg_gcs;
	c->ecc_fixed = dev->n_ecc_fixed;
	c->ecc_unfixed = dev->n_ecc_unfixed;
	yaffsfs_Unlock();
}
