// SPDX-License-Identifier: Apache-2.0
/*
 * The definitions a request carries (sender-parts-private.h): for each sample,
 * the stack, executables, functions and kernel the connection has not seen
 * yet, read from the store; and which samples a "missing" answer concerns.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <pb_decode.h>

#include "common/grow.h"
#include "sender-parts-private.h"

void agent_defs_free(struct agent_defs *d)
{
	for (size_t i = 0; i < d->n_stacks; i++)
		pb_release(stackrelay_v1_StackDef_fields, &d->stacks[i]);
	for (size_t i = 0; i < d->n_executables; i++)
		pb_release(stackrelay_v1_ExecutableDef_fields, &d->executables[i]);
	for (size_t i = 0; i < d->n_kernels; i++)
		pb_release(stackrelay_v1_KernelDef_fields, &d->kernels[i]);
	for (size_t i = 0; i < d->n_functions; i++)
		pb_release(stackrelay_v1_FunctionDef_fields, &d->functions[i]);
	free(d->stacks);
	free(d->executables);
	free(d->kernels);
	free(d->functions);
	agent_idset_done(&d->local);
	memset(d, 0, sizeof(*d));
}

static bool need_def(const struct agent_idset *sent, struct agent_defs *d, enum agent_id_kind kind,
		     const pb_bytes_array_t *id)
{
	return id && id->size && (d->all || !agent_idset_has(sent, kind, id->bytes, id->size)) &&
	       !agent_idset_has(&d->local, kind, id->bytes, id->size);
}

static int add_kernel_def(const struct agent_idset *sent, struct agent_store *store, struct agent_defs *d,
			  const pb_bytes_array_t *id)
{
	int r;

	if (!need_def(sent, d, AGENT_ID_KERNEL, id))
		return 0;
	r = sr_grow_zero((void **)&d->kernels, &d->cap_kernels, d->n_kernels + 1, sizeof(*d->kernels), 16);
	if (r < 0)
		return r;
	r = agent_store__kernel(store, id->bytes, id->size, &d->kernels[d->n_kernels]);
	if (r < 0)
		return r;
	d->n_kernels++;
	r = agent_idset_add(&d->local, AGENT_ID_KERNEL, id->bytes, id->size);
	return r < 0 ? r : 0;
}

static int add_executable_def(const struct agent_idset *sent, struct agent_store *store, struct agent_defs *d,
			      const pb_bytes_array_t *id)
{
	int r;

	if (!need_def(sent, d, AGENT_ID_EXECUTABLE, id))
		return 0;
	r = sr_grow_zero((void **)&d->executables, &d->cap_executables, d->n_executables + 1, sizeof(*d->executables),
			 16);
	if (r < 0)
		return r;
	r = agent_store__executable(store, id->bytes, id->size, &d->executables[d->n_executables]);
	if (r < 0)
		return r;
	d->n_executables++;
	r = agent_idset_add(&d->local, AGENT_ID_EXECUTABLE, id->bytes, id->size);
	return r < 0 ? r : 0;
}

static int add_function_def(const struct agent_idset *sent, struct agent_store *store, struct agent_defs *d,
			    const pb_bytes_array_t *id)
{
	int r;

	if (!need_def(sent, d, AGENT_ID_FUNCTION, id))
		return 0;
	r = sr_grow_zero((void **)&d->functions, &d->cap_functions, d->n_functions + 1, sizeof(*d->functions), 16);
	if (r < 0)
		return r;
	r = agent_store__function(store, id->bytes, id->size, &d->functions[d->n_functions]);
	if (r < 0)
		return r;
	d->n_functions++;
	r = agent_idset_add(&d->local, AGENT_ID_FUNCTION, id->bytes, id->size);
	return r < 0 ? r : 0;
}

static bool frame_is_kernel(const stackrelay_v1_Frame *f)
{
	return f->kind && *f->kind == stackrelay_v1_FrameKind_FRAME_KIND_KERNEL;
}

/* Drops the definitions of kind past mark from d (and from d->local). */
#define ROLL_BACK(d, arr, n, mark, kind, fields)                                                                       \
	while ((d)->n > (mark)) {                                                                                      \
		__typeof__((d)->arr[0]) *x_ = &(d)->arr[--(d)->n];                                                     \
		if (x_->id)                                                                                            \
			agent_idset_del(&(d)->local, (kind), x_->id->bytes, x_->id->size);                             \
		pb_release((fields), x_);                                                                              \
		memset(x_, 0, sizeof(*x_));                                                                            \
	}

