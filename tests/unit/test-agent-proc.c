// SPDX-License-Identifier: Apache-2.0
/*
 * The process cache fed by mapping records (PROFILE_EVENT_MMAP), driven
 * with records about this test process itself: the file is identified
 * through /proc/self/map_files once and from the cache after that, a new
 * image (mm) replaces the old one's mappings, overlapping mappings replace
 * each other, a sample's address becomes the ELF address nm would report,
 * and samples taken in another image are not attributed. A first sample
 * reads the process's start time (against a reused PID), executable and
 * mappings through its /proc directory.
 */
#include <errno.h>
#include <linux/types.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/fileio.h"
#include "agent/elfinfo.h"
#include "agent/event.h"
#include "agent/proc.h"
#include "agent/procmaps.h"
#include "agent/procstat.h"
#include "agent/definition-store.h"
#include "agent/util.h"
#include "stackrelay/v1/types.pb.h"

/* A function of this program, to find its own text mapping. */
int test_marker(int x);
int __attribute__((noinline)) test_marker(int x)
{
	return x * 3 + 1;
}

struct fixture {
	struct agent_store *store;
	struct agent_procs *procs;
	struct profile_mmap_event ev; /* this program's text mapping */
	uint64_t start_ns;	      /* our start_boottime, as BPF would report it */
	int files_known;
	int files_forgotten;
};

static uint64_t self_start_ns(void)
{
	char *buf = NULL, *p;
	size_t len;
	unsigned long long ticks = 0;

	assert_int_equal(sr_read_file("/proc/self/stat", 8192, &buf, &len), 0);
	p = strrchr(buf, ')');
	assert_non_null(p);
	assert_int_equal(sscanf(p + 1,
				" %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
				&ticks),
			 1);
	free(buf);
	return ticks * (1000000000ULL / (uint64_t)sysconf(_SC_CLK_TCK));
}

static void on_file(void *ctx, uint64_t dev, uint64_t ino, bool known)
{
	struct fixture *f = ctx;

	(void)dev;
	(void)ino;
	if (known)
		f->files_known++;
	else
		f->files_forgotten++;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char *buf = NULL;
	struct agent_map *maps = NULL;
	const struct agent_map *m;
	size_t len, n = 0;
	struct stat st;

	assert_non_null(f);
	f->store = agent_store_new(0);
	f->procs = agent_procs_new(f->store, 64);
	assert_non_null(f->procs);
	agent_procs__on_file(f->procs, on_file, f);
	f->start_ns = self_start_ns();
	assert_int_equal(sr_read_file("/proc/self/maps", 1 << 20, &buf, &len), 0);
	assert_int_equal(agent_procmaps_parse(buf, len, true, &maps, &n, NULL), 0);
	m = agent_procmaps_find(maps, n, (uint64_t)(uintptr_t)test_marker);
	assert_non_null(m);
	assert_int_equal(stat(m->path, &st), 0);
	f->ev.hdr.type = PROFILE_EVENT_MMAP;
	f->ev.hdr.pid = (uint32_t)getpid();
	f->ev.hdr.start_boottime_ns = f->start_ns;
	f->ev.mm = 0x1000;
	f->ev.start = m->start;
	f->ev.end = m->end;
	f->ev.offset = m->offset;
	f->ev.dev = (uint64_t)st.st_dev;
	f->ev.ino = (uint64_t)st.st_ino;
	f->ev.size = (uint64_t)st.st_size;
	f->ev.mtime_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000ULL + (uint64_t)st.st_mtim.tv_nsec;
	f->ev.flags = PROFILE_MMAP_UNKNOWN_FILE;
	agent_procmaps_free(maps, n);
	free(buf);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	agent_procs_free(f->procs);
	agent_store_free(f->store);
	free(f);
	return 0;
}

