// SQL fixtures for the relation, traversal and related-filter tests: collections, classes,
// objects, relations and callers written straight to the database, so those tests depend only on
// the endpoints they exercise. Bound to the test's app through a getter (the app starts in beforeAll).
import { insertToken, type TokenScopeValue } from '../src/db/tokens.ts';
import { hashToken, newRawToken } from '../src/domain/token-secret.ts';
import type { Authority } from '../src/domain/authz.ts';
import { collection as insertCollection } from './class-fixtures.ts';
import { uniq, type TestApp } from './helpers.ts';

export function graphFixtures(app: () => TestApp) {
  const sql = () => app().deps.sql;
  return {
    collection: (): Promise<number> => insertCollection(app()),

    klass: async (collectionId: number, name = uniq('class')): Promise<{ id: number; name: string }> => {
      const [r] = await sql()<{ id: number }[]>`insert into classes (name, collection_id) values (${name}, ${collectionId}) returning id`;
      return { id: r!.id, name };
    },

    object: async (classId: number, collectionId: number, data: unknown = {}, name = uniq('obj')): Promise<number> => {
      const [r] = await sql()<{ id: number }[]>`
        insert into objects (name, class_id, collection_id, json_data)
        values (${name}, ${classId}, ${collectionId}, ${sql().json(data as never)}) returning id`;
      return r!.id;
    },

    classRelation: async (from: number, to: number): Promise<number> => {
      const [r] = await sql()<
        { id: number }[]
      >`insert into class_relations (from_class_id, to_class_id) values (${from}, ${to}) returning id`;
      return r!.id;
    },

    objectRelation: async (cr: number, from: number, to: number): Promise<number> => {
      const [r] = await sql()<{ id: number }[]>`
        insert into object_relations (class_relation_id, from_object_id, to_object_id) values (${cr}, ${from}, ${to}) returning id`;
      return r!.id;
    },

    /** A human holding `grants` through its own group, with a token (optionally scoped) and its authority. */
    caller: async (
      grants: [number, readonly string[]][],
      scope: TokenScopeValue | null = null,
    ): Promise<{ id: number; token: string; auth: Authority }> => {
      const db = sql();
      const [p] = await db<{ id: number }[]>`insert into principals (kind, name) values ('human', ${uniq('u')}) returning id`;
      const [g] = await db<{ id: number }[]>`insert into groups (name) values (${uniq('g')}) returning id`;
      await db`insert into group_members (group_id, principal_id) values (${g!.id}, ${p!.id})`;
      for (const [cid, perms] of grants) {
        for (const perm of perms) {
          await db`insert into collection_permissions (collection_id, group_id, permission) values (${cid}, ${g!.id}, ${perm})`;
        }
      }
      const raw = newRawToken();
      await insertToken(db, {
        principalId: p!.id,
        hash: hashToken(app().deps.tokenKey, raw),
        expiresAt: new Date(Date.now() + 3600_000),
        scope,
      });
      return { id: p!.id, token: raw, auth: { principal: { id: p!.id }, isAdmin: false, token: { scope } } };
    },
  };
}
