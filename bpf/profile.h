/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Types shared by profile.bpf.c and the agent: fixed-width types only.
 *
 * Every record in the ring buffer starts with struct profile_header; its
 * type says which of the structs below it is. Records come out of the ring
 * buffer in the order they were reserved across all CPUs, so an exec or exit
 * record always follows the samples its process produced before it.
 */
#ifndef SR_BPF_PROFILE_H
#define SR_BPF_PROFILE_H

/* bpf_get_stack() depth per stack (kernel and user each); 127 is the kernel's default sysctl_perf_event_max_stack. */
#define PROFILE_MAX_STACK_DEPTH 127
#define PROFILE_TASK_COMM_LEN	16
#define PROFILE_MMAP_NAME_LEN	64
/* Depth of the cgroup tree walked upwards when matching the cgroup allowlist. */
#define PROFILE_MAX_CGROUP_LEVELS 16

enum profile_event_type {
	PROFILE_EVENT_SAMPLE = 1,
	PROFILE_EVENT_EXEC = 2,
	PROFILE_EVENT_EXIT = 3,
	PROFILE_EVENT_MMAP = 4,
	PROFILE_EVENT_FORK = 5,
	/* A thread back on CPU after blocking: struct profile_sample, off_cpu_ns set (offcpu.bpf.h). */
	PROFILE_EVENT_OFF_CPU = 6,
};

