/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A fake agent_store for the sender's tests and tests/integration/sender-driver.c:
 * a synthetic world of stacks, executables and one kernel with deterministic
 * IDs, so tests link sender.c without the profiling core.
 *
 * Stack i has three frames: executable i % n_execs, executable (i + 1) % n_execs,
 * and for odd i a kernel frame (odd stacks' samples also carry the kernel ID),
 * for even i an interpreted frame of function (i / 2) % FAKE_N_FUNCS.
 */
#ifndef SR_TEST_FAKESTORE_H
#define SR_TEST_FAKESTORE_H

#include <stdbool.h>
#include <stdint.h>

#include "agent.h"

#define FAKE_STACK_ID_BYTES  16
#define FAKE_EXEC_ID_BYTES   20
#define FAKE_KERNEL_ID_BYTES 16
#define FAKE_FUNC_ID_BYTES   16
#define FAKE_N_FUNCS	     4

struct agent_store *fake_store_new(unsigned n_stacks, unsigned n_execs);
void fake_store_free(struct agent_store *st);
/* Lookups of this stack return -ENOENT from now on. */
void fake_store_evict_stack(struct agent_store *st, unsigned idx);
/* agent_store__open_executable() of executable idx opens path. */
void fake_store_set_exec_path(struct agent_store *st, unsigned idx, const char *path);
/* How many lookups the sender made, by kind. */
unsigned fake_store_lookups(struct agent_store *st, const char *kind);

void fake_stack_id(unsigned idx, uint8_t out[FAKE_STACK_ID_BYTES]);
void fake_exec_id(unsigned idx, uint8_t out[FAKE_EXEC_ID_BYTES]);
void fake_kernel_id(uint8_t out[FAKE_KERNEL_ID_BYTES]);
void fake_func_id(unsigned idx, uint8_t out[FAKE_FUNC_ID_BYTES]);
int fake_func_index(const uint8_t *id, size_t len);
/* Index of a fake ID, or -1. */
int fake_stack_index(const uint8_t *id, size_t len);
int fake_exec_index(const uint8_t *id, size_t len);

/* A sample as the profiling core makes them (every field malloc()ed, for pb_release). */
void fake_sample(stackrelay_v1_Sample *ret, unsigned stack_idx, uint32_t pid, uint64_t count);

#endif
