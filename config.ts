import { createPrivateKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
import { z } from 'zod';
import { smtpOptionsFromUrl } from './mail/smtp-pool';

const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v.trim()));

const HOST_NAME = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/i;

const boolFlag = z
  .enum(['true', 'false', '1', '0', ''])
  .optional()
  .transform((v) => v === 'true' || v === '1');

/**
 * Every setting the service reads from the environment. Unset optional values mean
 * "use the embedded default" (see docs/configuration.md).
 */
const envSchema = z.object({
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  PUBLIC_URL: optionalString.pipe(z.url().optional()),
  DATABASE_URL: optionalString.pipe(z.url().optional()),
  DATA_DIR: z.string().default('.data'),
  EMBEDDED_POSTGRES_PORT: z.coerce.number().int().min(1).max(65535).default(54329),
  TEMPORAL_ADDRESS: optionalString,
  TEMPORAL_NAMESPACE: z.string().min(1).default('default'),
  TEMPORAL_TASK_QUEUE: z.string().min(1).default('tidings'),
  TEMPORAL_CLI_PATH: optionalString,
  TEMPORAL_DEV_PORT: z.coerce.number().int().min(1).max(65535).default(7233),
  TEMPORAL_UI_PORT: z.coerce.number().int().min(1).max(65535).default(8233),
  TEMPORAL_UI_URL: optionalString.pipe(z.url().optional()),
  SMTP_URL: optionalString.superRefine((url, ctx) => {
    if (url === undefined) return;
    try {
      smtpOptionsFromUrl(url);
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: (err as Error).message });
    }
  }),
  DNS_SERVERS: optionalString.transform((v) =>
    v === undefined ? [] : v.split(',').map((s) => s.trim()).filter(Boolean),
  ),
  JWT_SECRET: optionalString.pipe(z.string().min(32, 'JWT_SECRET must be at least 32 characters').optional()),
  DOMAIN_CHECK_INTERVAL_SECONDS: z.coerce.number().int().min(1).default(300),
  DOMAIN_RECHECK_VERIFIED_SECONDS: z.coerce.number().int().min(1).default(3600),
  SEND_RETRY_MAX_INTERVAL_SECONDS: z.coerce.number().int().min(1).default(300),
  SEND_RETRY_FOR_SECONDS: z.coerce.number().int().min(1).default(3 * 24 * 3600),
  JOURNEY_TIME_SCALE: z.coerce.number().positive().max(1).default(1),
  WEBHOOK_ALLOW_PRIVATE_TARGETS: boolFlag,
  RATE_LIMIT_PER_MINUTE: z.coerce.number().int().min(1).default(1000),
  DATABASE_POOL_MAX: z.coerce.number().int().min(2).max(500).default(20),
  WORKER_NICENESS: z.coerce.number().int().min(0).max(19).default(10),
  SEND_THROTTLE_PER_SECOND: z.coerce.number().positive().default(100),
  // Between two batches the lanes drain and the next activity starts (a workflow task, the send
  // lock, the template, the first page): at 500 that gap cost a campaign of 20,000 about a fifth
  // of its rate (bench/campaign.ts).
  CAMPAIGN_BATCH_SIZE: z.coerce.number().int().min(1).max(100_000).default(5000),
  DELIVERY_ENGINES: z.coerce.number().int().min(1).max(64).default(2),
  DELIVERY_CONCURRENCY: z.coerce.number().int().min(1).max(500).default(16),
  DELIVERY_LEASE_SECONDS: z.coerce.number().int().min(5).default(60),
  TRUST_PROXY: optionalString,
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  DISABLE_SIGNUPS: boolFlag,
  NOTIFY_SECRET: optionalString.pipe(z.string().min(16, 'NOTIFY_SECRET must be at least 16 characters').optional()),
  SYSTEM_EMAIL_FROM: optionalString,
  SYSTEM_DKIM_SELECTOR: optionalString.pipe(z.string().regex(/^[a-z0-9][a-z0-9-]*$/i, 'Must be a DNS label').optional()),
  SYSTEM_DKIM_KEY_FILE: optionalString,
  VERIFY_TOKEN_TTL_MINUTES: z.coerce.number().int().min(1).default(24 * 60),
  RESET_TOKEN_TTL_MINUTES: z.coerce.number().int().min(1).default(60),
  LOGIN_ATTEMPTS_PER_MINUTE: z.coerce.number().int().min(1).default(10),
  OAUTH_GITHUB_CLIENT_ID: optionalString,
  OAUTH_GITHUB_CLIENT_SECRET: optionalString,
  OAUTH_GITHUB_URL: optionalString.pipe(z.url().optional()),
  OAUTH_GOOGLE_CLIENT_ID: optionalString,
  OAUTH_GOOGLE_CLIENT_SECRET: optionalString,
  OAUTH_GOOGLE_URL: optionalString.pipe(z.url().optional()),
  STRIPE_SECRET_KEY: optionalString,
  STRIPE_WEBHOOK_SECRET: optionalString,
  STRIPE_PRICE_ID: optionalString,
  STRIPE_API_URL: optionalString.pipe(z.url().optional()),
  S3_BUCKET: optionalString,
  S3_ENDPOINT: optionalString.pipe(z.url().optional()),
  S3_REGION: z.string().min(1).default('us-east-1'),
  S3_ACCESS_KEY_ID: optionalString,
  S3_SECRET_ACCESS_KEY: optionalString,
  S3_FORCE_PATH_STYLE: boolFlag,
  S3_PUBLIC_URL: optionalString.pipe(z.url().optional()),
  INBOUND_SMTP_PORT: optionalString.transform((v) => (v === undefined ? undefined : Number(v))).pipe(z.number().int().min(0).max(65535).optional()),
  INBOUND_SMTP_HOST: optionalString,
  INBOUND_MX_HOST: optionalString.pipe(z.string().regex(HOST_NAME, 'Must be a host name').optional()),
  INBOUND_TLS_KEY_FILE: optionalString,
  INBOUND_TLS_CERT_FILE: optionalString,
  INBOUND_MAX_MESSAGE_BYTES: z.coerce.number().int().min(1024).max(100 * 1024 * 1024).default(10 * 1024 * 1024),
  RETURN_PATH_LABEL: z.string().regex(/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/, 'Must be one lower-case DNS label').default('bounces'),
});

