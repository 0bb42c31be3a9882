import { ApplicationFailure } from '@temporalio/activity';
import { AppError } from '../errors';
import type { SmtpError } from '../mail/smtp-errors';
import { SMTP_PERMANENT_ERROR } from './delivery-options';

/**
 * A refusal from the data layer (an AppError below 500: a missing template, an unverified sender,
 * a deleted segment, an uncompilable body) as a failure Temporal does not retry, with the error's
 * code as its type; any other error as it is.
 */
export function refusalFailure(err: unknown): unknown {
  return err instanceof AppError && err.status < 500 ? ApplicationFailure.nonRetryable(err.message, err.code) : err;
}

/** `work`, failing for good on a refusal from the data layer (refusalFailure): a retry would meet the same refusal. */
export function permanent<T>(work: Promise<T>): Promise<T> {
  return work.catch((err: unknown) => {
    throw refusalFailure(err);
  });
}

/** A 5xx SMTP reply: sending again will not help, and the delivery retry policy (delivery-options.ts) names this type. */
export const smtpPermanentFailure = (err: SmtpError) => ApplicationFailure.nonRetryable(err.message, SMTP_PERMANENT_ERROR);
