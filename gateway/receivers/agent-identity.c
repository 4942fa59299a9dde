/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Who an agent connection speaks for (agent-private.h), beyond what its
 * requests say of themselves: AgentInfo.node_name is the agent's own claim,
 * so one node's credentials would otherwise speak for every node.
 *
 * - tls.client_identity.bind_node_name: the client certificate's subject CN
 *   and DNS subject alternative names, read through node_name_template
 *   ("{node}", or e.g. "system:node:{node}" for kubelet-style certificates),
 *   are the nodes the connection may name.
 * - auth.node_tokens_file: lines "<node name> <token>"; a request's bearer
 *   token names the one node it may speak for.
 *
 * agent-ingest.c refuses (403) a request whose node is not one of them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <openssl/crypto.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <xxhash.h>

#include "common/grow.h"
#include "agent-private.h"
#include "component.h"
#include "common/log.h"
#include "common/macro.h"

/* Largest node_tokens_file read, and most tokens in it (one per node of a large cluster, with room). */
#define AGENT_NODE_TOKENS_MAX_BYTES (16u << 20)
#define AGENT_NODE_TOKENS_MAX	    65536
/* How often the file's mtime is looked at (as for bearer_token_file). */
#define AGENT_NODE_TOKENS_RECHECK_MS 10000
/* Names taken from one certificate (CN + DNS SANs). */
#define AGENT_CERT_MAX_NAMES 64

struct agent_node_token {
	uint64_t h; /* XXH3 of the token: only an equal hash is compared byte by byte */
	char *node, *token;
	size_t token_len;
};

static void tokens_free(struct agent_node_token *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].node);
		if (v[i].token)
			OPENSSL_cleanse(v[i].token, v[i].token_len);
		free(v[i].token);
	}
	free(v);
}

void gw_agent_node_tokens_free(struct gw_listener *rx)
{
	tokens_free(agent_of(rx)->node_tokens, agent_of(rx)->n_node_tokens);
	agent_of(rx)->node_tokens = NULL;
	agent_of(rx)->n_node_tokens = 0;
}

int gw_agent_node_tokens_load(struct gw_listener *rx, char *err, size_t errsize)
{
	const char *path = rx->cfg->auth.node_tokens_file;
	struct agent_node_token *v = NULL;
	size_t n = 0, cap = 0, lineno = 0;
	char *line = NULL;
	size_t line_cap = 0;
	struct stat st;
	FILE *f = fopen(path, "re");
	int e = 0;

	if (!f) {
		e = -errno;
		snprintf(err, errsize, "cannot read node_tokens_file %s: %s", path, strerror(errno));
		return e;
	}
	if (fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > AGENT_NODE_TOKENS_MAX_BYTES) {
		e = -EINVAL;
		snprintf(err, errsize, "node_tokens_file %s: not a regular file of at most %u bytes", path,
			 AGENT_NODE_TOKENS_MAX_BYTES);
		goto out;
	}
	while (getline(&line, &line_cap, f) >= 0) {
		char *node, *token, *extra, *save = NULL;
		lineno++;
		node = strtok_r(line, " \t\r\n", &save);
		if (!node || node[0] == '#')
			continue;
		token = strtok_r(NULL, " \t\r\n", &save);
		extra = strtok_r(NULL, " \t\r\n", &save);
		if (!token || extra) {
			e = -EINVAL;
			snprintf(err, errsize, "node_tokens_file %s line %zu: expected \"<node name> <token>\"", path,
				 lineno);
			goto out;
		}
		if (n == AGENT_NODE_TOKENS_MAX) {
			e = -E2BIG;
			snprintf(err, errsize, "node_tokens_file %s: more than %d tokens", path, AGENT_NODE_TOKENS_MAX);
			goto out;
		}
		e = sr_grow((void **)&v, &cap, n + 1, sizeof(*v), 64);
		if (e < 0)
			goto out;
		v[n] = (struct agent_node_token){ .node = strdup(node), .token = strdup(token) };
		if (!v[n].node || !v[n].token) {
			n++;
			e = -ENOMEM;
			goto out;
		}
		v[n].token_len = strlen(token);
		v[n].h = XXH3_64bits(token, v[n].token_len);
		for (size_t i = 0; i < n; i++)
			if (v[i].h == v[n].h && v[i].token_len == v[n].token_len &&
			    memcmp(v[i].token, v[n].token, v[n].token_len) == 0) {
				n++;
				e = -EINVAL;
				snprintf(err, errsize,
					 "node_tokens_file %s line %zu: this token is also the token of node \"%s\"; "
					 "each node needs its own",
					 path, lineno, v[i].node);
				goto out;
			}
		n++;
	}
	if (n == 0) {
		e = -EINVAL;
		snprintf(err, errsize, "node_tokens_file %s has no \"<node name> <token>\" line", path);
		goto out;
	}
	gw_agent_node_tokens_free(rx);
	agent_of(rx)->node_tokens = v;
	agent_of(rx)->n_node_tokens = n;
	agent_of(rx)->node_tokens_mtime = st.st_mtim;
	v = NULL;
	n = 0;
out:
	if (line) {
		OPENSSL_cleanse(line, line_cap);
		free(line);
	}
	tokens_free(v, n);
	fclose(f);
	return e;
}

