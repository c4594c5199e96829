import type { Ctx, HandlerMap, Input } from '../http/contract.ts';
import { authOf } from '../http/contract.ts';
import { ApiError, forbidden, isClientError } from '../domain/errors.ts';
import { requireHumanUnscoped } from './gates.ts';
import { sseReply } from '../http/sse.ts';
import { JsonTexts } from '../domain/json-text.ts';
import type { AuthInfo } from '../http/auth.ts';
import { readClassAs } from '../db/authz.ts';
import type { Fragment } from '../db/list.ts';
import { requireClassAccess } from '../services/class-access.ts';
import { runPlainSearch, runStructuredSearch } from '../db/search.ts';
import type { SearchResult } from '../db/search-targets.ts';
import type { ResponseBody } from '../domain/wire.ts';
import {
  LIMITS,
  PLAIN_GROUP,
  canonicalPlain,
  canonicalRequest,
  planPlainSearch,
  planStructuredSearch,
  relatedNodes,
  type ClassSelector,
  type PlainKind,
  type PlainPlan,
  type SearchPlan,
  type StructuredSearchRequest,
  type TargetKind,
} from '../domain/search.ts';
import { signCursor, verifyCursor, type CursorBinding } from '../domain/search-cursor.ts';
import { tokenCache } from '../services/token-cache.ts';

// ---------------------------------------------------------------------------------------------
// Structured search

interface PreparedStructured {
  auth: AuthInfo;
  plan: SearchPlan;
  classId: number | null;
  relatedClassIds: number[];
  binding: CursorBinding;
  after: unknown[] | null;
}

interface StructuredResult {
  results: SearchResult[];
  next: string | null;
  total: number | null;
}

function bindingOf(auth: AuthInfo, canonical: string): CursorBinding {
  return { canonical, principalId: auth.principal.id, tokenId: auth.token.id, tokenRevision: auth.token.revision };
}

/** 415 / 413 checks the router cannot make for this operation (it accepts a missing content type). */
function checkBodyEnvelope(input: Input<'searchStructured'>): void {
  if (input.contentType !== 'application/json')
    throw new ApiError('unsupported_media_type', 'the search body must be sent as application/json');
  const declared = Number(input.headers['content-length']);
  const size = Number.isFinite(declared) && declared > 0 ? declared : Buffer.byteLength(JSON.stringify(input.body ?? null));
  if (size > LIMITS.bodyBytes) throw new ApiError('payload_too_large', `the search body is larger than ${LIMITS.bodyBytes / 1024} KiB`);
}

/** Target gates: user needs an unscoped human administrator; group and service_account an unscoped human. */
function gateTarget(ctx: Ctx, kind: TargetKind): void {
  if (kind === 'user') {
    const auth = requireHumanUnscoped(ctx);
    if (!auth.isAdmin) throw forbidden('only administrators can search users');
  } else if (kind === 'group' || kind === 'service_account') {
    requireHumanUnscoped(ctx);
  }
}

/**
 * Resolves a class selector exactly (404 when it does not resolve) and requires ReadClass on it
 * (403), in one statement (by id: none when the token cache keeps the class's collection and the
 * caller's grants decide, as for a list of the class's objects).
 */
async function readableClass(ctx: Ctx, auth: AuthInfo, sel: ClassSelector): Promise<number> {
  if ('id' in sel) return (await requireClassAccess(ctx.deps, auth, sel.id, 'ReadClass')).id;
  const db = ctx.deps.sql;
  return (await readClassAs<{ id: number }>(db, auth, { name: sel.name }, 'ReadClass', db`k.id` as Fragment)).id;
}

