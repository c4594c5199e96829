// The Jinja filters (tojson, default, length, lower, upper, join, replace, trim) through every user
// of the shared template engine, end to end: a remote call's URL, headers and body as a local HTTPS
// peer received them; a webhook sink's body_template in the preview and in a real delivery; an
// e-mail sink's subject and body as a local SMTP server (implicit TLS) received them; and an export
// template's output. Certificates are made at test time and trusted through SVC_OUTBOUND_CA_FILE;
// loopback is admitted through the ALLOW_PRIVATE_TARGETS settings.
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { SMTPServer } from 'smtp-server';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import {
  createCollection,
  createSink,
  createSubscription,
  deliveriesOf,
  fanOutAll,
  latestEventId,
  startPeer,
  type Peer,
} from './event-fixtures.ts';
import { selfSignedCert, type SelfSignedCert } from './tls-fixtures.ts';
import { runDeliveryOnce } from '../src/workers/event-delivery.ts';
import { runTaskOnce } from '../src/workers/tasks.ts';

let t: TestApp;
let peer: Peer;
let smtpCert: SelfSignedCert;
let smtp: SMTPServer;
let smtpPort: number;
const mails: { rcpt: string[]; raw: string }[] = [];

// A name that needs every kind of JSON escape, non-ASCII letters and HTML-unsafe characters.
const TRICKY = `Rack "A" \\ 'north' <b>&</b> — Ünïcødé 😀`;

beforeAll(async () => {
  peer = await startPeer({ prefix: 'svc-tplf-' });
  smtpCert = selfSignedCert('svc-tplf-smtp-');
  const caFile = join(smtpCert.dir, 'both.pem');
  writeFileSync(caFile, Buffer.concat([readFileSync(peer.caFile), smtpCert.cert]));
  smtp = new SMTPServer({
    secure: true,
    key: smtpCert.key,
    cert: smtpCert.cert,
    authOptional: true,
    logger: false,
    onData(stream, session, cb) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        mails.push({ rcpt: session.envelope.rcptTo.map((r) => r.address), raw: Buffer.concat(chunks).toString('utf8') });
        cb();
      });
    },
  });
  smtp.on('error', () => {});
  smtpPort = await new Promise<number>((ok) => smtp.server.listen(0, '127.0.0.1', () => ok((smtp.server.address() as AddressInfo).port)));
  t = await startTestApp({
    SVC_OUTBOUND_CA_FILE: caFile,
    SVC_REMOTE_CALL_ALLOW_PRIVATE_TARGETS: true,
    SVC_EVENT_SINK_ALLOW_PRIVATE_TARGETS: true,
  });
});

afterAll(async () => {
  await Promise.all([peer?.close(), t?.close(), new Promise<void>((ok) => (smtp ? smtp.close(() => ok()) : ok()))]);
  if (smtpCert) rmSync(smtpCert.dir, { recursive: true, force: true });
});

beforeEach(() => {
  peer.seen.length = 0;
  peer.respond = (_req, res) => {
    res.statusCode = 200;
    res.end('ok');
  };
});

async function renamedCollection(name: string): Promise<number> {
  const col = await createCollection(t);
  const res = await t.request('PATCH', `/api/v1/collections/${col}`, { body: { name, description: '  spaced out  ' } });
  expect(res.status, res.text).toBe(200);
  return col;
}

describe('remote targets: url_template, headers_template and body_template', () => {
  it('render the Jinja filters into the exact request the peer receives', async () => {
    const name = `${TRICKY} ${uniq()}`;
    const col = await renamedCollection(name);
    const created = await t.request('POST', '/api/v1/remote-targets', {
      body: {
        collection_id: col,
        name: uniq('rt'),
        description: '',
        method: 'post',
        url_template: `https://localhost:${peer.port}/{{ parameters.path | default("fallback") | lower }}?tags={{ parameters.tags | join(",") }}&n={{ parameters.tags | length }}`,
        headers_template: {
          'Content-Type': 'application/json',
          'X-Mode': '{{ parameters.mode | default("none", true) | upper }}',
        },
        body_template:
          '{"name": {{ collection.name | tojson }}, "description": {{ collection.description | trim | tojson }}, ' +
          '"tags": {{ parameters.tags | tojson }}, "slug": {{ parameters.path | replace("-", "_") | tojson }}, ' +
          '"meta": {{ parameters.meta | tojson }}, "missing": {{ parameters.nope | tojson }}}',
        allowed_subject_types: ['collection'],
      },
    });
    expect(created.status, created.text).toBe(201);
    const meta = { nested: { list: [1, 'two', null, { 'k"': 'v<' }] }, ok: true };
    const inv = await t.request('POST', `/api/v1/remote-targets/${(created.body as { id: number }).id}/invoke`, {
      body: { subject: { type: 'collection', id: col }, parameters: { path: 'Hooks-IN', tags: ['a', 'b', 'c'], mode: '', meta } },
    });
    expect(inv.status, inv.text).toBe(202);
    const taskId = (inv.body as { id: number }).id;
    await runTaskOnce(t.deps, { taskIds: [taskId] });
    const task = await t.request('GET', `/api/v1/tasks/${taskId}`);
    expect((task.body as { status: string }).status, task.text).toBe('succeeded');

    expect(peer.seen).toHaveLength(1);
    const got = peer.seen[0]!;
    expect(got.url).toBe('/hooks-in?tags=a,b,c&n=3');
    expect(got.headers['x-mode']).toBe('NONE');
    expect(JSON.parse(got.body)).toEqual({ name, description: 'spaced out', tags: ['a', 'b', 'c'], slug: 'Hooks_IN', meta, missing: null });
  });
});

