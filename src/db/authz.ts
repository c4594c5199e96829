// The SQL half of authorization (the rules and the API documentation are in src/domain/authz.ts).
// Point checks load the resource and its grant in one statement; visibility helpers return
// postgres.js fragments so that lists, totals and searches filter in SQL.
import { nameOf, partOf, type Db, type TransactionSql } from './sql.ts';
import type { Fragment } from './list.ts';
import { notFound } from '../domain/errors.ts';
import {
  PERMISSIONS,
  decide,
  enforce,
  parsePermissionList,
  permissionInScope,
  resourceInScope,
  resourceScope,
  sortPermissions,
  type Authority,
  type Permission,
  type ScopedResource,
} from '../domain/authz.ts';

/**
 * Collections on which the principal's groups hold `perm`, directly or on an ancestor (grants
 * inherit down the tree). A subquery selecting one integer column `id`; no admin rule, no scope.
 * readGrantSets reads the same for every permission at once: change both together.
 */
export function grantedCollectionIds(db: Db, principalId: number, perm: Permission): Fragment {
  return partOf(db)`
    with recursive svc_granted (id) as (
      select cp.collection_id
      from collection_permissions cp
      join group_members gm on gm.group_id = cp.group_id
      where gm.principal_id = ${principalId}::int and cp.permission = ${perm}::text
      union
      select c.id from collections c join svc_granted g on c.parent_collection_id = g.id
    )
    select svc_granted.id from svc_granted` as Fragment;
}

/**
 * The principal's grants for every permission (Authority.grants): the collections where its groups
 * hold it, directly or on an ancestor, as grantedCollectionIds selects them for one permission. Null
 * when they hold more than `max` (permission, collection) pairs: the read stops there, so a grant
 * over a large tree costs no more than `max` rows.
 */
export async function readGrantSets(db: Db, principalId: number, max = 1_000_000): Promise<Map<string, number[]> | null> {
  const rows = await db<{ permission: string; id: number }[]>`
    with recursive svc_granted (id, permission) as (
      select cp.collection_id, cp.permission
      from collection_permissions cp
      join group_members gm on gm.group_id = cp.group_id
      where gm.principal_id = ${principalId}::int
      union
      select c.id, g.permission from collections c join svc_granted g on c.parent_collection_id = g.id
    )
    select permission, id from svc_granted limit ${max + 1}::int`;
  if (rows.length > max) return null;
  const sets = new Map<string, number[]>();
  for (const r of rows) {
    const ids = sets.get(r.permission);
    if (ids) ids.push(r.id);
    else sets.set(r.permission, [r.id]);
  }
  for (const ids of sets.values()) ids.sort((a, b) => a - b);
  return sets;
}

/** The collections granted `perm` as a value, when the caller's grants are known (Authority.grants). */
function knownGrant(auth: Authority, perm: Permission): readonly number[] | undefined {
  return auth.grants ? (auth.grants.get(perm) ?? []) : undefined;
}

/** The grant part of visibility on a collection-id column: admin → true, else membership in the granted set. */
function grantedOn(db: Db, auth: Authority, perm: Permission, collectionColumn: string): Fragment {
  if (auth.isAdmin) return partOf(db)`true` as Fragment;
  const known = knownGrant(auth, perm);
  if (known) return partOf(db)`${nameOf(db, collectionColumn)} = any(${known as number[]}::int[])` as Fragment;
  // = any(array(…)): the granted ids are computed once per statement (an InitPlan), and the test
  // can be an index condition, also where it is one arm of an OR (`in (subquery)` there is a
  // hashed subplan checked row by row: the audit count of a non-admin read every event).
  return partOf(db)`${nameOf(db, collectionColumn)} = any(array(${grantedCollectionIds(db, auth.principal.id, perm)}))` as Fragment;
}

/**
 * Collections where the caller effectively holds `perm` (grants ∩ scope, admin rule after scope).
 * A subquery selecting one integer column `id`.
 */
export function visibleCollectionIds(db: Db, auth: Authority, perm: Permission): Fragment {
  return partOf(db)`select svc_c.id from collections svc_c where ${collectionWhere(db, auth, perm, { id: 'svc_c.id' })}` as Fragment;
}

