import { useState } from 'react';
import { ConditionBuilder, type ConditionFilter, isCompleteCondition } from '../../../components/ConditionBuilder';
import { fieldError } from '../../../components/ui';
import { type FormProps, Frame } from './Frame';

/** CONDITION: one filter on the contact or the execution's event data; true takes the yes branch. */
export function ConditionForm(props: FormProps) {
  const [filter, setFilter] = useState<ConditionFilter>(props.step.config as unknown as ConditionFilter);
  return (
    <Frame
      {...props}
      build={() => (isCompleteCondition(filter) ? { config: { ...filter } } : { error: 'Complete the condition: a field, and a value where the operator needs one.' })}
    >
      {(error) => (
        <>
          <ConditionBuilder mode="filter" label="Go down “yes” when" value={filter} onChange={(next) => setFilter(next as ConditionFilter)} />
          {fieldError(error, 'field') || fieldError(error, 'value') || fieldError(error, 'operator') ? (
            <p className="field-error">{fieldError(error, 'field') ?? fieldError(error, 'value') ?? fieldError(error, 'operator')}</p>
          ) : null}
        </>
      )}
    </Frame>
  );
}
