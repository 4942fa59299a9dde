// SPDX-License-Identifier: Apache-2.0
/* UTF-8 (utf8.h). */
#include <stdbool.h>
#include <string.h>

#include "common/macro.h"
#include "utf8.h"

size_t sr_utf8_copy(char *dst, const uint8_t *s, size_t n, size_t max)
{
	size_t i = 0, o = 0;
	n = SR_MIN(n, max);
	while (i < n) {
		uint8_t c = s[i];
		size_t len = c < 0x80		  ? 1
			     : (c & 0xe0) == 0xc0 ? 2
			     : (c & 0xf0) == 0xe0 ? 3
			     : (c & 0xf8) == 0xf0 ? 4
						  : 0;
		bool ok = len > 0 && i + len <= n && !(len == 2 && c < 0xc2) && !(c == 0 && len == 1);
		for (size_t k = 1; ok && k < len; k++)
			ok = (s[i + k] & 0xc0) == 0x80;
		if (ok && len == 3) {
			uint32_t cp = ((c & 0x0fu) << 12) | ((s[i + 1] & 0x3fu) << 6) | (s[i + 2] & 0x3fu);
			ok = cp >= 0x800 && (cp < 0xd800 || cp > 0xdfff);
		} else if (ok && len == 4) {
			uint32_t cp = ((c & 0x07u) << 18) | ((s[i + 1] & 0x3fu) << 12) | ((s[i + 2] & 0x3fu) << 6) |
				      (s[i + 3] & 0x3fu);
			ok = cp >= 0x10000 && cp <= 0x10ffff;
		}
		if (!ok) {
			dst[o++] = '?';
			i++;
			continue;
		}
		memcpy(dst + o, s + i, len);
		o += len;
		i += len;
	}
	dst[o] = '\0';
	return o;
}
