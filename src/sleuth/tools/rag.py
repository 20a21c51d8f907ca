"""The built-in knowledge-base tools: search, read, outline, follow references, next hop,
list.

Each tool's description is the contract the LLM reads; each returns a one-line status and a
structured payload. Chunks a tool surfaces are tracked in the run's :class:`RunContext`, so
only they can be cited.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from sleuth.errors import ToolError
from sleuth.llm.calls import truncation_mark
from sleuth.retrieval import hops
from sleuth.retrieval.rerank import sigmoid
from sleuth.retrieval.search import KnowledgeBase, join_parts
from sleuth.tools.base import RunContext, Tool, ToolResult
from sleuth.types import Chunk

SNIPPET_CHARS = 400
EVIDENCE_CHARS = 800
"""Characters of each hit's best chunk in the observation the model reads (the payload
keeps the shorter snippet): enough for the fact a multi-hop question needs next."""
SECTION_CHARS = 4000
"""Characters of a section that ``read_section`` hands the model; a longer one is cut at a
word boundary with a visible ``[truncated: N of M chars]`` mark."""


def clip(text: str, limit: int) -> str:
    """``text`` when it has at most ``limit`` characters, else its head cut at the last space
    before ``limit`` and marked ``[truncated: N of M chars]`` (N left out of M)."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    space = head.rfind(" ")
    head = head[:space] if space > limit // 2 else head
    return head.rstrip() + truncation_mark(len(text) - len(head.rstrip()), len(text)).rstrip()


def _snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def evidence_block(number: int | None, source_id: str, title: str, text: str) -> str:
    """One numbered piece of evidence as the model reads it::

        [3] BNS_S103 · Section 103. Punishment for murder
        Whoever commits murder shall be punished with death or ...

    The number is the section's evidence number in the run (cite it as ``[3]``); without
    one the block opens ``[BNS_S103] title``.
    """
    if number is None:
        return f"[{source_id}] {title}\n{text}"
    heading = f"{source_id} · {title}" if title and title != source_id else source_id
    return f"[{number}] {heading}\n{text}"


class SearchArgs(BaseModel):
    query: str = Field(min_length=1, description="What to look for: key words or a question")
    collection: str | None = Field(
        default=None, description="Collection to search; default: the run's collection"
    )
    top_k: int = Field(default=5, ge=1, le=20, description="How many sections to return")


class SectionArgs(BaseModel):
    source_id: str = Field(min_length=1, description="A source_id returned by rag_search")


class OutlineArgs(BaseModel):
    target: str = Field(
        min_length=1, description="A source_id (its document's outline) or a document id"
    )


class HopArgs(BaseModel):
    question: str = Field(min_length=1, description="The question (or sub-question) to answer")
    source_id: str = Field(
        min_length=1, description="A section found for it, whose text names the next entity"
    )
    top_k: int = Field(default=hops.KEEP, ge=1, le=10, description="How many sections to return")


class NoArgs(BaseModel):
    pass


