// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test-agent-sender-fakestore.h"

/* sender.c reads the compression name; the real table lives in agent/config.c, which tests do not link. */
const char *const agent_compression_names[] = { "none", "gzip", NULL };

struct agent_store {
	pthread_mutex_t mu;
	unsigned n_stacks, n_execs;
	bool *evicted;
	char **paths;
	unsigned stack_lookups, exec_lookups, kernel_lookups, func_lookups, opens;
};

static void fill_id(uint8_t *out, size_t len, uint8_t tag, unsigned idx)
{
	for (size_t i = 0; i < len; i++)
		out[i] = (uint8_t)(tag * 31 + i * 7);
	out[0] = tag;
	out[1] = (uint8_t)(idx >> 24);
	out[2] = (uint8_t)(idx >> 16);
	out[3] = (uint8_t)(idx >> 8);
	out[4] = (uint8_t)idx;
}

void fake_stack_id(unsigned idx, uint8_t out[FAKE_STACK_ID_BYTES])
{
	fill_id(out, FAKE_STACK_ID_BYTES, 0x5a, idx);
}

void fake_exec_id(unsigned idx, uint8_t out[FAKE_EXEC_ID_BYTES])
{
	fill_id(out, FAKE_EXEC_ID_BYTES, 0xe1, idx);
}

void fake_kernel_id(uint8_t out[FAKE_KERNEL_ID_BYTES])
{
	fill_id(out, FAKE_KERNEL_ID_BYTES, 0x4b, 0);
}

void fake_func_id(unsigned idx, uint8_t out[FAKE_FUNC_ID_BYTES])
{
	fill_id(out, FAKE_FUNC_ID_BYTES, 0xf7, idx);
}

static int index_of(const uint8_t *id, size_t len, size_t want_len, uint8_t tag)
{
	uint8_t ref[32];
	unsigned idx;

	if (len != want_len || id[0] != tag)
		return -1;
	idx = (unsigned)id[1] << 24 | (unsigned)id[2] << 16 | (unsigned)id[3] << 8 | id[4];
	fill_id(ref, len, tag, idx);
	return memcmp(ref, id, len) == 0 ? (int)idx : -1;
}

int fake_stack_index(const uint8_t *id, size_t len)
{
	return index_of(id, len, FAKE_STACK_ID_BYTES, 0x5a);
}

int fake_exec_index(const uint8_t *id, size_t len)
{
	return index_of(id, len, FAKE_EXEC_ID_BYTES, 0xe1);
}

int fake_func_index(const uint8_t *id, size_t len)
{
	return index_of(id, len, FAKE_FUNC_ID_BYTES, 0xf7);
}

static void *dup_mem(const void *p, size_t n)
{
	void *q = malloc(n);

	if (q)
		memcpy(q, p, n);
	return q;
}

static pb_bytes_array_t *bytes_of(const uint8_t *p, size_t n)
{
	pb_bytes_array_t *b = malloc(PB_BYTES_ARRAY_T_ALLOCSIZE(n));

	b->size = (pb_size_t)n;
	memcpy(b->bytes, p, n);
	return b;
}

static uint64_t *u64(uint64_t v)
{
	return dup_mem(&v, sizeof(v));
}

static uint32_t *u32(uint32_t v)
{
	return dup_mem(&v, sizeof(v));
}

struct agent_store *fake_store_new(unsigned n_stacks, unsigned n_execs)
{
	struct agent_store *st = calloc(1, sizeof(*st));

	pthread_mutex_init(&st->mu, NULL);
	st->n_stacks = n_stacks;
	st->n_execs = n_execs ? n_execs : 1;
	st->evicted = calloc(n_stacks ? n_stacks : 1, sizeof(bool));
	st->paths = calloc(st->n_execs, sizeof(char *));
	return st;
}

void fake_store_free(struct agent_store *st)
{
	if (!st)
		return;
	for (unsigned i = 0; i < st->n_execs; i++)
		free(st->paths[i]);
	free(st->paths);
	free(st->evicted);
	pthread_mutex_destroy(&st->mu);
	free(st);
}

