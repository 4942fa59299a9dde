// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <linux/perf_event.h>
#include <linux/types.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "common/fileio.h"
#include "common/log.h"
#include "profile.h"
#include "profile.skel.h"
#include "agent/kernel-probe.h"
#include "config.h"
#include "sampler.h"
#include "util.h"

/* Longest libbpf message logged (its end, for verifier logs). */
#define AGENT_LIBBPF_LOG_MAX 900

struct agent_sampler {
	struct profile_bpf *skel;
	struct ring_buffer *rb;
	struct bpf_link **links; /* one per perf event */
	int n_links;
	struct bpf_link *exec_link, *exit_link, *mmap_link, *fork_link;
	struct bpf_link *off_cpu_switch_link, *off_cpu_resume_link;
	const char *off_cpu_hook;		 /* where off_cpu_resume_link is attached, or NULL */
	char off_cpu_kprobe[AGENT_KSYM_MAX + 8]; /* off_cpu_hook when it is a kprobe */
	const char *mmap_hook;			 /* what mmap_link is attached to, or NULL */
	int n_cpus;
	bool counters_one_by_one; /* the kernel refused a batched read of the counters (before 5.6) */
	uint64_t rb_bytes;
	uint64_t prealloc_bytes; /* hash maps preallocated for an old kernel (kernel-probe.h): about this much */
	agent_record_fn fn;
	void *ctx;
};

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	enum sr_log_level l = level == LIBBPF_WARN ? SR_LOG_WARN : level == LIBBPF_INFO ? SR_LOG_DEBUG : SR_LOG_TRACE;
	char *buf = NULL;
	const char *msg;
	size_t n;

	if (l > sr_log_max_level)
		return 0;
	if (vasprintf(&buf, fmt, ap) < 0)
		return 0;
	n = strlen(buf);
	while (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	/* A verifier log runs to megabytes; its end says what was refused. */
	msg = n > AGENT_LIBBPF_LOG_MAX ? buf + n - AGENT_LIBBPF_LOG_MAX : buf;
	sr_log(l, "libbpf", msg, "%s", "");
	free(buf);
	return 0;
}

void agent_libbpf_log_init(void)
{
	libbpf_set_print(libbpf_print);
}

int agent_parse_cpu_list(const char *s, bool *ret_cpus, size_t max)
{
	int count = 0;

	memset(ret_cpus, 0, max * sizeof(*ret_cpus));
	while (*s && *s != '\n') {
		char *end;
		unsigned long a, b;

		errno = 0;
		a = strtoul(s, &end, 10);
		if (end == s || errno)
			return -EINVAL;
		b = a;
		s = end;
		if (*s == '-') {
			s++;
			b = strtoul(s, &end, 10);
			if (end == s || errno || b < a)
				return -EINVAL;
			s = end;
		}
		for (unsigned long c = a; c <= b && c < max; c++) {
			if (!ret_cpus[c])
				count++;
			ret_cpus[c] = true;
		}
		if (*s == ',')
			s++;
		else if (*s && *s != '\n')
			return -EINVAL;
	}
	return count;
}

/*
 * The ring buffer's pages are mapped into the agent (twice: libbpf maps the
 * data area again behind itself so that a record wrapping around reads
 * contiguously), so its size is the largest part of the agent's RSS. "auto"
 * (0) sizes it for AGENT_RINGBUF_AUTO_MS of samples at this frequency on
 * every CPU: a quarter of it waiting (the wake-up threshold) wakes the agent
 * long before it fills, and the 1 MiB floor leaves room for bursts of exec
 * and mmap records.
 */
/* SR_AGENT_DEBUG_STAGE_TIMES=1: the BPF program times a sample's stages into its counters (bpf/profile.h). */
static bool debug_stage_times(void)
{
	const char *v = getenv("SR_AGENT_DEBUG_STAGE_TIMES");

	return v && strcmp(v, "1") == 0;
}

static uint64_t ringbuf_size(uint64_t want, uint64_t events_per_sec, int n_cpus)
{
	uint64_t sz = AGENT_RINGBUF_MIN_BYTES;

	if (!want) {
		want = events_per_sec * (uint64_t)SR_MAX(n_cpus, 1) * sizeof(struct profile_sample) *
		       AGENT_RINGBUF_AUTO_MS / 1000;
		want = SR_MIN(SR_MAX(want, AGENT_RINGBUF_AUTO_MIN_BYTES), AGENT_RINGBUF_AUTO_MAX_BYTES);
	}
	while (sz < want && sz < AGENT_RINGBUF_MAX_BYTES)
		sz <<= 1;
	return sz;
}

