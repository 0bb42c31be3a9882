import type { EntityManager } from '@mikro-orm/postgresql';
import type { z } from 'zod';
import { type ContactDto, getContact } from '../../db/contacts/contacts';
import { readPath, isMissing } from '../../db/conditions/values';
import { compileContent, marketingContext, renderForContact } from '../../db/messages/content';
import type { QueuedEmail } from '../../db/messages/send';
import { templateVariableNames } from '../../db/templates/variables';
import { contactUrls } from '../../mail/links';
import { templateVariables } from '../../mail/render';
import type { AppDeps, RequestScope } from '../context';
import type { previewTemplateBody, templatePreviewSchema, templateTestResponse } from '../schemas/templates';
import { sendTransactional } from './public';

/** Who a preview without a contact is rendered for: every variable but the built-in ones is missing. */
const SAMPLE_CONTACT: ContactDto = {
  id: 'preview',
  email: 'someone@example.com',
  subscribed: true,
  data: {},
  createdAt: new Date(0).toISOString(),
  updatedAt: new Date(0).toISOString(),
};

/**
 * POST /templates/preview: the subject and body rendered as the sender renders them for one
 * contact (db/messages/content.ts: compiled, the contact's variables with `data` over them, the
 * unsubscribe footer for MARKETING), without tracking and without writing anything; and the
 * variables the template reads, each with whether this contact has a value for it.
 */
export async function previewTemplate(
  deps: Pick<AppDeps, 'config' | 'linkSecret'>,
  em: EntityManager,
  projectId: string,
  input: z.output<typeof previewTemplateBody>,
): Promise<z.output<typeof templatePreviewSchema>> {
  const content = compileContent(input.subject, input.body);
  const [contact, marketing] = await Promise.all([
    input.contactId ? getContact(em, projectId, input.contactId) : SAMPLE_CONTACT,
    input.type === 'MARKETING' ? marketingContext(em, projectId) : (false as const),
  ]);
  const extra = input.data ?? {};
  const links = { publicUrl: deps.config.publicUrl, linkSecret: deps.linkSecret };
  const rendered = renderForContact(content, contact, { extra, ...links, marketing });
  const vars = templateVariables(contact, contactUrls(links.publicUrl, links.linkSecret, contact.id), extra);
  return {
    subject: rendered.subject,
    html: rendered.body,
    contact: input.contactId ? { id: contact.id, email: contact.email } : null,
    variables: templateVariableNames(input.subject, input.body).map((name) => ({ name, present: !isMissing(readPath(vars, name)) })),
  };
}

/**
 * POST /templates/:id/test: the saved template sent to one address through /v1/send's write path
 * (api/use-cases/public.ts), without open and click tracking, whose counts a test would skew. As
 * with /v1/send, the address becomes a contact (not subscribed) if it was none.
 */
export async function sendTemplateTest(
  deps: Pick<AppDeps, 'config' | 'linkSecret' | 'wakeups' | 'sending'>,
  scope: Pick<RequestScope, 'em'>,
  projectId: string,
  templateId: string,
  email: string,
): Promise<z.output<typeof templateTestResponse>> {
  const result = await sendTransactional(deps, scope, projectId, undefined, { to: email, template: templateId, tracking: false });
  const data = (result.body as { data: { emails: QueuedEmail[]; outbox?: string } }).data;
  const queued = data.emails[0]!;
  return { emailId: queued.email, email: queued.contact.email, status: 'QUEUED', ...(data.outbox ? { outbox: data.outbox } : {}) };
}
