// Authorization matrix of the inventory core: every operation below is run by each kind of caller
// and must answer the status of the specification ("Authorization", "Scopes", "Endpoint
// families") and contract.md (sections 3 and 5): 401 without a token; 2xx for an unscoped admin,
// a member holding exactly the needed permissions, a member of a group granting them on an
// ancestor collection (grants inherit down the tree) and a service account in the granting group;
// 403 for a member or service account holding every other permission but not the needed ones,
// for a token scoped to another collection (a scope is never a grant) and for an admin token
// scoped to another collection (the scope filter runs before the admin rule). Lists and counts
// without a point check answer 200 and must show exactly what the caller may see, with an
// X-Total-Count that counts nothing else.
//
// Fixture tree (unique per run): P > C > {EC, fresh per-call collections}, P > C2; O stands apart
// (the "other" collection that scoped tokens name). Mutating rows build fresh resources per call.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, uniq, type TestApp } from './helpers.ts';
import { collection, principalWith, tokenFor } from './class-fixtures.ts';
import { PERMISSIONS, type Permission } from '../src/domain/authz.ts';
import type { TokenScopeValue } from '../src/db/tokens.ts';
import type { CheckedResponse } from './contract-check.ts';
import { tokenCache } from '../src/services/token-cache.ts';
import { operations } from '../generated/operations.ts';

let t: TestApp;
/**
 * A second instance on the same database with its token cache on (the other instance has it off, as
 * test/helpers.ts starts every app): a non-administrator's GET there tests collections against its
 * grants as values (Authority.grants) instead of reading them in SQL, and must decide the same.
 */
let cached: TestApp;
/** Statements on `cached` that read a principal's grants for its cache (the mode was used). */
let grantReads = 0;
let adminId: number;

const CALLERS = [
  'anonymous',
  'admin',
  'scopedAdmin',
  'member',
  'memberWithout',
  'parentMember',
  'serviceAccount',
  'serviceAccountWithout',
  'scopedElsewhere',
] as const;
type Caller = (typeof CALLERS)[number];

/** Callers that hold the needed permissions (directly, inherited, or as a service account). */
const HOLDERS: Caller[] = ['member', 'parentMember', 'serviceAccount'];

interface Req {
  method: string;
  path: string;
  body?: unknown;
  contentType?: string;
  query?: Record<string, string | number | (string | number)[]>;
}

/** Fresh per-call resources and the request that uses them. */
interface Call {
  req: Req;
  ids: Record<string, number>;
}

interface ListExpectation {
  /** The ids of the listed kind that holders see. */
  inside: number[];
  /** Ids outside the fixture tree (in O), seen by the admin; `scopedAdminSees` says what a token scoped to O sees. */
  outside?: number[];
  scopedAdminSees?: number[];
  /** Per-caller exceptions. */
  sees?: Partial<Record<Caller, number[]>>;
}

interface Row {
  name: string;
  /** The grants that allow the call (collection id, permissions). */
  needs(call: Call): [number, Permission[]][];
  prepare(): Promise<Call>;
  /** Runs after the caller's principal exists (resources the caller owns). */
  finish?(call: Call, principalId: number): Promise<void>;
  ok: number;
  list?: (call: Call) => ListExpectation;
  /** A list that first checks a permission on its parent resource: denial is 403, not an empty list. */
  pointChecked?: boolean;
  /** Only an unscoped administrator may call it (IAM wrappers, top-level collections). */
  adminOnly?: boolean;
  /** Humans only: service accounts get 403 even with the grant. */
  humanOnly?: boolean;
  /** Collection that the parent member's grants are placed on (default P). */
  parentOf?(call: Call): number;
  /** Custom assertion instead of the default expectations. */
  check?(caller: Caller, res: CheckedResponse, call: Call): void;
}

// ---- fixtures -----------------------------------------------------------------------------------

let P: number, C: number, C2: number, O: number, EC: number;
let K: number, K2: number, KW: number, KF: number, KR1: number, KR2: number, KO: number, KO2: number;
let kName: string;
let X1: number, X2: number, Y: number, XO: number, XO2: number;
let X1Name: string;
let CR: number, CRO: number, CRW: number, OR: number, ORO: number;
let F: number, RT: number, ET: number, G: number;
let ecEvents: number[], oEvents: number[], kEvents: number[], x1Events: number[], rtEvents: number[], etEvents: number[];
let M0: number, M: number, KM: number;

const PROVENANCE = JSON.stringify({ actor: { kind: 'system', principal: null }, initiator: null, task_id: null });
const sql = () => t.deps.sql;

async function klass(collectionId: number, name = uniq('mk')): Promise<number> {
  const [k] = await sql()<{ id: number }[]>`insert into classes (name, collection_id) values (${name}, ${collectionId}) returning id`;
  return k!.id;
}

async function object(classId: number, collectionId: number, name = uniq('mo'), data: unknown = { n: 1 }): Promise<number> {
  const [o] = await sql()<{ id: number }[]>`
    insert into objects (name, class_id, collection_id, json_data) values (${name}, ${classId}, ${collectionId}, ${JSON.stringify(data)}::text::jsonb)
    returning id`;
  return o!.id;
}

async function classRelation(from: number, to: number): Promise<number> {
  const [r] = await sql()<{ id: number }[]>`insert into class_relations (from_class_id, to_class_id) values (${from}, ${to}) returning id`;
  return r!.id;
}

async function objectRelation(cr: number, from: number, to: number): Promise<number> {
  const [r] = await sql()<{ id: number }[]>`
    insert into object_relations (class_relation_id, from_object_id, to_object_id) values (${cr}, ${from}, ${to}) returning id`;
  return r!.id;
}

