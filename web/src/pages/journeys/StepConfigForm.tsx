import { ConditionForm } from './forms/ConditionForm';
import { DelayForm } from './forms/DelayForm';
import { ExitForm } from './forms/ExitForm';
import type { FormProps } from './forms/Frame';
import { SendEmailForm } from './forms/SendEmailForm';
import { UpdateContactForm } from './forms/UpdateContactForm';
import { WaitForEventForm } from './forms/WaitForEventForm';
import { WebhookForm } from './forms/WebhookForm';

const FORMS = {
  SEND_EMAIL: SendEmailForm,
  DELAY: DelayForm,
  WAIT_FOR_EVENT: WaitForEventForm,
  CONDITION: ConditionForm,
  WEBHOOK: WebhookForm,
  UPDATE_CONTACT: UpdateContactForm,
  EXIT: ExitForm,
};

/** The form of a step's type: its name and config, saved together with PATCH (the service validates the config). */
export function StepConfigForm(props: FormProps) {
  const Form = FORMS[props.step.type as keyof typeof FORMS];
  return Form ? <Form {...props} /> : null;
}
