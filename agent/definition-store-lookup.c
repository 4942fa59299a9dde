// SPDX-License-Identifier: Apache-2.0
/*
 * The definition store's lookups for the sender and the output writer
 * (definition-store.h): a stack, executable, kernel or function definition
 * by its ID, and an executable's file.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pb_decode.h>

#include "common/macro.h"
#include "container-open.h"
#include "definition-store-private.h"
#include "util.h"

int agent_store__stack(struct agent_store *s, const uint8_t *id, size_t len, stackrelay_v1_StackDef *ret)
{
	struct stack_entry *e;
	int r = 0;

	memset(ret, 0, sizeof(*ret));
	if (len != AGENT_STACK_ID_LEN)
		return -ENOENT;
	pthread_mutex_lock(&s->lock);
	e = sr_htab_ptrs__get(&s->stacks, id, len);
	if (!e) {
		r = -ENOENT;
		goto out;
	}
	ret->id = agent_pb_bytes(id, len);
	ret->truncated = e->truncated ? agent_pb_bool(true) : NULL;
	if (e->n) {
		ret->frames = calloc(e->n, sizeof(*ret->frames));
		if (!ret->frames) {
			r = -ENOMEM;
			goto out;
		}
		ret->frames_count = e->n;
	}
	for (size_t i = 0; i < e->n; i++) {
		uint8_t eid[AGENT_BUILD_ID_MAX];
		stackrelay_v1_Frame *f = &ret->frames[i];
		uint8_t kind = frame_kind(&e->frames[i]);
		uint32_t exe = frame_exe(&e->frames[i]);

		f->address = agent_pb_u64(e->frames[i].address);
		f->kind = (stackrelay_v1_FrameKind *)agent_pb_enum(kind);
		if (!f->address || !f->kind)
			r = -ENOMEM;
		if (agent_frame_kind_has_function(kind)) {
			int idlen = agent_store_function_id_locked(s, exe, eid);
			if (idlen > 0) {
				f->function_id = agent_pb_bytes(eid, (size_t)idlen);
				if (!f->function_id)
					r = -ENOMEM;
			}
			if (e->frames[i].line) {
				f->line = agent_pb_u32(e->frames[i].line);
				if (!f->line)
					r = -ENOMEM;
			}
		} else {
			int idlen = agent_store_exe_id_locked(s, exe, eid);
			if (idlen > 0) {
				f->executable_id = agent_pb_bytes(eid, (size_t)idlen);
				if (!f->executable_id)
					r = -ENOMEM;
			}
		}
	}
	if (!ret->id)
		r = -ENOMEM;
out:
	pthread_mutex_unlock(&s->lock);
	if (r < 0)
		pb_release(stackrelay_v1_StackDef_fields, ret);
	return r;
}

int agent_store__executable(struct agent_store *s, const uint8_t *id, size_t len, stackrelay_v1_ExecutableDef *ret)
{
	struct exe_entry *e;
	int r = 0;

	memset(ret, 0, sizeof(*ret));
	pthread_mutex_lock(&s->lock);
	e = sr_htab_ptrs__get(&s->exes_by_id, id, len);
	if (!e) {
		r = -ENOENT;
		goto out;
	}
	ret->id = agent_pb_bytes(e->id, e->id_len);
	ret->id_kind = (stackrelay_v1_ExecutableIdKind *)agent_pb_enum(e->id_kind);
	if (e->path) {
		const char *base = strrchr(e->path, '/');
		ret->file_name = strdup(base ? base + 1 : e->path);
		ret->path = strdup(e->path);
	}
	ret->file_size = agent_pb_u64(e->size);
	if (e->gnu_build_id_len)
		ret->gnu_build_id = agent_pb_bytes(e->gnu_build_id, e->gnu_build_id_len);
	if (e->debuglink)
		ret->debuglink = strdup(e->debuglink);
	if (e->is_go)
		ret->is_go = agent_pb_bool(true);
	if (!ret->id || !ret->id_kind || !ret->file_size || (e->path && (!ret->file_name || !ret->path)))
		r = -ENOMEM;
out:
	pthread_mutex_unlock(&s->lock);
	if (r < 0)
		pb_release(stackrelay_v1_ExecutableDef_fields, ret);
	return r;
}

/* The definition of address space seg (kernel.h); the caller holds the lock. */
static int kernel_def_locked(const struct agent_kernel *k, int seg, stackrelay_v1_KernelDef *ret)
{
	const struct agent_kernel_module *mod = seg >= 0 ? &k->modules[seg] : NULL;
	const uint8_t *build_id = mod ? mod->build_id : k->build_id;
	size_t build_id_len = mod ? mod->build_id_len : k->build_id_len;

	ret->id = agent_pb_bytes(agent_kernel_seg_id(k, seg), AGENT_KERNEL_ID_LEN);
	ret->release = strdup(k->release);
	if (build_id_len)
		ret->build_id = agent_pb_bytes(build_id, build_id_len);
	if (!ret->id || !ret->release || (build_id_len && !ret->build_id))
		return -ENOMEM;
	if (mod) {
		ret->addressing = (stackrelay_v1_KernelAddressing *)agent_pb_enum(
			stackrelay_v1_KernelAddressing_KERNEL_ADDRESSING_MODULE_OFFSET);
		ret->module = strdup(mod->name);
		return ret->addressing && ret->module ? 0 : -ENOMEM;
	}
	if (seg == AGENT_KSEG_IMAGE) {
		/* Every node of this build sends the same definition: nothing of this node or boot. */
		ret->addressing = (stackrelay_v1_KernelAddressing *)agent_pb_enum(
			stackrelay_v1_KernelAddressing_KERNEL_ADDRESSING_IMAGE_OFFSET);
		return ret->addressing ? 0 : -ENOMEM;
	}
	/* Runtime addresses of this boot: the boot and where its live modules lie. */
	ret->boot_id = strdup(k->boot_id);
	if (!ret->boot_id)
		return -ENOMEM;
	if (k->n_by_start) {
		size_t n = SR_MIN(k->n_by_start, (size_t)UINT16_MAX);
		ret->modules = calloc(n, sizeof(*ret->modules));
		if (!ret->modules)
			return -ENOMEM;
		ret->modules_count = (pb_size_t)n;
		for (size_t i = 0; i < n; i++) {
			const struct agent_kernel_module *m = &k->modules[k->by_start[i]];
			stackrelay_v1_KernelModule *pm = &ret->modules[i];
			pm->name = strdup(m->name);
			pm->start = agent_pb_u64(m->start);
			pm->size = agent_pb_u64(m->size);
			if (m->build_id_len)
				pm->build_id = agent_pb_bytes(m->build_id, m->build_id_len);
			if (!pm->name || !pm->start || !pm->size)
				return -ENOMEM;
		}
	}
	return 0;
}