// An action outside the event catalog: no subscription of another test file can match these rows.
async function events(n: number, f: { collectionId: number | null; entityType: string; entityId: number }): Promise<number[]> {
  const rows = await sql()<{ id: number }[]>`
    insert into events (entity_type, entity_id, entity_name, collection_id, action, actor_kind, provenance)
    select ${f.entityType}, ${f.entityId}::int, 'matrix', ${f.collectionId}::int, 'matrix_seed', 'system', ${PROVENANCE}::text::jsonb
    from generate_series(1, ${n}) g returning id`;
  return rows.map((r) => Number(r.id));
}

async function sharedField(classId: number, owner: number | null = null): Promise<number> {
  const [f] = await sql()<{ id: number }[]>`
    insert into computed_fields (class_id, key, label, operation, result_type, visibility, owner_user_id)
    values (${classId}, ${'f' + uniq('').replace(/-/g, '')}, 'l', '{"type":"sum","paths":["/n"]}', 'number',
      ${owner === null ? 'shared' : 'personal'}, ${owner})
    returning id`;
  return f!.id;
}

beforeAll(async () => {
  t = await startTestApp();
  cached = await startTestApp({ SVC_TOKEN_CACHE_SIZE: 10000 });
  (cached.deps.sql.options as unknown as { debug: unknown }).debug = (_c: number, text: string) => {
    if (text.includes('with recursive svc_granted (id, permission)')) grantReads++;
  };
  const [admin] = await sql()<{ id: number }[]>`select id from principals where name = 'admin' and identity_scope = 'local'`;
  adminId = admin!.id;
  P = await collection(t);
  C = await collection(t, P);
  C2 = await collection(t, P);
  EC = await collection(t, C);
  O = await collection(t);
  kName = uniq('mk');
  K = await klass(C, kName);
  K2 = await klass(C);
  KW = await klass(C);
  KF = await klass(C);
  KR1 = await klass(C);
  KR2 = await klass(C);
  KO = await klass(O);
  KO2 = await klass(O);
  X1Name = uniq('mo');
  X1 = await object(K, C, X1Name, { n: 2 });
  X2 = await object(K, C, uniq('mo'), { n: 3 });
  Y = await object(K2, C);
  XO = await object(KO, O);
  XO2 = await object(KO2, O);
  CR = await classRelation(K, K2);
  CRO = await classRelation(KO, KO2);
  CRW = await classRelation(KR1, KR2);
  OR = await objectRelation(CR, X1, Y);
  ORO = await objectRelation(CRO, XO, XO2);
  F = await sharedField(K);
  const [rt] = await sql()<{ id: number }[]>`
    insert into remote_targets (collection_id, name, method, url_template, allowed_subject_types)
    values (${C}, ${uniq('rt')}, 'get', 'https://example.test/x', '{collection}') returning id`;
  RT = rt!.id;
  const [et] = await sql()<{ id: number }[]>`
    insert into export_templates (collection_id, name, template) values (${C}, ${uniq('et')}, 'x') returning id`;
  ET = et!.id;
  const [g] = await sql()<{ id: number }[]>`insert into groups (name) values (${uniq('mg')}) returning id`;
  G = g!.id;
  ecEvents = await events(2, { collectionId: EC, entityType: 'collection', entityId: EC });
  oEvents = await events(2, { collectionId: O, entityType: 'collection', entityId: O });
  kEvents = await events(2, { collectionId: C, entityType: 'class', entityId: K });
  x1Events = await events(2, { collectionId: C, entityType: 'object', entityId: X1 });
  rtEvents = await events(2, { collectionId: C, entityType: 'remote_target', entityId: RT });
  etEvents = await events(2, { collectionId: C, entityType: 'export_template', entityId: ET });
  // meta counts: M0 > M > M1; class KM in M with two objects
  M0 = await collection(t);
  M = await collection(t, M0);
  await collection(t, M);
  KM = await klass(M);
  await object(KM, M);
  await object(KM, M);
});
afterAll(async () => {
  await t.close();
  await cached.close();
});

// ---- helpers for rows ---------------------------------------------------------------------------

const fixed =
  (req: Req, ids: Record<string, number> = {}) =>
  () =>
    Promise.resolve({ req, ids });
const on =
  (collectionId: () => number, ...perms: Permission[]) =>
  (): [number, Permission[]][] => [[collectionId(), perms]];
const onFresh =
  (key: string, ...perms: Permission[]) =>
  (call: Call): [number, Permission[]][] => [[call.ids[key]!, perms]];

async function freshCollection(parent = C): Promise<number> {
  return collection(t, parent);
}

async function freshGrantTarget(): Promise<Call['ids']> {
  const x = await freshCollection();
  const [g] = await sql()<{ id: number }[]>`insert into groups (name) values (${uniq('mg')}) returning id`;
  await sql()`insert into collection_permissions (collection_id, group_id, permission) values (${x}, ${g!.id}, 'ReadCollection')`;
  return { x, g: g!.id };
}

const NEW_FIELD = { operation: { type: 'sum', paths: ['/n'] }, result_type: 'number' };

// ---- the matrix ---------------------------------------------------------------------------------