void fake_store_evict_stack(struct agent_store *st, unsigned idx)
{
	pthread_mutex_lock(&st->mu);
	if (idx < st->n_stacks)
		st->evicted[idx] = true;
	pthread_mutex_unlock(&st->mu);
}

void fake_store_set_exec_path(struct agent_store *st, unsigned idx, const char *path)
{
	pthread_mutex_lock(&st->mu);
	if (idx < st->n_execs) {
		free(st->paths[idx]);
		st->paths[idx] = strdup(path);
	}
	pthread_mutex_unlock(&st->mu);
}

unsigned fake_store_lookups(struct agent_store *st, const char *kind)
{
	unsigned n;

	pthread_mutex_lock(&st->mu);
	n = !strcmp(kind, "stack")	  ? st->stack_lookups
	    : !strcmp(kind, "executable") ? st->exec_lookups
	    : !strcmp(kind, "kernel")	  ? st->kernel_lookups
	    : !strcmp(kind, "function")	  ? st->func_lookups
					  : st->opens;
	pthread_mutex_unlock(&st->mu);
	return n;
}

int agent_store__stack(struct agent_store *st, const uint8_t *id, size_t len, stackrelay_v1_StackDef *ret)
{
	int idx = fake_stack_index(id, len);
	uint8_t eid[FAKE_EXEC_ID_BYTES], kid[FAKE_KERNEL_ID_BYTES];
	unsigned nf;
	bool evicted;

	pthread_mutex_lock(&st->mu);
	st->stack_lookups++;
	evicted = idx < 0 || (unsigned)idx >= st->n_stacks || st->evicted[idx];
	pthread_mutex_unlock(&st->mu);
	if (evicted)
		return -ENOENT;
	nf = 3;
	memset(ret, 0, sizeof(*ret));
	ret->id = bytes_of(id, len);
	ret->frames = calloc(nf, sizeof(*ret->frames));
	ret->frames_count = (pb_size_t)nf;
	for (unsigned i = 0; i < 2; i++) {
		stackrelay_v1_FrameKind k = stackrelay_v1_FrameKind_FRAME_KIND_USER;

		fake_exec_id(((unsigned)idx + i) % st->n_execs, eid);
		ret->frames[i].executable_id = bytes_of(eid, sizeof(eid));
		ret->frames[i].address = u64(0x401000 + 0x10 * (uint64_t)idx + i);
		ret->frames[i].kind = dup_mem(&k, sizeof(k));
	}
	if (idx % 2) {
		stackrelay_v1_FrameKind k = stackrelay_v1_FrameKind_FRAME_KIND_KERNEL;

		fake_kernel_id(kid);
		ret->frames[2].executable_id = bytes_of(kid, sizeof(kid));
		ret->frames[2].address = u64(0xffffffff81000000ULL + (uint64_t)idx);
		ret->frames[2].kind = dup_mem(&k, sizeof(k));
	} else {
		stackrelay_v1_FrameKind k = stackrelay_v1_FrameKind_FRAME_KIND_INTERPRETED;
		uint8_t fid[FAKE_FUNC_ID_BYTES];

		fake_func_id(((unsigned)idx / 2) % FAKE_N_FUNCS, fid);
		ret->frames[2].function_id = bytes_of(fid, sizeof(fid));
		ret->frames[2].line = u32(10 + (uint32_t)idx);
		ret->frames[2].address = u64(2 * (uint64_t)idx);
		ret->frames[2].kind = dup_mem(&k, sizeof(k));
	}
	return 0;
}

int agent_store__function(struct agent_store *st, const uint8_t *id, size_t len, stackrelay_v1_FunctionDef *ret)
{
	int idx = fake_func_index(id, len);
	char name[64];

	pthread_mutex_lock(&st->mu);
	st->func_lookups++;
	pthread_mutex_unlock(&st->mu);
	if (idx < 0 || idx >= FAKE_N_FUNCS)
		return -ENOENT;
	memset(ret, 0, sizeof(*ret));
	ret->id = bytes_of(id, len);
	ret->runtime = strdup("cpython");
	snprintf(name, sizeof(name), "func%d", idx);
	ret->name = strdup(name);
	ret->file_name = strdup("/app/main.py");
	ret->start_line = u32(1 + (uint32_t)idx);
	return 0;
}

