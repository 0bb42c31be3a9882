import type { EntityManager } from '@mikro-orm/postgresql';
import { AppError, conflict, notFound } from '../../errors';
import { type DkimKeyPair, type DnsRecord, domainRecords } from '../../mail/dkim';
import { type DomainCheck, type ReturnPathSettings, returnPathRecords } from '../../mail/domain-check';
import { newId } from '../ids';
import { query, queryOne } from '../sql';

export type DomainStatus = 'pending' | 'verified';

export interface DomainDto {
  id: string;
  projectId: string;
  domain: string;
  status: DomainStatus;
  records: DnsRecord[];
  lastCheck: DomainCheck | null;
  lastCheckedAt: string | null;
  verifiedAt: string | null;
  /** Since when its emails may go from their bounce addresses (the return-path records checked out); null: from the From address. */
  returnPathVerifiedAt: string | null;
  createdAt: string;
}

interface DomainRow {
  id: string;
  project_id: string;
  domain: string;
  status: DomainStatus;
  dkim_selector: string;
  dkim_public_key: string;
  last_check: DomainCheck | null;
  last_checked_at: Date | null;
  verified_at: Date | null;
  return_path_verified_at: Date | null;
  created_at: Date;
}

const COLUMNS =
  'id, project_id, domain, status, dkim_selector, dkim_public_key, last_check, last_checked_at, verified_at, return_path_verified_at, created_at';

const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);

function toDto(row: DomainRow): DomainDto {
  return {
    id: row.id,
    projectId: row.project_id,
    domain: row.domain,
    status: row.status,
    records: domainRecords(row.domain, row.dkim_selector, row.dkim_public_key),
    lastCheck: row.last_check,
    lastCheckedAt: iso(row.last_checked_at),
    verifiedAt: iso(row.verified_at),
    returnPathVerifiedAt: iso(row.return_path_verified_at),
    createdAt: new Date(row.created_at).toISOString(),
  };
}

export async function addDomain(em: EntityManager, projectId: string, domain: string, keys: DkimKeyPair): Promise<DomainDto> {
  const row = await queryOne<DomainRow>(
    em,
    `insert into domains (id, project_id, domain, dkim_selector, dkim_private_key, dkim_public_key)
     values (?, ?, ?, ?, ?, ?) on conflict (domain) do nothing returning ${COLUMNS}`,
    [newId('dom'), projectId, domain.toLowerCase(), keys.selector, keys.privateKeyPem, keys.publicKeyBase64],
  );
  if (!row) throw conflict(`The domain ${domain} is already registered`, 'A domain can belong to one project only; remove it there first.');
  return toDto(row);
}

export async function listDomains(em: EntityManager, projectId: string): Promise<DomainDto[]> {
  const rows = await query<DomainRow>(em, `select ${COLUMNS} from domains where project_id = ? order by id`, [projectId]);
  return rows.map(toDto);
}

export async function getDomain(em: EntityManager, projectId: string, id: string): Promise<DomainDto> {
  const row = await queryOne<DomainRow>(em, `select ${COLUMNS} from domains where project_id = ? and id = ?`, [projectId, id]);
  if (!row) throw notFound('domain');
  return toDto(row);
}

export async function deleteDomain(em: EntityManager, projectId: string, id: string): Promise<void> {
  const rows = await query(em, 'delete from domains where project_id = ? and id = ? returning id', [projectId, id]);
  if (rows.length === 0) throw notFound('domain');
}

/**
 * Stores a check. A conclusive failure puts a verified domain back to pending: its DKIM record
 * is gone, so mail signed for it would fail DKIM. The return path is judged apart: its records
 * missing only send the domain's emails from the From address again. A DNS timeout changes nothing.
 */
export async function recordDomainCheck(em: EntityManager, id: string, check: DomainCheck): Promise<DomainDto | undefined> {
  const status: DomainStatus | null = check.verified ? 'verified' : check.conclusive ? 'pending' : null;
  const row = await queryOne<DomainRow>(
    em,
    `update domains set
       last_check = ?::jsonb,
       last_checked_at = now(),
       status = coalesce(?, status),
       verified_at = case when ? = 'verified' then coalesce(verified_at, now())
                          when ? = 'pending' then null else verified_at end,
       return_path_verified_at = case when ?::boolean then coalesce(return_path_verified_at, now())
                                      when ?::boolean then null else return_path_verified_at end
     where id = ? returning ${COLUMNS}`,
    [JSON.stringify(check), status, status, status, check.returnPath.ready, check.returnPath.conclusive, id],
  );
  return row && toDto(row);
}

