// SPDX-License-Identifier: Apache-2.0
/*
 * The definition store, window aggregation and the --output writer:
 * content-addressed stack IDs, LRU eviction within max_stacks, lookups that
 * copy into nanopb structs, batches, and a file that decodes back (with
 * nanopb here; the root integration test decodes with protoc's classes).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <pb_decode.h>

#include "agent/aggregate.h"
#include "agent/elfinfo.h"
#include "agent/output.h"
#include "agent/definition-store.h"

static const uint8_t BID_A[20] = { 0xaa, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19 };
static const uint8_t BID_B[8] = { 0xbb, 1, 2, 3, 4, 5, 6, 7 };

static struct agent_store *new_store(uint64_t max, uint32_t *ret_a, uint32_t *ret_b)
{
	struct agent_store *s = agent_store_new(max);
	struct agent_exe_def a = { .id_len = 20, .id_kind = 1, .path = "/usr/bin/a", .size = 1000 };
	struct agent_exe_def b = { .id_len = 8, .id_kind = 1, .path = "/lib/libb.so", .size = 2000, .is_go = true };
	struct agent_kernel k = { .release = "6.1.0-test",
				  .boot_id = "11111111-2222-3333-4444-555555555555",
				  .build_id = { 0x4b, 1, 2, 3 },
				  .build_id_len = 4,
				  .text_start = 0xffffffff81000000ULL,
				  .text_end = 0xffffffff82000000ULL };
	struct agent_kernel_module mod = {
		.name = "ext4", .start = 0xffffffffc0000000ULL, .size = 0x1000, .live = true
	};

	assert_non_null(s);
	memcpy(a.id, BID_A, 20);
	memcpy(b.id, BID_B, 8);
	*ret_a = (uint32_t)agent_store__add_exe(s, &a);
	*ret_b = (uint32_t)agent_store__add_exe(s, &b);
	assert_int_equal(agent_store__add_exe(s, &a), *ret_a); /* the same ID is the same executable */
	k.modules = &mod;
	k.n_modules = 1;
	assert_int_equal(agent_kernel_finish(&k), 0);
	assert_int_equal(agent_store__set_kernel(s, &k), 0);
	free(k.by_start); /* the store keeps a copy */
	return s;
}

static void test_stack_ids(void **state)
{
	uint32_t a, b;
	struct agent_store *s = new_store(0, &a, &b);
	struct agent_frame f1[] = {
		{ .address = 0xffffffff81000000ULL, .exe = AGENT_EXE_KERNEL, .kind = 2 },
		{ .address = 0x1234, .exe = a, .kind = 1 },
		{ .address = 0x5678, .exe = b, .kind = 1 },
	};
	struct agent_frame f2[3];
	uint8_t id1[16], id2[16], id3[16];
	stackrelay_v1_StackDef def;

	(void)state;
	assert_int_equal(agent_store__intern_stack(s, f1, 3, false, 0, id1), 0);
	memcpy(f2, f1, sizeof(f1));
	assert_int_equal(agent_store__intern_stack(s, f2, 3, false, 0, id2), 0);
	assert_memory_equal(id1, id2, 16);
	f2[2].address++;
	assert_int_equal(agent_store__intern_stack(s, f2, 3, false, 0, id3), 0);
	assert_memory_not_equal(id1, id3, 16);
	f2[2].address--;
	f2[2].exe = a; /* same address, other executable: another stack */
	assert_int_equal(agent_store__intern_stack(s, f2, 3, false, 0, id3), 0);
	assert_memory_not_equal(id1, id3, 16);

	assert_int_equal(agent_store__stack(s, id1, 16, &def), 0);
	assert_int_equal(def.frames_count, 3);
	assert_int_equal(*def.frames[0].kind, 2);
	assert_int_equal(def.frames[0].executable_id->size, AGENT_KERNEL_ID_LEN);
	assert_int_equal(*def.frames[1].address, 0x1234);
	assert_memory_equal(def.frames[1].executable_id->bytes, BID_A, 20);
	assert_memory_equal(def.frames[2].executable_id->bytes, BID_B, 8);
	assert_null(def.truncated);
	pb_release(stackrelay_v1_StackDef_fields, &def);
	memset(id3, 0, sizeof(id3));
	assert_int_equal(agent_store__stack(s, id3, 16, &def), -ENOENT);
	agent_store_free(s);
}

