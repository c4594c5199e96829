// Audit reads: GET /api/v1/events over a large event table, for a non-admin whose visibility (one
// collection of ten, via ReadAudit) is filtered in SQL, and for the admin.
import { createCollection, type Bench } from './setup.ts';
import { timeCase } from './harness.ts';

const AREA = 'audit';

export async function benchAudit(b: Bench, events: number): Promise<void> {
  const cols: number[] = [];
  for (let i = 0; i < 10; i++) cols.push(await createCollection(b));
  // One INSERT: events spread over the ten collections (plus every 50th collection-less), some
  // naming a second collection as related, as object updates would.
  await b.seed`
    insert into events (entity_type, entity_id, entity_name, collection_id, related_collection_ids, action,
      actor_kind, actor_user_id, initiator_user_id, provenance, summary, before, after, before_revision, after_revision)
    select 'object', g, 'srv-' || g,
      case when g % 50 = 0 then null else (${cols}::int[])[1 + g % 10] end,
      case when g % 7 = 0 then array[(${cols}::int[])[1 + (g / 7) % 10]] else '{}'::int[] end,
      'updated', 'user', ${b.adminId}, ${b.adminId},
      jsonb_build_object('actor', jsonb_build_object('kind', 'user', 'principal', jsonb_build_object('id', ${b.adminId}::int, 'name', 'admin')),
        'initiator', jsonb_build_object('principal_id', ${b.adminId}::int, 'name', 'admin'), 'task_id', null),
      'object updated', jsonb_build_object('counter', g - 1), jsonb_build_object('counter', g), 1, 2
    from generate_series(1, ${events}::int) g`;
  await b.seed`analyze events`;

  const reader = await b.principalWith([[cols[0]!, ['ReadCollection', 'ReadAudit']]]);
  const [visible] = await b.sql<{ n: number }[]>`
    select count(*)::int as n from events where collection_id = ${cols[0]!} or ${cols[0]!} = any(related_collection_ids)`;
  const page = (token: string, query: Record<string, string | number | boolean>) => async () =>
    void (await b.expect(200, 'GET', '/api/v1/events', { token, query }));

  await timeCase(
    AREA,
    'events page 1 (limit 100), non-admin with ReadAudit',
    0.3,
    page(reader.token, { limit: 100 }),
    `sees ~${visible!.n} of ${events} events`,
  );
  await timeCase(
    AREA,
    'events page 1, non-admin, entity_type filter, no total',
    0.3,
    page(reader.token, { limit: 100, entity_type: 'object', include_total: false }),
  );
  await timeCase(AREA, 'events page 1 (limit 100), admin', 0.3, page(b.adminToken, { limit: 100 }), 'sees all');
}
