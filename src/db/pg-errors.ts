import { ApiError } from '../http/errors.ts';

interface PgError {
  code?: string;
  constraint_name?: string;
  constraint?: string;
}

/** Constraint name → public message for unique violations (409). Entities add theirs. */
const uniqueMessages: Record<string, string> = {
  groups_scope_name_key: 'a group with this name already exists in this identity scope',
  principals_scope_name_key: 'a principal with this name already exists in this identity scope',
};

export function registerUniqueMessage(constraint: string, message: string): void {
  uniqueMessages[constraint] = message;
}

/** Translates PostgreSQL errors by SQLSTATE and constraint name; other errors pass through. */
export function translatePgError(err: unknown): unknown {
  if (!err || typeof err !== 'object' || !('code' in err)) return err;
  const e = err as PgError;
  const constraint = e.constraint_name ?? e.constraint ?? '';
  switch (e.code) {
    case '23505':
      return new ApiError(409, uniqueMessages[constraint] ?? 'the resource conflicts with an existing one');
    case '23503':
    // PostgreSQL 18 reports ON DELETE RESTRICT violations as restrict_violation.
    case '23001':
      return new ApiError(409, 'the resource is referenced by or refers to another resource');
    case '23514':
    case '22P02':
    case '22003':
    case '22007':
    case '22008':
      return new ApiError(400, 'a value is out of range or malformed');
    case '2201B':
      return new ApiError(400, 'invalid regular expression in a filter');
    case '57014':
      return new ApiError(400, 'the request took too much work; narrow the query');
    case '40001':
    case '40P01':
      return new ApiError(409, 'the resource was changed concurrently; retry');
    default:
      return err;
  }
}
