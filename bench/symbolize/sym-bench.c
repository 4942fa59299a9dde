// SPDX-License-Identifier: Apache-2.0
/*
 * bench/symbolize: resolves N addresses of one ELF file with the gateway's
 * symbolizer library (the same code the symbolize processor runs) and
 * reports load time, resolve time, throughput and memory.
 *
 *   sym-bench --file LIB [--count N] [--seed S] [--demangle MODE]
 *             [--write-addresses FILE] [--addresses FILE] [--output FILE] [--lines]
 *             [--cache-dir DIR]
 *
 * --write-addresses picks N addresses inside function symbols (a random
 * symbol, a random offset within its size; deterministic for a seed) and
 * writes them as 0x-hex lines, so llvm-symbolizer and addr2line get exactly
 * the same input (bench/symbolize/run.sh). --output writes one resolved name
 * per line for the comparison of results. --cache-dir DIR loads the file the
 * way a restarted gateway does: found once by build ID in DIR/debug, its
 * table kept in DIR/cache and loaded from there by every later run.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <fcntl.h>

#include <libelf.h>

#include "elfsym.h"
#include "symbolize.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kib = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	}
	fclose(f);
	return kib;
}

static uint64_t rng_state;

static uint64_t rng(void)
{
	/* splitmix64: deterministic for a seed on every platform. */
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "file", required_argument, NULL, 'f' },
		{ "count", required_argument, NULL, 'n' },
		{ "seed", required_argument, NULL, 's' },
		{ "demangle", required_argument, NULL, 'd' },
		{ "write-addresses", required_argument, NULL, 'w' },
		{ "addresses", required_argument, NULL, 'a' },
		{ "output", required_argument, NULL, 'o' },
		{ "lines", no_argument, NULL, 'l' },
		{ "cache-dir", required_argument, NULL, 'c' },
		{ 0 },
	};
	const char *file = NULL, *waddr = NULL, *raddr = NULL, *out = NULL, *cache_dir = NULL;
	enum gw_demangle_mode mode = GW_DEMANGLE_FULL;
	size_t count = 1000000;
	bool lines = false;
	int c;

	rng_state = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'f':
			file = optarg;
			break;
		case 'n':
			count = strtoull(optarg, NULL, 0);
			break;
		case 's':
			rng_state = strtoull(optarg, NULL, 0);
			break;
		case 'd':
			if (gw_demangle_mode_from_string(optarg, &mode) < 0) {
				fprintf(stderr, "sym-bench: unknown demangle mode %s\n", optarg);
				return 2;
			}
			break;
		case 'w':
			waddr = optarg;
			break;
		case 'a':
			raddr = optarg;
			break;
		case 'o':
			out = optarg;
			break;
		case 'l':
			lines = true;
			break;
		case 'c':
			cache_dir = optarg;
			break;
		default:
			return 2;
		}
	}
	if (!file || count == 0) {
		fprintf(stderr, "usage: sym-bench --file ELF [--count N] [--seed S] [--demangle MODE] "
				"[--write-addresses F | --addresses F] [--output F] [--lines]\n");
		return 2;
	}

	long rss0 = rss_kib();
	double t0 = now_s();
	char debug_dir[4096] = "", cache_path[4096] = "";
	const char *dirs[1] = { debug_dir };
	uint8_t id[64];
	int idl = -ENOENT;
	if (cache_dir) {
		/*
		 * The gateway's restart path: the file is found in a debug directory by build ID once,
		 * its table is written to cache_dir, and every later start loads that table.
		 */
		int fd = open(file, O_RDONLY | O_CLOEXEC);
		Elf *elf;
		char hex[129], link[8192];
		if (fd < 0 || gw_elf_init() < 0 || !(elf = elf_begin(fd, ELF_C_READ_MMAP, NULL)) ||
		    (idl = gw_elf_build_id(elf, id, sizeof(id))) < 0) {
			fprintf(stderr, "sym-bench: %s: no build ID to key the cache with\n", file);
			return 1;
		}
		elf_end(elf);
		close(fd);
		gw_sym_hex(id, (size_t)idl, hex, sizeof(hex));
		snprintf(debug_dir, sizeof(debug_dir), "%s/debug", cache_dir);
		snprintf(cache_path, sizeof(cache_path), "%s/cache", cache_dir);
		snprintf(link, sizeof(link), "mkdir -p '%s/.build-id/%.2s' && ln -sf '%s' '%s/.build-id/%.2s/%s.debug'",
			 debug_dir, hex, file, debug_dir, hex, hex + 2);
		if (system(link) != 0)
			return 1;
	}
	struct gw_symbolizer *s = gw_symbolizer_new(&(struct gw_symbolizer_config){
		.demangle = mode,
		.no_lines = !lines,
		.memory_cache_bytes = 8ULL << 30,
		.cache_dir = cache_dir ? cache_path : NULL,
		.debug_dirs = cache_dir ? dirs : NULL,
		.n_debug_dirs = cache_dir ? 1 : 0,
	});
	if (!s) {
		fprintf(stderr, "sym-bench: symbolizer: %s\n", strerror(errno));
		return 1;
	}
	if (!cache_dir)
		idl = gw_symbolizer__add_file(s, file, id, sizeof(id));
	if (idl < 0) {
		fprintf(stderr, "sym-bench: %s: %s\n", file, strerror(-idl));
		return 1;
	}
	struct gw_sym_handle *h;
	struct gw_sym_hint hint = { .build_id = id, .build_id_len = (size_t)idl };
	if (gw_symbolizer__acquire(s, id, (size_t)idl, &hint, &h) != GW_SYM_READY) {
		fprintf(stderr, "sym-bench: %s: not ready\n", file);
		return 1;
	}
	double t_load = now_s() - t0;
	long rss1 = rss_kib();
	size_t nsym = gw_sym_handle__symbol_count(h);
	struct gw_symbolizer_stats st;
	gw_symbolizer__stats(s, &st);

	uint64_t *addrs = malloc(count * sizeof(*addrs));
	if (!addrs)
		return 1;
	if (raddr) {
		FILE *f = fopen(raddr, "r");
		size_t n = 0;
		char *buf = NULL;
		size_t cap = 0, len = 0;
		if (!f) {
			fprintf(stderr, "sym-bench: %s: %s\n", raddr, strerror(errno));
			return 1;
		}
		/* Whole file at once, hex parsed by hand: input parsing is not what is measured. */
		for (;;) {
			if (len + 65536 > cap) {
				cap = cap ? cap * 2 : 1 << 20;
				buf = realloc(buf, cap + 1);
				if (!buf)
					return 1;
			}
			size_t got = fread(buf + len, 1, 65536, f);
			if (got == 0)
				break;
			len += got;
		}
		fclose(f);
		buf[len] = '\0';
		for (char *p = buf; *p && n < count;) {
			uint64_t v = 0;
			if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
				p += 2;
			for (;; p++) {
				unsigned ch = (unsigned char)*p;
				unsigned d = ch - '0' < 10 ? ch - '0'
							   : ((ch | 32) - 'a' < 6 ? (ch | 32) - 'a' + 10 : 16);
				if (d > 15)
					break;
				v = v << 4 | d;
			}
			addrs[n++] = v;
			while (*p && *p != '\n')
				p++;
			if (*p)
				p++;
		}
		free(buf);
		count = n;
	} else {
		/* Addresses inside sized function symbols, so every tool has an answer to give. */
		for (size_t i = 0; i < count; i++) {
			uint64_t start = 0, size = 0;
			do {
				gw_sym_handle__symbol_at(h, (size_t)(rng() % nsym), &start, &size);
			} while (size == 0);
			addrs[i] = start + rng() % size;
		}
	}
	if (waddr) {
		FILE *f = fopen(waddr, "w");
		if (!f)
			return 1;
		for (size_t i = 0; i < count; i++)
			fprintf(f, "0x%" PRIx64 "\n", addrs[i]);
		fclose(f);
	}

	FILE *of = out ? fopen(out, "w") : NULL;
	static char obuf[1 << 20];
	if (of)
		setvbuf(of, obuf, _IOFBF, sizeof(obuf));
	struct gw_sym_result *r = malloc(sizeof(*r));
	size_t resolved = 0, with_lines = 0;
	uint64_t sink = 0;
	double t1 = now_s();
	for (size_t i = 0; i < count; i++) {
		if (lines) {
			int n = gw_sym_handle__resolve(h, addrs[i], r);
			if (n > 0) {
				resolved++;
				with_lines += r->lines[0].line > 0;
				sink += (uintptr_t)r->lines[n - 1].function;
				if (of) {
					fputs(r->lines[n - 1].function, of);
					fputc('\n', of);
				}
			} else if (of) {
				fputs("??\n", of);
			}
		} else {
			const char *name, *sys;
			if (gw_sym_handle__function(h, addrs[i], &name, &sys) == 0) {
				resolved++;
				sink += (uintptr_t)name;
				if (of) {
					fputs(name, of);
					fputc('\n', of);
				}
			} else if (of) {
				fputs("??\n", of);
			}
		}
	}
	double t_resolve = now_s() - t1;
	if (of)
		fclose(of);

	printf("file=%s\n", file);
	printf("symbols=%zu\n", nsym);
	printf("demangle=%s\n", gw_demangle_mode_to_string(mode));
	printf("load_seconds=%.3f\n", t_load);
	printf("addresses=%zu\n", count);
	printf("resolved=%zu\n", resolved);
	if (lines)
		printf("with_lines=%zu\n", with_lines);
	printf("resolve_seconds=%.3f\n", t_resolve);
	printf("ns_per_address=%.1f\n", t_resolve * 1e9 / (double)count);
	printf("table_bytes=%" PRIu64 "\n", st.memory_bytes);
	printf("table_bytes_per_million_symbols=%.0f\n", (double)st.memory_bytes * 1e6 / (double)(nsym ? nsym : 1));
	printf("rss_delta_kib=%ld\n", rss1 - rss0);
	printf("checksum=%" PRIu64 "\n", sink & 0xffff);
	printf("disk_hits=%" PRIu64 "\n", st.disk_hits);
	gw_sym_handle__release(h);
	gw_symbolizer_free(s);
	free(addrs);
	free(r);
	return 0;
}
