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
  /** A segment compute's entry/exit events reach journeys through the trigger outbox, not a child workflow (2026-12-02). */
  segmentEventsInOutbox: 'segment-events-in-outbox',
  /** A journey's WAIT_FOR_EVENT counts events from when its start was recorded, not from when its handler ran (2026-12-03). */
  journeyWaitFromRecordedStart: 'journey-wait-from-recorded-start',
} as const;

export type PatchId = (typeof PATCHES)[keyof typeof PATCHES];

/**
 * What startJourney tells a new journey execution (JourneyInput.walk): the journey patches below
 * apply to it without asking `patched()`, and its first step's search attributes came with the
 * start. Each patched() call records a marker and upserts Temporal's TemporalChangeVersion search
 * attribute, one more visibility write per patch and execution. Executions started before ask,
 * and replay as they ran. A journey patch added later is asked for as usual until it is listed
 * here with the walk that first applies it (JOURNEY_WALK raised).
 */
export const JOURNEY_WALK = 3;
/** From this walk on, startJourney sets the first step's search attributes with the start. */
export const FIRST_STEP_SHOWN_AT_START_WALK = 2;
export const JOURNEY_PATCHES_BY_WALK: Partial<Record<PatchId, number>> = {
  [PATCHES.journeySendViaEngine]: 2,
  [PATCHES.journeyStepTransitions]: 2,
  [PATCHES.journeySendRecordsTransition]: 2,
  [PATCHES.journeyWaitFromRecordedStart]: 3,
};
