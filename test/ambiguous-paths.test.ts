// The path pairs redocly's no-ambiguous-paths reports (redocly.yaml lists them): the path
// templates are the contract's, so each pair must be told apart by its parameter types (an integer
// id never equals a literal segment such as `by-name` or `computed-fields`), and the router must
// pick the template whose integer parameters hold integers.
import { beforeAll, describe, expect, it } from 'vitest';
import { ContractRouter } from '../src/http/adapter.ts';
import { openapiDocument } from '../src/http/openapi.ts';

type Json = Record<string, unknown>;
interface Param {
  name: string;
  in: string;
  schema?: { type?: unknown };
  $ref?: string;
}
const METHODS = ['get', 'put', 'post', 'delete', 'patch'] as const;
const doc = openapiDocument() as unknown as { paths: Record<string, Json>; components: { parameters: Record<string, Param> } };

/** Each segment of a path template: a literal, or a parameter with whether it is an integer. */
type Segment = { literal: string } | { param: string; integer: boolean };
function segments(path: string): Segment[] {
  const item = doc.paths[path]!;
  const params = [item, ...METHODS.map((m) => item[m] as Json | undefined)]
    .flatMap((x) =>
      ((x?.parameters as Param[] | undefined) ?? []).map((p) => (p.$ref ? doc.components.parameters[p.$ref.split('/').pop()!]! : p)),
    )
    .filter((p) => p.in === 'path');
  return path
    .split('/')
    .slice(1)
    .map((s) => {
      const m = /^\{(.+)\}$/.exec(s);
      if (!m) return { literal: s };
      const p = params.find((x) => x.name === m[1]);
      expect(p, `${path}: no declared parameter ${m[1]}`).toBeDefined();
      return { param: m[1]!, integer: p!.schema?.type === 'integer' };
    });
}

/** Pairs one request path could match both of, by redocly's rule (segment by segment: equal literals or a parameter). */
function ambiguousPairs(): [string, string][] {
  const paths = Object.keys(doc.paths);
  const out: [string, string][] = [];
  for (let i = 0; i < paths.length; i++) {
    for (let j = i + 1; j < paths.length; j++) {
      const a = segments(paths[i]!);
      const b = segments(paths[j]!);
      if (a.length !== b.length) continue;
      if (a.every((x, k) => 'param' in x || 'param' in b[k]! || x.literal === (b[k] as { literal: string }).literal))
        out.push([paths[i]!, paths[j]!]);
    }
  }
  return out;
}

/** A concrete path for template `t` that is as close to `other` as `t`'s parameter types allow. */
function probe(t: Segment[], other: Segment[]): string {
  return (
    '/' +
    t
      .map((s, k) => {
        if ('literal' in s) return s.literal;
        const o = other[k]!;
        if ('literal' in o && !(s.integer && !/^-?[0-9]+$/.test(o.literal))) return o.literal;
        return s.integer ? '7' : 'x';
      })
      .join('/')
  );
}

const fits = (value: string, s: Segment) => ('literal' in s ? s.literal === value : !s.integer || /^-?[0-9]+$/.test(value));

describe('ambiguous path pairs', () => {
  let router: ContractRouter;
  beforeAll(async () => {
    router = new ContractRouter();
    await router.init();
  });

  it('no request path fits both templates of a pair once integer parameters must be integers', () => {
    const pairs = ambiguousPairs();
    // (redocly reports 5 of them: it skips pairs with unequal parameter counts and names one partner per path)
    expect(pairs.length).toBeGreaterThanOrEqual(5);
    for (const [a, b] of pairs) {
      const sa = segments(a);
      const sb = segments(b);
      // Some position holds an integer parameter on one side and a non-integer literal on the other.
      const apart = sa.some((x, k) => {
        const y = sb[k]!;
        return ('literal' in x && !fits(x.literal, y)) || ('literal' in y && !fits(y.literal, x));
      });
      expect(apart, `${a} and ${b} can match one request path`).toBe(true);
    }
  });

  it('the router picks the template whose integer parameters hold integers (a class named computed-fields is reached by name)', () => {
    let checked = 0;
    for (const [a, b] of ambiguousPairs()) {
      for (const [t, other] of [
        [a, b],
        [b, a],
      ] as const) {
        const path = probe(segments(t), segments(other));
        const item = doc.paths[t]!;
        for (const method of METHODS) {
          const op = item[method] as Json | undefined;
          if (!op) continue;
          const routed = router.match({ method, path });
          expect(routed.operationId, `${method.toUpperCase()} ${path}`).toBe(op.operationId);
          checked++;
        }
      }
    }
    expect(checked).toBeGreaterThan(10);
    // A non-integer id where no other template fits still reaches its operation (400 from validation, as before).
    const loose = router.match({ method: 'get', path: '/api/v1/classes/abc/objects' });
    expect(loose.operationId).toBe('listObjects');
  });
});
