#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
//
// A fake stackrelay gateway for the agent sender's integration tests: Node's
// built-in http2 module and its own protobuf wire reader/writer (written from
// proto/stackrelay/v1/*.proto field numbers), independent of the C code under
// test. It implements the gateway's side of docs/agent-protocol.md: a
// definition store, missing_* answers, accepted counts, de-duplication by
// (instance_id, sequence), wanted_symbols, symbol probes (probe_symbols answered
// with wanted_symbols and symbols_pending); and it injects faults on a script.
//
//   fake-gateway.js --port-file F --state F [--host 127.0.0.1] [--port 0]
//       [--tls-cert F --tls-key F [--client-ca F]] [--token T]
//       [--reset-every N] [--lose-every N] [--unavailable-every N]
//       [--retry-after-every N] [--forget-every N] [--goaway-every N]
//       [--want-symbols] [--want-on-probe] [--probe-pending N] [--max-requests N]
//
// --want-symbols lists the executables of accepted samples in wanted_symbols
// (until their table arrives). --want-on-probe lists them only in answers to
// probes (PushRequest.probe_symbols), as a gateway does whose symbolizer had
// not looked at the samples when it answered them; --probe-pending N answers
// the first N probe requests with symbols_pending = the IDs probed and nothing
// wanted (a lookup still in progress).
//
// Request numbers count every POST to the Push path (1-based); "every N"
// faults hit requests N, 2N, ...:
//   reset        the stream is reset before the body is looked at
//   lose         the request is processed, then the connection is destroyed
//                without a response (the agent must resend the same sequence)
//   unavailable  503 with Retry-After: 1, nothing processed
//   retry-after  200 with retry_after_ms = 100, nothing processed
//   forget       the definition store is emptied first (a restart or another replica)
//   goaway       after answering, the session is closed (GOAWAY)
// The state file (JSON, rewritten after every request) holds the accounting.
'use strict';

const fs = require('fs');
const http2 = require('http2');
const zlib = require('zlib');

// ---- arguments ----
const opts = { host: '127.0.0.1', port: 0 };
{
	const a = process.argv.slice(2);
	for (let i = 0; i < a.length; i++) {
		const k = a[i].replace(/^--/, '');
		if (k === 'want-symbols' || k === 'want-on-probe') {
			opts[k === 'want-symbols' ? 'wantSymbols' : 'wantOnProbe'] = true;
			continue;
		}
		if (i + 1 >= a.length)
			throw new Error(`missing value for --${k}`);
		opts[k.replace(/-([a-z])/g, (_, c) => c.toUpperCase())] = a[++i];
	}
	for (const k of ['resetEvery', 'loseEvery', 'unavailableEvery', 'retryAfterEvery', 'forgetEvery',
			 'goawayEvery', 'maxRequests', 'port', 'probePending'])
		if (opts[k] !== undefined)
			opts[k] = Number(opts[k]);
}

// ---- protobuf wire format ----
class Reader {
	constructor(buf) {
		this.buf = buf;
		this.pos = 0;
	}
	eof() {
		return this.pos >= this.buf.length;
	}
	varint() {
		let result = 0n, shift = 0n;
		for (;;) {
			if (this.pos >= this.buf.length)
				throw new Error('truncated varint');
			const b = this.buf[this.pos++];
			result |= BigInt(b & 0x7f) << shift;
			if (!(b & 0x80))
				return result;
			shift += 7n;
			if (shift > 63n)
				throw new Error('varint too long');
		}
	}
	bytes() {
		const n = Number(this.varint());
		if (this.pos + n > this.buf.length)
			throw new Error('truncated length-delimited field');
		const b = this.buf.subarray(this.pos, this.pos + n);
		this.pos += n;
		return b;
	}
	skip(wt) {
		if (wt === 0)
			this.varint();
		else if (wt === 1)
			this.pos += 8;
		else if (wt === 2)
			this.bytes();
		else if (wt === 5)
			this.pos += 4;
		else
			throw new Error(`unsupported wire type ${wt}`);
		if (this.pos > this.buf.length)
			throw new Error('truncated field');
	}
}

