// A real OpenLDAP server for the directory sign-in tests: Debian's slapd, started in a temporary
// directory on a free 127.0.0.1 port with a generated slapd.conf (mdb backend, StartTLS with a
// self-signed certificate) and seeded with an LDIF by slapadd. When slapd is missing it is
// installed with apt-get if the tests run as root (as CI does), else the tests fail saying how to
// install it: they are never skipped.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { selfSignedCert } from './tls-fixtures.ts';
import { freePort } from '../src/db/embedded.ts';

const SBIN = ['/usr/sbin', '/usr/local/sbin', '/usr/bin', '/usr/local/bin'];
const SCHEMAS = ['core', 'cosine', 'inetorgperson', 'nis'].map((s) => `/etc/ldap/schema/${s}.schema`);

function findProgram(name: string): string | undefined {
  for (const dir of [...(process.env.PATH ?? '').split(':'), ...SBIN]) {
    if (dir && existsSync(join(dir, name))) return join(dir, name);
  }
  return undefined;
}

/** The slapd binary, installed with apt-get first when it is missing and we are root. */
export function ensureSlapd(): string {
  const found = findProgram('slapd');
  if (found && SCHEMAS.every(existsSync)) return found;
  if (process.getuid?.() !== 0) {
    throw new Error(
      "test/ldap.test.ts needs a real OpenLDAP server: install Debian's slapd as root (apt-get install -y slapd ldap-utils) and run the tests again",
    );
  }
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const install = () =>
    spawnSync('apt-get', ['install', '-y', '-q', '--no-install-recommends', 'slapd', 'ldap-utils'], { env, encoding: 'utf8' });
  let r = install();
  if (r.status !== 0) {
    spawnSync('apt-get', ['update', '-q'], { env, encoding: 'utf8' });
    r = install();
  }
  const installed = findProgram('slapd');
  if (r.status !== 0 || !installed) throw new Error(`apt-get install slapd failed (${r.status}): ${r.stderr || r.stdout}`);
  return installed;
}

/** A 127.0.0.1 port nothing listens on (a directory that is down). */
export const closedPort = freePort;

function accepts(port: number): Promise<boolean> {
  return new Promise((ok) => {
    const c = connect(port, '127.0.0.1');
    c.once('connect', () => {
      c.destroy();
      ok(true);
    });
    c.once('error', () => ok(false));
  });
}

export interface Slapd {
  /** ldap:// (StartTLS offered) */
  url: string;
  /** ldaps:// (TLS from the start), another port of the same server */
  ldapsUrl: string;
  port: number;
  suffix: string;
  rootDn: string;
  rootPassword: string;
  /** PEM of the self-signed certificate the server presents (its own CA). */
  caFile: string;
  stop(): Promise<void>;
}

/** Starts slapd for `suffix` seeded with `ldif` (which must create the suffix entry itself). */
export async function startSlapd(suffix: string, ldif: string): Promise<Slapd> {
  const slapd = ensureSlapd();
  const cert = selfSignedCert('svc-slapd-');
  const dir = cert.dir;
  const data = join(dir, 'data');
  mkdirSync(data);
  const rootDn = `cn=admin,${suffix}`;
  const rootPassword = 'slapd-root-password';
  const conf = join(dir, 'slapd.conf');
  writeFileSync(
    conf,
    [
      ...SCHEMAS.map((s) => `include ${s}`),
      'modulepath /usr/lib/ldap',
      'moduleload back_mdb',
      `pidfile ${join(dir, 'slapd.pid')}`,
      `TLSCertificateFile ${cert.caFile}`,
      `TLSCertificateKeyFile ${join(dir, 'key.pem')}`,
      // Passwords only for binds; people may read the rest (the service account searches).
      'access to attrs=userPassword by anonymous auth by self write by * none',
      'access to * by * read',
      'database mdb',
      'maxsize 16777216',
      `suffix "${suffix}"`,
      `rootdn "${rootDn}"`,
      `rootpw ${rootPassword}`,
      `directory ${data}`,
      '',
    ].join('\n'),
  );
  const seed = join(dir, 'seed.ldif');
  writeFileSync(seed, ldif);
  const add = spawnSync(slapd, ['-T', 'add', '-f', conf, '-l', seed], { encoding: 'utf8' });
  if (add.status !== 0) throw new Error(`slapadd failed: ${add.stderr}`);

  const port = await freePort();
  const url = `ldap://127.0.0.1:${port}`;
  const ldapsUrl = `ldaps://127.0.0.1:${await freePort()}`;
  let log = '';
  const child: ChildProcess = spawn(slapd, ['-f', conf, '-h', `${url}/ ${ldapsUrl}/`, '-d', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout?.on('data', (b: Buffer) => (log += b.toString()));
  child.stderr?.on('data', (b: Buffer) => (log += b.toString()));
  const exited = new Promise<void>((ok) => child.once('exit', () => ok()));
  let up = false;
  for (let i = 0; i < 200 && !up && child.exitCode === null; i++) {
    up = await accepts(port);
    if (!up) await new Promise((ok) => setTimeout(ok, 50));
  }
  if (!up) {
    child.kill('SIGKILL');
    throw new Error(`slapd did not start: ${log}`);
  }
  return {
    url,
    ldapsUrl,
    port,
    suffix,
    rootDn,
    rootPassword,
    caFile: cert.caFile,
    async stop() {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
