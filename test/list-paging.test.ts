// Keyset paging of every implemented list operation: 1,000 seeded rows are paged through with a
// small limit under the default sort and non-id sorts with ties (ascending and descending) while
// rows that sort before and after the cursor are inserted concurrently, both by a background
// writer and between pages. Every seeded row must be seen exactly once and no row twice, which
// offset paging cannot guarantee. Rows are seeded in one SQL statement inside unique collections,
// classes, groups or name prefixes, so parallel test files do not interfere.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import { collection, principalWith } from './class-fixtures.ts';
import { PERMISSIONS } from '../src/domain/authz.ts';

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

const ROWS = 1000;
const LIMIT = 150;
const PROVENANCE = JSON.stringify({ actor: { kind: 'system', principal: null }, initiator: null, task_id: null });

type Row = Record<string, unknown>;

interface Listing {
  path: string;
  /** Fixed query (filters that keep the list to this case's rows). */
  query?: Record<string, string>;
  token?: string;
  /** Keys of the seeded rows. */
  originals: string[];
  /** Inserts rows (also matching `query`) that sort before and after the cursor under every sort of the case. */
  insertMore(n: number): Promise<void>;
}

interface Case {
  op: string;
  /** undefined = the default sort. */
  sorts: (string | undefined)[];
  key?: (row: Row) => string;
  setup(): Promise<Listing>;
}

const byId = (r: Row) => String(r.id);
const ids = (rows: { id: number }[]) => rows.map((r) => String(r.id));
const sql = () => t.deps.sql;

/** Before/after values for sort fields: an old timestamp and a future one. */
const EARLY = '2000-01-01T00:00:00Z';
const LATE = '2100-01-01T00:00:00Z';

async function newClass(collectionId: number, name = uniq('pgk')): Promise<number> {
  const [k] = await sql()<{ id: number }[]>`
    insert into classes (name, collection_id) values (${name}, ${collectionId}) returning id`;
  return k!.id;
}

async function newPrincipal(kind: 'human' | 'service_account' = 'human', ownerGroup?: number): Promise<number> {
  const [p] = await sql()<{ id: number }[]>`insert into principals (kind, name) values (${kind}, ${uniq('pgp')}) returning id`;
  if (kind === 'human') await sql()`insert into users (principal_id) values (${p!.id})`;
  else await sql()`insert into service_accounts (principal_id, owner_group_id) values (${p!.id}, ${ownerGroup!})`;
  return p!.id;
}

async function newGroup(): Promise<number> {
  const [g] = await sql()<{ id: number }[]>`insert into groups (name) values (${uniq('pgg')}) returning id`;
  return g!.id;
}

// ---- seeds shared by several cases --------------------------------------------------------------

async function seedChildCollections(parent: number, prefix: string) {
  return sql()<{ id: number }[]>`
    insert into collections (name, description, parent_collection_id)
    select ${prefix} || '-m-' || lpad(g::text, 4, '0'), 'd' || (g % 7), ${parent}::int from generate_series(1, ${ROWS}) g
    returning id`;
}

/** Two collections under `parent`: one sorting first (name, description, created_at), one last. */
async function moreChildCollections(parent: number, prefix: string, n: number) {
  await sql()`insert into collections (name, description, parent_collection_id, created_at) values
    (${`${prefix}-a-${n}`}, '0', ${parent}, ${EARLY}), (${`${prefix}-z-${n}`}, '~', ${parent}, ${LATE})`;
}

interface EventSeed {
  collectionId: number | null;
  entityType: string;
  entityId: number;
}

// Seeded events carry an action outside the event catalog (no subscription can match them, so
// fan-out in other test files never delivers them) and recent times (retention never purges them).
const SEED_ACTION = 'paging_seed';

async function seedEvents(fields: EventSeed) {
  // occurred_at in five tie groups
  return sql()<{ id: number; event_id: string }[]>`
    insert into events (entity_type, entity_id, entity_name, collection_id, action, actor_kind, provenance, occurred_at)
    select ${fields.entityType}, ${fields.entityId}::int, 'seed', ${fields.collectionId}::int, ${SEED_ACTION}, 'system',
      ${PROVENANCE}::text::jsonb, date_trunc('second', now()) + (g % 5) * interval '1 second'
    from generate_series(1, ${ROWS}) g
    returning id, event_id::text as event_id`;
}

async function moreEvents(fields: EventSeed) {
  await sql()`
    insert into events (entity_type, entity_id, entity_name, collection_id, action, actor_kind, provenance, occurred_at)
    select ${fields.entityType}, ${fields.entityId}::int, 'more', ${fields.collectionId}::int, ${SEED_ACTION}, 'system',
      ${PROVENANCE}::text::jsonb, v.at
    from unnest(array[now() - interval '1 hour', ${LATE}::timestamptz]) v (at)`;
}

