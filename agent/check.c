// SPDX-License-Identifier: Apache-2.0
/*
 * --check: everything the agent needs from the node, tested the way the
 * agent will use it, each failure with what to do. FAIL lines are counted
 * (the agent cannot profile); WARN lines degrade it (named how).
 *
 * Capabilities (least privilege, docs/install-kubernetes.md "Agent privileges"), and what each is for:
 *   BPF + PERFMON     load the program, open system-wide perf events (SYS_ADMIN before 5.8)
 *   SYS_PTRACE        read /proc/PID/maps and /proc/PID/root of other users' processes
 *   CHECKPOINT_RESTORE open /proc/PID/map_files (deleted binaries, other mount namespaces)
 *   DAC_READ_SEARCH   open executables whatever their permissions
 *   SYS_RESOURCE      raise RLIMIT_MEMLOCK (kernels before 5.11 charge BPF maps to it)
 *   SYSLOG            read kernel module addresses in /proc/modules (kptr_restrict)
 * After setup the agent drops all but the few it still needs (privs.c); the
 * check says which stay.
 */
#include <errno.h>
#include <inttypes.h>
#include <linux/types.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>

#include "common/fileio.h"
#include "agent.h"
#include "agent/config.h"
#include "agent/kernel-probe.h"
#include "common/log.h"
#include "privs.h"
#include "profile.h"
#include "cgroup-fs.h"
#include "sampler.h"
#include "util.h"

struct check {
	FILE *out;
	int failed;
	int warned;
};

static void SR_PRINTF(4, 5) report(struct check *c, const char *status, const char *fix, const char *fmt, ...)
{
	va_list ap;

	fprintf(c->out, "[%-4s] ", status);
	va_start(ap, fmt);
	vfprintf(c->out, fmt, ap);
	va_end(ap);
	fputc('\n', c->out);
	if (fix)
		fprintf(c->out, "       fix: %s\n", fix);
	if (strcmp(status, "FAIL") == 0)
		c->failed++;
	else if (strcmp(status, "WARN") == 0)
		c->warned++;
}

static int read_long(const char *path, long *ret)
{
	char *buf = NULL;
	size_t len;
	int r = sr_read_file(path, 4096, &buf, &len);

	if (r < 0)
		return r;
	*ret = strtol(buf, NULL, 10);
	free(buf);
	return 0;
}

static uint64_t effective_caps(void)
{
	char *buf = NULL, *p;
	size_t len;
	unsigned long long caps = 0;

	if (sr_read_file("/proc/self/status", 1 << 16, &buf, &len) < 0)
		return 0;
	p = strstr(buf, "\nCapEff:");
	if (p)
		caps = strtoull(p + 8, NULL, 16);
	free(buf);
	return caps;
}

static bool has_cap(uint64_t caps, int bit)
{
	return (caps >> bit) & 1;
}

static int kernel_version(const char *release, int *major, int *minor)
{
	return sscanf(release, "%d.%d", major, minor) == 2 ? 0 : -EINVAL;
}

static int record_nothing(void *ctx, const void *data, size_t len)
{
	(void)ctx;
	(void)data;
	(void)len;
	return 0;
}

/*
 * The kernel features the BPF programs use, each probed as the verifier
 * sees it and named with the release that brought it, so that a refusal
 * says what is missing instead of "Invalid argument". A feature the agent
 * cannot start without FAILs (for some, only under the settings that need
 * it); one it falls back from (table unwinding, Python frames) WARNs. The lines read "kernel lacks ..." so that
 * tests can tell a kernel too old from a broken agent. Returns the number of
 * FAIL lines.
 */
