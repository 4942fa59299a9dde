#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
//
// An independent fake of the Kubernetes API server, for tests of the
// gateway's k8s client. Node.js built-ins only. It serves what a real
// apiserver serves for the requests stackrelay makes, with the real JSON
// shapes:
//   GET /api/v1/pods, /api/v1/namespaces/{ns}/pods, /api/v1/namespaces,
//       /api/v1/nodes, /apis/apps/v1/replicasets
//     LIST: ?limit=N&continue=T -> v1 XList with metadata.resourceVersion and
//           metadata.continue; an expired continue token -> 410 Status
//           (reason Expired); ReplicaSets honour the metadata-only Accept
//           header (PartialObjectMetadataList, meta.k8s.io/v1).
//     WATCH: ?watch=1&resourceVersion=RV&allowWatchBookmarks=true&timeoutSeconds=S
//           -> chunked stream of {"type":..., "object":...}\n lines, ADDED /
//           MODIFIED / DELETED / BOOKMARK, and ERROR with a 410 Status when
//           RV is older than the compaction point; ended after S seconds.
//   fieldSelector spec.nodeName=X and labelSelector k=v are applied to pods.
// TLS with a certificate issued by a test CA made with the openssl CLI; every
// request must carry "Authorization: Bearer <token>" where the token is the
// current content of DIR/accepted-token (401 Status otherwise).
//
// Usage: fake-kube-apiserver.js --dir DIR [--port 0] [--state FILE.json] [--http2]
// With --http2 it serves HTTP/2 (ALPN h2, as a real apiserver) and HTTP/1.1.
// Prints "ready PORT" on stdout once listening. Reads commands from stdin,
// one JSON object per line (see handleCommand); exits when stdin closes.
// Every request is logged to stderr as "req METHOD URL -> STATUS".
'use strict';

const https = require('https');
const http2 = require('http2');
const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');
const readline = require('readline');

function arg(name, def) {
	const i = process.argv.indexOf('--' + name);
	return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1] : def;
}

const dir = arg('dir');
if (!dir) {
	process.stderr.write('usage: fake-kube-apiserver.js --dir DIR [--port N] [--state FILE]\n');
	process.exit(2);
}

// ---- certificates (openssl CLI) ----
function ensureCerts() {
	const p = (f) => path.join(dir, f);
	if (fs.existsSync(p('server.crt')))
		return;
	const run = (args) => execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
	run(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2',
		'-subj', '/CN=stackrelay-test-ca', '-keyout', p('ca.key'), '-out', p('ca.crt')]);
	run(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-subj', '/CN=kube-apiserver',
		'-keyout', p('server.key'), '-out', p('server.csr')]);
	fs.writeFileSync(p('server.ext'), 'subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost\n' +
		'extendedKeyUsage=serverAuth\n');
	run(['x509', '-req', '-in', p('server.csr'), '-CA', p('ca.crt'), '-CAkey', p('ca.key'), '-CAcreateserial',
		'-days', '2', '-extfile', p('server.ext'), '-out', p('server.crt')]);
}

// ---- object store ----
let rv = 1000;            // cluster-wide resourceVersion counter
let compactedRv = 0;      // watches from an older RV get 410
const expiredContinue = new Set(); // continue tokens answered with 410
let expireNextContinue = false;
let listCounter = 0;
const protocols = { h2: 0, http1: 0 }; // requests served per protocol
const kinds = {
	pods: { list: 'PodList', kind: 'Pod', apiVersion: 'v1', items: new Map() },
	namespaces: { list: 'NamespaceList', kind: 'Namespace', apiVersion: 'v1', items: new Map() },
	nodes: { list: 'NodeList', kind: 'Node', apiVersion: 'v1', items: new Map() },
	replicasets: { list: 'ReplicaSetList', kind: 'ReplicaSet', apiVersion: 'apps/v1', items: new Map() },
};
const watchers = new Set(); // {res, resource, match, timer}
let disconnectNext = false;
let downUntil = 0; // "down": every request answered 503 until then
const forbidden = new Set(); // resources answered with 403 (RBAC without them)

// An abrupt disconnect: the socket goes away without the terminating chunk.
function cut(w) {
	watchers.delete(w);
	clearTimeout(w.timer);
	if (w.res.stream)
		w.res.stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR); // HTTP/2: RST_STREAM, the connection lives on
	else
		w.res.socket.destroy();
}

function key(obj) {
	return (obj.metadata.namespace || '') + '/' + obj.metadata.name;
}

