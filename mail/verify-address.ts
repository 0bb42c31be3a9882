import { domainToASCII } from 'node:url';
import { POPULAR_DOMAINS, run as suggestEmail } from '@zootools/email-spell-checker';
import disposableDomains from 'disposable-email-domains';
import disposableWildcardDomains from 'disposable-email-domains/wildcard';
import freeEmailDomains from 'free-email-domains';
import { type DnsFailure, type DnsLookup, DnsLookupError } from './dns';

/** The `data` of POST /v1/verify. */
export interface VerifyResult {
  /** The address as given, without surrounding whitespace. */
  email: string;
  /** Format ok, the domain exists and accepts mail (MX), and it is not a disposable domain. */
  valid: boolean;
  isDisposable: boolean;
  /** A plus-address or an address at a known alias / forwarding service. */
  isAlias: boolean;
  /** The domain looks like a misspelling; `suggestion` holds the corrected address. */
  isTypo: boolean;
  isPlusAddressed: boolean;
  /** At a free webmail provider (gmail.com, yahoo.com, ...). */
  isPersonalEmail: boolean;
  domainExists: boolean;
  hasWebsite: boolean;
  hasMxRecords: boolean;
  /** One plain-words line per check that came out negative (empty when all is well). */
  reasons: string[];
  /** The typo-corrected address when isTypo, else null. */
  suggestion: string | null;
}

export interface VerifyOptions {
  /** The service's resolver (mail/dns.ts); its own timeout/tries bound each lookup. */
  dns: DnsLookup;
  /**
   * Upper bound for all lookups of one verification together; a lookup still running then
   * counts as timed out. Keeps a request short even with a slow resolver configuration.
   */
  deadlineMs?: number;
}

const DEFAULT_DEADLINE_MS = 8000;

// ---------------------------------------------------------------------------------------------
// Domain lists
// ---------------------------------------------------------------------------------------------

const DISPOSABLE = new Set(disposableDomains);
/** Every subdomain of these is disposable (the list's wildcard file); the domain itself only if listed above. */
const DISPOSABLE_WILDCARD = new Set(disposableWildcardDomains);
/**
 * free-email-domains is built by its authors from HubSpot's free-provider list merged with two
 * disposable-domain blocklists, so about 2,800 of its entries are disposable domains: those are
 * not counted as personal email (see isPersonalEmail below).
 */
const FREE = new Set(freeEmailDomains);

/**
 * Alias / forwarding services: one person's mailbox behind many generated addresses.
 * Hand-kept and short on purpose: no maintained npm list of these exists (disposable-email-domains
 * covers throwaway inboxes, not relays). Subdomains match too (`x@user.anonaddy.me`).
 */
const ALIAS_DOMAINS = [
  'privaterelay.appleid.com', // Apple Hide My Email
  'duck.com', // DuckDuckGo Email Protection
  'mozmail.com', // Firefox Relay
  'relay.firefox.com', // Firefox Relay (older addresses)
  'simplelogin.com',
  'simplelogin.co',
  'simplelogin.fr',
  'slmail.me',
  'aleeas.com',
  'silomails.com',
  'anonaddy.me',
  'anonaddy.com',
  'addy.io',
  'passmail.net', // Proton Pass aliases
  'passmail.com',
  'passinbox.com',
  'passfwd.com',
  '33mail.com',
];

/** The spell checker's own list of popular providers: a suggestion of one of these is a whole-domain match. */
const KNOWN_PROVIDERS = new Set(POPULAR_DOMAINS);

/**
 * Real providers that the spell checker's fuzzy match takes for misspellings of a popular one
 * (gmx.net → cox.net, email.com → gmail.com, protonmail.ch → protonmail.com, ...): never typos.
 * Found by running the checker over free-email-domains; only well-known providers are listed.
 */
const NOT_TYPOS = new Set([
  'gmx.net',
  'email.com',
  'usa.com',
  'aol.co.uk',
  'msn.co.uk',
  'protonmail.ch',
  'rr.com',
  'my.com',
  'cs.com',
]);

const inList = (domain: string, list: readonly string[]) => list.some((d) => domain === d || domain.endsWith(`.${d}`));