const rows: Row[] = [
  // collections
  {
    name: 'listCollections',
    ok: 200,
    async prepare() {
      const x = await freshCollection();
      return { req: { method: 'GET', path: '/api/v1/collections', query: { id: `${x},${O}` } }, ids: { x } };
    },
    needs: onFresh('x', 'ReadCollection'),
    list: (c) => ({ inside: [c.ids.x!], outside: [O], scopedAdminSees: [O] }),
  },
  {
    name: 'createCollection (child: DelegateCollection on the parent)',
    ok: 201,
    prepare: async () => ({
      req: { method: 'POST', path: '/api/v1/collections', body: { name: uniq('mc'), parent_collection_id: C } },
      ids: {},
    }),
    needs: on(() => C, 'DelegateCollection'),
  },
  {
    name: 'createCollection (top level: unscoped admin)',
    ok: 201,
    adminOnly: true,
    prepare: async () => ({ req: { method: 'POST', path: '/api/v1/collections', body: { name: uniq('mtop') } }, ids: {} }),
    needs: on(() => C, ...PERMISSIONS),
  },
  {
    name: 'getCollection',
    ok: 200,
    prepare: fixed({ method: 'GET', path: '' }),
    needs: on(() => C, 'ReadCollection'),
  },
  {
    name: 'updateCollection',
    ok: 200,
    async prepare() {
      const x = await freshCollection();
      return { req: { method: 'PATCH', path: `/api/v1/collections/${x}`, body: { description: uniq('d') } }, ids: { x } };
    },
    needs: onFresh('x', 'UpdateCollection'),
  },
  {
    name: 'deleteCollection',
    ok: 204,
    async prepare() {
      const x = await freshCollection();
      return { req: { method: 'DELETE', path: `/api/v1/collections/${x}` }, ids: { x } };
    },
    needs: onFresh('x', 'DeleteCollection'),
  },
  {
    name: 'updateCollectionParent (UpdateCollection here, DelegateCollection on old and new parent)',
    ok: 200,
    async prepare() {
      const x = await freshCollection();
      return { req: { method: 'PUT', path: `/api/v1/collections/${x}/parent`, body: { parent_collection_id: C2 } }, ids: { x } };
    },
    needs: (c) => [
      [c.ids.x!, ['UpdateCollection']],
      [C, ['DelegateCollection']],
      [C2, ['DelegateCollection']],
    ],
  },
  {
    name: 'listCollectionChildren',
    ok: 200,
    async prepare() {
      const d = await freshCollection();
      const x = await freshCollection(d);
      return { req: { method: 'GET', path: `/api/v1/collections/${d}/children` }, ids: { d, x } };
    },
    needs: onFresh('d', 'ReadCollection'),
    list: (c) => ({ inside: [c.ids.x!] }),
    pointChecked: true,
  },
  {
    name: 'listCollectionAncestors (ancestors the caller cannot read are omitted)',
    ok: 200,
    async prepare() {
      const x = await freshCollection();
      return { req: { method: 'GET', path: `/api/v1/collections/${x}/ancestors` }, ids: { x } };
    },
    needs: on(() => C, 'ReadCollection'),
    list: () => ({ inside: [C], sees: { admin: [C, P], parentMember: [C, P] } }),
    pointChecked: true,
  },
  // permissions
  ...(
    [
      ['listCollectionPermissions', () => `/api/v1/collections/${C}/permissions`],
      ['getCollectionGroupPermissions', () => `/api/v1/collections/${C}/permissions/group/${G}`],
      ['listCollectionPrincipalPermissions', () => `/api/v1/collections/${C}/permissions/principal/${adminId}`],
      ['listEffectiveCollectionPrincipalPermissions', () => `/api/v1/collections/${C}/permissions/effective/principal/${adminId}`],
    ] as const
  ).map(([name, path]): Row => ({
    name,
    ok: 200,
    prepare: async () => ({ req: { method: 'GET', path: path() }, ids: {} }),
    needs: on(() => C, 'ReadCollection'),
  })),
  ...(
    [
      ['replaceCollectionGroupPermissions', 'PUT', '', ['ReadCollection', 'ReadClass'], 200],
      ['addCollectionGroupPermissions', 'POST', '', ['ReadClass'], 200],
      ['revokeAllCollectionGroupPermissions', 'DELETE', '', undefined, 204],
      ['grantCollectionGroupPermission', 'POST', '/ReadClass', undefined, 200],
      ['revokeCollectionGroupPermission', 'DELETE', '/ReadCollection', undefined, 204],
    ] as const
  ).map(([name, method, suffix, body, ok]): Row => ({
    name: `${name} (DelegateCollection)`,
    ok,
    async prepare() {
      const ids = await freshGrantTarget();
      return { req: { method, path: `/api/v1/collections/${ids.x}/permissions/group/${ids.g}${suffix}`, body }, ids };
    },
    needs: onFresh('x', 'DelegateCollection'),
  })),
  // classes
  {
    name: 'listClasses',
    ok: 200,
    prepare: fixed({ method: 'GET', path: '/api/v1/classes', query: { id: '' } }),
    needs: on(() => C, 'ReadClass'),
    list: () => ({ inside: [K], outside: [KO], scopedAdminSees: [KO] }),
  },
  {
    name: 'createClass',
    ok: 201,
    prepare: async () => ({ req: { method: 'POST', path: '/api/v1/classes', body: { name: uniq('mk'), collection_id: C } }, ids: {} }),
    needs: on(() => C, 'CreateClass'),
  },
  {
    name: 'getClass',
    ok: 200,
    prepare: fixed({ method: 'GET', path: '' }),
    needs: on(() => C, 'ReadClass'),
  },
  {
    name: 'getClassByName',
    ok: 200,
    prepare: fixed({ method: 'GET', path: '' }),
    needs: on(() => C, 'ReadClass'),
  },
  ...(['id', 'name'] as const).flatMap((by): Row[] => {
    const path = async () => {
      const name = uniq('mk');
      const k = await klass(C, name);
      return { k, path: by === 'id' ? `/api/v1/classes/${k}` : `/api/v1/classes/by-name/${name}` };
    };
    const suffix = by === 'id' ? '' : 'ByName';
    return [
      {
        name: `updateClass${suffix}`,
        ok: 200,
        async prepare() {
          const { k, path: p } = await path();
          return { req: { method: 'PATCH', path: p, body: { description: uniq('d') } }, ids: { k } };
        },
        needs: on(() => C, 'UpdateClass'),
      },
      {
        name: `updateClass${suffix} (move: UpdateClass here, CreateClass on the target collection)`,
        ok: 200,
        async prepare() {
          const { k, path: p } = await path();
          return { req: { method: 'PATCH', path: p, body: { collection_id: C2 } }, ids: { k } };
        },
        needs: () => [
          [C, ['UpdateClass']],
          [C2, ['CreateClass']],
        ],
      },
      {
        name: `deleteClass${suffix}`,
        ok: 204,
        async prepare() {
          const { k, path: p } = await path();
          return { req: { method: 'DELETE', path: p }, ids: { k } };
        },
        needs: on(() => C, 'DeleteClass'),
      },
    ];
  }),
  // objects
  ...(['id', 'name'] as const).flatMap((by): Row[] => {
    const suffix = by === 'id' ? '' : 'ByName';
    const classPath = () => (by === 'id' ? `/api/v1/classes/${K}` : `/api/v1/classes/by-name/${kName}`);
    const freshObject = async () => {
      const name = uniq('mo');
      const o = await object(KW, C, name);
      const [kw] = await sql()<{ name: string }[]>`select name from classes where id = ${KW}`;
      return { o, path: by === 'id' ? `/api/v1/classes/${KW}/${o}` : `/api/v1/classes/by-name/${kw!.name}/objects/by-name/${name}` };
    };
    return [
      {
        name: by === 'id' ? 'listObjects' : 'listObjectsByClassName',
        ok: 200,
        prepare: async () => ({ req: { method: 'GET', path: `${classPath()}/objects` }, ids: {} }),
        needs: on(() => C, 'ReadClass', 'ReadObject'),
        list: () => ({ inside: [X1, X2] }),
        pointChecked: true,
      },
      {
        name: by === 'id' ? 'createObject' : 'createObjectByClassName',
        ok: 201,
        async prepare() {
          const [kw] = await sql()<{ name: string }[]>`select name from classes where id = ${KW}`;
          const path = by === 'id' ? `/api/v1/classes/${KW}/objects` : `/api/v1/classes/by-name/${kw!.name}/objects`;
          return { req: { method: 'POST', path, body: { name: uniq('mo'), json_data: { n: 1 } } }, ids: {} };
        },
        needs: on(() => C, 'CreateObject'),
      },
      {
        name: by === 'id' ? 'getObject' : 'getObjectByName',
        ok: 200,
        prepare: async () => ({
          req: {
            method: 'GET',
            path: by === 'id' ? `/api/v1/classes/${K}/${X1}` : `/api/v1/classes/by-name/${kName}/objects/by-name/${X1Name}`,
          },
          ids: {},
        }),
        needs: on(() => C, 'ReadObject'),
      },
      {
        name: `updateObject${suffix}`,
        ok: 200,
        async prepare() {
          const { o, path } = await freshObject();
          return { req: { method: 'PATCH', path, body: { json_data: { n: 5 } } }, ids: { o } };
        },
        needs: on(() => C, 'UpdateObject'),
      },
      {
        name: `deleteObject${suffix}`,
        ok: 204,
        async prepare() {
          const { o, path } = await freshObject();
          return { req: { method: 'DELETE', path }, ids: { o } };
        },
        needs: on(() => C, 'DeleteObject'),
      },
      {
        name: by === 'id' ? 'aggregateObjects' : 'aggregateObjectsByClassName',
        ok: 200,
        prepare: async () => ({
          req: { method: 'GET', path: `${classPath()}/object-aggregates`, query: { aggregate: 'sum:json_data.n' } },
          ids: {},
        }),
        needs: on(() => C, 'ReadClass', 'ReadObject'),
        check(caller, res) {
          if (!['admin', ...HOLDERS].includes(caller)) return expectDenied(res, caller === 'anonymous' ? 401 : 403);
          expect(res.status, res.text).toBe(200);
          expect(res.body).toMatchObject([{ object_count: 2, measures: [{ value: 5, contributing_count: 2 }] }]);
        },
      },
    ];
  }),
  {
    name: 'patchObjectData (JSON Patch: UpdateObject)',
    ok: 200,
    async prepare() {
      const o = await object(KW, C);
      return {
        req: {
          method: 'PATCH',
          path: `/api/v1/classes/${KW}/${o}/data`,
          body: [{ op: 'replace', path: '/n', value: 9 }],
          contentType: 'application/json-patch+json',
        },
        ids: { o },
      };
    },
    needs: on(() => C, 'UpdateObject'),
  },
  // relations and traversal
  {
    name: 'listClassRelations',
    ok: 200,
    prepare: fixed({ method: 'GET', path: '/api/v1/relations/classes', query: { id: '' } }),
    needs: on(() => C, 'ReadClassRelation'),
    list: () => ({ inside: [CR], outside: [CRO], scopedAdminSees: [CRO] }),
  },
  {
    name: 'createClassRelation (CreateClassRelation on both classes)',
    ok: 201,
    async prepare() {
      const a = await klass(C);
      const b = await klass(C2);
      return { req: { method: 'POST', path: '/api/v1/relations/classes', body: { from_class_id: a, to_class_id: b } }, ids: {} };
    },
    needs: () => [
      [C, ['CreateClassRelation']],
      [C2, ['CreateClassRelation']],
    ],
  },
  {
    name: 'getClassRelation',
    ok: 200,
    prepare: fixed({ method: 'GET', path: '' }),
    needs: on(() => C, 'ReadClassRelation'),
  },
  {
    name: 'deleteClassRelation',
    ok: 204,
    async prepare() {
      const r = await classRelation(await klass(C), await klass(C));
      return { req: { method: 'DELETE', path: `/api/v1/relations/classes/${r}` }, ids: {} };
    },
    needs: on(() => C, 'DeleteClassRelation'),
  },
  {
    name: 'listObjectRelations',
    ok: 200,
    prepare: fixed({ method: 'GET', path: '/api/v1/relations/objects', query: { id: '' } }),
    needs: on(() => C, 'ReadObjectRelation'),
    list: () => ({ inside: [OR], outside: [ORO], scopedAdminSees: [ORO] }),
  },
  {
    name: 'createObjectRelation (CreateObjectRelation on both objects)',
    ok: 201,
    async prepare() {
      const a = await object(KR1, C);
      const b = await object(KR2, C);
      return {
        req: { method: 'POST', path: '/api/v1/relations/objects', body: { class_relation_id: CRW, from_object_id: a, to_object_id: b } },
        ids: {},
      };
    },
    needs: on(() => C, 'CreateObjectRelation'),
  },
  {
    name: 'getObjectRelation',
    ok: 200,
    prepare: fixed({ method: 'GET', path: '' }),
    needs: on(() => C, 'ReadObjectRelation'),
  },
  {
    name: 'deleteObjectRelation',
    ok: 204,
    async prepare() {
      const r = await objectRelation(CRW, await object(KR1, C), await object(KR2, C));
      return { req: { method: 'DELETE', path: `/api/v1/relations/objects/${r}` }, ids: {} };
    },
    needs: on(() => C, 'DeleteObjectRelation'),
  },
  {
    name: 'listRelatedClasses (ReadClass, and ReadClassRelation to cross)',
    ok: 200,
    prepare: fixed({ method: 'GET', path: '' }),
    needs: on(() => C, 'ReadClass', 'ReadClassRelation'),
    list: () => ({ inside: [K2] }),
    pointChecked: true,
  },
  {
    name: 'listRelatedObjects (ReadObject, and ReadObjectRelation to cross)',
    ok: 200,
    prepare: fixed({ method: 'GET', path: '' }),
    needs: on(() => C, 'ReadObject', 'ReadObjectRelation'),
    list: () => ({ inside: [Y] }),
    pointChecked: true,
  },
  // computed fields
  {
    name: 'listClassComputedFields (ReadClass)',
    ok: 200,
    prepare: fixed({ method: 'GET', path: '' }),
    needs: on(() => C, 'ReadClass'),
    list: () => ({ inside: [F] }),
    pointChecked: true,
  },
  {
    name: 'getClassComputedField (ReadClass)',
    ok: 200,
    prepare: fixed({ method: 'GET', path: '' }),
    needs: on(() => C, 'ReadClass'),
  },
  {
    name: 'createClassComputedField (UpdateCollection)',
    ok: 201,
    prepare: async () => ({
      req: { method: 'POST', path: `/api/v1/classes/${KF}/computed-fields`, body: { key: `f${uniq('').slice(1)}`, ...NEW_FIELD } },
      ids: {},
    }),
    needs: on(() => C, 'UpdateCollection'),
  },
  {
    name: 'updateClassComputedField (UpdateCollection)',
    ok: 200,
    async prepare() {
      const f = await sharedField(KW);
      return { req: { method: 'PATCH', path: `/api/v1/classes/${KW}/computed-fields/${f}`, body: { label: uniq('l') } }, ids: {} };
    },
    needs: on(() => C, 'UpdateCollection'),
  },
  {
    name: 'deleteClassComputedField (UpdateCollection)',
    ok: 204,
    async prepare() {
      const f = await sharedField(KW);
      return { req: { method: 'DELETE', path: `/api/v1/classes/${KW}/computed-fields/${f}` }, ids: {} };
    },
    needs: on(() => C, 'UpdateCollection'),
  },
  {
    name: 'listMyComputedFields (humans; fields on classes the caller can read)',
    ok: 200,
    humanOnly: true,
    prepare: async () => ({ req: { method: 'GET', path: '/api/v1/iam/me/computed-fields', query: { class_id: K } }, ids: {} }),
    async finish(call, principalId) {
      call.ids.f = await sharedField(K, principalId);
    },
    needs: on(() => C, 'ReadClass'),
    list: (c) => ({ inside: [c.ids.f!] }),
  },
  {
    name: 'createMyComputedField (humans; ReadClass)',
    ok: 201,
    humanOnly: true,
    prepare: async () => ({
      req: { method: 'POST', path: '/api/v1/iam/me/computed-fields', body: { class_id: K, key: `f${uniq('').slice(1)}`, ...NEW_FIELD } },
      ids: {},
    }),
    needs: on(() => C, 'ReadClass'),
  },
  // audit events and their wrappers
  {
    name: 'listEvents (ReadAudit per event collection)',
    ok: 200,
    prepare: fixed({ method: 'GET', path: '/api/v1/events', query: { collection_id: '' } }),
    needs: on(() => EC, 'ReadAudit'),
    list: () => ({ inside: ecEvents, outside: oEvents, scopedAdminSees: oEvents }),
  },
  {
    name: 'listCollectionEvents (ReadAudit)',
    ok: 200,
    prepare: fixed({ method: 'GET', path: '' }),
    needs: on(() => EC, 'ReadAudit'),
    list: () => ({ inside: ecEvents }),
    pointChecked: true,
  },
  {
    name: 'listClassEvents (ReadAudit on the class collection)',
    ok: 200,
    prepare: fixed({ method: 'GET', path: '' }),
    needs: on(() => C, 'ReadAudit'),
    list: () => ({ inside: kEvents }),
    pointChecked: true,
  },
  {
    name: 'listObjectEvents (ReadAudit on the object collection)',
    ok: 200,
    prepare: fixed({ method: 'GET', path: '' }),
    needs: on(() => C, 'ReadAudit'),
    list: () => ({ inside: x1Events }),
    pointChecked: true,
  },
  {
    name: 'listRemoteTargetEvents (ReadAudit on the target collection)',
    ok: 200,
    prepare: fixed({ method: 'GET', path: '' }),
    needs: on(() => C, 'ReadAudit'),
    list: () => ({ inside: rtEvents }),
    pointChecked: true,
  },
  {
    name: 'listExportTemplateEvents (ReadAudit on the template collection)',
    ok: 200,
    prepare: fixed({ method: 'GET', path: '' }),
    needs: on(() => C, 'ReadAudit'),
    list: () => ({ inside: etEvents }),
    pointChecked: true,
  },
  {
    name: 'listUserEvents (unscoped admin)',
    ok: 200,
    adminOnly: true,
    prepare: fixed({ method: 'GET', path: '' }),
    needs: on(() => C, ...PERMISSIONS),
  },
  {
    name: 'listGroupEvents (unscoped admin)',
    ok: 200,
    adminOnly: true,
    prepare: fixed({ method: 'GET', path: '' }),
    needs: on(() => C, ...PERMISSIONS),
  },
  // meta counts
  {
    name: 'getMetaCounts (counts only what the caller can read)',
    ok: 200,
    prepare: fixed({ method: 'GET', path: '/api/v0/meta/counts' }),
    needs: on(() => M, 'ReadCollection', 'ReadClass', 'ReadObject'),
    parentOf: () => M0,
    check(caller, res) {
      if (caller === 'anonymous') return expectDenied(res, 401);
      expect(res.status, res.text).toBe(200);
      const body = res.body as {
        total_collections: number;
        total_classes: number;
        total_objects: number;
        objects_per_class: { svc_class_id: number; count: number }[];
      };
      const km = body.objects_per_class.find((r) => r.svc_class_id === KM);
      const counts = [body.total_collections, body.total_classes, body.total_objects];
      switch (caller) {
        case 'admin':
          expect(km?.count).toBe(2);
          expect(body.total_objects).toBeGreaterThanOrEqual(body.objects_per_class.reduce((n, r) => n + r.count, 0));
          return;
        case 'scopedAdmin': // scoped to O: O itself, its classes KO, KO2 and their objects
          expect(counts).toEqual([1, 2, 2]);
          expect(body.objects_per_class).toEqual(expect.arrayContaining([{ svc_class_id: KO, count: 1 }]));
          expect(km).toBeUndefined();
          return;
        case 'member':
        case 'serviceAccount':
          expect(counts).toEqual([2, 1, 2]);
          expect(body.objects_per_class).toEqual([{ svc_class_id: KM, count: 2 }]);
          return;
        case 'parentMember':
          expect(counts).toEqual([3, 1, 2]);
          expect(body.objects_per_class).toEqual([{ svc_class_id: KM, count: 2 }]);
          return;
        default:
          expect(counts).toEqual([0, 0, 0]);
          expect(body.objects_per_class).toEqual([]);
      }
    },
  },
];

