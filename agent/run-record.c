/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One ring-buffer record of the profiling loop (run-private.h). A sample
 * becomes frames right away (the process may be gone a moment later): kernel
 * frames, user frames attributed to an executable and address, Python frames
 * named from their code objects, JIT frames from perf maps; then a
 * content-addressed stack, counted into the current window or into a drop
 * counter. Exec, fork, mmap and exit records keep the process cache current.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "agent.h"
#include "aggregate.h"
#include "event.h"
#include "functions.h"
#include "hotspot.h"
#include "java.h"
#include "nodejs.h"
#include "perf-map-cache.h"
#include "proc.h"
#include "profile.h"
#include "pyframe.h"
#include "python.h"
#include "run-private.h"
#include "definition-store.h"
#include "util.h"
#include "v8frame.h"

/*
 * A Python frame of the BPF walker (bpf/pyframe.h): an INTERPRETED frame of a
 * "cpython" function, its address the instruction offset. A frame that cannot
 * be named (the process is gone, the address is no code object, the function
 * table is full) stays UNKNOWN with the walker's value.
 */
static void python_frame(struct run_ctx *c, struct agent_proc *proc, uint64_t value, struct agent_frame *ret)
{
	struct agent_py_frame pf;
	struct agent_function_def def;
	int64_t fn;

	ret->address = value;
	ret->exe = AGENT_EXE_NONE;
	ret->line = 0;
	ret->kind = stackrelay_v1_FrameKind_FRAME_KIND_UNKNOWN;
	if (!c->python || !proc || agent_python__frame(c->python, proc, value, &pf) < 0)
		return;
	def.runtime = "cpython";
	def.name = pf.name;
	def.file_name = pf.file;
	def.start_line = pf.first_line > 0 ? (uint32_t)pf.first_line : 0;
	fn = agent_store__add_function(c->store, &def, c->window);
	if (fn < 0)
		return;
	ret->address = pf.offset;
	ret->exe = (uint32_t)fn;
	ret->line = (uint32_t)pf.line;
	ret->kind = stackrelay_v1_FrameKind_FRAME_KIND_INTERPRETED;
}

/* A runtime's frame that could not be named: one UNKNOWN frame keeping the walker's value. */
static size_t unnamed_frame(uint64_t value, struct agent_frame *ret)
{
	ret->address = value;
	ret->exe = AGENT_EXE_NONE;
	ret->line = 0;
	ret->kind = stackrelay_v1_FrameKind_FRAME_KIND_UNKNOWN;
	return 1;
}

/*
 * A V8 frame of the BPF namer (bpf/v8frame.h): an INTERPRETED frame of a
 * "v8js" function (the runtime is the OpenTelemetry frame type), named
 * "function (script:line)"-wise as node --cpu-prof names it; an optimized
 * frame gives the functions TurboFan inlined at its pc, innermost first,
 * then its own. An interpreted frame's line is the one its bytecode offset
 * runs, and its address that offset (as a Java frame's is its bytecode
 * index); an optimized frame's the line its pc runs, address 0; a baseline
 * frame's the function's first line. Writes up to room frames and returns
 * how many (at least one: a frame that cannot be named stays UNKNOWN with
 * the namer's value).
 */
static size_t v8_frames(struct run_ctx *c, struct agent_proc *proc, uint64_t value, struct agent_frame *ret,
			size_t room)
{
	struct agent_js_frame jf[AGENT_NODEJS_MAX_FRAMES];
	size_t out = 0;
	int n = -ENOENT;

	if (c->nodejs && proc)
		n = agent_nodejs__frames(c->nodejs, proc, value, jf,
					 (int)SR_MIN(room, (size_t)AGENT_NODEJS_MAX_FRAMES));
	for (int i = 0; i < n; i++) {
		struct agent_function_def def = { 0 };
		int64_t fn;

		def.runtime = "v8js";
		def.name = jf[i].name;
		def.file_name = jf[i].script;
		def.start_line = jf[i].start_line;
		fn = agent_store__add_function(c->store, &def, c->window);
		if (fn < 0)
			continue;
		ret[out].address = jf[i].offset >= 0 ? (uint64_t)jf[i].offset : 0;
		ret[out].exe = (uint32_t)fn;
		ret[out].line = jf[i].line;
		ret[out].kind = stackrelay_v1_FrameKind_FRAME_KIND_INTERPRETED;
		out++;
	}
	if (out == 0) {
		c->stats.v8_unnamed_frames++;
		return unnamed_frame(value, ret);
	}
	return out;
}

