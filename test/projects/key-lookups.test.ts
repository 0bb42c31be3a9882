import { Coalescer } from '../../db/coalescer';
import { ApiKeys, KEY_MAX_AGE_MS } from '../../api/middleware/api-keys';
import { keysChanged } from '../../db/projects/key-changes';
import { findProjectsByKeys, rotateProjectKeys } from '../../db/projects/projects';
import { disableProject, enableProject } from '../../db/projects/security';
import { query } from '../../db/sql';
import { startTestEnv, type TestEnv } from '../helpers/env';

describe('Coalescer', () => {
  const tick = () => new Promise((resolve) => setImmediate(resolve));

  test('calls made while a batch is in flight go as one batch; each gets its own answer, in order', async () => {
    const batches: number[][] = [];
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const c = new Coalescer<number, number>(
      async (items) => {
        batches.push(items);
        if (batches.length === 1) await gate;
        return items.map((i) => i * 10);
      },
      { maxBatch: 3 },
    );
    const first = c.run(1);
    await tick();
    const rest = [2, 3, 4, 5, 6].map((i) => c.run(i));
    await tick();
    expect(batches).toEqual([[1]]); // the others wait for the one in flight
    release();
    expect(await Promise.all([first, ...rest])).toEqual([10, 20, 30, 40, 50, 60]);
    expect(batches).toEqual([[1], [2, 3, 4], [5, 6]]);
  });

  test('an Error answer fails its own call only; a thrown error fails the whole batch', async () => {
    const c = new Coalescer<number, number>(
      async (items) => {
        if (items.includes(99)) throw new Error('database unreachable');
        return items.map((i) => (i === 2 ? new Error('bad item') : i));
      },
      { maxBatch: 10 },
    );
    const results = await Promise.allSettled([c.run(1), c.run(2), c.run(3)]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    const failed = await Promise.allSettled([c.run(4), c.run(99)]);
    expect(failed.map((r) => (r.status === 'rejected' ? (r.reason as Error).message : r.value))).toEqual(['database unreachable', 'database unreachable']);
    expect(await c.run(5)).toBe(5); // and it goes on afterwards
  });

  test('one batch in flight at a time', async () => {
    let running = 0;
    let most = 0;
    const c = new Coalescer<number, number>(
      async (items) => {
        most = Math.max(most, ++running);
        await tick(); // in flight across a turn of the event loop, when the next batches would start
        running--;
        return items;
      },
      { maxBatch: 1 },
    );
    expect(await Promise.all(Array.from({ length: 9 }, (_, i) => c.run(i)))).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
    expect(most).toBe(1);
  });

  test('with a linger, the next batch waits for it and takes what came meanwhile; an idle call starts at once', async () => {
    const batches: number[][] = [];
    let endLinger!: () => void;
    let lingers = 0;
    const c = new Coalescer<number, number>(
      async (items) => {
        batches.push(items);
        return items;
      },
      { maxBatch: 3, linger: () => new Promise<void>((resolve) => ((endLinger = resolve), lingers++)) },
    );
    const settle = async () => {
      for (let i = 0; i < 5; i++) await tick();
    };
    expect(await c.run(1)).toBe(1); // nothing before it: no wait
    await settle();
    expect(lingers).toBe(1);
    const during = [2, 3].map((i) => c.run(i));
    await settle();
    expect(batches).toEqual([[1]]); // held by the linger
    endLinger();
    expect(await Promise.all(during)).toEqual([2, 3]);
    await settle();
    expect(lingers).toBe(2);
    // More than a batch waits when the linger ends: the next full batch goes without one.
    const many = [4, 5, 6, 7, 8, 9, 10].map((i) => c.run(i));
    await settle();
    endLinger();
    await settle();
    expect(batches).toEqual([[1], [2, 3], [4, 5, 6], [7, 8, 9]]);
    expect(lingers).toBe(3);
    endLinger();
    expect(await Promise.all(many)).toEqual([4, 5, 6, 7, 8, 9, 10]);
    expect(batches).toEqual([[1], [2, 3], [4, 5, 6], [7, 8, 9], [10]]);
  });
});

describe('findProjectsByKeys: a batch of API-key lookups in one statement', () => {
  let env: TestEnv;
  beforeAll(async () => {
    env = await startTestEnv();
  });
  afterAll(async () => {
    await env?.close();
  });

  test('each key gets its project and kind, in order; unknown keys and other prefixes get null', async () => {
    const a = await env.project();
    const b = await env.project();
    const results = await findProjectsByKeys(env.orm.em.fork(), [a.secretKey, 'sk_not_a_key', b.publicKey, a.publicKey, 'nonsense', '', a.secretKey]);
    expect(results.map((r) => r && { project: r.project.id, kind: r.kind })).toEqual([
      { project: a.id, kind: 'secret' },
      null,
      { project: b.id, kind: 'public' },
      { project: a.id, kind: 'public' },
      null,
      null,
      { project: a.id, kind: 'secret' },
    ]);
    expect(results[0]!.project).toMatchObject({ name: expect.any(String), disabled: false, createdAt: expect.any(Date) });
  });
});

describe('ApiKeys: each key read at most once per KEY_MAX_AGE_MS in a process', () => {
  let env: TestEnv;
  let now = Date.parse('2030-01-01T10:00:00Z');
  const clock = () => new Date(now);
  beforeAll(async () => {
    env = await startTestEnv();
  });
  afterAll(async () => {
    await env?.close();
  });

  test("a change made elsewhere is seen once the key's reading is KEY_MAX_AGE_MS old", async () => {
    const keys = new ApiKeys(env.orm, clock);
    const p = await env.project();
    expect((await keys.find(p.secretKey))!.project.disabled).toBe(false);
    // Another process disables the project: this one's reading stands until it is too old.
    await query(env.orm.em.fork(), 'update projects set disabled = true where id = ?', [p.id]);
    now += KEY_MAX_AGE_MS - 1;
    expect((await keys.find(p.secretKey))!.project.disabled).toBe(false);
    now += 1;
    expect((await keys.find(p.secretKey))!.project.disabled).toBe(true);
  });

  test('a change made in this process is seen by the next request', async () => {
    const keys = new ApiKeys(env.orm, clock);
    const p = await env.project();
    expect(await keys.find(p.secretKey)).not.toBeNull();
    expect(await keys.find(p.publicKey)).not.toBeNull();
    const rotated = await rotateProjectKeys(env.orm.em.fork(), p.id);
    expect(await keys.find(p.secretKey)).toBeNull();
    expect(await keys.find(p.publicKey)).toBeNull();
    expect((await keys.find(rotated.secretKey))!.project.id).toBe(p.id);

    await disableProject(env.orm.em.fork(), p.id, 'a test');
    expect((await keys.find(rotated.secretKey))!.project.disabled).toBe(true);
    await enableProject(env.orm.em.fork(), p.id);
    expect((await keys.find(rotated.secretKey))!.project.disabled).toBe(false);
  });

  test('a reading in flight while the project changes is answered but not kept', async () => {
    const keys = new ApiKeys(env.orm, clock);
    const p = await env.project();
    const reading = keys.find(p.secretKey);
    keysChanged(p.id);
    expect((await reading)!.project.disabled).toBe(false);
    await query(env.orm.em.fork(), 'update projects set disabled = true where id = ?', [p.id]);
    expect((await keys.find(p.secretKey))!.project.disabled).toBe(true);
  });
});
