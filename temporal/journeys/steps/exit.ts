import type { StepHandler } from './types';

export const exitStep: StepHandler<'EXIT'> = async (config) => ({ exit: config.reason ?? 'EXIT step reached' });
