/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Go's pclntab ("pc-line table") names every function of a Go binary and is
 * needed by the Go runtime itself (tracebacks, GC), so `go build -ldflags=-s`
 * and strip(1) keep it: it is how a stripped Go binary is still symbolized.
 *
 * Layouts (little-endian; ptr = pointer size from the header):
 *   header  magic u32, 0 u8, 0 u8, pc quantum u8, ptr u8, then words of ptr bytes
 *   1.2   0xfffffffb  nfunc; functab at 8+ptr: nfunc x {entry ptr, funcoff ptr}, end ptr;
 *                     names at pclntab + nameoff
 *   1.16  0xfffffffa  nfunc, nfiles, funcnameOffset, cuOffset, filetabOffset, pctabOffset,
 *                     pclnOffset; functab at pclnOffset as in 1.2; names at funcname + nameoff
 *   1.18  0xfffffff0  nfunc, nfiles, textStart, funcnameOffset, cuOffset, filetabOffset,
 *   1.20  0xfffffff1  pctabOffset, pclnOffset; functab = (nfunc + 1) x {entryoff u32, funcoff u32},
 *                     entry = textStart + entryoff
 * A func record (at functab + funcoff, or pclntab + funcoff for 1.2) starts with its
 * entry (ptr bytes, u32 from 1.18) followed by nameoff (i32).
 * Every offset read here is bounds-checked: the bytes come from untrusted files.
 */
#include <errno.h>
#include <string.h>

#include "gopclntab.h"

enum {
	GO_MAGIC_12 = 0xfffffffb,
	GO_MAGIC_116 = 0xfffffffa,
	GO_MAGIC_118 = 0xfffffff0,
	GO_MAGIC_120 = 0xfffffff1,
};

struct reader {
	const uint8_t *d;
	size_t len;
	unsigned ptr;
};

static int rd_u32(const struct reader *r, uint64_t off, uint32_t *ret)
{
	if (off > r->len || r->len - off < 4)
		return -EBADMSG;
	*ret = (uint32_t)r->d[off] | (uint32_t)r->d[off + 1] << 8 | (uint32_t)r->d[off + 2] << 16 |
	       (uint32_t)r->d[off + 3] << 24;
	return 0;
}

static int rd_word(const struct reader *r, uint64_t off, uint64_t *ret)
{
	uint32_t lo, hi = 0;

	if (rd_u32(r, off, &lo) < 0)
		return -EBADMSG;
	if (r->ptr == 8 && rd_u32(r, off + 4, &hi) < 0)
		return -EBADMSG;
	*ret = (uint64_t)hi << 32 | lo;
	return 0;
}

/* A NUL-terminated name inside data at off; its length or -EBADMSG. */
static int rd_name(const struct reader *r, uint64_t off, const char **ret, size_t *ret_len)
{
	const uint8_t *nul;

	if (off >= r->len)
		return -EBADMSG;
	size_t avail = r->len - off < (size_t)SR_GOPCLNTAB_MAX_NAME + 1 ? r->len - off
									: (size_t)SR_GOPCLNTAB_MAX_NAME + 1;
	nul = memchr(r->d + off, 0, avail);
	if (!nul)
		return -EBADMSG;
	*ret = (const char *)r->d + off;
	*ret_len = (size_t)(nul - (r->d + off));
	return 0;
}

int sr_gopclntab_walk(const uint8_t *data, size_t len, uint64_t text_start, sr_gopclntab_fn fn, void *userdata)
{
	struct reader r = { .d = data, .len = len };
	uint32_t magic;
	uint64_t nfunc, functab, names_base = 0, text = 0;
	unsigned entsz; /* bytes per functab field */
	int added = 0, rc;

	if (len < 16 || rd_u32(&r, 0, &magic) < 0)
		return -EBADMSG;
	if (magic != GO_MAGIC_12 && magic != GO_MAGIC_116 && magic != GO_MAGIC_118 && magic != GO_MAGIC_120)
		return -EPROTONOSUPPORT;
	if (data[4] != 0 || data[5] != 0 || (data[6] != 1 && data[6] != 2 && data[6] != 4) ||
	    (data[7] != 4 && data[7] != 8))
		return -EBADMSG;
	r.ptr = data[7];
	if (rd_word(&r, 8, &nfunc) < 0)
		return -EBADMSG;

	switch (magic) {
	case GO_MAGIC_12:
		functab = 8 + r.ptr;
		entsz = r.ptr;
		names_base = 0;
		break;
	case GO_MAGIC_116: {
		uint64_t funcname, pcln;
		if (rd_word(&r, 8 + 2 * r.ptr, &funcname) < 0 || rd_word(&r, 8 + 6 * r.ptr, &pcln) < 0)
			return -EBADMSG;
		functab = pcln;
		names_base = funcname;
		entsz = r.ptr;
		break;
	}
	default: {
		uint64_t funcname, pcln;
		if (rd_word(&r, 8 + 2 * r.ptr, &text) < 0 || rd_word(&r, 8 + 3 * r.ptr, &funcname) < 0 ||
		    rd_word(&r, 8 + 7 * r.ptr, &pcln) < 0)
			return -EBADMSG;
		functab = pcln;
		names_base = funcname;
		entsz = 4;
		if (text == 0)
			text = text_start;
		break;
	}
	}
	/* nfunc pairs plus the end entry must fit; this bounds nfunc by the data size. */
	if (functab > len || nfunc > (len - functab) / (2 * entsz) || names_base > len)
		return -EBADMSG;
	if (nfunc > SR_GOPCLNTAB_MAX_FUNCS)
		return -E2BIG;

	/* The func records of 1.2 are relative to the table start, later ones to functab. */
	uint64_t func_base = magic == GO_MAGIC_12 ? 0 : functab;
	for (uint64_t i = 0; i < nfunc; i++) {
		uint64_t ent_off = functab + i * 2 * entsz, entry, next, funcoff;
		uint32_t nameoff, e32, f32, n32;

		if (entsz == 4) {
			if (rd_u32(&r, ent_off, &e32) < 0 || rd_u32(&r, ent_off + 4, &f32) < 0 ||
			    rd_u32(&r, ent_off + 8, &n32) < 0)
				return -EBADMSG;
			entry = text + e32;
			funcoff = f32;
			next = text + n32;
		} else {
			if (rd_word(&r, ent_off, &entry) < 0 || rd_word(&r, ent_off + entsz, &funcoff) < 0 ||
			    rd_word(&r, ent_off + 2 * entsz, &next) < 0)
				return -EBADMSG;
		}
		uint64_t rec = func_base + funcoff;
		if (rec < func_base || rd_u32(&r, rec + (entsz == 4 ? 4 : r.ptr), &nameoff) < 0)
			return -EBADMSG;
		const char *name;
		size_t nl;
		if (rd_name(&r, names_base + nameoff, &name, &nl) < 0)
			return -EBADMSG;
		rc = fn(userdata, entry, next > entry ? next - entry : 0, name, nl);
		if (rc < 0)
			return rc;
		added++;
	}
	return added;
}