int agent_store__kernel(struct agent_store *s, const uint8_t *id, size_t len, stackrelay_v1_KernelDef *ret)
{
	int r, seg;

	memset(ret, 0, sizeof(*ret));
	pthread_mutex_lock(&s->lock);
	seg = s->have_kernel ? agent_kernel_seg_of_id(&s->kernel, id, len) : AGENT_KSEG_NONE;
	r = seg == AGENT_KSEG_NONE ? -ENOENT : kernel_def_locked(&s->kernel, seg, ret);
	pthread_mutex_unlock(&s->lock);
	if (r < 0)
		pb_release(stackrelay_v1_KernelDef_fields, ret);
	return r;
}

int agent_store__function(struct agent_store *s, const uint8_t *id, size_t len, stackrelay_v1_FunctionDef *ret)
{
	const struct agent_function *f;
	int r = 0;

	memset(ret, 0, sizeof(*ret));
	pthread_mutex_lock(&s->lock);
	f = agent_functions__get(&s->funcs, id, len);
	if (!f) {
		r = -ENOENT;
		goto out;
	}
	ret->id = agent_pb_bytes(f->id, AGENT_FUNCTION_ID_LEN);
	ret->runtime = strdup(f->runtime);
	ret->name = strdup(f->name);
	if (f->file_name[0])
		ret->file_name = strdup(f->file_name);
	if (f->start_line)
		ret->start_line = agent_pb_u32(f->start_line);
	if (!ret->id || !ret->runtime || !ret->name || (f->file_name[0] && !ret->file_name) ||
	    (f->start_line && !ret->start_line))
		r = -ENOMEM;
out:
	pthread_mutex_unlock(&s->lock);
	if (r < 0)
		pb_release(stackrelay_v1_FunctionDef_fields, ret);
	return r;
}

