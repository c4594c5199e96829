// The one workflow every generated client drives (test/client-compat.test.ts): what it creates and
// what it reports back for the test to compare. These files are copied next to the generated clients
// in a temporary directory and typechecked there with `tsc --strict`; they use each client as its
// generator's documentation shows, with no hand-written request glue.

export interface WorkflowInput {
  /** The running server, e.g. http://127.0.0.1:40123 (orval bakes it in at generation time). */
  baseUrl: string;
  adminPassword: string;
  /** Makes the collection and class names unique to one run. */
  prefix: string;
}

/** The objects of the Server class: five `web-*`, two `db-*`, racks r1 and r2 alternating. */
export const SERVERS: { name: string; json_data: { rack: string; n: number } }[] = [0, 1, 2, 3, 4, 5, 6].map((n) => ({
  name: n < 5 ? `web-${n}` : `db-${n}`,
  json_data: { rack: n % 2 === 0 ? 'r1' : 'r2', n },
}));

/** The JSON schema of the Server class (objects are validated against it). */
export const SERVER_SCHEMA = {
  type: 'object',
  required: ['rack', 'n'],
  properties: { rack: { type: 'string' }, n: { type: 'integer' } },
};

export interface Observed {
  collectionId: number;
  /** Ids of the created Server objects, in SERVERS order. */
  serverIds: number[];
  rackId: number;
  /** Ids of the objects related to the rack (listRelatedObjects). */
  relatedToRack: number[];
  /** `name__startswith=web-`, `sort=-name`, `limit=2`, followed through X-Next-Cursor: names and page sizes. */
  pagedNames: string[];
  pageSizes: number[];
  /** Names (sorted by name) for `name__in=web-1,db-6`, repeated `name__not_equals` with `name__startswith=web`, `json_data__equals=rack=r2`. */
  filtered: { in: string[]; notEquals: string[]; jsonPath: string[] };
  /**
   * Names (sorted by name) through the repeatable `filter` parameter: `json_data__equals=rack=r2`
   * (as `filtered.jsonPath` sent directly), and the Servers related to the Rack on rack r1
   * (`related.r.class.id=<Rack class id>` and `json_data__equals=rack=r1`).
   */
  viaFilter: { jsonPath: string[]; related: string[] };
  /** Structured search (json_data rack = r1, sorted by name, limit 1) followed through `next`: names and page count. */
  searchNames: string[];
  searchPages: number;
  /** entity_id of the collection's `object` `created` audit events, followed through X-Next-Cursor with limit 3. */
  eventEntityIds: number[];
  /** Creating the Server class a second time: the 409 read as the client's typed error. */
  conflict: { status: number; error: string; message: string };
}