static void test_mmap_record_attributes(void **state)
{
	struct fixture *f = *state;
	struct agent_procs_stats st;
	struct agent_frame fr;
	struct agent_proc *proc;
	struct agent_elf_info elf;
	uint64_t addr = (uint64_t)(uintptr_t)test_marker, want, bias;
	FILE *exe;

	agent_procs__mmap(f->procs, &f->ev, 0);
	agent_procs__stats(f->procs, &st);
	assert_int_equal(st.mmap_events, 1);
	assert_int_equal(st.mmap_files_identified, 1);
	assert_int_equal(f->files_known, 1);
	proc = agent_procs__get(f->procs, f->ev.hdr.pid, f->start_ns, 0);
	assert_non_null(proc);
	assert_int_equal(proc->n_maps, 1);
	assert_int_equal(st.maps_reads, 0);

	/* The ELF address is the one the file's own segments give. */
	exe = fopen("/proc/self/exe", "rb");
	assert_non_null(exe);
	assert_int_equal(agent_elf_read_fd(fileno(exe), &elf), 0);
	fclose(exe);
	assert_int_equal(agent_elf_offset_to_vaddr(&elf, addr - f->ev.start + f->ev.offset, &want), 0);
	agent_procs__user_frame(f->procs, proc, addr, 0, &fr);
	assert_int_equal(fr.kind, stackrelay_v1_FrameKind_FRAME_KIND_USER);
	assert_int_equal(fr.address, want);
	assert_int_equal(agent_proc_map__bias(&proc->maps[0], &bias), 0);
	assert_int_equal(addr - bias, want);

	/* The same file again (another process, or a remap): from the cache, no ELF read. */
	f->ev.flags = 0;
	agent_procs__mmap(f->procs, &f->ev, 0);
	agent_procs__stats(f->procs, &st);
	assert_int_equal(st.elf_reads, 1);
	assert_int_equal(proc->n_maps, 1);
}

/*
 * A file no process maps any more stays cached for AGENT_FILE_IDLE_WINDOWS
 * windows (the next run of the same program finds it), then is dropped, and
 * BPF is told, so that its next mapping wakes the agent to identify it again.
 */
static void test_idle_file_dropped(void **state)
{
	struct fixture *f = *state;
	struct agent_procs_stats st;

	agent_procs__mmap(f->procs, &f->ev, 0);
	assert_int_equal(f->files_known, 1);
	agent_procs__exit(f->procs, f->ev.hdr.pid, f->start_ns);
	agent_procs__gc(f->procs, 1, NULL, NULL);
	agent_procs__stats(f->procs, &st);
	assert_int_equal(st.processes, 0);
	assert_int_equal(st.executables_cached, 1);
	agent_procs__gc(f->procs, AGENT_FILE_IDLE_WINDOWS, NULL, NULL);
	agent_procs__stats(f->procs, &st);
	assert_int_equal(st.executables_cached, 1);
	assert_int_equal(f->files_forgotten, 0);
	agent_procs__gc(f->procs, AGENT_FILE_IDLE_WINDOWS + 1, NULL, NULL);
	agent_procs__stats(f->procs, &st);
	assert_int_equal(st.executables_cached, 0);
	assert_int_equal(st.files_dropped, 1);
	assert_int_equal(f->files_forgotten, 1);
	/* Mapped again: identified again. */
	agent_procs__mmap(f->procs, &f->ev, AGENT_FILE_IDLE_WINDOWS + 1);
	assert_int_equal(f->files_known, 2);
}