// Paths of the fixed read rows, resolved once the fixtures exist.
function resolvePath(row: Row, req: Req): Req {
  const byName: Record<string, () => Req> = {
    getCollection: () => ({ ...req, path: `/api/v1/collections/${C}` }),
    getClass: () => ({ ...req, path: `/api/v1/classes/${K}` }),
    getClassByName: () => ({ ...req, path: `/api/v1/classes/by-name/${kName}` }),
    listClasses: () => ({ ...req, query: { id: `${K},${KO}` } }),
    getClassRelation: () => ({ ...req, path: `/api/v1/relations/classes/${CR}` }),
    listClassRelations: () => ({ ...req, query: { id: `${CR},${CRO}` } }),
    getObjectRelation: () => ({ ...req, path: `/api/v1/relations/objects/${OR}` }),
    listObjectRelations: () => ({ ...req, query: { id: `${OR},${ORO}` } }),
    listRelatedClasses: () => ({ ...req, path: `/api/v1/classes/${K}/related/classes` }),
    listRelatedObjects: () => ({ ...req, path: `/api/v1/classes/${K}/${X1}/related/objects` }),
    listClassComputedFields: () => ({ ...req, path: `/api/v1/classes/${K}/computed-fields` }),
    getClassComputedField: () => ({ ...req, path: `/api/v1/classes/${K}/computed-fields/${F}` }),
    listEvents: () => ({ ...req, query: { collection_id__in: `${EC},${O}` } }),
    listCollectionEvents: () => ({ ...req, path: `/api/v1/collections/${EC}/events` }),
    listClassEvents: () => ({ ...req, path: `/api/v1/classes/${K}/events` }),
    listObjectEvents: () => ({ ...req, path: `/api/v1/classes/${K}/${X1}/events` }),
    listRemoteTargetEvents: () => ({ ...req, path: `/api/v1/remote-targets/${RT}/events` }),
    listExportTemplateEvents: () => ({ ...req, path: `/api/v1/export-templates/${ET}/events` }),
    listUserEvents: () => ({ ...req, path: `/api/v1/iam/users/${adminId}/events` }),
    listGroupEvents: () => ({ ...req, path: `/api/v1/iam/groups/${G}/events` }),
  };
  const op = row.name.split(' ')[0]!;
  return byName[op]?.() ?? req;
}