async function prepareStructured(input: Input<'searchStructured'>, ctx: Ctx): Promise<PreparedStructured> {
  const auth = authOf(ctx);
  checkBodyEnvelope(input);
  const body = input.body as StructuredSearchRequest;
  gateTarget(ctx, body.target.kind);
  const plan = planStructuredSearch(body);
  // The target's and the related predicates' classes are read together (one wait, not one each),
  // and awaited in order: the first selector that does not resolve, or that the caller may not
  // read, is the answer.
  const related = relatedNodes(plan);
  const target = plan.targetClass ? readableClass(ctx, auth, plan.targetClass) : null;
  const others = related.map((n) => readableClass(ctx, auth, n.class));
  for (const read of [target, ...others]) read?.catch(() => undefined); // awaited below
  const classId = target ? await target : null;
  const relatedClassIds: number[] = [];
  for (const [i, n] of related.entries()) relatedClassIds[n.index] = await others[i]!;
  const binding = bindingOf(auth, canonicalRequest(plan, { targetClassId: classId, relatedClassIds }));
  const after = plan.cursor === null ? null : verifyCursor(ctx.deps.tokenKey, plan.cursor, binding, plan.sort.length);
  return { auth, plan, classId, relatedClassIds, binding, after };
}

/**
 * One page of a structured search. Objects' json_data and audit events' JSON go into the reply as
 * the database's text, placeholders of `texts` (as the lists and the plain-text search write them).
 */
async function executeStructured(ctx: Ctx, p: PreparedStructured, texts: JsonTexts): Promise<StructuredResult> {
  const page = await runStructuredSearch(ctx.deps.sql, p.auth, p.plan, {
    classId: p.classId,
    relatedClassIds: p.relatedClassIds,
    after: p.after,
    texts,
    auditCollections: (read) =>
      tokenCache(ctx.deps).collectionsWith({ tokenId: p.auth.token.id, principalId: p.auth.principal.id }, 'ReadAudit', read),
  });
  return {
    results: page.results,
    next: page.nextValues ? signCursor(ctx.deps.tokenKey, page.nextValues, p.binding) : null,
    total: page.total,
  };
}

function pageHeaders(limit: number, next: string | null, total: number | null): Record<string, string> {
  const h: Record<string, string> = { 'x-page-limit': String(limit) };
  if (next) h['x-next-cursor'] = next;
  if (total !== null) h['x-total-count'] = String(total);
  return h;
}

/** The public text of a failure inside a stream (5xx details go to the log only). */
function publicMessage(ctx: Ctx, err: unknown): string {
  if (isClientError(err)) return err.message;
  ctx.deps.log.error({ err, request_id: ctx.requestId }, 'search stream failed');
  return 'internal server error';
}

// ---------------------------------------------------------------------------------------------
// Plain-text search

interface PreparedPlain {
  auth: AuthInfo;
  plan: PlainPlan;
  after: Partial<Record<PlainKind, unknown[]>>;
}

function preparePlain(input: Input<'searchPlainText'>, ctx: Ctx): PreparedPlain {
  const auth = authOf(ctx);
  const plan = planPlainSearch(input.query);
  const after: Partial<Record<PlainKind, unknown[]>> = {};
  for (const kind of plan.kinds) {
    const c = plan.cursors[kind];
    if (c !== undefined)
      after[kind] = verifyCursor(ctx.deps.tokenKey, c, bindingOf(auth, canonicalPlain(plan, kind)), 1, `query.cursor_${PLAIN_GROUP[kind]}`);
  }
  return { auth, plan, after };
}

/** One kind's page; with `texts`, objects' json_data as placeholders of the database's JSON text. */
async function plainKind(
  ctx: Ctx,
  p: PreparedPlain,
  kind: PlainKind,
  texts?: JsonTexts,
): Promise<{ results: SearchResult[]; next: string | null }> {
  const page = await runPlainSearch(ctx.deps.sql, p.auth, kind, {
    texts,
    q: p.plan.q,
    limit: p.plan.limit,
    after: p.after[kind] ?? null,
    searchClassSchema: p.plan.searchClassSchema,
    searchObjectData: p.plan.searchObjectData,
  });
  const next = page.nextValues ? signCursor(ctx.deps.tokenKey, page.nextValues, bindingOf(p.auth, canonicalPlain(p.plan, kind))) : null;
  return { results: page.results, next };
}

