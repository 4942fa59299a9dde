// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <pb_decode.h>
#include <pb_encode.h>

#include "common/grow.h"
#include "common/htab.h"
#include "output.h"
#include "sr-config.h"
#include "definition-store.h"
#include "util.h"

#define AGENT_PROTOCOL_VERSION_1 1

struct seen_id {
	uint8_t len;
	uint8_t id[AGENT_BUILD_ID_MAX + 1]; /* first byte: kind, so a stack and an exe with equal bytes differ */
};

struct agent_output {
	FILE *f;
	char *path;
	const struct agent_info *info;
	struct sr_htab_ptrs seen; /* IDs whose definitions this file already holds */
	uint64_t sequence;
	uint64_t bytes;
	int error;
};

static const void *seen_key(const void *v, size_t *len)
{
	const struct seen_id *s = v;

	*len = s->len;
	return s->id;
}

void agent_info_init(struct agent_info *info, const char *node_name)
{
	memset(info, 0, sizeof(*info));
	if (getrandom(info->instance_id, sizeof(info->instance_id), 0) != (ssize_t)sizeof(info->instance_id)) {
		/* Uniqueness matters, secrecy does not: fall back to time and pid. */
		uint64_t x = (uint64_t)getpid() ^ ((uint64_t)time(NULL) << 20);
		memcpy(info->instance_id, &x, sizeof(x));
	}
	if (gethostname(info->host_name, sizeof(info->host_name) - 1) < 0)
		info->host_name[0] = '\0';
	info->node_name = node_name;
	info->version = SR_VERSION;
}

struct agent_output *agent_output_open(const char *path, const struct agent_info *info)
{
	struct agent_output *o = calloc(1, sizeof(*o));

	if (!o)
		return NULL;
	o->path = strdup(path);
	o->f = fopen(path, "we");
	if (!o->f || !o->path) {
		int e = errno ? errno : ENOMEM;
		if (o->f)
			fclose(o->f);
		free(o->path);
		free(o);
		errno = e;
		return NULL;
	}
	o->info = info;
	sr_htab_ptrs_init(&o->seen, seen_key);
	return o;
}

/* True (and remembered) when this file has not held the definition yet. */
static bool first_use(struct agent_output *o, uint8_t kind, const uint8_t *id, size_t len)
{
	struct seen_id key = { 0 }, *s;

	if (len == 0 || len > AGENT_BUILD_ID_MAX)
		return false;
	key.len = (uint8_t)(len + 1);
	key.id[0] = kind;
	memcpy(key.id + 1, id, len);
	if (sr_htab_ptrs__get(&o->seen, key.id, key.len))
		return false;
	s = malloc(sizeof(*s));
	if (!s)
		return true; /* writing a definition twice is harmless */
	*s = key;
	if (sr_htab_ptrs__put(&o->seen, s) < 0)
		free(s);
	return true;
}

static bool write_cb(pb_ostream_t *stream, const pb_byte_t *buf, size_t count)
{
	FILE *f = stream->state;

	return fwrite(buf, 1, count, f) == count;
}

/* Definitions accumulated for one request. */
struct defs {
	stackrelay_v1_StackDef *stacks;
	size_t n_stacks, cap_stacks;
	stackrelay_v1_ExecutableDef *exes;
	size_t n_exes, cap_exes;
	stackrelay_v1_KernelDef *kernels;
	size_t n_kernels, cap_kernels;
	stackrelay_v1_FunctionDef *funcs;
	size_t n_funcs, cap_funcs;
};

static void defs_release(struct defs *d)
{
	for (size_t i = 0; i < d->n_stacks; i++)
		pb_release(stackrelay_v1_StackDef_fields, &d->stacks[i]);
	for (size_t i = 0; i < d->n_exes; i++)
		pb_release(stackrelay_v1_ExecutableDef_fields, &d->exes[i]);
	for (size_t i = 0; i < d->n_kernels; i++)
		pb_release(stackrelay_v1_KernelDef_fields, &d->kernels[i]);
	for (size_t i = 0; i < d->n_funcs; i++)
		pb_release(stackrelay_v1_FunctionDef_fields, &d->funcs[i]);
	free(d->funcs);
	free(d->stacks);
	free(d->exes);
	free(d->kernels);
	memset(d, 0, sizeof(*d));
}

static int add_exe(struct agent_output *o, struct agent_store *s, struct defs *d, const pb_bytes_array_t *id)
{
	int r;

	if (!id || !first_use(o, 'e', id->bytes, id->size))
		return 0;
	r = sr_grow_zero((void **)&d->exes, &d->cap_exes, d->n_exes + 1, sizeof(*d->exes), 16);
	if (r < 0)
		return r;
	r = agent_store__executable(s, id->bytes, id->size, &d->exes[d->n_exes]);
	if (r == 0)
		d->n_exes++;
	return r == -ENOENT ? 0 : r;
}

static int add_func(struct agent_output *o, struct agent_store *s, struct defs *d, const pb_bytes_array_t *id)
{
	int r;

	if (!id || !first_use(o, 'f', id->bytes, id->size))
		return 0;
	r = sr_grow_zero((void **)&d->funcs, &d->cap_funcs, d->n_funcs + 1, sizeof(*d->funcs), 16);
	if (r < 0)
		return r;
	r = agent_store__function(s, id->bytes, id->size, &d->funcs[d->n_funcs]);
	if (r == 0)
		d->n_funcs++;
	return r == -ENOENT ? 0 : r;
}

