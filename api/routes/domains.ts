import { z } from 'zod';
import { listDomains, withSendingState } from '../../db/domains/domains';
import { notFound } from '../../errors';
import type { AppDeps } from '../context';
import type { RouteRegistry } from '../routing';
import { ERROR_TEXT } from '../openapi';
import { idParams } from '../schemas/common';
import { addDomainBody, domainSchema, projectIdParams } from '../schemas/domains';
import { TEMPORAL_UNAVAILABLE_TEXT } from '../use-cases/call-temporal';
import { checkDomain, registerDomain, removeDomain } from '../use-cases/domains';

export function registerDomainRoutes(api: RouteRegistry, deps: AppDeps): void {
  api.add({
    method: 'post',
    path: '/domains',
    tag: 'Domains',
    summary: 'Register a sending domain; returns the DNS records to publish (a workflow re-checks them until verified)',
    description: `Mail can only be sent from a domain of the project. The service generates a DKIM key pair for
the domain (it signs every message from it) and answers with the DNS \`records\` to publish: the DKIM
TXT record, which decides verification, plus SPF, DMARC and return-path records that help delivery.

A background workflow checks the records every few minutes while the domain is \`pending\`, and
regularly once it is \`verified\` (a domain whose DKIM record disappears goes back to \`pending\`).
\`GET /domains/{id}/verify\` checks now. In outbox mode (no SMTP relay configured) a registered
domain can send at once. Needs the ADMIN role with a session.`,
    errors: {
      409: '`CONFLICT`: the domain is already registered, in this project or another one (a domain belongs to one project)',
      503: TEMPORAL_UNAVAILABLE_TEXT,
    },
    auth: 'secret',
    role: 'ADMIN',
    body: addDomainBody,
    response: domainSchema,
    status: 201,
    handler: async ({ scope, project, body }) => withSendingState(await registerDomain(deps, scope.em, project.id, body.domain), deps.config),
  });

  api.add({
    method: 'get',
    path: '/domains/project/:projectId',
    tag: 'Domains',
    summary: 'Domains of the project (verified and pending)',
    auth: 'secret',
    params: projectIdParams,
    response: z.array(domainSchema),
    handler: async ({ scope, project, params }) => {
      // A key only ever sees its own project; any other id is as good as nonexistent.
      if (params.projectId !== project.id) throw notFound('project');
      return (await listDomains(scope.em, project.id)).map((d) => withSendingState(d, deps.config));
    },
  });

  api.add({
    method: 'get',
    path: '/domains/:id/verify',
    tag: 'Domains',
    summary: "Check the domain's DNS records now and return the result",
    description: `Runs the same check as the background workflow, now, and answers with the domain and
\`lastCheck\` (the state of its DKIM, SPF and DMARC records). A GET that acts: it may change \`status\`.`,
    errors: { 503: ERROR_TEXT.workerUnavailable },
    auth: 'secret',
    role: 'ADMIN',
    params: idParams,
    response: domainSchema,
    handler: async ({ scope, project, params }) => withSendingState(await checkDomain(deps, scope.em, project.id, params.id), deps.config),
  });

  api.add({
    method: 'delete',
    path: '/domains/:id',
    tag: 'Domains',
    summary: 'Remove a domain (ends its verification workflow)',
    description: 'Mail can no longer be sent from the domain; its DKIM key is deleted, so publish new records if you add it again.',
    errors: { 503: TEMPORAL_UNAVAILABLE_TEXT },
    auth: 'secret',
    role: 'ADMIN',
    params: idParams,
    response: z.object({ id: z.string(), deleted: z.literal(true) }),
    handler: async ({ scope, project, params }) => {
      await removeDomain(deps, scope.em, project.id, params.id);
      return { id: params.id, deleted: true as const };
    },
  });
}