static void test_defs(void **state)
{
	uint32_t a, b;
	struct agent_store *s = new_store(0, &a, &b);
	stackrelay_v1_ExecutableDef e;
	stackrelay_v1_KernelDef k;
	uint8_t kid[16];

	(void)state;
	assert_int_equal(agent_store__executable(s, BID_B, 8, &e), 0);
	assert_string_equal(e.file_name, "libb.so");
	assert_string_equal(e.path, "/lib/libb.so");
	assert_int_equal(*e.file_size, 2000);
	assert_true(*e.is_go);
	pb_release(stackrelay_v1_ExecutableDef_fields, &e);
	assert_int_equal(agent_store__executable(s, BID_B, 7, &e), -ENOENT);
	/* The image: the same definition on every node of this build, so nothing of this boot. */
	assert_true(agent_store__kernel_id(s, kid));
	assert_int_equal(agent_store__kernel(s, kid, 16, &k), 0);
	assert_string_equal(k.release, "6.1.0-test");
	assert_int_equal(*k.addressing, stackrelay_v1_KernelAddressing_KERNEL_ADDRESSING_IMAGE_OFFSET);
	assert_int_equal(k.build_id->size, 4);
	assert_null(k.boot_id);
	assert_int_equal(k.modules_count, 0);
	pb_release(stackrelay_v1_KernelDef_fields, &k);
	/* A module: its name; the runtime space: the boot and where modules lie. */
	assert_true(agent_store__exe_id(s, AGENT_EXE_KERNEL_MODULE0, kid) == 16);
	assert_int_equal(agent_store__kernel(s, kid, 16, &k), 0);
	assert_int_equal(*k.addressing, stackrelay_v1_KernelAddressing_KERNEL_ADDRESSING_MODULE_OFFSET);
	assert_string_equal(k.module, "ext4");
	assert_null(k.build_id); /* ext4 has none here: its ID is made from the image's, name and size */
	pb_release(stackrelay_v1_KernelDef_fields, &k);
	assert_true(agent_store__exe_id(s, AGENT_EXE_KERNEL_RUNTIME, kid) == 16);
	assert_int_equal(agent_store__kernel(s, kid, 16, &k), 0);
	assert_null(k.addressing);
	assert_string_equal(k.boot_id, "11111111-2222-3333-4444-555555555555");
	assert_int_equal(k.modules_count, 1);
	assert_string_equal(k.modules[0].name, "ext4");
	pb_release(stackrelay_v1_KernelDef_fields, &k);
	kid[0] ^= 1;
	assert_int_equal(agent_store__kernel(s, kid, 16, &k), -ENOENT);
	assert_int_equal(agent_store__exe_id(s, AGENT_EXE_KERNEL_MODULE0 + 1, kid), -ENOENT);
	/* No process ever mapped it: nothing to open. */
	assert_int_equal(agent_store__open_executable(s, BID_A, 20), -ENOENT);
	{ /* A stored stack gives back each frame's executable, kernel space and kind (frames are kept packed). */
		struct agent_frame f[] = {
			{ .address = 0x7f0000001234ULL, .exe = b, .kind = stackrelay_v1_FrameKind_FRAME_KIND_USER },
			{ .address = 0xffffffff81000000ULL, .exe = AGENT_EXE_KERNEL, .kind = 2 },
			{ .address = 0xffffffffc0001000ULL, .exe = AGENT_EXE_KERNEL_MODULE0, .kind = 2 },
			{ .address = 0xffffffff82000000ULL, .exe = AGENT_EXE_KERNEL_RUNTIME, .kind = 2 },
			{ .address = 0x99, .exe = AGENT_EXE_NONE, .kind = 3 },
		};
		stackrelay_v1_StackDef sd;
		uint8_t sid[16], want[AGENT_BUILD_ID_MAX];

		assert_int_equal(agent_store__intern_stack(s, f, SR_ARRAY_SIZE(f), false, 1, sid), 0);
		assert_int_equal(agent_store__stack(s, sid, 16, &sd), 0);
		assert_int_equal(sd.frames_count, SR_ARRAY_SIZE(f));
		for (size_t i = 0; i < SR_ARRAY_SIZE(f); i++) {
			int len = agent_store__exe_id(s, f[i].exe, want);

			assert_int_equal(*sd.frames[i].address, f[i].address);
			assert_int_equal(*sd.frames[i].kind, f[i].kind);
			if (len <= 0) {
				assert_null(sd.frames[i].executable_id);
				continue;
			}
			assert_non_null(sd.frames[i].executable_id);
			assert_int_equal(sd.frames[i].executable_id->size, len);
			assert_memory_equal(sd.frames[i].executable_id->bytes, want, (size_t)len);
		}
		pb_release(stackrelay_v1_StackDef_fields, &sd);
	}
	agent_store_free(s);
}

