import { createHmac } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import { StringDecoder } from 'node:string_decoder';
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Config } from '../../config';
import type { Orm } from '../../db/orm';
import { queryOne } from '../../db/sql';
import { type StepConfigs, stepConfigSchemas } from '../../db/journeys/steps';
import type { DnsLookup } from '../../mail/dns';
import { compileTemplate, TemplateSyntaxError, templateVariables } from '../../mail/render';
import { type CheckedTarget, checkWebhookTarget, pinnedLookup, WebhookResolveError, WebhookTargetRefused } from './webhook-guard';

/**
 * WEBHOOK steps: one signed HTTP request per call.
 *
 * Templates (url, header values, body) are Handlebars with HTML escaping off and see:
 *   id, email, subscribed, locale, svc_id, svc_email, data, every data key at the top level
 *     (the contact variables of email templates; the unsubscribe / subscribe / manage URLs are not
 *     available here and render empty),
 *   contact    {id, email, subscribed, data}
 *   context    the execution context (trigger event data merged with awaited events' data)
 *   workflow   {id}
 *   execution  {id, stepId}
 * The last four win over data keys of the same name. Values are inserted as they are (no URL or JSON
 * escaping); for structured data use the default body.
 *
 * Request: method from the config (default POST); GET sends no body. Default body (no `body` in the
 * config): JSON {contact:{id,email,subscribed,data}, workflow:{id}, execution:{id,stepId}, context}
 * with Content-Type application/json. A custom body gets the configured Content-Type, else
 * application/json when it parses as JSON, else text/plain. Always sent (configured headers of these
 * names are replaced): X-Signature: sha256=<hex HMAC-SHA256 of the exact body bytes, key = the
 * project's webhook secret>, X-Tidings-Execution: <executionId>, X-Tidings-Step: <stepId> (with the
 * execution id, a receiver's key to drop retried deliveries), User-Agent: Tidings-Webhook/1.
 * Redirects are not followed.
 *
 * Outcome: 2xx / 3xx → {status, body: the first 2 KB as text}. Retried by Temporal (plain Errors):
 * 5xx, 408, 429, timeouts, network and DNS failures. Not retried (ApplicationFailure.nonRetryable):
 * other 4xx → 'WebhookClientError'; an invalid rendered URL / header, a non-http(s) scheme or a
 * private target → 'WebhookRefused'; a template that doesn't compile → 'WebhookTemplateError';
 * a missing project or contact → 'ContactNotFound' / 'ProjectNotFound'; a config that fails
 * validation → 'InvalidStepConfig'. Failure details carry {status, body} where there was a response.
 */

export const WEBHOOK_TIMEOUT_MS = 10_000;
export const WEBHOOK_RESPONSE_LIMIT_BYTES = 2048;
export const WEBHOOK_USER_AGENT = 'Tidings-Webhook/1';

export interface WebhookDeps {
  orm: Orm;
  config: Pick<Config, 'webhookAllowPrivateTargets'>;
  dns: DnsLookup;
  /** Whole-request timeout; default 10 s (tests shorten it). */
  timeoutMs?: number;
}

export interface CallWebhookInput {
  projectId: string;
  contactId: string;
  workflowId: string;
  executionId: string;
  stepId: string;
  config: StepConfigs['WEBHOOK'];
  context: Record<string, unknown>;
}

export interface WebhookResult {
  status: number;
  body: string;
}

/** A retryable failure (thrown as a plain Error so Temporal retries it with backoff). */
export class WebhookError extends Error {
  constructor(
    message: string,
    override readonly name: 'WebhookServerError' | 'WebhookTimeout' | 'WebhookNetworkError',
    readonly status?: number,
  ) {
    super(message);
  }
}

/** Headers the service sets itself; configured headers with these names are dropped. */
const MANAGED_HEADERS = new Set([
  'x-signature',
  'x-tidings-execution',
  'x-tidings-step',
  'user-agent',
  'host',
  'content-length',
  'transfer-encoding',
  'connection',
]);
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
// Node refuses these in values (ERR_INVALID_CHAR): CR, LF, NUL and other controls but tab.
const BAD_HEADER_VALUE = /[\0-\x08\x0a-\x1f\x7f]/;

