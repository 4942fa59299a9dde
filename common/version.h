/* SPDX-License-Identifier: Apache-2.0 */
#ifndef SR_VERSION_H
#define SR_VERSION_H

#include <stdio.h>

/* "stackrelay-agent 0.1.0 (git v0.1.0-3-gabc)" and the versions of the libraries it runs with. */
void sr_print_version(FILE *f, const char *program);

/* The release ("0.1.0") and `git describe` of the build ("v0.1.0-3-gabc", or "unknown"). */
const char *sr_version(void);
const char *sr_git_describe(void);

/* The protocol versions this build speaks, for the build_info metrics. */
#define SR_AGENT_PROTOCOL_VERSION "stackrelay.v1"
#define SR_OTLP_PROFILES_VERSIONS "1.9,1.10"

#endif
