import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/**
 * Search attributes let an operator find any execution in the Temporal Web UI
 * (e.g. `ProjectId = "prj_…" AND CurrentStep = "DELAY"`). No personal data goes in them.
 * `TidingsWorkflowId` names our journey definition; Temporal's own `WorkflowId` is taken.
 */
export const SEARCH_ATTRIBUTE_TYPES = {
  ProjectId: 'Keyword',
  ContactId: 'Keyword',
  CampaignId: 'Keyword',
  TidingsWorkflowId: 'Keyword',
  CurrentStep: 'Keyword',
  WaitingForEvent: 'Keyword',
} as const;

export const ProjectIdKey = defineSearchAttributeKey('ProjectId', SearchAttributeType.KEYWORD);
export const ContactIdKey = defineSearchAttributeKey('ContactId', SearchAttributeType.KEYWORD);
export const CampaignIdKey = defineSearchAttributeKey('CampaignId', SearchAttributeType.KEYWORD);
export const TidingsWorkflowIdKey = defineSearchAttributeKey('TidingsWorkflowId', SearchAttributeType.KEYWORD);
export const CurrentStepKey = defineSearchAttributeKey('CurrentStep', SearchAttributeType.KEYWORD);
export const WaitingForEventKey = defineSearchAttributeKey('WaitingForEvent', SearchAttributeType.KEYWORD);