function expectDenied(res: CheckedResponse, status: number): void {
  expect(res.status, res.text).toBe(status);
  expect((res.body as { error?: string }).error).toBeTruthy();
}

/** All permissions except `needed` on each collection of `grants`. */
function without(grants: [number, Permission[]][]): [number, Permission[]][] {
  return grants.map(([cid, ps]) => [cid, PERMISSIONS.filter((p) => !ps.includes(p))]);
}

/** Merges the needed permissions onto one (ancestor) collection. */
function onParent(grants: [number, Permission[]][], parent: number): [number, Permission[]][] {
  return [[parent, [...new Set(grants.flatMap(([, ps]) => ps))]]];
}

const elsewhere = (): TokenScopeValue => ({ resources: [{ kind: 'collection', id: O }] });

async function as(p: Promise<{ id: number; token: string }>): Promise<{ token: string; principalId: number }> {
  const { id, token } = await p;
  return { token, principalId: id };
}

/** The token of a caller; creates the caller's principal with the grants it is defined by. */
async function tokenOf(caller: Caller, row: Row, call: Call): Promise<{ token: string | null; principalId: number }> {
  const needs = row.needs(call);
  switch (caller) {
    case 'anonymous':
      return { token: null, principalId: 0 };
    case 'admin':
      return { token: t.adminToken, principalId: adminId };
    case 'scopedAdmin':
      return { token: await tokenFor(t, adminId, elsewhere()), principalId: adminId };
    case 'member':
      return as(principalWith(t, needs));
    case 'memberWithout':
      return as(principalWith(t, without(needs)));
    case 'parentMember':
      return as(principalWith(t, onParent(needs, row.parentOf?.(call) ?? P)));
    case 'serviceAccount':
      return as(principalWith(t, needs, { kind: 'service_account' }));
    case 'serviceAccountWithout':
      return as(principalWith(t, without(needs), { kind: 'service_account' }));
    case 'scopedElsewhere':
      return as(principalWith(t, needs, { scope: elsewhere() }));
  }
}

