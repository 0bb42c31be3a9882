import { randomUUID } from 'node:crypto';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { query } from '../../db/sql';
import { bearer, startTestEnv, type TestEnv } from '../helpers/env';

/**
 * GET /analytics/* over the real database: email rows written with chosen timestamps (the
 * engagement columns as db/messages/engagement.ts sets them), so every bucket and count is known exactly.
 */

let env: TestEnv;
let series: ProjectWithKeys;
let camp: ProjectWithKeys;
let other: ProjectWithKeys;

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

const get = (p: ProjectWithKeys, path: string, q: Record<string, string | number> = {}) =>
  env.http().get(path).query(q).set(bearer(p.secretKey));

const fieldsOf = (res: { status: number; body: { error: { errors: { field: string }[] } } }) => ({
  status: res.status,
  fields: res.body.error.errors.map((e) => e.field),
});

async function contact(p: ProjectWithKeys, email: string): Promise<string> {
  const res = await env.http().post('/v1/track').set(bearer(p.secretKey)).send({ email, event: 'signup' });
  expect(res.status).toBe(200);
  return res.body.data.contact;
}

interface EmailRow {
  contactId: string;
  campaignId?: string;
  sent?: string;
  delivered?: string;
  opened?: string;
  clicked?: string;
  bounced?: string;
  complained?: string;
}

async function email(p: ProjectWithKeys, e: EmailRow): Promise<void> {
  await query(
    env.orm.em.fork(),
    `insert into emails (id, project_id, contact_id, campaign_id, source, to_email, from_email, subject, body, status,
       sent_at, delivered_at, opened_at, clicked_at, bounced_at, complained_at)
     values (?, ?, ?, ?, ?, 'x@example.org', 'news@acme.test', 'Hi', 'Hello', ?, ?, ?, ?, ?, ?, ?)`,
    [
      randomUUID(),
      p.id,
      e.contactId,
      e.campaignId ?? null,
      e.campaignId ? 'campaign' : 'transactional',
      e.sent ? 'SENT' : 'FAILED',
      e.sent ?? null,
      e.delivered ?? null,
      e.opened ?? null,
      e.clicked ?? null,
      e.bounced ?? null,
      e.complained ?? null,
    ],
  );
}

async function campaign(p: ProjectWithKeys, id: string, name: string, status: string, createdAt: string, sentAt: string | null, total: number) {
  await query(
    env.orm.em.fork(),
    `insert into campaigns (id, project_id, name, subject, body, from_email, status, sent_at, total_recipients, created_at)
     values (?, ?, ?, 'Hi', 'Hello', 'news@acme.test', ?, ?, ?, ?)`,
    [id, p.id, name, status, sentAt, total, createdAt],
  );
}

beforeAll(async () => {
  env = await startTestEnv();
  [series, camp, other] = await Promise.all([env.project('analytics series'), env.project('analytics campaigns'), env.project('analytics other')]);

  // Series project, 2026-01-10 (UTC): sends at 10:15, 10:45, 12:05; the 10:15 one opened 10:50,
  // the 12:05 one opened 13:00 and clicked 13:30; edges at 08:59:59.999 and 14:00 exactly;
  // one sent 23:30 (Jan 11 in Tokyo); one never sent (FAILED).
  const a = await contact(series, 'a@example.org');
  await campaign(series, 'cmp_ts_1', 'Series campaign', 'SENT', '2026-01-09T00:00:00Z', '2026-01-10T12:10:00Z', 2);
  await email(series, { contactId: a, sent: '2026-01-10T10:15:00Z', opened: '2026-01-10T10:50:00Z' });
  await email(series, { contactId: a, sent: '2026-01-10T10:45:00Z' });
  await email(series, { contactId: a, campaignId: 'cmp_ts_1', sent: '2026-01-10T12:05:00Z', opened: '2026-01-10T13:00:00Z', clicked: '2026-01-10T13:30:00Z' });
  await email(series, { contactId: a, sent: '2026-01-10T08:59:59.999Z' });
  await email(series, { contactId: a, campaignId: 'cmp_ts_1', sent: '2026-01-10T14:00:00Z' });
  await email(series, { contactId: a, sent: '2026-01-10T23:30:00Z' });
  await email(series, { contactId: a });
  // Another project's mail in the same hours never counts.
  const o = await contact(other, 'o@example.org');
  await email(other, { contactId: o, sent: '2026-01-10T10:20:00Z', opened: '2026-01-10T10:30:00Z', clicked: '2026-01-10T10:31:00Z' });
  await campaign(other, 'cmp_other', 'Not yours', 'SENT', '2026-01-01T00:00:00Z', '2026-01-02T00:00:00Z', 1);
});

