import { z } from 'zod';
import { deleteContact, getContact, listContacts, lookupContacts, updateContact, upsertContact } from '../../db/contacts';
import type { RouteRegistry } from '../routing';
import type { AppDeps } from '../context';
import { cursorPage, idParams } from '../schemas/common';
import {
  contactSchema,
  createContactBody,
  listContactsQuery,
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
    summary: 'List contacts, newest first (cursor pagination; `search` matches part of the email)',
    auth: 'secret',
    query: listContactsQuery,
    response: cursorPage(contactSchema),
    handler: ({ scope, project, query }) => listContacts(scope.em, project.id, query),
  });

  api.add({
    method: 'post',
    path: '/contacts',
    tag: 'Contacts',
    summary: 'Create a contact, or update the one with this email (201 when created)',
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
    auth: 'secret',
    params: idParams,
    response: z.object({ id: z.string(), deleted: z.literal(true) }),
    handler: async ({ scope, project, params }) => {
      await deleteContact(scope.em, project.id, params.id);
      return { id: params.id, deleted: true as const };
    },
  });
}