/**
 * visibleCollectionIds as values, without a statement, when the caller's grants are known
 * (Authority.grants: collections that existed when they were read, dropped with any change of the
 * tree): the granted ones within the token's scope. Undefined for an administrator and when the
 * grants are not known.
 */
export function knownVisibleCollectionIds(auth: Authority, perm: Permission): number[] | undefined {
  if (auth.isAdmin) return undefined;
  const known = knownGrant(auth, perm);
  if (!known) return undefined;
  if (!permissionInScope(auth, perm)) return [];
  const rs = resourceScope(auth);
  return rs ? known.filter((id) => rs.collections.includes(id)) : [...known];
}

/** Boolean fragment: the collection in column `id` is visible with `perm`. */
export function collectionWhere(db: Db, auth: Authority, perm: Permission, cols: { id: string } = { id: 'c.id' }): Fragment {
  if (!permissionInScope(auth, perm)) return partOf(db)`false` as Fragment;
  const rs = resourceScope(auth);
  const grant = grantedOn(db, auth, perm, cols.id);
  if (!rs) return grant;
  return partOf(db)`(${nameOf(db, cols.id)} = any(${rs.collections}::int[]) and ${grant})` as Fragment;
}

/** Boolean fragment: the class (columns id, collectionId) is visible with `perm`. */
export function classWhere(
  db: Db,
  auth: Authority,
  perm: Permission,
  cols: { id: string; collectionId: string } = { id: 'k.id', collectionId: 'k.collection_id' },
): Fragment {
  if (!permissionInScope(auth, perm)) return partOf(db)`false` as Fragment;
  const rs = resourceScope(auth);
  const grant = grantedOn(db, auth, perm, cols.collectionId);
  if (!rs) return grant;
  const [collectionId, id] = [nameOf(db, cols.collectionId), nameOf(db, cols.id)];
  return partOf(db)`((${collectionId} = any(${rs.collections}::int[]) or ${id} = any(${rs.classes}::int[]))
    and ${grant})` as Fragment;
}

/** Boolean fragment: the object (columns id, classId, collectionId) is visible with `perm`. */
export function objectWhere(
  db: Db,
  auth: Authority,
  perm: Permission,
  cols: { id: string; classId: string; collectionId: string } = { id: 'o.id', classId: 'o.class_id', collectionId: 'o.collection_id' },
): Fragment {
  if (!permissionInScope(auth, perm)) return partOf(db)`false` as Fragment;
  const rs = resourceScope(auth);
  const grant = grantedOn(db, auth, perm, cols.collectionId);
  if (!rs) return grant;
  const [collectionId, classId, id] = [nameOf(db, cols.collectionId), nameOf(db, cols.classId), nameOf(db, cols.id)];
  return partOf(db)`((${collectionId} = any(${rs.collections}::int[]) or ${classId} = any(${rs.classes}::int[])
    or ${id} = any(${rs.objects}::int[])) and ${grant})` as Fragment;
}

/**
 * The `permissions=<PermissionName>[,<PermissionName>…]` list filter: one fragment per named
 * permission (all must hold). `raw` undefined → no fragments. Unknown names → 400.
 */
export function permissionsFilter(raw: string | undefined, build: (perm: Permission) => Fragment): Fragment[] {
  if (raw === undefined) return [];
  return parsePermissionList(raw).map(build);
}

/**
 * True when the principal's groups grant `perm` on the collection or an ancestor (no admin rule, no
 * scope). grantExistsText is the same test as text: change both together.
 */
function grantExists(db: Db, principalId: number, perm: Permission, collectionColumn: Fragment): Fragment {
  return partOf(db)`exists (
    select 1 from collection_ancestors(${collectionColumn}) a
    join collection_permissions cp on cp.collection_id = a.ancestor_id and cp.permission = ${perm}::text
    join group_members gm on gm.group_id = cp.group_id and gm.principal_id = ${principalId}::int)` as Fragment;
}

/**
 * grantExists as statement text, for a statement kept as constant text: `principalParam` is the
 * placeholder of the principal's id (e.g. `$7`), `perm` one of our permission names.
 */
