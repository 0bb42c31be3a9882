import { z } from 'zod';
import { deleteContact, getContact, lookupContacts, updateContact, upsertContact } from '../../db/contacts/contacts';
import type { RouteRegistry } from '../routing';
import type { AppDeps } from '../context';
import { listContactsMatching } from '../use-cases/contact-list';
import { cursorPage, idParams } from '../schemas/common';
import { listContactsQuery } from '../schemas/contact-list';
import {
  contactSchema,
  createContactBody,
  lookupBody,
  lookupResponse,
  updateContactBody,
  upsertContactResponse,
} from '../schemas/contacts';

export function registerContactRoutes(api: RouteRegistry, _deps: AppDeps): void {
  api.add({
    method: 'get',
    path: '/contacts',
    tag: 'Contacts',
    summary: 'List contacts, newest first (cursor pagination; filter by part of the email, subscription, a condition)',
    description: `Pages of up to \`limit\` contacts (default 20, at most 100), newest first. Pass the returned \`cursor\`
to get the next page; it is \`null\` on the last one. \`total\` counts the matching contacts on the first page.

The filters combine; send the same ones with the cursor:
- \`search\`: part of the email, case-insensitive.
- \`subscribed\`: \`true\` or \`false\`.
- \`condition\`: a segment condition as JSON (URL-encoded), evaluated now as a DYNAMIC segment's would be
  (\`POST /segments\` describes the fields and operators): the members such a segment would have, without saving one.`,
    auth: 'secret',
    query: listContactsQuery,
    response: cursorPage(contactSchema),
    handler: ({ scope, project, query }) => listContactsMatching(scope.em, project.id, query),
  });

  api.add({
    method: 'post',
    path: '/contacts',
    tag: 'Contacts',
    summary: 'Create a contact, or update the one with this email (201 when created)',
    description: `An upsert by email (case-insensitive, stored lower-cased): 201 with \`_meta.isNew\` when the contact
is created, 200 when the existing one was updated.

- \`subscribed\`: a new contact is subscribed unless \`false\` is sent; an existing one keeps its state
  when it is omitted. A change records a \`contact.subscribed\` / \`contact.unsubscribed\` event.
- \`data\` is a patch of custom fields: keys are merged into what is stored, \`null\` removes a key, \`""\`
  is ignored, and reserved names (\`email\`, \`subscribed\`, \`unsubscribeUrl\`, …) are dropped. A field's
  type (string, number, boolean, date) is inferred when it is first used.`,
    auth: 'secret',
    body: createContactBody,
    response: upsertContactResponse,
    handler: async ({ scope, project, body, res }) => {
      const result = await upsertContact(scope.em, project.id, body, { subscribedWhenNew: true });
      res.status(result.isNew ? 201 : 200);
      return { ...result.contact, _meta: { isNew: result.isNew, isUpdate: !result.isNew } };
    },
  });

  api.add({
    method: 'post',
    path: '/contacts/lookup',
    tag: 'Contacts',
    summary: 'Check which of up to 500 emails exist (case-insensitive)',
    auth: 'secret',
    body: lookupBody,
    response: lookupResponse,
    handler: ({ scope, project, body }) => lookupContacts(scope.em, project.id, body.emails),
  });

  api.add({
    method: 'get',
    path: '/contacts/:id',
    tag: 'Contacts',
    summary: 'Get a contact',
    auth: 'secret',
    params: idParams,
    response: contactSchema,
    handler: ({ scope, project, params }) => getContact(scope.em, project.id, params.id),
  });

  api.add({
    method: 'patch',
    path: '/contacts/:id',
    tag: 'Contacts',
    summary: 'Update email, subscribed and/or data (data is a patch)',
    description: `Changes only what is sent. \`data\` follows the same patch rules as \`POST /contacts\`
(\`null\` removes a key). Changing \`email\` to that of another contact is a 409.`,
    errors: { 409: '`CONFLICT`: another contact of the project already has that email' },
    auth: 'secret',
    params: idParams,
    body: updateContactBody,
    response: contactSchema,
    handler: async ({ scope, project, params, body }) => (await updateContact(scope.em, project.id, params.id, body)).contact,
  });

  api.add({
    method: 'delete',
    path: '/contacts/:id',
    tag: 'Contacts',
    summary: 'Delete a contact',
    description: 'Deletes the contact, and with it its events and segment memberships. To delete many at once, use `POST /contacts/bulk-delete`.',
    auth: 'secret',
    params: idParams,
    response: z.object({ id: z.string(), deleted: z.literal(true) }),
    handler: async ({ scope, project, params }) => {
      await deleteContact(scope.em, project.id, params.id);
      return { id: params.id, deleted: true as const };
    },
  });
}
