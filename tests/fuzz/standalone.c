// SPDX-License-Identifier: Apache-2.0
/*
 * main() for fuzz targets when no fuzzing engine is built in: runs
 * LLVMFuzzerTestOneInput on every file named (directories are walked one
 * level), so saved corpora run as ordinary tests under the sanitizers.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long n;

	if (!f) {
		fprintf(stderr, "fuzz: cannot open %s: %s\n", path, strerror(errno));
		return -errno;
	}
	if (fseek(f, 0, SEEK_END) < 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) < 0) {
		fclose(f);
		return -EIO;
	}
	buf = malloc(n > 0 ? (size_t)n : 1);
	if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		fclose(f);
		return -EIO;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, (size_t)n);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	unsigned runs = 0;

	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) < 0) {
			fprintf(stderr, "fuzz: %s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		if (!S_ISDIR(st.st_mode)) {
			if (run_file(argv[i]) < 0)
				return 1;
			runs++;
			continue;
		}
		DIR *d = opendir(argv[i]);
		if (!d) {
			fprintf(stderr, "fuzz: %s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		struct dirent *de;
		while ((de = readdir(d))) {
			char path[4096];
			if (de->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", argv[i], de->d_name);
			if (run_file(path) < 0) {
				closedir(d);
				return 1;
			}
			runs++;
		}
		closedir(d);
	}
	if (runs == 0) {
		fprintf(stderr, "fuzz: no inputs\n");
		return 1;
	}
	printf("fuzz: %u inputs ran\n", runs);
	return 0;
}
