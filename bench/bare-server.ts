// The yardstick of `make bench-throughput` (bench/throughput.ts): the best bare server built from the
// service's own parts (Hono on @hono/node-server, the project's patched postgres.js, a pool of 10)
// doing the minimum SQL for each hot path, against the service's own database and tables.
// No validation, no authorization, no logging: whatever the service does beyond this is its overhead.
//
//   GET  /constant                      {"status":"ok"} (vs /healthz)
//   GET  /constant-headers              the same with the response headers the service sends on every
//                                       reply (a request id, the security headers): what they cost alone
//   GET  /objects/:id                   one row select
//   GET  /token/objects/:id             the bearer token's UPDATE … RETURNING (401 when it matches
//                                       no live token), then the row select
//   GET  /token/classes/:class_id/objects
//                                       the token's UPDATE, then a page of 100 objects by id (101 read,
//                                       to know whether a next page exists) beside the class's count:
//                                       what listObjects answers by default (X-Total-Count, X-Next-Cursor);
//                                       json_data read as text and written into the page as it is
//   POST /classes/:class_id/objects     BEGIN; insert object; insert event; COMMIT (201)
//   PATCH /objects/:id                  BEGIN; update the object (its row as it was read in the same
//                                       statement, locked); insert event; COMMIT (200)
//   PATCH /objects/:id/data             a JSON Patch of `replace` operations of top-level members (what
//                                       the benchmark sends): BEGIN; read the object locked; apply the
//                                       operations; update; insert event; COMMIT (200)
//   DELETE /objects/:id                 BEGIN; delete the object returning its row; insert event;
//                                       COMMIT (204)
//
// Started as its own process by the benchmark: BARE_DATABASE_URL, BARE_PORT (on 127.0.0.1).
import { createHmac, randomUUID } from 'node:crypto';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import postgres from 'postgres';
import { API_CSP, SECURITY_HEADERS } from '../src/http/security-headers.ts';

const url = process.env.BARE_DATABASE_URL;
const port = Number(process.env.BARE_PORT);
if (!url || !Number.isInteger(port) || port < 1) throw new Error('BARE_DATABASE_URL and BARE_PORT are required');

const sql = postgres(url, { max: 10, onnotice: () => {} });
// The key the service hashes tokens with (it stores a generated one here when none is configured).
const [keyRow] = await sql<{ value: string }[]>`select value from meta_kv where key = 'token_hash_key'`;
if (!keyRow) throw new Error('meta_kv has no token_hash_key: start the service on this database first');
const tokenKey = Buffer.from(keyRow.value, 'base64');

const selectObject = (id: number) =>
  sql`select id, name, description, collection_id, class_id, json_data, created_at, updated_at, revision
    from objects where id = ${id}::int`;

const app = new Hono();

app.get('/constant', (c) => c.json({ status: 'ok' }));
// A Response with a plain header record, as the service's renderer makes it (src/app.ts render):
// @hono/node-server writes such a record as it is. (c.json with a header record builds a Headers
// object, whose conversions and checks cost more than writing the headers.)
app.get(
  '/constant-headers',
  () =>
    new Response(JSON.stringify({ status: 'ok' }), {
      status: 200,
      headers: {
        'content-type': 'application/json',
        'x-request-id': randomUUID(),
        ...SECURITY_HEADERS,
        'content-security-policy': API_CSP,
      },
    }),
);

app.get('/objects/:id', async (c) => {
  const [row] = await selectObject(Number(c.req.param('id')));
  return row ? c.json(row) : c.json({ error: 'Not Found' }, 404);
});

/** The bearer token's principal (its last use advanced), or undefined when it matches no live token. */
async function tokenPrincipal(header: string | undefined): Promise<number | undefined> {
  const m = /^Bearer (.+)$/.exec(header ?? '');
  if (!m) return undefined;
  const hash = createHmac('sha256', tokenKey).update(m[1]!, 'utf8').digest();
  const [token] = await sql<{ principal_id: number }[]>`update tokens set last_used_at = now()
    where token_hash = ${hash} and revoked_at is null and expires_at > now() returning principal_id`;
  return token?.principal_id;
}

