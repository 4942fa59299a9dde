/* SPDX-License-Identifier: Apache-2.0 */
/* The cold parts of the protobuf wire layer (pbwire.h): buffer growth and repeated-field helpers. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/grow.h"
#include "pbwire.h"

int sr_pbw__grow(struct sr_pbw *w, size_t n)
{
	void *b = w->buf;
	int r;

	if (w->error)
		return w->error;
	if (n > SIZE_MAX / 2 - w->len) {
		w->error = -ENOMEM;
		return w->error;
	}
	r = sr_grow(&b, &w->cap, w->len + n, 1, 4096);
	if (r < 0) {
		w->error = r;
		return r;
	}
	w->buf = b;
	return 0;
}

int sr_pbr__elements(const struct sr_pbr *r, const struct sr_pb_field *f, unsigned elem_wt, struct sr_pbr *ret)
{
	size_t width = elem_wt == SR_PB_I64 ? 8 : elem_wt == SR_PB_I32 ? 4 : 0;

	if (elem_wt != SR_PB_VARINT && !width)
		return -EINVAL;
	if (f->wt != SR_PB_LEN && f->wt != elem_wt)
		return -EBADMSG;
	if (f->wt == SR_PB_LEN && width && f->len % width)
		return -EBADMSG;
	*ret = sr_pbr__sub(r, (struct sr_pb_slice){ f->data, f->len });
	return 0;
}

int sr_pbr__count_elements(const struct sr_pbr *elems, unsigned elem_wt, size_t *ret_n)
{
	struct sr_pbr r = *elems;
	size_t n = 0;
	uint64_t v;
	int e;

	if (elem_wt == SR_PB_I64 || elem_wt == SR_PB_I32) {
		size_t width = elem_wt == SR_PB_I64 ? 8 : 4;

		if (sr_pbr__remaining(&r) % width)
			return -EBADMSG;
		*ret_n = sr_pbr__remaining(&r) / width;
		return 0;
	}
	if (elem_wt != SR_PB_VARINT)
		return -EINVAL;
	while (sr_pbr__more(&r)) {
		if ((e = sr_pbr__varint(&r, &v)) < 0)
			return e;
		n++;
	}
	*ret_n = n;
	return 0;
}
