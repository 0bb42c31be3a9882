import { sleep } from '@temporalio/workflow';
import { stepSummary } from './proxies';
import type { StepHandler } from './types';

const UNIT_MS = { minutes: 60_000, hours: 3_600_000, days: 86_400_000 } as const;

/** A durable timer: it survives worker restarts and deploys. */
export const delayStep: StepHandler<'DELAY'> = async (config, ctx) => {
  await sleep(config.amount * UNIT_MS[config.unit] * ctx.input.timeScale, stepSummary('DELAY', ctx, `${config.amount} ${config.unit}`));
  return {};
};
