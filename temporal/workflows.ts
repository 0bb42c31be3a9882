// Bundle entry for the worker: every workflow the task queue runs is exported here.
export { deleteContactField, prepareFieldSlots } from './contact-fields/workflow';
export { contactImport } from './imports/workflow';
export { domainVerification } from './domains/workflow';
export { sendEmails } from './delivery/send-emails-workflow';
export { deliveryEngine, type DeliveryEngineInput } from './delivery/workflow';
export { triggerDispatcher, type TriggerDispatcherInput } from './triggers/workflow';
export { journey, type JourneyInput } from './journeys/workflow';
export { segmentCompute, segmentEventDelivery } from './segments/workflow';
export { campaign, type CampaignInput } from './campaigns/workflow';
export { bulkContacts, type BulkContactsInput } from './bulk/workflow';
export { sendSystemEmail, type SystemEmailInput } from './system-email/workflow';
