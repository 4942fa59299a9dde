// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pb_decode.h>

#include "aggregate.h"
#include "common/htab.h"
#include "util.h"

struct agg_entry {
	struct agent_agg_key key;
	uint64_t count;
	uint64_t off_cpu_ns;
	bool kernel;
	char thread_name[17];
	char process_name[17];
	char *exe_path;
	char container_id[AGENT_CONTAINER_ID_LEN + 1];
	char pod_uid[AGENT_POD_UID_LEN + 1];
};

struct agent_agg {
	struct sr_htab_ptrs entries;
	size_t max_entries;
};

static const void *agg_key(const void *v, size_t *len)
{
	*len = sizeof(struct agent_agg_key);
	return &((const struct agg_entry *)v)->key;
}

struct agent_agg *agent_agg_new(size_t max_entries)
{
	struct agent_agg *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	sr_htab_ptrs_init(&a->entries, agg_key);
	a->max_entries = max_entries ? max_entries : AGENT_AGG_DEFAULT_MAX_ENTRIES;
	return a;
}

static void clear(struct agent_agg *a)
{
	struct agg_entry *e;

	for (size_t i = 0; (e = sr_htab_ptrs__next(&a->entries, &i));) {
		free(e->exe_path);
		free(e);
	}
	sr_htab_ptrs_done(&a->entries);
}

void agent_agg_free(struct agent_agg *a)
{
	if (!a)
		return;
	clear(a);
	free(a);
}

size_t agent_agg__size(const struct agent_agg *a)
{
	return a->entries.h.n;
}

int agent_agg__add(struct agent_agg *a, const struct agent_agg_key *k, const struct agent_agg_labels *l,
		   uint64_t off_cpu_ns)
{
	struct agg_entry *e = sr_htab_ptrs__get(&a->entries, k, sizeof(*k));

	if (e) {
		e->count++;
		e->off_cpu_ns += off_cpu_ns;
		return 0;
	}
	if (a->entries.h.n >= a->max_entries)
		return -ENOSPC;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->key = *k;
	e->count = 1;
	e->off_cpu_ns = off_cpu_ns;
	e->kernel = l->kernel;
	snprintf(e->thread_name, sizeof(e->thread_name), "%s", l->thread_name ? l->thread_name : "");
	snprintf(e->process_name, sizeof(e->process_name), "%s", l->process_name ? l->process_name : "");
	if (l->exe_path)
		e->exe_path = strdup(l->exe_path);
	if (l->cg) {
		memcpy(e->container_id, l->cg->container_id, sizeof(e->container_id));
		memcpy(e->pod_uid, l->cg->pod_uid, sizeof(e->pod_uid));
	}
	if (sr_htab_ptrs__put(&a->entries, e) < 0) {
		free(e->exe_path);
		free(e);
		return -ENOMEM;
	}
	return 0;
}

static int cmp_count(const void *x, const void *y)
{
	const struct agg_entry *a = *(struct agg_entry *const *)x, *b = *(struct agg_entry *const *)y;

	if (a->count != b->count)
		return a->count > b->count ? -1 : 1;
	return memcmp(&a->key, &b->key, sizeof(a->key));
}

static int fill_sample(stackrelay_v1_Sample *s, const struct agg_entry *e, uint64_t start, uint64_t end,
		       const uint8_t *kernel_id, size_t kernel_id_len, long clk_tck)
{
	s->stack_id = agent_pb_bytes(e->key.stack_id, sizeof(e->key.stack_id));
	s->pid = agent_pb_u32(e->key.pid);
	s->tid = agent_pb_u32(e->key.tid);
	s->thread_name = strdup(e->thread_name);
	s->process_name = strdup(e->process_name);
	if (e->exe_path)
		s->executable_path = strdup(e->exe_path);
	if (e->container_id[0])
		s->container_id = strdup(e->container_id);
	if (e->pod_uid[0])
		s->pod_uid = strdup(e->pod_uid);
	s->count = agent_pb_u64(e->count);
	s->start_time_unix_nano = agent_pb_u64(start);
	s->end_time_unix_nano = agent_pb_u64(end);
	s->process_start_ticks = agent_pb_u64(e->key.start_ns / (1000000000ULL / (uint64_t)clk_tck));
	if (e->kernel && kernel_id)
		s->kernel_id = agent_pb_bytes(kernel_id, kernel_id_len);
	/* CPU samples leave both unset, as before the fields existed. */
	if (e->key.profile_type == stackrelay_v1_ProfileType_PROFILE_TYPE_OFF_CPU) {
		s->profile_type = malloc(sizeof(*s->profile_type));
		if (!s->profile_type)
			return -ENOMEM;
		*s->profile_type = stackrelay_v1_ProfileType_PROFILE_TYPE_OFF_CPU;
		s->off_cpu_nanos = agent_pb_u64(e->off_cpu_ns);
		if (!s->off_cpu_nanos)
			return -ENOMEM;
	}
	if (!s->stack_id || !s->pid || !s->tid || !s->thread_name || !s->process_name || !s->count ||
	    !s->start_time_unix_nano || !s->end_time_unix_nano || !s->process_start_ticks ||
	    (e->exe_path && !s->executable_path) || (e->container_id[0] && !s->container_id) ||
	    (e->pod_uid[0] && !s->pod_uid) || (e->kernel && kernel_id && !s->kernel_id))
		return -ENOMEM;
	return 0;
}

int agent_agg__flush(struct agent_agg *a, uint64_t start_unix_ns, uint64_t end_unix_ns, const uint8_t *kernel_id,
		     size_t kernel_id_len, uint32_t frequency_hz, long clk_tck, struct agent_batch *ret)
{
	struct agg_entry **all = NULL, *e;
	size_t n = 0;
	int r = 0;

	memset(ret, 0, sizeof(*ret));
	ret->frequency_hz = frequency_hz;
	if (clk_tck <= 0)
		clk_tck = 100;
	if (a->entries.h.n == 0)
		return 0;
	all = malloc(a->entries.h.n * sizeof(*all));
	ret->samples = calloc(a->entries.h.n, sizeof(*ret->samples));
	if (!all || !ret->samples) {
		r = -ENOMEM;
		goto fail;
	}
	for (size_t i = 0; (e = sr_htab_ptrs__next(&a->entries, &i));)
		all[n++] = e;
	qsort(all, n, sizeof(*all), cmp_count);
	for (size_t i = 0; i < n; i++) {
		r = fill_sample(&ret->samples[i], all[i], start_unix_ns, end_unix_ns, kernel_id, kernel_id_len,
				clk_tck);
		ret->n_samples = i + 1;
		if (r < 0)
			goto fail;
		ret->total_count += all[i]->count;
	}
	free(all);
	clear(a);
	return 0;
fail:
	free(all);
	agent_batch_free(ret);
	memset(ret, 0, sizeof(*ret));
	return r;
}

void agent_batch_free(struct agent_batch *b)
{
	if (!b)
		return;
	for (size_t i = 0; i < b->n_samples; i++)
		pb_release(stackrelay_v1_Sample_fields, &b->samples[i]);
	SR_FREE(b->samples);
	b->n_samples = 0;
	b->total_count = 0;
	pb_release(stackrelay_v1_DropCounters_fields, &b->drops);
	memset(&b->drops, 0, sizeof(b->drops));
}
