import { Coalescer } from '../../db/coalescer';
import { findProjectsByKeys } from '../../db/projects/projects';
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

  test('each lookup gets its project, and each counted one its own place in its window, in order', async () => {
    const a = await env.project();
    const b = await env.project();
    const disabled = await env.project();
    await query(env.orm.em.fork(), 'update projects set disabled = true where id = ?', [disabled.id]);
    const write = { writes: true };
    // Five seconds into a minute, on the caller's clock.
    const at = new Date('2030-01-01T10:00:05Z');
    const results = await findProjectsByKeys(env.orm.em.fork(), [
      { key: a.secretKey, count: write },
      { key: 'sk_not_a_key', count: write },
      { key: b.publicKey, count: write },
      { key: a.publicKey, count: { writes: false } },
      { key: 'nonsense', count: write },
      { key: a.secretKey }, // looked up, not counted (a route that refuses the key anyway)
      { key: disabled.secretKey, count: write }, // a disabled project refuses writes: not counted
      { key: disabled.secretKey, count: { writes: false } },
      { key: b.secretKey, count: { projectId: a.id, writes: false } }, // another project's route: not counted
      { key: a.secretKey, count: { projectId: a.id, writes: true } },
    ], at);
    expect(results.map((r) => r && { project: r.project.id, kind: r.kind, count: r.rateLimit?.count })).toEqual([
      { project: a.id, kind: 'secret', count: 1 },
      null,
      { project: b.id, kind: 'public', count: 1 },
      { project: a.id, kind: 'public', count: 2 },
      null,
      { project: a.id, kind: 'secret', count: undefined },
      { project: disabled.id, kind: 'secret', count: undefined },
      { project: disabled.id, kind: 'secret', count: 1 },
      { project: b.id, kind: 'secret', count: undefined },
      { project: a.id, kind: 'secret', count: 3 },
    ]);
    expect(results[0]!.project).toMatchObject({ name: expect.any(String), disabled: false, createdAt: expect.any(Date) });
    for (const r of results) if (r?.rateLimit) expect(r.rateLimit.resetSeconds).toBe(55);

    // The next batch goes on from the window's count; the next minute starts a window of its own.
    const twice = [{ key: a.secretKey, count: write }, { key: a.secretKey, count: write }];
    const next = await findProjectsByKeys(env.orm.em.fork(), twice, new Date(at.getTime() + 30_000));
    expect(next.map((r) => r!.rateLimit)).toEqual([{ count: 4, resetSeconds: 25 }, { count: 5, resetSeconds: 25 }]);
    const later = await findProjectsByKeys(env.orm.em.fork(), twice, new Date(at.getTime() + 60_000));
    expect(later.map((r) => r!.rateLimit!.count)).toEqual([1, 2]);
  });

  test('keys that are neither sk_ nor pk_ find no project', async () => {
    expect(await findProjectsByKeys(env.orm.em.fork(), [{ key: 'x' }, { key: '' }], new Date())).toEqual([null, null]);
  });
});
