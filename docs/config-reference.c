// SPDX-License-Identifier: Apache-2.0
/*
 * Prints the configuration reference (docs/configuration.md's generated
 * part) from the same sr_field tables the binaries load configs with, so the
 * docs cannot drift from the code: a test compares the two. Fails when a
 * field's bounds would never be checked.
 */
#include <stdio.h>

#include "agent/config.h"
#include "pipeline.h"

int main(void)
{
	printf("## Agent (`stackrelay-agent --config`)\n\n");
	printf("| key | type | default | description |\n|---|---|---|---|\n");
	size_t unchecked = sr_config_describe(agent_config_fields, "", true, stdout);
	printf("\n## Gateway (`stackrelay-gateway --config`)\n");
	printf("\nComponent IDs are `type` or `type/name`; each component's keys sit under its ID.\n");
	unchecked += gw_config_describe(stdout, true);
	/* A minimum without a maximum above it is never checked (sr_config_describe()). */
	return unchecked ? 1 : 0;
}