export function grantExistsText(perm: Permission, principalParam: string, collectionColumn: string): string {
  if (!/^[A-Za-z]+$/.test(perm) || !/^\$\d+$/.test(principalParam)) throw new Error('grantExistsText: not a permission or a placeholder');
  return `exists (
    select 1 from collection_ancestors(${collectionColumn}) a
    join collection_permissions cp on cp.collection_id = a.ancestor_id and cp.permission = '${perm}'
    join group_members gm on gm.group_id = cp.group_id and gm.principal_id = ${principalParam}::int)`;
}

/**
 * The grant test of a point check: `perm` on the collection in `collectionColumn`, as a boolean
 * column of the statement that reads the resource, so the read and its check are one statement;
 * decide the row with enforceGranted. True for an administrator (decide() still applies the scope
 * first); the known grants as values; else the ancestor walk.
 */
export function grantColumn(db: Db, auth: Authority, perm: Permission, collectionColumn: Fragment): Fragment {
  if (auth.isAdmin) return partOf(db)`true` as Fragment;
  const known = knownGrant(auth, perm);
  if (known) return partOf(db)`${collectionColumn} = any(${known as number[]}::int[])` as Fragment;
  return grantExists(db, auth.principal.id, perm, collectionColumn);
}

/** 403 unless the caller holds `perm` on the resource (`granted`: its grantColumn) and the token's scopes allow it. */
export function enforceGranted(auth: Authority, perm: Permission, resource: ScopedResource, granted: boolean): void {
  enforce(decide(auth, perm, resource, granted), perm, resource.kind);
}

export interface CollectionRef {
  id: number;
  parent_collection_id: number | null;
}
export interface ClassRef {
  id: number;
  collection_id: number;
}
export interface ObjectRef {
  id: number;
  class_id: number;
  collection_id: number;
}

/**
 * 404 when the collection does not exist; 403 when the caller lacks `perm` on it or is scoped out.
 * The collection is named by id or by an id subquery (IdBy).
 */
export async function requireCollectionPermission(
  db: Db,
  auth: Authority,
  collectionId: number | IdBy,
  perm: Permission,
): Promise<CollectionRef> {
  const row = await readCollectionAs<CollectionRef>(db, auth, collectionId, perm, partOf(db)`c.id, c.parent_collection_id` as Fragment);
  return { id: row.id, parent_collection_id: row.parent_collection_id };
}

/**
 * A read under a collection that needs `perm` on it (its children, its ancestors, its grants), with
 * the check as requireCollectionPermission makes it, then `alsoCheck` (the 404 of a group or
 * principal the read names, whose existence rows of the read also show). Where the caller's grants
 * tell without a statement (an administrator, or grants known: Authority.grants) that it holds
 * `perm` there, `read` runs at once and rows under the collection show that it exists; only a read
 * without rows, or one that fails (a bad query: the checks' 404 or 403 still come first), then
 * asks. Otherwise the checks and the read go out together (one round trip; the read is only reads,
 * and is thrown away when a check refuses), and the checks decide first.
 */
export async function readUnderCollection<T extends { rows: unknown[] }>(
  db: Db,
  auth: Authority,
  collectionId: number,
  perm: Permission,
  read: () => Promise<T>,
  alsoCheck?: () => Promise<void>,
): Promise<T> {
  const check = async () => {
    await requireCollectionPermission(db, auth, collectionId, perm);
    await alsoCheck?.();
  };
  const known = auth.isAdmin || knownGrant(auth, perm)?.includes(collectionId) === true;
  if (!known || decide(auth, perm, { kind: 'collection', id: collectionId }, true) !== 'allow') {
    const checked = check();
    const reading = (async () => read())(); // a bad query's 400, thrown at once, waits for the checks too
    reading.catch(() => undefined); // awaited below, after the checks
    await checked;
    return reading;
  }
  let result: T;
  try {
    result = await read();
  } catch (err) {
    await check();
    throw err;
  }
  if (result.rows.length === 0) await check();
  return result;
}

/**
 * requireCollectionPermission and a read of the collection's `columns` (over alias `c`) in one
 * statement; the collection named by id or by an id subquery (IdBy).
 */
