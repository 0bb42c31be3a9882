import type { Template } from '../../api/templates';
import type { Branch, Step, StepType, UserStepType } from './types';

/** What the editor knows of each step type: its label, its one-line summary, its new config and its branches. */

export const STEP_LABELS: Record<StepType, string> = {
  TRIGGER: 'Trigger',
  SEND_EMAIL: 'Send email',
  DELAY: 'Delay',
  WAIT_FOR_EVENT: 'Wait for event',
  CONDITION: 'Condition',
  WEBHOOK: 'Webhook',
  UPDATE_CONTACT: 'Update contact',
  EXIT: 'Exit',
};

export const STEP_HINTS: Record<UserStepType, string> = {
  SEND_EMAIL: 'Send a template to the contact',
  DELAY: 'Wait for a while',
  WAIT_FOR_EVENT: 'Wait for an event, or a timeout',
  CONDITION: 'Branch on yes or no',
  WEBHOOK: 'Call a URL',
  UPDATE_CONTACT: 'Change data or subscription',
  EXIT: 'End the journey',
};

/** The labelled source handles of a type; a type not listed has one unlabelled output (EXIT none). */
export const BRANCH_HANDLES: Partial<Record<StepType, Branch[]>> = {
  CONDITION: ['yes', 'no'],
  WAIT_FOR_EVENT: ['event', 'timeout'],
};

/** The handle an edge leaves from: its branch, or the single output ('next'); an unlabelled wait leaves from `event`. */
export function sourceHandleOf(type: StepType, branch: Branch | null): string {
  if (branch) return branch;
  return type === 'WAIT_FOR_EVENT' ? 'event' : 'next';
}

/** The branch a connection from a handle makes. */
export const branchOfHandle = (handle: string | null | undefined): Branch | null =>
  handle === 'yes' || handle === 'no' || handle === 'event' || handle === 'timeout' ? handle : null;

export const OPERATOR_LABELS: Record<string, string> = {
  equals: '=',
  notEquals: '≠',
  contains: 'contains',
  notContains: 'does not contain',
  greaterThan: '>',
  gt: '>',
  lessThan: '<',
  lt: '<',
  greaterThanOrEqual: '≥',
  lessThanOrEqual: '≤',
  exists: 'exists',
  notExists: 'does not exist',
  within: 'within',
  olderThan: 'older than',
  triggered: 'happened',
  notTriggered: 'never happened',
  triggeredWithin: 'happened within',
  triggeredOlderThan: 'happened more than',
};

const plural = (n: number, unit: string) => `${n} ${n === 1 ? unit.replace(/s$/, '') : unit}`;

/** Seconds in the largest whole unit: 259200 → "3 days". */
export function formatSeconds(seconds: number): string {
  if (seconds % 86400 === 0) return plural(seconds / 86400, 'days');
  if (seconds % 3600 === 0) return plural(seconds / 3600, 'hours');
  if (seconds % 60 === 0) return plural(seconds / 60, 'minutes');
  return plural(seconds, 'seconds');
}

const str = (v: unknown) => (typeof v === 'string' ? v : v === undefined ? '' : JSON.stringify(v));

export interface SummaryContext {
  templates?: ReadonlyArray<Template>;
}

/** The one line a node shows under its type. */
export function summarize(step: Pick<Step, 'type' | 'config'>, ctx: SummaryContext = {}): string {
  const c = step.config;
  switch (step.type) {
    case 'TRIGGER':
      return `When "${str(c.eventName)}" is recorded`;
    case 'SEND_EMAIL': {
      const template = ctx.templates?.find((t) => t.id === c.templateId);
      const recipient = c.recipient as { type?: string; customEmail?: string } | undefined;
      const to = recipient?.type === 'CUSTOM' ? ` to ${recipient.customEmail}` : '';
      return `${template ? template.name : `Template ${str(c.templateId)}`}${to}`;
    }
    case 'DELAY':
      return `Wait ${plural(Number(c.amount), str(c.unit))}`;
    case 'WAIT_FOR_EVENT':
      return `Until "${str(c.eventName)}"${typeof c.timeout === 'number' ? `, at most ${formatSeconds(c.timeout)}` : ''}`;
    case 'CONDITION': {
      const value = c.value === undefined ? '' : ` ${str(c.value)}`;
      const unit = c.unit === undefined ? '' : ` ${str(c.unit)}`;
      return `If ${str(c.field)} ${OPERATOR_LABELS[str(c.operator)] ?? str(c.operator)}${value}${unit}`;
    }
    case 'WEBHOOK':
      return `${str(c.method) || 'POST'} ${str(c.url)}`;
    case 'UPDATE_CONTACT': {
      const parts: string[] = [];
      const updates = c.updates as Record<string, unknown> | undefined;
      if (updates && Object.keys(updates).length > 0) parts.push(`Set ${Object.keys(updates).join(', ')}`);
      if (c.subscribed === true) parts.push('Subscribe');
      if (c.subscribed === false) parts.push('Unsubscribe');
      return parts.join('; ') || 'No change';
    }
    case 'EXIT':
      return typeof c.reason === 'string' && c.reason ? `Exit: ${c.reason}` : 'End the journey';
  }
}

/** A valid config to create a step with, before it is configured in the side panel. */
export function defaultConfig(type: UserStepType, ctx: { templates: ReadonlyArray<Template> }): Record<string, unknown> | { error: string } {
  switch (type) {
    case 'SEND_EMAIL': {
      const first = ctx.templates[0];
      return first ? { templateId: first.id } : { error: 'A Send email step needs a template: create one under Templates first.' };
    }
    case 'DELAY':
      return { amount: 1, unit: 'days' };
    case 'WAIT_FOR_EVENT':
      return { eventName: 'email.opened', timeout: 3 * 86400 };
    case 'CONDITION':
      return { field: 'contact.subscribed', operator: 'equals', value: true };
    case 'WEBHOOK':
      return { url: 'https://example.com/webhook', method: 'POST' };
    case 'UPDATE_CONTACT':
      return { updates: {} };
    case 'EXIT':
      return {};
  }
}

/**
 * A problem as shown next to its step: the service names the step first (`CONDITION step "Plan"
 * (stp_…) needs…`), which the node or panel showing it already says.
 */
export function ownProblem(message: string, stepId: string): string {
  const at = message.indexOf(stepId);
  if (at < 0 || at > 300) return message;
  const rest = message.slice(at + stepId.length).replace(/^\)?\s*/, '');
  return rest.charAt(0).toUpperCase() + rest.slice(1);
}
