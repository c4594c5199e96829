// Process-wide counters the workers keep and the health snapshot reports (GET event health):
// they sit beside the layers, so a handler reads them without importing a worker.

/** How often the workers of one kind woke by notification and by poll. */
export interface WakeupStats {
  notification: number;
  poll: number;
}

/** Wakeups of this process's event fan-out workers. */
export const fanoutWakeups: WakeupStats = { notification: 0, poll: 0 };

/** Wakeups of this process's event delivery workers. */
export const deliveryWakeups: WakeupStats = { notification: 0, poll: 0 };
