import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import { Api } from "./api";
import { ConversationView, type PendingTurn } from "./ConversationView";
import { Conversations } from "./Conversations";
import { RunResults } from "./RunResults";
import { SectionView } from "./SectionView";
import { EMPTY_RUN, followUpOf, reduceRun, type RunView } from "./steps";
import type {
  Citation,
  CollectionOut,
  RunSummary,
  SectionOut,
  ThreadDetail,
  ThreadOut,
} from "./types";

const KEY_STORAGE = "sleuth.apiKey";

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** The run on screen: what was asked, where, and in which conversation (if any). */
interface RunTarget {
  query: string;
  collection: string;
  threadId: string | null;
  taskId: string | null;
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

  const [target, setTarget] = useState<RunTarget | null>(null);
  const [run, setRun] = useState<RunView>(EMPTY_RUN);
  const [running, setRunning] = useState(false);
  const [streamError, setStreamError] = useState<string | null>(null);
  const abort = useRef<AbortController | null>(null);

  const [threads, setThreads] = useState<ThreadOut[]>([]);
  const [threadsError, setThreadsError] = useState<string | null>(null);
  const [threadId, setOpenThreadId] = useState<string | null>(null);
  const openId = useRef<string | null>(null); // threadId, for callbacks of earlier renders
  const setThreadId = (id: string | null) => {
    openId.current = id;
    setOpenThreadId(id);
  };
  const [thread, setThread] = useState<ThreadDetail | null>(null);
  const [threadError, setThreadError] = useState<string | null>(null);

  const [cited, setCited] = useState<Citation | null>(null);
  const [sectionCollection, setSectionCollection] = useState("");
  const [section, setSection] = useState<SectionOut | null>(null);
  const [sectionLoading, setSectionLoading] = useState(false);
  const [sectionError, setSectionError] = useState<string | null>(null);

  const refreshRuns = useCallback(() => {
    if (!key) return;
    api.runs().then(setRuns, () => undefined);
  }, [api, key]);

  const refreshThreads = useCallback(() => {
    if (!key || !collection) return;
    api.threads(collection).then(
      (ts) => {
        setThreads(ts);
        setThreadsError(null);
      },
      (err) => setThreadsError(`Could not load the conversations: ${message(err)}`),
    );
  }, [api, key, collection]);

  /** Reads thread `id` (again), unless another one was opened meanwhile. */
  const reloadThread = useCallback(
    (id: string) =>
      api.thread(id).then(
        (d) => openId.current === id && setThread(d),
        (err) =>
          openId.current === id &&
          setThreadError(`Could not load the conversation: ${message(err)}`),
      ),
    [api],
  );

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

  useEffect(refreshThreads, [refreshThreads]);

