"""The composition root and the one ``ask()`` every front end calls.

``build_troubleshooter(settings)`` wires the store, the retriever and (later) probes and a model
backend; nothing is loaded until first needed, so `ask --help` stays instant.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from advice.review import review
from agent.answer import Answer, Citation
from agent.compose import compose, ending_with_check, several_jobs_markdown
from agent.conversation import context_note
from agent.events import EventSink, FinalAnswer, Notice, StepFinished, StepStarted, ignore
from agent.exceptions import names_agree, recognise
from agent.facts import Facts
from agent.presumptions import contradicted, gpu_archs, ruled_out_sections, torch_version
from agent.question import Question
from agent.stated import stated_facts
from agent.team_codes import unnamed_code
from common.errors import IndexMissingError, IndexStoreError, TraindocError
from common.language import Lang, say
from common.settings import Settings, contain_caches
from corpus.errorlines import pasted_first
from jobs.diagnosis import HANG_WORDS, JobDiagnosis

log = logging.getLogger(__name__)
# How sure retrieval must be of a document section for it to answer where no lead rule chose a runbook: below it the
# sections are shown as nearest, not as the answer. Chosen on the worked parts (at 0.55: 5 right answers lost, 10 of 66
# reports nothing covers newly refused; the held parts, as totals, lost none and refused 7 more of 22). 0.58
# (2026-12-03): on the worked parts and fresh_reports_g/_h, 5 more reports nothing covers refused and no right answer
# lost (the lowest right section answer there was at 0.59); checked on the untouched fresh_reports_i.
ALONE_ANSWERS = 0.58
QUOTES_IT = 0.8  # share of a section's quoted error message the question shows, for the section to be about it


class Troubleshooter:
    def __init__(self, settings: Settings, chat_model: Any | None = None, *, index_in_background: bool = False) -> None:
        self.settings = settings
        contain_caches(settings)
        self._embedder = None
        self._retriever = None
        self._chat_model = chat_model  # tests pass a scripted model; otherwise built from settings
        # A server (web, Slack) indexes a changed corpus on a thread and answers meanwhile; a command first.
        self._index_in_background = index_in_background
        self._keeper: Any = None  # corpus.keeper.IndexKeeper, made on the first question
        self._retriever_generation = 0  # the keeper's index runs the loaded retriever has seen
        self._retriever_lock = threading.Lock()
        self._index_lag = threading.local()  # per answering thread: what the index it used lacked

    # -- wiring --------------------------------------------------------------
    def embedder(self):  # type: ignore[no-untyped-def]
        if self._embedder is None:
            from corpus.embedding import LazyEmbedder

            self._embedder = LazyEmbedder(self.settings.embed_model, cache_dir=self.settings.cache_dir / "models")
        return self._embedder

    def index(self, paths=None, *, rebuild: bool = False, progress: bool = True):  # type: ignore[no-untyped-def]
        from corpus.indexer import build_index

        report = build_index(self.settings, self.embedder, paths, rebuild=rebuild, progress=progress)
        self._retriever = None
        if self._keeper is not None:
            self._keeper.recheck()
        return report

    def index_keeper(self):  # type: ignore[no-untyped-def]
        """What checks the corpus before questions and indexes what changed (corpus.keeper)."""
        if self._keeper is None:
            from corpus.embedding import LazyEmbedder
            from corpus.keeper import IndexKeeper

            self._keeper = IndexKeeper(self.settings, self.embedder, background=self._index_in_background,
                                       fresh_embedder=lambda: LazyEmbedder(self.settings.embed_model,
                                                                           cache_dir=self.settings.cache_dir / "models"))
        return self._keeper

    def retriever(self):  # type: ignore[no-untyped-def]
        """The retriever over the index, once the corpus is checked: a command indexes what changed first; a server
        answers from the index it has while a thread indexes the changes, and the answer says so (_note_index_lag)."""
        keeper = self.index_keeper()
        with self._retriever_lock:
            if not keeper.background:
                self._index_lag.value = keeper.check()
                return self._current_retriever(keeper)
            self._current_retriever(keeper)  # loaded before a background run starts writing the store
            self._index_lag.value = keeper.check()
            return self._current_retriever(keeper)  # a run that finished meanwhile: its documents are used

    def _current_retriever(self, keeper: Any):  # type: ignore[no-untyped-def]
        if self._retriever is None or self._retriever_generation != keeper.generation:
            self._retriever, self._retriever_generation = None, keeper.generation
            self._retriever = self._load_retriever()
        return self._retriever

    def _note_index_lag(self, answer: Answer, on_event: EventSink) -> None:
        """What the index this answer came from lacks of the configured corpus, said in the answer (never silent)."""
        lag, self._index_lag.value = getattr(self._index_lag, "value", None), None
        if lag is None:
            return
        text = lag.notice(answer.lang)
        on_event(Notice(text))
        answer.notice = f"{answer.notice}; {text}" if answer.notice else text

    def _load_retriever(self):  # type: ignore[no-untyped-def]
        from corpus.retrieval import Retriever
        from corpus.snapshot import current_without_store, read_snapshot, record_store_version, write_snapshot
        from corpus.store import local_index_exists

        if not local_index_exists(self.settings):
            log.info("no index yet: building it from %s", ", ".join(map(str, self.settings.corpus_paths)))
            report = self.index(progress=not self._index_in_background and sys.stderr.isatty())
            for source, reason in report.skipped:
                log.warning("skipped %s: %s", source, reason)
        embedder = self.embedder()
        snapshot = read_snapshot(self.settings)
        if not current_without_store(self.settings, snapshot, embedder.name):
            # The store of record (chromadb) is opened only when the snapshot is stale or from a server.
            from corpus.indexer import unsafe_to_open
            from corpus.store import VectorStore, repair_hint

            if self.settings.chroma_url is None and (damage := unsafe_to_open(self.settings)):
                raise IndexStoreError(f"the index at {self.settings.chroma_dir} is damaged: {damage}",
                                      hint=repair_hint(self.settings))
            store = VectorStore(self.settings, embedder, create=False)
            if (snapshot is None or snapshot.version != store.version or snapshot.vectors is None
                    or snapshot.embed_model != embedder.name):
                snapshot = write_snapshot(self.settings, store.all_chunks(), store.version, store.vectors, embedder.name)
            if self.settings.chroma_url is None:
                record_store_version(self.settings, store.version)
        assert snapshot is not None
        if not snapshot.chunks:
            from corpus.store import repair_hint

            raise IndexMissingError("the index is empty", hint=repair_hint(self.settings, missing=True))
        return Retriever(snapshot, snapshot, embedder)

    # -- the core ------------------------------------------------------------
    def ask(self, question: Question, *, mode: str = "hybrid", on_event: EventSink = ignore) -> Answer:
        """The one entry point of every front end. Events stream as the answer is made."""
        if question.lang is None:  # built by hand, not by agent.intake: read once, as the intake reads it
            from agent.intake import prepare

            question = prepare(question)
        if self.settings.backend != "offline" and mode == "hybrid":
            from agent.llm.failure import ModelFailure
            from agent.llm.modes import answer_with_llm

            try:
                answer = answer_with_llm(self.settings, question, on_event, model=self._chat_model,
                                         agent=lambda: self._ask_model(question, on_event),
                                         explain=lambda: self._explain(question, on_event))
            except ModelFailure as exc:
                notice = exc.notice(question.language)
                log.debug("%s", notice)
                on_event(Notice(notice))
                answer = self._compose(exc.facts if exc.facts is not None else self._gather(question, mode, on_event))
                answer.notice = notice
        else:
            answer = self._compose(self._gather(question, mode, on_event))
        answer.lang = question.language  # decided once; every renderer speaks it
        if question.follows is not None:  # the asker sees what the answer was read with
            answer.answer = context_note(question.follows, question.language) + "\n\n" + answer.answer
        self._note_index_lag(answer, on_event)
        if answer.verdict is None:  # what every front end's first line and last line say (agent.summary)
            from agent.summary import verdict_of

            answer.verdict = verdict_of(answer)
        from agent.brief import brief

        if answer.mode is None:  # traindoc's own answer (a model's is its own length, streamed as written)
            from agent.summary import summary_line

            last = summary_line(answer.verdict, answer.lang) if answer.verdict is not None else ""
            answer.brief = brief(answer.answer, answer.lang, sources=[c.named for c in answer.citations], summary=last)
        from incidents.recall import recall

        recall(answer, self.settings)  # its failure's signature; a line first where this cluster resolved it before
        on_event(FinalAnswer(answer))
        return answer

    def _ask_model(self, question: Question, on_event: EventSink) -> Answer:
        from agent.llm.answerer import answer_with_model

        retriever = self.retriever()
        context, names = None, []
        if question.probes and question.bundle is None:
            from agent.diagnose import ProbeRequest, available_probes, probe_context

            request = ProbeRequest(text=question.search_text(), log_paths=question.log_paths,
                                   python=question.python, timeout_s=self.settings.probe_timeout_s)
            context = probe_context(request)
            names = available_probes(context)
        answer = answer_with_model(self.settings, question, retriever, context, names, on_event, model=self._chat_model)
        from agent.leads import LeadEvidence, decide

        # The kind the question's own evidence names (its job, a quoted message, a stage; no likeness: the model did
        # the searching): its check ends the answer, as it ends traindoc's own.
        lead = decide(LeadEvidence(question.asked(), question.job, question.log_errors, question.language))
        answer.answer = ending_with_check(answer.answer, lead.kind if lead is not None and lead.established else None,
                                          question.language)
        return answer

    def _explain(self, question: Question, on_event: EventSink) -> Answer:
        """Explain mode: traindoc gathers the facts as the offline path does; the model writes from them."""
        from agent.llm.explain import explain, explainable

        facts = self._gather(question, "hybrid", on_event)
        if not explainable(facts):  # no section, no problem, no root cause: nothing a model could ground
            answer = self._compose(facts)
            answer.notice = say("nothing_to_explain", question.language)
            return answer
        answer = explain(self.settings, facts, on_event, model=self._chat_model)
        if facts.lead is not None and answer.lead is None:
            answer.lead = facts.lead  # the kind traindoc's own evidence chose: the model wrote the words
        answer.answer = ending_with_check(answer.answer, facts.lead.kind if facts.lead is not None else None,
                                          question.language)
        return answer

    def _gather(self, question: Question, mode: str, on_event: EventSink) -> Facts:
        """Retrieval, probes, the job's diagnosis (log triage or live hang snapshot): the facts of an answer."""
        timings: dict[str, float] = {}
        started = time.perf_counter()
        text = question.search_text()
        probing = self._start_probes(question, text)
        snapshot = self._start_hang_snapshot(question)
        retriever = self.retriever()
        timings["load"] = (time.perf_counter() - started) * 1000
        diagnosis = probing.result() if probing is not None else None
        if diagnosis is not None:
            timings["probes"] = (time.perf_counter() - started) * 1000
            for step, result in enumerate(diagnosis.results, 1):
                on_event(StepStarted(step, result.probe, {}))
                on_event(StepFinished(step, result.probe, f"{result.status}: {result.summary}"))
        job, several_jobs = self._job_diagnosis(question, snapshot, timings, started)
        t0 = time.perf_counter()
        boost = diagnosis.boost_text() if diagnosis is not None else ""
        quote = question.needs_a_quote()  # read once: it reads the question's error lines
        result = retriever.search(text, k=self.settings.top_k, mode=mode, boost_text=boost,  # type: ignore[arg-type]
                                  require_quote=quote, among="documents")
        found = retriever.search(text, k=1, mode=mode, boost_text=boost,  # type: ignore[arg-type]
                                 require_quote=quote, among="runbooks")
        timings["retrieve"] = (time.perf_counter() - t0) * 1000
        lang = question.language
        shown = [retriever.shown(h.chunk, lang) for h in result.hits]  # a section in the asker's language
        citations = [
            Citation(n=i, source=s.source, section=h.chunk.section, chunk_id=s.chunk.chunk_id, score=h.score,
                     text=s.chunk.text, lang=s.lang, title=s.title)
            for i, (h, s) in enumerate(zip(result.hits, shown, strict=True), 1)
        ]
        # The sections that quote the question's own error message (they are about it, whatever else they cover): most
        # of the message, not its exception class and a word (half of it is what unrelated sections share).
        quoting = {c.chunk_id for c, h in zip(citations, result.hits, strict=True) if h.signals.get("quote", 0) >= QUOTES_IT}
        nearest: list[Citation] = []
        retrieved = citations
        no_match, confidence = result.no_match, result.confidence
        asked = question.asked()  # a follow-up with what it follows up on
        errors = list(question.log_errors or result.error_lines)
        raised = recognise([*(question.log_errors or result.error_lines), *asked.splitlines()])
        if raised is not None and not no_match and not any(names_agree(raised, c.text) for c in citations):
            no_match = True  # the exception names a module or a file no section names: those sections are not answers
        elif raised is not None and not no_match:
            citations = [replace(c, n=i) for i, c in enumerate((c for c in citations if names_agree(raised, c.text)), 1)]
        if no_match:
            citations, nearest = [], citations[:3]
        elif wrong := contradicted(citations, gpu_archs(self._machine_evidence(question, job, diagnosis))):
            citations = [replace(c, n=i) for i, c in enumerate((c for c in citations if c not in wrong), 1)]
            no_match = not citations  # a section written for another GPU is not the answer
        if not no_match and (ruled := ruled_out_sections(citations, stated_facts("\n".join([asked, *errors])))):
            citations = [replace(c, n=i) for i, c in enumerate((c for c in citations if c not in ruled), 1)]
            no_match = not citations  # nor one about a kind the stated setup rules out (CUDA's, for an Ascend NPU)
        from agent.lead import about_finding, documents_after, lead_with, leading, names_the_failure_whole
        from agent.leads import LeadEvidence, Retrieved
        from agent.stated import already_ran

        runbook, lead = None, None
        best = Retrieved(found.hits[0].chunk.source, found.confidence) if found.hits and not found.no_match else None
        explaining = _explaining(diagnosis, question.text)
        if best is not None and explaining and not any(about_finding(best.source, f) for f in explaining):
            best = None  # what this machine shows is the verdict: a runbook that only reads alike, about something
            # else, does not lead it (an extension's arch for a CPU-only torch); one about the same problem still does
        answering = (citations[0].source, citations[0].section) if citations and not no_match else None
        # Nor does the runbook of the answering section's kind: the probes' finding gives the first fix there
        lead_evidence = LeadEvidence(asked, job, question.log_errors or result.error_lines, lang, best,
                                     None if no_match else result.confidence, answering, by_section_kind=not explaining,
                                     new_words=question.text if question.follows is not None else "",
                                     pasted=job is not None and not question.log_errors and not question.log_head,
                                     section_ran=already_ran(citations[0].text, asked) if answering else "")
        if (chosen := leading(lead_evidence)) is not None:
            runbook, lead = chosen  # the fix follows the diagnosis: the kind's runbook leads
            confidence = lead.confidence
            citations = documents_after(runbook, lead.established, citations, quoting, retrieved,
                                        names_the_failure_whole(lead, asked, job, runbook))
            citations, nearest, no_match = lead_with(runbook, citations, lang, self.settings.top_k), [], False
        elif not no_match and confidence is not None and confidence < ALONE_ANSWERS:
            citations, nearest, no_match = [], citations[:3], True
        if (lead is None or not lead.established) and (unknown_code := unnamed_code(asked, (c.text for c in citations))):
            # a team's error code that no section shown names: a section about another code is not its answer
            citations, nearest, no_match, runbook, lead = [], (nearest or citations)[:3], True, None, None
        else:
            unknown_code = None
        evidence = self._machine_evidence(question, job, diagnosis)
        citations = [reviewed(c, lang, evidence) for c in citations]  # nothing is shown unchecked
        nearest = [reviewed(c, lang, evidence) for c in nearest]
        findings = []
        results: list[Any] = []
        if diagnosis is not None:
            from agent.diagnose import finding_views, relevant_results

            results = relevant_results(diagnosis, text) if question.bundle else diagnosis.results
            findings = finding_views(results, citations, question.text)
        return Facts(question, citations, findings, results, no_match,
                     result.recognised, question.log_errors or result.error_lines, job,
                     question.bundle.name if question.bundle else "", timings, started,
                     confidence=confidence, nearest=nearest, runbook=runbook, lead=lead, several_jobs=several_jobs,
                     unnamed_code=unknown_code or "")

    @staticmethod
    def _machine_evidence(question: Question, job: JobDiagnosis | None, diagnosis: Any) -> list[str]:
        """What shows this machine's GPU: the question, the logs' lines, what the probes found."""
        texts = [question.text, question.log_head, *question.log_errors]
        if job is not None and job.root_cause is not None:
            texts += [*job.root_cause.evidence, *job.search_lines]
        for result in getattr(diagnosis, "results", None) or []:
            texts.append(f"{getattr(result, 'summary', '')}\n{getattr(result, 'evidence', '')}")
        return texts

    def _compose(self, facts: Facts) -> Answer:
        """The offline answer: traindoc's own words (in the question's language) around the quoted sections."""
        t0, question, job, timings = time.perf_counter(), facts.question, facts.job, facts.timings
        lang = question.language
        source = say("bundle_machine", lang, name=facts.machine) if facts.machine else say("this_machine", lang)
        shown_errors = [] if job is not None and job.root_cause is not None else pasted_first(facts.errors)
        evidence = self._machine_evidence(question, job, None)  # the user's torch, the codes the input shows
        lead = None
        if facts.runbook is not None:
            from agent.lead import runbook_lead
            from agent.stated import read_setup

            setup = read_setup([question.asked(), *facts.errors])  # what the asker already runs with, or rules out
            lead = review(runbook_lead(facts.runbook, job, lang, setup, facts.lead,
                                       [*facts.errors, *question.text.splitlines()[:400]]), facts.runbook.source, facts.runbook.title, lang,
                          torch_version=torch_version(evidence)).text
        from jobs.codes import meanings

        shown_codes = meanings(evidence)
        body = compose(question.text, facts.citations, facts.findings, facts.no_match, facts.recognised, shown_errors,
                       source, confidence=facts.confidence, nearest=facts.nearest, lead=lead, codes=shown_codes,
                       lead_kind=facts.runbook.kind if facts.runbook is not None else None, lang=lang,
                       raised_in=job.root_cause.evidence if job is not None and job.root_cause is not None else None)
        if job is not None and job.root_cause is not None:
            from jobs.render import demote_timeout_fixes, diagnosis_markdown

            fixes = body if lead is not None else demote_timeout_fixes(body, job, lang)
            body = diagnosis_markdown(job, lang) + "\n\n" + fixes
        if facts.several_jobs:  # which job is the asker's is theirs to say: the answer names each and how to pick
            body = several_jobs_markdown(facts.several_jobs, lang) + "\n\n" + body
        timings["compose"] = (time.perf_counter() - t0) * 1000
        timings["total"] = (time.perf_counter() - facts.started) * 1000
        answer = Answer(
            question=question.text, answer=body, citations=facts.citations, findings=facts.findings,
            no_match=facts.no_match, timings_ms=timings, error_lines=facts.errors, recognised=facts.recognised,
            id=question.id, diagnosis=job, confidence=facts.confidence, lead=facts.lead, lang=lang,
            unnamed_code=facts.unnamed_code,
        )
        from agent.summary import finished

        answer.answer = finished(answer)  # every front end shows it: the verdict first (agent.summary)
        return answer

    def _start_hang_snapshot(self, question: Question) -> Future | None:  # type: ignore[type-arg]
        """A job said to hang, on this machine: snapshot every rank's stack (read-only) meanwhile."""
        job = question.job  # a log that stops (no failure, no timeout): the job may still hang here
        said = HANG_WORDS.search(question.text) or (job is not None and job.root_cause is not None and not job.symptoms
                                                     and job.root_cause.category in ("unknown", "rendezvous"))
        if not (question.probes and question.bundle is None and (said or question.pid is not None)):
            return None  # a picked job (--pid) is read whatever the question says
        from jobs.hang import snapshot_job

        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hang")
        future = pool.submit(snapshot_job, question.pid, timeout_s=self.settings.probe_timeout_s)
        pool.shutdown(wait=False)
        return future

    def _job_diagnosis(self, question: Question, snapshot: Future | None, timings: dict[str, float],  # type: ignore[type-arg]
                       started: float) -> tuple[JobDiagnosis | None, tuple[Any, ...]]:
        """(the job, the jobs to pick from): the live snapshot leads when the logs could not name a cause, otherwise
        the log triage; where several jobs run here and none was picked, the answer lists them (jobs.procs)."""
        live: JobDiagnosis | None = None
        several: tuple[Any, ...] = ()
        if snapshot is not None:
            from jobs.procs import SeveralJobs

            try:
                live = snapshot.result()
            except SeveralJobs as exc:  # a shared machine: which job is the asker's is theirs to say
                several = exc.jobs
            except TraindocError as exc:  # e.g. ptrace not permitted: said once, the answer goes on
                log.warning("hang snapshot: %s", exc)
            except Exception as exc:  # a snapshot that breaks must not cost the user the answer
                log.debug("hang snapshot failed", exc_info=exc)
            timings["hang_snapshot"] = (time.perf_counter() - started) * 1000
        logged = question.job
        if live is not None and (logged is None or logged.root_cause is None
                                 or logged.root_cause.category in ("unknown", "rendezvous")):
            return live, several
        return logged, several

    def _start_probes(self, question: Question, text: str) -> Future | None:  # type: ignore[type-arg]
        """Probes run in the background while the index loads."""
        if not (question.probes or question.bundle):
            return None
        from agent.diagnose import ProbeRequest, diagnose

        request = ProbeRequest(
            text=text, log_paths=question.log_paths, python=question.python, bundle=question.bundle,
            timeout_s=self.settings.probe_timeout_s,
        )
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="diagnose")
        future = pool.submit(diagnose, request)
        pool.shutdown(wait=False)
        return future


def _explaining(diagnosis: Any, question: str) -> list[Any]:
    """The probes' problems that are what the question asks about (a CPU-only torch for "CUDA is not available")."""
    if diagnosis is None:
        return []
    from agent.diagnose import explains

    return [finding for result in diagnosis.results for finding in result.findings if explains(finding, question)]


def reviewed(citation: Citation, lang: Lang, evidence: list[str]) -> Citation:
    """The citation as it may be shown: its text through advice.review (corrected, marked, labelled)."""
    checked = review(citation.text, citation.source, citation.section, lang, question="\n".join(evidence[:3]),
                     torch_version=torch_version(evidence))
    return replace(citation, text=checked.text, advice=checked.flags, notes=checked.notes)


def build_troubleshooter(settings: Settings | None = None, chat_model: Any | None = None, *,
                        index_in_background: bool = False) -> Troubleshooter:
    return Troubleshooter(settings or Settings.from_env(), chat_model=chat_model, index_in_background=index_in_background)


__all__ = ["Question", "Troubleshooter", "build_troubleshooter", "IndexStoreError"]
