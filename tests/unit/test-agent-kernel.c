// SPDX-License-Identifier: Apache-2.0
/*
 * The kernel's address spaces (agent/kernel.h): /proc/modules and kallsyms
 * parsing, the IDs (equal across boots of one build, different across
 * builds), locating frames, and modules loaded and unloaded while the agent
 * runs (a fixture /proc and /sys tree).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/kernel.h"

static void test_modules(void **state)
{
	static const char mods[] = "nf_tables 319488 0 - Live 0xffffffffc0a1f000\n"
				   "ext4 1007616 1 - Live 0xffffffffc0800000 (E)\n"
				   "hidden 4096 0 - Live 0x0000000000000000\n"
				   "broken line\n";
	struct agent_kernel k = { 0 };

	(void)state;
	assert_int_equal(agent_kernel_parse_modules(mods, sizeof(mods) - 1, &k.modules, &k.n_modules), 0);
	assert_int_equal(k.n_modules, 3);
	assert_string_equal(k.modules[1].name, "ext4");
	assert_int_equal(k.modules[1].start, 0xffffffffc0800000ULL);
	assert_int_equal(k.modules[1].size, 1007616);
	assert_true(k.modules[1].live);
	assert_int_equal(agent_kernel_finish(&k), 0);
	assert_ptr_equal(agent_kernel_module_at(&k, 0xffffffffc0800010ULL), &k.modules[1]);
	assert_ptr_equal(agent_kernel_module_at(&k, 0xffffffffc0a1f000ULL), &k.modules[0]);
	assert_null(agent_kernel_module_at(&k, 0xffffffffc0a1f000ULL + 319488));
	assert_null(agent_kernel_module_at(&k, 0x10)); /* start 0 (kptr_restrict) never matches */
	assert_null(agent_kernel_module_at(&k, 0xffffffff81000000ULL));
	agent_kernel_done(&k);
}

static void test_text(void **state)
{
	static const char ks[] = "0000000000000000 A fixed_percpu_data\n"
				 "ffffffff81000000 T _stext\n"
				 "ffffffff81000000 T _text\n"
				 "ffffffff81000010 T _textual\n"
				 "ffffffff82276f48 T _etext\n"
				 "ffffffffc0a01000 t _text\t[kvm]\n";
	static const char hidden[] = "0000000000000000 T _text\n0000000000000000 T _etext\n";
	static const char a64[] = "ffffda7858e10000 T _stext\n"
				  "ffffda7858e10000 T __exception_text_start\n"
				  "ffffda7859b00000 D _etext\n";
	uint64_t a = 0, b = 0;

	(void)state;
	assert_true(agent_kernel_parse_text(ks, sizeof(ks) - 1, &a, &b));
	assert_int_equal(a, 0xffffffff81000000ULL);
	assert_int_equal(b, 0xffffffff82276f48ULL);
	assert_false(agent_kernel_parse_text(hidden, sizeof(hidden) - 1, &a, &b));
	assert_false(agent_kernel_parse_text(ks, 60, &a, &b)); /* no _etext */
	assert_false(agent_kernel_parse_text("", 0, &a, &b));
	/* arm64: no _text in kallsyms, _etext a data symbol; _stext starts the image. */
	assert_true(agent_kernel_parse_text(a64, sizeof(a64) - 1, &a, &b));
	assert_int_equal(a, 0xffffda7858e10000ULL);
	assert_int_equal(b, 0xffffda7859b00000ULL);
}

static void make_kernel(struct agent_kernel *k, const char *boot, uint64_t kaslr)
{
	memset(k, 0, sizeof(*k));
	snprintf(k->release, sizeof(k->release), "6.1.0-test");
	snprintf(k->boot_id, sizeof(k->boot_id), "%s", boot);
	k->build_id_len = 20;
	memset(k->build_id, 0xab, 20);
	k->text_start = 0xffffffff81000000ULL + kaslr;
	k->text_end = 0xffffffff82000000ULL + kaslr;
	k->modules = calloc(2, sizeof(*k->modules));
	assert_non_null(k->modules);
	k->n_modules = 2;
	snprintf(k->modules[0].name, AGENT_MODULE_NAME_MAX, "kvm");
	k->modules[0].start = 0xffffffffc0a00000ULL + kaslr;
	k->modules[0].size = 0x10000;
	k->modules[0].build_id_len = 20;
	memset(k->modules[0].build_id, 0xcd, 20);
	snprintf(k->modules[1].name, AGENT_MODULE_NAME_MAX, "nobuildid");
	k->modules[1].start = 0xffffffffc0b00000ULL + kaslr;
	k->modules[1].size = 0x1000;
	k->modules[0].live = k->modules[1].live = true;
	assert_int_equal(agent_kernel_finish(k), 0);
}

