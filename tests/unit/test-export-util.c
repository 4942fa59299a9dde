// SPDX-License-Identifier: Apache-2.0
#include <stdio.h>
#include <string.h>

#include "core/model.h"
#include "test-export-util.h"

static struct gw_location *location(struct gw_stores *s, struct gw_executable *exe, struct gw_kernel *k, uint64_t addr,
				    const char *fn, uint32_t line)
{
	struct gw_location *l =
		gw_stores__intern_location(s, k ? GW_FRAME_KERNEL : GW_FRAME_USER, addr, k ? NULL : exe, k);
	struct gw_line ln = { .function = fn, .file = k ? "" : "src/app.c", .line = line, .start_line = line - 1 };
	struct gw_lines *lines;

	if (!l)
		return NULL;
	if (!gw_location__lines(l)) {
		lines = gw_lines_new(&ln, 1);
		if (lines && !gw_location__set_lines(l, lines))
			gw_lines_free(lines);
	}
	return l;
}

struct gw_profiles *xt_batch(struct gw_stores *s, unsigned tag, unsigned n_resources, unsigned n_samples,
			     uint64_t *ret_total)
{
	uint8_t id[20], kid[20];
	char path[64], name[64];
	struct gw_executable_def def = { 0 };
	struct gw_kernel_def kdef = { 0 };
	struct gw_executable *exe;
	struct gw_kernel *kernel;
	struct gw_profiles *p;
	uint64_t total = 0;

	memset(id, 0xab, sizeof(id));
	id[1] = (uint8_t)tag;
	memset(kid, 0xcd, sizeof(kid));
	snprintf(path, sizeof(path), "/usr/bin/app%u", tag);
	def = (struct gw_executable_def){ .id = id,
					  .id_len = sizeof(id),
					  .id_kind = GW_EXE_ID_GNU_BUILD_ID,
					  .file_name = path + 9,
					  .path = path,
					  .gnu_build_id = id,
					  .gnu_build_id_len = sizeof(id) };
	kdef = (struct gw_kernel_def){
		.id = kid, .id_len = sizeof(kid), .release = "6.1.0", .build_id = kid, .build_id_len = sizeof(kid)
	};
	exe = gw_stores__intern_executable(s, &def);
	kernel = gw_stores__intern_kernel(s, &kdef);
	p = gw_profiles_new();
	if (!exe || !kernel || !p)
		goto fail;
	for (unsigned r = 0; r < n_resources; r++) {
		char svc[64];
		struct gw_attr attrs[] = {
			{ .key = "service.name", .type = GW_ATTR_STRING, .v.s = svc },
			{ .key = "host.name", .type = GW_ATTR_STRING, .v.s = "node-1" },
			{ .key = "process.executable.name", .type = GW_ATTR_STRING, .v.s = path + 9 },
		};
		struct gw_resource *res;

		snprintf(svc, sizeof(svc), "svc-%u-%u", tag, r);
		res = gw_profiles__add_resource(p, attrs, 3, 99);
		if (!res)
			goto fail;
		for (unsigned i = 0; i < n_samples; i++) {
			struct gw_location *locs[5];
			uint32_t n = 1 + i % 4, m = 0;
			uint8_t sid[16] = { 0 };
			struct gw_stack *st;
			char thread[32];
			struct gw_sample smp;

			for (uint32_t k = 0; k < n; k++) {
				snprintf(name, sizeof(name), "fn_%u_%u", tag, (i + k) % 7);
				locs[m] = location(s, exe, NULL, 0x1000 + 0x10 * ((i + k) % 7), name, 10 + (i + k) % 7);
				if (!locs[m])
					goto fail;
				m++;
			}
			if (i % 3 == 0) {
				locs[m] = location(s, NULL, kernel, 0xffffffff81000000ULL + i % 5, "do_syscall_64", 1);
				if (!locs[m])
					goto fail;
				m++;
			}
			sid[0] = (uint8_t)tag;
			sid[1] = (uint8_t)(i % 3 == 0 ? i % 5 : 0xff); /* the kernel frame's address */
			sid[2] = (uint8_t)m;
			memcpy(sid + 3, &n, sizeof(n));
			sid[8] = (uint8_t)(i % 3 == 0);
			{
				uint32_t first = (uint32_t)(i % 7);

				memcpy(sid + 9, &first, sizeof(first));
			}
			st = gw_stores__intern_stack(s, sid, sizeof(sid), false, locs, m);
			if (!st)
				goto fail;
			snprintf(thread, sizeof(thread), "worker-%u", i % 2);
			smp = (struct gw_sample){ .stack = st,
						  .count = i + 1,
						  .pid = 100 + i % 3,
						  .tid = 1000 + i % 5,
						  .thread_name = thread };
			if (gw_resource__add_sample(p, res, &smp) < 0) {
				gw_stack__unref(st);
				goto fail;
			}
			gw_stack__unref(st);
			res = &p->resources[r];
			gw_resource__cover(res, 1700000000000000000ULL + i, 1700000000000000000ULL + 10000000000ULL);
			total += i + 1;
		}
	}
	gw_executable__unref(exe);
	gw_kernel__unref(kernel);
	*ret_total = total;
	return p;
fail:
	gw_executable__unref(exe);
	gw_kernel__unref(kernel);
	gw_profiles__unref(p);
	return NULL;
}

