/**
 * Ids of `patched()` calls: changes to workflow code that executions started before them replay
 * without. Each stays until no execution from before it can still be running (then
 * `deprecatePatch`, then removed); test/service/replay.test.ts replays a recorded history of the old code.
 */
export const PATCHES = {
  /** sendEmails records SENT with a local activity (2026-11-26). */
  recordSentLocally: 'send-emails-record-sent-locally',
  /** A journey's SEND_EMAIL queues the email for the delivery engine and does not deliver it itself (2026-11-26). */
  journeySendViaEngine: 'journey-send-via-engine',
  /** The delivery engine opens a breaker (a timer, then probes) when the relay is unreachable, instead of full rounds (2026-11-26). */
  relayBreaker: 'delivery-engine-relay-breaker',
  /** A journey records a step's end and the next step's start (or its own end) in one local activity (2026-11-27). */
  journeyStepTransitions: 'journey-step-transitions',
  /** SEND_EMAIL records its end and what follows in the local activity that queues its email (2026-11-27). */
  journeySendRecordsTransition: 'journey-send-records-transition',
} as const;
