import { allowedBranches, type Branch, type GraphStep, type JourneyGraph } from './steps';

/**
 * Structural checks of a journey graph, run when a journey is enabled and after every edit of
 * an enabled one. Pure: no database, so the rules are unit-tested on hand-made graphs.
 *
 * `path` names what to fix: `steps.<stepId>`, `transitions.<transitionId>` (or the source step's
 * path when the transition carries no id), or `graph` for a problem of several steps (a loop).
 */
export interface GraphIssue {
  path: string;
  message: string;
}

/**
 * A JourneyGraph, optionally carrying the ids of its transitions and the names of its steps:
 * the API passes both so that messages point at rows a client can see.
 */
export type ValidatableGraph = Omit<JourneyGraph, 'steps' | 'transitions'> & {
  steps: Record<string, GraphStep & { name?: string | null }>;
  transitions: (JourneyGraph['transitions'][number] & { id?: string })[];
};

type Transition = ValidatableGraph['transitions'][number];

/** Steps where an execution waits for time to pass: every loop must contain one. */
const WAITING_TYPES = new Set(['DELAY', 'WAIT_FOR_EVENT']);

const branchLabel = (b: Branch | null) => (b === null ? 'unlabelled' : `"${b}"`);

export function validateJourneyGraph(graph: JourneyGraph | ValidatableGraph): GraphIssue[] {
  const g = graph as ValidatableGraph;
  const issues: GraphIssue[] = [];
  const ids = Object.keys(g.steps).sort();
  const describe = (id: string) => {
    const step = g.steps[id];
    if (!step) return `unknown step ${id}`;
    return step.name ? `${step.type} step "${step.name}" (${id})` : `${step.type} step ${id}`;
  };
  const transitionPath = (t: Transition) => (t.id ? `transitions.${t.id}` : `steps.${t.from}`);

  // Entry point.
  const triggers = ids.filter((id) => g.steps[id]!.type === 'TRIGGER');
  const entry = g.steps[g.entryStepId];
  if (!entry || entry.type !== 'TRIGGER') {
    issues.push({ path: 'graph', message: `The entry step ${g.entryStepId} is not a TRIGGER step of this workflow` });
  }
  for (const id of triggers) {
    if (id !== g.entryStepId) issues.push({ path: `steps.${id}`, message: `${describe(id)} is a second trigger; a workflow has exactly one` });
  }

  // Transitions one by one; those naming unknown steps are left out of the graph checks below.
  const valid: Transition[] = [];
  for (const t of g.transitions) {
    const from = g.steps[t.from];
    const to = g.steps[t.to];
    if (!from || !to) {
      issues.push({ path: transitionPath(t), message: `Transition ${t.from} → ${t.to} refers to a step that does not exist (${!from ? t.from : t.to})` });
      continue;
    }
    valid.push(t);
    if (!allowedBranches(from.type).includes(t.branch)) {
      const allowed = allowedBranches(from.type)
        .map((b) => branchLabel(b))
        .join(' or ');
      issues.push({
        path: transitionPath(t),
        message: `A transition from ${describe(t.from)} may not be ${branchLabel(t.branch)}; it must be ${allowed}`,
      });
    } else if (from.type === 'WAIT_FOR_EVENT' && t.branch === 'timeout' && from.config.timeout === undefined) {
      issues.push({
        path: transitionPath(t),
        message: `${describe(t.from)} has no timeout, so its "timeout" branch to ${describe(t.to)} can never be taken; set config.timeout or remove the transition`,
      });
    }
    if (to.type === 'TRIGGER') {
      issues.push({ path: transitionPath(t), message: `${describe(t.from)} leads back to the trigger; nothing may lead to the trigger` });
    }
  }

  const outgoing = new Map<string, Transition[]>(ids.map((id) => [id, []]));
  const incoming = new Map<string, Transition[]>(ids.map((id) => [id, []]));
  for (const t of valid) {
    outgoing.get(t.from)!.push(t);
    incoming.get(t.to)!.push(t);
  }

  // Per step: its outgoing branches.
  for (const id of ids) {
    const step = g.steps[id]!;
    const out = outgoing.get(id)!;
    const byBranch = new Map<Branch | null, Transition[]>();
    for (const t of out) byBranch.set(t.branch, [...(byBranch.get(t.branch) ?? []), t]);
    for (const [branch, ts] of byBranch) {
      if (ts.length > 1) {
        issues.push({
          path: `steps.${id}`,
          message: `${describe(id)} has ${ts.length} ${branchLabel(branch)} transitions (to ${ts.map((t) => describe(t.to)).join(', ')}); keep one`,
        });
      }
    }
    if (step.type === 'TRIGGER') {
      if (out.length !== 1) {
        issues.push({
          path: `steps.${id}`,
          message:
            out.length === 0
              ? `The trigger ${id} has no outgoing transition; connect it to the first step`
              : `The trigger ${id} has ${out.length} outgoing transitions; it must have exactly one`,
        });
      }
    } else if (step.type === 'EXIT') {
      if (out.length > 0) {
        issues.push({
          path: `steps.${id}`,
          message: `${describe(id)} ends the execution but has ${out.length} outgoing transition(s) (to ${out.map((t) => describe(t.to)).join(', ')}); remove them`,
        });
      }
    } else if (step.type === 'CONDITION') {
      const missing = (['yes', 'no'] as const).filter((b) => !byBranch.has(b));
      if (missing.length > 0) {
        issues.push({
          path: `steps.${id}`,
          message: `${describe(id)} needs both a "yes" and a "no" transition; missing: ${missing.map((b) => `"${b}"`).join(', ')}`,
        });
      }
    } else if (step.type === 'WAIT_FOR_EVENT') {
      if (byBranch.has(null) && (byBranch.has('event') || byBranch.has('timeout'))) {
        issues.push({
          path: `steps.${id}`,
          message: `${describe(id)} mixes an unlabelled transition (taken on event and on timeout) with labelled ones; use one unlabelled transition or "event"/"timeout" ones`,
        });
      }
      const named = step.config.emailStepId;
      if (named !== undefined && g.steps[named]?.type !== 'SEND_EMAIL') {
        issues.push({
          path: `steps.${id}`,
          message: `${describe(id)} waits for the email of step ${named}, which is not a SEND_EMAIL step of this workflow`,
        });
      }
    }
  }

  // Reachability from the trigger, over all branches.
  const reached = new Set<string>();
  if (entry) {
    const stack = [g.entryStepId];
    while (stack.length > 0) {
      const id = stack.pop()!;
      if (reached.has(id)) continue;
      reached.add(id);
      for (const t of outgoing.get(id) ?? []) stack.push(t.to);
    }
  }
  for (const id of ids) {
    if (!reached.has(id) && g.steps[id]!.type !== 'TRIGGER') {
      issues.push({ path: `steps.${id}`, message: `${describe(id)} is not reachable from the trigger; connect a transition to it or delete it` });
    }
  }

  // Every step must be able to finish: an end is an EXIT step or a step without outgoing transitions.
  const canEnd = new Set<string>();
  const queue = ids.filter((id) => g.steps[id]!.type === 'EXIT' || outgoing.get(id)!.length === 0);
  for (const id of queue) canEnd.add(id);
  while (queue.length > 0) {
    const id = queue.pop()!;
    for (const t of incoming.get(id)!) {
      if (!canEnd.has(t.from)) {
        canEnd.add(t.from);
        queue.push(t.from);
      }
    }
  }
  for (const id of ids) {
    if (canEnd.has(id)) continue;
    // Everything reachable from a trapped step is trapped too: name them all.
    const trap = new Set<string>();
    const stack = [id];
    while (stack.length > 0) {
      const s = stack.pop()!;
      if (trap.has(s)) continue;
      trap.add(s);
      for (const t of outgoing.get(s)!) stack.push(t.to);
    }
    const within = [...trap].sort().map(describe).join(', ');
    issues.push({
      path: `steps.${id}`,
      message: `${describe(id)} can never finish: no path from it reaches an EXIT step or a step without outgoing transitions (every path stays within ${within})`,
    });
  }

  // Loops must wait: a cycle among steps that neither delay nor wait would spin without pause.
  for (const component of loopsWithoutWait(ids, g, outgoing)) {
    const cycle = shortestCycle(component[0]!, new Set(component), outgoing);
    const loop = [...cycle, cycle[0]!].map(describe).join(' → ');
    const rest = component.filter((id) => !cycle.includes(id));
    issues.push({
      path: 'graph',
      message:
        `Loop without a DELAY or WAIT_FOR_EVENT step: ${loop}; an execution would repeat it without pause. Add a DELAY or WAIT_FOR_EVENT step to it` +
        (rest.length > 0 ? ` (these steps also loop with it: ${rest.map(describe).join(', ')})` : ''),
    });
  }

  return issues;
}