static int on_record(void *ctx, void *data, size_t len)
{
	struct agent_sampler *s = ctx;

	return s->fn(s->ctx, data, len);
}

static int open_perf_events(struct agent_sampler *s, uint32_t hz, const char **ret_what)
{
	bool online[4096];
	char *buf = NULL;
	size_t len;
	int n, r;

	r = sr_read_file("/sys/devices/system/cpu/online", 4096, &buf, &len);
	if (r < 0) {
		*ret_what = "read /sys/devices/system/cpu/online";
		return r;
	}
	n = agent_parse_cpu_list(buf, online, SR_ARRAY_SIZE(online));
	free(buf);
	if (n <= 0) {
		*ret_what = "parse /sys/devices/system/cpu/online";
		return -EINVAL;
	}
	s->links = calloc((size_t)s->n_cpus, sizeof(*s->links));
	if (!s->links)
		return -ENOMEM;
	for (int cpu = 0; cpu < s->n_cpus && cpu < (int)SR_ARRAY_SIZE(online); cpu++) {
		struct perf_event_attr attr = {
			.type = PERF_TYPE_SOFTWARE,
			.config = PERF_COUNT_SW_CPU_CLOCK,
			.size = sizeof(attr),
			.sample_freq = hz,
			.freq = 1,
		};
		struct bpf_link *link;
		int fd;

		if (!online[cpu])
			continue;
		fd = (int)syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
		if (fd < 0) {
			/* A CPU that went offline meanwhile is fine; anything else is not. */
			if (errno == ENODEV)
				continue;
			*ret_what = "perf_event_open(cpu-clock)";
			return -errno;
		}
		link = bpf_program__attach_perf_event(s->skel->progs.do_sample, fd);
		if (!link) {
			r = -errno;
			close(fd);
			*ret_what = "attach BPF program to perf event";
			return r;
		}
		s->links[s->n_links++] = link;
	}
	if (s->n_links == 0) {
		*ret_what = "open perf events (no online CPU)";
		return -ENODEV;
	}
	return 0;
}

/* A function of the running kernel (an fexit target), by its BTF (NULL: none). */
static bool kernel_has_func(const struct btf *vmlinux, const char *name)
{
	return vmlinux && btf__find_by_name_kind(vmlinux, name, BTF_KIND_FUNC) >= 0;
}

/*
 * The resume side first, so no wait is stored that nothing would end, then
 * the switch side (bpf/offcpu.bpf.h).
 */
static int attach_off_cpu(struct agent_sampler *s, int hook, const char *ksym, const char **ret_what)
{
	struct profile_bpf *k = s->skel;

	switch (hook) {
	case AGENT_OFF_CPU_EXIT_TP:
		*ret_what = "attach tp_btf/sched_exit_tp (off_cpu)";
		s->off_cpu_resume_link = bpf_program__attach(k->progs.off_cpu_resume_exit_tp);
		s->off_cpu_hook = "tp_btf/sched_exit_tp";
		break;
	case AGENT_OFF_CPU_FENTRY:
		*ret_what = "attach fentry/finish_task_switch (off_cpu; BPF trampolines refused?)";
		s->off_cpu_resume_link = bpf_program__attach(k->progs.off_cpu_resume_fentry);
		s->off_cpu_hook = "fentry/finish_task_switch";
		break;
	default:
		*ret_what = "attach a kprobe on finish_task_switch (off_cpu; kprobes refused?)";
		s->off_cpu_resume_link = bpf_program__attach_kprobe(k->progs.off_cpu_resume_kprobe, false, ksym);
		snprintf(s->off_cpu_kprobe, sizeof(s->off_cpu_kprobe), "kprobe/%s", ksym);
		s->off_cpu_hook = s->off_cpu_kprobe;
		break;
	}
	if (!s->off_cpu_resume_link) {
		s->off_cpu_hook = NULL;
		return -errno;
	}
	*ret_what = "attach tp_btf/sched_switch (off_cpu)";
	s->off_cpu_switch_link = bpf_program__attach(k->progs.off_cpu_switch);
	if (!s->off_cpu_switch_link)
		return -errno;
	return 0;
}