app.get('/token/objects/:id', async (c) => {
  if ((await tokenPrincipal(c.req.header('authorization'))) === undefined) return c.json({ error: 'Unauthorized' }, 401);
  const [row] = await selectObject(Number(c.req.param('id')));
  return row ? c.json(row) : c.json({ error: 'Not Found' }, 404);
});

type PageRow = Record<'id' | 'collection_id' | 'class_id' | 'revision', number> &
  Record<'name' | 'description' | 'json_data' | 'created_at' | 'updated_at', string>;

app.get('/token/classes/:class_id/objects', async (c) => {
  if ((await tokenPrincipal(c.req.header('authorization'))) === undefined) return c.json({ error: 'Unauthorized' }, 401);
  const classId = Number(c.req.param('class_id'));
  // Each row written by hand: json_data read as text and passed on as it is, the times read as ISO
  // text (JSON.stringify of the driver's rows, parsing json_data and making Dates only to write them
  // out again, cost this process 1.8x the service's CPU a page; having PostgreSQL write the whole
  // page, json_agg, cost the database 3x what the service's page costs it)
  const [rows, [count]] = await Promise.all([
    sql<PageRow[]>`
      select id, name, description, collection_id, class_id, json_data::text as json_data,
        to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as created_at,
        to_char(updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as updated_at, revision
      from objects where class_id = ${classId}::int order by id limit 101`,
    sql<{ n: number }[]>`select count(*)::int as n from objects where class_id = ${classId}::int`,
  ]);
  const shown = Math.min(rows.length, 100);
  let body = '[';
  for (let i = 0; i < shown; i++) {
    const r = rows[i]!;
    body +=
      `${i ? ',' : ''}{"id":${r.id},"name":${JSON.stringify(r.name)},"description":${JSON.stringify(r.description)},` +
      `"collection_id":${r.collection_id},"class_id":${r.class_id},"json_data":${r.json_data},` +
      `"created_at":"${r.created_at}","updated_at":"${r.updated_at}","revision":${r.revision}}`;
  }
  body += ']';
  // a plain header record, as /constant-headers (c.json with headers would build a Headers object)
  const headers: Record<string, string> = { 'content-type': 'application/json', 'x-total-count': String(count!.n), 'x-page-limit': '100' };
  if (rows.length > 100) headers['x-next-cursor'] = String(rows[99]!.id);
  return new Response(body, { status: 200, headers });
});

app.post('/classes/:class_id/objects', async (c) => {
  const body = await c.req.json<{ name: string; description?: string; json_data: unknown }>();
  const classId = Number(c.req.param('class_id'));
  const row = await sql.begin(async (tx) => {
    const [o] = await tx`
      insert into objects (name, description, collection_id, class_id, json_data)
      select ${body.name}, ${body.description ?? ''}, c.collection_id, c.id, ${JSON.stringify(body.json_data)}::text::jsonb
      from classes c where c.id = ${classId}::int
      returning id, name, description, collection_id, class_id, json_data, created_at, updated_at, revision`;
    if (!o) return undefined;
    await tx`
      insert into events (entity_type, entity_id, entity_name, collection_id, action, actor_kind, provenance, after, after_revision)
      values ('object', ${o.id}, ${o.name}, ${o.collection_id}, 'created', 'system', '{}'::jsonb, ${JSON.stringify(o)}::text::jsonb, ${o.revision})`;
    return o;
  });
  return row ? c.json(row, 201) : c.json({ error: 'Not Found' }, 404);
});

