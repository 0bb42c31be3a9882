import { useState } from 'react';
import { fieldError } from '../../../components/ui';
import { DurationFields } from './DurationFields';
import { type FormProps, Frame, str } from './Frame';

/** DELAY: a whole number of minutes, hours or days. */
export function DelayForm(props: FormProps) {
  const c = props.step.config;
  const [amount, setAmount] = useState(String(c.amount ?? 1));
  const [unit, setUnit] = useState(str(c.unit, 'days'));
  return (
    <Frame
      {...props}
      build={() => {
        const n = Number(amount);
        return Number.isInteger(n) && n > 0 ? { config: { amount: n, unit } } : { error: 'The delay is a whole number greater than 0.' };
      }}
    >
      {(error) => (
        <DurationFields
          label="Wait"
          unitLabel="Unit"
          amount={amount}
          unit={unit}
          onAmount={setAmount}
          onUnit={setUnit}
          amountError={fieldError(error, 'amount')}
          unitError={fieldError(error, 'unit')}
        />
      )}
    </Frame>
  );
}
