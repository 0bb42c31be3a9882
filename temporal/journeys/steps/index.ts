import type { UserStepType } from '../../../db/journeys/steps';
import { conditionStep } from './condition';
import { delayStep } from './delay';
import { exitStep } from './exit';
import { sendEmailStep } from './send-email';
import type { StepHandler } from './types';
import { updateContactStep } from './update-contact';
import { waitForEventStep } from './wait-for-event';
import { webhookStep } from './webhook';

/** One handler per step type. */
export const stepHandlers: { [K in UserStepType]: StepHandler<K> } = {
  SEND_EMAIL: sendEmailStep,
  DELAY: delayStep,
  WAIT_FOR_EVENT: waitForEventStep,
  CONDITION: conditionStep,
  WEBHOOK: webhookStep,
  UPDATE_CONTACT: updateContactStep,
  EXIT: exitStep,
};

