/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Demangling of C++ (Itanium ABI) and Rust (legacy and v0) symbol names with
 * libiberty's cplus_demangle (the demangler of GCC and binutils; its
 * cp-demangle.c and rust-demangle.c carry the "unlimited permission to link"
 * exception, see docs/dependencies.md).
 *
 * Modes, as in Grafana Alloy's pyroscope.ebpf `demangle` argument:
 *   none        the name as in the binary;
 *   simplified  no parameters, no template/generic arguments:
 *               std::vector::push_back
 *   templates   no parameters, template arguments kept:
 *               std::vector<int, std::allocator<int> >::push_back
 *   full        everything but clone suffixes (.isra.0, .cold):
 *               std::vector<int, std::allocator<int> >::push_back(int const&)
 * Rust hashes (::h0123456789abcdef) are dropped in every mode but none.
 */
#ifndef SR_GW_DEMANGLE_H
#define SR_GW_DEMANGLE_H

#include <stddef.h>

enum gw_demangle_mode {
	GW_DEMANGLE_NONE,
	GW_DEMANGLE_SIMPLIFIED,
	GW_DEMANGLE_TEMPLATES,
	GW_DEMANGLE_FULL,
	_GW_DEMANGLE_MAX,
};

/* NULL-terminated, indexed by enum gw_demangle_mode (config ENUM values). */
extern const char *const gw_demangle_mode_names[];

int gw_demangle_mode_from_string(const char *s, enum gw_demangle_mode *ret);
const char *gw_demangle_mode_to_string(enum gw_demangle_mode mode);

/* True when name looks mangled (_Z..., _R..., and their ___Z / __R forms). */
int gw_is_mangled(const char *name);

/*
 * Demangles name per mode. Returns a malloc'd string, or NULL when the name
 * is not mangled, mode is none, or the demangler rejects it (callers then use
 * the name as is; errno is ENOENT, or ENOMEM when out of memory).
 */
char *gw_demangle(const char *name, enum gw_demangle_mode mode);

#endif
