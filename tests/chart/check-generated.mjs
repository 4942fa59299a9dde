// SPDX-License-Identifier: Apache-2.0
//
// Checks the Secrets charts/stackrelay generates (test-chart.sh):
//
//   node check-generated.mjs FIRST.yaml SECOND.yaml
//     two first installs: the bearer token is 48 letters and digits, the
//     gateway certificate chains to the CA, names the gateway Service and
//     has its key, the agent certificate chains to the same CA, allows
//     client authentication and has its key; and the two installs share
//     neither token nor CA.
//   node check-generated.mjs --kept EXISTING.yaml RENDERED.yaml
//     an upgrade: every generated Secret in RENDERED has the data of the
//     one of the same name in EXISTING.
//
// Prints one line per problem and exits 1 if there was any.
import { readFileSync } from "node:fs";
import { X509Certificate, createPrivateKey } from "node:crypto";
import { parseAllDocuments } from "yaml";

const problems = [];
const secrets = (file) => {
  const m = new Map();
  for (const doc of parseAllDocuments(readFileSync(file, "utf8"))) {
    const o = doc.toJS();
    if (o && o.kind === "Secret") m.set(o.metadata.name, o);
  }
  return m;
};
const b64 = (s) => Buffer.from(s || "", "base64");
const generated = ["stackrelay-agent-token", "stackrelay-gateway-tls", "stackrelay-agent-tls"];

function checkInstall(file) {
  const s = secrets(file);
  for (const name of generated) if (!s.has(name)) problems.push(`${file}: no Secret ${name}`);
  if (problems.length) return null;
  const token = b64(s.get("stackrelay-agent-token").data.token).toString();
  if (!/^[A-Za-z0-9]{48}$/.test(token)) problems.push(`${file}: token is not 48 letters and digits: ${JSON.stringify(token)}`);
  const gw = s.get("stackrelay-gateway-tls").data;
  const ag = s.get("stackrelay-agent-tls").data;
  const ca = new X509Certificate(b64(gw["ca.crt"]));
  if (!ca.ca) problems.push(`${file}: ca.crt is not a CA certificate`);
  if (!b64(ag["ca.crt"]).equals(b64(gw["ca.crt"]))) problems.push(`${file}: agents and gateway have different CAs`);
  const host = "stackrelay-gateway.observability.svc";
  for (const [what, d, usage] of [["gateway", gw, "1.3.6.1.5.5.7.3.1"], ["agent", ag, "1.3.6.1.5.5.7.3.2"]]) {
    const cert = new X509Certificate(b64(d["tls.crt"]));
    if (!cert.verify(ca.publicKey)) problems.push(`${file}: ${what} certificate is not signed by ca.crt`);
    if (!cert.checkPrivateKey(createPrivateKey(b64(d["tls.key"])))) problems.push(`${file}: ${what} tls.key does not match tls.crt`);
    if (!(cert.keyUsage || []).includes(usage)) problems.push(`${file}: ${what} certificate lacks extended key usage ${usage}`);
    if (what === "gateway" && !cert.checkHost(host)) problems.push(`${file}: gateway certificate does not name ${host} (${cert.subjectAltName})`);
  }
  return { token, ca: gw["ca.crt"] };
}

const args = process.argv.slice(2);
if (args[0] === "--kept") {
  const before = secrets(args[1]);
  const after = secrets(args[2]);
  let n = 0;
  for (const name of generated) {
    if (!after.has(name)) continue;
    n++;
    if (JSON.stringify(after.get(name).data) !== JSON.stringify(before.get(name)?.data)) {
      problems.push(`${args[2]}: Secret ${name} was generated anew instead of kept`);
    }
  }
  if (n === 0) problems.push(`${args[2]}: no generated Secret rendered`);
  for (const p of problems) console.log(p);
  if (!problems.length) console.log(`${n} generated Secrets kept from the existing objects`);
} else {
  const a = checkInstall(args[0]);
  const b = checkInstall(args[1]);
  if (a && b && a.token === b.token) problems.push("two installs generated the same token");
  if (a && b && a.ca === b.ca) problems.push("two installs generated the same CA");
  for (const p of problems) console.log(p);
  if (!problems.length) console.log("token of 48 random letters and digits, CA, gateway and agent certificates that chain and fit");
}
process.exit(problems.length ? 1 : 0);
