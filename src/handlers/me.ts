import type { HandlerMap } from '../http/contract.ts';
import { authOf } from '../http/contract.ts';

export const meHandlers = {
  getMe: async (_input, ctx) => {
    const { principal, token } = authOf(ctx);
    return {
      status: 200,
      body: {
        principal: {
          id: principal.id,
          kind: principal.kind,
          name: principal.name,
          identity_scope: principal.identity_scope,
          created_at: principal.created_at,
          updated_at: principal.updated_at,
          revision: principal.revision,
        },
        token: {
          id: token.id,
          name: token.name,
          description: token.description,
          issued: token.issued,
          expires_at: token.expires_at,
          last_used_at: token.last_used_at,
          revision: token.revision,
          scope: token.scope,
        },
      },
    };
  },
} satisfies Partial<HandlerMap>;