afterAll(() => env.close());

test('GET /analytics/timeseries: hourly buckets, from inclusive / to exclusive, empty buckets as 0', async () => {
  const res = await get(series, '/analytics/timeseries', { interval: 'hour', from: '2026-01-10T09:00:00Z', to: '2026-01-10T14:00:00Z' });
  expect(res.status).toBe(200);
  expect(res.body).toEqual({
    interval: 'hour',
    timezone: 'UTC',
    from: '2026-01-10T09:00:00.000Z',
    to: '2026-01-10T14:00:00.000Z',
    series: [
      { bucket: '2026-01-10T09:00:00.000Z', sends: 0, opens: 0, clicks: 0 },
      { bucket: '2026-01-10T10:00:00.000Z', sends: 2, opens: 1, clicks: 0 },
      { bucket: '2026-01-10T11:00:00.000Z', sends: 0, opens: 0, clicks: 0 },
      { bucket: '2026-01-10T12:00:00.000Z', sends: 1, opens: 0, clicks: 0 },
      { bucket: '2026-01-10T13:00:00.000Z', sends: 0, opens: 1, clicks: 1 },
    ],
    totals: { sends: 3, opens: 2, clicks: 1 },
  });

  // One metric, or a list, carries only those counts; the range edges are now inside it.
  const sends = await get(series, '/analytics/timeseries', {
    interval: 'hour',
    metric: 'sends',
    from: '2026-01-10T08:00:00Z',
    to: '2026-01-10T14:00:00.001Z',
  });
  expect(sends.body.series).toEqual([
    { bucket: '2026-01-10T08:00:00.000Z', sends: 1 },
    { bucket: '2026-01-10T09:00:00.000Z', sends: 0 },
    { bucket: '2026-01-10T10:00:00.000Z', sends: 2 },
    { bucket: '2026-01-10T11:00:00.000Z', sends: 0 },
    { bucket: '2026-01-10T12:00:00.000Z', sends: 1 },
    { bucket: '2026-01-10T13:00:00.000Z', sends: 0 },
    { bucket: '2026-01-10T14:00:00.000Z', sends: 1 },
  ]);
  expect(sends.body.totals).toEqual({ sends: 5 });
  const pair = await get(series, '/analytics/timeseries', {
    interval: 'hour',
    metric: 'clicks,opens',
    from: '2026-01-10T13:00:00Z',
    to: '2026-01-10T14:00:00Z',
  });
  expect(pair.body.series).toEqual([{ bucket: '2026-01-10T13:00:00.000Z', opens: 1, clicks: 1 }]);
  const all = await get(series, '/analytics/timeseries', { interval: 'hour', metric: 'all', from: '2026-01-10T13:00:00Z', to: '2026-01-10T14:00:00Z' });
  expect(all.body.series).toEqual([{ bucket: '2026-01-10T13:00:00.000Z', sends: 0, deliveries: 0, opens: 1, clicks: 1, bounces: 0, complaints: 0 }]);

  // A `from` inside a bucket: that bucket is partial (08:59:59.999 is before it).
  const partial = await get(series, '/analytics/timeseries', {
    interval: 'hour',
    metric: 'sends',
    from: '2026-01-10T08:30:00Z',
    to: '2026-01-10T10:30:00Z',
  });
  expect(partial.body).toMatchObject({
    from: '2026-01-10T08:30:00.000Z',
    to: '2026-01-10T10:30:00.000Z',
    series: [
      { bucket: '2026-01-10T08:00:00.000Z', sends: 1 },
      { bucket: '2026-01-10T09:00:00.000Z', sends: 0 },
      { bucket: '2026-01-10T10:00:00.000Z', sends: 1 },
    ],
  });

  // Only the campaign's emails.
  const ofCampaign = await get(series, '/analytics/timeseries', {
    interval: 'hour',
    campaignId: 'cmp_ts_1',
    from: '2026-01-10T12:00:00Z',
    to: '2026-01-10T15:00:00Z',
  });
  expect(ofCampaign.body.series).toEqual([
    { bucket: '2026-01-10T12:00:00.000Z', sends: 1, opens: 0, clicks: 0 },
    { bucket: '2026-01-10T13:00:00.000Z', sends: 0, opens: 1, clicks: 1 },
    { bucket: '2026-01-10T14:00:00.000Z', sends: 1, opens: 0, clicks: 0 },
  ]);
});

