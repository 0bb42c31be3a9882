import Handlebars from 'handlebars';
import { checkTemplate, compileTemplate, templateVariables, TemplateSyntaxError } from '../../mail/render';

const render = (src: string, vars: Record<string, unknown> = {}, escapeHtml?: boolean) =>
  compileTemplate(src, escapeHtml === undefined ? undefined : { escapeHtml }).render(vars);

function syntaxError(src: string): TemplateSyntaxError {
  try {
    compileTemplate(src);
  } catch (err) {
    expect(err).toBeInstanceOf(TemplateSyntaxError);
    return err as TemplateSyntaxError;
  }
  throw new Error(`expected a TemplateSyntaxError for ${JSON.stringify(src)}`);
}

describe('Handlebars semantics', () => {
  test('escapes {{…}} in bodies, leaves {{{…}}} raw', () => {
    expect(render('<p>{{name}}</p>{{{html}}}', { name: '<b>Tom & "Jerry"</b>', html: '<i>hi</i>' })).toBe(
      '<p>&lt;b&gt;Tom &amp; &quot;Jerry&quot;&lt;/b&gt;</p><i>hi</i>',
    );
  });

  test('if / else / unless / each / with', () => {
    const src = '{{#if vip}}VIP{{else}}regular{{/if}} {{#unless vip}}!{{/unless}}{{#each items}}[{{@index}}:{{this}}]{{/each}} {{#with company}}{{name}}{{/with}}';
    expect(render(src, { vip: true, items: ['a', 'b'], company: { name: 'Acme' } })).toBe('VIP [0:a][1:b] Acme');
    expect(render(src, { vip: false })).toBe('regular ! ');
  });

  test('dotted paths reach nested data, both under data. and at the top level', () => {
    const vars = templateVariables(
      { id: 'c1', email: 'a@x.io', subscribed: true, data: { company: { name: 'Acme', address: { city: 'Oslo' } } } },
      { unsubscribeUrl: 'u', subscribeUrl: 's', manageUrl: 'm' },
    );
    expect(render('{{data.company.name}}|{{company.name}}|{{company.address.city}}', vars)).toBe('Acme|Acme|Oslo');
  });

  test('unknown and missing variables render empty and never throw', () => {
    const t = compileTemplate(
      '[{{nope}}][{{a.b.c}}][{{data.x.y}}][{{#each missing}}x{{/each}}][{{#with missing}}x{{/with}}][{{lookup missing "k"}}][{{#if a.b}}x{{/if}}][{{#nope}}x{{/nope}}]',
    );
    expect(t.render({})).toBe('[][][][][][][][]');
    expect(t.render({ a: null, data: null })).toBe('[][][][][][][][]');
  });

  test('prototype properties are not reachable', () => {
    const spy = jest.spyOn(console, 'error').mockImplementation(() => {});
    try {
      expect(render('[{{constructor}}][{{data.constructor.name}}][{{lookup this "__proto__"}}]', { data: {} })).toBe('[][][]');
    } finally {
      spy.mockRestore();
    }
  });

  test('whitespace control and standalone lines match plain Handlebars', () => {
    const src = 'a\n{{#if x}}\n\n  b {{~ y ~}} c\n{{/if}}\nd';
    const vars = { x: true, y: 'Y' };
    expect(render(src, vars)).toBe(Handlebars.compile(src)(vars));
  });

  test('uses a private environment: nothing leaks into the global Handlebars', () => {
    compileTemplate('{{a ?? "b"}}');
    expect(Handlebars.helpers['__coalesce']).toBeUndefined();
  });

  test('a compiled template renders many times with different variables', () => {
    const t = compileTemplate('Hi {{name ?? "there"}}');
    expect(t.render({ name: 'Ann' })).toBe('Hi Ann');
    expect(t.render({})).toBe('Hi there');
    expect(t.render({ name: 'Bo' })).toBe('Hi Bo');
  });
});