type PlainBody = ResponseBody<'searchPlainText', 200>;
type Groups = PlainBody['results'];
type NextCursors = PlainBody['next'];

/** One kind's page (only results of that kind) into its group of the plain-text body. */
function fillGroup(groups: Groups, kind: PlainKind, results: SearchResult[]): void {
  switch (kind) {
    case 'collection':
      groups.collections = results.flatMap((r) => (r.kind === 'collection' ? [r.resource] : []));
      break;
    case 'class':
      groups.classes = results.flatMap((r) => (r.kind === 'class' ? [r.resource] : []));
      break;
    case 'object':
      groups.objects = results.flatMap((r) => (r.kind === 'object' ? [r.resource] : []));
      break;
  }
}

export const searchHandlers = {
  searchPlainText: async (input, ctx) => {
    const p = preparePlain(input, ctx);
    const results: Groups = { collections: [], classes: [], objects: [] };
    const next: NextCursors = { collections: null, classes: null, objects: null };
    const texts = new JsonTexts();
    const pages = await Promise.all(p.plan.kinds.map(async (kind) => [kind, await plainKind(ctx, p, kind, texts)] as const));
    for (const [kind, page] of pages) {
      fillGroup(results, kind, page.results);
      next[PLAIN_GROUP[kind]] = page.next;
    }
    return {
      status: 200,
      body: { query: p.plan.q, results, next },
      headers: { 'x-page-limit': String(p.plan.limit) },
      jsonTexts: texts.texts,
    };
  },

  searchPlainTextStream: async (input, ctx) => {
    const p = preparePlain(input as unknown as Input<'searchPlainText'>, ctx);
    return sseReply(
      async (w) => {
        w.send('started', { query: p.plan.q });
        let failed = false;
        await Promise.all(
          p.plan.kinds.map(async (kind) => {
            try {
              // objects' JSON passed through as the plain reply's is (runPlainSearch with texts)
              const texts = new JsonTexts();
              const page = await plainKind(ctx, p, kind, texts);
              if (failed) return;
              const group = PLAIN_GROUP[kind];
              w.send(
                'batch',
                {
                  kind: group,
                  collections: [],
                  classes: [],
                  objects: [],
                  [group]: page.results.map((r) => r.resource),
                  next: page.next,
                },
                texts.texts,
              );
            } catch (err) {
              if (failed) return;
              failed = true;
              w.send('error', { message: publicMessage(ctx, err) });
            }
          }),
        );
        if (!failed) w.send('done', { query: p.plan.q });
      },
      { headers: { 'x-page-limit': String(p.plan.limit) } },
    );
  },

  searchStructured: async (input, ctx) => {
    const p = await prepareStructured(input, ctx);
    const texts = new JsonTexts();
    const r = await executeStructured(ctx, p, texts);
    return {
      status: 200,
      body: { version: 1, kind: p.plan.kind, results: r.results, next: r.next, total: r.total },
      headers: pageHeaders(p.plan.limit, r.next, r.total),
      jsonTexts: texts.texts,
    };
  },

  searchStructuredStream: async (input, ctx) => {
    const p = await prepareStructured(input as unknown as Input<'searchStructured'>, ctx);
    const head = { version: 1, kind: p.plan.kind };
    return sseReply(async (w) => {
      w.send('started', head);
      let r: StructuredResult;
      const texts = new JsonTexts();
      try {
        // the complete page first (buffered memory is linear in the page limit), then the events
        r = await executeStructured(ctx, p, texts);
      } catch (err) {
        w.send('error', { version: head.version, kind: head.kind, message: publicMessage(ctx, err) });
        return;
      }
      for (const result of r.results) if (!w.send('result', result, texts.texts)) return;
      w.send('done', { version: head.version, kind: head.kind, next: r.next, total: r.total, page_limit: p.plan.limit });
    });
  },
} satisfies Partial<HandlerMap>;
