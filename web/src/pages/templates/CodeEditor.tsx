import { html } from '@codemirror/lang-html';
import { HighlightStyle, syntaxHighlighting } from '@codemirror/language';
import { tags as t } from '@lezer/highlight';
import { basicSetup, EditorView } from 'codemirror';
import { useEffect, useRef } from 'react';

/**
 * The HTML editor of a template body: CodeMirror 6 with HTML highlighting, its own chunk (loaded by
 * Template.tsx when the editor opens). Tab is left to the browser, as CodeMirror does unless told
 * otherwise (no indentWithTab), so keyboard users move on to the next control with it.
 */
/**
 * Token colours that keep 4.5:1 against the editor's background and its active-line tint: some of
 * CodeMirror's default ones (#e40, #f00) do not. basicSetup's default style steps aside for this one.
 */
const readableColours = HighlightStyle.define([
  { tag: [t.tagName, t.angleBracket], color: '#6f2da8' },
  { tag: [t.attributeName, t.propertyName], color: '#0b5394' },
  { tag: [t.attributeValue, t.string], color: '#9c1c1c' },
  { tag: [t.comment, t.meta, t.documentMeta, t.processingInstruction], color: '#4f5761', fontStyle: 'italic' },
  { tag: [t.keyword, t.atom, t.bool, t.number, t.special(t.string), t.escape, t.character], color: '#7a3e00' },
  { tag: [t.variableName, t.definition(t.variableName), t.typeName, t.className], color: '#1d5b2c' },
  { tag: t.invalid, color: '#b00020', textDecoration: 'underline' },
]);

export default function CodeEditor({
  value,
  onChange,
  labelId,
  describedBy,
}: {
  value: string;
  onChange: (value: string) => void;
  /** The id of the visible label, read out for the editable area. */
  labelId: string;
  describedBy?: string;
}) {
  const host = useRef<HTMLDivElement>(null);
  const view = useRef<EditorView | null>(null);
  const changed = useRef(onChange);
  changed.current = onChange;

  useEffect(() => {
    const editor = new EditorView({
      parent: host.current!,
      doc: value,
      extensions: [
        basicSetup,
        html(),
        syntaxHighlighting(readableColours),
        EditorView.lineWrapping,
        EditorView.contentAttributes.of({ 'aria-labelledby': labelId, ...(describedBy ? { 'aria-describedby': describedBy } : {}) }),
        EditorView.updateListener.of((update) => {
          if (update.docChanged) changed.current(update.state.doc.toString());
        }),
      ],
    });
    view.current = editor;
    return () => {
      editor.destroy();
      view.current = null;
    };
    // The editor is made once; later values arrive through the effect below.
  }, [labelId, describedBy]);

  // A value from outside (the saved template loaded, a reset) replaces the text; the editor's own edits match already.
  useEffect(() => {
    const editor = view.current;
    if (editor && editor.state.doc.toString() !== value) {
      editor.dispatch({ changes: { from: 0, to: editor.state.doc.length, insert: value } });
    }
  }, [value]);

  return <div ref={host} className="code-editor" />;
}
