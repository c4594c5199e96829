// The web console (console/, served at /console) in a real browser: Playwright drives Debian's
// Chromium against the test app on a socket. Setup goes through the shipped SDK; the browser signs
// in, walks collections → class → a cursor-paged, sorted and filtered objects table → an object,
// sees a schema error inline and a stale edit's conflict. Screenshots go to artifacts/console/
// (not committed). API responses are checked against openapi.yaml; /console is not part of it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import type { InventoryClient } from '../clients/typescript/index.ts';
import { runTaskOnce } from '../src/workers/tasks.ts';
import { createSink, createSubscription, fanOutAll } from './event-fixtures.ts';
import { ADMIN_PASSWORD, uniq, type TestApp } from './helpers.ts';
import { userWith } from './iam-fixtures.ts';
import { poll, startConsole, unexpectedPageErrors, type ConsoleSession } from './console-harness.ts';

let session: ConsoleSession;
let t: TestApp;
let baseUrl: string;
let page: Page;
let sdk: InventoryClient;
let collectionName: string;
let className: string;
let classId: number;

beforeAll(async () => {
  session = await startConsole('svc_console');
  ({ t, baseUrl, page, sdk } = session);
  collectionName = uniq('console-col');
  className = uniq('Server');
  const col = await sdk.call('createCollection', { body: { name: collectionName, description: 'console test' } });
  const cls = await sdk.call('createClass', {
    body: {
      name: className,
      collection_id: col.id,
      validate_schema: true,
      json_schema: {
        type: 'object',
        properties: { rack: { type: 'string' }, units: { type: 'integer', minimum: 1 } },
        required: ['rack'],
      },
    },
  });
  classId = cls.id;
  for (let i = 1; i <= 30; i++) {
    const n = String(i).padStart(3, '0');
    await sdk.call('createObject', {
      params: { path: { class_id: classId } },
      body: { name: `host-${n}`, description: i % 2 ? 'odd' : 'even', json_data: { rack: `r${i % 3}`, units: 1 } },
    });
  }
});

afterAll(async () => {
  await session?.close();
});

const signInAs = (name: string, password: string) => session.signInAs(name, password);
const shot = (name: string) => session.shot(name);
const mainNav = () => page.getByRole('navigation', { name: 'Main' });

