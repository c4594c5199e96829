// Import results (one row per imported item): the row as the database returns it and its wire view. Pure functions (no SQL).
import { type EntityKind, type ResultAction, type ResultOutcome } from '../imports.ts';
import type { ResponseBody } from '../wire.ts';

export interface ImportResultRow {
  [key: string]: unknown;
  seq: number;
  item_ref: string;
  entity_kind: EntityKind;
  action: ResultAction;
  outcome: ResultOutcome;
  error: string | null;
}

export function importResultWire(r: ImportResultRow): ResponseBody<'listImportResults', 200>[number] {
  return { item_ref: r.item_ref, entity_kind: r.entity_kind, action: r.action, outcome: r.outcome, error: r.error };
}
