// SPDX-License-Identifier: Apache-2.0
/*
 * Problems found in configuration, collected rather than stopping at the
 * first: a user fixing a config wants every problem in one run.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "common/grow.h"
#include "config.h"

/* Bounds the list, so a pathological file cannot make us print forever. */
#define SR_DIAG_MAX_ENTRIES 200

struct sr_diag_entry {
	bool warning;
	unsigned line, column;
	size_t seq;
	char *text; /* formatted "file:line:col: error: path: message" */
};

struct sr_diag {
	struct sr_diag_entry *entries;
	size_t n, cap;
	size_t errors, warnings;
	size_t suppressed;
	char *ctx_file;
	unsigned ctx_line, ctx_column;
};

void sr_diag_set_context(struct sr_diag *d, const char *file, unsigned line, unsigned column)
{
	free(d->ctx_file);
	d->ctx_file = file ? strdup(file) : NULL;
	d->ctx_line = line;
	d->ctx_column = column;
}

struct sr_diag *sr_diag_new(void)
{
	return calloc(1, sizeof(struct sr_diag));
}

void sr_diag_free(struct sr_diag *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->n; i++)
		free(d->entries[i].text);
	free(d->entries);
	free(d->ctx_file);
	free(d);
}

static void diag_addv(struct sr_diag *d, bool warning, const char *file, unsigned line, unsigned column,
		      const char *path, const char *fmt, va_list ap)
{
	char msg[1024], where[512] = "";
	char *text = NULL;

	if (!file && d->ctx_file) {
		file = d->ctx_file;
		line = d->ctx_line;
		column = d->ctx_column;
	}
	if (warning)
		d->warnings++;
	else
		d->errors++;
	if (d->n >= SR_DIAG_MAX_ENTRIES) {
		d->suppressed++;
		return;
	}
	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (file && line)
		snprintf(where, sizeof(where), "%s:%u:%u: ", file, line, column);
	else if (file)
		snprintf(where, sizeof(where), "%s: ", file);
	if (asprintf(&text, "%s%s: %s%s%s", where, warning ? "warning" : "error", path && *path ? path : "",
		     path && *path ? ": " : "", msg) < 0)
		return;
	if (sr_grow((void **)&d->entries, &d->cap, d->n + 1, sizeof(*d->entries), 8) < 0) {
		free(text);
		return;
	}
	d->entries[d->n] =
		(struct sr_diag_entry){ .warning = warning, .line = line, .column = column, .seq = d->n, .text = text };
	d->n++;
}

void sr_diag_add(struct sr_diag *d, const char *file, unsigned line, unsigned column, const char *path, const char *fmt,
		 ...)
{
	va_list ap;

	va_start(ap, fmt);
	diag_addv(d, false, file, line, column, path, fmt, ap);
	va_end(ap);
}

void sr_diag_warn(struct sr_diag *d, const char *file, unsigned line, unsigned column, const char *path,
		  const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	diag_addv(d, true, file, line, column, path, fmt, ap);
	va_end(ap);
}

size_t sr_diag_errors(const struct sr_diag *d)
{
	return d->errors;
}

size_t sr_diag_warnings(const struct sr_diag *d)
{
	return d->warnings;
}

/*
 * Problems are found in schema order; users read files top to bottom, so
 * print by position (entries without one last), otherwise as found.
 */
static int entry_cmp(const void *a, const void *b)
{
	const struct sr_diag_entry *x = *(const struct sr_diag_entry *const *)a;
	const struct sr_diag_entry *y = *(const struct sr_diag_entry *const *)b;
	unsigned xl = x->line ? x->line : UINT32_MAX, yl = y->line ? y->line : UINT32_MAX;

	if (xl != yl)
		return xl < yl ? -1 : 1;
	if (x->column != y->column)
		return x->column < y->column ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

void sr_diag_print(const struct sr_diag *d, FILE *f)
{
	const struct sr_diag_entry **order = calloc(d->n ? d->n : 1, sizeof(*order));

	for (size_t i = 0; i < d->n; i++) {
		if (order)
			order[i] = &d->entries[i];
		else
			fprintf(f, "%s\n", d->entries[i].text);
	}
	if (order) {
		qsort(order, d->n, sizeof(*order), entry_cmp);
		for (size_t i = 0; i < d->n; i++)
			fprintf(f, "%s\n", order[i]->text);
		free(order);
	}
	if (d->suppressed)
		fprintf(f, "... and %zu more problems not shown\n", d->suppressed);
}

const char *sr_diag_message(const struct sr_diag *d, size_t n)
{
	return n < d->n ? d->entries[n].text : NULL;
}
