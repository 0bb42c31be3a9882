import { z } from 'zod';
import { isReservedEventName } from '../../db/events/events';
import { cursorQuery } from './common';
import { contactData } from './contacts';

export const eventName = z
  .string()
  .trim()
  .min(1)
  .max(255)
  .refine((n) => !isReservedEventName(n), 'Names starting with email., contact. or segment. are reserved for events the service emits');

export const trackBody = z.object({
  email: z.email().max(320),
  event: eventName,
  data: contactData.optional(),
  subscribed: z.boolean().optional().describe('A new contact is subscribed unless this is false; omitted keeps an existing contact\'s state'),
});

export const trackResponse = z.object({
  success: z.literal(true),
  data: z.object({ contact: z.string(), event: z.string(), timestamp: z.string() }),
});

export const eventSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    contactId: z.string().nullable(),
    email: z.string().nullable(),
    data: z.record(z.string(), z.unknown()),
    createdAt: z.string(),
  })
  .meta({ id: 'Event' });

export const listEventsQuery = cursorQuery.extend({ name: z.string().optional().describe('Only events with this name') });

export const contactIdParams = z.object({ contactId: z.string().min(1) });

export const eventNamesResponse = z.object({
  names: z.array(z.object({ name: z.string(), count: z.number().int(), lastSeenAt: z.string() })),
});

export const eventStatsResponse = z.object({
  total: z.number().int().describe('Events of the project, all time'),
  last24h: z.number().int().describe('Events in the last 24 hours'),
  last7d: z.number().int().describe('Events in the last 7 days'),
  byName: z
    .array(
      z.object({
        name: z.string(),
        count: z.number().int(),
        last24h: z.number().int(),
        last7d: z.number().int(),
        lastSeenAt: z.string(),
      }),
    )
    .describe('Per name, most frequent first (ties by name)'),
});

/** Any name, reserved ones included: reading usage or deleting history of email.* is allowed. */
export const eventNameParams = z.object({ eventName: z.string().min(1).max(255) });

const workflowRef = { workflowId: z.string(), workflowName: z.string() };

export const eventUsageResponse = z.object({
  eventName: z.string(),
  workflowTriggers: z.array(z.object({ ...workflowRef, enabled: z.boolean() })).describe('Workflows this event starts'),
  waitForEventSteps: z.array(z.object({ ...workflowRef, stepId: z.string(), stepName: z.string().nullable() })),
  conditionSteps: z
    .array(z.object({ ...workflowRef, stepId: z.string(), stepName: z.string().nullable(), field: z.string(), operator: z.string() }))
    .describe('CONDITION steps testing event.<name>'),
  segments: z.array(z.object({ id: z.string(), name: z.string() })).describe('Segments with a filter on event.<name>'),
  campaigns: z
    .array(z.object({ id: z.string(), name: z.string(), status: z.string() }))
    .describe('Campaigns addressing one of those segments'),
});

export const deleteEventsResponse = z.object({
  name: z.string(),
  deleted: z.number().int().describe('Events removed; 0 when none had the name'),
});

export const systemEventsResponse = z
  .object({
    events: z.array(
      z.object({
        name: z.string().describe('`segment.<slug>.entry` and `.exit` stand for every tracked segment'),
        description: z.string(),
        data: z.record(z.string(), z.string()).describe('The keys of the event data, each with what it holds'),
      }),
    ),
  })
  .meta({ id: 'SystemEvents' });
