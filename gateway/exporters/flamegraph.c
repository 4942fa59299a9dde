// SPDX-License-Identifier: Apache-2.0
/*
 * flamegraph: keeps a call tree of every sample this exporter has received
 * and rewrites one self-contained interactive SVG after each batch
 * (docs/exporters.md, "flamegraph"), in the style of Brendan Gregg's
 * flamegraph.pl: click a frame to zoom, "Search" to highlight matching
 * frames (with the matched share), tooltips with sample counts and
 * percentages. No external scripts or fonts: it opens anywhere.
 *
 * Frames are functions, innermost inlined ones above their callers; frames
 * without symbols show as exe+0xaddr. The tree is bounded by max_nodes:
 * samples that would need more nodes are counted in a "[truncated]" child.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "common/grow.h"
#include "common/htab.h"
#include "component.h"
#include "common/config.h"
#include "core/accounting.h"
#include "core/model.h"
#include "core/runtime.h"
#include "local.h"
#include "common/log.h"
#include "common/macro.h"

#define FG_FRAME_HEIGHT 16
#define FG_FONT_SIZE	12
/* Frames narrower than this many pixels are not drawn (their samples still count in their parents). */
#define FG_MIN_WIDTH_PX 0.1
/* Deepest stack drawn; deeper frames are folded into their ancestor at this depth. */
#define FG_MAX_DEPTH 1024

struct fg_config {
	char *path;
	char *title;
	uint64_t width;
	uint64_t max_nodes;
	char **group_by;
	uint32_t n_group_by;
};

static const struct sr_field fg_fields[] = {
	SR_FIELD_STR("path", struct fg_config, path, .required = true,
		     .doc = "The SVG file, rewritten (atomically) after every batch. Off-CPU samples get their own "
			    "graph, weighed in time waited, next to it: flame.svg -> flame.off_cpu.svg."),
	SR_FIELD_STR("title", struct fg_config, title, .def = "stackrelay CPU flame graph",
		     .doc = "Heading of the graph."),
	SR_FIELD_U64("width", struct fg_config, width, .def = "1200", .doc = "Width in pixels.", .min = 200,
		     .max = 20000),
	SR_FIELD_U64("max_nodes", struct fg_config, max_nodes, .def = "200000",
		     .doc = "Most distinct frames (tree nodes) kept; more are counted as [truncated].", .min = 16,
		     .max = 100000000),
	SR_FIELD_STRLIST("group_by", struct fg_config, group_by, n_group_by,
			 .def = "[service.name, process.executable.name]", .max = 8,
			 .doc = "Resource attributes tried in order; the first one a profile has becomes the frame "
				"under `all`, so each service or program gets its own tower. Empty: no grouping."),
	SR_FIELD_END,
};

struct fg_node {
	uint32_t parent;
	uint32_t name;			    /* in the string table */
	uint32_t kind;			    /* 0 user, 1 kernel, 2 unsymbolized, 3 root/truncated */
	uint32_t first_child, next_sibling; /* built at render time */
	uint64_t total;
};

struct flamegraph {
	struct gw_component *c;
	const struct fg_config *cfg;
	struct gw_strtab names;
	struct fg_node *nodes;
	uint32_t n_nodes, cap_nodes;
	struct sr_htab children; /* (parent, name) → node: struct fg_slot */
	uint64_t truncated;
	uint64_t renders;
	/*
	 * Off-CPU samples get a graph of their own, weighed in nanoseconds
	 * waited instead of samples: a second tree, made at the first of them,
	 * drawn next to the first file (flame.svg -> flame.off_cpu.svg).
	 */
	bool off_cpu; /* this tree is the off-CPU one */
	struct flamegraph *off_cpu_tree;
	char *path, *title; /* where and under what heading this tree is drawn */
};

static uint64_t key_hash(uint32_t parent, uint32_t name)
{
	uint64_t k = ((uint64_t)parent << 32) | name;

	return XXH3_64bits(&k, sizeof(k));
}

struct fg_slot {
	uint64_t hash; /* the table's */
	uint32_t node;
	uint32_t pad;
};

struct fg_key {
	const struct flamegraph *g;
	uint32_t parent, name;
};