export type Config = {
  nodeEnv: 'development' | 'production' | 'test';
  port: number;
  /** Base URL the service is reached at; links in mail point here. */
  publicUrl: string;
  /** Undefined: start or reuse the embedded PostgreSQL under dataDir. */
  databaseUrl: string | undefined;
  dataDir: string;
  embeddedPostgresPort: number;
  temporal: {
    /** Undefined: start or reuse a local Temporal dev server. */
    address: string | undefined;
    namespace: string;
    taskQueue: string;
    cliPath: string | undefined;
    /** Port of the local dev server started when no address is configured. */
    devPort: number;
    uiPort: number;
    /** Where a browser reaches the Temporal Web UI; default: the local dev server's, unknown with TEMPORAL_ADDRESS. */
    uiUrl: string | undefined;
  };
  /** Undefined: mail is written to DATA_DIR/outbox as .eml files instead of being sent. */
  smtpUrl: string | undefined;
  /**
   * No SMTP_URL: nothing leaves the machine, so a registered domain counts as verified for sending
   * (still DKIM-signed with its own key) and the outbox can be browsed at /outbox.
   */
  outbox: boolean;
  /** Longest pause between delivery attempts while the relay refuses or is unreachable. */
  sendRetryMaxIntervalSeconds: number;
  /** How long after it was written an email deferred by the relay (4xx) is still tried; then it soft-bounces. */
  sendRetryForSeconds: number;
  /** Recipients per campaign batch (one activity), for campaigns started from now on. */
  campaignBatchSize: number;
  dnsServers: string[];
  /** Re-check periods of the domain verification workflow (pending / verified). */
  domainCheck: { pendingIntervalSeconds: number; verifiedIntervalSeconds: number };
  jwtSecret: string | undefined;
  /**
   * Multiplies every journey duration (DELAY, WAIT_FOR_EVENT timeouts): 1 in production; tests
   * shrink minutes to fractions of a second. Taken into each execution at its start.
   */
  journeyTimeScale: number;
  /** WEBHOOK steps may call private, loopback and link-local addresses (tests only). */
  webhookAllowPrivateTargets: boolean;
  rateLimitPerMinute: number;
  /** Connections each process may hold to the database: API and worker replicas times this must fit PostgreSQL's max_connections. */
  databasePoolMax: number;
  /** How much the worker lowers its CPU priority (cli/priority.ts): 0 leaves it as started. */
  workerNiceness: number;
  /**
   * Campaign emails per second per project (db/messages/send-throttle.ts): a reservation clock in Postgres
   * shared by every worker; a project's own `send_throttles.rate_per_second` overrides it.
   */
  sendThrottlePerSecond: number;
  /**
   * The delivery engine's settings (temporal/delivery/tuning.ts reads them with the rest of its
   * tuning): engine workflows per task queue, emails each has in flight, and how long a claim
   * holds before another engine may take the email over.
   */
  delivery: { engines: number; concurrency: number; leaseSeconds: number };
  logLevel: string;
  /**
   * Express "trust proxy": whose X-Forwarded-For is believed for the client IP (login limits per IP).
   * Default: a proxy on the same host only; behind a load balancer give its address or hop count.
   */
  trustProxy: string | number | boolean;
  /**
   * TRUST_PROXY was given: the operator says a proxy stands in front, so requests may arrive on
   * loopback from anyone (the local-only /outbox pages refuse every request then).
   */
  trustProxySet: boolean;
  disableSignups: boolean;
  /** Shared secret of POST /webhooks/notify (delivery, bounce, complaint); unset: the endpoint is off (404). */
  notifySecret: string | undefined;
  /**
   * Every email's envelope sender is a signed bounce address at `<label>.<sending domain>`
   * (mail/inbound/bounce-address.ts), once that host's MX (pointing at `mxHost`) and SPF records check out.
   */
  returnPath: { label: string; mxHost: string };
  /** The SMTP receiver of bounces, complaints and replies (mail/inbound/receiver.ts); undefined: off. */
  inbound:
    | {
        port: number;
        /** Address to listen on; undefined: every interface. */
        host: string | undefined;
        /** Offered with STARTTLS when set. */
        tls: { key: string; cert: string } | undefined;
        maxMessageBytes: number;
      }
    | undefined;
  auth: {
    /** Sender of verification and password-reset mail. */
    systemFrom: string;
    /** DKIM key that signs that mail, for the sender's domain; undefined: unsigned. */
    systemDkim: { domain: string; selector: string; privateKeyPem: string } | undefined;
    verifyTokenTtlMinutes: number;
    resetTokenTtlMinutes: number;
    /** Login attempts per minute, counted per account and per client IP. */
    loginAttemptsPerMinute: number;
  };
  /** Sign-in providers; each is on when its client id and secret are set. */
  oauth: Record<'github' | 'google', { clientId: string; clientSecret: string; baseUrl: string | undefined } | undefined>;
  /** Undefined: billing is off (no payment provider); caps and consumption still work. */
  stripe: { secretKey: string; webhookSecret: string; priceId: string; apiUrl: string | undefined } | undefined;
  /** Undefined: uploads are kept under DATA_DIR/uploads and served by the API. */
  s3:
    | {
        bucket: string;
        endpoint: string | undefined;
        region: string;
        accessKeyId: string | undefined;
        secretAccessKey: string | undefined;
        forcePathStyle: boolean;
        /** Base URL objects are publicly reachable at; default: the bucket's own URL. */
        publicUrl: string | undefined;
      }
    | undefined;
};

