import Handlebars from 'handlebars';

/**
 * The variables a template reads from the top of its context (`name`, `data.plan`, the `name` of
 * `{{name ?? "friend"}}`), in order of first use, so an editor can say which of them a contact has.
 * Names inside `{{#each}}` and `{{#with}}` bodies are relative to the item and are left out, as are
 * `@data` names, `this` and `../` paths. A source that does not parse gives none: saving it is what
 * reports the syntax error (mail/render.ts).
 */

/** The helpers a template may call (mail/render.ts allows only Handlebars' builtins and `??`). */
const HELPERS = new Set(['if', 'unless', 'each', 'with', 'lookup']);
/** Blocks whose body reads another context than the template's. */
const SCOPING = new Set(['each', 'with']);

type Node = hbs.AST.Node;
type Call = hbs.AST.MustacheStatement | hbs.AST.BlockStatement | hbs.AST.SubExpression;

export function templateVariableNames(...sources: string[]): string[] {
  const names = new Set<string>();
  for (const source of sources) {
    let ast: hbs.AST.Program;
    try {
      // `a??b` does not lex without spaces around `??`; the operator itself is skipped below.
      ast = Handlebars.parseWithoutProcessing(source.replace(/\?\?/g, ' ?? '));
    } catch {
      continue;
    }
    program(ast, names);
  }
  return [...names];
}

function program(p: hbs.AST.Program | undefined, names: Set<string>): void {
  for (const statement of p?.body ?? []) {
    if (statement.type === 'MustacheStatement' || statement.type === 'BlockStatement') call(statement as Call, names);
  }
}

function call(c: Call, names: Set<string>): void {
  const callee = c.path.type === 'PathExpression' ? (c.path as hbs.AST.PathExpression) : undefined;
  const helper = callee && !callee.data && callee.parts.length === 1 && HELPERS.has(callee.parts[0]!) && (c.params.length > 0 || c.type === 'BlockStatement');
  if (!helper) expression(c.path, names);
  for (const p of c.params) expression(p, names);
  for (const pair of c.hash?.pairs ?? []) expression(pair.value, names);
  if (c.type === 'BlockStatement') {
    const block = c as hbs.AST.BlockStatement;
    // A body under each / with, or under a variable used as a block, reads that value's context.
    if (helper && !SCOPING.has(callee.parts[0]!)) program(block.program, names);
    program(block.inverse, names);
  }
}

function expression(e: Node, names: Set<string>): void {
  if (e.type === 'SubExpression') {
    call(e as hbs.AST.SubExpression, names);
    return;
  }
  if (e.type !== 'PathExpression') return;
  const path = e as hbs.AST.PathExpression;
  if (path.data || path.depth > 0 || path.parts.length === 0 || path.original === '??' || /^this\b|^\./.test(path.original)) return;
  names.add(path.parts.join('.'));
}
