/* SPDX-License-Identifier: GPL-2.0 */
/* flashbed: nothing needed from U-Boot's driver-model allocator */
#ifndef FLASHBED_SHIM_DM_DEVRES_H
#define FLASHBED_SHIM_DM_DEVRES_H
#endif