function fill(resource, obj) {
	const k = kinds[resource];
	obj.kind = k.kind;
	obj.apiVersion = k.apiVersion;
	obj.metadata = obj.metadata || {};
	obj.metadata.uid = obj.metadata.uid || ('uid-' + resource + '-' + obj.metadata.name);
	obj.metadata.creationTimestamp = obj.metadata.creationTimestamp || '2026-11-21T07:00:00Z';
	// A realistic amount of noise the client must skip.
	obj.metadata.managedFields = [{ manager: 'kubelet', operation: 'Update', apiVersion: 'v1',
		fieldsType: 'FieldsV1', fieldsV1: { 'f:status': { 'f:conditions': { 'k:{"type":"Ready"}': {} } } } }];
	return obj;
}

// Every change, so a watch from resourceVersion RV replays what came after RV
// (as etcd's watch does) until compaction.
const history = [];

function change(type, resource, obj) {
	const k = kinds[resource];
	rv++;
	obj.metadata.resourceVersion = String(rv);
	if (type === 'DELETED')
		k.items.delete(key(obj));
	else
		k.items.set(key(obj), obj);
	history.push({ rv, type, resource, obj: JSON.parse(JSON.stringify(obj)) });
	for (const w of watchers)
		if (w.resource === resource && w.match(obj))
			send(w, { type, object: view(w, obj) });
}

function send(w, ev) {
	w.res.write(JSON.stringify(ev) + '\n');
}

// Metadata-only view for PartialObjectMetadata requests.
function view(w, obj) {
	if (!w.partial)
		return obj;
	return { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: obj.metadata };
}

function status(res, code, reason, message) {
	const body = JSON.stringify({ kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message,
		reason, code });
	res.writeHead(code, { 'Content-Type': 'application/json' });
	res.end(body);
	return code;
}

function selectorMatch(url, resource) {
	const fsel = url.searchParams.get('fieldSelector');
	const lsel = url.searchParams.get('labelSelector');
	const ns = url.nsFilter;
	return (obj) => {
		if (ns && obj.metadata.namespace !== ns)
			return false;
		if (fsel)
			for (const term of fsel.split(',')) {
				const m = term.match(/^([^!=]+)(!?=)(.*)$/);
				if (!m)
					continue;
				let v;
				if (m[1] === 'spec.nodeName')
					v = (obj.spec || {}).nodeName || '';
				else if (m[1] === 'metadata.name')
					v = obj.metadata.name;
				else if (m[1] === 'metadata.namespace')
					v = obj.metadata.namespace;
				else
					continue;
				if ((m[2] === '=') !== (v === m[3]))
					return false;
			}
		if (lsel)
			for (const term of lsel.split(',')) {
				const labels = obj.metadata.labels || {};
				let m;
				if ((m = term.match(/^([^!=]+)!=(.*)$/))) {
					if (labels[m[1]] === m[2])
						return false;
				} else if ((m = term.match(/^([^!=]+)=(.*)$/))) {
					if (labels[m[1]] !== m[2])
						return false;
				} else if (term.startsWith('!')) {
					if (term.slice(1) in labels)
						return false;
				} else if (!(term in labels)) {
					return false;
				}
			}
		return true;
	};
}

function handleList(req, res, url, resource, partial) {
	const k = kinds[resource];
	const limit = parseInt(url.searchParams.get('limit') || '0', 10);
	const cont = url.searchParams.get('continue');
	let offset = 0, listRv = String(rv);
	if (cont && !cont.match(/^[A-Za-z0-9+/=]+$/))
		return status(res, 400, 'BadRequest', 'invalid continue token');
	if (cont) {
		if (expiredContinue.has(cont))
			return status(res, 410, 'Expired', 'The provided continue parameter is too old to display a ' +
				'consistent list result. You can start a new list without the continue parameter.');
		const dec = JSON.parse(Buffer.from(cont, 'base64').toString());
		offset = dec.start;
		listRv = dec.rv;
	}
	const match = selectorMatch(url, resource);
	const all = [...k.items.values()].filter(match).sort((a, b) => key(a) < key(b) ? -1 : 1);
	const page = limit > 0 ? all.slice(offset, offset + limit) : all.slice(offset);
	const meta = { resourceVersion: listRv };
	if (limit > 0 && offset + limit < all.length) {
		// Each list gets its own tokens (as the real server's, which name the list's snapshot).
		meta.continue = Buffer.from(JSON.stringify({ start: offset + limit, rv: listRv, list: ++listCounter }))
			.toString('base64');
		meta.remainingItemCount = all.length - offset - limit;
		if (expireNextContinue) {
			expiredContinue.add(meta.continue);
			expireNextContinue = false;
		}
	}
	const body = partial
		? { kind: 'PartialObjectMetadataList', apiVersion: 'meta.k8s.io/v1', metadata: meta,
			items: page.map((o) => ({ kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1',
				metadata: o.metadata })) }
		: { kind: k.list, apiVersion: k.apiVersion, metadata: meta, items: page };
	res.writeHead(200, { 'Content-Type': 'application/json' });
	res.end(JSON.stringify(body));
	return 200;
}

