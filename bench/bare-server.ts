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
//   POST /classes/:class_id/objects     BEGIN; insert object; insert event; COMMIT (201)
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

app.get('/token/objects/:id', async (c) => {
  const m = /^Bearer (.+)$/.exec(c.req.header('authorization') ?? '');
  if (!m) return c.json({ error: 'Unauthorized' }, 401);
  const hash = createHmac('sha256', tokenKey).update(m[1]!, 'utf8').digest();
  const [token] = await sql`update tokens set last_used_at = now()
    where token_hash = ${hash} and revoked_at is null and expires_at > now() returning principal_id`;
  if (!token) return c.json({ error: 'Unauthorized' }, 401);
  const [row] = await selectObject(Number(c.req.param('id')));
  return row ? c.json(row) : c.json({ error: 'Not Found' }, 404);
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

const server = serve({ fetch: app.fetch, hostname: '127.0.0.1', port });
const stop = () => {
  server.close();
  void sql.end({ timeout: 1 }).finally(() => process.exit(0));
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