test('GET /analytics/timeseries: days, weeks and months in a time zone; date-only bounds are midnight there', async () => {
  const utc = await get(series, '/analytics/timeseries', { from: '2026-01-09', to: '2026-01-12' });
  expect(utc.body).toEqual({
    interval: 'day',
    timezone: 'UTC',
    from: '2026-01-09T00:00:00.000Z',
    to: '2026-01-12T00:00:00.000Z',
    series: [
      { bucket: '2026-01-09T00:00:00.000Z', sends: 0, opens: 0, clicks: 0 },
      { bucket: '2026-01-10T00:00:00.000Z', sends: 6, opens: 2, clicks: 1 },
      { bucket: '2026-01-11T00:00:00.000Z', sends: 0, opens: 0, clicks: 0 },
    ],
    totals: { sends: 6, opens: 2, clicks: 1 },
  });
  // Tokyo is UTC+9: Jan 10 there is 2026-01-09T15:00Z … 2026-01-10T15:00Z; 23:30Z falls on Jan 11.
  const tokyo = await get(series, '/analytics/timeseries', { from: '2026-01-09', to: '2026-01-12', timezone: 'Asia/Tokyo', metric: 'sends' });
  expect(tokyo.body).toEqual({
    interval: 'day',
    timezone: 'Asia/Tokyo',
    from: '2026-01-08T15:00:00.000Z',
    to: '2026-01-11T15:00:00.000Z',
    series: [
      { bucket: '2026-01-08T15:00:00.000Z', sends: 0 },
      { bucket: '2026-01-09T15:00:00.000Z', sends: 5 },
      { bucket: '2026-01-10T15:00:00.000Z', sends: 1 },
    ],
    totals: { sends: 6 },
  });
  // Mixed bounds are compared once resolved: Tokyo's Jan 10 begins at 2026-01-09T15:00Z, before `to`.
  const mixed = await get(series, '/analytics/timeseries', { from: '2026-01-10', to: '2026-01-09T20:00:00Z', timezone: 'Asia/Tokyo', metric: 'sends' });
  expect({ status: mixed.status, series: mixed.body.series }).toEqual({ status: 200, series: [{ bucket: '2026-01-09T15:00:00.000Z', sends: 0 }] });
  // Weeks start on Monday (2026-01-05 and 2026-01-12); months on the 1st.
  const weeks = await get(series, '/analytics/timeseries', { interval: 'week', metric: 'sends', from: '2026-01-05', to: '2026-01-19' });
  expect(weeks.body.series).toEqual([
    { bucket: '2026-01-05T00:00:00.000Z', sends: 6 },
    { bucket: '2026-01-12T00:00:00.000Z', sends: 0 },
  ]);
  const months = await get(series, '/analytics/timeseries', { interval: 'month', metric: 'opens', from: '2025-11-01', to: '2026-02-01' });
  expect(months.body.series).toEqual([
    { bucket: '2025-11-01T00:00:00.000Z', opens: 0 },
    { bucket: '2025-12-01T00:00:00.000Z', opens: 0 },
    { bucket: '2026-01-01T00:00:00.000Z', opens: 2 },
  ]);
  // New York (UTC-5 in January): hours of its wall clock, bounds given with an offset.
  const ny = await get(series, '/analytics/timeseries', {
    interval: 'hour',
    timezone: 'America/New_York',
    metric: 'sends',
    from: '2026-01-10T05:00:00-05:00',
    to: '2026-01-10T08:00:00-05:00',
  });
  expect(ny.body.series).toEqual([
    { bucket: '2026-01-10T10:00:00.000Z', sends: 2 },
    { bucket: '2026-01-10T11:00:00.000Z', sends: 0 },
    { bucket: '2026-01-10T12:00:00.000Z', sends: 1 },
  ]);
});

