// The console's exploring views in a real browser (test/console-harness.ts): an object's relations
// (listed with links, one created in the browser) and its neighbourhood graph drawn as SVG; the
// plain-text search, paged and streamed, and the structured search streamed page after page with a
// count; a task's detail page and cancelling a queued task; what a non-admin without the rights is
// not offered. Setup and checks go through the shipped SDK; screenshots go to artifacts/console/.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import type { InventoryClient, Schemas } from '../clients/typescript/index.ts';
import { readFile } from 'node:fs/promises';
import { runTaskOnce } from '../src/workers/tasks.ts';
import { ADMIN_PASSWORD, uniq, type TestApp } from './helpers.ts';
import { userWith } from './iam-fixtures.ts';
import { poll, startConsole, unexpectedPageErrors, type ConsoleSession } from './console-harness.ts';

let session: ConsoleSession;
let t: TestApp;
let baseUrl: string;
let page: Page;
let sdk: InventoryClient;
/** In the descriptions of the collection, the server class and every server, for the plain-text search. */
const tag = uniq('exploretag');
let collection: Schemas['Collection'];
let serverClass: Schemas['ClassExpanded'];
let rackClass: Schemas['ClassExpanded'];
const servers: Schemas['InventoryObject'][] = [];
const racks: Schemas['InventoryObject'][] = [];
let sitsIn: Schemas['ClassRelation'];

beforeAll(async () => {
  session = await startConsole('svc_console_explore');
  ({ t, baseUrl, page, sdk } = session);
  collection = await sdk.call('createCollection', { body: { name: uniq('explore-col'), description: tag } });
  serverClass = await sdk.call('createClass', { body: { name: uniq('Server'), description: tag, collection_id: collection.id } });
  rackClass = await sdk.call('createClass', { body: { name: uniq('Rack'), collection_id: collection.id } });
  for (let i = 1; i <= 30; i++)
    servers.push(
      await sdk.call('createObject', {
        params: { path: { class_id: serverClass.id } },
        body: { name: `node-${String(i).padStart(3, '0')}`, description: tag, json_data: { n: i } },
      }),
    );
  for (const name of ['rack-a', 'rack-b', 'rack-c'])
    racks.push(await sdk.call('createObject', { params: { path: { class_id: rackClass.id } }, body: { name, json_data: {} } }));
  // servers sit in racks; servers peer with servers (a relation within one class)
  sitsIn = await sdk.call('createClassRelation', {
    body: { from_class_id: serverClass.id, to_class_id: rackClass.id, forward_alias: 'sits in', reverse_alias: 'holds' },
  });
  const peers = await sdk.call('createClassRelation', {
    body: { from_class_id: serverClass.id, to_class_id: serverClass.id, forward_alias: 'peers with', reverse_alias: 'peer of' },
  });
  const relate = (rel: Schemas['ClassRelation'], from: Schemas['InventoryObject'], to: Schemas['InventoryObject']) =>
    sdk.call('createObjectRelation', { body: { class_relation_id: rel.id, from_object_id: from.id, to_object_id: to.id } });
  await relate(sitsIn, servers[0]!, racks[0]!);
  await relate(sitsIn, servers[1]!, racks[0]!);
  await relate(peers, servers[0]!, servers[2]!);
});

afterAll(async () => {
  await session?.close();
});

const mainNav = () => page.getByRole('navigation', { name: 'Main' });
const objectUrl = (o: Schemas['InventoryObject']) => `${baseUrl}/console/classes/${o.svc_class_id}/objects/${o.id}`;
const graphNames = () => page.locator('svg.graph a.node text').allTextContents();
const relationRows = () => page.getByRole('table', { name: 'Relations' }).locator('tbody tr');

