// The console's exploring views in a real browser (test/console-harness.ts): an object's relations
// (listed with links, one created in the browser) and its neighbourhood graph drawn as SVG; the
// plain-text search, paged and streamed, and the structured search streamed page after page with a
// count; a task's detail page and cancelling a queued task; what a non-admin without the rights is
// not offered. Setup and checks go through the shipped SDK; screenshots go to artifacts/console/.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import type { InventoryClient, Schemas } from '../clients/typescript/index.ts';
import { ADMIN_PASSWORD, uniq } from './helpers.ts';
import { poll, startConsole, unexpectedPageErrors, type ConsoleSession } from './console-harness.ts';

let session: ConsoleSession;
let page: Page;
let sdk: InventoryClient;
/** In the descriptions of the collection, the server class and every server, for the plain-text search. */
const tag = uniq('exploretag');
let collection: Schemas['Collection'];
let serverClass: Schemas['ClassExpanded'];
let rackClass: Schemas['ClassExpanded'];
const servers: Schemas['InventoryObject'][] = [];
const racks: Schemas['InventoryObject'][] = [];

beforeAll(async () => {
  session = await startConsole('svc_console_explore');
  ({ page, sdk } = session);
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
});

afterAll(async () => {
  await session?.close();
});

const mainNav = () => page.getByRole('navigation', { name: 'Main' });

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
    await page.getByRole('heading', { name: 'node-007' }).waitFor();
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
    expect(await page.getByRole('button', { name: 'Stop streaming' }).isDisabled()).toBe(true);
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

  it('raised no page errors or CSP violations, and every API response matched the contract', () => {
    expect(unexpectedPageErrors(session.pageErrors, [])).toEqual([]);
    expect(session.violations).toEqual([]);
  });
});
