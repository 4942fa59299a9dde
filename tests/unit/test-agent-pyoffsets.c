// SPDX-License-Identifier: Apache-2.0
/*
 * The 3.11 row of agent/pycode.c against CPython's own headers
 * (libpython3.11-dev's internal headers, Py_BUILD_CORE): every offset the
 * BPF walker and the agent read, by offsetof. Built only where the headers
 * are installed (tests/unit/meson.build).
 */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <internal/pycore_frame.h>
#include <internal/pycore_interp.h>
#include <internal/pycore_runtime.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "agent/pycode.h"

static void test_311_offsets(void **state)
{
	const struct agent_py_layout *l = agent_py_layout(AGENT_PY_VERSION(PY_MAJOR_VERSION, PY_MINOR_VERSION));

	(void)state;
	assert_non_null(l);
	assert_int_equal(l->bpf.runtime_interp_head, offsetof(_PyRuntimeState, interpreters.head));
	assert_int_equal(l->bpf.interp_threads_head, offsetof(PyInterpreterState, threads.head));
	assert_int_equal(l->bpf.tstate_next, offsetof(PyThreadState, next));
	assert_int_equal(l->bpf.tstate_thread_id, offsetof(PyThreadState, thread_id));
	assert_int_equal(l->bpf.tstate_frame, offsetof(PyThreadState, cframe));
	assert_int_equal(l->bpf.cframe_current, offsetof(_PyCFrame, current_frame));
	assert_int_equal(l->bpf.frame_code, offsetof(_PyInterpreterFrame, f_code));
	assert_int_equal(l->bpf.frame_previous, offsetof(_PyInterpreterFrame, previous));
	assert_int_equal(l->bpf.frame_instr, offsetof(_PyInterpreterFrame, prev_instr));
	assert_int_equal(l->bpf.frame_entry, offsetof(_PyInterpreterFrame, is_entry));
	assert_int_equal(l->bpf.code_adaptive, offsetof(PyCodeObject, co_code_adaptive));
	assert_int_equal(l->code_filename, offsetof(PyCodeObject, co_filename));
	assert_int_equal(l->code_name, offsetof(PyCodeObject, co_name));
	assert_int_equal(l->code_qualname, offsetof(PyCodeObject, co_qualname));
	assert_int_equal(l->code_firstlineno, offsetof(PyCodeObject, co_firstlineno));
	assert_int_equal(l->code_linetable, offsetof(PyCodeObject, co_linetable));
	assert_int_equal(l->unicode_ascii_size, sizeof(PyASCIIObject));
	assert_int_equal(l->unicode_compact_size, sizeof(PyCompactUnicodeObject));
	assert_int_equal(AGENT_PY_BYTES_HEAD, offsetof(PyBytesObject, ob_sval));
	assert_true(offsetof(PyCodeObject, co_linetable) + 8 <= AGENT_PY_CODE_HEAD);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_311_offsets),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