int agent_defs_add_sample(const struct agent_idset *sent, struct agent_store *store, struct agent_defs *d,
			  const stackrelay_v1_Sample *sample)
{
	const pb_bytes_array_t *sid = sample->stack_id;
	stackrelay_v1_StackDef *def;
	size_t mark_exec = d->n_executables, mark_kern = d->n_kernels, mark_func = d->n_functions;
	int r;

	if (!sid || !sid->size)
		return -EINVAL;
	r = add_kernel_def(sent, store, d, sample->kernel_id);
	if (r < 0)
		return r;
	if (!need_def(sent, d, AGENT_ID_STACK, sid))
		return 0;
	r = sr_grow_zero((void **)&d->stacks, &d->cap_stacks, d->n_stacks + 1, sizeof(*d->stacks), 16);
	if (r < 0)
		return r;
	def = &d->stacks[d->n_stacks];
	r = agent_store__stack(store, sid->bytes, sid->size, def);
	if (r < 0)
		return r;
	for (pb_size_t i = 0; i < def->frames_count; i++) {
		const stackrelay_v1_Frame *f = &def->frames[i];

		if (f->function_id && f->function_id->size) {
			r = add_function_def(sent, store, d, f->function_id);
			if (r < 0)
				goto fail;
		}
		if (!f->executable_id || !f->executable_id->size)
			continue;
		r = frame_is_kernel(f) ? add_kernel_def(sent, store, d, f->executable_id)
				       : add_executable_def(sent, store, d, f->executable_id);
		if (r < 0)
			goto fail;
	}
	d->n_stacks++;
	r = agent_idset_add(&d->local, AGENT_ID_STACK, sid->bytes, sid->size);
	return r < 0 ? r : 0;
fail:
	/* Roll back the definitions this sample added: its stack will not be sent. */
	pb_release(stackrelay_v1_StackDef_fields, def);
	memset(def, 0, sizeof(*def));
	ROLL_BACK(d, executables, n_executables, mark_exec, AGENT_ID_EXECUTABLE, stackrelay_v1_ExecutableDef_fields);
	ROLL_BACK(d, kernels, n_kernels, mark_kern, AGENT_ID_KERNEL, stackrelay_v1_KernelDef_fields);
	ROLL_BACK(d, functions, n_functions, mark_func, AGENT_ID_FUNCTION, stackrelay_v1_FunctionDef_fields);
	return r;
}

int agent_defs_sample_missing(struct agent_store *store, const stackrelay_v1_Sample *sample,
			      const struct agent_idset *missing, bool check_frames)
{
	stackrelay_v1_StackDef def = stackrelay_v1_StackDef_init_zero;
	bool hit = false;
	int r;

	if (sample->stack_id &&
	    agent_idset_has(missing, AGENT_ID_STACK, sample->stack_id->bytes, sample->stack_id->size))
		return 1;
	if (sample->kernel_id && sample->kernel_id->size &&
	    agent_idset_has(missing, AGENT_ID_KERNEL, sample->kernel_id->bytes, sample->kernel_id->size))
		return 1;
	if (!check_frames || !sample->stack_id)
		return 0;
	r = agent_store__stack(store, sample->stack_id->bytes, sample->stack_id->size, &def);
	if (r < 0)
		return r;
	for (pb_size_t i = 0; i < def.frames_count && !hit; i++) {
		const stackrelay_v1_Frame *f = &def.frames[i];

		if (f->executable_id && f->executable_id->size)
			hit = agent_idset_has(missing, frame_is_kernel(f) ? AGENT_ID_KERNEL : AGENT_ID_EXECUTABLE,
					      f->executable_id->bytes, f->executable_id->size);
		if (!hit && f->function_id && f->function_id->size)
			hit = agent_idset_has(missing, AGENT_ID_FUNCTION, f->function_id->bytes, f->function_id->size);
	}
	pb_release(stackrelay_v1_StackDef_fields, &def);
	return hit;
}
