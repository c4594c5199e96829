// Computed fields of a class: the row as the database returns it and its wire view. Pure functions (no SQL).
import { type ComputedOperation, type ResultType } from '../computed.ts';
import type { ResponseBody } from '../wire.ts';

export interface ComputedFieldRow {
  [key: string]: unknown;
  id: number;
  class_id: number;
  key: string;
  label: string;
  description: string;
  enabled: boolean;
  operation: ComputedOperation;
  result_type: ResultType;
  visibility: 'shared' | 'personal';
  owner_user_id: number | null;
  created_at: Date;
  updated_at: Date;
  revision: number;
}

/** The public representation (also the audit snapshot). */
export function computedFieldView(r: ComputedFieldRow): ResponseBody<'getClassComputedField', 200> {
  return {
    id: r.id,
    class_id: r.class_id,
    key: r.key,
    label: r.label,
    description: r.description,
    enabled: r.enabled,
    operation: { type: r.operation.type, paths: r.operation.paths },
    result_type: r.result_type,
    visibility: r.visibility,
    owner_user_id: r.owner_user_id,
    created_at: r.created_at,
    updated_at: r.updated_at,
    revision: r.revision,
  };
}