/*
 * Kernels before 6.1 refuse a hash map allocated on demand in a perf_event
 * program (it could deadlock allocating in NMI context): there every such
 * map of the object is preallocated, which costs its max_entries up front.
 * Only maps being created count (autocreate).
 */
static int prealloc_maps(struct agent_sampler *s)
{
	struct bpf_map *m;
	int r;

	bpf_object__for_each_map(m, s->skel->obj)
	{
		if (bpf_map__type(m) != BPF_MAP_TYPE_HASH || !(bpf_map__map_flags(m) & BPF_F_NO_PREALLOC) ||
		    !bpf_map__autocreate(m))
			continue;
		r = bpf_map__set_map_flags(m, bpf_map__map_flags(m) & ~BPF_F_NO_PREALLOC);
		if (r)
			return r;
		s->prealloc_bytes +=
			agent_prealloc_bytes(bpf_map__max_entries(m), bpf_map__key_size(m), bpf_map__value_size(m));
	}
	return 0;
}

static struct agent_sampler *sampler_new(const struct agent_sampler_opts *o, bool mmap_fexit, const struct btf *vmlinux,
					 const struct agent_kernel_fallbacks *fb, agent_record_fn fn, void *ctx,
					 const char **ret_what)
{
	/* Without bpf_find_vma() only the fexit hook can report mappings, from its arguments. */
	bool vma_hooks = o->track_mmaps && !fb->mmap_args;
	struct agent_sampler *s;
	char ksym[AGENT_KSYM_MAX] = "";
	const char *why;
	int hook = AGENT_OFF_CPU_NONE;
	struct bpf_program *resume_unwinder = NULL;
	struct bpf_map *resume_progs = NULL;
	uint8_t one = 1;
	int r;

	*ret_what = "allocate";
	if (o->frequency_hz < 1 || o->frequency_hz > 1000 || o->n_pids > AGENT_MAX_PID_FILTERS ||
	    o->n_cgroups > AGENT_MAX_CGROUP_FILTERS) {
		*ret_what = "validate options";
		errno = EINVAL;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	s->fn = fn;
	s->ctx = ctx;
	agent_libbpf_log_init();
	s->n_cpus = libbpf_num_possible_cpus();
	if (s->n_cpus <= 0) {
		r = s->n_cpus < 0 ? s->n_cpus : -EINVAL;
		*ret_what = "count possible CPUs";
		goto fail;
	}

	*ret_what = "open BPF object";
	s->skel = profile_bpf__open();
	if (!s->skel) {
		r = -errno;
		goto fail;
	}
	s->skel->rodata->skip_idle = !o->include_idle;
	s->skel->rodata->skip_kthreads = !o->include_kernel_threads;
	s->skel->rodata->kernel_stacks = o->kernel_stacks;
	s->skel->rodata->filter_pids = o->n_pids > 0;
	s->skel->rodata->filter_cgroups = o->n_cgroups > 0;
	s->skel->rodata->table_unwinding = o->table_unwinding;
	s->skel->rodata->python_frames = o->table_unwinding && o->python;
	s->skel->rodata->v8_frames = o->table_unwinding && o->nodejs;
	s->skel->rodata->java_frames = o->table_unwinding && o->java;
	/* A debugging aid for bench/agent-overhead/steady.py: where a sample's time goes (PROFILE_CNT_DBG_*). */
	s->skel->rodata->debug_stage_times = debug_stage_times();
	bpf_program__set_autoload(s->skel->progs.unwind_user, o->table_unwinding);
	/* Its sized inner maps need 5.10; without table unwinding nothing refers to it. */
	bpf_map__set_autocreate(s->skel->maps.unwind_tables, o->table_unwinding);
	s->skel->rodata->track_mmaps = o->track_mmaps;
	bpf_program__set_autoload(s->skel->progs.handle_fork, o->track_mmaps);
	bpf_program__set_autoload(s->skel->progs.handle_exec, vma_hooks);
	bpf_program__set_autoload(s->skel->progs.handle_exec_plain, !vma_hooks);
	bpf_program__set_autoload(s->skel->progs.handle_vm_mmap, mmap_fexit && vma_hooks);
	bpf_program__set_autoload(s->skel->progs.handle_vm_mmap_args, mmap_fexit && !vma_hooks);
	bpf_program__set_autoload(s->skel->progs.handle_mmap_exit, vma_hooks);
	bpf_program__set_autoload(s->skel->progs.handle_vm_mmap_ret, vma_hooks);
	bpf_program__set_autoload(s->skel->progs.handle_sys_exit, vma_hooks);
	s->skel->rodata->off_cpu_min_block_ns = o->off_cpu_min_block_ns;
	s->skel->rodata->off_cpu_threshold =
		o->off_cpu_probability >= 1.0 ? 1ULL << 32 : (uint64_t)(o->off_cpu_probability * 4294967296.0);
	s->skel->rodata->off_cpu_max_per_sec = o->off_cpu_max_per_sec;
	/* Where waits end: the end of __schedule(), hooked as the kernel allows (agent/kernel-probe.h). */
	if (o->off_cpu) {
		hook = agent_off_cpu_hook(vmlinux, ksym, sizeof(ksym), &why);
		if (hook == AGENT_OFF_CPU_NONE) {
			*ret_what =
				"find a hook where off-CPU waits end (off_cpu; kernel before 6.17 without kprobes?)";
			r = -ENOTSUP;
			goto fail;
		}
		s->skel->rodata->off_cpu_kstack_skip = hook == AGENT_OFF_CPU_KPROBE ? 0 : 2;
		resume_unwinder = hook == AGENT_OFF_CPU_EXIT_TP	 ? s->skel->progs.unwind_user_exit_tp
				  : hook == AGENT_OFF_CPU_FENTRY ? s->skel->progs.unwind_user_fentry
								 : s->skel->progs.unwind_user_kprobe;
		resume_progs = hook == AGENT_OFF_CPU_EXIT_TP  ? s->skel->maps.unwind_progs_exit_tp
			       : hook == AGENT_OFF_CPU_FENTRY ? s->skel->maps.unwind_progs_fentry
							      : s->skel->maps.unwind_progs_kprobe;
	}
	bpf_program__set_autoload(s->skel->progs.off_cpu_switch, o->off_cpu);
	bpf_program__set_autoload(s->skel->progs.off_cpu_resume_exit_tp, hook == AGENT_OFF_CPU_EXIT_TP);
	bpf_program__set_autoload(s->skel->progs.off_cpu_resume_fentry, hook == AGENT_OFF_CPU_FENTRY);
	bpf_program__set_autoload(s->skel->progs.off_cpu_resume_kprobe, hook == AGENT_OFF_CPU_KPROBE);
	bpf_program__set_autoload(s->skel->progs.unwind_user_exit_tp,
				  hook == AGENT_OFF_CPU_EXIT_TP && o->table_unwinding);
	bpf_program__set_autoload(s->skel->progs.unwind_user_fentry,
				  hook == AGENT_OFF_CPU_FENTRY && o->table_unwinding);
	bpf_program__set_autoload(s->skel->progs.unwind_user_kprobe,
				  hook == AGENT_OFF_CPU_KPROBE && o->table_unwinding);
	/* Off-CPU waits share the ring buffer: "auto" makes room for their cap too. */
	s->rb_bytes = ringbuf_size(o->ring_buffer_bytes,
				   o->frequency_hz + (o->off_cpu ? SR_MIN(o->off_cpu_max_per_sec, 100000) : 0),
				   s->n_cpus);
	s->skel->rodata->wakeup_bytes = s->rb_bytes / AGENT_RINGBUF_WAKEUP_FRACTION;
	s->skel->rodata->sample_limit_bytes = s->rb_bytes - s->rb_bytes / AGENT_RINGBUF_RECORD_RESERVE_FRACTION;
	*ret_what = "size BPF maps";
	r = bpf_map__set_max_entries(s->skel->maps.events, (uint32_t)s->rb_bytes);
	if (!r)
		r = bpf_map__set_max_entries(s->skel->maps.allowed_pids, (uint32_t)SR_MAX(o->n_pids, 1));
	if (!r)
		r = bpf_map__set_max_entries(s->skel->maps.allowed_cgroups, (uint32_t)SR_MAX(o->n_cgroups, 1));
	if (!r)
		r = bpf_map__set_max_entries(s->skel->maps.seen,
					     (uint32_t)SR_MIN(SR_MAX(o->max_processes, 1024), 4u * 1024 * 1024));
	/* Allocated per process as the agent writes them (BPF_F_NO_PREALLOC): the bound costs nothing up front. */
	if (!r)
		r = bpf_map__set_max_entries(
			s->skel->maps.unwind_procs,
			o->table_unwinding ? (uint32_t)SR_MIN(SR_MAX(o->max_processes, 1024), 1024u * 1024) : 1);
	if (!r)
		r = bpf_map__set_max_entries(s->skel->maps.py_procs,
					     o->table_unwinding && o->python
						     ? (uint32_t)SR_MIN(SR_MAX(o->max_processes, 1024), 1024u * 1024)
						     : 1);
	if (!r)
		r = bpf_map__set_max_entries(s->skel->maps.v8_procs,
					     o->table_unwinding && o->nodejs
						     ? (uint32_t)SR_MIN(SR_MAX(o->max_processes, 1024), 1024u * 1024)
						     : 1);
	if (!r)
		r = bpf_map__set_max_entries(s->skel->maps.hotspot_procs,
					     o->table_unwinding && o->java
						     ? (uint32_t)SR_MIN(SR_MAX(o->max_processes, 1024), 1024u * 1024)
						     : 1);
	if (!r && !(o->table_unwinding && o->nodejs))
		r = bpf_map__set_max_entries(s->skel->maps.v8_sfis_seen, 1);
	if (!r)
		r = bpf_map__set_max_entries(s->skel->maps.known_files, AGENT_KNOWN_FILES_MAX);
	/* Task storage (off_cpu_start) needs 5.11; it is only made when off_cpu is on. */
	bpf_map__set_autocreate(s->skel->maps.off_cpu_start, o->off_cpu);
	if (!r && fb->prealloc_maps)
		r = prealloc_maps(s);
	if (r)
		goto fail;

	*ret_what = "load BPF program (verifier)";
	r = profile_bpf__load(s->skel);
	if (r)
		goto fail;
	if (o->table_unwinding) {
		uint32_t zero = 0;
		int fd = bpf_program__fd(s->skel->progs.unwind_user);

		*ret_what = "install the unwinder's tail call";
		r = bpf_map__update_elem(s->skel->maps.unwind_progs, &zero, sizeof(zero), &fd, sizeof(fd), BPF_ANY);
		if (r)
			goto fail;
		if (o->off_cpu) {
			fd = bpf_program__fd(resume_unwinder);
			r = bpf_map__update_elem(resume_progs, &zero, sizeof(zero), &fd, sizeof(fd), BPF_ANY);
			if (r)
				goto fail;
		}
	}
	*ret_what = "fill BPF allowlists";
	for (size_t i = 0; i < o->n_pids; i++) {
		r = bpf_map__update_elem(s->skel->maps.allowed_pids, &o->pids[i], sizeof(o->pids[i]), &one, 1, BPF_ANY);
		if (r)
			goto fail;
	}
	for (size_t i = 0; i < o->n_cgroups; i++) {
		r = bpf_map__update_elem(s->skel->maps.allowed_cgroups, &o->cgroup_ids[i], sizeof(o->cgroup_ids[i]),
					 &one, 1, BPF_ANY);
		if (r)
			goto fail;
	}

	*ret_what = "create ring buffer";
	s->rb = ring_buffer__new(bpf_map__fd(s->skel->maps.events), on_record, s, NULL);
	if (!s->rb) {
		r = -errno;
		goto fail;
	}
	/* Tracepoints first, so no process can exec between its first sample and our watching. */
	*ret_what = "attach tp_btf/sched_process_exec";
	s->exec_link = bpf_program__attach(vma_hooks ? s->skel->progs.handle_exec : s->skel->progs.handle_exec_plain);
	if (!s->exec_link) {
		r = -errno;
		goto fail;
	}
	*ret_what = "attach tp_btf/sched_process_exit";
	s->exit_link = bpf_program__attach(s->skel->progs.handle_exit);
	if (!s->exit_link) {
		r = -errno;
		goto fail;
	}
	/*
	 * Before the perf events too: a mapping made before its first sample
	 * must not be missed. Without tracefs, the raw sys_exit tracepoint.
	 * Without either, mappings are read from /proc only (and logged).
	 */
	if (o->track_mmaps) {
		enum sr_log_level saved = sr_log_max_level;
		int h = o->mapping_hook;
		bool any = h == AGENT_HOOK_AUTO;

		sr_log_set_level(SR_LOG_ERROR);
		if (mmap_fexit && (any || h == AGENT_HOOK_FEXIT) &&
		    (s->mmap_link = bpf_program__attach(vma_hooks ? s->skel->progs.handle_vm_mmap
								  : s->skel->progs.handle_vm_mmap_args))) {
			/* exec's own mappings arrive through it too: handle_exec need not look for them. */
			s->skel->bss->exec_maps_by_fexit = true;
			s->mmap_hook = vma_hooks ? "fexit/vm_mmap_pgoff" : "fexit/vm_mmap_pgoff:args";
		}
		/* The other hooks look the mapping up with bpf_find_vma(): not loaded without it. */
		if (!s->mmap_link && vma_hooks && (any || h == AGENT_HOOK_TRACEPOINT) &&
		    (s->mmap_link = bpf_program__attach(s->skel->progs.handle_mmap_exit)))
			s->mmap_hook = "tracepoint/syscalls/sys_exit_mmap";
		if (!s->mmap_link && vma_hooks && (any || h == AGENT_HOOK_KRETPROBE) &&
		    (s->mmap_link = bpf_program__attach(s->skel->progs.handle_vm_mmap_ret))) {
			s->skel->bss->exec_maps_by_fexit = true;
			s->mmap_hook = "kretprobe/vm_mmap_pgoff";
		}
		sr_log_set_level(saved);
		if (!s->mmap_link && vma_hooks && (any || h == AGENT_HOOK_SYS_EXIT) &&
		    (s->mmap_link = bpf_program__attach(s->skel->progs.handle_sys_exit)))
			s->mmap_hook = "tp_btf/sys_exit";
		if (s->mmap_link)
			s->fork_link = bpf_program__attach(s->skel->progs.handle_fork);
		if (!s->mmap_link && !any) {
			/* The operator named this hook: not having it is an error, not a fallback. */
			r = -(errno ? errno : ENOTSUP);
			*ret_what = h == AGENT_HOOK_FEXIT	 ? "attach fexit/vm_mmap_pgoff (profiling.mapping_hook)"
				    : h == AGENT_HOOK_TRACEPOINT ? "attach tracepoint syscalls/sys_exit_mmap "
								   "(profiling.mapping_hook; is tracefs mounted?)"
				    : h == AGENT_HOOK_KRETPROBE
					    ? "attach kretprobe/vm_mmap_pgoff (profiling.mapping_hook)"
					    : "attach tp_btf/sys_exit (profiling.mapping_hook)";
			goto fail;
		}
		if (!s->mmap_link)
			sr_log_warn("agent",
				    "cannot watch mmap(2) (no syscall tracepoint); libraries of short-lived processes "
				    "may go unattributed",
				    "error=\"%s\"", strerror(errno));
	}
	if (o->off_cpu) {
		r = attach_off_cpu(s, hook, ksym, ret_what);
		if (r < 0)
			goto fail;
	}
	r = open_perf_events(s, o->frequency_hz, ret_what);
	if (r < 0)
		goto fail;
	*ret_what = NULL;
	return s;
fail:
	agent_sampler_free(s);
	errno = r < 0 ? -r : (r ? r : EINVAL);
	return NULL;
}

static struct agent_sampler *sampler_try(const struct agent_sampler_opts *o, const struct btf *vmlinux,
					 agent_record_fn fn, void *ctx, const char **ret_what)
{
	/*
	 * Mappings are best watched at vm_mmap_pgoff's exit: every file mapping,
	 * mmap(2)'s and the ELF loader's, goes through it, and nothing else does
	 * (the raw sys_exit tracepoint, the fallback without tracefs, runs for
	 * every system call). Where BPF trampolines are refused (lockdown, no
	 * JIT), the object is loaded again without it.
	 */
	bool fexit = o->track_mmaps && (o->mapping_hook == AGENT_HOOK_AUTO || o->mapping_hook == AGENT_HOOK_FEXIT) &&
		     kernel_has_func(vmlinux, "vm_mmap_pgoff");
	enum sr_log_level saved = sr_log_max_level;
	struct agent_kernel_fallbacks fb;
	struct agent_sampler *s;

	agent_kernel_fallbacks(&fb);
	if (o->track_mmaps && fb.mmap_args && o->mapping_hook != AGENT_HOOK_AUTO &&
	    o->mapping_hook != AGENT_HOOK_FEXIT) {
		*ret_what = "watch mappings: this profiling.mapping_hook needs bpf_find_vma() (Linux 5.17); "
			    "use auto or fexit";
		errno = ENOTSUP;
		return NULL;
	}
	if (fexit) {
		/*
		 * A kernel that refuses BPF trampolines refuses a two-instruction
		 * fexit program too: asked first, so such a host does not pay for
		 * an object's maps and programs (a third of a second) only to
		 * have it refused at its fexit program.
		 */
		int probe = agent_probe_fexit(vmlinux, "vm_mmap_pgoff");

		if (probe > 0) {
			/* A refusal here is expected on such hosts; the second try logs whatever else is wrong. */
			if (saved < SR_LOG_DEBUG)
				sr_log_set_level(SR_LOG_ERROR);
			s = sampler_new(o, true, vmlinux, &fb, fn, ctx, ret_what);
			sr_log_set_level(saved);
			if (s)
				return s;
		} else {
			errno = probe < 0 ? -probe : ENOENT;
		}
		if (o->mapping_hook == AGENT_HOOK_FEXIT) {
			int e = errno;
			*ret_what = "load fexit/vm_mmap_pgoff (profiling.mapping_hook; BPF trampolines refused?)";
			errno = e;
			return NULL;
		}
		sr_log_debug("agent", "BPF trampolines refused; watching mappings another way", "error=\"%s\"",
			     strerror(errno));
	}
	if (o->track_mmaps && o->mapping_hook == AGENT_HOOK_FEXIT) {
		*ret_what = "find vm_mmap_pgoff in the kernel's BTF (profiling.mapping_hook: fexit)";
		errno = ENOENT;
		return NULL;
	}
	return sampler_new(o, false, vmlinux, &fb, fn, ctx, ret_what);
}

struct agent_sampler *agent_sampler_new(const struct agent_sampler_opts *o, agent_record_fn fn, void *ctx,
					const char **ret_what)
{
	/*
	 * The kernel's BTF (megabytes to parse) is read once here for what the
	 * agent looks up in it: the mapping hook's function and the off-CPU
	 * hook. libbpf reads it again to load the object; it takes no parsed copy.
	 */
	bool want = (o->track_mmaps && (o->mapping_hook == AGENT_HOOK_AUTO || o->mapping_hook == AGENT_HOOK_FEXIT)) ||
		    o->off_cpu;
	struct btf *vmlinux = want ? btf__load_vmlinux_btf() : NULL;
	struct agent_sampler *s = sampler_try(o, vmlinux, fn, ctx, ret_what);
	int e = errno;

	btf__free(vmlinux);
	errno = e;
	return s;
}

const char *agent_sampler__mmap_hook(const struct agent_sampler *s)
{
	return s->mmap_hook;
}

int agent_sampler__poll(struct agent_sampler *s, int timeout_ms)
{
	int r = ring_buffer__poll(s->rb, timeout_ms), c;

	if (r < 0 && r != -EINTR)
		return r;
	/*
	 * Samples are submitted without a wakeup (profile.bpf.c), so epoll
	 * does not report them: consume whatever is there after every wait.
	 */
	c = ring_buffer__consume(s->rb);
	if (c < 0)
		return c;
	return (r > 0 ? r : 0) + c;
}

int agent_sampler__consume(struct agent_sampler *s)
{
	return ring_buffer__consume(s->rb);
}

/*
 * Every counter on every CPU in one system call (the metrics are refreshed
 * every second: one lookup a counter was about 50 calls a second); a kernel
 * without batched map reads gets them one by one.
 */
static int read_counters(struct agent_sampler *s, uint64_t *vals)
{
	int fd = bpf_map__fd(s->skel->maps.counters);
	size_t stride = (size_t)s->n_cpus;
	uint32_t keys[PROFILE_CNT__MAX], out_batch = 0;
	uint32_t count = PROFILE_CNT__MAX;
	int r;

	if (!s->counters_one_by_one) {
		LIBBPF_OPTS(bpf_map_batch_opts, opts);

		r = bpf_map_lookup_batch(fd, NULL, &out_batch, keys, vals, &count, &opts);
		/* ENOENT: the end of the array was reached, with every entry read. */
		if ((r == 0 || errno == ENOENT) && count == PROFILE_CNT__MAX) {
			uint32_t i = 0;

			while (i < count && keys[i] == i)
				i++;
			if (i == count)
				return 0;
		}
		s->counters_one_by_one = true;
	}
	for (uint32_t k = 0; k < PROFILE_CNT__MAX; k++) {
		r = bpf_map__lookup_elem(s->skel->maps.counters, &k, sizeof(k), vals + k * stride,
					 stride * sizeof(uint64_t), 0);
		if (r)
			return r;
	}
	return 0;
}

int agent_sampler__counters(struct agent_sampler *s, uint64_t *ret_totals, uint64_t *ret_per_cpu_lost)
{
	uint64_t *vals = calloc((size_t)PROFILE_CNT__MAX * (size_t)s->n_cpus, sizeof(uint64_t));
	int r;

	memset(ret_totals, 0, PROFILE_CNT__MAX * sizeof(*ret_totals));
	if (!vals)
		return -ENOMEM;
	r = read_counters(s, vals);
	for (uint32_t k = 0; k < PROFILE_CNT__MAX && r == 0; k++) {
		const uint64_t *v = vals + (size_t)k * (size_t)s->n_cpus;

		for (int c = 0; c < s->n_cpus; c++) {
			ret_totals[k] += v[c];
			if (k == PROFILE_CNT_LOST_RINGBUF && ret_per_cpu_lost)
				ret_per_cpu_lost[c] = v[c];
		}
	}
	free(vals);
	return r;
}

int agent_sampler__n_cpus(const struct agent_sampler *s)
{
	return s->n_cpus;
}

int agent_sampler__n_events(const struct agent_sampler *s)
{
	return s->n_links;
}

uint64_t agent_sampler__ringbuf_bytes(const struct agent_sampler *s)
{
	return s->rb_bytes;
}

uint64_t agent_sampler__prealloc_bytes(const struct agent_sampler *s)
{
	return s->prealloc_bytes;
}

void agent_sampler__maps(const struct agent_sampler *s, struct agent_sampler_maps *ret)
{
	ret->unwind_tables = bpf_map__fd(s->skel->maps.unwind_tables);
	ret->unwind_procs = bpf_map__fd(s->skel->maps.unwind_procs);
	ret->unwind_files = bpf_map__fd(s->skel->maps.unwind_files);
	ret->py_procs = bpf_map__fd(s->skel->maps.py_procs);
	ret->v8_procs = bpf_map__fd(s->skel->maps.v8_procs);
	ret->hotspot_procs = bpf_map__fd(s->skel->maps.hotspot_procs);
	ret->known_files = bpf_map__fd(s->skel->maps.known_files);
}

const char *agent_sampler__off_cpu_hook(const struct agent_sampler *s)
{
	return s->off_cpu_hook;
}

bool agent_sampler__tracks_mmaps(const struct agent_sampler *s)
{
	return s->mmap_link != NULL;
}

void agent_sampler__stop(struct agent_sampler *s)
{
	for (int i = 0; i < s->n_links; i++) {
		bpf_link__destroy(s->links[i]);
		s->links[i] = NULL;
	}
	bpf_link__destroy(s->exec_link);
	bpf_link__destroy(s->exit_link);
	bpf_link__destroy(s->mmap_link);
	bpf_link__destroy(s->fork_link);
	bpf_link__destroy(s->off_cpu_switch_link);
	bpf_link__destroy(s->off_cpu_resume_link);
	s->exec_link = s->exit_link = s->mmap_link = s->fork_link = NULL;
	s->off_cpu_switch_link = s->off_cpu_resume_link = NULL;
}

void agent_sampler_free(struct agent_sampler *s)
{
	if (!s)
		return;
	/* Detach first so nothing writes into the ring buffer we tear down. */
	for (int i = 0; i < s->n_links; i++)
		bpf_link__destroy(s->links[i]);
	free(s->links);
	bpf_link__destroy(s->exec_link);
	bpf_link__destroy(s->exit_link);
	bpf_link__destroy(s->mmap_link);
	bpf_link__destroy(s->fork_link);
	bpf_link__destroy(s->off_cpu_switch_link);
	bpf_link__destroy(s->off_cpu_resume_link);
	ring_buffer__free(s->rb);
	profile_bpf__destroy(s->skel);
	free(s);
}
