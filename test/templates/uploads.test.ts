import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { MAX_IMAGE_BYTES } from '../../db/templates/uploads';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { query } from '../../db/sql';
import { addTestMember, asMember, createTestUser } from '../helpers/accounts';
import { bearer, startTestEnv, type TestEnv } from '../helpers/env';
import { gif, jpeg, png, webp } from '../helpers/images';

/** POST /uploads/image on local disk, and the public URL that serves what was stored. */

let env: TestEnv;
let project: ProjectWithKeys;
let dataDir: string;
const PUBLIC_URL = 'http://localhost:3000';

beforeAll(async () => {
  dataDir = mkdtempSync(path.join(os.tmpdir(), 'tidings-uploads-'));
  env = await startTestEnv({ DATA_DIR: dataDir, PUBLIC_URL });
  project = await env.project('uploads');
});
afterAll(async () => {
  await env.close();
  rmSync(dataDir, { recursive: true, force: true });
});

const upload = (bytes: Buffer, filename: string, contentType: string, field = 'file', p = project) =>
  env.http().post('/uploads/image').set(bearer(p.secretKey)).attach(field, bytes, { filename, contentType });

/** Fetches a returned URL from the app itself, as binary. */
const fetchUrl = (url: string) => env.http().get(new URL(url).pathname).buffer(true).responseType('blob');

const uploadRows = (projectId: string) =>
  query<{ id: string; storage_key: string; content_type: string; size_bytes: number }>(
    env.orm.em.fork(),
    'select id, storage_key, content_type, size_bytes from uploads where project_id = ? order by id',
    [projectId],
  );

const storedFiles = (projectId: string) => {
  const dir = path.join(dataDir, 'uploads', projectId);
  return existsSync(dir) ? readdirSync(dir) : [];
};

describe.each([
  ['PNG', png(), 'image/png', 'png'],
  ['JPEG', jpeg(), 'image/jpeg', 'jpg'],
  ['GIF', gif(), 'image/gif', 'gif'],
  ['WebP', webp(), 'image/webp', 'webp'],
])('a %s image', (_name, bytes, contentType, extension) => {
  it('is stored, recorded, and served byte for byte at the returned URL', async () => {
    const p = await env.project(`uploads ${extension}`);
    const res = await upload(bytes, `picture.${extension}`, contentType, 'file', p);
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^upl_/),
      url: expect.stringMatching(new RegExp(`^${PUBLIC_URL}/uploads/${p.id}/[0-9a-f]{32}\\.${extension}$`)),
      contentType,
      size: bytes.length,
    });

    const key = new URL(res.body.url).pathname.slice('/uploads/'.length);
    expect(await uploadRows(p.id)).toEqual([{ id: res.body.id, storage_key: key, content_type: contentType, size_bytes: bytes.length }]);
    expect(readFileSync(path.join(dataDir, 'uploads', key)).equals(bytes)).toBe(true);

    const served = await fetchUrl(res.body.url);
    expect(served.status).toBe(200);
    expect(served.headers['content-type']).toBe(contentType);
    expect(served.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(served.headers['x-content-type-options']).toBe('nosniff');
    expect(Buffer.compare(served.body as Buffer, bytes)).toBe(0);
  });
});

it('reads the format from the content, not from the name or the declared type', async () => {
  const p = await env.project('uploads mislabelled');
  const res = await upload(gif(), 'notes.txt', 'text/plain', 'image', p);
  expect(res.status).toBe(201);
  expect(res.body.contentType).toBe('image/gif');
  expect(res.body.url).toMatch(/\.gif$/);
});

it('refuses a text file named .png and declared image/png, storing nothing', async () => {
  const p = await env.project('uploads text');
  const res = await upload(Buffer.from('this is not an image, just some text\n'.repeat(10)), 'logo.png', 'image/png', 'file', p);
  expect(res.status).toBe(415);
  expect(res.body.error.code).toBe('UNSUPPORTED_MEDIA_TYPE');
  expect(res.body.error.message).toMatch(/PNG, JPEG, GIF or WebP/);
  expect(await uploadRows(p.id)).toEqual([]);
  expect(storedFiles(p.id)).toEqual([]);
});

it('refuses a file that only starts like a PNG', async () => {
  const signatureThenHtml = Buffer.concat([png().subarray(0, 8), Buffer.from('<html><script>alert(1)</script></html>')]);
  const res = await upload(signatureThenHtml, 'x.png', 'image/png');
  expect(res.status).toBe(415);
});

it('takes exactly 10 MB and refuses one byte more with 413, storing nothing', async () => {
  const p = await env.project('uploads size');
  const image = (size: number) => Buffer.concat([png(), Buffer.alloc(size - png().length)]);
  const atLimit = await upload(image(MAX_IMAGE_BYTES), 'big.png', 'image/png', 'file', p);
  expect(atLimit.status).toBe(201);
  expect(atLimit.body.size).toBe(10 * 1024 * 1024);

  const over = await upload(image(MAX_IMAGE_BYTES + 1), 'bigger.png', 'image/png', 'file', p);
  expect(over.status).toBe(413);
  expect(over.body.error.code).toBe('PAYLOAD_TOO_LARGE');
  expect((await uploadRows(p.id)).map((r) => r.id)).toEqual([atLimit.body.id]);
  expect(storedFiles(p.id)).toHaveLength(1);
});