export function readCollectionAs<R extends object>(
  db: Db,
  auth: Authority,
  collectionId: number | IdBy,
  perm: Permission,
  columns: Fragment,
): Promise<R> {
  return readInCollectionAs<R>(db, auth, perm, 'collection', {
    columns,
    from: partOf(db)`collections c` as Fragment,
    where: (typeof collectionId === 'number'
      ? partOf(db)`c.id = ${collectionId}::int`
      : partOf(db)`c.id = ${collectionId.idBy}`) as Fragment,
    collection: 'c.id',
  });
}

/**
 * A point read of a collection or of a row kept in one (a remote target, a template, a class or an
 * object as the audit wrappers see them) and the check of `perm` on that collection, in one
 * statement: `columns` from `from` where `where`, the collection being the column named by
 * `collection` (e.g. 'rt.collection_id'). 404 (`what`) when no row matches; 403 when the caller
 * lacks `perm` on the collection or is scoped out, as a check of the collection alone decides.
 */
export function readInCollectionAs<R extends object>(
  db: Db,
  auth: Authority,
  perm: Permission,
  what: string,
  read: InCollection,
): Promise<R> {
  return inCollectionAs<R>(db, auth, perm, what, read, partOf(db)`` as Fragment);
}

/**
 * readInCollectionAs for a write: the row is locked for update (of `lock`, the alias of its table)
 * and comes with the transaction's now() as `svc_now` (the updated_at of the write), and the check
 * is of the row as locked (a row moved to another collection meanwhile is judged there).
 */
export function lockInCollectionAs<R extends object>(
  tx: TransactionSql,
  auth: Authority,
  perm: Permission,
  what: string,
  read: InCollection & { lock: string },
): Promise<R & { svc_now: Date }> {
  return inCollectionAs<R & { svc_now: Date }>(
    tx,
    auth,
    perm,
    what,
    read,
    partOf(tx)`, now() as svc_now` as Fragment,
    partOf(tx)`for update of ${nameOf(tx, read.lock)}` as Fragment,
  );
}

interface InCollection {
  columns: Fragment;
  from: Fragment;
  where: Fragment;
  collection: string;
}

async function inCollectionAs<R extends object>(
  db: Db,
  auth: Authority,
  perm: Permission,
  what: string,
  read: InCollection,
  extra: Fragment,
  lock: Fragment = partOf(db)`` as Fragment,
): Promise<R> {
  const column = nameOf(db, read.collection) as unknown as Fragment;
  const [row] = await db<(R & { svc_collection_id: number; svc_granted: boolean })[]>`
    select ${read.columns}, ${column} as svc_collection_id, ${grantColumn(db, auth, perm, column)} as svc_granted${extra}
    from ${read.from} where ${read.where} ${lock}`;
  if (!row) throw notFound(what);
  enforceGranted(auth, perm, { kind: 'collection', id: row.svc_collection_id }, row.svc_granted);
  return row;
}

/**
 * `perm` on the collection of class `classId`, decided as for the collection itself (a token scoped
 * to the class alone does not cover it), in one statement: 404 when the class does not exist.
 * Returns the collection's id.
 */
export async function requireClassCollectionPermission(db: Db, auth: Authority, classId: number, perm: Permission): Promise<number> {
  const row = await readInCollectionAs<{ collection_id: number }>(db, auth, perm, 'class', {
    columns: partOf(db)`k.collection_id` as Fragment,
    from: partOf(db)`classes k` as Fragment,
    where: partOf(db)`k.id = ${classId}::int` as Fragment,
    collection: 'k.collection_id',
  });
  return row.collection_id;
}

/**
 * A row's id as a scalar subquery of the statement that reads the row (`(select … where …)`), so
 * that a check of a row named by another can go out beside the read of that other (one round trip).
 */
export interface IdBy {
  idBy: Fragment;
}

/** 404 when the class does not exist; 403 when the caller lacks `perm` on its collection or is scoped out. */
export async function requireClassPermission(db: Db, auth: Authority, classId: number | IdBy, perm: Permission): Promise<ClassRef> {
  const row = await readClassAs<ClassRef>(db, auth, classId, perm, partOf(db)`k.id, k.collection_id` as Fragment);
  return { id: row.id, collection_id: row.collection_id };
}

/**
 * requireClassPermission without a statement, for a class whose collection the caller already
 * knows (the token cache keeps it: services/class-access.ts): decided for an administrator, or for
 * a caller whose grants are known (Authority.grants), as the statement would decide it. Undefined
 * when it cannot be decided so (a non-administrator whose grants are not known).
 */