describe('?? fallback', () => {
  test('renders the value, or the fallback without quotes when missing or null', () => {
    const t = compileTemplate('Hi {{name ?? "friend"}}!');
    expect(t.render({ name: 'Ann' })).toBe('Hi Ann!');
    expect(t.render({})).toBe('Hi friend!');
    expect(t.render({ name: null })).toBe('Hi friend!');
    expect(t.render({ name: undefined })).toBe('Hi friend!');
  });

  test('0, false and "" are values, not missing', () => {
    const t = compileTemplate('[{{v ?? "fb"}}]');
    expect(t.render({ v: 0 })).toBe('[0]');
    expect(t.render({ v: false })).toBe('[false]');
    expect(t.render({ v: '' })).toBe('[]');
  });

  test('chains take the first value that is not missing or null', () => {
    const t = compileTemplate('{{a ?? b ?? "c"}}');
    expect(t.render({})).toBe('c');
    expect(t.render({ a: null, b: 'B' })).toBe('B');
    expect(t.render({ a: 'A', b: 'B' })).toBe('A');
    expect(t.render({ b: 0 })).toBe('0');
    expect(render('{{a ?? b}}', {})).toBe('');
  });

  test('number, single-quoted, boolean and path fallbacks', () => {
    expect(render('{{count ?? 0}}|{{x ?? \'y\'}}|{{f ?? true}}|{{n ?? -1.5}}|{{a ?? data.b}}', { data: { b: 'DB' } })).toBe('0|y|true|-1.5|DB');
  });

  test('whitespace variants', () => {
    for (const src of ['{{name??"x"}}', '{{ name??"x" }}', '{{name ??"x"}}', '{{name?? "x"}}', '{{  name  ??  "x"  }}', '{{name\n??\n"x"}}', "{{name??'x'}}", '{{count??0}}']) {
      expect(render(src)).toBe(src.includes('count') ? '0' : 'x');
      expect(render(src, { name: 'N', count: 3 })).toBe(src.includes('count') ? '3' : 'N');
    }
    expect(render('{{a??b??"c"}}', { b: 'B' })).toBe('B');
    expect(render('{{~ name ?? "x" ~}}')).toBe('x');
  });

  test('fallbacks are HTML-escaped in {{…}} and raw in {{{…}}}', () => {
    expect(render('{{html ?? "<b>x</b>"}}')).toBe('&lt;b&gt;x&lt;/b&gt;');
    expect(render('{{{html ?? "<b>x</b>"}}}')).toBe('<b>x</b>');
    expect(render('{{{html ?? "<b>x</b>"}}}', { html: '<i>y</i>' })).toBe('<i>y</i>');
    expect(render('{{html ?? "x"}}', { html: '<i>y</i>' })).toBe('&lt;i&gt;y&lt;/i&gt;');
  });

  test('inside subexpressions', () => {
    expect(render('{{lookup data (key ?? "a")}}', { data: { a: 'A', b: 'B' } })).toBe('A');
    expect(render('{{lookup data (key ?? "a")}}', { key: 'b', data: { a: 'A', b: 'B' } })).toBe('B');
    expect(render('{{#with (name ?? "friend")}}Hi {{this}}{{/with}}')).toBe('Hi friend');
    expect(render('{{#if (plan ?? false)}}paid{{else}}free{{/if}}')).toBe('free');
    expect(render('{{lookup (a ?? b) (k ?? "x")}}', { b: { x: 'BX' } })).toBe('BX');
  });

  test('as helper arguments: ?? groups its operands into one argument', () => {
    const t = compileTemplate('{{#if plan ?? "free"}}plan: {{plan ?? "free"}}{{else}}none{{/if}}');
    expect(t.render({})).toBe('plan: free');
    expect(t.render({ plan: 'pro' })).toBe('plan: pro');
    expect(t.render({ plan: false })).toBe('none');
    expect(render('{{lookup data key ?? "a"}}', { data: { a: 'A' } })).toBe('A');
    expect(render('{{#each items ?? fallbackItems}}{{this}}{{/each}}', { fallbackItems: [1, 2] })).toBe('12');
    expect(render('{{#if a}}A{{else if b ?? c}}BC{{else}}none{{/if}}', { c: 1 })).toBe('BC');
  });

  test('inside blocks, with block params and @data', () => {
    const vars = { items: [{ name: 'a' }, {}] };
    expect(render('{{#each items}}{{name ?? "anon"}}{{/each}}', vars)).toBe('aanon');
    expect(render('{{#each items as |item|}}{{item.name ?? @index}}{{/each}}', vars)).toBe('a1');
    expect(render('{{#with company}}{{name ?? @root.fallback}}{{/with}}', { company: {}, fallback: 'F' })).toBe('F');
  });

  test('?? in text, comments, string literals, [segments] and raw blocks is left alone', () => {
    expect(render('Who?? {{a ?? "x"}} ??')).toBe('Who?? x ??');
    expect(render('{{!-- {{a??"b"}} --}}{{! a??b }}ok')).toBe('ok');
    expect(render('{{lookup this "a??b"}}|{{lookup this \'c ?? d\'}}', { 'a??b': 1, 'c ?? d': 2 })).toBe('1|2');
    expect(render('{{[??]}}|{{a ?? [??]}}|{{[x??y]}}', { '??': 'Q', 'x??y': 'R' })).toBe('Q|Q|R');
    expect(render('\\{{a??"b"}}|{{a??"b"}}')).toBe('{{a??"b"}}|b');
    expect(render('{{{{if x}}}}{{a??"b"}}{{{{/if}}}}', { x: 1 })).toBe('{{a??"b"}}');
  });

  test('a name ending in "?" still works', () => {
    expect(render('{{ready? ?? "no"}}', { 'ready?': 'yes' })).toBe('yes');
    expect(render('{{ready? ?? "no"}}')).toBe('no');
  });
});