static void test_new_image_and_overlaps(void **state)
{
	struct fixture *f = *state;
	struct profile_mmap_event ev = f->ev;
	struct agent_proc *proc;
	uint64_t gen;

	agent_procs__mmap(f->procs, &ev, 0);
	proc = agent_procs__get(f->procs, ev.hdr.pid, f->start_ns, 0);
	assert_non_null(proc);
	/* A mapping in the middle of the first replaces it (what it overlaps goes). */
	ev.start = f->ev.start + 4096;
	ev.end = ev.start + 4096;
	gen = proc->maps_gen;
	agent_procs__mmap(f->procs, &ev, 0);
	assert_int_equal(proc->n_maps, 1);
	assert_int_equal(proc->maps[0].start, ev.start);
	assert_true(proc->maps_gen > gen);
	/* A disjoint one is kept beside it, in order. */
	ev.start = f->ev.start - 0x100000;
	ev.end = ev.start + 4096;
	agent_procs__mmap(f->procs, &ev, 0);
	assert_int_equal(proc->n_maps, 2);
	assert_true(proc->maps[0].start < proc->maps[1].start);
	/* A new address space (exec): the old image's mappings are gone. */
	ev = f->ev;
	ev.mm = 0x2000;
	agent_procs__mmap(f->procs, &ev, 0);
	assert_int_equal(proc->n_maps, 1);
	assert_int_equal(proc->mm, 0x2000);
	/* A sample of the replaced image is not attributed with the new one's mappings. */
	assert_false(agent_proc__same_image(f->procs, proc, 0x1000, 3));
	assert_true(agent_proc__same_image(f->procs, proc, 0x2000, 3));
	assert_true(agent_proc__same_image(f->procs, proc, 0, 3));
}

static void test_exec_adds_vdso(void **state)
{
	struct fixture *f = *state;
	struct agent_proc *proc;

	agent_procs__mmap(f->procs, &f->ev, 0);
	proc = agent_procs__get(f->procs, f->ev.hdr.pid, f->start_ns, 0);
	assert_non_null(proc);
	/* The vDSO address of a record of another image is ignored; of this one, added. */
	agent_procs__exec(f->procs, f->ev.hdr.pid, f->start_ns, 0x9999, 0x7000000, 0);
	assert_int_equal(proc->n_maps, 1);
	agent_procs__exec(f->procs, f->ev.hdr.pid, f->start_ns, f->ev.mm, 0x7000000, 0);
	assert_int_equal(proc->n_maps, 2);
	assert_int_equal(proc->maps[0].start, 0x7000000);
	assert_non_null(proc->maps[0].exe);
}

static void test_fork_copies_parent(void **state)
{
	struct fixture *f = *state;
	struct profile_fork_event fe = { 0 };
	struct agent_procs_stats st;
	struct agent_proc *child;
	struct agent_frame fr;

	/* Unknown parent: nothing to copy (the child is read from /proc when sampled). */
	fe.hdr.type = PROFILE_EVENT_FORK;
	fe.hdr.pid = 999999;
	fe.hdr.start_boottime_ns = 77;
	fe.parent_pid = f->ev.hdr.pid;
	fe.parent_start_boottime_ns = f->start_ns;
	fe.mm = 0x3000;
	agent_procs__fork(f->procs, &fe, 0);
	agent_procs__stats(f->procs, &st);
	assert_int_equal(st.forks_copied, 0);
	/* Known parent: the child attributes the parent's addresses without any /proc read. */
	agent_procs__mmap(f->procs, &f->ev, 0);
	agent_procs__fork(f->procs, &fe, 0);
	agent_procs__stats(f->procs, &st);
	assert_int_equal(st.forks_copied, 1);
	child = agent_procs__get(f->procs, fe.hdr.pid, fe.hdr.start_boottime_ns, 0);
	assert_non_null(child);
	assert_int_equal(child->n_maps, 1);
	assert_int_equal(child->mm, 0x3000);
	agent_procs__user_frame(f->procs, child, (uint64_t)(uintptr_t)test_marker, 0, &fr);
	assert_int_equal(fr.kind, stackrelay_v1_FrameKind_FRAME_KIND_USER);
	agent_procs__stats(f->procs, &st);
	assert_int_equal(st.maps_reads, 0);
}

