/* SPDX-License-Identifier: GPL-2.0 */
/* flashbed: kernel allocation names on the C library's allocator */
#ifndef FLASHBED_SHIM_LINUX_COMPAT_H
#define FLASHBED_SHIM_LINUX_COMPAT_H
#include <stdlib.h>
#define GFP_KERNEL 0
#define GFP_NOFS 0
#define kmalloc(size, flags) malloc(size)
#define kzalloc(size, flags) calloc(1, size)
#define kfree(p) free(p)
#define vmalloc(size) malloc(size)
#define vfree(p) free(p)
#endif
