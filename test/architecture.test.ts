import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { cycles, featureOf, type ImportEdge, importsOf, loadedWith, sourceFiles, workflowBundle } from './helpers/import-graph';

/**
 * The layering docs/design.md draws ("Layout"), checked on every run: feature folders
 * (db/<feature>, temporal/<feature>) form no cycle, db/ knows nothing of Temporal, and the workflow
 * bundle holds workflow code only.
 */
const files = sourceFiles();
const edges: ImportEdge[] = files.flatMap((f) => importsOf(f));
const show = (list: ImportEdge[]) => list.map((e) => `${e.from} -> ${e.to}${e.typeOnly ? ' (type)' : ''}`);

describe('architecture', () => {
  it('reads the whole source tree', () => {
    expect(files).toEqual(expect.arrayContaining(['db/sql.ts', 'temporal/workflows.ts', 'api/app.ts', 'cli/main.ts']));
    expect(edges.length).toBeGreaterThan(500);
  });

  it('has no import cycle between feature folders', () => {
    const between: [string, string][] = [];
    for (const e of edges) {
      const [a, b] = [featureOf(e.from), featureOf(e.to)];
      if (a && b && a !== b) between.push([a, b]);
    }
    expect(new Set(between.map(([a]) => a)).size).toBeGreaterThan(10);
    expect(cycles(between)).toEqual([]);
  });

  it('keeps db/ free of Temporal, the API and the CLI', () => {
    const upward = edges.filter((e) => e.from.startsWith('db/') && (/^(temporal|api|cli)\//.test(e.to) || e.to.startsWith('@temporalio/')));
    expect(show(upward)).toEqual([]);
  });

  it('keeps the data layer infrastructure (db/*.ts, entities) below every feature', () => {
    const infra = edges.filter((e) => /^db\/([^/]+\.ts|entities\/)/.test(e.from) && featureOf(e.to)?.startsWith('db/'));
    expect(show(infra)).toEqual([]);
  });

  it('bundles only workflow code: @temporalio/workflow and other workflow files under temporal/', () => {
    const bundle = workflowBundle('temporal/workflows.ts');
    expect(bundle.files).toEqual(expect.arrayContaining(['temporal/journeys/workflow.ts', 'temporal/campaigns/workflow.ts']));
    const outside = bundle.files.filter((f) => !f.startsWith('temporal/') || /activities/.test(path.basename(f)));
    const packages = bundle.edges.filter((e) => !e.typeOnly && !e.to.endsWith('.ts') && !['@temporalio/workflow', '@temporalio/common'].includes(e.to));
    expect([...outside, ...show(packages)]).toEqual([]);
  });

  it('starts the supervisor without the API or the worker: their modules load in their own processes', () => {
    // `tidings start` runs cli/main.ts and supervises; a heap holding both roles' modules cost it
    // garbage collections while the service ran (docs/performance.md).
    const loaded = loadedWith('cli/main.ts');
    expect(loaded).toEqual(expect.arrayContaining(['cli/supervise.ts', 'db/orm.ts', 'cli/services.ts']));
    expect(loaded.filter((f) => f === 'cli/start.ts' || f === 'cli/import.ts' || f.startsWith('api/') || /^temporal\/(worker|activities|client)\.ts$/.test(f))).toEqual([]);
  });

  it("types each workflow's activity proxies with its own feature's activities, never the worker's merged set", () => {
    // Activity modules: files named for them (the worker's merge, temporal/activities.ts, too), and every factory it merges.
    const merged = importsOf('temporal/activities.ts').map((e) => e.to);
    const activityModule = (file: string) => /activities/.test(file) || merged.includes(file);
    // Another feature's activities, each for a reason.
    const allowed = [
      // SEND_EMAIL steps of executions from before the delivery engine deliver as /v1/send does.
      'temporal/journeys/steps/proxies.ts -> temporal/delivery/send-emails-activities.ts',
      // The checkDomainNow update answers with the domain check's outcome; no proxy.
      'temporal/signals.ts -> temporal/domains/activities.ts',
    ];
    const typed = workflowBundle('temporal/workflows.ts').edges.filter((e) => e.typeOnly && activityModule(e.to));
    const foreign = typed.filter((e) => featureOf(e.to) === undefined || featureOf(e.to) !== featureOf(e.from)).map((e) => `${e.from} -> ${e.to}`);
    expect(typed.length).toBeGreaterThan(10);
    expect(foreign.filter((e) => !allowed.includes(e))).toEqual([]);
  });
});

describe('the import graph checks themselves', () => {
  it('find a cycle, and only the nodes on it', () => {
    expect(cycles([['a', 'b'], ['b', 'c'], ['c', 'a'], ['c', 'd']])).toEqual([['a', 'b', 'c']]);
    expect(cycles([['a', 'b'], ['b', 'c']])).toEqual([]);
  });

  it('tell type-only imports from imports that load code, and follow only the latter into the bundle', () => {
    const root = mkdtempSync(path.join(tmpdir(), 'import-graph-'));
    mkdirSync(path.join(root, 'temporal/x'), { recursive: true });
    writeFileSync(path.join(root, 'temporal/workflows.ts'), "export { run } from './x/workflow';\n");
    writeFileSync(
      path.join(root, 'temporal/x/workflow.ts'),
      "import type { A } from './activities';\nimport { type B } from '../../db/b';\nimport { c } from './c';\nimport { z } from 'zod';\nexport const run = (a: A, b: B) => [a, b, c, z];\n",
    );
    writeFileSync(path.join(root, 'temporal/x/activities.ts'), 'export type A = 1;\n');
    writeFileSync(path.join(root, 'temporal/x/c.ts'), "export const c = require('../../db/d');\n");
    mkdirSync(path.join(root, 'db'));
    writeFileSync(path.join(root, 'db/d.ts'), 'export const d = 1;\n');
    const bundle = workflowBundle('temporal/workflows.ts', root);
    rmSync(root, { recursive: true, force: true });
    expect(bundle.files).toEqual(['temporal/workflows.ts', 'temporal/x/c.ts', 'temporal/x/workflow.ts', 'db/d.ts'].sort());
    expect(bundle.edges.filter((e) => e.typeOnly).map((e) => e.to)).toEqual(['temporal/x/activities.ts', 'db/b']);
    expect(bundle.edges.find((e) => e.to === 'zod')).toMatchObject({ typeOnly: false });
  });

  it('tell a require() inside a function from an import, and leave it out of what a file loads', () => {
    const root = mkdtempSync(path.join(tmpdir(), 'import-graph-'));
    writeFileSync(path.join(root, 'main.ts'), "import { a } from './a';\nexport function later() {\n  return require('./b') as typeof import('./b');\n}\nexport const now = require('./c');\n");
    for (const name of ['a', 'b', 'c']) writeFileSync(path.join(root, `${name}.ts`), `export const ${name} = 1;\n`);
    const edges = importsOf('main.ts', root);
    const loaded = loadedWith('main.ts', root);
    rmSync(root, { recursive: true, force: true });
    expect(edges.map((e) => [e.to, e.typeOnly, e.lazy])).toEqual([
      ['a.ts', false, false],
      ['b.ts', false, true],
      ['b.ts', true, false],
      ['c.ts', false, false],
    ]);
    expect(loaded).toEqual(['a.ts', 'c.ts', 'main.ts']);
  });

  it('place files in their feature folder, and infrastructure in none', () => {
    expect(featureOf('db/contacts/contacts.ts')).toBe('db/contacts');
    expect(featureOf('temporal/journeys/steps/delay.ts')).toBe('temporal/journeys');
    expect([featureOf('db/sql.ts'), featureOf('db/migrations/M1.ts'), featureOf('api/routes/x.ts')]).toEqual([undefined, undefined, undefined]);
  });
});