static void test_file_gone(void **state)
{
	struct fixture *f = *state;
	struct profile_mmap_event ev = f->ev;
	struct agent_procs_stats st;

	/* Not in the cache, and no such mapping in /proc/self/map_files: counted, kept without a file. */
	ev.ino ^= 0x5a5a;
	ev.start = 0x10000;
	ev.end = 0x11000;
	agent_procs__mmap(f->procs, &ev, 0);
	agent_procs__stats(f->procs, &st);
	assert_int_equal(st.mmap_files_gone, 1);
	/* A frame there: a file mapping whose file is gone, never anonymous memory (JIT code). */
	{
		struct agent_proc *proc = agent_procs__get(f->procs, ev.hdr.pid, f->start_ns, 0);
		struct agent_frame fr;

		assert_non_null(proc);
		assert_int_equal(proc->n_maps, 1);
		assert_false(proc->maps[0].anon);
		assert_false(agent_procs__user_frame(f->procs, proc, 0x10800, 0, &fr));
		assert_int_equal(fr.kind, stackrelay_v1_FrameKind_FRAME_KIND_UNKNOWN);
		agent_procs__stats(f->procs, &st);
		assert_int_equal(st.unattributed[AGENT_UNATTR_FILE_GONE], 1);
		assert_int_equal(st.unattributed[AGENT_UNATTR_ANONYMOUS], 0);
	}
}

/*
 * A frame no mapping will ever cover (a heap address, as a frame-pointer walk
 * through a JIT gives): each re-read that still misses doubles the wait
 * before the next, from AGENT_MAPS_REFRESH_MIN_NS up to
 * AGENT_MAPS_REFRESH_MIN_NS << AGENT_MAPS_REFRESH_BACKOFF_MAX.
 */
static void test_fruitless_rereads_back_off(void **state)
{
	struct fixture *f = *state;
	const uint64_t ms = 1000 * 1000;
	struct agent_procs_stats st;
	struct agent_frame fr;
	struct agent_proc *proc;
	void *heap = malloc(64);
	uint64_t addr = (uint64_t)(uintptr_t)heap, now = 1000 * ms, reads = 0;

	assert_non_null(heap);
	agent_procs__mmap(f->procs, &f->ev, 0);
	proc = agent_procs__get(f->procs, f->ev.hdr.pid, f->start_ns, 0);
	assert_non_null(proc);
	/* Known from its mapping record, never read: the first miss reads at once. */
	assert_false(agent_procs__user_frame(f->procs, proc, addr, now, &fr));
	agent_procs__stats(f->procs, &st);
	assert_int_equal(st.maps_reads, ++reads);
	for (int i = 1; i <= AGENT_MAPS_REFRESH_BACKOFF_MAX + 1; i++) {
		uint64_t wait = AGENT_MAPS_REFRESH_MIN_NS
				<< (i < AGENT_MAPS_REFRESH_BACKOFF_MAX ? i : AGENT_MAPS_REFRESH_BACKOFF_MAX);

		/* Just before the wait is over: no read; once it is: one. */
		assert_false(agent_procs__user_frame(f->procs, proc, addr, now + wait - ms, &fr));
		agent_procs__stats(f->procs, &st);
		assert_int_equal(st.maps_reads, reads);
		now += wait;
		assert_false(agent_procs__user_frame(f->procs, proc, addr, now, &fr));
		agent_procs__stats(f->procs, &st);
		assert_int_equal(st.maps_reads, ++reads);
		/* A frame the maps cover, found without a re-read, does not end the backoff. */
		agent_procs__user_frame(f->procs, proc, (uint64_t)(uintptr_t)test_marker, now, &fr);
		assert_int_equal(fr.kind, stackrelay_v1_FrameKind_FRAME_KIND_USER);
	}
	free(heap);
}

static void test_event_decode_mmap(void **state)
{
	struct fixture *f = *state;
	struct profile_mmap_event ev = f->ev;
	struct agent_event dec;

	memcpy(ev.name, "0123456789012345678901234567890123456789012345678901234567890123", PROFILE_MMAP_NAME_LEN);
	assert_int_equal(agent_event_decode(&ev, sizeof(ev), &dec), 0);
	assert_ptr_equal(dec.mmap, &ev);
	assert_int_equal(dec.mm, ev.mm);
	assert_int_equal(strlen(dec.mmap_name), PROFILE_MMAP_NAME_LEN);
	assert_int_equal(agent_event_decode(&ev, sizeof(ev) - 1, &dec), -EBADMSG);
	ev.end = ev.start;
	assert_int_equal(agent_event_decode(&ev, sizeof(ev), &dec), -EBADMSG);
}

