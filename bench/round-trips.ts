// Database round trips per request (#14 items 3 and 4): a second app instance on the same database
// reaches PostgreSQL through a proxy that holds every server → client chunk for DELAY_MS, so a
// request's time is about (round trips × DELAY_MS) + its own small cost; the table gives the
// median time and that time in round trips. Not a timed assertion: a count read off a clock slowed
// down on purpose. Standalone: `npx tsx bench/round-trips.ts` (SVC_DATABASE_URL or embedded);
// BENCH_RT_DELAY_MS sets the delay (default 25), BENCH_RT_TRACE=1 prints what the service writes to
// PostgreSQL, chunk by chunk (statements written together share a line).
import { createServer, connect, type Server, type Socket } from 'node:net';
import { createApp } from '../src/app.ts';
import { createSql } from '../src/db/sql.ts';
import { ADMIN_PASSWORD, createClass, type Bench } from './setup.ts';
import { SERVER_SCHEMA, serverData } from './objects.ts';

const DELAY_MS = Number(process.env.BENCH_RT_DELAY_MS ?? 25) || 25;
const CALLS = 9;

/** A TCP proxy to host:port that delays each chunk from the server by `delayMs` (order kept). */
async function delayProxy(host: string, port: number, delayMs: number): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(port, host);
    for (const s of [client, upstream]) {
      s.setNoDelay(true); // else Nagle holds a second answer until the first is acknowledged
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.on('data', (b) => {
      if (process.env.BENCH_RT_TRACE)
        console.log(
          Math.round(performance.now()),
          b
            .toString('latin1')
            .replace(/[^\x20-\x7e]+/g, ' ')
            .slice(0, 160),
        );
      upstream.write(b);
    });
    upstream.on('data', (b) => setTimeout(() => client.writable && client.write(b), delayMs));
    client.on('end', () => upstream.end());
    upstream.on('end', () => setTimeout(() => client.end(), delayMs));
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  return {
    port: (server.address() as { port: number }).port,
    close: () =>
      new Promise<void>((ok) => {
        for (const s of sockets) s.destroy();
        server.close(() => ok());
      }),
  };
}

