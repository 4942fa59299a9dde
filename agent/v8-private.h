/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The V8 object reader agent/v8.c and agent/v8-code.c share: a process's
 * memory read through agent_v8_read_fn, every object's map checked for its
 * instance type before a field of it is used.
 */
#ifndef SR_AGENT_V8_PRIVATE_H
#define SR_AGENT_V8_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "v8.h"

struct agent_v8_reader {
	const struct agent_v8_meta *m;
	agent_v8_read_fn read;
	void *ctx;
};

bool agent_v8_is_object(const struct agent_v8_reader *r, uint64_t tagged);
uint64_t agent_v8_untag(const struct agent_v8_reader *r, uint64_t tagged);
int agent_v8_read_u64(const struct agent_v8_reader *r, uint64_t addr, uint64_t *ret);
/* The instance type of a tagged object, read through its map; -EINVAL when it is no object. */
int agent_v8_type_of(const struct agent_v8_reader *r, uint64_t tagged, uint32_t *ret);
bool agent_v8_smi_value(const struct agent_v8_reader *r, uint64_t v, int64_t *ret);
/* A Smi field of the object at tagged pointer obj. */
int agent_v8_read_smi(const struct agent_v8_reader *r, uint64_t obj, uint32_t off, int64_t *ret);
/* The tagged field at off of obj, when it is an object of type want (-ENOENT when not). */
int agent_v8_read_typed(const struct agent_v8_reader *r, uint64_t obj, uint32_t off, uint32_t want, uint64_t *ret);
/* A ByteArray's bytes (at most AGENT_V8_MAX_POSITIONS), malloc'ed into *ret. */
int agent_v8_byte_array(const struct agent_v8_reader *r, uint64_t array, uint8_t **ret, size_t *ret_len);
/* The 1-based line of script position pos: by the script's line ends, or by its source when V8 has none yet. */
int agent_v8_script_line(const struct agent_v8_reader *r, uint64_t script, int64_t pos);

/*
 * V8's SourcePosition, as its position tables and inlining positions keep
 * it: bit 0 says external (a position in another file: none here), bits
 * 1-30 the script offset plus one, bits 31-46 the inlining id plus one (0:
 * not inlined). False for an external or negative value.
 */
static inline bool agent_v8_decode_position(int64_t raw, int64_t *ret_offset, int32_t *ret_inlining_id)
{
	if (raw < 0 || (raw & 1))
		return false;
	*ret_offset = ((raw >> 1) & ((1 << 30) - 1)) - 1;
	*ret_inlining_id = (int32_t)((raw >> 31) & 0xffff) - 1;
	return true;
}

#endif
