/** Shapes of the template endpoints only the template pages read (api/schemas/templates.ts). */
import type { TemplateType } from '../../api/templates';

export interface TemplateUsage {
  campaigns: Array<{ id: string; name: string }>;
  workflowSteps: Array<{ workflowId: string; stepId: string }>;
}

export interface TemplatePreview {
  subject: string;
  html: string;
  contact: { id: string; email: string } | null;
  variables: Array<{ name: string; present: boolean }>;
}

export interface TestSendResult {
  emailId: string;
  email: string;
  status: 'QUEUED';
  outbox?: string;
}

export const TYPE_LABELS: Record<TemplateType, string> = { TRANSACTIONAL: 'Transactional', MARKETING: 'Marketing' };
