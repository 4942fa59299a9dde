/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What each mapped file is to one runtime's reader (Python, Node.js, Java):
 * a table of verdicts keyed by the file's (device, inode, mtime, size), as
 * agent/proc.c identifies files. Entries are the owner's structs whose first
 * member is that key (uint64_t key[4]); nothing else points into them, so
 * when the table reaches its bound it starts again rather than stop
 * examining new files (a node that runs new builds all day).
 */
#ifndef SR_AGENT_FILE_VERDICTS_H
#define SR_AGENT_FILE_VERDICTS_H

#include <stddef.h>
#include <stdint.h>

#include "common/htab.h"

struct agent_file_verdicts {
	struct sr_htab_ptrs files;
	size_t max;
};

void agent_file_verdicts_init(struct agent_file_verdicts *v, size_t max);
/* Frees every entry. */
void agent_file_verdicts_done(struct agent_file_verdicts *v);
/* The verdict for key (agent_exe__key() of the file's mapping), or NULL when its file is new. */
void *agent_file_verdicts__get(struct agent_file_verdicts *v, const uint64_t key[4]);
/*
 * Adds an entry (calloc'ed, its key filled in). When the table is full it is
 * emptied first: an entry got earlier must not be used after this call.
 * On failure the entry is freed and -ENOMEM returned.
 */
int agent_file_verdicts__add(struct agent_file_verdicts *v, void *entry);
size_t agent_file_verdicts__count(const struct agent_file_verdicts *v);

#endif
