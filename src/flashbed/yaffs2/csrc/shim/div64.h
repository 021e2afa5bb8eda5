/* SPDX-License-Identifier: GPL-2.0 */
/* flashbed: U-Boot's 64-bit division helpers. lldiv() here is U-Boot's (the
 * quotient), not the C library's (a struct): the library's is declared first and
 * then renamed away. */
#ifndef FLASHBED_SHIM_DIV64_H
#define FLASHBED_SHIM_DIV64_H
#include <stdint.h>
#include <stdlib.h>
#define do_div(n, base) ({ uint32_t rem__ = (uint64_t)(n) % (base); (n) = (uint64_t)(n) / (base); rem__; })
static inline uint64_t flashbed_lldiv(uint64_t dividend, uint32_t divisor)
{
	return dividend / divisor;
}
#define lldiv flashbed_lldiv
#endif
