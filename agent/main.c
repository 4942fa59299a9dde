// SPDX-License-Identifier: Apache-2.0
/*
 * stackrelay-agent: flags and configuration, then the profiling core.
 * Exit codes: 0 ok, 1 runtime failure, 2 bad usage or invalid config.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "agent/config.h"
#include "common/config.h"
#include "common/grow.h"
#include "common/log.h"
#include "sr-config.h"
#include "common/units.h"
#include "common/version.h"

#define EXIT_USAGE 2

/* --pid may be repeated; bounded like profiling.pids. */
#define AGENT_MAX_PID_FLAGS 1024

static void usage(FILE *f)
{
	fprintf(f, "Usage: stackrelay-agent [OPTIONS]\n"
		   "\n"
		   "Samples every CPU with eBPF and streams raw stacks with the metadata needed to\n"
		   "symbolize and label them to a stackrelay gateway.\n"
		   "\n"
		   "Options:\n"
		   "  --config PATH       YAML configuration (keys below); without it, built-in defaults\n"
		   "  --gateway URL       gateway.endpoint: http://HOST:PORT (h2c) or https://HOST:PORT\n"
		   "  --otlp URL          otlp.endpoint: send OTLP profiles there (http:// or https://; an\n"
		   "                      OpenTelemetry Collector, Pyroscope); instead of the gateway unless\n"
		   "                      --gateway (or gateway.endpoint in --config) is given too\n"
		   "  --frequency HZ      profiling.frequency: samples per second per CPU (1-1000)\n"
		   "  --duration SECONDS  profile that long (or a duration like 1m30s), flush everything, exit 0\n"
		   "  --output PATH       write what would be sent as varint-delimited stackrelay.v1.PushRequest;\n"
		   "                      without --gateway (or gateway.endpoint in --config) nothing is sent\n"
		   "  --pid PID           only profile this process (repeatable; adds to profiling.pids)\n"
		   "  --check             preflight: kernel, BTF, capabilities, perf_event_paranoid, tracefs;\n"
		   "                      says what is missing and how to fix it; exit 0 when all pass\n"
		   "  --validate          check the configuration and exit (0 valid, 2 invalid)\n"
		   "  --keep-privileges   keep every capability after setup (debugging); by default the agent\n"
		   "                      drops those only setup needs and sets no_new_privs (docs/security.md)\n"
		   "  --log-level LEVEL   error, warn, info, debug or trace (overrides telemetry.logs.level)\n"
		   "  --version           print versions and exit\n"
		   "  --help              print this help and exit\n"
		   "\n"
		   "Configuration file keys (type, default, meaning):\n");
	sr_config_describe(agent_config_fields, "", false, f);
	fprintf(f, "\nStrings may use ${env:NAME} (or ${NAME}), ${env:NAME:-default} and ${file:PATH}. See "
		   "docs/configuration.md.\n");
}

static int parse_u64_arg(const char *flag, const char *s, uint64_t min, uint64_t max, uint64_t *ret)
{
	char *end;

	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (!*s || *end || errno || s[0] == '-' || v < min || v > max) {
		fprintf(stderr,
			"stackrelay-agent: %s: invalid value \"%s\": expected a whole number from %" PRIu64
			" to %" PRIu64 "\n",
			flag, s, min, max);
		return -EINVAL;
	}
	*ret = v;
	return 0;
}

static int replace_string(char **dst, const char *s)
{
	char *copy = strdup(s);

	if (!copy)
		return -ENOMEM;
	free(*dst);
	*dst = copy;
	return 0;
}

/* *cap: room in profiling.pids as far as known (0 for the exact-fit list the config file gave). */
static int append_pid(struct agent_config *cfg, uint32_t *cap, const char *s)
{
	uint64_t pid;

	if (parse_u64_arg("--pid", s, 1, 4194304, &pid) < 0)
		return -EINVAL;
	if (cfg->profiling.n_pids >= AGENT_MAX_PID_FLAGS) {
		fprintf(stderr, "stackrelay-agent: --pid: more than %d processes\n", AGENT_MAX_PID_FLAGS);
		return -E2BIG;
	}
	if (sr_grow_u32((void **)&cfg->profiling.pids, cap, cfg->profiling.n_pids + 1, sizeof(char *), 4) < 0)
		return -ENOMEM;
	cfg->profiling.pids[cfg->profiling.n_pids] = strdup(s);
	if (!cfg->profiling.pids[cfg->profiling.n_pids])
		return -ENOMEM;
	cfg->profiling.n_pids++;
	return 0;
}

