// Class-schema lifecycles and object compliance: what a schema configuration is, how it changes, and the
// audit events that record it (`object_validation.updated` per compliance flip). Pure functions (no
// SQL); src/db/class-schema-events.ts checks stored objects and appends the events.
import { type NewEvent } from '../new-event.ts';
import { type ClassRow } from './classes.ts';
import type { ObjectRow } from './objects.ts';
import { complianceOf, schemaDigest, type ObjectCompliance } from '../class-schema.ts';

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
  return {
    ...flipEvent(cls, { id: after.id, name: after.name, ...now }, 'object_written', cls.json_schema),
    collectionId: after.collection_id,
    afterRevision: after.revision,
  };
}