app.patch('/objects/:id', async (c) => {
  const body = await c.req.json<{ json_data: unknown }>();
  const id = Number(c.req.param('id'));
  const row = await sql.begin(async (tx) => {
    const [o] = await tx`
      update objects as o set json_data = ${JSON.stringify(body.json_data)}::text::jsonb, updated_at = now(), revision = o.revision + 1
      from (select id, name, description, collection_id, class_id, json_data, created_at, updated_at, revision
        from objects where id = ${id}::int for update) as old
      where o.id = old.id
      returning o.id, o.name, o.description, o.collection_id, o.class_id, o.json_data, o.created_at, o.updated_at, o.revision,
        to_jsonb(old) as before`;
    if (!o) return undefined;
    const { before, ...after } = o;
    await tx`
      insert into events (entity_type, entity_id, entity_name, collection_id, action, actor_kind, provenance, before, after, before_revision, after_revision)
      values ('object', ${o.id}, ${o.name}, ${o.collection_id}, 'updated', 'system', '{}'::jsonb, ${JSON.stringify(before)}::text::jsonb,
        ${JSON.stringify(after)}::text::jsonb, ${before.revision}, ${o.revision})`;
    return after;
  });
  return row ? c.json(row) : c.json({ error: 'Not Found' }, 404);
});

type ObjectRow = Record<'id' | 'collection_id' | 'class_id' | 'revision', number> &
  Record<'name' | 'description', string> & { json_data: Record<string, unknown> };

/** Top-level `replace` operations, the only kind the benchmark sends: 400 for anything else. */
function replacements(ops: unknown): [string, unknown][] | undefined {
  if (!Array.isArray(ops)) return undefined;
  const out: [string, unknown][] = [];
  for (const op of ops as { op?: unknown; path?: unknown; value?: unknown }[]) {
    if (op?.op !== 'replace' || typeof op.path !== 'string' || !/^\/[^/~]+$/.test(op.path)) return undefined;
    out.push([op.path.slice(1), op.value]);
  }
  return out;
}

app.patch('/objects/:id/data', async (c) => {
  const ops = replacements(await c.req.json());
  if (!ops) return c.json({ error: 'Bad Request' }, 400);
  const id = Number(c.req.param('id'));
  const row = await sql.begin(async (tx) => {
    const [before] = await tx<ObjectRow[]>`
      select id, name, description, collection_id, class_id, json_data, created_at, updated_at, revision
      from objects where id = ${id}::int for update`;
    if (!before) return undefined;
    const data = { ...before.json_data };
    for (const [key, value] of ops) {
      if (!(key in data)) throw new Error(`replace of a missing member ${key}`);
      data[key] = value;
    }
    const [after] = await tx<ObjectRow[]>`
      update objects set json_data = ${JSON.stringify(data)}::text::jsonb, updated_at = now(), revision = revision + 1
      where id = ${id}::int
      returning id, name, description, collection_id, class_id, json_data, created_at, updated_at, revision`;
    await tx`
      insert into events (entity_type, entity_id, entity_name, collection_id, action, actor_kind, provenance, before, after, before_revision, after_revision)
      values ('object', ${id}, ${after!.name}, ${after!.collection_id}, 'updated', 'system', '{}'::jsonb, ${JSON.stringify(before)}::text::jsonb,
        ${JSON.stringify(after)}::text::jsonb, ${before.revision}, ${after!.revision})`;
    return after;
  });
  return row ? c.json(row) : c.json({ error: 'Not Found' }, 404);
});

app.delete('/objects/:id', async (c) => {
  const id = Number(c.req.param('id'));
  const deleted = await sql.begin(async (tx) => {
    const [o] = await tx<ObjectRow[]>`
      delete from objects where id = ${id}::int
      returning id, name, description, collection_id, class_id, json_data, created_at, updated_at, revision`;
    if (!o) return false;
    await tx`
      insert into events (entity_type, entity_id, entity_name, collection_id, action, actor_kind, provenance, before, before_revision)
      values ('object', ${o.id}, ${o.name}, ${o.collection_id}, 'deleted', 'system', '{}'::jsonb, ${JSON.stringify(o)}::text::jsonb, ${o.revision})`;
    return true;
  });
  return deleted ? c.body(null, 204) : c.json({ error: 'Not Found' }, 404);
});

const server = serve({ fetch: app.fetch, hostname: '127.0.0.1', port });
const stop = () => {
  server.close();
  void sql.end({ timeout: 1 }).finally(() => process.exit(0));
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
