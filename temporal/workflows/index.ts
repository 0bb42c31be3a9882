// Bundle entry for the worker: every workflow the task queue runs is exported here.
export { deleteContactField } from './delete-contact-field';
export { contactImport } from './contact-import';
export { domainVerification } from './domain-verification';
export { sendEmails } from './send-emails';
export { deliveryEngine, type DeliveryEngineInput } from './delivery-engine';
export { triggerDispatcher, type TriggerDispatcherInput } from './trigger-dispatcher';
export { journey, type JourneyInput } from './journey';
export { segmentCompute, segmentEventDelivery } from './segment-compute';
export { campaign, type CampaignInput } from './campaign';
export { bulkContacts, type BulkContactsInput } from './bulk-contacts';
export { sendSystemEmail, type SystemEmailInput } from './system-email';