/*
 * The vDSO has no file: hand out a copy of the agent's own image (the same
 * in every 64-bit process of this kernel) in a memfd, so its symbols can be
 * extracted like any file's.
 */
static int open_vdso(uint64_t size)
{
	unsigned long base = getauxval(AT_SYSINFO_EHDR);
	int fd;

	if (!base || !size)
		return -ENOENT;
	fd = memfd_create("vdso", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, (const void *)base, size) != (ssize_t)size || lseek(fd, 0, SEEK_SET) < 0) {
		close(fd);
		return -EIO;
	}
	return fd;
}

int agent_store__open_executable(struct agent_store *s, const uint8_t *id, size_t len)
{
	struct exe_entry *e;
	char *seen_path = NULL;
	uint64_t dev, ino, map_start = 0, map_end = 0;
	uint32_t pid;
	struct stat st;
	int fd = -ENOENT;

	pthread_mutex_lock(&s->lock);
	e = sr_htab_ptrs__get(&s->exes_by_id, id, len);
	if (e && e->path && strcmp(e->path, "[vdso]") == 0) {
		uint64_t size = e->size;
		pthread_mutex_unlock(&s->lock);
		return open_vdso(size);
	}
	if (!e) {
		pthread_mutex_unlock(&s->lock);
		return -ENOENT;
	}
	pid = e->pid;
	map_start = e->map_start;
	map_end = e->map_end;
	if (e->seen_path)
		seen_path = strdup(e->seen_path);
	dev = e->dev;
	ino = e->ino;
	pthread_mutex_unlock(&s->lock);

	/*
	 * This runs on the sender's one thread: nothing here may block. Every
	 * open is O_NONBLOCK and accepts only a regular file with the device
	 * and inode identified when the file was first read
	 * (container-open.h): a container that swaps the file for a FIFO, a
	 * symlink out of its root or another file gets a refusal, counted.
	 * map_files reaches deleted and other-namespace files; /proc/PID/root
	 * needs less privilege.
	 */
	if (pid) {
		fd = agent_open_map_file(pid, map_start, map_end, &st);
		if (fd >= 0 && ((uint64_t)st.st_dev != dev || (uint64_t)st.st_ino != ino)) {
			close(fd);
			fd = -ENOENT;
		}
	}
	if (fd < 0 && pid && seen_path)
		fd = agent_open_in_root(pid, seen_path, dev, ino, NULL);
	/*
	 * The last process that mapped it may have exited (a short-lived
	 * shell, say) while the file is still there: try the path in the host's
	 * mount namespace (/proc/1/root, the agent runs with hostPID) and in
	 * the agent's own, the same file or none.
	 */
	if (fd < 0 && seen_path) {
		fd = agent_open_in_root(1, seen_path, dev, ino, NULL);
		if (fd < 0)
			fd = agent_open_in_root(0, seen_path, dev, ino, NULL);
	}
	free(seen_path);
	return fd < 0 ? -ENOENT : fd;
}
