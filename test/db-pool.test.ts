// Waiting for a pooled connection is bounded by SVC_DB_POOL_ACQUIRE_TIMEOUT_MS: past it the caller
// gets 503 (reason database_busy) and the abandoned transaction never runs its work.
import { inject, it, expect, describe } from 'vitest';
import { createSql } from '../src/db/sql.ts';
import { withTx } from '../src/db/tx.ts';
import { ApiError } from '../src/domain/errors.ts';
import { uniq } from './helpers.ts';

describe('withTx and the pool acquisition timeout', () => {
  it('503 database_busy when no connection frees up in time; the abandoned work never runs', async () => {
    const sql = createSql(inject('dbUrl'), {
      SVC_DB_POOL_MAX: 1,
      SVC_DB_STATEMENT_TIMEOUT_MS: 10_000,
      SVC_DB_POOL_ACQUIRE_TIMEOUT_MS: 150,
    });
    const marker = uniq('abandoned');
    try {
      // The pool's only connection, held outside withTx (so its own acquisition is not timed)
      // until the waiting transaction has been answered.
      const held = await sql.reserve();
      let ran = false;
      const waiting = withTx(sql, async (tx) => {
        ran = true;
        await tx`select set_config('svc.marker', ${marker}, true)`;
      });
      const err = await waiting.then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(ApiError);
      expect((err as ApiError).status).toBe(503);
      expect((err as ApiError).reason).toBe('database_busy');
      await held`select 1`;
      held.release();
      // The connection is free again: new work runs, and the abandoned callback still never ran.
      await withTx(sql, async (tx) => void (await tx`select 1`));
      expect(ran).toBe(false);
    } finally {
      await sql.end();
    }
  });

  it('a transaction that gets its connection in time runs normally', async () => {
    const sql = createSql(inject('dbUrl'), {
      SVC_DB_POOL_MAX: 1,
      SVC_DB_STATEMENT_TIMEOUT_MS: 10_000,
      SVC_DB_POOL_ACQUIRE_TIMEOUT_MS: 2_000,
    });
    try {
      const first = withTx(sql, async (tx) => (await tx<{ n: number }[]>`select 1 as n, pg_sleep(0.2)`)[0]!.n);
      const second = withTx(sql, async (tx) => (await tx<{ n: number }[]>`select 2 as n`)[0]!.n);
      expect(await Promise.all([first, second])).toEqual([1, 2]);
    } finally {
      await sql.end();
    }
  });
});