function handleWatch(req, res, url, resource, partial) {
	const from = parseInt(url.searchParams.get('resourceVersion') || '0', 10);
	const timeout = parseInt(url.searchParams.get('timeoutSeconds') || '1800', 10);
	// The real apiserver sends the headers at once, before any event (HTTP/2 frames its own data).
	if (req.httpVersionMajor >= 2) {
		res.writeHead(200, { 'Content-Type': 'application/json' });
	} else {
		res.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' });
		res.flushHeaders();
	}
	const w = { res, resource, partial, match: selectorMatch(url, resource) };
	if (from && from < compactedRv) {
		// What a real apiserver does for a too-old resourceVersion: 200, then an ERROR event.
		send(w, { type: 'ERROR', object: { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure',
			message: 'too old resource version: ' + from + ' (' + compactedRv + ')', reason: 'Expired',
			code: 410 } });
		res.end();
		return 200;
	}
	for (const h of history)
		if (h.rv > from && h.resource === resource && w.match(h.obj))
			send(w, { type: h.type, object: view(w, h.obj) });
	watchers.add(w);
	w.timer = setTimeout(() => { watchers.delete(w); res.end(); }, timeout * 1000);
	res.on('close', () => { clearTimeout(w.timer); watchers.delete(w); });
	if (url.searchParams.get('allowWatchBookmarks') === 'true')
		w.bookmarks = true;
	if (disconnectNext) {
		disconnectNext = false;
		// After the headers and one event, as a proxy dropping the connection would.
		send(w, { type: 'BOOKMARK', object: { kind: kinds[resource].kind, apiVersion: 'v1',
			metadata: { resourceVersion: String(rv) } } });
		setTimeout(() => cut(w), 50);
	}
	return 200;
}

const routes = [
	[/^\/api\/v1\/pods$/, 'pods'],
	[/^\/api\/v1\/namespaces\/([^/]+)\/pods$/, 'pods'],
	[/^\/api\/v1\/namespaces$/, 'namespaces'],
	[/^\/api\/v1\/nodes$/, 'nodes'],
	[/^\/apis\/apps\/v1\/replicasets$/, 'replicasets'],
];

function acceptedToken() {
	try {
		return fs.readFileSync(path.join(dir, 'accepted-token'), 'utf8').trim();
	} catch (e) {
		return null;
	}
}

function handle(req, res) {
	const url = new URL(req.url, 'https://localhost');
	let code = 404;
	const tok = acceptedToken();
	if (Date.now() < downUntil) {
		code = 503;
		status(res, 503, 'ServiceUnavailable', 'the server is currently unable to handle the request');
	} else if (tok !== null && req.headers.authorization !== 'Bearer ' + tok) {
		code = 401;
		status(res, 401, 'Unauthorized', 'Unauthorized');
	} else {
		let resource = null;
		for (const [re, r] of routes) {
			const m = url.pathname.match(re);
			if (m) {
				resource = r;
				url.nsFilter = m[1] ? decodeURIComponent(m[1]) : null;
				break;
			}
		}
		if (!resource || req.method !== 'GET') {
			status(res, 404, 'NotFound', 'the server could not find the requested resource');
		} else if (forbidden.has(resource)) {
			code = status(res, 403, 'Forbidden', resource + ' is forbidden: User "system:serviceaccount:x:y" ' +
				'cannot list resource "' + resource + '" at the cluster scope');
		} else {
			const partial = resource === 'replicasets' &&
				/as=PartialObjectMetadataList/.test(req.headers.accept || '');
			code = url.searchParams.get('watch') === '1' || url.searchParams.get('watch') === 'true'
				? handleWatch(req, res, url, resource, partial)
				: handleList(req, res, url, resource, partial);
		}
	}
	protocols[req.httpVersionMajor >= 2 ? 'h2' : 'http1']++;
	process.stderr.write('req ' + req.method + ' ' + req.url + ' -> ' + code + ' HTTP/' + req.httpVersion + '\n');
}