def build_rag_tools(kb: KnowledgeBase) -> list[Tool]:
    """The six knowledge-base tools bound to ``kb``."""

    def _found_section(source_id: str, ctx: RunContext) -> list[Chunk]:
        chunks = kb.section(ctx.collection, source_id)
        if not chunks:
            raise ToolError(
                f"no section '{source_id}' in collection '{ctx.collection}'; "
                "use a source_id returned by rag_search"
            )
        return chunks

    def rag_search(args: SearchArgs, ctx: RunContext) -> ToolResult:
        collection = args.collection or ctx.collection
        if collection != ctx.collection and ctx.user_id is not None:
            raise ToolError(f"collection '{collection}' is not available in this run")
        hits = kb.search(collection, args.query, k=args.top_k * 3)
        best: dict[str, tuple[float, Chunk]] = {}
        for hit in hits:
            sid = hit.chunk.source_id
            if sid not in best:
                best[sid] = (hit.score, hit.chunk)
        top = list(best.items())[: args.top_k]
        linked = kb.with_mentions(collection, [chunk for _, (_, chunk) in top])
        top = [(sid, (score, chunk)) for (sid, (score, _)), chunk in zip(top, linked, strict=True)]
        ctx.track(chunk for _, (_, chunk) in top)
        ctx.hits.update(chunk.chunk_id for _, (_, chunk) in top)
        ctx.searches.append(args.query)
        ctx.found[args.query] = [sid for sid, _ in top]
        results = [
            {
                "source_id": sid,
                "number": ctx.numbers.get(sid),
                "title": chunk.heading,
                "score": round(score, 4),
                "snippet": _snippet(chunk.text),
                "references": [r.target_id for r in chunk.references if r.target_id],
            }
            for sid, (score, chunk) in top
        ]
        ids = ", ".join(r["source_id"] for r in results) or "nothing"
        text = "\n\n".join(
            evidence_block(
                ctx.numbers.get(sid), sid, chunk.heading, _snippet(chunk.text, EVIDENCE_CHARS)
            )
            for sid, (_, chunk) in top
        )
        return ToolResult(
            status=f"rag_search '{args.query}' in {collection}: {len(results)} sections ({ids})",
            payload={"query": args.query, "collection": collection, "results": results},
            chunks=[chunk for _, (_, chunk) in top],
            text=text or "No section matched. Search again with other words.",
        )

    def read_section(args: SectionArgs, ctx: RunContext) -> ToolResult:
        chunks = kb.with_mentions(ctx.collection, _found_section(args.source_id, ctx))
        ctx.track(chunks)
        ctx.read.add(args.source_id)
        prev_id, next_id = kb.catalog.neighbours(ctx.collection, args.source_id)
        full = join_parts(chunks)
        text = clip(full, SECTION_CHARS)
        refs = sorted({r.target_id for c in chunks for r in c.references if r.target_id})
        return ToolResult(
            status=f"read {args.source_id} ({chunks[0].heading}): {len(full.split())} words",
            payload={
                "source_id": args.source_id,
                "number": ctx.numbers.get(args.source_id),
                "title": chunks[0].heading,
                "text": text,
                "truncated": len(full) > SECTION_CHARS,
                "previous": prev_id,
                "next": next_id,
                "references": refs,
            },
            chunks=chunks,
            text=evidence_block(
                ctx.numbers.get(args.source_id),
                args.source_id,
                chunks[0].heading,
                text,
            ),
        )

    def outline(args: OutlineArgs, ctx: RunContext) -> ToolResult:
        doc_id = kb.catalog.doc_id_for_source(ctx.collection, args.target) or args.target
        entries = kb.catalog.outline(ctx.collection, doc_id)
        if not entries:
            raise ToolError(f"no document or section '{args.target}' in '{ctx.collection}'")
        at = next((i for i, e in enumerate(entries) if e.source_id == args.target), 0)
        lo, hi = max(0, at - 12), min(len(entries), at + 13)
        items = [
            {"source_id": e.source_id, "title": " > ".join(e.title_path[1:] or e.title_path)}
            for e in entries[lo:hi]
        ]
        return ToolResult(
            status=f"outline of {doc_id}: {len(entries)} sections, showing {lo + 1}-{hi}",
            payload={"document": doc_id, "total": len(entries), "start": lo, "sections": items},
        )

    def follow_references(args: SectionArgs, ctx: RunContext) -> ToolResult:
        own = kb.section(ctx.collection, args.source_id)
        if not own:
            raise ToolError(f"no section '{args.source_id}' in collection '{ctx.collection}'")
        refs = kb.catalog.references_from(ctx.collection, args.source_id)
        mentioned = [
            r.target_id
            for c in kb.with_mentions(ctx.collection, own)
            for r in c.references
            if r.target_id
        ]
        targets = list(dict.fromkeys([*(r.target_id for r in refs if r.target_id), *mentioned]))
        unresolved = sorted({r.target_text for r in refs if not r.target_id})
        found: list[dict[str, str]] = []
        surfaced: list[Chunk] = []
        for target in targets[:8]:
            chunks = kb.section(ctx.collection, target)
            if chunks:
                surfaced.extend(chunks)
                found.append(
                    {
                        "source_id": target,
                        "title": chunks[0].heading,
                        "snippet": _snippet(join_parts(chunks), 600),
                    }
                )
        ctx.track(surfaced)
        text = "\n\n".join(
            evidence_block(
                ctx.numbers.get(f["source_id"]), f["source_id"], f["title"], f["snippet"]
            )
            for f in found
        )
        ctx.followed.add(args.source_id)
        cited_by = sorted(
            {r.source_id for r in kb.catalog.references_to(ctx.collection, args.source_id)}
        )
        return ToolResult(
            status=f"{args.source_id} cites {len(found)} sections"
            + (f" ({', '.join(f['source_id'] for f in found)})" if found else "")
            + f"; cited by {len(cited_by)}",
            payload={
                "source_id": args.source_id,
                "references": found,
                "unresolved": unresolved,
                "cited_by": cited_by[:20],
            },
            chunks=surfaced,
            text=text or f"{args.source_id} refers to no other section.",
        )

    def next_hop(args: HopArgs, ctx: RunContext) -> ToolResult:
        read: dict[str, list[Chunk]] = {args.source_id: _found_section(args.source_id, ctx)}

        def section(sid: str) -> tuple[str, str]:
            if sid not in read:
                read[sid] = kb.section(ctx.collection, sid)
            chunks = read[sid]
            return (chunks[0].title_path[-1] if chunks else sid, join_parts(chunks))

        # with the reranker on, the bridge queries search unreranked and the cross-encoder
        # judges only the hits that pass the hop's name check, each against its query
        reranker = kb.cross_encoder if kb.reranking else None
        passages: dict[tuple[str, str], str] = {}

        def search(query: str, k: int) -> list[tuple[str, float]]:
            found = kb.search_sections(ctx.collection, query, k=k, rerank=reranker is None)
            passages.update({(query, h.chunk.source_id): h.chunk.index_text() for h in found})
            return [(h.chunk.source_id, h.score) for h in found]

        def judge(pairs: Sequence[tuple[str, str]]) -> list[float]:
            assert reranker is not None
            logits = reranker.score_pairs([(q, passages[q, sid]) for q, sid in pairs])
            return [sigmoid(x) for x in logits]

        path = ctx.hop_paths.get(args.source_id, [])
        hop = hops.next_hop(
            args.question,
            args.source_id,
            section,
            search,
            path=path,
            exclude=list(ctx.retrieved),
            keep=args.top_k,
            prepare=kb.embed_queries,
            judge=judge if reranker is not None else None,
        )
        ctx.hopped.add(args.source_id)
        surfaced: list[Chunk] = []
        for hit in hop.hits:
            chunks = kb.with_mentions(ctx.collection, read[hit.source_id])
            surfaced.extend(chunks)
            ctx.hop_paths.setdefault(hit.source_id, [*path, args.source_id])
        ctx.track(surfaced)
        results = [
            {
                "source_id": hit.source_id,
                "number": ctx.numbers.get(hit.source_id),
                "title": section(hit.source_id)[0],
                "bridge": hit.bridge,
                "query": hit.query,
                "score": round(hit.score, 4),
                "snippet": _snippet(section(hit.source_id)[1]),
            }
            for hit in hop.hits
        ]
        if not hop.open_words:
            status = f"next_hop from {args.source_id}: it covers every word of the question"
        else:
            ids = ", ".join(f"{r['source_id']} via '{r['bridge']}'" for r in results)
            status = (
                f"next_hop from {args.source_id} for '{' '.join(hop.open_words)}': "
                f"{len(results)} sections ({ids or 'none holds a name it gives'})"
            )
        text = "\n\n".join(
            evidence_block(
                r["number"],
                r["source_id"],
                r["title"],
                _snippet(section(r["source_id"])[1], EVIDENCE_CHARS),
            )
            for r in results
        )
        return ToolResult(
            status=status,
            payload={
                "source_id": args.source_id,
                "open_words": hop.open_words,
                "queries": hop.queries,
                "results": results,
            },
            chunks=surfaced,
            text=text or "No next hop found from this section.",
        )

    def list_collections(_: NoArgs, ctx: RunContext) -> ToolResult:
        # a user's run sees only that user's collections (and its own): never another's names
        infos = kb.catalog.list_collections(owner=ctx.user_id)
        if ctx.user_id is not None and all(c.name != ctx.collection for c in infos):
            own = kb.catalog.get_collection(ctx.collection)
            infos = [*infos, own] if own is not None else infos
        items = [{"name": c.name, "documents": c.n_documents, "chunks": c.n_chunks} for c in infos]
        return ToolResult(
            status=f"{len(items)} collections: " + ", ".join(i["name"] for i in items),
            payload={"collections": items, "current": ctx.collection},
        )

    return [
        Tool(
            "rag_search",
            "Hybrid (BM25 + semantic) search of the knowledge base. Returns the best matching "
            "sections with their source_id, title, a snippet and the source_ids they cite. "
            "Start here; search again with other words if the results miss part of the question.",
            SearchArgs,
            rag_search,
        ),
        Tool(
            "read_section",
            "Read the full text of one section by its source_id, with the ids of the previous "
            "and next sections and of the sections it references.",
            SectionArgs,
            read_section,
        ),
        Tool(
            "outline",
            "Show the table of contents around a section (give its source_id) or of a document "
            "(give the document id), to navigate to neighbouring sections.",
            OutlineArgs,
            outline,
        ),
        Tool(
            "follow_references",
            "Follow the cross-references of a section (e.g. 'section 103', 'See section Naming "
            "and binding', or the name of another section's title, such as a person or a film "
            "it mentions): returns the referenced sections' text and which sections cite it.",
            SectionArgs,
            follow_references,
        ),
        Tool(
            "next_hop",
            "For a question that describes an entity instead of naming it (the country where "
            "X is found, the director of film Y): give a section found for the named part; "
            "searches each name that section gives together with what the question still "
            "asks, and returns the sections holding both (the next hop of the chain).",
            HopArgs,
            next_hop,
        ),
        Tool(
            "list_collections",
            "List the knowledge-base collections with their document and chunk counts.",
            NoArgs,
            list_collections,
        ),
    ]
