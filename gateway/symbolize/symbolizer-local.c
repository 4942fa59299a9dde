/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The symbolizer's local sources (symbolizer-private.h), read on the caller's
 * worker thread: the disk store under cache_dir (a stored table, with the
 * stored debug file for lines), then the debug directories by build ID and by
 * .gnu_debuglink, whose table is then kept in the store for the next start.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store.h"
#include "symbolize.h"
#include "symbolizer-private.h"
#include "symtab.h"

/* Largest stored table file read back (a 16M-symbol table is about 600 MiB). */
#define SR_SYM_MAX_TABLE_FILE (1ULL << 30)

/* ---- local sources ---- */

/* Debug file candidates by build ID and by .gnu_debuglink; the first that loads wins. */
static int load_debug_dirs(struct gw_symbolizer *s, const struct entry *e, const struct gw_sym_hint *hint,
			   struct gw_sym_handle **ret)
{
	char hex[2 * ID_MAX + 1], path[PATH_MAX];
	int r = -ENOENT;

	if (e->build_id_len > 0) {
		gw_sym_hex(e->build_id, e->build_id_len, hex, sizeof(hex));
		for (size_t i = 0; i < s->n_debug_dirs; i++) {
			snprintf(path, sizeof(path), "%s/.build-id/%.2s/%s.debug", s->debug_dirs[i], hex, hex + 2);
			if (access(path, R_OK) == 0 &&
			    gw_sym_handle_from_path(s, path, NULL, e->build_id, e->build_id_len, ret) == 0)
				return 0;
		}
	}
	if (hint && hint->debuglink && hint->debuglink[0] && !strchr(hint->debuglink, '/')) {
		char dir[PATH_MAX] = "";
		if (hint->path && hint->path[0] == '/') {
			const char *slash = strrchr(hint->path, '/');
			snprintf(dir, sizeof(dir), "%.*s", (int)(slash - hint->path), hint->path);
		}
		for (size_t i = 0; i < s->n_debug_dirs; i++) {
			/* gdb's order: DIR/<exe dir>/<link>, then DIR/<link>. Without a build ID to
			 * check against, a debuglink match is taken on trust of the operator's dirs. */
			snprintf(path, sizeof(path), "%s%s/%s", s->debug_dirs[i], dir, hint->debuglink);
			if (access(path, R_OK) == 0 &&
			    gw_sym_handle_from_path(s, path, NULL, e->build_id_len ? e->build_id : NULL,
						    e->build_id_len, ret) == 0)
				return 0;
			snprintf(path, sizeof(path), "%s/%s", s->debug_dirs[i], hint->debuglink);
			if (access(path, R_OK) == 0 &&
			    gw_sym_handle_from_path(s, path, NULL, e->build_id_len ? e->build_id : NULL,
						    e->build_id_len, ret) == 0)
				return 0;
		}
	}
	return r;
}

int gw_sym_load_local(struct gw_symbolizer *s, const struct entry *e, const struct gw_sym_hint *hint,
		      struct gw_sym_handle **ret)
{
	char hex[2 * ID_MAX + 1], path[PATH_MAX];
	struct gw_symtab *tab = NULL;
	int r;

	gw_sym_hex(e->id, e->id_len, hex, sizeof(hex));
	if (s->store) {
		void *buf;
		size_t len;
		if (gw_symstore__read_table(s->store, hex, (size_t)SR_SYM_MAX_TABLE_FILE, &buf, &len) == 0) {
			tab = gw_symtab_deserialize(buf, len, s->cfg.demangle);
			free(buf);
		}
		if (!(hint && hint->is_kernel) && gw_symstore__debug_path(s->store, hex, path, sizeof(path)) == 0) {
			/* A stored debug file adds lines to the stored table. */
			if (gw_sym_handle_from_path(s, path, tab, NULL, 0, ret) == 0) {
				STAT_INC(s, disk_hits);
				return 0;
			}
			tab = NULL;
		}
		if (tab) {
			struct gw_sym_handle *h = gw_sym_handle_new();
			if (!h) {
				gw_symtab_free(tab);
				return -ENOMEM;
			}
			h->tab = tab;
			h->mode = s->cfg.demangle;
			gw_sym_handle_account(h, 0);
			*ret = h;
			STAT_INC(s, disk_hits);
			return 0;
		}
	}
	if (hint && hint->is_kernel)
		return -ENOENT;
	r = load_debug_dirs(s, e, hint, ret);
	if (r == 0) {
		STAT_INC(s, disk_hits);
		/* Keep the table for the next start; the debug file itself stays where it is. */
		if (s->store && (*ret)->tab) {
			void *buf;
			size_t len;
			if (gw_symtab__serialize((*ret)->tab, &buf, &len) == 0) {
				(void)gw_symstore__write_table(s->store, hex, buf, len);
				free(buf);
			}
		}
	}
	return r;
}
