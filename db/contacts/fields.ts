import type { EntityManager } from '@mikro-orm/postgresql';
import { AppError, notFound } from '../../errors';
import type { JsonValue } from '../entities/contact';
import type { FieldType } from '../entities/contact-field';
import { query, queryOne } from '../sql';

export interface FieldDescriptor {
  field: string;
  type: FieldType;
  isCustom: boolean;
  coverage: number;
}

const STANDARD_FIELDS: { field: string; type: FieldType; column: string }[] = [
  { field: 'email', type: 'string', column: 'email' },
  { field: 'subscribed', type: 'boolean', column: 'subscribed' },
  { field: 'createdAt', type: 'date', column: 'created_at' },
  { field: 'updatedAt', type: 'date', column: 'updated_at' },
];

export type ParsedField = { kind: 'standard'; field: string; column: string } | { kind: 'custom'; key: string };

/** `data.plan` and a bare `plan` both name the custom key `plan`; standard names win. */
export function parseFieldName(field: string): ParsedField {
  const standard = STANDARD_FIELDS.find((f) => f.field === field);
  if (standard) return { kind: 'standard', field: standard.field, column: standard.column };
  const key = field.startsWith('data.') ? field.slice('data.'.length) : field;
  if (!key) throw new AppError(400, 'BAD_REQUEST', 'Field name is empty', { suggestion: 'Use data.<key>, e.g. data.plan.' });
  return { kind: 'custom', key };
}

/**
 * Above this many contacts, coverage is estimated from a random sample of about this many: reading
 * every contact's keys took 230 ms at 100,000 contacts, and grows with the project. The estimate's
 * standard error is at most half a percentage point.
 */
export const COVERAGE_SAMPLE = 10_000;

/** Coverage comes from one read of the project's contacts (or a sample of them), however many keys there are. */
export async function listFields(em: EntityManager, projectId: string, sampleSize = COVERAGE_SAMPLE): Promise<FieldDescriptor[]> {
  const [registry, totalRow] = await Promise.all([
    query<{ key: string; type: FieldType }>(em, 'select key, type from contact_fields where project_id = ? order by key', [projectId]),
    queryOne<{ n: string }>(em, 'select count(*) as n from contacts where project_id = ?', [projectId]),
  ]);
  const total = Number(totalRow!.n);
  const share = total > sampleSize ? sampleSize / total : 1;
  const counts = await query<{ key: string; n: string; read: string }>(
    em,
    `with read as materialized (select data from contacts where project_id = ? and (?::float8 >= 1 or random() < ?::float8))
     select k.key, count(*) as n, (select count(*) from read) as read from read, jsonb_object_keys(read.data) as k(key) group by k.key`,
    [projectId, share, share],
  );
  const read = Number(counts[0]?.read ?? 0);
  const countByKey = new Map(counts.map((c) => [c.key, Number(c.n)]));
  const coverage = (n: number) => (read === 0 ? 0 : Math.round((n / read) * 10000) / 10000);
  return [
    ...STANDARD_FIELDS.map((f) => ({ field: f.field, type: f.type, isCustom: false, coverage: total === 0 ? 0 : 1 })),
    ...registry.map((r) => ({ field: `data.${r.key}`, type: r.type, isCustom: true, coverage: coverage(countByKey.get(r.key) ?? 0) })),
  ];
}

/** Distinct values of a field, most frequent first. */
export async function fieldValues(
  em: EntityManager,
  projectId: string,
  field: string,
  limit: number,
): Promise<{ field: string; values: JsonValue[]; count: number }> {
  const parsed = parseFieldName(field);
  const rows =
    parsed.kind === 'standard'
      ? await query<{ v: JsonValue }>(
          em,
          `select to_jsonb(${parsed.column}) as v from contacts where project_id = ? group by 1 order by count(*) desc, 1 limit ?`,
          [projectId, limit],
        )
      : await query<{ v: JsonValue }>(
          em,
          `select data -> ?::text as v from contacts where project_id = ? and data \\? ?::text group by 1 order by count(*) desc, 1 limit ?`,
          [parsed.key, projectId, parsed.key, limit],
        );
  const name = parsed.kind === 'standard' ? parsed.field : `data.${parsed.key}`;
  return { field: name, values: rows.map((r) => r.v), count: rows.length };
}

/** Resolves a deletable custom key; standard fields cannot be removed. */
export async function requireCustomField(em: EntityManager, projectId: string, field: string): Promise<string> {
  const parsed = parseFieldName(field);
  if (parsed.kind === 'standard') {
    throw new AppError(422, 'VALIDATION_ERROR', `${parsed.field} is a standard field and cannot be deleted`, {
      errors: [{ field: 'field', message: 'Only custom fields (data.<key>) can be deleted', code: 'standard_field' }],
      suggestion: 'Delete a custom field such as data.plan.',
    });
  }
  const known = await queryOne(
    em,
    `select 1 from contact_fields where project_id = ? and key = ?
     union all select 1 from contacts where project_id = ? and data \\? ?::text limit 1`,
    [projectId, parsed.key, projectId, parsed.key],
  );
  if (!known) throw notFound('field');
  return parsed.key;
}

/**
 * Removes the key from at most `batchSize` contacts. Called in a loop by the field-deletion
 * workflow so no statement holds row locks on more than one batch.
 */
export async function removeFieldBatch(em: EntityManager, projectId: string, key: string, batchSize: number): Promise<number> {
  const rows = await query(
    em,
    `update contacts set data = data - ?::text, updated_at = now()
     where id in (select id from contacts where project_id = ? and data \\? ?::text limit ? for update)
     returning id`,
    [key, projectId, key, batchSize],
  );
  return rows.length;
}

/** Drops the key from the type registry, so a later write types it afresh. */
export async function unregisterField(em: EntityManager, projectId: string, key: string): Promise<void> {
  await query(em, 'delete from contact_fields where project_id = ? and key = ?', [projectId, key]);
}