export async function benchRoundTrips(b: Bench, collectionId: number): Promise<string> {
  const url = new URL(b.deps.config.SVC_DATABASE_URL!);
  const proxy = await delayProxy(url.hostname || '127.0.0.1', Number(url.port || 5432), DELAY_MS);
  url.hostname = '127.0.0.1';
  url.port = String(proxy.port);
  const sql = createSql(url.toString(), b.deps.config);
  const app = await createApp({ ...b.deps, sql });
  const classId = await createClass(b, collectionId, { json_schema: SERVER_SCHEMA, validate_schema: true });
  const headers = { authorization: `Bearer ${b.adminToken}`, 'content-type': 'application/json' };
  const call = async (method: string, path: string, body?: unknown, extra: Record<string, string> = {}) => {
    const res = await app.fetch(
      new Request(`http://bench.local${path}`, {
        method,
        headers: { ...headers, ...extra },
        body: body === undefined ? undefined : JSON.stringify(body),
      }),
    );
    const text = await res.text();
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text.slice(0, 300)}`);
    const location = res.headers.get('location') ?? '';
    return { id: text ? (JSON.parse(text) as { id: number }).id : 0, etag: res.headers.get('etag') ?? '', location };
  };
  const rows: string[][] = [];
  const timeEach = async (name: string, fn: (i: number) => Promise<unknown>) => {
    await fn(-1); // prepares the statements on the connection it lands on
    const ms: number[] = [];
    for (let i = 0; i < CALLS; i++) {
      const t = performance.now();
      await fn(i);
      ms.push(performance.now() - t);
    }
    ms.sort((x, y) => x - y);
    const median = ms[Math.floor(ms.length / 2)]!;
    rows.push([name, `${median.toFixed(1)} ms`, (median / DELAY_MS).toFixed(1)]);
  };
  try {
    const base = `/api/v1/classes/${classId}`;
    const made: { id: number; etag: string }[] = [];
    await call('GET', '/api/v1/collections'); // the token is validated once, then cached
    await timeEach('createObject (schema enforced, audit event)', async (i) => {
      made.push(await call('POST', `${base}/objects`, { name: `rt-${i + 1}-${Date.now()}`, json_data: serverData(i + 1) }));
    });
    const target = made[0]!;
    await timeEach('getObject', () => call('GET', `${base}/${target.id}`));
    await timeEach('listObjects (filter, sort, page of 5)', () =>
      call('GET', `${base}/objects?json_data__equals=env=prod&sort=-name&limit=5`),
    );
    // Unfiltered first pages with their total (include_total defaults to true): the count goes beside
    await timeEach('listObjects (unfiltered, page of 5 of more, total)', () => call('GET', `${base}/objects?limit=5`));
    await timeEach('listEvents (administrator, page of 5 of more, total)', () => call('GET', '/api/v1/events?limit=5'));
    let etag = target.etag;
    // by id without If-Match, under a class the process has read: one statement (updateOwnObject)
    await timeEach('updateObject (PATCH)', async (i) => {
      etag = (await call('PATCH', `${base}/${target.id}`, { json_data: serverData(50 + i) })).etag;
    });
    await timeEach('updateObject (PATCH, If-Match)', async (i) => {
      etag = (await call('PATCH', `${base}/${target.id}`, { json_data: serverData(100 + i) }, { 'if-match': etag })).etag;
    });
    await timeEach('patchObjectData (JSON Patch, If-Match)', async (i) => {
      const patch = [{ op: 'replace', path: '/counter', value: i + 10 }];
      etag = (await call('PATCH', `${base}/${target.id}/data`, patch, { 'if-match': etag, 'content-type': 'application/json-patch+json' }))
        .etag;
    });
    const otherClass = await createClass(b, collectionId);
    const relation = (await call('POST', '/api/v1/relations/classes', {
      from_class_id: classId,
      to_class_id: otherClass,
      forward_alias: `rt${Date.now()}`,
    }))!;
    const targets: number[] = [];
    for (let i = 0; i <= CALLS; i++)
      targets.push((await call('POST', `/api/v1/classes/${otherClass}/objects`, { name: `rt-t${i}-${Date.now()}`, json_data: {} }))!.id);
    const relations: number[] = [];
    await timeEach('createObjectRelation (max counts, audit event)', async (i) => {
      const made = await call('POST', '/api/v1/relations/objects', {
        class_relation_id: relation.id,
        from_object_id: target.id,
        to_object_id: targets[i + 1]!,
      });
      relations.push(made.id);
    });
    await timeEach('getRelatedObjectGraph (depth 1)', () => call('GET', `${base}/${target.id}/related/graph`));
    await timeEach('listRelatedObjects (depth 1, total)', () => call('GET', `${base}/${target.id}/related/objects?limit=5`));
    await timeEach('listRelatedClasses (depth 1, total)', () => call('GET', `${base}/related/classes?limit=5`));
    await timeEach('aggregateObjects (group_by name)', () => call('GET', `${base}/object-aggregates?group_by=name&limit=5`));
    await timeEach('createExport (the objects of a class)', () =>
      call('POST', '/api/v1/exports', { scope: { kind: 'objects_in_class', class_id: classId } }),
    );
    // A remote call queued (the task and its events; no worker runs it here): what it checks and
    // reads of its subject goes out beside the target's read, an object relation's ends' permissions after it
    const remote = await call('POST', '/api/v1/remote-targets', {
      collection_id: collectionId,
      name: `rt-remote-${Date.now()}`,
      description: 'a remote call',
      method: 'post',
      url_template: 'https://hooks.example.com/{{ subject.id }}',
      allowed_subject_types: ['collection', 'object_relation'],
    });
    await timeEach('invokeRemoteTarget (collection subject)', () =>
      call('POST', `/api/v1/remote-targets/${remote.id}/invoke`, { subject: { type: 'collection', id: collectionId } }),
    );
    await timeEach('invokeRemoteTarget (object relation subject)', () =>
      call('POST', `/api/v1/remote-targets/${remote.id}/invoke`, { subject: { type: 'object_relation', id: relations[0]! } }),
    );
    let nextRelation = 0;
    await timeEach('deleteObjectRelation (audit event)', () => call('DELETE', `/api/v1/relations/objects/${relations[nextRelation++]!}`));
    for (let i = made.length; i <= CALLS + 1; i++)
      made.push(await call('POST', `${base}/objects`, { name: `rt-x${i}-${Date.now()}`, json_data: serverData(i) }));
    let next = 1;
    await timeEach('deleteObject', () => call('DELETE', `${base}/${made[next++]!.id}`));
    // Configuration writes (collections and classes; not #14's hot paths), each new one empty.
    const kinds = [
      { Kind: 'Collection', path: '/api/v1/collections', under: { parent_collection_id: collectionId } },
      { Kind: 'Class', path: '/api/v1/classes', under: { collection_id: collectionId } },
    ];
    for (const { Kind, path, under } of kinds) {
      const fresh = () => call('POST', path, { name: `rt-${Kind}-${Date.now()}-${Math.random().toString(36).slice(2, 8)}`, ...under });
      const made: { id: number; etag: string }[] = [];
      await timeEach(`create${Kind}`, async () => void made.push(await fresh()));
      const id = made[0]!.id;
      let etag = made[0]!.etag;
      await timeEach(`update${Kind} (PATCH, If-Match)`, async (i) => {
        etag = (await call('PATCH', `${path}/${id}`, { description: `rt ${i}` }, { 'if-match': etag })).etag;
      });
      made.push(await fresh()); // one per call, besides the one updated
      let gone = 1;
      await timeEach(`delete${Kind} (empty)`, () => call('DELETE', `${path}/${made[gone++]!.id}`));
    }
    // Grants: a collection made with every permission for a group, and a group's grants replaced.
    const groupId = (await call('POST', '/api/v1/iam/groups', { name: `rt-group-${Date.now()}` })).id;
    const granted: { id: number }[] = [];
    await timeEach('createCollection (group_id: every permission)', async (i) => {
      granted.push(
        await call('POST', '/api/v1/collections', {
          name: `rt-g${i}-${Date.now()}`,
          parent_collection_id: collectionId,
          group_id: groupId,
        }),
      );
    });
    const sets = [
      ['ReadCollection', 'ReadObject', 'CreateObject', 'UpdateObject'],
      ['ReadCollection', 'ReadObject', 'ReadClass', 'DeleteObject'],
    ];
    const grants = `/api/v1/collections/${granted[0]!.id}/permissions/group/${groupId}`;
    await timeEach('replaceCollectionGroupPermissions (2 revoked, 2 granted)', (i) => call('PUT', grants, sets[(i + 2) % 2]));
    // Groups, their members, and a password login (its hashing adds to its time).
    const groups: number[] = [];
    await timeEach(
      'createGroup',
      async (i) => void groups.push((await call('POST', '/api/v1/iam/groups', { name: `rt-g${i}-${Date.now()}` })).id),
    );
    groups.push((await call('POST', '/api/v1/iam/groups', { name: `rt-g-last-${Date.now()}` })).id); // one per call, besides the one updated
    await timeEach('updateGroup (PATCH)', (i) => call('PATCH', `/api/v1/iam/groups/${groups[0]!}`, { description: `rt ${i}` }));
    const members: number[] = [];
    for (let i = 0; i <= CALLS; i++) members.push((await b.principalWith([])).id);
    let member = 0;
    await timeEach('addGroupMember', () => call('POST', `/api/v1/iam/groups/${groups[0]!}/members/${members[member++]!}`));
    member = 0;
    await timeEach('removeGroupMember', () => call('DELETE', `/api/v1/iam/groups/${groups[0]!}/members/${members[member++]!}`));
    for (const id of groups.slice(1)) await b.sql`insert into group_members (group_id, principal_id) values (${id}, ${members[0]!})`;
    let group = 1;
    await timeEach('deleteGroup (with a member)', () => call('DELETE', `/api/v1/iam/groups/${groups[group++]!}`));
    await timeEach('login (password)', () => call('POST', '/api/v0/auth/login', { name: 'admin', password: ADMIN_PASSWORD }));
    const sessions: string[] = [];
    for (let i = 0; i <= CALLS; i++) {
      const { token } = await b.json<{ token: string }>(200, 'POST', '/api/v0/auth/login', {
        body: { name: 'admin', password: ADMIN_PASSWORD },
      });
      await call('GET', '/api/v1/iam/me', undefined, { authorization: `Bearer ${token}` }); // validated once, then cached
      sessions.push(token);
    }
    let session = 0;
    await timeEach('logout (a cached token)', () =>
      call('POST', '/api/v0/auth/logout', undefined, { authorization: `Bearer ${sessions[session++]!}` }),
    );
    // Writes that a credential approval authorizes: each request names a fresh approval of its own
    // (made beforehand through the other instance, not timed), which the write consumes.
    const approvals = async (operation: (i: number) => Record<string, unknown>) => {
      const ids: string[] = [];
      for (let i = -1; i < CALLS; i++) {
        const made = await b.json<{ approval: string }>(201, 'POST', '/api/v1/iam/credential-approvals', {
          token: b.adminToken,
          body: { password: ADMIN_PASSWORD, operation: operation(i) },
        });
        ids.push(made.approval);
      }
      return (i: number) => ({ 'x-svc-credential-approval': ids[i + 1]! });
    };
    const mint = (i: number) => ({ name: `rt-mint-${i + 1}` });
    const minting = await approvals((i) => ({ kind: 'create_token', principal_id: b.adminId, token: mint(i) }));
    const mintedTokens: number[] = [];
    await timeEach('createPrincipalToken (approved)', async (i) => {
      const { location } = await call('POST', `/api/v1/iam/principals/${b.adminId}/tokens`, mint(i), minting(i));
      mintedTokens.push(Number(location.split('/').pop())); // the answer holds the token, its id is in Location
    });
    const renewing = await approvals((i) => ({
      kind: 'renew_token',
      principal_id: b.adminId,
      token_id: mintedTokens[i + 1]!,
      token: {},
    }));
    await timeEach('renewPrincipalToken (approved)', (i) =>
      call('POST', `/api/v1/iam/principals/${b.adminId}/tokens/${mintedTokens[i + 1]!}/renew`, {}, renewing(i)),
    );
    const stamp = Date.now();
    const user = (i: number) => ({ name: `rt-u${i + 1}-${stamp}`, password: `rt-password-${i + 1}-long-enough` });
    const creatingUsers = await approvals((i) => ({ kind: 'create_user', user: user(i) }));
    await timeEach('createUser (approved, its password hashing included)', (i) =>
      call('POST', '/api/v1/iam/users', user(i), creatingUsers(i)),
    );
    // Service accounts (owned by the group above), a collection's export templates (remote targets
    // take the same way) and a class's computed fields.
    const accounts: number[] = [];
    await timeEach('createServiceAccount', async (i) => {
      accounts.push(
        (await call('POST', '/api/v1/iam/service-accounts', { name: `rt-sa${i + 1}-${Date.now()}`, owner_group_id: groups[0]! })).id,
      );
    });
    await timeEach('updateServiceAccount (PATCH)', (i) =>
      call('PATCH', `/api/v1/iam/service-accounts/${accounts[0]!}`, { description: `rt ${i}` }),
    );
    let account = 0;
    await timeEach('deleteServiceAccount', () => call('DELETE', `/api/v1/iam/service-accounts/${accounts[account++]!}`));
    const templates: number[] = [];
    await timeEach('createExportTemplate', async (i) => {
      const t = {
        collection_id: collectionId,
        name: `rt-t${i + 1}-${Date.now()}`,
        kind: 'export',
        content_type: 'text/csv',
        template: 'x',
      };
      templates.push((await call('POST', '/api/v1/export-templates', t)).id);
    });
    await timeEach('updateExportTemplate (PATCH)', (i) =>
      call('PATCH', `/api/v1/export-templates/${templates[0]!}`, { description: `rt ${i}` }),
    );
    let template = 0;
    await timeEach('deleteExportTemplate', () => call('DELETE', `/api/v1/export-templates/${templates[template++]!}`));
    const fields: number[] = [];
    await timeEach('createClassComputedField', async (i) => {
      const f = { key: `rt_${i + 1}_${Date.now()}`, operation: { type: 'first_non_null', paths: ['/a'] }, result_type: 'string' };
      fields.push((await call('POST', `/api/v1/classes/${otherClass}/computed-fields`, f)).id);
    });
    await timeEach('updateClassComputedField (PATCH)', (i) => {
      return call('PATCH', `/api/v1/classes/${otherClass}/computed-fields/${fields[0]!}`, { label: `rt ${i}` });
    });
  } finally {
    await sql.end();
    await proxy.close();
  }
  const w = [Math.max(...rows.map((r) => r[0]!.length), 4), 10, 11];
  const line = (c: string[]) => `| ${c.map((x, i) => (i ? x.padStart(w[i]!) : x.padEnd(w[i]!))).join(' | ')} |`;
  return [
    `Database round trips per request (every answer from PostgreSQL held ${DELAY_MS} ms by a proxy; round trips = median / ${DELAY_MS} ms):`,
    '',
    line(['case', 'median', 'round trips']),
    `|${w.map((n) => '-'.repeat(n + 2)).join('|')}|`,
    ...rows.map(line),
  ].join('\n');
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop()!)) {
  const { startBench, createCollection } = await import('./setup.ts');
  const b = await startBench();
  try {
    console.log(await benchRoundTrips(b, await createCollection(b)));
  } finally {
    await b.close();
  }
}
