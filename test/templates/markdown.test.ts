import { simpleParser } from 'mailparser';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { signContactToken } from '../../mail/links';
import { markdownToHtmlTemplate } from '../../mail/markdown';
import { bearer, type TestEnv } from '../helpers/env';
import { type SendingEnv, startSendingEnv, waitUntil } from '../helpers/sending';
import type { SmtpSink } from '../helpers/smtp';

describe('markdownToHtmlTemplate', () => {
  test('Markdown becomes HTML; every Handlebars tag comes through byte for byte', () => {
    expect(markdownToHtmlTemplate('# hi')).toBe('<h1>hi</h1>\n');
    expect(markdownToHtmlTemplate('Hello {{name ?? "you & yours"}}, *welcome*')).toBe('<p>Hello {{name ?? "you & yours"}}, <em>welcome</em></p>\n');
    // markdown-it alone would write href="%7B%7BunsubscribeUrl%7D%7D".
    expect(markdownToHtmlTemplate('[Unsubscribe]({{unsubscribeUrl}})')).toBe('<p><a href="{{unsubscribeUrl}}">Unsubscribe</a></p>\n');
    expect(markdownToHtmlTemplate('{{{raw}}} {{!-- a }} comment --}} {{! short }} {{a [b}}c]}} {{x "}}"}}')).toBe(
      '<p>{{{raw}}} {{!-- a }} comment --}} {{! short }} {{a [b}}c]}} {{x "}}"}}</p>\n',
    );
    // `\{{` is Handlebars' escape (a literal "{{"): markdown-it must not take the backslash.
    expect(markdownToHtmlTemplate('\\{{literal}} and \\\\{{real}}')).toBe('<p>\\{{literal}} and \\\\{{real}}</p>\n');
    expect(markdownToHtmlTemplate('{{{{raw}}}} *{{x}}* {{{{/raw}}}}')).toBe('<p>{{{{raw}}}} *{{x}}* {{{{/raw}}}}</p>\n');
  });

  test('raw HTML passes, bare URLs become links, quotes stay straight, block tags keep their place', () => {
    expect(markdownToHtmlTemplate('<div class="box">{{x}}</div>')).toBe('<div class="box">{{x}}</div>');
    expect(markdownToHtmlTemplate('See https://example.com/{{id}} -- "quoted"')).toBe(
      '<p>See <a href="https://example.com/{{id}}">https://example.com/{{id}}</a> -- &quot;quoted&quot;</p>\n',
    );
    expect(markdownToHtmlTemplate('{{#if vip}}\n**VIP**\n{{/if}}')).toBe('<p>{{#if vip}}\n<strong>VIP</strong>\n{{/if}}</p>\n');
  });
});

describe('type on /v1/send, delivered', () => {
  let sending: SendingEnv;
  let env: TestEnv;
  let smtp: SmtpSink;
  let project: ProjectWithKeys;
  const DOMAIN = 'acme-markdown.test';

  const send = (body: Record<string, unknown>) => env.http().post('/v1/send').set(bearer(project.secretKey)).send(body);
  /** Sends to `to` and returns the HTML part of what arrived. */
  async function delivered(to: string, body: Record<string, unknown>): Promise<{ html: string; contactId: string }> {
    const res = await send({ to, from: `hello@${DOMAIN}`, subject: 'Hi', ...body });
    expect(res.status).toBe(200);
    const message = await waitUntil(async () => smtp.messages.find((m) => m.envelope.to.includes(to)));
    return { html: String((await simpleParser(message.raw)).html), contactId: res.body.data.emails[0].contact.id };
  }

  beforeAll(async () => {
    sending = await startSendingEnv();
    ({ env, smtp } = sending);
    project = await env.project('markdown project');
    await sending.verifiedDomain(project, DOMAIN);
  });

  afterAll(() => sending.close());

  test('markdown is rendered; html (the default) is sent as written', async () => {
    expect((await delivered('md@example.org', { body: '# hi', type: 'markdown' })).html).toContain('<h1>hi</h1>');
    expect((await delivered('html@example.org', { body: '# hi', type: 'html' })).html.trim()).toBe('# hi');
    expect((await delivered('default@example.org', { body: '# hi' })).html.trim()).toBe('# hi');
  });

  test('variables are filled in after Markdown: their values are text, escaped, never markup', async () => {
    const name = '*Ada* <b>bold</b> [x](https://evil.example) `code`';
    const { html, contactId } = await delivered('vars@example.org', {
      type: 'markdown',
      body: '## Hello {{name}}\n\nPlan: **{{plan ?? "free"}}**\n\n[Unsubscribe]({{unsubscribeUrl}})',
      data: { name },
    });
    expect(html).toContain('<h2>Hello *Ada* &lt;b&gt;bold&lt;/b&gt; [x](https://evil.example) &#x60;code&#x60;</h2>');
    expect(html).not.toMatch(/<b>|<em>|<code>|evil\.example"/);
    expect(html).toContain('Plan: <strong>free</strong>');
    const unsubscribeUrl = `${env.deps.config.publicUrl}/unsubscribe/${signContactToken(env.deps.linkSecret, contactId)}`;
    expect(html).toContain(`<a href="${unsubscribeUrl}">Unsubscribe</a>`);
  });

  test("a template's body is rendered as Markdown when the send says so", async () => {
    const template = await env
      .http()
      .post('/templates')
      .set(bearer(project.secretKey))
      .send({ name: 'Md', subject: 'Md', body: 'Dear **{{email}}**', from: `hello@${DOMAIN}` });
    expect(template.status).toBe(201);
    const res = await send({ to: 'tpl-md@example.org', template: template.body.id, type: 'markdown' });
    expect(res.status).toBe(200);
    const message = await waitUntil(async () => smtp.messages.find((m) => m.envelope.to.includes('tpl-md@example.org')));
    expect(String((await simpleParser(message.raw)).html)).toContain('<p>Dear <strong>tpl-md@example.org</strong></p>');
  });

  test('another type is a 422 naming the field; a syntax error points into the Markdown as written', async () => {
    const base = { to: 'x@example.org', from: `hello@${DOMAIN}`, subject: 'S', body: 'B' };
    const rtf = await send({ ...base, type: 'rtf' });
    expect(rtf.status).toBe(422);
    expect(rtf.body.error.code).toBe('VALIDATION_ERROR');
    expect(rtf.body.error.errors).toEqual([expect.objectContaining({ field: 'type', message: 'Must be "html" or "markdown"' })]);

    const bad = await send({ ...base, type: 'markdown', body: '# Title\n\n> Hi {{name ??}}' });
    expect(bad.status).toBe(422);
    expect(bad.body.error.errors).toEqual([
      expect.objectContaining({ field: 'body', code: 'template_syntax', message: expect.stringContaining('(line 3, column 13)') }),
    ]);
  });
});
