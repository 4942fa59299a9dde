// SPDX-License-Identifier: Apache-2.0
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "common/macro.h"
#include "retry.h"

const char *gw_export_outcome_to_string(enum gw_export_outcome o)
{
	switch (o) {
	case GW_EXPORT_OK:
		return "ok";
	case GW_EXPORT_RETRY:
		return "retry";
	case GW_EXPORT_SPLIT:
		return "split";
	case GW_EXPORT_PERMANENT:
		return "permanent";
	}
	return "unknown";
}

enum gw_export_outcome gw_retry_classify_http(long status, bool retry_on_http_500)
{
	if (status == 0)
		return GW_EXPORT_RETRY;
	if (status >= 200 && status < 300)
		return GW_EXPORT_OK;
	switch (status) {
	case 413:
		return GW_EXPORT_SPLIT;
	case 429:
	case 502:
	case 503:
	case 504:
		return GW_EXPORT_RETRY;
	case 500:
		return retry_on_http_500 ? GW_EXPORT_RETRY : GW_EXPORT_PERMANENT;
	default:
		/* 400 invalid, 401/403 auth, 404 wrong path, 415 content type: sending it again changes nothing. */
		return GW_EXPORT_PERMANENT;
	}
}

enum gw_export_outcome gw_retry_classify_grpc(int code)
{
	switch (code) {
	case 0: /* OK */
		return GW_EXPORT_OK;
	case 1:	 /* CANCELLED */
	case 4:	 /* DEADLINE_EXCEEDED */
	case 8:	 /* RESOURCE_EXHAUSTED (the Collector retries it only with RetryInfo; we always do) */
	case 10: /* ABORTED */
	case 11: /* OUT_OF_RANGE */
	case 14: /* UNAVAILABLE */
	case 15: /* DATA_LOSS */
		return GW_EXPORT_RETRY;
	default:
		return GW_EXPORT_PERMANENT;
	}
}

int gw_retry_parse_after(const char *value, time_t now, uint64_t *ret_ns)
{
	const char *p = value;
	time_t when;

	if (!value)
		return -EINVAL;
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p == '\0')
		return -EINVAL;
	if (isdigit((unsigned char)*p)) {
		char *end;
		unsigned long long s;

		errno = 0;
		s = strtoull(p, &end, 10);
		while (*end == ' ' || *end == '\t')
			end++;
		if (errno == 0 && *end == '\0') {
			*ret_ns = s >= GW_RETRY_AFTER_MAX_NS / 1000000000ULL ? GW_RETRY_AFTER_MAX_NS
									     : s * 1000000000ULL;
			return 0;
		}
		/* Not a plain number: try it as a date ("21 Oct 2015 ..." has no weekday). */
	}
	when = curl_getdate(p, NULL);
	if (when == (time_t)-1)
		return -EINVAL;
	if (when <= now)
		*ret_ns = 0;
	else
		*ret_ns = SR_MIN((uint64_t)(when - now) * 1000000000ULL, GW_RETRY_AFTER_MAX_NS);
	return 0;
}

static double rng_unit(uint64_t *s)
{
	/* xorshift64*: enough for jitter, and reproducible in tests. */
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return (double)((*s * 0x2545F4914F6CDD1DULL) >> 11) / (double)(1ULL << 53);
}

void gw_backoff_init(struct gw_backoff *b, const struct gw_retry_config *cfg, uint64_t now_ns, uint64_t seed)
{
	*b = (struct gw_backoff){
		.cfg = cfg,
		.current_ns = cfg->initial_interval_ns,
		.start_ns = now_ns,
		.rng = seed ? seed : 0x9E3779B97F4A7C15ULL,
	};
}

bool gw_backoff_next(struct gw_backoff *b, uint64_t now_ns, uint64_t min_ns, uint64_t *ret_delay_ns)
{
	const struct gw_retry_config *cfg = b->cfg;
	double cur = (double)b->current_ns, delta = cfg->randomization_factor * cur, next;
	uint64_t delay, elapsed = now_ns - b->start_ns;

	if (!cfg->enabled)
		return false;
	/* cenkalti/backoff: a value uniformly in [cur - delta, cur + delta]. */
	next = (cur - delta) + rng_unit(&b->rng) * (2 * delta + 1);
	delay = next < 0 ? 0 : (uint64_t)next;
	if ((double)b->current_ns * cfg->multiplier >= (double)cfg->max_interval_ns)
		b->current_ns = cfg->max_interval_ns;
	else
		b->current_ns = (uint64_t)((double)b->current_ns * cfg->multiplier);
	if (cfg->max_elapsed_time_ns && elapsed + delay > cfg->max_elapsed_time_ns)
		return false;
	/* The Collector's throttle: a server's Retry-After wins over a shorter backoff. */
	if (min_ns > delay) {
		if (cfg->max_elapsed_time_ns && elapsed + min_ns > cfg->max_elapsed_time_ns)
			return false;
		delay = min_ns;
	}
	b->attempts++;
	*ret_delay_ns = delay;
	return true;
}
