import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

/** One import of a source file: where it points and whether it leaves code behind after compilation. */
export interface ImportEdge {
  from: string;
  /** A repository path (`db/sql.ts`) for a relative import, the package name for a bare one. */
  to: string;
  typeOnly: boolean;
  /** A require() or import() inside a function: loaded when that code runs, not with the file. */
  lazy: boolean;
}

export const ROOT = path.resolve(__dirname, '../..');

/** The service's own source: every .ts file outside tests, benches, builds and dependencies. */
export function sourceFiles(root = ROOT): string[] {
  const skip = new Set(['node_modules', 'dist', 'test', 'bench', 'docs', 'deploy', '.git', '.ci']);
  const walk = (dir: string): string[] =>
    readdirSync(path.join(root, dir)).flatMap((name) => {
      const rel = dir ? `${dir}/${name}` : name;
      if (skip.has(name) && !dir) return [];
      if (statSync(path.join(root, rel)).isDirectory()) return walk(rel);
      return rel.endsWith('.ts') && !rel.endsWith('.d.ts') ? [rel] : [];
    });
  return walk('');
}

function resolveRelative(root: string, from: string, spec: string): string {
  const base = path.posix.normalize(path.posix.join(path.posix.dirname(from), spec)).replace(/\.js$/, '');
  for (const candidate of [`${base}.ts`, `${base}/index.ts`, base]) {
    try {
      if (statSync(path.join(root, candidate)).isFile()) return candidate;
    } catch {
      // not this candidate
    }
  }
  return base;
}

/** Every import, re-export, dynamic import() and require() of one file. */
export function importsOf(file: string, root = ROOT): ImportEdge[] {
  const source = ts.createSourceFile(file, readFileSync(path.join(root, file), 'utf8'), ts.ScriptTarget.ES2022, true);
  const edges: ImportEdge[] = [];
  const add = (spec: string, typeOnly: boolean, lazy = false) => {
    const to = spec.startsWith('.') ? resolveRelative(root, file, spec) : spec.startsWith('node:') ? spec : spec.split('/').slice(0, spec.startsWith('@') ? 2 : 1).join('/');
    edges.push({ from: file, to, typeOnly, lazy });
  };
  const visit = (node: ts.Node, inFunction = false) => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      const clause = node.importClause;
      const namedTypesOnly =
        !!clause && !clause.name && !!clause.namedBindings && ts.isNamedImports(clause.namedBindings) && clause.namedBindings.elements.length > 0 && clause.namedBindings.elements.every((e) => e.isTypeOnly);
      add(node.moduleSpecifier.text, !!clause && (clause.isTypeOnly || namedTypesOnly));
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      add(node.moduleSpecifier.text, node.isTypeOnly);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      add(node.argument.literal.text, true);
    } else if (ts.isCallExpression(node) && node.arguments.length === 1 && node.arguments[0] && ts.isStringLiteral(node.arguments[0])) {
      const spec = node.arguments[0].text;
      const callee = node.expression;
      const isDynamicImport = callee.kind === ts.SyntaxKind.ImportKeyword;
      const isRequire = ts.isIdentifier(callee) && callee.text === 'require';
      const isResolve = ts.isPropertyAccessExpression(callee) && ts.isIdentifier(callee.expression) && callee.expression.text === 'require' && callee.name.text === 'resolve';
      if (isDynamicImport || isRequire) add(spec, false, inFunction);
      // require.resolve names a file to load elsewhere (the workflow bundle), not a dependency of this one.
      if (isResolve) return;
    }
    const body = inFunction || ts.isFunctionLike(node);
    ts.forEachChild(node, (child) => visit(child, body));
  };
  visit(source);
  return edges;
}

/** `db/contacts/x.ts` → `db/contacts`; infrastructure at a layer's root (`db/sql.ts`) belongs to no feature. */
export function featureOf(file: string): string | undefined {
  const [layer, folder, ...rest] = file.split('/');
  if (!layer || !folder || rest.length === 0 || !['db', 'temporal'].includes(layer)) return undefined;
  if (layer === 'db' && ['entities', 'migrations'].includes(folder)) return undefined;
  return `${layer}/${folder}`;
}

/** Cycles of the directed graph, each as the list of its nodes (one representative per strongly connected component). */
export function cycles(edges: Iterable<[string, string]>): string[][] {
  const next = new Map<string, Set<string>>();
  for (const [a, b] of edges) {
    if (!next.has(a)) next.set(a, new Set());
    if (!next.has(b)) next.set(b, new Set());
    next.get(a)!.add(b);
  }
  // Tarjan's strongly connected components.
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const strongConnect = (v: string) => {
    index.set(v, counter);
    low.set(v, counter++);
    stack.push(v);
    onStack.add(v);
    for (const w of next.get(v)!) {
      if (!index.has(w)) {
        strongConnect(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || next.get(v)!.has(v)) found.push(component.sort());
    }
  };
  for (const v of next.keys()) if (!index.has(v)) strongConnect(v);
  return found;
}

/** The source files a process loads with `entry`, before any function runs: imports that leave code behind, not lazy ones. */
export function loadedWith(entry: string, root = ROOT): string[] {
  const seen = new Set<string>();
  const queue = [entry];
  while (queue.length) {
    const file = queue.shift()!;
    if (seen.has(file)) continue;
    seen.add(file);
    for (const edge of importsOf(file, root)) if (!edge.typeOnly && !edge.lazy && edge.to.endsWith('.ts')) queue.push(edge.to);
  }
  return [...seen].sort();
}

/** Files the workflow bundle holds: everything reached from `entry` through imports that leave code behind. */
export function workflowBundle(entry: string, root = ROOT): { files: string[]; edges: ImportEdge[] } {
  const seen = new Set<string>();
  const edges: ImportEdge[] = [];
  const queue = [entry];
  while (queue.length) {
    const file = queue.shift()!;
    if (seen.has(file)) continue;
    seen.add(file);
    for (const edge of importsOf(file, root)) {
      edges.push(edge);
      if (!edge.typeOnly && edge.to.endsWith('.ts')) queue.push(edge.to);
    }
  }
  return { files: [...seen].sort(), edges };
}
