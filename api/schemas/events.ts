import { z } from 'zod';
import { isReservedEventName } from '../../db/events';
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