static bool slot_eq(const void *slot, const void *key)
{
	const struct fg_key *k = key;
	const struct fg_node *n = &k->g->nodes[((const struct fg_slot *)slot)->node];

	return n->parent == k->parent && n->name == k->name;
}

/* The child of parent named name (created when new); 0 when the tree is full or on ENOMEM. */
static uint32_t child(struct flamegraph *g, uint32_t parent, uint32_t name, uint32_t kind)
{
	struct fg_key k = { g, parent, name };
	uint64_t hash = key_hash(parent, name);
	struct fg_slot *s = sr_htab__find(&g->children, hash, &k, slot_eq);

	if (s)
		return s->node;
	if (g->n_nodes >= g->cfg->max_nodes)
		return 0;
	if (sr_grow_u32((void **)&g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof(*g->nodes), 1) < 0 ||
	    sr_htab__add(&g->children, hash, (void **)&s) < 0)
		return 0;
	g->nodes[g->n_nodes] = (struct fg_node){ .parent = parent, .name = name, .kind = kind };
	s->node = g->n_nodes;
	return g->n_nodes++;
}

/* The node of the first group_by attribute the resource has, under the root; 0 (the root) without one. */
static uint32_t group_node(struct flamegraph *g, const struct gw_resource *res)
{
	for (uint32_t i = 0; i < g->cfg->n_group_by; i++) {
		const char *v = gw_resource__string(res, g->cfg->group_by[i]);
		int64_t ni;

		if (!v || !v[0])
			continue;
		ni = gw_strtab__intern(&g->names, v);
		return ni < 0 ? 0 : child(g, 0, (uint32_t)ni, 3);
	}
	return 0;
}

static void add_sample(struct flamegraph *g, uint32_t group, const struct gw_sample *s)
{
	const struct gw_stack *st = s->stack;
	uint32_t node = group, depth = 0;
	uint64_t w = g->off_cpu ? s->off_cpu_ns : s->count;
	char buf[160];

	g->nodes[0].total += w;
	if (group)
		g->nodes[group].total += w;
	/* Root first: the stack is leaf first, and a location's lines innermost first. */
	for (uint32_t i = st->n_locations; i-- > 0 && depth < FG_MAX_DEPTH;) {
		const struct gw_location *l = gw_stack__location(st, i);
		const struct gw_lines *lines = gw_location__lines(l);
		uint32_t kind = gw_location__kind(l) == GW_FRAME_KERNEL		   ? 1
				: gw_frame_kind_has_function(gw_location__kind(l)) ? 4
										   : 0;

		for (uint32_t k = lines ? lines->n : 1; k-- > 0 && depth < FG_MAX_DEPTH;) {
			const char *name;
			int64_t ni;
			uint32_t next;

			if (lines && lines->lines[k].function[0]) {
				name = lines->lines[k].function;
			} else {
				gw_location_fallback_name(l, buf, sizeof(buf));
				name = buf;
				kind = 2;
			}
			ni = gw_strtab__intern(&g->names, name);
			next = ni < 0 ? 0 : child(g, node, (uint32_t)ni, kind);
			if (!next) {
				/* Full: count the rest of this stack in "[truncated]" under the last frame we have. */
				int64_t ti = gw_strtab__intern(&g->names, "[truncated]");

				g->truncated += w;
				next = ti < 0 ? 0 : child(g, node, (uint32_t)ti, 3);
				if (next)
					g->nodes[next].total += w;
				return;
			}
			node = next;
			g->nodes[node].total += w;
			depth++;
		}
	}
}

/* ---- rendering ---- */

struct out {
	char *buf;
	size_t len, cap;
	int err;
};

static void SR_PRINTF(2, 3) put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (o->err)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			o->err = -EINVAL;
			return;
		}
		if ((size_t)n < o->cap - o->len) {
			o->len += (size_t)n;
			return;
		}
		if (sr_grow((void **)&o->buf, &o->cap, o->len + (size_t)n + 1, 1, 65536) < 0) {
			o->err = -ENOMEM;
			return;
		}
	}
}

