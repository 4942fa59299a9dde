// SPDX-License-Identifier: Apache-2.0
/*
 * sym-resolve: the gateway's symbolizer on the command line, for tests
 * (tests/integration/sym-*.py) and for operators checking what the gateway
 * would name an address.
 *
 *   sym-resolve [--id HEX [--build-id HEX] | --file ELF] [--kallsyms FILE]
 *               [--debuginfod URL]... [--debug-dir DIR]... [--cache-dir DIR]
 *               [--demangle MODE] [--wait SECONDS] [--no-lines] ADDRESS... | -
 *
 * --id names an executable (or kernel) ID looked up through the sources
 * (disk store, debug dirs, debuginfod); --file registers a local ELF;
 * --kallsyms uploads a /proc/kallsyms snapshot under --id as an agent would.
 * Addresses come from the arguments, or stdin with "-". One line per address:
 *   0xADDR <TAB> function <TAB> file:line[:column] [<TAB> caller <TAB> file:line ...]
 * innermost inlined frame first; "??" when nothing covers the address.
 * Exit status: 0, 1 when the executable's symbols could not be had, 2 usage.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/model.h"
#include "symbolize.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static unsigned notifications;

static void on_notify(void *userdata)
{
	pthread_mutex_lock(&lock);
	notifications++;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

static size_t parse_hex(const char *s, uint8_t *out, size_t max)
{
	size_t n = 0;

	while (s[0] && s[1] && n < max) {
		unsigned v;
		if (sscanf(s, "%2x", &v) != 1)
			return 0;
		out[n++] = (uint8_t)v;
		s += 2;
	}
	return s[0] ? 0 : n;
}

static int upload_kallsyms(struct gw_symbolizer *s, const uint8_t *id, size_t id_len, const char *path)
{
	FILE *f = fopen(path, "r");
	struct gw_symbol *v = NULL;
	char **names = NULL, line[1024];
	size_t n = 0, cap = 0;
	int r;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long a;
		char type, name[512], mod[256] = "", full[800];
		if (sscanf(line, "%llx %c %511s %255s", &a, &type, name, mod) < 3 || a == 0 || !strchr("tTwW", type))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 65536;
			v = realloc(v, cap * sizeof(*v));
			names = realloc(names, cap * sizeof(*names));
			if (!v || !names) {
				fclose(f);
				return -ENOMEM;
			}
		}
		snprintf(full, sizeof(full), "%s%s%s", name, mod[0] ? " " : "", mod);
		names[n] = strdup(full);
		v[n] = (struct gw_symbol){ .address = a, .name = names[n] };
		n++;
	}
	fclose(f);
	r = gw_symbolizer__add_upload(s, id, id_len, v, n, "");
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	free(v);
	return r;
}

static void print_one(struct gw_sym_handle *h, uint64_t addr, struct gw_sym_result *r)
{
	int n = h ? gw_sym_handle__resolve(h, addr, r) : -ENOENT;

	printf("0x%" PRIx64, addr);
	if (n <= 0) {
		printf("\t??\n");
		return;
	}
	for (int i = 0; i < n; i++) {
		const struct gw_sym_line *l = &r->lines[i];
		printf("\t%s\t%s:%u", l->function[0] ? l->function : "??", l->file ? l->file : "??", l->line);
		if (l->column)
			printf(":%u", l->column);
	}
	printf("\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "id", required_argument, NULL, 'i' },
		{ "build-id", required_argument, NULL, 'b' },
		{ "file", required_argument, NULL, 'f' },
		{ "kallsyms", required_argument, NULL, 'k' },
		{ "debuginfod", required_argument, NULL, 'u' },
		{ "debug-dir", required_argument, NULL, 'D' },
		{ "cache-dir", required_argument, NULL, 'c' },
		{ "demangle", required_argument, NULL, 'd' },
		{ "wait", required_argument, NULL, 'w' },
		{ "no-lines", no_argument, NULL, 'n' },
		{ 0 },
	};
	const char *urls[16], *dirs[16], *file = NULL, *kallsyms = NULL, *cache = NULL;
	size_t n_urls = 0, n_dirs = 0, id_len = 0, bid_len = 0;
	uint8_t id[64], bid[64];
	enum gw_demangle_mode mode = GW_DEMANGLE_TEMPLATES;
	double wait_s = 30;
	bool no_lines = false;
	int c, rc = 0;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'i':
			if (!(id_len = parse_hex(optarg, id, sizeof(id))))
				goto usage;
			break;
		case 'b':
			if (!(bid_len = parse_hex(optarg, bid, sizeof(bid))))
				goto usage;
			break;
		case 'f':
			file = optarg;
			break;
		case 'k':
			kallsyms = optarg;
			break;
		case 'u':
			if (n_urls < 16)
				urls[n_urls++] = optarg;
			break;
		case 'D':
			if (n_dirs < 16)
				dirs[n_dirs++] = optarg;
			break;
		case 'c':
			cache = optarg;
			break;
		case 'd':
			if (gw_demangle_mode_from_string(optarg, &mode) < 0)
				goto usage;
			break;
		case 'w':
			wait_s = strtod(optarg, NULL);
			break;
		case 'n':
			no_lines = true;
			break;
		default:
			goto usage;
		}
	}
	if ((!id_len && !file) || optind >= argc)
		goto usage;

	struct gw_symbolizer *s = gw_symbolizer_new(&(struct gw_symbolizer_config){
		.cache_dir = cache,
		.debuginfod_urls = n_urls ? urls : NULL,
		.n_debuginfod_urls = n_urls,
		.debug_dirs = dirs,
		.n_debug_dirs = n_dirs,
		.demangle = mode,
		.no_lines = no_lines,
		.debuginfod_timeout_ns = (uint64_t)(wait_s * 1e9),
		.notify = on_notify,
	});
	if (!s) {
		fprintf(stderr, "sym-resolve: %s\n", strerror(errno));
		return 1;
	}
	if (file) {
		int n = gw_symbolizer__add_file(s, file, id, sizeof(id));
		if (n < 0) {
			fprintf(stderr, "sym-resolve: %s: %s\n", file, strerror(-n));
			return 1;
		}
		id_len = (size_t)n;
	}
	if (kallsyms) {
		int r = upload_kallsyms(s, id, id_len, kallsyms);
		if (r < 0) {
			fprintf(stderr, "sym-resolve: %s: %s\n", kallsyms, strerror(-r));
			return 1;
		}
	}
	struct gw_sym_hint hint = {
		.build_id = bid_len ? bid : (kallsyms ? NULL : id),
		.build_id_len = bid_len ? bid_len : (kallsyms ? 0 : id_len),
		.is_kernel = kallsyms != NULL,
	};
	struct gw_sym_handle *h = NULL;
	struct timespec deadline;
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += (time_t)wait_s + 1;
	enum gw_sym_state st;
	for (;;) {
		pthread_mutex_lock(&lock);
		unsigned seen = notifications;
		pthread_mutex_unlock(&lock);
		st = gw_symbolizer__acquire(s, id, id_len, &hint, &h);
		if (st != GW_SYM_PENDING)
			break;
		pthread_mutex_lock(&lock);
		int w = 0;
		while (notifications == seen && w == 0)
			w = pthread_cond_timedwait(&cond, &lock, &deadline);
		pthread_mutex_unlock(&lock);
		if (w != 0)
			break;
	}
	static const char *const states[] = { "ready", "pending", "wanted", "missing", "unavailable" };
	fprintf(stderr, "sym-resolve: symbols %s\n", states[st]);
	if (st != GW_SYM_READY)
		rc = 1;

	struct gw_sym_result *r = malloc(sizeof(*r));
	if (strcmp(argv[optind], "-") == 0) {
		char line[128];
		while (fgets(line, sizeof(line), stdin))
			print_one(h, strtoull(line, NULL, 16), r);
	} else {
		for (int i = optind; i < argc; i++)
			print_one(h, strtoull(argv[i], NULL, 16), r);
	}
	free(r);
	gw_sym_handle__release(h);
	struct gw_symbolizer_stats stats;
	gw_symbolizer__stats(s, &stats);
	fprintf(stderr,
		"sym-resolve: disk_hits=%" PRIu64 " debuginfod_requests=%" PRIu64 " debuginfod_failures=%" PRIu64 "\n",
		stats.disk_hits, stats.debuginfod_fetches, stats.debuginfod_failed);
	gw_symbolizer_free(s);
	return rc;
usage:
	fprintf(stderr, "usage: sym-resolve [--id HEX [--build-id HEX] | --file ELF] [--kallsyms FILE] "
			"[--debuginfod URL]... [--debug-dir DIR]... [--cache-dir DIR] [--demangle MODE] "
			"[--wait SECONDS] [--no-lines] ADDRESS... | -\n");
	return 2;
}