test('GET /analytics/timeseries: default range ends now (last 30 days, last 24 hours)', async () => {
  const p = await env.project('analytics recent');
  const c = await contact(p, 'r@example.org');
  const sentAt = [Date.now() - 2 * DAY, Date.now() - 3 * HOUR, Date.now() - 40 * DAY];
  for (const t of sentAt) await email(p, { contactId: c, sent: new Date(t).toISOString() });

  const days = (await get(p, '/analytics/timeseries', { metric: 'sends' })).body;
  const to = Date.parse(days.to);
  const lastDay = Math.floor((to - 1) / DAY) * DAY;
  const buckets = Array.from({ length: 30 }, (_, i) => lastDay - (29 - i) * DAY);
  expect(days.from).toBe(new Date(buckets[0]!).toISOString());
  expect(days.series).toEqual(
    buckets.map((b) => ({ bucket: new Date(b).toISOString(), sends: sentAt.filter((t) => t >= b && t < b + DAY).length })),
  );
  expect(days.totals).toEqual({ sends: 2 });

  const hours = (await get(p, '/analytics/timeseries', { metric: 'sends', interval: 'hour' })).body;
  const lastHour = Math.floor((Date.parse(hours.to) - 1) / HOUR) * HOUR;
  const hourBuckets = Array.from({ length: 24 }, (_, i) => lastHour - (23 - i) * HOUR);
  expect(hours.series).toEqual(
    hourBuckets.map((b) => ({ bucket: new Date(b).toISOString(), sends: sentAt.filter((t) => t >= b && t < b + HOUR).length })),
  );
  expect(hours.totals).toEqual({ sends: 1 });
});

test('GET /analytics/timeseries: validation and unknown campaigns', async () => {
  const ts = (q: Record<string, string>) => get(series, '/analytics/timeseries', q);
  expect(fieldsOf(await ts({ interval: 'minute' }))).toEqual({ status: 422, fields: ['query.interval'] });
  expect(fieldsOf(await ts({ metric: 'views' }))).toEqual({ status: 422, fields: ['query.metric'] });
  expect(fieldsOf(await ts({ metric: 'sends,' }))).toEqual({ status: 422, fields: ['query.metric'] });
  expect(fieldsOf(await ts({ timezone: 'Mars/Olympus' }))).toEqual({ status: 422, fields: ['query.timezone'] });
  expect(fieldsOf(await ts({ from: '2026-01-10', to: '2026-01-09' }))).toEqual({ status: 422, fields: ['query.to'] });
  expect(fieldsOf(await ts({ from: '2100-01-01' }))).toEqual({ status: 422, fields: ['query.from'] });
  const tooLong = await ts({ interval: 'hour', from: '2026-01-01', to: '2026-03-01' });
  expect(fieldsOf(tooLong)).toEqual({ status: 422, fields: ['query.from'] });
  expect(tooLong.body.error.errors[0].message).toBe('The range spans more than 1000 hour buckets; narrow it or use a larger interval');
  // 1000 buckets exactly is fine.
  const max = await ts({ interval: 'hour', metric: 'sends', from: '2026-01-01T00:00:00Z', to: '2026-02-11T16:00:00Z' });
  expect({ status: max.status, buckets: max.body.series.length, sends: max.body.totals.sends }).toEqual({ status: 200, buckets: 1000, sends: 6 });

  for (const campaignId of ['cmp_nope', 'cmp_other']) {
    const res = await ts({ campaignId });
    expect({ status: res.status, code: res.body.error.code }).toEqual({ status: 404, code: 'CAMPAIGN_NOT_FOUND' });
  }
});