describe('syntax errors', () => {
  test.each([
    ['{{#if x}}no close', /never closed/],
    ['{{ name ', /ends inside/],
    ['{{name ?? }}', /"\?\?" needs a value on its right/],
    ['{{name ??}}', /"\?\?" needs a value on its right/],
    ['{{?? "x"}}', /"\?\?" needs a value on its left/],
    ['{{a ?? ?? "x"}}', /"\?\?" needs a value on its right/],
    ['{{lookup data (?? "x")}}', /"\?\?" needs a value on its left/],
    ['{{a ?? b c}}', /after a "\?\?" expression/],
    ['{{a ?? b k=1}}', /after a "\?\?" expression/],
    ['{{#a ?? b}}x{{/a}}', /can't be named by a "\?\?"/],
    ['{{#if x}}{{/each}}', /if doesn't match each/],
    ['{{name )}}', /found "\)"/],
    ['{{unknownHelper x}}', /unknown helper "unknownHelper"/],
    ['{{uppercase (name ?? "friend")}}', /unknown helper "uppercase"/],
    ['{{log "x"}}', /unknown helper "log"/],
    ['{{if x}}', /only works as a block/],
    ['{{lookup (each x) "k"}}', /only works as a block/],
    ['{{#if}}x{{/if}}', /exactly one value/],
    ['{{#each}}x{{/each}}', /exactly one value/],
    ['{{#with a b}}x{{/with}}', /exactly one value/],
    ['{{> footer}}', /partials/],
    ['{{#> layout}}x{{/layout}}', /partials/],
    ['{{* deco}}', /decorators/],
  ])('%s', (src, message) => {
    expect(syntaxError(src).message).toMatch(message);
  });

  test('errors carry 1-based line and column of the source as written', () => {
    expect(syntaxError('{{name ?? }}')).toMatchObject({ line: 1, column: 8 });
    expect(syntaxError('{{?? "x"}}')).toMatchObject({ line: 1, column: 3 });
    // Columns are unaffected by the spaces inserted around `??`.
    expect(syntaxError('<p>\n {{a??"x"}} {{b??}}</p>')).toMatchObject({ line: 2, column: 16 });
    expect(syntaxError('{{a??b??c d}}')).toMatchObject({ line: 1, column: 11 });
    expect(syntaxError('ab\ncd {{name )}}')).toMatchObject({ line: 2, column: 11 });
    expect(syntaxError('x\n  {{#if x}}{{/each}}')).toMatchObject({ line: 2, column: 6 });
    expect(syntaxError('x\n\n{{foo bar}}')).toMatchObject({ line: 3, column: 1 });
    const e = syntaxError('{{#if x}}');
    expect(e.line).toBe(1);
    expect(e.message).toMatch(/\(line 1, column \d+\)$/);
    expect(e).toBeInstanceOf(Error);
    expect(e.name).toBe('TemplateSyntaxError');
  });

  test('checkTemplate returns nothing for a good template and throws for a bad one', () => {
    expect(checkTemplate('Hi {{name ?? "there"}}, {{#if vip}}VIP{{/if}}')).toBeUndefined();
    expect(() => checkTemplate('{{#if vip}}')).toThrow(TemplateSyntaxError);
  });
});

describe('subject lines (escapeHtml: false)', () => {
  test('nothing is HTML-escaped', () => {
    expect(render('{{a}} & {{b ?? "Tom & Jerry"}}', { a: 'R&D <team>' }, false)).toBe('R&D <team> & Tom & Jerry');
    expect(render('{{a}} & {{b ?? "Tom & Jerry"}}', { a: 'R&D <team>' }, true)).toBe('R&amp;D &lt;team&gt; & Tom &amp; Jerry');
  });
});

describe('templateVariables', () => {
  const contact = { id: 'c_1', email: 'ann@x.io', subscribed: true, data: { firstName: 'Ann', plan: 'pro', locale: 'nb', code: 'old' } };
  const urls = { unsubscribeUrl: 'https://t.io/u?a=1&b=2', subscribeUrl: 'https://t.io/s', manageUrl: 'https://t.io/m' };

  test('core fields, URLs, aliases, data and every data key at the top level', () => {
    expect(templateVariables(contact, urls)).toEqual({
      firstName: 'Ann',
      plan: 'pro',
      locale: 'nb',
      code: 'old',
      id: 'c_1',
      email: 'ann@x.io',
      subscribed: true,
      ...urls,
      svc_id: 'c_1',
      svc_email: 'ann@x.io',
      data: { firstName: 'Ann', plan: 'pro', locale: 'nb', code: 'old' },
    });
    expect(templateVariables({ ...contact, data: {} }, urls).locale).toBeNull();
  });

  test('core fields win over data keys of the same name', () => {
    const v = templateVariables({ ...contact, data: { email: 'spoof@x.io', id: 'x', subscribed: false, data: 'd', unsubscribeUrl: 'evil' } }, urls);
    expect(v).toMatchObject({ email: 'ann@x.io', id: 'c_1', subscribed: true, unsubscribeUrl: urls.unsubscribeUrl });
    expect(v.data).toEqual({ data: 'd' });
  });

  test('per-send data is merged over data keys, at the top level and under data', () => {
    const v = templateVariables(contact, urls, { code: { value: 'X9', persistent: false }, plan: 'team', extra: 1, email: 'no@x.io' });
    expect(v).toMatchObject({ code: 'X9', plan: 'team', extra: 1, email: 'ann@x.io' });
    expect(v.data).toEqual({ firstName: 'Ann', plan: 'team', locale: 'nb', code: 'X9', extra: 1 });
  });

  test('per-send null removes a key; per-send "" keeps the existing value', () => {
    const v = templateVariables(contact, urls, { firstName: null, plan: '' });
    expect(v.firstName).toBeUndefined();
    expect(v.plan).toBe('pro');
    expect(render('{{firstName ?? "there"}} / {{plan}}', v)).toBe('there / pro');
  });

  test('a data key named __proto__ stays an ordinary key', () => {
    const data = JSON.parse('{"__proto__": {"polluted": true}, "a": 1}') as Record<string, unknown>;
    const v = templateVariables({ ...contact, data }, urls, JSON.parse('{"__proto__": {"polluted2": true}}') as Record<string, unknown>);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.getPrototypeOf(v)).toBe(Object.prototype);
    expect(Object.getPrototypeOf(v.data)).toBe(Object.prototype);
    expect(v.a).toBe(1);
  });

  test('end to end with a template', () => {
    const vars = templateVariables(contact, urls, { code: { value: '<123>', persistent: false } });
    const body = compileTemplate('Hi {{firstName ?? "there"}}, code {{code}} ({{data.code}}) <a href="{{unsubscribeUrl}}">unsubscribe</a> {{svc_email}}');
    expect(body.render(vars)).toBe(
      'Hi Ann, code &lt;123&gt; (&lt;123&gt;) <a href="https://t.io/u?a&#x3D;1&amp;b&#x3D;2">unsubscribe</a> ann@x.io',
    );
    expect(compileTemplate('{{firstName ?? "Friend"}}, your {{plan}} plan', { escapeHtml: false }).render(vars)).toBe('Ann, your pro plan');
  });
});
