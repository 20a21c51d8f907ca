import { Answer } from "./Answer";
import { ReasoningPanel } from "./ReasoningPanel";
import { answerOf, type Draft, type RunView } from "./steps";
import type { Citation } from "./types";

export interface DraftAnswerProps {
  draft: Draft;
  running: boolean;
}

/** The answer text as the model writes it (answer_delta events), before any check. */
export function DraftAnswer({ draft, running }: DraftAnswerProps) {
  return (
    <section className="answer draft" aria-labelledby="draft-title" aria-busy={running}>
      <h2 id="draft-title">Draft answer</h2>
      <p className="muted draft-status">
        {running
          ? "Being written; it is checked once complete."
          : "The run ended before the draft was checked."}
        {draft.stream > 1 && ` Rewrite ${draft.stream}.`}
      </p>
      <p className="draft-text" data-testid="draft-text">
        {draft.text}
        {running && <span className="caret" aria-hidden="true" />}
      </p>
    </section>
  );
}

export interface RunResultsProps {
  run: RunView;
  running: boolean;
  streamError: string | null;
  onCite: (c: Citation) => void;
}

/** A run's reasoning steps beside its answer: the streamed draft while it is written, then
 * the checked answer in its place. */
export function RunResults({ run, running, streamError, onCite }: RunResultsProps) {
  const answer = answerOf(run.steps);
  return (
    <div className="results">
      <ReasoningPanel events={run.steps} running={running} streamError={streamError} />
      {answer ? (
        <Answer
          answer={answer.answer}
          onCite={onCite}
          revised={answer.revised ?? false}
          draft={run.draft?.text ?? null}
        />
      ) : (
        run.draft && <DraftAnswer draft={run.draft} running={running && !streamError} />
      )}
    </div>
  );
}
