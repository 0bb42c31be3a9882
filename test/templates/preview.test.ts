import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { simpleParser } from 'mailparser';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { queryOne } from '../../db/sql';
import { templateVariableNames } from '../../db/templates/variables';
import { bearer, startTestEnv, type TestEnv } from '../helpers/env';
import { waitUntil } from '../helpers/wait';

/**
 * What the template editor calls: POST /templates/preview (the sender's rendering, nothing written)
 * and POST /templates/:id/test (the saved template through /v1/send's write path). Outbox mode, so
 * a registered domain may send and the test copy lands in DATA_DIR/outbox.
 */

let env: TestEnv;
let project: ProjectWithKeys;
let other: ProjectWithKeys;
let dataDir: string;
const DOMAIN = 'preview-acme.test';

const post = (p: ProjectWithKeys, url: string, body: object) => env.http().post(url).set(bearer(p.secretKey)).send(body);
const preview = (body: object, p = project) => post(p, '/templates/preview', body);

async function contact(email: string, data: Record<string, unknown>, p = project): Promise<string> {
  const res = await post(p, '/contacts', { email, data, subscribed: true });
  expect([200, 201]).toContain(res.status);
  return res.body.id as string;
}

beforeAll(async () => {
  dataDir = mkdtempSync(path.join(os.tmpdir(), 'tidings-template-preview-'));
  env = await startTestEnv({ DATA_DIR: dataDir });
  await env.startWorker();
  [project, other] = await Promise.all([env.project('preview A'), env.project('preview B')]);
  expect((await post(project, '/domains', { domain: DOMAIN })).status).toBe(201);
});

afterAll(() => env?.close());

describe('POST /templates/preview', () => {
  const subject = 'Hi {{name ?? "friend"}}';
  const body = '<p>Plan: {{plan}}. City: {{data.address.city}}. {{#each items}}<i>{{sku}}</i>{{/each}}{{#if vip}}VIP{{/if}}</p>';

  test("renders a contact's data and lists the variables, with which the contact has", async () => {
    const id = await contact('ada@example.com', { name: 'Ada', plan: 'pro', address: { city: 'London' }, items: [{ sku: 'A1' }, { sku: 'B2' }] });
    const res = await preview({ subject, body, contactId: id });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      subject: 'Hi Ada',
      html: '<p>Plan: pro. City: London. <i>A1</i><i>B2</i></p>',
      contact: { id, email: 'ada@example.com' },
      variables: [
        { name: 'name', present: true },
        { name: 'plan', present: true },
        { name: 'data.address.city', present: true },
        { name: 'items', present: true },
        { name: 'vip', present: false },
      ],
    });
  });

  test('without a contact the stand-in has only the built-in variables; `data` goes over them and is not stored', async () => {
    const alone = await preview({ subject: 'Hi {{name ?? "friend"}} <{{email}}>', body: '<p>{{plan}}</p>' });
    expect(alone.status).toBe(200);
    expect(alone.body).toMatchObject({
      subject: 'Hi friend <someone@example.com>',
      html: '<p></p>',
      contact: null,
      variables: [
        { name: 'name', present: false },
        { name: 'email', present: true },
        { name: 'plan', present: false },
      ],
    });

    const id = await contact('bo@example.com', { name: 'Bo' });
    const over = await preview({ subject, body: '<p>{{plan}}</p>', contactId: id, data: { name: 'Robert', plan: 'team' } });
    expect(over.body).toMatchObject({ subject: 'Hi Robert', html: '<p>team</p>' });
    expect((await env.http().get(`/contacts/${id}`).set(bearer(project.secretKey))).body.data).toEqual({ name: 'Bo' });
  });

  test('escapes HTML in values, adds the unsubscribe footer for MARKETING, and never tracks', async () => {
    const id = await contact('eve@example.com', { name: '<b>Eve</b>' });
    const transactional = await preview({ subject: '{{name}}', body: '<p>{{name}} <a href="https://example.com/x">x</a></p>', contactId: id });
    expect(transactional.body.subject).toBe('<b>Eve</b>');
    expect(transactional.body.html).toBe('<p>&lt;b&gt;Eve&lt;/b&gt; <a href="https://example.com/x">x</a></p>');

    const marketing = await preview({ subject: 'News', body: '<p><a href="https://example.com/x">x</a></p>', contactId: id, type: 'MARKETING' });
    expect(marketing.status).toBe(200);
    expect(marketing.body.html).toContain('https://example.com/x');
    expect(marketing.body.html).toMatch(/unsubscribe/i);
    expect(marketing.body.html).not.toMatch(/\/t\/(o|c)\//);
  });

  test('refuses a syntax error naming the field, an unknown contact and bad input, in the error envelope', async () => {
    const syntax = await preview({ subject: 'Hi', body: '<p>{{#if x}}open</p>' });
    expect(syntax.status).toBe(422);
    expect(syntax.body.error.errors).toEqual([expect.objectContaining({ field: 'body', code: 'template_syntax' })]);
    const subjectSyntax = await preview({ subject: 'Hi {{', body: '<p></p>' });
    expect(subjectSyntax.body.error.errors).toEqual([expect.objectContaining({ field: 'subject' })]);

    expect((await preview({ subject: 'Hi', body: '<p></p>', contactId: 'cnt_missing' })).status).toBe(404);
    // Another project's contact is not this project's.
    const theirs = await contact('ada@example.com', { name: 'Theirs' }, other);
    expect((await preview({ subject: 'Hi', body: '<p></p>', contactId: theirs })).status).toBe(404);

    const bad = await preview({ subject: 'Two\nlines', body: 3 });
    expect(bad.status).toBe(422);
    expect(bad.body.error.errors.map((e: { field: string }) => e.field).sort()).toEqual(['body', 'subject']);
    // An empty template, as an editor has before anything is typed, renders empty.
    expect((await preview({ subject: '', body: '' })).body).toMatchObject({ subject: '', html: '', variables: [] });
  });
});

