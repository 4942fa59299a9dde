/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Opening the files of processes the agent profiles. A container controls
 * what is at its paths: a FIFO where a file was (a blocking open() would hang
 * the thread for good), a symlink out of its root, a device. Every open of
 * such a path goes through here (common/fsopen.h underneath) and ends in an
 * fstat() of the descriptor: a regular file, and where the caller knows it,
 * the very file it identified (device and inode). Refusals are counted
 * (parse-limits.h).
 */
#ifndef SR_AGENT_CONTAINER_OPEN_H
#define SR_AGENT_CONTAINER_OPEN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

/* The magic link of the mapping at [start, end) in pid: /proc/PID/map_files/START-END (96 bytes hold it). */
void agent_map_files_path(char *ret, size_t cap, uint32_t pid, uint64_t start, uint64_t end);

/*
 * Opens the file mapped at [start, end) in pid through
 * /proc/PID/map_files/START-END. Returns the fd (its fstat in ret_st) or
 * -errno: -EINVAL for a mapping that is not of a regular file.
 */
int agent_open_map_file(uint32_t pid, uint64_t start, uint64_t end, struct stat *ret_st);

/*
 * Opens path (absolute, as the process sees it) inside pid's root directory
 * (pid 0: the agent's own "/"), resolved as if that were "/", with no magic
 * link and no symlink as the last component. With dev or ino non-zero the
 * file must be that one (-ESTALE otherwise). Returns the fd (its fstat in
 * ret_st, may be NULL) or -errno: -EXDEV or -ELOOP for a path that leaves the
 * root or ends in a symlink, -EINVAL for anything but a regular file.
 */
int agent_open_in_root(uint32_t pid, const char *path, uint64_t dev, uint64_t ino, struct stat *ret_st);

#endif
