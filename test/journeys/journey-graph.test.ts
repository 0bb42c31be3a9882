import { type ValidatableGraph, validateJourneyGraph } from '../../db/journeys/graph';
import type { Branch, GraphStep, JourneyGraph, StepType } from '../../db/journeys/steps';

/** The graph rules on hand-made graphs: no database, every message exact. */

const CONFIGS: Record<StepType, Record<string, unknown>> = {
  TRIGGER: { eventName: 'signup' },
  SEND_EMAIL: { templateId: 'tpl_1', recipient: { type: 'CONTACT' } },
  DELAY: { amount: 1, unit: 'days' },
  WAIT_FOR_EVENT: { eventName: 'paid' },
  CONDITION: { field: 'contact.subscribed', operator: 'equals', value: true },
  WEBHOOK: { url: 'https://hooks.example.org/x', method: 'POST' },
  UPDATE_CONTACT: { subscribed: true },
  EXIT: {},
};

type StepSpec = [id: string, type: StepType, config?: Record<string, unknown>];
type Edge = [from: string, to: string, branch?: Branch];

/** Step `t` is the TRIGGER and the entry unless the steps say otherwise. */
function graph(steps: StepSpec[], edges: Edge[], entryStepId = 't'): JourneyGraph {
  return {
    entryStepId,
    steps: Object.fromEntries(
      [['t', 'TRIGGER'] as StepSpec, ...steps].map(([id, type, config]) => [id, { id, type, config: config ?? CONFIGS[type] } as GraphStep]),
    ),
    transitions: edges.map(([from, to, branch]) => ({ from, to, branch: branch ?? null })),
  };
}

describe('valid graphs', () => {
  test('a straight line ending in EXIT', () => {
    expect(validateJourneyGraph(graph([['s', 'SEND_EMAIL'], ['d', 'DELAY'], ['x', 'EXIT']], [['t', 's'], ['s', 'd'], ['d', 'x']]))).toEqual([]);
  });

  test('a line ending on a step without outgoing transitions (a leaf completes the execution)', () => {
    expect(validateJourneyGraph(graph([['s', 'SEND_EMAIL'], ['w', 'WEBHOOK']], [['t', 's'], ['s', 'w']]))).toEqual([]);
  });

  test('a CONDITION with both branches, one to EXIT and one to a leaf; both to the same step is fine too', () => {
    expect(
      validateJourneyGraph(graph([['c', 'CONDITION'], ['x', 'EXIT'], ['u', 'UPDATE_CONTACT']], [['t', 'c'], ['c', 'x', 'yes'], ['c', 'u', 'no']])),
    ).toEqual([]);
    expect(validateJourneyGraph(graph([['c', 'CONDITION'], ['u', 'UPDATE_CONTACT']], [['t', 'c'], ['c', 'u', 'yes'], ['c', 'u', 'no']]))).toEqual([]);
  });

  test('a loop through a DELAY, with a way out', () => {
    expect(
      validateJourneyGraph(
        graph(
          [['d', 'DELAY'], ['s', 'SEND_EMAIL'], ['c', 'CONDITION'], ['x', 'EXIT']],
          [['t', 'd'], ['d', 's'], ['s', 'c'], ['c', 'd', 'no'], ['c', 'x', 'yes']],
        ),
      ),
    ).toEqual([]);
  });

  test('WAIT_FOR_EVENT: unlabelled, or event/timeout branches when it has a timeout; a self-loop on it is a waiting loop', () => {
    expect(validateJourneyGraph(graph([['w', 'WAIT_FOR_EVENT'], ['s', 'SEND_EMAIL']], [['t', 'w'], ['w', 's']]))).toEqual([]);
    expect(
      validateJourneyGraph(
        graph(
          [['w', 'WAIT_FOR_EVENT', { eventName: 'paid', timeout: 3600 }], ['s', 'SEND_EMAIL'], ['x', 'EXIT']],
          [['t', 'w'], ['w', 's', 'event'], ['w', 'x', 'timeout']],
        ),
      ),
    ).toEqual([]);
    // Only the event branch: on timeout there is nothing to take, and the execution completes.
    expect(validateJourneyGraph(graph([['w', 'WAIT_FOR_EVENT', { eventName: 'paid', timeout: 60 }], ['s', 'SEND_EMAIL']], [['t', 'w'], ['w', 's', 'event']]))).toEqual([]);
    expect(
      validateJourneyGraph(
        graph(
          [['w', 'WAIT_FOR_EVENT', { eventName: 'paid', timeout: 60 }], ['x', 'EXIT']],
          [['t', 'w'], ['w', 'w', 'timeout'], ['w', 'x', 'event']],
        ),
      ),
    ).toEqual([]);
  });

  test('a lone trigger connected to a single EXIT', () => {
    expect(validateJourneyGraph(graph([['x', 'EXIT']], [['t', 'x']]))).toEqual([]);
  });
});

