/**
 * Template engine for subjects and bodies: Handlebars plus the `{{key ?? "fallback"}}` operator.
 *
 * Everything that can go wrong with a template is found by `compileTemplate`, so the API can refuse a
 * bad template with a 422 when it is saved and the worker never fails on one at send time.
 */
import Handlebars from 'handlebars';
import { planDataPatch, RESERVED_DATA_KEYS } from '../db/contacts/data';

type Node = hbs.AST.Node;
type Expr = hbs.AST.Expression;
type Path = hbs.AST.PathExpression;
type SubExpr = hbs.AST.SubExpression;
type Call = hbs.AST.MustacheStatement | hbs.AST.BlockStatement | SubExpr;

export class TemplateSyntaxError extends Error {
  /** `line` and `column` are 1-based and point into the source as the user wrote it. */
  constructor(
    message: string,
    readonly line?: number,
    readonly column?: number,
  ) {
    super(line === undefined ? message : `${message} (line ${line}${column === undefined ? '' : `, column ${column}`})`);
    this.name = 'TemplateSyntaxError';
  }
}

export interface CompiledTemplate {
  render(vars: Record<string, unknown>): string;
}

// A private environment so helpers registered elsewhere in the process can't change how emails render.
const env = Handlebars.create();

const COALESCE = '__coalesce';
env.registerHelper(COALESCE, (...args: unknown[]) => {
  args.pop(); // Handlebars' options object
  // `??` means "missing or null"; 0, false and "" are values (the OpenAPI description's Template
  // variables section), so `{{x ?? "y"}}` agrees with JavaScript's `x ?? "y"`.
  for (let i = 0; i < args.length - 1; i++) if (args[i] !== undefined && args[i] !== null) return args[i];
  return args[args.length - 1];
});

// These builtins throw at render time when called without a block or with the wrong arity.
const BLOCK_HELPERS = new Set(['if', 'unless', 'each', 'with']);

const COMPILE_OPTIONS = {
  strict: false,
  // An unknown helper is a compile error here instead of a "Missing helper" throw at send time.
  knownHelpersOnly: true,
  // `log` would write template-controlled text to the worker's console; the *Missing hooks are not
  // meant to be called by name. Turned off, each of these names is a plain variable lookup again.
  knownHelpers: { [COALESCE]: true, log: false, helperMissing: false, blockHelperMissing: false },
};

/**
 * Compiled templates by source: the same template (a saved one, or the body every /v1/send of an
 * integration repeats) is compiled once per process instead of on every request, where parsing
 * and compiling cost more than the rest of the send. Bounded (templates up to 64 KB, 1,000 of
 * them); the oldest entry goes first.
 */
const compiled = new Map<string, CompiledTemplate>();
const COMPILED_KEEP = 1000;
const COMPILED_MAX_SOURCE = 64 * 1024;

/** Parses and compiles once; throws TemplateSyntaxError on bad syntax (the API turns it into a 422). */
export function compileTemplate(
  source: string,
  /** `escapeHtml` defaults to true (bodies); pass false for subject lines, which are not HTML. */
  opts: { escapeHtml?: boolean } = {},
): CompiledTemplate {
  const key = `${opts.escapeHtml === false ? 'text' : 'html'}:${source}`;
  let template = compiled.get(key);
  if (!template) {
    template = compileUncached(source, opts);
    if (source.length > COMPILED_MAX_SOURCE) return template;
    if (compiled.size >= COMPILED_KEEP) compiled.delete(compiled.keys().next().value!);
    compiled.set(key, template);
  }
  return template;
}

function compileUncached(
  source: string,
  /** `escapeHtml` defaults to true (bodies); pass false for subject lines, which are not HTML. */
  opts: { escapeHtml?: boolean } = {},
): CompiledTemplate {
  const spaced = spaceOutOperators(source);
  const position = (line: number, column0: number) => ({ line, column: originalColumn(spaced, line, column0) + 1 });

  let ast: hbs.AST.Program;
  try {
    // Without whitespace processing: env.compile applies it, and applying it twice strips too much.
    ast = env.parseWithoutProcessing(spaced.text);
  } catch (err) {
    throw toSyntaxError(err, position);
  }
  const fail = (node: Node, message: string): never => {
    const at = position(node.loc.start.line, node.loc.start.column);
    throw new TemplateSyntaxError(message, at.line, at.column);
  };
  rewriteProgram(ast, fail);

  // Handlebars warns never to compile an AST from untrusted input. This one is its own parser's output
  // of the user's text, with nodes only regrouped and `__coalesce` added, so it is as safe as the text.
  const template = env.compile(ast, { ...COMPILE_OPTIONS, noEscape: opts.escapeHtml === false });
  try {
    // Handlebars compiles on first call; do it now so its errors surface at save time.
    template({});
  } catch (err) {
    throw toSyntaxError(err, position);
  }
  return { render: (vars) => template(vars) };
}