static int check_kernel_features(struct check *c, const struct agent_config *cfg)
{
	const struct agent_profiling_config *pc = &cfg->profiling;
	bool mmaps = pc->mapping_hook != AGENT_HOOK_NONE;
	int failed = c->failed, r;
	struct btf *btf;
	char have[512] = "";
	size_t n = 0;

#define HAVE(what) n += (size_t)snprintf(have + n, n < sizeof(have) ? sizeof(have) - n : 0, "%s%s", n ? ", " : "", what)
	if (libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, NULL) == 1)
		HAVE("ring buffer (5.8)");
	else
		report(c, "FAIL", "upgrade the node's kernel to 5.8 or later",
		       "kernel lacks the BPF ring buffer (Linux 5.8): samples have no way out");

	btf = btf__load_vmlinux_btf();
	if (btf && btf__find_by_name_kind(btf, "btf_trace_sched_process_exec", BTF_KIND_TYPEDEF) >= 0)
		HAVE("tp_btf (5.5)");
	else if (btf)
		report(c, "FAIL", "upgrade the node's kernel to 5.5 or later",
		       "kernel lacks BTF-typed tracepoints (tp_btf, Linux 5.5): exec and exit cannot be watched");

	r = agent_probe_perf_event_on_demand_map();
	if (r == 1)
		HAVE("hash maps allocated on demand in perf_event programs (6.1)");
	else if (r == 0)
		report(c, "WARN", "upgrade the node's kernel to 6.1 or later, or lower profiling.max_processes",
		       "kernel lacks hash maps allocated on demand (BPF_F_NO_PREALLOC) in perf_event programs "
		       "(Linux 6.1): the agent preallocates them at their full size (below)");

	if (agent_probe_helper(BPF_FUNC_loop) == 1)
		HAVE("bpf_loop (5.17)");
	else
		report(c, "WARN", "upgrade the node's kernel to 5.17 or later",
		       "kernel lacks bpf_loop() (Linux 5.17): table unwinding (profiling.unwinding: auto) cannot load; "
		       "the agent falls back to frame pointers");

	/* The cgroup filter's walk up a sample's cgroups (bpf/common.bpf.h cgroup_allowed()). */
	if (agent_probe_helper(BPF_FUNC_get_current_ancestor_cgroup_id) == 1)
		HAVE("bpf_get_current_ancestor_cgroup_id in perf_event programs");
	else
		report(c, pc->n_cgroups ? "FAIL" : "WARN", "upgrade the node's kernel, or filter by profiling.pids",
		       "kernel lacks bpf_get_current_ancestor_cgroup_id() in perf_event programs: "
		       "profiling.cgroups cannot be used");
	/* Without it only fexit/vm_mmap_pgoff reports mappings, from its arguments (bpf/profile.bpf.c). */
	if (agent_probe_helper(BPF_FUNC_find_vma) == 1)
		HAVE("bpf_find_vma (5.17)");
	else if (mmaps && pc->mapping_hook != AGENT_HOOK_AUTO && pc->mapping_hook != AGENT_HOOK_FEXIT)
		report(c, "FAIL", "set profiling.mapping_hook: auto (or fexit), or upgrade the node's kernel to 5.17",
		       "kernel lacks bpf_find_vma() (Linux 5.17), which profiling.mapping_hook: %s needs",
		       agent_mapping_hook_names[pc->mapping_hook]);
	else
		report(c, "WARN", "upgrade the node's kernel to 5.17 or later",
		       "kernel lacks bpf_find_vma() (Linux 5.17): executable mappings are reported from "
		       "fexit/vm_mmap_pgoff's arguments only (no tracepoint, kretprobe or sys_exit hook where "
		       "BPF trampolines are refused)");
	/* Python frames read the task with bpf_get_current_task(): only off-CPU needs the BTF-typed one, as task storage does (5.11). */
	if (agent_probe_helper(BPF_FUNC_task_pt_regs) == 1)
		HAVE("bpf_task_pt_regs (5.15)");
	else
		report(c, "WARN", "upgrade the node's kernel to 5.15 or later",
		       "kernel lacks bpf_task_pt_regs() (Linux 5.15): table unwinding cannot load (the agent "
		       "falls back to frame pointers)");

	/* Off-CPU: per-thread storage, and a hook where a thread resumes. */
	if (libbpf_probe_bpf_map_type(BPF_MAP_TYPE_TASK_STORAGE, NULL) == 1)
		HAVE("task storage (5.11)");
	else
		report(c, cfg->off_cpu.enabled ? "FAIL" : "WARN", "upgrade the node's kernel to 5.11 or later",
		       "kernel lacks BPF task storage (Linux 5.11): off_cpu.enabled cannot be used");
	{
		char sym[AGENT_KSYM_MAX];
		const char *what = NULL;
		int hook = agent_off_cpu_hook(btf, sym, sizeof(sym), &what);

		if (hook == AGENT_OFF_CPU_EXIT_TP)
			HAVE("off-CPU resume at tp_btf/sched_exit_tp (6.17)");
		else if (hook == AGENT_OFF_CPU_FENTRY)
			HAVE("off-CPU resume at fentry/finish_task_switch (before 6.17)");
		else if (hook == AGENT_OFF_CPU_KPROBE)
			report(c, "ok", NULL,
			       "off-CPU resume at kprobe/%s: the kernel has neither sched_exit_tp (6.17) nor a "
			       "finish_task_switch() an fentry can attach to (%s)",
			       sym, what);
		else
			report(c, cfg->off_cpu.enabled ? "FAIL" : "WARN",
			       "run 6.17 or later, or a kernel with kprobes (CONFIG_KPROBES) or BPF trampolines",
			       "kernel lacks sched_exit_tp (Linux 6.17), and finish_task_switch() can be hooked "
			       "neither "
			       "by fentry nor by kprobe (%s): off_cpu.enabled cannot be used",
			       what);
	}
	btf__free(btf);