/* The vDSO has no file; open_executable hands out a copy of the image for symbol extraction. */
static void test_open_vdso(void **state)
{
	struct agent_store *s = agent_store_new(0);
	struct agent_exe_def d = { .id_len = 4, .id = { 1, 2, 3, 4 }, .id_kind = 1, .path = "[vdso]" };
	struct agent_elf_info e;
	char line[512];
	FILE *f = fopen("/proc/self/maps", "r");
	int fd;

	(void)state;
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long a, b;
		if (strstr(line, "[vdso]") && sscanf(line, "%lx-%lx", &a, &b) == 2)
			d.size = b - a;
	}
	fclose(f);
	if (!d.size)
		skip(); /* no vDSO (vdso=0 on the kernel command line) */
	assert_true(agent_store__add_exe(s, &d) >= 0);
	fd = agent_store__open_executable(s, d.id, 4);
	assert_true(fd >= 0);
	assert_int_equal(agent_elf_read_fd(fd, &e), 0);
	assert_int_equal(e.type, 3 /* ET_DYN */);
	assert_true(e.n_segs >= 1);
	close(fd);
	agent_store_free(s);
}

static void test_eviction(void **state)
{
	uint32_t a, b;
	struct agent_store *s = new_store(4, &a, &b);
	struct agent_frame f = { .address = 0, .exe = a, .kind = 1 };
	uint8_t ids[6][16], id[16];
	struct agent_store_stats st;
	stackrelay_v1_StackDef def;

	(void)state;
	/* Window 0: four stacks fill the store. */
	for (int i = 0; i < 4; i++) {
		f.address = (uint64_t)i;
		assert_int_equal(agent_store__intern_stack(s, &f, 1, false, 0, ids[i]), 0);
	}
	/* A fifth in the same window is refused: each is needed by this window's samples. */
	f.address = 4;
	assert_int_equal(agent_store__intern_stack(s, &f, 1, false, 0, id), -ENOSPC);
	/* Window 1 uses stack 0 again, then two new ones evict the least recently used (1, 2). */
	f.address = 0;
	assert_int_equal(agent_store__intern_stack(s, &f, 1, false, 1, id), 0);
	f.address = 4;
	assert_int_equal(agent_store__intern_stack(s, &f, 1, false, 1, ids[4]), 0);
	f.address = 5;
	assert_int_equal(agent_store__intern_stack(s, &f, 1, false, 1, ids[5]), 0);
	assert_int_equal(agent_store__stack(s, ids[1], 16, &def), -ENOENT);
	assert_int_equal(agent_store__stack(s, ids[2], 16, &def), -ENOENT);
	assert_int_equal(agent_store__stack(s, ids[0], 16, &def), 0);
	pb_release(stackrelay_v1_StackDef_fields, &def);
	agent_store__stats(s, &st);
	assert_int_equal(st.stacks, 4);
	assert_int_equal(st.stacks_evicted, 2);
	agent_store_free(s);
}

/* Stacks not used since a window are dropped, the oldest first; the others stay. */
static void test_expire(void **state)
{
	uint32_t a, b;
	struct agent_store *s = new_store(100, &a, &b);
	struct agent_frame f = { .address = 0, .exe = a, .kind = 1 };
	uint8_t ids[6][16];
	struct agent_store_stats st;
	stackrelay_v1_StackDef def;

	(void)state;
	/* Stack i last used in window i; stack 0 used again in window 5. */
	for (int i = 0; i < 6; i++) {
		f.address = (uint64_t)i;
		assert_int_equal(agent_store__intern_stack(s, &f, 1, false, (uint64_t)i, ids[i]), 0);
	}
	f.address = 0;
	assert_int_equal(agent_store__intern_stack(s, &f, 1, false, 5, ids[0]), 0);
	assert_int_equal(agent_store__expire_stacks(s, 3), 2); /* stacks 1 and 2 */
	assert_int_equal(agent_store__stack(s, ids[1], 16, &def), -ENOENT);
	assert_int_equal(agent_store__stack(s, ids[2], 16, &def), -ENOENT);
	assert_int_equal(agent_store__stack(s, ids[0], 16, &def), 0);
	pb_release(stackrelay_v1_StackDef_fields, &def);
	assert_int_equal(agent_store__expire_stacks(s, 3), 0);
	agent_store__stats(s, &st);
	assert_int_equal(st.stacks, 4);
	assert_int_equal(st.stacks_expired, 2);
	assert_int_equal(st.stacks_evicted, 0);
	assert_int_equal(agent_store__expire_stacks(s, 100), 4);
	agent_store__stats(s, &st);
	assert_int_equal(st.stacks, 0);
	agent_store_free(s);
}

