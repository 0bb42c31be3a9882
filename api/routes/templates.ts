import { z } from 'zod';
import { requireVerifiedSender } from '../../db/domains/domains';
import {
  createTemplate,
  deleteTemplate,
  duplicateTemplate,
  getTemplate,
  listTemplates,
  templateUsage,
  updateTemplate,
} from '../../db/templates/templates';
import type { AppDeps } from '../context';
import type { RouteRegistry } from '../routing';
import { ERROR_TEXT } from '../openapi';
import { cursorPage, idParams } from '../schemas/common';
import {
  createTemplateBody,
  previewTemplateBody,
  templateListQuery,
  templatePreviewSchema,
  templateSchema,
  templateTestResponse,
  templateUsageSchema,
  testTemplateBody,
  updateTemplateBody,
} from '../schemas/templates';
import { previewTemplate, sendTemplateTest } from '../use-cases/templates';

export function registerTemplateRoutes(api: RouteRegistry, deps: AppDeps): void {
  api.add({
    method: 'get',
    path: '/templates',
    tag: 'Templates',
    summary: 'List templates, newest first (cursor pagination)',
    auth: 'secret',
    query: templateListQuery,
    response: cursorPage(templateSchema),
    handler: ({ scope, project, query }) => listTemplates(scope.em, project.id, query),
  });

  api.add({
    method: 'post',
    path: '/templates',
    tag: 'Templates',
    summary: 'Create a template (subject and body are compiled now; `from` must be on a verified domain)',
    description: `A template holds a subject and an HTML body in Handlebars (see *Template variables* above), and
optionally a sender (\`from\`, \`fromName\`, \`replyTo\`) that \`/v1/send\` and workflow SEND_EMAIL steps use
when they give none.

Both are compiled now: a syntax error is a 422 naming \`subject\` or \`body\`, never a failed send later.
\`type\` MARKETING makes mail from the template marketing mail (unsubscribe headers, open and click
tracking); TRANSACTIONAL (the default) is for mail the contact asked for.`,
    errors: { 403: ERROR_TEXT.domainNotVerified },
    auth: 'secret',
    body: createTemplateBody,
    response: templateSchema,
    status: 201,
    handler: async ({ scope, project, body }) => {
      if (body.from) await requireVerifiedSender(scope.em, project.id, body.from, deps.config);
      return createTemplate(scope.em, project.id, body);
    },
  });

  api.add({
    method: 'post',
    path: '/templates/preview',
    tag: 'Templates',
    summary: 'Render a subject and body (saved or not) for a contact, as a send would; nothing is written',
    description: `The same rendering as a send (variables, \`??\` fallbacks, \`data\` over the contact's data, the
unsubscribe footer for MARKETING), without open and click tracking. A syntax error is a 422 naming \`subject\` or
\`body\`. \`variables\` lists what the template reads and whether this contact has each.`,
    auth: 'secret',
    body: previewTemplateBody,
    response: templatePreviewSchema,
    handler: ({ scope, project, body }) => previewTemplate(deps, scope.em, project.id, body),
  });

  api.add({
    method: 'get',
    path: '/templates/:id',
    tag: 'Templates',
    summary: 'Get a template',
    auth: 'secret',
    params: idParams,
    response: templateSchema,
    handler: ({ scope, project, params }) => getTemplate(scope.em, project.id, params.id),
  });

  api.add({
    method: 'patch',
    path: '/templates/:id',
    tag: 'Templates',
    summary: 'Update a template',
    description: 'Changes only the fields sent, compiled and checked as on create. Emails already queued keep the content they were rendered with.',
    errors: { 403: ERROR_TEXT.domainNotVerified },
    auth: 'secret',
    params: idParams,
    body: updateTemplateBody,
    response: templateSchema,
    handler: async ({ scope, project, params, body }) => {
      if (body.from) await requireVerifiedSender(scope.em, project.id, body.from, deps.config);
      return updateTemplate(scope.em, project.id, params.id, body);
    },
  });

  api.add({
    method: 'delete',
    path: '/templates/:id',
    tag: 'Templates',
    summary: 'Delete a template',
    auth: 'secret',
    params: idParams,
    response: z.object({ id: z.string(), deleted: z.literal(true) }),
    handler: async ({ scope, project, params }) => {
      await deleteTemplate(scope.em, project.id, params.id);
      return { id: params.id, deleted: true as const };
    },
  });

  api.add({
    method: 'post',
    path: '/templates/:id/duplicate',
    tag: 'Templates',
    summary: 'Copy a template; returns the new template (its `id` is the new id)',
    auth: 'secret',
    params: idParams,
    response: templateSchema,
    status: 201,
    handler: ({ scope, project, params }) => duplicateTemplate(scope.em, project.id, params.id),
  });

  api.add({
    method: 'post',
    path: '/templates/:id/test',
    tag: 'Templates',
    summary: 'Send the saved template to one address, as /v1/send would (without open and click tracking)',
    description: `Goes the way of \`POST /v1/send\` with \`{to: email, template: id}\`: rendered with the contact of that address
(which, as with any send, becomes a contact, not subscribed, if it was none), from the template's sender, and counted
as transactional mail.`,
    errors: { 402: ERROR_TEXT.billingLimit, 403: ERROR_TEXT.domainNotVerified },
    auth: 'secret',
    params: idParams,
    body: testTemplateBody,
    response: templateTestResponse,
    status: 202,
    handler: ({ scope, project, params, body }) => sendTemplateTest(deps, scope, project.id, params.id, body.email),
  });

  api.add({
    method: 'get',
    path: '/templates/:id/usage',
    tag: 'Templates',
    summary: 'Campaigns and workflow steps that reference the template',
    auth: 'secret',
    params: idParams,
    response: templateUsageSchema,
    handler: ({ scope, project, params }) => templateUsage(scope.em, project.id, params.id),
  });
}
