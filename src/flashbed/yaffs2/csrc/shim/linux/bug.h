/* SPDX-License-Identifier: GPL-2.0 */
/* flashbed: nothing; YAFFS2 defines its own BUG() when none is given */
#ifndef FLASHBED_SHIM_LINUX_BUG_H
#define FLASHBED_SHIM_LINUX_BUG_H
#endif