/** Convenience for save-time validation: throws TemplateSyntaxError or returns. */
export function checkTemplate(source: string): void {
  compileTemplate(source);
}

/**
 * The variables a template sees: id, email, subscribed, locale, the three URLs, svc_id, svc_email,
 * `data`, and every data key at the top level (core fields win over data keys with the same name).
 * `extra` is per-send data, applied over the contact's data with the same rules as a stored patch
 * (one-shot `{ value, persistent: false }` values included), so a send renders what it would store.
 */
export function templateVariables(
  contact: { id: string; email: string; subscribed: boolean; data: Record<string, unknown> },
  urls: { unsubscribeUrl: string; subscribeUrl: string; manageUrl: string },
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  const patch = planDataPatch(extra);
  // Spreads, never `obj[key] = …`, so a key named "__proto__" stays an ordinary key.
  const data: Record<string, unknown> = { ...contact.data, ...patch.set, ...patch.transient };
  for (const key of [...patch.remove, ...RESERVED_DATA_KEYS]) delete data[key];
  return {
    ...data,
    id: contact.id,
    email: contact.email,
    subscribed: contact.subscribed,
    locale: data.locale ?? null,
    unsubscribeUrl: urls.unsubscribeUrl,
    subscribeUrl: urls.subscribeUrl,
    manageUrl: urls.manageUrl,
    svc_id: contact.id,
    svc_email: contact.email,
    data,
  };
}

// ---- `??` on the AST -------------------------------------------------------------------------------
//
// Handlebars' lexer reads `??` as an ordinary identifier when whitespace surrounds it, so
// `{{name ?? "x"}}` parses as a mustache with path `name` and params [`??`, "x"]. The rewrite below
// regroups every `a ?? b ?? c` run in a call into one `(__coalesce a b c)` operand. A run that swallows
// the callee becomes the call itself, which keeps `escaped` (and so `{{{…}}}`) as written.
// A run inside arguments binds tighter than the helper: `{{#if plan ?? "free"}}` is
// `{{#if (plan ?? "free")}}`.

function rewriteProgram(program: hbs.AST.Program, fail: (n: Node, m: string) => never): void {
  for (const s of program.body) {
    switch (s.type) {
      case 'MustacheStatement':
      case 'BlockStatement': {
        const call = s as hbs.AST.MustacheStatement | hbs.AST.BlockStatement;
        rewriteCall(call, fail);
        if (call.type === 'BlockStatement') {
          if (call.program) rewriteProgram(call.program, fail);
          if (call.inverse) rewriteProgram(call.inverse, fail);
        }
        break;
      }
      // Nothing is registered for these, so Handlebars would throw when the email is rendered.
      case 'PartialStatement':
      case 'PartialBlockStatement':
        fail(s, 'partials ({{> name}}) are not supported');
        break;
      case 'Decorator':
      case 'DecoratorBlock':
        fail(s, 'decorators ({{* name}}) are not supported');
        break;
    }
  }
}

function rewriteCall(call: Call, fail: (n: Node, m: string) => never): void {
  const seq: Expr[] = [call.path, ...call.params];
  if (seq.some(isOperator)) {
    const out: Expr[] = [];
    const built = new Set<Expr>();
    for (let i = 0; i < seq.length; i++) {
      const e = seq[i]!;
      if (!isOperator(e)) {
        out.push(e);
        continue;
      }
      const left = seq[i - 1];
      const right = seq[i + 1];
      if (!left || isOperator(left)) fail(e, '"??" needs a value on its left');
      if (!right || isOperator(right)) fail(e, '"??" needs a value on its right');
      const prev = out.pop()!;
      const chain = built.has(prev) ? (prev as SubExpr) : coalesceOf(prev);
      chain.params.push(right!);
      chain.loc = { ...chain.loc, end: right!.loc.end };
      built.add(chain);
      out.push(chain);
      i++;
    }
    const [head, ...rest] = out;
    if (head === call.path) {
      call.params = rest;
    } else {
      if (call.type === 'BlockStatement') {
        fail(call, 'a block can\'t be named by a "??" expression; write {{#with (a ?? b)}}…{{/with}}');
      }
      if (rest.length > 0 || call.hash) {
        fail(rest[0] ?? call.hash, 'unexpected value after a "??" expression; put the expression in parentheses');
      }
      const chain = head as SubExpr;
      call.path = chain.path;
      call.params = chain.params;
    }
  }

  const helper = calledHelper(call);
  if (helper && BLOCK_HELPERS.has(helper)) {
    if (call.type !== 'BlockStatement') fail(call, `"${helper}" only works as a block: {{#${helper} …}}…{{/${helper}}}`);
    if (call.params.length !== 1) fail(call, `{{#${helper}}} takes exactly one value`);
  }

  for (const p of call.params) rewriteExpr(p, fail);
  for (const pair of call.hash?.pairs ?? []) rewriteExpr(pair.value, fail);
}

