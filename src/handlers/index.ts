import type { HandlerMap } from '../http/contract.ts';
import { adminHandlers } from './admin.ts';
import { authHandlers } from './auth.ts';
import { backupsHandlers } from './backups.ts';
import { classesHandlers } from './classes.ts';
import { collectionsHandlers } from './collections.ts';
import { computedFieldsHandlers } from './computed-fields.ts';
import { credentialApprovalsHandlers } from './credential-approvals.ts';
import { eventDeliveriesHandlers } from './event-deliveries.ts';
import { eventSinksHandlers } from './event-sinks.ts';
import { eventSubscriptionsHandlers } from './event-subscriptions.ts';
import { eventsHandlers } from './events.ts';
import { exportTemplatesHandlers } from './export-templates.ts';
import { exportsHandlers } from './exports.ts';
import { groupsHandlers } from './groups.ts';
import { historyHandlers } from './history.ts';
import { importsHandlers } from './imports.ts';
import { meHandlers } from './me.ts';
import { metaHandlers } from './meta.ts';
import { metaCountsHandlers } from './meta-counts.ts';
import { objectsHandlers } from './objects.ts';
import { opsHandlers } from './ops.ts';
import { permissionsHandlers } from './permissions.ts';
import { principalsHandlers } from './principals.ts';
import { relationsHandlers } from './relations.ts';
import { remoteTargetsHandlers } from './remote-targets.ts';
import { restoresHandlers } from './restores.ts';
import { searchHandlers } from './search.ts';
import { serviceAccountsHandlers } from './service-accounts.ts';
import { settingsHandlers } from './settings.ts';
import { tasksHandlers } from './tasks.ts';
import { tokensHandlers } from './tokens.ts';
import { usersHandlers } from './users.ts';

/** operationId → handler. `satisfies HandlerMap` makes a missing operation, or a reply its contract does not declare, a compile error. */
// Evaluated once, at load: the cost the lint rule guards against (a hidden class per evaluation) is paid once.
/* eslint-disable no-restricted-syntax */
export const handlers = {
  ...adminHandlers,
  ...authHandlers,
  ...backupsHandlers,
  ...classesHandlers,
  ...collectionsHandlers,
  ...computedFieldsHandlers,
  ...credentialApprovalsHandlers,
  ...eventDeliveriesHandlers,
  ...eventSinksHandlers,
  ...eventSubscriptionsHandlers,
  ...eventsHandlers,
  ...exportTemplatesHandlers,
  ...exportsHandlers,
  ...groupsHandlers,
  ...historyHandlers,
  ...importsHandlers,
  ...meHandlers,
  ...metaHandlers,
  ...metaCountsHandlers,
  ...objectsHandlers,
  ...opsHandlers,
  ...permissionsHandlers,
  ...principalsHandlers,
  ...relationsHandlers,
  ...remoteTargetsHandlers,
  ...restoresHandlers,
  ...searchHandlers,
  ...serviceAccountsHandlers,
  ...settingsHandlers,
  ...tasksHandlers,
  ...tokensHandlers,
  ...usersHandlers,
} satisfies HandlerMap;
/* eslint-enable no-restricted-syntax */
