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
#include "common/log.h"
#include "privs.h"
#include "profile.h"
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
 * Whether the kernel lets a perf_event program use a hash map allocated on
 * demand (BPF_F_NO_PREALLOC): kernels before 6.1 refuse it, since such a map
 * allocated from NMI context could deadlock. The verifier checks every map
 * a program refers to as it loads, so a program that only loads the map's
 * address is enough. 1 allowed, 0 refused, < 0 the probe could not run.
 */
static int probe_perf_event_on_demand_map(void)
{
	LIBBPF_OPTS(bpf_map_create_opts, mo, .map_flags = BPF_F_NO_PREALLOC);
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

/*
 * Whether an fentry program can attach to the kernel function: its BTF
 * entry is not enough, since a build may keep the name in BTF while the
 * compiler emitted only a clone (finish_task_switch.isra.0), which the
 * verifier then cannot find. 1 yes, 0 no such function, < 0 refused.
 */
static int probe_fentry(const struct btf *btf, const char *func)
{
	LIBBPF_OPTS(bpf_prog_load_opts, po, .expected_attach_type = BPF_TRACE_FENTRY);
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

/* 1 when a perf_event program may call the helper, 0 when the kernel lacks it, < 0 unknown. */
static int probe_helper(enum bpf_func_id id)
{
	return libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, id, NULL);
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

	r = probe_perf_event_on_demand_map();
	if (r == 1)
		HAVE("hash maps allocated on demand in perf_event programs (6.1)");
	else if (r == 0)
		report(c, "FAIL", "upgrade the node's kernel to 6.1 or later",
		       "kernel lacks hash maps allocated on demand (BPF_F_NO_PREALLOC) in perf_event programs "
		       "(Linux 6.1): the sampling program cannot load");

	if (probe_helper(BPF_FUNC_loop) == 1)
		HAVE("bpf_loop (5.17)");
	else
		report(c, "WARN", "upgrade the node's kernel to 5.17 or later",
		       "kernel lacks bpf_loop() (Linux 5.17): table unwinding (profiling.unwinding: auto) cannot load; "
		       "the agent falls back to frame pointers");

	if (probe_helper(BPF_FUNC_find_vma) == 1)
		HAVE("bpf_find_vma (5.17)");
	else
		report(c, mmaps ? "FAIL" : "WARN",
		       "upgrade the node's kernel to 5.17 or later, or set profiling.mapping_hook: none",
		       "kernel lacks bpf_find_vma() (Linux 5.17): executable mappings cannot be reported as they "
		       "are made (profiling.mapping_hook)");

	/*
	 * py_begin() calls it and is a global BPF function, which the verifier
	 * checks on its own, whatever the rodata switches that make it
	 * unreachable: no setting avoids it.
	 */
	if (probe_helper(BPF_FUNC_get_current_task_btf) == 1)
		HAVE("bpf_get_current_task_btf (5.11)");
	else
		report(c, "FAIL", "upgrade the node's kernel to 5.11 or later",
		       "kernel lacks bpf_get_current_task_btf() (Linux 5.11): the sampling program cannot load");

	if (probe_helper(BPF_FUNC_task_pt_regs) == 1)
		HAVE("bpf_task_pt_regs (5.15)");
	else
		report(c, mmaps ? "FAIL" : "WARN",
		       "upgrade the node's kernel to 5.15 or later, or set profiling.mapping_hook: none",
		       "kernel lacks bpf_task_pt_regs() (Linux 5.15): executable mappings cannot be reported as they "
		       "are made, and table unwinding cannot load (the agent falls back to frame pointers)");

	/* Off-CPU: per-thread storage, and a hook where a thread resumes. */
	if (libbpf_probe_bpf_map_type(BPF_MAP_TYPE_TASK_STORAGE, NULL) == 1)
		HAVE("task storage (5.11)");
	else
		report(c, cfg->off_cpu.enabled ? "FAIL" : "WARN", "upgrade the node's kernel to 5.11 or later",
		       "kernel lacks BPF task storage (Linux 5.11): off_cpu.enabled cannot be used");
	if (btf && btf__find_by_name_kind(btf, "btf_trace_sched_exit_tp", BTF_KIND_TYPEDEF) >= 0)
		HAVE("off-CPU resume at tp_btf/sched_exit_tp (6.17)");
	else if (btf && (r = probe_fentry(btf, "finish_task_switch")) == 1)
		HAVE("off-CPU resume at fentry/finish_task_switch (before 6.17)");
	else if (btf && r == 0)
		report(c, cfg->off_cpu.enabled ? "FAIL" : "WARN",
		       "run a kernel that keeps finish_task_switch() whole (some builds emit only the clone "
		       "finish_task_switch.isra.0), or 6.17 or later",
		       "kernel lacks both sched_exit_tp (Linux 6.17) and a finish_task_switch() BPF can attach to: "
		       "off_cpu.enabled cannot be used");
	else if (btf)
		report(c, cfg->off_cpu.enabled ? "FAIL" : "WARN",
		       "allow BPF trampolines (kernel lockdown, BPF JIT), or run 6.17 or later",
		       "fentry on finish_task_switch() is refused (%s): off_cpu.enabled cannot be used", strerror(-r));
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
