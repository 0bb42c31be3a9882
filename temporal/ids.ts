/**
 * Every Temporal workflow id is built here, deterministically from what it is about, so a
 * repeated request finds the execution already under way instead of starting another.
 */
export const workflowIds = {
  deleteContactField: (projectId: string, key: string) => `contact-field-delete:${projectId}:${key}`,
  /** One per CSV import job (the job row holds the file). */
  contactImport: (jobId: string) => `contact-import:${jobId}`,
  domainVerification: (domainId: string) => `domain-verification:${domainId}`,
  /** Keyed by the first email of the request: the API starts it once per request. */
  sendEmails: (firstEmailId: string) => `send:${firstEmailId}`,
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