describe('POST /templates/:id/test', () => {
  test("sends the saved template through /v1/send's path, rendered for the address's contact, untracked", async () => {
    await contact('grace@example.com', { name: 'Grace' });
    const created = await post(project, '/templates', {
      name: 'Welcome',
      subject: 'Welcome {{name ?? "friend"}}',
      body: '<p>Hello {{name}} <a href="https://example.com/start">start</a></p>',
      type: 'MARKETING',
      from: `hello@${DOMAIN}`,
    });
    expect(created.status).toBe(201);
    const res = await post(project, `/templates/${created.body.id}/test`, { email: 'Grace@Example.com' });
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ emailId: expect.any(String), email: 'grace@example.com', status: 'QUEUED', outbox: expect.stringMatching(/\/outbox$/) });

    const row = await queryOne<{ template_id: string; source: string; subject: string }>(
      env.orm.em.fork(),
      'select template_id, source, subject from emails where id = ?',
      [res.body.emailId],
    );
    expect(row).toEqual({ template_id: created.body.id, source: 'transactional', subject: 'Welcome Grace' });

    const dir = path.join(dataDir, 'outbox');
    const file = await waitUntil(() => readdirSync(dir).find((f) => f.includes(res.body.emailId)), { what: 'the test copy in the outbox' });
    const mail = await simpleParser(readFileSync(path.join(dir, file)));
    expect(mail.subject).toBe('Welcome Grace');
    expect(mail.to && !Array.isArray(mail.to) ? mail.to.text : '').toBe('grace@example.com');
    expect(mail.html).toContain('href="https://example.com/start"');
  });

  test('refuses a template without a sender, an unknown template and a bad address', async () => {
    const created = await post(project, '/templates', { name: 'No sender', subject: 'Hi', body: '<p>Hi</p>' });
    const noFrom = await post(project, `/templates/${created.body.id}/test`, { email: 'grace@example.com' });
    expect(noFrom.status).toBe(422);
    expect(noFrom.body.error.errors).toEqual([expect.objectContaining({ field: 'from' })]);
    expect((await post(project, '/templates/tpl_missing/test', { email: 'grace@example.com' })).status).toBe(404);
    expect((await post(other, `/templates/${created.body.id}/test`, { email: 'grace@example.com' })).status).toBe(404);
    const bad = await post(project, `/templates/${created.body.id}/test`, { email: 'not an address' });
    expect(bad.status).toBe(422);
    expect(bad.body.error.errors).toEqual([expect.objectContaining({ field: 'email' })]);
  });
});

describe('templateVariableNames', () => {
  test('reads top-level names, `??` operands and helper arguments; not each/with bodies, @data or this', () => {
    expect(templateVariableNames('{{a??"x"}} {{b ?? c ?? "y"}} {{{raw}}} {{#unless d}}{{e}}{{else}}{{f}}{{/unless}}')).toEqual(['a', 'b', 'c', 'raw', 'd', 'e', 'f']);
    expect(templateVariableNames('{{#each list}}{{item}} {{@index}} {{this}} {{../g}}{{else}}{{h}}{{/each}}{{#with obj}}{{inner}}{{/with}}')).toEqual(['list', 'h', 'obj']);
    expect(templateVariableNames('{{lookup data "k"}} {{#if (lookup m "n")}}{{/if}}', 'Subject {{a}} {{z}}')).toEqual(['data', 'm', 'a', 'z']);
    expect(templateVariableNames('{{#if}')).toEqual([]);
  });
});