describe('reachability', () => {
  test('every step not reachable from the trigger is named', () => {
    const g = graph(
      [['s', 'SEND_EMAIL'], ['o1', 'DELAY'], ['o2', 'EXIT']],
      [['t', 's'], ['o1', 'o2']],
    );
    expect(validateJourneyGraph(g)).toEqual([
      { path: 'steps.o1', message: 'DELAY step o1 is not reachable from the trigger; connect a transition to it or delete it' },
      { path: 'steps.o2', message: 'EXIT step o2 is not reachable from the trigger; connect a transition to it or delete it' },
    ]);
  });

  test('names and transition ids appear in messages and paths when the graph carries them', () => {
    const g: ValidatableGraph = {
      entryStepId: 'stp_t',
      steps: {
        stp_t: { id: 'stp_t', type: 'TRIGGER', config: { eventName: 'signup' }, name: null },
        stp_c: { id: 'stp_c', type: 'CONDITION', config: { field: 'contact.subscribed', operator: 'exists' }, name: 'Subscribed?' },
        stp_o: { id: 'stp_o', type: 'SEND_EMAIL', config: { templateId: 'tpl_1', recipient: { type: 'CONTACT' } }, name: 'Orphan' },
      },
      transitions: [
        { id: 'trn_1', from: 'stp_t', to: 'stp_c', branch: null },
        { id: 'trn_2', from: 'stp_c', to: 'stp_o', branch: 'maybe' as Branch },
      ],
    };
    expect(validateJourneyGraph(g)).toEqual([
      { path: 'transitions.trn_2', message: 'A transition from CONDITION step "Subscribed?" (stp_c) may not be "maybe"; it must be "yes" or "no"' },
      { path: 'steps.stp_c', message: 'CONDITION step "Subscribed?" (stp_c) needs both a "yes" and a "no" transition; missing: "yes", "no"' },
    ]);
  });
});

describe('every step can finish', () => {
  test('a loop with a DELAY but no way out traps its steps, each named with the whole trap', () => {
    const g = graph([['s', 'SEND_EMAIL'], ['d', 'DELAY']], [['t', 's'], ['s', 'd'], ['d', 's']]);
    expect(validateJourneyGraph(g)).toEqual([
      {
        path: 'steps.d',
        message:
          'DELAY step d can never finish: no path from it reaches an EXIT step or a step without outgoing transitions (every path stays within DELAY step d, SEND_EMAIL step s)',
      },
      {
        path: 'steps.s',
        message:
          'SEND_EMAIL step s can never finish: no path from it reaches an EXIT step or a step without outgoing transitions (every path stays within DELAY step d, SEND_EMAIL step s)',
      },
      {
        path: 'steps.t',
        message:
          'TRIGGER step t can never finish: no path from it reaches an EXIT step or a step without outgoing transitions (every path stays within DELAY step d, SEND_EMAIL step s, TRIGGER step t)',
      },
    ]);
  });

  test('a step that can leave the loop is not trapped; only those that cannot are named', () => {
    // c can go to x (EXIT); w1/w2 loop among themselves after c's "no".
    const g = graph(
      [['c', 'CONDITION'], ['x', 'EXIT'], ['w1', 'WAIT_FOR_EVENT'], ['w2', 'DELAY']],
      [['t', 'c'], ['c', 'x', 'yes'], ['c', 'w1', 'no'], ['w1', 'w2'], ['w2', 'w1']],
    );
    expect(validateJourneyGraph(g)).toEqual([
      {
        path: 'steps.w1',
        message:
          'WAIT_FOR_EVENT step w1 can never finish: no path from it reaches an EXIT step or a step without outgoing transitions (every path stays within WAIT_FOR_EVENT step w1, DELAY step w2)',
      },
      {
        path: 'steps.w2',
        message:
          'DELAY step w2 can never finish: no path from it reaches an EXIT step or a step without outgoing transitions (every path stays within WAIT_FOR_EVENT step w1, DELAY step w2)',
      },
    ]);
  });
});

