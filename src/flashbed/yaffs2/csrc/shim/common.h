/* SPDX-License-Identifier: GPL-2.0 */
/* flashbed: stands in for U-Boot's <common.h> so that YAFFS2's direct interface
 * builds unmodified in user space. */
#ifndef FLASHBED_SHIM_COMMON_H
#define FLASHBED_SHIM_COMMON_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>
#include <sys/xattr.h>
#include <linux/types.h>

static inline unsigned int hweight8(unsigned int w) { return __builtin_popcount(w & 0xff); }
static inline unsigned int hweight32(unsigned int w) { return __builtin_popcount(w); }
/* single-threaded core under one lock: there is nothing to yield to */
#define cond_resched() do { } while (0)
#endif
