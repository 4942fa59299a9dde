// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "util.h"

uint64_t *agent_pb_u64(uint64_t v)
{
	uint64_t *p = malloc(sizeof(*p));

	if (p)
		*p = v;
	return p;
}

uint32_t *agent_pb_u32(uint32_t v)
{
	uint32_t *p = malloc(sizeof(*p));

	if (p)
		*p = v;
	return p;
}

bool *agent_pb_bool(bool v)
{
	bool *p = malloc(sizeof(*p));

	if (p)
		*p = v;
	return p;
}

int *agent_pb_enum(int v)
{
	int *p = malloc(sizeof(*p));

	if (p)
		*p = v;
	return p;
}

pb_bytes_array_t *agent_pb_bytes(const void *data, size_t len)
{
	pb_bytes_array_t *b = malloc(PB_BYTES_ARRAY_T_ALLOCSIZE(len));

	if (!b)
		return NULL;
	b->size = (pb_size_t)len;
	if (len)
		memcpy(b->bytes, data, len);
	return b;
}

char *agent_pb_str(const char *s)
{
	return s ? strdup(s) : NULL;
}

void agent_hex(const uint8_t *data, size_t len, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < len; i++) {
		out[2 * i] = digits[data[i] >> 4];
		out[2 * i + 1] = digits[data[i] & 15];
	}
	out[2 * len] = '\0';
}

int agent_in_child_pid_namespace(void)
{
	/*
	 * The initial PID namespace has a fixed inode number (PROC_PID_INIT_INO).
	 * NSpid in /proc/self/status would not do: it starts at the namespace of
	 * the /proc mount, which in a container is the container's own.
	 */
	struct stat st;

	if (stat("/proc/self/ns/pid", &st) < 0)
		return -errno;
	return st.st_ino != AGENT_PROC_PID_INIT_INO ? 1 : 0;
}

int agent_peek(uint32_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };
	ssize_t n = process_vm_readv((pid_t)pid, &local, 1, &remote, 1, 0);

	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EFAULT;
}

int agent_peek_cb(void *ctx, uint64_t addr, void *buf, size_t len)
{
	return agent_peek((uint32_t)(uintptr_t)ctx, addr, buf, len);
}