/** 33 groups × 31 permissions = 1,023 grants; `memberOf` joins a principal to every group. */
async function seedGrants(targets: number[], memberOf?: number): Promise<{ keys: string[]; groups: number[] }> {
  const groups = await sql()<{ id: number }[]>`
    insert into groups (name) select ${uniq('pgg')} || '-' || g from generate_series(1, 33) g returning id`;
  const gids = groups.map((g) => g.id);
  // group i grants on targets[i % targets.length]
  const rows = await sql()<{ collection_id: number; group_id: number; permission: string }[]>`
    insert into collection_permissions (collection_id, group_id, permission)
    select (${targets}::int[])[1 + (gi.ord::int % ${targets.length}::int)], gi.id, p
    from unnest(${gids}::int[]) with ordinality gi (id, ord), unnest(${[...PERMISSIONS]}::text[]) p
    returning collection_id, group_id, permission`;
  if (memberOf !== undefined) {
    await sql()`insert into group_members (group_id, principal_id) select g, ${memberOf}::int from unnest(${gids}::int[]) g`;
  }
  return { keys: rows.map((r) => `${r.collection_id}:${r.group_id}:${r.permission}`), groups: gids };
}

/** A new group with the first and last permission on `collectionId`, created early and late. */
async function moreGrants(collectionId: number, memberOf?: number) {
  const g = await newGroup();
  await sql()`insert into collection_permissions (collection_id, group_id, permission, created_at) values
    (${collectionId}, ${g}, 'ReadCollection', ${EARLY}), (${collectionId}, ${g}, 'ManageEventSubscription', ${LATE})`;
  if (memberOf !== undefined) await sql()`insert into group_members (group_id, principal_id) values (${g}, ${memberOf})`;
}

const grantKey = (r: Row) => `${String(r.collection_id ?? r.source_collection_id)}:${String(r.group_id)}:${String(r.permission)}`;

// ---- the cases ----------------------------------------------------------------------------------