export function classPermissionOf(auth: Authority, classId: number, collectionId: number, perm: Permission): ClassRef | undefined {
  let granted = true;
  if (!auth.isAdmin) {
    const known = knownGrant(auth, perm);
    if (!known) return undefined;
    granted = known.includes(collectionId);
  }
  enforceGranted(auth, perm, { kind: 'class', id: classId, collectionId }, granted);
  return { id: classId, collection_id: collectionId };
}

/**
 * requireClassPermission and a read of the class's `columns` (over alias `k`, and what `join` adds)
 * in one statement. The class is named by id, by name or by an id subquery (IdBy). `lock: 'share'`
 * also share-locks the class row (a write under the class holds its schema).
 */
export async function readClassAs<R extends object>(
  db: Db,
  auth: Authority,
  cls: number | { name: string } | IdBy,
  perm: Permission,
  columns: Fragment,
  opts: { lock?: 'share'; join?: Fragment } = {},
): Promise<R> {
  const [row] = await db<(R & { svc_class_id: number; svc_collection_id: number; svc_granted: boolean })[]>`
    select ${columns}, k.id as svc_class_id, k.collection_id as svc_collection_id,
      ${grantColumn(db, auth, perm, partOf(db)`k.collection_id` as Fragment)} as svc_granted
    from classes k ${opts.join ?? db``}
    where ${
      typeof cls === 'number'
        ? partOf(db)`k.id = ${cls}::int`
        : 'idBy' in cls
          ? partOf(db)`k.id = ${cls.idBy}`
          : partOf(db)`k.name = ${cls.name}::text`
    }
    ${opts.lock === 'share' ? partOf(db)`for share of k` : partOf(db)``}`;
  if (!row) throw notFound('class');
  enforceGranted(auth, perm, { kind: 'class', id: row.svc_class_id, collectionId: row.svc_collection_id }, row.svc_granted);
  return row;
}

/**
 * 404 when the object does not exist (or, with opts.classId, belongs to another class); 403 when
 * the caller lacks `perm` on the object's collection or is scoped out.
 */
export async function requireObjectPermission(
  db: Db,
  auth: Authority,
  objectId: number | IdBy,
  perm: Permission,
  opts: { classId?: number } = {},
): Promise<ObjectRef> {
  const row = await readObjectAs<ObjectRef>(db, auth, objectId, perm, opts, partOf(db)`o.id, o.class_id, o.collection_id` as Fragment);
  return { id: row.id, class_id: row.class_id, collection_id: row.collection_id };
}

/**
 * requireObjectPermission and a read of the object's `columns` (over alias `o`) in one statement, so
 * an authorized point read is one round trip; `lock: 'update'` also locks the row for a write. The
 * object is named by id, by an id subquery (IdBy), by name within `opts.classId`, or by name within
 * the class named `className` (a 404 then says which of the two names is unknown, with a second
 * statement). The row also holds svc_* helper columns; views pick their members by name.
 */
export async function readObjectAs<R extends object>(
  db: Db,
  auth: Authority,
  object: number | { name: string; className?: string } | IdBy,
  perm: Permission,
  opts: { classId?: number },
  columns: Fragment,
  lock?: 'update',
): Promise<R> {
  let where: Fragment;
  if (typeof object === 'number') where = partOf(db)`o.id = ${object}::int` as Fragment;
  else if ('idBy' in object) where = partOf(db)`o.id = ${object.idBy}` as Fragment;
  else if (object.className !== undefined)
    where = partOf(db)`o.class_id = (select k.id from classes k where k.name = ${object.className}::text)
      and o.name = ${object.name}::text` as Fragment;
  else if (opts.classId !== undefined) where = partOf(db)`o.class_id = ${opts.classId}::int and o.name = ${object.name}::text` as Fragment;
  else throw new Error('readObjectAs by name needs the class');
  const [row] = await db<ObjectReadRow<R>[]>`
    select ${columns}, o.id as svc_id, o.class_id as svc_class_id, o.collection_id as svc_collection_id,
      ${grantColumn(db, auth, perm, partOf(db)`o.collection_id` as Fragment)} as svc_granted
    from objects o
    where ${where}
    ${lock === 'update' ? partOf(db)`for update of o` : partOf(db)``}`;
  if (!row && typeof object !== 'number' && 'name' in object && object.className !== undefined) {
    const [cls] = await db`select 1 from classes k where k.name = ${object.className}::text`;
    if (!cls) throw notFound('class');
  }
  return objectReadAs(row, auth, perm, opts.classId);
}

