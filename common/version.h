/* SPDX-License-Identifier: Apache-2.0 */
#ifndef SR_VERSION_H
#define SR_VERSION_H

#include <stdio.h>

/* "stackrelay-agent 0.1.0 (git v0.1.0-3-gabc)" and the versions of the libraries it runs with. */
void sr_print_version(FILE *f, const char *program);

#endif