#undef HAVE
	if (n)
		report(c, "ok", NULL, "kernel has %s", have);

	/* Containers' files are opened with openat2's RESOLVE_IN_ROOT (5.6); without it, a walk that does the same. */
	r = (int)syscall(SYS_openat2, -1, NULL, NULL, 0);
	if (r < 0 && errno == ENOSYS)
		report(c, "WARN", "upgrade the node's kernel to 5.6 or later, or allow openat2 in the seccomp profile",
		       "kernel (or seccomp) lacks openat2 (Linux 5.6): containers' files are resolved component by "
		       "component instead");
	return c->failed - failed;
}

/* Which capabilities the agent keeps once setup is done (privs.h), from those this process holds. */
static void report_kept(struct check *c, const struct agent_config *cfg)
{
	struct agent_privs_needs needs = { .kernel_symbols = cfg->profiling.kernel_stacks };
	struct agent_privs p;
	const char *admin_for;
	char kept[512], dropped[128];
	uint64_t keep, setup = AGENT_CAP(AGENT_CAP_PERFMON) | AGENT_CAP(AGENT_CAP_SYS_ADMIN) |
			       AGENT_CAP(AGENT_CAP_SYS_RESOURCE);

	if (agent_privs_read(&p) < 0)
		return;
	keep = agent_privs_wanted(p.permitted, &needs, &admin_for);
	agent_privs_names(keep, kept, sizeof(kept));
	/* Of the dropped ones, those setup uses: the rest (root's dozens) would drown the line. */
	agent_privs_names(p.permitted & ~keep & setup, dropped, sizeof(dropped));
	if (admin_for)
		report(c, "WARN",
		       "grant CAP_BPF and CAP_CHECKPOINT_RESTORE (kernel 5.9 or later) instead of CAP_SYS_ADMIN",
		       "after setup the agent keeps CAP_SYS_ADMIN, for %s", admin_for);
	report(c, "ok", NULL,
	       "after setup the agent keeps only %s (drops %s and the %d others held) and sets no_new_privs (%s)", kept,
	       dropped, __builtin_popcountll(p.permitted & ~keep & ~setup),
	       (p.effective & AGENT_CAP(AGENT_CAP_SETPCAP)) ? "the bounding set too"
							    : "the bounding set stays as granted: no CAP_SETPCAP");
}

