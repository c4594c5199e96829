// The console's administration views in a real browser (console/src/views/{Sinks,Subscriptions,Users,Groups,Tokens}.tsx):
// an administrator creates an event sink (an invalid config first: the API's problems shown inline) and a
// collection subscription, previews and test-sends an event through them, creates a user and a group, adds
// the user, mints a token for the user (its secret shown once) and revokes it. A non-admin sees none of the
// admin views, neither in the nav nor by address, and manages only their own tokens. Everything is checked
// through the SDK; screenshots go to artifacts/console/admin-*.png (not committed).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { createClient, isApiRequestError, type InventoryClient } from '../clients/typescript/index.ts';
import { ADMIN_PASSWORD, uniq } from './helpers.ts';
import { poll, startConsole, unexpectedPageErrors, type ConsoleSession } from './console-harness.ts';

let session: ConsoleSession;
let baseUrl: string;
let page: Page;
let sdk: InventoryClient;
let collection: { id: number; name: string };
const sinkName = uniq('console-sink');
const subName = uniq('console-sub');
const userName = uniq('console-user');
const userPassword = `pw-${uniq()}`;
const groupName = uniq('console-group');
let sinkId: number;
let subscriptionId: number;
let userId: number;

beforeAll(async () => {
  session = await startConsole('svc_console_admin');
  ({ baseUrl, page, sdk } = session);
  collection = await sdk.call('createCollection', { body: { name: uniq('console-admin-col') } });
});

afterAll(async () => {
  await session?.close();
});

const mainNav = () => page.getByRole('navigation', { name: 'Main' });
const shot = (name: string) => session.shot(name);
const status = (text: string | RegExp) => page.getByRole('status').filter({ hasText: text });

/** Whether a bearer token still works (getMe answers, or 401). */
async function tokenWorks(token: string): Promise<boolean> {
  const c = createClient({ baseUrl, token });
  try {
    await c.call('getMe');
    return true;
  } catch (e) {
    if (isApiRequestError(e, 401)) return false;
    throw e;
  }
}