describe('webhook sinks: body_template', () => {
  const bodyTemplate =
    '{"text": {{ test_marker | append: entity_name | tojson }}, "id": {{ event_id | tojson }}, "after": {{ event.after | tojson }}, ' +
    '"action": {{ action | upper | tojson }}, "keys": {{ event.after | join(",") | tojson }}, "none": {{ nothing | default("-") | tojson }}}';

  it('previewEventSink and a real delivery render valid JSON with the filters', async () => {
    const name = `${TRICKY} ${uniq()}`;
    const sinkId = (await createSink(t, { config: { body_template: bodyTemplate } })).id;
    const col = await createCollection(t);
    const subId = (await createSubscription(t, col, { sink_id: sinkId, actions: ['updated'], routing: { url: peer.url('/hook') } })).id;
    const up = await t.request('PATCH', `/api/v1/collections/${col}`, { body: { name } });
    expect(up.status, up.text).toBe(200);
    const eventId = await latestEventId(t, 'collection', col);

    const preview = await t.request('POST', `/api/v1/event-sinks/${sinkId}/preview`, {
      body: { subscription_id: subId, event_id: eventId },
    });
    expect(preview.status, preview.text).toBe(200);
    const previewed = (preview.body as { payload: Record<string, unknown> }).payload;
    expect(previewed).toMatchObject({ text: `[TEST] ${name}`, id: eventId, action: 'UPDATED', none: '-' });
    expect(previewed.after).toMatchObject({ id: col, name });

    await fanOutAll(t);
    const [delivery] = await deliveriesOf(t, subId);
    expect(delivery).toBeDefined();
    expect(await runDeliveryOnce(t.deps, { sinkIds: [sinkId] })).toBe(1);
    expect(peer.seen).toHaveLength(1);
    const sent = JSON.parse(peer.seen[0]!.body) as Record<string, unknown>;
    expect(sent).toMatchObject({ text: name, id: eventId, action: 'UPDATED', none: '-' });
    expect(sent.after).toMatchObject({ id: col, name });
    expect((sent.keys as string).split(',')).toEqual(Object.keys(sent.after as object));
    expect((await deliveriesOf(t, subId))[0]!.status).toBe('succeeded');
  });

  it('createEventSink 400 for a filter call with an unknown argument', async () => {
    const res = await t.request('POST', '/api/v1/event-sinks', {
      body: { name: uniq('sink'), kind: 'webhook', config: { body_template: '{{ summary | tojson(spaces=2) }}' } },
    });
    expect(res.status, res.text).toBe(400);
    expect(res.text).toContain('filter tojson has no argument spaces');
  });
});

/** The text of a single-part message body in its Content-Transfer-Encoding. */
function decodeBody(head: string, body: string): string {
  const encoding = /^Content-Transfer-Encoding: (.*)$/im.exec(head)?.[1]?.trim().toLowerCase();
  if (encoding === 'base64') return Buffer.from(body, 'base64').toString('utf8');
  if (encoding !== 'quoted-printable') return body;
  const bytes: number[] = [];
  const text = body.replace(/=\r\n/g, '');
  for (let i = 0; i < text.length; i++) {
    if (text[i] === '=' && /^[0-9A-F]{2}$/i.test(text.slice(i + 1, i + 3))) {
      bytes.push(parseInt(text.slice(i + 1, i + 3), 16));
      i += 2;
    } else bytes.push(...Buffer.from(text[i]!, 'utf8'));
  }
  return Buffer.from(bytes).toString('utf8');
}

