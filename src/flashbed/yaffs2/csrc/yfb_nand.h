/* SPDX-License-Identifier: GPL-2.0 */
/* flashbed's YAFFS2 in user space: the raw NAND a YAFFS2 device sits on.
 *
 * Two backends share this interface: a Linux MTD character device (/dev/mtdN,
 * the lab's nandsim) and a file (unit tests: a NAND with the same geometry and
 * free-OOB size, kept in a file so that a remount or a cut process sees it). */
#ifndef YFB_NAND_H
#define YFB_NAND_H

#include <stddef.h>
#include <stdint.h>

/* what a page read says about the NAND's own ECC */
enum yfb_ecc {
	YFB_ECC_CLEAN = 0,
	YFB_ECC_CORRECTED = 1,	/* bit flips, corrected */
	YFB_ECC_UNCORRECTABLE = 2,
};

struct yfb_nand {
	unsigned page_size;	/* data bytes of a page */
	unsigned pages_per_block;
	unsigned blocks;
	unsigned oob_avail;	/* free OOB bytes per page (the ECC layout's) */
	/* page reads and writes move data and the free OOB bytes (AUTO_OOB placement);
	 * data or oob may be NULL. read: an enum yfb_ecc, or -errno. */
	int (*read)(struct yfb_nand *n, unsigned page, uint8_t *data, uint8_t *oob, unsigned ooblen);
	int (*write)(struct yfb_nand *n, unsigned page, const uint8_t *data, const uint8_t *oob, unsigned ooblen);
	int (*erase)(struct yfb_nand *n, unsigned block);	/* 0 or -errno */
	int (*is_bad)(struct yfb_nand *n, unsigned block);	/* 1, 0 or -errno */
	int (*mark_bad)(struct yfb_nand *n, unsigned block);	/* 0 or -errno */
	void (*close)(struct yfb_nand *n);
};

/* NULL and a message in err on failure */
struct yfb_nand *yfb_mtd_open(const char *path, char *err, size_t errlen);
/* geometry: a blank file is erased flash of this geometry; an existing one must match.
 * faults (NULL for none): what this NAND does wrong, as nandsim's faults do in the lab,
 * a comma-separated list of erase:BLOCK (its erase fails), program:PAGE (its program
 * fails), tear:PAGE (the power goes while it is programmed: half of it is, and the
 * process is killed), flip:PAGE (its reads meet bit flips the ECC corrects) and
 * ecc:PAGE (its reads meet more than the ECC corrects: one data bit comes back flipped);
 * FIRST-LAST for a range */
struct yfb_nand *yfb_file_open(const char *path, unsigned page_size, unsigned oob_avail,
			       unsigned pages_per_block, unsigned blocks, const char *faults,
			       char *err, size_t errlen);

#endif
