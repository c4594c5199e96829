/** Who caused a change: a user request, a worker running a task, or the system itself. */
export interface Actor {
  kind: 'user' | 'worker' | 'system';
  principalId: number | null;
  principalName: string | null;
  initiatorId?: number | null;
  initiatorName?: string | null;
  taskId?: number | null;
  requestId?: string | null;
  correlationId?: string | null;
}

export const SYSTEM_ACTOR: Actor = { kind: 'system', principalId: null, principalName: null };