describe('campaign analytics', () => {
  const stats = (id: string, name: string, status: string, sentAt: string | null, totalRecipients: number, counts: number[], rates: number[]) => {
    const [sent, delivered, opened, clicked, bounced, complained, unsubscribed] = counts as [number, number, number, number, number, number, number];
    const [openRate, clickRate, bounceRate] = rates as [number, number, number];
    return { id, name, status, sentAt, totalRecipients, sent, delivered, opened, clicked, bounced, complained, unsubscribed, openRate, clickRate, bounceRate };
  };
  const c1 = () => stats('cmp_an_1', 'January news', 'SENT', '2026-01-10T12:00:00.000Z', 4, [4, 3, 2, 1, 1, 0, 1], [0.5, 0.25, 0.25]);
  const c2 = () => stats('cmp_an_2', 'Winter sale', 'SENT', '2026-01-11T12:00:00.000Z', 3, [3, 3, 3, 2, 0, 1, 1], [1, 0.6667, 0]);
  const c3 = () => stats('cmp_an_3', 'Spring draft', 'DRAFT', null, 0, [0, 0, 0, 0, 0, 0, 0], [0, 0, 0]);

  beforeAll(async () => {
    const [a, b, c, d] = await Promise.all(['a', 'b', 'c', 'd'].map((n) => contact(camp, `${n}@example.org`)));
    await campaign(camp, 'cmp_an_1', 'January news', 'SENT', '2026-01-05T00:00:00Z', '2026-01-10T12:00:00Z', 4);
    await campaign(camp, 'cmp_an_2', 'Winter sale', 'SENT', '2026-01-06T00:00:00Z', '2026-01-11T12:00:00Z', 3);
    await campaign(camp, 'cmp_an_3', 'Spring draft', 'DRAFT', '2026-01-07T00:00:00Z', null, 0);
    const t = (h: number, day = 10) => `2026-01-${day}T${String(h).padStart(2, '0')}:00:00Z`;
    // January news: 4 sent, 3 delivered, 2 opened, 1 clicked, 1 bounced.
    await email(camp, { contactId: a!, campaignId: 'cmp_an_1', sent: t(12), delivered: t(12), opened: t(13), clicked: t(14) });
    await email(camp, { contactId: b!, campaignId: 'cmp_an_1', sent: t(12), delivered: t(12), opened: t(15) });
    await email(camp, { contactId: c!, campaignId: 'cmp_an_1', sent: t(12), delivered: t(12) });
    await email(camp, { contactId: d!, campaignId: 'cmp_an_1', sent: t(12), bounced: t(12) });
    // Winter sale: 3 sent, delivered and opened, 2 clicked, 1 complaint. c unsubscribed after both
    // campaigns reached it: "unsubscribed" 1 in each.
    await email(camp, { contactId: a!, campaignId: 'cmp_an_2', sent: t(12, 11), delivered: t(12, 11), opened: t(13, 11), clicked: t(13, 11) });
    await email(camp, { contactId: b!, campaignId: 'cmp_an_2', sent: t(12, 11), delivered: t(12, 11), opened: t(14, 11), clicked: t(14, 11) });
    await email(camp, { contactId: c!, campaignId: 'cmp_an_2', sent: t(12, 11), delivered: t(12, 11), opened: t(15, 11), complained: t(16, 11) });
    const em = env.orm.em.fork();
    await query(em, 'update contacts set subscribed = false where id = ?', [c]);
    await query(em, `insert into events (id, project_id, contact_id, name, created_at) values ('evt_an_unsub', ?, ?, 'contact.unsubscribed', ?)`, [
      camp.id,
      c,
      t(17, 11),
    ]);
    // A transactional email of the project is nobody's campaign.
    await email(camp, { contactId: a!, sent: t(12), opened: t(13), clicked: t(13) });
  });

  test('GET /analytics/campaign-stats: one campaign, or the newest ones', async () => {
    expect((await get(camp, '/analytics/campaign-stats', { campaignId: 'cmp_an_1' })).body).toEqual({ campaigns: [c1()] });
    expect((await get(camp, '/analytics/campaign-stats', { campaignId: 'cmp_an_2' })).body).toEqual({ campaigns: [c2()] });
    expect((await get(camp, '/analytics/campaign-stats')).body).toEqual({ campaigns: [c3(), c2(), c1()] });
    expect((await get(camp, '/analytics/campaign-stats', { limit: 2 })).body).toEqual({ campaigns: [c3(), c2()] });
    for (const campaignId of ['cmp_nope', 'cmp_other']) {
      const res = await get(camp, '/analytics/campaign-stats', { campaignId });
      expect({ status: res.status, code: res.body.error.code }).toEqual({ status: 404, code: 'CAMPAIGN_NOT_FOUND' });
    }
    expect((await get(other, '/analytics/campaign-stats')).body).toEqual({
      campaigns: [stats('cmp_other', 'Not yours', 'SENT', '2026-01-02T00:00:00.000Z', 1, [0, 0, 0, 0, 0, 0, 0], [0, 0, 0])],
    });
    expect(fieldsOf(await get(camp, '/analytics/campaign-stats', { limit: 101 }))).toEqual({ status: 422, fields: ['query.limit'] });
  });

  test('GET /analytics/timeseries: deliveries, bounces and complaints, of the project or of one campaign', async () => {
    const days = await get(camp, '/analytics/timeseries', { metric: 'deliveries,bounces,complaints', from: '2026-01-10', to: '2026-01-12' });
    expect(days.body.series).toEqual([
      { bucket: '2026-01-10T00:00:00.000Z', deliveries: 3, bounces: 1, complaints: 0 },
      { bucket: '2026-01-11T00:00:00.000Z', deliveries: 3, bounces: 0, complaints: 1 },
    ]);
    expect(days.body.totals).toEqual({ deliveries: 6, bounces: 1, complaints: 1 });
    const hours = await get(camp, '/analytics/timeseries', {
      interval: 'hour',
      metric: 'all',
      campaignId: 'cmp_an_2',
      from: '2026-01-11T12:00:00Z',
      to: '2026-01-11T17:00:00Z',
    });
    const point = (h: number, counts: Partial<Record<string, number>>) => ({
      bucket: `2026-01-11T${h}:00:00.000Z`,
      sends: 0,
      deliveries: 0,
      opens: 0,
      clicks: 0,
      bounces: 0,
      complaints: 0,
      ...counts,
    });
    expect(hours.body.series).toEqual([
      point(12, { sends: 3, deliveries: 3 }),
      point(13, { opens: 1, clicks: 1 }),
      point(14, { opens: 1, clicks: 1 }),
      point(15, { opens: 1 }),
      point(16, { complaints: 1 }),
    ]);
    expect(hours.body.totals).toEqual({ sends: 3, deliveries: 3, opens: 3, clicks: 2, bounces: 0, complaints: 1 });
  });

  test('GET /analytics/top-campaigns: ranked by sent, opens or clicks; campaigns that sent nothing left out', async () => {
    expect((await get(camp, '/analytics/top-campaigns')).body).toEqual({ metric: 'opens', campaigns: [c2(), c1()] });
    expect((await get(camp, '/analytics/top-campaigns', { metric: 'sent' })).body).toEqual({ metric: 'sent', campaigns: [c1(), c2()] });
    expect((await get(camp, '/analytics/top-campaigns', { metric: 'clicks', limit: 1 })).body).toEqual({ metric: 'clicks', campaigns: [c2()] });
    expect((await get(camp, '/analytics/top-campaigns', { metric: 'sent', from: '2026-01-11' })).body).toEqual({ metric: 'sent', campaigns: [c2()] });
    expect((await get(camp, '/analytics/top-campaigns', { to: '2026-01-10T12:00:00Z' })).body).toEqual({ metric: 'opens', campaigns: [] });
    expect((await get(other, '/analytics/top-campaigns')).body).toEqual({ metric: 'opens', campaigns: [] });
    expect(fieldsOf(await get(camp, '/analytics/top-campaigns', { metric: 'bounces' }))).toEqual({ status: 422, fields: ['query.metric'] });
    expect(fieldsOf(await get(camp, '/analytics/top-campaigns', { limit: 0 }))).toEqual({ status: 422, fields: ['query.limit'] });
  });

  test('GET /analytics/top-events: most frequent names, by kind and date range', async () => {
    // The camp project tracked "signup" 4 times (one per contact) and recorded one contact.unsubscribed.
    const p = await env.project('analytics events');
    for (const [email, event] of [
      ['a@example.org', 'signup'],
      ['b@example.org', 'signup'],
      ['a@example.org', 'paid'],
      ['c@example.org', 'signup'],
    ] as const) {
      const res = await env.http().post('/v1/track').set(bearer(p.secretKey)).send({ email, event });
      expect(res.status).toBe(200);
    }
    const a = (await query<{ id: string }>(env.orm.em.fork(), 'select id from contacts where project_id = ? and email = ?', [p.id, 'a@example.org']))[0]!.id;
    for (const [id, name, at] of [
      ['evt_te_1', 'email.opened', '2026-01-10T10:00:00Z'],
      ['evt_te_2', 'email.opened', '2026-01-20T10:00:00Z'],
      ['evt_te_3', 'contact.unsubscribed', '2026-01-31T23:59:59Z'],
      ['evt_te_4', 'email.sent', '2026-02-01T00:00:00Z'],
    ]) {
      await query(env.orm.em.fork(), 'insert into events (id, project_id, contact_id, name, created_at) values (?, ?, ?, ?, ?)', [id, p.id, a, name, at]);
    }
    expect((await get(p, '/analytics/top-events')).body).toEqual({
      events: [
        { name: 'signup', count: 3 },
        { name: 'email.opened', count: 2 },
        { name: 'contact.unsubscribed', count: 1 },
        { name: 'email.sent', count: 1 },
        { name: 'paid', count: 1 },
      ],
    });
    expect((await get(p, '/analytics/top-events', { limit: 2 })).body.events).toEqual([
      { name: 'signup', count: 3 },
      { name: 'email.opened', count: 2 },
    ]);
    expect((await get(p, '/analytics/top-events', { kind: 'tracked' })).body.events).toEqual([
      { name: 'signup', count: 3 },
      { name: 'paid', count: 1 },
    ]);
    expect((await get(p, '/analytics/top-events', { kind: 'emitted' })).body.events).toEqual([
      { name: 'email.opened', count: 2 },
      { name: 'contact.unsubscribed', count: 1 },
      { name: 'email.sent', count: 1 },
    ]);
    expect((await get(p, '/analytics/top-events', { from: '2026-01-01', to: '2026-02-01' })).body.events).toEqual([
      { name: 'email.opened', count: 2 },
      { name: 'contact.unsubscribed', count: 1 },
    ]);
    expect((await get(camp, '/analytics/top-events')).body.events).toEqual([
      { name: 'signup', count: 4 },
      { name: 'contact.unsubscribed', count: 1 },
    ]);
    expect(fieldsOf(await get(p, '/analytics/top-events', { kind: 'some' }))).toEqual({ status: 422, fields: ['query.kind'] });
    expect(fieldsOf(await get(p, '/analytics/top-events', { from: '2026-02-01', to: '2026-01-01' }))).toEqual({ status: 422, fields: ['query.to'] });
  });
});
