// SPDX-License-Identifier: Apache-2.0
/*
 * Shapes recognised (docs/agent.md, "Containers"), by path component:
 *   <64hex>                                  cgroupfs driver (kubelet, docker)
 *   cri-containerd-<64hex>.scope             systemd driver, containerd
 *   crio-<64hex>[.scope]                     cri-o
 *   docker-<64hex>.scope                     docker with systemd
 *   libpod-<64hex>[.scope]                   podman
 *   <anything>:cri-containerd:<64hex>        containerd's systemd cgroup on v1
 *   <anything>:docker:<64hex>, :crio:<64hex> the same for the others
 * The deepest matching component wins (a container may create sub-cgroups).
 * Pod UIDs: "pod<uid>" (cgroupfs) or "kubepods[-<qos>]-pod<uid>.slice"
 * (systemd, with '_' for '-').
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "cgroup.h"

static bool is_lower_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return false;
	}
	return true;
}

static bool has_prefix(const char *s, size_t n, const char *prefix, size_t *ret_plen)
{
	size_t pl = strlen(prefix);

	if (n < pl || memcmp(s, prefix, pl) != 0)
		return false;
	*ret_plen = pl;
	return true;
}

static bool has_suffix(const char *s, size_t n, const char *suffix)
{
	size_t sl = strlen(suffix);

	return n >= sl && memcmp(s + n - sl, suffix, sl) == 0;
}

/* Does one path component name a container? Copies the ID into out. */
static bool component_container(const char *s, size_t n, char *out)
{
	static const char *const prefixes[] = { "cri-containerd-", "crio-", "docker-", "libpod-" };
	static const char *const runtimes[] = { ":cri-containerd:", ":crio:", ":docker:" };
	size_t pl;

	if (n == AGENT_CONTAINER_ID_LEN && is_lower_hex(s, n))
		goto found_at_0;
	for (size_t i = 0; i < sizeof(runtimes) / sizeof(runtimes[0]); i++) {
		size_t rl = strlen(runtimes[i]);
		if (n > rl + AGENT_CONTAINER_ID_LEN &&
		    memcmp(s + n - AGENT_CONTAINER_ID_LEN - rl, runtimes[i], rl) == 0 &&
		    is_lower_hex(s + n - AGENT_CONTAINER_ID_LEN, AGENT_CONTAINER_ID_LEN)) {
			memcpy(out, s + n - AGENT_CONTAINER_ID_LEN, AGENT_CONTAINER_ID_LEN);
			out[AGENT_CONTAINER_ID_LEN] = '\0';
			return true;
		}
	}
	if (has_suffix(s, n, ".scope"))
		n -= strlen(".scope");
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
		if (has_prefix(s, n, prefixes[i], &pl) && n - pl == AGENT_CONTAINER_ID_LEN &&
		    is_lower_hex(s + pl, AGENT_CONTAINER_ID_LEN)) {
			s += pl;
			goto found_at_0;
		}
	}
	return false;
found_at_0:
	memcpy(out, s, AGENT_CONTAINER_ID_LEN);
	out[AGENT_CONTAINER_ID_LEN] = '\0';
	return true;
}

/* 8-4-4-4-12 hex digits separated by '-' (cgroupfs) or '_' (systemd). */
static bool parse_uid(const char *s, size_t n, char *ret)
{
	static const int groups[] = { 8, 4, 4, 4, 12 };
	char out[AGENT_POD_UID_LEN + 1];
	size_t pos = 0;

	if (n != AGENT_POD_UID_LEN)
		return false;
	for (size_t g = 0; g < 5; g++) {
		if (g > 0) {
			if (s[pos] != '-' && s[pos] != '_')
				return false;
			out[pos] = '-';
			pos++;
		}
		for (int i = 0; i < groups[g]; i++, pos++) {
			char c = s[pos];
			if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
				return false;
			out[pos] = c;
		}
	}
	out[AGENT_POD_UID_LEN] = '\0';
	/* Only a whole UID is copied out: a half-parsed one must not look like a pod. */
	memcpy(ret, out, sizeof(out));
	return true;
}

static bool component_pod(const char *s, size_t n, char *out)
{
	size_t pl;

	/* cgroupfs: "pod<uid>" directly under kubepods/<qos>/ or kubepods/. */
	if (has_prefix(s, n, "pod", &pl))
		return parse_uid(s + pl, n - pl, out);
	/* systemd: kubepods-pod<uid>.slice, kubepods-burstable-pod<uid>.slice, kubepods-besteffort-pod<uid>.slice */
	if (has_prefix(s, n, "kubepods-", &pl)) {
		const char *p = s + pl;
		size_t rest = n - pl;
		const char *colon = memchr(p, ':', rest);
		if (colon)
			rest = (size_t)(colon - p);
		if (!has_suffix(p, rest, ".slice"))
			return false;
		rest -= strlen(".slice");
		if (has_prefix(p, rest, "burstable-", &pl) || has_prefix(p, rest, "besteffort-", &pl)) {
			p += pl;
			rest -= pl;
		}
		if (has_prefix(p, rest, "pod", &pl))
			return parse_uid(p + pl, rest - pl, out);
	}
	return false;
}

int agent_cgroup_parse_path(const char *path, size_t len, struct agent_cgroup_info *ret)
{
	const char *end = path + len;
	bool found = false;

	ret->container_id[0] = '\0';
	ret->pod_uid[0] = '\0';
	/* Walk components from the deepest up; the deepest container match wins. */
	while (end > path) {
		const char *start = end;
		while (start > path && start[-1] != '/')
			start--;
		size_t n = (size_t)(end - start);
		if (n > 0) {
			if (!found && component_container(start, n, ret->container_id))
				found = true;
			if (!ret->pod_uid[0])
				component_pod(start, n, ret->pod_uid);
		}
		end = start > path ? start - 1 : path;
	}
	return found ? 1 : 0;
}

int agent_cgroup_parse(const char *buf, size_t len, struct agent_cgroup_info *ret)
{
	struct agent_cgroup_info best = { { 0 } }, cur;
	const char *p = buf, *end = buf + len;
	bool have_v2 = false, found = false, any_line = false;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		const char *c1 = memchr(p, ':', (size_t)(le - p));
		const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(le - c1 - 1)) : NULL;

		if (c1 && c2 && c1 > p) {
			bool v2 = (c1 - p == 1 && p[0] == '0' && c2 == c1 + 1);
			any_line = true;
			int r = agent_cgroup_parse_path(c2 + 1, (size_t)(le - c2 - 1), &cur);
			/*
			 * Prefer the v2 line's answer; a v1 line fills in only what
			 * no line has given yet (hybrid hosts keep the container's
			 * cgroup on v1 only).
			 */
			if (r == 1 && (!found || (v2 && !have_v2))) {
				memcpy(best.container_id, cur.container_id, sizeof(best.container_id));
				found = true;
				if (cur.pod_uid[0])
					memcpy(best.pod_uid, cur.pod_uid, sizeof(best.pod_uid));
				if (v2)
					have_v2 = true;
			} else if (!best.pod_uid[0] && cur.pod_uid[0]) {
				memcpy(best.pod_uid, cur.pod_uid, sizeof(best.pod_uid));
			}
		}
		if (!nl)
			break;
		p = nl + 1;
	}
	*ret = best;
	if (!any_line && len > 0)
		return -EINVAL;
	return found ? 1 : 0;
}