int agent_store__executable(struct agent_store *st, const uint8_t *id, size_t len, stackrelay_v1_ExecutableDef *ret)
{
	int idx = fake_exec_index(id, len);
	char name[64];

	pthread_mutex_lock(&st->mu);
	st->exec_lookups++;
	pthread_mutex_unlock(&st->mu);
	if (idx < 0 || (unsigned)idx >= st->n_execs)
		return -ENOENT;
	memset(ret, 0, sizeof(*ret));
	snprintf(name, sizeof(name), "exe%d", idx);
	ret->id = bytes_of(id, len);
	ret->id_kind = malloc(sizeof(*ret->id_kind));
	*ret->id_kind = stackrelay_v1_ExecutableIdKind_EXECUTABLE_ID_KIND_GNU_BUILD_ID;
	ret->file_name = strdup(name);
	snprintf(name, sizeof(name), "/usr/bin/exe%d", idx);
	ret->path = strdup(name);
	ret->file_size = u64(4096 * (uint64_t)(idx + 1));
	return 0;
}

int agent_store__kernel(struct agent_store *st, const uint8_t *id, size_t len, stackrelay_v1_KernelDef *ret)
{
	uint8_t kid[FAKE_KERNEL_ID_BYTES];

	pthread_mutex_lock(&st->mu);
	st->kernel_lookups++;
	pthread_mutex_unlock(&st->mu);
	fake_kernel_id(kid);
	if (len != sizeof(kid) || memcmp(id, kid, len) != 0)
		return -ENOENT;
	memset(ret, 0, sizeof(*ret));
	ret->id = bytes_of(id, len);
	ret->release = strdup("6.1.0-fake");
	ret->boot_id = strdup("00000000-0000-0000-0000-000000000000");
	return 0;
}

/* One kernel whose text address is unknown: every frame a runtime address, the whole kallsyms its table. */
int agent_store__kernel_copy(struct agent_store *st, struct agent_kernel *ret)
{
	(void)st;
	memset(ret, 0, sizeof(*ret));
	fake_kernel_id(ret->id);
	memcpy(ret->runtime_id, ret->id, sizeof(ret->id));
	return 0;
}

int agent_store__open_executable(struct agent_store *st, const uint8_t *id, size_t len)
{
	int idx = fake_exec_index(id, len), fd = -ENOENT;

	pthread_mutex_lock(&st->mu);
	st->opens++;
	if (idx >= 0 && (unsigned)idx < st->n_execs && st->paths[idx]) {
		fd = open(st->paths[idx], O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			fd = -errno;
	}
	pthread_mutex_unlock(&st->mu);
	return fd;
}

void fake_sample(stackrelay_v1_Sample *ret, unsigned stack_idx, uint32_t pid, uint64_t count)
{
	uint8_t sid[FAKE_STACK_ID_BYTES], kid[FAKE_KERNEL_ID_BYTES];
	char name[32];

	memset(ret, 0, sizeof(*ret));
	fake_stack_id(stack_idx, sid);
	ret->stack_id = bytes_of(sid, sizeof(sid));
	ret->pid = u32(pid);
	ret->tid = u32(pid);
	snprintf(name, sizeof(name), "proc%u", pid % 100);
	ret->process_name = strdup(name);
	ret->thread_name = strdup(name);
	ret->count = u64(count);
	ret->start_time_unix_nano = u64(1700000000000000000ULL);
	ret->end_time_unix_nano = u64(1700000010000000000ULL);
	if (stack_idx % 2) {
		fake_kernel_id(kid);
		ret->kernel_id = bytes_of(kid, sizeof(kid));
	}
}