function rewriteExpr(e: Expr, fail: (n: Node, m: string) => never): void {
  if (isOperator(e)) fail(e, '"??" needs a value on its left');
  if (e.type === 'SubExpression') rewriteCall(e as SubExpr, fail);
}

function isOperator(e: Node): boolean {
  if (e.type !== 'PathExpression') return false;
  const p = e as Path;
  // `[??]` (a key literally named "??") parses to the same path; only the bare token is 2 columns wide.
  return (
    p.original === '??' &&
    !p.data &&
    p.loc.start.line === p.loc.end.line &&
    p.loc.end.column - p.loc.start.column === 2
  );
}

function coalesceOf(first: Expr): SubExpr {
  const path: Path = { type: 'PathExpression', data: false, depth: 0, parts: [COALESCE], original: COALESCE, loc: first.loc };
  return { type: 'SubExpression', path, params: [first], hash: undefined as unknown as hbs.AST.Hash, loc: first.loc };
}

/** The helper Handlebars will invoke for this node, by its compiler's rules (classifySexpr, helperSexpr). */
function calledHelper(call: Call): string | undefined {
  const path = call.path as Partial<Path> & { original?: unknown };
  const name = path.parts ? path.parts[0] : String(path.original);
  const isCall = call.type === 'SubExpression' || call.params.length > 0 || !!call.hash;
  if (isCall) return name;
  const simple = !path.parts || (path.parts.length === 1 && !path.depth && !/^\.|this\b/.test(String(path.original)));
  return simple ? name : undefined;
}

// ---- Tokenising `??` without surrounding spaces --------------------------------------------------
//
// Handlebars' ID rule needs one of `= ~ } whitespace / . ) |` right after an identifier, so
// `name??"x"` does not lex at all and `name??` lexes as one identifier. This pass puts a space on each
// side of a bare `??` inside mustaches (never in text, comments, raw blocks, string literals or
// `[...]` segments) so the lexer yields the separate `??` token the AST rewrite works on. It only
// inserts spaces, which keeps line numbers; `originalColumn` undoes the column shift.

interface Spaced {
  text: string;
  /** Offsets in `text` of the spaces this pass inserted, ascending. */
  inserted: number[];
}

function spaceOutOperators(src: string): Spaced {
  if (!src.includes('??')) return { text: src, inserted: [] };
  let text = '';
  let i = 0;
  const inserted: number[] = [];
  const space = () => {
    inserted.push(text.length);
    text += ' ';
  };
  const copy = (to: number) => {
    text += src.slice(i, to);
    i = to;
  };
  const endOf = (re: RegExp, from: number) => {
    re.lastIndex = from;
    const m = re.exec(src);
    return m ? m.index + m[0].length : src.length;
  };

  while (i < src.length) {
    const open = src.indexOf('{{', i);
    if (open < 0) break;
    // `\{{` is literal text, `\\{{` is a backslash followed by a real mustache.
    if (src[open - 1] === '\\' && src[open - 2] !== '\\') {
      copy(open + 2);
      continue;
    }
    const comment = /^\{\{~?!(--)?/.exec(src.slice(open, open + 6));
    if (comment) {
      copy(comment[1] ? endOf(/--~?\}\}/g, open + comment[0].length) : endOf(/\}\}/g, open));
      continue;
    }
    copy(open + 2);
    // Inside a mustache until the closing `}}`.
    while (i < src.length && !(src[i] === '}' && src[i + 1] === '}')) {
      const c = src[i]!;
      if (c === '"' || c === "'") {
        copy(endOf(c === '"' ? /"(?:\\"|[^"])*"/y : /'(?:\\'|[^'])*'/y, i));
      } else if (c === '[') {
        copy(endOf(/\[(?:\\\]|[^\]])*\]/y, i));
      } else if (c === '?' && src[i + 1] === '?' && src[i - 1] !== '?' && src[i + 2] !== '?' && !/[./]/.test(src[i - 1] ?? '')) {
        if (!/\s/.test(src[i - 1]!)) space();
        copy(i + 2);
        if (!/\s/.test(src[i] ?? ' ')) space();
      } else {
        copy(i + 1);
      }
    }
    if (src.startsWith('{{{{', open)) {
      // A raw block's body is text, whatever it looks like.
      const close = src.indexOf('{{{{/', i);
      copy(close < 0 ? src.length : endOf(/\}\}\}\}/g, close));
    }
  }
  copy(src.length);
  return { text, inserted };
}