int main(int argc, char **argv)
{
	enum {
		OPT_CONFIG = 256,
		OPT_GATEWAY,
		OPT_OTLP,
		OPT_FREQUENCY,
		OPT_DURATION,
		OPT_OUTPUT,
		OPT_PID,
		OPT_CHECK,
		OPT_VALIDATE,
		OPT_KEEP_PRIVILEGES,
		OPT_LOG_LEVEL,
		OPT_VERSION,
		OPT_HELP
	};
	static const struct option options[] = {
		{ "config", required_argument, NULL, OPT_CONFIG },
		{ "gateway", required_argument, NULL, OPT_GATEWAY },
		{ "otlp", required_argument, NULL, OPT_OTLP },
		{ "frequency", required_argument, NULL, OPT_FREQUENCY },
		{ "duration", required_argument, NULL, OPT_DURATION },
		{ "output", required_argument, NULL, OPT_OUTPUT },
		{ "pid", required_argument, NULL, OPT_PID },
		{ "check", no_argument, NULL, OPT_CHECK },
		{ "validate", no_argument, NULL, OPT_VALIDATE },
		{ "keep-privileges", no_argument, NULL, OPT_KEEP_PRIVILEGES },
		{ "log-level", required_argument, NULL, OPT_LOG_LEVEL },
		{ "version", no_argument, NULL, OPT_VERSION },
		{ "help", no_argument, NULL, OPT_HELP },
		{ 0 },
	};
	const char *config_path = NULL, *gateway = NULL, *otlp = NULL, *frequency = NULL, *duration = NULL,
		   *output = NULL;
	const char *log_level = NULL;
	const char *pids[AGENT_MAX_PID_FLAGS];
	size_t n_pids = 0;
	uint32_t pids_cap = 0;
	bool check = false, validate = false, keep_privileges = false;
	struct agent_config cfg = { 0 };
	struct sr_diag *diag = NULL;
	int opt, r, ret = EXIT_USAGE;

	while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
		switch (opt) {
		case OPT_CONFIG:
			config_path = optarg;
			break;
		case OPT_GATEWAY:
			gateway = optarg;
			break;
		case OPT_OTLP:
			otlp = optarg;
			break;
		case OPT_FREQUENCY:
			frequency = optarg;
			break;
		case OPT_DURATION:
			duration = optarg;
			break;
		case OPT_OUTPUT:
			output = optarg;
			break;
		case OPT_PID:
			if (n_pids >= AGENT_MAX_PID_FLAGS) {
				fprintf(stderr, "stackrelay-agent: --pid: more than %d processes\n",
					AGENT_MAX_PID_FLAGS);
				return EXIT_USAGE;
			}
			pids[n_pids++] = optarg;
			break;
		case OPT_KEEP_PRIVILEGES:
			keep_privileges = true;
			break;
		case OPT_CHECK:
			check = true;
			break;
		case OPT_VALIDATE:
			validate = true;
			break;
		case OPT_LOG_LEVEL:
			log_level = optarg;
			break;
		case OPT_VERSION:
			sr_print_version(stdout, "stackrelay-agent");
			return 0;
		case OPT_HELP:
			usage(stdout);
			return 0;
		default:
			fprintf(stderr, "Try 'stackrelay-agent --help'.\n");
			return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "stackrelay-agent: unexpected argument \"%s\"; try 'stackrelay-agent --help'\n",
			argv[optind]);
		return EXIT_USAGE;
	}

	if (log_level) {
		if (sr_log_level_flag("stackrelay-agent", log_level) < 0)
			return EXIT_USAGE;
	}

	diag = sr_diag_new();
	if (!diag) {
		fprintf(stderr, "stackrelay-agent: out of memory\n");
		return 1;
	}
	/* Whether the file names a gateway decides what --output means (see below). */
	bool file_sets_gateway = false;
	if (config_path) {
		struct sr_yaml_doc *doc = sr_yaml_load_file(config_path, diag);
		r = -EINVAL;
		if (doc) {
			const struct sr_yaml_node *root = sr_yaml_root(doc);
			const struct sr_yaml_node *gw = sr_yaml_mapping_get(doc, root, "gateway");
			file_sets_gateway = gw && sr_yaml_mapping_get(doc, gw, "endpoint");
			r = sr_config_load(doc, root, "", agent_config_fields, &cfg, diag);
			sr_yaml_doc_free(doc);
		}
	} else {
		r = sr_config_load(NULL, NULL, "", agent_config_fields, &cfg, diag);
	}
	sr_diag_print(diag, stderr);
	if (r < 0) {
		fprintf(stderr, "stackrelay-agent: invalid configuration (%zu problem%s)\n", sr_diag_errors(diag),
			sr_diag_errors(diag) == 1 ? "" : "s");
		goto out;
	}
	if (!log_level)
		sr_log_set_level((enum sr_log_level)cfg.telemetry.log_level);

	/* Flags override the file. */
	bool gateway_set = gateway || file_sets_gateway;
	if (otlp && replace_string(&cfg.otlp.endpoint, otlp) < 0)
		goto oom;
	if (otlp && strncmp(otlp, "http://", 7) != 0 && strncmp(otlp, "https://", 8) != 0) {
		fprintf(stderr, "stackrelay-agent: --otlp: \"%s\" is not an http:// or https:// URL\n", otlp);
		goto out;
	}
	bool otlp_set = cfg.otlp.endpoint && cfg.otlp.endpoint[0];
	if (gateway && replace_string(&cfg.gateway.endpoint, gateway) < 0)
		goto oom;
	if (gateway && strncmp(gateway, "http://", 7) != 0 && strncmp(gateway, "https://", 8) != 0) {
		fprintf(stderr, "stackrelay-agent: --gateway: \"%s\" is not an http:// or https:// URL\n", gateway);
		goto out;
	}
	if (frequency && parse_u64_arg("--frequency", frequency, 1, 1000, &cfg.profiling.frequency_hz) < 0)
		goto out;
	for (size_t i = 0; i < n_pids; i++) {
		r = append_pid(&cfg, &pids_cap, pids[i]);
		if (r == -ENOMEM)
			goto oom;
		if (r < 0)
			goto out;
	}
	if (output && replace_string(&cfg.output, output) < 0)
		goto oom;

	struct agent_run_opts opts = { 0 };
	if (duration) {
		uint64_t secs;
		char *end;
		errno = 0;
		secs = strtoull(duration, &end, 10);
		if (*duration && !*end && !errno && duration[0] != '-') {
			if (secs == 0 || secs > UINT64_MAX / SR_NSEC_PER_SEC) {
				fprintf(stderr, "stackrelay-agent: --duration: must be at least 1 second\n");
				goto out;
			}
			opts.duration_ns = secs * SR_NSEC_PER_SEC;
		} else if (sr_parse_duration(duration, &opts.duration_ns) < 0 || opts.duration_ns == 0) {
			fprintf(stderr,
				"stackrelay-agent: --duration: invalid value \"%s\": expected seconds (30) or a "
				"duration (1m30s)\n",
				duration);
			goto out;
		}
	}
	opts.output = cfg.output && cfg.output[0] ? cfg.output : NULL;
	/*
	 * --output (or `output:`) or an OTLP endpoint alone means "instead of
	 * sending to the gateway"; with a gateway named by --gateway or
	 * gateway.endpoint in the file, both.
	 */
	opts.send = (!opts.output && !otlp_set) || gateway_set;
	opts.keep_privileges = keep_privileges;

	if (validate) {
		printf("%s: configuration is valid\n", config_path ? config_path : "built-in defaults");
		ret = 0;
		goto out;
	}
	if (check) {
		r = agent_check(&cfg, stdout);
		ret = r == 0 ? 0 : 1;
		goto out;
	}

	sr_log_info("agent", "starting", "version=%s gateway=%s frequency_hz=%" PRIu64 " output=%s", SR_VERSION,
		    opts.send ? cfg.gateway.endpoint : "none", cfg.profiling.frequency_hz,
		    opts.output ? opts.output : "none");
	r = agent_run(&cfg, &opts);
	if (r < 0) {
		sr_log_error("agent", "stopped on error", "error=\"%s\"", strerror(-r));
		ret = 1;
		goto out;
	}
	ret = 0;
	goto out;

oom:
	fprintf(stderr, "stackrelay-agent: out of memory\n");
	ret = 1;
out:
	sr_config_free(agent_config_fields, &cfg);
	sr_diag_free(diag);
	return ret;
}