function expectedStatus(row: Row, caller: Caller): number {
  if (caller === 'anonymous') return 401;
  if (caller === 'admin') return row.ok;
  if (row.adminOnly) return 403;
  if (row.humanOnly && caller.startsWith('serviceAccount')) return 403;
  if (HOLDERS.includes(caller)) return row.ok;
  if (row.list && !row.pointChecked) return 200;
  return 403;
}

function expectedItems(l: ListExpectation, caller: Caller): number[] {
  const explicit = l.sees?.[caller];
  if (explicit) return explicit;
  if (caller === 'admin') return [...l.inside, ...(l.outside ?? [])];
  if (caller === 'scopedAdmin') return l.scopedAdminSees ?? [];
  if (HOLDERS.includes(caller)) return l.inside;
  return [];
}

/** Prepares `row`, then sends its request as `caller` to `app` (`before` runs right before it). */
async function runAs(app: TestApp, row: Row, caller: Caller, before?: () => void): Promise<{ res: CheckedResponse; call: Call }> {
  const call = await row.prepare();
  const { token, principalId } = await tokenOf(caller, row, call);
  if (row.finish && caller !== 'anonymous') await row.finish(call, principalId);
  const req = resolvePath(row, call.req);
  before?.();
  const res = await app.request(req.method, req.path, { token, body: req.body, contentType: req.contentType, query: req.query });
  return { res, call };
}

