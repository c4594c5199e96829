// The audit record of class-schema lifecycles and object compliance (interface spec, "Events").
// Schema changes are synchronous: a change that sets, replaces or enables a schema is checked
// against every stored object and then staged and activated in the transaction of the class
// change; a change refused because stored objects do not comply is recorded afterwards, in its own
// transaction, as `class_schema.abandoned` plus `object_validation.failed` for the sampled objects.
// An object's compliance is whether its json_data matches its class's json_schema (no schema:
// nothing to violate); `object_validation.updated` records each flip of it. Documents hold
// identities, digests and ajv keywords with instance paths, never object values.
import type { Logger } from 'pino';
import type { Sql, TransactionSql } from './sql.ts';
import { withTx } from './tx.ts';
import { appendEvent, appendMany } from './events.ts';
import type { Actor } from '../domain/actor.ts';
import { classObjectsCursor, type ClassValues } from './classes.ts';
import { type ClassRow } from '../domain/views/classes.ts';
import {
  ExistingObjectsInvalid,
  INVALID_SAMPLE,
  NO_IMPACT,
  assessSchemaChange,
  schemaChangeNeedsCheck,
  schemaDigest,
  type SchemaImpact,
} from '../domain/class-schema.ts';
import { ApiError } from '../domain/errors.ts';
import { type SchemaConfig, schemaConfigOf, changeKind } from '../domain/views/class-schema-events.ts';

/** A schema change refused because stored objects fail it: the 409 plus what the audit record needs. */
export class SchemaChangeRefused extends ApiError {
  constructor(
    readonly cls: ClassRow,
    readonly next: SchemaConfig,
    readonly refusal: ExistingObjectsInvalid,
  ) {
    super(refusal.kind, refusal.message, { reason: refusal.reason, guidance: refusal.guidance, details: refusal.details });
  }
}

/**
 * Checks the stored objects of a class against a changed schema configuration, inside the class
 * change's transaction (the caller holds the class row for update). Throws SchemaChangeRefused
 * (409) when the change would enforce a schema that stored objects fail.
 */
export async function checkClassSchemaChange(tx: TransactionSql, before: ClassRow, next: ClassValues): Promise<SchemaImpact> {
  if (!schemaChangeNeedsCheck(schemaConfigOf(before), schemaConfigOf(next))) return NO_IMPACT;
  try {
    return await assessSchemaChange(classObjectsCursor(tx, before.id), schemaConfigOf(before), schemaConfigOf(next));
  } catch (err) {
    if (err instanceof ExistingObjectsInvalid) throw new SchemaChangeRefused(before, schemaConfigOf(next), err);
    throw err;
  }
}

/**
 * Records a refused schema change after its transaction rolled back: `class_schema.abandoned`
 * with the failing count and the sampled object ids, and `object_validation.failed` per sampled
 * object (`compliance_changed: false`: the schema never applied). Its own transaction; a failure
 * here is logged and swallowed, so it can neither undo anything nor change the 409.
 */
export async function recordRefusedSchemaChange(sql: Sql, log: Logger, actor: Actor, refused: SchemaChangeRefused): Promise<void> {
  const { cls, next, refusal } = refused;
  try {
    await withTx(sql, async (tx) => {
      const digest = schemaDigest(next.json_schema);
      const abandoned = await appendEvent(tx, actor, {
        entityType: 'class_schema',
        entityId: cls.id,
        entityName: cls.name,
        collectionId: cls.collection_id,
        action: 'abandoned',
        summary: `class ${cls.name}: schema change abandoned, ${refusal.failing} stored object(s) do not match`,
        before: (cls.json_schema ?? null) === null ? null : schemaConfigOf(cls),
        after: schemaConfigOf(next),
        beforeRevision: cls.revision,
        metadata: {
          class_id: cls.id,
          reason: 'existing_objects_invalid',
          change: changeKind(cls, next),
          schema_digest: digest,
          validate_schema: next.validate_schema,
          previous_schema_digest: schemaDigest(cls.json_schema),
          previous_validate_schema: cls.validate_schema,
          objects_checked: refusal.checked,
          failing_objects: refusal.failing,
          sample_object_ids: refusal.sample.map((o) => o.id),
          sample_cap: INVALID_SAMPLE,
        },
      });
      await appendMany(
        tx,
        actor,
        refusal.sample.map((o) => ({
          entityType: 'object_validation',
          entityId: o.id,
          entityName: o.name,
          collectionId: cls.collection_id,
          action: 'failed',
          summary: `object ${o.name} does not match the schema proposed for class ${cls.name}`,
          metadata: {
            class_id: cls.id,
            cause: 'schema_change_refused',
            compliance_changed: false,
            schema_digest: digest,
            class_schema_event_id: abandoned.event_id,
            violations: o.violations,
          },
        })),
      );
    });
  } catch (err) {
    log.error({ err, class_id: cls.id }, 'could not record a refused class schema change');
  }
}
