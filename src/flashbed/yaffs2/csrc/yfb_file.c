// SPDX-License-Identifier: GPL-2.0
/* flashbed's YAFFS2 in user space: a NAND kept in a file, for tests without a kernel.
 *
 * The file holds every page's data and free OOB bytes (what AUTO_OOB placement
 * exposes), then one byte per block (0xff good, 0 bad). Programming ANDs into the
 * page, as NAND can only clear bits; erasing sets the block back to 0xff. Every
 * operation goes straight to the file, so a killed process leaves the flash as a
 * power cut would between two operations. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "yfb_nand.h"

enum fault_kind { FAULT_ERASE, FAULT_PROGRAM, FAULT_FLIP, FAULT_ECC, FAULT_TEAR, FAULT_KINDS };
static const char *const fault_names[FAULT_KINDS] = { "erase", "program", "flip", "ecc", "tear" };
#define MAX_FAULTS 64

struct fault {
	enum fault_kind kind;
	unsigned first, last;	/* blocks (erase) or pages */
};

struct yfb_file {
	struct yfb_nand n;
	int fd;
	unsigned stride;	/* page_size + oob_avail */
	uint8_t *buf;
	struct fault faults[MAX_FAULTS];
	unsigned n_faults;
};

static struct yfb_file *file_of(struct yfb_nand *n)
{
	return (struct yfb_file *)n;
}

static off_t page_off(struct yfb_file *f, unsigned page)
{
	return (off_t)page * f->stride;
}

static off_t bbt_off(struct yfb_file *f)
{
	return (off_t)f->n.blocks * f->n.pages_per_block * f->stride;
}

static int faulty(struct yfb_file *f, enum fault_kind kind, unsigned where)
{
	unsigned i;

	for (i = 0; i < f->n_faults; i++)
		if (f->faults[i].kind == kind && f->faults[i].first <= where && where <= f->faults[i].last)
			return 1;
	return 0;
}

static int file_read(struct yfb_nand *n, unsigned page, uint8_t *data, uint8_t *oob, unsigned ooblen)
{
	struct yfb_file *f = file_of(n);

	if (page >= n->blocks * n->pages_per_block || ooblen > n->oob_avail)
		return -EINVAL;
	if (pread(f->fd, f->buf, f->stride, page_off(f, page)) != (ssize_t)f->stride)
		return -EIO;
	if (data)
		memcpy(data, f->buf, n->page_size);
	if (oob)
		memcpy(oob, f->buf + n->page_size, ooblen);
	if (faulty(f, FAULT_ECC, page)) {
		/* beyond the ECC: the data is handed on as read, wrong */
		if (data)
			data[n->page_size / 2] ^= 0x10;
		return YFB_ECC_UNCORRECTABLE;
	}
	return faulty(f, FAULT_FLIP, page) ? YFB_ECC_CORRECTED : YFB_ECC_CLEAN;
}

static int file_write(struct yfb_nand *n, unsigned page, const uint8_t *data, const uint8_t *oob, unsigned ooblen)
{
	struct yfb_file *f = file_of(n);
	unsigned i;
	int torn;

	if (page >= n->blocks * n->pages_per_block || ooblen > n->oob_avail)
		return -EINVAL;
	if (faulty(f, FAULT_PROGRAM, page))
		return -EIO;
	if (pread(f->fd, f->buf, f->stride, page_off(f, page)) != (ssize_t)f->stride)
		return -EIO;
	/* a torn program (the power went during it): the first half of the data and of
	 * the OOB bytes programmed, the rest left as it was, and nothing after it */
	torn = faulty(f, FAULT_TEAR, page);
	if (data)
		for (i = 0; i < (torn ? n->page_size / 2 : n->page_size); i++)
			f->buf[i] &= data[i];
	if (oob)
		for (i = 0; i < (torn ? ooblen / 2 : ooblen); i++)
			f->buf[n->page_size + i] &= oob[i];
	if (pwrite(f->fd, f->buf, f->stride, page_off(f, page)) != (ssize_t)f->stride)
		return -EIO;
	if (torn)
		kill(getpid(), SIGKILL);
	return 0;
}

static int file_erase(struct yfb_nand *n, unsigned block)
{
	struct yfb_file *f = file_of(n);
	unsigned p;

	if (block >= n->blocks)
		return -EINVAL;
	if (faulty(f, FAULT_ERASE, block))
		return -EIO;
	memset(f->buf, 0xff, f->stride);
	for (p = 0; p < n->pages_per_block; p++)
		if (pwrite(f->fd, f->buf, f->stride, page_off(f, block * n->pages_per_block + p)) != (ssize_t)f->stride)
			return -EIO;
	return 0;
}

