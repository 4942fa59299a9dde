/* SPDX-License-Identifier: Apache-2.0 */
/*
 * OTLP profiles field numbers, from the nanopb-generated headers: for the
 * writers that encode OTLP with common/pbwire.h (the gateway's exporters and
 * the agent's own OTLP export). Includers need the proto dependency.
 */
#ifndef SR_OTLP_FIELDS_H
#define SR_OTLP_FIELDS_H

#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb.h"
#include "opentelemetry/proto/common/v1/common.pb.h"
#include "opentelemetry/proto/profiles/v1development/profiles.pb.h"
#include "opentelemetry/proto/profiles/v1development/profiles_v1_9.pb.h"
#include "opentelemetry/proto/resource/v1/resource.pb.h"

/* Field numbers, from the generated headers. */
#define SR_OTLP_P(m, f) opentelemetry_proto_profiles_v1development_##m##_##f##_tag
#define SR_OTLP_C(m, f) opentelemetry_proto_common_v1_##m##_##f##_tag
#define SR_OTLP_REQ(f)	opentelemetry_proto_collector_profiles_v1development_ExportProfilesServiceRequest_##f##_tag
#define SR_OTLP_RES(f)	opentelemetry_proto_resource_v1_Resource_##f##_tag
#define SR_OTLP_S10(f)	opentelemetry_proto_profiles_v1development_Sample_##f##_tag
#define SR_OTLP_S9(f)	opentelemetry_proto_profiles_v1development_v1_9_Sample_##f##_tag

#endif
