// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <stdlib.h>

#include "file-verdicts.h"

#define KEY_LEN (4 * sizeof(uint64_t))

static const void *entry_key(const void *v, size_t *len)
{
	*len = KEY_LEN;
	return v; /* the key is the entry's first member */
}

void agent_file_verdicts_init(struct agent_file_verdicts *v, size_t max)
{
	sr_htab_ptrs_init(&v->files, entry_key);
	v->max = max;
}

void agent_file_verdicts_done(struct agent_file_verdicts *v)
{
	void *e;

	for (size_t i = 0; (e = sr_htab_ptrs__next(&v->files, &i));)
		free(e);
	sr_htab_ptrs_done(&v->files);
}

void *agent_file_verdicts__get(struct agent_file_verdicts *v, const uint64_t key[4])
{
	return sr_htab_ptrs__get(&v->files, key, KEY_LEN);
}

int agent_file_verdicts__add(struct agent_file_verdicts *v, void *entry)
{
	if (v->files.h.n >= v->max) {
		agent_file_verdicts_done(v);
		sr_htab_ptrs_init(&v->files, entry_key);
	}
	if (sr_htab_ptrs__put(&v->files, entry) < 0) {
		free(entry);
		return -ENOMEM;
	}
	return 0;
}

size_t agent_file_verdicts__count(const struct agent_file_verdicts *v)
{
	return v->files.h.n;
}