describe('the console for administrators', () => {
  it('groups the admin views in the nav', async () => {
    await session.signInAs('admin', ADMIN_PASSWORD);
    const admin = mainNav().getByRole('group', { name: 'Administration' });
    await poll(() => admin.getByRole('link').allTextContents()).toEqual([
      'Delivery health',
      'Event sinks',
      'Subscriptions',
      'Users',
      'Groups',
    ]);
    expect(await mainNav().getByRole('link', { name: 'My tokens' }).count()).toBe(1);
  });

  it('creates an event sink; an invalid config shows the API problems inline', async () => {
    await mainNav().getByRole('link', { name: 'Event sinks' }).click();
    await page.getByRole('heading', { name: 'Event sinks' }).waitFor();
    const form = page.getByRole('form', { name: 'New event sink' });
    await form.getByLabel('Name').fill(sinkName);
    expect(await form.getByLabel('Kind').inputValue()).toBe('webhook');
    // a member of another kind (amqp's exchange) is 400 with details
    await form.getByLabel('Configuration (JSON)').fill('{"exchange": "x"}');
    await form.getByRole('button', { name: 'Create sink' }).click();
    const alert = form.getByRole('alert');
    await alert.waitFor();
    expect(await alert.textContent()).toContain('exchange');
    await shot('admin-01-sink-invalid');
    // not valid JSON: refused before anything is sent
    await form.getByLabel('Configuration (JSON)').fill('{"timeout_ms": ');
    await form.getByRole('button', { name: 'Create sink' }).click();
    await poll(() => alert.textContent()).toContain('not valid JSON');
    expect(await form.getByLabel('Configuration (JSON)').getAttribute('aria-invalid')).toBe('true');
    await form.getByLabel('Configuration (JSON)').fill('{"timeout_ms": 5000, "headers": {"X-Team": "inventory"}}');
    await form.getByRole('button', { name: 'Create sink' }).click();
    await status(`Sink ${sinkName} created.`).waitFor();
    const [sink] = await sdk.call('listEventSinks', { params: { query: { name: sinkName } } });
    expect(sink).toMatchObject({
      name: sinkName,
      kind: 'webhook',
      enabled: true,
      config: { timeout_ms: 5000, headers: { 'X-Team': 'inventory' } },
    });
    sinkId = sink!.id;
    await page.getByRole('table', { name: 'Event sinks' }).getByRole('link', { name: sinkName }).waitFor();
    await shot('admin-02-sinks');
  });

  it('creates a collection subscription routed to a webhook URL', async () => {
    await mainNav().getByRole('link', { name: 'Subscriptions' }).click();
    await page.getByRole('heading', { name: 'Event subscriptions' }).waitFor();
    await poll(() => page.getByLabel('Scope').locator('option').allTextContents()).toContain(`Collection ${collection.name}`);
    await page.getByLabel('Scope').selectOption({ label: `Collection ${collection.name}` });
    await page.getByText(`No subscriptions (${collection.name}).`).waitFor();
    const form = page.getByRole('form', { name: 'New subscription' });
    await form.getByLabel('Name', { exact: true }).fill(subName);
    await form.getByLabel('Sink', { exact: true }).selectOption({ label: `${sinkName} (webhook)` });
    await form.getByLabel('Entity types (comma-separated)').fill('collection');
    await form.getByLabel('Actions (comma-separated)').fill('updated, nonsense');
    await form.getByLabel(/Destination URL/).fill('https://hooks.example.com/inventory');
    await form.getByRole('button', { name: 'Create subscription' }).click();
    await form.getByRole('alert').waitFor(); // collection/nonsense is not in the event catalog
    await form.getByLabel('Actions (comma-separated)').fill('updated');
    await form.getByRole('button', { name: 'Create subscription' }).click();
    await status(new RegExp(`Subscription ${subName} \\(id \\d+\\) created`)).waitFor();
    const subs = await sdk.call('listCollectionEventSubscriptions', { params: { path: { collection_id: collection.id } } });
    expect(subs).toHaveLength(1);
    expect(subs[0]).toMatchObject({
      name: subName,
      sink_id: sinkId,
      entity_types: ['collection'],
      actions: ['updated'],
      routing: { url: 'https://hooks.example.com/inventory' },
      enabled: true,
    });
    subscriptionId = subs[0]!.id;
    const row = page.locator(`tr[data-subscription-id="${subscriptionId}"]`);
    await row.waitFor();
    expect(await row.textContent()).toContain('https://hooks.example.com/inventory');
    await shot('admin-03-subscriptions');
    // disable and enable again from the list
    await row.getByRole('button', { name: `Disable subscription ${subName}` }).click();
    await status(`Subscription ${subName} disabled.`).waitFor();
    expect(
      (
        await sdk.call('getCollectionEventSubscription', {
          params: { path: { collection_id: collection.id, subscription_id: subscriptionId } },
        })
      ).enabled,
    ).toBe(false);
    await row.getByRole('button', { name: `Enable subscription ${subName}` }).click();
    await status(`Subscription ${subName} enabled.`).waitFor();
  });

  it('previews and test-sends an event through the subscription, with the outcome shown', async () => {
    await sdk.call('updateCollection', {
      params: { path: { collection_id: collection.id } },
      body: { description: 'changed by the test' },
    });
    const [event] = await sdk.call('listEvents', {
      params: { query: { collection_id: collection.id, entity_type: 'collection', action: 'updated', limit: 1 } },
    });
    expect(event).toBeDefined();
    await page.getByRole('link', { name: `Preview or test subscription ${subName}` }).click();
    await page.getByRole('heading', { name: sinkName }).waitFor();
    const form = page.getByRole('form', { name: 'Preview or test' });
    expect(await form.getByLabel('Subscription id').inputValue()).toBe(String(subscriptionId));
    await form.getByLabel('Event id (UUID)').fill(event!.event_id);
    await form.getByRole('button', { name: 'Preview' }).click();
    const result = form.getByRole('status', { name: 'Preview result' });
    await result.waitFor();
    expect(await result.textContent()).toContain('Rendered webhook payload');
    const payload = JSON.parse((await result.locator('pre').textContent())!) as Record<string, unknown>;
    expect(payload).toMatchObject({ event_id: event!.event_id, entity_type: 'collection', action: 'updated' });
    await shot('admin-04-sink-preview');
    await form.getByRole('button', { name: 'Send test' }).click();
    const queued = form.getByRole('status').filter({ hasText: /Test delivery \d+ queued \(pending\)/ });
    await queued.waitFor();
    const deliveryId = Number(/Test delivery (\d+)/.exec((await queued.textContent())!)![1]);
    const delivery = await sdk.call('getEventDelivery', { params: { path: { delivery_id: deliveryId } } });
    expect(delivery).toMatchObject({ sink_id: sinkId, subscription_id: subscriptionId, purpose: 'test', status: 'pending' });
    // an event outside the subscription's collection is refused inline
    const elsewhere = await sdk.call('createCollection', { body: { name: uniq('console-admin-other') } });
    const [other] = await sdk.call('listEvents', { params: { query: { collection_id: elsewhere.id, limit: 1 } } });
    await form.getByLabel('Event id (UUID)').fill(other!.event_id);
    await form.getByRole('button', { name: 'Preview' }).click();
    await form.getByRole('alert').waitFor();
    expect(await form.getByRole('status').count()).toBe(0);
  });

  it('edits the sink, and deletes it only after its subscription (each after a confirmation)', async () => {
    const edit = page.getByRole('form', { name: 'Edit event sink' });
    await edit.getByLabel('Enabled').uncheck();
    await edit.getByRole('button', { name: 'Save sink' }).click();
    await edit.getByRole('status').filter({ hasText: 'Saved.' }).waitFor();
    expect((await sdk.call('getEventSink', { params: { path: { sink_id: sinkId } } })).enabled).toBe(false);
    // still used by the subscription: 409 shown inline, nothing deleted
    await edit.getByRole('button', { name: `Delete sink ${sinkName}` }).click();
    await edit.getByRole('button', { name: 'Yes, delete' }).click();
    await edit.getByRole('alert').waitFor();
    await shot('admin-05-sink-in-use');
    expect((await sdk.call('getEventSink', { params: { path: { sink_id: sinkId } } })).id).toBe(sinkId);

    await mainNav().getByRole('link', { name: 'Subscriptions' }).click();
    await page.getByLabel('Scope').selectOption({ label: `Collection ${collection.name}` });
    const row = page.locator(`tr[data-subscription-id="${subscriptionId}"]`);
    await row.getByRole('button', { name: `Delete subscription ${subName}` }).click();
    await row.getByRole('button', { name: 'Cancel' }).click(); // keyboard users can back out
    await row.getByRole('button', { name: `Delete subscription ${subName}` }).click();
    await row.getByRole('button', { name: 'Yes, delete' }).click();
    await status(`Subscription ${subName} deleted.`).waitFor();
    expect(await sdk.call('listCollectionEventSubscriptions', { params: { path: { collection_id: collection.id } } })).toEqual([]);

    await page.goto(`${baseUrl}/console/admin/sinks/${sinkId}`);
    await page.getByRole('heading', { name: sinkName }).waitFor();
    await page.getByRole('button', { name: `Delete sink ${sinkName}` }).click();
    await page.getByRole('button', { name: 'Yes, delete' }).click();
    await page.getByRole('heading', { name: 'Event sinks' }).waitFor();
    await expect(sdk.call('getEventSink', { params: { path: { sink_id: sinkId } } })).rejects.toMatchObject({ status: 404 });
  });

  it('creates a user (confirmed with the admin password) and a group, and adds the user to it', async () => {
    await mainNav().getByRole('link', { name: 'Users' }).click();
    await page.getByRole('heading', { name: 'Users' }).waitFor();
    await poll(() => page.locator('#users-status').textContent()).toMatch(/^Users 1–\d+ of \d+$/);
    const form = page.getByRole('form', { name: 'New user' });
    await form.getByLabel('Name', { exact: true }).fill(userName);
    await form.getByLabel('Initial password').fill(userPassword);
    await form.getByLabel('Proper name (optional)').fill('Console Person');
    await form.getByLabel('Your password (confirms this change)').fill('not-the-admin-password');
    await form.getByRole('button', { name: 'Create user' }).click();
    await form.getByRole('alert').waitFor(); // wrong password: no approval, no user
    expect(await sdk.call('listUsers', { params: { query: { name: userName } } })).toEqual([]);
    await form.getByLabel('Your password (confirms this change)').fill(ADMIN_PASSWORD);
    await form.getByRole('button', { name: 'Create user' }).click();
    await status(`User ${userName} created.`).waitFor();
    const [user] = await sdk.call('listUsers', { params: { query: { name: userName } } });
    expect(user).toMatchObject({ name: userName, proper_name: 'Console Person', identity_scope: 'local' });
    userId = user!.id;
    await shot('admin-06-users');

    await mainNav().getByRole('link', { name: 'Groups' }).click();
    await page.getByRole('heading', { name: 'Groups' }).waitFor();
    const gform = page.getByRole('form', { name: 'New group' });
    await gform.getByLabel('Name').fill(groupName);
    await gform.getByLabel('Description (optional)').fill('made in the console');
    await gform.getByRole('button', { name: 'Create group' }).click();
    await status(`Group ${groupName} created.`).waitFor();
    await gform.getByRole('link', { name: groupName }).click();
    await page.getByRole('heading', { name: groupName }).waitFor();
    await page.getByText('No members.').waitFor();
    // keyboard: type the name and press Enter
    await page.getByLabel('User name').fill(userName);
    await page.getByLabel('User name').press('Enter');
    await status(`${userName} added.`).waitFor();
    await page
      .getByRole('table', { name: `Members of ${groupName}` })
      .getByRole('link', { name: userName })
      .waitFor();
    const [group] = await sdk.call('listGroups', { params: { query: { name: groupName } } });
    const members = await sdk.call('listGroupMembers', { params: { path: { group_id: group!.id } } });
    expect(members.map((m) => m.name)).toEqual([userName]);
    await shot('admin-07-group-members');
  });

  it('mints a token for the user (its secret shown once, never stored) and revokes it', async () => {
    await page.getByRole('link', { name: userName }).click();
    await page.getByRole('heading', { name: userName }).waitFor();
    await page
      .getByRole('list', { name: `Groups of ${userName}` })
      .getByRole('link', { name: groupName })
      .waitFor();
    await poll(() => page.locator('#tokens-status').textContent()).toBe('No tokens');
    const form = page.getByRole('form', { name: 'New token' });
    await form.getByLabel('Name (optional)').fill('ci-script');
    await form.getByLabel('Your password (confirms this change)').fill(ADMIN_PASSWORD);
    await form.getByRole('button', { name: 'Create token' }).click();
    const secretBox = page.getByRole('region', { name: 'New token secret' });
    await secretBox.waitFor();
    expect(await secretBox.getByRole('status').textContent()).toContain('shown only once');
    const secret = await secretBox.getByLabel('Token secret').inputValue();
    expect(secret.length).toBeGreaterThan(20);
    await shot('admin-08-token-secret');
    // the token is the user's, and works
    const me = await createClient({ baseUrl, token: secret }).call('getMe');
    expect(me.principal).toMatchObject({ id: userId, name: userName });
    // not kept anywhere by the console
    const stored = await page.evaluate(() => JSON.stringify({ ...sessionStorage }) + JSON.stringify({ ...localStorage }) + document.cookie);
    expect(stored).not.toContain(secret);
    await secretBox.getByRole('button', { name: 'Done, hide it' }).click();
    await secretBox.waitFor({ state: 'detached' });
    expect(await page.content()).not.toContain(secret);

    const [token] = await sdk.call('listPrincipalTokens', { params: { path: { principal_id: userId } } });
    expect(token).toMatchObject({ name: 'ci-script', active: true });
    const row = page.locator(`tr[data-token-id="${token!.id}"]`);
    await row.waitFor();
    await row.getByRole('button', { name: `Revoke token ${token!.id}` }).click();
    await row.getByRole('button', { name: 'Yes, revoke' }).click();
    await status(`Token ${token!.id} revoked.`).waitFor();
    expect(await tokenWorks(secret)).toBe(false);
    await poll(() => page.locator('#tokens-status').textContent()).toBe('No tokens');
    await page.getByLabel('Show').selectOption('revoked');
    await poll(() => page.locator(`tr[data-token-id="${token!.id}"] .token-state`).textContent()).toBe('revoked');
  });

  it('shows directory-managed users and groups read-only (the API refuses local changes with 403)', async () => {
    // as the directory sync leaves them (test/ldap.test.ts runs the real sync against OpenLDAP)
    const { sql } = session.t.deps;
    const [p] = await sql<{ id: number }[]>`
      insert into principals (kind, name, identity_scope, provider_managed, external_subject, last_synced_at)
      values ('human', ${uniq('ldap-user')}, 'ldap', true, 'uid=dir,ou=people,dc=example,dc=org', now()) returning id`;
    await sql`insert into users (principal_id, email, proper_name) values (${p!.id}, 'dir@example.org', 'Directory Person')`;
    const [g] = await sql<{ id: number }[]>`
      insert into groups (name, identity_scope, managed_by, external_key) values (${uniq('ldap-group')}, 'ldap', 'ldap', 'cn=x') returning id`;
    await expect(sdk.call('updateUser', { params: { path: { id: p!.id } }, body: { proper_name: 'x' } })).rejects.toMatchObject({
      status: 403,
    });
    await expect(sdk.call('updateGroup', { params: { path: { group_id: g!.id } }, body: { description: 'x' } })).rejects.toMatchObject({
      status: 403,
    });

    await page.goto(`${baseUrl}/console/admin/users/${p!.id}`);
    await page.locator('#user-managed').waitFor();
    expect(await page.getByLabel('Proper name').inputValue()).toBe('Directory Person');
    expect(await page.getByLabel('Proper name').isDisabled()).toBe(true);
    expect(await page.getByRole('button', { name: 'Save profile' }).isDisabled()).toBe(true);
    expect(await page.getByRole('button', { name: /^Delete user/ }).isDisabled()).toBe(true);
    await shot('admin-09-directory-user');
    await page.goto(`${baseUrl}/console/admin/groups/${g!.id}`);
    await page.locator('#group-managed').waitFor();
    expect(await page.getByRole('button', { name: 'Save group' }).isDisabled()).toBe(true);
    expect(await page.getByRole('button', { name: 'Add member' }).isDisabled()).toBe(true);
  });

  it('is usable 390 px wide', async () => {
    await page.setViewportSize({ width: 390, height: 800 });
    for (const path of ['/console/admin/users', `/console/admin/users/${userId}`, '/console/admin/sinks', '/console/admin/subscriptions']) {
      await page.goto(`${baseUrl}${path}`);
      await page.locator('form.admin-form').first().waitFor();
      await page.waitForLoadState('networkidle');
      const wide = await page.evaluate(() => {
        const width = document.documentElement.clientWidth;
        // what sticks out of the page (a table may scroll inside its own .table-wrap)
        const over = [...document.querySelectorAll('body *')].filter(
          (el) => el.getBoundingClientRect().right > width + 0.5 && !el.closest('.table-wrap, .visually-hidden'),
        );
        return {
          overflow: document.documentElement.scrollWidth - width,
          elements: over.slice(0, 5).map((el) => el.outerHTML.slice(0, 120)),
        };
      });
      expect(wide, path).toEqual({ overflow: 0, elements: [] });
    }
    await shot('admin-10-subscriptions-narrow');
    await page.setViewportSize({ width: 1280, height: 800 });
  });
});

