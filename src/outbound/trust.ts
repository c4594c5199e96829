// Trust anchors of outbound TLS (remote calls, webhook, AMQP, Redis and SMTP sinks, LDAP): Node's
// bundled roots, NODE_EXTRA_CA_CERTS and an operator's CA file, as one TLS SecureContext built
// once per version of the file and shared by every connection. Building a context from some 150
// PEM certificates takes ~45 ms of CPU on the event loop (Node's default context: 0.4 ms); built
// per connection, it made each outbound call with a CA file cost that, and capped a process at
// ~10 such calls a second. A changed file (another modification time or size) is read again, so
// a rotated CA is trusted from the next connection on.
import { readFileSync, statSync } from 'node:fs';
import { createSecureContext, rootCertificates, type SecureContext } from 'node:tls';

/** The oldest protocol any outbound TLS connection accepts. */
export const MIN_TLS_VERSION = 'TLSv1.2';

const contexts = new Map<string, SecureContext>();

function pemBlocks(text: string): string[] {
  return text.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
}

/** A file's version: its path, modification time and size (stat only, no read). */
function versionOf(path: string): string {
  const s = statSync(path);
  return `${path}\0${s.mtimeMs}\0${s.size}`;
}

/**
 * The TLS context trusting Node's bundled roots, NODE_EXTRA_CA_CERTS and the certificates of
 * `caFile` (PEM); undefined without a file (Node's default context then serves, which already
 * includes NODE_EXTRA_CA_CERTS). Throws when the file cannot be read or holds no certificate.
 */
export function trustContext(caFile: string | undefined): SecureContext | undefined {
  if (!caFile) return undefined;
  const extraEnv = process.env.NODE_EXTRA_CA_CERTS;
  const key = `${versionOf(caFile)}\0${extraEnv ?? ''}`;
  let context = contexts.get(key);
  if (!context) {
    const fromFile = pemBlocks(readFileSync(caFile, 'utf8'));
    if (fromFile.length === 0) throw new Error(`no PEM certificate found in ${caFile}`);
    let fromEnv: string[] = [];
    if (extraEnv) {
      try {
        fromEnv = pemBlocks(readFileSync(extraEnv, 'utf8'));
      } catch {
        fromEnv = [];
      }
    }
    context = createSecureContext({ ca: [...rootCertificates, ...fromEnv, ...fromFile], minVersion: MIN_TLS_VERSION });
    // one version of each file is kept: an older one's context goes
    for (const k of contexts.keys()) if (k.startsWith(`${caFile}\0`)) contexts.delete(k);
    contexts.set(key, context);
  }
  return context;
}

const contextIds = new WeakMap<SecureContext, number>();
let nextContextId = 1;

/** A stable number for a TLS context (0 for none): part of the keys of kept connections. */
export function trustId(context: SecureContext | undefined): number {
  if (!context) return 0;
  let id = contextIds.get(context);
  if (id === undefined) {
    id = nextContextId++;
    contextIds.set(context, id);
  }
  return id;
}
