// SPDX-License-Identifier: Apache-2.0
/*
 * The profiling loop's setup steps that stand on their own: the filters of
 * the configuration resolved to what the BPF maps hold, and the capabilities
 * only setup needed dropped once it is done.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/config.h"
#include "cgroup-fs.h"
#include "sampler.h"
#include "common/log.h"
#include "privs.h"
#include "run-private.h"

/*
 * Setup is done: the BPF programs are loaded and attached, the perf events,
 * ring buffer and maps are open, the kernel's identity is read and the
 * metrics socket is bound. What follows reads files and memory of processes
 * that may be hostile, so the capabilities only setup needed go now, before
 * any thread starts (privs.h; docs/security.md, "The agent's privileges").
 */
int agent_run_drop_privileges(struct run_ctx *c, bool keep_all)
{
	struct agent_privs_needs needs = { .kernel_symbols = c->cfg->profiling.kernel_stacks };
	struct agent_privs before;
	const char *admin_for;
	char kept[512], dropped[1024];
	uint64_t want;
	bool bounding;
	int r;

	r = agent_privs_read(&before);
	if (r < 0) {
		sr_log_error("agent", "cannot read the agent's capabilities; stopping", "error=\"%s\"", strerror(-r));
		return r;
	}
	if (keep_all) {
		agent_privs_names(before.effective, kept, sizeof(kept));
		sr_log_warn("agent", "keeping every capability while profiling (--keep-privileges)", "capabilities=%s",
			    kept);
		return 0;
	}
	want = agent_privs_wanted(before.permitted, &needs, &admin_for);
	agent_privs_names(want, kept, sizeof(kept));
	agent_privs_names(before.permitted & ~want, dropped, sizeof(dropped));
	r = agent_privs_drop(want, &bounding);
	if (r < 0) {
		sr_log_error("agent",
			     "cannot drop the capabilities only setup needs; stopping (--keep-privileges runs with "
			     "them)",
			     "keep=%s error=\"%s\"", kept, strerror(-r));
		return r;
	}
	c->privileges_dropped = true;
	if (admin_for)
		sr_log_warn("agent", "keeping CAP_SYS_ADMIN while profiling", "for=\"%s\" hint=\"%s\"", admin_for,
			    "grant CAP_BPF and CAP_CHECKPOINT_RESTORE (kernel 5.9+) so that it can go");
	sr_log_info("agent", "dropped the capabilities only setup needs",
		    "kept=%s dropped=%s bounding_set=%s no_new_privs=1", kept, dropped,
		    bounding ? "dropped" : "unchanged(no_CAP_SETPCAP)");
	return 0;
}

/* profiling.pids (strings) and profiling.cgroups (paths) to what the BPF maps hold. */
int agent_run_resolve_filters(const struct agent_config *cfg, uint32_t **ret_pids, uint64_t **ret_cgroups)
{
	const struct agent_profiling_config *p = &cfg->profiling;
	uint32_t *pids = NULL;
	uint64_t *cgs = NULL;
	int r = 0;

	if (p->n_pids) {
		pids = calloc(p->n_pids, sizeof(*pids));
		if (!pids)
			return -ENOMEM;
	}
	for (uint32_t i = 0; i < p->n_pids; i++) {
		char *end;
		unsigned long v;
		errno = 0;
		v = strtoul(p->pids[i], &end, 10);
		if (!p->pids[i][0] || *end || errno || v == 0 || v > INT32_MAX) {
			sr_log_error("agent", "profiling.pids: not a process ID", "value=\"%s\"", p->pids[i]);
			r = -EINVAL;
			goto fail;
		}
		pids[i] = (uint32_t)v;
	}
	if (p->n_cgroups) {
		cgs = calloc(p->n_cgroups, sizeof(*cgs));
		if (!cgs) {
			r = -ENOMEM;
			goto fail;
		}
	}
	for (uint32_t i = 0; i < p->n_cgroups; i++) {
		r = agent_cgroup_id(p->cgroups[i], &cgs[i]);
		if (r < 0) {
			sr_log_error("agent", "profiling.cgroups: not a cgroup v2 directory",
				     "path=\"%s\" error=\"%s\"", p->cgroups[i], strerror(-r));
			goto fail;
		}
	}
	*ret_pids = pids;
	*ret_cgroups = cgs;
	return 0;
fail:
	free(pids);
	free(cgs);
	return r;
}
