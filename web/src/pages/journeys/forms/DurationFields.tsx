import { SelectField, TextField } from '../../../components/ui';
import { UNITS } from './Frame';

/** A whole number of minutes, hours or days, as an amount and its unit side by side (a delay, a wait's timeout). */
export function DurationFields({
  label,
  unitLabel,
  amount,
  unit,
  onAmount,
  onUnit,
  amountError,
  unitError,
}: {
  label: string;
  unitLabel: string;
  amount: string;
  unit: string;
  onAmount: (amount: string) => void;
  onUnit: (unit: (typeof UNITS)[number]) => void;
  amountError?: string;
  unitError?: string;
}) {
  return (
    <div className="field-row">
      <TextField
        label={label}
        type="number"
        min={1}
        step={1}
        inputMode="numeric"
        value={amount}
        onChange={(e) => onAmount(e.target.value)}
        error={amountError}
      />
      <SelectField label={unitLabel} value={unit} onChange={(e) => onUnit(e.target.value as (typeof UNITS)[number])} error={unitError}>
        {UNITS.map((u) => (
          <option key={u} value={u}>
            {u}
          </option>
        ))}
      </SelectField>
    </div>
  );
}