/* XML-escapes s into o. */
static void put_escaped(struct out *o, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '<':
			put(o, "&lt;");
			break;
		case '>':
			put(o, "&gt;");
			break;
		case '&':
			put(o, "&amp;");
			break;
		case '"':
			put(o, "&quot;");
			break;
		default:
			if ((unsigned char)*s < 0x20)
				put(o, "?");
			else
				put(o, "%c", *s);
		}
	}
}

static void color(const char *name, uint32_t kind, char *buf, size_t size)
{
	uint32_t h = (uint32_t)XXH3_64bits(name, strlen(name));
	unsigned r, gr, b;

	switch (kind) {
	case 1: /* kernel: orange */
		r = 230 + h % 25;
		gr = 130 + (h >> 8) % 60;
		b = 40 + (h >> 16) % 30;
		break;
	case 2: /* unsymbolized: grey */
		r = gr = b = 170 + h % 40;
		break;
	case 3:
		r = gr = 220;
		b = 220;
		break;
	case 4: /* interpreted and JIT code the agent named: aqua */
		r = 50 + h % 60;
		gr = 190 + (h >> 8) % 55;
		b = 190 + (h >> 16) % 55;
		break;
	default: /* user: the classic warm palette */
		r = 205 + h % 50;
		gr = (h >> 8) % 180;
		b = (h >> 16) % 55;
	}
	snprintf(buf, size, "rgb(%u,%u,%u)", r, gr, b);
}

static const char fg_script[] =
	"<script type=\"text/ecmascript\"><![CDATA[\n"
	"'use strict';\n"
	"var W, frames, details, matched, searching = null;\n"
	"function init() {\n"
	"  W = +document.documentElement.getAttribute('data-width');\n"
	"  frames = Array.prototype.slice.call(document.querySelectorAll('g.f'));\n"
	"  details = document.getElementById('details'); matched = document.getElementById('matched');\n"
	"  frames.forEach(function (g) {\n"
	"    g.addEventListener('click', function () { zoom(g); });\n"
	"    g.addEventListener('mouseover', function () { details.textContent = g.querySelector('title').textContent; "
	"});\n"
	"    g.addEventListener('mouseout', function () { details.textContent = ' '; });\n"
	"  });\n"
	"  document.getElementById('reset').addEventListener('click', function () { zoom(frames[0]); });\n"
	"  document.getElementById('search').addEventListener('click', search);\n"
	"  layout(0, +frames[0].getAttribute('data-w'), 0);\n"
	"}\n"
	"function label(g, w) {\n"
	"  var t = g.querySelector('text'), n = g.getAttribute('data-n'), fit = Math.floor((w - 6) / 7);\n"
	"  t.textContent = fit < 3 ? '' : (n.length <= fit ? n : n.substring(0, fit - 2) + '..');\n"
	"}\n"
	"function layout(x0, w0, d0) {\n"
	"  var s = (W - 20) / w0;\n"
	"  frames.forEach(function (g) {\n"
	"    var x = +g.getAttribute('data-x'), w = +g.getAttribute('data-w'), d = +g.getAttribute('data-d');\n"
	"    var r = g.querySelector('rect'), t = g.querySelector('text');\n"
	"    var inside = x >= x0 && x + w <= x0 + w0 + 1e-9, above = d >= d0;\n"
	"    var ancestor = d < d0 && x <= x0 && x + w >= x0 + w0 - 1e-9;\n"
	"    if (!(inside && above) && !ancestor) { g.style.display = 'none'; return; }\n"
	"    g.style.display = '';\n"
	"    var nx = ancestor ? 10 : 10 + (x - x0) * s, nw = ancestor ? W - 20 : w * s;\n"
	"    r.setAttribute('x', nx); r.setAttribute('width', Math.max(nw - 1, 0));\n"
	"    t.setAttribute('x', nx + 3); label(g, nw);\n"
	"    g.style.opacity = ancestor && d0 > 0 ? 0.6 : 1;\n"
	"  });\n"
	"}\n"
	"function zoom(g) {\n"
	"  layout(+g.getAttribute('data-x'), +g.getAttribute('data-w'), +g.getAttribute('data-d'));\n"
	"}\n"
	"function search() {\n"
	"  var term = window.prompt('Search (regular expression)', searching || '');\n"
	"  if (term === null) return;\n"
	"  searching = term || null;\n"
	"  var re = searching ? new RegExp(searching) : null, total = +frames[0].getAttribute('data-w'), hit = [];\n"
	"  frames.forEach(function (g) {\n"
	"    var r = g.querySelector('rect'), on = re && re.test(g.getAttribute('data-n'));\n"
	"    r.setAttribute('fill', on ? 'rgb(230,0,230)' : g.getAttribute('data-c'));\n"
	"    if (on) hit.push(g);\n"
	"  });\n"
	"  var sum = 0, end = -1;\n"
	"  hit.sort(function (a, b) { return a.getAttribute('data-x') - b.getAttribute('data-x'); })\n"
	"     .forEach(function (g) { var x = +g.getAttribute('data-x'); if (x >= end) { sum += "
	"+g.getAttribute('data-w');\n"
	"       end = x + +g.getAttribute('data-w'); } });\n"
	"  matched.textContent = re ? 'Matched: ' + (100 * sum / total).toFixed(1) + '%' : '';\n"
	"}\n"
	"window.addEventListener('load', init);\n"
	"]]></script>\n";

