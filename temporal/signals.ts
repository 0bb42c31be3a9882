import { defineSignal, defineUpdate } from '@temporalio/workflow';
import type { DomainCheckOutcome } from './domains/activities';

/** Signals, updates and queries of every workflow, named in one place for the API and the workflows. */
export const checkDomainNowUpdate = defineUpdate<DomainCheckOutcome>('checkDomainNow');

/** A tracked event of the execution's contact; WAIT_FOR_EVENT steps wait for these. */
export interface TrackedEventMessage {
  eventId: string;
  name: string;
  data: Record<string, unknown>;
  /** When the event was tracked (ISO 8601): an event from before a wait began does not end it. */
  trackedAt: string;
}

export const trackedEventSignal = defineSignal<[TrackedEventMessage]>('trackedEvent');

/** A segment condition was saved: the field-slot workflow takes another round (temporal/contact-fields/workflow.ts). */
export const fieldSlotsWantedSignal = defineSignal('fieldSlotsWanted');