/* Per-CPU counters (the `counters` map, one __u64 per index). */
enum profile_counter {
	PROFILE_CNT_SAMPLES = 0,      /* perf events that passed the filters */
	PROFILE_CNT_FILTERED_IDLE,    /* pid 0 skipped */
	PROFILE_CNT_FILTERED_KTHREAD, /* kernel threads skipped */
	PROFILE_CNT_FILTERED_PID,     /* not in the pid allowlist */
	PROFILE_CNT_FILTERED_CGROUP,  /* not under an allowed cgroup */
	PROFILE_CNT_LOST_RINGBUF,     /* sample dropped: ring buffer full */
	PROFILE_CNT_KSTACK_ERR,	      /* bpf_get_stack() failed for the kernel stack */
	PROFILE_CNT_USTACK_ERR,	      /* bpf_get_stack() failed for the user stack */
	PROFILE_CNT_TASK_EVENTS_LOST, /* exec/exit/mmap record dropped: ring buffer full */
	PROFILE_CNT_MMAP_EVENTS,      /* executable file mappings reported */
	PROFILE_CNT_USTACK_IN_EXEC,   /* samples inside execve: kernel stack only (the user side is being replaced) */
	/* User stacks unwound with tables (the rest went through bpf_get_stack's frame pointers). */
	PROFILE_CNT_UNWIND_STACKS,
	PROFILE_CNT_UNWIND_FP_STACKS,	 /* ... by frame pointers: the process had no mapping table yet */
	PROFILE_CNT_UNWIND_TABLE_FRAMES, /* frames stepped with a table row */
	PROFILE_CNT_UNWIND_FP_FRAMES,	 /* frames stepped by frame pointer inside a table-unwound stack */
	/* Why a table-unwound stack ended (one per stack). */
	PROFILE_CNT_UNWIND_END_COMPLETE,   /* reached the outermost frame */
	PROFILE_CNT_UNWIND_END_NO_TABLE,   /* a mapping without a table whose frame-pointer chain broke */
	PROFILE_CNT_UNWIND_END_NO_MAPPING, /* a pc in no known mapping (JIT, anonymous) whose frame-pointer chain broke */
	PROFILE_CNT_UNWIND_END_EVICTED,	   /* the mapping's table was evicted */
	PROFILE_CNT_UNWIND_END_NO_RULE,	   /* a rule the unwinder cannot follow (UNWIND_CFA_UNSUPPORTED) */
	PROFILE_CNT_UNWIND_END_READ_FAULT, /* the stack could not be read */
	/* code without CFI in a file with a table (V8's builtins, assembly) whose frame-pointer chain broke */
	PROFILE_CNT_UNWIND_END_NO_CFI,
	/* a pc in a JVM's code heap the HotSpot walker could not step (free space, a frame that makes no sense) */
	PROFILE_CNT_UNWIND_END_JVM,
	PROFILE_CNT_UNWIND_END_DEPTH, /* PROFILE_MAX_STACK_DEPTH frames */
	/*
	 * Off-CPU (offcpu.bpf.h). Switches out skipped before anything is
	 * recorded, in the order of the CPU filters above (same offsets from
	 * their first), then the cost controls, then what was recorded.
	 */
	PROFILE_CNT_OFF_CPU_SKIP_IDLE,	      /* the idle task switched out */
	PROFILE_CNT_OFF_CPU_SKIP_KTHREAD,     /* a kernel thread switched out (its waiting is its idle state) */
	PROFILE_CNT_OFF_CPU_SKIP_PID,	      /* not in the pid allowlist */
	PROFILE_CNT_OFF_CPU_SKIP_CGROUP,      /* not under an allowed cgroup */
	PROFILE_CNT_OFF_CPU_SKIP_PROBABILITY, /* not drawn (off_cpu.probability) */
	PROFILE_CNT_OFF_CPU_SKIP_SHORT,	      /* back on CPU before off_cpu.min_block */
	PROFILE_CNT_OFF_CPU_SKIP_RATE,	      /* over off_cpu.max_events_per_second on this CPU */
	PROFILE_CNT_OFF_CPU_SKIP_NO_STORAGE,  /* the thread's task storage could not be made (out of memory) */
	PROFILE_CNT_OFF_CPU_EVENTS,	      /* blocked long enough: stack taken */
	PROFILE_CNT_OFF_CPU_LOST_RINGBUF,     /* an off-CPU event dropped: ring buffer full */
	/* Python (pyframe.bpf.h): table-unwound samples of processes in py_procs. */
	PROFILE_CNT_PY_STACKS, /* the thread's current Python frame was found */
	PROFILE_CNT_PY_NO_THREAD, /* no PyThreadState is the sampled thread's (a thread Python does not know, or > PY_MAX_THREADS) */
	PROFILE_CNT_PY_NO_FRAME, /* the thread has no Python frame (between calls, or not started) */
	PROFILE_CNT_PY_FRAMES,	 /* Python frames recorded */
	PROFILE_CNT_V8_FRAMES,	 /* V8 (Node.js) JavaScript frames recorded (v8.bpf.h) */
	PROFILE_CNT_JVM_FRAMES,	 /* HotSpot Java frames recorded (hotspot.bpf.h) */
	/*
	 * Where a table-unwound CPU sample's time goes, in nanoseconds
	 * (bpf_ktime_get_ns() at each stage), and how many row and mapping
	 * searches it made: written only when the agent runs with
	 * SR_AGENT_DEBUG_STAGE_TIMES=1 (debug_stage_times), zero otherwise.
	 */
	PROFILE_CNT_DBG_NS_BEGIN,    /* do_sample's entry to the first frame: filters, header, kernel stack */
	PROFILE_CNT_DBG_NS_LOOKUP,   /* ... of which the process's mapping list and the scratch state found */
	PROFILE_CNT_DBG_NS_HEADER,   /* ... of which the header and kernel stack (fill_sample) */
	PROFILE_CNT_DBG_NS_KSTACK,   /* ... ... of which the kernel stack (bpf_get_stack) */
	PROFILE_CNT_DBG_NS_RUNTIMES, /* ... of which the Python, V8 and Java starts (py_begin ...) */
	PROFILE_CNT_DBG_NS_UNWIND,   /* the first frame to the last (tail calls included) */
	PROFILE_CNT_DBG_NS_ROW,	     /* ... of which finding rows (unwind_find_row: cache, then search) */
	PROFILE_CNT_DBG_NS_MAPPING,  /* ... of which finding mappings (unwind_find_mapping) */
	PROFILE_CNT_DBG_NS_PY,	     /* ... of which Python frames (py_frame_step) */
	PROFILE_CNT_DBG_NS_SUBMIT,   /* the finished stack into the ring buffer (submit_unwound) */
	PROFILE_CNT_DBG_STACKS,	     /* stacks timed */
	PROFILE_CNT_DBG_ROWS,	     /* rows looked up */
	PROFILE_CNT_DBG_ROW_MISSES,  /* ... not in the row cache: binary-searched */
	PROFILE_CNT_DBG_MAPPINGS,    /* mapping searches */
	PROFILE_CNT__MAX,
};