/**
 * Strongly connected components (Tarjan) of the graph without its waiting steps, keeping those
 * that contain a cycle: more than one step, or a step with a transition to itself.
 */
function loopsWithoutWait(ids: string[], g: ValidatableGraph, outgoing: Map<string, Transition[]>): string[][] {
  const nodes = ids.filter((id) => !WAITING_TYPES.has(g.steps[id]!.type));
  const inSub = new Set(nodes);
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const out: string[][] = [];
  let counter = 0;

  const succ = (id: string) => outgoing.get(id)!.map((t) => t.to).filter((to) => inSub.has(to));

  // Iterative Tarjan, so a long chain of steps cannot overflow the call stack.
  for (const root of nodes) {
    if (index.has(root)) continue;
    const work: { id: string; next: number }[] = [{ id: root, next: 0 }];
    index.set(root, counter);
    low.set(root, counter++);
    stack.push(root);
    onStack.add(root);
    while (work.length > 0) {
      const frame = work[work.length - 1]!;
      const succs = succ(frame.id);
      if (frame.next < succs.length) {
        const w = succs[frame.next++]!;
        if (!index.has(w)) {
          index.set(w, counter);
          low.set(w, counter++);
          stack.push(w);
          onStack.add(w);
          work.push({ id: w, next: 0 });
        } else if (onStack.has(w)) {
          low.set(frame.id, Math.min(low.get(frame.id)!, index.get(w)!));
        }
        continue;
      }
      work.pop();
      if (work.length > 0) {
        const parent = work[work.length - 1]!.id;
        low.set(parent, Math.min(low.get(parent)!, low.get(frame.id)!));
      }
      if (low.get(frame.id) === index.get(frame.id)) {
        const component: string[] = [];
        let w: string;
        do {
          w = stack.pop()!;
          onStack.delete(w);
          component.push(w);
        } while (w !== frame.id);
        const selfLoop = component.length === 1 && succs.includes(frame.id);
        if (component.length > 1 || selfLoop) out.push(component.sort());
      }
    }
  }
  return out.sort((a, b) => (a[0]! < b[0]! ? -1 : 1));
}

/** The shortest cycle through `start` staying inside `within` (breadth-first), as a list of steps. */
function shortestCycle(start: string, within: Set<string>, outgoing: Map<string, Transition[]>): string[] {
  const parent = new Map<string, string>();
  const queue = [start];
  const seen = new Set<string>();
  while (queue.length > 0) {
    const id = queue.shift()!;
    for (const t of outgoing.get(id)!) {
      if (!within.has(t.to)) continue;
      if (t.to === start) {
        const path = [id];
        while (path[0] !== start) path.unshift(parent.get(path[0]!)!);
        return path;
      }
      if (!seen.has(t.to)) {
        seen.add(t.to);
        parent.set(t.to, id);
        queue.push(t.to);
      }
    }
  }
  return [start];
}
