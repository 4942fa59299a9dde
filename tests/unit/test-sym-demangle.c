// SPDX-License-Identifier: Apache-2.0
/*
 * Demangling in every mode: C++ (Itanium) and Rust (legacy and v0) names,
 * written out as fixtures (rustc is not in the build image; the mangled
 * strings below are what rustc 1.x and g++ 12 emit for these items).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "demangle.h"

struct fixture {
	const char *mangled;
	const char *want[_GW_DEMANGLE_MAX]; /* NULL: stays as is */
};

static const struct fixture fixtures[] = {
	/* C++: a member of a class template */
	{ "_ZNSt6vectorIiSaIiEE9push_backERKi",
	  { NULL, "std::vector::push_back", "std::vector<int, std::allocator<int> >::push_back",
	    "std::vector<int, std::allocator<int> >::push_back(int const&)" } },
	/* C++: a function template (return type only in full) */
	{ "_Z3maxIiET_S0_S0_", { NULL, "max", "max<int>", "int max<int>(int, int)" } },
	/* C++: a clone made by GCC's IPA-SRA */
	{ "_ZN3foo3barEi.isra.0", { NULL, "foo::bar", "foo::bar", "foo::bar(int)" } },
	{ "_ZNSt6vectorIiSaIiEE9push_backERKi.cold",
	  { NULL, "std::vector::push_back", "std::vector<int, std::allocator<int> >::push_back",
	    "std::vector<int, std::allocator<int> >::push_back(int const&)" } },
	/* C++: a local name inside a function (enclosing parameters dropped but in full) */
	{ "_ZZN3foo3barEiE3baz", { NULL, "foo::bar::baz", "foo::bar::baz", "foo::bar(int)::baz" } },
	/* C++: operators must survive template stripping */
	{ "_ZlsRSoRK3Foo", { NULL, "operator<<", "operator<<", "operator<<(std::ostream&, Foo const&)" } },
	{ "_ZNK3FooltERKS_", { NULL, "Foo::operator<", "Foo::operator<", "Foo::operator<(Foo const&) const" } },
	{ "_ZNKSt8functionIFviEEclEi",
	  { NULL, "std::function::operator()", "std::function<void (int)>::operator()",
	    "std::function<void (int)>::operator()(int) const" } },
	/* C++: lambda and anonymous namespace */
	{ "_ZZ4mainENKUlvE_clEv",
	  { NULL, "main::{lambda()#1}::operator()", "main::{lambda()#1}::operator()",
	    "main::{lambda()#1}::operator()() const" } },
	{ "_ZN12_GLOBAL__N_13fooEv",
	  { NULL, "(anonymous namespace)::foo", "(anonymous namespace)::foo", "(anonymous namespace)::foo()" } },
	/* Rust legacy: the hash goes, generic arguments go only in simplified */
	{ "_ZN3std2rt10lang_start17h0123456789abcdefE",
	  { NULL, "std::rt::lang_start", "std::rt::lang_start", "std::rt::lang_start" } },
	{ "_ZN70_$LT$alloc..vec..Vec$LT$T$C$A$GT$$u20$as$u20$core..ops..drop..Drop$GT$4drop17h5f9ad5f5e5b3b4d8E",
	  { NULL, "<alloc::vec::Vec as core::ops::drop::Drop>::drop",
	    "<alloc::vec::Vec<T,A> as core::ops::drop::Drop>::drop",
	    "<alloc::vec::Vec<T,A> as core::ops::drop::Drop>::drop" } },
	/* Rust v0 */
	{ "_RNvCs15kBYyAo9fc_7mycrate7example", { NULL, "mycrate::example", "mycrate::example", "mycrate::example" } },
	{ "_RINvNtC3std3mem8align_ofjE",
	  { NULL, "std::mem::align_of", "std::mem::align_of::<usize>", "std::mem::align_of::<usize>" } },
	{ "_RNvXs_NtCs4fqI2P2rA04_4core3fmtNtB4_9FormatterNtB4_5Write9write_str",
	  { NULL, "<core::fmt::Formatter as core::fmt::Write>::write_str",
	    "<core::fmt::Formatter as core::fmt::Write>::write_str",
	    "<core::fmt::Formatter as core::fmt::Write>::write_str" } },
	{ "_RINvNtCs1234_4core3ptr13drop_in_placeINtNtCs5678_5alloc3vec3VechEEB4_",
	  { NULL, "core::ptr::drop_in_place", "core::ptr::drop_in_place::<alloc::vec::Vec<u8>>",
	    "core::ptr::drop_in_place::<alloc::vec::Vec<u8>>" } },
	/* Not mangled: C names stay as they are in every mode */
	{ "main", { NULL, NULL, NULL, NULL } },
	{ "_start", { NULL, NULL, NULL, NULL } },
	/* Looks mangled, is not: kept */
	{ "_Zfoo", { NULL, NULL, NULL, NULL } },
};

static void test_modes(void **state)
{
	for (size_t i = 0; i < sizeof(fixtures) / sizeof(fixtures[0]); i++) {
		for (int m = 0; m < _GW_DEMANGLE_MAX; m++) {
			char *got = gw_demangle(fixtures[i].mangled, (enum gw_demangle_mode)m);
			const char *want = fixtures[i].want[m];
			if (!want) {
				if (got)
					fail_msg("%s in mode %s: want unchanged, got \"%s\"", fixtures[i].mangled,
						 gw_demangle_mode_to_string(m), got);
			} else {
				if (!got)
					fail_msg("%s in mode %s: want \"%s\", got nothing", fixtures[i].mangled,
						 gw_demangle_mode_to_string(m), want);
				if (strcmp(got, want) != 0)
					fail_msg("%s in mode %s:\n want \"%s\"\n  got \"%s\"", fixtures[i].mangled,
						 gw_demangle_mode_to_string(m), want, got);
			}
			free(got);
		}
	}
}

static void test_mode_names(void **state)
{
	enum gw_demangle_mode m;

	assert_int_equal(gw_demangle_mode_from_string("templates", &m), 0);
	assert_int_equal(m, GW_DEMANGLE_TEMPLATES);
	assert_int_equal(gw_demangle_mode_from_string("full", &m), 0);
	assert_int_equal(m, GW_DEMANGLE_FULL);
	assert_int_equal(gw_demangle_mode_from_string("Full", &m), -22);
	assert_string_equal(gw_demangle_mode_to_string(GW_DEMANGLE_SIMPLIFIED), "simplified");
	assert_null(gw_demangle_mode_names[_GW_DEMANGLE_MAX]);
}

static void test_garbage(void **state)
{
	/* Truncated and nonsense names must not crash and must not demangle to garbage. */
	static const char *const bad[] = { "_Z", "_R", "_ZN", "_ZN3foo", "_RNv", "_ZN999999999999foo", "_ZZZZZZ" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		for (int m = 0; m < _GW_DEMANGLE_MAX; m++)
			free(gw_demangle(bad[i], (enum gw_demangle_mode)m));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_modes),
		cmocka_unit_test(test_mode_names),
		cmocka_unit_test(test_garbage),
	};
	return cmocka_run_group_tests_name("sym-demangle", tests, NULL, NULL);
}
