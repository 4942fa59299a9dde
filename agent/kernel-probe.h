/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the running kernel's BPF offers, probed the way the verifier will
 * see it, and which of the agent's fallbacks it therefore takes
 * (docs/platforms.md, "Kernel features"). Shared by the sampler, which
 * chooses its programs and map flags from it, and by --check, which reports it.
 */
#ifndef SR_AGENT_KERNEL_PROBE_H
#define SR_AGENT_KERNEL_PROBE_H

#include <stdbool.h>
#include <stddef.h>

struct btf;

/*
 * The fallbacks for kernels older than the development host's. Each is true
 * where the kernel lacks the feature, or everywhere when the environment
 * variable SR_AGENT_FORCE_FALLBACKS is set to 1 (so that the root tests
 * run the old kernels' code on a new one).
 */
struct agent_kernel_fallbacks {
	/* Hash maps preallocated: before 6.1 a perf_event program may not use one allocated on demand. */
	bool prealloc_maps;
	/* No bpf_find_vma() (5.17): mappings reported from fexit/vm_mmap_pgoff's arguments only. */
	bool mmap_args;
	bool forced; /* SR_AGENT_FORCE_FALLBACKS=1 */
};

void agent_kernel_fallbacks(struct agent_kernel_fallbacks *ret);

/*
 * Whether a perf_event program may use a hash map allocated on demand
 * (BPF_F_NO_PREALLOC): 1 yes, 0 refused (before 6.1), < 0 the probe could not run.
 */
int agent_probe_perf_event_on_demand_map(void);

/* Whether a perf_event program may call the helper: 1 yes, 0 the kernel lacks it, < 0 unknown. */
int agent_probe_helper(int func_id);

/*
 * Whether a two-instruction fexit program loads on the kernel function (btf:
 * the kernel's; NULL: none): 1 yes, 0 no such function, < 0 refused (BPF
 * trampolines locked down), a whole object's load spared.
 */
int agent_probe_fexit(const struct btf *btf, const char *func);

/* Where off-CPU waits end (bpf/offcpu.bpf.h), newest first. */
enum agent_off_cpu_hook {
	AGENT_OFF_CPU_NONE = 0,
	AGENT_OFF_CPU_EXIT_TP, /* tp_btf/sched_exit_tp (6.17) */
	AGENT_OFF_CPU_FENTRY,  /* fentry/finish_task_switch, where the kernel keeps the function whole */
	AGENT_OFF_CPU_KPROBE,  /* a kprobe on finish_task_switch or its clone (finish_task_switch.isra.0) */
};

/* A kernel symbol's name, as /proc/kallsyms spells it. */
#define AGENT_KSYM_MAX 128

/*
 * Chooses the off-CPU resume hook for the running kernel (btf: its BTF, or
 * NULL). For a kprobe, ret_sym gets the symbol to attach to. ret_why says
 * why the newer hooks were passed over (a static string). SR_AGENT_FORCE_FALLBACKS=1
 * takes the kprobe wherever it can.
 */
enum agent_off_cpu_hook agent_off_cpu_hook(const struct btf *btf, char *ret_sym, size_t size, const char **ret_why);

/* About what preallocating a hash map of these sizes costs in kernel memory, in bytes. */
unsigned long long agent_prealloc_bytes(unsigned max_entries, unsigned key_size, unsigned value_size);

#endif