type ObjectReadRow<R> = R & { svc_id: number; svc_class_id: number; svc_collection_id: number; svc_granted: boolean };

/** readObjectAs's verdict on the row its statement read: the row, or 404 / 403. */
function objectReadAs<R>(row: ObjectReadRow<R> | undefined, auth: Authority, perm: Permission, classId: number | undefined): R {
  if (!row || (classId !== undefined && row.svc_class_id !== classId)) throw notFound('object');
  enforceGranted(
    auth,
    perm,
    { kind: 'object', id: row.svc_id, classId: row.svc_class_id, collectionId: row.svc_collection_id },
    row.svc_granted,
  );
  return row;
}

/**
 * readObjectAs by id, for the point read of every getObject: the same statement kept as constant
 * text (`columns` is a constant of the caller's, text over alias `o`: never anything a request
 * brings), so the driver neither builds it from fragments nor looks up its prepared statement anew
 * per request. One text per columns, permission and kind of caller, made once.
 */
export async function readObjectByIdAs<R extends object>(
  db: Db,
  auth: Authority,
  objectId: number,
  perm: Permission,
  classId: number,
  columns: string,
): Promise<R> {
  // by the columns (a constant, so its hash is kept), then the permission ('' for an administrator
  // and '*' for a caller whose grants are known: the same text whatever the permission); no key is
  // built per request
  let texts = readTexts.get(columns);
  if (!texts) readTexts.set(columns, (texts = new Map()));
  const known = auth.isAdmin ? undefined : knownGrant(auth, perm);
  const key = auth.isAdmin ? '' : known ? '*' : perm;
  let text = texts.get(key);
  if (text === undefined) {
    const granted = auth.isAdmin ? 'true' : known ? 'o.collection_id = any($2::int[])' : grantExistsText(perm, '$2', 'o.collection_id');
    text = `select ${columns}, o.id as svc_id, o.class_id as svc_class_id, o.collection_id as svc_collection_id,
      ${granted} as svc_granted from objects o where o.id = $1::int`;
    texts.set(key, text);
  }
  const params = auth.isAdmin ? [objectId] : [objectId, known ?? auth.principal.id];
  const [row] = await db.unsafe<ObjectReadRow<R>[]>(text, params, { prepare: true });
  return objectReadAs(row, auth, perm, classId);
}
const readTexts = new Map<string, Map<string, string>>();

/** Whether the caller effectively holds `perm` on the collection (false also when it does not exist). */
export async function hasCollectionPermission(db: Db, auth: Authority, collectionId: number, perm: Permission): Promise<boolean> {
  if (!permissionInScope(auth, perm) || !resourceInScope(auth, { kind: 'collection', id: collectionId })) return false;
  const [row] = await db<{ ok: boolean }[]>`
    select ${grantColumn(db, auth, perm, partOf(db)`c.id` as Fragment)} as ok
    from collections c where c.id = ${collectionId}::int`;
  return row?.ok ?? false;
}

/** Every permission the caller effectively holds on the collection (after scope), in enum order. */
export async function effectiveCollectionPermissions(db: Db, auth: Authority, collectionId: number): Promise<Permission[]> {
  if (!resourceInScope(auth, { kind: 'collection', id: collectionId })) return [];
  let held: string[];
  if (auth.isAdmin) {
    const [row] = await db<{ id: number }[]>`select id from collections where id = ${collectionId}::int`;
    held = row ? [...PERMISSIONS] : [];
  } else {
    const rows = await db<{ permission: string }[]>`
      select distinct cp.permission
      from collection_ancestors(${collectionId}::int) a
      join collection_permissions cp on cp.collection_id = a.ancestor_id
      join group_members gm on gm.group_id = cp.group_id and gm.principal_id = ${auth.principal.id}::int`;
    held = rows.map((r) => r.permission);
  }
  return sortPermissions(held).filter((p) => permissionInScope(auth, p));
}