/* Executables are freed once nothing names them, after a grace, and their index is reused. */
static void test_trim_exes(void **state)
{
	uint32_t a, b;
	struct agent_store *s = new_store(100, &a, &b);
	struct agent_exe_def c = { .id = { 0xcc, 1 }, .id_len = 2, .id_kind = 1, .path = "/usr/bin/c", .size = 10 };
	struct agent_frame f = { .address = 7, .exe = b, .kind = 1 };
	uint8_t id[16], out[AGENT_BUILD_ID_MAX];
	struct agent_store_stats st;
	stackrelay_v1_ExecutableDef def;
	const uint64_t w = 10, grace = AGENT_STORE_EXE_GRACE_WINDOWS;

	(void)state;
	/* a is referenced twice (new_store adds it twice), b once and by a stack. */
	assert_int_equal(agent_store__intern_stack(s, &f, 1, false, 1, id), 0);
	agent_store__put_exe(s, a);
	agent_store__put_exe(s, b);
	assert_int_equal(agent_store__trim_exes(s, w), 0);
	agent_store__put_exe(s, a); /* a's last reference goes in window w */
	assert_int_equal(agent_store__trim_exes(s, w + grace - 1), 0);
	assert_int_equal(agent_store__exe_id(s, a, out), 20);
	assert_int_equal(agent_store__trim_exes(s, w + grace), 1);
	assert_int_equal(agent_store__exe_id(s, a, out), 0);
	assert_int_equal(agent_store__executable(s, BID_A, 20, &def), -ENOENT);
	agent_store__stats(s, &st);
	assert_int_equal(st.executables, 1);
	assert_int_equal(st.executables_freed, 1);
	/* A new executable takes the freed index. */
	assert_int_equal(agent_store__add_exe(s, &c), (int64_t)a);
	assert_int_equal(agent_store__exe_id(s, a, out), 2);
	/* b goes once its stack is dropped, again after the grace. */
	assert_int_equal(agent_store__expire_stacks(s, 100), 1);
	assert_int_equal(agent_store__trim_exes(s, w + grace + 1), 0);
	assert_int_equal(agent_store__trim_exes(s, w + 2 * grace), 1);
	assert_int_equal(agent_store__executable(s, BID_B, 8, &def), -ENOENT);
	agent_store__stats(s, &st);
	assert_int_equal(st.executables, 1);
	agent_store_free(s);
}

