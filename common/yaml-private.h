/* SPDX-License-Identifier: Apache-2.0 */
/* What config.c needs of yaml.c beyond config.h. */
#ifndef SR_YAML_PRIVATE_H
#define SR_YAML_PRIVATE_H

#include <stdbool.h>

struct sr_yaml_doc;
struct sr_yaml_node;

/* The scalar as written, before substitution (keys are never substituted). */
const char *sr_yaml_raw_scalar(const struct sr_yaml_node *n);
/* Substitution failed for this scalar and was reported already. */
bool sr_yaml_scalar_failed(const struct sr_yaml_doc *doc, const struct sr_yaml_node *n);

#endif
