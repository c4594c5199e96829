// The principal as every layer sees it: a human (user) or a service account, named within an
// identity scope.

export type PrincipalKind = 'human' | 'service_account';

/** A principal row (table principals); also the public Principal representation's members. */
export interface Principal {
  id: number;
  kind: PrincipalKind;
  name: string;
  identity_scope: string;
  created_at: Date;
  updated_at: Date;
  revision: number;
}
