// The layers of rods, and the imports each may make (docs/architecture.md §5 explains them).
// This file is the architecture's one source: `npm run lint:layers` checks every import of the
// TypeScript sources against it, and CI fails on a violation that is not in the recorded list of
// known ones (.dependency-cruiser-known-violations.json, which may only shrink).
//
//   domain      pure rules: no I/O, imports only domain/ and the generated schema types
//   wire        schemas/, platform/codec/: the Avro format
//   platform    platform/kafka/, platform/store/, platform/temporal/, platform/config/, platform/util/: ports and adapters, no stage
//   stages      stages/aggregator/, workflows/, activities/, stages/relay/, prompts/, executor/
//   analysis    analysis/replay/, analysis/lineage/, analysis/export/, analysis/status/
//   entry       entry/cli/, bin/, entry/gateway/ (the HTTP routes), entry/dashboard/, clients/: compose the rest;
//               the gateway starts workflows through the Temporal client and reads through the
//               platform's owners and the analysis modules, never a stage's internals
//   operations  infra/: the local stack (used by entry points and development tools only)
//   development dev/, test/ and tests
const TESTS = '\\.(unit|int|e2e|soak|vllm)\\.test\\.ts$';
const DOMAIN = '^domain/';
const WIRE = '^(schemas|platform/codec)/';
const PLATFORM = '^platform/';
const STAGE_FOLDERS = ['stages/aggregator', 'workflows', 'activities', 'stages/relay', 'prompts', 'executor'];
const ANALYSIS = '^analysis/';
const ENTRY = '^(entry|bin|clients)/';
const DEV = '^(dev|test)/';
const INFRA = '^infra/';

/** A node built-in or package that does I/O: none of these may reach the pure core. */
const IO_MODULES = [
  '^(node:)?(fs|fs/promises|net|http|https|http2|child_process|dgram|dns|tls|worker_threads|cluster)$',
  '^(pg|kafkajs|@temporalio/(client|worker|activity)|openai|fastify|pino)$',
];

module.exports = {
  forbidden: [
    {
      name: 'no-cycle',
      severity: 'error',
      comment: 'Modules import each other in a cycle: one of them holds what both need.',
      from: { pathNot: TESTS },
      to: { circular: true },
    },
    {
      name: 'domain-is-pure',
      severity: 'error',
      comment: 'domain/ holds the method as pure rules: it imports only domain/ and schema types.',
      from: { path: DOMAIN, pathNot: TESTS },
      to: { pathNot: ['^domain/', '^schemas/', '^node_modules/'], dependencyTypesNot: ['core'] },
    },
    {
      name: 'domain-does-no-io',
      severity: 'error',
      comment: 'domain/ does no I/O: no file system, network, database, broker or workflow client.',
      from: { path: DOMAIN, pathNot: TESTS },
      to: { path: IO_MODULES },
    },
    {
      name: 'wire-imports-no-stage',
      severity: 'error',
      comment: 'The wire format (schemas/, platform/codec/) stands below every stage and the platform.',
      from: { path: WIRE, pathNot: TESTS },
      to: { pathNot: [DOMAIN, WIRE, '^node_modules/'], dependencyTypesNot: ['core'] },
    },
    {
      name: 'platform-imports-no-stage',
      severity: 'error',
      comment:
        'The platform (platform/kafka/, platform/store/, platform/temporal/, platform/config/, platform/util/) serves the stages and imports none.',
      from: { path: PLATFORM, pathNot: TESTS },
      to: { path: [`^(${STAGE_FOLDERS.join('|')})/`, ANALYSIS, ENTRY, INFRA] },
    },
    ...STAGE_FOLDERS.map((stage) => ({
      name: `stage-${stage.split('/').pop()}-imports-no-other-stage`,
      severity: 'error',
      comment: `A stage (${stage}/) imports domain/, the wire format and the platform, not another stage: what two stages share belongs below them.`,
      from: { path: `^${stage}/`, pathNot: TESTS },
      to: {
        path: `^(${STAGE_FOLDERS.filter((s) => s !== stage).join('|')})/`,
        // Workflows name the activities they schedule by their types (the rule below).
        ...(stage === 'workflows' ? { pathNot: '^activities/' } : {}),
      },
    })),
    {
      name: 'workflows-import-activity-types-only',
      severity: 'error',
      comment:
        'Workflow code is deterministic and bundled apart: it knows its activities by their types only.',
      from: { path: '^workflows/', pathNot: TESTS },
      to: { path: '^activities/', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'workflow-code-does-no-io',
      severity: 'error',
      comment:
        'Workflow code runs in the deterministic sandbox: no database, broker, client or file I/O. workflows/start-campaign.ts is the one client-side file (the campaign service the CLI and the gateway call), and no workflow code imports it.',
      from: { path: '^workflows/', pathNot: [TESTS, '^workflows/start-campaign\\.ts$'] },
      to: { path: [...IO_MODULES, '^workflows/start-campaign\\.ts$'] },
    },
    {
      name: 'stages-import-no-analysis-or-entry',
      severity: 'error',
      comment: 'Stages do not reach up into analysis tools or entry points.',
      from: { path: `^(${STAGE_FOLDERS.join('|')})/`, pathNot: TESTS },
      to: { path: [ANALYSIS, ENTRY] },
    },
    {
      name: 'analysis-imports-no-stage',
      severity: 'error',
      comment:
        'Analysis tools (replay, lineage, export, status) read what the stages recorded through domain/ and the platform: the rules they share with a stage belong in domain/.',
      from: { path: ANALYSIS, pathNot: TESTS },
      to: { path: [`^(${STAGE_FOLDERS.join('|')})/`, ENTRY] },
    },
    {
      name: 'gateway-imports-no-stage-internals',
      severity: 'error',
      comment:
        'The gateway starts workflows (by their function, through the client) and reads through the owners in platform/store/ and the analysis modules: it imports no activity, aggregator, relay or executor code.',
      from: { path: '^entry/gateway/', pathNot: TESTS },
      to: { path: '^(activities|aggregator|relay|executor|prompts)/' },
    },
    {
      name: 'product-imports-no-operations',
      severity: 'error',
      comment:
        'The product does not import the local stack manager (infra/): only entry points and development tools do.',
      from: { pathNot: [ENTRY, DEV, INFRA, TESTS] },
      to: { path: INFRA },
    },
    {
      name: 'product-imports-no-development',
      severity: 'error',
      comment:
        'Nothing in the product, the shipped CLI included, imports dev/ or test/: development commands have their own entry point (dev/cli.ts, bin/rods-dev.mjs).',
      from: { pathNot: [DEV, TESTS, '^bin/rods-dev\\.mjs$'] },
      to: { path: DEV },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: ['^node_modules/', '^entry/dashboard/dist/', '^\\.stack/', '^reports/'] },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      extensions: ['.ts', '.js', '.mjs', '.cjs', '.d.ts'],
    },
  },
};
