import { getContact } from '../../db/contacts';
import { eventNames, listEvents } from '../../db/events';
import type { AppDeps } from '../context';
import type { RouteRegistry } from '../routing';
import { cursorPage, cursorQuery } from '../schemas/common';
import { contactIdParams, eventNamesResponse, eventSchema, listEventsQuery } from '../schemas/events';

export function registerEventRoutes(api: RouteRegistry, _deps: AppDeps): void {
  api.add({
    method: 'get',
    path: '/events',
    tag: 'Events',
    summary: 'Tracked and emitted events, newest first (cursor pagination; filter by `name`)',
    auth: 'secret',
    query: listEventsQuery,
    response: cursorPage(eventSchema),
    handler: ({ scope, project, query }) => listEvents(scope.em, project.id, query),
  });

  api.add({
    method: 'get',
    path: '/events/names',
    tag: 'Events',
    summary: 'Distinct event names with their count and last occurrence',
    auth: 'secret',
    response: eventNamesResponse,
    handler: async ({ scope, project }) => ({ names: await eventNames(scope.em, project.id) }),
  });

  api.add({
    method: 'get',
    path: '/events/contact/:contactId',
    tag: 'Events',
    summary: 'Events of one contact, newest first (cursor pagination)',
    auth: 'secret',
    params: contactIdParams,
    query: cursorQuery,
    response: cursorPage(eventSchema),
    handler: async ({ scope, project, params, query }) => {
      await getContact(scope.em, project.id, params.contactId);
      return listEvents(scope.em, project.id, { ...query, contactId: params.contactId });
    },
  });
}
