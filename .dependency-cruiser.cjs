// The layering of src/ (README "Code layout"; `make layers`, part of `make check`).
//
//   http (transport) → handlers → mutations → db → domain
//   workers drive mutations and db; cli is a second transport beside http; sinks and outbound are
//   the adapters to the outside (sinks → outbound → domain); mutations use the sinks' validators.
//   config.ts (settings), deps.ts (what handlers and workers receive) and log.ts sit beside the
//   layers; db and domain know nothing of them.
//
// Type-only imports count: a layer that names another layer's types depends on it.
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-cycles',
      severity: 'error',
      comment: 'Modules form a hierarchy: no import cycles, type-only ones included.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'domain-is-the-bottom',
      severity: 'error',
      comment: 'src/domain holds pure rules: it imports nothing of ours outside src/domain but the generated contract types.',
      from: { path: '^src/domain/' },
      to: { path: '^(src|codegen|test|bench|bin)/', pathNot: '^src/domain/' },
    },
    {
      name: 'db-imports-only-db-and-domain',
      severity: 'error',
      comment: 'src/db is SQL only: it imports src/db, src/domain and the generated contract types.',
      from: { path: '^src/db/' },
      to: { path: '^(src|codegen|test|bench|bin)/', pathNot: '^src/(db|domain)/' },
    },
    {
      name: 'only-db-imports-the-driver',
      severity: 'error',
      comment:
        'SQL lives in src/db: only src/db imports the PostgreSQL driver (postgres.js); other layers name its types through src/db/sql.ts (Db, Sql, TransactionSql).',
      from: { pathNot: '^src/db/' },
      to: { path: '(^|/)node_modules/postgres/' },
    },
    {
      name: 'mutations-below-handlers',
      severity: 'error',
      comment:
        'A write path (src/mutations) uses db, domain, other write paths, the sinks validators, settings and Deps; ' +
        'never requests (http, handlers), workers or the command line, so handlers, workers and cli share it.',
      from: { path: '^src/mutations/' },
      to: { path: '^src/(http|handlers|workers|cli|services)/|^src/(app|main)\\.ts$' },
    },
    {
      name: 'sinks-and-outbound-are-adapters',
      severity: 'error',
      comment:
        'Sinks and the outbound client talk to the outside; they use domain rules, settings and each other, never the database or the layers above.',
      from: { path: '^src/(sinks|outbound)/' },
      to: { path: '^src/(db|mutations|handlers|http|workers|cli|services)/|^src/(app|main)\\.ts$' },
    },
    {
      name: 'handlers-do-not-reach-into-workers',
      severity: 'error',
      comment: 'Handlers enqueue work through db (tasks) and read worker state through modules below them, never a worker module.',
      from: { path: '^src/handlers/' },
      to: { path: '^src/(workers|cli)/|^src/(app|main)\\.ts$' },
    },
    {
      name: 'workers-below-transports',
      severity: 'error',
      comment: 'Workers run without a request: they use mutations, db, domain, sinks and outbound, not http, handlers or cli.',
      from: { path: '^src/workers/' },
      to: { path: '^src/(http|handlers|cli)/|^src/(app|main)\\.ts$' },
    },
    {
      name: 'http-is-transport-only',
      severity: 'error',
      comment:
        'src/http parses, validates, authenticates and renders; it reaches data only through the handlers, ' +
        'which src/app.ts (the app wiring) maps to operations.',
      from: { path: '^src/http/' },
      to: { path: '^src/(db|handlers|mutations|workers|cli)/' },
    },
    {
      name: 'cli-is-a-transport',
      severity: 'error',
      comment: 'The command line calls the same write paths as the handlers (src/mutations), not the handlers themselves.',
      from: { path: '^src/cli/' },
      to: { path: '^src/(handlers|http)/|^src/app\\.ts$', pathNot: '^src/http/schemas\\.ts$' },
    },
    {
      name: 'settings-are-a-leaf',
      severity: 'error',
      comment: 'config.ts parses SVC_* settings; it imports domain rules only.',
      from: { path: '^src/config\\.ts$' },
      to: { path: '^src/', pathNot: '^src/domain/' },
    },
    {
      name: 'src-does-not-import-tests',
      severity: 'error',
      comment: 'Nothing in src, codegen or generated imports test or bench code.',
      from: { path: '^(src|codegen|generated)/' },
      to: { path: '^(test|bench)/|\\.test\\.ts$' },
    },
    {
      name: 'no-orphans',
      severity: 'error',
      comment: 'Every module is imported by another, except the entry points (a module nobody imports is dead code).',
      from: {
        orphan: true,
        pathNot: ['\\.test\\.ts$', '\\.d\\.ts$', '^src/main\\.ts$', '^src/cli/main\\.ts$', '^codegen/generate\\.ts$'],
      },
      to: {},
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(node_modules|data)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      extensions: ['.ts', '.js', '.cjs', '.mjs', '.json'],
    },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
