// Names of the code quoted once (src/db/sql.ts nameOf): the same identifier postgres.js makes,
// which holds only while no pool of ours transforms column names. (The statements made with them
// run throughout the list, audit and authorization tests.)
import { describe, expect, it } from 'vitest';
import { createSql, listPoolOf, nameOf } from '../src/db/sql.ts';
import { loadConfig } from '../src/config.ts';

// no connection is opened: nothing here runs a statement
const sql = createSql('postgres://nobody@127.0.0.1:1/none', loadConfig({ SVC_DB_LIST_POOL_MAX: '2' }));

describe('nameOf', () => {
  it('quotes a name as postgres.js does, made once', () => {
    for (const name of ['e.entity_id', 'id', '__k0', 'a"b', 'x.y.z', 'svc_c.id']) {
      const made = nameOf(sql, name) as unknown as { value: string };
      expect(made.value, name).toBe((sql(name) as unknown as { value: string }).value);
      expect(nameOf(sql, name), name).toBe(made);
    }
    expect((nameOf(sql, 'e.entity_id') as unknown as { value: string }).value).toBe('"e"."entity_id"');
  });

  it('is right for every pool of ours: none transforms column names', () => {
    for (const pool of [sql, listPoolOf(sql)!]) {
      const options = pool.options as unknown as { transform: { column: { to?: unknown; from?: unknown } } };
      expect(options.transform.column.to).toBeUndefined();
    }
  });
});