describe('the web console', () => {
  it('is served at /console with a self-only CSP, typed assets and an SPA fallback', async () => {
    const index = await fetch(`${baseUrl}/console/`);
    expect(index.status).toBe(200);
    expect(index.headers.get('content-type')).toBe('text/html; charset=utf-8');
    const csp = index.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("default-src 'self'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toMatch(/unsafe-inline|https?:/);
    const html = await index.text();
    const script = /src="(\/console\/assets\/[^"]+\.js)"/.exec(html)?.[1];
    expect(script).toBeDefined();
    const js = await fetch(`${baseUrl}${script}`);
    expect(js.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(js.headers.get('x-content-type-options')).toBe('nosniff');
    // compressed for a client that accepts it (fetch asks for gzip; the browser below gets brotli)
    expect(js.headers.get('content-encoding')).toBe('gzip');
    expect(js.headers.get('vary')).toBe('accept-encoding');
    // and revalidated by its ETag
    const etag = js.headers.get('etag') ?? '';
    expect(etag).toMatch(/^W\/"/);
    const again = await fetch(`${baseUrl}${script}`, { headers: { 'if-none-match': etag } });
    expect(again.status).toBe(304);
    expect(await again.text()).toBe('');
    const deep = await fetch(`${baseUrl}/console/classes/${classId}/objects/1`);
    expect(deep.status).toBe(200);
    expect(await deep.text()).toBe(html);
    expect((await fetch(`${baseUrl}/console/assets/missing.js`)).status).toBe(404);
    expect((await fetch(`${baseUrl}/console/..%2f..%2fpackage.json`)).headers.get('content-type')).toBe('text/html; charset=utf-8');
    const bare = await fetch(`${baseUrl}/console`, { redirect: 'manual' });
    expect(bare.status).toBe(301);
    expect(bare.headers.get('location')).toBe('/console/');
  });

  it('signs in with name, password and identity scope; the token is kept in sessionStorage only', async () => {
    const scriptResponse = page.waitForResponse((r) => /\/console\/assets\/[^/]+\.js$/.test(r.url()));
    await page.goto(`${baseUrl}/console/`);
    // Chromium asks for br and gets the script in it
    expect((await (await scriptResponse).allHeaders())['content-encoding']).toBe('br');
    await poll(() => page.getByLabel('Identity scope').locator('option').allTextContents()).toContain('local');
    await page.getByLabel('Name').fill('admin');
    await page.getByLabel('Password').fill('wrong-password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').waitFor();
    await shot('01-sign-in-refused');
    await page.getByLabel('Password').fill(ADMIN_PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Collections' }).waitFor();
    const stored = await page.evaluate(() => ({
      session: Object.keys(sessionStorage),
      local: Object.keys(localStorage),
      cookie: document.cookie,
    }));
    expect(stored.session).toEqual(['inventory-console-token']);
    expect(stored.local).toEqual([]);
    expect(stored.cookie).toBe('');
  });

  it('shows the collections tree with its classes and opens a class as a cursor-paged table', async () => {
    const tree = page.getByRole('navigation', { name: 'Collections and classes' });
    await tree.getByText(collectionName).waitFor();
    await shot('02-collections');
    await tree.getByRole('link', { name: className }).click();
    await page.getByRole('heading', { name: className }).waitFor();
    const rows = page.locator('tbody tr');
    await poll(() => rows.count()).toBe(25);
    await poll(() => page.locator('#objects-status').textContent()).toBe('Objects 1–25 of 30');
    await shot('03-objects-page-1');
    await page.getByRole('button', { name: 'Next page' }).click();
    await poll(() => page.locator('#objects-status').textContent()).toBe('Objects 26–30 of 30');
    expect(await rows.count()).toBe(5);
    expect(await page.getByRole('button', { name: 'Next page' }).isDisabled()).toBe(true);
    await page.getByRole('button', { name: 'Previous page' }).click();
    await poll(() => page.locator('#objects-status').textContent()).toBe('Objects 1–25 of 30');
  });

  it('sorts by a column and filters through the list query language', async () => {
    await page.getByRole('button', { name: 'Name' }).click();
    await page.getByRole('button', { name: 'Name' }).click(); // second click: descending
    await poll(() => page.locator('tbody tr td:nth-child(2)').first().textContent()).toBe('host-030');
    expect(await page.getByRole('columnheader', { name: /Name/ }).getAttribute('aria-sort')).toBe('descending');
    // keyboard only: type the filter value and press Enter
    await page.getByLabel('Filter value').fill('host-01');
    await page.getByLabel('Filter value').press('Enter');
    await poll(() => page.locator('#objects-status').textContent()).toBe('Objects 1–10 of 10');
    expect(await page.locator('tbody tr td:nth-child(2)').allTextContents()).toEqual(
      Array.from({ length: 10 }, (_, i) => `host-0${19 - i}`),
    );
    await page.getByLabel('Field').selectOption('description');
    await page.getByLabel('Match').selectOption('equals');
    await page.getByLabel('Filter value').fill('even');
    await page.getByRole('button', { name: 'Apply filter' }).click();
    await poll(() => page.locator('#objects-status').textContent()).toBe('Objects 1–15 of 15');
    await shot('04-objects-filtered');
  });

  it('shows an object with its schema; invalid data gets the schema error inline', async () => {
    await page.getByRole('link', { name: 'host-030' }).click();
    await page.getByRole('heading', { name: 'host-030' }).waitFor();
    // the class (and so its schema) is read beside the object and may arrive after the heading
    await poll(() => page.getByRole('complementary', { name: 'Class schema' }).textContent()).toContain('"required"');
    const data = page.getByLabel('JSON data');
    expect(JSON.parse(await data.inputValue())).toEqual({ rack: 'r0', units: 1 });
    await data.fill('{"rack": 5, "units": 1}');
    await page.getByRole('button', { name: 'Save' }).click();
    const problem = page.locator('#obj-problem');
    await problem.waitFor();
    expect(await problem.getByRole('list', { name: 'Validation errors' }).textContent()).toContain('/rack');
    expect(await data.getAttribute('aria-invalid')).toBe('true');
    await shot('05-object-schema-error');
    await data.fill('{"rack": "r9", "units": 2');
    await page.getByRole('button', { name: 'Save' }).click();
    await poll(() => problem.textContent()).toContain('not valid JSON');
    await data.fill('{"rack": "r9", "units": 2}');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('status').filter({ hasText: 'Saved' }).waitFor();
  });

  it('an edit with a stale revision shows the conflict and does not overwrite', async () => {
    const objectId = Number(/objects\/(\d+)$/.exec(page.url())![1]);
    // someone else changes the object after the page loaded it
    await sdk.call('updateObject', {
      params: { path: { class_id: classId, object_id: objectId } },
      body: { json_data: { rack: 'elsewhere', units: 4 } },
    });
    await page.getByLabel('JSON data').fill('{"rack": "mine", "units": 3}');
    await page.getByRole('button', { name: 'Save' }).click();
    const problem = page.locator('#obj-problem.conflict');
    await problem.waitFor();
    expect(await problem.textContent()).toContain('changed by someone else');
    await shot('06-object-conflict');
    const current = await sdk.call('getObject', { params: { path: { class_id: classId, object_id: objectId } } });
    expect(current.json_data).toEqual({ rack: 'elsewhere', units: 4 });
    await page.getByRole('button', { name: 'Reload latest version' }).click();
    await poll(async () => JSON.parse(await page.getByLabel('JSON data').inputValue()) as unknown).toEqual({ rack: 'elsewhere', units: 4 });
  });

  it('is usable on a narrow window, and a reload of a deep link keeps the session', async () => {
    await page.setViewportSize({ width: 390, height: 800 });
    await page.reload();
    await page.getByRole('heading', { name: 'host-030' }).waitFor();
    await page.getByRole('button', { name: 'Save' }).scrollIntoViewIfNeeded();
    expect(await page.getByRole('button', { name: 'Save' }).isVisible()).toBe(true);
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    expect(overflow).toBeLessThanOrEqual(0);
    await shot('07-object-narrow');
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in to the inventory' }).waitFor();
    expect(await page.evaluate(() => Object.keys(sessionStorage))).toEqual([]);
  });

  it('lists audit events paged by cursor, filtered by collection and action', async () => {
    await page.setViewportSize({ width: 1280, height: 800 });
    await signInAs('admin', ADMIN_PASSWORD);
    await mainNav().getByRole('link', { name: 'Audit events' }).click();
    await page.getByRole('heading', { name: 'Audit events' }).waitFor();
    await poll(() => page.getByLabel('Collection').locator('option').allTextContents()).toContain(collectionName);
    await page.getByLabel('Collection').selectOption({ label: collectionName });
    await page.getByRole('button', { name: 'Apply filter' }).click();
    // the collection, its class, 30 objects and the edits: more than one page
    const shown = async () => ({
      status: await page.locator('#audit-status').textContent(),
      collections: [...new Set(await page.locator('tbody tr td:nth-child(5)').allTextContents())],
    });
    await poll(shown).toMatchObject({ status: expect.stringMatching(/^Events 1–25 of \d+$/), collections: [collectionName] });
    const total = Number(/of (\d+)$/.exec((await page.locator('#audit-status').textContent())!)![1]);
    expect(total).toBeGreaterThan(25);
    await page.getByRole('button', { name: 'Next page' }).click();
    await poll(() => page.locator('#audit-status').textContent()).toBe(`Events 26–${Math.min(50, total)} of ${total}`);
    // keyboard: type the action and press Enter
    await page.getByLabel('Action').fill('updated');
    await page.getByLabel('Action').press('Enter');
    await poll(async () => [...new Set(await page.locator('tbody tr td:nth-child(4)').allTextContents())]).toEqual(['updated']);
    await poll(() => page.locator('#audit-status').textContent()).toMatch(/^Events 1–\d+ of \d+$/);
    const rows = page.locator('tbody tr');
    expect(await rows.count()).toBeGreaterThanOrEqual(2); // the console's save and the SDK's update of host-030
    expect(new Set(await page.locator('tbody tr td:nth-child(4)').allTextContents())).toEqual(new Set(['updated']));
    expect(new Set(await page.locator('tbody tr td:nth-child(5)').allTextContents())).toEqual(new Set([collectionName]));
    await shot('08-audit-filtered');
  });

  it('shows tasks with a progress bar that follows an export to succeeded', async () => {
    const task = await sdk.call('createExport', { body: { scope: { kind: 'objects_in_class', class_id: classId } } });
    await mainNav().getByRole('link', { name: 'Tasks' }).click();
    await page.getByRole('heading', { name: 'Tasks' }).waitFor();
    const row = page.locator(`tr[data-task-id="${task.id}"]`);
    await row.waitFor();
    expect(await row.locator('.task-status').textContent()).toBe('queued');
    const bar = page.getByRole('progressbar', { name: `Task ${task.id} progress` });
    expect(await bar.getAttribute('value')).toBeNull(); // indeterminate while queued
    await shot('09-task-queued');
    // no task workers run in the test app: run this one now; the page's polling picks up the result
    await runTaskOnce(t.deps, { taskIds: [task.id] });
    await poll(() => row.locator('.task-status').textContent(), { timeout: 15_000 }).toBe('succeeded');
    expect(await bar.getAttribute('value')).toBe('100');
    expect(await row.textContent()).toContain('30/30 items');
    await shot('10-task-succeeded');
  });

  it('shows delivery health and retries a dead delivery', async () => {
    const sink = await createSink(t);
    const col = await sdk.call('createCollection', { body: { name: uniq('console-events') } });
    await createSubscription(t, col.id, { sink_id: sink.id, entity_types: ['collection'], actions: ['updated'] });
    await sdk.call('updateCollection', { params: { path: { collection_id: col.id } }, body: { description: 'changed' } });
    await fanOutAll(t);
    const [delivery] = await sdk.call('listEventDeliveries', { params: { query: { sink_id: sink.id } } });
    expect(delivery).toBeDefined();
    await sdk.call('markEventDeliveryDead', { params: { path: { delivery_id: delivery!.id } } });

    await mainNav().getByRole('link', { name: 'Delivery health' }).click();
    await page.getByRole('heading', { name: 'Delivery health' }).waitFor();
    expect(Number(await page.locator('dd[data-status="dead"]').textContent())).toBeGreaterThanOrEqual(1);
    const sinkName = (await sdk.call('getEventSink', { params: { path: { sink_id: sink.id } } })).name;
    await page
      .getByRole('table', { name: 'Sinks' })
      .getByRole('row', { name: new RegExp(sinkName) })
      .waitFor();
    const retry = page.getByRole('button', { name: `Retry delivery ${delivery!.id}` });
    await retry.waitFor();
    await shot('11-delivery-health');
    await retry.focus();
    await page.keyboard.press('Enter');
    await page
      .getByRole('status')
      .filter({ hasText: `Delivery ${delivery!.id} released for retry` })
      .waitFor();
    await retry.waitFor({ state: 'detached' });
    const after = await sdk.call('getEventDelivery', { params: { path: { delivery_id: delivery!.id } } });
    expect(after.status).not.toBe('dead');
  });

  it('runs a structured search (class + one field predicate) with paged results', async () => {
    await mainNav().getByRole('link', { name: 'Search' }).click();
    await page.getByRole('heading', { name: 'Structured search' }).waitFor();
    await poll(() => page.getByLabel('Class').locator('option').allTextContents()).toContain(`${collectionName} / ${className}`);
    await page.getByLabel('Class').selectOption({ label: `${collectionName} / ${className}` });
    await page.getByLabel('Field').selectOption('name');
    await page.getByLabel('Operator').selectOption('startswith');
    await page.getByLabel('Value').fill('host-0');
    await page.getByRole('button', { name: 'Search', exact: true }).click();
    await poll(() => page.locator('#search-status').textContent()).toBe('Results 1–25 of 30');
    const results = page.getByRole('list', { name: 'Search results' }).getByRole('link');
    expect(await results.first().textContent()).toBe('host-001');
    await page.getByRole('button', { name: 'Next page' }).click();
    await poll(() => page.locator('#search-status').textContent()).toBe('Results 26–30 of 30');
    expect(await results.allTextContents()).toEqual(['host-026', 'host-027', 'host-028', 'host-029', 'host-030']);
    await page.getByLabel('Field').selectOption('json_data');
    await page.getByLabel('JSON path').fill('rack');
    await page.getByLabel('Operator').selectOption('equals');
    await page.getByLabel('Value').fill('r1');
    await page.getByLabel('Value').press('Enter');
    await poll(() => page.locator('#search-status').textContent()).toBe('Results 1–10 of 10');
    await shot('12-search');
  });

  it('a non-admin sees only what they may: one read-only collection, no admin views, editing disabled', async () => {
    const col = await sdk.call('createCollection', { body: { name: uniq('console-ro') } });
    const cls = await sdk.call('createClass', { body: { name: uniq('Switch'), collection_id: col.id } });
    await sdk.call('createObject', { params: { path: { class_id: cls.id } }, body: { name: 'sw-1', json_data: { port: 1 } } });
    const { name, password } = await userWith(t, [[col.id, ['ReadCollection', 'ReadClass', 'ReadObject']]]);

    await page.getByRole('button', { name: 'Sign out' }).click();
    await signInAs(name, password);
    const tree = page.getByRole('navigation', { name: 'Collections and classes' });
    await tree.getByText(col.name).waitFor();
    expect(await tree.locator('strong').allTextContents()).toEqual([col.name]);
    expect(await tree.getByRole('link').allTextContents()).toEqual([cls.name]);
    await poll(() => mainNav().getByRole('link').allTextContents()).toEqual([
      'Collections',
      'Search',
      'Tasks',
      'Audit events',
      'My tokens',
    ]);
    await tree.getByRole('link', { name: cls.name }).click();
    await page.getByRole('link', { name: 'sw-1' }).click();
    await page.getByRole('heading', { name: 'sw-1' }).waitFor();
    await page.locator('#obj-readonly').waitFor();
    expect(await page.getByRole('button', { name: 'Save' }).isDisabled()).toBe(true);
    expect(await page.getByLabel('JSON data').isEditable()).toBe(false);
    expect(JSON.parse(await page.getByLabel('JSON data').inputValue())).toEqual({ port: 1 });
    await shot('13-non-admin-read-only');
    // the admin-only view is not offered even by its address
    await page.goto(`${baseUrl}/console/deliveries`);
    await page.getByText('Only administrators see delivery health.').waitFor();
  });

  it('raised no page errors or CSP violations, and every API response matched the contract', () => {
    // the browser logs the answers the flow provokes (wrong password, schema error, stale edit) as failed loads
    // (and 403: the console learns that a non-admin is not an administrator by asking an admin-only read)
    expect(unexpectedPageErrors(session.pageErrors, [401, 400, 412, 403])).toEqual([]);
    expect(session.violations).toEqual([]);
  });
});