/*
 * A Java frame of the HotSpot walker (bpf/hotspot.h): for compiled code the
 * methods inlined at its pc, innermost first, then the method compiled; each
 * an INTERPRETED frame of a "jvm" function (the OpenTelemetry frame type)
 * named "package.Class.method", with its source line. Writes up to room
 * frames and returns how many (at least one: a frame that cannot be named
 * stays UNKNOWN with the walker's value).
 */
static size_t java_frames(struct run_ctx *c, struct agent_proc *proc, uint64_t value, struct agent_frame *ret,
			  size_t room)
{
	struct agent_jvm_frame jf[AGENT_JVM_MAX_SCOPES];
	size_t out = 0;
	int n = -ENOENT;

	if (c->java && proc)
		n = agent_java__frames(c->java, proc, value, jf, (int)SR_MIN(room, (size_t)AGENT_JVM_MAX_SCOPES));
	for (int i = 0; i < n; i++) {
		struct agent_function_def def = { 0 };
		struct agent_java_named nm;
		int64_t fn;

		/* Strings from the namer last until its next call: the store copies them first. */
		if (agent_java__name(c->java, proc, &jf[i], &nm) < 0)
			continue;
		def.runtime = "jvm";
		def.name = nm.name;
		def.file_name = nm.file;
		fn = agent_store__add_function(c->store, &def, c->window);
		if (fn < 0)
			continue;
		ret[out].address = jf[i].bci >= 0 ? (uint64_t)jf[i].bci : 0;
		ret[out].exe = (uint32_t)fn;
		ret[out].line = nm.line > 0 ? (uint32_t)nm.line : 0;
		ret[out].kind = stackrelay_v1_FrameKind_FRAME_KIND_INTERPRETED;
		out++;
	}
	if (out == 0) {
		c->stats.java_unnamed_frames++;
		return unnamed_frame(value, ret);
	}
	c->stats.java_frames += out;
	return out;
}

/*
 * A frame in anonymous executable memory: a JVM's own code named after its
 * code blob; JIT code, named from the process's perf map when it has one
 * that covers the address (a JIT frame of a "perf-map" function), else left
 * UNKNOWN (shown as [unknown] 0x...); counted by result.
 */
static void resolve_jit(struct run_ctx *c, const struct profile_sample *s, struct agent_proc *proc, uint64_t addr,
			struct agent_frame *f)
{
	enum agent_jit_result why = AGENT_JIT_DISABLED;
	const char *name;
	size_t len = 0;

	/* A JVM's own code (stubs, adapters): named after its code blob, a JIT frame of a "jvm" function. */
	if (c->java && proc && (name = agent_java__stub(c->java, proc, addr))) {
		struct agent_function_def d = { .runtime = "jvm", .name = name };
		int64_t idx = agent_store__add_function(c->store, &d, c->window);

		if (idx >= 0) {
			f->kind = stackrelay_v1_FrameKind_FRAME_KIND_JIT;
			f->exe = (uint32_t)idx;
			f->line = 0;
			f->address = addr;
			return;
		}
	}

	if (c->perfmaps) {
		name = agent_perf_map_cache__lookup(c->perfmaps, s->hdr.pid, s->hdr.start_boottime_ns, addr,
						    c->now_mono, &len, &why);
		if (name) {
			char buf[AGENT_FUNCTION_NAME_MAX + 1];
			struct agent_function_def d = { .runtime = "perf-map", .name = buf };
			int64_t idx;

			len = SR_MIN(len, sizeof(buf) - 1);
			memcpy(buf, name, len);
			buf[len] = '\0';
			idx = agent_store__add_function(c->store, &d, c->window);
			if (idx >= 0) {
				f->kind = stackrelay_v1_FrameKind_FRAME_KIND_JIT;
				f->exe = (uint32_t)idx;
				f->line = 0;
				f->address = addr;
			} else {
				why = AGENT_JIT_LIMIT;
			}
		}
	}
	c->stats.jit_frames[why]++;
}