const cases: Case[] = [
  {
    op: 'listCollections',
    sorts: [undefined, 'description', '-created_at', 'name.desc'],
    async setup() {
      const parent = await collection(t);
      const prefix = uniq('pgc');
      return {
        path: '/api/v1/collections',
        query: { parent_collection_id: String(parent) },
        originals: ids(await seedChildCollections(parent, prefix)),
        insertMore: (n) => moreChildCollections(parent, prefix, n),
      };
    },
  },
  {
    op: 'listCollectionChildren',
    sorts: [undefined, '-description', 'created_at'],
    async setup() {
      const parent = await collection(t);
      const prefix = uniq('pgc');
      return {
        path: `/api/v1/collections/${parent}/children`,
        originals: ids(await seedChildCollections(parent, prefix)),
        insertMore: (n) => moreChildCollections(parent, prefix, n),
      };
    },
  },
  {
    op: 'listCollectionAncestors',
    sorts: [undefined],
    async setup() {
      // a chain of 1,001 collections in one statement (foreign keys are checked at its end)
      const prefix = uniq('pgchain');
      const chain = await sql()<{ id: number }[]>`
        with n as (select nextval(pg_get_serial_sequence('collections', 'id'))::int as id, g from generate_series(0, ${ROWS}) g)
        insert into collections (id, name, parent_collection_id)
        select n.id, ${prefix} || '-' || n.g, lag(n.id) over (order by n.g) from n
        returning id`;
      const leaf = chain.at(-1)!.id;
      return {
        path: `/api/v1/collections/${leaf}/ancestors`,
        originals: ids(chain.slice(0, -1)),
        // ancestors change only by moves; new siblings along the chain must not disturb paging
        insertMore: async (n) => {
          const at = chain[(n * 97) % chain.length]!.id;
          await sql()`insert into collections (name, parent_collection_id) values (${`${prefix}-side-${n}`}, ${at})`;
        },
      };
    },
  },
  {
    op: 'listClasses',
    sorts: [undefined, 'description', '-created_at', 'name.desc'],
    async setup() {
      const col = await collection(t);
      const prefix = uniq('pgk');
      const rows = await sql()<{ id: number }[]>`
        insert into classes (name, description, collection_id)
        select ${prefix} || '-m-' || lpad(g::text, 4, '0'), 'd' || (g % 7), ${col}::int from generate_series(1, ${ROWS}) g
        returning id`;
      return {
        path: '/api/v1/classes',
        query: { collection_id: String(col) },
        originals: ids(rows),
        insertMore: async (n) => {
          await sql()`insert into classes (name, description, collection_id, created_at) values
            (${`${prefix}-a-${n}`}, '0', ${col}, ${EARLY}), (${`${prefix}-z-${n}`}, '~', ${col}, ${LATE})`;
        },
      };
    },
  },
  ...(['listObjects', 'listObjectsByClassName'] as const).map((op): Case => ({
    op,
    // (names are unique in a class: a name sort orders by the name alone, the cursor keeps the id)
    sorts: [undefined, 'description', '-created_at', '-name', 'name'],
    async setup() {
      const col = await collection(t);
      const className = uniq('pgk');
      const cls = await newClass(col, className);
      const rows = await sql()<{ id: number }[]>`
          insert into objects (name, description, collection_id, class_id, json_data)
          select 'm-' || lpad(g::text, 4, '0'), 'd' || (g % 7), ${col}::int, ${cls}::int, jsonb_build_object('g', g)
          from generate_series(1, ${ROWS}) g
          returning id`;
      return {
        path: op === 'listObjects' ? `/api/v1/classes/${cls}/objects` : `/api/v1/classes/by-name/${className}/objects`,
        originals: ids(rows),
        insertMore: async (n) => {
          await sql()`insert into objects (name, description, collection_id, class_id, json_data, created_at) values
              (${`a-${n}`}, '0', ${col}, ${cls}, '{}', ${EARLY}), (${`z-${n}`}, '~', ${col}, ${cls}, '{}', ${LATE})`;
        },
      };
    },
  })),
  ...(['listClassRelations', 'listRelatedClasses'] as const).map((op): Case => ({
    op,
    sorts: op === 'listClassRelations' ? [undefined, 'created_at', '-revision', '-to_class_id'] : [undefined, 'name', '-created_at'],
    async setup() {
      const col = await collection(t);
      const prefix = uniq('pgk');
      const hub = await newClass(col);
      const classes = await sql()<{ id: number }[]>`
          insert into classes (name, collection_id) select ${prefix} || '-m-' || lpad(g::text, 4, '0'), ${col}::int
          from generate_series(1, ${ROWS}) g returning id`;
      const rels = await sql()<{ id: number }[]>`
          insert into class_relations (from_class_id, to_class_id) select ${hub}::int, k from unnest(${ids(classes).map(Number)}::int[]) k
          returning id`;
      const more = async (n: number) => {
        await sql()`
            with k as (
              insert into classes (name, collection_id, created_at) values
                (${`${prefix}-a-${n}`}, ${col}, ${EARLY}), (${`${prefix}-z-${n}`}, ${col}, ${LATE})
              returning id, created_at)
            insert into class_relations (from_class_id, to_class_id, created_at, revision)
            select ${hub}::int, k.id, k.created_at, case when k.created_at < now() then 9 else 1 end from k`;
      };
      return op === 'listClassRelations'
        ? { path: '/api/v1/relations/classes', query: { from_class_id: String(hub) }, originals: ids(rels), insertMore: more }
        : { path: `/api/v1/classes/${hub}/related/classes`, originals: ids(classes), insertMore: more };
    },
  })),
  ...(['listObjectRelations', 'listRelatedObjects'] as const).map((op): Case => ({
    op,
    sorts:
      op === 'listObjectRelations' ? [undefined, 'to_object_id', '-created_at'] : [undefined, 'name', '-created_at', 'depth,-updated_at'],
    async setup() {
      const col = await collection(t);
      const from = await newClass(col);
      const to = await newClass(col);
      const [cr] = await sql()<{ id: number }[]>`
          insert into class_relations (from_class_id, to_class_id) values (${from}, ${to}) returning id`;
      // listObjectRelations: 1,000 source objects, each related to one of five targets (ties on to_object_id);
      // listRelatedObjects: one source related to 1,000 targets.
      const [hub] = await sql()<{ id: number }[]>`
          insert into objects (name, collection_id, class_id, json_data) values ('hub', ${col}, ${from}, '{}') returning id`;
      const targets = await sql()<{ id: number }[]>`
          insert into objects (name, collection_id, class_id, json_data)
          select 'm-' || lpad(g::text, 4, '0'), ${col}::int, ${to}::int, '{}' from generate_series(1, ${ROWS}) g returning id`;
      if (op === 'listRelatedObjects') {
        await sql()`insert into object_relations (class_relation_id, from_object_id, to_object_id)
            select ${cr!.id}::int, ${hub!.id}::int, o from unnest(${ids(targets).map(Number)}::int[]) o`;
        return {
          path: `/api/v1/classes/${from}/${hub!.id}/related/objects`,
          originals: ids(targets),
          insertMore: async (n) => {
            await sql()`
                with o as (
                  insert into objects (name, collection_id, class_id, json_data, created_at, updated_at) values
                    (${`a-${n}`}, ${col}, ${to}, '{}', ${EARLY}, ${LATE}), (${`z-${n}`}, ${col}, ${to}, '{}', ${LATE}, ${EARLY})
                  returning id)
                insert into object_relations (class_relation_id, from_object_id, to_object_id) select ${cr!.id}::int, ${hub!.id}::int, o.id from o`;
          },
        };
      }
      const five = ids(targets.slice(0, 5)).map(Number);
      const sources = await sql()<{ id: number }[]>`
          insert into objects (name, collection_id, class_id, json_data)
          select 's-' || lpad(g::text, 4, '0'), ${col}::int, ${from}::int, '{}' from generate_series(1, ${ROWS}) g returning id`;
      const rels = await sql()<{ id: number }[]>`
          insert into object_relations (class_relation_id, from_object_id, to_object_id)
          select ${cr!.id}::int, s.id, (${five}::int[])[1 + (s.ord::int % 5)]
          from unnest(${ids(sources).map(Number)}::int[]) with ordinality s (id, ord)
          returning id`;
      return {
        path: '/api/v1/relations/objects',
        query: { class_relation_id: String(cr!.id) },
        originals: ids(rels),
        insertMore: async (n) => {
          await sql()`
              with s as (
                insert into objects (name, collection_id, class_id, json_data) values
                  (${`sa-${n}`}, ${col}, ${from}, '{}'), (${`sz-${n}`}, ${col}, ${from}, '{}')
                returning id, name)
              insert into object_relations (class_relation_id, from_object_id, to_object_id, created_at)
              select ${cr!.id}::int, s.id,
                case when s.name like 'sa-%' then ${five[0]!}::int else ${five[4]!}::int end,
                case when s.name like 'sa-%' then ${LATE}::timestamptz else ${EARLY}::timestamptz end
              from s`;
        },
      };
    },
  })),
  ...(['listClassComputedFields', 'listMyComputedFields'] as const).map((op): Case => ({
    op,
    sorts: [undefined, 'label', '-created_at', 'key.desc'],
    async setup() {
      const col = await collection(t);
      const cls = await newClass(col);
      const personal = op === 'listMyComputedFields';
      const owner = personal ? await principalWith(t, [[col, ['ReadClass']]]) : null;
      const visibility = personal ? 'personal' : 'shared';
      const ownerId = owner?.id ?? null;
      const rows = await sql()<{ id: number }[]>`
          insert into computed_fields (class_id, key, label, operation, result_type, visibility, owner_user_id)
          select ${cls}::int, 'm' || lpad(g::text, 4, '0'), 'l' || (g % 7), '{"type":"sum","paths":["/a"]}', 'number',
            ${visibility}, ${ownerId}::int
          from generate_series(1, ${ROWS}) g
          returning id`;
      return {
        path: personal ? '/api/v1/iam/me/computed-fields' : `/api/v1/classes/${cls}/computed-fields`,
        query: personal ? { class_id: String(cls) } : undefined,
        token: owner?.token,
        originals: ids(rows),
        insertMore: async (n) => {
          await sql()`
              insert into computed_fields (class_id, key, label, operation, result_type, visibility, owner_user_id, created_at)
              select ${cls}::int, v.key, v.label, '{"type":"sum","paths":["/a"]}', 'number', ${visibility}, ${ownerId}::int, v.at::timestamptz
              from (values (${`a${n}`}, '0', ${EARLY}), (${`z${n}`}, '~', ${LATE})) v (key, label, at)`;
        },
      };
    },
  })),
  {
    op: 'listUsers',
    sorts: [undefined, 'proper_name', '-created_at', '-name'],
    async setup() {
      const prefix = uniq('pgu');
      const rows = await sql()<{ id: number }[]>`
        with p as (
          insert into principals (kind, name) select 'human', ${prefix} || '-m-' || lpad(g::text, 4, '0') from generate_series(1, ${ROWS}) g
          returning id, name)
        insert into users (principal_id, proper_name) select p.id, 'pn' || (p.id % 7) from p
        returning principal_id as id`;
      return {
        path: '/api/v1/iam/users',
        query: { name__startswith: prefix },
        originals: ids(rows),
        insertMore: async (n) => {
          await sql()`
            with p as (
              insert into principals (kind, name, created_at) values
                ('human', ${`${prefix}-a-${n}`}, ${EARLY}), ('human', ${`${prefix}-z-${n}`}, ${LATE})
              returning id, name)
            insert into users (principal_id, proper_name) select p.id, case when p.name like '%-a-%' then '0' else '~' end from p`;
        },
      };
    },
  },
  {
    op: 'listGroups',
    sorts: [undefined, 'description', '-created_at', 'name.desc'],
    async setup() {
      const prefix = uniq('pgg');
      const rows = await sql()<{ id: number }[]>`
        insert into groups (name, description) select ${prefix} || '-m-' || lpad(g::text, 4, '0'), 'd' || (g % 7)
        from generate_series(1, ${ROWS}) g returning id`;
      return {
        path: '/api/v1/iam/groups',
        query: { name__startswith: prefix },
        originals: ids(rows),
        insertMore: async (n) => {
          await sql()`insert into groups (name, description, created_at) values
            (${`${prefix}-a-${n}`}, '0', ${EARLY}), (${`${prefix}-z-${n}`}, '~', ${LATE})`;
        },
      };
    },
  },
  {
    op: 'listGroupMembers',
    sorts: [undefined, 'created_at', '-name'],
    async setup() {
      const group = await newGroup();
      const prefix = uniq('pgm');
      const rows = await sql()<{ id: number }[]>`
        with p as (
          insert into principals (kind, name) select 'human', ${prefix} || '-m-' || lpad(g::text, 4, '0') from generate_series(1, ${ROWS}) g
          returning id)
        insert into group_members (group_id, principal_id) select ${group}::int, p.id from p returning principal_id as id`;
      return {
        path: `/api/v1/iam/groups/${group}/members`,
        originals: ids(rows),
        insertMore: async (n) => {
          await sql()`
            with p as (
              insert into principals (kind, name, created_at) values
                ('human', ${`${prefix}-a-${n}`}, ${EARLY}), ('human', ${`${prefix}-z-${n}`}, ${LATE})
              returning id)
            insert into group_members (group_id, principal_id) select ${group}::int, p.id from p`;
        },
      };
    },
  },
  {
    op: 'listPrincipalGroups',
    sorts: [undefined, 'description', '-created_at'],
    async setup() {
      const principal = await newPrincipal();
      const prefix = uniq('pgg');
      const rows = await sql()<{ id: number }[]>`
        with g as (
          insert into groups (name, description) select ${prefix} || '-m-' || lpad(g::text, 4, '0'), 'd' || (g % 7)
          from generate_series(1, ${ROWS}) g returning id)
        insert into group_members (group_id, principal_id) select g.id, ${principal}::int from g returning group_id as id`;
      return {
        path: `/api/v1/iam/principals/${principal}/groups`,
        originals: ids(rows),
        insertMore: async (n) => {
          await sql()`
            with g as (
              insert into groups (name, description, created_at) values
                (${`${prefix}-a-${n}`}, '0', ${EARLY}), (${`${prefix}-z-${n}`}, '~', ${LATE})
              returning id)
            insert into group_members (group_id, principal_id) select g.id, ${principal}::int from g`;
        },
      };
    },
  },
  {
    op: 'listServiceAccounts',
    sorts: [undefined, 'identity_scope', '-created_at', 'name'],
    async setup() {
      const owner = await newGroup();
      const prefix = uniq('pgsa');
      const rows = await sql()<{ id: number }[]>`
        with p as (
          insert into principals (kind, name) select 'service_account', ${prefix} || '-m-' || lpad(g::text, 4, '0')
          from generate_series(1, ${ROWS}) g returning id)
        insert into service_accounts (principal_id, owner_group_id) select p.id, ${owner}::int from p returning principal_id as id`;
      return {
        path: '/api/v1/iam/service-accounts',
        query: { owner_group_id: String(owner) },
        originals: ids(rows),
        insertMore: async (n) => {
          await sql()`
            with p as (
              insert into principals (kind, name, created_at) values
                ('service_account', ${`${prefix}-a-${n}`}, ${EARLY}), ('service_account', ${`${prefix}-z-${n}`}, ${LATE})
              returning id)
            insert into service_accounts (principal_id, owner_group_id) select p.id, ${owner}::int from p`;
        },
      };
    },
  },
  {
    op: 'listPrincipalTokens',
    // default: issued descending; last_used_at has nulls
    sorts: [undefined, 'name', '-last_used_at', 'expires_at'],
    async setup() {
      const principal = await newPrincipal();
      const prefix = uniq('pgt');
      const rows = await sql()<{ id: number }[]>`
        insert into tokens (principal_id, token_hash, name, expires_at, last_used_at)
        select ${principal}::int, sha256(convert_to(${prefix} || g, 'UTF8')), 'n' || (g % 7), now() + interval '1 day',
          case when g % 3 = 0 then null else '2026-01-01T00:00:00Z'::timestamptz + (g % 4) * interval '1 second' end
        from generate_series(1, ${ROWS}) g
        returning id`;
      return {
        path: `/api/v1/iam/principals/${principal}/tokens`,
        originals: ids(rows),
        insertMore: async (n) => {
          await sql()`
            insert into tokens (principal_id, token_hash, name, issued, expires_at, last_used_at)
            select ${principal}::int, sha256(convert_to(${prefix} || v.k, 'UTF8')), v.name, v.at::timestamptz,
              v.at::timestamptz + interval '200 years', v.at::timestamptz
            from (values (${`a${n}`}, '0', ${EARLY}), (${`z${n}`}, '~', ${LATE})) v (k, name, at)`;
        },
      };
    },
  },
  {
    op: 'listTasks',
    // started_at and finished_at have nulls and ties
    sorts: [undefined, 'started_at', '-created_at', '-finished_at'],
    async setup() {
      const submitter = await newPrincipal();
      const rows = await sql()<{ id: number }[]>`
        insert into tasks (kind, status, submitted_by, started_at, finished_at)
        select 'export', 'succeeded', ${submitter}::int,
          case when g % 3 = 0 then null else '2026-01-01T00:00:00Z'::timestamptz + (g % 4) * interval '1 second' end,
          case when g % 5 = 0 then null else '2026-01-02T00:00:00Z'::timestamptz + (g % 3) * interval '1 second' end
        from generate_series(1, ${ROWS}) g
        returning id`;
      return {
        path: '/api/v1/tasks',
        query: { submitted_by: String(submitter) },
        originals: ids(rows),
        insertMore: async () => {
          await sql()`
            insert into tasks (kind, status, submitted_by, created_at, started_at, finished_at)
            select 'export', 'succeeded', ${submitter}::int, v.at::timestamptz, v.at::timestamptz, v.at::timestamptz
            from unnest(${[EARLY, LATE]}::text[]) v (at)`;
        },
      };
    },
  },
  {
    op: 'listTaskEvents',
    sorts: [undefined, 'created_at', '-created_at'],
    async setup() {
      const submitter = await newPrincipal();
      const [task] = await sql()<{ id: number }[]>`
        insert into tasks (kind, status, submitted_by) values ('export', 'succeeded', ${submitter}) returning id`;
      const rows = await sql()<{ id: number }[]>`
        insert into task_events (task_id, event_type, created_at)
        select ${task!.id}::int, 'progress', '2026-01-01T00:00:00Z'::timestamptz + (g % 5) * interval '1 second'
        from generate_series(1, ${ROWS}) g returning id`;
      return {
        path: `/api/v1/tasks/${task!.id}/events`,
        originals: ids(rows),
        insertMore: async () => {
          await sql()`insert into task_events (task_id, event_type, created_at)
            select ${task!.id}::int, 'progress', v.at::timestamptz from unnest(${[EARLY, LATE]}::text[]) v (at)`;
        },
      };
    },
  },
  {
    op: 'listRemoteTargets',
    sorts: [undefined, 'description', '-created_at', 'name.desc'],
    async setup() {
      const col = await collection(t);
      const rows = await sql()<{ id: number }[]>`
        insert into remote_targets (collection_id, name, description, method, url_template, allowed_subject_types)
        select ${col}::int, 'm-' || lpad(g::text, 4, '0'), 'd' || (g % 7), 'get', 'https://example.test/x', '{collection}'
        from generate_series(1, ${ROWS}) g returning id`;
      return {
        path: '/api/v1/remote-targets',
        query: { collection_id: String(col) },
        originals: ids(rows),
        insertMore: async (n) => {
          await sql()`
            insert into remote_targets (collection_id, name, description, method, url_template, allowed_subject_types, created_at)
            select ${col}::int, v.name, v.description, 'get', 'https://example.test/x', '{collection}', v.at::timestamptz
            from (values (${`a-${n}`}, '0', ${EARLY}), (${`z-${n}`}, '~', ${LATE})) v (name, description, at)`;
        },
      };
    },
  },
  // /api/v1/events and each implemented wrapper; user and group events are collection-less
  ...(
    [
      'listEvents',
      'listCollectionEvents',
      'listClassEvents',
      'listObjectEvents',
      'listUserEvents',
      'listGroupEvents',
      'listRemoteTargetEvents',
      'listExportTemplateEvents',
    ] as const
  ).map((op): Case => ({
    op,
    // default: id descending
    sorts: [undefined, 'occurred_at', '-occurred_at', 'id'],
    async setup() {
      const col = await collection(t);
      const cls = await newClass(col);
      let fields: EventSeed;
      let path: string;
      switch (op) {
        case 'listEvents':
        case 'listCollectionEvents':
          fields = { collectionId: col, entityType: 'collection', entityId: col };
          path = op === 'listEvents' ? '/api/v1/events' : `/api/v1/collections/${col}/events`;
          break;
        case 'listClassEvents':
          fields = { collectionId: col, entityType: 'class', entityId: cls };
          path = `/api/v1/classes/${cls}/events`;
          break;
        case 'listObjectEvents': {
          const [o] = await sql()<{ id: number }[]>`
            insert into objects (name, collection_id, class_id, json_data) values ('o', ${col}, ${cls}, '{}') returning id`;
          fields = { collectionId: col, entityType: 'object', entityId: o!.id };
          path = `/api/v1/classes/${cls}/${o!.id}/events`;
          break;
        }
        case 'listUserEvents':
          fields = { collectionId: null, entityType: 'user', entityId: await newPrincipal() };
          path = `/api/v1/iam/users/${fields.entityId}/events`;
          break;
        case 'listGroupEvents':
          fields = { collectionId: null, entityType: 'group', entityId: await newGroup() };
          path = `/api/v1/iam/groups/${fields.entityId}/events`;
          break;
        case 'listRemoteTargetEvents': {
          const [rt] = await sql()<{ id: number }[]>`
            insert into remote_targets (collection_id, name, method, url_template, allowed_subject_types)
            values (${col}, 'rt', 'get', 'https://example.test/x', '{collection}') returning id`;
          fields = { collectionId: col, entityType: 'remote_target', entityId: rt!.id };
          path = `/api/v1/remote-targets/${rt!.id}/events`;
          break;
        }
        case 'listExportTemplateEvents': {
          const [et] = await sql()<{ id: number }[]>`
            insert into export_templates (collection_id, name, template) values (${col}, 'et', 'x') returning id`;
          fields = { collectionId: col, entityType: 'export_template', entityId: et!.id };
          path = `/api/v1/export-templates/${et!.id}/events`;
          break;
        }
      }
      const rows = await seedEvents(fields);
      return {
        path,
        query: op === 'listEvents' ? { collection_id: String(col) } : undefined,
        originals: ids(rows),
        insertMore: () => moreEvents(fields),
      };
    },
  })),
  {
    op: 'listExportTemplates',
    sorts: [undefined, 'description', '-created_at', 'kind,-name'],
    async setup() {
      const col = await collection(t);
      const rows = await sql()<{ id: number }[]>`
        insert into export_templates (collection_id, name, description, template)
        select ${col}::int, 'm-' || lpad(g::text, 4, '0'), 'd' || (g % 7), 'x' from generate_series(1, ${ROWS}) g returning id`;
      return {
        path: '/api/v1/export-templates',
        query: { collection_id: String(col) },
        originals: ids(rows),
        insertMore: async (n) => {
          await sql()`
            insert into export_templates (collection_id, name, description, kind, template, created_at)
            select ${col}::int, v.name, v.description, v.kind, 'x', v.at::timestamptz
            from (values (${`a-${n}`}, '0', 'export', ${EARLY}), (${`z-${n}`}, '~', 'fragment', ${LATE})) v (name, description, kind, at)`;
        },
      };
    },
  },
  {
    op: 'listImportResults',
    key: (r) => String(r.item_ref),
    // the only order is seq (no sort parameter); new results land before and after the cursor
    sorts: [undefined],
    async setup() {
      const submitter = await newPrincipal();
      const [task] = await sql()<{ id: number }[]>`
        insert into tasks (kind, status, submitted_by) values ('import', 'succeeded', ${submitter}) returning id`;
      const rows = await sql()<{ item_ref: string }[]>`
        insert into import_results (task_id, seq, item_ref, entity_kind, action, outcome)
        select ${task!.id}::int, 5000 + g, 'r-' || g, 'object', 'create', 'succeeded' from generate_series(1, ${ROWS}) g
        returning item_ref`;
      return {
        path: `/api/v1/imports/${task!.id}/results`,
        originals: rows.map((r) => r.item_ref),
        insertMore: async (n) => {
          await sql()`
            insert into import_results (task_id, seq, item_ref, entity_kind, action, outcome)
            select ${task!.id}::int, v.seq, 'more-' || v.seq, 'object', 'create', 'succeeded'
            from unnest(${[5000 - n, 9000 + n]}::int[]) v (seq)`;
        },
      };
    },
  },
  {
    op: 'listEventSinks',
    sorts: [undefined, 'kind', '-created_at', 'name.desc'],
    async setup() {
      const prefix = uniq('pgsink');
      // disabled: no worker of another test file ever sends through them
      const rows = await sql()<{ id: number }[]>`
        insert into event_sinks (name, kind, enabled) select ${prefix} || '-m-' || lpad(g::text, 4, '0'), 'webhook', false
        from generate_series(1, ${ROWS}) g returning id`;
      return {
        path: '/api/v1/event-sinks',
        query: { name__startswith: prefix },
        originals: ids(rows),
        insertMore: async (n) => {
          await sql()`
            insert into event_sinks (name, kind, enabled, created_at)
            select v.name, v.kind, false, v.at::timestamptz
            from (values (${`${prefix}-a-${n}`}, 'amqp', ${EARLY}), (${`${prefix}-z-${n}`}, 'webhook', ${LATE})) v (name, kind, at)`;
        },
      };
    },
  },
  ...(['listCollectionEventSubscriptions', 'listSystemEventSubscriptions'] as const).map((op): Case => ({
    op,
    sorts: [undefined, '-created_at', 'name', 'updated_at'],
    async setup() {
      const [sink] = await sql()<{ id: number }[]>`
          insert into event_sinks (name, kind, enabled) values (${uniq('pgsink')}, 'webhook', false) returning id`;
      const col = op === 'listCollectionEventSubscriptions' ? await collection(t) : null;
      const prefix = uniq('pgsub');
      // disabled: fan-out in other test files never matches them
      const rows = await sql()<{ id: number }[]>`
          insert into event_subscriptions (collection_id, sink_id, name, entity_types, actions, enabled)
          select ${col}::int, ${sink!.id}::int, ${prefix} || '-m-' || lpad(g::text, 4, '0'), '{collection}', '{updated}', false
          from generate_series(1, ${ROWS}) g returning id`;
      return {
        path: col === null ? '/api/v1/system-event-subscriptions' : `/api/v1/collections/${col}/event-subscriptions`,
        query: col === null ? { name__startswith: prefix } : undefined,
        originals: ids(rows),
        insertMore: async (n) => {
          await sql()`
              insert into event_subscriptions (collection_id, sink_id, name, entity_types, actions, enabled, created_at, updated_at)
              select ${col}::int, ${sink!.id}::int, v.name, '{collection}', '{updated}', false, v.at::timestamptz, v.at::timestamptz
              from (values (${`${prefix}-a-${n}`}, ${EARLY}), (${`${prefix}-z-${n}`}, ${LATE})) v (name, at)`;
        },
      };
    },
  })),
  {
    op: 'listEventDeliveries',
    // status and next_attempt_at in tie groups; terminal statuses so no delivery worker claims them
    sorts: [undefined, 'status', '-created_at', 'next_attempt_at'],
    async setup() {
      const col = await collection(t);
      const [sink] = await sql()<{ id: number }[]>`
        insert into event_sinks (name, kind, enabled) values (${uniq('pgsink')}, 'webhook', false) returning id`;
      const [sub] = await sql()<{ id: number }[]>`
        insert into event_subscriptions (collection_id, sink_id, name, entity_types, actions, enabled)
        values (${col}, ${sink!.id}, ${uniq('pgsub')}, '{collection}', '{updated}', false) returning id`;
      const fields = { collectionId: col, entityType: 'collection', entityId: col };
      const evs = await seedEvents(fields);
      const rows = await sql()<{ id: number }[]>`
        insert into event_deliveries (event_id, subscription_id, sink_id, status, next_attempt_at)
        select e::uuid, ${sub!.id}::int, ${sink!.id}::int, (array['succeeded', 'dead'])[1 + (ord::int % 2)],
          date_trunc('second', now()) + (ord % 3) * interval '1 second'
        from unnest(${evs.map((e) => e.event_id)}::text[]) with ordinality v (e, ord)
        returning id`;
      return {
        path: '/api/v1/event-deliveries',
        query: { subscription_id: String(sub!.id) },
        originals: ids(rows),
        insertMore: async () => {
          const [e] = await sql()<{ event_id: string }[]>`
            insert into events (entity_type, entity_id, collection_id, action, actor_kind, provenance)
            values ('collection', ${col}, ${col}, ${SEED_ACTION}, 'system', ${PROVENANCE}::text::jsonb) returning event_id::text as event_id`;
          await sql()`
            insert into event_deliveries (event_id, subscription_id, sink_id, purpose, status, next_attempt_at, created_at)
            select ${e!.event_id}::uuid, ${sub!.id}::int, ${sink!.id}::int, 'test', v.status, v.at::timestamptz, v.at::timestamptz
            from (values ('dead', ${EARLY}), ('succeeded', ${LATE})) v (status, at)`;
        },
      };
    },
  },
  {
    op: 'listCollectionPermissions',
    key: grantKey,
    sorts: [undefined, '-created_at', 'permission', '-group_id,permission'],
    async setup() {
      const col = await collection(t);
      const { keys } = await seedGrants([col]);
      return {
        path: `/api/v1/collections/${col}/permissions`,
        originals: keys,
        insertMore: () => moreGrants(col),
      };
    },
  },
  {
    op: 'listCollectionPrincipalPermissions',
    key: grantKey,
    sorts: [undefined, 'created_at', '-permission'],
    async setup() {
      const col = await collection(t);
      const principal = await newPrincipal();
      const { keys } = await seedGrants([col], principal);
      return {
        path: `/api/v1/collections/${col}/permissions/principal/${principal}`,
        originals: keys,
        insertMore: () => moreGrants(col, principal),
      };
    },
  },
  {
    op: 'listEffectiveCollectionPrincipalPermissions',
    key: grantKey,
    sorts: [undefined, '-depth', 'permission', '-source_collection_id,-permission'],
    async setup() {
      const parent = await collection(t);
      const child = await collection(t, parent);
      const principal = await newPrincipal();
      const { keys } = await seedGrants([parent, child], principal);
      return {
        path: `/api/v1/collections/${child}/permissions/effective/principal/${principal}`,
        originals: keys,
        insertMore: async (n) => moreGrants(n % 2 ? parent : child, principal),
      };
    },
  },
];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Pages through `l` with `sort`, inserting between pages and from a concurrent writer; returns the page count. */
async function pageThrough(c: Case, l: Listing, sort: string | undefined, counter: { n: number }): Promise<number> {
  const key = c.key ?? byId;
  const seen = new Map<string, number>();
  let stop = false;
  const writer = (async () => {
    while (!stop) {
      await l.insertMore(counter.n++);
      await sleep(5);
    }
  })();
  let cursor: string | null = null;
  let pages = 0;
  try {
    do {
      const query: Record<string, string> = { ...l.query, limit: String(LIMIT) };
      if (sort) query.sort = sort;
      if (cursor) query.cursor = cursor;
      const res = await t.request('GET', l.path, { token: l.token, query });
      expect(res.status, `${c.op} ${sort ?? 'default'} page ${pages}: ${res.text.slice(0, 300)}`).toBe(200);
      expect(res.operationId).toBe(c.op);
      expect(res.headers.get('x-page-limit')).toBe(String(LIMIT));
      const rows = res.body as Row[];
      cursor = res.headers.get('x-next-cursor');
      if (cursor) expect(rows.length).toBe(LIMIT);
      if (pages === 0) expect(Number(res.headers.get('x-total-count'))).toBeGreaterThanOrEqual(l.originals.length);
      for (const r of rows) seen.set(key(r), (seen.get(key(r)) ?? 0) + 1);
      // rows that sort before and after the cursor land between this page and the next
      await l.insertMore(counter.n++);
      pages++;
    } while (cursor && pages < 100);
  } finally {
    stop = true;
    await writer;
  }
  expect(cursor, 'paging ended').toBeNull();
  const missing = l.originals.filter((k) => seen.get(k) !== 1);
  expect(missing.map((k) => `${k}×${seen.get(k) ?? 0}`).slice(0, 10), `${c.op} ${sort ?? 'default'}: originals seen once`).toEqual([]);
  const duplicates = [...seen].filter(([, n]) => n > 1);
  expect(duplicates.slice(0, 10), `${c.op} ${sort ?? 'default'}: no duplicates`).toEqual([]);
  return pages;
}

describe('keyset paging: 1,000 rows with concurrent inserts, each row exactly once', () => {
  it('covers the list operations named here (table sanity)', () => {
    expect(new Set(cases.map((c) => c.op)).size).toBe(cases.length);
  });

  for (const c of cases) {
    it(`${c.op} 200: default and tie-heavy sorts page every seeded row exactly once`, { timeout: 120_000 }, async () => {
      const l = await c.setup();
      expect(l.originals.length).toBeGreaterThanOrEqual(ROWS);
      const counter = { n: 0 };
      for (const sort of c.sorts) {
        const pages = await pageThrough(c, l, sort, counter);
        expect(pages).toBeGreaterThan(l.originals.length / LIMIT - 1);
      }
      expect(counter.n).toBeGreaterThan(c.sorts.length);
    });
  }
});
