// SPDX-License-Identifier: GPL-2.0
/* flashbed's YAFFS2 in user space: raw NAND through a Linux MTD character device.
 *
 * Pages are read and written with MEMREAD/MEMWRITE in MTD_OPS_AUTO_OOB mode, so the
 * tags land in the free OOB bytes of the chip's ECC layout (ECCGETLAYOUT says how
 * many); blocks are erased with MEMERASE64 and bad blocks kept in the MTD's own
 * bad-block table (MEMGETBADBLOCK/MEMSETBADBLOCK). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <mtd/mtd-user.h>

#include "yfb_nand.h"

struct yfb_mtd {
	struct yfb_nand n;
	int fd;
	uint64_t erasesize;
};

static struct yfb_mtd *mtd_of(struct yfb_nand *n)
{
	return (struct yfb_mtd *)n;
}

static int mtd_read(struct yfb_nand *n, unsigned page, uint8_t *data, uint8_t *oob, unsigned ooblen)
{
	struct yfb_mtd *m = mtd_of(n);
	struct mtd_read_req req;
	int err;

	memset(&req, 0, sizeof(req));
	req.start = (uint64_t)page * n->page_size;
	req.len = data ? n->page_size : 0;
	req.ooblen = oob ? ooblen : 0;
	req.usr_data = (uintptr_t)data;
	req.usr_oob = (uintptr_t)oob;
	req.mode = MTD_OPS_AUTO_OOB;
	err = ioctl(m->fd, MEMREAD, &req) < 0 ? errno : 0;
	if (err && err != EUCLEAN && err != EBADMSG)
		return -err;
	/* EUCLEAN and EBADMSG only report the ECC's verdict: the data is there all the
	 * same, and MEMREAD's ECC statistics say what the ECC met (the errno alone hides
	 * flips below the MTD's bit-flip threshold) */
	if (req.ecc_stats.uncorrectable_errors || err == EBADMSG)
		return YFB_ECC_UNCORRECTABLE;
	if (req.ecc_stats.corrected_bitflips || err == EUCLEAN)
		return YFB_ECC_CORRECTED;
	return YFB_ECC_CLEAN;
}

static int mtd_write(struct yfb_nand *n, unsigned page, const uint8_t *data, const uint8_t *oob, unsigned ooblen)
{
	struct yfb_mtd *m = mtd_of(n);
	struct mtd_write_req req;

	memset(&req, 0, sizeof(req));
	req.start = (uint64_t)page * n->page_size;
	req.len = data ? n->page_size : 0;
	req.ooblen = oob ? ooblen : 0;
	req.usr_data = (uintptr_t)data;
	req.usr_oob = (uintptr_t)oob;
	req.mode = MTD_OPS_AUTO_OOB;
	return ioctl(m->fd, MEMWRITE, &req) == 0 ? 0 : -errno;
}

static int mtd_erase(struct yfb_nand *n, unsigned block)
{
	struct yfb_mtd *m = mtd_of(n);
	struct erase_info_user64 e = { .start = block * m->erasesize, .length = m->erasesize };

	return ioctl(m->fd, MEMERASE64, &e) == 0 ? 0 : -errno;
}

static int mtd_is_bad(struct yfb_nand *n, unsigned block)
{
	struct yfb_mtd *m = mtd_of(n);
	loff_t off = block * m->erasesize;
	int r = ioctl(m->fd, MEMGETBADBLOCK, &off);

	return r < 0 ? -errno : (r > 0);
}

static int mtd_mark_bad(struct yfb_nand *n, unsigned block)
{
	struct yfb_mtd *m = mtd_of(n);
	loff_t off = block * m->erasesize;

	return ioctl(m->fd, MEMSETBADBLOCK, &off) == 0 ? 0 : -errno;
}

static void mtd_close(struct yfb_nand *n)
{
	struct yfb_mtd *m = mtd_of(n);

	close(m->fd);
	free(m);
}

struct yfb_nand *yfb_mtd_open(const char *path, char *err, size_t errlen)
{
	struct mtd_info_user info;
	struct nand_ecclayout_user layout;
	struct yfb_mtd *m;
	int fd = open(path, O_RDWR);

	if (fd < 0) {
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		return NULL;
	}
	if (ioctl(fd, MEMGETINFO, &info) < 0) {
		snprintf(err, errlen, "%s is not an MTD device (MEMGETINFO: %s)", path, strerror(errno));
		close(fd);
		return NULL;
	}
	if (info.type != MTD_NANDFLASH && info.type != MTD_MLCNANDFLASH) {
		snprintf(err, errlen, "%s is not NAND flash (MTD type %u): YAFFS2 here needs pages with OOB",
			 path, info.type);
		close(fd);
		return NULL;
	}
	if (ioctl(fd, ECCGETLAYOUT, &layout) < 0) {
		snprintf(err, errlen, "%s: no OOB layout (ECCGETLAYOUT: %s)", path, strerror(errno));
		close(fd);
		return NULL;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		snprintf(err, errlen, "out of memory");
		close(fd);
		return NULL;
	}
	m->fd = fd;
	m->erasesize = info.erasesize;
	m->n.page_size = info.writesize;
	m->n.pages_per_block = info.erasesize / info.writesize;
	m->n.blocks = info.size / info.erasesize;
	m->n.oob_avail = layout.oobavail;
	m->n.read = mtd_read;
	m->n.write = mtd_write;
	m->n.erase = mtd_erase;
	m->n.is_bad = mtd_is_bad;
	m->n.mark_bad = mtd_mark_bad;
	m->n.close = mtd_close;
	return &m->n;
}
