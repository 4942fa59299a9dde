/* SPDX-License-Identifier: Apache-2.0 */
/* Small macros every stackrelay file may use. */
#ifndef SR_MACRO_H
#define SR_MACRO_H

#include <stddef.h>
#include <stdlib.h>

#define SR_ARRAY_SIZE(a)		   (sizeof(a) / sizeof((a)[0]))
#define SR_MIN(a, b)			   ((a) < (b) ? (a) : (b))
#define SR_MAX(a, b)			   ((a) > (b) ? (a) : (b))
#define SR_UNUSED			   __attribute__((unused))
#define SR_PRINTF(f, a)			   __attribute__((format(printf, f, a)))
#define SR_CONTAINER_OF(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* The value of one hexadecimal digit (either case), or -1. */
static inline int sr_hex_value(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* free() and NULL the pointer, so a second call is harmless. */
#define SR_FREE(p)                                                                                                     \
	do {                                                                                                           \
		free(p);                                                                                               \
		(p) = NULL;                                                                                            \
	} while (0)

#endif