describe('the console for everyone else', () => {
  it('offers a non-admin none of the admin views, neither in the nav nor by address', async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in to the inventory' }).waitFor(); // the token is forgotten
    await session.signInAs(userName, userPassword);
    await poll(() => mainNav().getByRole('link').allTextContents()).toEqual([
      'Collections',
      'Search',
      'Tasks',
      'Audit events',
      'My tokens',
    ]);
    expect(await mainNav().getByRole('group', { name: 'Administration' }).count()).toBe(0);
    for (const path of [
      'admin/sinks',
      `admin/sinks/1`,
      'admin/subscriptions',
      'admin/users',
      `admin/users/${userId}`,
      'admin/groups',
      'deliveries',
    ]) {
      await page.goto(`${baseUrl}/console/${path}`);
      await page.getByText(/^Only administrators see (this page|delivery health)\.$/).waitFor();
    }
    await shot('admin-11-non-admin-refused');
  });

  it('lets a non-admin mint, renew and revoke their own tokens', async () => {
    await mainNav().getByRole('link', { name: 'My tokens' }).click();
    await page.getByRole('heading', { name: 'My tokens' }).waitFor();
    // the console's own session is listed
    await page.getByText('(this session)').waitFor();
    const form = page.getByRole('form', { name: 'New token' });
    await form.getByLabel('Name (optional)').fill('laptop');
    await form.getByLabel('Your password (confirms this change)').fill(userPassword);
    await form.getByRole('button', { name: 'Create token' }).click();
    const secretBox = page.getByRole('region', { name: 'New token secret' });
    const secret = await secretBox.getByLabel('Token secret').inputValue();
    expect((await createClient({ baseUrl, token: secret }).call('getMe')).principal.name).toBe(userName);
    await shot('admin-12-my-token');
    const mine = await createClient({ baseUrl, token: secret }).call('listPrincipalTokens', { params: { path: { principal_id: userId } } });
    const laptop = mine.find((t) => t.name === 'laptop')!;
    // renew: a new secret (shown once); the old token stays valid
    const row = page.locator(`tr[data-token-id="${laptop.id}"]`);
    await row.getByRole('button', { name: `Renew token ${laptop.id}` }).click();
    const renew = page.getByRole('form', { name: `Renew token ${laptop.id}` });
    await renew.getByLabel('Your password (confirms this change)').fill(userPassword);
    await renew.getByRole('button', { name: 'Renew' }).click();
    await poll(() => secretBox.getByRole('status').textContent()).toContain(`Renewal of token ${laptop.id}`);
    const renewed = await secretBox.getByLabel('Token secret').inputValue();
    expect(renewed).not.toBe(secret);
    expect(await tokenWorks(renewed)).toBe(true);
    expect(await tokenWorks(secret)).toBe(true);
    await row.getByRole('button', { name: `Revoke token ${laptop.id}` }).click();
    await row.getByRole('button', { name: 'Yes, revoke' }).click();
    await status(`Token ${laptop.id} revoked.`).waitFor();
    expect(await tokenWorks(secret)).toBe(false);
    // someone else's tokens are not theirs to see
    await expect(
      createClient({ baseUrl, token: renewed }).call('listPrincipalTokens', { params: { path: { principal_id: 1 } } }),
    ).rejects.toMatchObject({ status: 403 });
  });

  it('raised no page errors or CSP violations, and every API response matched the contract', () => {
    // provoked on purpose: invalid sink and subscription (400), wrong confirmation password and the
    // non-admin probe (403), deleting a sink in use (409)
    expect(unexpectedPageErrors(session.pageErrors, [400, 403, 409])).toEqual([]);
    expect(session.violations).toEqual([]);
  });
});
