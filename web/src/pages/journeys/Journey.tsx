import { useQuery, useQueryClient } from '@tanstack/react-query';
import { Tabs } from 'radix-ui';
import { useCallback, useMemo, useRef, useState } from 'react';
import { Link, useParams } from 'react-router';
import { api } from '../../api/client';
import { useTemplateChoices } from '../../api/templates';
import { useProject } from '../../app/project';
import { ErrorNotice, Loading, PageHeader } from '../../components/ui';
import { EnabledBadge } from './badges';
import { Connections } from './Connections';
import { EdgePanel } from './EdgePanel';
import { Executions } from './Executions';
import { JourneyCanvas, type Selection } from './JourneyCanvas';
import { JourneySettings } from './JourneySettings';
import type { Point } from './layout';
import { Palette } from './Palette';
import { executionPath } from './path';
import { executionsKey, useJourney } from './queries';
import { StepPanel } from './StepPanel';
import { TestRun } from './TestRun';
import { type Execution, isActive, type JourneyDetail, type UserStepType } from './types';
import { useJourneyEditor } from './useJourneyEditor';
import './journeys.css';

/** One execution, read again while it runs: every 500 ms for a test run, every 2 s otherwise. */
function useExecution(journeyId: string, executionId: string | null, pollMs: number) {
  return useQuery({
    queryKey: ['execution', journeyId, executionId],
    queryFn: () => api<Execution>(`/workflows/${journeyId}/executions/${executionId}`),
    enabled: executionId !== null,
    refetchInterval: (query) => (query.state.data && isActive(query.state.data.status) ? pollMs : false),
  });
}

export default function JourneyPage() {
  const { projectId } = useProject();
  const { journeyId = '' } = useParams();
  const journey = useJourney(journeyId);
  if (journey.isPending) return <Loading />;
  if (!journey.data) {
    return (
      <>
        <PageHeader title="Journey" />
        <ErrorNotice error={journey.error} />
        <Link to={`/p/${projectId}/journeys`}>All journeys</Link>
      </>
    );
  }
  return <Editor key={journeyId} journey={journey.data} projectId={projectId} />;
}

type Tab = 'configure' | 'executions' | 'test';