/* The image, a module or this boot's runtime addresses (kernel.h): each its own ID and definition. */
static int add_kernel(struct agent_output *o, struct agent_store *s, struct defs *d, const pb_bytes_array_t *id)
{
	int r;

	if (!id || !first_use(o, 'k', id->bytes, id->size))
		return 0;
	r = sr_grow_zero((void **)&d->kernels, &d->cap_kernels, d->n_kernels + 1, sizeof(*d->kernels), 16);
	if (r < 0)
		return r;
	r = agent_store__kernel(s, id->bytes, id->size, &d->kernels[d->n_kernels]);
	if (r == 0)
		d->n_kernels++;
	return r == -ENOENT ? 0 : r;
}

static int add_sample_defs(struct agent_output *o, struct agent_store *s, struct defs *d,
			   const stackrelay_v1_Sample *smp)
{
	stackrelay_v1_StackDef *st;
	int r;

	r = add_kernel(o, s, d, smp->kernel_id);
	if (r < 0)
		return r;
	if (!smp->stack_id || !first_use(o, 's', smp->stack_id->bytes, smp->stack_id->size))
		return 0;
	r = sr_grow_zero((void **)&d->stacks, &d->cap_stacks, d->n_stacks + 1, sizeof(*d->stacks), 16);
	if (r < 0)
		return r;
	st = &d->stacks[d->n_stacks];
	r = agent_store__stack(s, smp->stack_id->bytes, smp->stack_id->size, st);
	if (r == -ENOENT)
		return 0; /* evicted: the sample is still written, its stack cannot be */
	if (r < 0)
		return r;
	d->n_stacks++;
	for (size_t i = 0; i < st->frames_count; i++) {
		const stackrelay_v1_Frame *f = &st->frames[i];
		if (f->kind && *f->kind == stackrelay_v1_FrameKind_FRAME_KIND_USER) {
			r = add_exe(o, s, d, f->executable_id);
			if (r < 0)
				return r;
		}
		if (f->kind && *f->kind == stackrelay_v1_FrameKind_FRAME_KIND_KERNEL) {
			r = add_kernel(o, s, d, f->executable_id);
			if (r < 0)
				return r;
		}
		if (f->function_id) {
			r = add_func(o, s, d, f->function_id);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

static int write_request(struct agent_output *o, struct agent_store *s, const struct agent_batch *b, size_t first,
			 size_t n, bool with_drops)
{
	stackrelay_v1_PushRequest req = { 0 };
	stackrelay_v1_AgentInfo agent = { 0 };
	pb_bytes_array_t *iid = agent_pb_bytes(o->info->instance_id, sizeof(o->info->instance_id));
	uint32_t version = AGENT_PROTOCOL_VERSION_1, freq = b->frequency_hz;
	uint64_t seq = ++o->sequence;
	pb_ostream_t os = { write_cb, o->f, SIZE_MAX, 0, NULL };
	struct defs d = { 0 };
	int r = 0;

	if (!iid)
		return -ENOMEM;
	for (size_t i = first; i < first + n; i++) {
		r = add_sample_defs(o, s, &d, &b->samples[i]);
		if (r < 0)
			goto out;
	}
	agent.instance_id = iid;
	agent.host_name = (char *)o->info->host_name;
	agent.node_name = (char *)(o->info->node_name ? o->info->node_name : "");
	agent.version = (char *)o->info->version;
	req.protocol_version = &version;
	req.agent = &agent;
	req.sequence = &seq;
	req.sampling_frequency_hz = &freq;
	req.samples_count = (pb_size_t)n;
	req.samples = n ? &b->samples[first] : NULL;
	req.stacks_count = (pb_size_t)d.n_stacks;
	req.stacks = d.stacks;
	req.executables_count = (pb_size_t)d.n_exes;
	req.executables = d.exes;
	req.kernels_count = (pb_size_t)d.n_kernels;
	req.kernels = d.kernels;
	req.functions_count = (pb_size_t)d.n_funcs;
	req.functions = d.funcs;
	if (with_drops)
		req.drops = (stackrelay_v1_DropCounters *)&b->drops;
	if (d.n_stacks > UINT16_MAX || d.n_exes > UINT16_MAX || d.n_funcs > UINT16_MAX) {
		r = -E2BIG;
		goto out;
	}
	if (!pb_encode_ex(&os, stackrelay_v1_PushRequest_fields, &req, PB_ENCODE_DELIMITED)) {
		r = ferror(o->f) ? -EIO : -EINVAL;
		goto out;
	}
	o->bytes += os.bytes_written;
out:
	/* The request borrowed everything but the definitions. */
	defs_release(&d);
	free(iid);
	return r;
}

int agent_output__write(struct agent_output *o, struct agent_store *s, const struct agent_batch *b)
{
	size_t first = 0;
	int r = 0;

	do {
		size_t n = SR_MIN(b->n_samples - first, (size_t)AGENT_OUTPUT_MAX_SAMPLES);
		r = write_request(o, s, b, first, n, first == 0);
		if (r < 0)
			break;
		first += n;
	} while (first < b->n_samples);
	if (r == 0 && fflush(o->f) != 0)
		r = -errno;
	if (r < 0 && !o->error)
		o->error = r;
	return r;
}

uint64_t agent_output__bytes(const struct agent_output *o)
{
	return o->bytes;
}

int agent_output_close(struct agent_output *o)
{
	struct seen_id *v;
	int r;

	if (!o)
		return 0;
	r = o->error;
	if (fclose(o->f) != 0 && r == 0)
		r = -errno;
	for (size_t i = 0; (v = sr_htab_ptrs__next(&o->seen, &i));)
		free(v);
	sr_htab_ptrs_done(&o->seen);
	free(o->path);
	free(o);
	return r;
}
