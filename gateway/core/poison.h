/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Marking memory a pool has taken back (location-slots.c, stack-slabs.c):
 * under AddressSanitizer, a use of a freed slot is reported as a use after
 * free would be; otherwise these cost nothing.
 */
#ifndef SR_GW_POISON_H
#define SR_GW_POISON_H

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/lsan_interface.h>
#define GW_POISON(p, n)	  ASAN_POISON_MEMORY_REGION((p), (n))
#define GW_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
/* Memory mapped outside malloc whose pointers keep heap blocks alive: the leak checker scans it. */
#define GW_LEAK_ROOT(p, n) __lsan_register_root_region((p), (n))
#else
#define GW_POISON(p, n)	   ((void)(p), (void)(n))
#define GW_UNPOISON(p, n)  ((void)(p), (void)(n))
#define GW_LEAK_ROOT(p, n) ((void)(p), (void)(n))
#endif

#endif