/*
 * A process met first by a sample: its start time checked against
 * /proc/PID/stat, whose comm may hold spaces and ')' before the fields; its
 * executable and mappings read. A start time that is not the process's (its
 * PID reused) reads nothing more and marks it gone.
 */
static void test_first_sample_reads_info(void **state)
{
	struct fixture *f = *state;
	char old[17] = "", exe[4096];
	struct agent_proc *proc, *other;
	ssize_t n;

	assert_int_equal(prctl(PR_GET_NAME, old), 0);
	assert_int_equal(prctl(PR_SET_NAME, "a) 1 2 ) b"), 0);
	proc = agent_procs__get(f->procs, (uint32_t)getpid(), f->start_ns, 0);
	other = agent_procs__get(f->procs, (uint32_t)getpid(), f->start_ns + 5000000000ULL, 0);
	assert_int_equal(prctl(PR_SET_NAME, old), 0);
	assert_non_null(proc);
	assert_false(proc->exited);
	assert_true(proc->info_ok);
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	assert_true(n > 0);
	exe[n] = '\0';
	assert_non_null(proc->exe_path);
	assert_string_equal(proc->exe_path, exe);
	assert_true(proc->maps_ok);
	assert_non_null(agent_proc__find_map(proc, (uint64_t)(uintptr_t)test_marker));
	assert_non_null(other);
	assert_true(other->exited);
	assert_null(other->exe_path);
	assert_int_equal(other->n_maps, 0);
}

/* /proc/PID/stat's start time: counted from the last ')', whatever comm holds; anything short of it refused. */
static void test_procstat_start_ticks(void **state)
{
	static const char tail[] = " S 1 42 42 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 1 0 123456 1000 10 0\n";
	char line[256];
	uint64_t ticks = 0;

	(void)state;
	snprintf(line, sizeof(line), "42 (a) 1 2 ) b)%s", tail);
	assert_int_equal(agent_procstat_start_ticks(line, strlen(line), &ticks), 0);
	assert_int_equal(ticks, 123456);
	/* Only the given bytes are read: cut inside the start time, the number ends there. */
	assert_int_equal(agent_procstat_start_ticks(line, strlen(line) - strlen(" 1000 10 0\n") - 2, &ticks), 0);
	assert_int_equal(ticks, 1234);
	snprintf(line, sizeof(line), "42 (sh)%s", tail);
	assert_int_equal(agent_procstat_start_ticks(line, strlen(line), &ticks), 0);
	assert_int_equal(ticks, 123456);
	assert_int_equal(agent_procstat_start_ticks("42 (sh) S 1 42\n", 15, &ticks), -EINVAL);
	assert_int_equal(agent_procstat_start_ticks("42 sh S 1", 9, &ticks), -EINVAL);
	assert_int_equal(agent_procstat_start_ticks("", 0, &ticks), -EINVAL);
	snprintf(line, sizeof(line), "1 (x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 99999999999999999999999 1\n");
	assert_int_equal(agent_procstat_start_ticks(line, strlen(line), &ticks), -EINVAL);
	snprintf(line, sizeof(line), "1 (x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 12x 1\n");
	assert_int_equal(agent_procstat_start_ticks(line, strlen(line), &ticks), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_mmap_record_attributes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_idle_file_dropped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_new_image_and_overlaps, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exec_adds_vdso, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fork_copies_parent, setup, teardown),
		cmocka_unit_test_setup_teardown(test_file_gone, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fruitless_rereads_back_off, setup, teardown),
		cmocka_unit_test_setup_teardown(test_event_decode_mmap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_first_sample_reads_info, setup, teardown),
		cmocka_unit_test(test_procstat_start_ticks),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