static void handle_sample(struct run_ctx *c, const struct agent_event *ev)
{
	const struct profile_sample *s = ev->sample;
	/* Room for compiled Java and optimized V8 frames' inlined functions beside the kernel and user stacks. */
	struct agent_frame frames[4 * PROFILE_MAX_STACK_DEPTH];
	struct agent_agg_key key = { 0 };
	struct agent_agg_labels labels = { 0 };
	struct agent_proc *proc = NULL;
	uint64_t off_cpu_ns = 0;
	bool kthread = (s->flags & PROFILE_SAMPLE_KTHREAD) || s->hdr.pid == 0, same_image;
	size_t n = 0;
	int r;

	c->stats.samples_received++;
	if (ev->n_kstack == 0 && ev->n_ustack == 0) {
		c->win_stack_errors++;
		c->stats.dropped_stack_errors++;
		return;
	}
	/*
	 * Leaf first: kernel frames, then user frames. Every frame but the
	 * first of each stack is a return address; one byte back is the call
	 * instruction, which lies in the calling function even when the call
	 * is the last instruction of it (noreturn callees).
	 */
	for (size_t i = 0; i < ev->n_kstack; i++) {
		uint64_t addr = s->kstack[i] - (i > 0 ? 1 : 0);
		/* The image's frames as offsets from _text, a module's from its start: the same on every node. */
		if (c->have_kernel) {
			frames[n].exe = agent_kernel_seg_exe(agent_kernel_locate(&c->kernel, addr, &frames[n].address));
		} else {
			frames[n].exe = AGENT_EXE_NONE;
			frames[n].address = addr;
		}
		frames[n].line = 0;
		frames[n].kind = stackrelay_v1_FrameKind_FRAME_KIND_KERNEL;
		n++;
	}
	if (ev->n_ustack > 0 && !kthread) {
		/*
		 * The time now: the loop's c->now_mono was taken before the poll that
		 * delivered this sample, up to a second ago, and the re-read limits
		 * of /proc/PID/maps and perf maps (200 ms) compared against it held
		 * back a whole poll's samples of code that appeared just after a read.
		 */
		c->now_mono = agent_run_clock_ns(CLOCK_MONOTONIC);
		proc = agent_procs__get(c->procs, s->hdr.pid, s->hdr.start_boottime_ns, c->window);
		agent_run_queue_unwinder(c, proc);
		if (c->java && proc)
			agent_java__retry(c->java, proc, c->now_mono);
		same_image = proc && agent_proc__same_image(c->procs, proc, s->mm, ev->n_ustack);
		/* The Python frames' code object heads, in one read rather than one a frame. */
		if (c->python)
			agent_python__prefetch(c->python, proc, s->ustack, ev->n_ustack);
		for (size_t i = 0; i < ev->n_ustack; i++) {
			uint64_t addr = s->ustack[i] - (i > 0 ? 1 : 0);
			if (s->ustack[i] & PY_FRAME_FLAG) {
				python_frame(c, proc, s->ustack[i], &frames[n]);
			} else if ((s->ustack[i] & HOTSPOT_FRAME_MASK) == HOTSPOT_FRAME_FLAG) {
				/* Keeps a slot for each user frame still to come. */
				n += java_frames(c, proc, s->ustack[i], &frames[n],
						 SR_ARRAY_SIZE(frames) - n - (ev->n_ustack - i - 1)) -
				     1;
			} else if (s->ustack[i] & V8_FRAME_FLAG) {
				/* Keeps a slot for each user frame still to come. */
				n += v8_frames(c, proc, s->ustack[i], &frames[n],
					       SR_ARRAY_SIZE(frames) - n - (ev->n_ustack - i - 1)) -
				     1;
			} else if (same_image) {
				if (agent_procs__user_frame(c->procs, proc, addr, c->now_mono, &frames[n]))
					resolve_jit(c, s, proc, addr, &frames[n]);
			} else {
				frames[n].address = addr;
				frames[n].exe = AGENT_EXE_NONE;
				frames[n].line = 0;
				frames[n].kind = stackrelay_v1_FrameKind_FRAME_KIND_UNKNOWN;
			}
			if (frames[n].kind != stackrelay_v1_FrameKind_FRAME_KIND_USER &&
			    frames[n].kind != stackrelay_v1_FrameKind_FRAME_KIND_INTERPRETED)
				c->stats.frames_unattributed++;
			n++;
		}
		if (c->python)
			agent_python__prefetch(c->python, NULL, NULL, 0);
	} else if (!kthread) {
		proc = agent_procs__get(c->procs, s->hdr.pid, s->hdr.start_boottime_ns, c->window);
		agent_run_queue_unwinder(c, proc);
	}
	r = agent_store__intern_stack(
		c->store, frames, n, ev->n_kstack == PROFILE_MAX_STACK_DEPTH || ev->n_ustack == PROFILE_MAX_STACK_DEPTH,
		c->window, key.stack_id);
	if (r < 0) {
		c->win_overflow++;
		c->stats.dropped_overflow++;
		return;
	}
	key.pid = s->hdr.pid;
	key.tid = s->hdr.tid;
	key.start_ns = s->hdr.start_boottime_ns;
	if (ev->type == PROFILE_EVENT_OFF_CPU) {
		key.profile_type = stackrelay_v1_ProfileType_PROFILE_TYPE_OFF_CPU;
		/* Waits were drawn with off_cpu.probability: each stands for 1/probability of them. */
		off_cpu_ns = (uint64_t)((double)s->off_cpu_ns * c->off_cpu_scale + 0.5);
		c->stats.off_cpu_ns += off_cpu_ns;
	}
	labels.thread_name = ev->comm;
	labels.process_name = ev->pcomm;
	labels.exe_path = proc ? proc->exe_path : NULL;
	labels.cg = proc ? &proc->cg : NULL;
	labels.kernel = ev->n_kstack > 0;
	r = agent_agg__add(c->agg, &key, &labels, off_cpu_ns);
	if (r < 0) {
		c->win_overflow++;
		c->stats.dropped_overflow++;
		return;
	}
	c->stats.samples_aggregated++;
}

