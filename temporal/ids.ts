/**
 * Every Temporal workflow id is built here, deterministically from what it is about, so a
 * repeated request finds the execution already under way instead of starting another.
 */
export const workflowIds = {
  deleteContactField: (projectId: string, key: string) => `contact-field-delete:${projectId}:${key}`,
  /** One per project: gives the fields its segments name their slot columns. */
  fieldSlots: (projectId: string) => `field-slots:${projectId}`,
  /** One per CSV import job (the job row holds the file). */
  contactImport: (jobId: string) => `contact-import:${jobId}`,
  domainVerification: (domainId: string) => `domain-verification:${domainId}`,
  /**
   * An email's retry workflow, started by the delivery engine after a transient failure (and,
   * before the engine, one per /v1/send request, keyed by its first email).
   */
  sendEmails: (emailId: string) => `send:${emailId}`,
  /** The delivery engines of a task queue, started by every worker of it (temporal/engines.ts). */
  deliveryEngine: (queue: string, index: number) => `delivery-engine:${queue}:${index}`,
  /** The trigger dispatcher of a task queue (one, so each contact's events keep their order). */
  triggerDispatcher: (queue: string) => `trigger-dispatcher:${queue}`,
  /** One per (workflow, contact, entry): the execution row's id already says which. */
  journey: (executionId: string) => `journey:${executionId}`,
  /** One compute of a segment at a time; its event delivery is `<this id>:events:<first event id>`. */
  segmentCompute: (segmentId: string) => `segment-compute:${segmentId}`,
  /** One per campaign, from its scheduled time to its last email. */
  campaign: (campaignId: string) => `campaign:${campaignId}`,
  /** One per bulk contact job (POST /contacts/bulk-*). */
  bulkContacts: (jobId: string) => `bulk:${jobId}`,
  /** One per account email (verification, password reset): the system_emails row's id. */
  systemEmail: (systemEmailId: string) => `system-email:${systemEmailId}`,
};