void gw_agent_node_tokens_recheck(struct gw_listener *rx)
{
	struct stat st;
	char err[256];

	if (gw_net_now_ms(rx) - agent_of(rx)->node_tokens_checked_ms < AGENT_NODE_TOKENS_RECHECK_MS)
		return;
	agent_of(rx)->node_tokens_checked_ms = gw_net_now_ms(rx);
	if (stat(rx->cfg->auth.node_tokens_file, &st) < 0)
		return; /* keep the last good tokens */
	if (st.st_mtim.tv_sec == agent_of(rx)->node_tokens_mtime.tv_sec &&
	    st.st_mtim.tv_nsec == agent_of(rx)->node_tokens_mtime.tv_nsec)
		return;
	if (gw_agent_node_tokens_load(rx, err, sizeof(err)) < 0)
		sr_log_warn(COMPONENT, "cannot re-read the node tokens; keeping the previous ones",
			    "id=%s error=\"%s\"", rx->c->id, err);
}

char *gw_agent_node_token_lookup(struct gw_listener *rx, const uint8_t *value, size_t len)
{
	static const char prefix[] = "Bearer ";
	uint64_t h;

	if (len <= sizeof(prefix) - 1 || strncasecmp((const char *)value, prefix, sizeof(prefix) - 1) != 0)
		return NULL;
	value += sizeof(prefix) - 1;
	len -= sizeof(prefix) - 1;
	h = XXH3_64bits(value, len);
	for (size_t i = 0; i < agent_of(rx)->n_node_tokens; i++) {
		const struct agent_node_token *t = &agent_of(rx)->node_tokens[i];
		if (t->h == h && t->token_len == len && CRYPTO_memcmp(t->token, value, len) == 0)
			return strdup(t->node);
	}
	return NULL;
}

/* ---- client certificates ---- */

/* The node name a certificate name stands for under template ("pre{node}post"), or NULL. */
static char *through_template(const char *tmpl, const char *name, size_t len)
{
	const char *mark = strstr(tmpl, "{node}");
	size_t pre = (size_t)(mark - tmpl), post = strlen(mark + 6);

	if (len <= pre + post || memcmp(name, tmpl, pre) != 0 || memcmp(name + len - post, mark + 6, post) != 0)
		return NULL;
	if (memchr(name, '\0', len))
		return NULL; /* an embedded NUL: a name forged to compare equal to a shorter one */
	return strndup(name + pre, len - pre - post);
}

static int add_name(struct conn *c, const char *tmpl, const char *name, size_t len)
{
	char *node;

	if (c->n_node_names == AGENT_CERT_MAX_NAMES)
		return 0;
	node = through_template(tmpl, name, len);
	if (!node)
		return errno == ENOMEM ? -ENOMEM : 0;
	c->node_names[c->n_node_names++] = node;
	return 0;
}

int gw_agent_conn_identity(struct conn *c)
{
	const struct gw_listener_identity_config *ci = &c->rx->cfg->tls.client_identity;
	const char *tmpl = ci->node_name_template && ci->node_name_template[0] ? ci->node_name_template : "{node}";
	X509 *cert;
	char cn[256];
	int e = 0, n;

	if (!c->ssl || !ci->bind_node_name)
		return 0;
	cert = SSL_get1_peer_certificate(c->ssl);
	if (!cert)
		return 0; /* no names: every request is refused while binding is on */
	c->node_names = calloc(AGENT_CERT_MAX_NAMES, sizeof(*c->node_names));
	if (!c->node_names) {
		e = -ENOMEM;
		goto out;
	}
	n = X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof(cn));
	if (n > 0 && (size_t)n < sizeof(cn)) {
		c->principal = strndup(cn, (size_t)n);
		if ((e = add_name(c, tmpl, cn, (size_t)n)) < 0)
			goto out;
	}
	GENERAL_NAMES *sans = X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);
	for (int i = 0; sans && i < sk_GENERAL_NAME_num(sans); i++) {
		const GENERAL_NAME *g = sk_GENERAL_NAME_value(sans, i);
		if (g->type != GEN_DNS)
			continue;
		const ASN1_IA5STRING *s = g->d.dNSName;
		if ((e = add_name(c, tmpl, (const char *)ASN1_STRING_get0_data(s), (size_t)ASN1_STRING_length(s))) < 0)
			break;
	}
	GENERAL_NAMES_free(sans);
out:
	X509_free(cert);
	return e;
}

void gw_agent_work_peer(struct work *w, struct conn *c, struct h2stream *s)
{
	const struct gw_listener_config *cfg = c->rx->cfg;

	w->peer.conn_serial = c->serial;
	w->peer.principal = c->principal;
	if (cfg->auth.node_tokens_file) {
		/* The token decides: it was checked (auth_ok) before the request got here. */
		w->token_node = s->token_node;
		s->token_node = NULL;
		w->peer.bind = true;
		w->peer.principal = w->token_node;
		w->peer.node_names = (const char *const *)&w->token_node;
		w->peer.n_node_names = w->token_node ? 1 : 0;
		/* With a bound certificate too, the token's node must also be one the certificate names. */
		if (w->token_node && cfg->tls.client_identity.bind_node_name) {
			bool found = false;
			for (size_t i = 0; i < c->n_node_names && !found; i++)
				found = strcmp(c->node_names[i], w->token_node) == 0;
			if (!found)
				w->peer.n_node_names = 0;
		}
	} else if (cfg->tls.client_identity.bind_node_name) {
		w->peer.bind = true;
		w->peer.node_names = (const char *const *)c->node_names;
		w->peer.n_node_names = c->n_node_names;
	}
}
