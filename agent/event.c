// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "event.h"

static size_t stack_frames(__s32 len, int *ret_err)
{
	*ret_err = 0;
	if (len < 0) {
		*ret_err = len;
		return 0;
	}
	if ((size_t)len > PROFILE_MAX_STACK_DEPTH * sizeof(__u64)) {
		*ret_err = -EBADMSG;
		return 0;
	}
	return (size_t)len / sizeof(__u64);
}

int agent_event_decode(const void *data, size_t len, struct agent_event *ret)
{
	const struct profile_header *h = data;

	memset(ret, 0, sizeof(*ret));
	if (len < sizeof(*h))
		return -EBADMSG;
	switch (h->type) {
	case PROFILE_EVENT_SAMPLE:
	case PROFILE_EVENT_OFF_CPU: {
		const struct profile_sample *s = data;
		/* A table-unwound record ends after its last user frame (bpf/unwind-run.bpf.h). */
		if (len < offsetof(struct profile_sample, ustack))
			return -EBADMSG;
		ret->sample = s;
		ret->n_kstack = stack_frames(s->kstack_len, &ret->kstack_err);
		ret->n_ustack = stack_frames(s->ustack_len, &ret->ustack_err);
		if (len < offsetof(struct profile_sample, ustack) + ret->n_ustack * sizeof(__u64))
			return -EBADMSG;
		break;
	}
	case PROFILE_EVENT_EXEC:
	case PROFILE_EVENT_EXIT: {
		const struct profile_task_event *t = data;
		if (len < sizeof(*t))
			return -EBADMSG;
		ret->mm = t->mm;
		ret->vdso = t->vdso;
		break;
	}
	case PROFILE_EVENT_FORK: {
		const struct profile_fork_event *f = data;
		if (len < sizeof(*f))
			return -EBADMSG;
		ret->fork = f;
		ret->mm = f->mm;
		break;
	}
	case PROFILE_EVENT_MMAP: {
		const struct profile_mmap_event *m = data;
		if (len < sizeof(*m) || m->end <= m->start)
			return -EBADMSG;
		ret->mmap = m;
		ret->mm = m->mm;
		memcpy(ret->mmap_name, m->name, PROFILE_MMAP_NAME_LEN);
		break;
	}
	default:
		return -EBADMSG;
	}
	ret->type = h->type;
	ret->hdr = h;
	memcpy(ret->comm, h->comm, PROFILE_TASK_COMM_LEN);
	memcpy(ret->pcomm, h->pcomm, PROFILE_TASK_COMM_LEN);
	return 0;
}