/* Functions: content-addressed, in stack IDs with their line, copied out by lookups, bounded. */
static void test_functions(void **state)
{
	uint32_t a, b;
	struct agent_store *s = new_store(2, &a, &b);
	struct agent_function_def fa = {
		.runtime = "cpython", .name = "alpha", .file_name = "/app/x.py", .start_line = 3
	};
	struct agent_function_def fb = { .runtime = "perf-map", .name = "LazyCompile:*hot" };
	/* Fields cannot run into each other: "ab" + "c" differs from "a" + "bc". */
	struct agent_function_def r1 = { .runtime = "cpython", .name = "ab", .file_name = "c" };
	struct agent_function_def r2 = { .runtime = "cpython", .name = "a", .file_name = "bc" };
	uint8_t id1[16], id2[16], fid[16];
	stackrelay_v1_StackDef sd;
	stackrelay_v1_FunctionDef fd;
	struct agent_store_stats st;
	int64_t ia, ib;

	agent_function_id(&r1, id1);
	agent_function_id(&r2, id2);
	assert_memory_not_equal(id1, id2, 16);

	ia = agent_store__add_function(s, &fa, 1);
	ib = agent_store__add_function(s, &fb, 1);
	assert_true(ia >= 0 && ib >= 0 && ia != ib);
	assert_int_equal(agent_store__add_function(s, &fa, 1), ia);
	assert_int_equal(agent_store__add_function(s, &(struct agent_function_def){ .runtime = "cpython" }, 1),
			 -EINVAL);
	assert_int_equal(agent_store__function_id(s, (uint32_t)ia, fid), 16);
	agent_function_id(&fa, id1);
	assert_memory_equal(fid, id1, 16);

	{
		struct agent_frame f[] = {
			{ .address = 12,
			  .exe = (uint32_t)ia,
			  .line = 7,
			  .kind = stackrelay_v1_FrameKind_FRAME_KIND_INTERPRETED },
			{ .address = 0x1234, .exe = a, .kind = 1 },
		};
		uint8_t s1[16], s2[16];

		assert_int_equal(agent_store__intern_stack(s, f, 2, false, 1, s1), 0);
		f[0].line = 8; /* another line is another stack */
		agent_stack_id(s, f, 2, s2);
		assert_memory_not_equal(s1, s2, 16);
		f[0].line = 7;
		f[0].exe = (uint32_t)ib; /* another function too */
		f[0].kind = stackrelay_v1_FrameKind_FRAME_KIND_JIT;
		agent_stack_id(s, f, 2, s2);
		assert_memory_not_equal(s1, s2, 16);

		assert_int_equal(agent_store__stack(s, s1, 16, &sd), 0);
		assert_int_equal(sd.frames_count, 2);
		assert_null(sd.frames[0].executable_id);
		assert_non_null(sd.frames[0].function_id);
		assert_memory_equal(sd.frames[0].function_id->bytes, id1, 16);
		assert_int_equal(*sd.frames[0].line, 7);
		assert_int_equal(*sd.frames[0].address, 12);
		assert_int_equal(*sd.frames[0].kind, stackrelay_v1_FrameKind_FRAME_KIND_INTERPRETED);
		assert_null(sd.frames[1].function_id);
		assert_non_null(sd.frames[1].executable_id);
		pb_release(stackrelay_v1_StackDef_fields, &sd);
	}
	assert_int_equal(agent_store__function(s, id1, 16, &fd), 0);
	assert_string_equal(fd.runtime, "cpython");
	assert_string_equal(fd.name, "alpha");
	assert_string_equal(fd.file_name, "/app/x.py");
	assert_int_equal(*fd.start_line, 3);
	pb_release(stackrelay_v1_FunctionDef_fields, &fd);
	agent_function_id(&fb, id2);
	assert_int_equal(agent_store__function(s, id2, 16, &fd), 0);
	assert_null(fd.file_name);
	assert_null(fd.start_line);
	pb_release(stackrelay_v1_FunctionDef_fields, &fd);
	assert_int_equal(agent_store__function(s, id2, 15, &fd), -ENOENT);
	agent_store__stats(s, &st);
	assert_int_equal(st.functions, 2);
	agent_store_free(s);
}

/* The function table's bound: unreferenced, not recently used functions go first; in-use ones never. */
static void test_function_limit(void **state)
{
	struct agent_functions f;
	char name[32];
	int64_t first, i0;

	agent_functions_init(&f);
	f.max_n = 4;
	for (int i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		i0 = agent_functions__add(&f, &(struct agent_function_def){ .runtime = "perf-map", .name = name }, 1);
		assert_true(i0 >= 0);
	}
	/* Full of functions used in window 1: a fifth in window 1 is refused. */
	assert_int_equal(agent_functions__add(&f, &(struct agent_function_def){ .runtime = "perf-map", .name = "x" },
					      1),
			 -ENOSPC);
	first = agent_functions__add(&f, &(struct agent_function_def){ .runtime = "perf-map", .name = "f0" }, 1);
	agent_functions__ref(&f, (uint32_t)first); /* a stack holds f0 */
	/* Window 2: the least recently used unreferenced one (f1) goes, and its index is reused. */
	i0 = agent_functions__add(&f, &(struct agent_function_def){ .runtime = "perf-map", .name = "x" }, 2);
	assert_true(i0 >= 0 && i0 < 4);
	assert_non_null(agent_functions__at(&f, (uint32_t)first));
	assert_string_equal(agent_functions__at(&f, (uint32_t)first)->name, "f0");
	assert_int_equal(f.n, 4);
	assert_int_equal(f.evicted, 1);
	/* The name is cut before hashing: longer names equal in their first AGENT_FUNCTION_NAME_MAX bytes are one. */
	{
		char *l1 = malloc(AGENT_FUNCTION_NAME_MAX + 10), *l2 = malloc(AGENT_FUNCTION_NAME_MAX + 20);
		uint8_t a[16], b[16];

		memset(l1, 'a', AGENT_FUNCTION_NAME_MAX + 9);
		l1[AGENT_FUNCTION_NAME_MAX + 9] = '\0';
		memset(l2, 'a', AGENT_FUNCTION_NAME_MAX + 19);
		l2[AGENT_FUNCTION_NAME_MAX + 19] = '\0';
		agent_function_id(&(struct agent_function_def){ .runtime = "perf-map", .name = l1 }, a);
		agent_function_id(&(struct agent_function_def){ .runtime = "perf-map", .name = l2 }, b);
		assert_memory_equal(a, b, 16);
		free(l1);
		free(l2);
	}
	agent_functions_done(&f);
}

