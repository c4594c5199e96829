// DO NOT EDIT: written by codegen/generate.ts from openapi.yaml (make codegen).
/* eslint-disable */
export interface paths {
    "/api-doc/openapi.json": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Get this OpenAPI document
         * @description The OpenAPI 3.1.0 description of this service (description version 0.0.18) as JSON.
         */
        get: operations["getOpenApiDocument"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v0/auth/login": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Log in with name and password
         * @description Password login for human users. Service accounts have no password and always get the
         *     generic 401. `name` and `identity_scope` are limited to 255 Unicode characters (code
         *     points) and `password` to 4096; longer values, unknown members and malformed JSON are 400
         *     before any rate-limit bookkeeping, lookup or password check. An unknown `identity_scope`
         *     is the generic 401.
         *
         *     Failed attempts are counted per (name, client IP), per client IP and per client subnet
         *     in a sliding window; over a threshold the key is locked out and login returns 429 with
         *     `Retry-After` until the lockout ends (see `GET /api/v0/meta/login-rate-limit` for the
         *     effective thresholds). Attempts whose password check is still running count as possible
         *     failures: while a key has as many attempts in flight as it may still fail, further
         *     attempts get 429 with `Retry-After: 1`, so concurrent attempts can never exceed a
         *     threshold. A successful login returns a new token whose lifetime is the
         *     default token lifetime (`GET /api/v1/config`).
         */
        post: operations["login"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v0/auth/logout": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Revoke the presented token
         * @description Soft-revokes the bearer token used for this request (sets its `revoked_at`) and records a
         *     `token.revoked` audit event. Accepts scoped tokens and service-account tokens. Takes no
         *     body. The token is unusable afterwards; a second call with it is 401.
         */
        post: operations["logout"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v0/auth/logout_all": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Revoke all tokens of the caller
         * @description Soft-revokes every unrevoked token of the calling principal, including the presented one.
         *     Human/IAM family: a service account gets 403, a scoped token gets 403. Each newly revoked
         *     token records a `token.revoked` audit event. Takes no body.
         */
        post: operations["logoutAll"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v0/auth/logout/token": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Revoke a token given its raw value
         * @description Soft-revokes the token whose raw value is in the body. Human/IAM family: the caller must be
         *     a human (service account: 403) using an unscoped token (scoped token: 403). An
         *     administrator may revoke any token; other humans only their own tokens. A token that is
         *     unknown, already purged, or belongs to another principal when the caller is not an
         *     administrator is 404 (the response does not reveal whether it exists). Revoking a token
         *     that is already revoked is a no-op: 200, no change, no event; otherwise a `token.revoked`
         *     audit event is recorded.
         */
        post: operations["logoutToken"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v0/auth/logout/uid/{user_id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Revoke all tokens of a principal
         * @description Soft-revokes every unrevoked token of the principal `user_id` (a human user or a service
         *     account), including the presented token when it belongs to that principal. Human/IAM
         *     family: the caller must be a human (service account: 403) using an unscoped token (scoped
         *     token: 403). Allowed for an administrator, for the caller's own id, and for a human
         *     member of a service account's owner group; otherwise 403. Each newly revoked token
         *     records a `token.revoked` audit event; already revoked tokens are left unchanged.
         */
        post: operations["logoutUser"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v0/auth/providers": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List configured identity providers
         * @description Names of the identity scopes usable at login; always includes `local`.
         */
        get: operations["listAuthProviders"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v0/auth/validate": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Check the presented token
         * @description 200 when the bearer token is valid (present, not revoked, unexpired, owner not a disabled
         *     service account); any failure is 401 with a generic message. Success advances the
         *     token's `last_used_at`. Accepts scoped tokens and service-account tokens.
         */
        get: operations["validateToken"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v0/meta/counts": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Get collection, class and object counters
         * @description Any authenticated caller (the specification lists only 401 and 500). The counters cover
         *     what the caller can read: collections with ReadCollection, classes with ReadClass and
         *     objects with ReadObject, after group grants (inherited down the tree) and the token's
         *     scope, so nothing outside the caller's authority is revealed. For an unscoped
         *     administrator they cover the whole database.
         */
        get: operations["getMetaCounts"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v0/meta/db": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Get database diagnostics
         * @description Connection-pool and database figures. Administrator only (admin-group member with an
         *     unscoped token; otherwise 403). 404 when the configured storage backend offers no
         *     diagnostics.
         */
        get: operations["getMetaDb"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v0/meta/login-rate-limit": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Get login rate-limit configuration and tracked keys
         * @description Administrator only (admin-group member with an unscoped token; otherwise 403). Returns the
         *     effective limiter configuration and the tracked keys matching the filters, locked keys
         *     first, then by most recent failure; at most 1,000 entries are returned (`total` and
         *     `truncated` tell whether more matched). With the memory backend the state is that of the
         *     process answering; with the shared backend it is cluster-wide, and 503 is returned while
         *     the shared backend is unreachable.
         */
        get: operations["getLoginRateLimitState"];
        put?: never;
        post?: never;
        /**
         * Clear all login rate-limit state
         * @description Removes every tracked key (locked or not), releasing all lockouts and resetting failure
         *     counts and lockout escalation. Administrator only (admin-group member with an unscoped
         *     token; otherwise 403). With the memory backend this clears the answering process only.
         *     Clearing when nothing is tracked is 200 with `cleared: 0`.
         */
        delete: operations["clearLoginRateLimits"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v0/meta/login-rate-limit/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /**
         * Release one tracked login rate-limit key
         * @description Removes one tracked key (its lockout, failure count and lockout escalation). Administrator
         *     only (admin-group member with an unscoped token; otherwise 403). `id` is the opaque id
         *     from `GET /api/v0/meta/login-rate-limit`; a value that is not a well-formed id is 400, a
         *     well-formed id that is not tracked (any more) is 404.
         */
        delete: operations["releaseLoginRateLimitEntry"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v0/meta/tasks": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Get task queue and worker state
         * @description Task counts by status and kind (all retained tasks in the database), ages of the oldest
         *     queued and active tasks, and the task-worker settings of the answering process.
         *     Administrator only (admin-group member with an unscoped token; otherwise 403).
         */
        get: operations["getMetaTasks"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/admin/config": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Get the effective process configuration
         * @description The effective configuration of the answering process. Unscoped administrator only: an
         *     admin-group member (human or service account) using an unscoped token; anyone else,
         *     including an administrator with a scoped token, gets 403. Settings that can carry a
         *     secret (database URL, admin password, token hash key, limiter backend URL) are reported
         *     as `"[redacted]"` when set and null when unset; secret values are never returned.
         */
        get: operations["getAdminConfig"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/backups": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Submit a full backup
         * @description Unscoped administrators only (403 otherwise, including scoped admin tokens and non-admin
         *     service accounts). Creates a task of kind `backup` that writes a BackupDocument (format 7)
         *     from one consistent snapshot. The body may be omitted (`include_history` defaults to true).
         *     The worker re-checks that the submitter is still an administrator (else the task fails with
         *     `details.reason: permission_denied`); the task summary carries `{backup_version,
         *     include_history, item_counts, bytes, sha256}`. The output can be read for
         *     `SVC_BACKUP_OUTPUT_RETENTION_HOURS` (default 24) after the task finished. 409 while a
         *     restore is being applied, or when `Idempotency-Key` is reused with a different submission;
         *     429 (`reason: too_many_active_tasks`) when `SVC_BACKUP_MAX_ACTIVE_TASKS` (default 2) backup
         *     tasks are already queued or running, counted across the whole service (a replay of an
         *     earlier submission with the same `Idempotency-Key` is not refused).
         */
        post: operations["createBackup"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/backups/{task_id}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Id of the backup task. */
                task_id: number;
            };
            cookie?: never;
        };
        /**
         * Get a backup task
         * @description Unscoped administrators only. A task that does not exist or is not a backup is 404.
         */
        get: operations["getBackup"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/backups/{task_id}/output": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Id of the backup task. */
                task_id: number;
            };
            cookie?: never;
        };
        /**
         * Download the backup document
         * @description Unscoped administrators only. Returns the stored document bytes exactly as written (compact
         *     JSON); upload them to `POST /api/v1/restores`. 404 when the task does not exist, is not a
         *     backup or has no output (not finished or not succeeded); 410 (`reason: output_expired`) once
         *     the output has expired (`SVC_BACKUP_OUTPUT_RETENTION_HOURS` after the task finished).
         */
        get: operations["getBackupOutput"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/classes": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List classes
         * @description Lists classes, in expanded form, in collections where the caller holds ReadClass (and within
         *     the token scope). Totals are computed after permission and scope filtering.
         *
         *     Filters (`filters`): `id`, `name`, `description`, `collection_id` (alias `collections`),
         *     `validate_schema`, `json_schema` (JSON path form `json_schema__<op>=<path,segments>=<value>`),
         *     `created_at`, `updated_at`, `revision`, and `permissions=<PermissionName>` (only classes on
         *     which the caller holds that permission). Unknown fields or operators are 400.
         *
         *     Sort fields: `id`, `name`, `description`, `collection_id`, `created_at`, `updated_at`,
         *     `revision` (default `id`).
         */
        get: operations["listClasses"];
        put?: never;
        /**
         * Create a class
         * @description Needs CreateClass on `collection_id`. The name must be globally unique (409 otherwise); a
         *     missing collection is 404; an invalid JSON schema, or `validate_schema: true` without a
         *     `json_schema`, is 400. Returns the expanded class. A class created with a schema also
         *     records `class_schema.staged` and `class_schema.activated` (see the `Event` schema).
         */
        post: operations["createClass"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/classes/{class_id}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Class id. */
                class_id: components["parameters"]["ClassIdPath"];
            };
            cookie?: never;
        };
        /**
         * Get a class
         * @description Needs ReadClass. Class reads by id always return the expanded class.
         */
        get: operations["getClass"];
        put?: never;
        post?: never;
        /**
         * Delete a class
         * @description Needs DeleteClass. Deletes the class, its objects and their object relations, with an audit
         *     event for each deleted row (and `class_schema.deleted` when the class had a schema).
         */
        delete: operations["deleteClass"];
        options?: never;
        head?: never;
        /**
         * Update a class
         * @description Needs UpdateClass; changing `collection_id` also needs CreateClass on the target collection
         *     (a missing target is 404) and moves the class's objects with it (an `updated` event per
         *     object). A new name must be globally unique (409). `json_schema: null` removes the schema
         *     (then `validate_schema` must be false). An update that changes nothing is a no-op: the
         *     current class is returned without a revision change or event.
         *
         *     Stored objects are never left silently invalid: when the update turns `validate_schema`
         *     on, or changes `json_schema` while validation is on, every object of the class is checked
         *     against the new schema in the same transaction (object writes wait meanwhile). If any
         *     fails, nothing changes and the answer is 409 with `reason: existing_objects_invalid`, the
         *     number of failing objects in `message`, and up to 10 of them in `details` as
         *     `{path: "objects/<object id>", message: "object <name>: <pointer> <problem>"}`.
         *
         *     Audit: a change of `json_schema` or `validate_schema` records `class_schema.staged` and
         *     `class_schema.activated` (or `class_schema.deleted` when the schema is removed) and
         *     `object_validation.updated` for each object whose compliance flips, all in the update's
         *     transaction. A refused change records `class_schema.abandoned` and
         *     `object_validation.failed` for the listed objects afterwards (see the `Event` schema).
         */
        patch: operations["updateClass"];
        trace?: never;
    };
    "/api/v1/classes/{class_id}/{object_id}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Class id. */
                class_id: components["parameters"]["ClassIdPath"];
                /** @description Object id; the object must belong to the class in the path (404 otherwise). */
                object_id: components["parameters"]["ObjectIdPath"];
            };
            cookie?: never;
        };
        /**
         * Get an object
         * @description Needs ReadObject. 404 when the object does not belong to the class in the path.
         */
        get: operations["getObject"];
        put?: never;
        post?: never;
        /**
         * Delete an object
         * @description Needs DeleteObject. Also deletes the object's relations (an audit event for each). 404 when
         *     the object does not belong to the class in the path.
         */
        delete: operations["deleteObject"];
        options?: never;
        head?: never;
        /**
         * Update an object
         * @description Needs UpdateObject. `json_data`, when present, replaces the whole document (use
         *     `patchObjectData` for partial changes) and is validated against the class schema when the
         *     class has `validate_schema: true` (400 `schema_validation_failed`). A new name must be
         *     unique within the class (409). An update that changes nothing is a no-op: the current
         *     object is returned without a revision change or event. 404 when the object does not belong
         *     to the class in the path. When the class has a schema that is not enforced and the new
         *     `json_data` flips whether the object matches it, `object_validation.updated` is recorded
         *     (see the `Event` schema).
         */
        patch: operations["updateObject"];
        trace?: never;
    };
    "/api/v1/classes/{class_id}/{object_id}/data": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Class id. */
                class_id: components["parameters"]["ClassIdPath"];
                /** @description Object id; the object must belong to the class in the path (404 otherwise). */
                object_id: components["parameters"]["ObjectIdPath"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        /**
         * Apply a JSON Patch to an object's data
         * @description Needs UpdateObject. Applies an RFC 6902 patch (`add`, `remove`, `replace`, `move`, `copy`,
         *     `test`; pointers relative to the root of `json_data`; `test` compares arrays and objects
         *     recursively and numbers by value) atomically. A failed operation, including a failed
         *     `test`, is 409 and nothing changes. A result whose root is not a JSON object is 400.
         *     Limits (400 when exceeded): document and result 2 MiB, 1,000 operations, 128 pointer
         *     segments per `path` or `from`, 64 nested containers, 32 MiB cumulative work. The result is
         *     validated against the class schema when `validate_schema` is true (400
         *     `schema_validation_failed`). A patch that leaves `json_data` unchanged is a no-op (no
         *     revision change, no event). Content types other than `application/json-patch+json` are
         *     415.
         */
        patch: operations["patchObjectData"];
        trace?: never;
    };
    "/api/v1/classes/{class_id}/{object_id}/events": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Class id. */
                class_id: components["parameters"]["ClassIdPath"];
                /** @description Object id; the object must belong to the class in the path (404 otherwise). */
                object_id: components["parameters"]["ObjectIdPath"];
            };
            cookie?: never;
        };
        /**
         * List audit events of an object
         * @description Wrapper over `GET /api/v1/events` fixed to events whose entity is this object (entity types
         *     `object` and `object_validation` with `entity_id` = `object_id`), with the same filters,
         *     paging and audit visibility. A class/object pair that does not match is 404.
         */
        get: operations["listObjectEvents"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/classes/{class_id}/{object_id}/related/objects": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Class id. */
                class_id: components["parameters"]["ClassIdPath"];
                /** @description Object id; the object must belong to the class in the path (404 otherwise). */
                object_id: components["parameters"]["ObjectIdPath"];
            };
            cookie?: never;
        };
        /**
         * List objects related to an object
         * @description Walks object relations in both directions from the object up to `depth` hops. Each related
         *     object appears once, at its smallest depth, with one shortest `path`; the start object is
         *     not included. Only objects and relations the caller may read (ReadObject,
         *     ReadObjectRelation) are traversed. The query `class_id` (distinct from the path
         *     `class_id`) keeps only related objects of that class. Sort fields: `depth`, `id`, `name`,
         *     `created_at`, `updated_at` (default `depth,id`). 404 when the object does not belong to the
         *     class in the path. A traversal that would reach more than 10,000 objects or cross more than
         *     20,000 relations is 400, asking to narrow the query (a smaller `depth`).
         */
        get: operations["listRelatedObjects"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/classes/{class_id}/computed-fields": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Class id. */
                class_id: components["parameters"]["ClassIdPath"];
            };
            cookie?: never;
        };
        /**
         * List the shared computed fields of a class
         * @description Needs ReadClass. Filters: `id`, `key`, `label`, `description`, `enabled`, `result_type`,
         *     `created_at`, `updated_at`, `revision`. Sort fields: `id`, `key`, `label`, `created_at`,
         *     `updated_at`, `revision` (default `id`).
         */
        get: operations["listClassComputedFields"];
        put?: never;
        /**
         * Create a shared computed field
         * @description Needs UpdateCollection on the class's collection. Creates a field with `visibility: shared`
         *     and `owner_user_id: null`; `class_id` in the body must be omitted or equal the path id
         *     (400 otherwise). A duplicate `key` among the class's shared fields, or a 33rd shared field,
         *     is 409.
         */
        post: operations["createClassComputedField"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/classes/{class_id}/computed-fields/{field_id}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Class id. */
                class_id: components["parameters"]["ClassIdPath"];
                /** @description Computed-field id. */
                field_id: components["parameters"]["ComputedFieldIdPath"];
            };
            cookie?: never;
        };
        /**
         * Get a shared computed field
         * @description Needs ReadClass. 404 when the field is not a shared field of the class in the path.
         */
        get: operations["getClassComputedField"];
        put?: never;
        post?: never;
        /**
         * Delete a shared computed field
         * @description Needs UpdateCollection on the class's collection.
         */
        delete: operations["deleteClassComputedField"];
        options?: never;
        head?: never;
        /**
         * Update a shared computed field
         * @description Needs UpdateCollection on the class's collection. `key`, `class_id` and `visibility` cannot
         *     change. An update that changes nothing is a no-op (no revision change, no event).
         */
        patch: operations["updateClassComputedField"];
        trace?: never;
    };
    "/api/v1/classes/{class_id}/events": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Class id. */
                class_id: components["parameters"]["ClassIdPath"];
            };
            cookie?: never;
        };
        /**
         * List audit events of a class
         * @description Wrapper over `GET /api/v1/events` fixed to events whose entity is this class (entity types
         *     `class` and `class_schema` with `entity_id` = `class_id`), with the same filters, paging
         *     and audit visibility (ReadAudit on the collection; snapshots redacted for related-collection
         *     visibility). Events of the class's objects are under the object events route.
         */
        get: operations["listClassEvents"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/classes/{class_id}/object-aggregates": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Class id. */
                class_id: components["parameters"]["ClassIdPath"];
            };
            cookie?: never;
        };
        /**
         * Aggregate objects of a class
         * @description Groups the class's objects by up to 3 ordered `group_by` dimensions and computes up to 4
         *     numeric measures (`aggregate=<operation>:<field>`). At least one `group_by` or `aggregate`
         *     is required (400 otherwise); without `group_by` a single row covers all matching objects.
         *     Object filters (`filters`, as in `listObjects`, including at most two enabled computed
         *     filters) apply before grouping. Rows are permission scoped: only objects the caller may
         *     read are counted. Dimension states keep null, missing and unavailable values apart; each
         *     measure reports how many source values contributed and how many were skipped (null,
         *     missing, non-numeric or failed). 413 when a value is too large for a replay-safe cursor or
         *     memory bounds are exceeded. Paging is by group, with `X-Next-Cursor` and `X-Page-Limit`
         *     (no total count); a cursor is bound to the exact request (400 when reused with other
         *     dimensions, measures, sort or filters). Dimension order: by state (`value`, then `null`,
         *     `missing`, `unavailable`), then by value (JSON order: numbers numerically, strings by
         *     text); `object_count.*` sorts break ties by the dimensions ascending. Timestamps group as
         *     RFC 3339 UTC strings with microseconds.
         */
        get: operations["aggregateObjects"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/classes/{class_id}/objects": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Class id. */
                class_id: components["parameters"]["ClassIdPath"];
            };
            cookie?: never;
        };
        /**
         * List objects of a class
         * @description Lists the class's objects on which the caller holds ReadObject (and within the token
         *     scope); the class itself must be readable (404/403 otherwise).
         *
         *     Filters (`filters`, one query parameter each, all combined with AND; unknown fields or
         *     operators are 400; at most 64 filters and 128 query parameters):
         *     - `id`, `name`, `description`, `collection_id`, `created_at`, `updated_at`, `revision`:
         *       `field=value` (equals), `field__<op>=value`, `field__not_<op>=value`. Integer fields take
         *       lists and ranges (`id=1,2,5-9`); dates are RFC 3339 or `YYYY-MM-DD`; `in` takes a
         *       comma-separated list and `between` takes `lo,hi`.
         *     - `json_data__<op>=<path,segments>=<value>`, e.g. `json_data__gte=metrics,cpu=4`,
         *       `json_data__has_key=interfaces=eth0`, `json_data__is_null=owner`. A missing path or an
         *       unconvertible value never matches and is never an error.
         *     - `computed.shared.<key>[__<op>]=value` and `computed.personal.<key>[__<op>]=value`: filter
         *       on the value of an enabled computed field visible to the caller (unknown or disabled
         *       key: 400). An object whose value failed to evaluate never matches.
         *     - Related groups: `related.<alias>.class.name=<class name>` or
         *       `related.<alias>.class.id=<id>` (exactly one per group; the exact target class),
         *       `related.<alias>.object.<field>__<op>=value` (fields `id`, `name`, `description`,
         *       `collection_id`, `created_at`, `updated_at`, `revision`, `json_data` with the
         *       `<path,segments>=<value>` form) and `related.<alias>.depth__lte=<1..10>` (default 1).
         *       `<alias>` is a client-chosen label (letters, digits, `_`) grouping one related predicate:
         *       an object matches when at least one object of the target class satisfying all of the
         *       group's object filters is reachable within the depth over relations in either direction.
         *       Hidden targets or relations never make the predicate true; the target class needs
         *       ReadClass, traversal ReadObject and ReadObjectRelation. At most 4 groups, each with at
         *       most 16 object filters.
         *     - `permissions=<PermissionName>`: only objects on which the caller holds that permission.
         *
         *     Operators: text `equals, iequals, contains, icontains, startswith, istartswith, endswith,
         *     iendswith, like, regex, in, is_null`; integer, revision and timestamp `equals, in, gt, gte,
         *     lt, lte, between, is_null`; boolean `equals, is_null`; JSON paths the text and ordered
         *     operators plus `within_network, contains_network, contains_ip, overlaps_network,
         *     inet_equals, all, array_length, has_key`.
         *
         *     Sort fields: `id`, `name`, `description`, `collection_id`, `created_at`, `updated_at`,
         *     `revision`, `computed.shared.<key>`, `computed.personal.<key>` (when a computed field is
         *     sorted on, at most two sort fields). Default `id`.
         */
        get: operations["listObjects"];
        put?: never;
        /**
         * Create an object
         * @description Needs CreateObject on the class's collection. The object is created in the class's
         *     collection. The name must be unique within the class (409). When the class has
         *     `validate_schema: true`, `json_data` failing the class schema is 400 with
         *     `reason: schema_validation_failed` and `details` (up to 20 entries `{path, message}`, where
         *     `path` is an RFC 6901 pointer into `json_data`, `/` for the root). When the class has a
         *     schema that is not enforced, a new object that does not match it records
         *     `object_validation.updated` with `compliant: false` (see the `Event` schema).
         */
        post: operations["createObject"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/classes/{class_id}/related/classes": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Class id. */
                class_id: components["parameters"]["ClassIdPath"];
            };
            cookie?: never;
        };
        /**
         * List classes related to a class
         * @description Walks class relations in both directions from the class up to `depth` hops. Each related
         *     class appears once, at its smallest depth, with one shortest `path`; the start class is not
         *     included. Only classes and relations the caller may read (ReadClass, ReadClassRelation)
         *     are traversed. Sort fields: `depth`, `id`, `name`, `created_at`, `updated_at` (default
         *     `depth,id`). A traversal that would reach more than 10,000 classes or cross more than 20,000
         *     relations is 400, asking to narrow the query (a smaller `depth`).
         */
        get: operations["listRelatedClasses"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/classes/by-name/{class_name}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Exact class name; numeric-looking values are names, not ids. */
                class_name: components["parameters"]["ClassNamePath"];
            };
            cookie?: never;
        };
        /**
         * Get a class by name
         * @description Needs ReadClass. Returns the plain class; with `include=collection` the expanded class
         *     (`collection` object in place of `collection_id`). An unresolved name is 404.
         */
        get: operations["getClassByName"];
        put?: never;
        post?: never;
        /**
         * Delete a class by name
         * @description Needs DeleteClass. Deletes the class, its objects and their object relations, with an audit
         *     event for each deleted row (and `class_schema.deleted` when the class had a schema).
         */
        delete: operations["deleteClassByName"];
        options?: never;
        head?: never;
        /**
         * Update a class by name
         * @description Same as `updateClass`, addressed by name. Needs UpdateClass; changing `collection_id` also
         *     needs CreateClass on the target collection. 404 also when the class was concurrently
         *     renamed. An update that changes nothing is a no-op: the current class is returned without a
         *     revision change or event. Turning validation on or changing the schema while it is on
         *     checks every stored object first (409 `existing_objects_invalid` with a sample of failing
         *     objects, as in `updateClass`), with the same `class_schema` and `object_validation` audit
         *     events.
         */
        patch: operations["updateClassByName"];
        trace?: never;
    };
    "/api/v1/classes/by-name/{class_name}/object-aggregates": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Exact class name; numeric-looking values are names, not ids. */
                class_name: components["parameters"]["ClassNamePath"];
            };
            cookie?: never;
        };
        /**
         * Aggregate objects of a class (by class name)
         * @description Same as `aggregateObjects`, with the class addressed by name (unresolved name: 404).
         *     At least one `group_by` or `aggregate` is required (400 otherwise).
         */
        get: operations["aggregateObjectsByClassName"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/classes/by-name/{class_name}/objects": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Exact class name; numeric-looking values are names, not ids. */
                class_name: components["parameters"]["ClassNamePath"];
            };
            cookie?: never;
        };
        /**
         * List objects of a class (by class name)
         * @description Same as `listObjects`, with the class addressed by name (unresolved name: 404).
         *
         *     Filters (`filters`, combined with AND): `id`, `name`, `description`, `collection_id`,
         *     `created_at`, `updated_at`, `revision` as `field=value`, `field__<op>=value` or
         *     `field__not_<op>=value`; `json_data__<op>=<path,segments>=<value>`;
         *     `computed.shared.<key>__<op>=value`, `computed.personal.<key>__<op>=value`; related groups
         *     `related.<alias>.class.name`, `related.<alias>.object.<field>__<op>`,
         *     `related.<alias>.depth__lte`; `permissions=<PermissionName>`. See `listObjects`.
         */
        get: operations["listObjectsByClassName"];
        put?: never;
        /**
         * Create an object (by class name)
         * @description Same as `createObject`, with the class addressed by name. Needs CreateObject on the class's
         *     collection.
         */
        post: operations["createObjectByClassName"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/classes/by-name/{class_name}/objects/by-name/{object_name}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Exact class name; numeric-looking values are names, not ids. */
                class_name: components["parameters"]["ClassNamePath"];
                /** @description Exact object name within the class. */
                object_name: components["parameters"]["ObjectNamePath"];
            };
            cookie?: never;
        };
        /**
         * Get an object by class name and object name
         * @description Needs ReadObject. 404 when either name does not resolve (also when the class was
         *     concurrently renamed).
         */
        get: operations["getObjectByName"];
        put?: never;
        post?: never;
        /**
         * Delete an object by class name and object name
         * @description Same as `deleteObject`, addressed by names.
         */
        delete: operations["deleteObjectByName"];
        options?: never;
        head?: never;
        /**
         * Update an object by class name and object name
         * @description Same as `updateObject`, addressed by names.
         */
        patch: operations["updateObjectByName"];
        trace?: never;
    };
    "/api/v1/collections": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List collections
         * @description Collections on which the caller holds ReadCollection (directly or inherited from an
         *     ancestor), limited by the token scope.
         *
         *     Filters (`field=value`, `field__<op>=value`, `field__not_<op>=value`): `id`, `name`,
         *     `description`, `created_at`, `updated_at`, `revision`, `parent_collection_id`
         *     (`parent_collection_id__is_null=true` selects top-level collections), and
         *     `permissions=<PermissionName>` (only collections where the caller holds that permission).
         *     Sort fields: `id`, `name`, `description`, `created_at`, `updated_at`, `revision`,
         *     `parent_collection_id`; default `id` ascending.
         */
        get: operations["listCollections"];
        put?: never;
        /**
         * Create a collection
         * @description Creating a top-level collection (no `parent_collection_id`) needs an administrator; creating a
         *     child needs an administrator or DelegateCollection on the parent. Names are unique among
         *     siblings (409). When `group_id` is given, that group receives every collection permission
         *     (all PermissionName values) on the new collection. A missing parent or group is 404.
         */
        post: operations["createCollection"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/collections/{collection_id}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Collection id. */
                collection_id: number;
            };
            cookie?: never;
        };
        /**
         * Get a collection
         * @description Needs ReadCollection on the collection.
         */
        get: operations["getCollection"];
        put?: never;
        post?: never;
        /**
         * Delete a collection
         * @description Needs DeleteCollection. A collection that still has child collections, classes or remote
         *     targets cannot be deleted (409); delete or move them first. Its permission grants are removed
         *     with it.
         */
        delete: operations["deleteCollection"];
        options?: never;
        head?: never;
        /**
         * Update a collection's name or description
         * @description Needs UpdateCollection. Omitted members stay unchanged. A renamed collection must stay unique
         *     among its siblings (409). An update that changes nothing (including an empty body) is a
         *     no-op: the current collection is returned, `updated_at` and `revision` stay, no event.
         *     Use `PUT /api/v1/collections/{collection_id}/parent` to move a collection.
         */
        patch: operations["updateCollection"];
        trace?: never;
    };
    "/api/v1/collections/{collection_id}/ancestors": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Collection id. */
                collection_id: number;
            };
            cookie?: never;
        };
        /**
         * List the ancestors of a collection, nearest first
         * @description Needs ReadCollection on the collection. Returns the parent, the grandparent and so on up to
         *     the top level (the collection itself is not included), nearest first; the order is fixed and
         *     there is no `sort` parameter. Ancestors the caller cannot read are omitted.
         */
        get: operations["listCollectionAncestors"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/collections/{collection_id}/children": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Collection id. */
                collection_id: number;
            };
            cookie?: never;
        };
        /**
         * List the direct children of a collection
         * @description Needs ReadCollection on the collection. Returns its direct child collections that the caller
         *     can read. Filters and sort fields as in `listCollections`; default `id` ascending.
         */
        get: operations["listCollectionChildren"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/collections/{collection_id}/event-subscriptions": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Collection id. */
                collection_id: number;
            };
            cookie?: never;
        };
        /**
         * List the event subscriptions of a collection
         * @description Needs ManageEventSubscription on the collection (403 otherwise; 404 when the collection does
         *     not exist). ManageEventSubscription cannot be named in a token's permission scope, so tokens
         *     with a `permissions` scope are denied; resource-scoped tokens need an explicit `collection`
         *     entry. Sort fields: `id` (default), `name`, `created_at`, `updated_at`. Filter fields: `id`,
         *     `name`, `sink_id`, `enabled`, `created_at`, `updated_at`, `revision`.
         */
        get: operations["listCollectionEventSubscriptions"];
        put?: never;
        /**
         * Create an event subscription on a collection
         * @description Needs ManageEventSubscription on the collection (403; 404 when the collection does not
         *     exist). The subscription matches events attached to the collection or referencing it as a
         *     related collection (not events of its descendant collections, which have their own
         *     subscriptions); `filter` only narrows that set. When the collection is only a related
         *     collection of an event, the delivered envelope has `before` and `after` set to null, as in
         *     audit reads. `entity_types` and `actions` are
         *     validated against the event catalog and impossible pairs are 400; `routing` is validated
         *     against the sink's kind (400). A missing `sink_id` is 404. Names are unique within the
         *     collection (409). New subscriptions do not replay history. Audited as
         *     `event_subscription.created`.
         */
        post: operations["createCollectionEventSubscription"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/collections/{collection_id}/event-subscriptions/{subscription_id}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Collection id. */
                collection_id: number;
                /** @description Event subscription id; a subscription of another collection is 404. */
                subscription_id: number;
            };
            cookie?: never;
        };
        /**
         * Get an event subscription of a collection
         * @description Needs ManageEventSubscription on the collection.
         */
        get: operations["getCollectionEventSubscription"];
        put?: never;
        post?: never;
        /**
         * Delete an event subscription of a collection
         * @description Needs ManageEventSubscription on the collection. The subscription's delivery rows are deleted
         *     with it (pending rows are never sent). Audited as `event_subscription.deleted`.
         */
        delete: operations["deleteCollectionEventSubscription"];
        options?: never;
        head?: never;
        /**
         * Update an event subscription of a collection
         * @description Needs ManageEventSubscription on the collection. Omitted members stay unchanged; `filter` and
         *     `routing` are replaced as a whole. The resulting entity_types, actions, filter and routing
         *     are validated together against the catalog and the (new) sink's kind (400); a missing
         *     `sink_id` is 404; a duplicate name is 409; an empty body is 400. An update that changes
         *     nothing is a no-op (200, same revision, no event). Audited as `event_subscription.updated`.
         *     Disabling stops new deliveries and keeps history; its pending and failed deliveries wait
         *     until it is enabled again. Moving to another sink (`sink_id`) moves its pending and failed
         *     deliveries to that sink.
         */
        patch: operations["updateCollectionEventSubscription"];
        trace?: never;
    };
    "/api/v1/collections/{collection_id}/events": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Collection id. */
                collection_id: number;
            };
            cookie?: never;
        };
        /**
         * List audit events of a collection
         * @description Wrapper over `GET /api/v1/events` with `collection_id` fixed to the path collection: events
         *     directly attached to this collection. Needs ReadAudit on the collection (403 otherwise).
         *     Same filters, sort (`id` or `occurred_at`, `-` prefix descending, default `-id`) and scoping
         *     as `listEvents`.
         */
        get: operations["listCollectionEvents"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/collections/{collection_id}/parent": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Collection id. */
                collection_id: number;
            };
            cookie?: never;
        };
        get?: never;
        /**
         * Move a collection to another parent
         * @description Needs UpdateCollection on the collection and DelegateCollection on both the current and the
         *     new parent; moving to or from the top level (`null`) needs an administrator. Moving a
         *     collection under itself or one of its descendants is 400. The name must be unique among the
         *     new siblings (409). A missing new parent is 404. Moving to the current parent is a no-op
         *     (no `updated_at` or `revision` change, no event). Inherited grants follow the new ancestry.
         */
        put: operations["updateCollectionParent"];
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/collections/{collection_id}/permissions": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Collection id. */
                collection_id: number;
            };
            cookie?: never;
        };
        /**
         * List the group grants on a collection
         * @description Needs ReadCollection. Returns the grants stored directly on this collection (not inherited
         *     ones), one row per (group, permission). Sort fields: `group_id`, `permission`, `created_at`;
         *     default `group_id,permission` (the pair is unique and is the tie-breaker).
         */
        get: operations["listCollectionPermissions"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/collections/{collection_id}/permissions/effective/principal/{principal_id}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Collection id. */
                collection_id: number;
                /** @description Principal id (user or service account). */
                principal_id: number;
            };
            cookie?: never;
        };
        /**
         * List a principal's effective permissions on a collection
         * @description Needs ReadCollection on the collection. Returns the direct and inherited grants that apply
         *     to this collection through the principal's groups: grants on the collection itself
         *     (`depth` 0, `inherited` false) and on each ancestor (`depth` = levels up, `inherited` true).
         *     Only group grants are listed; implicit administrator authority and token scopes are not.
         *     Sort fields: `depth`, `source_collection_id`, `group_id`, `permission`; default
         *     `depth,group_id,permission`.
         */
        get: operations["listEffectiveCollectionPrincipalPermissions"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/collections/{collection_id}/permissions/group/{group_id}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Collection id. */
                collection_id: number;
                /** @description Group id. */
                group_id: number;
            };
            cookie?: never;
        };
        /**
         * Get a group's permissions on a collection
         * @description Needs ReadCollection. Returns the permission names granted directly to the group on this
         *     collection (empty array when none), in PermissionName enum order.
         */
        get: operations["getCollectionGroupPermissions"];
        /**
         * Replace a group's permissions on a collection
         * @description Needs DelegateCollection. Sets the group's grants on this collection to exactly the given
         *     names: missing ones are granted, others revoked (an empty array revokes all). Each change
         *     emits `permission.granted` or `permission.revoked`; an unchanged set is a no-op. Returns the
         *     resulting set.
         */
        put: operations["replaceCollectionGroupPermissions"];
        /**
         * Grant permissions to a group on a collection
         * @description Needs DelegateCollection. Adds the given names to the group's grants on this collection;
         *     names already granted are no-ops (an empty array changes nothing). Returns the resulting set.
         */
        post: operations["addCollectionGroupPermissions"];
        /**
         * Revoke all of a group's permissions on a collection
         * @description Needs DelegateCollection. Removes every grant of the group on this collection (grants on
         *     ancestors are untouched). A group without grants here is a no-op, still 204.
         */
        delete: operations["revokeAllCollectionGroupPermissions"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/collections/{collection_id}/permissions/group/{group_id}/{permission}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Collection id. */
                collection_id: number;
                /** @description Group id. */
                group_id: number;
                /** @description Permission name; an unknown name is 400. */
                permission: components["schemas"]["PermissionName"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Grant one permission to a group on a collection
         * @description Needs DelegateCollection. Granting a permission the group already holds here is a no-op.
         *     Returns the group's resulting permission names on the collection.
         */
        post: operations["grantCollectionGroupPermission"];
        /**
         * Revoke one permission of a group on a collection
         * @description Needs DelegateCollection. Revoking a permission the group does not hold here is a no-op,
         *     still 204.
         */
        delete: operations["revokeCollectionGroupPermission"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/collections/{collection_id}/permissions/principal/{principal_id}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Collection id. */
                collection_id: number;
                /** @description Principal id (user or service account). */
                principal_id: number;
            };
            cookie?: never;
        };
        /**
         * List a principal's direct permission rows on a collection
         * @description Needs ReadCollection on the collection. Returns the grants stored directly on this
         *     collection for groups the principal is a member of (inherited grants: see the effective
         *     route). Sort fields: `group_id`, `permission`, `created_at`; default `group_id,permission`.
         */
        get: operations["listCollectionPrincipalPermissions"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/config": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Get the public client configuration
         * @description Client-relevant defaults and limits. No authentication.
         */
        get: operations["getPublicConfig"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/event-deliveries": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List event deliveries
         * @description Requires an unscoped administrator; otherwise 403. Sort fields: `id` (default), `status`,
         *     `created_at`, `updated_at`, `next_attempt_at`. Filter fields: `status` (`pending`,
         *     `in_flight`, `succeeded`, `failed`, `dead`), `purpose` (`event`, `test`), `sink_id`,
         *     `subscription_id`, `event_id` (event UUID), and the sort fields, e.g.
         *     `status__in=failed,dead&sink_id=3`.
         */
        get: operations["listEventDeliveries"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/event-deliveries/{delivery_id}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Event delivery id. */
                delivery_id: number;
            };
            cookie?: never;
        };
        /**
         * Get an event delivery
         * @description Requires an unscoped administrator; otherwise 403. Delivery rows are not revisioned and carry
         *     no ETag.
         */
        get: operations["getEventDelivery"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/event-deliveries/{delivery_id}/dead": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Event delivery id. */
                delivery_id: number;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Move a delivery to the dead-letter status
         * @description Requires an unscoped administrator; otherwise 403. Allowed from every status. An in-flight
         *     claim is revoked (`locked_until` cleared), so a late acknowledgement from its worker is
         *     ignored; a transport already started may still reach the destination. A row that is
         *     already `dead` is returned unchanged (no event). Otherwise records an
         *     `event_delivery.dead` audit event (collection-less, before/after delivery snapshots) in
         *     the same transaction. No request body.
         */
        post: operations["markEventDeliveryDead"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/event-deliveries/{delivery_id}/retry": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Event delivery id. */
                delivery_id: number;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Release a failed or dead delivery for another attempt
         * @description Requires an unscoped administrator; otherwise 403. Only rows in status `failed` or `dead`
         *     can be released (409 otherwise). The row becomes `pending`, due immediately
         *     (`next_attempt_at` = now), with `attempts` reset to 0, `deferred_reason` and
         *     `locked_until` cleared; `last_error` is kept until the next attempt. Records an
         *     `event_delivery.retried` audit event (collection-less, before/after delivery snapshots) in
         *     the same transaction. No request body.
         */
        post: operations["retryEventDelivery"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/event-deliveries/health": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Snapshot of the event delivery pipeline
         * @description Requires an unscoped administrator; otherwise 403. Fan-out backlog, delivery backlog, worker
         *     settings, wakeup counters, and per-sink and per-subscription queue figures. Not cached.
         */
        get: operations["getEventDeliveryHealth"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/event-sinks": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List event sinks
         * @description Requires an unscoped administrator (member of the admin group using an unscoped token);
         *     otherwise 403. Sort fields: `id` (default), `name`, `kind`, `created_at`, `updated_at`.
         *     Filter fields: `id`, `name`, `kind`, `enabled`, `created_at`, `updated_at`, `revision`.
         */
        get: operations["listEventSinks"];
        put?: never;
        /**
         * Create an event sink
         * @description Requires an unscoped administrator; otherwise 403. `config` is validated against `kind`
         *     (members of another kind, literal URI credentials, non-TLS URI schemes, templates that do
         *     not compile: 400). A kind whose transport is not available in this deployment is 400.
         *     Sink names are unique (409). Audited as `event_sink.created`.
         */
        post: operations["createEventSink"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/event-sinks/{sink_id}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Event sink id. */
                sink_id: number;
            };
            cookie?: never;
        };
        /**
         * Get an event sink
         * @description Requires an unscoped administrator; otherwise 403.
         */
        get: operations["getEventSink"];
        put?: never;
        post?: never;
        /**
         * Delete an event sink
         * @description Requires an unscoped administrator; otherwise 403. A sink still used by a collection or
         *     system subscription cannot be deleted (409); delete or re-point those subscriptions first.
         *     The sink's remaining delivery rows (test deliveries) are deleted with it. Audited as
         *     `event_sink.deleted`. To stop deliveries while keeping history, set `enabled: false`.
         */
        delete: operations["deleteEventSink"];
        options?: never;
        head?: never;
        /**
         * Update an event sink
         * @description Requires an unscoped administrator; otherwise 403. Omitted members stay unchanged; `config`
         *     and `delivery_policy` are replaced as a whole; `secret_ref: null` clears the alias. The
         *     resulting kind, config and secret_ref are validated together (400). Changing `kind` while
         *     subscriptions use the sink is 409, and so is a config that no longer fits the routing of a
         *     subscription using the sink (e.g. setting `url_secret_ref` while a subscription has
         *     `routing.url`); a name already used by another sink is 409. Disabling a sink stops fan-out
         *     for it; its pending and failed fan-out deliveries wait (they are not claimed) until it is
         *     enabled again. An empty body
         *     is 400. An update that changes nothing is a no-op: 200 with the unchanged sink, no new
         *     revision, no event. Audited as `event_sink.updated`.
         */
        patch: operations["updateEventSink"];
        trace?: never;
    };
    "/api/v1/event-sinks/{sink_id}/preview": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Event sink id. */
                sink_id: number;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Render a sink payload for an existing event
         * @description Requires an unscoped administrator; otherwise 403. Renders what a test delivery of the
         *     event through the subscription would carry, using the saved sink configuration and
         *     subscription routing, with the test context (`test` true, `test_marker` `[TEST] `). No
         *     secret is resolved, no network call is made, nothing is stored and no event is emitted.
         *     Subscription filters and enabled flags are ignored; the event must still be inside the
         *     subscription's scope (a collection subscription: the event is attached to or references its
         *     collection; a system subscription: the event is collection-less), else 400. 404 when the
         *     sink, the subscription or the event does not exist; 400 when the subscription does not use
         *     this sink or rendering fails (template error, invalid JSON, size limit).
         */
        post: operations["previewEventSink"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/event-sinks/{sink_id}/test": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Event sink id. */
                sink_id: number;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Enqueue a test delivery of an existing event
         * @description Requires an unscoped administrator; otherwise 403. Validates exactly like the preview
         *     operation, then creates a new delivery row with `purpose: test` and status `pending` and
         *     returns it with 202 and `Location: /api/v1/event-deliveries/{id}`. Audited as
         *     `event_sink.invoked`. Tests bypass subscription filters and the enabled flags of sink and
         *     subscription but respect the sink's `delivery_policy` spacing. Every call creates a separate
         *     row; normal delivery of the same event is not suppressed. Webhook tests carry
         *     `X-Svc-Delivery-Purpose: test` and the idempotency key `<event_uuid>-test-<delivery_id>`.
         *     The row stays `pending` while no delivery workers run.
         */
        post: operations["testEventSink"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/events": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Read the audit event stream
         * @description Returns the audit events visible to the caller (see the `events` tag), filtered by the query
         *     parameters (all combine with AND). Sort: `id` or `occurred_at`, `-` prefix descending;
         *     default `-id` (newest first); `id` is the tie-breaker.
         *
         *     `occurred_after` and `occurred_before` are strict bounds on `occurred_at` and take exactly
         *     one timestamp (RFC 3339 or `YYYY-MM-DD`, midnight UTC). The other named filters also accept
         *     the list query language forms (`field__<op>=value`, `field__not_<op>=value`, e.g.
         *     `entity_type__in=class,object`), and `entity_name`, `task_id` and `occurred_at`
         *     (`occurred_at__gte=...`) are further filter fields. Unknown fields or operators are 400.
         *     The wrappers (collection, class, object, user, group, export-template and remote-target
         *     events) accept the same filters.
         */
        get: operations["listEvents"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/export-templates": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List export templates
         * @description Templates in collections where the caller holds ReadTemplate (resource-scoped tokens need an
         *     explicit collection entry). Filters: `id`, `name`, `description`, `collection_id` (alias
         *     `collections`), `kind`, `content_type`, `created_at`, `updated_at`, `revision`. Sorts: `id`,
         *     `name`, `description`, `collection_id`, `kind`, `content_type`, `created_at`, `updated_at`,
         *     `revision`.
         */
        get: operations["listExportTemplates"];
        put?: never;
        /**
         * Create an export template
         * @description Needs CreateTemplate on `collection_id`. The template is parsed when saved: syntax errors,
         *     unknown tags or filters, blocks nested deeper than SVC_EXPORT_TEMPLATE_RECURSION_LIMIT, and
         *     includes of names that are not `fragment` templates of the same collection are 400 with
         *     `details` (a fragment may include itself by its own name). Names are unique per collection
         *     (409). A `collection_id` that does not exist is 404. Records an `export_template.created`
         *     audit event.
         */
        post: operations["createExportTemplate"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/export-templates/{template_id}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                template_id: number;
            };
            cookie?: never;
        };
        /**
         * Get an export template
         * @description Needs ReadTemplate on the template's collection.
         */
        get: operations["getExportTemplate"];
        put?: never;
        post?: never;
        /**
         * Delete an export template
         * @description Needs DeleteTemplate on the template's collection. Records an `export_template.deleted`
         *     audit event. Export tasks already queued with this template fail when they run.
         */
        delete: operations["deleteExportTemplate"];
        options?: never;
        head?: never;
        /**
         * Update an export template
         * @description Needs UpdateTemplate on the current collection; changing `collection_id` also needs
         *     CreateTemplate on the destination collection. Omitted members stay unchanged;
         *     `default_query: null` clears the default query. The result is validated like a new template
         *     (400). An update that changes nothing is a no-op: the current template is returned, its
         *     revision does not advance and no event is recorded; otherwise an `export_template.updated`
         *     event holds the before and after snapshots. Includes are resolved by name when an export
         *     renders, so renaming, moving or deleting a fragment makes templates that include it fail
         *     at render time (the task fails with reason `render_failed`).
         */
        patch: operations["updateExportTemplate"];
        trace?: never;
    };
    "/api/v1/export-templates/{template_id}/events": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                template_id: number;
            };
            cookie?: never;
        };
        /**
         * List audit events of an export template
         * @description Wrapper over `GET /api/v1/events` narrowed to this template (entity type
         *     `export_template`), with the same filters, sorting and visibility: needs ReadAudit on the
         *     template's collection.
         */
        get: operations["listExportTemplateEvents"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/export-templates/{template_id}/exports": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                template_id: number;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Run an export through a stored template
         * @description Submits an export (task kind `export`) whose output is rendered by this template and served
         *     with the template's `content_type`. Needs ReadTemplate on the template's collection; the
         *     exported rows are filtered by the caller's read permissions and token scope (recorded at
         *     submission, intersected with live grants by the worker). `fragment` templates cannot be run
         *     (400). When `query` is omitted the template's `default_query` applies (read when the task
         *     runs). Otherwise the same as `POST /api/v1/exports` with this `template_id`; the same
         *     `Idempotency-Key` and body return the same task.
         */
        post: operations["runExportTemplate"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/exports": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Submit an export
         * @description Submits an export task (kind `export`, status `queued`; `Location` is `/api/v1/tasks/{id}`).
         *     Without `template_id` the output is the JSON envelope ExportOutput; with `template_id` the
         *     output is rendered by that template (which needs ReadTemplate and must be of kind `export`)
         *     and served with its `content_type`. Only rows the caller may read (and that its token scope
         *     covers) are exported, exactly as the list endpoint of the scope would list them.
         *
         *     Checked at submission: the template, the limits, the query against the list of the scope
         *     (400), ReadClass on `scope.class_id` for `objects_in_class` and ReadObject on
         *     `scope.object_id` for `related_objects` (403; 404 when missing, or when the object is not of
         *     `scope.class_id`). The worker re-checks all of it with the submitter's live grants
         *     intersected with the token scope recorded now, and fails closed.
         *
         *     The task's `summary` once it succeeded: `{scope_kind, template_id, count, total_matches,
         *     truncated, warnings, content_type, output_bytes}`. A failed task's `details` are
         *     `{reason, message}` with reason `invalid_request`, `not_found`, `permission_denied`,
         *     `render_failed`, `output_too_large` or `submitter_missing`. Progress counts rows read.
         */
        post: operations["createExport"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/exports/{export_id}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Id of the export task. */
                export_id: number;
            };
            cookie?: never;
        };
        /**
         * Get an export task
         * @description The task of kind `export`. Tasks are visible to their submitter (with any token) and to
         *     admins using an unscoped token; another principal's task, or a task of another kind, is 404.
         */
        get: operations["getExport"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/exports/{export_id}/output": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Id of the export task. */
                export_id: number;
            };
            cookie?: never;
        };
        /**
         * Get the stored output of an export
         * @description Returns the stored output of a succeeded export without re-running it. The media type is
         *     fixed at submission: `application/json` with the ExportOutput envelope for exports without a
         *     template, otherwise the template's `content_type` (`text/plain`, `text/html`, `text/csv`, or
         *     `application/json` holding the rendered document; text types carry `charset=utf-8`). `Accept`
         *     does not change it. 404 when the task does not exist, is not visible, is not an export or
         *     has no output (not finished or not succeeded); 410 once the output has expired
         *     (SVC_EXPORT_OUTPUT_RETENTION_HOURS after the task finished, default 24).
         */
        get: operations["getExportOutput"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/iam/credential-approvals": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Approve one credential operation with a fresh password
         * @description Human/IAM family: the caller must be a human (a service account gets 403, even as an admin-group member) and the bearer token must be unscoped (a scoped token gets 403); both gates run before any admin or self check. The calling human re-enters its password and names the later operation (kind, path ids and exact body). The approval can be used once, within 120 s, only with the bearer token that created it, and only for an identical request (same kind, ids and body) sent with `X-Svc-Credential-Approval: <approval>`. For `create_token` and `renew_token` the default expiry is resolved now and returned as `token_expires_at`; the later mint or renewal copies it. Authorization of the approved operation is checked again when it runs. Failed password attempts count against the login rate limit of the caller. Records `credential_approval.created` (and `credential_approval.consumed` when used); no password or token value is recorded.
         */
        post: operations["createCredentialApproval"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/iam/credential-approvals/{approval_id}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Opaque approval id as returned in `approval`. */
                approval_id: string;
            };
            cookie?: never;
        };
        /**
         * Get a credential approval record
         * @description Human/IAM family: the caller must be a human (a service account gets 403, even as an admin-group member) and the bearer token must be unscoped (a scoped token gets 403); both gates run before any admin or self check. Only the principal that created the approval can read it; other callers get 404. Records may disappear some time after they expire (404).
         */
        get: operations["getCredentialApproval"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/iam/groups": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List groups
         * @description Human/IAM family: the caller must be a human (a service account gets 403, even as an admin-group member) and the bearer token must be unscoped (a scoped token gets 403); both gates run before any admin or self check. Any human with an unscoped token sees all groups. Filters: id, name, description, identity_scope, managed_by, external_key, created_at, updated_at, revision. Sort fields: id, name, description, created_at, updated_at, revision; default `id`.
         */
        get: operations["listGroups"];
        put?: never;
        /**
         * Create a group
         * @description Human/IAM family: the caller must be a human (a service account gets 403, even as an admin-group member) and the bearer token must be unscoped (a scoped token gets 403); both gates run before any admin or self check. Admin only. The group is created in identity scope `local`.
         */
        post: operations["createGroup"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/iam/groups/{group_id}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Group id. */
                group_id: number;
            };
            cookie?: never;
        };
        /**
         * Get a group
         * @description Human/IAM family: the caller must be a human (a service account gets 403, even as an admin-group member) and the bearer token must be unscoped (a scoped token gets 403); both gates run before any admin or self check.
         */
        get: operations["getGroup"];
        put?: never;
        post?: never;
        /**
         * Delete a group
         * @description Human/IAM family: the caller must be a human (a service account gets 403, even as an admin-group member) and the bearer token must be unscoped (a scoped token gets 403); both gates run before any admin or self check. Admin only. Provider-managed identities are read-only through local mutation operations (403). Deletes the group's memberships and collection permissions. A group that owns service accounts cannot be deleted (409).
         */
        delete: operations["deleteGroup"];
        options?: never;
        head?: never;
        /**
         * Update a group
         * @description Human/IAM family: the caller must be a human (a service account gets 403, even as an admin-group member) and the bearer token must be unscoped (a scoped token gets 403); both gates run before any admin or self check. Admin only. Provider-managed identities are read-only through local mutation operations (403). A request that changes nothing is a no-op: 200 with the current representation, no revision or `updated_at` change and no event.
         */
        patch: operations["updateGroup"];
        trace?: never;
    };
    "/api/v1/iam/groups/{group_id}/members": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Group id. */
                group_id: number;
            };
            cookie?: never;
        };
        /**
         * List direct members of a group
         * @description Human/IAM family: the caller must be a human (a service account gets 403, even as an admin-group member) and the bearer token must be unscoped (a scoped token gets 403); both gates run before any admin or self check. An admin, or a member of the group. Sort fields: id, name, created_at; default `id`.
         */
        get: operations["listGroupMembers"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/iam/groups/{group_id}/members/{principal_id}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Group id. */
                group_id: number;
                /** @description Principal id (human user or service account). */
                principal_id: number;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Add a principal to a group
         * @description Human/IAM family: the caller must be a human (a service account gets 403, even as an admin-group member) and the bearer token must be unscoped (a scoped token gets 403); both gates run before any admin or self check. Admin only. Members of provider-managed groups are read-only (403). Adding an existing member is a no-op that still returns 201 with the member (no event). Memberships carry no revision, so no ETag is returned and If-Match is not used.
         */
        post: operations["addGroupMember"];
        /**
         * Remove a principal from a group
         * @description Human/IAM family: the caller must be a human (a service account gets 403, even as an admin-group member) and the bearer token must be unscoped (a scoped token gets 403); both gates run before any admin or self check. Admin only. Members of provider-managed groups are read-only (403). Removing a principal that is not a member is a no-op (204, no event).
         */
        delete: operations["removeGroupMember"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/iam/groups/{id}/events": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Group id. */
                id: number;
            };
            cookie?: never;
        };
        /**
         * List audit events of a group
         * @description Wrapper over `GET /api/v1/events` restricted to this group, with the same filters, paging and scoping. Group events are collection-less, so only unscoped admins can read them (403 otherwise).
         */
        get: operations["listGroupEvents"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/iam/me": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Get the calling principal and its current token
         * @description Available to every valid token, including scoped tokens and service accounts. The settings document is not included (use /api/v1/iam/me/settings).
         */
        get: operations["getMe"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/iam/me/computed-fields": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List my personal computed fields
         * @description Humans only (service accounts: 403). Lists the caller's personal fields on classes the
         *     caller can still read. Filters: `id`, `class_id`, `key`, `label`, `description`, `enabled`,
         *     `result_type`, `created_at`, `updated_at`, `revision`. Sort fields: `id`, `class_id`,
         *     `key`, `label`, `created_at`, `updated_at`, `revision` (default `id`).
         */
        get: operations["listMyComputedFields"];
        put?: never;
        /**
         * Create a personal computed field
         * @description Humans only (service accounts: 403). `class_id` is required here (400 when missing) and
         *     needs ReadClass (missing class: 404). Creates a field with `visibility: personal` owned by
         *     the caller. A duplicate `key` among the caller's fields on that class, or a 17th personal
         *     field on it, is 409.
         */
        post: operations["createMyComputedField"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/iam/me/computed-fields/{field_id}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Computed-field id. */
                field_id: components["parameters"]["ComputedFieldIdPath"];
            };
            cookie?: never;
        };
        /**
         * Get a personal computed field
         * @description Humans only (service accounts 403). Another principal's field is 404.
         */
        get: operations["getMyComputedField"];
        put?: never;
        post?: never;
        /**
         * Delete a personal computed field
         * @description Humans only (service accounts 403); owner only (another principal's field is 404).
         */
        delete: operations["deleteMyComputedField"];
        options?: never;
        head?: never;
        /**
         * Update a personal computed field
         * @description Humans only (service accounts 403); owner only (another principal's field is 404). `key`,
         *     `class_id` and `visibility` cannot change. An update that changes nothing is a no-op.
         */
        patch: operations["updateMyComputedField"];
        trace?: never;
    };
    "/api/v1/iam/me/settings": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Get my settings document
         * @description The caller's own document; available to every valid token, including scoped tokens and service accounts.
         */
        get: operations["getMySettings"];
        /**
         * Replace my settings document
         * @description Replaces the document entirely; nested null values are kept. The caller's own document; available to every valid token, including scoped tokens and service accounts. A request that changes nothing is a no-op: 200 with the current representation, no revision or `updated_at` change and no event. Each changing mutation advances the revision and records a `principal.updated` audit event with full before and after snapshots. The resulting document is limited to 2 MiB and 64 nested containers (400).
         */
        put: operations["replaceMySettings"];
        post?: never;
        /**
         * Reset my settings document to {}
         * @description Resets the document to `{}` and returns it (200, not 204). The caller's own document; available to every valid token, including scoped tokens and service accounts. A request that changes nothing is a no-op: 200 with the current representation, no revision or `updated_at` change and no event. Each changing mutation advances the revision and records a `principal.updated` audit event with full before and after snapshots. The resulting document is limited to 2 MiB and 64 nested containers (400).
         */
        delete: operations["resetMySettings"];
        options?: never;
        head?: never;
        /**
         * Patch my settings document
         * @description The `Content-Type` selects the semantics. `application/json` and `application/merge-patch+json`: JSON Merge Patch (RFC 7396) over objects; objects merge recursively, a null value removes the key, arrays and scalars replace, patching into a missing or non-object value starts from `{}`. `application/json-patch+json`: an RFC 6902 operation array applied atomically under a principal lock; `test` compares arrays and objects recursively and numbers by numeric value; a failed operation (including a failed `test`) is 409 and rolls everything back; a result whose root is not an object is 400. JSON Patch limits (400): document and result 2 MiB, 1,000 operations, 128 pointer segments per path or from, 64 nested containers, 32 MiB cumulative work. The caller's own document; available to every valid token, including scoped tokens and service accounts. A request that changes nothing is a no-op: 200 with the current representation, no revision or `updated_at` change and no event. Each changing mutation advances the revision and records a `principal.updated` audit event with full before and after snapshots. The resulting document is limited to 2 MiB and 64 nested containers (400).
         */
        patch: operations["patchMySettings"];
        trace?: never;
    };
    "/api/v1/iam/principals/{principal_id}/groups": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Principal id (human user or service account). */
                principal_id: number;
            };
            cookie?: never;
        };
        /**
         * List the groups of a principal
         * @description Human/IAM family: the caller must be a human (a service account gets 403, even as an admin-group member) and the bearer token must be unscoped (a scoped token gets 403); both gates run before any admin or self check. For a human principal: the human itself or an admin (another human without admin: 403). For a service account: an admin or a human member of its owner group; a service account never manages its own tokens. Direct memberships. Sort fields: id, name, description, created_at, updated_at, revision; default `id`.
         */
        get: operations["listPrincipalGroups"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/iam/principals/{principal_id}/permissions": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Principal id (human user or service account). */
                principal_id: number;
            };
            cookie?: never;
        };
        /**
         * List direct permissions of a principal, grouped by granting group
         * @description Human/IAM family: the caller must be a human (a service account gets 403, even as an admin-group member) and the bearer token must be unscoped (a scoped token gets 403); both gates run before any admin or self check. For a human principal: the human itself or an admin (another human without admin: 403). For a service account: an admin or a human member of its owner group; a service account never manages its own tokens. Direct permission rows across all collections, one entry per granting group (ordered by group id; groups granting nothing are omitted). Inherited rows are not included (see the collection effective-permission routes). Not paginated.
         */
        get: operations["listPrincipalPermissions"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/iam/principals/{principal_id}/settings": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Principal id (human user or service account). */
                principal_id: number;
            };
            cookie?: never;
        };
        /**
         * Get a principal's settings document
         * @description Self access works for every valid token; another principal's document needs an unscoped human admin, and a denied cross-principal request is 404 (never 403).
         */
        get: operations["getPrincipalSettings"];
        /**
         * Replace a principal's settings document
         * @description Replaces the document entirely; nested null values are kept. Self access works for every valid token; another principal's document needs an unscoped human admin, and a denied cross-principal request is 404 (never 403). A request that changes nothing is a no-op: 200 with the current representation, no revision or `updated_at` change and no event. Each changing mutation advances the revision and records a `principal.updated` audit event with full before and after snapshots. The resulting document is limited to 2 MiB and 64 nested containers (400).
         */
        put: operations["replacePrincipalSettings"];
        post?: never;
        /**
         * Reset a principal's settings document to {}
         * @description Resets the document to `{}` and returns it (200, not 204). Self access works for every valid token; another principal's document needs an unscoped human admin, and a denied cross-principal request is 404 (never 403). A request that changes nothing is a no-op: 200 with the current representation, no revision or `updated_at` change and no event. Each changing mutation advances the revision and records a `principal.updated` audit event with full before and after snapshots. The resulting document is limited to 2 MiB and 64 nested containers (400).
         */
        delete: operations["resetPrincipalSettings"];
        options?: never;
        head?: never;
        /**
         * Patch a principal's settings document
         * @description The `Content-Type` selects the semantics. `application/json` and `application/merge-patch+json`: JSON Merge Patch (RFC 7396) over objects; objects merge recursively, a null value removes the key, arrays and scalars replace, patching into a missing or non-object value starts from `{}`. `application/json-patch+json`: an RFC 6902 operation array applied atomically under a principal lock; `test` compares arrays and objects recursively and numbers by numeric value; a failed operation (including a failed `test`) is 409 and rolls everything back; a result whose root is not an object is 400. JSON Patch limits (400): document and result 2 MiB, 1,000 operations, 128 pointer segments per path or from, 64 nested containers, 32 MiB cumulative work. Self access works for every valid token; another principal's document needs an unscoped human admin, and a denied cross-principal request is 404 (never 403). A request that changes nothing is a no-op: 200 with the current representation, no revision or `updated_at` change and no event. Each changing mutation advances the revision and records a `principal.updated` audit event with full before and after snapshots. The resulting document is limited to 2 MiB and 64 nested containers (400).
         */
        patch: operations["patchPrincipalSettings"];
        trace?: never;
    };
    "/api/v1/iam/principals/{principal_id}/tokens": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Principal id (human user or service account). */
                principal_id: number;
            };
            cookie?: never;
        };
        /**
         * List a principal's tokens
         * @description Human/IAM family: the caller must be a human (a service account gets 403, even as an admin-group member) and the bearer token must be unscoped (a scoped token gets 403); both gates run before any admin or self check. For a human principal: the human itself or an admin (another human without admin: 403). For a service account: an admin or a human member of its owner group; a service account never manages its own tokens. Retained rows only (purged tokens are gone). Sort fields: id, name, issued, expires_at, last_used_at; default newest first (`-issued`).
         */
        get: operations["listPrincipalTokens"];
        put?: never;
        /**
         * Mint a token for a principal
         * @description Human/IAM family: the caller must be a human (a service account gets 403, even as an admin-group member) and the bearer token must be unscoped (a scoped token gets 403); both gates run before any admin or self check. For a human principal: the human itself or an admin (another human without admin: 403). For a service account: an admin or a human member of its owner group; a service account never manages its own tokens. Needs header `X-Svc-Credential-Approval` naming a fresh credential approval (POST /api/v1/iam/credential-approvals) of kind `create_token` for this `principal_id` with the identical body, created with the same bearer token less than 120 s ago and not yet used; a missing, expired, used or mismatching approval is 403 with `reason: "reauthentication_required"`. The raw token is returned once and never again; `expires_at` is the expiry resolved at approval. Minting for a disabled service account is 409.
         */
        post: operations["createPrincipalToken"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/iam/principals/{principal_id}/tokens/{token_id}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Principal id (human user or service account). */
                principal_id: number;
                /** @description Token id; must belong to the path principal (404 otherwise). */
                token_id: number;
            };
            cookie?: never;
        };
        /**
         * Get a token
         * @description Human/IAM family: the caller must be a human (a service account gets 403, even as an admin-group member) and the bearer token must be unscoped (a scoped token gets 403); both gates run before any admin or self check. For a human principal: the human itself or an admin (another human without admin: 403). For a service account: an admin or a human member of its owner group; a service account never manages its own tokens. Active, expired and revoked retained rows are returned; a purged token or one not belonging to the path principal is 404.
         */
        get: operations["getPrincipalToken"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/iam/principals/{principal_id}/tokens/{token_id}/renew": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Principal id (human user or service account). */
                principal_id: number;
                /** @description Token id; must belong to the path principal (404 otherwise). */
                token_id: number;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Renew a token
         * @description Human/IAM family: the caller must be a human (a service account gets 403, even as an admin-group member) and the bearer token must be unscoped (a scoped token gets 403); both gates run before any admin or self check. For a human principal: the human itself or an admin (another human without admin: 403). For a service account: an admin or a human member of its owner group; a service account never manages its own tokens. Needs header `X-Svc-Credential-Approval` naming a fresh credential approval (POST /api/v1/iam/credential-approvals) of kind `renew_token` for these `principal_id` and `token_id` with the identical body, created with the same bearer token less than 120 s ago and not yet used; a missing, expired, used or mismatching approval is 403 with `reason: "reauthentication_required"`. Creates a new token with the same name, description and exact scope; the original is unchanged. Expired tokens can be renewed; revoked tokens cannot (409). The creation event records `renewed_from_token_id`.
         */
        post: operations["renewPrincipalToken"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/iam/principals/{principal_id}/tokens/{token_id}/revoke": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Principal id (human user or service account). */
                principal_id: number;
                /** @description Token id; must belong to the path principal (404 otherwise). */
                token_id: number;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Revoke a token
         * @description Human/IAM family: the caller must be a human (a service account gets 403, even as an admin-group member) and the bearer token must be unscoped (a scoped token gets 403); both gates run before any admin or self check. For a human principal: the human itself or an admin (another human without admin: 403). For a service account: an admin or a human member of its owner group; a service account never manages its own tokens. Soft revoke: sets `revoked_at`; the row stays readable until purged. Revoking an already revoked token is a no-op (204, no event).
         */
        post: operations["revokePrincipalToken"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/iam/service-accounts": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List service accounts
         * @description Human/IAM family: the caller must be a human (a service account gets 403, even as an admin-group member) and the bearer token must be unscoped (a scoped token gets 403); both gates run before any admin or self check. An admin sees all accounts; other humans see accounts owned by groups they belong to. Filters: id, name, description, identity_scope, owner_group_id, created_by, disabled_at, created_at, updated_at, revision. Sort fields: id, name, identity_scope, created_at, updated_at, revision; default `id`.
         */
        get: operations["listServiceAccounts"];
        put?: never;
        /**
         * Create a service account
         * @description Human/IAM family: the caller must be a human (a service account gets 403, even as an admin-group member) and the bearer token must be unscoped (a scoped token gets 403); both gates run before any admin or self check. An admin for any owner group; a non-admin human only for a group they belong to. The owner group grants management only, no runtime permission. The account has no password and acts only through tokens.
         */
        post: operations["createServiceAccount"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/iam/service-accounts/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Service-account (principal) id. */
                id: number;
            };
            cookie?: never;
        };
        /**
         * Get a service account
         * @description Human/IAM family: the caller must be a human (a service account gets 403, even as an admin-group member) and the bearer token must be unscoped (a scoped token gets 403); both gates run before any admin or self check. An admin, or a human member of the account's owner group; a service account never manages itself.
         */
        get: operations["getServiceAccount"];
        put?: never;
        post?: never;
        /**
         * Delete a service account
         * @description Human/IAM family: the caller must be a human (a service account gets 403, even as an admin-group member) and the bearer token must be unscoped (a scoped token gets 403); both gates run before any admin or self check. An admin, or a human member of the account's owner group; a service account never manages itself. Deletes the principal, its profile, its group memberships, its settings and its tokens.
         */
        delete: operations["deleteServiceAccount"];
        options?: never;
        head?: never;
        /**
         * Update a service account
         * @description Human/IAM family: the caller must be a human (a service account gets 403, even as an admin-group member) and the bearer token must be unscoped (a scoped token gets 403); both gates run before any admin or self check. An admin, or a human member of the account's owner group; a service account never manages itself. A request that changes nothing is a no-op: 200 with the current representation, no revision or `updated_at` change and no event.
         */
        patch: operations["updateServiceAccount"];
        trace?: never;
    };
    "/api/v1/iam/service-accounts/{id}/disable": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Service-account (principal) id. */
                id: number;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Disable a service account
         * @description Human/IAM family: the caller must be a human (a service account gets 403, even as an admin-group member) and the bearer token must be unscoped (a scoped token gets 403); both gates run before any admin or self check. An admin, or a human member of the account's owner group; a service account never manages itself. No body. Sets `disabled_at`, soft-revokes all of the account's tokens and cancels its queued tasks; running tasks run to completion. Minting for a disabled account is 409. Disabling an already disabled account is a no-op (200 with the account, no event). Re-enabling is not offered.
         */
        post: operations["disableServiceAccount"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/iam/users": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List users
         * @description Human/IAM family: the caller must be a human (a service account gets 403, even as an admin-group member) and the bearer token must be unscoped (a scoped token gets 403); both gates run before any admin or self check. Admin only (403 otherwise). Filters: id, name, identity_scope, proper_name, email, created_at, updated_at, revision. Sort fields: the same; default `id`.
         */
        get: operations["listUsers"];
        put?: never;
        /**
         * Create a user
         * @description Human/IAM family: the caller must be a human (a service account gets 403, even as an admin-group member) and the bearer token must be unscoped (a scoped token gets 403); both gates run before any admin or self check. Admin only. Needs header `X-Svc-Credential-Approval` naming a fresh credential approval (POST /api/v1/iam/credential-approvals) of kind `create_user` with the identical body, created with the same bearer token less than 120 s ago and not yet used; a missing, expired, used or mismatching approval is 403 with `reason: "reauthentication_required"`. The user is created in identity scope `local`.
         */
        post: operations["createUser"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/iam/users/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description User (principal) id. */
                id: number;
            };
            cookie?: never;
        };
        /**
         * Get a user
         * @description Human/IAM family: the caller must be a human (a service account gets 403, even as an admin-group member) and the bearer token must be unscoped (a scoped token gets 403); both gates run before any admin or self check. An admin, or the user itself.
         */
        get: operations["getUser"];
        put?: never;
        post?: never;
        /**
         * Delete a user
         * @description Human/IAM family: the caller must be a human (a service account gets 403, even as an admin-group member) and the bearer token must be unscoped (a scoped token gets 403); both gates run before any admin or self check. Admin only. Provider-managed identities are read-only through local mutation operations (403). Deletes the principal, its profile, its group memberships, its settings and its tokens.
         */
        delete: operations["deleteUser"];
        options?: never;
        head?: never;
        /**
         * Update a user
         * @description Human/IAM family: the caller must be a human (a service account gets 403, even as an admin-group member) and the bearer token must be unscoped (a scoped token gets 403); both gates run before any admin or self check. An admin, or the user itself. Changing `password` additionally: Needs header `X-Svc-Credential-Approval` naming a fresh credential approval (POST /api/v1/iam/credential-approvals) of kind `update_user` for this `user_id` with the identical body, created with the same bearer token less than 120 s ago and not yet used; a missing, expired, used or mismatching approval is 403 with `reason: "reauthentication_required"`. Provider-managed identities are read-only through local mutation operations (403). A request that changes nothing is a no-op: 200 with the current representation, no revision or `updated_at` change and no event.
         */
        patch: operations["updateUser"];
        trace?: never;
    };
    "/api/v1/iam/users/{id}/events": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description User (principal) id. */
                id: number;
            };
            cookie?: never;
        };
        /**
         * List audit events of a user
         * @description Wrapper over `GET /api/v1/events` restricted to this user, with the same filters, paging and scoping. User events are collection-less, so only unscoped admins can read them (403 otherwise).
         */
        get: operations["listUserEvents"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/imports": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Submit an import
         * @description Submits an import task (kind `import`). The core sections (`collections` through
         *     `collection_permissions`) are authorized like the corresponding API calls against the
         *     caller's live permissions and token scope; the sections after `collection_permissions`
         *     (`groups`, `principals`, `group_memberships`, `export_templates`, `remote_targets`,
         *     `event_sinks`, `event_subscriptions`) need an unscoped administrator (403 otherwise).
         *
         *     Credential-bearing imports (any `principals` item with a `password`, dry runs included) need
         *     an unscoped human administrator and the header `X-Svc-Credential-Approval` naming a fresh
         *     approval of operation `{kind: "import_credentials", import: <this exact body>}`; a missing
         *     or wrong approval is 403 with `reason: "reauthentication_required"`.
         *
         *     The request is validated when submitted (400 with `details`): a duplicate `ref`, a `*_ref`
         *     that names no item, an item of another section or a later item, a collection key whose `path`
         *     does not end in its `name`, two items naming the same row, an invalid class `json_schema`,
         *     object data failing the schema of a validating class of the same import, a remote target the
         *     remote-target API would refuse, an export template, event sink or event subscription its own
         *     API would refuse (syntax, transport configuration, catalog), or more than 10,000 items.
         *     Natural keys are resolved by the worker: a key that matches nothing fails that item (see the
         *     results); template includes, subscription routing against its sink and sink changes that
         *     subscriptions depend on are checked there too.
         *     Each item is authorized when it runs against the submitter's live permissions intersected
         *     with the token scope recorded at submission. `strict` imports run in one transaction and end
         *     `succeeded` or `failed`; `best_effort` imports may end `partially_succeeded`. A `dry_run`
         *     plans and validates, records results and writes nothing. Passwords are stored only as
         *     Argon2id hashes until the import finishes; a replay with the same `Idempotency-Key` of a
         *     credential-bearing import needs a fresh approval like the first submission.
         */
        post: operations["createImport"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/imports/{import_id}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Id of the import task. */
                import_id: number;
            };
            cookie?: never;
        };
        /**
         * Get an import task
         * @description The task of kind `import`. Tasks are visible to their submitter and to admins; another
         *     principal's task, or a task of another kind, is 404.
         */
        get: operations["getImport"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/imports/{import_id}/results": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Id of the import task. */
                import_id: number;
            };
            cookie?: never;
        };
        /**
         * List the per-item results of an import
         * @description One row per graph item, in processing order (sections in the processing order of
         *     ImportGraph, items in array order). Rows appear as a `best_effort` import commits its items
         *     and at the end of `strict` and dry-run imports. Visible like the task itself (submitter or
         *     admin; otherwise 404).
         */
        get: operations["listImportResults"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/relations/classes": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List class relations
         * @description Lists class relations where the caller holds ReadClassRelation on the collections of both
         *     classes (and both classes are within the token scope). Filters: `id`, `from_class_id`,
         *     `to_class_id`, `from_class_name`, `to_class_name`, `created_at`, `updated_at`, `revision`,
         *     `permissions=<PermissionName>`. Sort fields: `id`, `from_class_id`, `to_class_id`,
         *     `created_at`, `updated_at`, `revision` (default `id`).
         */
        get: operations["listClassRelations"];
        put?: never;
        /**
         * Create a class relation
         * @description Needs CreateClassRelation on the collections of both classes. A missing class is 404. At
         *     most one relation exists per ordered (`from_class_id`, `to_class_id`) pair (409 otherwise);
         *     a class may relate to itself.
         */
        post: operations["createClassRelation"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/relations/classes/{relation_id}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Class-relation id. */
                relation_id: components["parameters"]["ClassRelationIdPath"];
            };
            cookie?: never;
        };
        /**
         * Get a class relation
         * @description Needs ReadClassRelation on the collections of both classes.
         */
        get: operations["getClassRelation"];
        put?: never;
        post?: never;
        /**
         * Delete a class relation
         * @description Needs DeleteClassRelation on the collections of both classes. Also deletes the object
         *     relations made under it (an audit event for each).
         */
        delete: operations["deleteClassRelation"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/relations/objects": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List object relations
         * @description Lists object relations where the caller holds ReadObjectRelation on the collections of both
         *     objects (and both objects are within the token scope). Filters: `id`,
         *     `class_relation_id`, `from_object_id`, `to_object_id`, `created_at`, `updated_at`,
         *     `revision`, `permissions=<PermissionName>`. Sort fields: `id`, `class_relation_id`,
         *     `from_object_id`, `to_object_id`, `created_at`, `updated_at`, `revision` (default `id`).
         */
        get: operations["listObjectRelations"];
        put?: never;
        /**
         * Create an object relation
         * @description Needs CreateObjectRelation on the collections of both objects. `from_object_id` must be an
         *     object of the class relation's `from_class_id` and `to_object_id` one of its `to_class_id`
         *     (400 otherwise), and an object cannot be related to itself (400); a missing class relation
         *     or object is 404. A duplicate relation (same class relation and objects) is 409, and so is
         *     exceeding the class relation's `from_max_relations` or `to_max_relations` (counted under a
         *     lock on both objects, so concurrent creates cannot exceed them).
         */
        post: operations["createObjectRelation"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/relations/objects/{relation_id}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Object-relation id. */
                relation_id: components["parameters"]["ObjectRelationIdPath"];
            };
            cookie?: never;
        };
        /**
         * Get an object relation
         * @description Needs ReadObjectRelation on the collections of both objects.
         */
        get: operations["getObjectRelation"];
        put?: never;
        post?: never;
        /**
         * Delete an object relation
         * @description Needs DeleteObjectRelation on the collections of both objects.
         */
        delete: operations["deleteObjectRelation"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/remote-targets": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List remote targets
         * @description Targets in collections where the caller has ReadRemoteTarget (within the token scope;
         *     resource-scoped tokens need an explicit collection entry). Sort fields: `id`, `name`,
         *     `description`, `collection_id`, `created_at`, `updated_at`, `revision` (default `id`).
         *     Filters: `id`, `name`, `description`, `collection_id` (alias `collections`), `kind` (the
         *     HTTP method value, e.g. `kind=post`), `created_at`, `updated_at`. Other fields or
         *     operators are 400.
         */
        get: operations["listRemoteTargets"];
        put?: never;
        /**
         * Create a remote target
         * @description Needs CreateRemoteTarget on `collection_id`. Templates are validated when saved (syntax and
         *     the shared template recursion/fuel limits); a `url_template` that is a literal non-HTTPS
         *     URL is 400. `class_id` is required when `allowed_subject_types` contains `object` and must
         *     name a class of `collection_id` (otherwise 400); it must be null or omitted otherwise.
         *     A missing collection or class is 404; a name already used in the collection is 409.
         */
        post: operations["createRemoteTarget"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/remote-targets/{target_id}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Remote target id. */
                target_id: components["parameters"]["RemoteTargetId"];
            };
            cookie?: never;
        };
        /**
         * Get a remote target
         * @description Needs ReadRemoteTarget on the target's collection (403 otherwise, also for a scoped-out target).
         */
        get: operations["getRemoteTarget"];
        put?: never;
        post?: never;
        /**
         * Delete a remote target
         * @description Needs DeleteRemoteTarget on the target's collection. Queued invocations of a deleted target fail when the worker picks them up.
         */
        delete: operations["deleteRemoteTarget"];
        options?: never;
        head?: never;
        /**
         * Update a remote target
         * @description Needs UpdateRemoteTarget on the current collection; changing `collection_id` also needs
         *     CreateRemoteTarget on the destination collection. Omitted members are unchanged;
         *     `body_template: null` clears the body template and `class_id: null` clears the class.
         *     The resulting target is validated as a whole (same rules as create). A patch that changes
         *     nothing (including an empty object) returns the current target without advancing
         *     `revision` or emitting an event.
         */
        patch: operations["updateRemoteTarget"];
        trace?: never;
    };
    "/api/v1/remote-targets/{target_id}/events": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Remote target id. */
                target_id: components["parameters"]["RemoteTargetId"];
            };
            cookie?: never;
        };
        /**
         * List audit events of a remote target
         * @description Audit events whose entity is this target (`entity_type` `remote_target`, `entity_id` =
         *     `target_id`: created, updated, deleted, invoked), with the filters, paging, sorting and
         *     visibility of `GET /api/v1/events`; the query filters further narrow that set (a
         *     conflicting `entity_type` or `entity_id` gives an empty page). Needs ReadAudit on the
         *     target's collection (403 otherwise); a target that does not exist is 404.
         */
        get: operations["listRemoteTargetEvents"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/remote-targets/{target_id}/invoke": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Remote target id. */
                target_id: components["parameters"]["RemoteTargetId"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Invoke a remote target for one subject
         * @description Queues a `remote_call` task (status `queued`) and returns it. Needs ExecuteRemoteTarget on
         *     the target's collection and read permission on the subject (ReadCollection, ReadClass,
         *     ReadObject, or ReadClassRelation / ReadObjectRelation on both endpoint collections);
         *     ReadRemoteTarget is not needed. The worker re-checks both before the call.
         *
         *     400: the target is disabled, the subject members do not fit the subject type (see
         *     `InvokeRemoteTargetRequest`), or the subject type is not in the target's
         *     `allowed_subject_types`. 404: the target or subject does not exist, an object is not in
         *     `class_id`, `class_id` differs from the target's `class_id`, or the target's collection is
         *     not one of the subject's collections. 409: `Idempotency-Key` reused with a different
         *     submission (the same key and submission returns the original task, again with 202).
         *     429: the caller already has the maximum number of queued, validating or running
         *     remote-call tasks (`SVC_REMOTE_CALL_MAX_ACTIVE_TASKS_PER_USER`, default 100).
         */
        post: operations["invokeRemoteTarget"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/restores": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Stage and validate a restore
         * @description Unscoped administrators only. Uploads a complete backup document (format 7, or format 6
         *     which restores legacy defaults), validates it completely and stages it without touching
         *     application data. Validation: the envelope's shape; every section present (format 6: all but
         *     `history.event_deliveries`) and no unknown section; every row carries exactly its section's
         *     fields (format 6 sink rows may lack `min_interval_ms`); the manifest counts match; keys are
         *     unique; every link names a row of the document (e.g. `objects.class_id` a class,
         *     `collections.parent_collection_id` a collection, without cycles); and a dry run inserts every
         *     section into a temporary copy of its table, so types, required values, value checks and
         *     unique names are checked too. Every problem is a 400 with `details` naming the section or row.
         *
         *     `sha256` is the lowercase hex SHA-256 of the document's compact JSON text (members in the
         *     uploaded order, no whitespace): for a file downloaded from `getBackupOutput` that is its
         *     `X-Svc-Backup-SHA256`, and re-formatting the file does not change it. The response carries a
         *     one-time `restore_capability` that is returned only here (the server keeps only a keyed hash
         *     of it); keep it, because confirming the restore removes every token, including the caller's.
         *     The stage can be confirmed for 60 minutes (`expires_at`); the staged document is discarded
         *     when the stage finishes or expires. Staging records a collection-less `restore.staged` audit
         *     event (stage id, `sha256`, `backup_version`, `item_counts`; never the document); the
         *     confirmation's `restore.succeeded` / `restore.failed` event records the outcome.
         *     400 for an unsupported `backup_version` or an invalid, incomplete or inconsistent document;
         *     409 while a restore is being applied; 413 when the upload exceeds `SVC_BODY_LIMIT_BYTES`.
         */
        post: operations["createRestore"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/restores/{restore_id}/confirm": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                restore_id: number;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Confirm a staged restore (replaces all data)
         * @description Unscoped human administrators only (403 for service accounts, scoped tokens and
         *     non-admins), with `X-Svc-Credential-Approval` naming a fresh approval of operation
         *     `{kind: "confirm_restore", restore_id, confirmation: <this exact body>}` (missing or wrong
         *     approval: 403 with `reason: "reauthentication_required"`). The restore is applied
         *     synchronously in one transaction: every backed-up table is emptied and refilled from the
         *     staged document; tokens, credential approvals, the event fan-out queue, sink pacing and the
         *     event retention purge's batches (open claims and the ledger of the replaced history; archive
         *     files stay on disk) are cleared; identity sequences continue after the restored ids; restored events are not
         *     delivered to sinks again and restored deliveries are unclaimed. Writes by other requests and
         *     workers wait until the restore commits (reads go on). The 200 body reports
         *     `succeeded`, or `failed` with `error` when applying failed (then no application data
         *     changed, the approval is used and the stage cannot be confirmed again). A `restore.succeeded`
         *     or `restore.failed` event (entity `restore`, id of the stage, metadata with `sha256`,
         *     `backup_version`, `item_counts`) is appended after the restored history.
         *
         *     Identities after success: no token exists any more (the caller's included; read the outcome
         *     with the capability through `getRestoreStatus`, then log in again). Password hashes are never
         *     in a backup, so a restored human can log in only when it is the same identity as before the
         *     restore (same id, name and identity scope): it keeps the password it had just before the
         *     restore. The bootstrap administrator (`admin` in `SVC_ADMIN_IDENTITY_SCOPE`) keeps its current
         *     password by name and scope alone; when the document lacks the admin group, the user `admin`
         *     or its membership, they are re-created (with events), so the administrator can always log in
         *     again. Every other human needs a new password (`PATCH /api/v1/iam/users/{id}`, by an
         *     administrator), and service accounts need new tokens.
         *
         *     403 also for a wrong `restore_capability`; 409 when `sha256` does not match the staged
         *     document, the stage is no longer `validated` (already applied or failed), or another restore
         *     is being applied at that moment (retry); 410 when the stage has expired.
         */
        post: operations["confirmRestore"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/restores/{restore_id}/status": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                restore_id: number;
            };
            cookie?: never;
        };
        /**
         * Get the status of a restore
         * @description Authenticated by the restore capability in `X-Svc-Restore-Capability`, not by a bearer token
         *     (a successful restore removes every token, so the client that confirmed it can still read the
         *     outcome). Never put the capability in the query string. A stage that was not confirmed in time
         *     reads `expired`. 400 when the header is missing, 403 when it does not match the stage, 404
         *     when no stage has this id.
         */
        get: operations["getRestoreStatus"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/search": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Grouped plain-text search over collections, classes and objects
         * @description Matches the text `q` against visible collections, classes and objects (names and
         *     descriptions; class schema text and object JSON string values only when opted in) and
         *     returns one page per kind. Matching is a case-insensitive substring match; each kind is
         *     ordered by id ascending. Kinds not requested return an empty array and a null cursor.
         *     Each kind pages independently: pass the cursor from `next.<kind>` back as
         *     `cursor_<kind>` together with the same `q`, `limit_per_kind` and flags, with the same
         *     token (a cursor is bound to them and signed). Unknown or repeated query parameters, an
         *     empty `kinds`, an unknown kind and an invalid cursor are 400.
         */
        get: operations["searchPlainText"];
        put?: never;
        /**
         * Structured search with the versioned search DSL
         * @description Evaluates one structured search request (DSL version 1) against one target kind.
         *     The body must be `application/json` (otherwise 415) and at most 64 KiB (otherwise 413).
         *     Unknown members are rejected at every level (400).
         *
         *     Fields per target (filter fields / sort fields / default order):
         *
         *     | Target | Filter fields | Sort fields | Default sort |
         *     |---|---|---|---|
         *     | collection | id, name, description, created_at, updated_at, revision | same | id.asc |
         *     | class | id, name, description, collection_id, created_at, updated_at, revision, validate_schema, json_schema | all except validate_schema, json_schema | id.asc |
         *     | object | id, name, description, collection_id, created_at, updated_at, revision, json_data | all except json_data | id.asc |
         *     | audit_event | id, occurred_at, entity_type, entity_id, entity_name, collection_id, action, actor_kind, actor_user_id, initiator_user_id, summary, metadata | id, occurred_at | occurred_at.desc, id.desc |
         *     | user | id, name, identity_scope, proper_name, email, created_at, updated_at, revision | same | id.asc |
         *     | group | id, name, description, identity_scope, managed_by, external_key, last_sync_attempted_at, last_sync_success_at, created_at, updated_at, revision | id, name, description, created_at, updated_at, revision | id.asc |
         *     | service_account | id, name, description, identity_scope, owner_group_id, created_by, disabled_at, created_at, updated_at, revision | id, name, identity_scope, created_at, updated_at, revision | id.asc |
         *
         *     A field of another target, an operator not applicable to the field's type, a bad JSON path,
         *     a bad value, an exceeded expression bound, a cursor reused after changing the request or
         *     token, a sort value too large for a reusable cursor, and an exceeded work bound ("narrow
         *     the query") are all 400.
         *
         *     Authorization: collection, class and object targets return only rows the caller may read
         *     (ReadCollection / ReadClass / ReadObject, within the token scope); an explicit object
         *     target class must be readable (ReadClass), an unresolvable class selector is 404.
         *     audit_event follows audit read visibility (ReadAudit; snapshots redacted for
         *     related-collection-only events). user requires an unscoped human administrator; group and
         *     service_account require an unscoped human (service accounts see the accounts their groups
         *     own, administrators all); otherwise 403.
         */
        post: operations["searchStructured"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/search/stream": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Plain-text search over server-sent events
         * @description Same parameters, validation and visibility as `GET /api/v1/search`. Invalid input is
         *     reported with a normal JSON error response before the stream starts. The stream carries
         *     JSON `data` lines with these events:
         *
         *     - `started` (exactly one, sent before any search work): `{"query": string}` (the trimmed query).
         *     - `batch` (one per requested kind, in completion order, flushed as each kind completes):
         *       `{"kind": "collections" | "classes" | "objects", "collections": [Collection],
         *       "classes": [ClassExpanded], "objects": [InventoryObject], "next": string | null}`.
         *       Only the array named by `kind` is populated, the other two are empty; `next` is the
         *       cursor to pass as `cursor_<kind>`, null when that kind has no more results.
         *     - `done` (last event on success): `{"query": string}`.
         *     - `error` (replaces `done` when any batch fails; the stream then ends):
         *       `{"message": string}` (public message only).
         */
        get: operations["searchPlainTextStream"];
        put?: never;
        /**
         * Structured search over server-sent events
         * @description Same request, validation and authorization as `POST /api/v1/search`. Failures detectable
         *     before streaming (malformed JSON, unsupported version, invalid request, oversized body,
         *     wrong content type, authorization) use the normal JSON error responses. The complete page
         *     is computed first, then streamed; buffered memory is linear in the page limit. Events
         *     (JSON `data` lines):
         *
         *     - `started` (exactly one): `{"version": 1, "kind": <target kind>}`.
         *     - `result` (zero or more, in sort order): `{"kind": <target kind>, "resource": {...}}`,
         *       the same shape as one `SearchResult`.
         *     - `done` (last event on success): `{"version": 1, "kind": <target kind>, "next": string | null,
         *       "total": integer | null, "page_limit": integer}`; `total` is null unless `include_total`
         *       was true; `page_limit` is the effective page size.
         *     - `error` (instead of results or `done` when execution fails after streaming began; the
         *       stream then ends): `{"version": 1, "kind": <target kind>, "message": string}`.
         */
        post: operations["searchStructuredStream"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/system-event-subscriptions": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List system event subscriptions
         * @description Requires an unscoped administrator; otherwise 403. System subscriptions have
         *     `collection_id: null`. Sort and filter fields as for collection subscriptions.
         */
        get: operations["listSystemEventSubscriptions"];
        put?: never;
        /**
         * Create a system event subscription
         * @description Requires an unscoped administrator; otherwise 403. Matches only events with neither a direct
         *     nor a related collection; `filter.collection_ids` and `filter.related_collection_ids` must
         *     therefore be omitted or empty (400). Other validation as for collection subscriptions; names
         *     are unique among system subscriptions (409); a missing `sink_id` is 404. Audited as
         *     `event_subscription.created`.
         */
        post: operations["createSystemEventSubscription"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/system-event-subscriptions/{subscription_id}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description System event subscription id; a collection subscription's id is 404 here. */
                subscription_id: number;
            };
            cookie?: never;
        };
        /**
         * Get a system event subscription
         * @description Requires an unscoped administrator; otherwise 403.
         */
        get: operations["getSystemEventSubscription"];
        put?: never;
        post?: never;
        /**
         * Delete a system event subscription
         * @description Requires an unscoped administrator; otherwise 403. The subscription's delivery rows are
         *     deleted with it. Audited as `event_subscription.deleted`.
         */
        delete: operations["deleteSystemEventSubscription"];
        options?: never;
        head?: never;
        /**
         * Update a system event subscription
         * @description Requires an unscoped administrator; otherwise 403. Same rules as the collection subscription
         *     update; the collection-less scope is fixed by the route.
         */
        patch: operations["updateSystemEventSubscription"];
        trace?: never;
    };
    "/api/v1/tasks": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List tasks
         * @description The caller's own tasks; an administrator using an unscoped token sees all tasks.
         *     Filters: `id`, `kind`, `status`, `submitted_by`, `created_at`, `started_at`, `finished_at`.
         *     `submitted_by` is meant for administrators; for other callers the list is already limited
         *     to their own tasks, so another principal's id yields an empty page. Sort fields: `id`,
         *     `created_at`, `started_at`, `finished_at`; default `id` ascending.
         */
        get: operations["listTasks"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/tasks/{task_id}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Task id. */
                task_id: number;
            };
            cookie?: never;
        };
        /**
         * Get a task
         * @description The submitter or an administrator (unscoped token) may read a task; for anyone else the task
         *     is reported as 404. Tasks carry no revision, so no `ETag` is returned.
         */
        get: operations["getTask"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/tasks/{task_id}/cancel": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Task id. */
                task_id: number;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Cancel a task
         * @description The submitter or an administrator (unscoped token) may cancel; for anyone else the task is
         *     reported as 404. No request body. A `queued` task becomes `cancelled` at once. A
         *     `validating` or `running` task gets a cancel request: the returned task still shows its
         *     current status and the worker stops at its next checkpoint, ending `cancelled`. Cancelling
         *     an already `cancelled` task (or repeating a pending cancel request) is a no-op returning the
         *     task. A task that already finished otherwise (`succeeded`, `failed`, `partially_succeeded`)
         *     is 409.
         */
        post: operations["cancelTask"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/tasks/{task_id}/events": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Task id. */
                task_id: number;
            };
            cookie?: never;
        };
        /**
         * List the events of a task
         * @description Task-focused history under the task authorization model (submitter or administrator with an
         *     unscoped token; others get 404). Sort fields: `id`, `created_at`; default `id` ascending
         *     (chronological).
         */
        get: operations["listTaskEvents"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/docs": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Interactive API reference page
         * @description HTML page rendering `/api-doc/openapi.json`. Its scripts and styles are served by this
         *     service itself (no external network access is needed to render it).
         */
        get: operations["getApiReference"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/healthz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Liveness probe
         * @description 200 while the process is up; does not touch the database.
         */
        get: operations["getHealth"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/metrics": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Prometheus metrics
         * @description Metrics in the Prometheus text exposition format (`Content-Type:
         *     text/plain; version=0.0.4; charset=utf-8`), names prefixed `svc_`. Labels never carry ids,
         *     names or IP addresses.
         */
        get: operations["getMetrics"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/readyz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Readiness probe
         * @description 200 when the database is reachable and fully migrated; 503 otherwise.
         */
        get: operations["getReadiness"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
}
export type webhooks = Record<string, never>;
export interface components {
    schemas: {
        /** @description Effective configuration of the answering process: every SVC_* setting by name. Settings that can carry a secret (database URL, admin password, token hash key, Redis URL) show "[redacted]" when set; unset optional settings are null. */
        AdminConfig: {
            /** @enum {string} */
            runtime_role: "all" | "api" | "worker";
            settings: {
                [key: string]: string | number | boolean | null;
            };
            /** @description Service version (the OpenAPI description version). */
            version: string;
        };
        /** @description Any JSON value. */
        AnyValue: unknown;
        AuthProviders: {
            /** @description Configured provider (identity scope) names; always includes `local`. */
            providers: string[];
        };
        /**
         * @description Full logical backup, format 7, read from one consistent snapshot (one REPEATABLE READ,
         *     read-only transaction). Every section is the rows of one table; a row carries exactly the
         *     section's fields, which are the table's column names (so `objects` rows have `class_id`, the
         *     `svc_class_id` of the wire). Ids, revisions and timestamps are preserved; timestamps are
         *     RFC 3339 text in UTC with the database's full (microsecond) precision; rows are ordered by
         *     their key. The document is written as compact JSON (no whitespace).
         *
         *     Never contains password hashes, raw or hashed tokens, token scopes, credential approvals,
         *     secret values (sinks and remote targets hold only secret aliases), restore stages, task
         *     request documents (they may carry credentials), stored export or backup outputs,
         *     idempotency keys, transient scheduling (task and delivery claims, deferrals, the fan-out
         *     queue, sink pacing) or login rate-limit state. After a restore every token is gone and only
         *     the passwords described under `confirmRestore` still work.
         *
         *     Format 6 (accepted by `POST /api/v1/restores` only) has the same envelope with these legacy
         *     differences: `event_sinks` rows may lack `min_interval_ms` (restored as null: no pacing);
         *     webhook `config` without a `response` member uses the default response policy; history has
         *     no `event_deliveries` (restored empty) and must not name it.
         */
        BackupDocument: {
            /**
             * @description 7 for documents written by this service; 6 is accepted on restore only.
             * @enum {integer}
             */
            backup_version: 6 | 7;
            created_at: components["schemas"]["Timestamp"];
            /** @description Terminal history; null when the backup was requested with `include_history` false. */
            history: {
                /**
                 * @description Terminal delivery rows only (`succeeded`, `dead`): `{id, event_id, subscription_id,
                 *     sink_id, purpose, status, attempts, last_error, created_at, updated_at}`. Always
                 *     present in format 7, absent in format 6. Claims, deferrals and `next_attempt_at` are
                 *     not backed up (transient scheduling resets: restored rows are unclaimed and due now).
                 */
                event_deliveries?: components["schemas"]["BackupRows"];
                /** @description Audit events, the stored columns of the envelope with their internal `id`: `{id, event_id, occurred_at, entity_type, entity_id, entity_name, collection_id, related_collection_ids, action, actor_kind, actor_user_id, initiator_user_id, task_id, provenance, request_id, correlation_id, summary, before, after, before_revision, after_revision, metadata, schema_version}`. Restored events are not delivered to sinks again. */
                events: components["schemas"]["BackupRows"];
                /** @description `{task_id, seq, item_ref, entity_kind, action, outcome, error, entity_id}` of the backed-up tasks. */
                import_results: components["schemas"]["BackupRows"];
                /** @description Sanitized remote-call result rows of the backed-up tasks: `{id, task_id, target_id, subject_type, subject_id, method, url, response_status, response_headers, body_preview, body_truncated, duration_ms, success, error, created_at}`. */
                remote_call_results: components["schemas"]["BackupRows"];
                /** @description `{id, task_id, event_type, message, data, created_at}` of the backed-up tasks. */
                task_events: components["schemas"]["BackupRows"];
                /** @description Finished tasks only (succeeded, failed, partially_succeeded, cancelled): `{id, kind, status, submitted_by, cancel_requested, attempts, progress, summary, details, created_at, started_at, finished_at, updated_at}`. Queued and running tasks, request documents and outputs are not backed up. */
                tasks: components["schemas"]["BackupRows"];
            } | null;
            manifest: {
                /**
                 * @description Row count per section, keyed `<section>` for state and `history.<section>` for history
                 *     (no history keys when `history` is null). A restore requires exactly these keys with
                 *     counts equal to the sections' lengths.
                 */
                item_counts: {
                    [key: string]: number;
                };
            };
            /** @description Service version that wrote the document, e.g. `0.0.18`. */
            source_version: string;
            /** @description Authoritative state, one array of rows per section, in restore order (referenced sections first). */
            state: {
                /** @description `{id, from_class_id, to_class_id, forward_alias, reverse_alias, from_max_relations, to_max_relations, created_at, updated_at, revision}` */
                class_relations: components["schemas"]["BackupRows"];
                /** @description `{id, name, description, collection_id, json_schema, validate_schema, created_at, updated_at, revision}` */
                classes: components["schemas"]["BackupRows"];
                /** @description `{collection_id, group_id, permission, created_at}`: one row per granted PermissionName. */
                collection_permissions: components["schemas"]["BackupRows"];
                /** @description `{id, name, description, parent_collection_id, created_at, updated_at, revision}`; the parent links must form a tree. */
                collections: components["schemas"]["BackupRows"];
                /** @description `{id, class_id, key, label, description, enabled, operation, result_type, visibility, owner_user_id, created_at, updated_at, revision}`: shared and personal definitions. */
                computed_fields: components["schemas"]["BackupRows"];
                /** @description `{id, name, kind, config, secret_ref, enabled, min_interval_ms, created_at, updated_at, revision}`: the full `config` (webhook headers, templates, response policy, `url_secret_ref` alias) and the pacing `min_interval_ms` of `delivery_policy`. */
                event_sinks: components["schemas"]["BackupRows"];
                /** @description `{id, collection_id, sink_id, name, description, entity_types, actions, filter, routing, enabled, created_at, updated_at, revision}`: collection and system (`collection_id` null) subscriptions. */
                event_subscriptions: components["schemas"]["BackupRows"];
                /** @description `{id, collection_id, name, description, kind, content_type, template, default_query, created_at, updated_at, revision}`: export and fragment templates. */
                export_templates: components["schemas"]["BackupRows"];
                /** @description `{group_id, principal_id, created_at}` */
                group_memberships: components["schemas"]["BackupRows"];
                /** @description `{id, name, description, identity_scope, managed_by, external_key, last_sync_attempted_at, last_sync_success_at, created_at, updated_at, revision}` */
                groups: components["schemas"]["BackupRows"];
                /** @description `{id, class_relation_id, from_object_id, to_object_id, created_at, updated_at, revision}` */
                object_relations: components["schemas"]["BackupRows"];
                /** @description `{id, name, description, collection_id, class_id, json_data, created_at, updated_at, revision}` */
                objects: components["schemas"]["BackupRows"];
                /** @description `{id, kind, name, identity_scope, provider_managed, external_subject, last_synced_at, settings, settings_revision, created_at, updated_at, revision}`: humans and service accounts, with their settings document. */
                principals: components["schemas"]["BackupRows"];
                /** @description `{id, collection_id, class_id, name, description, method, url_template, headers_template, body_template, auth_config, allowed_subject_types, timeout_ms, enabled, created_at, updated_at, revision}`; `auth_config` names secret aliases only. */
                remote_targets: components["schemas"]["BackupRows"];
                /** @description `{principal_id, description, owner_group_id, created_by, disabled_at}` */
                service_accounts: components["schemas"]["BackupRows"];
                /** @description `{principal_id, email, proper_name}`: human profiles, never the password hash. */
                users: components["schemas"]["BackupRows"];
            };
        };
        BackupRequest: {
            /**
             * @description Include the `history` sections; false writes `history: null` (a restore then starts with empty history).
             * @default true
             */
            include_history: boolean;
        };
        /** @description Rows of one backup section. */
        BackupRows: {
            [key: string]: unknown;
        }[];
        /** @description A class (plain form, with `collection_id`). */
        Class: {
            collection_id: components["schemas"]["Id"];
            created_at: components["schemas"]["Timestamp"];
            /** @description Empty string when not set. */
            description: string;
            id: components["schemas"]["Id"];
            /** @description JSON Schema 2020-12 document (local `#/` refs only), or null when the class has none. */
            json_schema: unknown;
            /** @description Globally unique class name. */
            name: string;
            revision: components["schemas"]["Revision"];
            updated_at: components["schemas"]["Timestamp"];
            /** @description When true, object `json_data` is validated against `json_schema` on every write. */
            validate_schema: boolean;
        };
        /** @description A class with its `collection` object in place of `collection_id`. */
        ClassExpanded: {
            collection: components["schemas"]["Collection"];
            created_at: components["schemas"]["Timestamp"];
            /** @description Empty string when not set. */
            description: string;
            id: components["schemas"]["Id"];
            /** @description JSON Schema 2020-12 document (local `#/` refs only), or null when the class has none. */
            json_schema: unknown;
            /** @description Globally unique class name. */
            name: string;
            revision: components["schemas"]["Revision"];
            updated_at: components["schemas"]["Timestamp"];
            /** @description When true, object `json_data` is validated against `json_schema` on every write. */
            validate_schema: boolean;
        };
        /** @description Allows object relations from objects of `from_class_id` to objects of `to_class_id`. */
        ClassRelation: {
            created_at: components["schemas"]["Timestamp"];
            /** @description Label of the relation seen from the `from` side. */
            forward_alias: string | null;
            from_class_id: components["schemas"]["Id"];
            /** @description Most object relations one `from` object may have under this relation; null is unlimited. */
            from_max_relations: number | null;
            id: components["schemas"]["Id"];
            /** @description Label of the relation seen from the `to` side. */
            reverse_alias: string | null;
            revision: components["schemas"]["Revision"];
            to_class_id: components["schemas"]["Id"];
            /** @description Most object relations one `to` object may have under this relation; null is unlimited. */
            to_max_relations: number | null;
            updated_at: components["schemas"]["Timestamp"];
        };
        /** @description A collection. `parent_collection_id` is null for a top-level collection. */
        Collection: {
            created_at: components["schemas"]["Timestamp"];
            /** @description Empty string when none was given. */
            description: string;
            id: components["schemas"]["Id"];
            name: string;
            parent_collection_id: components["schemas"]["NullableId"];
            revision: components["schemas"]["Revision"];
            updated_at: components["schemas"]["Timestamp"];
        };
        /** @description Body of `updateCollectionParent`. */
        CollectionParentUpdate: {
            /** @description New parent collection, or null to make the collection top-level (administrator only). */
            parent_collection_id: components["schemas"]["Id"] | null;
        };
        /** @description One direct grant of a permission to a group on a collection. */
        CollectionPermissionRow: {
            collection_id: components["schemas"]["Id"];
            created_at: components["schemas"]["Timestamp"];
            group_id: components["schemas"]["Id"];
            permission: components["schemas"]["PermissionName"];
        };
        /** @description A computed-field definition. */
        ComputedField: {
            class_id: components["schemas"]["Id"];
            created_at: components["schemas"]["Timestamp"];
            description: string;
            /** @description Disabled fields are not computed and cannot be used in filters, sorts or aggregates. */
            enabled: boolean;
            id: components["schemas"]["Id"];
            key: string;
            label: string;
            operation: components["schemas"]["ComputedFieldOperation"];
            /** @description Owning human for personal fields; null for shared fields. */
            owner_user_id: components["schemas"]["NullableId"];
            /** @enum {string} */
            result_type: "string" | "number" | "integer" | "boolean" | "object" | "array";
            revision: components["schemas"]["Revision"];
            updated_at: components["schemas"]["Timestamp"];
            /** @enum {string} */
            visibility: "shared" | "personal";
        };
        /**
         * @description How a computed value is derived from `json_data`. A path is "present" when it resolves to
         *     a non-null value. `first_non_null`: the first present value. `sum`, `average`, `min`,
         *     `max`: over the present values, which must all be numbers (a non-number is an evaluation
         *     error for that object); null when none is present; result type `number` or `integer`.
         *     `all_present`, `any_present`: booleans. `count_present`: the number of present values
         *     (`integer` or `number`). `all_present_and_equal`: every path present and all values equal
         *     (numbers by value). The result must have the field's `result_type` (`integer`: an integral
         *     number within ±(2^53-1)), otherwise the object reports an error for that key in
         *     `computed.*.errors`. Values are evaluated in the database, so lists can filter
         *     (`computed.<visibility>.<key>[__<op>]=value` with the JSON-path operators; a failed value
         *     never matches) and sort (result types `string`, `number`, `integer`, `boolean`) on them.
         */
        ComputedFieldOperation: {
            /** @description RFC 6901 pointers into `json_data`, evaluated in order. */
            paths: string[];
            /** @enum {string} */
            type: "first_non_null" | "sum" | "average" | "min" | "max" | "all_present" | "any_present" | "count_present" | "all_present_and_equal";
        };
        /** @description Computed-field values of one object, keyed by computed-field `key`. */
        ComputedValueSet: {
            /** @description Evaluation error message per field key that failed for this object. */
            errors: {
                [key: string]: string;
            };
            /** @description Value per enabled field key; null when the field produced no value or failed. */
            values: {
                [key: string]: unknown;
            };
        };
        CredentialApprovalCreated: {
            /** @description Approval id to send as `X-Svc-Credential-Approval` with the approved request. */
            approval: string;
            record: components["schemas"]["CredentialApprovalRecord"];
            /** @description The resolved token expiry for create_token and renew_token; null for other kinds. */
            token_expires_at: components["schemas"]["NullableTimestamp"];
        };
        /** @description Stored credential approval. It never contains the password or the approved body, only a binding to them. */
        CredentialApprovalRecord: {
            /** @description The human principal that re-authenticated. */
            approved_by: components["schemas"]["Id"];
            /** @description When the approved request used it; null while unused. */
            consumed_at: components["schemas"]["NullableTimestamp"];
            created_at: components["schemas"]["Timestamp"];
            /** @description At most 120 s after created_at. */
            expires_at: components["schemas"]["Timestamp"];
            /** @description Opaque approval id (the value for `X-Svc-Credential-Approval`). */
            id: string;
            /** @enum {string} */
            kind: "create_token" | "renew_token" | "create_user" | "update_user" | "import_credentials" | "confirm_restore";
            /**
             * @description `pending` until used or expired; one use only.
             * @enum {string}
             */
            status: "pending" | "consumed" | "expired";
            /** @description `principal_id` (create_token, renew_token) or `user_id` (update_user); null otherwise. */
            target_principal_id: components["schemas"]["NullableId"];
            /** @description `restore_id` for confirm_restore; null otherwise. */
            target_restore_id: components["schemas"]["NullableId"];
            /** @description `token_id` for renew_token; null otherwise. */
            target_token_id: components["schemas"]["NullableId"];
            /** @description Expiry resolved for create_token and renew_token (copied into the token); null otherwise. */
            token_expires_at: components["schemas"]["NullableTimestamp"];
            /** @description The bearer token the approval is bound to; only requests with this token can use it. */
            token_id: components["schemas"]["Id"];
        };
        /** @description Fresh authentication of the calling human for one later credential operation. */
        CredentialApprovalRequest: {
            /** @description The later operation: its kind, its path ids and its exact body. */
            operation: components["schemas"]["CredentialOperationCreateToken"] | components["schemas"]["CredentialOperationRenewToken"] | components["schemas"]["CredentialOperationCreateUser"] | components["schemas"]["CredentialOperationUpdateUser"] | components["schemas"]["CredentialOperationImportCredentials"] | components["schemas"]["CredentialOperationConfirmRestore"];
            /** @description Current password of the calling human, 1..4096 characters. */
            password: string;
        };
        /** @description Approves `POST /api/v1/restores/{restore_id}/confirm` with body `confirmation`. */
        CredentialOperationConfirmRestore: {
            /** @description The exact body of the later confirm request. */
            confirmation: components["schemas"]["RestoreConfirmRequest"];
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            kind: "confirm_restore";
            restore_id: components["schemas"]["Id"];
        };
        /** @description Approves `POST /api/v1/iam/principals/{principal_id}/tokens` with body `token`. */
        CredentialOperationCreateToken: {
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            kind: "create_token";
            principal_id: components["schemas"]["Id"];
            token: components["schemas"]["TokenMintRequest"];
        };
        /** @description Approves `POST /api/v1/iam/users` with body `user`. */
        CredentialOperationCreateUser: {
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            kind: "create_user";
            user: components["schemas"]["NewUser"];
        };
        /** @description Approves `POST /api/v1/imports` with body `import` when the import carries credentials. */
        CredentialOperationImportCredentials: {
            /** @description The exact body of the later `POST /api/v1/imports` request. */
            import: components["schemas"]["ImportRequest"];
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            kind: "import_credentials";
        };
        /** @description Approves `POST /api/v1/iam/principals/{principal_id}/tokens/{token_id}/renew` with body `token`. */
        CredentialOperationRenewToken: {
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            kind: "renew_token";
            principal_id: components["schemas"]["Id"];
            token: components["schemas"]["TokenRenewRequest"];
            token_id: components["schemas"]["Id"];
        };
        /** @description Approves `PATCH /api/v1/iam/users/{user_id}` with body `user` (needed when it changes the password). */
        CredentialOperationUpdateUser: {
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            kind: "update_user";
            user: components["schemas"]["UpdateUser"];
            user_id: components["schemas"]["Id"];
        };
        /**
         * @description Delivery pipeline snapshot. Ages are whole seconds (null when nothing is waiting). Wakeup
         *     counters count wakeups of the workers running in the answering process since it started
         *     (0 when that process runs no workers of that kind).
         */
        DeliveryHealth: {
            /** @description Delivery backlog over all delivery rows. */
            delivery: {
                /** @description Delivery rows by status. */
                counts: {
                    dead: number;
                    failed: number;
                    in_flight: number;
                    pending: number;
                    succeeded: number;
                };
                /** @description Seconds since the oldest due `pending` or `failed` row became due. */
                oldest_due_age_seconds: number | null;
                /** @description `failed` rows that will be retried automatically. */
                retryable_failed: number;
                settings: {
                    /** @description `SVC_EVENT_DELIVERY_BATCH_SIZE` (a worker claims at most min(batch_size, 8)). */
                    batch_size: number;
                    lock_timeout_ms: number;
                    max_attempts: number;
                    poll_interval_ms: number;
                    retry_backoff_base_ms: number;
                    retry_backoff_max_ms: number;
                    transport_timeout_ms: number;
                    /** @description `SVC_EVENT_DELIVERY_WORKERS` (0 = delivery disabled). */
                    workers: number;
                };
                /** @description `in_flight` rows whose lock expired. */
                stale_claims: number;
                wakeups: {
                    notification: number;
                    poll: number;
                };
            };
            /** @description Fan-out backlog (events not yet turned into delivery rows). */
            fanout: {
                /** @description `SVC_EVENT_FANOUT_BATCH_SIZE`. */
                batch_size: number;
                /** @description Events claimed by a fan-out worker with an unexpired lock. */
                in_flight_claims: number;
                /** @description `SVC_EVENT_FANOUT_LOCK_TIMEOUT_MS`. */
                lock_timeout_ms: number;
                oldest_pending_age_seconds: number | null;
                /** @description Events not yet fanned out. */
                pending_events: number;
                /** @description `SVC_EVENT_FANOUT_POLL_INTERVAL_MS`. */
                poll_interval_ms: number;
                /** @description Fan-out claims whose lock expired. */
                stale_claims: number;
                wakeups: {
                    /** @description Wakeups by database notification. */
                    notification: number;
                    /** @description Wakeups by the poll interval. */
                    poll: number;
                };
                /** @description `SVC_EVENT_FANOUT_WORKERS`. */
                workers: number;
            };
            /** @description Every sink, ordered by id. */
            sinks: {
                counts: {
                    dead: number;
                    failed: number;
                    in_flight: number;
                    pending: number;
                    succeeded: number;
                };
                enabled: boolean;
                /** @enum {string} */
                kind: "webhook" | "amqp" | "redis_stream" | "email";
                name: string;
                oldest_due_age_seconds: number | null;
                retryable_failed: number;
                sink_id: components["schemas"]["Id"];
                stale_claims: number;
                /** @description Number of subscriptions using the sink. */
                subscriptions: number;
            }[];
            /** @description Every collection and system subscription, ordered by id. */
            subscriptions: {
                /** @description Null for system subscriptions. */
                collection_id: number | null;
                counts: {
                    dead: number;
                    failed: number;
                    in_flight: number;
                    pending: number;
                    succeeded: number;
                };
                enabled: boolean;
                name: string;
                oldest_due_age_seconds: number | null;
                retryable_failed: number;
                sink_enabled: boolean;
                sink_id: components["schemas"]["Id"];
                stale_claims: number;
                subscription_id: components["schemas"]["Id"];
            }[];
        };
        /**
         * @description Per-sink send spacing shared across workers and subscriptions; events are never dropped.
         *     Deferred rows stay `pending` with `deferred_reason` `configured_rate` and `next_attempt_at`.
         *     Default `{min_interval_ms: null}`.
         */
        DeliveryPolicy: {
            /** @description Minimum milliseconds between sends of this sink; null means no spacing. */
            min_interval_ms: number | null;
        };
        /**
         * @description One grant that applies to `target_collection_id` through one of the principal's groups.
         *     `source_collection_id` is where the grant is stored: the target itself (`depth` 0,
         *     `inherited` false) or an ancestor `depth` levels up (`inherited` true).
         */
        EffectivePermissionRow: {
            depth: number;
            group_id: components["schemas"]["Id"];
            inherited: boolean;
            permission: components["schemas"]["PermissionName"];
            source_collection_id: components["schemas"]["Id"];
            target_collection_id: components["schemas"]["Id"];
        };
        Error: {
            details?: {
                message: string;
                path: string;
            }[];
            /** @description HTTP reason phrase. */
            error: string;
            guidance?: string;
            /** @description Public message. */
            message: string;
            /** @description Stable machine code such as stale_resource. */
            reason?: string;
        };
        /**
         * @description Audit event envelope.
         *
         *     Class-schema lifecycle (`entity_type: class_schema`, `entity_id` = the class, its
         *     `collection_id`). Schema changes are synchronous, so each is one transaction:
         *     - `staged` then `activated`, in the transaction of a class create or update that sets,
         *       replaces, enables or disables a schema (`json_schema` or `validate_schema` changes and a
         *       schema remains). `metadata`: `class_id`, `change` (`schema_set`, `schema_replaced`,
         *       `validation_enabled`, `validation_disabled`), `schema_digest` and
         *       `previous_schema_digest` (`sha256:<hex>` of the schema's canonical JSON, or null),
         *       `validate_schema`, `previous_validate_schema`; `activated` adds `objects_checked` (stored
         *       objects read for the change) and `compliance_changes`. `before`/`after` are
         *       `{json_schema, validate_schema}` (`before` null when there was no schema).
         *     - `deleted` when an update removes the schema (`cause: schema_removed`) or a class with a
         *       schema is deleted (`cause: class_deleted`).
         *     - `abandoned` when a change is refused with 409 `existing_objects_invalid`. It is a record
         *       of the attempt, written after the refusal in its own transaction (the class is
         *       unchanged; a failure to write the record never changes the 409). `metadata` adds
         *       `reason`, `objects_checked`, `failing_objects` (all of them) and `sample_object_ids` (the
         *       first `sample_cap` = 10, the objects listed in the 409); `after` is the attempted
         *       configuration. Dry-run imports record nothing.
         *     - `work_requested` and `cancelled` are never emitted: no schema change runs as a background
         *       step. They stay in the catalog so that subscriptions may name them.
         *
         *     Object compliance (`entity_type: object_validation`, `entity_id` = the object, its
         *     collection): an object is compliant when its `json_data` matches its class's `json_schema`
         *     (a class without a schema has nothing to violate). `before`/`after` are always null and no
         *     object values are recorded: `metadata.violations` lists at most 10 safe categories
         *     `{keyword, instance_path}` (the JSON Schema keyword and the RFC 6901 pointer in
         *     `json_data`). Every `metadata` carries `class_id`, `cause`, `compliance_changed` and
         *     `schema_digest`.
         *     - `updated` (`compliance_changed: true`, `compliant`) each time an object's compliance
         *       flips: an object write under a schema that is not enforced (`cause: object_written`; a
         *       new object counts as compliant before it), or a schema set, replaced or removed
         *       (`cause: schema_changed`, in the class change's transaction). With `validate_schema: true`
         *       every stored object is compliant (writes that would not be are refused with 400 and
         *       recorded nowhere), so nothing flips there. The latest `updated` event of an object (or
         *       none: compliant) therefore states its compliance.
         *     - `failed` (`compliance_changed: false`, `cause: schema_change_refused`,
         *       `class_schema_event_id` = the `abandoned` event's `event_id`) for each sampled object of
         *       a refused schema change: the impact of a change that never applied.
         *     - `succeeded` is never emitted: a successful check of a compliant object is not recorded
         *       (the `object` event and the invariant above say it), to keep the stream small.
         */
        Event: {
            action: string;
            /** @enum {string} */
            actor_kind: "user" | "worker" | "system";
            actor_user_id: number | null;
            /** @description Snapshot after the change; null when absent or redacted. */
            after: unknown;
            after_revision: number | null;
            /** @description Snapshot before the change; null when absent or redacted. */
            before: unknown;
            before_revision: number | null;
            collection_id: number | null;
            correlation_id: string | null;
            entity_id: number | null;
            entity_name: string | null;
            entity_type: string;
            /** Format: uuid */
            event_id: string;
            id: number;
            initiator_user_id: number | null;
            metadata: {
                [key: string]: unknown;
            };
            occurred_at: components["schemas"]["Timestamp"];
            provenance: {
                actor: {
                    /** @enum {string} */
                    kind: "user" | "worker" | "system";
                    principal: {
                        id: number;
                        name: string | null;
                    } | null;
                };
                initiator: {
                    name: string | null;
                    principal_id: number;
                } | null;
                task_id: number | null;
            };
            request_id: string | null;
            /** @enum {integer} */
            schema_version: 1 | 2;
            summary: string | null;
            task_id: number | null;
        };
        /** @description One delivery of one event through one subscription to its sink. */
        EventDelivery: {
            /**
             * @description Failed attempts consumed (rate-limit and spacing deferrals do not count); limit
             *     `SVC_EVENT_DELIVERY_MAX_ATTEMPTS`. A secret alias that cannot be resolved is a failed
             *     attempt without sending. Retries wait `SVC_EVENT_DELIVERY_RETRY_BACKOFF_BASE_MS` ·
             *     2^(attempts−1), at most `SVC_EVENT_DELIVERY_RETRY_BACKOFF_MAX_MS`.
             */
            attempts: number;
            created_at: components["schemas"]["Timestamp"];
            /**
             * @description Why a `pending` row is deferred (sink `delivery_policy` or destination rate limit); null otherwise.
             * @enum {string|null}
             */
            deferred_reason: "configured_rate" | "provider_rate" | null;
            /**
             * Format: uuid
             * @description UUID of the delivered event (the envelope's `event_id`).
             */
            event_id: string;
            id: components["schemas"]["Id"];
            /** @description Sanitized error of the last failed attempt; never contains response contents, URLs or secrets. */
            last_error: string | null;
            locked_until: components["schemas"]["NullableTimestamp"];
            next_attempt_at: components["schemas"]["Timestamp"];
            /**
             * @description `event` from fan-out, `test` from `POST /api/v1/event-sinks/{sink_id}/test`.
             * @enum {string}
             */
            purpose: "event" | "test";
            sink_id: components["schemas"]["Id"];
            /**
             * @description `pending` waits for `next_attempt_at`; `in_flight` is claimed by a worker until
             *     `locked_until`; `failed` awaits a retry with backoff after a failed attempt; `succeeded`
             *     and `dead` are terminal (dead after the attempt limit, a permanent failure, or the
             *     admin dead action).
             * @enum {string}
             */
            status: "pending" | "in_flight" | "succeeded" | "failed" | "dead";
            subscription_id: components["schemas"]["Id"];
            updated_at: components["schemas"]["Timestamp"];
        };
        /** @description A global event sink (transport definition). */
        EventSink: {
            config: components["schemas"]["EventSinkConfig"];
            created_at: components["schemas"]["Timestamp"];
            delivery_policy: components["schemas"]["DeliveryPolicy"];
            enabled: boolean;
            id: components["schemas"]["Id"];
            /** @enum {string} */
            kind: "webhook" | "amqp" | "redis_stream" | "email";
            name: string;
            revision: components["schemas"]["Revision"];
            /** @description Secret alias (never the secret value); null when no secret is used. */
            secret_ref: string | null;
            updated_at: components["schemas"]["Timestamp"];
        };
        /**
         * @description Kind-specific sink configuration (default `{}`). One object for all kinds; each member says
         *     which kind it belongs to. Members of another kind are rejected with 400; per-kind required
         *     members are listed here and enforced by the server (400).
         *     - webhook: all members optional (`headers`, `timeout_ms`, `max_response_bytes`,
         *       `max_request_bytes`, `body_template`, `response`, `url_secret_ref`).
         *     - amqp: `uri` and `exchange` required; `exchange_type`, `declare_exchange`, `durable`,
         *       `mandatory`, `max_payload_bytes` optional.
         *     - redis_stream: `uri` required; `max_len`, `approximate_trim`, `max_payload_bytes`,
         *       `io_timeout_ms` optional.
         *     - email: `uri`, `from`, `subject_template` and `body_template` required; `reply_to`,
         *       `max_payload_bytes` optional.
         *     URIs (amqp, redis_stream, email) must use a TLS scheme (`amqps`, `rediss`, `smtps`), must not
         *     contain literal credentials, and must contain the placeholder `{secret}` when the sink has a
         *     `secret_ref`. Templates are Jinja-style, never see secrets and cannot change transport,
         *     headers or credentials. Responses return the configuration as stored (defaults not filled).
         */
        EventSinkConfig: {
            /**
             * @description redis_stream: use approximate (`~`) trimming with `max_len`.
             * @default true
             */
            approximate_trim: boolean;
            /**
             * @description webhook: optional template that must render valid JSON; the rendered JSON is the request
             *     body instead of the envelope. Context: envelope fields at top level, the whole envelope
             *     as `event`, `test` (boolean) and `test_marker` (`[TEST] ` for tests, else empty). Use a
             *     JSON-encoding filter for inserted values. email (required): text body template that
             *     must render non-empty text; context: envelope fields at top level plus `event`,
             *     `test` and `test_marker` as for webhooks.
             */
            body_template?: string | null;
            /**
             * @description amqp: declare the exchange before publishing (not for names starting with `amq.`); a declaration that conflicts with the existing exchange fails permanently.
             * @default false
             */
            declare_exchange: boolean;
            /**
             * @description amqp: declare the exchange durable and publish persistent messages.
             * @default true
             */
            durable: boolean;
            /**
             * @description amqp (required): exchange to publish to, at most 255 bytes of letters, digits, `-`, `_`,
             *     `.` or `:` (empty = the default exchange, not with `declare_exchange`). Routing key is
             *     `<entity_type>.<action>`; the message id is the event UUID.
             */
            exchange?: string;
            /**
             * @description amqp: exchange type used when declaring the exchange.
             * @default topic
             * @enum {string}
             */
            exchange_type: "direct" | "fanout" | "topic" | "headers";
            /** @description email (required): one sender address, e.g. `Inventory <inventory@example.com>`. */
            from?: string;
            /**
             * @description webhook: static request headers (name to string value). Transport-controlled names are
             *     rejected (400): Host, Content-Length, Content-Type, Transfer-Encoding, Connection,
             *     Keep-Alive, Proxy-Connection, Proxy-Authorization, TE, Trailer, Upgrade, HTTP2-Settings,
             *     Authorization, Idempotency-Key and any `X-Svc-*` name.
             */
            headers?: {
                [key: string]: string;
            };
            /**
             * @description redis_stream: connection and socket I/O timeout (default 25,000); capped by `SVC_EVENT_DELIVERY_TRANSPORT_TIMEOUT_MS`.
             * @default 25000
             */
            io_timeout_ms: number;
            /**
             * @description amqp: publish with the mandatory flag; an unroutable message is a failed attempt.
             * @default false
             */
            mandatory: boolean;
            /** @description redis_stream: trim the stream to this length on each add; null or omitted never trims. */
            max_len?: number | null;
            /**
             * @description amqp, redis_stream, email: largest payload in bytes (default 1,000,000): the message
             *     body (amqp), the `payload` field (redis_stream), subject plus body (email). A larger
             *     payload fails permanently (`dead`).
             * @default 1000000
             */
            max_payload_bytes: number;
            /**
             * @description webhook: largest request body in bytes (default 1,000,000); a larger payload fails permanently.
             * @default 1000000
             */
            max_request_bytes: number;
            /** @description webhook: response body capture cap in bytes (default 65,536); excess is discarded. */
            max_response_bytes?: number;
            /** @description email: optional Reply-To address (one address). */
            reply_to?: string | null;
            /**
             * @description webhook: response policy. Absent: any 2xx succeeds and any other status retries with
             *     backoff. Transport failures always retry; permanent failures dead-letter immediately.
             */
            response?: {
                /**
                 * @description Acknowledgement check applied after a successful status. A missing value, invalid
                 *     JSON or a failed comparison is a permanent failure; a body that reaches the capture
                 *     limit retries instead.
                 */
                body?: {
                    /** @constant */
                    kind: "text_equals";
                    value: string;
                } | {
                    /** @constant */
                    kind: "json_equals";
                    /**
                     * @description RFC 6901 JSON pointer.
                     * @default
                     */
                    pointer: string;
                    value: components["schemas"]["AnyValue"];
                };
                /**
                 * @description When true, HTTP 429 defers the row (status stays `pending`, `deferred_reason`
                 *     `provider_rate`) without consuming attempts, overriding `retry_statuses`.
                 *     `Retry-After` (delta seconds or HTTP date) sets the cooldown; 60 seconds when
                 *     absent or invalid; at most one day.
                 * @default false
                 */
                rate_limit: boolean;
                /**
                 * @description Non-success statuses (3xx, 4xx, 5xx) to retry; omitted retries every failure; an
                 *     empty list makes every HTTP failure permanent.
                 */
                retry_statuses?: number[];
                /** @description Explicit successful 2xx statuses; omitted or empty accepts every 2xx. */
                success_statuses?: number[];
            };
            /**
             * @description email (required): subject template (at most 8,192 characters); must render one
             *     non-empty line (surrounding whitespace is trimmed). Same context as `body_template`.
             */
            subject_template?: string;
            /** @description webhook: request timeout; capped by `SVC_EVENT_DELIVERY_TRANSPORT_TIMEOUT_MS` (default and cap 25,000). */
            timeout_ms?: number;
            /**
             * @description amqp (`amqps://`), redis_stream (`rediss://`), email (`smtps://`): connection URI,
             *     required for these kinds (at most 2,048 characters). Credentials come only from
             *     `secret_ref`: `{secret}` must then appear exactly once, as the whole password
             *     (`amqps://user:{secret}@host/vhost`, `rediss://:{secret}@host/0`), and the resolved
             *     secret is percent-encoded into it; without `secret_ref` no user information is
             *     accepted. Path: amqp one virtual-host segment, redis_stream a database number, email
             *     none. Query: amqp `heartbeat`, `frameMax`, `channelMax` (integers) only; none for the
             *     others. No fragment. At send time the host is resolved and screened like webhooks and
             *     the connection is pinned to the screened address; TLS is verified for the host name.
             */
            uri?: string;
            /**
             * @description webhook: alias of a secret whose value is the complete HTTPS destination URL. When set,
             *     subscriptions of this sink must omit `routing.url` (400).
             */
            url_secret_ref?: string | null;
        };
        EventSubscription: {
            actions: string[];
            /**
             * Format: int32
             * @description Owning collection; null for system subscriptions.
             */
            collection_id: number | null;
            created_at: components["schemas"]["Timestamp"];
            description: string;
            enabled: boolean;
            entity_types: string[];
            filter: components["schemas"]["SubscriptionFilter"];
            id: components["schemas"]["Id"];
            name: string;
            revision: components["schemas"]["Revision"];
            routing: components["schemas"]["SubscriptionRouting"];
            sink_id: components["schemas"]["Id"];
            updated_at: components["schemas"]["Timestamp"];
        };
        /** @description Optional caps; omitted members use the server defaults. */
        ExportLimits: {
            /**
             * @description Maximum number of rows (default 10000); values above the server maximum 100000 are
             *     clamped (with a warning). Cutting the result sets `meta.truncated`, the
             *     `X-Svc-Export-Truncated` header and a warning.
             */
            max_items?: number;
            /**
             * @description Maximum size of the output in bytes (default 16777216, at most 67108864). An output over
             *     the cap fails the task (reason `output_too_large`); lower `max_items` or narrow the query.
             */
            max_output_bytes?: number;
        };
        /** @description JSON output of an export without a template. */
        ExportOutput: {
            /** @description The exported rows, each the public representation of its list endpoint (`related_objects` rows add `depth` and `path`). */
            items: {
                [key: string]: unknown;
            }[];
            meta: {
                /** @description Number of items. */
                count: number;
                /** @description True when the result was cut at `limits.max_items`. */
                truncated: boolean;
            };
            warnings: string[];
        };
        ExportRequest: {
            limits?: components["schemas"]["ExportLimits"];
            /**
             * @description List query string of the list endpoint matching the scope (filters and `sort`, e.g.
             *     `name__contains=web&sort=name`): the collection, class, object (including `computed.*`
             *     and `related.*` filters), class-relation or object-relation list, or for
             *     `related_objects` the related-objects list (`depth`, `class_id`, sorts). The
             *     `permissions=` filter works as on those lists. `limit`, `cursor` and `include_total` are
             *     400. With `template_id` and no `query`, the template's `default_query` applies.
             */
            query?: string;
            scope: components["schemas"]["ExportScope"];
            /** @description Render the output with this `export` template (needs ReadTemplate). */
            template_id?: components["schemas"]["Id"];
        };
        /**
         * @description What to export. `objects_in_class` needs `class_id`; `related_objects` needs `class_id` and
         *     `object_id` (the object must belong to the class; its related objects are exported, each
         *     with `depth` and `path`); the other kinds take neither.
         */
        ExportScope: {
            /** @enum {string} */
            kind: "collections" | "classes" | "class_relations" | "object_relations";
        } | {
            class_id: components["schemas"]["Id"];
            /** @enum {string} */
            kind: "objects_in_class";
        } | {
            class_id: components["schemas"]["Id"];
            /** @enum {string} */
            kind: "related_objects";
            object_id: components["schemas"]["Id"];
        };
        ExportTemplate: {
            collection_id: components["schemas"]["Id"];
            /**
             * @description Media type of the rendered output.
             * @enum {string}
             */
            content_type: "text/plain" | "text/html" | "text/csv" | "application/json";
            created_at: components["schemas"]["Timestamp"];
            /** @description List query string used when a run gives no `query`, e.g. `name__startswith=web-&sort=name`. */
            default_query: string | null;
            description: string;
            id: components["schemas"]["Id"];
            /**
             * @description `export` templates can be run; `fragment` templates are only includable by name from templates of the same collection.
             * @enum {string}
             */
            kind: "export" | "fragment";
            /** @description Unique within the collection. */
            name: string;
            revision: components["schemas"]["Revision"];
            /**
             * @description Jinja-style (Liquid) template source. Context: `items` (the exported rows in their list
             *     representation; object rows also carry their data as `data`), `meta` (`{count,
             *     truncated}`), `warnings` (strings) and `scope` (the export scope). Fragments of the same
             *     collection are included by a quoted static name: `{% include 'name' %}` renders it in
             *     the current scope, `{% render 'name' %}` in a scope holding only its arguments; both take
             *     optional `, key: value` arguments. Rendering is bounded by
             *     SVC_EXPORT_TEMPLATE_RECURSION_LIMIT (block nesting and include depth) and
             *     SVC_EXPORT_TEMPLATE_FUEL (rendered nodes, shared with everything included). No file or
             *     network access.
             */
            template: string;
            updated_at: components["schemas"]["Timestamp"];
        };
        ExportTemplateRunRequest: {
            limits?: components["schemas"]["ExportLimits"];
            /** @description List query string (as in ExportRequest); replaces the template's `default_query` when given. `limit`, `cursor` and `include_total` are 400. */
            query?: string;
            scope: components["schemas"]["ExportScope"];
        };
        Group: {
            created_at: components["schemas"]["Timestamp"];
            /** @description Free text; the empty string when not set (a null in a create or update body stores the empty string). */
            description: string | null;
            /** @description Key of the group at its provider; null for local groups. */
            external_key: string | null;
            id: components["schemas"]["Id"];
            identity_scope: string;
            last_sync_attempted_at: components["schemas"]["NullableTimestamp"];
            last_sync_success_at: components["schemas"]["NullableTimestamp"];
            /** @description Identity provider that owns the group; null for locally managed groups. */
            managed_by: string | null;
            /** @description Unique within the identity scope. */
            name: string;
            revision: components["schemas"]["Revision"];
            updated_at: components["schemas"]["Timestamp"];
        };
        /** @description A principal that is a direct member of the group. */
        GroupMember: {
            created_at: components["schemas"]["Timestamp"];
            /** @description Principal id. */
            id: components["schemas"]["Id"];
            identity_scope: string;
            /** @enum {string} */
            kind: "human" | "service_account";
            name: string;
            revision: components["schemas"]["Revision"];
            updated_at: components["schemas"]["Timestamp"];
        };
        HealthStatus: {
            /**
             * @description `ok` from `/healthz`, `ready` from `/readyz`.
             * @enum {string}
             */
            status: "ok" | "ready";
        };
        /** Format: int32 */
        Id: number;
        /**
         * @description A class, matched on its name. Needs CreateClass (UpdateClass to overwrite) on the collection.
         *     Exactly one of `collection_ref` and `collection_key`. On overwrite, omitted `json_schema` and
         *     `validate_schema` keep their current values.
         */
        ImportClass: {
            collection_key?: components["schemas"]["ImportCollectionKey"];
            collection_ref?: components["schemas"]["ImportRef"];
            /** @default  */
            description: string;
            /** @description JSON Schema 2020-12 for the objects of the class (local `#/` refs only). */
            json_schema?: unknown;
            name: string;
            ref?: components["schemas"]["ImportRef"];
            /** @description Default false for a new class. */
            validate_schema?: boolean;
        } & (unknown | unknown);
        /** @description Natural key of an existing class (class names are globally unique). */
        ImportClassKey: {
            name: string;
        };
        /**
         * @description A class relation, matched on (from class, to class). Needs CreateClassRelation. Exactly one of
         *     `from_class_ref`/`from_class_key` and exactly one of `to_class_ref`/`to_class_key`.
         */
        ImportClassRelation: {
            /** @description Alias used when traversing from the source class. */
            forward_alias?: string | null;
            from_class_key?: components["schemas"]["ImportClassKey"];
            from_class_ref?: components["schemas"]["ImportRef"];
            /** @description Maximum relations per source object; null or omitted is unlimited. */
            from_max_relations?: number | null;
            ref?: components["schemas"]["ImportRef"];
            /** @description Alias used when traversing from the target class. */
            reverse_alias?: string | null;
            to_class_key?: components["schemas"]["ImportClassKey"];
            to_class_ref?: components["schemas"]["ImportRef"];
            /** @description Maximum relations per target object; null or omitted is unlimited. */
            to_max_relations?: number | null;
        } & ((unknown | unknown) & (unknown | unknown));
        /**
         * @description A collection, matched on (parent, name). With neither parent member it is a top-level
         *     collection (creating one needs an admin); a child needs admin or DelegateCollection on the
         *     parent. At most one of `parent_collection_ref` and `parent_collection_key`.
         */
        ImportCollection: {
            /** @default  */
            description: string;
            name: string;
            parent_collection_key?: components["schemas"]["ImportCollectionKey"];
            parent_collection_ref?: components["schemas"]["ImportRef"];
            ref?: components["schemas"]["ImportRef"];
        } & (unknown | unknown | {
            parent_collection_key?: never;
            parent_collection_ref?: never;
        });
        /**
         * @description Natural key of an existing collection: `path` lists the collection names from the top-level
         *     collection down to and including this one; its last element equals `name`.
         * @example {
         *       "name": "assets",
         *       "path": [
         *         "company",
         *         "it",
         *         "assets"
         *       ]
         *     }
         */
        ImportCollectionKey: {
            name: string;
            path: string[];
        };
        /**
         * @description A permission grant of a group on a collection. Needs DelegateCollection on the collection
         *     (or admin). `collision_policy` does not apply: the action is `create` when the group held no
         *     grant on the collection, `update` when permissions were added or removed, else `unchanged`. Exactly one of `collection_ref`/`collection_key` and exactly one of
         *     `group_ref`/`group_key` (`group_ref` names an item of the admin-only `groups` section).
         */
        ImportCollectionPermission: {
            collection_key?: components["schemas"]["ImportCollectionKey"];
            collection_ref?: components["schemas"]["ImportRef"];
            group_key?: components["schemas"]["ImportIdentityKey"];
            group_ref?: components["schemas"]["ImportRef"];
            permissions: components["schemas"]["PermissionName"][];
            ref?: components["schemas"]["ImportRef"];
            /**
             * @description `false` adds the permissions to the existing grant; `true` replaces the group's grant on the collection.
             * @default false
             */
            replace_existing: boolean;
        } & ((unknown | unknown) & (unknown | unknown));
        /** @description A global event sink, matched on its name. Unscoped admin only. Validated as by the sink API. */
        ImportEventSink: {
            /** @description Transport configuration of the kind. */
            config: {
                [key: string]: unknown;
            };
            delivery_policy?: {
                min_interval_ms?: number | null;
            };
            /** @default true */
            enabled: boolean;
            /** @enum {string} */
            kind: "webhook" | "amqp" | "redis_stream" | "email";
            name: string;
            ref?: components["schemas"]["ImportRef"];
            /**
             * @description Secret alias; never a secret value.
             * @default null
             */
            secret_ref: string | null;
        };
        /**
         * @description An event subscription, matched on (collection, name), or on name among system subscriptions
         *     when neither collection member is sent (a system subscription). Unscoped admin only. At most
         *     one of `collection_ref`/`collection_key`; exactly one of `sink_ref`/`sink_key`. Validated as
         *     by the subscription API.
         */
        ImportEventSubscription: {
            actions: string[];
            collection_key?: components["schemas"]["ImportCollectionKey"];
            collection_ref?: components["schemas"]["ImportRef"];
            /** @default  */
            description: string;
            /** @default true */
            enabled: boolean;
            entity_types: string[];
            /** @default {} */
            filter: {
                [key: string]: unknown;
            };
            name: string;
            ref?: components["schemas"]["ImportRef"];
            /** @default {} */
            routing: {
                [key: string]: unknown;
            };
            sink_key?: components["schemas"]["ImportSinkKey"];
            sink_ref?: components["schemas"]["ImportRef"];
        } & ((unknown | unknown | {
            collection_key?: never;
            collection_ref?: never;
        }) & (unknown | unknown));
        /**
         * @description An export template, matched on (collection, name). Unscoped admin only. Exactly one of
         *     `collection_ref` and `collection_key`. Includes resolve against existing templates and
         *     earlier templates of the same import in the same collection (list fragments first).
         */
        ImportExportTemplate: {
            collection_key?: components["schemas"]["ImportCollectionKey"];
            collection_ref?: components["schemas"]["ImportRef"];
            /**
             * @default text/plain
             * @enum {string}
             */
            content_type: "text/plain" | "text/html" | "text/csv" | "application/json";
            /** @default null */
            default_query: string | null;
            /** @default  */
            description: string;
            /**
             * @default export
             * @enum {string}
             */
            kind: "export" | "fragment";
            name: string;
            ref?: components["schemas"]["ImportRef"];
            template: string;
        } & (unknown | unknown);
        /**
         * @description The items to import. The six core sections are required (they may be empty); the sections
         *     after `collection_permissions` are optional and need an unscoped administrator when not
         *     empty. Items are applied section by section in dependency order: `collections`, `classes`,
         *     `objects`, `class_relations`, `object_relations`, `groups`, `collection_permissions`,
         *     `principals`, `group_memberships`, `export_templates`, `remote_targets`, `event_sinks`,
         *     `event_subscriptions` (the order listed here, except that groups come before the permissions
         *     that may name them). Within one request a `ref` must be unique across all sections; `*_ref`
         *     members name an earlier item of the same request (a parent collection an earlier item of
         *     `collections`), `*_key` members select an existing row by its natural key; where a pair is
         *     offered exactly one is sent unless stated otherwise. An item whose `*_ref` names an item that
         *     did not succeed is `skipped`.
         */
        ImportGraph: {
            class_relations: components["schemas"]["ImportClassRelation"][];
            classes: components["schemas"]["ImportClass"][];
            collection_permissions: components["schemas"]["ImportCollectionPermission"][];
            collections: components["schemas"]["ImportCollection"][];
            event_sinks?: components["schemas"]["ImportEventSink"][];
            event_subscriptions?: components["schemas"]["ImportEventSubscription"][];
            export_templates?: components["schemas"]["ImportExportTemplate"][];
            group_memberships?: components["schemas"]["ImportGroupMembership"][];
            groups?: components["schemas"]["ImportGroup"][];
            object_relations: components["schemas"]["ImportObjectRelation"][];
            objects: components["schemas"]["ImportObject"][];
            principals?: components["schemas"]["ImportPrincipal"][];
            remote_targets?: components["schemas"]["ImportRemoteTarget"][];
        };
        /** @description A group, matched on (name, identity_scope). Unscoped admin only. */
        ImportGroup: {
            /** @default  */
            description: string;
            /** @default local */
            identity_scope: string;
            name: string;
            ref?: components["schemas"]["ImportRef"];
        };
        /**
         * @description Membership of a principal in a group; an existing membership is a no-op. Unscoped admin only.
         *     Exactly one of `principal_ref`/`principal_key` and exactly one of `group_ref`/`group_key`.
         */
        ImportGroupMembership: {
            group_key?: components["schemas"]["ImportIdentityKey"];
            group_ref?: components["schemas"]["ImportRef"];
            principal_key?: components["schemas"]["ImportIdentityKey"];
            principal_ref?: components["schemas"]["ImportRef"];
            ref?: components["schemas"]["ImportRef"];
        } & ((unknown | unknown) & (unknown | unknown));
        ImportHumanPrincipal: {
            email?: string | null;
            /** @default local */
            identity_scope: string;
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            kind: "human";
            name: string;
            /** @description Initial or replacement password; requires the `import_credentials` approval. */
            password?: string;
            proper_name?: string | null;
            ref?: components["schemas"]["ImportRef"];
        };
        /** @description Natural key of an existing group or principal. */
        ImportIdentityKey: {
            /** @description e.g. `local`. */
            identity_scope: string;
            name: string;
        };
        ImportMode: {
            /**
             * @description `strict`: one transaction, all or nothing. `best_effort`: each item commits on its own; the task may end `partially_succeeded`.
             * @default strict
             * @enum {string}
             */
            atomicity: "strict" | "best_effort";
            /**
             * @description What happens when an item's natural key already exists. `abort`: the item fails (and a
             *     strict import fails). `overwrite`: the existing row is updated with the supplied members
             *     (omitted members keep their current values); an identical item is a no-op (`unchanged`).
             *     Existing object relations and group memberships are always no-ops; collection
             *     permission items merge into the group's grant (see `replace_existing`).
             * @default abort
             * @enum {string}
             */
            collision_policy: "abort" | "overwrite";
        };
        /**
         * @description An object, matched on (class, name). Needs CreateObject (UpdateObject to overwrite); the data
         *     is validated against the class schema when the class validates. Exactly one of `class_ref`
         *     and `class_key`. On overwrite the supplied members replace the current values.
         */
        ImportObject: {
            class_key?: components["schemas"]["ImportClassKey"];
            class_ref?: components["schemas"]["ImportRef"];
            /** @default  */
            description: string;
            /** @description The object's JSON data. */
            json_data: unknown;
            name: string;
            ref?: components["schemas"]["ImportRef"];
        } & (unknown | unknown);
        /** @description Natural key of an existing object (object names are unique within their class). */
        ImportObjectKey: {
            class: components["schemas"]["ImportClassKey"];
            name: string;
        };
        /**
         * @description An object relation, matched on (from object, to object); it uses the class relation between
         *     the two objects' classes, which must exist. Needs CreateObjectRelation. Exactly one of
         *     `from_object_ref`/`from_object_key` and exactly one of `to_object_ref`/`to_object_key`. An
         *     existing relation is a no-op.
         */
        ImportObjectRelation: {
            from_object_key?: components["schemas"]["ImportObjectKey"];
            from_object_ref?: components["schemas"]["ImportRef"];
            ref?: components["schemas"]["ImportRef"];
            to_object_key?: components["schemas"]["ImportObjectKey"];
            to_object_ref?: components["schemas"]["ImportRef"];
        } & ((unknown | unknown) & (unknown | unknown));
        /**
         * @description A principal, matched on (name, identity_scope). Unscoped admin only. A human with `password`
         *     makes the import credential-bearing (approval required); password hashes are never accepted.
         */
        ImportPrincipal: components["schemas"]["ImportHumanPrincipal"] | components["schemas"]["ImportServiceAccountPrincipal"];
        /** @description Client-local reference string, unique within the request; never a database id. */
        ImportRef: string;
        /**
         * @description A remote target, matched on (collection, name). Unscoped admin only. Exactly one of
         *     `collection_ref` and `collection_key`; a class (`class_ref` or `class_key`, at most one, in
         *     the same collection) is required when `allowed_subject_types` contains `object` and not
         *     allowed otherwise. Members are validated as by the remote-target API.
         */
        ImportRemoteTarget: {
            allowed_subject_types: ("collection" | "class" | "object" | "class_relation" | "object_relation")[];
            /**
             * @description Same shape as the remote-target API, e.g. `{type: none}` or `{type: bearer_secret, secret: <alias>}`; aliases only, never secret values.
             * @default {
             *       "type": "none"
             *     }
             */
            auth_config: {
                type: string;
            } & {
                [key: string]: unknown;
            };
            /** @default null */
            body_template: string | null;
            class_key?: components["schemas"]["ImportClassKey"];
            class_ref?: components["schemas"]["ImportRef"];
            collection_key?: components["schemas"]["ImportCollectionKey"];
            collection_ref?: components["schemas"]["ImportRef"];
            description: string;
            /** @default true */
            enabled: boolean;
            /**
             * @description Header name to string template; transport-controlled names are rejected.
             * @default {}
             */
            headers_template: {
                [key: string]: string;
            };
            /** @enum {string} */
            method: "get" | "post" | "patch" | "delete";
            name: string;
            ref?: components["schemas"]["ImportRef"];
            /** @description Capped by SVC_REMOTE_CALL_TIMEOUT_MS. */
            timeout_ms?: number;
            /** @description Jinja-style template; the rendered URL must be HTTPS. */
            url_template: string;
        } & ((unknown | unknown) & (unknown | unknown | {
            class_key?: never;
            class_ref?: never;
        }));
        /**
         * @example {
         *       "version": 2,
         *       "mode": {
         *         "atomicity": "strict",
         *         "collision_policy": "abort"
         *       },
         *       "graph": {
         *         "collections": [
         *           {
         *             "ref": "col:infra",
         *             "name": "infra",
         *             "description": "Infrastructure"
         *           }
         *         ],
         *         "classes": [
         *           {
         *             "ref": "class:server",
         *             "name": "server",
         *             "collection_ref": "col:infra"
         *           }
         *         ],
         *         "objects": [
         *           {
         *             "ref": "obj:web-01",
         *             "name": "web-01",
         *             "class_ref": "class:server",
         *             "json_data": {
         *               "role": "frontend"
         *             }
         *           }
         *         ],
         *         "class_relations": [],
         *         "object_relations": [],
         *         "collection_permissions": [
         *           {
         *             "collection_ref": "col:infra",
         *             "group_key": {
         *               "name": "ops",
         *               "identity_scope": "local"
         *             },
         *             "permissions": [
         *               "ReadCollection",
         *               "ReadClass",
         *               "ReadObject"
         *             ]
         *           }
         *         ]
         *       }
         *     }
         */
        ImportRequest: {
            /**
             * @description Validate and plan, record item results, write nothing.
             * @default false
             */
            dry_run: boolean;
            graph: components["schemas"]["ImportGraph"];
            mode?: components["schemas"]["ImportMode"];
            /**
             * @description Import format version; only 2 is accepted.
             * @constant
             */
            version: 2;
        };
        ImportResult: {
            /**
             * @description What the item does (or, on failure, would have done); `unchanged` for a match that needs no write.
             * @enum {string}
             */
            action: "create" | "update" | "unchanged";
            /** @enum {string} */
            entity_kind: "collection" | "class" | "object" | "class_relation" | "object_relation" | "collection_permission" | "group" | "principal" | "group_membership" | "export_template" | "remote_target" | "event_sink" | "event_subscription";
            /** @description Public reason of a failure, or why a `skipped` item was not attempted; null otherwise. */
            error: string | null;
            /** @description The item's `ref`, or `<section>[<index>]` (e.g. `objects[3]`) when it has none. */
            item_ref: string;
            /**
             * @description `succeeded` (for a dry run: validated and would be applied), `failed` (see `error`),
             *     `skipped` (not attempted because the import stopped or an item it depends on failed),
             *     `rolled_back` (applied, then undone because a strict import failed).
             * @enum {string}
             */
            outcome: "succeeded" | "failed" | "skipped" | "rolled_back";
        };
        /** @description Exactly one of `owner_group_ref` and `owner_group_key`. */
        ImportServiceAccountPrincipal: {
            /** @default  */
            description: string;
            /**
             * @description `true` creates the account disabled or disables an existing one (its tokens are revoked and
             *     its queued tasks cancelled, as by the disable operation). `false` on an existing disabled
             *     account fails the item (re-enabling is not supported); omitted leaves it as it is.
             * @default false
             */
            disabled: boolean;
            /** @default local */
            identity_scope: string;
            /**
             * @description discriminator enum property added by openapi-typescript
             * @enum {string}
             */
            kind: "service_account";
            name: string;
            owner_group_key?: components["schemas"]["ImportIdentityKey"];
            owner_group_ref?: components["schemas"]["ImportRef"];
            ref?: components["schemas"]["ImportRef"];
        } & ({
            owner_group_ref: components["schemas"]["ImportRef"];
        } | {
            owner_group_key: components["schemas"]["ImportIdentityKey"];
        });
        /** @description Natural key of an existing event sink (sink names are unique). */
        ImportSinkKey: {
            name: string;
        };
        /** @description An object (instance of a class). */
        InventoryObject: {
            collection_id: components["schemas"]["Id"];
            /** @description Present only with `include=computed`. */
            computed?: {
                /** @description The caller's personal values; null for service accounts. */
                personal: components["schemas"]["ComputedValueSet"] | null;
                shared: components["schemas"]["ComputedValueSet"];
            };
            created_at: components["schemas"]["Timestamp"];
            /** @description Empty string when not set. */
            description: string;
            id: components["schemas"]["Id"];
            /** @description The object's JSON data. */
            json_data: unknown;
            /** @description Unique within the class. */
            name: string;
            revision: components["schemas"]["Revision"];
            svc_class_id: components["schemas"]["Id"];
            updated_at: components["schemas"]["Timestamp"];
        };
        /**
         * @example {
         *       "subject": {
         *         "type": "object",
         *         "class_id": 34,
         *         "object_id": 56
         *       },
         *       "parameters": {
         *         "priority": "high"
         *       },
         *       "body_override": {
         *         "comment": "requested by operator"
         *       }
         *     }
         */
        InvokeRemoteTargetRequest: {
            /**
             * @description Free JSON object exposed to the templates as `body_override`.
             * @default {}
             */
            body_override: {
                [key: string]: unknown;
            };
            /**
             * @description Free JSON object exposed to the templates as `parameters`.
             * @default {}
             */
            parameters: {
                [key: string]: unknown;
            };
            /**
             * @description The subject of the call. `collection`, `class`, `class_relation` and `object_relation`
             *     subjects carry only `id` (the collection, class or relation id); `object` subjects
             *     carry only `class_id` and `object_id`. Any other combination is 400.
             */
            subject: {
                /** @description Object subjects; must be the object's class and the target's `class_id`. */
                class_id?: components["schemas"]["Id"];
                id?: components["schemas"]["Id"];
                /** @description Object subjects. */
                object_id?: components["schemas"]["Id"];
                /** @enum {string} */
                type: "collection" | "class" | "object" | "class_relation" | "object_relation";
            };
        };
        JsonObject: {
            [key: string]: unknown;
        };
        /** @description One RFC 6902 operation. `path` and `from` are RFC 6901 pointers relative to the document root (at most 128 segments each). `from` is required for `move` and `copy`, `value` for `add`, `replace` and `test`. */
        JsonPatchOperation: {
            /** @description RFC 6901 JSON pointer; `move` and `copy` only. */
            from?: string;
            /** @enum {string} */
            op: "add" | "remove" | "replace" | "move" | "copy" | "test";
            /** @description RFC 6901 JSON pointer (`""` is the root). */
            path: string;
            /** @description Any JSON value, including null; `add`, `replace` and `test` only. */
            value?: unknown;
        } & (unknown & unknown);
        LoginRateLimitCleared: {
            /** @description Number of tracked keys removed. */
            cleared: number;
            message: string;
        };
        LoginRateLimitState: {
            /**
             * @description Effective limiter configuration. A key is locked out when its failures within the
             *     sliding window reach its threshold; the lockout lasts `lockout_base_seconds`, doubling
             *     with each further lockout of the same key up to `lockout_max_seconds`.
             */
            config: {
                /**
                 * @description `memory` (per process) or `redis` (shared across instances).
                 * @enum {string}
                 */
                backend: "memory" | "redis";
                /** @description First lockout duration (default 300). */
                lockout_base_seconds: number;
                /** @description Longest lockout duration (default 86400). */
                lockout_max_seconds: number;
                /** @description Threshold per client IP (default 20). */
                max_failures_per_ip: number;
                /** @description Threshold per client subnet (default 100). */
                max_failures_per_subnet: number;
                /** @description Threshold per (login name, client IP) key (default 5). */
                max_failures_per_user_ip: number;
                /** @description IPv4 subnet prefix length (default 24). */
                subnet_prefix_v4: number;
                /** @description IPv6 subnet prefix length (default 64). */
                subnet_prefix_v6: number;
                /** @description Sliding failure window (default 300). */
                window_seconds: number;
            };
            /** @description Tracked keys matching the filters; locked keys first, then by `last_failure_at` descending. */
            entries: {
                /** @description Failed attempts inside the current window. */
                failures: number;
                /** @description Oldest failure still inside the window; null when none is. */
                first_failure_at: components["schemas"]["NullableTimestamp"];
                /** @description Opaque id for `DELETE /api/v0/meta/login-rate-limit/{id}`. */
                id: string;
                /**
                 * @description Display form of the key, matched by `q`: `<name>@<ip>` for `user_ip`, the
                 *     address for `ip`, the network in CIDR notation for `subnet`.
                 */
                identifier: string;
                /** @description Client IP address (`user_ip` and `ip` keys; null for `subnet`). */
                ip: string | null;
                /** @description Most recent failed attempt. */
                last_failure_at: components["schemas"]["Timestamp"];
                /** @description Whether the key is locked out now. */
                locked: boolean;
                /** @description End of the current lockout; null when not locked. */
                locked_until: components["schemas"]["NullableTimestamp"];
                /** @description Consecutive lockouts of this key; drives the doubling of the lockout duration. */
                lockout_count: number;
                /** @description Login name as submitted (`user_ip` keys only; null otherwise). */
                name: string | null;
                /**
                 * @description Kind of key.
                 * @enum {string}
                 */
                scope: "user_ip" | "ip" | "subnet";
                /** @description Client network in CIDR notation (`subnet` keys only; null otherwise). */
                subnet: string | null;
                /** @description Failure threshold that applies to this kind of key. */
                threshold: number;
            }[];
            /** @description Time the snapshot was taken. */
            generated_at: components["schemas"]["Timestamp"];
            /** @description Number of tracked keys matching the filters (may exceed the entries returned). */
            total: number;
            /** @description True when more keys matched than were returned. */
            truncated: boolean;
        };
        LoginRequest: {
            /**
             * @description Identity scope of the user (default `local`); unknown scopes fail with the generic 401.
             * @default local
             */
            identity_scope: string;
            /** @description Login name (at most 255 Unicode characters). */
            name: string;
            /** @description Password (at most 4096 Unicode characters). */
            password: string;
        };
        LogoutTokenRequest: {
            /** @description The raw token to revoke. */
            token: string;
        };
        /** @description The calling principal and the bearer token of the request. */
        Me: {
            principal: {
                created_at: components["schemas"]["Timestamp"];
                id: components["schemas"]["Id"];
                identity_scope: string;
                /** @enum {string} */
                kind: "human" | "service_account";
                name: string;
                revision: components["schemas"]["Revision"];
                updated_at: components["schemas"]["Timestamp"];
            };
            token: {
                description: string | null;
                /** @description Authoritative expiry; null only for legacy rows (then issued + SVC_TOKEN_LIFETIME_HOURS applies). */
                expires_at: components["schemas"]["NullableTimestamp"];
                id: components["schemas"]["Id"];
                issued: components["schemas"]["Timestamp"];
                last_used_at: components["schemas"]["NullableTimestamp"];
                name: string | null;
                revision: components["schemas"]["Revision"];
                scope: components["schemas"]["TokenScope"];
            };
        };
        Message: {
            message: string;
        };
        MetaCounts: {
            /** @description Object count per class (readable objects only), for classes with at least one such object, ordered by `svc_class_id`. */
            objects_per_class: {
                count: number;
                svc_class_id: components["schemas"]["Id"];
            }[];
            total_classes: number;
            total_collections: number;
            total_objects: number;
        };
        /** @description PostgreSQL connection-pool and database figures. */
        MetaDb: {
            /** @description Sessions on this database currently running a statement. */
            active_connections: number;
            /**
             * @description Storage backend.
             * @enum {string}
             */
            backend: "postgresql";
            /** @description Size of this database on disk in bytes. */
            database_size_bytes: number;
            /** @description Sessions on this database that are idle. */
            idle_connections: number;
            /** @description Most recent autovacuum of any service table; null when never. */
            last_autovacuum_at: components["schemas"]["NullableTimestamp"];
            /** @description Most recent manual vacuum of any service table; null when never. */
            last_vacuum_at: components["schemas"]["NullableTimestamp"];
            /** @description Maximum number of connections of the answering process's pool. */
            pool_size: number;
            /** @description Database server version string. */
            server_version: string;
            /** @description Server sessions connected to this database (all processes). */
            total_connections: number;
        };
        MetaTasks: {
            /** @description Number of tasks of each kind that are `queued`, `validating` or `running`. */
            active_by_kind: {
                backup: number;
                export: number;
                import: number;
                remote_call: number;
                restore: number;
            };
            /** @description Number of tasks of each kind, in any status. */
            by_kind: {
                backup: number;
                export: number;
                import: number;
                remote_call: number;
                restore: number;
            };
            /** @description Number of tasks in each status. */
            by_status: {
                cancelled: number;
                failed: number;
                partially_succeeded: number;
                queued: number;
                running: number;
                succeeded: number;
                validating: number;
            };
            /** @description Whole seconds since the oldest `validating` or `running` task started; null when none is active. */
            oldest_active_age_seconds: number | null;
            /** @description Whole seconds since the oldest `queued` task was created; null when none is queued. */
            oldest_queued_age_seconds: number | null;
            /** @description Number of retained tasks. */
            total: number;
            /** @description Task-worker settings of the answering process. */
            workers: {
                /** @description Fallback polling interval of the task workers. */
                poll_interval_ms: number;
                /**
                 * @description `SVC_RUNTIME_ROLE` of the answering process; an `api` process runs no workers.
                 * @enum {string}
                 */
                runtime_role: "all" | "api" | "worker";
                /** @description Task workers running in the answering process (0 for role `api`). */
                task_workers: number;
            };
        };
        NewClass: {
            collection_id: components["schemas"]["Id"];
            /** @default  */
            description: string;
            /**
             * @description JSON Schema 2020-12 document with local `#...` refs only (invalid: 400). It is compiled
             *     in strict mode: unknown keywords, unknown `format` values, a `$schema` other than
             *     `https://json-schema.org/draft/2020-12/schema` and any `$ref`/`$dynamicRef` not
             *     starting with `#` are refused. Omitted or null: no schema.
             */
            json_schema?: unknown;
            /** @description Globally unique (409 otherwise). */
            name: string;
            /**
             * @description Validate object data against `json_schema`; true requires a `json_schema` (400 otherwise).
             * @default false
             */
            validate_schema: boolean;
        };
        NewClassRelation: {
            /** @default null */
            forward_alias: string | null;
            from_class_id: components["schemas"]["Id"];
            /**
             * @description Null is unlimited.
             * @default null
             */
            from_max_relations: number | null;
            /** @default null */
            reverse_alias: string | null;
            to_class_id: components["schemas"]["Id"];
            /**
             * @description Null is unlimited.
             * @default null
             */
            to_max_relations: number | null;
        };
        /** @description Body of `createCollection`. */
        NewCollection: {
            /** @description Defaults to the empty string. */
            description?: string;
            /** @description Group that receives every collection permission on the new collection; omitted or null grants nothing. */
            group_id?: components["schemas"]["Id"] | null;
            /** @description Unique among the siblings under the same parent. */
            name: string;
            /** @description Parent collection; omitted or null creates a top-level collection (administrator only). */
            parent_collection_id?: components["schemas"]["Id"] | null;
        };
        NewComputedField: {
            /** @description Required on `/api/v1/iam/me/computed-fields`; on the class route omit it or repeat the path id. */
            class_id?: components["schemas"]["Id"];
            /** @default  */
            description: string;
            /** @default true */
            enabled: boolean;
            /** @description Used as `computed.shared.<key>` / `computed.personal.<key>`; immutable. */
            key: string;
            /** @description Defaults to `key`. */
            label?: string;
            operation: components["schemas"]["ComputedFieldOperation"];
            /** @enum {string} */
            result_type: "string" | "number" | "integer" | "boolean" | "object" | "array";
        };
        NewEventSink: {
            config?: components["schemas"]["EventSinkConfig"];
            delivery_policy?: components["schemas"]["DeliveryPolicy"];
            /** @default true */
            enabled: boolean;
            /**
             * @description Transport. A kind whose transport is not available in this deployment is 400.
             * @enum {string}
             */
            kind: "webhook" | "amqp" | "redis_stream" | "email";
            /** @description Unique sink name. */
            name: string;
            /**
             * @description Secret alias (letters, digits, underscore), resolved at send time through the secret
             *     source (environment `SVC_EVENT_SINK_SECRET_<ALIAS_UPPERCASE>` or file
             *     `event-sink/<alias>` under `SVC_SECRET_FILE_ROOT`). webhook: sent as bearer token;
             *     amqp, redis_stream, email: substituted percent-encoded for `{secret}` in `config.uri`.
             *     Default null.
             */
            secret_ref?: string | null;
        };
        /** @description Body for both collection and system subscriptions; the scope comes from the route. */
        NewEventSubscription: {
            /**
             * @description Actions from the event catalog (e.g. `created`, `updated`, `deleted`, `failed`); every
             *     entity type and action pair must exist in the catalog (400 otherwise).
             */
            actions: string[];
            /** @default  */
            description: string;
            /** @default true */
            enabled: boolean;
            /**
             * @description Event entity types from the event catalog; unknown values are 400. The catalog
             *     (entity type: actions): collection, class, object, class_relation, object_relation,
             *     export_template, user, group, event_subscription, computed_field: created, updated,
             *     deleted; remote_target, event_sink: created, updated, deleted, invoked;
             *     service_account: created, updated, deleted, disabled; group_membership: added,
             *     removed; permission: granted, revoked; token: created, renewed, revoked, purged;
             *     principal: updated; task: queued, validating, running, succeeded, failed,
             *     partially_succeeded, cancelled; class_schema: staged, abandoned, activated,
             *     work_requested, cancelled, deleted; object_validation: succeeded, failed, updated
             *     (class_schema work_requested and cancelled and object_validation succeeded are
             *     accepted but never emitted: schema changes are synchronous, see the `Event` schema);
             *     credential_approval: created, consumed; restore: staged, succeeded, failed; event_delivery:
             *     retried, dead (administrator actions on a delivery; collection-less).
             */
            entity_types: string[];
            filter?: components["schemas"]["SubscriptionFilter"];
            /** @description Unique within the collection (or among system subscriptions). */
            name: string;
            routing?: components["schemas"]["SubscriptionRouting"];
            sink_id: components["schemas"]["Id"];
        };
        NewExportTemplate: {
            collection_id: components["schemas"]["Id"];
            /**
             * @default text/plain
             * @enum {string}
             */
            content_type: "text/plain" | "text/html" | "text/csv" | "application/json";
            /**
             * @description List query string; `limit`, `cursor` and `include_total` are not allowed in it (400).
             * @default null
             */
            default_query: string | null;
            /** @default  */
            description: string;
            /**
             * @default export
             * @enum {string}
             */
            kind: "export" | "fragment";
            name: string;
            template: string;
        };
        /** @description Create a local group (identity scope `local`). */
        NewGroup: {
            description?: string | null;
            /** @description 1..255 characters; unique within scope `local` (409 otherwise). */
            name: string;
        };
        NewObject: {
            /** @default  */
            description: string;
            /** @description The object's JSON data; validated against the class schema when `validate_schema` is true. */
            json_data: unknown;
            /** @description Unique within the class (409 otherwise). */
            name: string;
        };
        NewObjectRelation: {
            class_relation_id: components["schemas"]["Id"];
            /** @description An object of the class relation's `from_class_id`. */
            from_object_id: components["schemas"]["Id"];
            /** @description An object of the class relation's `to_class_id`. */
            to_object_id: components["schemas"]["Id"];
        };
        NewRemoteTarget: {
            /** @description Non-empty; duplicates are 400. */
            allowed_subject_types: ("collection" | "class" | "object" | "class_relation" | "object_relation")[];
            /** @description Default `{"type": "none"}`. */
            auth_config?: components["schemas"]["RemoteTargetAuthConfig"];
            /**
             * @description Template rendered to the exact outbound body.
             * @default null
             */
            body_template: string | null;
            /** @description Required when `allowed_subject_types` contains `object` (a class of `collection_id`); null or omitted otherwise. */
            class_id?: components["schemas"]["NullableId"];
            /** @description Owning collection; needs CreateRemoteTarget there. */
            collection_id: components["schemas"]["Id"];
            description: string;
            /**
             * @description Disabled targets cannot be invoked (400).
             * @default true
             */
            enabled: boolean;
            /**
             * @description Header name to value template. `Content-Type` must be set here when a body is sent. Transport-controlled names (Host, Content-Length, Transfer-Encoding, Connection, Keep-Alive, Proxy-Connection, Proxy-Authorization, TE, Trailer, Upgrade, HTTP2-Settings) are 400.
             * @default {}
             */
            headers_template: {
                [key: string]: string;
            };
            /** @enum {string} */
            method: "get" | "post" | "patch" | "delete";
            /** @description Unique within the collection (409 otherwise). */
            name: string;
            /**
             * @description Per-call timeout in milliseconds; the effective value is capped by `SVC_REMOTE_CALL_TIMEOUT_MS` (default 10000).
             * @default 10000
             */
            timeout_ms: number;
            /** @description Jinja-style template of the outbound URL; the rendered URL must be HTTPS without embedded credentials. */
            url_template: string;
        };
        /** @description Create a service account in identity scope `local`. */
        NewServiceAccount: {
            description?: string | null;
            /** @description 1..255 characters; unique within scope `local` (409 otherwise). */
            name: string;
            /** @description Existing group (404 otherwise); a non-admin must be a member of it (403 otherwise). */
            owner_group_id: components["schemas"]["Id"];
        };
        /** @description Create a local human user (identity scope `local`). */
        NewUser: {
            /** @description Omitted or null: no e-mail. */
            email?: string | null;
            /** @description Login name, 1..255 characters; unique within scope `local` (409 otherwise). */
            name: string;
            /** @description Initial password, 1..4096 characters; stored as an Argon2id hash and never returned. */
            password: string;
            /** @description Omitted or null: no proper name. */
            proper_name?: string | null;
        };
        NullableId: components["schemas"]["Id"] | null;
        /** Format: date-time */
        NullableTimestamp: string | null;
        /** @description One group of objects with its dimension values, object count and measures. */
        ObjectAggregateRow: {
            /** @description One entry per `group_by`, in request order (empty without `group_by`). */
            dimensions: {
                /** @description The `group_by` value as requested. */
                field: string;
                /**
                 * @description `value`: a value is present; `null`: the value is JSON null or a null column;
                 *     `missing`: the JSON path does not exist; `unavailable`: a computed value failed
                 *     to evaluate.
                 * @enum {string}
                 */
                state: "value" | "null" | "missing" | "unavailable";
                /** @description The grouped value when `state` is `value`; otherwise null. */
                value: unknown;
            }[];
            /** @description One entry per `aggregate`, in request order. */
            measures: {
                /** @description Source values used. */
                contributing_count: number;
                /** @description The measured field as requested. */
                field: string;
                /** @enum {string} */
                operation: "sum" | "average" | "min" | "max";
                /** @description Source values skipped (null, missing, non-numeric or failed to evaluate). */
                skipped_count: number;
                /** @description Null when no value contributed. */
                value: number | null;
            }[];
            /** @description Number of readable objects in the group (0 only for the single row without group_by). */
            object_count: number;
        };
        /** @description RFC 6902 JSON Patch applied to an object's `json_data` (at most 1,000 operations). */
        ObjectJsonPatch: ({
            /** @enum {string} */
            op: "add" | "replace" | "test";
            /** @description RFC 6901 pointer. */
            path: string;
            /** @description Any JSON value. */
            value: unknown;
        } | {
            /** @enum {string} */
            op: "remove";
            /** @description RFC 6901 pointer. */
            path: string;
        } | {
            /** @description RFC 6901 pointer. */
            from: string;
            /** @enum {string} */
            op: "move" | "copy";
            /** @description RFC 6901 pointer. */
            path: string;
        })[];
        /** @description A relation from one object to another under a class relation. */
        ObjectRelation: {
            class_relation_id: components["schemas"]["Id"];
            created_at: components["schemas"]["Timestamp"];
            from_object_id: components["schemas"]["Id"];
            id: components["schemas"]["Id"];
            revision: components["schemas"]["Revision"];
            to_object_id: components["schemas"]["Id"];
            updated_at: components["schemas"]["Timestamp"];
        };
        /** @description Permission names without duplicates (duplicates are 400). */
        PermissionList: components["schemas"]["PermissionName"][];
        /** @enum {string} */
        PermissionName: "ReadCollection" | "UpdateCollection" | "DeleteCollection" | "DelegateCollection" | "CreateClass" | "ReadClass" | "UpdateClass" | "DeleteClass" | "CreateObject" | "ReadObject" | "UpdateObject" | "DeleteObject" | "CreateClassRelation" | "ReadClassRelation" | "UpdateClassRelation" | "DeleteClassRelation" | "CreateObjectRelation" | "ReadObjectRelation" | "UpdateObjectRelation" | "DeleteObjectRelation" | "CreateTemplate" | "ReadTemplate" | "UpdateTemplate" | "DeleteTemplate" | "CreateRemoteTarget" | "ReadRemoteTarget" | "UpdateRemoteTarget" | "DeleteRemoteTarget" | "ExecuteRemoteTarget" | "ReadAudit" | "ManageEventSubscription";
        /** @description Grouped plain-text search results. */
        PlainSearchResponse: {
            /** @description Per-kind cursor for the next page (pass as `cursor_<kind>`); null when that kind has no more results or was not requested. */
            next: {
                classes: string | null;
                collections: string | null;
                objects: string | null;
            };
            /** @description The trimmed query text. */
            query: string;
            results: {
                classes: components["schemas"]["ClassExpanded"][];
                collections: components["schemas"]["Collection"][];
                objects: components["schemas"]["InventoryObject"][];
            };
        };
        /** @description Direct collection permission rows that one group grants to the principal (no inherited rows). */
        PrincipalPermissionGroup: {
            /** @description The granting group. */
            group: {
                id: components["schemas"]["Id"];
                identity_scope: string;
                name: string;
            };
            /** @description Rows ordered by collection_id, then permission. */
            permissions: {
                collection_id: components["schemas"]["Id"];
                permission: components["schemas"]["PermissionName"];
            }[];
        };
        PublicConfig: {
            authentication: {
                /** @description Lifetime of tokens issued without an explicit `expires_at` (`SVC_TOKEN_LIFETIME_HOURS`, default 24). */
                default_token_lifetime_hours: number;
                /** @description Largest accepted lifetime of an explicitly requested expiry (`SVC_MAX_TOKEN_LIFETIME_HOURS`, default 8760). */
                max_token_lifetime_hours: number;
            };
            pagination: {
                /** @description Page size when `limit` is omitted (100). */
                default_page_limit: number;
                /** @description Largest effective page size; larger `limit` values are clamped (250). */
                max_page_limit: number;
            };
        };
        /** @description A class reached by traversal, with its distance and one shortest path. */
        RelatedClass: {
            collection_id: components["schemas"]["Id"];
            created_at: components["schemas"]["Timestamp"];
            /** @description Number of relation hops from the start class. */
            depth: number;
            description: string;
            id: components["schemas"]["Id"];
            /** @description JSON Schema document or null. */
            json_schema: unknown;
            name: string;
            /** @description Class ids from the start class to this class, both included (length `depth` + 1). */
            path: components["schemas"]["Id"][];
            revision: components["schemas"]["Revision"];
            updated_at: components["schemas"]["Timestamp"];
            validate_schema: boolean;
        };
        /** @description An object reached by traversal, with its distance and one shortest path. */
        RelatedObject: {
            collection_id: components["schemas"]["Id"];
            created_at: components["schemas"]["Timestamp"];
            /** @description Number of relation hops from the start object. */
            depth: number;
            description: string;
            id: components["schemas"]["Id"];
            /** @description The object's JSON data. */
            json_data: unknown;
            name: string;
            /** @description Object ids from the start object to this object, both included (length `depth` + 1). */
            path: components["schemas"]["Id"][];
            revision: components["schemas"]["Revision"];
            svc_class_id: components["schemas"]["Id"];
            updated_at: components["schemas"]["Timestamp"];
        };
        RemoteTarget: {
            allowed_subject_types: ("collection" | "class" | "object" | "class_relation" | "object_relation")[];
            auth_config: components["schemas"]["RemoteTargetAuthConfig"];
            /** @description Template rendered to the exact outbound body; null sends no body for `get` and `delete` (and an empty body otherwise). */
            body_template: string | null;
            /** @description Class of object subjects; null unless `allowed_subject_types` contains `object`. */
            class_id: components["schemas"]["NullableId"];
            collection_id: components["schemas"]["Id"];
            created_at: components["schemas"]["Timestamp"];
            description: string;
            enabled: boolean;
            /** @description Header name to value template. */
            headers_template: {
                [key: string]: string;
            };
            id: components["schemas"]["Id"];
            /** @enum {string} */
            method: "get" | "post" | "patch" | "delete";
            name: string;
            revision: components["schemas"]["Revision"];
            /** @description Per-call timeout as stored; the effective timeout is capped by `SVC_REMOTE_CALL_TIMEOUT_MS`. */
            timeout_ms: number;
            updated_at: components["schemas"]["Timestamp"];
            /** @description Template of the outbound URL; the rendered URL must be HTTPS. */
            url_template: string;
        };
        /**
         * @description Outbound authentication. `secret` is a secret alias (letters, digits, underscores), never
         *     the secret value; the worker resolves it through the configured secret source at call
         *     time (a missing secret fails the task). `bearer_secret` sends `Authorization: Bearer
         *     <secret>`; `api_key_header` sends the secret in the named header, which may not be a
         *     transport-controlled header (Host, Content-Length, Transfer-Encoding, Connection,
         *     Keep-Alive, Proxy-Connection, Proxy-Authorization, TE, Trailer, Upgrade, HTTP2-Settings).
         */
        RemoteTargetAuthConfig: {
            /** @constant */
            type: "none";
        } | {
            secret: string;
            /** @constant */
            type: "bearer_secret";
        } | {
            /** @description HTTP header name (RFC 9110 token). */
            header: string;
            secret: string;
            /** @constant */
            type: "api_key_header";
        };
        RestoreConfirmRequest: {
            /** @constant */
            confirmation: "REPLACE ALL DATA";
            restore_capability: string;
            /** @description Must equal the staged document's SHA-256. */
            sha256: string;
        };
        RestoreCreated: {
            /** @description The stage must be confirmed before this time, 60 minutes after staging (then 410). */
            expires_at: components["schemas"]["Timestamp"];
            id: components["schemas"]["Id"];
            /** @description One-time secret for confirm and status; returned only here and stored only as a hash. */
            restore_capability: string;
            /** @description Lowercase hex SHA-256 of the uploaded bytes. */
            sha256: string;
            /**
             * @description A staged document is always fully validated.
             * @enum {string}
             */
            status: "validated";
        };
        RestoreStatus: {
            /** @enum {integer} */
            backup_version: 6 | 7;
            confirmed_at: components["schemas"]["NullableTimestamp"];
            created_at: components["schemas"]["Timestamp"];
            /** @description Public reason of a failed restore; null otherwise. */
            error: string | null;
            expires_at: components["schemas"]["Timestamp"];
            finished_at: components["schemas"]["NullableTimestamp"];
            id: components["schemas"]["Id"];
            sha256: string;
            /**
             * @description `validated` (staged), `confirmed` (being applied), `succeeded`, `failed` (nothing changed; see `error`), `expired` (not confirmed in time).
             * @enum {string}
             */
            status: "validated" | "confirmed" | "succeeded" | "failed" | "expired";
        };
        Revision: number;
        /** @enum {string} */
        ScopePermissionName: "ReadCollection" | "UpdateCollection" | "DeleteCollection" | "DelegateCollection" | "CreateClass" | "ReadClass" | "UpdateClass" | "DeleteClass" | "CreateObject" | "ReadObject" | "UpdateObject" | "DeleteObject" | "CreateClassRelation" | "ReadClassRelation" | "UpdateClassRelation" | "DeleteClassRelation" | "CreateObjectRelation" | "ReadObjectRelation" | "UpdateObjectRelation" | "DeleteObjectRelation" | "CreateTemplate" | "ReadTemplate" | "UpdateTemplate" | "DeleteTemplate" | "CreateRemoteTarget" | "ReadRemoteTarget" | "UpdateRemoteTarget" | "DeleteRemoteTarget" | "ExecuteRemoteTarget";
        /**
         * @description Recursive filter expression selected by `op`. Bounds per request: at most 64 nodes,
         *     nesting depth 8, 32 field predicates (counting related filters), 4 related predicates.
         *     Semantics are two-valued: a null column or missing JSON path never matches a positive
         *     predicate; `not` is the exact complement within the caller's visible universe.
         */
        SearchExpression: {
            args: components["schemas"]["SearchExpression"][];
            /** @constant */
            op: "and";
        } | {
            args: components["schemas"]["SearchExpression"][];
            /** @constant */
            op: "or";
        } | {
            arg: components["schemas"]["SearchExpression"];
            /** @constant */
            op: "not";
        } | {
            /** @constant */
            op: "field";
            predicate: components["schemas"]["SearchFieldPredicate"];
        } | {
            /** @constant */
            op: "related";
            predicate: components["schemas"]["SearchRelatedPredicate"];
        };
        /**
         * @description One typed predicate on a field of the target (see the field table of `searchStructured`).
         *     Operators by field type: text: equals, iequals, contains, icontains, startswith,
         *     istartswith, endswith, iendswith, like, regex, in, is_null; integer, revision, timestamp:
         *     equals, in, gt, gte, lt, lte, between, is_null; boolean: equals, is_null; JSON path: the
         *     text and ordered-comparison operators plus within_network, contains_network, contains_ip,
         *     overlaps_network, inet_equals, in, all, array_length, has_key, is_null. An operator not
         *     applicable to the field is 400.
         */
        SearchFieldPredicate: {
            /**
             * @description Field name; must be a filter field of the target kind (otherwise 400).
             * @enum {string}
             */
            field: "id" | "name" | "description" | "collection_id" | "created_at" | "updated_at" | "revision" | "json_data" | "validate_schema" | "json_schema" | "identity_scope" | "proper_name" | "email" | "occurred_at" | "entity_type" | "entity_id" | "entity_name" | "action" | "actor_kind" | "actor_user_id" | "initiator_user_id" | "summary" | "metadata" | "managed_by" | "external_key" | "last_sync_attempted_at" | "last_sync_success_at" | "owner_group_id" | "created_by" | "disabled_at";
            /** @enum {string} */
            operator: "equals" | "iequals" | "contains" | "icontains" | "startswith" | "istartswith" | "endswith" | "iendswith" | "like" | "regex" | "in" | "is_null" | "gt" | "gte" | "lt" | "lte" | "between" | "within_network" | "contains_network" | "contains_ip" | "overlaps_network" | "inet_equals" | "all" | "array_length" | "has_key";
            /** @description Dotted JSON path (e.g. `hardware.cpu.count`, `nics.mac-address`) of non-empty object keys separated by dots (a key cannot contain a dot or a control character); required for the JSON fields `json_data`, `json_schema`, `metadata` and rejected for every other field. */
            path?: string;
            /**
             * @description Required for every operator except `is_null`, which takes no value (wrap it in `not`
             *     for IS NOT NULL). A scalar, or an array of 1..50 scalars for `in`, `all` and the two
             *     bounds of `between`. Array strings may not contain commas. Timestamps are RFC 3339;
             *     addresses and networks are IP forms. A stored value that cannot be converted does not
             *     match.
             */
            value?: string | number | boolean | (string | number | boolean)[];
        };
        /**
         * @description True when at least one object of `class` that matches every filter is reachable from the
         *     candidate over a permission-visible bidirectional relation path of at most `depth` hops.
         *     Hidden objects or relations never make it true. Needs ReadClass on the class and
         *     ReadObject and ReadObjectRelation along the path.
         */
        SearchRelatedPredicate: {
            /** @description Exact class selector of the related objects, with exactly one of `id` or `name`. */
            class: {
                id: components["schemas"]["Id"];
            } | {
                name: string;
            };
            /** @default 1 */
            depth: number;
            /**
             * @description Field predicates on the related objects (object fields), combined with AND; default empty (any related object of the class).
             * @default []
             */
            filters: components["schemas"]["SearchFieldPredicate"][];
        };
        /**
         * @description One result tagged with its kind; `resource` is the same public representation as the
         *     resource's list endpoint (classes in expanded form; audit events with related-only
         *     snapshots redacted).
         */
        SearchResult: {
            /** @constant */
            kind: "collection";
            resource: components["schemas"]["Collection"];
        } | {
            /** @constant */
            kind: "class";
            resource: components["schemas"]["ClassExpanded"];
        } | {
            /** @constant */
            kind: "object";
            resource: components["schemas"]["InventoryObject"];
        } | {
            /** @constant */
            kind: "audit_event";
            resource: components["schemas"]["Event"];
        } | {
            /** @constant */
            kind: "user";
            resource: components["schemas"]["User"];
        } | {
            /** @constant */
            kind: "group";
            resource: components["schemas"]["Group"];
        } | {
            /** @constant */
            kind: "service_account";
            resource: components["schemas"]["ServiceAccount"];
        };
        SearchSortEntry: {
            /**
             * @default asc
             * @enum {string}
             */
            direction: "asc" | "desc";
            /**
             * @description A sort field of the target kind (otherwise 400).
             * @enum {string}
             */
            field: "id" | "name" | "description" | "collection_id" | "created_at" | "updated_at" | "revision" | "identity_scope" | "proper_name" | "email" | "occurred_at";
        };
        /**
         * @description The resource kind searched. Only an `object` target may carry `class` (any other kind with
         *     `class` is 400); the selector is resolved exactly before execution (unresolved: 404) and
         *     the class must be readable (ReadClass).
         */
        SearchTarget: {
            /** @description Exact class selector with exactly one of `id` or `name`. */
            class?: {
                id: components["schemas"]["Id"];
            } | {
                name: string;
            };
            /** @enum {string} */
            kind: "collection" | "class" | "object" | "audit_event" | "user" | "group" | "service_account";
        };
        /** @description Service-account profile (shares its id with the principal). */
        ServiceAccount: {
            created_at: components["schemas"]["Timestamp"];
            /** @description Principal id of the creator; null when created by the system or an import. */
            created_by: components["schemas"]["NullableId"];
            /** @description Free text; the empty string when not set (a null in a create or update body stores the empty string). */
            description: string | null;
            /** @description Null while enabled. */
            disabled_at: components["schemas"]["NullableTimestamp"];
            id: components["schemas"]["Id"];
            identity_scope: string;
            /** @description Unique within the identity scope. */
            name: string;
            /** @description Group whose human members manage the account; grants no runtime permission. */
            owner_group_id: components["schemas"]["Id"];
            revision: components["schemas"]["Revision"];
            updated_at: components["schemas"]["Timestamp"];
        };
        /** @description A principal settings document and its revision. */
        SettingsDocument: {
            /** @description Advances on every changing mutation; 1 for a document never written. */
            revision: components["schemas"]["Revision"];
            /** @description The settings document: a JSON object at its root (default `{}`), nested values of any JSON type. */
            settings: unknown;
        };
        SinkPreview: {
            /**
             * @description The rendered payload, by kind. webhook: the JSON request body (the `body_template`
             *     result, or the event envelope). amqp: the message body (the event envelope).
             *     redis_stream: the entry fields as an object of strings (`event_id`, `entity_type`,
             *     `entity_name`, `action`, `actor_kind`, and `payload` holding the JSON-encoded envelope).
             *     email: `{from, reply_to, to, cc, bcc, subject, body}` (`reply_to` may be null; address
             *     lists are arrays of strings).
             */
            payload: unknown;
            /** @enum {string} */
            sink_kind: "webhook" | "amqp" | "redis_stream" | "email";
        };
        SinkPreviewRequest: {
            /**
             * Format: uuid
             * @description The event's UUID (`event_id` of the envelope).
             */
            event_id: string;
            subscription_id: components["schemas"]["Id"];
        };
        /**
         * @description Structured search request, DSL version 1 (at most 64 KiB). New optional members and enum
         *     values may be added within version 1; unknown members are always 400.
         * @example {
         *       "version": 1,
         *       "target": {
         *         "kind": "object",
         *         "class": {
         *           "name": "Server"
         *         }
         *       },
         *       "filter": {
         *         "op": "and",
         *         "args": [
         *           {
         *             "op": "field",
         *             "predicate": {
         *               "field": "description",
         *               "operator": "icontains",
         *               "value": "production"
         *             }
         *           },
         *           {
         *             "op": "not",
         *             "arg": {
         *               "op": "related",
         *               "predicate": {
         *                 "class": {
         *                   "name": "Room"
         *                 },
         *                 "filters": [
         *                   {
         *                     "field": "json_data",
         *                     "path": "status",
         *                     "operator": "equals",
         *                     "value": "retired"
         *                   }
         *                 ],
         *                 "depth": 2
         *               }
         *             }
         *           }
         *         ]
         *       },
         *       "sort": [
         *         {
         *           "field": "name",
         *           "direction": "asc"
         *         }
         *       ],
         *       "limit": 100,
         *       "include_total": false
         *     }
         */
        StructuredSearchRequest: {
            /** @description Opaque `next` cursor of a previous response to the identical request with the same token; anything else is 400. */
            cursor?: string | null;
            /** @description Optional filter expression; omitted or null matches everything visible. */
            filter?: components["schemas"]["SearchExpression"] | null;
            /**
             * @description When true, `total` and X-Total-Count carry the exact number of visible matches.
             * @default false
             */
            include_total: boolean;
            /** @description Page size; default is the configured page limit (100); larger values are clamped to the maximum page limit (250). */
            limit?: number;
            /** @description Sort keys (each field at most once); empty or omitted uses the target's default order. An id tie-breaker is always appended. */
            sort?: components["schemas"]["SearchSortEntry"][];
            target: components["schemas"]["SearchTarget"];
            /**
             * @description DSL version; must be 1.
             * @constant
             */
            version: 1;
        };
        StructuredSearchResponse: {
            /**
             * @description The searched target kind.
             * @enum {string}
             */
            kind: "collection" | "class" | "object" | "audit_event" | "user" | "group" | "service_account";
            /** @description Cursor of the next page (also in X-Next-Cursor); null when there are no more results. */
            next: string | null;
            results: components["schemas"]["SearchResult"][];
            /** @description Exact number of visible matches when `include_total` was true; otherwise null. */
            total: number | null;
            /** @constant */
            version: 1;
        };
        /**
         * @description Optional narrowing of the subscription (default `{}` = match all). Populated members combine
         *     with AND, values inside one member with OR; omitted or empty members match everything. The
         *     filter can only narrow the subscription's scope. Returned as stored.
         */
        SubscriptionFilter: {
            actor_kinds?: ("user" | "system" | "worker")[];
            /** @description Actor principal ids. */
            actor_user_ids?: number[];
            /** @description Events directly attached to one of these collections (not allowed on system subscriptions). */
            collection_ids?: number[];
            /** @description Correlation ids, matched exactly. */
            correlation_ids?: string[];
            /** @description Affected entity ids. */
            entity_ids?: number[];
            /** @description Affected entity names, matched exactly. */
            entity_names?: string[];
            /** @description Root task initiator principal ids. */
            initiator_user_ids?: number[];
            /** @description Events referencing one of these related collections (not allowed on system subscriptions). */
            related_collection_ids?: number[];
            /** @description Request UUIDs. */
            request_ids?: string[];
            /** @description Task kinds recorded in task-event metadata; events without that metadata do not match. */
            task_kinds?: ("import" | "export" | "remote_call" | "backup" | "restore")[];
        };
        /**
         * @description Per-subscription destination, validated against the sink's kind (400; members of other kinds
         *     are rejected). Default `{}`.
         *     - webhook: `url` required, unless the sink has `config.url_secret_ref` (then `url` is rejected).
         *     - amqp: no members (routing key is `<entity_type>.<action>`).
         *     - redis_stream: `stream` required.
         *     - email: `recipients` (or its alias `to`, not both) required; `cc`, `bcc` optional; each
         *       entry one address; at most 100 addresses in all.
         *     Responses return `to` as `recipients`.
         */
        SubscriptionRouting: {
            /** @description email: Bcc addresses. */
            bcc?: string[];
            /** @description email: Cc addresses. */
            cc?: string[];
            /** @description email: To addresses, e.g. `Ops <ops@example.com>`. */
            recipients?: string[];
            /**
             * @description redis_stream: stream key (at most 1,024 bytes). Each entry has the fields `event_id`, `entity_type`,
             *     `entity_name`, `action`, `actor_kind` and `payload` (the JSON envelope); test sends add
             *     `delivery_purpose` = `test`.
             */
            stream?: string;
            /** @description email: alias of `recipients` (request only). */
            to?: string[];
            /**
             * Format: uri
             * @description webhook: HTTPS destination URL without embedded credentials; destination screening happens at send time.
             */
            url?: string;
        };
        Task: {
            /**
             * @description True once a cancel was requested (POST /api/v1/tasks/{task_id}/cancel). A `validating` or
             *     `running` task keeps its status until the worker reaches its next checkpoint and ends
             *     `cancelled`. Always present in task responses.
             */
            cancel_requested?: boolean;
            created_at: components["schemas"]["Timestamp"];
            /** @description Kind-specific details object or null. */
            details: unknown;
            finished_at: components["schemas"]["NullableTimestamp"];
            id: components["schemas"]["Id"];
            /** @enum {string} */
            kind: "import" | "export" | "remote_call" | "backup" | "restore";
            links: {
                events: string | null;
                export: string | null;
                export_output: string | null;
                import: string | null;
                import_results: string | null;
                task: string | null;
            };
            progress: {
                failed_items: number;
                processed_items: number;
                success_items: number;
                total_items: number;
            };
            started_at: components["schemas"]["NullableTimestamp"];
            /** @enum {string} */
            status: "queued" | "validating" | "running" | "succeeded" | "failed" | "partially_succeeded" | "cancelled";
            submitted_by: number;
            /** @description Kind-specific summary object or null. */
            summary: unknown;
        };
        TaskEvent: {
            created_at: components["schemas"]["Timestamp"];
            /** @description Event data or null. */
            data: unknown;
            event_type: string;
            id: components["schemas"]["Id"];
            message: string;
            task_id: components["schemas"]["Id"];
        };
        /** Format: date-time */
        Timestamp: string;
        /** @description Token metadata; the raw token value and its hash are never returned here. */
        Token: {
            /** @description Not revoked, not expired and not owned by a disabled service account (the validation rule). */
            active: boolean;
            description: string | null;
            /** @description Effective expiry has passed, independent of revocation. */
            expired: boolean;
            /** @description Authoritative expiry; always set for newly issued tokens, null only for legacy rows (then issued + SVC_TOKEN_LIFETIME_HOURS applies). */
            expires_at: components["schemas"]["NullableTimestamp"];
            id: components["schemas"]["Id"];
            issued: components["schemas"]["Timestamp"];
            /** @description Advanced on every successful validation; null if never used. */
            last_used_at: components["schemas"]["NullableTimestamp"];
            name: string | null;
            principal_id: components["schemas"]["Id"];
            revision: components["schemas"]["Revision"];
            /** @description Soft-revoke time; null while not revoked. */
            revoked_at: components["schemas"]["NullableTimestamp"];
            scope: components["schemas"]["TokenScope"];
        };
        /** @description Unknown members are 400. */
        TokenMintRequest: {
            /** @description Optional label. */
            description?: string | null;
            /** @description Requested expiry: later than the issuance time and at most issued + SVC_MAX_TOKEN_LIFETIME_HOURS (default 8760 h), else 400. Omitted: issued + SVC_TOKEN_LIFETIME_HOURS (default 24 h). Resolved when the approval is created and copied into the mint. */
            expires_at?: components["schemas"]["Timestamp"];
            /** @description Optional label. */
            name?: string | null;
            /** @description Omitted or null: unscoped. Empty lists, unknown permission names, duplicate, nonpositive or nonexistent resources and more than 1,000 resources are 400. */
            scope?: components["schemas"]["TokenScope"];
        };
        /** @description Unknown members are 400. An absent body equals `{}`. */
        TokenRenewRequest: {
            /** @description Expiry of the new token, with the same bounds as minting; omitted: now + SVC_TOKEN_LIFETIME_HOURS. Resolved when the approval is created. */
            expires_at?: components["schemas"]["Timestamp"];
        };
        /**
         * @description A newly issued raw bearer token, returned only once (login, token mint, token renewal).
         *     Only a keyed hash of it is stored.
         */
        TokenResponse: {
            /** @description Authoritative expiry of the token. */
            expires_at: components["schemas"]["Timestamp"];
            /** @description Raw bearer token (random 256-bit value, base64url). */
            token: string;
        };
        /** @description Token scope; null means unscoped. A present object has at least one member. */
        TokenScope: {
            permissions?: string[];
            resources?: {
                id: number;
                /** @enum {string} */
                kind: "collection" | "class" | "object";
            }[];
        } | null;
        /** @description All members optional; omitted members are unchanged. */
        UpdateClass: {
            /** @description Moves the class (and its objects) to this collection; needs CreateClass there. */
            collection_id?: components["schemas"]["Id"];
            description?: string;
            /**
             * @description Replacement JSON Schema 2020-12 document; null removes the schema (then
             *     `validate_schema` must be false).
             */
            json_schema?: unknown;
            /** @description Globally unique (409 otherwise). */
            name?: string;
            validate_schema?: boolean;
        };
        /** @description Body of `updateCollection`; omitted members stay unchanged. */
        UpdateCollection: {
            description?: string;
            /** @description Unique among the siblings under the same parent. */
            name?: string;
        };
        /** @description All members optional; omitted members are unchanged. `key` and `class_id` are immutable. */
        UpdateComputedField: {
            description?: string;
            enabled?: boolean;
            label?: string;
            operation?: components["schemas"]["ComputedFieldOperation"];
            /** @enum {string} */
            result_type?: "string" | "number" | "integer" | "boolean" | "object" | "array";
        };
        /** @description Partial update; at least one member. Omitted members stay unchanged. */
        UpdateEventSink: {
            config?: components["schemas"]["EventSinkConfig"];
            delivery_policy?: components["schemas"]["DeliveryPolicy"];
            /** @description false stops new deliveries (fan-out skips the sink); history is kept. */
            enabled?: boolean;
            /**
             * @description Changing the kind usually needs a new `config` too; 409 while subscriptions use the sink.
             * @enum {string}
             */
            kind?: "webhook" | "amqp" | "redis_stream" | "email";
            name?: string;
            /** @description New alias, or null to clear it. */
            secret_ref?: string | null;
        };
        /** @description Partial update; at least one member. Omitted members stay unchanged. */
        UpdateEventSubscription: {
            actions?: string[];
            description?: string;
            /** @description false stops new deliveries; history is kept. */
            enabled?: boolean;
            entity_types?: string[];
            filter?: components["schemas"]["SubscriptionFilter"];
            name?: string;
            routing?: components["schemas"]["SubscriptionRouting"];
            sink_id?: components["schemas"]["Id"];
        };
        /** @description Every member is optional; omitted members stay unchanged. */
        UpdateExportTemplate: {
            /** @description Moves the template; needs CreateTemplate on the destination. */
            collection_id?: components["schemas"]["Id"];
            /** @enum {string} */
            content_type?: "text/plain" | "text/html" | "text/csv" | "application/json";
            /** @description `null` clears the default query. */
            default_query?: string | null;
            description?: string;
            /** @enum {string} */
            kind?: "export" | "fragment";
            name?: string;
            template?: string;
        };
        /** @description Partial update; omitted members stay unchanged, null clears `description` (it is then returned as the empty string). */
        UpdateGroup: {
            description?: string | null;
            /** @description 1..255 characters; unique within the identity scope (409 otherwise). */
            name?: string;
        };
        /** @description All members optional; omitted members are unchanged. */
        UpdateObject: {
            description?: string;
            /** @description Replaces the whole JSON data; validated against the class schema when `validate_schema` is true. */
            json_data?: unknown;
            /** @description Unique within the class (409 otherwise). */
            name?: string;
        };
        /** @description Partial update; omitted members are unchanged. The resulting target must satisfy the create rules. */
        UpdateRemoteTarget: {
            allowed_subject_types?: ("collection" | "class" | "object" | "class_relation" | "object_relation")[];
            auth_config?: components["schemas"]["RemoteTargetAuthConfig"];
            /** @description Omitted leaves it unchanged; null clears it. */
            body_template?: string | null;
            /** @description Null clears it. */
            class_id?: components["schemas"]["NullableId"];
            /** @description Moving needs CreateRemoteTarget on the destination collection. */
            collection_id?: components["schemas"]["Id"];
            description?: string;
            enabled?: boolean;
            /** @description Replaces the whole header template map. */
            headers_template?: {
                [key: string]: string;
            };
            /** @enum {string} */
            method?: "get" | "post" | "patch" | "delete";
            name?: string;
            timeout_ms?: number;
            url_template?: string;
        };
        /** @description Partial update; omitted members stay unchanged, null clears `description` (it is then returned as the empty string). */
        UpdateServiceAccount: {
            description?: string | null;
            /** @description New owner group; must exist (404). A non-admin must be a member of the new group too (403). */
            owner_group_id?: components["schemas"]["Id"];
        };
        /** @description Partial update; omitted members stay unchanged, null clears `email` or `proper_name`. Changing `password` needs a credential approval. */
        UpdateUser: {
            email?: string | null;
            /** @description New password, 1..4096 characters; needs header `X-Svc-Credential-Approval` (kind `update_user`). Existing tokens stay valid. */
            password?: string;
            proper_name?: string | null;
        };
        /** @description Human user profile (shares its id with the principal). */
        User: {
            created_at: components["schemas"]["Timestamp"];
            email: string | null;
            id: components["schemas"]["Id"];
            /** @description `local` or a directory provider scope. */
            identity_scope: string;
            /** @description Login and display name; unique within the identity scope. */
            name: string;
            proper_name: string | null;
            revision: components["schemas"]["Revision"];
            updated_at: components["schemas"]["Timestamp"];
        };
    };
    responses: {
        /** @description Invalid input. */
        BadRequest: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description Conflict. */
        Conflict: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description Error (any status not listed explicitly, including 500 and 501 Not Implemented). */
        Error: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description Not allowed. */
        Forbidden: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description Expired. */
        Gone: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description Not found. */
        NotFound: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description Body or value too large. */
        PayloadTooLarge: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description If-Match does not match; the current ETag is returned. */
        PreconditionFailed: {
            headers: {
                ETag: components["headers"]["ETag"];
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description A dependency is unavailable. */
        ServiceUnavailable: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description Rate limited. */
        TooManyRequests: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description Missing, invalid, revoked or expired token. */
        Unauthorized: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description Unsupported content type. */
        UnsupportedMediaType: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
    };
    parameters: {
        /**
         * @description Grouping dimension, repeated up to 3 times, in order: `name`, `description`,
         *     `collection_id`, `created_at`, `updated_at`, `json_data.<comma-separated-path>` (e.g.
         *     `json_data.metrics,cpu`), `computed.shared.<key>`, `computed.personal.<key>`.
         */
        AggregateGroupBy: string[];
        /**
         * @description Measure `<operation>:<field>`, repeated up to 4 times. Operations `sum`, `average`, `min`,
         *     `max`; fields `json_data.<comma-separated-path>`, `computed.shared.<key>`,
         *     `computed.personal.<key>`. Example `aggregate=sum:json_data.metrics,cpu`.
         */
        AggregateMeasure: string[];
        /** @description Row order (default `dimensions.asc`, dimensions compared in `group_by` order). */
        AggregateSort: "dimensions.asc" | "dimensions.desc" | "object_count.asc" | "object_count.desc";
        /** @description Class id. */
        ClassIdPath: number;
        /** @description `collection` returns the expanded class (`collection` object in place of `collection_id`). */
        ClassInclude: "collection";
        /** @description Exact class name; numeric-looking values are names, not ids. */
        ClassNamePath: string;
        /** @description Class-relation id. */
        ClassRelationIdPath: number;
        /** @description Computed-field id. */
        ComputedFieldIdPath: number;
        /** @description Id of a fresh credential approval for this exact operation. */
        CredentialApproval: string;
        /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
        Cursor: string;
        EvAction: string;
        EvActorKind: "user" | "worker" | "system";
        EvActorUserId: number;
        EvAfterRevision: number;
        EvBeforeRevision: number;
        EvCollectionId: number;
        EvEntityId: number;
        EvEntityType: string;
        EvInitiatorUserId: number;
        /** @description RFC 3339 or YYYY-MM-DD. */
        EvOccurredAfter: string;
        /** @description RFC 3339 or YYYY-MM-DD. */
        EvOccurredBefore: string;
        /** @description `id` or `occurred_at`, `-` prefix for descending (default `-id`). */
        EvSort: string;
        /** @description 1..255 bytes; the same key and submission returns the same task, a different submission 409. */
        IdempotencyKey: string;
        /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
        IfMatch: string;
        /** @description Whether to return X-Total-Count (default true). */
        IncludeTotal: boolean;
        /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
        Limit: number;
        /**
         * @description List filters of the query language: `field=value`, `field__<op>=value`, `field__not_<op>=value`.
         *     Unknown fields or operators are 400. See the list query language in the API description.
         */
        ListFilters: {
            [key: string]: string;
        };
        /** @description Object id; the object must belong to the class in the path (404 otherwise). */
        ObjectIdPath: number;
        /** @description `computed` adds the `computed` member (shared and personal computed-field values). */
        ObjectInclude: "computed";
        /** @description Exact object name within the class. */
        ObjectNamePath: string;
        /** @description Object-relation id. */
        ObjectRelationIdPath: number;
        /** @description Maximum number of relation hops, in either direction (default 1). */
        RelatedDepth: number;
        /** @description Only return related objects of this class. */
        RelatedObjectsClassId: number;
        /** @description Remote target id. */
        RemoteTargetId: number;
        /** @description The one-time `restore_capability` returned when the restore was staged. */
        RestoreCapability: string;
        /** @description Also match class JSON schema text (default false). */
        SearchClassSchema: boolean;
        /** @description Opaque cursor from `next.classes`, passed back unchanged. */
        SearchCursorClasses: string;
        /** @description Opaque cursor from `next.collections`, passed back unchanged. */
        SearchCursorCollections: string;
        /** @description Opaque cursor from `next.objects`, passed back unchanged. */
        SearchCursorObjects: string;
        /** @description Comma-separated subset of `collection`, `class`, `object` (default: all three). Empty or unknown values are 400. */
        SearchKinds: ("collection" | "class" | "object")[];
        /** @description Page size per kind (default 100); larger values are clamped to 250, 0 or negative is 400. The effective value is returned in X-Page-Limit. */
        SearchLimitPerKind: number;
        /** @description Also match string values inside object `json_data` (default false). */
        SearchObjectData: boolean;
        /** @description Plain-text query, trimmed; blank after trimming is 400; at most 256 characters. */
        SearchQ: string;
        /** @description Comma-separated sort fields, `-field` or `field.desc` for descending, at most 8; an id tie-breaker is appended. */
        Sort: string;
    };
    requestBodies: never;
    headers: {
        /** @description Always `no-store`. */
        CacheControlNoStore: "no-store";
        /** @description Strong opaque entity tag of the returned resource. */
        ETag: string;
        /** @description Path of the created resource. */
        Location: string;
        /** @description Opaque cursor of the next page; omitted when there are no more results. */
        XNextCursor: string;
        /** @description Effective page size. */
        XPageLimit: number;
        /** @description Exact number of matches independent of paging; omitted when include_total=false. */
        XTotalCount: number;
    };
    pathItems: never;
}
export type $defs = Record<string, never>;
export interface operations {
    getOpenApiDocument: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The OpenAPI document. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        [key: string]: unknown;
                    };
                };
            };
            default: components["responses"]["Error"];
        };
    };
    login: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["LoginRequest"];
            };
        };
        responses: {
            /** @description Logged in. The raw token is returned only here and is never retrievable again. */
            200: {
                headers: {
                    "Cache-Control": components["headers"]["CacheControlNoStore"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["TokenResponse"];
                };
            };
            400: components["responses"]["BadRequest"];
            /**
             * @description Login failed. The message is generic and does not say whether the name, the password,
             *     the identity scope or the principal kind was wrong.
             */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Too many failed login attempts for this name and client address, address or subnet. */
            429: {
                headers: {
                    /** @description Whole seconds until the lockout ends (at least 1; 1 while earlier attempts are still being checked). */
                    "Retry-After": number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            default: components["responses"]["Error"];
        };
    };
    logout: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Token revoked. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Message"];
                };
            };
            401: components["responses"]["Unauthorized"];
            default: components["responses"]["Error"];
        };
    };
    logoutAll: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description All tokens of the caller revoked. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Message"];
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            default: components["responses"]["Error"];
        };
    };
    logoutToken: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["LogoutTokenRequest"];
            };
        };
        responses: {
            /** @description Token revoked (or already revoked). */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Message"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    logoutUser: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Principal id. */
                user_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description All tokens of the principal revoked. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Message"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    listAuthProviders: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Configured provider names. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AuthProviders"];
                };
            };
            default: components["responses"]["Error"];
        };
    };
    validateToken: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Token is valid. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Message"];
                };
            };
            401: components["responses"]["Unauthorized"];
            default: components["responses"]["Error"];
        };
    };
    getMetaCounts: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Counters. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["MetaCounts"];
                };
            };
            401: components["responses"]["Unauthorized"];
            default: components["responses"]["Error"];
        };
    };
    getMetaDb: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Database state. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["MetaDb"];
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description Database diagnostics are unavailable for the configured storage backend. */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            default: components["responses"]["Error"];
        };
    };
    getLoginRateLimitState: {
        parameters: {
            query?: {
                /** @description `locked` (default): only keys currently locked out; `all`: every tracked key. */
                include?: "locked" | "all";
                /** @description Case-insensitive substring of the key's `identifier`. */
                q?: string;
                /** @description Only keys of this kind. Omitted means all kinds. */
                scope?: "user_ip" | "ip" | "subnet";
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Limiter configuration and tracked keys. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["LoginRateLimitState"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description The shared login limiter backend is unavailable. */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            default: components["responses"]["Error"];
        };
    };
    clearLoginRateLimits: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description All entries cleared. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["LoginRateLimitCleared"];
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description The shared login limiter backend is unavailable. */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            default: components["responses"]["Error"];
        };
    };
    releaseLoginRateLimitEntry: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Opaque entry id (base64url, no padding), passed back unchanged. */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Entry released (`cleared` is 1). */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["LoginRateLimitCleared"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            /** @description The shared login limiter backend is unavailable. */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            default: components["responses"]["Error"];
        };
    };
    getMetaTasks: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Task queue and worker state. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["MetaTasks"];
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            default: components["responses"]["Error"];
        };
    };
    getAdminConfig: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Effective configuration with secrets redacted. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AdminConfig"];
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            default: components["responses"]["Error"];
        };
    };
    createBackup: {
        parameters: {
            query?: never;
            header?: {
                /** @description 1..255 bytes; the same key and submission returns the same task, a different submission 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["BackupRequest"];
            };
        };
        responses: {
            /** @description Backup task accepted. */
            202: {
                headers: {
                    Location: components["headers"]["Location"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Task"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            409: components["responses"]["Conflict"];
            429: components["responses"]["TooManyRequests"];
            default: components["responses"]["Error"];
        };
    };
    getBackup: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Id of the backup task. */
                task_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The backup task. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Task"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    getBackupOutput: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Id of the backup task. */
                task_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The backup document. */
            200: {
                headers: {
                    "Cache-Control": components["headers"]["CacheControlNoStore"];
                    /** @description Always an attachment: `attachment; filename="svc-backup-<task_id>.json"`. */
                    "Content-Disposition": string;
                    /** @description Base64 SHA-256 of the body (RFC 3230): `SHA-256=<base64>`. */
                    Digest: string;
                    /** @description Lowercase hexadecimal SHA-256 of the body (the `sha256` a restore confirms). */
                    "X-Svc-Backup-SHA256": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["BackupDocument"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            410: components["responses"]["Gone"];
            default: components["responses"]["Error"];
        };
    };
    listClasses: {
        parameters: {
            query?: {
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                /**
                 * @description List filters of the query language: `field=value`, `field__<op>=value`, `field__not_<op>=value`.
                 *     Unknown fields or operators are 400. See the list query language in the API description.
                 */
                filters?: components["parameters"]["ListFilters"];
                /** @description Whether to return X-Total-Count (default true). */
                include_total?: components["parameters"]["IncludeTotal"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
                /** @description Comma-separated sort fields, `-field` or `field.desc` for descending, at most 8; an id tie-breaker is appended. */
                sort?: components["parameters"]["Sort"];
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of expanded classes. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    "X-Total-Count": components["headers"]["XTotalCount"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ClassExpanded"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            default: components["responses"]["Error"];
        };
    };
    createClass: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["NewClass"];
            };
        };
        responses: {
            /** @description Created; `Location` is `/api/v1/classes/{class_id}`. */
            201: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    Location: components["headers"]["Location"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ClassExpanded"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            default: components["responses"]["Error"];
        };
    };
    getClass: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Class id. */
                class_id: components["parameters"]["ClassIdPath"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The expanded class. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ClassExpanded"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    deleteClass: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description Class id. */
                class_id: components["parameters"]["ClassIdPath"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted. */
            204: {
                headers: {
                    /** @description Entity tag of the deleted class's last revision. */
                    ETag?: string;
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            412: components["responses"]["PreconditionFailed"];
            default: components["responses"]["Error"];
        };
    };
    updateClass: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description Class id. */
                class_id: components["parameters"]["ClassIdPath"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["UpdateClass"];
            };
        };
        responses: {
            /** @description The updated expanded class. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ClassExpanded"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            412: components["responses"]["PreconditionFailed"];
            default: components["responses"]["Error"];
        };
    };
    getObject: {
        parameters: {
            query?: {
                /** @description `computed` adds the `computed` member (shared and personal computed-field values). */
                include?: components["parameters"]["ObjectInclude"];
            };
            header?: never;
            path: {
                /** @description Class id. */
                class_id: components["parameters"]["ClassIdPath"];
                /** @description Object id; the object must belong to the class in the path (404 otherwise). */
                object_id: components["parameters"]["ObjectIdPath"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The object. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["InventoryObject"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    deleteObject: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description Class id. */
                class_id: components["parameters"]["ClassIdPath"];
                /** @description Object id; the object must belong to the class in the path (404 otherwise). */
                object_id: components["parameters"]["ObjectIdPath"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            412: components["responses"]["PreconditionFailed"];
            default: components["responses"]["Error"];
        };
    };
    updateObject: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description Class id. */
                class_id: components["parameters"]["ClassIdPath"];
                /** @description Object id; the object must belong to the class in the path (404 otherwise). */
                object_id: components["parameters"]["ObjectIdPath"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["UpdateObject"];
            };
        };
        responses: {
            /** @description The updated object. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["InventoryObject"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            412: components["responses"]["PreconditionFailed"];
            default: components["responses"]["Error"];
        };
    };
    patchObjectData: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description Class id. */
                class_id: components["parameters"]["ClassIdPath"];
                /** @description Object id; the object must belong to the class in the path (404 otherwise). */
                object_id: components["parameters"]["ObjectIdPath"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json-patch+json": components["schemas"]["ObjectJsonPatch"];
            };
        };
        responses: {
            /** @description The updated object. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["InventoryObject"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            412: components["responses"]["PreconditionFailed"];
            415: components["responses"]["UnsupportedMediaType"];
            default: components["responses"]["Error"];
        };
    };
    listObjectEvents: {
        parameters: {
            query?: {
                action?: components["parameters"]["EvAction"];
                actor_kind?: components["parameters"]["EvActorKind"];
                actor_user_id?: components["parameters"]["EvActorUserId"];
                after_revision?: components["parameters"]["EvAfterRevision"];
                before_revision?: components["parameters"]["EvBeforeRevision"];
                collection_id?: components["parameters"]["EvCollectionId"];
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                entity_id?: components["parameters"]["EvEntityId"];
                entity_type?: components["parameters"]["EvEntityType"];
                /**
                 * @description List filters of the query language: `field=value`, `field__<op>=value`, `field__not_<op>=value`.
                 *     Unknown fields or operators are 400. See the list query language in the API description.
                 */
                filters?: components["parameters"]["ListFilters"];
                /** @description Whether to return X-Total-Count (default true). */
                include_total?: components["parameters"]["IncludeTotal"];
                initiator_user_id?: components["parameters"]["EvInitiatorUserId"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
                /** @description RFC 3339 or YYYY-MM-DD. */
                occurred_after?: components["parameters"]["EvOccurredAfter"];
                /** @description RFC 3339 or YYYY-MM-DD. */
                occurred_before?: components["parameters"]["EvOccurredBefore"];
                /** @description `id` or `occurred_at`, `-` prefix for descending (default `-id`). */
                sort?: components["parameters"]["EvSort"];
            };
            header?: never;
            path: {
                /** @description Class id. */
                class_id: components["parameters"]["ClassIdPath"];
                /** @description Object id; the object must belong to the class in the path (404 otherwise). */
                object_id: components["parameters"]["ObjectIdPath"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of audit events. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    "X-Total-Count": components["headers"]["XTotalCount"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Event"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    listRelatedObjects: {
        parameters: {
            query?: {
                /** @description Only return related objects of this class. */
                class_id?: components["parameters"]["RelatedObjectsClassId"];
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                /** @description Maximum number of relation hops, in either direction (default 1). */
                depth?: components["parameters"]["RelatedDepth"];
                /** @description Whether to return X-Total-Count (default true). */
                include_total?: components["parameters"]["IncludeTotal"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
                /** @description Comma-separated sort fields, `-field` or `field.desc` for descending, at most 8; an id tie-breaker is appended. */
                sort?: components["parameters"]["Sort"];
            };
            header?: never;
            path: {
                /** @description Class id. */
                class_id: components["parameters"]["ClassIdPath"];
                /** @description Object id; the object must belong to the class in the path (404 otherwise). */
                object_id: components["parameters"]["ObjectIdPath"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of related objects. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    "X-Total-Count": components["headers"]["XTotalCount"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RelatedObject"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    listClassComputedFields: {
        parameters: {
            query?: {
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                /**
                 * @description List filters of the query language: `field=value`, `field__<op>=value`, `field__not_<op>=value`.
                 *     Unknown fields or operators are 400. See the list query language in the API description.
                 */
                filters?: components["parameters"]["ListFilters"];
                /** @description Whether to return X-Total-Count (default true). */
                include_total?: components["parameters"]["IncludeTotal"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
                /** @description Comma-separated sort fields, `-field` or `field.desc` for descending, at most 8; an id tie-breaker is appended. */
                sort?: components["parameters"]["Sort"];
            };
            header?: never;
            path: {
                /** @description Class id. */
                class_id: components["parameters"]["ClassIdPath"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of shared computed fields. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    "X-Total-Count": components["headers"]["XTotalCount"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ComputedField"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    createClassComputedField: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Class id. */
                class_id: components["parameters"]["ClassIdPath"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["NewComputedField"];
            };
        };
        responses: {
            /** @description Created; `Location` is `/api/v1/classes/{class_id}/computed-fields/{field_id}`. */
            201: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    Location: components["headers"]["Location"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ComputedField"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            default: components["responses"]["Error"];
        };
    };
    getClassComputedField: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Class id. */
                class_id: components["parameters"]["ClassIdPath"];
                /** @description Computed-field id. */
                field_id: components["parameters"]["ComputedFieldIdPath"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The computed field. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ComputedField"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    deleteClassComputedField: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description Class id. */
                class_id: components["parameters"]["ClassIdPath"];
                /** @description Computed-field id. */
                field_id: components["parameters"]["ComputedFieldIdPath"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            412: components["responses"]["PreconditionFailed"];
            default: components["responses"]["Error"];
        };
    };
    updateClassComputedField: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description Class id. */
                class_id: components["parameters"]["ClassIdPath"];
                /** @description Computed-field id. */
                field_id: components["parameters"]["ComputedFieldIdPath"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["UpdateComputedField"];
            };
        };
        responses: {
            /** @description The updated computed field. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ComputedField"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            412: components["responses"]["PreconditionFailed"];
            default: components["responses"]["Error"];
        };
    };
    listClassEvents: {
        parameters: {
            query?: {
                action?: components["parameters"]["EvAction"];
                actor_kind?: components["parameters"]["EvActorKind"];
                actor_user_id?: components["parameters"]["EvActorUserId"];
                after_revision?: components["parameters"]["EvAfterRevision"];
                before_revision?: components["parameters"]["EvBeforeRevision"];
                collection_id?: components["parameters"]["EvCollectionId"];
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                entity_id?: components["parameters"]["EvEntityId"];
                entity_type?: components["parameters"]["EvEntityType"];
                /**
                 * @description List filters of the query language: `field=value`, `field__<op>=value`, `field__not_<op>=value`.
                 *     Unknown fields or operators are 400. See the list query language in the API description.
                 */
                filters?: components["parameters"]["ListFilters"];
                /** @description Whether to return X-Total-Count (default true). */
                include_total?: components["parameters"]["IncludeTotal"];
                initiator_user_id?: components["parameters"]["EvInitiatorUserId"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
                /** @description RFC 3339 or YYYY-MM-DD. */
                occurred_after?: components["parameters"]["EvOccurredAfter"];
                /** @description RFC 3339 or YYYY-MM-DD. */
                occurred_before?: components["parameters"]["EvOccurredBefore"];
                /** @description `id` or `occurred_at`, `-` prefix for descending (default `-id`). */
                sort?: components["parameters"]["EvSort"];
            };
            header?: never;
            path: {
                /** @description Class id. */
                class_id: components["parameters"]["ClassIdPath"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of audit events. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    "X-Total-Count": components["headers"]["XTotalCount"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Event"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    aggregateObjects: {
        parameters: {
            query?: {
                /**
                 * @description Measure `<operation>:<field>`, repeated up to 4 times. Operations `sum`, `average`, `min`,
                 *     `max`; fields `json_data.<comma-separated-path>`, `computed.shared.<key>`,
                 *     `computed.personal.<key>`. Example `aggregate=sum:json_data.metrics,cpu`.
                 */
                aggregate?: components["parameters"]["AggregateMeasure"];
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                /**
                 * @description List filters of the query language: `field=value`, `field__<op>=value`, `field__not_<op>=value`.
                 *     Unknown fields or operators are 400. See the list query language in the API description.
                 */
                filters?: components["parameters"]["ListFilters"];
                /**
                 * @description Grouping dimension, repeated up to 3 times, in order: `name`, `description`,
                 *     `collection_id`, `created_at`, `updated_at`, `json_data.<comma-separated-path>` (e.g.
                 *     `json_data.metrics,cpu`), `computed.shared.<key>`, `computed.personal.<key>`.
                 */
                group_by?: components["parameters"]["AggregateGroupBy"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
                /** @description Row order (default `dimensions.asc`, dimensions compared in `group_by` order). */
                sort?: components["parameters"]["AggregateSort"];
            };
            header?: never;
            path: {
                /** @description Class id. */
                class_id: components["parameters"]["ClassIdPath"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of aggregate rows. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ObjectAggregateRow"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            413: components["responses"]["PayloadTooLarge"];
            default: components["responses"]["Error"];
        };
    };
    listObjects: {
        parameters: {
            query?: {
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                /**
                 * @description List filters of the query language: `field=value`, `field__<op>=value`, `field__not_<op>=value`.
                 *     Unknown fields or operators are 400. See the list query language in the API description.
                 */
                filters?: components["parameters"]["ListFilters"];
                /** @description `computed` adds the `computed` member (shared and personal computed-field values). */
                include?: components["parameters"]["ObjectInclude"];
                /** @description Whether to return X-Total-Count (default true). */
                include_total?: components["parameters"]["IncludeTotal"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
                /** @description Comma-separated sort fields, `-field` or `field.desc` for descending, at most 8; an id tie-breaker is appended. */
                sort?: components["parameters"]["Sort"];
            };
            header?: never;
            path: {
                /** @description Class id. */
                class_id: components["parameters"]["ClassIdPath"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of objects. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    "X-Total-Count": components["headers"]["XTotalCount"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["InventoryObject"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    createObject: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Class id. */
                class_id: components["parameters"]["ClassIdPath"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["NewObject"];
            };
        };
        responses: {
            /** @description Created; `Location` is `/api/v1/classes/{class_id}/{object_id}`. */
            201: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    Location: components["headers"]["Location"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["InventoryObject"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            default: components["responses"]["Error"];
        };
    };
    listRelatedClasses: {
        parameters: {
            query?: {
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                /** @description Maximum number of relation hops, in either direction (default 1). */
                depth?: components["parameters"]["RelatedDepth"];
                /** @description Whether to return X-Total-Count (default true). */
                include_total?: components["parameters"]["IncludeTotal"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
                /** @description Comma-separated sort fields, `-field` or `field.desc` for descending, at most 8; an id tie-breaker is appended. */
                sort?: components["parameters"]["Sort"];
            };
            header?: never;
            path: {
                /** @description Class id. */
                class_id: components["parameters"]["ClassIdPath"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of related classes. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    "X-Total-Count": components["headers"]["XTotalCount"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RelatedClass"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    getClassByName: {
        parameters: {
            query?: {
                /** @description `collection` returns the expanded class (`collection` object in place of `collection_id`). */
                include?: components["parameters"]["ClassInclude"];
            };
            header?: never;
            path: {
                /** @description Exact class name; numeric-looking values are names, not ids. */
                class_name: components["parameters"]["ClassNamePath"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The class (expanded with `include=collection`). */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Class"] | components["schemas"]["ClassExpanded"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    deleteClassByName: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description Exact class name; numeric-looking values are names, not ids. */
                class_name: components["parameters"]["ClassNamePath"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted. */
            204: {
                headers: {
                    /** @description Entity tag of the deleted class's last revision. */
                    ETag?: string;
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            412: components["responses"]["PreconditionFailed"];
            default: components["responses"]["Error"];
        };
    };
    updateClassByName: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description Exact class name; numeric-looking values are names, not ids. */
                class_name: components["parameters"]["ClassNamePath"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["UpdateClass"];
            };
        };
        responses: {
            /** @description The updated expanded class. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ClassExpanded"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            412: components["responses"]["PreconditionFailed"];
            default: components["responses"]["Error"];
        };
    };
    aggregateObjectsByClassName: {
        parameters: {
            query?: {
                /**
                 * @description Measure `<operation>:<field>`, repeated up to 4 times. Operations `sum`, `average`, `min`,
                 *     `max`; fields `json_data.<comma-separated-path>`, `computed.shared.<key>`,
                 *     `computed.personal.<key>`. Example `aggregate=sum:json_data.metrics,cpu`.
                 */
                aggregate?: components["parameters"]["AggregateMeasure"];
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                /**
                 * @description List filters of the query language: `field=value`, `field__<op>=value`, `field__not_<op>=value`.
                 *     Unknown fields or operators are 400. See the list query language in the API description.
                 */
                filters?: components["parameters"]["ListFilters"];
                /**
                 * @description Grouping dimension, repeated up to 3 times, in order: `name`, `description`,
                 *     `collection_id`, `created_at`, `updated_at`, `json_data.<comma-separated-path>` (e.g.
                 *     `json_data.metrics,cpu`), `computed.shared.<key>`, `computed.personal.<key>`.
                 */
                group_by?: components["parameters"]["AggregateGroupBy"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
                /** @description Row order (default `dimensions.asc`, dimensions compared in `group_by` order). */
                sort?: components["parameters"]["AggregateSort"];
            };
            header?: never;
            path: {
                /** @description Exact class name; numeric-looking values are names, not ids. */
                class_name: components["parameters"]["ClassNamePath"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of aggregate rows. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ObjectAggregateRow"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            413: components["responses"]["PayloadTooLarge"];
            default: components["responses"]["Error"];
        };
    };
    listObjectsByClassName: {
        parameters: {
            query?: {
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                /**
                 * @description List filters of the query language: `field=value`, `field__<op>=value`, `field__not_<op>=value`.
                 *     Unknown fields or operators are 400. See the list query language in the API description.
                 */
                filters?: components["parameters"]["ListFilters"];
                /** @description `computed` adds the `computed` member (shared and personal computed-field values). */
                include?: components["parameters"]["ObjectInclude"];
                /** @description Whether to return X-Total-Count (default true). */
                include_total?: components["parameters"]["IncludeTotal"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
                /** @description Comma-separated sort fields, `-field` or `field.desc` for descending, at most 8; an id tie-breaker is appended. */
                sort?: components["parameters"]["Sort"];
            };
            header?: never;
            path: {
                /** @description Exact class name; numeric-looking values are names, not ids. */
                class_name: components["parameters"]["ClassNamePath"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of objects. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    "X-Total-Count": components["headers"]["XTotalCount"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["InventoryObject"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    createObjectByClassName: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Exact class name; numeric-looking values are names, not ids. */
                class_name: components["parameters"]["ClassNamePath"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["NewObject"];
            };
        };
        responses: {
            /** @description Created; `Location` is `/api/v1/classes/{class_id}/{object_id}`. */
            201: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    Location: components["headers"]["Location"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["InventoryObject"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            default: components["responses"]["Error"];
        };
    };
    getObjectByName: {
        parameters: {
            query?: {
                /** @description `computed` adds the `computed` member (shared and personal computed-field values). */
                include?: components["parameters"]["ObjectInclude"];
            };
            header?: never;
            path: {
                /** @description Exact class name; numeric-looking values are names, not ids. */
                class_name: components["parameters"]["ClassNamePath"];
                /** @description Exact object name within the class. */
                object_name: components["parameters"]["ObjectNamePath"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The object. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["InventoryObject"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    deleteObjectByName: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description Exact class name; numeric-looking values are names, not ids. */
                class_name: components["parameters"]["ClassNamePath"];
                /** @description Exact object name within the class. */
                object_name: components["parameters"]["ObjectNamePath"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            412: components["responses"]["PreconditionFailed"];
            default: components["responses"]["Error"];
        };
    };
    updateObjectByName: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description Exact class name; numeric-looking values are names, not ids. */
                class_name: components["parameters"]["ClassNamePath"];
                /** @description Exact object name within the class. */
                object_name: components["parameters"]["ObjectNamePath"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["UpdateObject"];
            };
        };
        responses: {
            /** @description The updated object. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["InventoryObject"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            412: components["responses"]["PreconditionFailed"];
            default: components["responses"]["Error"];
        };
    };
    listCollections: {
        parameters: {
            query?: {
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                /**
                 * @description List filters of the query language: `field=value`, `field__<op>=value`, `field__not_<op>=value`.
                 *     Unknown fields or operators are 400. See the list query language in the API description.
                 */
                filters?: components["parameters"]["ListFilters"];
                /** @description Whether to return X-Total-Count (default true). */
                include_total?: components["parameters"]["IncludeTotal"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
                /** @description Comma-separated sort fields, `-field` or `field.desc` for descending, at most 8; an id tie-breaker is appended. */
                sort?: components["parameters"]["Sort"];
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description One page of collections. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    "X-Total-Count": components["headers"]["XTotalCount"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Collection"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            default: components["responses"]["Error"];
        };
    };
    createCollection: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["NewCollection"];
            };
        };
        responses: {
            /** @description The created collection. */
            201: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    Location: components["headers"]["Location"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Collection"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description The parent collection or the group does not exist. */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description A sibling collection with the same name exists. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            default: components["responses"]["Error"];
        };
    };
    getCollection: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Collection id. */
                collection_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The collection. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Collection"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    deleteCollection: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description Collection id. */
                collection_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            /** @description The collection still has child collections, classes or remote targets. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            412: components["responses"]["PreconditionFailed"];
            default: components["responses"]["Error"];
        };
    };
    updateCollection: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description Collection id. */
                collection_id: number;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["UpdateCollection"];
            };
        };
        responses: {
            /** @description The updated collection. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Collection"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            /** @description A sibling collection with the same name exists. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            412: components["responses"]["PreconditionFailed"];
            default: components["responses"]["Error"];
        };
    };
    listCollectionAncestors: {
        parameters: {
            query?: {
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                /** @description Whether to return X-Total-Count (default true). */
                include_total?: components["parameters"]["IncludeTotal"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
            };
            header?: never;
            path: {
                /** @description Collection id. */
                collection_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description One page of ancestor collections, nearest first. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    "X-Total-Count": components["headers"]["XTotalCount"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Collection"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    listCollectionChildren: {
        parameters: {
            query?: {
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                /**
                 * @description List filters of the query language: `field=value`, `field__<op>=value`, `field__not_<op>=value`.
                 *     Unknown fields or operators are 400. See the list query language in the API description.
                 */
                filters?: components["parameters"]["ListFilters"];
                /** @description Whether to return X-Total-Count (default true). */
                include_total?: components["parameters"]["IncludeTotal"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
                /** @description Comma-separated sort fields, `-field` or `field.desc` for descending, at most 8; an id tie-breaker is appended. */
                sort?: components["parameters"]["Sort"];
            };
            header?: never;
            path: {
                /** @description Collection id. */
                collection_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description One page of child collections. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    "X-Total-Count": components["headers"]["XTotalCount"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Collection"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    listCollectionEventSubscriptions: {
        parameters: {
            query?: {
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                /**
                 * @description List filters of the query language: `field=value`, `field__<op>=value`, `field__not_<op>=value`.
                 *     Unknown fields or operators are 400. See the list query language in the API description.
                 */
                filters?: components["parameters"]["ListFilters"];
                /** @description Whether to return X-Total-Count (default true). */
                include_total?: components["parameters"]["IncludeTotal"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
                /** @description Comma-separated sort fields, `-field` or `field.desc` for descending, at most 8; an id tie-breaker is appended. */
                sort?: components["parameters"]["Sort"];
            };
            header?: never;
            path: {
                /** @description Collection id. */
                collection_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description One page of the collection's subscriptions. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    "X-Total-Count": components["headers"]["XTotalCount"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EventSubscription"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    createCollectionEventSubscription: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Collection id. */
                collection_id: number;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["NewEventSubscription"];
            };
        };
        responses: {
            /** @description Subscription created; `Location: /api/v1/collections/{collection_id}/event-subscriptions/{id}`. */
            201: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    Location: components["headers"]["Location"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EventSubscription"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            default: components["responses"]["Error"];
        };
    };
    getCollectionEventSubscription: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Collection id. */
                collection_id: number;
                /** @description Event subscription id; a subscription of another collection is 404. */
                subscription_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The subscription. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EventSubscription"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    deleteCollectionEventSubscription: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description Collection id. */
                collection_id: number;
                /** @description Event subscription id; a subscription of another collection is 404. */
                subscription_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Subscription deleted. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            412: components["responses"]["PreconditionFailed"];
            default: components["responses"]["Error"];
        };
    };
    updateCollectionEventSubscription: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description Collection id. */
                collection_id: number;
                /** @description Event subscription id; a subscription of another collection is 404. */
                subscription_id: number;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["UpdateEventSubscription"];
            };
        };
        responses: {
            /** @description The updated subscription. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EventSubscription"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            412: components["responses"]["PreconditionFailed"];
            default: components["responses"]["Error"];
        };
    };
    listCollectionEvents: {
        parameters: {
            query?: {
                action?: components["parameters"]["EvAction"];
                actor_kind?: components["parameters"]["EvActorKind"];
                actor_user_id?: components["parameters"]["EvActorUserId"];
                after_revision?: components["parameters"]["EvAfterRevision"];
                before_revision?: components["parameters"]["EvBeforeRevision"];
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                entity_id?: components["parameters"]["EvEntityId"];
                entity_type?: components["parameters"]["EvEntityType"];
                /**
                 * @description List filters of the query language: `field=value`, `field__<op>=value`, `field__not_<op>=value`.
                 *     Unknown fields or operators are 400. See the list query language in the API description.
                 */
                filters?: components["parameters"]["ListFilters"];
                /** @description Whether to return X-Total-Count (default true). */
                include_total?: components["parameters"]["IncludeTotal"];
                initiator_user_id?: components["parameters"]["EvInitiatorUserId"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
                /** @description RFC 3339 or YYYY-MM-DD. */
                occurred_after?: components["parameters"]["EvOccurredAfter"];
                /** @description RFC 3339 or YYYY-MM-DD. */
                occurred_before?: components["parameters"]["EvOccurredBefore"];
                /** @description `id` or `occurred_at`, `-` prefix for descending (default `-id`). */
                sort?: components["parameters"]["EvSort"];
            };
            header?: never;
            path: {
                /** @description Collection id. */
                collection_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description One page of audit events. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    "X-Total-Count": components["headers"]["XTotalCount"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Event"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    updateCollectionParent: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description Collection id. */
                collection_id: number;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["CollectionParentUpdate"];
            };
        };
        responses: {
            /** @description The moved collection. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Collection"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description The collection or the new parent does not exist. */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description A collection with the same name already exists under the new parent. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            412: components["responses"]["PreconditionFailed"];
            default: components["responses"]["Error"];
        };
    };
    listCollectionPermissions: {
        parameters: {
            query?: {
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                /** @description Whether to return X-Total-Count (default true). */
                include_total?: components["parameters"]["IncludeTotal"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
                /** @description Comma-separated sort fields, `-field` or `field.desc` for descending, at most 8; an id tie-breaker is appended. */
                sort?: components["parameters"]["Sort"];
            };
            header?: never;
            path: {
                /** @description Collection id. */
                collection_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description One page of permission rows. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    "X-Total-Count": components["headers"]["XTotalCount"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CollectionPermissionRow"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    listEffectiveCollectionPrincipalPermissions: {
        parameters: {
            query?: {
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                /** @description Whether to return X-Total-Count (default true). */
                include_total?: components["parameters"]["IncludeTotal"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
                /** @description Comma-separated sort fields, `-field` or `field.desc` for descending, at most 8; an id tie-breaker is appended. */
                sort?: components["parameters"]["Sort"];
            };
            header?: never;
            path: {
                /** @description Collection id. */
                collection_id: number;
                /** @description Principal id (user or service account). */
                principal_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description One page of effective permission rows. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    "X-Total-Count": components["headers"]["XTotalCount"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EffectivePermissionRow"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description The collection or the principal does not exist. */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            default: components["responses"]["Error"];
        };
    };
    getCollectionGroupPermissions: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Collection id. */
                collection_id: number;
                /** @description Group id. */
                group_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The group's permission names on the collection. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PermissionList"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description The collection or the group does not exist. */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            default: components["responses"]["Error"];
        };
    };
    replaceCollectionGroupPermissions: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Collection id. */
                collection_id: number;
                /** @description Group id. */
                group_id: number;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["PermissionList"];
            };
        };
        responses: {
            /** @description The group's permission names on the collection after the change. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PermissionList"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description The collection or the group does not exist. */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            default: components["responses"]["Error"];
        };
    };
    addCollectionGroupPermissions: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Collection id. */
                collection_id: number;
                /** @description Group id. */
                group_id: number;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["PermissionList"];
            };
        };
        responses: {
            /** @description The group's permission names on the collection after the change. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PermissionList"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description The collection or the group does not exist. */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            default: components["responses"]["Error"];
        };
    };
    revokeAllCollectionGroupPermissions: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Collection id. */
                collection_id: number;
                /** @description Group id. */
                group_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Revoked. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description The collection or the group does not exist. */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            default: components["responses"]["Error"];
        };
    };
    grantCollectionGroupPermission: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Collection id. */
                collection_id: number;
                /** @description Group id. */
                group_id: number;
                /** @description Permission name; an unknown name is 400. */
                permission: components["schemas"]["PermissionName"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The group's permission names on the collection after the change. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PermissionList"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description The collection or the group does not exist. */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            default: components["responses"]["Error"];
        };
    };
    revokeCollectionGroupPermission: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Collection id. */
                collection_id: number;
                /** @description Group id. */
                group_id: number;
                /** @description Permission name; an unknown name is 400. */
                permission: components["schemas"]["PermissionName"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Revoked. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description The collection or the group does not exist. */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            default: components["responses"]["Error"];
        };
    };
    listCollectionPrincipalPermissions: {
        parameters: {
            query?: {
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                /** @description Whether to return X-Total-Count (default true). */
                include_total?: components["parameters"]["IncludeTotal"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
                /** @description Comma-separated sort fields, `-field` or `field.desc` for descending, at most 8; an id tie-breaker is appended. */
                sort?: components["parameters"]["Sort"];
            };
            header?: never;
            path: {
                /** @description Collection id. */
                collection_id: number;
                /** @description Principal id (user or service account). */
                principal_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description One page of permission rows. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    "X-Total-Count": components["headers"]["XTotalCount"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CollectionPermissionRow"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description The collection or the principal does not exist. */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            default: components["responses"]["Error"];
        };
    };
    getPublicConfig: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Public configuration. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PublicConfig"];
                };
            };
            default: components["responses"]["Error"];
        };
    };
    listEventDeliveries: {
        parameters: {
            query?: {
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                /**
                 * @description List filters of the query language: `field=value`, `field__<op>=value`, `field__not_<op>=value`.
                 *     Unknown fields or operators are 400. See the list query language in the API description.
                 */
                filters?: components["parameters"]["ListFilters"];
                /** @description Whether to return X-Total-Count (default true). */
                include_total?: components["parameters"]["IncludeTotal"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
                /** @description Comma-separated sort fields, `-field` or `field.desc` for descending, at most 8; an id tie-breaker is appended. */
                sort?: components["parameters"]["Sort"];
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description One page of deliveries. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    "X-Total-Count": components["headers"]["XTotalCount"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EventDelivery"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            default: components["responses"]["Error"];
        };
    };
    getEventDelivery: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Event delivery id. */
                delivery_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The delivery. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EventDelivery"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    markEventDeliveryDead: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Event delivery id. */
                delivery_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The dead-lettered delivery. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EventDelivery"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    retryEventDelivery: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Event delivery id. */
                delivery_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The released delivery. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EventDelivery"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            default: components["responses"]["Error"];
        };
    };
    getEventDeliveryHealth: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Pipeline snapshot. */
            200: {
                headers: {
                    "Cache-Control": components["headers"]["CacheControlNoStore"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["DeliveryHealth"];
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            default: components["responses"]["Error"];
        };
    };
    listEventSinks: {
        parameters: {
            query?: {
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                /**
                 * @description List filters of the query language: `field=value`, `field__<op>=value`, `field__not_<op>=value`.
                 *     Unknown fields or operators are 400. See the list query language in the API description.
                 */
                filters?: components["parameters"]["ListFilters"];
                /** @description Whether to return X-Total-Count (default true). */
                include_total?: components["parameters"]["IncludeTotal"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
                /** @description Comma-separated sort fields, `-field` or `field.desc` for descending, at most 8; an id tie-breaker is appended. */
                sort?: components["parameters"]["Sort"];
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description One page of event sinks. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    "X-Total-Count": components["headers"]["XTotalCount"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EventSink"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            default: components["responses"]["Error"];
        };
    };
    createEventSink: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["NewEventSink"];
            };
        };
        responses: {
            /** @description Sink created; `Location: /api/v1/event-sinks/{id}`. */
            201: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    Location: components["headers"]["Location"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EventSink"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            409: components["responses"]["Conflict"];
            default: components["responses"]["Error"];
        };
    };
    getEventSink: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Event sink id. */
                sink_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The sink. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EventSink"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    deleteEventSink: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description Event sink id. */
                sink_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Sink deleted. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            412: components["responses"]["PreconditionFailed"];
            default: components["responses"]["Error"];
        };
    };
    updateEventSink: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description Event sink id. */
                sink_id: number;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["UpdateEventSink"];
            };
        };
        responses: {
            /** @description The updated sink. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EventSink"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            412: components["responses"]["PreconditionFailed"];
            default: components["responses"]["Error"];
        };
    };
    previewEventSink: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Event sink id. */
                sink_id: number;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["SinkPreviewRequest"];
            };
        };
        responses: {
            /** @description The rendered payload. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SinkPreview"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    testEventSink: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Event sink id. */
                sink_id: number;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["SinkPreviewRequest"];
            };
        };
        responses: {
            /** @description Test delivery queued. */
            202: {
                headers: {
                    Location: components["headers"]["Location"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EventDelivery"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    listEvents: {
        parameters: {
            query?: {
                action?: components["parameters"]["EvAction"];
                actor_kind?: components["parameters"]["EvActorKind"];
                actor_user_id?: components["parameters"]["EvActorUserId"];
                after_revision?: components["parameters"]["EvAfterRevision"];
                before_revision?: components["parameters"]["EvBeforeRevision"];
                collection_id?: components["parameters"]["EvCollectionId"];
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                entity_id?: components["parameters"]["EvEntityId"];
                entity_type?: components["parameters"]["EvEntityType"];
                /**
                 * @description List filters of the query language: `field=value`, `field__<op>=value`, `field__not_<op>=value`.
                 *     Unknown fields or operators are 400. See the list query language in the API description.
                 */
                filters?: components["parameters"]["ListFilters"];
                /** @description Whether to return X-Total-Count (default true). */
                include_total?: components["parameters"]["IncludeTotal"];
                initiator_user_id?: components["parameters"]["EvInitiatorUserId"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
                /** @description RFC 3339 or YYYY-MM-DD. */
                occurred_after?: components["parameters"]["EvOccurredAfter"];
                /** @description RFC 3339 or YYYY-MM-DD. */
                occurred_before?: components["parameters"]["EvOccurredBefore"];
                /** @description `id` or `occurred_at`, `-` prefix for descending (default `-id`). */
                sort?: components["parameters"]["EvSort"];
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description One page of audit events. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    "X-Total-Count": components["headers"]["XTotalCount"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Event"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            default: components["responses"]["Error"];
        };
    };
    listExportTemplates: {
        parameters: {
            query?: {
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                /**
                 * @description List filters of the query language: `field=value`, `field__<op>=value`, `field__not_<op>=value`.
                 *     Unknown fields or operators are 400. See the list query language in the API description.
                 */
                filters?: components["parameters"]["ListFilters"];
                /** @description Whether to return X-Total-Count (default true). */
                include_total?: components["parameters"]["IncludeTotal"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
                /** @description Comma-separated sort fields, `-field` or `field.desc` for descending, at most 8; an id tie-breaker is appended. */
                sort?: components["parameters"]["Sort"];
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description One page of export templates. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    "X-Total-Count": components["headers"]["XTotalCount"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ExportTemplate"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            default: components["responses"]["Error"];
        };
    };
    createExportTemplate: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["NewExportTemplate"];
            };
        };
        responses: {
            /** @description The created template. */
            201: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    Location: components["headers"]["Location"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ExportTemplate"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            default: components["responses"]["Error"];
        };
    };
    getExportTemplate: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                template_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The template. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ExportTemplate"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    deleteExportTemplate: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                template_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            412: components["responses"]["PreconditionFailed"];
            default: components["responses"]["Error"];
        };
    };
    updateExportTemplate: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                template_id: number;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["UpdateExportTemplate"];
            };
        };
        responses: {
            /** @description The updated template. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ExportTemplate"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            412: components["responses"]["PreconditionFailed"];
            default: components["responses"]["Error"];
        };
    };
    listExportTemplateEvents: {
        parameters: {
            query?: {
                action?: components["parameters"]["EvAction"];
                actor_kind?: components["parameters"]["EvActorKind"];
                actor_user_id?: components["parameters"]["EvActorUserId"];
                after_revision?: components["parameters"]["EvAfterRevision"];
                before_revision?: components["parameters"]["EvBeforeRevision"];
                collection_id?: components["parameters"]["EvCollectionId"];
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                entity_id?: components["parameters"]["EvEntityId"];
                entity_type?: components["parameters"]["EvEntityType"];
                /**
                 * @description List filters of the query language: `field=value`, `field__<op>=value`, `field__not_<op>=value`.
                 *     Unknown fields or operators are 400. See the list query language in the API description.
                 */
                filters?: components["parameters"]["ListFilters"];
                /** @description Whether to return X-Total-Count (default true). */
                include_total?: components["parameters"]["IncludeTotal"];
                initiator_user_id?: components["parameters"]["EvInitiatorUserId"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
                /** @description RFC 3339 or YYYY-MM-DD. */
                occurred_after?: components["parameters"]["EvOccurredAfter"];
                /** @description RFC 3339 or YYYY-MM-DD. */
                occurred_before?: components["parameters"]["EvOccurredBefore"];
                /** @description `id` or `occurred_at`, `-` prefix for descending (default `-id`). */
                sort?: components["parameters"]["EvSort"];
            };
            header?: never;
            path: {
                template_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description One page of audit events. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    "X-Total-Count": components["headers"]["XTotalCount"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Event"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    runExportTemplate: {
        parameters: {
            query?: never;
            header?: {
                /** @description 1..255 bytes; the same key and submission returns the same task, a different submission 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
            };
            path: {
                template_id: number;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ExportTemplateRunRequest"];
            };
        };
        responses: {
            /** @description Export task accepted. */
            202: {
                headers: {
                    Location: components["headers"]["Location"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Task"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            /** @description `Idempotency-Key` reused with a different submission. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            default: components["responses"]["Error"];
        };
    };
    createExport: {
        parameters: {
            query?: never;
            header?: {
                /** @description 1..255 bytes; the same key and submission returns the same task, a different submission 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ExportRequest"];
            };
        };
        responses: {
            /** @description Export task accepted. */
            202: {
                headers: {
                    Location: components["headers"]["Location"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Task"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            /** @description `Idempotency-Key` reused with a different submission. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            default: components["responses"]["Error"];
        };
    };
    getExport: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Id of the export task. */
                export_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The export task. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Task"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    getExportOutput: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Id of the export task. */
                export_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The export output. */
            200: {
                headers: {
                    /** @description `true` when the result set was cut at `limits.max_items`, else `false`. */
                    "X-Svc-Export-Truncated": "true" | "false";
                    /** @description Number of warnings emitted while producing the output (their texts are in the task's `summary.warnings` and in the JSON envelope's `warnings`). */
                    "X-Svc-Export-Warnings": number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ExportOutput"] | unknown;
                    "text/csv": string;
                    "text/html": string;
                    "text/plain": string;
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            410: components["responses"]["Gone"];
            default: components["responses"]["Error"];
        };
    };
    createCredentialApproval: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["CredentialApprovalRequest"];
            };
        };
        responses: {
            /** @description Approval created; `Location: /api/v1/iam/credential-approvals/{approval}`. */
            201: {
                headers: {
                    "Cache-Control": components["headers"]["CacheControlNoStore"];
                    Location: components["headers"]["Location"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CredentialApprovalCreated"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description Gate failed, or the password is wrong (`reason: "reauthentication_failed"`); the bearer token stays valid. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description A principal, token, user or restore named by the operation does not exist. */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description The operation cannot succeed: renewing a revoked token, or minting for a disabled service account. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            429: components["responses"]["TooManyRequests"];
            default: components["responses"]["Error"];
        };
    };
    getCredentialApproval: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Opaque approval id as returned in `approval`. */
                approval_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The approval record. */
            200: {
                headers: {
                    "Cache-Control": components["headers"]["CacheControlNoStore"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CredentialApprovalRecord"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    listGroups: {
        parameters: {
            query?: {
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                /**
                 * @description List filters of the query language: `field=value`, `field__<op>=value`, `field__not_<op>=value`.
                 *     Unknown fields or operators are 400. See the list query language in the API description.
                 */
                filters?: components["parameters"]["ListFilters"];
                /** @description Whether to return X-Total-Count (default true). */
                include_total?: components["parameters"]["IncludeTotal"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
                /** @description Comma-separated sort fields, `-field` or `field.desc` for descending, at most 8; an id tie-breaker is appended. */
                sort?: components["parameters"]["Sort"];
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of groups. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    "X-Total-Count": components["headers"]["XTotalCount"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Group"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            default: components["responses"]["Error"];
        };
    };
    createGroup: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["NewGroup"];
            };
        };
        responses: {
            /** @description Created; `Location: /api/v1/iam/groups/{id}`. */
            201: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    Location: components["headers"]["Location"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Group"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description A group with this name already exists in scope `local`. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            default: components["responses"]["Error"];
        };
    };
    getGroup: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Group id. */
                group_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The group. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Group"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    deleteGroup: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description Group id. */
                group_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            /** @description The group owns service accounts. `reason` is `group_owns_service_accounts`; the message names them and `details` has one entry per account with `path` `service_accounts/<id>` and `message` the account name. Move or delete them first. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            412: components["responses"]["PreconditionFailed"];
            default: components["responses"]["Error"];
        };
    };
    updateGroup: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description Group id. */
                group_id: number;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["UpdateGroup"];
            };
        };
        responses: {
            /** @description The updated group. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Group"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            /** @description Another group with this name exists in the identity scope. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            412: components["responses"]["PreconditionFailed"];
            default: components["responses"]["Error"];
        };
    };
    listGroupMembers: {
        parameters: {
            query?: {
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                /** @description Whether to return X-Total-Count (default true). */
                include_total?: components["parameters"]["IncludeTotal"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
                /** @description Comma-separated sort fields, `-field` or `field.desc` for descending, at most 8; an id tie-breaker is appended. */
                sort?: components["parameters"]["Sort"];
            };
            header?: never;
            path: {
                /** @description Group id. */
                group_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of members. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    "X-Total-Count": components["headers"]["XTotalCount"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["GroupMember"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    addGroupMember: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Group id. */
                group_id: number;
                /** @description Principal id (human user or service account). */
                principal_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Member added; `Location: /api/v1/iam/groups/{group_id}/members/{principal_id}`. */
            201: {
                headers: {
                    Location: components["headers"]["Location"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["GroupMember"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description Group or principal not found. */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            default: components["responses"]["Error"];
        };
    };
    removeGroupMember: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Group id. */
                group_id: number;
                /** @description Principal id (human user or service account). */
                principal_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Removed (or was not a member). */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description Group or principal not found. */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            default: components["responses"]["Error"];
        };
    };
    listGroupEvents: {
        parameters: {
            query?: {
                action?: components["parameters"]["EvAction"];
                actor_kind?: components["parameters"]["EvActorKind"];
                actor_user_id?: components["parameters"]["EvActorUserId"];
                after_revision?: components["parameters"]["EvAfterRevision"];
                before_revision?: components["parameters"]["EvBeforeRevision"];
                collection_id?: components["parameters"]["EvCollectionId"];
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                entity_id?: components["parameters"]["EvEntityId"];
                entity_type?: components["parameters"]["EvEntityType"];
                /**
                 * @description List filters of the query language: `field=value`, `field__<op>=value`, `field__not_<op>=value`.
                 *     Unknown fields or operators are 400. See the list query language in the API description.
                 */
                filters?: components["parameters"]["ListFilters"];
                /** @description Whether to return X-Total-Count (default true). */
                include_total?: components["parameters"]["IncludeTotal"];
                initiator_user_id?: components["parameters"]["EvInitiatorUserId"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
                /** @description RFC 3339 or YYYY-MM-DD. */
                occurred_after?: components["parameters"]["EvOccurredAfter"];
                /** @description RFC 3339 or YYYY-MM-DD. */
                occurred_before?: components["parameters"]["EvOccurredBefore"];
                /** @description `id` or `occurred_at`, `-` prefix for descending (default `-id`). */
                sort?: components["parameters"]["EvSort"];
            };
            header?: never;
            path: {
                /** @description Group id. */
                id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of audit events. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    "X-Total-Count": components["headers"]["XTotalCount"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Event"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    getMe: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The caller and the token of this request. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Me"];
                };
            };
            401: components["responses"]["Unauthorized"];
            default: components["responses"]["Error"];
        };
    };
    listMyComputedFields: {
        parameters: {
            query?: {
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                /**
                 * @description List filters of the query language: `field=value`, `field__<op>=value`, `field__not_<op>=value`.
                 *     Unknown fields or operators are 400. See the list query language in the API description.
                 */
                filters?: components["parameters"]["ListFilters"];
                /** @description Whether to return X-Total-Count (default true). */
                include_total?: components["parameters"]["IncludeTotal"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
                /** @description Comma-separated sort fields, `-field` or `field.desc` for descending, at most 8; an id tie-breaker is appended. */
                sort?: components["parameters"]["Sort"];
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of personal computed fields. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    "X-Total-Count": components["headers"]["XTotalCount"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ComputedField"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            default: components["responses"]["Error"];
        };
    };
    createMyComputedField: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["NewComputedField"];
            };
        };
        responses: {
            /** @description Created; `Location` is `/api/v1/iam/me/computed-fields/{field_id}`. */
            201: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    Location: components["headers"]["Location"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ComputedField"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            default: components["responses"]["Error"];
        };
    };
    getMyComputedField: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Computed-field id. */
                field_id: components["parameters"]["ComputedFieldIdPath"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The computed field. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ComputedField"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    deleteMyComputedField: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description Computed-field id. */
                field_id: components["parameters"]["ComputedFieldIdPath"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            412: components["responses"]["PreconditionFailed"];
            default: components["responses"]["Error"];
        };
    };
    updateMyComputedField: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description Computed-field id. */
                field_id: components["parameters"]["ComputedFieldIdPath"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["UpdateComputedField"];
            };
        };
        responses: {
            /** @description The updated computed field. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ComputedField"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            412: components["responses"]["PreconditionFailed"];
            default: components["responses"]["Error"];
        };
    };
    getMySettings: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The settings document. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SettingsDocument"];
                };
            };
            401: components["responses"]["Unauthorized"];
            default: components["responses"]["Error"];
        };
    };
    replaceMySettings: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    [key: string]: unknown;
                };
            };
        };
        responses: {
            /** @description The stored settings document. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SettingsDocument"];
                };
            };
            /** @description Malformed JSON, non-object root, limits exceeded, or invalid path id or If-Match. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            401: components["responses"]["Unauthorized"];
            412: components["responses"]["PreconditionFailed"];
            default: components["responses"]["Error"];
        };
    };
    resetMySettings: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The reset document `{revision, settings: {}}`. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SettingsDocument"];
                };
            };
            /** @description Invalid path id or If-Match. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            401: components["responses"]["Unauthorized"];
            412: components["responses"]["PreconditionFailed"];
            default: components["responses"]["Error"];
        };
    };
    patchMySettings: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    [key: string]: unknown;
                };
                "application/json-patch+json": components["schemas"]["JsonPatchOperation"][];
                "application/merge-patch+json": {
                    [key: string]: unknown;
                };
            };
        };
        responses: {
            /** @description The settings document after the patch. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SettingsDocument"];
                };
            };
            /** @description Malformed body, non-object body for merge patch, result root not an object, limits exceeded, or invalid path id or If-Match. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            401: components["responses"]["Unauthorized"];
            /** @description A JSON Patch operation failed (including a failed `test`); nothing was changed. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            412: components["responses"]["PreconditionFailed"];
            415: components["responses"]["UnsupportedMediaType"];
            default: components["responses"]["Error"];
        };
    };
    listPrincipalGroups: {
        parameters: {
            query?: {
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                /** @description Whether to return X-Total-Count (default true). */
                include_total?: components["parameters"]["IncludeTotal"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
                /** @description Comma-separated sort fields, `-field` or `field.desc` for descending, at most 8; an id tie-breaker is appended. */
                sort?: components["parameters"]["Sort"];
            };
            header?: never;
            path: {
                /** @description Principal id (human user or service account). */
                principal_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of groups. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    "X-Total-Count": components["headers"]["XTotalCount"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Group"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description Principal not found. */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            default: components["responses"]["Error"];
        };
    };
    listPrincipalPermissions: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Principal id (human user or service account). */
                principal_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Permission rows grouped by group. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PrincipalPermissionGroup"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description Principal not found. */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            default: components["responses"]["Error"];
        };
    };
    getPrincipalSettings: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Principal id (human user or service account). */
                principal_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The settings document. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SettingsDocument"];
                };
            };
            /** @description Invalid path id. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            401: components["responses"]["Unauthorized"];
            /** @description Principal not found, or cross-principal access denied (denials are 404, never 403). */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            default: components["responses"]["Error"];
        };
    };
    replacePrincipalSettings: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description Principal id (human user or service account). */
                principal_id: number;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    [key: string]: unknown;
                };
            };
        };
        responses: {
            /** @description The stored settings document. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SettingsDocument"];
                };
            };
            /** @description Malformed JSON, non-object root, limits exceeded, or invalid path id or If-Match. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            401: components["responses"]["Unauthorized"];
            /** @description Principal not found, or cross-principal access denied (denials are 404, never 403). */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            412: components["responses"]["PreconditionFailed"];
            default: components["responses"]["Error"];
        };
    };
    resetPrincipalSettings: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description Principal id (human user or service account). */
                principal_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The reset document `{revision, settings: {}}`. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SettingsDocument"];
                };
            };
            /** @description Invalid path id or If-Match. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            401: components["responses"]["Unauthorized"];
            /** @description Principal not found, or cross-principal access denied (denials are 404, never 403). */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            412: components["responses"]["PreconditionFailed"];
            default: components["responses"]["Error"];
        };
    };
    patchPrincipalSettings: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description Principal id (human user or service account). */
                principal_id: number;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    [key: string]: unknown;
                };
                "application/json-patch+json": components["schemas"]["JsonPatchOperation"][];
                "application/merge-patch+json": {
                    [key: string]: unknown;
                };
            };
        };
        responses: {
            /** @description The settings document after the patch. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SettingsDocument"];
                };
            };
            /** @description Malformed body, non-object body for merge patch, result root not an object, limits exceeded, or invalid path id or If-Match. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            401: components["responses"]["Unauthorized"];
            /** @description Principal not found, or cross-principal access denied (denials are 404, never 403). */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description A JSON Patch operation failed (including a failed `test`); nothing was changed. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            412: components["responses"]["PreconditionFailed"];
            415: components["responses"]["UnsupportedMediaType"];
            default: components["responses"]["Error"];
        };
    };
    listPrincipalTokens: {
        parameters: {
            query?: {
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                /** @description Whether to return X-Total-Count (default true). */
                include_total?: components["parameters"]["IncludeTotal"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
                /** @description Comma-separated sort fields, `-field` or `field.desc` for descending, at most 8; an id tie-breaker is appended. */
                sort?: components["parameters"]["Sort"];
                /** @description `active` (default): valid now; `expired`: effective expiry passed (revoked or not); `revoked`: revoked; `all`: every retained row. Subsets can overlap. */
                state?: "active" | "expired" | "revoked" | "all";
            };
            header?: never;
            path: {
                /** @description Principal id (human user or service account). */
                principal_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of tokens. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    "X-Total-Count": components["headers"]["XTotalCount"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Token"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description Principal not found. */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            default: components["responses"]["Error"];
        };
    };
    createPrincipalToken: {
        parameters: {
            query?: never;
            header?: {
                /** @description Id of a fresh credential approval for this exact operation. */
                "X-Svc-Credential-Approval"?: components["parameters"]["CredentialApproval"];
            };
            path: {
                /** @description Principal id (human user or service account). */
                principal_id: number;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["TokenMintRequest"];
            };
        };
        responses: {
            /** @description Minted; `Location: /api/v1/iam/principals/{principal_id}/tokens/{token_id}` and the ETag of the new token row. */
            201: {
                headers: {
                    "Cache-Control": components["headers"]["CacheControlNoStore"];
                    ETag: components["headers"]["ETag"];
                    Location: components["headers"]["Location"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["TokenResponse"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description Gate or authorization failed, or the credential approval is missing or invalid (`reason: "reauthentication_required"`). */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Principal not found. */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description The principal is a disabled service account. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            default: components["responses"]["Error"];
        };
    };
    getPrincipalToken: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Principal id (human user or service account). */
                principal_id: number;
                /** @description Token id; must belong to the path principal (404 otherwise). */
                token_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The token (metadata only). */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Token"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description Principal or token not found, token purged, or token not under the path principal. */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            default: components["responses"]["Error"];
        };
    };
    renewPrincipalToken: {
        parameters: {
            query?: never;
            header?: {
                /** @description Id of a fresh credential approval for this exact operation. */
                "X-Svc-Credential-Approval"?: components["parameters"]["CredentialApproval"];
            };
            path: {
                /** @description Principal id (human user or service account). */
                principal_id: number;
                /** @description Token id; must belong to the path principal (404 otherwise). */
                token_id: number;
            };
            cookie?: never;
        };
        /** @description Optional; an absent body equals `{}`. */
        requestBody?: {
            content: {
                "application/json": components["schemas"]["TokenRenewRequest"];
            };
        };
        responses: {
            /** @description New token minted; `Location` of the new token row and its ETag. */
            201: {
                headers: {
                    "Cache-Control": components["headers"]["CacheControlNoStore"];
                    ETag: components["headers"]["ETag"];
                    Location: components["headers"]["Location"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["TokenResponse"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description Gate or authorization failed, or the credential approval is missing or invalid (`reason: "reauthentication_required"`). */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Principal or token not found, token purged, or token not under the path principal. */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description The token is revoked, or the principal is a disabled service account. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            default: components["responses"]["Error"];
        };
    };
    revokePrincipalToken: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description Principal id (human user or service account). */
                principal_id: number;
                /** @description Token id; must belong to the path principal (404 otherwise). */
                token_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Revoked. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description Principal or token not found, token purged, or token not under the path principal. */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            412: components["responses"]["PreconditionFailed"];
            default: components["responses"]["Error"];
        };
    };
    listServiceAccounts: {
        parameters: {
            query?: {
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                /**
                 * @description List filters of the query language: `field=value`, `field__<op>=value`, `field__not_<op>=value`.
                 *     Unknown fields or operators are 400. See the list query language in the API description.
                 */
                filters?: components["parameters"]["ListFilters"];
                /** @description Whether to return X-Total-Count (default true). */
                include_total?: components["parameters"]["IncludeTotal"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
                /** @description Comma-separated sort fields, `-field` or `field.desc` for descending, at most 8; an id tie-breaker is appended. */
                sort?: components["parameters"]["Sort"];
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of service accounts. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    "X-Total-Count": components["headers"]["XTotalCount"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ServiceAccount"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            default: components["responses"]["Error"];
        };
    };
    createServiceAccount: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["NewServiceAccount"];
            };
        };
        responses: {
            /** @description Created; `Location: /api/v1/iam/service-accounts/{id}`. */
            201: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    Location: components["headers"]["Location"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ServiceAccount"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description Owner group not found. */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description A principal with this name already exists in scope `local`. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            default: components["responses"]["Error"];
        };
    };
    getServiceAccount: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Service-account (principal) id. */
                id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The service account. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ServiceAccount"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    deleteServiceAccount: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description Service-account (principal) id. */
                id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            412: components["responses"]["PreconditionFailed"];
            default: components["responses"]["Error"];
        };
    };
    updateServiceAccount: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description Service-account (principal) id. */
                id: number;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["UpdateServiceAccount"];
            };
        };
        responses: {
            /** @description The updated service account. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ServiceAccount"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description Service account or new owner group not found. */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            412: components["responses"]["PreconditionFailed"];
            default: components["responses"]["Error"];
        };
    };
    disableServiceAccount: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description Service-account (principal) id. */
                id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The disabled service account. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ServiceAccount"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            412: components["responses"]["PreconditionFailed"];
            default: components["responses"]["Error"];
        };
    };
    listUsers: {
        parameters: {
            query?: {
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                /**
                 * @description List filters of the query language: `field=value`, `field__<op>=value`, `field__not_<op>=value`.
                 *     Unknown fields or operators are 400. See the list query language in the API description.
                 */
                filters?: components["parameters"]["ListFilters"];
                /** @description Whether to return X-Total-Count (default true). */
                include_total?: components["parameters"]["IncludeTotal"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
                /** @description Comma-separated sort fields, `-field` or `field.desc` for descending, at most 8; an id tie-breaker is appended. */
                sort?: components["parameters"]["Sort"];
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of users. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    "X-Total-Count": components["headers"]["XTotalCount"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["User"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            default: components["responses"]["Error"];
        };
    };
    createUser: {
        parameters: {
            query?: never;
            header?: {
                /** @description Id of a fresh credential approval for this exact operation. */
                "X-Svc-Credential-Approval"?: components["parameters"]["CredentialApproval"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["NewUser"];
            };
        };
        responses: {
            /** @description Created; `Location: /api/v1/iam/users/{id}`. */
            201: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    Location: components["headers"]["Location"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["User"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description Gate or admin check failed, or the credential approval is missing or invalid (`reason: "reauthentication_required"`). */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description A principal with this name already exists in scope `local`. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            default: components["responses"]["Error"];
        };
    };
    getUser: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description User (principal) id. */
                id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The user. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["User"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    deleteUser: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description User (principal) id. */
                id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            412: components["responses"]["PreconditionFailed"];
            default: components["responses"]["Error"];
        };
    };
    updateUser: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
                /** @description Id of a fresh credential approval for this exact operation. */
                "X-Svc-Credential-Approval"?: components["parameters"]["CredentialApproval"];
            };
            path: {
                /** @description User (principal) id. */
                id: number;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["UpdateUser"];
            };
        };
        responses: {
            /** @description The updated user. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["User"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description Gate or authorization failed, provider-managed user, or the approval needed for a password change is missing or invalid (`reason: "reauthentication_required"`). */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            404: components["responses"]["NotFound"];
            412: components["responses"]["PreconditionFailed"];
            default: components["responses"]["Error"];
        };
    };
    listUserEvents: {
        parameters: {
            query?: {
                action?: components["parameters"]["EvAction"];
                actor_kind?: components["parameters"]["EvActorKind"];
                actor_user_id?: components["parameters"]["EvActorUserId"];
                after_revision?: components["parameters"]["EvAfterRevision"];
                before_revision?: components["parameters"]["EvBeforeRevision"];
                collection_id?: components["parameters"]["EvCollectionId"];
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                entity_id?: components["parameters"]["EvEntityId"];
                entity_type?: components["parameters"]["EvEntityType"];
                /**
                 * @description List filters of the query language: `field=value`, `field__<op>=value`, `field__not_<op>=value`.
                 *     Unknown fields or operators are 400. See the list query language in the API description.
                 */
                filters?: components["parameters"]["ListFilters"];
                /** @description Whether to return X-Total-Count (default true). */
                include_total?: components["parameters"]["IncludeTotal"];
                initiator_user_id?: components["parameters"]["EvInitiatorUserId"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
                /** @description RFC 3339 or YYYY-MM-DD. */
                occurred_after?: components["parameters"]["EvOccurredAfter"];
                /** @description RFC 3339 or YYYY-MM-DD. */
                occurred_before?: components["parameters"]["EvOccurredBefore"];
                /** @description `id` or `occurred_at`, `-` prefix for descending (default `-id`). */
                sort?: components["parameters"]["EvSort"];
            };
            header?: never;
            path: {
                /** @description User (principal) id. */
                id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of audit events. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    "X-Total-Count": components["headers"]["XTotalCount"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Event"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    createImport: {
        parameters: {
            query?: never;
            header?: {
                /** @description 1..255 bytes; the same key and submission returns the same task, a different submission 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
                /** @description Id of a fresh credential approval for this exact operation. */
                "X-Svc-Credential-Approval"?: components["parameters"]["CredentialApproval"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ImportRequest"];
            };
        };
        responses: {
            /** @description Import task accepted. */
            202: {
                headers: {
                    Location: components["headers"]["Location"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Task"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description `Idempotency-Key` reused with a different submission. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            413: components["responses"]["PayloadTooLarge"];
            default: components["responses"]["Error"];
        };
    };
    getImport: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Id of the import task. */
                import_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The import task. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Task"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    listImportResults: {
        parameters: {
            query?: {
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                /** @description Only results of this entity kind. */
                entity_kind?: "collection" | "class" | "object" | "class_relation" | "object_relation" | "collection_permission" | "group" | "principal" | "group_membership" | "export_template" | "remote_target" | "event_sink" | "event_subscription";
                /** @description Whether to return X-Total-Count (default true). */
                include_total?: components["parameters"]["IncludeTotal"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
                /** @description Only results with this outcome. */
                outcome?: "succeeded" | "failed" | "skipped" | "rolled_back";
            };
            header?: never;
            path: {
                /** @description Id of the import task. */
                import_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description One page of item results. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    "X-Total-Count": components["headers"]["XTotalCount"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ImportResult"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    listClassRelations: {
        parameters: {
            query?: {
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                /**
                 * @description List filters of the query language: `field=value`, `field__<op>=value`, `field__not_<op>=value`.
                 *     Unknown fields or operators are 400. See the list query language in the API description.
                 */
                filters?: components["parameters"]["ListFilters"];
                /** @description Whether to return X-Total-Count (default true). */
                include_total?: components["parameters"]["IncludeTotal"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
                /** @description Comma-separated sort fields, `-field` or `field.desc` for descending, at most 8; an id tie-breaker is appended. */
                sort?: components["parameters"]["Sort"];
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of class relations. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    "X-Total-Count": components["headers"]["XTotalCount"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ClassRelation"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            default: components["responses"]["Error"];
        };
    };
    createClassRelation: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["NewClassRelation"];
            };
        };
        responses: {
            /** @description Created; `Location` is `/api/v1/relations/classes/{relation_id}`. */
            201: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    Location: components["headers"]["Location"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ClassRelation"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            default: components["responses"]["Error"];
        };
    };
    getClassRelation: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Class-relation id. */
                relation_id: components["parameters"]["ClassRelationIdPath"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The class relation. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ClassRelation"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    deleteClassRelation: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description Class-relation id. */
                relation_id: components["parameters"]["ClassRelationIdPath"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            412: components["responses"]["PreconditionFailed"];
            default: components["responses"]["Error"];
        };
    };
    listObjectRelations: {
        parameters: {
            query?: {
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                /**
                 * @description List filters of the query language: `field=value`, `field__<op>=value`, `field__not_<op>=value`.
                 *     Unknown fields or operators are 400. See the list query language in the API description.
                 */
                filters?: components["parameters"]["ListFilters"];
                /** @description Whether to return X-Total-Count (default true). */
                include_total?: components["parameters"]["IncludeTotal"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
                /** @description Comma-separated sort fields, `-field` or `field.desc` for descending, at most 8; an id tie-breaker is appended. */
                sort?: components["parameters"]["Sort"];
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of object relations. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    "X-Total-Count": components["headers"]["XTotalCount"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ObjectRelation"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            default: components["responses"]["Error"];
        };
    };
    createObjectRelation: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["NewObjectRelation"];
            };
        };
        responses: {
            /** @description Created; `Location` is `/api/v1/relations/objects/{relation_id}`. */
            201: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    Location: components["headers"]["Location"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ObjectRelation"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            default: components["responses"]["Error"];
        };
    };
    getObjectRelation: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Object-relation id. */
                relation_id: components["parameters"]["ObjectRelationIdPath"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The object relation. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ObjectRelation"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    deleteObjectRelation: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description Object-relation id. */
                relation_id: components["parameters"]["ObjectRelationIdPath"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            412: components["responses"]["PreconditionFailed"];
            default: components["responses"]["Error"];
        };
    };
    listRemoteTargets: {
        parameters: {
            query?: {
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                /**
                 * @description List filters of the query language: `field=value`, `field__<op>=value`, `field__not_<op>=value`.
                 *     Unknown fields or operators are 400. See the list query language in the API description.
                 */
                filters?: components["parameters"]["ListFilters"];
                /** @description Whether to return X-Total-Count (default true). */
                include_total?: components["parameters"]["IncludeTotal"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
                /** @description Comma-separated sort fields, `-field` or `field.desc` for descending, at most 8; an id tie-breaker is appended. */
                sort?: components["parameters"]["Sort"];
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description One page of remote targets. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    "X-Total-Count": components["headers"]["XTotalCount"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RemoteTarget"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            default: components["responses"]["Error"];
        };
    };
    createRemoteTarget: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["NewRemoteTarget"];
            };
        };
        responses: {
            /** @description The persisted target. */
            201: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    Location: components["headers"]["Location"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RemoteTarget"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            default: components["responses"]["Error"];
        };
    };
    getRemoteTarget: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Remote target id. */
                target_id: components["parameters"]["RemoteTargetId"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The target. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RemoteTarget"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    deleteRemoteTarget: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description Remote target id. */
                target_id: components["parameters"]["RemoteTargetId"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            412: components["responses"]["PreconditionFailed"];
            default: components["responses"]["Error"];
        };
    };
    updateRemoteTarget: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description Remote target id. */
                target_id: components["parameters"]["RemoteTargetId"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["UpdateRemoteTarget"];
            };
        };
        responses: {
            /** @description The updated target. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RemoteTarget"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            412: components["responses"]["PreconditionFailed"];
            default: components["responses"]["Error"];
        };
    };
    listRemoteTargetEvents: {
        parameters: {
            query?: {
                action?: components["parameters"]["EvAction"];
                actor_kind?: components["parameters"]["EvActorKind"];
                actor_user_id?: components["parameters"]["EvActorUserId"];
                after_revision?: components["parameters"]["EvAfterRevision"];
                before_revision?: components["parameters"]["EvBeforeRevision"];
                collection_id?: components["parameters"]["EvCollectionId"];
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                entity_id?: components["parameters"]["EvEntityId"];
                entity_type?: components["parameters"]["EvEntityType"];
                /**
                 * @description List filters of the query language: `field=value`, `field__<op>=value`, `field__not_<op>=value`.
                 *     Unknown fields or operators are 400. See the list query language in the API description.
                 */
                filters?: components["parameters"]["ListFilters"];
                /** @description Whether to return X-Total-Count (default true). */
                include_total?: components["parameters"]["IncludeTotal"];
                initiator_user_id?: components["parameters"]["EvInitiatorUserId"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
                /** @description RFC 3339 or YYYY-MM-DD. */
                occurred_after?: components["parameters"]["EvOccurredAfter"];
                /** @description RFC 3339 or YYYY-MM-DD. */
                occurred_before?: components["parameters"]["EvOccurredBefore"];
                /** @description `id` or `occurred_at`, `-` prefix for descending (default `-id`). */
                sort?: components["parameters"]["EvSort"];
            };
            header?: never;
            path: {
                /** @description Remote target id. */
                target_id: components["parameters"]["RemoteTargetId"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description One page of audit events. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    "X-Total-Count": components["headers"]["XTotalCount"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Event"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    invokeRemoteTarget: {
        parameters: {
            query?: never;
            header?: {
                /** @description 1..255 bytes; the same key and submission returns the same task, a different submission 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
            };
            path: {
                /** @description Remote target id. */
                target_id: components["parameters"]["RemoteTargetId"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["InvokeRemoteTargetRequest"];
            };
        };
        responses: {
            /** @description Task accepted (kind `remote_call`). */
            202: {
                headers: {
                    Location: components["headers"]["Location"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Task"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            /** @description Too many active remote-call tasks for the submitting principal. */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            default: components["responses"]["Error"];
        };
    };
    createRestore: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["BackupDocument"];
            };
        };
        responses: {
            /** @description Restore staged and validated. */
            201: {
                headers: {
                    "Cache-Control": components["headers"]["CacheControlNoStore"];
                    /** @description Path of the stage's status, `/api/v1/restores/{id}/status`. */
                    Location: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RestoreCreated"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            default: components["responses"]["Error"];
        };
    };
    confirmRestore: {
        parameters: {
            query?: never;
            header?: {
                /** @description Id of a fresh credential approval for this exact operation. */
                "X-Svc-Credential-Approval"?: components["parameters"]["CredentialApproval"];
            };
            path: {
                restore_id: number;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["RestoreConfirmRequest"];
            };
        };
        responses: {
            /** @description Final status of the restore. */
            200: {
                headers: {
                    "Cache-Control": components["headers"]["CacheControlNoStore"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RestoreStatus"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            410: components["responses"]["Gone"];
            default: components["responses"]["Error"];
        };
    };
    getRestoreStatus: {
        parameters: {
            query?: never;
            header: {
                /** @description The one-time `restore_capability` returned when the restore was staged. */
                "X-Svc-Restore-Capability": components["parameters"]["RestoreCapability"];
            };
            path: {
                restore_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The restore status. */
            200: {
                headers: {
                    "Cache-Control": components["headers"]["CacheControlNoStore"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RestoreStatus"];
                };
            };
            400: components["responses"]["BadRequest"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    searchPlainText: {
        parameters: {
            query: {
                /** @description Opaque cursor from `next.classes`, passed back unchanged. */
                cursor_classes?: components["parameters"]["SearchCursorClasses"];
                /** @description Opaque cursor from `next.collections`, passed back unchanged. */
                cursor_collections?: components["parameters"]["SearchCursorCollections"];
                /** @description Opaque cursor from `next.objects`, passed back unchanged. */
                cursor_objects?: components["parameters"]["SearchCursorObjects"];
                /** @description Comma-separated subset of `collection`, `class`, `object` (default: all three). Empty or unknown values are 400. */
                kinds?: components["parameters"]["SearchKinds"];
                /** @description Page size per kind (default 100); larger values are clamped to 250, 0 or negative is 400. The effective value is returned in X-Page-Limit. */
                limit_per_kind?: components["parameters"]["SearchLimitPerKind"];
                /** @description Plain-text query, trimmed; blank after trimming is 400; at most 256 characters. */
                q: components["parameters"]["SearchQ"];
                /** @description Also match class JSON schema text (default false). */
                search_class_schema?: components["parameters"]["SearchClassSchema"];
                /** @description Also match string values inside object `json_data` (default false). */
                search_object_data?: components["parameters"]["SearchObjectData"];
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Grouped results and per-kind next cursors. */
            200: {
                headers: {
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PlainSearchResponse"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            default: components["responses"]["Error"];
        };
    };
    searchStructured: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["StructuredSearchRequest"];
            };
        };
        responses: {
            /** @description One page of tagged results. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    "X-Total-Count": components["headers"]["XTotalCount"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["StructuredSearchResponse"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description The object target's class selector (`target.class`) does not resolve to a class. */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Request body larger than 64 KiB. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Content type is not `application/json`. */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            default: components["responses"]["Error"];
        };
    };
    searchPlainTextStream: {
        parameters: {
            query: {
                /** @description Opaque cursor from `next.classes`, passed back unchanged. */
                cursor_classes?: components["parameters"]["SearchCursorClasses"];
                /** @description Opaque cursor from `next.collections`, passed back unchanged. */
                cursor_collections?: components["parameters"]["SearchCursorCollections"];
                /** @description Opaque cursor from `next.objects`, passed back unchanged. */
                cursor_objects?: components["parameters"]["SearchCursorObjects"];
                /** @description Comma-separated subset of `collection`, `class`, `object` (default: all three). Empty or unknown values are 400. */
                kinds?: components["parameters"]["SearchKinds"];
                /** @description Page size per kind (default 100); larger values are clamped to 250, 0 or negative is 400. The effective value is returned in X-Page-Limit. */
                limit_per_kind?: components["parameters"]["SearchLimitPerKind"];
                /** @description Plain-text query, trimmed; blank after trimming is 400; at most 256 characters. */
                q: components["parameters"]["SearchQ"];
                /** @description Also match class JSON schema text (default false). */
                search_class_schema?: components["parameters"]["SearchClassSchema"];
                /** @description Also match string values inside object `json_data` (default false). */
                search_object_data?: components["parameters"]["SearchObjectData"];
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Server-sent event stream: `started`, one `batch` per kind, then `done` or `error`. */
            200: {
                headers: {
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example event: started
                     *     data: {"query":"router"}
                     *
                     *     event: batch
                     *     data: {"kind":"collections","collections":[],"classes":[],"objects":[],"next":null}
                     *
                     *     event: done
                     *     data: {"query":"router"}
                     */
                    "text/event-stream": string;
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            default: components["responses"]["Error"];
        };
    };
    searchStructuredStream: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["StructuredSearchRequest"];
            };
        };
        responses: {
            /** @description Server-sent event stream: `started`, `result`*, then `done` or `error`. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example event: started
                     *     data: {"version":1,"kind":"collection"}
                     *
                     *     event: result
                     *     data: {"kind":"collection","resource":{"id":7,"name":"Infrastructure","description":"Production inventory","parent_collection_id":null,"created_at":"2026-03-07T10:15:22.123Z","updated_at":"2026-03-07T10:15:22.123Z","revision":1}}
                     *
                     *     event: done
                     *     data: {"version":1,"kind":"collection","next":null,"total":null,"page_limit":100}
                     */
                    "text/event-stream": string;
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description The object target's class selector (`target.class`) does not resolve to a class. */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Request body larger than 64 KiB. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Content type is not `application/json`. */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            default: components["responses"]["Error"];
        };
    };
    listSystemEventSubscriptions: {
        parameters: {
            query?: {
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                /**
                 * @description List filters of the query language: `field=value`, `field__<op>=value`, `field__not_<op>=value`.
                 *     Unknown fields or operators are 400. See the list query language in the API description.
                 */
                filters?: components["parameters"]["ListFilters"];
                /** @description Whether to return X-Total-Count (default true). */
                include_total?: components["parameters"]["IncludeTotal"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
                /** @description Comma-separated sort fields, `-field` or `field.desc` for descending, at most 8; an id tie-breaker is appended. */
                sort?: components["parameters"]["Sort"];
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description One page of system subscriptions. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    "X-Total-Count": components["headers"]["XTotalCount"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EventSubscription"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            default: components["responses"]["Error"];
        };
    };
    createSystemEventSubscription: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["NewEventSubscription"];
            };
        };
        responses: {
            /** @description System subscription created; `Location: /api/v1/system-event-subscriptions/{id}`. */
            201: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    Location: components["headers"]["Location"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EventSubscription"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            default: components["responses"]["Error"];
        };
    };
    getSystemEventSubscription: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description System event subscription id; a collection subscription's id is 404 here. */
                subscription_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The system subscription. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EventSubscription"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    deleteSystemEventSubscription: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description System event subscription id; a collection subscription's id is 404 here. */
                subscription_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description System subscription deleted. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            412: components["responses"]["PreconditionFailed"];
            default: components["responses"]["Error"];
        };
    };
    updateSystemEventSubscription: {
        parameters: {
            query?: never;
            header?: {
                /** @description Strong ETag, `*`, or a comma-separated list of up to 8 strong ETags. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description System event subscription id; a collection subscription's id is 404 here. */
                subscription_id: number;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["UpdateEventSubscription"];
            };
        };
        responses: {
            /** @description The updated system subscription. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EventSubscription"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            412: components["responses"]["PreconditionFailed"];
            default: components["responses"]["Error"];
        };
    };
    listTasks: {
        parameters: {
            query?: {
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                /**
                 * @description List filters of the query language: `field=value`, `field__<op>=value`, `field__not_<op>=value`.
                 *     Unknown fields or operators are 400. See the list query language in the API description.
                 */
                filters?: components["parameters"]["ListFilters"];
                /** @description Whether to return X-Total-Count (default true). */
                include_total?: components["parameters"]["IncludeTotal"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
                /** @description Comma-separated sort fields, `-field` or `field.desc` for descending, at most 8; an id tie-breaker is appended. */
                sort?: components["parameters"]["Sort"];
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description One page of tasks. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    "X-Total-Count": components["headers"]["XTotalCount"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Task"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            default: components["responses"]["Error"];
        };
    };
    getTask: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Task id. */
                task_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The task. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Task"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    cancelTask: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Task id. */
                task_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The task after the cancel request. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Task"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            /** @description The task has already finished. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            default: components["responses"]["Error"];
        };
    };
    listTaskEvents: {
        parameters: {
            query?: {
                /** @description Opaque cursor from X-Next-Cursor, passed back unchanged. */
                cursor?: components["parameters"]["Cursor"];
                /** @description Whether to return X-Total-Count (default true). */
                include_total?: components["parameters"]["IncludeTotal"];
                /** @description Page size 1..250 (default 100); larger values are clamped to 250, 0 or negative is 400. */
                limit?: components["parameters"]["Limit"];
                /** @description Comma-separated sort fields, `-field` or `field.desc` for descending, at most 8; an id tie-breaker is appended. */
                sort?: components["parameters"]["Sort"];
            };
            header?: never;
            path: {
                /** @description Task id. */
                task_id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description One page of task events. */
            200: {
                headers: {
                    "X-Next-Cursor": components["headers"]["XNextCursor"];
                    "X-Page-Limit": components["headers"]["XPageLimit"];
                    "X-Total-Count": components["headers"]["XTotalCount"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["TaskEvent"][];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            default: components["responses"]["Error"];
        };
    };
    getApiReference: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The API reference page. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "text/html": string;
                };
            };
            default: components["responses"]["Error"];
        };
    };
    getHealth: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Process is alive (`status` is `ok`). */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HealthStatus"];
                };
            };
            default: components["responses"]["Error"];
        };
    };
    getMetrics: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Metrics. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "text/plain": string;
                };
            };
            default: components["responses"]["Error"];
        };
    };
    getReadiness: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Ready to serve (`status` is `ready`). */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HealthStatus"];
                };
            };
            503: components["responses"]["ServiceUnavailable"];
            default: components["responses"]["Error"];
        };
    };
}
