/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Types shared by the HotSpot frame walker (hotspot.bpf.h) and the agent
 * (agent/java.c). Fixed-width types only (docs/style.md 1).
 *
 * For a sampled thread of a process in hotspot_procs, a pc in one of the
 * JVM's code heaps is not crossed by frame pointers (compiled Java code
 * keeps none) but by what the JVM says of the code blob that holds it,
 * found through the heap's segment map as CodeHeap::find_start does:
 * - the interpreter: an interpreted frame, RBP its frame pointer; the
 *   Method* and bytecode pointer are slots below it, the caller's stack
 *   pointer is the frame's sender_sp slot;
 * - an nmethod (C1, C2, a native wrapper): its frame is frame_size words,
 *   return address and saved RBP at the top;
 * - any other blob with a frame size (runtime stubs, adapters): the same;
 *   one without (the call stub, the stub routines) keeps an RBP frame.
 * Every offset comes from the JVM's own tables (agent/jvm-structs.h).
 *
 * A Java frame is one u64 in the sample's ustack (HOTSPOT_FRAME_*); the
 * agent names it from the process's memory: an interpreted frame by its
 * Method* and bytecode index, a compiled one by its pc (the nmethod's
 * debug information gives the inlined methods at it), checked against the
 * nmethod's compile ID so that code freed and replaced in between is not
 * named after the new code.
 */
#ifndef SR_BPF_HOTSPOT_H
#define SR_BPF_HOTSPOT_H

/* Code heaps per JVM (a segmented code cache has three: non-nmethods, profiled, non-profiled). */
#define HOTSPOT_MAX_HEAPS 3
/* Segment-map hops per lookup: with 128-byte segments and hops of up to 254 segments, blobs up to ~500 KiB. */
#define HOTSPOT_SEGMAP_HOPS 16

struct hotspot_heap {
	__u64 low; /* its code: [low, high) */
	__u64 high;
	__u64 segmap; /* one byte per segment, from low */
	__u32 log2_segment;
	__u32 pad;
};

/* A JVM, keyed by tgid in hotspot_procs. Offsets from libjvm.so's gHotSpotVM* tables. */
struct hotspot_proc {
	__u64 start_boottime_ns; /* tells a reused PID apart */
	__u64 low;		 /* all heaps lie in [low, high) */
	__u64 high;
	struct hotspot_heap heaps[HOTSPOT_MAX_HEAPS];
	__u32 n_heaps;
	__u16 heapblock_size;	   /* sizeof(HeapBlock): a blob starts this far after its segment */
	__u16 codeblob_name;	   /* CodeBlob::_name, a char* */
	__u16 codeblob_frame_size; /* CodeBlob::_frame_size, an int of words */
	__u16 nmethod_compile_id;  /* nmethod::_compile_id, an int */
	__u16 method_constmethod;  /* Method::_constMethod */
	__u16 constmethod_size;	   /* sizeof(ConstMethod): the bytecodes follow it */
	__s8 interp_method;	   /* an interpreted frame's slots, in words from its fp */
	__s8 interp_bcp;
	__s8 interp_sender_sp;
	__u8 pad[5];
};

/*
 * A Java frame in a sample's ustack: HOTSPOT_FRAME_FLAG (bits 62 and 61: a
 * Python frame has bit 63, a V8 frame bit 62 alone), then
 * - interpreted (bit 60 clear): the Method* >> 3 in bits 0-43, the bytecode
 *   index in bits 44-59 (HOTSPOT_BCI_NONE when unknown);
 * - compiled (bit 60 set): the pc to look the frame's PcDesc up by in bits
 *   0-46 (a caller's return address; the leaf's pc plus one, so that the
 *   first PcDesc at or past it describes the interrupted instruction, not
 *   the one before), the low 13 bits of the nmethod's compile ID in bits
 *   47-59.
 */
#define HOTSPOT_FRAME_FLAG	 (3ULL << 61)
#define HOTSPOT_FRAME_MASK	 ((1ULL << 63) | (3ULL << 61))
#define HOTSPOT_FRAME_COMPILED	 (1ULL << 60)
#define HOTSPOT_METHOD_BITS	 44
#define HOTSPOT_BCI_SHIFT	 44
#define HOTSPOT_BCI_NONE	 0xffffULL
#define HOTSPOT_PC_BITS		 47
#define HOTSPOT_PC_MASK		 ((1ULL << HOTSPOT_PC_BITS) - 1)
#define HOTSPOT_COMPILE_ID_SHIFT 47
#define HOTSPOT_COMPILE_ID_MASK	 0x1fffULL

#endif