static void test_aggregate(void **state)
{
	struct agent_agg *agg = agent_agg_new(3);
	struct agent_agg_key k = { .pid = 10, .tid = 11, .start_ns = 123000000000ULL };
	struct agent_cgroup_info cg = { .container_id = "abc", .pod_uid = "pod" };
	struct agent_agg_labels l = {
		.thread_name = "t", .process_name = "p", .exe_path = "/bin/p", .cg = &cg, .kernel = true
	};
	struct agent_batch b;
	uint8_t kid[16] = { 7 };

	(void)state;
	assert_non_null(agg);
	for (int i = 0; i < 5; i++)
		assert_int_equal(agent_agg__add(agg, &k, &l, 0), 0);
	k.tid = 12;
	assert_int_equal(agent_agg__add(agg, &k, &l, 0), 0);
	k.stack_id[0] = 1;
	assert_int_equal(agent_agg__add(agg, &k, &l, 0), 0);
	k.stack_id[0] = 2;
	assert_int_equal(agent_agg__add(agg, &k, &l, 0), -ENOSPC); /* max_entries 3 */
	assert_int_equal(agent_agg__flush(agg, 1000, 2000, kid, 16, 19, 100, &b), 0);
	assert_int_equal(b.n_samples, 3);
	assert_int_equal(b.total_count, 7);
	assert_int_equal(*b.samples[0].count, 5); /* largest first */
	assert_int_equal(*b.samples[0].tid, 11);
	assert_int_equal(*b.samples[0].process_start_ticks, 12300);
	assert_string_equal(b.samples[0].container_id, "abc");
	assert_int_equal(b.samples[0].kernel_id->bytes[0], 7);
	assert_int_equal(*b.samples[0].start_time_unix_nano, 1000);
	assert_int_equal(b.frequency_hz, 19);
	agent_batch_free(&b);
	assert_int_equal(agent_agg__size(agg), 0);
	assert_int_equal(agent_agg__flush(agg, 2000, 3000, NULL, 0, 19, 100, &b), 0);
	assert_int_equal(b.n_samples, 0);
	agent_batch_free(&b);
	agent_agg_free(agg);
}

/* Off-CPU waits of a stack add up apart from its CPU samples; CPU samples leave the new fields unset. */
static void test_aggregate_off_cpu(void **state)
{
	struct agent_agg *agg = agent_agg_new(0);
	struct agent_agg_key k = { .pid = 10, .tid = 11, .start_ns = 1 };
	struct agent_agg_labels l = { .thread_name = "t", .process_name = "p" };
	struct agent_batch b;

	(void)state;
	assert_int_equal(agent_agg__add(agg, &k, &l, 0), 0);
	k.profile_type = stackrelay_v1_ProfileType_PROFILE_TYPE_OFF_CPU;
	assert_int_equal(agent_agg__add(agg, &k, &l, 10000000), 0);
	assert_int_equal(agent_agg__add(agg, &k, &l, 20000000), 0);
	assert_int_equal(agent_agg__add(agg, &k, &l, 30000000), 0);
	assert_int_equal(agent_agg__flush(agg, 1000, 2000, NULL, 0, 19, 100, &b), 0);
	assert_int_equal(b.n_samples, 2);
	assert_int_equal(b.total_count, 4);
	assert_int_equal(*b.samples[0].count, 3); /* largest first: the waits */
	assert_non_null(b.samples[0].profile_type);
	assert_int_equal(*b.samples[0].profile_type, stackrelay_v1_ProfileType_PROFILE_TYPE_OFF_CPU);
	assert_int_equal(*b.samples[0].off_cpu_nanos, 60000000);
	assert_null(b.samples[1].profile_type);
	assert_null(b.samples[1].off_cpu_nanos);
	agent_batch_free(&b);
	agent_agg_free(agg);
}

