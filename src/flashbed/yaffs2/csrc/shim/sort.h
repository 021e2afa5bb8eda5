/* SPDX-License-Identifier: GPL-2.0 */
/* flashbed: nothing needed from U-Boot's <sort.h> (YAFFS2 brings its own qsort) */
#ifndef FLASHBED_SHIM_SORT_H
#define FLASHBED_SHIM_SORT_H
#endif