export class ConfigError extends Error {}

/** Express's "trust proxy" value: a hop count, true/false, or addresses and subnets as written. */
const trustProxyOf = (value: string): string | number | boolean =>
  /^\d+$/.test(value) ? Number(value) : value === 'true' ? true : value === 'false' ? false : value;

/** Reads and validates the environment once; entry points call this and pass the result down. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = envSchema.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`);
  }
  const e = parsed.data;
  const publicUrl = (e.PUBLIC_URL ?? `http://localhost:${e.PORT}`).replace(/\/+$/, '');
  const stripeParts = [e.STRIPE_SECRET_KEY, e.STRIPE_WEBHOOK_SECRET, e.STRIPE_PRICE_ID];
  if (stripeParts.some(Boolean) && !stripeParts.every(Boolean)) {
    throw new ConfigError(
      'Invalid configuration:\n  STRIPE_SECRET_KEY, STRIPE_WEBHOOK_SECRET and STRIPE_PRICE_ID are set together or not at all',
    );
  }
  const systemFrom = e.SYSTEM_EMAIL_FROM ?? `Tidings <no-reply@${new URL(publicUrl).hostname}>`;
  return {
    nodeEnv: e.NODE_ENV,
    port: e.PORT,
    publicUrl,
    databaseUrl: e.DATABASE_URL,
    dataDir: e.DATA_DIR,
    embeddedPostgresPort: e.EMBEDDED_POSTGRES_PORT,
    temporal: {
      address: e.TEMPORAL_ADDRESS,
      namespace: e.TEMPORAL_NAMESPACE,
      taskQueue: e.TEMPORAL_TASK_QUEUE,
      cliPath: e.TEMPORAL_CLI_PATH,
      devPort: e.TEMPORAL_DEV_PORT,
      uiPort: e.TEMPORAL_UI_PORT,
      uiUrl: (e.TEMPORAL_UI_URL ?? (e.TEMPORAL_ADDRESS ? undefined : `http://localhost:${e.TEMPORAL_UI_PORT}`))?.replace(/\/+$/, ''),
    },
    smtpUrl: e.SMTP_URL,
    outbox: e.SMTP_URL === undefined,
    sendRetryMaxIntervalSeconds: e.SEND_RETRY_MAX_INTERVAL_SECONDS,
    sendRetryForSeconds: e.SEND_RETRY_FOR_SECONDS,
    campaignBatchSize: e.CAMPAIGN_BATCH_SIZE,
    dnsServers: e.DNS_SERVERS,
    domainCheck: {
      pendingIntervalSeconds: e.DOMAIN_CHECK_INTERVAL_SECONDS,
      verifiedIntervalSeconds: e.DOMAIN_RECHECK_VERIFIED_SECONDS,
    },
    jwtSecret: e.JWT_SECRET,
    journeyTimeScale: e.JOURNEY_TIME_SCALE,
    webhookAllowPrivateTargets: e.WEBHOOK_ALLOW_PRIVATE_TARGETS,
    rateLimitPerMinute: e.RATE_LIMIT_PER_MINUTE,
    databasePoolMax: e.DATABASE_POOL_MAX,
    workerNiceness: e.WORKER_NICENESS,
    sendThrottlePerSecond: e.SEND_THROTTLE_PER_SECOND,
    delivery: { engines: e.DELIVERY_ENGINES, concurrency: e.DELIVERY_CONCURRENCY, leaseSeconds: e.DELIVERY_LEASE_SECONDS },
    logLevel: e.LOG_LEVEL,
    trustProxy: trustProxyOf(e.TRUST_PROXY ?? 'loopback'),
    trustProxySet: e.TRUST_PROXY !== undefined,
    disableSignups: e.DISABLE_SIGNUPS,
    notifySecret: e.NOTIFY_SECRET,
    returnPath: { label: e.RETURN_PATH_LABEL, mxHost: (e.INBOUND_MX_HOST ?? new URL(publicUrl).hostname).toLowerCase() },
    inbound:
      e.INBOUND_SMTP_PORT === undefined
        ? undefined
        : {
            port: e.INBOUND_SMTP_PORT,
            host: e.INBOUND_SMTP_HOST,
            tls: inboundTls(e.INBOUND_TLS_KEY_FILE, e.INBOUND_TLS_CERT_FILE),
            maxMessageBytes: e.INBOUND_MAX_MESSAGE_BYTES,
          },
    auth: {
      systemFrom,
      systemDkim: systemDkim(e.SYSTEM_DKIM_SELECTOR, e.SYSTEM_DKIM_KEY_FILE, systemFrom),
      verifyTokenTtlMinutes: e.VERIFY_TOKEN_TTL_MINUTES,
      resetTokenTtlMinutes: e.RESET_TOKEN_TTL_MINUTES,
      loginAttemptsPerMinute: e.LOGIN_ATTEMPTS_PER_MINUTE,
    },
    oauth: {
      github: oauthClient('GITHUB', e.OAUTH_GITHUB_CLIENT_ID, e.OAUTH_GITHUB_CLIENT_SECRET, e.OAUTH_GITHUB_URL),
      google: oauthClient('GOOGLE', e.OAUTH_GOOGLE_CLIENT_ID, e.OAUTH_GOOGLE_CLIENT_SECRET, e.OAUTH_GOOGLE_URL),
    },
    stripe: e.STRIPE_SECRET_KEY
      ? {
          secretKey: e.STRIPE_SECRET_KEY,
          webhookSecret: e.STRIPE_WEBHOOK_SECRET!,
          priceId: e.STRIPE_PRICE_ID!,
          apiUrl: e.STRIPE_API_URL,
        }
      : undefined,
    s3: e.S3_BUCKET
      ? {
          bucket: e.S3_BUCKET,
          endpoint: e.S3_ENDPOINT,
          region: e.S3_REGION,
          accessKeyId: e.S3_ACCESS_KEY_ID,
          secretAccessKey: e.S3_SECRET_ACCESS_KEY,
          forcePathStyle: e.S3_FORCE_PATH_STYLE,
          publicUrl: e.S3_PUBLIC_URL?.replace(/\/+$/, ''),
        }
      : undefined,
  };
}

/** SYSTEM_DKIM_SELECTOR and SYSTEM_DKIM_KEY_FILE together: the key is read and checked here, once. */
function systemDkim(selector: string | undefined, keyFile: string | undefined, systemFrom: string): Config['auth']['systemDkim'] {
  if (!selector && !keyFile) return undefined;
  if (!selector || !keyFile) throw new ConfigError('Invalid configuration:\n  SYSTEM_DKIM_SELECTOR and SYSTEM_DKIM_KEY_FILE are set together or not at all');
  const domain = /@([^\s@>]+)>?\s*$/.exec(systemFrom)?.[1]?.toLowerCase();
  if (!domain) throw new ConfigError(`Invalid configuration:\n  SYSTEM_EMAIL_FROM has no domain to sign for: ${systemFrom}`);
  let privateKeyPem: string;
  try {
    privateKeyPem = readFileSync(keyFile, 'utf8');
    if (createPrivateKey(privateKeyPem).asymmetricKeyType !== 'rsa') throw new Error('not an RSA key');
  } catch (err) {
    throw new ConfigError(`Invalid configuration:\n  SYSTEM_DKIM_KEY_FILE ${keyFile}: not a readable RSA private key in PEM (${(err as Error).message})`);
  }
  return { domain, selector, privateKeyPem };
}

