import type { Db } from './sql.ts';

export interface LoginCandidate {
  id: number;
  kind: 'human' | 'service_account';
  name: string;
  password_hash: string | null;
}

/** The principal a login names, with its password hash (null for service accounts). */
export async function findLoginCandidate(db: Db, identityScope: string, name: string): Promise<LoginCandidate | undefined> {
  const [row] = await db<LoginCandidate[]>`
    select p.id, p.kind, p.name, u.password_hash
    from principals p left join users u on u.principal_id = p.id
    where p.identity_scope = ${identityScope} and p.name = ${name}`;
  return row;
}