/** True when a proper parent domain of `domain` is in `set`. */
function parentIn(domain: string, set: ReadonlySet<string>): boolean {
  for (let i = domain.indexOf('.'); i !== -1; i = domain.indexOf('.', i + 1)) {
    if (set.has(domain.slice(i + 1))) return true;
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// Format
// ---------------------------------------------------------------------------------------------

const MAX_ADDRESS = 254; // RFC 5321 path limit less the angle brackets
const MAX_LOCAL = 64;
const MAX_LABEL = 63;
/** RFC 5322 dot-atom: atext runs separated by single dots. Quoted local parts are not accepted. */
const LOCAL_PART = /^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*$/;
/** A hostname label, after IDNA conversion (so lowercase ASCII). */
const LABEL = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/;

interface ParsedAddress {
  local: string;
  /** Lowercase; ASCII (punycode) when the domain converts, else the domain as typed, lowercased. */
  domain: string;
  /** Why the address is malformed, or undefined when it is well-formed. */
  formatError?: string;
}

/**
 * Splits at the last `@` and checks the format. `parsed` is missing only when there is no local
 * part or no domain to look at; otherwise the list and typo checks still run on a malformed address.
 */
function parseAddress(email: string): { parsed?: ParsedAddress; formatError?: string } {
  if (email === '') return { formatError: 'Email address is empty' };
  const at = email.lastIndexOf('@');
  if (at === -1) return { formatError: 'Email address has no @' };
  const local = email.slice(0, at);
  const typedDomain = email.slice(at + 1);
  if (local === '') return { formatError: 'Email address has nothing before the @' };
  if (typedDomain === '') return { formatError: 'Email address has no domain after the @' };

  const ascii = typedDomain.startsWith('[') ? '' : domainToASCII(typedDomain);
  const domain = ascii || typedDomain.toLowerCase();
  const parsed = (formatError?: string) => ({ parsed: { local, domain, formatError } });

  if (local.includes('@')) return parsed('Email address has more than one @');
  if (local.length + 1 + domain.length > MAX_ADDRESS) return parsed(`Email address is longer than ${MAX_ADDRESS} characters`);
  if (local.length > MAX_LOCAL) return parsed(`The part before the @ is longer than ${MAX_LOCAL} characters`);
  if (!LOCAL_PART.test(local)) return parsed('The part before the @ has characters or dots that are not allowed');
  if (!ascii) return parsed('The domain is not a valid domain name');
  const labels = ascii.split('.');
  if (labels.length < 2) return parsed('The domain has no dot (expected something like example.com)');
  if (labels.some((l) => l.length > MAX_LABEL || !LABEL.test(l)) || /^[0-9]+$/.test(labels[labels.length - 1]!)) {
    return parsed('The domain is not a valid domain name');
  }
  return parsed();
}

// ---------------------------------------------------------------------------------------------
// DNS
// ---------------------------------------------------------------------------------------------

type Outcome<T> = { ok: true; value: T } | { ok: false; kind: DnsFailure };

const found = (o: Outcome<readonly unknown[]>): boolean => o.ok && o.value.length > 0;
/** A failure that says nothing about the records (timeout, SERVFAIL, ...). */
const inconclusive = (o: Outcome<unknown>): DnsFailure | undefined => (!o.ok && o.kind !== 'not_found' ? o.kind : undefined);

function unreachable(kind: DnsFailure, what: string): string {
  return kind === 'timeout' ? `DNS lookup timed out; could not check ${what}` : `DNS lookup failed; could not check ${what}`;
}

async function lookUpDomain(dns: DnsLookup, domain: string, deadlineMs: number) {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<{ ok: false; kind: DnsFailure }>((resolve) => {
    timer = setTimeout(() => resolve({ ok: false, kind: 'timeout' }), deadlineMs);
  });
  const settle = <T>(lookup: Promise<T>): Promise<Outcome<T>> =>
    Promise.race([
      lookup.then(
        (value): Outcome<T> => ({ ok: true, value }),
        (err: unknown): Outcome<T> => ({ ok: false, kind: err instanceof DnsLookupError ? err.kind : 'error' }),
      ),
      deadline,
    ]);
  try {
    const www = `www.${domain}`;
    const [mx, ns, a, aaaa, wwwA, wwwAaaa] = await Promise.all([
      settle(dns.mx(domain)),
      settle(dns.ns(domain)),
      settle(dns.a(domain)),
      settle(dns.aaaa(domain)),
      settle(dns.a(www)),
      settle(dns.aaaa(www)),
    ]);
    return { mx, ns, a, aaaa, wwwA, wwwAaaa };
  } finally {
    clearTimeout(timer);
  }
}

interface DnsFindings {
  domainExists: boolean;
  hasMxRecords: boolean;
  hasWebsite: boolean;
  /** DNS answered the MX question: the domain provably has, or has no, mail servers. */
  mxConclusive: boolean;
  reasons: string[];
}

async function checkDns(dns: DnsLookup, domain: string, deadlineMs: number): Promise<DnsFindings> {
  const { mx, ns, a, aaaa, wwwA, wwwAaaa } = await lookUpDomain(dns, domain, deadlineMs);
  const reasons: string[] = [];

  // Any record at all proves the name exists; only "not found" everywhere proves it does not.
  const domainExists = [ns, a, aaaa, mx].some(found);
  const mxServers = mx.ok ? mx.value.filter((r) => r.exchange !== '' && r.exchange !== '.') : [];
  const hasMxRecords = mxServers.length > 0;
  const hasWebsite = [a, aaaa, wwwA, wwwAaaa].some(found);

  if (!domainExists) {
    const failure = [ns, a, aaaa, mx].map(inconclusive).find(Boolean);
    reasons.push(failure ? unreachable(failure, 'the domain') : 'Domain does not exist');
  } else {
    if (!hasMxRecords) {
      const failure = inconclusive(mx);
      if (failure) reasons.push(unreachable(failure, 'the MX records'));
      else if (found(mx)) reasons.push('Domain does not accept email (null MX record)');
      else reasons.push('Domain has no MX records');
    }
    if (!hasWebsite) {
      const failure = [a, aaaa, wwwA, wwwAaaa].map(inconclusive).find(Boolean);
      reasons.push(failure ? unreachable(failure, 'for a website') : 'Domain has no website (no A or AAAA record for it or its www.)');
    }
  }
  return { domainExists, hasMxRecords, hasWebsite, mxConclusive: !inconclusive(mx), reasons };
}

// ---------------------------------------------------------------------------------------------
// Typo
// ---------------------------------------------------------------------------------------------

/**
 * The spell checker's suggestion, kept only when it is credible. It makes two kinds: a whole
 * domain from its list of popular providers (gmial.com → gmail.com), trusted even when the typed
 * domain receives mail, since typo domains are often registered to catch exactly that mail; and a
 * guess that rewrites the TLD or second-level label by pattern, which is wrong for many real
 * domains (company.pt → company.it, shop.com.br → shop.com, uni.ac.uk → uni.co.uk, libero.it →
 * live.it), so it counts only when DNS showed that the typed domain cannot receive mail.
 */
function typoSuggestion(local: string, domain: string, typedDomainLacksMail: boolean): string | undefined {
  let suggested: string | undefined;
  try {
    suggested = suggestEmail({ email: `${local}@${domain}` })?.domain;
  } catch {
    return undefined;
  }
  if (!suggested || suggested === domain || NOT_TYPOS.has(domain)) return undefined;
  if (!KNOWN_PROVIDERS.has(suggested) && !typedDomainLacksMail) return undefined;
  // The checker lowercases the whole address; keep the local part as typed.
  return `${local}@${suggested}`;
}

// ---------------------------------------------------------------------------------------------

/**
 * Verifies one address: format, DNS (domain, MX, website; looked up concurrently), disposable,
 * free-provider and alias lists, plus-addressing and typos. Never throws for a bad address: that
 * is a result with valid false and the reasons.
 */
export async function verifyEmailAddress(input: string, opts: VerifyOptions): Promise<VerifyResult> {
  const email = input.trim();
  const { parsed, formatError: unparsable } = parseAddress(email);
  const formatError = unparsable ?? parsed?.formatError;

  const local = parsed?.local ?? '';
  const domain = parsed?.domain ?? '';
  const plusAt = local.indexOf('+');
  const isPlusAddressed = plusAt > 0 && plusAt < local.length - 1;
  const isDisposable = domain !== '' && (DISPOSABLE.has(domain) || parentIn(domain, DISPOSABLE_WILDCARD));
  const isAlias = isPlusAddressed || (domain !== '' && inList(domain, ALIAS_DOMAINS));
  const isPersonalEmail = FREE.has(domain) && !isDisposable;

  // DNS only for a well-formed address: a malformed domain cannot be asked about meaningfully.
  const dnsFindings: DnsFindings | undefined =
    formatError === undefined ? await checkDns(opts.dns, domain, opts.deadlineMs ?? DEFAULT_DEADLINE_MS) : undefined;

  const lacksMail = dnsFindings !== undefined && dnsFindings.mxConclusive && !dnsFindings.hasMxRecords;
  const suggestion = parsed ? typoSuggestion(local, domain, lacksMail) : undefined;

  const reasons: string[] = [];
  if (formatError !== undefined) reasons.push(formatError);
  if (dnsFindings) reasons.push(...dnsFindings.reasons);
  if (isDisposable) reasons.push('Disposable email domain');
  if (suggestion) reasons.push(`Did you mean ${suggestion}?`);

  const domainExists = dnsFindings?.domainExists ?? false;
  const hasMxRecords = dnsFindings?.hasMxRecords ?? false;
  return {
    email,
    valid: formatError === undefined && domainExists && hasMxRecords && !isDisposable,
    isDisposable,
    isAlias,
    isTypo: suggestion !== undefined,
    isPlusAddressed,
    isPersonalEmail,
    domainExists,
    hasWebsite: dnsFindings?.hasWebsite ?? false,
    hasMxRecords,
    reasons,
    suggestion: suggestion ?? null,
  };
}