describe('loops must wait', () => {
  test('a cycle without DELAY or WAIT_FOR_EVENT is named step by step', () => {
    const g = graph(
      [['s', 'SEND_EMAIL'], ['c', 'CONDITION'], ['x', 'EXIT']],
      [['t', 's'], ['s', 'c'], ['c', 's', 'no'], ['c', 'x', 'yes']],
    );
    expect(validateJourneyGraph(g)).toEqual([
      {
        path: 'graph',
        message:
          'Loop without a DELAY or WAIT_FOR_EVENT step: CONDITION step c → SEND_EMAIL step s → CONDITION step c; an execution would repeat it without pause. Add a DELAY or WAIT_FOR_EVENT step to it',
      },
    ]);
  });

  test('a step looping on itself', () => {
    const g = graph([['h', 'WEBHOOK', { url: 'https://x.example', method: 'POST' }], ['c', 'CONDITION'], ['x', 'EXIT']], [
      ['t', 'c'],
      ['c', 'c', 'no'],
      ['c', 'x', 'yes'],
      ['h', 'h'],
    ]);
    const issues = validateJourneyGraph(g);
    expect(issues.filter((i) => i.path === 'graph')).toEqual([
      {
        path: 'graph',
        message:
          'Loop without a DELAY or WAIT_FOR_EVENT step: CONDITION step c → CONDITION step c; an execution would repeat it without pause. Add a DELAY or WAIT_FOR_EVENT step to it',
      },
      {
        path: 'graph',
        message:
          'Loop without a DELAY or WAIT_FOR_EVENT step: WEBHOOK step h → WEBHOOK step h; an execution would repeat it without pause. Add a DELAY or WAIT_FOR_EVENT step to it',
      },
    ]);
  });

  test('two cycles sharing steps: the shortest one is shown and the other steps of the tangle are named', () => {
    // a → b → a and a → c → d → a: one strongly connected tangle, no waiting step.
    const g = graph(
      [['a', 'CONDITION'], ['b', 'UPDATE_CONTACT'], ['c', 'WEBHOOK'], ['d', 'CONDITION'], ['x', 'EXIT']],
      [['t', 'a'], ['a', 'b', 'yes'], ['b', 'a'], ['a', 'c', 'no'], ['c', 'd'], ['d', 'a', 'yes'], ['d', 'x', 'no']],
    );
    expect(validateJourneyGraph(g)).toEqual([
      {
        path: 'graph',
        message:
          'Loop without a DELAY or WAIT_FOR_EVENT step: CONDITION step a → UPDATE_CONTACT step b → CONDITION step a; an execution would repeat it without pause. Add a DELAY or WAIT_FOR_EVENT step to it (these steps also loop with it: WEBHOOK step c, CONDITION step d)',
      },
    ]);
  });

  test('a DELAY anywhere on the cycle makes it a waiting loop', () => {
    const g = graph(
      [['a', 'CONDITION'], ['b', 'UPDATE_CONTACT'], ['d', 'DELAY'], ['x', 'EXIT']],
      [['t', 'a'], ['a', 'b', 'yes'], ['b', 'd'], ['d', 'a'], ['a', 'x', 'no']],
    );
    expect(validateJourneyGraph(g)).toEqual([]);
  });
});