// Schema: field number -> [name, kind, repeated?, sub-schema]. Kinds: u (varint), b (bytes),
// s (string), f64 (fixed64), m (message).
const S = {};
S.Frame = { 1: ['executable_id', 'b'], 2: ['address', 'u'], 3: ['kind', 'u'] };
S.StackDef = { 1: ['id', 'b'], 2: ['frames', 'm', true, 'Frame'], 3: ['truncated', 'u'] };
S.ExecutableDef = { 1: ['id', 'b'], 2: ['id_kind', 'u'], 3: ['file_name', 's'], 4: ['path', 's'],
		    5: ['file_size', 'u'], 6: ['gnu_build_id', 'b'], 7: ['debuglink', 's'], 8: ['is_go', 'u'] };
S.KernelModule = { 1: ['name', 's'], 2: ['start', 'u'], 3: ['size', 'u'], 4: ['build_id', 'b'] };
S.KernelDef = { 1: ['id', 'b'], 2: ['release', 's'], 3: ['build_id', 'b'], 4: ['boot_id', 's'],
		5: ['modules', 'm', true, 'KernelModule'] };
S.Sample = { 1: ['stack_id', 'b'], 2: ['pid', 'u'], 3: ['tid', 'u'], 4: ['thread_name', 's'],
	     5: ['process_name', 's'], 6: ['executable_path', 's'], 7: ['container_id', 's'], 8: ['count', 'u'],
	     9: ['start_time_unix_nano', 'f64'], 10: ['end_time_unix_nano', 'f64'], 11: ['process_start_ticks', 'u'],
	     12: ['kernel_id', 'b'], 13: ['pod_uid', 's'] };
S.DropCounters = { 1: ['ring_buffer_full', 'u'], 2: ['stack_errors', 'u'], 3: ['buffer_overflow', 'u'],
		   4: ['process_unknown', 'u'] };
S.AgentInfo = { 1: ['instance_id', 'b'], 2: ['host_name', 's'], 3: ['node_name', 's'], 4: ['version', 's'] };
S.Symbol = { 1: ['address', 'u'], 2: ['size', 'u'], 3: ['name', 's'] };
S.SymbolTable = { 1: ['executable_id', 'b'], 2: ['symbols', 'm', true, 'Symbol'], 3: ['sources', 's', true],
		  4: ['error', 's'] };
S.PushRequest = { 1: ['protocol_version', 'u'], 2: ['agent', 'm', false, 'AgentInfo'], 3: ['sequence', 'u'],
		  4: ['sampling_frequency_hz', 'u'], 5: ['samples', 'm', true, 'Sample'],
		  6: ['stacks', 'm', true, 'StackDef'], 7: ['executables', 'm', true, 'ExecutableDef'],
		  8: ['kernels', 'm', true, 'KernelDef'], 9: ['symbol_tables', 'm', true, 'SymbolTable'],
		  10: ['drops', 'm', false, 'DropCounters'], 11: ['probe_symbols', 'b', true] };

function decode(buf, schemaName) {
	const schema = S[schemaName], r = new Reader(buf), out = {};
	for (const f of Object.values(schema))
		if (f[2])
			out[f[0]] = [];
	while (!r.eof()) {
		const key = Number(r.varint()), num = key >>> 3, wt = key & 7, f = schema[num];
		if (!f) {
			r.skip(wt);
			continue;
		}
		const [name, kind, repeated, sub] = f;
		let v;
		if (kind === 'u') {
			if (wt !== 0)
				throw new Error(`${schemaName}.${name}: wire type ${wt}, want varint`);
			v = r.varint();
		} else if (kind === 'f64') {
			if (wt !== 1)
				throw new Error(`${schemaName}.${name}: wire type ${wt}, want fixed64`);
			v = r.buf.readBigUInt64LE(r.pos);
			r.pos += 8;
		} else {
			if (wt !== 2)
				throw new Error(`${schemaName}.${name}: wire type ${wt}, want length-delimited`);
			const b = r.bytes();
			v = kind === 'b' ? Buffer.from(b) : kind === 's' ? b.toString('utf8') : decode(b, sub);
		}
		if (repeated)
			out[name].push(v);
		else
			out[name] = v;
	}
	return out;
}