/** INBOUND_TLS_KEY_FILE and INBOUND_TLS_CERT_FILE together: read and checked here, once. */
function inboundTls(keyFile: string | undefined, certFile: string | undefined): { key: string; cert: string } | undefined {
  if (!keyFile && !certFile) return undefined;
  if (!keyFile || !certFile) throw new ConfigError('Invalid configuration:\n  INBOUND_TLS_KEY_FILE and INBOUND_TLS_CERT_FILE are set together or not at all');
  try {
    const tls = { key: readFileSync(keyFile, 'utf8'), cert: readFileSync(certFile, 'utf8') };
    createSecureContext(tls);
    return tls;
  } catch (err) {
    throw new ConfigError(`Invalid configuration:\n  INBOUND_TLS_KEY_FILE / INBOUND_TLS_CERT_FILE: not a readable key and certificate in PEM (${(err as Error).message})`);
  }
}

function oauthClient(name: string, clientId: string | undefined, clientSecret: string | undefined, baseUrl: string | undefined) {
  if (!clientId && !clientSecret) return undefined;
  if (!clientId || !clientSecret) {
    throw new ConfigError(`Invalid configuration:\n  OAUTH_${name}_CLIENT_ID and OAUTH_${name}_CLIENT_SECRET are set together or not at all`);
  }
  return { clientId, clientSecret, baseUrl: baseUrl?.replace(/\/+$/, '') };
}