describe('the console explores', () => {
  it('finds objects with the plain-text search, page by page', async () => {
    await session.signInAs('admin', ADMIN_PASSWORD);
    await mainNav().getByRole('link', { name: 'Search' }).click();
    await page.getByRole('heading', { name: 'Plain-text search' }).waitFor();
    const form = page.getByRole('search', { name: 'Plain-text search' });
    await form.getByLabel('Text to find').fill(tag);
    await form.getByRole('button', { name: 'Find text' }).click();
    const results = page.getByRole('list', { name: 'Plain-text results' });
    // the first page: 25 servers (limit per kind), the collection and the server class
    await poll(() => page.locator('#plain-status').textContent()).toBe('27 matches shown');
    expect(await results.locator('li[data-kind="collection"]').allTextContents()).toEqual([expect.stringContaining(collection.name)]);
    expect(await results.locator('li[data-kind="class"] a').allTextContents()).toEqual([serverClass.name]);
    await page.getByRole('button', { name: 'Show more matches' }).click();
    await poll(() => page.locator('#plain-status').textContent()).toBe('32 matches shown');
    expect(await results.locator('li[data-kind="object"] a').allTextContents()).toEqual(servers.map((s) => s.name));
    await session.shot('explore-01-plain-search');
    await results.getByRole('link', { name: 'node-007' }).click();
    await page.getByRole('heading', { name: 'node-007', exact: true }).waitFor();
  });

  it('streams the plain-text search: every match of every page, with the count', async () => {
    await mainNav().getByRole('link', { name: 'Search' }).click();
    const form = page.getByRole('search', { name: 'Plain-text search' });
    await form.getByLabel('Text to find').fill(tag);
    await form.getByLabel('Look in').selectOption({ label: 'objects only' });
    await form.getByLabel('Stream results as they arrive').check();
    await form.getByLabel('Text to find').press('Enter');
    const status = page.locator('#plain-stream-status');
    await poll(() => status.textContent()).toBe('Done: 30 results');
    const results = page.getByRole('list', { name: 'Streamed plain-text results' });
    expect(await results.getByRole('link').allTextContents()).toEqual(servers.map((s) => s.name));
    expect(await page.getByRole('button', { name: 'Stop streaming the plain-text search' }).isDisabled()).toBe(true);
    await session.shot('explore-02-plain-stream');
  });

  it('streams the structured search page after page with the count of all matches', async () => {
    const form = page.getByRole('search', { name: 'Structured search' });
    await poll(() => form.getByLabel('Class').locator('option').allTextContents()).toContain(`${collection.name} / ${serverClass.name}`);
    await form.getByLabel('Class').selectOption({ label: `${collection.name} / ${serverClass.name}` });
    await form.getByLabel('Operator').selectOption('startswith');
    await form.getByLabel('Value').fill('node-');
    await form.getByLabel('Stream all pages as they arrive').check();
    await form.getByRole('button', { name: 'Search', exact: true }).click();
    const status = page.locator('#search-stream-status');
    // two pages of 25 through the stream, the total from the first page's `done`
    await poll(() => status.textContent()).toBe('Done: 30 of 30 results');
    const results = page.getByRole('list', { name: 'Streamed search results' });
    expect(await results.getByRole('link').allTextContents()).toEqual(servers.map((s) => s.name));
    await session.shot('explore-03-structured-stream');
  });

  it('stops a streamed search: the results so far stay, with their count', async () => {
    // the browser holds the second page's request until Stop was pressed (the service answers both)
    let requests = 0;
    let release = () => {};
    const held = new Promise<void>((ok) => (release = ok));
    await page.route('**/api/v1/search/stream', async (route) => {
      if (++requests === 2) await held;
      await route.continue().catch(() => undefined);
    });
    const form = page.getByRole('search', { name: 'Structured search' });
    await form.getByRole('button', { name: 'Search', exact: true }).click();
    const status = page.locator('#search-stream-status');
    await poll(() => status.textContent()).toBe('Streaming… 25 of 30 results so far');
    const stop = page.getByRole('button', { name: 'Stop streaming the structured search' });
    expect(await stop.isEnabled()).toBe(true);
    await stop.click();
    await poll(() => status.textContent()).toBe('Stopped: 25 of 30 results');
    release();
    await page.unroute('**/api/v1/search/stream');
    expect(await page.getByRole('list', { name: 'Streamed search results' }).getByRole('link').count()).toBe(25);
    expect(await stop.isDisabled()).toBe(true);
  });

  it("lists an object's relations with links, in both directions and within its own class", async () => {
    await page.goto(objectUrl(servers[0]!));
    await page.getByRole('heading', { name: 'node-001', exact: true }).waitFor();
    await poll(() => relationRows().count()).toBe(2);
    expect(await relationRows().nth(0).textContent()).toContain(`sits in (${rackClass.name})`);
    expect(await relationRows().nth(0).getByRole('link').textContent()).toBe('rack-a');
    expect(await relationRows().nth(1).textContent()).toContain(`peers with (${serverClass.name})`);
    expect(await relationRows().nth(1).getByRole('link').textContent()).toBe('node-003');
    // the other end sees it under the reverse alias
    await page.goto(objectUrl(servers[2]!));
    await page.getByRole('heading', { name: 'node-003', exact: true }).waitFor();
    await poll(() => relationRows().allTextContents()).toEqual([expect.stringContaining(`peer of (${serverClass.name})node-001`)]);
    await relationRows().getByRole('link', { name: 'node-001' }).click();
    await page.getByRole('heading', { name: 'node-001', exact: true }).waitFor();
  });

  it('creates a relation in the browser (checked through the SDK) and the graph shows the new neighbour', async () => {
    await poll(() => graphNames().then((n) => n.sort())).toEqual(['node-003', 'rack-a']);
    const form = page.getByRole('form', { name: 'Add a relation' });
    await form.getByLabel('Relation').selectOption({ label: `sits in (${rackClass.name})` });
    await form.getByLabel('Narrow the object list').fill('rack-b');
    await poll(() => form.getByLabel('Related object').locator('option').allTextContents()).toEqual(['rack-b']);
    await form.getByRole('button', { name: 'Add relation' }).click();
    await page.getByRole('status').filter({ hasText: 'Related to rack-b.' }).waitFor();
    const created = await sdk.call('listObjectRelations', {
      params: { query: { from_object_id: servers[0]!.id, to_object_id: racks[1]!.id } },
    });
    expect(created.map((r) => r.class_relation_id)).toEqual([sitsIn.id]);
    await poll(() => relationRows().count()).toBe(3);
    await poll(() => graphNames().then((n) => n.sort())).toEqual(['node-003', 'rack-a', 'rack-b']);
    expect(await page.locator('svg.graph line').count()).toBe(3);
    await session.shot('explore-04-relations-and-graph');
  });

  it('removes a relation (checked through the SDK)', async () => {
    await page.getByRole('button', { name: 'Remove relation to rack-b' }).click();
    await page.getByRole('status').filter({ hasText: 'Removed the relation to rack-b.' }).waitFor();
    expect(
      await sdk.call('listObjectRelations', { params: { query: { from_object_id: servers[0]!.id, to_object_id: racks[1]!.id } } }),
    ).toEqual([]);
    await poll(() => relationRows().count()).toBe(2);
    await poll(() => graphNames().then((n) => n.sort())).toEqual(['node-003', 'rack-a']);
  });

  it('draws the neighbourhood graph with labelled node links; a node opens by keyboard or click', async () => {
    const graph = page.getByRole('group', { name: 'Relation graph around node-001' });
    const rackA = graph.getByRole('link', { name: new RegExp(`^rack-a, ${rackClass.name}, 1 hop away$`) });
    await rackA.focus();
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'rack-a', exact: true }).waitFor();
    // around rack-a: the two servers in it; two hops reach node-003 through node-001
    await poll(() => graphNames().then((n) => n.sort())).toEqual(['node-001', 'node-002']);
    expect(await page.locator('#graph-text').textContent()).toContain('node-001 is related to rack-a');
    await page.getByLabel('Hops shown').selectOption('2');
    await poll(() => graphNames().then((n) => n.sort())).toEqual(['node-001', 'node-002', 'node-003']);
    await session.shot('explore-05-graph-two-hops');
    await page.locator('svg.graph a.node', { hasText: 'node-002' }).click();
    await page.getByRole('heading', { name: 'node-002', exact: true }).waitFor();
    expect(page.url()).toBe(objectUrl(servers[1]!));
  });

  it('fits a narrow window: the relations and the graph without horizontal overflow', async () => {
    await page.setViewportSize({ width: 390, height: 800 });
    await page.goto(objectUrl(servers[0]!));
    await poll(() => graphNames().then((n) => n.length)).toBe(2);
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    expect(overflow).toBeLessThanOrEqual(0);
    await session.shot('explore-06-object-narrow');
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  it("opens a task's detail page from the list: fields, progress, events, and the export's output to download", async () => {
    const task = await sdk.call('createExport', { body: { scope: { kind: 'objects_in_class', class_id: serverClass.id } } });
    await runTaskOnce(t.deps, { taskIds: [task.id] });
    await mainNav().getByRole('link', { name: 'Tasks' }).click();
    await page.getByRole('heading', { name: 'Tasks' }).waitFor();
    await page.getByLabel('Show').selectOption({ label: 'exports' });
    await page.getByRole('link', { name: `Task ${task.id} (export)` }).click();
    await page.getByRole('heading', { name: `Task ${task.id}: export` }).waitFor();
    expect(await page.locator('#task-status').textContent()).toBe('succeeded');
    expect(await page.locator('#task-items').textContent()).toBe('30/30 items processed, 30 succeeded, 0 failed');
    expect(await page.getByRole('progressbar', { name: 'Progress' }).getAttribute('value')).toBe('100');
    expect(await page.getByLabel('Task summary').textContent()).toContain('"count": 30');
    await poll(() => page.getByRole('list', { name: 'Task events' }).locator('li').count()).toBeGreaterThanOrEqual(2);
    expect(await page.getByRole('list', { name: 'Task events' }).textContent()).toContain('queued');
    // a succeeded task is not cancellable
    expect(await page.getByRole('button', { name: 'Cancel task' }).count()).toBe(0);
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', { name: 'Download export output' }).click(),
    ]);
    expect(download.suggestedFilename()).toBe(`export-${task.id}.json`);
    const output = JSON.parse(await readFile((await download.path())!, 'utf8')) as { items?: unknown[] };
    expect(output.items).toHaveLength(30);
    await page
      .getByRole('status')
      .filter({ hasText: `Downloaded export-${task.id}.json` })
      .waitFor();
    await session.shot('explore-07-task-detail');
  });

  it('cancels a queued task (checked through the SDK)', async () => {
    const task = await sdk.call('createExport', { body: { scope: { kind: 'objects_in_class', class_id: rackClass.id } } });
    await page.goto(`${baseUrl}/console/tasks/${task.id}`);
    await page.getByRole('heading', { name: `Task ${task.id}: export` }).waitFor();
    expect(await page.locator('#task-status').textContent()).toBe('queued');
    expect(await page.getByRole('progressbar', { name: 'Progress' }).getAttribute('value')).toBeNull();
    await session.shot('explore-08-task-queued');
    const cancel = page.getByRole('button', { name: 'Cancel task' });
    await cancel.focus();
    await page.keyboard.press('Enter');
    await page
      .getByRole('status')
      .filter({ hasText: `Task ${task.id} cancelled.` })
      .waitFor();
    expect((await sdk.call('getTask', { params: { path: { task_id: task.id } } })).status).toBe('cancelled');
    await poll(() => page.locator('#task-status').textContent()).toBe('cancelled');
    expect(await cancel.count()).toBe(0);
    await poll(() => page.getByRole('list', { name: 'Task events' }).textContent()).toContain('cancelled by user admin');
  });

  it("fits a narrow window: a task's page and the search page with streamed results", async () => {
    const overflow = () => page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    await page.setViewportSize({ width: 390, height: 800 });
    await page.reload();
    await page.getByRole('heading', { name: /^Task \d+: export$/ }).waitFor();
    expect(await overflow()).toBeLessThanOrEqual(0);
    await session.shot('explore-09-task-narrow');
    await mainNav().getByRole('link', { name: 'Search' }).click();
    const form = page.getByRole('search', { name: 'Plain-text search' });
    await form.getByLabel('Text to find').fill(tag);
    await form.getByLabel('Stream results as they arrive').check();
    await form.getByRole('button', { name: 'Find text' }).click();
    await poll(() => page.locator('#plain-stream-status').textContent()).toBe('Done: 32 results');
    expect(await overflow()).toBeLessThanOrEqual(0);
    await session.shot('explore-10-search-narrow');
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  it('a non-admin without the rights is offered no relation changes and no cancel of tasks not theirs', async () => {
    const queued = await sdk.call('createExport', { body: { scope: { kind: 'objects_in_class', class_id: rackClass.id } } });
    const reader = await userWith(t, [
      [collection.id, ['ReadCollection', 'ReadClass', 'ReadObject', 'ReadClassRelation', 'ReadObjectRelation']],
    ]);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in to the inventory' }).waitFor();
    await session.signInAs(reader.name, reader.password);
    await page.goto(objectUrl(servers[0]!));
    await page.getByRole('heading', { name: 'node-001', exact: true }).waitFor();
    await page.getByText('You may not add relations to this object.').waitFor();
    expect(await relationRows().count()).toBe(2);
    expect(await page.getByRole('button', { name: /^Remove relation/ }).count()).toBe(0);
    expect(await page.getByRole('form', { name: 'Add a relation' }).count()).toBe(0);
    await poll(() => graphNames().then((n) => n.sort())).toEqual(['node-003', 'rack-a']);
    await session.shot('explore-11-non-admin-relations');
    // another principal's task: not shown at all, so nothing to cancel
    await page.goto(`${baseUrl}/console/tasks/${queued.id}`);
    await page
      .getByRole('alert')
      .filter({ hasText: `There is no task ${queued.id} that you may see` })
      .waitFor();
    expect(await page.getByRole('button', { name: 'Cancel task' }).count()).toBe(0);
    expect((await sdk.call('getTask', { params: { path: { task_id: queued.id } } })).status).toBe('queued');
  });

  it('raised no page errors or CSP violations, and every API response matched the contract', () => {
    // (the non-admin's 403 on the admin-only read that tells the console who is an administrator, and
    // the 404 of another principal's task are provoked on purpose)
    expect(unexpectedPageErrors(session.pageErrors, [403, 404])).toEqual([]);
    expect(session.violations).toEqual([]);
  });
});
