/* SPDX-License-Identifier: Apache-2.0 */
/* Receiver `agent` (agent.c). */
#ifndef SR_GW_RECEIVER_AGENT_H
#define SR_GW_RECEIVER_AGENT_H

#include "component.h"

extern const struct gw_component_type gw_receiver_agent;

/* The bound listen address of a started instance ("127.0.0.1:7480"), for tests and logs; NULL before start. */
const char *gw_agent_receiver_address(struct gw_component *c);

#endif