export interface DomainKeys {
  domain: string;
  selector: string;
  publicKeyBase64: string;
  privateKeyPem: string;
}

/** The signing material: for DNS checks and DKIM signing, never for API responses. */
export async function loadDomainKeys(em: EntityManager, domainId: string): Promise<DomainKeys | undefined> {
  const row = await queryOne<{ domain: string; dkim_selector: string; dkim_public_key: string; dkim_private_key: string }>(
    em,
    'select domain, dkim_selector, dkim_public_key, dkim_private_key from domains where id = ?',
    [domainId],
  );
  return (
    row && {
      domain: row.domain,
      selector: row.dkim_selector,
      publicKeyBase64: row.dkim_public_key,
      privateKeyPem: row.dkim_private_key,
    }
  );
}

/** Whether mail can go out from a domain now, and why: an API user should not have to infer it. */
export interface SendingState {
  allowed: boolean;
  reason: string;
}

/** Outbox mode (no SMTP_URL): nothing leaves the machine, so DNS is not needed to try sending. */
export interface SenderPolicy {
  outbox: boolean;
}

const OUTBOX_REASON =
  'Outbox mode (no SMTP_URL): mail from a registered domain is DKIM-signed and written to the local outbox (see /outbox); nothing leaves this machine. Verification is required once a relay is configured.';

export function sendingState(status: DomainStatus, policy: SenderPolicy): SendingState {
  if (status === 'verified') return { allowed: true, reason: 'The domain is verified.' };
  if (policy.outbox) return { allowed: true, reason: OUTBOX_REASON };
  return { allowed: false, reason: 'Publish the DNS records, then force a check with GET /domains/:id/verify.' };
}

/**
 * The domain as the API shows it: with whether it can send, and the return-path records, whose
 * host and MX target come from the configuration (RETURN_PATH_LABEL, INBOUND_MX_HOST).
 */
export const withSendingState = (domain: DomainDto, policy: SenderPolicy & { returnPath: ReturnPathSettings }) => ({
  ...domain,
  records: [...domain.records, ...returnPathRecords(domain.domain, policy.returnPath)],
  sending: sendingState(domain.status, policy),
});

/**
 * Mail may only be sent from a domain the project has verified (or, in outbox mode, registered):
 * returns that domain's id (whose key signs the mail), or refuses with 403 DOMAIN_NOT_VERIFIED.
 */
export async function requireVerifiedSender(em: EntityManager, projectId: string, fromEmail: string, policy: SenderPolicy): Promise<string> {
  const domain = senderDomain(fromEmail);
  const row = await queryOne<{ id: string; status: DomainStatus }>(
    em,
    'select id, status from domains where project_id = ? and domain = ?',
    [projectId, domain],
  );
  return acceptedSenderDomain(domain, row, policy);
}

/** The project mail to an address at `domain` goes to: the one that verified the domain. */
export async function projectOfVerifiedDomain(em: EntityManager, domain: string): Promise<string | undefined> {
  const row = await queryOne<{ project_id: string }>(em, `select project_id from domains where domain = ? and status = 'verified'`, [domain.toLowerCase()]);
  return row?.project_id;
}

export const senderDomain = (fromEmail: string) => fromEmail.slice(fromEmail.lastIndexOf('@') + 1).toLowerCase();

/** The domain row's id when mail may go out from it (read by the caller, e.g. with other facts in one statement); else 403. */
export function acceptedSenderDomain(domain: string, row: { id: string; status: DomainStatus } | undefined, policy: SenderPolicy): string {
  if (row && sendingState(row.status, policy).allowed) return row.id;
  throw new AppError(
    403,
    'DOMAIN_NOT_VERIFIED',
    row ? `The domain ${domain} is not verified yet` : `The domain ${domain} is not registered in this project`,
    {
      suggestion: row
        ? 'Publish the DNS records from POST /domains, then force a check with GET /domains/:id/verify.'
        : 'Add it with POST /domains and publish the DNS records it returns.',
    },
  );
}
