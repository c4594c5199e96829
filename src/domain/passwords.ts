import { hash, verify } from '@node-rs/argon2';

// Argon2id (the library's default algorithm) with OWASP's recommended memory and time costs.
const OPTIONS = { memoryCost: 19456, timeCost: 2, parallelism: 1 };
let dummy: Promise<string> | undefined;

/** Argon2id hash; a random salt unless one is given (imports derive a per-principal salt). */
export function hashPassword(password: string, salt?: Uint8Array): Promise<string> {
  return hash(password, salt ? Object.assign({}, OPTIONS, { salt }) : OPTIONS);
}

/** Verifies a password; with no stored hash it still spends the same work, so timing tells nothing. */
export async function verifyPassword(stored: string | null | undefined, password: string): Promise<boolean> {
  if (!stored) {
    dummy ??= hash('not-a-password', OPTIONS);
    await verify(await dummy, password).catch(() => false);
    return false;
  }
  return verify(stored, password).catch(() => false);
}
