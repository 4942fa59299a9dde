/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HotSpot JVMs: recognising libjvm.so (its gHotSpotVM* exports) and reading
 * a running JVM's layout tables (agent/jvm-structs.h) from its memory with
 * process_vm_readv.
 */
#ifndef SR_AGENT_JVM_H
#define SR_AGENT_JVM_H

#include <stdint.h>

#include "jvm-structs.h"

/*
 * The ELF virtual addresses of the enum agent_jvm_sym symbols in the open
 * file fd (.dynsym). 0, -ENOENT when one is missing (not a libjvm.so the
 * agent understands), -EINVAL for a file that is not ELF.
 */
int agent_jvm_file_syms(int fd, uint64_t ret_vaddr[AGENT_JVM_N_SYMS]);

/*
 * Reads the tables of the JVM in process pid whose libjvm.so is loaded at
 * bias (run-time address minus ELF virtual address). NULL + errno as
 * agent_jvm_tables_read(): EAGAIN while the JVM is starting.
 */
struct agent_jvm_tables *agent_jvm_tables_of(uint32_t pid, uint64_t bias, const uint64_t vaddr[AGENT_JVM_N_SYMS]);

/* Reads exactly len bytes of process pid's memory at addr. 0 or -errno (-EFAULT for a short read). */
int agent_jvm_peek(uint32_t pid, uint64_t addr, void *buf, size_t len);

#endif