function varint(n) {
	let v = BigInt(n);
	const out = [];
	do {
		let b = Number(v & 0x7fn);
		v >>= 7n;
		if (v)
			b |= 0x80;
		out.push(b);
	} while (v);
	return Buffer.from(out);
}

function fieldVarint(num, v) {
	return Buffer.concat([varint((num << 3) | 0), varint(v)]);
}

function fieldBytes(num, b) {
	return Buffer.concat([varint((num << 3) | 2), varint(b.length), b]);
}

function encodeResponse(r) {
	const parts = [fieldVarint(1, 1)];
	parts.push(fieldVarint(2, r.accepted || 0n));
	for (const id of r.missingStacks || [])
		parts.push(fieldBytes(3, id));
	for (const id of r.missingExecutables || [])
		parts.push(fieldBytes(4, id));
	for (const id of r.missingKernels || [])
		parts.push(fieldBytes(5, id));
	for (const id of r.wanted || [])
		parts.push(fieldBytes(6, id));
	if (r.retryAfterMs)
		parts.push(fieldVarint(7, r.retryAfterMs));
	if (r.error)
		parts.push(fieldBytes(8, Buffer.from(r.error)));
	if (r.symbolsPending)
		parts.push(fieldVarint(9, r.symbolsPending));
	return Buffer.concat(parts);
}

// ---- gateway state ----
const hex = (b) => Buffer.from(b).toString('hex');
const store = { stacks: new Map(), executables: new Set(), kernels: new Set() };
const dedup = new Map(); // instance hex -> Map(sequence -> response buffer)
const symbolsDone = new Set();
const state = {
	requests: 0, processed: 0, duplicates: 0, resets: 0, lost: 0, unavailable: 0, retry_after: 0, forgets: 0,
	goaways: 0, auth_failures: 0, executable_paths: {}, bad_requests: 0, gzip_requests: 0, connections: 0, tls_client_subjects: [],
	probe_requests: 0, probes: 0, probes_wanted: 0, probes_pending: 0, probe_max_ids: 0,
	accepted: '0', refused_missing: '0', per_pid: {}, missing_answered: 0, definitions: { stacks: 0,
	executables: 0, kernels: 0 }, symbol_tables: {}, drops: {}, instances: [], sequences_seen: 0, errors: [],
};
let accepted = 0n, refusedMissing = 0n;

function saveState() {
	state.accepted = accepted.toString();
	state.refused_missing = refusedMissing.toString();
	if (!opts.state)
		return;
	fs.writeFileSync(opts.state + '.tmp', JSON.stringify(state, null, 1));
	fs.renameSync(opts.state + '.tmp', opts.state);
}