describe('branches', () => {
  test('a CONDITION needs both yes and no', () => {
    const g = graph([['c', 'CONDITION'], ['x', 'EXIT']], [['t', 'c'], ['c', 'x', 'yes']]);
    expect(validateJourneyGraph(g)).toEqual([
      { path: 'steps.c', message: 'CONDITION step c needs both a "yes" and a "no" transition; missing: "no"' },
    ]);
  });

  test('labels only where the source type allows them', () => {
    const g = graph(
      [['d', 'DELAY'], ['c', 'CONDITION'], ['x', 'EXIT'], ['y', 'EXIT']],
      [['t', 'd'], ['d', 'c', 'yes'], ['c', 'x'], ['c', 'y', 'no']],
    );
    expect(validateJourneyGraph(g)).toEqual([
      { path: 'steps.d', message: 'A transition from DELAY step d may not be "yes"; it must be unlabelled' },
      { path: 'steps.c', message: 'A transition from CONDITION step c may not be unlabelled; it must be "yes" or "no"' },
      { path: 'steps.c', message: 'CONDITION step c needs both a "yes" and a "no" transition; missing: "yes"' },
    ]);
  });

  test('a WAIT_FOR_EVENT without timeout may not have a timeout branch', () => {
    const g = graph(
      [['w', 'WAIT_FOR_EVENT'], ['s', 'SEND_EMAIL'], ['x', 'EXIT']],
      [['t', 'w'], ['w', 's', 'event'], ['w', 'x', 'timeout']],
    );
    expect(validateJourneyGraph(g)).toEqual([
      {
        path: 'steps.w',
        message:
          'WAIT_FOR_EVENT step w has no timeout, so its "timeout" branch to EXIT step x can never be taken; set config.timeout or remove the transition',
      },
    ]);
  });

  test('a WAIT_FOR_EVENT may not mix an unlabelled transition with labelled ones', () => {
    const g = graph(
      [['w', 'WAIT_FOR_EVENT', { eventName: 'paid', timeout: 60 }], ['s', 'SEND_EMAIL'], ['x', 'EXIT']],
      [['t', 'w'], ['w', 's'], ['w', 'x', 'timeout']],
    );
    expect(validateJourneyGraph(g)).toEqual([
      {
        path: 'steps.w',
        message:
          'WAIT_FOR_EVENT step w mixes an unlabelled transition (taken on event and on timeout) with labelled ones; use one unlabelled transition or "event"/"timeout" ones',
      },
    ]);
  });

  test('two transitions on one branch', () => {
    const g = graph([['s', 'SEND_EMAIL'], ['x', 'EXIT'], ['y', 'EXIT']], [['t', 's'], ['s', 'x'], ['s', 'y']]);
    expect(validateJourneyGraph(g)).toEqual([
      { path: 'steps.s', message: 'SEND_EMAIL step s has 2 unlabelled transitions (to EXIT step x, EXIT step y); keep one' },
    ]);
  });
});

describe('EXIT and TRIGGER', () => {
  test('EXIT has no outgoing transitions', () => {
    const g = graph([['x', 'EXIT'], ['s', 'SEND_EMAIL']], [['t', 'x'], ['x', 's']]);
    expect(validateJourneyGraph(g)).toEqual([
      { path: 'steps.x', message: 'EXIT step x ends the execution but has 1 outgoing transition(s) (to SEND_EMAIL step s); remove them' },
    ]);
  });

  test('the trigger needs exactly one outgoing transition', () => {
    expect(validateJourneyGraph(graph([], []))).toEqual([
      { path: 'steps.t', message: 'The trigger t has no outgoing transition; connect it to the first step' },
    ]);
    expect(validateJourneyGraph(graph([['a', 'EXIT'], ['b', 'EXIT']], [['t', 'a'], ['t', 'b']]))).toEqual([
      { path: 'steps.t', message: 'TRIGGER step t has 2 unlabelled transitions (to EXIT step a, EXIT step b); keep one' },
      { path: 'steps.t', message: 'The trigger t has 2 outgoing transitions; it must have exactly one' },
    ]);
  });

  test('nothing leads to the trigger', () => {
    const g = graph([['d', 'DELAY'], ['c', 'CONDITION'], ['x', 'EXIT']], [['t', 'd'], ['d', 'c'], ['c', 't', 'yes'], ['c', 'x', 'no']]);
    expect(validateJourneyGraph(g)).toEqual([{ path: 'steps.c', message: 'CONDITION step c leads back to the trigger; nothing may lead to the trigger' }]);
  });

  test('the entry must be the TRIGGER step, and transitions must name existing steps', () => {
    const g = graph([['s', 'SEND_EMAIL']], [['t', 's'], ['s', 'ghost']], 's');
    expect(validateJourneyGraph(g)).toEqual([
      { path: 'graph', message: 'The entry step s is not a TRIGGER step of this workflow' },
      { path: 'steps.t', message: 'TRIGGER step t is a second trigger; a workflow has exactly one' },
      { path: 'steps.s', message: 'Transition s → ghost refers to a step that does not exist (ghost)' },
    ]);
  });
});
