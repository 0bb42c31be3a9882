import { defineUpdate } from '@temporalio/workflow';
import type { DomainCheckOutcome } from './activities/domains';

/** Signals, updates and queries of every workflow, named in one place for the API and the workflows. */
export const checkDomainNowUpdate = defineUpdate<DomainCheckOutcome>('checkDomainNow');