/* Two boots of one build (KASLR moved everything): the same IDs and the same addresses in them. */
static void test_ids_across_boots(void **state)
{
	struct agent_kernel a, b, hidden = { .release = "6.1.0-test", .boot_id = "one" };
	uint64_t off_a, off_b;

	(void)state;
	make_kernel(&a, "one", 0);
	make_kernel(&b, "two", 0x3400000);
	assert_memory_equal(a.id, b.id, AGENT_KERNEL_ID_LEN);
	assert_memory_not_equal(a.runtime_id, b.runtime_id, AGENT_KERNEL_ID_LEN);
	assert_memory_not_equal(a.id, a.runtime_id, AGENT_KERNEL_ID_LEN);
	assert_memory_equal(a.modules[0].id, b.modules[0].id, AGENT_KERNEL_ID_LEN);
	assert_memory_equal(a.modules[1].id, b.modules[1].id, AGENT_KERNEL_ID_LEN);
	assert_memory_not_equal(a.modules[0].id, a.modules[1].id, AGENT_KERNEL_ID_LEN);

	assert_int_equal(agent_kernel_locate(&a, 0xffffffff81234567ULL, &off_a), AGENT_KSEG_IMAGE);
	assert_int_equal(agent_kernel_locate(&b, 0xffffffff81234567ULL + 0x3400000, &off_b), AGENT_KSEG_IMAGE);
	assert_int_equal(off_a, 0x234567);
	assert_int_equal(off_b, off_a);
	assert_int_equal(agent_kernel_locate(&a, 0xffffffffc0a00100ULL, &off_a), 0);
	assert_int_equal(off_a, 0x100);
	assert_int_equal(agent_kernel_locate(&a, 0xffffffffc0b00fffULL, &off_a), 1);
	assert_int_equal(off_a, 0xfff);
	/* Outside the image and every module (a BPF program): this boot's runtime address. */
	assert_int_equal(agent_kernel_locate(&a, 0xffffffffc0c00000ULL, &off_a), AGENT_KSEG_RUNTIME);
	assert_int_equal(off_a, 0xffffffffc0c00000ULL);
	assert_int_equal(agent_kernel_locate(&a, 0xffffffff82000000ULL, &off_a), AGENT_KSEG_RUNTIME);

	assert_int_equal(agent_kernel_seg_of_id(&a, a.id, AGENT_KERNEL_ID_LEN), AGENT_KSEG_IMAGE);
	assert_int_equal(agent_kernel_seg_of_id(&a, a.runtime_id, AGENT_KERNEL_ID_LEN), AGENT_KSEG_RUNTIME);
	assert_int_equal(agent_kernel_seg_of_id(&a, a.modules[1].id, AGENT_KERNEL_ID_LEN), 1);
	assert_int_equal(agent_kernel_seg_of_id(&a, b.runtime_id, AGENT_KERNEL_ID_LEN), AGENT_KSEG_NONE);
	assert_int_equal(agent_kernel_seg_of_id(&a, a.id, 8), AGENT_KSEG_NONE);
	assert_ptr_equal(agent_kernel_seg_id(&a, 1), a.modules[1].id);
	assert_null(agent_kernel_seg_id(&a, 2));
	assert_null(agent_kernel_seg_id(&a, AGENT_KSEG_NONE));

	/* Another build: other IDs. */
	b.build_id[0] ^= 1;
	assert_int_equal(agent_kernel_finish(&b), 0);
	assert_memory_not_equal(a.id, b.id, AGENT_KERNEL_ID_LEN);
	assert_memory_equal(a.modules[0].id, b.modules[0].id, AGENT_KERNEL_ID_LEN); /* kvm's own build ID */
	assert_memory_not_equal(a.modules[1].id, b.modules[1].id, AGENT_KERNEL_ID_LEN);

	/* _text hidden (no CAP_SYSLOG): one ID, every frame a runtime address. */
	assert_int_equal(agent_kernel_finish(&hidden), 0);
	assert_false(agent_kernel_relative(&hidden));
	assert_memory_equal(hidden.id, hidden.runtime_id, AGENT_KERNEL_ID_LEN);
	assert_int_equal(agent_kernel_locate(&hidden, 0xffffffff81234567ULL, &off_a), AGENT_KSEG_RUNTIME);
	assert_int_equal(agent_kernel_seg_of_id(&hidden, hidden.id, AGENT_KERNEL_ID_LEN), AGENT_KSEG_RUNTIME);
	agent_kernel_done(&a);
	agent_kernel_done(&b);
	agent_kernel_done(&hidden);
}

static void write_file(const char *dir, const char *rel, const void *data, size_t len)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	fclose(f);
}

/* A note section holding one NT_GNU_BUILD_ID of 4 bytes. */
static const unsigned char NOTE[] = { 4, 0, 0, 0, 4, 0, 0, 0, 3, 0, 0, 0, 'G', 'N', 'U', 0, 0xde, 0xad, 0xbe, 0xef };