// Processes one decoded request as a gateway: learn definitions, check samples, accept, answer.
function processRequest(req) {
	for (const st of req.stacks)
		store.stacks.set(hex(st.id), st.frames.map((f) => [Number(f.kind || 0n), hex(f.executable_id || [])]));
	for (const e of req.executables) {
		store.executables.add(hex(e.id));
		state.executable_paths[hex(e.id)] = e.path || e.file_name || '';
	}
	for (const k of req.kernels)
		store.kernels.add(hex(k.id));
	state.definitions.stacks += req.stacks.length;
	state.definitions.executables += req.executables.length;
	state.definitions.kernels += req.kernels.length;

	const ms = new Map(), me = new Map(), mk = new Map(), wanted = new Map();
	let acc = 0n;
	for (const s of req.samples) {
		const sid = hex(s.stack_id || []);
		let ok = true;
		const frames = store.stacks.get(sid);
		if (!frames) {
			ms.set(sid, s.stack_id);
			ok = false;
		} else {
			for (const [kind, eid] of frames) {
				if (!eid)
					continue;
				if (kind === 2) {
					if (!store.kernels.has(eid)) {
						mk.set(eid, Buffer.from(eid, 'hex'));
						ok = false;
					}
				} else if (!store.executables.has(eid)) {
					me.set(eid, Buffer.from(eid, 'hex'));
					ok = false;
				}
			}
		}
		if (s.kernel_id && s.kernel_id.length && !store.kernels.has(hex(s.kernel_id))) {
			mk.set(hex(s.kernel_id), s.kernel_id);
			ok = false;
		}
		const count = s.count || 0n;
		if (!ok) {
			refusedMissing += count;
			continue;
		}
		acc += count;
		const pid = String(s.pid || 0n);
		state.per_pid[pid] = (BigInt(state.per_pid[pid] || '0') + count).toString();
		if (opts.wantSymbols)
			for (const [kind, eid] of frames)
				if (kind !== 2 && eid && !symbolsDone.has(eid))
					wanted.set(eid, Buffer.from(eid, 'hex'));
	}
	for (const t of req.symbol_tables) {
		const id = hex(t.executable_id || []);
		symbolsDone.add(id);
		const prev = state.symbol_tables[id];
		state.symbol_tables[id] = {
			uploads: prev ? prev.uploads + 1 : 1,
			symbols: t.symbols.length,
			sources: t.sources,
			error: t.error || '',
			names: t.symbols.slice(0, 2000).map((x) => x.name),
			sorted: t.symbols.every((x, i) => i === 0 || t.symbols[i - 1].address < x.address),
		};
	}
	if (req.drops)
		for (const [k, v] of Object.entries(req.drops))
			state.drops[k] = (BigInt(state.drops[k] || '0') + v).toString();
	// Probes: wanted when known here and not uploaded yet (executables and kernels), pending while scripted.
	let pending = 0;
	if (req.probe_symbols.length) {
		const ids = new Map(req.probe_symbols.map((b) => [hex(b), b]));
		state.probe_requests++;
		state.probes += ids.size;
		state.probe_max_ids = Math.max(state.probe_max_ids, req.probe_symbols.length);
		for (const [id, b] of ids) {
			if (!store.executables.has(id) && !store.kernels.has(id))
				continue;
			if (state.probe_requests <= (opts.probePending || 0))
				pending++;
			else if ((opts.wantSymbols || opts.wantOnProbe) && !symbolsDone.has(id))
				wanted.set(id, b);
		}
		state.probes_wanted += Math.min(wanted.size, 64);
		state.probes_pending += pending;
	}
	accepted += acc;
	if (ms.size || me.size || mk.size)
		state.missing_answered++;
	return encodeResponse({ accepted: acc, missingStacks: [...ms.values()], missingExecutables: [...me.values()],
				missingKernels: [...mk.values()], wanted: [...wanted.values()].slice(0, 64),
				symbolsPending: pending });
}

function respond(stream, status, body, headers) {
	if (stream.destroyed)
		return;
	stream.respond(Object.assign({ ':status': status, 'content-type': 'application/x-protobuf' }, headers || {}));
	stream.end(body || Buffer.alloc(0));
}