int agent_check(const struct agent_config *cfg, FILE *out)
{
	struct check c = { .out = out };
	struct utsname u;
	int major = 0, minor = 0;
	uint64_t caps = effective_caps();
	bool root_like = has_cap(caps, AGENT_CAP_SYS_ADMIN);
	bool bpf_caps = (has_cap(caps, AGENT_CAP_BPF) && has_cap(caps, AGENT_CAP_PERFMON)) || root_like;
	long v;
	char mnt[4096];
	int missing = 0;

	fprintf(out, "stackrelay-agent preflight (uid %u, CapEff %016" PRIx64 ")\n", (unsigned)geteuid(), caps);

	/* Kernel */
	if (uname(&u) < 0 || kernel_version(u.release, &major, &minor) < 0)
		report(&c, "FAIL", "run on Linux", "kernel version unknown");
	else if (major < 5 || (major == 5 && minor < 8))
		report(&c, "FAIL", "upgrade the node's kernel to 5.8 or later",
		       "kernel %s: the BPF ring buffer and CAP_BPF need 5.8 or later", u.release);
	else
		report(&c, "ok", NULL, "kernel %s (5.8 or later)", u.release);

	/* BTF */
	if (access("/sys/kernel/btf/vmlinux", R_OK) == 0)
		report(&c, "ok", NULL, "kernel BTF at /sys/kernel/btf/vmlinux (CO-RE)");
	else
		report(&c, "FAIL",
		       "use a kernel built with CONFIG_DEBUG_INFO_BTF=y (every major distribution's since 2020), "
		       "or mount /sys from the host into the container",
		       "kernel BTF missing: /sys/kernel/btf/vmlinux: %s", strerror(errno));

	/* Capabilities */
	if (bpf_caps)
		report(&c, "ok", NULL, "capabilities to load BPF and open perf events (%s)",
		       root_like ? "CAP_SYS_ADMIN" : "CAP_BPF + CAP_PERFMON");
	else
		report(&c, "FAIL",
		       "run as root, or grant CAP_BPF and CAP_PERFMON (securityContext.capabilities.add: [BPF, "
		       "PERFMON, ...]; CAP_SYS_ADMIN on kernels before 5.8)",
		       "missing CAP_BPF/CAP_PERFMON: cannot load the sampling program");
	if (!has_cap(caps, AGENT_CAP_SYS_PTRACE))
		report(&c, "WARN", "grant CAP_SYS_PTRACE (and run with hostPID: true in Kubernetes)",
		       "no CAP_SYS_PTRACE: other users' processes' mappings are unreadable; their frames stay "
		       "unattributed");
	else
		report(&c, "ok", NULL, "CAP_SYS_PTRACE: mappings of every process are readable");
	if (!has_cap(caps, AGENT_CAP_CHECKPOINT_RESTORE) && !root_like)
		report(&c, "WARN", "grant CAP_CHECKPOINT_RESTORE",
		       "no CAP_CHECKPOINT_RESTORE: /proc/PID/map_files is closed; deleted binaries cannot be "
		       "identified");
	else
		report(&c, "ok", NULL, "/proc/PID/map_files usable (deleted and containers' binaries)");
	if (!has_cap(caps, AGENT_CAP_DAC_READ_SEARCH))
		report(&c, "WARN", "grant CAP_DAC_READ_SEARCH",
		       "no CAP_DAC_READ_SEARCH: unreadable executables "
		       "cannot be identified");
	if (!has_cap(caps, AGENT_CAP_SYSLOG))
		report(&c, "WARN", "grant CAP_SYSLOG",
		       "no CAP_SYSLOG: module addresses in /proc/modules read as 0; "
		       "kernel frames in modules are not attributed to their module");

	report_kept(&c, cfg);

	/* perf_event_paranoid */
	if (read_long("/proc/sys/kernel/perf_event_paranoid", &v) < 0)
		report(&c, "FAIL", "mount procfs at /proc", "/proc/sys/kernel/perf_event_paranoid unreadable");
	else if (v > 0 && !bpf_caps)
		report(&c, "FAIL", "grant CAP_PERFMON, or sysctl -w kernel.perf_event_paranoid=0",
		       "perf_event_paranoid=%ld forbids system-wide perf events without CAP_PERFMON", v);
	else
		report(&c, "ok", NULL, "perf_event_paranoid=%ld%s", v, v > 0 ? " (CAP_PERFMON overrides it)" : "");
	if (read_long("/proc/sys/kernel/perf_event_max_sample_rate", &v) == 0 &&
	    (uint64_t)v < cfg->profiling.frequency_hz)
		report(&c, "WARN", "sysctl -w kernel.perf_event_max_sample_rate=1000, or lower profiling.frequency",
		       "perf_event_max_sample_rate=%ld is below profiling.frequency=%" PRIu64
		       ": the kernel will sample less often",
		       v, cfg->profiling.frequency_hz);
	if (read_long("/proc/sys/kernel/perf_event_max_stack", &v) == 0 && v < PROFILE_MAX_STACK_DEPTH)
		report(&c, "WARN", "sysctl -w kernel.perf_event_max_stack=127",
		       "perf_event_max_stack=%ld: stacks deeper than that are cut", v);

	/* RLIMIT_MEMLOCK matters only before 5.11 (memcg accounting of BPF memory came then). */
	if (major > 0 && (major < 5 || (major == 5 && minor < 11))) {
		struct rlimit rl;
		if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
		    rl.rlim_cur < 64ULL * 1024 * 1024 && !has_cap(caps, AGENT_CAP_SYS_RESOURCE))
			report(&c, "FAIL", "grant CAP_SYS_RESOURCE or raise the memlock limit (ulimit -l unlimited)",
			       "RLIMIT_MEMLOCK is %llu bytes: too small for the BPF maps on kernel %s",
			       (unsigned long long)rl.rlim_cur, u.release);
	}

	/* PID namespace: BPF sees host PIDs, so /proc must be the host's. */
	if (agent_in_child_pid_namespace() > 0)
		report(&c, "FAIL", "run in the host's PID namespace (Kubernetes: hostPID: true; docker: --pid=host)",
		       "the agent runs in a child PID namespace: sampled PIDs do not match /proc here, so no "
		       "process could be attributed");
	else
		report(&c, "ok", NULL, "host PID namespace: sampled PIDs match /proc");

	/* cgroup v2: container filters and cgroup IDs */
	if (agent_cgroup2_mount(mnt, sizeof(mnt)) == 0)
		report(&c, "ok", NULL, "cgroup v2 mounted at %s", mnt);
	else
		report(&c, cfg->profiling.n_cgroups ? "FAIL" : "WARN", "mount cgroup2 (systemd does by default)",
		       "no cgroup v2 mount: profiling.cgroups cannot be used");

	/* The real thing: load, size and attach the program as agent_run will. */
	if (bpf_caps)
		missing = check_kernel_features(&c, cfg);
	if (bpf_caps) {
		struct agent_sampler_opts so = {
			.frequency_hz = (uint32_t)SR_MAX(SR_MIN(cfg->profiling.frequency_hz, 1000), 1),
			.include_kernel_threads = true,
			.kernel_stacks = true,
			.ring_buffer_bytes = cfg->profiling.ring_buffer_bytes,
			/* As agent_run sizes the maps: what preallocating them costs (kernels before 6.1) depends on these. */
			.max_processes = cfg->profiling.max_processes,
			.python = cfg->python.enabled,
			.nodejs = cfg->nodejs.enabled,
			.java = cfg->java.enabled,
			.table_unwinding = cfg->profiling.unwinding == AGENT_UNWIND_AUTO,
			/* As agent_run will: mappings watched unless profiling.mapping_hook is none. */
			.track_mmaps = cfg->profiling.mapping_hook != AGENT_HOOK_NONE,
			.mapping_hook = cfg->profiling.mapping_hook,
		};
		const char *what = NULL;
		enum sr_log_level saved = sr_log_max_level;
		struct agent_sampler *s;

		/* The verifier log would drown the report; the failing step is named below. */
		sr_log_set_level(SR_LOG_ERROR);
		s = agent_sampler_new(&so, record_nothing, NULL, &what);
		/* The agent falls back to frame pointers where table unwinding cannot load (agent/run.c): so does the check. */
		if (!s && so.table_unwinding && !(what && strstr(what, "profiling.mapping_hook"))) {
			so.table_unwinding = false;
			s = agent_sampler_new(&so, record_nothing, NULL, &what);
			if (!s)
				so.table_unwinding = true;
		}
		sr_log_set_level(saved);
		if (s) {
			report(&c, "ok", NULL,
			       "BPF program loads; %d cpu-clock perf events and the exec/exit "
			       "tracepoints (tp_btf: no tracefs needed) attach",
			       agent_sampler__n_events(s));
			if (agent_sampler__prealloc_bytes(s))
				report(&c, "ok", NULL,
				       "hash maps preallocated for this kernel: about %" PRIu64
				       " KiB of kernel memory up front under this configuration",
				       agent_sampler__prealloc_bytes(s) / 1024);
			const char *hook = agent_sampler__mmap_hook(s);

			if (hook && strcmp(hook, "tp_btf/sys_exit") == 0)
				report(&c, "WARN",
				       "mount tracefs (/sys/kernel/tracing; the Helm chart does) or allow BPF "
				       "trampolines or kprobes",
				       "executable mappings are reported as they are made, but through the raw "
				       "sys_exit tracepoint, which runs for every system call on the host");
			else if (hook)
				report(&c, "ok", NULL,
				       "executable mappings are reported as they are made (%s): short-lived "
				       "processes are attributed",
				       hook);
			else
				report(&c, "WARN",
				       "mount tracefs (/sys/kernel/tracing), or run a kernel with "
				       "raw syscall tracepoints and bpf_find_vma (5.17+)",
				       "mappings are read from /proc only: libraries of processes that exit "
				       "within ~100 ms may go unattributed");
			if (so.table_unwinding)
				report(&c, "ok", NULL,
				       "table unwinding (profiling.unwinding: auto): user stacks are unwound "
				       "from .eh_frame, also through code without frame pointers");
			else
				report(&c, "WARN", "set profiling.unwinding: auto",
				       "frame-pointer unwinding only (profiling.unwinding: fp): stacks through code "
				       "built without frame pointers stop early");
			agent_sampler_free(s);
		} else {
			report(&c, "FAIL",
			       missing ? "see the kernel features missing above"
				       : "see the lines above; run with --log-level debug for libbpf's log",
			       "BPF sampling does not start: %s: %s", what ? what : "?", strerror(errno));
		}
	}

	if (c.failed)
		fprintf(out, "%d check%s failed, %d warning%s: the agent cannot profile this node\n", c.failed,
			c.failed == 1 ? "" : "s", c.warned, c.warned == 1 ? "" : "s");
	else
		fprintf(out, "all checks passed (%d warning%s)\n", c.warned, c.warned == 1 ? "" : "s");
	return c.failed;
}
