/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The running kernel's identity: release, GNU build ID (/sys/kernel/notes),
 * boot ID, and loaded modules with their addresses (/proc/modules) and build
 * IDs (/sys/module/NAME/notes/.note.gnu.build-id).
 *
 * The kernel ID is XXH3-128 over build ID (or release, without one) and boot
 * ID: kernel frames are runtime addresses, shifted by KASLR differently on
 * every boot, so the same kernel after a reboot is a different address space.
 */
#ifndef SR_AGENT_KERNEL_H
#define SR_AGENT_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#include "elfinfo.h"

#define AGENT_KERNEL_ID_LEN 16
/* Modules kept; a large server loads a few hundred. */
#define AGENT_KERNEL_MAX_MODULES 4096
#define AGENT_MODULE_NAME_MAX	 64

struct agent_kernel_module {
	char name[AGENT_MODULE_NAME_MAX];
	uint64_t start;
	uint64_t size;
	uint8_t build_id[AGENT_BUILD_ID_MAX];
	size_t build_id_len;
};

struct agent_kernel {
	uint8_t id[AGENT_KERNEL_ID_LEN];
	char release[65];
	uint8_t build_id[AGENT_BUILD_ID_MAX];
	size_t build_id_len;
	char boot_id[40];
	struct agent_kernel_module *modules;
	size_t n_modules;
};

/*
 * Parses /proc/modules ("name size refcount deps state address ...").
 * Addresses read as 0 without CAP_SYSLOG (kptr_restrict); such modules are
 * kept with start 0. Returns 0, -ENOMEM.
 */
int agent_kernel_parse_modules(const char *buf, size_t len, struct agent_kernel_module **ret, size_t *ret_n);
/* The module holding a runtime address, or NULL. */
const struct agent_kernel_module *agent_kernel_module_at(const struct agent_kernel *k, uint64_t addr);

/* Reads everything from /sys and /proc under root (normally "/"; tests use fixtures). */
int agent_kernel_read(const char *root, struct agent_kernel *ret);
void agent_kernel_done(struct agent_kernel *k);

#endif
