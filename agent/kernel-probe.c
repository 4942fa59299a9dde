// SPDX-License-Identifier: Apache-2.0
/*
 * Probes of the running kernel's BPF, each a few instructions loaded the way
 * the agent's own programs will be, so that a refusal names the feature
 * instead of surfacing as the verifier's "Invalid argument" (kernel-probe.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include "agent/kernel-probe.h"
#include "common/macro.h"

int agent_probe_perf_event_on_demand_map(void)
{
	LIBBPF_OPTS(bpf_map_create_opts, mo, .map_flags = BPF_F_NO_PREALLOC);
	/* The verifier checks every map a program refers to as it loads: loading the map's address is enough. */
	struct bpf_insn insns[] = {
		{ .code = BPF_LD | BPF_DW | BPF_IMM, .dst_reg = BPF_REG_1, .src_reg = BPF_PSEUDO_MAP_FD },
		{ 0 },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	int map, prog, r;

	map = bpf_map_create(BPF_MAP_TYPE_HASH, "sr_probe", 4, 4, 1, &mo);
	if (map < 0)
		return -errno;
	insns[0].imm = map;
	prog = bpf_prog_load(BPF_PROG_TYPE_PERF_EVENT, "sr_probe", "GPL", insns, SR_ARRAY_SIZE(insns), NULL);
	r = prog >= 0 ? 1 : (errno == EINVAL ? 0 : -errno);
	if (prog >= 0)
		close(prog);
	close(map);
	return r;
}

int agent_probe_helper(int func_id)
{
	return libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, (enum bpf_func_id)func_id, NULL);
}

void agent_kernel_fallbacks(struct agent_kernel_fallbacks *ret)
{
	const char *force = getenv("SR_AGENT_FORCE_FALLBACKS");

	memset(ret, 0, sizeof(*ret));
	ret->forced = force && strcmp(force, "1") == 0;
	/* A probe that cannot run (< 0) leaves the new path: its load then fails with the kernel's own error. */
	ret->prealloc_maps = ret->forced || agent_probe_perf_event_on_demand_map() == 0;
	ret->mmap_args = ret->forced || agent_probe_helper(BPF_FUNC_find_vma) == 0;
}

/*
 * Whether an fentry program can attach to the kernel function: its BTF
 * entry is not enough, since a build may keep the name in BTF while the
 * compiler emitted only a clone (finish_task_switch.isra.0), which the
 * verifier then cannot find. 1 yes, 0 no such function, < 0 refused.
 */
static int probe_tracing(const struct btf *btf, const char *func, enum bpf_attach_type type)
{
	LIBBPF_OPTS(bpf_prog_load_opts, po, .expected_attach_type = type);
	struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	int id = btf__find_by_name_kind(btf, func, BTF_KIND_FUNC), fd;

	if (id < 0)
		return 0;
	po.attach_btf_id = (__u32)id;
	fd = bpf_prog_load(BPF_PROG_TYPE_TRACING, "sr_probe", "GPL", insns, SR_ARRAY_SIZE(insns), &po);
	if (fd < 0)
		return errno == ENOENT || errno == ESRCH ? 0 : -errno;
	close(fd);
	return 1;
}

static int probe_fentry(const struct btf *btf, const char *func)
{
	return probe_tracing(btf, func, BPF_TRACE_FENTRY);
}

int agent_probe_fexit(const struct btf *btf, const char *func)
{
	return btf ? probe_tracing(btf, func, BPF_TRACE_FEXIT) : 0;
}

/*
 * The text symbol named func, or its compiler clone (func.isra.0,
 * func.part.0, ...), from /proc/kallsyms: a kprobe attaches by that name.
 * The whole function is preferred. 1 found, 0 none, < 0 unreadable.
 */
static int find_text_symbol(const char *func, char *ret_sym, size_t size)
{
	FILE *f = fopen("/proc/kallsyms", "re");
	size_t flen = strlen(func);
	char line[256], name[AGENT_KSYM_MAX], type;
	int found = 0;

	if (!f)
		return -errno;
	/* A few hundred thousand lines at most: the file ends. */
	while (found < 2 && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%*s %c %127s", &type, name) != 2 || (type != 't' && type != 'T') ||
		    strncmp(name, func, flen) != 0 || (name[flen] != '\0' && name[flen] != '.'))
			continue;
		if (name[flen] == '\0' || !found) {
			snprintf(ret_sym, size, "%s", name);
			found = name[flen] == '\0' ? 2 : 1;
		}
	}
	fclose(f);
	return found ? 1 : 0;
}

enum agent_off_cpu_hook agent_off_cpu_hook(const struct btf *btf, char *ret_sym, size_t size, const char **ret_why)
{
	struct agent_kernel_fallbacks fb;
	int r = 0;

	agent_kernel_fallbacks(&fb);
	*ret_why = "SR_AGENT_FORCE_FALLBACKS=1";
	if (!fb.forced) {
		if (btf && btf__find_by_name_kind(btf, "btf_trace_sched_exit_tp", BTF_KIND_TYPEDEF) >= 0)
			return AGENT_OFF_CPU_EXIT_TP;
		r = btf ? probe_fentry(btf, "finish_task_switch") : 0;
		if (r == 1)
			return AGENT_OFF_CPU_FENTRY;
		*ret_why = !btf	    ? "no kernel BTF"
			   : r == 0 ? "finish_task_switch() missing from BTF, or only its clone in the kernel"
				    : "BPF trampolines refused";
	}
	/* libbpf attaches kprobes through the kprobe PMU, or else tracefs's kprobe_events. */
	if (access("/sys/bus/event_source/devices/kprobe/type", F_OK) != 0 &&
	    access("/sys/kernel/tracing/kprobe_events", F_OK) != 0 &&
	    access("/sys/kernel/debug/tracing/kprobe_events", F_OK) != 0) {
		*ret_why = fb.forced ? "SR_AGENT_FORCE_FALLBACKS=1, and no kprobes (CONFIG_KPROBES)"
				     : "no fentry on finish_task_switch(), and no kprobes (CONFIG_KPROBES)";
		return AGENT_OFF_CPU_NONE;
	}
	if (find_text_symbol("finish_task_switch", ret_sym, size) != 1) {
		*ret_why = "no finish_task_switch in /proc/kallsyms";
		return AGENT_OFF_CPU_NONE;
	}
	return AGENT_OFF_CPU_KPROBE;
}

unsigned long long agent_prealloc_bytes(unsigned max_entries, unsigned key_size, unsigned value_size)
{
	/* The kernel's element: a list node, a hash, an LRU/freelist link (about 48 bytes), then key and value, each 8-aligned. */
	unsigned long long elem = 48 + ((key_size + 7ULL) & ~7ULL) + ((value_size + 7ULL) & ~7ULL);

	return elem * max_entries;
}