static bool read_cb(pb_istream_t *stream, pb_byte_t *buf, size_t count)
{
	FILE *f = stream->state;

	if (fread(buf, 1, count, f) != count) {
		stream->bytes_left = 0;
		return false;
	}
	return true;
}

static void test_output_roundtrip(void **state)
{
	uint32_t a, b;
	struct agent_store *s = new_store(0, &a, &b);
	struct agent_agg *agg = agent_agg_new(0);
	struct agent_info info;
	struct agent_frame f[] = { { .address = 0xffffffff81000000ULL, .exe = AGENT_EXE_KERNEL, .kind = 2 },
				   { .address = 0x1234, .exe = a, .kind = 1 },
				   { .address = 0x99, .exe = AGENT_EXE_NONE, .kind = 3 } };
	struct agent_agg_key k = { .pid = 1, .tid = 1 };
	struct agent_agg_labels l = { .thread_name = "t", .process_name = "p", .kernel = true };
	char path[] = "/tmp/sr-test-output-XXXXXX";
	struct agent_output *o;
	struct agent_batch batch;
	uint8_t kid[16];
	int fd = mkstemp(path);
	size_t stacks = 0, exes = 0, kernels = 0, samples = 0, reqs = 0;
	FILE *in;

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	agent_info_init(&info, "node-1");
	o = agent_output_open(path, &info);
	assert_non_null(o);
	assert_true(agent_store__kernel_id(s, kid));
	/* Two windows using the same stack: its definition is written once. */
	for (int w = 0; w < 2; w++) {
		assert_int_equal(agent_store__intern_stack(s, f, 3, false, (uint64_t)w, k.stack_id), 0);
		assert_int_equal(agent_agg__add(agg, &k, &l, 0), 0);
		assert_int_equal(agent_agg__flush(agg, 1, 2, kid, 16, 19, 100, &batch), 0);
		assert_int_equal(agent_output__write(o, s, &batch), 0);
		agent_batch_free(&batch);
	}
	assert_int_equal(agent_output_close(o), 0);

	in = fopen(path, "rb");
	assert_non_null(in);
	for (;;) {
		pb_istream_t is = { read_cb, in, SIZE_MAX, NULL };
		stackrelay_v1_PushRequest req = { 0 };
		int c = fgetc(in);
		if (c == EOF)
			break;
		ungetc(c, in);
		assert_true(pb_decode_ex(&is, stackrelay_v1_PushRequest_fields, &req, PB_DECODE_DELIMITED));
		reqs++;
		assert_int_equal(*req.protocol_version, 1);
		assert_string_equal(req.agent->node_name, "node-1");
		assert_int_equal(*req.sequence, reqs);
		stacks += req.stacks_count;
		exes += req.executables_count;
		kernels += req.kernels_count;
		samples += req.samples_count;
		pb_release(stackrelay_v1_PushRequest_fields, &req);
	}
	fclose(in);
	unlink(path);
	assert_int_equal(reqs, 2);
	assert_int_equal(samples, 2);
	assert_int_equal(stacks, 1);
	assert_int_equal(exes, 1); /* only the user frame's executable; the unknown frame has none */
	assert_int_equal(kernels, 1);
	agent_agg_free(agg);
	agent_store_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stack_ids),	 cmocka_unit_test(test_defs),
		cmocka_unit_test(test_open_vdso),	 cmocka_unit_test(test_eviction),
		cmocka_unit_test(test_aggregate),	 cmocka_unit_test(test_aggregate_off_cpu),
		cmocka_unit_test(test_output_roundtrip), cmocka_unit_test(test_functions),
		cmocka_unit_test(test_function_limit),	 cmocka_unit_test(test_expire),
		cmocka_unit_test(test_trim_exes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
