import { randomBytes } from 'node:crypto';
import { hashPassword } from '../domain/passwords.ts';
import { appendEvent } from './events.ts';
import { SYSTEM_ACTOR } from '../domain/actor.ts';
import type { Sql } from './sql.ts';
import { withTx } from './tx.ts';

/**
 * First start: the admin group (SVC_ADMIN_GROUPNAME in SVC_ADMIN_IDENTITY_SCOPE) and the user
 * `admin` in it. Returns the generated password when one was made (printed once by main.ts).
 */
export interface AdminSettings {
  SVC_ADMIN_GROUPNAME: string;
  SVC_ADMIN_IDENTITY_SCOPE: string;
  SVC_ADMIN_PASSWORD?: string;
}

export async function bootstrap(sql: Sql, cfg: AdminSettings): Promise<{ createdAdmin: boolean; generatedPassword?: string }> {
  return withTx(sql, async (tx) => {
    await tx`select pg_advisory_xact_lock(727002)`;
    let [group] = await tx<{ id: number }[]>`
      select id from groups where name = ${cfg.SVC_ADMIN_GROUPNAME} and identity_scope = ${cfg.SVC_ADMIN_IDENTITY_SCOPE}`;
    if (!group) {
      [group] = await tx<{ id: number }[]>`
        insert into groups (name, description, identity_scope)
        values (${cfg.SVC_ADMIN_GROUPNAME}, 'Administrators', ${cfg.SVC_ADMIN_IDENTITY_SCOPE}) returning id`;
      await appendEvent(tx, SYSTEM_ACTOR, {
        entityType: 'group',
        entityId: group!.id,
        entityName: cfg.SVC_ADMIN_GROUPNAME,
        action: 'created',
        summary: 'admin group created at first start',
        after: { id: group!.id, name: cfg.SVC_ADMIN_GROUPNAME, identity_scope: cfg.SVC_ADMIN_IDENTITY_SCOPE },
        afterRevision: 1,
      });
    }
    const [existing] = await tx<{ id: number }[]>`
      select id from principals where name = 'admin' and identity_scope = ${cfg.SVC_ADMIN_IDENTITY_SCOPE}`;
    if (existing) return { createdAdmin: false };
    const generated = cfg.SVC_ADMIN_PASSWORD ? undefined : randomBytes(15).toString('base64url');
    const passwordHash = await hashPassword(cfg.SVC_ADMIN_PASSWORD ?? generated!);
    const [p] = await tx<{ id: number }[]>`
      insert into principals (kind, name, identity_scope) values ('human', 'admin', ${cfg.SVC_ADMIN_IDENTITY_SCOPE}) returning id`;
    await tx`insert into users (principal_id, password_hash, proper_name) values (${p!.id}, ${passwordHash}, 'Administrator')`;
    await tx`insert into group_members (group_id, principal_id) values (${group!.id}, ${p!.id})`;
    await appendEvent(tx, SYSTEM_ACTOR, {
      entityType: 'user',
      entityId: p!.id,
      entityName: 'admin',
      action: 'created',
      summary: 'bootstrap administrator created',
      after: { id: p!.id, name: 'admin', identity_scope: cfg.SVC_ADMIN_IDENTITY_SCOPE },
      afterRevision: 1,
    });
    await appendEvent(tx, SYSTEM_ACTOR, {
      entityType: 'group_membership',
      entityId: group!.id,
      entityName: cfg.SVC_ADMIN_GROUPNAME,
      action: 'added',
      after: { group_id: group!.id, principal_id: p!.id },
    });
    return { createdAdmin: true, generatedPassword: generated };
  });
}
