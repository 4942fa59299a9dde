/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Names of kernel frames for the OTLP export (docs/agent.md, "Sending
 * OTLP"): OTLP consumers have no kernel symbols, so the agent names kernel
 * frames itself, as the OpenTelemetry eBPF profiler does, from
 * /proc/kallsyms (needs CAP_SYSLOG, kept while kernel_stacks is on).
 *
 * One table per kernel address space (the image, each module), read the
 * first time a frame of it is named and kept as sorted addresses and names
 * (12 bytes a symbol plus its name). Limits: at most AGENT_OTLP_KNAMES_MAX_TABLES
 * tables and AGENT_OTLP_KNAMES_MAX_BYTES of them; past either all are
 * dropped and read again as needed. An address space whose symbols cannot be
 * read (kptr_restrict, no symbols) is remembered as empty: its frames stay
 * offsets. Used on the profiling thread only.
 */
#ifndef SR_AGENT_OTLP_KERNEL_NAMES_H
#define SR_AGENT_OTLP_KERNEL_NAMES_H

#include <stddef.h>
#include <stdint.h>

#define AGENT_OTLP_KNAMES_MAX_TABLES 256
#define AGENT_OTLP_KNAMES_MAX_BYTES  (32u << 20)

struct agent_kernel;
struct agent_otlp_knames;

/* kallsyms: AGENT_SYMUPLOAD_KALLSYMS_PATH, or a fixture. k: the profiling loop's kernel (read at lookup). */
struct agent_otlp_knames *agent_otlp_knames_new(const char *kallsyms, const struct agent_kernel *k);
void agent_otlp_knames_free(struct agent_otlp_knames *kn);
/* The function holding addr in the address space the kernel ID id names; NULL when unknown. */
const char *agent_otlp_knames__lookup(void *kn, const uint8_t *id, size_t len, uint64_t addr);

#endif
