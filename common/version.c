// SPDX-License-Identifier: Apache-2.0
#include <bpf/libbpf.h>
#include <curl/curl.h>
#include <nghttp2/nghttp2ver.h>
#include <nghttp2/nghttp2.h>
#include <openssl/crypto.h>
#include <uv.h>
#include <yaml.h>
#include <zlib.h>

#include "sr-config.h"
#include "sr-git-describe.h"
#include "version.h"

const char *sr_version(void)
{
	return SR_VERSION;
}

const char *sr_git_describe(void)
{
	return SR_GIT_DESCRIBE;
}

void sr_print_version(FILE *f, const char *program)
{
	const nghttp2_info *h2 = nghttp2_version(0);
	const curl_version_info_data *curl = curl_version_info(CURLVERSION_NOW);

	/* Versions of the libraries actually loaded, not the headers built against. */
	fprintf(f, "%s %s (git %s)\n", program, SR_VERSION, SR_GIT_DESCRIBE);
	fprintf(f, "  libbpf %u.%u\n", libbpf_major_version(), libbpf_minor_version());
	fprintf(f, "  libuv %s\n", uv_version_string());
	fprintf(f, "  nghttp2 %s\n", h2 ? h2->version_str : "unknown");
	fprintf(f, "  %s\n", OpenSSL_version(OPENSSL_VERSION));
	fprintf(f, "  libcurl %s\n", curl ? curl->version : "unknown");
	fprintf(f, "  libyaml %s\n", yaml_get_version_string());
	fprintf(f, "  zlib %s\n", zlibVersion());
}
