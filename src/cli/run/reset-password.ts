import { randomBytes } from 'node:crypto';
import { withTx } from '../../db/tx.ts';
import { principalByKey } from '../../db/imports.ts';
import { lockUser, updateUser } from '../../db/users.ts';
import { userUpdatedEvent, type UserRow } from '../../domain/views/users.ts';
import { lockUnrevokedTokens } from '../../db/tokens.ts';
import { hashPassword } from '../../domain/passwords.ts';
import { revokeTokenAs } from '../../mutations/tokens.ts';
import { Failure, UsageError } from '../errors.ts';
import { askLine, interactive, readStdin } from '../prompt.ts';
import type { Session } from '../session.ts';

/** svc reset-password's checked arguments. */
export interface ResetPasswordArgs {
  user: string;
  scope: string;
  generate: boolean;
}

/** The API's bound on a password (UserUpdate.password). */
const MAX_PASSWORD_CHARS = 4096;

function checkPassword(pw: string): string {
  if (pw.length === 0) throw new UsageError('the new password is empty');
  if ([...pw].length > MAX_PASSWORD_CHARS) throw new UsageError(`the new password is longer than ${MAX_PASSWORD_CHARS} characters`);
  return pw;
}

async function newPassword(generate: boolean): Promise<{ password: string; generated: boolean }> {
  if (generate) return { password: randomBytes(18).toString('base64url'), generated: true };
  if (interactive()) {
    const first = await askLine('new password: ', true);
    checkPassword(first);
    const again = await askLine('repeat it: ', true);
    if (again !== first) throw new Failure('the passwords differ; nothing changed');
    return { password: first, generated: false };
  }
  // Piped: the whole input, without the one line break a shell or a file adds at the end.
  const text = (await readStdin()).replace(/\r?\n$/, '');
  if (text.length === 0) throw new UsageError('no password on stdin (pipe one in, run on a terminal to be asked, or use --generate)');
  return { password: checkPassword(text), generated: false };
}

export async function run(session: Session, args: ResetPasswordArgs): Promise<number> {
  const deps = await session.deps();
  const p = await principalByKey(deps.sql, args.user, args.scope);
  if (!p || p.kind !== 'human') throw new Failure(`no user ${JSON.stringify(args.user)} in identity scope ${JSON.stringify(args.scope)}`);
  const { password, generated } = await newPassword(args.generate);
  const hash = await hashPassword(password);
  const actor = session.actor();
  const { user, revoked } = await withTx(deps.sql, async (tx) => {
    const locked = await lockUser(tx, p.id);
    if (!locked) throw new Failure(`user ${JSON.stringify(args.user)} was deleted meanwhile; nothing changed`);
    if (locked.provider_managed)
      throw new Failure(`user ${JSON.stringify(args.user)} is managed by an identity provider; its password is not set here`);
    const { svc_now: now, ...before } = locked;
    const after: UserRow = Object.assign({}, before, { updated_at: now, revision: before.revision + 1 });
    await updateUser(tx, actor, after, hash, [userUpdatedEvent(before, after, true)]);
    let n = 0;
    for (const row of await lockUnrevokedTokens(tx, before.id)) if (await revokeTokenAs(tx, actor, row, 'password_reset')) n++;
    return { user: after, revoked: n };
  });
  session.progress.note(
    `password of user ${user.name} (id ${user.id}, identity scope ${user.identity_scope}) reset; ${revoked} token${revoked === 1 ? '' : 's'} revoked`,
  );
  if (generated) process.stdout.write(password + '\n');
  return 0;
}
