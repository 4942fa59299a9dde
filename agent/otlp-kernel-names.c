// SPDX-License-Identifier: Apache-2.0
/* Kernel frame names for the OTLP export (otlp-kernel-names.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/search.h"
#include "agent/kernel.h"
#include "agent/otlp-kernel-names.h"
#include "agent/symupload.h"

struct table {
	uint8_t id[AGENT_KERNEL_ID_LEN];
	size_t id_len;
	uint64_t *addr; /* sorted */
	uint32_t *name; /* offsets into names */
	char *names;
	size_t n, bytes;
};

struct agent_otlp_knames {
	char *kallsyms;
	const struct agent_kernel *k;
	struct table t[AGENT_OTLP_KNAMES_MAX_TABLES];
	size_t n, bytes;
};

static void table_free(struct table *t)
{
	free(t->addr);
	free(t->name);
	free(t->names);
	memset(t, 0, sizeof(*t));
}

static void drop_all(struct agent_otlp_knames *kn)
{
	for (size_t i = 0; i < kn->n; i++)
		table_free(&kn->t[i]);
	kn->n = kn->bytes = 0;
}

struct agent_otlp_knames *agent_otlp_knames_new(const char *kallsyms, const struct agent_kernel *k)
{
	struct agent_otlp_knames *kn = calloc(1, sizeof(*kn));

	if (!kn)
		return NULL;
	kn->kallsyms = strdup(kallsyms);
	if (!kn->kallsyms) {
		free(kn);
		errno = ENOMEM;
		return NULL;
	}
	kn->k = k;
	return kn;
}

void agent_otlp_knames_free(struct agent_otlp_knames *kn)
{
	if (!kn)
		return;
	drop_all(kn);
	free(kn->kallsyms);
	free(kn);
}

/* The symbols of seg, compacted; an empty table when they cannot be read. -ENOMEM only. */
static int load(struct agent_otlp_knames *kn, int seg, struct table *t)
{
	struct agent_symtab st = { 0 };
	size_t name_bytes = 0, off = 0;
	int r = agent_symupload_kallsyms(kn->kallsyms, kn->k, seg, AGENT_OTLP_KNAMES_MAX_BYTES, &st);

	if (r < 0) {
		agent_symtab_release(&st);
		return r == -ENOMEM ? r : 0;
	}
	for (size_t i = 0; i < st.n_symbols; i++) {
		const stackrelay_v1_Symbol *s = agent_symtab__symbol(&st, i);
		name_bytes += strlen(s->name ? s->name : "") + 1;
	}
	t->addr = malloc((st.n_symbols ? st.n_symbols : 1) * sizeof(*t->addr));
	t->name = malloc((st.n_symbols ? st.n_symbols : 1) * sizeof(*t->name));
	t->names = malloc(name_bytes ? name_bytes : 1);
	if (!t->addr || !t->name || !t->names || name_bytes > UINT32_MAX) {
		agent_symtab_release(&st);
		table_free(t);
		return -ENOMEM;
	}
	for (size_t i = 0; i < st.n_symbols; i++) {
		const stackrelay_v1_Symbol *s = agent_symtab__symbol(&st, i);
		const char *nm = s->name ? s->name : "";
		size_t len = strlen(nm) + 1;

		t->addr[i] = s->address ? *s->address : 0;
		t->name[i] = (uint32_t)off;
		memcpy(t->names + off, nm, len);
		off += len;
	}
	t->n = st.n_symbols;
	t->bytes = st.n_symbols * (sizeof(*t->addr) + sizeof(*t->name)) + name_bytes;
	agent_symtab_release(&st);
	return 0;
}

static struct table *table_of(struct agent_otlp_knames *kn, const uint8_t *id, size_t len)
{
	struct table *t;
	int seg;

	if (len == 0 || len > AGENT_KERNEL_ID_LEN)
		return NULL;
	for (size_t i = 0; i < kn->n; i++)
		if (kn->t[i].id_len == len && memcmp(kn->t[i].id, id, len) == 0)
			return &kn->t[i];
	seg = agent_kernel_seg_of_id(kn->k, id, len);
	if (seg == AGENT_KSEG_NONE)
		return NULL;
	if (kn->n == AGENT_OTLP_KNAMES_MAX_TABLES || kn->bytes > AGENT_OTLP_KNAMES_MAX_BYTES)
		drop_all(kn);
	t = &kn->t[kn->n];
	if (load(kn, seg, t) < 0)
		return NULL;
	memcpy(t->id, id, len);
	t->id_len = len;
	kn->bytes += t->bytes;
	kn->n++;
	return t;
}

const char *agent_otlp_knames__lookup(void *ctx, const uint8_t *id, size_t len, uint64_t addr)
{
	struct table *t = table_of(ctx, id, len);
	size_t at;

	if (!t)
		return NULL;
	/* The last symbol at or below addr: kallsyms has no sizes, a symbol ends where the next begins. */
	at = SR_PARTITION_POINT(t->n, i, t->addr[i] <= addr);
	return at > 0 ? t->names + t->name[at - 1] : NULL;
}
