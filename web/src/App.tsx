import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import { Api } from "./api";
import { Answer } from "./Answer";
import { ReasoningPanel } from "./ReasoningPanel";
import { SectionView } from "./SectionView";
import type {
  AgentEvent,
  Citation,
  CollectionOut,
  GeneratedAnswer,
  RunSummary,
  SectionOut,
} from "./types";

const KEY_STORAGE = "sleuth.apiKey";

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export function App() {
  const [key, setKey] = useState(() => localStorage.getItem(KEY_STORAGE) ?? "");
  const [keyDraft, setKeyDraft] = useState(key);
  const api = useMemo(() => new Api(key), [key]);
  const [collections, setCollections] = useState<CollectionOut[]>([]);
  const [collection, setCollection] = useState("");
  const [query, setQuery] = useState("");
  const [mode, setMode] = useState<"react" | "guided">("react");
  const [runs, setRuns] = useState<RunSummary[]>([]);
  const [loadError, setLoadError] = useState<string | null>(null);

  const [runQuery, setRunQuery] = useState<string | null>(null);
  const [runCollection, setRunCollection] = useState("");
  const [events, setEvents] = useState<AgentEvent[]>([]);
  const [running, setRunning] = useState(false);
  const [streamError, setStreamError] = useState<string | null>(null);
  const abort = useRef<AbortController | null>(null);

  const [cited, setCited] = useState<Citation | null>(null);
  const [section, setSection] = useState<SectionOut | null>(null);
  const [sectionLoading, setSectionLoading] = useState(false);
  const [sectionError, setSectionError] = useState<string | null>(null);

  const refreshRuns = useCallback(() => {
    if (!key) return;
    api.runs().then(setRuns, () => undefined);
  }, [api, key]);

  useEffect(() => {
    if (!key) return;
    setLoadError(null);
    api.collections().then(
      (cs) => {
        setCollections(cs);
        setCollection((c) => (c && cs.some((x) => x.name === c) ? c : (cs[0]?.name ?? "")));
      },
      (err) => setLoadError(message(err)),
    );
    refreshRuns();
  }, [api, key, refreshRuns]);

  const follow = useCallback(
    async (taskId: string) => {
      abort.current?.abort();
      const ctrl = new AbortController();
      abort.current = ctrl;
      setEvents([]);
      setStreamError(null);
      setRunning(true);
      try {
        await api.stream(taskId, (e) => setEvents((es) => [...es, e]), ctrl.signal);
      } catch (err) {
        if (!ctrl.signal.aborted) setStreamError(message(err));
      } finally {
        if (abort.current === ctrl) {
          setRunning(false);
          refreshRuns();
        }
      }
    },
    [api, refreshRuns],
  );

  const ask = async (ev: React.FormEvent) => {
    ev.preventDefault();
    if (!query.trim() || !collection) return;
    setRunQuery(query);
    setRunCollection(collection);
    setEvents([]);
    setStreamError(null);
    try {
      setRunning(true);
      const accepted = await api.search({ query, collection, mode, stream: true });
      refreshRuns();
      await follow(accepted.task_id);
    } catch (err) {
      setRunning(false);
      setStreamError(message(err));
    }
  };

  const reopen = (r: RunSummary) => {
    setRunQuery(r.query);
    setRunCollection(r.collection);
    void follow(r.task_id);
  };

  const openSection = useCallback(
    (c: Citation, collectionName: string) => {
      setCited(c);
      setSection(null);
      setSectionError(null);
      setSectionLoading(true);
      api
        .section(collectionName, c.source_id)
        .then(setSection, (err) => setSectionError(message(err)))
        .finally(() => setSectionLoading(false));
    },
    [api],
  );

  const answer: GeneratedAnswer | null = useMemo(() => {
    const e = events.find((x) => x.type === "answer");
    return e?.type === "answer" ? e.answer : null;
  }, [events]);

  const saveKey = (ev: React.FormEvent) => {
    ev.preventDefault();
    localStorage.setItem(KEY_STORAGE, keyDraft.trim());
    setKey(keyDraft.trim());
  };

  return (
    <div className="app">
      <header className="top">
        <h1>sleuth</h1>
        <form className="key-form" onSubmit={saveKey}>
          <label htmlFor="api-key">API key</label>
          <input
            id="api-key"
            type="password"
            autoComplete="off"
            value={keyDraft}
            placeholder="sleuth_…  (from: sleuth users create NAME)"
            onChange={(e) => setKeyDraft(e.target.value)}
          />
          <button type="submit">Save key</button>
        </form>
      </header>
      {!key && <p className="notice">Enter your API key; it is kept in this browser only.</p>}
      {loadError && (
        <p className="error-state" role="alert">
          Could not load your collections: {loadError}
        </p>
      )}
      <div className="layout">
        <aside className="runs" aria-labelledby="runs-title">
          <details open>
            <summary>
              <h2 id="runs-title">Past runs</h2>
            </summary>
            {runs.length === 0 && <p className="muted">No runs yet.</p>}
            <ul>
              {runs.map((r) => (
                <li key={r.task_id}>
                  <button type="button" className="run-item" onClick={() => reopen(r)}>
                    <span className="run-query">{r.query}</span>
                    <span className="muted">
                      {r.collection} · {r.mode} · {r.status}
                    </span>
                  </button>
                </li>
              ))}
            </ul>
          </details>
        </aside>
        <main className="main">
          <form className="search" onSubmit={ask} aria-label="Ask a question">
            <div className="row">
              <label htmlFor="collection">Collection</label>
              <select
                id="collection"
                value={collection}
                onChange={(e) => setCollection(e.target.value)}
              >
                {collections.map((c) => (
                  <option key={c.name} value={c.name}>
                    {c.name} ({c.n_documents} docs)
                  </option>
                ))}
              </select>
              <fieldset className="mode">
                <legend>Mode</legend>
                {(["react", "guided"] as const).map((m) => (
                  <label key={m}>
                    <input
                      type="radio"
                      name="mode"
                      value={m}
                      checked={mode === m}
                      onChange={() => setMode(m)}
                    />
                    {m}
                  </label>
                ))}
              </fieldset>
            </div>
            <label htmlFor="question">Question</label>
            <div className="row">
              <input
                id="question"
                type="text"
                value={query}
                maxLength={4000}
                placeholder="What is the punishment for murder?"
                onChange={(e) => setQuery(e.target.value)}
              />
              <button type="submit" disabled={!key || !collection || !query.trim()}>
                Ask
              </button>
            </div>
          </form>
          {runQuery !== null && (
            <>
              <h2 className="question">{runQuery}</h2>
              <div className="results">
                <ReasoningPanel events={events} running={running} streamError={streamError} />
                {answer && (
                  <Answer answer={answer} onCite={(c) => openSection(c, runCollection)} />
                )}
              </div>
            </>
          )}
        </main>
      </div>
      {cited && (
        <SectionView
          citation={cited}
          section={section}
          loading={sectionLoading}
          error={sectionError}
          onOpen={(sid) =>
            openSection({ source_id: sid, number: null, title: "", text: "", support: null }, runCollection)
          }
          onClose={() => setCited(null)}
        />
      )}
    </div>
  );
}