static int cmp_child(const void *a, const void *b, void *userdata)
{
	const struct flamegraph *g = userdata;
	const struct fg_node *x = &g->nodes[*(const uint32_t *)a], *y = &g->nodes[*(const uint32_t *)b];

	return strcmp(g->names.s[x->name], g->names.s[y->name]);
}

static int render(struct flamegraph *g, struct out *o)
{
	uint64_t total = g->nodes[0].total;
	double width = (double)g->cfg->width, scale;
	uint32_t *order = NULL, *stack = NULL, *child_start = NULL, *children = NULL;
	uint64_t *x = NULL;
	uint32_t *depth = NULL, max_depth = 0, n = g->n_nodes;
	int r = 0;

	scale = total ? (width - 20) / (double)total : 0;
	/* Children lists sorted by name (a flame graph orders siblings alphabetically, not by time). */
	child_start = calloc(n + 1, sizeof(*child_start));
	children = calloc(n, sizeof(*children));
	x = calloc(n, sizeof(*x));
	depth = calloc(n, sizeof(*depth));
	stack = calloc(n, sizeof(*stack));
	order = calloc(n, sizeof(*order));
	if (!child_start || !children || !x || !depth || !stack || !order) {
		r = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 1; i < n; i++)
		child_start[g->nodes[i].parent + 1]++;
	for (uint32_t i = 0; i < n; i++)
		child_start[i + 1] += child_start[i];
	{
		uint32_t *fill = calloc(n, sizeof(*fill));

		if (!fill) {
			r = -ENOMEM;
			goto out;
		}
		for (uint32_t i = 1; i < n; i++) {
			uint32_t p = g->nodes[i].parent;

			children[child_start[p] + fill[p]++] = i;
		}
		free(fill);
	}
	for (uint32_t i = 0; i < n; i++)
		qsort_r(children + child_start[i], child_start[i + 1] - child_start[i], sizeof(uint32_t), cmp_child, g);
	/* Positions (in samples) by a depth-first walk; depth of each node. */
	{
		uint32_t sp = 0, k = 0;

		stack[sp++] = 0;
		while (sp) {
			uint32_t v = stack[--sp];
			uint64_t cx = x[v];

			order[k++] = v;
			max_depth = SR_MAX(max_depth, depth[v]);
			for (uint32_t c = child_start[v]; c < child_start[v + 1]; c++) {
				uint32_t w = children[c];

				x[w] = cx;
				depth[w] = depth[v] + 1;
				cx += g->nodes[w].total;
			}
			for (uint32_t c = child_start[v + 1]; c-- > child_start[v];)
				stack[sp++] = children[c];
		}
	}
	{
		unsigned height = (max_depth + 1) * FG_FRAME_HEIGHT + 90;
		char title[512];

		put(o,
		    "<?xml version=\"1.0\" standalone=\"no\"?>\n"
		    "<svg version=\"1.1\" width=\"%u\" height=\"%u\" viewBox=\"0 0 %u %u\" "
		    "xmlns=\"http://www.w3.org/2000/svg\" data-width=\"%u\">\n",
		    (unsigned)width, height, (unsigned)width, height, (unsigned)width);
		put(o,
		    "<style>text{font-family:Verdana,sans-serif;font-size:%dpx;fill:#000}"
		    "g.f:hover rect{stroke:#000;stroke-width:0.5;cursor:pointer}"
		    "#title{font-size:17px;text-anchor:middle}.button{fill:#06c;cursor:pointer}</style>\n",
		    FG_FONT_SIZE);
		put(o, "%s", fg_script);
		put(o, "<rect x=\"0\" y=\"0\" width=\"100%%\" height=\"100%%\" fill=\"#f8f8f8\"/>\n");
		snprintf(title, sizeof(title), "%s", g->title ? g->title : "");
		put(o, "<text id=\"title\" x=\"%u\" y=\"24\">", (unsigned)width / 2);
		put_escaped(o, title);
		put(o,
		    "</text>\n<text id=\"reset\" class=\"button\" x=\"10\" y=\"24\">Reset Zoom</text>\n"
		    "<text id=\"search\" class=\"button\" x=\"%u\" y=\"24\">Search</text>\n"
		    "<text id=\"matched\" x=\"%u\" y=\"%u\"> </text>\n"
		    "<text id=\"details\" x=\"10\" y=\"%u\"> </text>\n",
		    (unsigned)width - 60, (unsigned)width - 160, height - 10, height - 10);
		for (uint32_t k = 0; k < n; k++) {
			uint32_t v = order[k];
			const struct fg_node *nd = &g->nodes[v];
			const char *name = v == 0 ? "all" : g->names.s[nd->name];
			double px = 10 + (double)x[v] * scale, pw = (double)nd->total * scale;
			unsigned y = height - 40 - (depth[v] + 1) * FG_FRAME_HEIGHT;
			char fill[32];

			if (pw < FG_MIN_WIDTH_PX && v != 0)
				continue;
			color(name, v == 0 ? 3 : nd->kind, fill, sizeof(fill));
			put(o,
			    "<g class=\"f\" data-x=\"%" PRIu64 "\" data-w=\"%" PRIu64
			    "\" data-d=\"%u\" data-c=\"%s\" data-n=\"",
			    x[v], nd->total, depth[v], fill);
			put_escaped(o, name);
			put(o, "\"><title>");
			put_escaped(o, name);
			if (g->off_cpu)
				put(o, " (%.3f ms off CPU", (double)nd->total / 1e6);
			else
				put(o, " (%" PRIu64 " samples", nd->total);
			put(o,
			    ", %.2f%%)</title><rect x=\"%.1f\" y=\"%u\" width=\"%.1f\" height=\"%u\" "
			    "fill=\"%s\" rx=\"2\"/><text x=\"%.1f\" y=\"%u\"></text></g>\n",
			    total ? 100.0 * (double)nd->total / (double)total : 0.0, px, y, pw > 1 ? pw - 1 : pw,
			    FG_FRAME_HEIGHT - 1, fill, px + 3, y + FG_FRAME_HEIGHT - 4);
		}
		put(o, "</svg>\n");
	}
	r = o->err;
out:
	free(order);
	free(stack);
	free(child_start);
	free(children);
	free(x);
	free(depth);
	return r;
}