function Editor({ journey, projectId }: { journey: JourneyDetail; projectId: string }) {
  const client = useQueryClient();
  const templates = useTemplateChoices(projectId);
  const templateList = templates.data ?? [];
  const positionsRef = useRef<Record<string, Point>>({});
  const editor = useJourneyEditor(journey, templateList, positionsRef);
  const [selection, setSelection] = useState<Selection>(null);
  const [tab, setTab] = useState<Tab>('configure');
  const [listedId, setListedId] = useState<string | null>(null);
  const [testRunId, setTestRunId] = useState<string | null>(null);
  const listed = useExecution(journey.id, listedId, 2000);
  const testRun = useExecution(journey.id, testRunId, 500);

  const entryStepId = journey.steps.find((s) => s.type === 'TRIGGER')?.id;
  const shown = tab === 'executions' ? listed.data : tab === 'test' ? testRun.data : undefined;
  const path = useMemo(() => (shown ? executionPath(shown, journey.transitions, entryStepId) : null), [shown, journey.transitions, entryStepId]);

  const select = useCallback((next: Selection) => {
    setSelection(next);
    if (next) setTab('configure');
  }, []);

  const addStep = async (type: UserStepType, position?: Point) => {
    const after = selection?.kind === 'step' ? selection.id : undefined;
    const step = await editor.addStep(type, position, position ? undefined : after);
    if (step) select({ kind: 'step', id: step.id });
  };

  const selectedStep = selection?.kind === 'step' ? journey.steps.find((s) => s.id === selection.id) : undefined;
  const selectedEdge = selection?.kind === 'edge' ? journey.transitions.find((t) => t.id === selection.id) : undefined;
  const problems = editor.problems;

  return (
    <div className="journey-page">
      <PageHeader
        title={journey.name}
        description={
          <>
            Starts when <code>{journey.triggerConfig.eventName}</code> is recorded for a contact ·{' '}
            <EnabledBadge enabled={journey.enabled} />
          </>
        }
      >
        <Link to={`/p/${projectId}/journeys`}>All journeys</Link>
        <button
          type="button"
          className={journey.enabled ? 'button-danger' : 'button-primary'}
          disabled={editor.busy}
          onClick={() => void editor.patchJourney({ enabled: !journey.enabled })}
        >
          {journey.enabled ? 'Disable' : 'Enable'}
        </button>
      </PageHeader>
      {journey.enabled ? (
        <p className="notice">
          This journey is enabled: every change is checked at once and refused if it would leave the graph incomplete. Disable it to rework it step by
          step; running executions keep the graph they started with.
        </p>
      ) : null}
      <ErrorNotice error={editor.error} />
      <Palette onAdd={(type) => void addStep(type)} busy={editor.busy} />
      <div className="journey-editor">
        <JourneyCanvas
          journey={journey}
          templates={templateList}
          selection={selection}
          onSelect={select}
          path={path}
          problems={problems}
          positionsRef={positionsRef}
          onAddStep={(type, position) => void addStep(type, position)}
          onConnect={(from, to, branch) => void editor.connect(from, to, branch)}
          onDelete={(steps, transitions) => {
            void editor.remove(steps, transitions);
            setSelection(null);
          }}
        />
        <Tabs.Root className="journey-side" value={tab} onValueChange={(v) => setTab(v as Tab)}>
          <Tabs.List className="tab-list" aria-label="Journey panels">
            <Tabs.Trigger value="configure">Configure</Tabs.Trigger>
            <Tabs.Trigger value="executions">Executions</Tabs.Trigger>
            <Tabs.Trigger value="test">Test run</Tabs.Trigger>
          </Tabs.List>
          <Tabs.Content value="configure" forceMount hidden={tab !== 'configure'} className="tab-panel">
            {selectedStep && selectedStep.type !== 'TRIGGER' ? (
              <StepPanel
                journey={journey}
                step={selectedStep}
                templates={templateList}
                busy={editor.busy}
                problems={problems?.steps[selectedStep.id] ?? []}
                onProblems={editor.showProblems}
                onConnect={(to, branch) => void editor.connect(selectedStep.id, to, branch)}
                onRemove={(steps, transitions, splice) => {
                  void editor.remove(steps, transitions, splice);
                  if (steps.length > 0) setSelection(null);
                }}
              />
            ) : selectedEdge ? (
              <EdgePanel
                journey={journey}
                transition={selectedEdge}
                busy={editor.busy}
                problems={problems?.transitions[selectedEdge.id] ?? []}
                onRemove={() => {
                  void editor.remove([], [selectedEdge.id]);
                  setSelection(null);
                }}
              />
            ) : (
              <TriggerPanel journey={journey} editor={editor} selected={selectedStep !== undefined} />
            )}
          </Tabs.Content>
          <Tabs.Content value="executions" forceMount hidden={tab !== 'executions'} className="tab-panel">
            <ErrorNotice error={listed.error} />
            <Executions journey={journey} selectedId={listedId} selected={listed.data} onSelect={setListedId} />
          </Tabs.Content>
          <Tabs.Content value="test" forceMount hidden={tab !== 'test'} className="tab-panel">
            <ErrorNotice error={testRun.error} />
            <TestRun
              journey={journey}
              run={testRun.data}
              onStarted={(run) => {
                setTestRunId(run.id);
                void client.invalidateQueries({ queryKey: executionsKey(journey.id) });
              }}
            />
          </Tabs.Content>
        </Tabs.Root>
      </div>
    </div>
  );
}

/** With nothing (or the trigger) selected: the journey's settings and what the trigger leads to. */
function TriggerPanel({ journey, editor, selected }: { journey: JourneyDetail; editor: ReturnType<typeof useJourneyEditor>; selected: boolean }) {
  const trigger = journey.steps.find((s) => s.type === 'TRIGGER');
  return (
    <>
      {!selected ? <p className="muted">Select a step on the graph to configure it, or add one from the palette.</p> : null}
      <JourneySettings key={journey.id} journey={journey} busy={editor.busy} error={editor.error} onSave={(body) => void editor.patchJourney(body)} />
      {trigger ? (
        <Connections
          journey={journey}
          step={trigger}
          busy={editor.busy}
          onConnect={(to, branch) => void editor.connect(trigger.id, to, branch)}
          onRemove={(transitionId) => void editor.remove([], [transitionId])}
        />
      ) : null}
    </>
  );
}