/** The row's expected status for `caller`, and for a list its items (returned, sorted). */
function expectAsSpecified(res: CheckedResponse, row: Row, call: Call, caller: Caller): number[] | undefined {
  const want = expectedStatus(row, caller);
  if (want >= 400) {
    expectDenied(res, want);
    return undefined;
  }
  expect(res.status, res.text).toBe(want);
  if (!row.list) return undefined;
  const items = (res.body as { id: number }[]).map((r) => Number(r.id)).sort((a, b) => a - b);
  expect(items).toEqual([...expectedItems(row.list(call), caller)].sort((a, b) => a - b));
  return items;
}

describe('authorization matrix of the inventory core', () => {
  it('the matrix names each row once', () => {
    expect(new Set(rows.map((r) => r.name)).size).toBe(rows.length);
  });

  for (const row of rows) {
    for (const caller of CALLERS) {
      it(`${row.name}: ${caller} → ${row.check ? 'as specified' : expectedStatus(row, caller)}`, async () => {
        const { res, call } = await runAs(t, row, caller);
        if (row.check) return row.check(caller, res, call);
        const items = expectAsSpecified(res, row, call, caller);
        if (items) expect(Number(res.headers.get('x-total-count'))).toBe(items.length);
      });
    }
  }

  // The reads again on the instance with its token cache, whose cache is emptied first (the
  // fixtures above are made in SQL, whose NOTIFY may not have arrived yet): same status, same items.
  for (const row of rows) {
    const op = operations[row.name.split(' ')[0] as keyof typeof operations];
    if (row.check || op.method !== 'get') continue;
    for (const caller of CALLERS) {
      if (caller === 'anonymous' || caller === 'admin' || caller === 'scopedAdmin') continue;
      it(`${row.name}: ${caller} → ${expectedStatus(row, caller)} with the grants known`, async () => {
        const { res, call } = await runAs(cached, row, caller, () => tokenCache(cached.deps).clear());
        expectAsSpecified(res, row, call, caller);
      });
    }
  }

  it('the instance with its token cache read the grants for its cache (the mode above was used)', () => {
    expect(grantReads).toBeGreaterThan(0);
  });
});

