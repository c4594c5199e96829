import { ApiError } from '../domain/errors.ts';

interface PgError {
  code?: string;
  constraint_name?: string;
  constraint?: string;
}

/** Unique constraint (migrations/) → the public message of its violation (409). */
const UNIQUE_MESSAGES: Readonly<Record<string, string>> = {
  class_relations_pair_key: 'a class relation between these two classes (in this direction) already exists',
  classes_name_key: 'a class with this name already exists',
  collections_sibling_name_key: 'a collection with this name already exists under the same parent',
  computed_fields_personal_key: 'you already have a personal computed field with this key on this class',
  computed_fields_shared_key: 'the class already has a shared computed field with this key',
  event_sinks_name_key: 'an event sink with this name already exists',
  event_subscriptions_collection_name_key: 'an event subscription with this name already exists in this collection',
  event_subscriptions_system_name_key: 'a system event subscription with this name already exists',
  export_templates_collection_name_key: 'an export template with this name already exists in this collection',
  groups_scope_name_key: 'a group with this name already exists in this identity scope',
  object_relations_pair_key: 'this object relation already exists',
  objects_class_name_key: 'an object with this name already exists in this class',
  principals_scope_name_key: 'a principal with this name already exists in this identity scope',
  remote_targets_collection_name_key: 'a remote target with this name already exists in this collection',
};

/** Translates PostgreSQL errors by SQLSTATE and constraint name; other errors pass through. */
export function translatePgError(err: unknown): unknown {
  if (!err || typeof err !== 'object' || !('code' in err)) return err;
  const e = err as PgError;
  const constraint = e.constraint_name ?? e.constraint ?? '';
  switch (e.code) {
    case '23505':
      return new ApiError('conflict', UNIQUE_MESSAGES[constraint] ?? 'the resource conflicts with an existing one');
    case '23503':
    // PostgreSQL 18 reports ON DELETE RESTRICT violations as restrict_violation.
    case '23001':
      return new ApiError('conflict', 'the resource is referenced by or refers to another resource');
    case '23514':
    case '22P02':
    case '22003':
    case '22007':
    case '22008':
      return new ApiError('bad_request', 'a value is out of range or malformed');
    // character_not_in_repertoire, untranslatable_character: a NUL that got past the HTTP boundary
    // (e.g. inside a decoded cursor).
    case '22021':
    case '22P05':
      return new ApiError('bad_request', 'a text value contains a character that cannot be stored (NUL)');
    case '2201B':
      return new ApiError('bad_request', 'invalid regular expression in a filter');
    // invalid_escape_sequence: a LIKE pattern ending in its escape character (refused at parsing,
    // src/domain/list-query.ts likePatternProblem; this for any other way one reaches a statement)
    case '22025':
      return new ApiError('bad_request', 'invalid LIKE pattern in a filter');
    case '57014':
      return new ApiError('bad_request', 'the request took too much work; narrow the query');
    case '40001':
    case '40P01':
      return new ApiError('conflict', 'the resource was changed concurrently; retry');
    default:
      return err;
  }
}