export const signWebhookBody = (secret: string, body: Buffer | string) =>
  `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;

const refused = (message: string) => ApplicationFailure.nonRetryable(message, 'WebhookRefused');

function compile(source: string, what: string) {
  try {
    return compileTemplate(source, { escapeHtml: false });
  } catch (err) {
    if (err instanceof TemplateSyntaxError) throw ApplicationFailure.nonRetryable(`Webhook ${what} template: ${err.message}`, 'WebhookTemplateError');
    throw err;
  }
}

/** The activity's cancellation signal when running inside Temporal, else none (direct calls in tests). */
function activityCancellation(): AbortSignal | undefined {
  try {
    return Context.current().cancellationSignal;
  } catch {
    return undefined;
  }
}

export function createWebhookActivities(deps: WebhookDeps) {
  const timeoutMs = deps.timeoutMs ?? WEBHOOK_TIMEOUT_MS;

  return {
    async callWebhook(input: CallWebhookInput): Promise<WebhookResult> {
      const parsed = stepConfigSchemas.WEBHOOK.safeParse(input.config);
      if (!parsed.success) {
        throw ApplicationFailure.nonRetryable(`Invalid WEBHOOK config: ${parsed.error.issues.map((i) => i.message).join('; ')}`, 'InvalidStepConfig');
      }
      const config = parsed.data;

      const row = await queryOne<{
        webhook_secret: string;
        id: string | null;
        email: string;
        subscribed: boolean;
        data: Record<string, unknown>;
      }>(
        deps.orm.em.fork(),
        `select p.webhook_secret, c.id, c.email, c.subscribed, c.data
         from projects p left join contacts c on c.project_id = p.id and c.id = ?
         where p.id = ?`,
        [input.contactId, input.projectId],
      );
      if (!row) throw ApplicationFailure.nonRetryable(`Project ${input.projectId} not found`, 'ProjectNotFound');
      if (row.id === null) throw ApplicationFailure.nonRetryable(`Contact ${input.contactId} not found`, 'ContactNotFound');
      const contact = { id: row.id, email: row.email, subscribed: row.subscribed, data: row.data ?? {} };
      const context = input.context ?? {};
      const workflow = { id: input.workflowId };
      const execution = { id: input.executionId, stepId: input.stepId };
      const vars = {
        ...templateVariables(contact, { unsubscribeUrl: '', subscribeUrl: '', manageUrl: '' }),
        contact,
        context,
        workflow,
        execution,
      };

      // Everything that can be wrong with the step itself is found before any request goes out.
      const url = compile(config.url, 'url').render(vars).trim();
      const headers: Record<string, string> = {};
      for (const [name, source] of Object.entries(config.headers ?? {})) {
        if (!HEADER_NAME.test(name)) throw refused(`Invalid webhook header name ${JSON.stringify(name)}`);
        if (MANAGED_HEADERS.has(name.toLowerCase())) continue;
        const value = compile(source, `header ${name}`).render(vars);
        if (BAD_HEADER_VALUE.test(value)) throw refused(`Webhook header ${name} renders to a value with control characters`);
        headers[name] = value;
      }
      const hasBody = config.method !== 'GET';
      let body = '';
      if (hasBody) {
        const userType = Object.keys(headers).find((h) => h.toLowerCase() === 'content-type');
        if (config.body === undefined) {
          if (userType) delete headers[userType];
          body = JSON.stringify({ contact, workflow, execution, context });
          headers['Content-Type'] = 'application/json';
        } else {
          body = compile(config.body, 'body').render(vars);
          if (!userType) headers['Content-Type'] = looksLikeJson(body) ? 'application/json' : 'text/plain; charset=utf-8';
        }
      }
      const bytes = Buffer.from(body, 'utf8');
      headers['X-Signature'] = signWebhookBody(row.webhook_secret, bytes);
      headers['X-Tidings-Execution'] = input.executionId;
      headers['X-Tidings-Step'] = input.stepId;
      headers['User-Agent'] = WEBHOOK_USER_AGENT;
      if (hasBody) headers['Content-Length'] = String(bytes.length);

      let target: CheckedTarget;
      try {
        target = await checkWebhookTarget(url, { dns: deps.dns, allowPrivate: deps.config.webhookAllowPrivateTargets });
      } catch (err) {
        if (err instanceof WebhookTargetRefused) throw refused(err.message);
        if (err instanceof WebhookResolveError) throw new WebhookError(err.message, 'WebhookNetworkError');
        throw err;
      }

      const response = await send(target, { method: config.method, headers, body: hasBody ? bytes : undefined, timeoutMs });
      const { status } = response;
      const where = `${config.method} ${target.url.origin}${target.url.pathname}`;
      if (status >= 200 && status < 400) return response;
      const snippet = response.body.slice(0, 200);
      if (status >= 500 || status === 408 || status === 429) {
        throw new WebhookError(`Webhook ${where} answered ${status}: ${snippet}`, 'WebhookServerError', status);
      }
      if (status >= 400) {
        throw ApplicationFailure.nonRetryable(`Webhook ${where} answered ${status}: ${snippet}`, 'WebhookClientError', response);
      }
      // 1xx as a final status is not valid HTTP.
      throw new WebhookError(`Webhook ${where} answered ${status}`, 'WebhookServerError', status);
    },
  };
}

export type WebhookActivities = ReturnType<typeof createWebhookActivities>;

function looksLikeJson(text: string): boolean {
  const t = text.trim();
  if (!/^[[{]/.test(t)) return false;
  try {
    JSON.parse(t);
    return true;
  } catch {
    return false;
  }
}

/**
 * One request over node's http(s), connecting only to the checked address (the `lookup` pins it;
 * a literal IP skips lookup and is the checked address itself). Host header and TLS name stay the
 * URL's host. Its own agent, so no pooled socket from another resolution is reused.
 */
function send(
  target: CheckedTarget,
  req: { method: string; headers: Record<string, string>; body: Buffer | undefined; timeoutMs: number },
): Promise<WebhookResult> {
  const timeout = AbortSignal.timeout(req.timeoutMs);
  const cancelled = activityCancellation();
  const signal = cancelled && typeof AbortSignal.any === 'function' ? AbortSignal.any([timeout, cancelled]) : timeout;
  const { url } = target;
  const describe = `${req.method} ${url.origin}${url.pathname}`;

  return new Promise<WebhookResult>((resolve, reject) => {
    let settled = false;
    const finish = (fn: () => void) => {
      if (settled) return;
      settled = true;
      fn();
    };
    const fail = (err: unknown) =>
      finish(() => {
        if (timeout.aborted) reject(new WebhookError(`Webhook ${describe} timed out after ${req.timeoutMs} ms`, 'WebhookTimeout'));
        else if (cancelled?.aborted) reject(cancelled.reason instanceof Error ? cancelled.reason : new Error('Webhook call cancelled'));
        else reject(new WebhookError(`Webhook ${describe} failed: ${(err as Error)?.message ?? String(err)}`, 'WebhookNetworkError'));
      });

    const options: https.RequestOptions = {
      protocol: url.protocol,
      host: target.hostname,
      port: url.port === '' ? undefined : Number(url.port),
      path: `${url.pathname}${url.search}`,
      method: req.method,
      headers: req.headers,
      signal,
      agent: false,
      lookup: pinnedLookup(target.address, target.family),
      family: target.family,
    };
    if (url.username || url.password) options.auth = `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`;

    let request: http.ClientRequest;
    try {
      request = (url.protocol === 'https:' ? https : http).request(options, (res) => {
        const decoder = new StringDecoder('utf8');
        let text = '';
        let received = 0;
        const done = () =>
          finish(() => {
            resolve({ status: res.statusCode ?? 0, body: text });
            res.destroy();
          });
        res.on('data', (chunk: Buffer) => {
          const room = WEBHOOK_RESPONSE_LIMIT_BYTES - received;
          if (room > 0) {
            const part = chunk.subarray(0, room);
            received += part.length;
            // write() holds back a multi-byte character cut at the limit instead of mangling it.
            text += decoder.write(part);
          }
          if (received >= WEBHOOK_RESPONSE_LIMIT_BYTES) done();
        });
        res.on('end', done);
        res.on('error', fail);
        res.on('aborted', () => fail(new Error('response aborted')));
      });
    } catch (err) {
      // Options node refuses synchronously (e.g. a header it won't send): the step's fault.
      reject(refused(`Webhook request refused: ${(err as Error).message}`));
      return;
    }
    request.on('error', fail);
    request.end(req.body);
  });
}