function onStream(stream, headers) {
	const session = stream.session;
	if (headers[':method'] !== 'POST' || headers[':path'] !== '/stackrelay.v1.Ingest/Push') {
		respond(stream, 404, encodeResponse({ error: `no such method ${headers[':path']}` }));
		return;
	}
	const n = ++state.requests;
	const every = (k) => opts[k] && n % opts[k] === 0;
	if (every('resetEvery')) {
		state.resets++;
		saveState();
		stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
		return;
	}
	const chunks = [];
	stream.on('data', (c) => chunks.push(c));
	stream.on('end', () => {
		if (opts.token && headers.authorization !== `Bearer ${opts.token}`) {
			state.auth_failures++;
			saveState();
			respond(stream, 401, encodeResponse({ error: 'missing or wrong bearer token' }));
			return;
		}
		if (every('unavailableEvery')) {
			state.unavailable++;
			saveState();
			respond(stream, 503, encodeResponse({ error: 'memory limit' }), { 'retry-after': '1' });
			return;
		}
		let body = Buffer.concat(chunks), req;
		try {
			if (headers['content-encoding'] === 'gzip') {
				state.gzip_requests++;
				body = zlib.gunzipSync(body);
			}
			if (headers['content-type'] !== 'application/x-protobuf')
				throw new Error(`content-type ${headers['content-type']}`);
			req = decode(body, 'PushRequest');
			if (req.protocol_version !== 1n)
				throw new Error(`protocol_version ${req.protocol_version}, this gateway speaks 1`);
			if (!req.agent || !req.agent.instance_id || req.agent.instance_id.length !== 16 || !req.sequence)
				throw new Error('agent.instance_id (16 bytes) and sequence are required');
		} catch (e) {
			state.bad_requests++;
			state.errors.push(String(e.message));
			saveState();
			respond(stream, 400, encodeResponse({ error: String(e.message) }));
			return;
		}
		if (every('retryAfterEvery')) {
			state.retry_after++;
			saveState();
			respond(stream, 200, encodeResponse({ retryAfterMs: 100 }));
			return;
		}
		const inst = hex(req.agent.instance_id);
		if (!dedup.has(inst)) {
			dedup.set(inst, new Map());
			state.instances.push(inst);
		}
		const seen = dedup.get(inst), seq = req.sequence.toString();
		let resp = seen.get(seq);
		if (resp) {
			state.duplicates++;
		} else {
			if (every('forgetEvery')) {
				state.forgets++;
				store.stacks.clear();
				store.executables.clear();
				store.kernels.clear();
			}
			resp = processRequest(req);
			state.processed++;
			seen.set(seq, resp);
			state.sequences_seen = seen.size;
		}
		if (every('loseEvery')) {
			state.lost++;
			saveState();
			session.destroy();
			return;
		}
		saveState();
		respond(stream, 200, resp);
		if (every('goawayEvery')) {
			state.goaways++;
			session.close();
		}
		if (opts.maxRequests && n >= opts.maxRequests)
			server.close();
	});
}

let server;
if (opts.tlsCert) {
	const tlsOpts = { key: fs.readFileSync(opts.tlsKey), cert: fs.readFileSync(opts.tlsCert), allowHTTP1: false };
	if (opts.clientCa) {
		tlsOpts.ca = fs.readFileSync(opts.clientCa);
		tlsOpts.requestCert = true;
		tlsOpts.rejectUnauthorized = true;
	}
	server = http2.createSecureServer(tlsOpts);
	server.on('secureConnection', (sock) => {
		const c = sock.getPeerCertificate();
		if (c && c.subject)
			state.tls_client_subjects.push(c.subject.CN);
	});
} else {
	server = http2.createServer();
}
server.on('session', () => {
	state.connections++;
});
server.on('stream', (stream, headers) => {
	stream.on('error', () => {});
	try {
		onStream(stream, headers);
	} catch (e) {
		state.errors.push(String(e.stack));
		saveState();
		stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
	}
});
server.on('sessionError', () => {});
server.listen(opts.port, opts.host, () => {
	saveState();
	if (opts.portFile) {
		fs.writeFileSync(opts.portFile + '.tmp', String(server.address().port));
		fs.renameSync(opts.portFile + '.tmp', opts.portFile);
	}
});
// SIGTERM: stop accepting, let open sessions finish, write the state, exit.
process.on('SIGTERM', () => {
	saveState();
	server.close(() => process.exit(0));
	setTimeout(() => process.exit(0), 2000).unref();
});
