import { pageBased } from '../../db/paging';
import { query, queryOne } from '../../db/sql';
import { upsertContact } from '../../db/contacts/contacts';
import { startTestEnv, type TestEnv } from '../helpers/env';

let env: TestEnv;
beforeAll(async () => {
  env = await startTestEnv();
});
afterAll(() => env.close());

test('page-based helper pages over real rows with a stable total', async () => {
  const { id: projectId } = await env.project();
  const em = env.orm.em.fork();
  for (let i = 0; i < 20; i++) {
    await upsertContact(em, projectId, { email: `p${String(i).padStart(2, '0')}@page.test` }, { subscribedWhenNew: true });
  }
  const fetchPage = (page: number) =>
    pageBased(
      page,
      7,
      (limit, offset) =>
        query<{ email: string }>(em, 'select email from contacts where project_id = ? order by email limit ? offset ?', [
          projectId,
          limit,
          offset,
        ]),
      async () => Number((await queryOne<{ n: string }>(em, 'select count(*) n from contacts where project_id = ?', [projectId]))!.n),
    );
  const pages = await Promise.all([1, 2, 3, 4].map(fetchPage));
  expect(pages.map((p) => p.data.length)).toEqual([7, 7, 6, 0]);
  expect(pages.every((p) => p.total === 20 && p.pageSize === 7)).toBe(true);
  expect(pages[1]!.page).toBe(2);
  const emails = pages.flatMap((p) => p.data.map((r) => r.email));
  expect(new Set(emails).size).toBe(20);
  expect(emails[0]).toBe('p00@page.test');
  expect(emails[19]).toBe('p19@page.test');
});
