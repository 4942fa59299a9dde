/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The running kernel's identity: release, GNU build ID (/sys/kernel/notes),
 * boot ID, where its image's text lies (_text, _etext in /proc/kallsyms), and
 * loaded modules with their addresses (/proc/modules) and build IDs
 * (/sys/module/NAME/notes/.note.gnu.build-id).
 *
 * A kernel frame is a runtime address, shifted by KASLR differently on every
 * boot. The agent names it in one of three address spaces
 * (docs/agent-protocol.md, "Kernel frames"), each a kernel ID of its own:
 *
 *   image    an offset from _text, under an ID made from the build ID: equal
 *            on every node and boot of one kernel build, so those nodes share
 *            one symbol table and their kernel stacks hash equal;
 *   module i an offset from module i's load address, under an ID made from
 *            the module's build ID (without one: the image ID, name, size);
 *   runtime  the runtime address itself, under an ID made from the build ID
 *            (or release) and the boot ID: code outside the image and every
 *            known module (BPF programs, trampolines, modules loaded since the
 *            last look), and every frame when _text cannot be read (no
 *            CAP_SYSLOG: kallsyms shows 0 for every address).
 */
#ifndef SR_AGENT_KERNEL_H
#define SR_AGENT_KERNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "elfinfo.h"

#define AGENT_KERNEL_ID_LEN 16
/* Modules kept (loaded ones, plus those unloaded since the agent started); a large server loads a few hundred. */
#define AGENT_KERNEL_MAX_MODULES 4096
#define AGENT_MODULE_NAME_MAX	 64
/* /proc/kallsyms larger than this is not read (a large kernel with many modules has ~15 MiB). */
#define AGENT_KERNEL_MAX_KALLSYMS_BYTES (128 * 1024 * 1024)

/* Address spaces besides modules (which are 0 .. n_modules-1), as agent_kernel_locate() returns them. */
#define AGENT_KSEG_IMAGE   (-1)
#define AGENT_KSEG_RUNTIME (-2)
#define AGENT_KSEG_NONE	   (-3)

struct agent_kernel_module {
	char name[AGENT_MODULE_NAME_MAX];
	uint64_t start;
	uint64_t size;
	uint8_t build_id[AGENT_BUILD_ID_MAX];
	size_t build_id_len;
	uint8_t id[AGENT_KERNEL_ID_LEN];
	/* Still loaded at start (as of the last look at /proc/modules): frames are located in it. */
	bool live;
};

struct agent_kernel {
	/* The image's ID when image offsets are used, else the same as runtime_id. */
	uint8_t id[AGENT_KERNEL_ID_LEN];
	uint8_t runtime_id[AGENT_KERNEL_ID_LEN];
	char release[65];
	uint8_t build_id[AGENT_BUILD_ID_MAX];
	size_t build_id_len;
	char boot_id[40];
	/* _text and _etext; both 0 when unknown (then every frame is a runtime address). */
	uint64_t text_start, text_end;
	/* Append-only: a module's index names it in stacks for the agent's lifetime. */
	struct agent_kernel_module *modules;
	size_t n_modules;
	size_t cap_modules; /* room in modules; 0 when not known (never more than the allocation) */
	/* Indices of the live modules with a known start, sorted by start (agent_kernel_locate). */
	uint32_t *by_start;
	size_t n_by_start;
};

/*
 * Parses /proc/modules ("name size refcount deps state address ...").
 * Addresses read as 0 without CAP_SYSLOG (kptr_restrict); such modules are
 * kept with start 0. Returns 0, -ENOMEM.
 */
int agent_kernel_parse_modules(const char *buf, size_t len, struct agent_kernel_module **ret, size_t *ret_n);
/*
 * _text and _etext from kallsyms text; false unless both are found, non-zero
 * and in order. arm64's kallsyms has no _text (it lies below _stext, outside
 * the ranges kallsyms keeps without CONFIG_KALLSYMS_ALL): _stext stands for
 * it there, and image offsets count from it.
 */
bool agent_kernel_parse_text(const char *buf, size_t len, uint64_t *ret_start, uint64_t *ret_end);
/* The same fed in pieces of whole lines (kallsyms is read until both are seen); true once both are. */
struct agent_kernel_text_scan {
	uint64_t start, end, stext;
	bool have_start, have_end, have_stext;
};
bool agent_kernel_scan_text(struct agent_kernel_text_scan *sc, const char *buf, size_t len);
/* The image's start the scan found: _text, else _stext; 0 when neither. */
static inline uint64_t agent_kernel_text_start(const struct agent_kernel_text_scan *sc)
{
	return sc->have_start ? sc->start : sc->have_stext ? sc->stext : 0;
}

/*
 * Fills in the IDs (image, runtime, every module's) and the module index from
 * what k holds. Call after setting k's fields by hand (tests, fixtures);
 * agent_kernel_read() calls it. Returns 0, -ENOMEM.
 */
int agent_kernel_finish(struct agent_kernel *k);
/* Sets m->id (module build ID, or k's image ID, name and size). */
void agent_kernel_module_id(const struct agent_kernel *k, struct agent_kernel_module *m);
/* Rebuilds k->by_start from the live modules. Returns 0, -ENOMEM. */
int agent_kernel_index_modules(struct agent_kernel *k);
/* Image offsets are used: _text and _etext are known. */
static inline bool agent_kernel_relative(const struct agent_kernel *k)
{
	return k->text_start && k->text_end > k->text_start;
}
/*
 * The address space a runtime address lies in (AGENT_KSEG_IMAGE,
 * AGENT_KSEG_RUNTIME or a module index) and the address in it.
 */
int agent_kernel_locate(const struct agent_kernel *k, uint64_t addr, uint64_t *ret_addr);
/* The ID of an address space; NULL for AGENT_KSEG_NONE or an index out of range. */
const uint8_t *agent_kernel_seg_id(const struct agent_kernel *k, int seg);
/* The address space an ID names, or AGENT_KSEG_NONE. */
int agent_kernel_seg_of_id(const struct agent_kernel *k, const uint8_t *id, size_t len);
/* The live module holding a runtime address, or NULL. */
const struct agent_kernel_module *agent_kernel_module_at(const struct agent_kernel *k, uint64_t addr);

/* Reads everything from /sys and /proc under root (normally "/"; tests use fixtures). */
int agent_kernel_read(const char *root, struct agent_kernel *ret);
/*
 * Looks at root/proc/modules again: modules loaded since are added (while
 * fewer than AGENT_KERNEL_MAX_MODULES were ever seen), unloaded ones stop
 * being live. Returns 1 when anything changed, 0, or a negative errno (k is
 * then as before).
 */
int agent_kernel_refresh_modules(struct agent_kernel *k, const char *root);
/* A deep copy (modules and index). Returns 0, -ENOMEM. */
int agent_kernel_copy(const struct agent_kernel *k, struct agent_kernel *ret);
void agent_kernel_done(struct agent_kernel *k);

#endif
