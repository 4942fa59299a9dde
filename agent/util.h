/* SPDX-License-Identifier: Apache-2.0 */
/* Small helpers of the agent: nanopb field allocation, PID namespaces. (Whole-file reads: common/fileio.h.) */
#ifndef SR_AGENT_UTIL_H
#define SR_AGENT_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <pb.h>

#include "common/macro.h"

/*
 * nanopb with FT_POINTER allocates every field, scalars included, and
 * pb_release() frees them; these allocate one field's value. They return
 * NULL on ENOMEM, which leaves the field unset.
 */
uint64_t *agent_pb_u64(uint64_t v);
uint32_t *agent_pb_u32(uint32_t v);
bool *agent_pb_bool(bool v);
int *agent_pb_enum(int v);
pb_bytes_array_t *agent_pb_bytes(const void *data, size_t len);
char *agent_pb_str(const char *s);

/* The inode of the initial PID namespace (include/linux/proc_ns.h). */
#define AGENT_PROC_PID_INIT_INO 0xEFFFFFFCu
/* 1 when this process runs in a child PID namespace, 0 if not, -errno. */
int agent_in_child_pid_namespace(void);

/*
 * Another process's memory, read with process_vm_readv (the runtimes'
 * walkers: CPython, V8, HotSpot). Exactly len bytes of process pid at addr:
 * 0, or -errno (-EFAULT for a short read). agent_peek_cb() is the same for
 * the layout readers' callbacks, the pid in ctx ((void *)(uintptr_t)pid).
 */
int agent_peek(uint32_t pid, uint64_t addr, void *buf, size_t len);
int agent_peek_cb(void *ctx, uint64_t addr, void *buf, size_t len);

/* Lowercase hex of len bytes into out (2*len+1 bytes). */
void agent_hex(const uint8_t *data, size_t len, char *out);

#endif
