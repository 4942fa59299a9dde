// SPDX-License-Identifier: Apache-2.0
/*
 * Dropping the capabilities only setup needs (privs.h). Raw capget/capset and
 * prctl: libcap would be a dependency for three system calls.
 *
 * Why each kept capability is still needed after setup:
 *   BPF               unwind tables are BPF maps created as new executables
 *                     appear (BPF_MAP_CREATE), and kernels before 6.5 check it
 *                     on every bpf() call while unprivileged BPF is disabled
 *   SYS_PTRACE        /proc/PID/maps, exe, root and map_files of other users'
 *                     processes; process_vm_readv of Python processes
 *   CHECKPOINT_RESTORE opening /proc/PID/map_files entries
 *   DAC_READ_SEARCH   executables and perf maps whatever their mode
 *   SYSLOG            real addresses in /proc/modules and /proc/kallsyms,
 *                     re-read as modules load and when the gateway asks for
 *                     kernel symbols
 * and why the others go: PERFMON (perf events and tracing programs are open
 * and attached), SYS_RESOURCE (RLIMIT_MEMLOCK was raised while loading and
 * stays raised), SYS_ADMIN, NET_BIND_SERVICE (the metrics socket is bound),
 * SETPCAP and everything else (never used).
 */
#include <errno.h>
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/macro.h"
#include "privs.h"

#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT		 47
#define PR_CAP_AMBIENT_IS_SET	 1
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif

/* Bits 0-63: every capability a kernel can have in the v3 ABI's two words. */
#define AGENT_CAP_BITS 64

static const char *const cap_names[] = {
	"chown",
	"dac_override",
	"dac_read_search",
	"fowner",
	"fsetid",
	"kill",
	"setgid",
	"setuid",
	"setpcap",
	"linux_immutable",
	"net_bind_service",
	"net_broadcast",
	"net_admin",
	"net_raw",
	"ipc_lock",
	"ipc_owner",
	"sys_module",
	"sys_rawio",
	"sys_chroot",
	"sys_ptrace",
	"sys_pacct",
	"sys_admin",
	"sys_boot",
	"sys_nice",
	"sys_resource",
	"sys_time",
	"sys_tty_config",
	"mknod",
	"lease",
	"audit_write",
	"audit_control",
	"setfcap",
	"mac_override",
	"mac_admin",
	"syslog",
	"wake_alarm",
	"block_suspend",
	"audit_read",
	"perfmon",
	"bpf",
	"checkpoint_restore",
};

const char *agent_privs_name(int bit)
{
	return bit >= 0 && (size_t)bit < SR_ARRAY_SIZE(cap_names) ? cap_names[bit] : NULL;
}

void agent_privs_names(uint64_t caps, char *buf, size_t size)
{
	size_t len = 0;

	if (!size)
		return;
	buf[0] = '\0';
	for (int bit = 0; bit < AGENT_CAP_BITS; bit++) {
		const char *name = agent_privs_name(bit);
		char one[32];
		int n;

		if (!(caps & AGENT_CAP(bit)))
			continue;
		if (name) {
			n = snprintf(one, sizeof(one), "CAP_");
			for (const char *p = name; *p && n < (int)sizeof(one) - 1; p++)
				one[n++] = (char)(*p >= 'a' && *p <= 'z' ? *p - 'a' + 'A' : *p);
			one[n] = '\0';
		} else {
			snprintf(one, sizeof(one), "cap_%d", bit);
		}
		n = snprintf(buf + len, size - len, "%s%s", len ? "," : "", one);
		if (n < 0 || (size_t)n >= size - len) {
			buf[len] = '\0';
			return;
		}
		len += (size_t)n;
	}
	if (!len)
		snprintf(buf, size, "none");
}