describe('without a file', () => {
  it('answers 422 for a multipart form with no file part', async () => {
    const res = await env.http().post('/uploads/image').set(bearer(project.secretKey)).field('name', 'logo');
    expect(res.status).toBe(422);
    expect(res.body.error).toMatchObject({ code: 'VALIDATION_ERROR', errors: [{ field: 'file', code: 'required' }] });
  });

  it('answers 422 for a file under another part name', async () => {
    const res = await upload(png(), 'logo.png', 'image/png', 'picture');
    expect(res.status).toBe(422);
    expect(res.body.error.errors[0].field).toBe('file');
  });

  it('answers 422 for a JSON body', async () => {
    const res = await env.http().post('/uploads/image').set(bearer(project.secretKey)).send({ file: 'logo.png' });
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe('VALIDATION_ERROR');
  });
});

describe('who may upload', () => {
  it('needs a key or a session', async () => {
    const res = await env.http().post('/uploads/image').attach('file', png(), 'logo.png');
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('MISSING_AUTH');
  });

  it('refuses the public key', async () => {
    const res = await env.http().post('/uploads/image').set(bearer(project.publicKey)).attach('file', png(), 'logo.png');
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('INVALID_API_KEY');
  });

  it('accepts any member signed in, and refuses someone who is not a member', async () => {
    const p = await env.project('uploads members');
    const member = await createTestUser(env);
    await addTestMember(env, p.id, member.id, 'MEMBER');
    const res = await env.http().post('/uploads/image').set(asMember(member, p.id)).attach('file', png(), 'logo.png');
    expect(res.status).toBe(201);
    expect(res.body.url).toContain(`/uploads/${p.id}/`);
    expect(await uploadRows(p.id)).toHaveLength(1);

    const outsider = await createTestUser(env);
    const refused = await env.http().post('/uploads/image').set(asMember(outsider, p.id)).attach('file', png(), 'logo.png');
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe('PROJECT_ACCESS_DENIED');
  });
});

describe('serving', () => {
  let url: string;
  beforeAll(async () => {
    url = (await upload(png([0, 128, 255]), 'logo.png', 'image/png')).body.url as string;
  });

  it('answers conditional requests and HEAD', async () => {
    const first = await fetchUrl(url);
    expect(first.headers.etag).toEqual(expect.any(String));
    const again = await env.http().get(new URL(url).pathname).set('If-None-Match', first.headers.etag as string);
    expect(again.status).toBe(304);
    const head = await env.http().head(new URL(url).pathname);
    expect(head.status).toBe(200);
    expect(head.headers['content-length']).toBe(String(png([0, 128, 255]).length));
  });

  it('answers 404, not cacheable, for an image that does not exist', async () => {
    const res = await env.http().get(`/uploads/${project.id}/${'0'.repeat(32)}.png`);
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('NOT_FOUND');
    expect(res.headers['cache-control']).toBeUndefined();
  });

  it('serves nothing but well-formed keys: no traversal, no other files', async () => {
    const secret = path.join(dataDir, 'secret.png');
    writeFileSync(secret, png());
    mkdirSync(path.join(dataDir, 'uploads', project.id), { recursive: true });
    writeFileSync(path.join(dataDir, 'uploads', project.id, 'notes.txt'), 'private');
    const name = path.basename(new URL(url).pathname);
    for (const target of [
      `/uploads/..%2Fsecret.png/${name}`,
      `/uploads/${project.id}/..%2F..%2Fsecret.png`,
      `/uploads/..%2F..%2F/secret.png`,
      `/uploads/%2E%2E/secret.png`,
      `/uploads/${project.id}/notes.txt`,
      `/uploads/${project.id}/${name.replace('.png', '.PNG')}`,
      `/uploads/${project.id}/${name}%00.txt`,
    ]) {
      const res = await env.http().get(target);
      expect({ target, status: res.status }).toEqual({ target, status: 404 });
    }
  });
});

describe('deleting the project', () => {
  it("removes its images from disk and leaves other projects' alone", async () => {
    const owner = await createTestUser(env);
    const doomed = await env.project('uploads doomed');
    await addTestMember(env, doomed.id, owner.id, 'OWNER');
    const gone = await upload(png(), 'a.png', 'image/png', 'file', doomed);
    const kept = await upload(gif(), 'b.gif', 'image/gif');
    expect([gone.status, kept.status]).toEqual([201, 201]);
    expect(storedFiles(doomed.id)).toHaveLength(1);

    expect((await env.http().delete(`/users/@me/projects/${doomed.id}`).set({ Cookie: owner.cookie })).status).toBe(200);
    expect(existsSync(path.join(dataDir, 'uploads', doomed.id))).toBe(false);
    expect((await fetchUrl(gone.body.url)).status).toBe(404);
    expect((await fetchUrl(kept.body.url)).status).toBe(200);
  });
});
