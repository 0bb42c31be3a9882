import { z } from 'zod';
import { addDomain, deleteDomain, getDomain, listDomains } from '../../db/domains';
import { notFound } from '../../errors';
import { generateDkimKeyPair } from '../../mail/dkim';
import type { AppDeps } from '../context';
import type { RouteRegistry } from '../routing';
import { idParams } from '../schemas/common';
import { addDomainBody, domainSchema, projectIdParams } from '../schemas/domains';

export function registerDomainRoutes(api: RouteRegistry, deps: AppDeps): void {
  api.add({
    method: 'post',
    path: '/domains',
    tag: 'Domains',
    summary: 'Register a sending domain; returns the DNS records to publish (a workflow re-checks them until verified)',
    auth: 'secret',
    role: 'ADMIN',
    body: addDomainBody,
    response: domainSchema,
    status: 201,
    handler: async ({ scope, project, body }) => {
      const domain = await addDomain(scope.em, project.id, body.domain, await generateDkimKeyPair());
      await deps.temporal.startDomainVerification(project.id, domain.id);
      return domain;
    },
  });

  api.add({
    method: 'get',
    path: '/domains/project/:projectId',
    tag: 'Domains',
    summary: 'Domains of the project (verified and pending)',
    auth: 'secret',
    params: projectIdParams,
    response: z.array(domainSchema),
    handler: ({ scope, project, params }) => {
      // A key only ever sees its own project; any other id is as good as nonexistent.
      if (params.projectId !== project.id) throw notFound('project');
      return listDomains(scope.em, project.id);
    },
  });

  api.add({
    method: 'get',
    path: '/domains/:id/verify',
    tag: 'Domains',
    summary: "Check the domain's DNS records now and return the result",
    auth: 'secret',
    role: 'ADMIN',
    params: idParams,
    response: domainSchema,
    handler: async ({ scope, project, params }) => {
      await getDomain(scope.em, project.id, params.id);
      const { domain } = await deps.temporal.checkDomainNow(project.id, params.id);
      if (!domain) throw notFound('domain');
      return domain;
    },
  });

  api.add({
    method: 'delete',
    path: '/domains/:id',
    tag: 'Domains',
    summary: 'Remove a domain (ends its verification workflow)',
    auth: 'secret',
    role: 'ADMIN',
    params: idParams,
    response: z.object({ id: z.string(), deleted: z.literal(true) }),
    handler: async ({ scope, project, params }) => {
      await deleteDomain(scope.em, project.id, params.id);
      await deps.temporal.stopDomainVerification(params.id);
      return { id: params.id, deleted: true as const };
    },
  });
}