static void tree_free(struct flamegraph *g)
{
	if (!g)
		return;
	tree_free(g->off_cpu_tree);
	gw_strtab_free(&g->names);
	free(g->nodes);
	sr_htab_done(&g->children);
	free(g->path);
	free(g->title);
	free(g);
}

/* An empty tree drawn into path under title (both copied); NULL on ENOMEM. */
static struct flamegraph *tree_new(struct gw_component *c, const char *path, const char *title, bool off_cpu)
{
	struct flamegraph *g = calloc(1, sizeof(*g));
	int r;

	if (!g)
		return NULL;
	g->c = c;
	g->cfg = c->config;
	g->off_cpu = off_cpu;
	r = gw_strtab_init(&g->names);
	sr_htab_init(&g->children, sizeof(struct fg_slot), slot_eq);
	g->cap_nodes = 1024;
	g->nodes = calloc(g->cap_nodes, sizeof(*g->nodes));
	g->path = strdup(path);
	g->title = strdup(title ? title : "");
	if (r < 0 || !g->nodes || !g->path || !g->title) {
		/* tree_free() takes a half-built tree (the string table included: a failed init leaves it freeable). */
		tree_free(g);
		return NULL;
	}
	g->n_nodes = 1; /* the root, "all" */
	g->nodes[0].kind = 3;
	return g;
}

