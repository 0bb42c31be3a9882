import type { Config } from '../../config';
import type { ReturnPath } from '../../mail/compose';
import { BounceAddresses } from '../../mail/inbound/bounce-address';
import type { Orm } from '../orm';
import { bounceSigningSecret } from '../projects/secrets';
import { query } from '../sql';
import { senderDomain } from './domains';

/** The bounce addresses of this installation: signed with its secret, at RETURN_PATH_LABEL. */
export async function loadBounceAddresses(orm: Orm, config: Pick<Config, 'jwtSecret' | 'returnPath'>): Promise<BounceAddresses> {
  return new BounceAddresses(await bounceSigningSecret(orm.em.fork(), config.jwtSecret), config.returnPath.label);
}

/**
 * The mailer's return paths, loaded and kept fresh: reloaded as often as pending domains are
 * checked (at most every minute), since only a check changes the answer.
 */
export function startReturnPaths(
  orm: Orm,
  bounces: BounceAddresses,
  config: Pick<Config, 'domainCheck'>,
  onError: (err: unknown) => void,
): Promise<ReturnPathDomains> {
  return new ReturnPathDomains(orm, bounces).start(Math.min(config.domainCheck.pendingIntervalSeconds, 60) * 1000, onError);
}

/**
 * Which sending domains take bounce addresses: the verified ones whose return-path records checked
 * out (domains.return_path_verified_at). Held in memory and reloaded on a period, since the send
 * path asks for every email and the answer changes only with a domain check. A domain without
 * them keeps sending from its From address: a MAIL FROM at a host with no MX is refused by many
 * receivers, and one without SPF fails the bulk senders' rules.
 */
export class ReturnPathDomains implements ReturnPath {
  private ready = new Set<string>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly orm: Orm,
    private readonly addresses: BounceAddresses,
  ) {}

  mailFrom(emailId: string, fromAddress: string): string | undefined {
    const domain = senderDomain(fromAddress);
    return this.ready.has(domain) ? this.addresses.addressFor(emailId, domain) : undefined;
  }

  async refresh(): Promise<void> {
    const rows = await query<{ domain: string }>(
      this.orm.em.fork(),
      `select domain from domains where status = 'verified' and return_path_verified_at is not null`,
      [],
    );
    this.ready = new Set(rows.map((r) => r.domain));
  }

  /** Loads once, then every `periodMs`; a failed reload keeps the previous answer. */
  async start(periodMs: number, onError: (err: unknown) => void): Promise<this> {
    await this.refresh();
    this.timer = setInterval(() => void this.refresh().catch(onError), periodMs);
    this.timer.unref();
    return this;
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
