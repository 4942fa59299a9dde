/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The symbolizer's local sources (symbolizer-private.h), read on the caller's
 * worker thread: the disk store under cache_dir (a stored table, with the
 * stored debug file for lines), then the debug directories by build ID and by
 * .gnu_debuglink, whose table is then kept in the store for the next start,
 * then a table an agent uploaded before. Agent-supplied names (the
 * executable's path and .gnu_debuglink) are opened beneath each debug
 * directory (common/fsopen.h), never joined to it as strings.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fsopen.h"
#include "disk-store.h"
#include "symbolize.h"
#include "symbolizer-private.h"
#include "symtab.h"

/* Largest stored table file read back (a 16M-symbol table is about 600 MiB). */
#define SR_SYM_MAX_TABLE_FILE (1ULL << 30)

/* ---- local sources ---- */

/*
 * Does an agent-supplied path or name have a "." or ".." component? Such a
 * name is refused before any lookup: ".." is how "/../../lib/x86_64-linux-gnu"
 * would name the gateway host's own files from a debug directory.
 */
static bool has_dot_component(const char *p)
{
	while (*p) {
		size_t n = strcspn(p, "/");
		if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return true;
		p += n;
		p += strspn(p, "/");
	}
	return false;
}

/*
 * Opens rel (relative, from our own build-ID hex or checked agent names)
 * beneath the debug directory dirfd: no "..", no absolute link, no link out
 * of it, regular files only. A last component that is a symlink within the
 * directory (Fedora's .build-id/xx/rest.debug -> ../../usr/lib/debug/...
 * layout; Debian's dbgsym packages ship real files) is followed once,
 * beneath the directory too. Returns the fd or -errno (-EXDEV: it would
 * leave the directory).
 */
static int open_beneath(int dirfd, const char *rel)
{
	char link[PATH_MAX], target[PATH_MAX];
	const char *slash;
	ssize_t n;
	int fd = sr_fs_open_regular(dirfd, rel, SR_FS_BENEATH, 0, NULL);

	if (fd != -ELOOP)
		return fd;
	n = readlinkat(dirfd, rel, link, sizeof(link) - 1);
	if (n <= 0)
		return -ELOOP;
	link[n] = '\0';
	if (link[0] == '/')
		return -EXDEV; /* absolute: resolved against the host's root, not this directory */
	slash = strrchr(rel, '/');
	if ((size_t)snprintf(target, sizeof(target), "%.*s%s", slash ? (int)(slash - rel + 1) : 0, rel, link) >=
	    sizeof(target))
		return -ENAMETOOLONG;
	return sr_fs_open_regular(dirfd, target, SR_FS_BENEATH, 0, NULL);
}

/* Tries rel under dirfd: 0 with *ret, or -errno (counted when it tried to leave the directory). */
static int try_debug_file(struct gw_symbolizer *s, int dirfd, const char *rel, const uint8_t *expect, size_t expect_len,
			  struct gw_sym_handle **ret)
{
	int fd = open_beneath(dirfd, rel);

	if (fd < 0) {
		if (fd == -EXDEV)
			STAT_INC(s, debug_paths_escaping);
		return fd;
	}
	return gw_sym_handle_from_fd(s, fd, NULL, expect, expect_len, ret);
}

/* Debug file candidates by build ID and by .gnu_debuglink; the first that loads wins. */
static int load_debug_dirs(struct gw_symbolizer *s, const struct entry *e, const struct gw_sym_hint *hint,
			   struct gw_sym_handle **ret)
{
	char hex[2 * ID_MAX + 1], rel[PATH_MAX];
	const char *dir = "";
	int dir_len = 0;
	bool by_link;

	/* The agent names the path and the link: refused whole when either has a "." or ".." component. */
	by_link = hint && hint->debuglink && hint->debuglink[0] && !strchr(hint->debuglink, '/');
	if (by_link && (has_dot_component(hint->debuglink) || (hint->path && has_dot_component(hint->path)))) {
		STAT_INC(s, debug_paths_dot_dot);
		by_link = false;
	}
	if (by_link && hint->path && hint->path[0] == '/') {
		const char *slash = strrchr(hint->path, '/');
		dir = hint->path + strspn(hint->path, "/");
		dir_len = slash > dir ? (int)(slash - dir) : 0;
	}
	if (e->build_id_len > 0)
		gw_sym_hex(e->build_id, e->build_id_len, hex, sizeof(hex));
	for (size_t i = 0; i < s->n_debug_dirs; i++) {
		/* The directory itself is the operator's: a link to it is followed; nothing below it leaves it. */
		int dirfd = open(s->debug_dirs[i], O_PATH | O_DIRECTORY | O_CLOEXEC);

		if (dirfd < 0)
			continue;
		if (e->build_id_len > 0) {
			snprintf(rel, sizeof(rel), ".build-id/%.2s/%s.debug", hex, hex + 2);
			if (try_debug_file(s, dirfd, rel, e->build_id, e->build_id_len, ret) == 0)
				goto found;
		}
		if (by_link) {
			/* gdb's order: DIR/<exe dir>/<link>, then DIR/<link>. Without a build ID to
			 * check against, a debuglink match is taken on trust of the operator's dirs. */
			if (dir_len > 0 &&
			    (size_t)snprintf(rel, sizeof(rel), "%.*s/%s", dir_len, dir, hint->debuglink) <
				    sizeof(rel) &&
			    try_debug_file(s, dirfd, rel, e->build_id_len ? e->build_id : NULL, e->build_id_len, ret) ==
				    0)
				goto found;
			if (try_debug_file(s, dirfd, hint->debuglink, e->build_id_len ? e->build_id : NULL,
					   e->build_id_len, ret) == 0)
				goto found;
		}
		close(dirfd);
		continue;
	found:
		close(dirfd);
		return 0;
	}
	return -ENOENT;
}

/* A table an agent uploaded before (cache_dir), ranked below every other local source. */
static int load_stored_upload(struct gw_symbolizer *s, const char *hex, struct gw_sym_handle **ret)
{
	struct gw_symtab *tab = NULL;
	struct gw_sym_handle *h;
	void *buf;
	size_t len;

	if (!s->store || gw_disk_store__read_table(s->store, GW_DISK_STORE_UPLOAD, hex, (size_t)SR_SYM_MAX_TABLE_FILE,
						   &buf, &len) < 0)
		return -ENOENT;
	tab = gw_symtab_deserialize(buf, len, s->cfg.demangle);
	free(buf);
	if (!tab)
		return -ENOENT;
	h = gw_sym_handle_new();
	if (!h) {
		gw_symtab_free(tab);
		return -ENOMEM;
	}
	h->tab = tab;
	h->mode = s->cfg.demangle;
	h->from_upload = true; /* a debug file or debuginfod found later replaces it */
	gw_sym_handle_account(h, 0);
	*ret = h;
	return 0;
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
		if (gw_disk_store__read_table(s->store, GW_DISK_STORE_TRUSTED, hex, (size_t)SR_SYM_MAX_TABLE_FILE, &buf,
					      &len) == 0) {
			tab = gw_symtab_deserialize(buf, len, s->cfg.demangle);
			free(buf);
		}
		if (!(hint && hint->is_kernel) && gw_disk_store__debug_path(s->store, hex, path, sizeof(path)) == 0) {
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
		return load_stored_upload(s, hex, ret) == 0 ? (STAT_INC(s, disk_hits), 0) : -ENOENT;
	r = load_debug_dirs(s, e, hint, ret);
	if (r < 0 && load_stored_upload(s, hex, ret) == 0) {
		STAT_INC(s, disk_hits);
		return 0;
	}
	if (r == 0) {
		STAT_INC(s, disk_hits);
		/* Keep the table for the next start; the debug file itself stays where it is. */
		if (s->store && (*ret)->tab) {
			void *buf;
			size_t len;
			if (gw_symtab__serialize((*ret)->tab, &buf, &len) == 0) {
				(void)gw_disk_store__write_table(s->store, GW_DISK_STORE_TRUSTED, hex, buf, len);
				free(buf);
			}
		}
	}
	return r;
}
