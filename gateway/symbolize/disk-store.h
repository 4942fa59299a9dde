/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The symbolizer's on-disk store under cache_dir:
 *   symtab/xx/rest.sym        serialized symbol tables (gw_symtab__serialize)
 *   symtab/xx/rest.upload.sym the same, uploaded by an agent (ranked below the rest)
 *   .build-id/xx/rest.debug   debug files fetched from debuginfod, in the
 *                             /usr/lib/debug layout (so cache_dir can also be
 *                             given to other tools as a debug directory)
 * where xxrest is the lower-case hex executable or build ID. Files are
 * written to a temporary name and renamed, so readers never see half a file.
 * The total size is bounded (disk_cache_size): the least recently used files
 * (by mtime, refreshed on every read) are deleted first.
 */
#ifndef SR_GW_DISK_STORE_H
#define SR_GW_DISK_STORE_H

#include <stddef.h>
#include <stdint.h>

struct gw_disk_store;

/* Creates the directories and sums what is there. NULL + errno. */
struct gw_disk_store *gw_disk_store_new(const char *dir, uint64_t max_bytes);
void gw_disk_store_free(struct gw_disk_store *st);

/*
 * Where a stored table came from. An agent's upload is kept apart
 * (symtab/xx/rest.upload.sym) so that it never overwrites, nor is read
 * before, a table made from a debug file or fetched from debuginfod.
 */
enum gw_disk_store_source {
	GW_DISK_STORE_TRUSTED, /* debug directories, debuginfod: symtab/xx/rest.sym */
	GW_DISK_STORE_UPLOAD,  /* an agent's upload: symtab/xx/rest.upload.sym */
};

/* Reads a stored table (at most max_len bytes) into a malloc'd buffer; -ENOENT when absent. */
int gw_disk_store__read_table(struct gw_disk_store *st, enum gw_disk_store_source src, const char *hex, size_t max_len,
			      void **ret, size_t *ret_len);
int gw_disk_store__write_table(struct gw_disk_store *st, enum gw_disk_store_source src, const char *hex,
			       const void *buf, size_t len);
/* Path of .build-id/xx/rest.debug when it exists; -ENOENT otherwise. */
int gw_disk_store__debug_path(struct gw_disk_store *st, const char *hex, char *buf, size_t size);
/* Moves (or copies) src into .build-id/xx/rest.debug; the new path goes to buf. */
int gw_disk_store__adopt_debug(struct gw_disk_store *st, const char *hex, const char *src, char *buf, size_t size);
uint64_t gw_disk_store__bytes(struct gw_disk_store *st);

#endif