function originalColumn(spaced: Spaced, line: number, column0: number): number {
  if (spaced.inserted.length === 0) return column0;
  let lineStart = 0;
  for (let l = 1; l < line; l++) {
    const nl = spaced.text.indexOf('\n', lineStart);
    if (nl < 0) break;
    lineStart = nl + 1;
  }
  const offset = lineStart + column0;
  return column0 - spaced.inserted.filter((at) => at >= lineStart && at < offset).length;
}

// ---- Parse errors ----------------------------------------------------------------------------------

const TOKEN_NAMES: Record<string, string> = {
  EOF: 'end of template',
  INVALID: 'an unexpected character',
  CLOSE: '"}}"',
  CLOSE_UNESCAPED: '"}}}"',
  CLOSE_RAW_BLOCK: '"}}}}"',
  OPEN_SEXPR: '"("',
  CLOSE_SEXPR: '")"',
  ID: 'a name',
  STRING: 'a string',
  NUMBER: 'a number',
  BOOLEAN: 'true/false',
  UNDEFINED: 'undefined',
  NULL: 'null',
  DATA: '"@"',
  SEP: '"." or "/"',
  EQUALS: '"="',
  OPEN_BLOCK_PARAMS: '"as |"',
  CLOSE_BLOCK_PARAMS: '"|"',
  OPEN_ENDBLOCK: '"{{/"',
};

type Position = (line: number, column0: number) => { line: number; column: number };

function toSyntaxError(err: unknown, position: Position): TemplateSyntaxError {
  if (err instanceof TemplateSyntaxError) return err;
  const e = err as { message?: unknown; lineNumber?: unknown; column?: unknown };
  const message = String(e.message ?? err);

  // A Handlebars Exception (mismatched block close, unknown helper) knows its node's location.
  if (typeof e.lineNumber === 'number' && typeof e.column === 'number') {
    const at = position(e.lineNumber, e.column);
    const text = message
      .replace(/ - \d+:\d+$/, '')
      .replace(/^You specified knownHelpersOnly, but used the unknown helper (.*)$/, 'unknown helper "$1"');
    return new TemplateSyntaxError(text, at.line, at.column);
  }

  // The jison parser throws a bare Error; the offending token's location is left on its lexer,
  // which is shared but only used synchronously, so it still describes this parse.
  type Lexer = { yylloc?: { first_line?: number; first_column?: number } };
  const loc = (env as unknown as { Parser?: { lexer?: Lexer } }).Parser?.lexer?.yylloc;
  const lineInMessage = /on line (\d+)/.exec(message)?.[1];
  const line = lineInMessage === undefined ? undefined : Number(lineInMessage);
  const at =
    line !== undefined && loc?.first_line === line && loc.first_column !== undefined
      ? position(line, loc.first_column)
      : { line, column: undefined };

  const m = /Expecting (.*), got '(\w+)'/.exec(message);
  if (!m) return new TemplateSyntaxError(message.split('\n')[0]!.replace(/ on line \d+:?$/, ''), at.line, at.column);
  const expected = [...m[1]!.matchAll(/'(\w+)'/g)].map((t) => t[1]!);
  const got = m[2]!;
  let summary: string;
  if (got === 'EOF' && expected.includes('OPEN_ENDBLOCK')) summary = 'a block is never closed: {{#…}} without its {{/…}}';
  else if (got === 'EOF') summary = 'the template ends inside {{…}}';
  else {
    const wanted = [...new Set(expected.map((t) => TOKEN_NAMES[t]).filter((t): t is string => !!t))];
    summary = `${wanted.length ? `expected ${wanted.join(' or ')}, ` : ''}found ${TOKEN_NAMES[got] ?? got}`;
  }
  return new TemplateSyntaxError(summary, at.line, at.column);
}