// ---- test control (stdin) ----
// {"op":"add"|"modify"|"delete", "resource":"pods", "object":{...}}
// {"op":"bookmark"}                      BOOKMARK with the current RV to every watch
// {"op":"error410"}                      ERROR 410 to every watch, then end them; later watches from older RVs get it too
// {"op":"disconnect"}                    destroy every watch connection (no chunk terminator), or the next one
// {"op":"forbid","resource":"replicasets"} answer 403 for a resource (RBAC without it)
// {"op":"expire-next-continue"}          the next continue token issued is answered with 410
// {"op":"accept-token","token":"..."}    rotate the accepted token
// {"op":"down","seconds":S,"then410":true} answer 503 to everything for S seconds (open watches are cut);
//                                        with then410 the history is compacted when it ends, so the
//                                        watches resumed from before get 410 Gone and must list again
// {"op":"stats"}                         answers "ok stats {...}" (rv, open watches, pods, requests per protocol)
function handleCommand(line) {
	if (!line.trim())
		return;
	const c = JSON.parse(line);
	switch (c.op) {
	case 'add':
	case 'modify':
	case 'delete':
		change({ add: 'ADDED', modify: 'MODIFIED', delete: 'DELETED' }[c.op], c.resource || 'pods',
			fill(c.resource || 'pods', c.object));
		break;
	case 'bookmark':
		for (const w of watchers)
			if (w.bookmarks)
				send(w, { type: 'BOOKMARK', object: { kind: kinds[w.resource].kind, apiVersion: 'v1',
					metadata: { resourceVersion: String(rv), annotations: {
						'k8s.io/initial-events-end': 'true' } } } });
		break;
	case 'error410':
		compactedRv = rv;
		for (const w of [...watchers]) {
			send(w, { type: 'ERROR', object: { kind: 'Status', apiVersion: 'v1', metadata: {},
				status: 'Failure', message: 'too old resource version', reason: 'Expired', code: 410 } });
			watchers.delete(w);
			clearTimeout(w.timer);
			w.res.end();
		}
		break;
	case 'disconnect':
		// A test cannot know whether its client's watch request has arrived yet:
		// with none open, the next watch is cut instead.
		if (watchers.size === 0)
			disconnectNext = true;
		for (const w of [...watchers])
			cut(w);
		break;
	case 'down':
		downUntil = Date.now() + c.seconds * 1000;
		for (const w of [...watchers])
			cut(w);
		if (c.then410)
			setTimeout(() => { compactedRv = rv; }, c.seconds * 1000);
		break;
	case 'forbid':
		forbidden.add(c.resource);
		break;
	case 'expire-next-continue':
		expireNextContinue = true;
		break;
	case 'accept-token':
		fs.writeFileSync(path.join(dir, 'accepted-token'), c.token + '\n');
		break;
	case 'stats':
		process.stdout.write('ok stats ' + JSON.stringify({ rv, watchers: watchers.size,
			pods: kinds.pods.items.size, requests: protocols }) + '\n');
		return;
	default:
		process.stderr.write('fake-kube-apiserver: unknown op ' + c.op + '\n');
	}
	process.stdout.write('ok ' + c.op + '\n');
}

ensureCerts();
const state = arg('state');
if (state)
	for (const [resource, objs] of Object.entries(JSON.parse(fs.readFileSync(state, 'utf8'))))
		for (const o of objs)
			change('ADDED', resource, fill(resource, o));

const tlsOpts = {
	key: fs.readFileSync(path.join(dir, 'server.key')),
	cert: fs.readFileSync(path.join(dir, 'server.crt')),
};
const server = process.argv.includes('--http2')
	? http2.createSecureServer({ ...tlsOpts, allowHTTP1: true }, handle)
	: https.createServer(tlsOpts, handle);
if (!process.argv.includes('--http2'))
	server.keepAliveTimeout = 60000;
server.listen(parseInt(arg('port', '0'), 10), '127.0.0.1', () => {
	process.stdout.write('ready ' + server.address().port + '\n');
});
const rl = readline.createInterface({ input: process.stdin });
rl.on('line', (l) => {
	try {
		handleCommand(l);
	} catch (e) {
		process.stderr.write('fake-kube-apiserver: bad command: ' + e.message + '\n');
	}
});
rl.on('close', () => {
	for (const w of [...watchers])
		cut(w);
	server.close();
	process.exit(0);
});
