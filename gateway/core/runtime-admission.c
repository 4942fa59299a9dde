/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the runtime lets in (runtime.h): the admission checks receivers ask
 * before taking a request, the shedding of queued data above the
 * memory_limiter's hard limit, and the hand-over and admission of the
 * symbol tables agents upload.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "common/macro.h"
#include "model.h"
#include "runtime-private.h"

/* ---- shedding queued data (memory_limiter above its hard limit) ---- */

int gw_runtime__add_shedder(struct gw_runtime *rt, struct gw_component *c, gw_shed_fn fn)
{
	if (sr_grow((void **)&rt->shedders, &rt->cap_shedders, rt->n_shedders + 1, sizeof(*rt->shedders), 4) < 0)
		return -ENOMEM;
	rt->shedders[rt->n_shedders++] = (struct gw_rt_shedder){ c, fn };
	return 0;
}

void gw_runtime__remove_shedder(struct gw_runtime *rt, struct gw_component *c)
{
	for (size_t i = 0; i < rt->n_shedders; i++) {
		if (rt->shedders[i].c == c) {
			memmove(&rt->shedders[i], &rt->shedders[i + 1],
				(rt->n_shedders - i - 1) * sizeof(rt->shedders[0]));
			rt->n_shedders--;
			return;
		}
	}
}

uint64_t gw_runtime__shed(struct gw_runtime *rt, uint64_t bytes, const char *reason)
{
	uint64_t freed = 0;
	bool progress = true;

	/* One oldest item per component per round, so several exporters give up their queues alike. */
	while (freed < bytes && progress) {
		progress = false;
		for (size_t i = 0; i < rt->n_shedders && freed < bytes; i++) {
			uint64_t n = rt->shedders[i].fn(rt->shedders[i].c, reason);

			if (n) {
				freed += n;
				progress = true;
			}
		}
	}
	return freed;
}

/* ---- admission, symbol tables ---- */

int gw_runtime__set_admission(struct gw_runtime *rt, struct gw_component *c, gw_admission_fn fn)
{
	for (size_t i = 0; i < rt->n_admission; i++) {
		if (rt->admission[i].c == c) {
			rt->admission[i].fn = fn;
			return 0;
		}
	}
	if (sr_grow((void **)&rt->admission, &rt->cap_admission, rt->n_admission + 1, sizeof(*rt->admission), 4) < 0)
		return -ENOMEM;
	rt->admission[rt->n_admission++] = (struct gw_rt_admission){ c, fn };
	return 0;
}

int gw_runtime__admit(struct gw_runtime *rt, uint32_t *ret_retry_after_ms)
{
	uint32_t worst = 0;
	int r = 0;

	for (size_t i = 0; i < rt->n_admission; i++) {
		uint32_t ms = 0;
		const char *why = NULL;

		if (!rt->admission[i].fn)
			continue;
		if (rt->admission[i].fn(rt->admission[i].c, &ms, &why) < 0) {
			/* The check that asks for the longest wait names the refusal. */
			if (r == 0 || ms > worst)
				rt->refusal = why ? why : rt->admission[i].c->id;
			r = -EBUSY;
			worst = SR_MAX(worst, ms);
		}
	}
	if (ret_retry_after_ms)
		*ret_retry_after_ms = r < 0 ? SR_MAX(worst, 1u) : 0;
	return r;
}

const char *gw_runtime__refusal(struct gw_runtime *rt)
{
	return rt->refusal ? rt->refusal : "the gateway is not taking data";
}

bool gw_runtime__admits(struct gw_runtime *rt)
{
	for (size_t i = 0; i < rt->n_admission; i++)
		if (rt->admission[i].fn && rt->admission[i].fn(rt->admission[i].c, NULL, NULL) < 0)
			return false;
	return true;
}

void gw_runtime__set_symbol_table_handler(struct gw_runtime *rt, gw_symbol_table_fn fn, uint64_t max_pending,
					  void *userdata)
{
	rt->sym_fn = fn;
	rt->sym_ud = userdata;
	atomic_store(&rt->sym_max_pending, fn ? max_pending : 0);
}

void gw_runtime__symbol_table_done(struct gw_runtime *rt, uint64_t bytes)
{
	atomic_fetch_sub(&rt->sym_pending, bytes);
}

uint64_t gw_runtime__symbol_tables_pending(struct gw_runtime *rt)
{
	return atomic_load(&rt->sym_pending);
}

int gw_runtime__admit_symbol_tables(struct gw_runtime *rt, uint64_t bytes, uint64_t *ret_reserved,
				    uint32_t *ret_retry_after_ms)
{
	uint64_t max = atomic_load(&rt->sym_max_pending), pending = atomic_load(&rt->sym_pending);

	*ret_reserved = 0;
	if (!max)
		return 0;
	/*
	 * Taken uploads count as pending from here, not from when they are
	 * handed over: receivers decode one upload after another, and the next
	 * one's check must see the one still on its way.
	 */
	do {
		if (pending && pending + bytes > max) {
			/*
			 * Adding a table takes tens of ms, so the backlog drains in
			 * seconds: 2 s, up to 4 s the fuller it is, so that a burst
			 * of uploads is not sent (and inflated) over and over meanwhile.
			 */
			*ret_retry_after_ms = GW_SYMBOL_UPLOAD_RETRY_MS +
					      (uint32_t)(GW_SYMBOL_UPLOAD_RETRY_MS * SR_MIN(pending, max) / max);
			return -EAGAIN;
		}
	} while (!atomic_compare_exchange_weak(&rt->sym_pending, &pending, pending + bytes));
	*ret_reserved = bytes;
	return 0;
}

void gw_runtime__symbol_table(struct gw_runtime *rt, struct gw_symbol_table *t)
{
	if (rt->sym_fn) {
		atomic_fetch_add(&rt->sym_pending, t->bytes);
		rt->sym_fn(t, rt->sym_ud);
	} else
		gw_symbol_table_free(t);
}
