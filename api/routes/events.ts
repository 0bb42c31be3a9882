import { getContact } from '../../db/contacts/contacts';
import { SYSTEM_EVENTS } from '../../db/events/catalogue';
import { deleteEventsByName, eventNames, eventStats, listEvents } from '../../db/events/events';
import { eventUsage } from '../../db/insights/event-usage';
import type { AppDeps } from '../context';
import type { RouteRegistry } from '../routing';
import { cursorPage, cursorQuery } from '../schemas/common';
import {
  contactIdParams,
  deleteEventsResponse,
  eventNameParams,
  eventNamesResponse,
  eventSchema,
  eventStatsResponse,
  eventUsageResponse,
  listEventsQuery,
  systemEventsResponse,
} from '../schemas/events';

/**
 * Order matters: the fixed paths (`/events/names`, `/events/system`, `/events/stats`) come first so no pattern takes
 * them for an event name, and `/events/:eventName/usage` precedes `/events/contact/:contactId`
 * so the usage of an event named "contact" is reachable (no contact id is "usage").
 */
export function registerEventRoutes(api: RouteRegistry, _deps: AppDeps): void {
  api.add({
    method: 'get',
    path: '/events',
    tag: 'Events',
    summary: 'Tracked and emitted events, newest first (cursor pagination; filter by `name`)',
    description: `Events you tracked (\`POST /v1/track\`) and those the service records itself: \`email.sent\`,
\`email.delivered\`, \`email.opened\`, \`email.clicked\`, \`email.bounced\`, \`email.complained\`,
\`email.received\`, \`contact.subscribed\`, \`contact.unsubscribed\` and \`segment.<slug>.entry\` / \`.exit\` (\`GET /events/system\`).`,
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
    path: '/events/system',
    tag: 'Events',
    summary: 'The events the service records itself, with their data: journeys can be triggered by them and wait for them',
    description: `A journey listens to these as to any tracked event: as its trigger, or in a WAIT_FOR_EVENT step. A wait for an
\`email.*\` event about one email (sent, delivered, opened, clicked, bounced, complained) waits for the email its own
execution sent (the last SEND_EMAIL before it, or the step named by \`emailStepId\`). An event a journey caused (its own
email's outcomes, a change its UPDATE_CONTACT step made) starts no journey, so journeys cannot trigger each other in a loop.
Any other name under \`email.\`, \`contact.\` or \`segment.\` is refused with 422.`,
    auth: 'secret',
    response: systemEventsResponse,
    handler: () => ({ events: SYSTEM_EVENTS.map((e) => ({ ...e })) }),
  });

  api.add({
    method: 'get',
    path: '/events/stats',
    tag: 'Events',
    summary: 'Event counts: all time, last 24 hours, last 7 days, and per name',
    auth: 'secret',
    response: eventStatsResponse,
    handler: ({ scope, project }) => eventStats(scope.em, project.id),
  });

  api.add({
    method: 'get',
    path: '/events/:eventName/usage',
    tag: 'Events',
    summary: 'Where an event name is referenced: workflow triggers, WAIT_FOR_EVENT steps, CONDITION steps on event.<name>, segments',
    auth: 'secret',
    params: eventNameParams,
    response: eventUsageResponse,
    handler: ({ scope, project, params }) => eventUsage(scope.em, project.id, params.eventName),
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

  api.add({
    method: 'delete',
    path: '/events/:eventName',
    tag: 'Events',
    summary: 'Delete every event with this name (reserved email.*, contact.*, segment.* names too: history only); returns the count',
    description: 'Removes history only: contacts, workflows and segments that use the name are unchanged (see `GET /events/{eventName}/usage` first). Segment filters on the event then match as if it never happened.',
    auth: 'secret',
    params: eventNameParams,
    response: deleteEventsResponse,
    handler: async ({ scope, project, params }) => ({
      name: params.eventName,
      deleted: await deleteEventsByName(scope.em, project.id, params.eventName),
    }),
  });
}
