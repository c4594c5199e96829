// Search over the large seeded class: structured search with a nested and/or expression, and
// plain-text discovery (names and descriptions; object data on request).
import type { Bench } from './setup.ts';
import type { SeededClass } from './objects.ts';
import { timeCase } from './harness.ts';

const AREA = 'search';

const field = (name: string, operator: string, value: unknown, path?: string) => ({
  op: 'field',
  predicate: { field: name, operator, value, ...(path ? { path } : {}) },
});

export async function benchSearch(b: Bench, big: SeededClass): Promise<void> {
  const token = b.adminToken;
  // cpu >= 8 and (env = prod or name starts with "srv-a" or not description contains "production")
  const structured = {
    version: 1,
    target: { kind: 'object', class: { id: big.classId } },
    filter: {
      op: 'and',
      args: [
        field('json_data', 'gte', 8, 'metrics.cpu'),
        {
          op: 'or',
          args: [
            field('json_data', 'equals', 'prod', 'env'),
            field('name', 'startswith', 'srv-a'),
            { op: 'not', arg: field('description', 'icontains', 'production') },
          ],
        },
      ],
    },
    sort: [{ field: 'name', direction: 'asc' }],
    limit: 100,
  };
  const post = (body: unknown) => async () => void (await b.expect(200, 'POST', '/api/v1/search', { token, body }));
  await timeCase(AREA, 'structured search (nested and/or/not, sort name)', 0.2, post(structured), `${big.size} objects`);
  await timeCase(AREA, 'structured search, include_total', 0.2, post({ ...structured, include_total: true }));

  const get = (query: Record<string, string | number | boolean>) => async () =>
    void (await b.expect(200, 'GET', '/api/v1/search', { token, query }));
  await timeCase(AREA, 'plain-text search "production" (all kinds)', 0.2, get({ q: 'production' }), 'names and descriptions');
  await timeCase(
    AREA,
    'plain-text search "rack-7" in object data',
    0.1,
    get({ q: 'rack-7', kinds: 'object', search_object_data: true }),
    'JSON string values',
  );
}
