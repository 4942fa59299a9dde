/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agent's capabilities after setup (docs/security.md, "The agent's
 * privileges"). Loading BPF, attaching it and opening perf events need
 * CAP_BPF, CAP_PERFMON and more; once they are done the agent reads files and
 * memory of processes that may be hostile, so it keeps only what that reading
 * needs and drops the rest from its effective, permitted, inheritable,
 * ambient and (where CAP_SETPCAP allows) bounding sets, then sets
 * no_new_privs. Capabilities are per thread: the drop runs before the agent
 * starts any thread.
 */
#ifndef SR_AGENT_PRIVS_H
#define SR_AGENT_PRIVS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Capability numbers (linux/capability.h), by bit. */
#define AGENT_CAP_DAC_READ_SEARCH    2
#define AGENT_CAP_SETPCAP	     8
#define AGENT_CAP_SYS_PTRACE	     19
#define AGENT_CAP_SYS_ADMIN	     21
#define AGENT_CAP_SYS_RESOURCE	     24
#define AGENT_CAP_SYSLOG	     34
#define AGENT_CAP_PERFMON	     38
#define AGENT_CAP_BPF		     39
#define AGENT_CAP_CHECKPOINT_RESTORE 40

#define AGENT_CAP(bit) (UINT64_C(1) << (bit))

/* The calling thread's capability sets and no_new_privs flag. */
struct agent_privs {
	uint64_t effective;
	uint64_t permitted;
	uint64_t inheritable;
	uint64_t bounding;
	uint64_t ambient;
	bool no_new_privs;
};

/* What the running agent needs, for agent_privs_wanted(). */
struct agent_privs_needs {
	bool kernel_symbols; /* kernel frames are named: /proc/modules and /proc/kallsyms are re-read */
};

/*
 * The capabilities to keep out of those held (a permitted set): CAP_BPF,
 * CAP_SYS_PTRACE, CAP_CHECKPOINT_RESTORE, CAP_DAC_READ_SEARCH and, for kernel
 * symbols, CAP_SYSLOG, each if held. CAP_SYS_ADMIN only stands in for CAP_BPF
 * or CAP_CHECKPOINT_RESTORE when that one is not held (kernels before 5.8 and
 * 5.9 have neither); ret_admin_for then names what it is kept for, else NULL.
 */
uint64_t agent_privs_wanted(uint64_t held, const struct agent_privs_needs *n, const char **ret_admin_for);
/* Reads the calling thread's sets. 0 or -errno. */
int agent_privs_read(struct agent_privs *ret);
/*
 * Keeps only `keep` (intersected with the permitted set) in the effective and
 * permitted sets, empties the inheritable and ambient sets, drops everything
 * else from the bounding set when CAP_SETPCAP is held (ret_bounding_dropped
 * says whether), and sets no_new_privs. 0 or -errno.
 */
int agent_privs_drop(uint64_t keep, bool *ret_bounding_dropped);
/* "CAP_BPF,CAP_SYS_PTRACE" (or "none"); always NUL-terminated, cut to size. */
void agent_privs_names(uint64_t caps, char *buf, size_t size);
/* The lowercase name without CAP_ ("sys_ptrace"), or NULL for a bit without one. */
const char *agent_privs_name(int bit);

#endif