/* The off-CPU tree, made at its first sample: flame.svg -> flame.off_cpu.svg, "<title> (off-CPU time)". */
static struct flamegraph *off_cpu_tree(struct flamegraph *g)
{
	size_t n = strlen(g->path);
	char *path, *title;

	if (g->off_cpu_tree)
		return g->off_cpu_tree;
	if (n >= 4 && strcmp(g->path + n - 4, ".svg") == 0)
		n -= 4;
	if (asprintf(&path, "%.*s.off_cpu.svg", (int)n, g->path) < 0)
		return NULL;
	if (asprintf(&title, "%s (off-CPU time)", g->title) < 0) {
		free(path);
		return NULL;
	}
	g->off_cpu_tree = tree_new(g->c, path, title, true);
	free(path);
	free(title);
	return g->off_cpu_tree;
}

static int write_tree(struct flamegraph *g)
{
	struct out o = { 0 };
	int r = render(g, &o);

	if (r == 0)
		r = gw_write_file_atomic(g->path, o.buf, o.len);
	free(o.buf);
	if (r < 0) {
		/* The samples are in the tree: the next successful write shows them. */
		sr_log_error(g->c->id, "could not write the flame graph", "path=%s error=%s", g->path, strerror(-r));
	}
	g->renders++;
	return r;
}

static int fg_consume(struct gw_component *c, struct gw_profiles *p)
{
	struct flamegraph *g = c->state, *t;
	uint64_t total = p->total_count, lost = 0;
	bool cpu = false, off = false;

	gw_profiles_foreach_resource(p, res)
	{
		bool is_off = res->profile_type == GW_PROFILE_OFF_CPU;
		uint32_t group;

		t = is_off ? off_cpu_tree(g) : g;
		if (!t) {
			lost += res->total_count;
			continue;
		}
		group = group_node(t, res);
		gw_resource_foreach_sample(res, s) add_sample(t, group, s);
		off |= is_off;
		cpu |= !is_off;
	}
	gw_profiles__unref(p);
	/* A graph is drawn once it has had samples: a CPU-only pipeline writes no empty off-CPU file. */
	if (cpu || !off)
		write_tree(g);
	if (off)
		write_tree(g->off_cpu_tree);
	if (lost) {
		sr_log_error(c->id, "out of memory for the off-CPU flame graph; its samples dropped",
			     "samples=%" PRIu64, lost);
		gw_component_drop_samples(c, "out_of_memory", lost);
	}
	gw_component_exported(c, total - lost);
	return 0;
}

static int fg_create(struct gw_component *c)
{
	const struct fg_config *cfg = c->config;

	c->state = tree_new(c, cfg->path, cfg->title, false);
	return c->state ? 0 : -ENOMEM;
}

static const char *const fg_drops[] = { "out_of_memory", NULL };

static int fg_start(struct gw_component *c)
{
	gw_component_declare_drops(c, fg_drops);
	return 0;
}

static void fg_shutdown(struct gw_component *c, void (*done)(struct gw_component *c))
{
	done(c);
}

static void fg_destroy(struct gw_component *c)
{
	tree_free(c->state);
	c->state = NULL;
}

const struct gw_component_type gw_exporter_flamegraph = {
	.name = "flamegraph",
	.kind = GW_EXPORTER,
	.doc = "Keeps a call tree of all samples and rewrites a self-contained interactive SVG flame graph (zoom, "
	       "search, tooltips) after every batch.",
	.config_fields = fg_fields,
	.config_size = sizeof(struct fg_config),
	.create = fg_create,
	.start = fg_start,
	.consume = fg_consume,
	.shutdown = fg_shutdown,
	.destroy = fg_destroy,
};