/* A batch of one sample whose stack is [JIT hot, INTERPRETED alpha:12, native] in a process named exe_name. */
struct gw_profiles *xt_function_batch(struct gw_stores *s, const char *exe_name, uint64_t *ret_total)
{
	static const uint8_t fa[16] = { 0xf1 }, fj[16] = { 0xf2 }, eid[20] = { 0xee }, sid[16] = { 0x51 };
	struct gw_function_def da = { .id = fa,
				      .id_len = 16,
				      .runtime = "cpython",
				      .name = "alpha",
				      .file_name = "/app/work.py",
				      .start_line = 10 };
	struct gw_function_def dj = { .id = fj, .id_len = 16, .runtime = "perf-map", .name = "JS:*hot /app/x.js:3" };
	struct gw_executable_def de = { .id = eid, .id_len = 20, .id_kind = GW_EXE_ID_GNU_BUILD_ID, .file_name = "app" };
	struct gw_attr attrs[] = { { .key = "process.executable.name", .type = GW_ATTR_STRING, .v.s = exe_name } };
	struct gw_function *a = gw_stores__intern_function(s, &da), *j = gw_stores__intern_function(s, &dj);
	struct gw_executable *e = gw_stores__intern_executable(s, &de);
	struct gw_location *locs[3];
	struct gw_profiles *p = gw_profiles_new();
	struct gw_resource *r;
	struct gw_stack *st;
	struct gw_sample smp = { .count = 7, .pid = 9, .tid = 9 };

	if (!a || !j || !e || !p)
		return NULL;
	locs[0] = gw_stores__intern_function_location(s, GW_FRAME_JIT, 0x7f0000001000ULL, j, 0);
	locs[1] = gw_stores__intern_function_location(s, GW_FRAME_INTERPRETED, 24, a, 12);
	locs[2] = gw_stores__intern_location(s, GW_FRAME_USER, 0x1000, e, NULL);
	if (!locs[0] || !locs[1] || !locs[2])
		return NULL;
	st = gw_stores__intern_stack(s, sid, sizeof(sid), false, locs, 3);
	r = st ? gw_profiles__add_resource(p, attrs, 1, 99) : NULL;
	if (!r)
		return NULL;
	smp.stack = st;
	if (gw_resource__add_sample(p, r, &smp) < 0)
		return NULL;
	gw_resource__cover(r, 1, 2);
	gw_stack__unref(st);
	if (ret_total)
		*ret_total = smp.count;
	gw_function__unref(a);
	gw_function__unref(j);
	gw_executable__unref(e);
	return p;
}