describe('e-mail sinks: subject_template and body_template', () => {
  it('a delivery sends the subject and body rendered with the filters', async () => {
    const name = `Mixed Case ${uniq()}`;
    const sinkId = (
      await createSink(t, {
        kind: 'email',
        config: {
          uri: `smtps://localhost:${smtpPort}`,
          from: 'inventory@example.com',
          subject_template: '{{ test_marker }}{{ entity_type | upper }}: {{ entity_name | lower | replace(" ", "-") }}',
          body_template: 'after={{ event.after | tojson }}\nmissing={{ nothing | default("n/a") }}\nfields={{ event.after | length }}\n',
        },
      })
    ).id;
    const col = await createCollection(t);
    const subId = (
      await createSubscription(t, col, { sink_id: sinkId, actions: ['updated'], routing: { recipients: ['ops@example.com'] } })
    ).id;
    expect((await t.request('PATCH', `/api/v1/collections/${col}`, { body: { name } })).status).toBe(200);
    await fanOutAll(t);
    const before = mails.length;
    expect(await runDeliveryOnce(t.deps, { sinkIds: [sinkId] })).toBe(1);
    expect((await deliveriesOf(t, subId))[0]).toMatchObject({ status: 'succeeded', last_error: null });
    expect(mails.length).toBe(before + 1);
    const mail = mails[mails.length - 1]!;
    expect(mail.rcpt).toEqual(['ops@example.com']);
    const [rawHead, ...rest] = mail.raw.split('\r\n\r\n');
    const head = rawHead!.replace(/\r\n[ \t]+/g, ' ');
    expect(head).toMatch(new RegExp(`^Subject: COLLECTION: ${name.toLowerCase().replace(/ /g, '-')}$`, 'm'));
    const body = decodeBody(head, rest.join('\r\n\r\n')).replace(/\r\n/g, '\n');
    const lines = body.split('\n');
    const after = JSON.parse(lines[0]!.slice('after='.length)) as Record<string, unknown>;
    expect(after).toMatchObject({ id: col, name });
    expect(lines[1]).toBe('missing=n/a');
    expect(lines[2]).toBe(`fields=${Object.keys(after).length}`);
  });
});

describe('export templates', () => {
  it('an export renders items through the filters, also inside a rendered fragment', async () => {
    const col = await createCollection(t);
    const cls = await t.request('POST', '/api/v1/classes', { body: { name: uniq('class'), collection_id: col } });
    expect(cls.status, cls.text).toBe(201);
    const klass = (cls.body as { id: number }).id;
    for (const [name, data] of [
      [TRICKY, { tags: ['x', 'y'], port: 443 }],
      ['plain', { tags: [] }],
    ] as const) {
      const o = await t.request('POST', `/api/v1/classes/${klass}/objects`, { body: { name, json_data: data } });
      expect(o.status, o.text).toBe(201);
    }
    const frag = await t.request('POST', '/api/v1/export-templates', {
      body: {
        collection_id: col,
        kind: 'fragment',
        name: uniq('row'),
        template:
          '{"name": {{ item.name | tojson }}, "tags": {{ item.data.tags | join("|") | default("-", true) | tojson }}, "port": {{ item.data.port | default(80) }}}',
      },
    });
    expect(frag.status, frag.text).toBe(201);
    const tpl = await t.request('POST', '/api/v1/export-templates', {
      body: {
        collection_id: col,
        name: uniq('tpl'),
        content_type: 'application/json',
        default_query: 'sort=name',
        template: `{"count": {{ items | length }}, "rows": [{% for i in items %}{% unless forloop.first %},{% endunless %}{% render '${(frag.body as { name: string }).name}', item: i %}{% endfor %}], "names": {{ items | join(", ", attribute="name") | tojson }}}`,
      },
    });
    expect(tpl.status, tpl.text).toBe(201);
    const run = await t.request('POST', `/api/v1/export-templates/${(tpl.body as { id: number }).id}/exports`, {
      body: { scope: { kind: 'objects_in_class', class_id: klass } },
    });
    expect(run.status, run.text).toBe(202);
    const taskId = (run.body as { id: number }).id;
    await runTaskOnce(t.deps, { taskIds: [taskId] });
    const task = await t.request('GET', `/api/v1/tasks/${taskId}`);
    expect((task.body as { status: string }).status, task.text).toBe('succeeded');
    const out = await t.request('GET', `/api/v1/exports/${taskId}/output`);
    expect(out.status).toBe(200);
    expect(out.body).toEqual({
      count: 2,
      rows: [
        { name: TRICKY, tags: 'x|y', port: 443 },
        { name: 'plain', tags: '-', port: 80 },
      ],
      names: `${TRICKY}, plain`,
    });
  });
});