int agent_run_on_record(void *ctx, const void *data, size_t len)
{
	struct run_ctx *c = ctx;
	struct agent_event ev;

	if (agent_event_decode(data, len, &ev) < 0) {
		c->stats.bad_records++;
		return 0;
	}
	switch (ev.type) {
	case PROFILE_EVENT_SAMPLE:
	case PROFILE_EVENT_OFF_CPU:
		handle_sample(c, &ev);
		break;
	case PROFILE_EVENT_EXEC:
		c->stats.execs++;
		agent_procs__exec(c->procs, ev.hdr->pid, ev.hdr->start_boottime_ns, ev.mm, ev.vdso, c->window);
		/* A new image: the old one's JIT code is gone (a new runtime starts its map over). */
		if (c->perfmaps)
			agent_perf_map_cache__exit(c->perfmaps, ev.hdr->pid, ev.hdr->start_boottime_ns);
		break;
	case PROFILE_EVENT_FORK:
		agent_procs__fork(c->procs, ev.fork, c->window);
		break;
	case PROFILE_EVENT_MMAP: {
		struct agent_proc *proc = agent_procs__mmap(c->procs, ev.mmap, c->window);

		/*
		 * A process the unwinder has: the BPF side added this mapping to its
		 * list itself, but a sync that read the mappings before it (the agent
		 * building tables while ld.so maps libc) wrote its list over that
		 * addition. Sync again now: this record arrives unwoken (a known
		 * file), and waiting for the next woken sample left a library out of
		 * the process's list for up to a poll interval (a second).
		 */
		if (proc && proc->unwind_gen)
			agent_run_queue_unwinder(c, proc);
		break;
	}
	case PROFILE_EVENT_EXIT:
		c->stats.exits++;
		agent_procs__exit(c->procs, ev.hdr->pid, ev.hdr->start_boottime_ns);
		if (c->perfmaps)
			agent_perf_map_cache__exit(c->perfmaps, ev.hdr->pid, ev.hdr->start_boottime_ns);
		break;
	}
	return 0;
}