/* A fixture tree read as the agent reads the host; then modules come and go. */
static void test_read_and_refresh(void **state)
{
	char dir[] = "/tmp/sr-kernel-XXXXXX", path[4096];
	static const char *dirs[] = { "proc",	    "proc/sys",	  "proc/sys/kernel", "proc/sys/kernel/random", "sys",
				      "sys/kernel", "sys/module", "sys/module/kvm",  "sys/module/kvm/notes" };
	static const char ks[] = "ffffffff81000000 T _text\nffffffff81800000 T _etext\n";
	static const char mods1[] = "kvm 65536 0 - Live 0xffffffffc0a00000\nfoo 4096 0 - Live 0xffffffffc0b00000\n";
	/* foo unloaded and loaded again elsewhere, bar new, kvm stays. */
	static const char mods2[] = "kvm 65536 0 - Live 0xffffffffc0a00000\nbar 4096 0 - Live 0xffffffffc0b00000\n"
				    "foo 4096 0 - Live 0xffffffffc0c00000\n";
	struct agent_kernel k;
	uint8_t foo_id[AGENT_KERNEL_ID_LEN];
	uint64_t off;

	(void)state;
	assert_non_null(mkdtemp(dir));
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, dirs[i]);
		assert_int_equal(mkdir(path, 0755), 0);
	}
	write_file(dir, "sys/kernel/notes", NOTE, sizeof(NOTE));
	write_file(dir, "sys/module/kvm/notes/.note.gnu.build-id", NOTE, sizeof(NOTE));
	write_file(dir, "proc/sys/kernel/random/boot_id", "boot-1\n", 7);
	write_file(dir, "proc/kallsyms", ks, sizeof(ks) - 1);
	write_file(dir, "proc/modules", mods1, sizeof(mods1) - 1);

	/* kallsyms is read in pieces: _etext far in, lines across piece boundaries. */
	snprintf(path, sizeof(path), "%s/proc/kallsyms", dir);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs("0000000000000000 A fixed_percpu_data\nffffffff81000000 T _text\n", f);
	for (int i = 0; i < 100000; i++)
		fprintf(f, "ffffffff81%06x t some_function_%d\n", i * 16, i);
	fputs("ffffffff81800000 T _etext\nffffffffc0a00010 t kvm_fn\t[kvm]", f);
	fclose(f);
	assert_int_equal(agent_kernel_read(dir, &k), 0);
	assert_int_equal(k.text_start, 0xffffffff81000000ULL);
	assert_int_equal(k.text_end, 0xffffffff81800000ULL);
	agent_kernel_done(&k);
	write_file(dir, "proc/kallsyms", ks, sizeof(ks) - 1);

	assert_int_equal(agent_kernel_read(dir, &k), 0);
	assert_int_equal(k.build_id_len, 4);
	assert_string_equal(k.boot_id, "boot-1");
	assert_true(agent_kernel_relative(&k));
	assert_int_equal(k.n_modules, 2);
	assert_int_equal(k.modules[0].build_id_len, 4);
	assert_int_equal(k.modules[1].build_id_len, 0);
	memcpy(foo_id, k.modules[1].id, sizeof(foo_id));
	assert_int_equal(agent_kernel_locate(&k, 0xffffffffc0b00010ULL, &off), 1);

	assert_int_equal(agent_kernel_refresh_modules(&k, dir), 0); /* nothing changed */
	write_file(dir, "proc/modules", mods2, sizeof(mods2) - 1);
	assert_int_equal(agent_kernel_refresh_modules(&k, dir), 1);
	/* Indices stay: foo's old one is no longer live, bar and the moved foo are new ones. */
	assert_int_equal(k.n_modules, 4);
	assert_false(k.modules[1].live);
	assert_string_equal(k.modules[2].name, "bar");
	assert_string_equal(k.modules[3].name, "foo");
	assert_memory_equal(k.modules[3].id, foo_id, AGENT_KERNEL_ID_LEN); /* the same module, wherever it lies */
	assert_int_equal(agent_kernel_locate(&k, 0xffffffffc0b00010ULL, &off), 2);
	assert_int_equal(agent_kernel_locate(&k, 0xffffffffc0c00010ULL, &off), 3);
	assert_int_equal(off, 0x10);
	assert_int_equal(agent_kernel_seg_of_id(&k, foo_id, AGENT_KERNEL_ID_LEN), 1);

	/* A copy is deep. */
	struct agent_kernel c;
	assert_int_equal(agent_kernel_copy(&k, &c), 0);
	agent_kernel_done(&k);
	assert_int_equal(agent_kernel_locate(&c, 0xffffffffc0c00010ULL, &off), 3);
	agent_kernel_done(&c);

	/* Gone: an error, the kernel as it was. */
	snprintf(path, sizeof(path), "%s/proc/modules", dir);
	unlink(path);
	assert_int_equal(agent_kernel_read(dir, &k), 0);
	assert_int_equal(k.n_modules, 0);
	assert_int_equal(agent_kernel_refresh_modules(&k, dir), -ENOENT);
	agent_kernel_done(&k);
	snprintf(path, sizeof(path), "rm -rf %s", dir);
	assert_int_equal(system(path), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_modules),
		cmocka_unit_test(test_text),
		cmocka_unit_test(test_ids_across_boots),
		cmocka_unit_test(test_read_and_refresh),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