// Scope dimensions beyond "another collection": what each resource entry covers, the permission
// dimension, and collection-level features that need an explicit collection entry. All on the
// unscoped admin's principal, so any denial comes from the scope alone.
describe('token scope details (admin principal, scoped tokens)', () => {
  interface ScopeCase {
    name: string;
    scope: () => TokenScopeValue;
    req: () => Req;
    status: number;
    items?: () => number[];
  }
  const res = (kind: 'collection' | 'class' | 'object', id: () => number) => () => ({ resources: [{ kind, id: id() }] });
  const scopeCases: ScopeCase[] = [
    {
      name: 'listClassEvents 403: a class entry does not open collection-level audit',
      scope: res('class', () => K),
      req: () => ({ method: 'GET', path: `/api/v1/classes/${K}/events` }),
      status: 403,
    },
    {
      name: 'listClassEvents 200: an explicit collection entry does',
      scope: res('collection', () => C),
      req: () => ({ method: 'GET', path: `/api/v1/classes/${K}/events` }),
      status: 200,
      items: () => kEvents,
    },
    {
      name: 'listEvents 200 empty: ReadAudit is never in a permission scope',
      scope: () => ({ permissions: ['ReadCollection', 'ReadClass', 'ReadObject'] }),
      req: () => ({ method: 'GET', path: '/api/v1/events', query: { collection_id__in: `${EC},${O}` } }),
      status: 200,
      items: () => [],
    },
    {
      name: 'getObject 200 with an object entry',
      scope: res('object', () => X1),
      req: () => ({ method: 'GET', path: `/api/v1/classes/${K}/${X1}` }),
      status: 200,
    },
    {
      name: 'getObject 403 for a sibling object of an object entry',
      scope: res('object', () => X1),
      req: () => ({ method: 'GET', path: `/api/v1/classes/${K}/${X2}` }),
      status: 403,
    },
    {
      name: 'listObjects 403 with an object entry (the class is not covered)',
      scope: res('object', () => X1),
      req: () => ({ method: 'GET', path: `/api/v1/classes/${K}/objects` }),
      status: 403,
    },
    {
      name: 'listObjects 200 with a class entry: the objects of the class',
      scope: res('class', () => K),
      req: () => ({ method: 'GET', path: `/api/v1/classes/${K}/objects` }),
      status: 200,
      items: () => [X1, X2],
    },
    {
      name: 'getCollection 403 with a class entry (the parent collection is not covered)',
      scope: res('class', () => K),
      req: () => ({ method: 'GET', path: `/api/v1/collections/${C}` }),
      status: 403,
    },
    {
      name: 'listClasses 200 with a class entry: only that class, not its siblings',
      scope: res('class', () => K),
      req: () => ({ method: 'GET', path: '/api/v1/classes', query: { id: `${K},${K2}` } }),
      status: 200,
      items: () => [K],
    },
    {
      name: 'getClassRelation 403 when only one end class is in scope',
      scope: res('class', () => K),
      req: () => ({ method: 'GET', path: `/api/v1/relations/classes/${CR}` }),
      status: 403,
    },
    {
      name: 'listObjectRelations 200 empty when only one end object is in scope',
      scope: res('object', () => X1),
      req: () => ({ method: 'GET', path: '/api/v1/relations/objects', query: { id: `${OR}` } }),
      status: 200,
      items: () => [],
    },
    {
      name: 'listRelatedObjects 200 empty: hidden targets are not crossed',
      scope: res('object', () => X1),
      req: () => ({ method: 'GET', path: `/api/v1/classes/${K}/${X1}/related/objects` }),
      status: 200,
      items: () => [],
    },
    {
      name: 'listCollectionChildren 200 empty: a collection entry does not cover child collections',
      scope: res('collection', () => C),
      req: () => ({ method: 'GET', path: `/api/v1/collections/${C}/children`, query: { id: String(EC) } }),
      status: 200,
      items: () => [],
    },
    {
      name: 'listCollectionAncestors 403 for a child of the scoped collection',
      scope: res('collection', () => C),
      req: () => ({ method: 'GET', path: `/api/v1/collections/${EC}/ancestors` }),
      status: 403,
    },
    {
      name: 'getCollection 403 when the permission dimension lacks ReadCollection',
      scope: () => ({ permissions: ['ReadClass'] }),
      req: () => ({ method: 'GET', path: `/api/v1/collections/${C}` }),
      status: 403,
    },
    {
      name: 'createCollection 403 at the top level when the permission scope lacks DelegateCollection',
      scope: () => ({ permissions: ['ReadCollection', 'UpdateCollection'] }),
      req: () => ({ method: 'POST', path: '/api/v1/collections', body: { name: uniq('mtop') } }),
      status: 403,
    },
    {
      // ambiguous in the specification; read as "all permissions ∩ scope" like every other admin check
      name: 'createCollection 201 at the top level for an admin token whose permission scope holds DelegateCollection',
      scope: () => ({ permissions: ['DelegateCollection'] }),
      req: () => ({ method: 'POST', path: '/api/v1/collections', body: { name: uniq('mtop') } }),
      status: 201,
    },
    {
      name: 'createCollection 403 at the top level for a resource-scoped admin token, even naming the collection',
      scope: res('collection', () => C),
      req: () => ({ method: 'POST', path: '/api/v1/collections', body: { name: uniq('mtop') } }),
      status: 403,
    },
    {
      name: 'createCollection 201 as a child with DelegateCollection in the permission scope',
      scope: () => ({ permissions: ['DelegateCollection'] }),
      req: () => ({ method: 'POST', path: '/api/v1/collections', body: { name: uniq('mc'), parent_collection_id: C } }),
      status: 201,
    },
    {
      name: 'listUserEvents 403 for any scoped token (IAM wrapper)',
      scope: () => ({ permissions: ['ReadCollection'] }),
      req: () => ({ method: 'GET', path: `/api/v1/iam/users/${adminId}/events` }),
      status: 403,
    },
  ];

  for (const c of scopeCases) {
    it(c.name, async () => {
      const token = await tokenFor(t, adminId, c.scope());
      const req = c.req();
      const r = await t.request(req.method, req.path, { token, body: req.body, query: req.query });
      if (c.status >= 400) return expectDenied(r, c.status);
      expect(r.status, r.text).toBe(c.status);
      if (!c.items) return;
      const items = (r.body as { id: number }[]).map((x) => Number(x.id)).sort((a, b) => a - b);
      expect(items).toEqual([...c.items()].sort((a, b) => a - b));
      expect(Number(r.headers.get('x-total-count'))).toBe(items.length);
    });
  }
});
