import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import request from 'supertest';
import { createApp } from '../../api/app';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { query } from '../../db/sql';
import { bucketUrl, S3ImageStorage } from '../../storage/s3';
import { addTestMember, createTestUser } from '../helpers/accounts';
import { bearer, startTestEnv, type TestEnv } from '../helpers/env';
import { startGofakes3, type Gofakes3 } from '../helpers/gofakes3';
import { jpeg, png, webp } from '../helpers/images';

/** Uploads through the API into a real S3-protocol server (gofakes3) on loopback. */

let s3: Gofakes3;
let env: TestEnv;
let project: ProjectWithKeys;
let dataDir: string;

beforeAll(async () => {
  s3 = await startGofakes3('tidings-images');
  dataDir = mkdtempSync(path.join(os.tmpdir(), 'tidings-s3-'));
  env = await startTestEnv({
    DATA_DIR: dataDir,
    S3_BUCKET: s3.bucket,
    S3_ENDPOINT: s3.endpoint,
    S3_FORCE_PATH_STYLE: 'true',
    S3_ACCESS_KEY_ID: 'test-access-key',
    S3_SECRET_ACCESS_KEY: 'test-secret-key',
  });
  project = await env.project('s3 uploads');
});
afterAll(async () => {
  await env?.close();
  await s3?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

const uploadRows = (projectId: string) =>
  query<{ id: string; storage_key: string; content_type: string; size_bytes: number }>(
    env.orm.em.fork(),
    'select id, storage_key, content_type, size_bytes from uploads where project_id = ?',
    [projectId],
  );

it.each([
  ['PNG', png(), 'image/png', 'png'],
  ['JPEG', jpeg(), 'image/jpeg', 'jpg'],
  ['WebP', webp(), 'image/webp', 'webp'],
])('a %s goes into the bucket and the returned URL serves it from there', async (_name, bytes, contentType, extension) => {
  const res = await env
    .http()
    .post('/uploads/image')
    .set(bearer(project.secretKey))
    .attach('file', bytes, { filename: 'x.bin', contentType: 'application/octet-stream' });
  expect(res.status).toBe(201);
  const keyPattern = `${project.id}/[0-9a-f]{32}\\.${extension}`;
  expect(res.body).toEqual({
    id: expect.stringMatching(/^upl_/),
    url: expect.stringMatching(new RegExp(`^${s3.endpoint}/${s3.bucket}/${keyPattern}$`)),
    contentType,
    size: bytes.length,
  });

  const fetched = await fetch(res.body.url as string);
  expect(fetched.status).toBe(200);
  expect(fetched.headers.get('content-type')).toBe(contentType);
  expect(Buffer.compare(Buffer.from(await fetched.arrayBuffer()), bytes)).toBe(0);

  const key = (res.body.url as string).slice(`${s3.endpoint}/${s3.bucket}/`.length);
  expect(await uploadRows(project.id)).toContainEqual({
    id: res.body.id,
    storage_key: key,
    content_type: contentType,
    size_bytes: bytes.length,
  });
  // Nothing on local disk, and the API does not serve the key itself.
  expect(existsSync(path.join(dataDir, 'uploads'))).toBe(false);
  expect((await env.http().get(`/uploads/${key}`)).status).toBe(404);
});

it("deleting a project removes its images from the bucket and leaves other projects' alone", async () => {
  const owner = await createTestUser(env);
  const doomed = await env.project('s3 doomed');
  await addTestMember(env, doomed.id, owner.id, 'OWNER');
  const upload = async (key: string) => {
    const res = await env.http().post('/uploads/image').set(bearer(key)).attach('file', png(), 'logo.png');
    expect(res.status).toBe(201);
    return res.body.url as string;
  };
  const gone = [await upload(doomed.secretKey), await upload(doomed.secretKey)];
  const kept = await upload(project.secretKey);
  for (const url of [...gone, kept]) expect((await fetch(url)).status).toBe(200);

  expect((await env.http().delete(`/users/@me/projects/${doomed.id}`).set({ Cookie: owner.cookie })).status).toBe(200);
  for (const url of gone) expect((await fetch(url)).status).toBe(404);
  expect((await fetch(kept)).status).toBe(200);
});

it('GET /config reports object storage on', async () => {
  const res = await env.http().get('/config');
  expect(res.body.features.storage).toEqual({ objectStorage: true });
});

it('a bucket that refuses the upload gives an error and records nothing', async () => {
  const p = await env.project('s3 missing bucket');
  const missing = new S3ImageStorage({
    bucket: 'no-such-bucket',
    endpoint: s3.endpoint,
    region: 'us-east-1',
    accessKeyId: 'test-access-key',
    secretAccessKey: 'test-secret-key',
    forcePathStyle: true,
    publicUrl: undefined,
  });
  const { app } = createApp({ ...env.deps, storage: missing });
  const res = await request(app).post('/uploads/image').set(bearer(p.secretKey)).attach('file', png(), 'logo.png');
  expect(res.status).toBe(500);
  expect(res.body.error.code).toBe('INTERNAL_SERVER_ERROR');
  expect(await uploadRows(p.id)).toEqual([]);
});

describe('public URL of the bucket', () => {
  const base = { bucket: 'imgs', region: 'eu-west-3' };
  it('is <endpoint>/<bucket> in path style', () => {
    expect(bucketUrl({ ...base, endpoint: 'http://127.0.0.1:9000', forcePathStyle: true })).toBe('http://127.0.0.1:9000/imgs');
    expect(bucketUrl({ ...base, endpoint: 'https://minio.example.com/s3/', forcePathStyle: true })).toBe('https://minio.example.com/s3/imgs');
  });
  it('is the bucket host otherwise', () => {
    expect(bucketUrl({ ...base, endpoint: 'https://r2.example.com', forcePathStyle: false })).toBe('https://imgs.r2.example.com');
    expect(bucketUrl({ ...base, endpoint: undefined, forcePathStyle: false })).toBe('https://imgs.s3.eu-west-3.amazonaws.com');
  });
  it('is S3_PUBLIC_URL when set', async () => {
    const cdn = new S3ImageStorage({
      ...base,
      bucket: s3.bucket,
      endpoint: s3.endpoint,
      accessKeyId: 'k',
      secretAccessKey: 's',
      forcePathStyle: true,
      publicUrl: 'https://cdn.example.com/img',
    });
    const key = `${project.id}/${'a'.repeat(32)}.png`;
    expect(await cdn.put(key, png(), 'image/png')).toBe(`https://cdn.example.com/img/${key}`);
  });
});