static int file_is_bad(struct yfb_nand *n, unsigned block)
{
	struct yfb_file *f = file_of(n);
	uint8_t mark;

	if (block >= n->blocks || pread(f->fd, &mark, 1, bbt_off(f) + block) != 1)
		return -EIO;
	return mark != 0xff;
}

static int file_mark_bad(struct yfb_nand *n, unsigned block)
{
	struct yfb_file *f = file_of(n);
	uint8_t mark = 0;

	if (block >= n->blocks || pwrite(f->fd, &mark, 1, bbt_off(f) + block) != 1)
		return -EIO;
	return 0;
}

static void file_close(struct yfb_nand *n)
{
	struct yfb_file *f = file_of(n);

	close(f->fd);
	free(f->buf);
	free(f);
}

/* 0, or -1 and a message in err */
static int parse_faults(struct yfb_file *f, const char *spec, char *err, size_t errlen)
{
	char buf[1024], *item, *save = NULL;
	unsigned limit, k;

	if (!spec || !*spec)
		return 0;
	snprintf(buf, sizeof(buf), "%s", spec);
	for (item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(item, ':'), *end = NULL;
		unsigned long first = 0, last = 0;

		if (colon)
			*colon = '\0';
		for (k = 0; k < FAULT_KINDS && strcmp(item, fault_names[k]); k++)
			;
		if (colon && colon[1]) {
			first = last = strtoul(colon + 1, &end, 10);
			if (*end == '-' && end[1])
				last = strtoul(end + 1, &end, 10);
		}
		limit = k == FAULT_ERASE ? f->n.blocks : f->n.blocks * f->n.pages_per_block;
		if (k == FAULT_KINDS || !end || *end || last < first || last >= limit) {
			snprintf(err, errlen, "--faults %s: give erase:BLOCK, program:PAGE, tear:PAGE, flip:PAGE or "
				 "ecc:PAGE (or a range, e.g. flip:64-127) within the geometry, separated by commas", spec);
			return -1;
		}
		if (f->n_faults == MAX_FAULTS) {
			snprintf(err, errlen, "--faults %s: at most %d faults", spec, MAX_FAULTS);
			return -1;
		}
		f->faults[f->n_faults].kind = k;
		f->faults[f->n_faults].first = first;
		f->faults[f->n_faults++].last = last;
	}
	return 0;
}

struct yfb_nand *yfb_file_open(const char *path, unsigned page_size, unsigned oob_avail,
			       unsigned pages_per_block, unsigned blocks, const char *faults,
			       char *err, size_t errlen)
{
	struct yfb_file *f;
	struct stat st;
	off_t size, off;
	int fd;

	if (!page_size || !pages_per_block || !blocks) {
		snprintf(err, errlen, "a file NAND needs a page size, pages per block and blocks");
		return NULL;
	}
	fd = open(path, O_RDWR | O_CREAT, 0644);
	if (fd < 0 || fstat(fd, &st) < 0) {
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	f = calloc(1, sizeof(*f));
	if (!f || !(f->buf = malloc(page_size + oob_avail))) {
		snprintf(err, errlen, "out of memory");
		free(f);
		close(fd);
		return NULL;
	}
	f->fd = fd;
	f->stride = page_size + oob_avail;
	f->n.page_size = page_size;
	f->n.pages_per_block = pages_per_block;
	f->n.blocks = blocks;
	f->n.oob_avail = oob_avail;
	if (parse_faults(f, faults, err, errlen) < 0) {
		file_close(&f->n);
		return NULL;
	}
	size = bbt_off(f) + blocks;
	if (st.st_size == 0) {	/* blank: erased flash, every block good */
		memset(f->buf, 0xff, f->stride);
		for (off = 0; off < size; off += f->stride) {
			size_t len = size - off < (off_t)f->stride ? (size_t)(size - off) : f->stride;

			if (pwrite(fd, f->buf, len, off) != (ssize_t)len) {
				snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
				file_close(&f->n);
				return NULL;
			}
		}
	} else if (st.st_size != size) {
		snprintf(err, errlen, "%s holds %lld bytes, not the %lld of this geometry",
			 path, (long long)st.st_size, (long long)size);
		file_close(&f->n);
		return NULL;
	}
	f->n.read = file_read;
	f->n.write = file_write;
	f->n.erase = file_erase;
	f->n.is_bad = file_is_bad;
	f->n.mark_bad = file_mark_bad;
	f->n.close = file_close;
	return &f->n;
}