struct profile_header {
	__u32 type;
	__u32 pid; /* tgid */
	__u32 tid;
	__u32 cpu;
	__u64 ktime_ns;
	/* The thread group leader's start_boottime: with pid it names a process across PID reuse. */
	__u64 start_boottime_ns;
	char comm[PROFILE_TASK_COMM_LEN];  /* the thread's */
	char pcomm[PROFILE_TASK_COMM_LEN]; /* the group leader's */
};

struct profile_sample {
	struct profile_header hdr;
	__u64 cgroup_id;
	/*
	 * The address space the user stack belongs to: inside execve, before
	 * the new image is installed, it is the old image's, which the agent
	 * does not hold mappings for.
	 */
	__u64 mm;
	__u32 flags; /* PROFILE_SAMPLE_* */
	/* Bytes written by bpf_get_stack(), or a negative errno. */
	__s32 kstack_len;
	__s32 ustack_len;
	__u32 pad;
	/* PROFILE_EVENT_OFF_CPU: how long the thread was off CPU before this stack ran again. */
	__u64 off_cpu_ns;
	__u64 kstack[PROFILE_MAX_STACK_DEPTH];
	__u64 ustack[PROFILE_MAX_STACK_DEPTH];
};

#define PROFILE_SAMPLE_KTHREAD 0x1
/* The user stack came from the table unwinder (else from bpf_get_stack's frame pointers). */
#define PROFILE_SAMPLE_UNWOUND 0x2

/* PROFILE_EVENT_EXEC and PROFILE_EVENT_EXIT: the header, and the address space after exec. */
struct profile_task_event {
	struct profile_header hdr;
	__u64 mm;   /* the mm_struct's address: names the image until the next exec (never sent anywhere) */
	__u64 vdso; /* exec: where the kernel mapped the vDSO (0: unknown) */
};

/*
 * An executable file mapping as it is made (exec, the dynamic loader,
 * dlopen, mprotect to executable). It always precedes the samples that fall
 * in it, so a process that exits a millisecond later still has its frames
 * attributed. The file is named by its inode; the agent reads the ELF through
 * /proc/PID/map_files while the process lives, or finds it in its cache.
 */
struct profile_mmap_event {
	struct profile_header hdr;
	__u64 mm;
	__u64 start;
	__u64 end;
	__u64 offset; /* file offset of start */
	__u64 dev;    /* user-space encoding, as st_dev */
	__u64 ino;
	__u64 size;
	__u64 mtime_ns;
	__u32 flags; /* PROFILE_MMAP_* */
	__u32 pad;
	char name[PROFILE_MMAP_NAME_LEN]; /* the file's last path component, for logs */
};

/*
 * A new process (not a thread) forked: it starts with its parent's mappings,
 * which no mapping record will report. The header is the child's.
 */
struct profile_fork_event {
	struct profile_header hdr;
	__u32 parent_pid;
	__u32 pad;
	__u64 parent_start_boottime_ns;
	__u64 mm; /* the child's address space */
};

/* The agent has not identified this file yet: the record woke it. */
#define PROFILE_MMAP_UNKNOWN_FILE 0x1

#endif