uint64_t agent_privs_wanted(uint64_t held, const struct agent_privs_needs *n, const char **ret_admin_for)
{
	uint64_t keep = held & (AGENT_CAP(AGENT_CAP_BPF) | AGENT_CAP(AGENT_CAP_SYS_PTRACE) |
				AGENT_CAP(AGENT_CAP_CHECKPOINT_RESTORE) | AGENT_CAP(AGENT_CAP_DAC_READ_SEARCH));
	bool admin = held & AGENT_CAP(AGENT_CAP_SYS_ADMIN);

	if (n->kernel_symbols)
		keep |= held & AGENT_CAP(AGENT_CAP_SYSLOG);
	*ret_admin_for = NULL;
	/* CAP_SYS_ADMIN does what the newer, narrower capabilities do; keep it only where one is missing. */
	if (admin && !(held & AGENT_CAP(AGENT_CAP_BPF)))
		*ret_admin_for = "bpf() without CAP_BPF";
	else if (admin && !(held & AGENT_CAP(AGENT_CAP_CHECKPOINT_RESTORE)))
		*ret_admin_for = "/proc/PID/map_files without CAP_CHECKPOINT_RESTORE";
	if (*ret_admin_for)
		keep |= AGENT_CAP(AGENT_CAP_SYS_ADMIN);
	return keep;
}

static int cap_get(struct __user_cap_data_struct ret[2])
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };

	if (syscall(SYS_capget, &h, ret) < 0)
		return -errno;
	return 0;
}

static uint64_t join(uint32_t lo, uint32_t hi)
{
	return (uint64_t)hi << 32 | lo;
}

int agent_privs_read(struct agent_privs *ret)
{
	struct __user_cap_data_struct d[2];
	int r = cap_get(d), nnp;

	if (r < 0)
		return r;
	ret->effective = join(d[0].effective, d[1].effective);
	ret->permitted = join(d[0].permitted, d[1].permitted);
	ret->inheritable = join(d[0].inheritable, d[1].inheritable);
	ret->bounding = ret->ambient = 0;
	for (int bit = 0; bit < AGENT_CAP_BITS; bit++) {
		/* Both answer EINVAL past the kernel's last capability. */
		if (prctl(PR_CAPBSET_READ, bit, 0, 0, 0) == 1)
			ret->bounding |= AGENT_CAP(bit);
		if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, bit, 0, 0) == 1)
			ret->ambient |= AGENT_CAP(bit);
	}
	nnp = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
	if (nnp < 0)
		return -errno;
	ret->no_new_privs = nnp == 1;
	return 0;
}

int agent_privs_drop(uint64_t keep, bool *ret_bounding_dropped)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct d[2];
	struct agent_privs now;
	int r;

	*ret_bounding_dropped = false;
	r = agent_privs_read(&now);
	if (r < 0)
		return r;
	keep &= now.permitted;
	/* No execve can give back what is dropped below (the agent runs none, but a compromised one might). */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	/* Dropping from the bounding set needs CAP_SETPCAP, which goes with the rest just after. */
	if (now.effective & AGENT_CAP(AGENT_CAP_SETPCAP)) {
		for (int bit = 0; bit < AGENT_CAP_BITS; bit++) {
			if (!(now.bounding & AGENT_CAP(bit)) || (keep & AGENT_CAP(bit)))
				continue;
			if (prctl(PR_CAPBSET_DROP, bit, 0, 0, 0) < 0)
				return -errno;
		}
		*ret_bounding_dropped = true;
	}
	if (now.ambient && prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
		return -errno;
	memset(d, 0, sizeof(d));
	d[0].effective = d[0].permitted = (uint32_t)keep;
	d[1].effective = d[1].permitted = (uint32_t)(keep >> 32);
	if (syscall(SYS_capset, &h, d) < 0)
		return -errno;
	/* What the kernel holds now, not what was asked: a capability that stayed is an error. */
	r = agent_privs_read(&now);
	if (r < 0)
		return r;
	if (now.effective != keep || now.permitted != keep || now.inheritable || now.ambient || !now.no_new_privs)
		return -EPERM;
	return 0;
}
