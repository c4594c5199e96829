// Class-schema lifecycles and object compliance: what a schema configuration is, how it changes, and the
// audit events that record it (`object_validation.updated` per compliance flip). Pure functions (no
// SQL); src/db/class-schema-events.ts checks stored objects, and a class's write appends the events.
import { type NewEvent } from '../new-event.ts';
import { type ClassRow } from './classes.ts';
import type { ObjectRow } from './objects.ts';
import { complianceOf, schemaDigest, type ObjectCompliance, type SchemaImpact } from '../class-schema.ts';

export interface SchemaConfig {
  json_schema: unknown;
  validate_schema: boolean;
}

/** The configuration as recorded in events (a missing schema as null). */
export function schemaConfigOf(c: SchemaConfig): { json_schema: unknown; validate_schema: boolean } {
  return { json_schema: c.json_schema ?? null, validate_schema: c.validate_schema };
}

/** How a schema configuration changes: schema_set, schema_replaced, validation_enabled or validation_disabled. */
export function changeKind(before: SchemaConfig | null, next: SchemaConfig): string {
  const prev = before?.json_schema ?? null;
  if (prev === null) return 'schema_set';
  if (schemaDigest(prev) !== schemaDigest(next.json_schema)) return 'schema_replaced';
  return next.validate_schema ? 'validation_enabled' : 'validation_disabled';
}

/** Whether a class change sets, replaces, removes, enables or disables its schema. */
export function schemaConfigChanged(before: SchemaConfig | null, after: SchemaConfig): boolean {
  if (before === null) return (after.json_schema ?? null) !== null;
  return schemaDigest(before.json_schema) !== schemaDigest(after.json_schema) || before.validate_schema !== after.validate_schema;
}

export function flipEvent(cls: ClassRow, o: ObjectCompliance, cause: string, schema: unknown): NewEvent {
  return {
    entityType: 'object_validation',
    entityId: o.id,
    entityName: o.name,
    collectionId: cls.collection_id,
    action: 'updated',
    summary: `object ${o.name} ${o.compliant ? 'now matches' : 'no longer matches'} the schema of class ${cls.name}`,
    metadata: {
      class_id: cls.id,
      cause,
      compliant: o.compliant,
      compliance_changed: true,
      schema_digest: schemaDigest(schema),
      violations: o.violations,
    },
  };
}

/**
 * `object_validation.updated` when an object write flips its compliance with the class schema
 * (a new object counts as compliant before its first write). With validation enforced a
 * non-compliant write is refused, so only classes with a schema and validation off can flip here.
 */
export function objectComplianceEvent(cls: ClassRow, before: ObjectRow | null, after: ObjectRow): NewEvent | null {
  // Enforced validation keeps every stored object compliant, so nothing can flip.
  if ((cls.json_schema ?? null) === null || cls.validate_schema) return null;
  const was = before === null ? true : complianceOf(cls.json_schema, before.json_data).compliant;
  const now = complianceOf(cls.json_schema, after.json_data);
  if (was === now.compliant) return null;
  return Object.assign({}, flipEvent(cls, { id: after.id, name: after.name, ...now }, 'object_written', cls.json_schema), {
    collectionId: after.collection_id,
    afterRevision: after.revision,
  });
}

/**
 * The schema lifecycle of a class change, for its transaction: `staged` and `activated` when the
 * change sets, replaces, enables or disables a schema, `deleted` when it removes one (`lifecycle`),
 * then `object_validation.updated` per object whose compliance flipped (`flips`). `before` is null
 * for a new class. None when the schema configuration did not change.
 */
export function classSchemaChangeEvents(
  before: ClassRow | null,
  after: ClassRow,
  impact: SchemaImpact,
): { lifecycle: NewEvent[]; flips: NewEvent[] } {
  if (!schemaConfigChanged(before, after)) return { lifecycle: [], flips: [] };
  const common = {
    entityType: 'class_schema',
    entityId: after.id,
    entityName: after.name,
    collectionId: after.collection_id,
    before: before === null || (before.json_schema ?? null) === null ? null : schemaConfigOf(before),
    beforeRevision: before?.revision ?? null,
  };
  const previous = {
    previous_schema_digest: schemaDigest(before?.json_schema),
    previous_validate_schema: before?.validate_schema ?? false,
  };
  const outcome = { objects_checked: impact.checked, compliance_changes: impact.flips.length };
  const flips = impact.flips.map((o) => flipEvent(after, o, 'schema_changed', after.json_schema));
  if ((after.json_schema ?? null) === null) {
    const removed: NewEvent = Object.assign({}, common, {
      action: 'deleted',
      summary: `class ${after.name}: schema removed`,
      metadata: Object.assign({ class_id: after.id, cause: 'schema_removed' }, previous, outcome),
    });
    return { lifecycle: [removed], flips };
  }
  const meta = Object.assign(
    {
      class_id: after.id,
      change: changeKind(before, after),
      schema_digest: schemaDigest(after.json_schema),
      validate_schema: after.validate_schema,
    },
    previous,
  );
  const staged: NewEvent = Object.assign({}, common, {
    action: 'staged',
    summary: `class ${after.name}: schema staged`,
    after: schemaConfigOf(after),
    metadata: meta,
  });
  const activated: NewEvent = Object.assign({}, common, {
    action: 'activated',
    summary: `class ${after.name}: schema activated${after.validate_schema ? ' with validation' : ' without validation'}`,
    after: schemaConfigOf(after),
    afterRevision: after.revision,
    metadata: Object.assign({}, meta, outcome),
  });
  return { lifecycle: [staged, activated], flips };
}

/** `class_schema.deleted` for a class deleted with a schema (none without one). */
export function classSchemaDeletedWithClassEvent(cls: ClassRow): NewEvent | null {
  if ((cls.json_schema ?? null) === null) return null;
  return {
    entityType: 'class_schema',
    entityId: cls.id,
    entityName: cls.name,
    collectionId: cls.collection_id,
    action: 'deleted',
    summary: `class ${cls.name}: schema deleted with the class`,
    before: schemaConfigOf(cls),
    beforeRevision: cls.revision,
    metadata: {
      class_id: cls.id,
      cause: 'class_deleted',
      previous_schema_digest: schemaDigest(cls.json_schema),
      previous_validate_schema: cls.validate_schema,
      objects_checked: 0,
      compliance_changes: 0,
    },
  };
}