  const follow = useCallback(
    async (taskId: string) => {
      abort.current?.abort();
      const ctrl = new AbortController();
      abort.current = ctrl;
      setRun(EMPTY_RUN);
      setStreamError(null);
      setRunning(true);
      try {
        await api.stream(taskId, (e) => setRun((r) => reduceRun(r, e)), ctrl.signal);
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

  /** Asks `question` (in thread `inThread`, when given) and follows the run. */
  const start = async (question: string, inCollection: string, inThread: string | null) => {
    setTarget({ query: question, collection: inCollection, threadId: inThread, taskId: null });
    setRun(EMPTY_RUN);
    setStreamError(null);
    try {
      setRunning(true);
      const accepted = await api.search({
        query: question,
        collection: inCollection,
        mode,
        stream: true,
        ...(inThread ? { thread_id: inThread } : {}),
      });
      setTarget((t) => t && { ...t, taskId: accepted.task_id });
      refreshRuns();
      await follow(accepted.task_id);
    } catch (err) {
      setRunning(false);
      setStreamError(message(err));
    }
    if (inThread) {
      await reloadThread(inThread);
      refreshThreads();
    }
  };

  const ask = (ev: React.FormEvent) => {
    ev.preventDefault();
    if (!query.trim() || !collection) return;
    void start(query, collection, null);
  };

  const reopen = (r: RunSummary) => {
    setThreadId(null);
    setTarget({ query: r.query, collection: r.collection, threadId: null, taskId: r.task_id });
    void follow(r.task_id);
  };

  const openThread = (t: ThreadOut) => {
    setThreadId(t.thread_id);
    setThreadError(null);
    setThread((cur) => (cur?.thread_id === t.thread_id ? cur : null));
    void reloadThread(t.thread_id);
  };

  const newThread = () => {
    if (!collection) return;
    api.createThread({ collection, title: "" }).then(
      (t) => {
        setThreads((ts) => [t, ...ts.filter((x) => x.thread_id !== t.thread_id)]);
        setThreadsError(null);
        setThreadId(t.thread_id);
        setThreadError(null);
        setThread({ ...t, turns: [] });
      },
      (err) => setThreadsError(`Could not start a conversation: ${message(err)}`),
    );
  };

  const deleteThread = (t: ThreadOut) => {
    api.deleteThread(t.thread_id).then(
      () => {
        setThreads((ts) => ts.filter((x) => x.thread_id !== t.thread_id));
        if (openId.current === t.thread_id) closeThread();
      },
      (err) => setThreadsError(`Could not delete the conversation: ${message(err)}`),
    );
  };

  const closeThread = () => {
    setThreadId(null);
    setThread(null);
    setThreadError(null);
  };

  const chooseCollection = (name: string) => {
    setCollection(name);
    if (thread && thread.collection !== name) closeThread();
  };

  const openSection = useCallback(
    (c: Citation, collectionName: string) => {
      setCited(c);
      setSectionCollection(collectionName);
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

  const saveKey = (ev: React.FormEvent) => {
    ev.preventDefault();
    localStorage.setItem(KEY_STORAGE, keyDraft.trim());
    setKey(keyDraft.trim());
  };

  const inConversation = threadId !== null;
  // the run on screen belongs to the view shown: the open conversation, or single questions
  const runShown = target !== null && target.threadId === threadId;
  const threadRunning = inConversation && running && target?.threadId === threadId;
  const pending: PendingTurn | null =
    threadRunning && target && !thread?.turns.some((t) => t.task_id && t.task_id === target.taskId)
      ? {
          question: target.query,
          rewritten: run.steps.map(followUpOf).find((f) => f !== null)?.question ?? null,
        }
      : null;
  const results = runShown && target && (
    <RunResults
      run={run}
      running={running}
      streamError={streamError}
      onCite={(c) => openSection(c, target.collection)}
    />
  );

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
        <aside className="runs" aria-label="Conversations and past runs">
          <Conversations
            threads={threads}
            selected={threadId}
            disabled={!key || !collection}
            error={threadsError}
            onNew={newThread}
            onSelect={openThread}
            onDelete={deleteThread}
          />
          <details open>
            <summary>
              <h2 id="runs-title">Past runs</h2>
            </summary>
            {runs.length === 0 && <p className="muted">No runs yet.</p>}
            <ul aria-labelledby="runs-title">
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
          <form
            className="search"
            onSubmit={ask}
            aria-label={inConversation ? "Collection and mode" : "Ask a question"}
          >
            <div className="row">
              <label htmlFor="collection">Collection</label>
              <select
                id="collection"
                value={collection}
                onChange={(e) => chooseCollection(e.target.value)}
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
            {!inConversation && (
              <>
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
              </>
            )}
          </form>
          {inConversation ? (
            <>
              {thread ? (
                <ConversationView
                  key={thread.thread_id}
                  thread={thread}
                  pending={pending}
                  busy={threadRunning}
                  disabled={!key}
                  error={threadError}
                  onAsk={(q) => void start(q, thread.collection, thread.thread_id)}
                  onCite={(c) => openSection(c, thread.collection)}
                  onClose={closeThread}
                />
              ) : threadError ? (
                <p className="error-state" role="alert">
                  {threadError}
                </p>
              ) : (
                <p className="muted" role="status">
                  Loading the conversation…
                </p>
              )}
              {runShown && target && (
                <>
                  <h2 className="question">
                    <span className="muted">Reasoning for:</span> {target.query}
                  </h2>
                  {results}
                </>
              )}
            </>
          ) : (
            runShown &&
            target && (
              <>
                <h2 className="question">{target.query}</h2>
                {results}
              </>
            )
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
            openSection(
              { source_id: sid, number: null, title: "", text: "", support: null },
              sectionCollection,
            )
          }
          onClose={() => setCited(null)}
        />
      )}
    </div>
  );
}
