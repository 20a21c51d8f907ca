import type { ReactNode } from "react";
import type { Citation, GeneratedAnswer } from "./types";

const MARKER = /\[([A-Za-z0-9][A-Za-z0-9_.:\-]*)\]/g;

export interface AnswerProps {
  answer: GeneratedAnswer;
  onCite: (citation: Citation) => void;
  /** The checks changed the streamed draft: say so (and keep the draft to compare) */
  revised?: boolean;
  /** The answer text as it was streamed, before the checks */
  draft?: string | null;
}

function CiteButton({ c, onCite }: { c: Citation; onCite: (c: Citation) => void }) {
  return (
    <button
      type="button"
      className="cite"
      data-source-id={c.source_id}
      title={c.title}
      aria-label={`Open cited section ${c.source_id}${c.title ? `: ${c.title}` : ""}`}
      onClick={() => onCite(c)}
    >
      [{c.source_id}]
    </button>
  );
}

/** The answer text with its [source_id] markers as buttons that open the cited section. */
export function withCitations(
  text: string,
  citations: Citation[],
  onCite: (c: Citation) => void,
): ReactNode[] {
  const byId = new Map(citations.map((c) => [c.source_id, c]));
  const out: ReactNode[] = [];
  let at = 0;
  for (const m of text.matchAll(MARKER)) {
    const c = byId.get(m[1]);
    if (!c) continue;
    out.push(text.slice(at, m.index));
    out.push(<CiteButton key={`${m.index}`} c={c} onCite={onCite} />);
    at = (m.index ?? 0) + m[0].length;
  }
  out.push(text.slice(at));
  return out;
}

export function Answer({ answer, onCite, revised = false, draft = null }: AnswerProps) {
  return (
    <section
      className={`answer ${answer.is_insufficient_context ? "insufficient" : ""}`}
      aria-labelledby="answer-title"
    >
      <h2 id="answer-title">Answer</h2>
      {revised && (
        <div className="revised-note" role="note">
          <strong>The checked answer differs from the streamed draft.</strong> This is the
          answer after the citation and grounding checks.
          {draft && (
            <details>
              <summary>Show the streamed draft</summary>
              <p className="draft-text">{draft}</p>
            </details>
          )}
        </div>
      )}
      {answer.is_insufficient_context && (
        <p className="insufficient-note" role="note">
          <strong>Insufficient context:</strong> the documents found do not answer this
          question.
        </p>
      )}
      <div className="answer-text">
        {answer.answer_text.split(/\n+/).map((para, i) => (
          <p key={i}>{withCitations(para, answer.citations, onCite)}</p>
        ))}
      </div>
      {answer.key_points.length > 0 && (
        <>
          <h3>Key points</h3>
          <ul>
            {answer.key_points.map((k, i) => (
              <li key={i}>{withCitations(k, answer.citations, onCite)}</li>
            ))}
          </ul>
        </>
      )}
      {answer.citations.length > 0 && (
        <>
          <h3>Sources</h3>
          <ol className="sources">
            {answer.citations.map((c) => (
              <li key={c.source_id}>
                <CiteButton c={c} onCite={onCite} /> {c.title}
                {c.support != null && (
                  <span className="muted"> (support {c.support.toFixed(2)})</span>
                )}
              </li>
            ))}
          </ol>
        </>
      )}
      {answer.ungrounded_sentences.length > 0 && (
        <details className="ungrounded">
          <summary>{answer.ungrounded_sentences.length} sentence(s) not found in a source</summary>
          <ul>
            {answer.ungrounded_sentences.map((s, i) => (
              <li key={i}>{s}</li>
            ))}
          </ul>
        </details>
      )}
    </section>
  );
}
