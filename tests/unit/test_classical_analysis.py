"""Query analysis without an LLM: pseudo-relevance feedback terms, and decomposition into sub-questions."""

from __future__ import annotations

import asyncio
import unicodedata
from pathlib import Path

import pytest

from retrieval_server.workflow import analysis
from retrieval_server.workflow.analysis import ClassicalAnalyzer, NotApplicable, load_glossary


def test_feedback_terms_keep_letters_of_any_script() -> None:
    feedback = [
        "β-amyloid plaques in Sjögren syndrome patients",
        "β-amyloid deposits and Sjögren syndrome in older patients",
        "Sjögren syndrome and β-amyloid: a cohort",
    ]
    variants = asyncio.run(ClassicalAnalyzer(variants=1).reformulate("plaques in older adults", feedback))
    terms = variants[0].removeprefix("plaques in older adults ").split()
    # Cut at the first letter beyond ASCII, these were "amyloid" and "gren": words no document uses.
    assert set(terms) <= {"β-amyloid", "sjögren", "syndrome", "patients"} and len(terms) == 2, variants


def test_feedback_terms_keep_their_combining_marks() -> None:
    # re's \w has no combining marks: "सरकार" (government) was read as "सरक" and "र", and "सरक", a
    # word no document uses, was fed back.
    feedback = ["भारत सरकार ने नई नीति घोषित की", "सरकार का बजट बढ़ा और नीति बदली"]
    variants = asyncio.run(ClassicalAnalyzer(variants=1).reformulate("नई योजना", feedback))
    assert variants == ["नई योजना नीति सरकार"], variants


def test_decomposition_keeps_each_part_once_and_not_stop_words_alone() -> None:
    analyzer = ClassicalAnalyzer()
    parts = asyncio.run(analyzer.decompose("What does error XK-4471 mean? what does  error XK-4471 mean? How long to simmer the sauce?"))
    assert parts == ["What does error XK-4471 mean", "How long to simmer the sauce"]
    assert asyncio.run(_not_applicable(analyzer, "What is error XK-4471? What is error XK-4471?"))
    # Nor once more for another final mark, or a mark standing apart.
    for repeated in ("What is error XK-4471? What is error XK-4471.", "How do I rotate keys; how do I rotate keys...",
                     "How do I rotate keys? How do I rotate keys ?"):
        assert asyncio.run(_not_applicable(analyzer, repeated)), repeated
    assert asyncio.run(_not_applicable(analyzer, "the of the and to the is and it is the"))


def test_decomposition_cuts_before_a_capital_of_any_script_only() -> None:
    analyzer = ClassicalAnalyzer()
    parts = asyncio.run(analyzer.decompose("Where was the iceman found in 1991. Ötzi was carried to which museum? How old is he"))
    assert parts == ["Where was the iceman found in 1991", "Ötzi was carried to which museum", "How old is he"]
    # A stop inside a sentence ("e.g. the") cuts nothing: one question, nothing to decompose.
    single = "Which drugs, e.g. the statins, lower cholesterol in adults"
    assert asyncio.run(_not_applicable(analyzer, single))


def test_decomposition_splits_clauses_whatever_white_space_joins_them() -> None:
    analyzer = ClassicalAnalyzer()
    parts = asyncio.run(analyzer.decompose("what does the cache hold \n and   how does the reranker score pairs"))
    assert parts == ["what does the cache hold", "how does the reranker score pairs"]
    # A run of spaces took the split quadratic time (61 s at 64 KB, on the event loop).
    assert asyncio.run(_not_applicable(analyzer, "what" + " " * 20_000 + "is it"))


@pytest.mark.parametrize(
    "query",
    [
        "papers about lung cancer and not about mice",  # "not about mice" was searched for mice
        "What are the causes and symptoms of type 2 diabetes",  # "What are the causes" lost its object
        "Why does https://api.example.com/v1/users?limit=100&page=2 return 500 errors for all users",
        "What did Dr. Smith say about the vaccine trial results",
        "What is the U.S. Army budget for 2024",
        "What did J. Smith say about RRF",
        "for (i = 0; i < n; i++) loop off by one error in C",
        'recipes with "salt and pepper; lemon and thyme" for roast chicken',
        "install numpy, pandas and scipy on windows",  # was "install numpy, pandas" and "scipy on windows"
        "apples, oranges, bananas, grapes and pears nutrition facts",
        "what is the difference between TCP congestion control and UDP flow control",
        "compare PostgreSQL replication lag and MySQL replication lag",
        "PostgreSQL replication lag vs. MySQL replication lag and failover time in seconds",
    ],
    ids=["negation", "shared-object", "url", "title", "initials", "an-initial", "code", "quotes", "a-list", "a-long-list",
         "difference-between", "compare", "versus"],
)
def test_decomposition_leaves_one_question_whole(query: str) -> None:
    assert asyncio.run(_not_applicable(ClassicalAnalyzer(), query))


@pytest.mark.parametrize(
    ("query", "parts"),
    [
        ("After upgrading to Python 3.12, pip fails to install numpy and conda cannot resolve the base environment",
         ["After upgrading to Python 3.12, pip fails to install numpy", "conda cannot resolve the base environment"]),
        ("In Kubernetes 1.29, pods are evicted under memory pressure and the node autoscaler never adds nodes",
         ["In Kubernetes 1.29, pods are evicted under memory pressure", "the node autoscaler never adds nodes"]),
        ("install numpy, pandas and scipy on windows and configure the corporate proxy for pip downloads",
         ["install numpy, pandas and scipy on windows", "configure the corporate proxy for pip downloads"]),
    ],
    ids=["a-clause-after-a-comma", "a-version-then-a-clause", "a-clause-after-a-list"],
)
def test_a_comma_blocks_a_cut_only_at_the_and_that_ends_its_list(query: str, parts: list[str]) -> None:
    """Any comma before an "and" kept the query whole until a cut: a clause after an opening phrase
    is no list's last item, and a list ends at its "and"."""
    assert asyncio.run(ClassicalAnalyzer().decompose(query)) == parts


def test_decomposition_still_splits_questions_and_clauses_that_stand_alone() -> None:
    analyzer = ClassicalAnalyzer()
    assert asyncio.run(analyzer.decompose("What is the U.S. Army budget? How does Dr. Smith rate it?")) == [
        "What is the U.S. Army budget", "How does Dr. Smith rate it"]
    assert asyncio.run(analyzer.decompose("How do I set up SSO for our team and also configure SCIM provisioning")) == [
        "How do I set up SSO for our team", "configure SCIM provisioning"]
    assert asyncio.run(analyzer.decompose('find "salt and pepper" recipes and reviews of cast iron pans')) == [
        'find "salt and pepper" recipes', "reviews of cast iron pans"]
    # A list's "and" is no cut, but a question after it is; a comma in quotes lists nothing.
    assert asyncio.run(analyzer.decompose("install numpy, pandas and scipy on windows and how do I test them")) == [
        "install numpy, pandas and scipy on windows", "how do I test them"]
    assert asyncio.run(analyzer.decompose('find "salt, pepper" recipes and reviews of cast iron pans')) == [
        'find "salt, pepper" recipes', "reviews of cast iron pans"]
    # The mark after a URL is the sentence's, not the URL's (read as the URL's, it was no cut).
    assert asyncio.run(analyzer.decompose("Is the page https://status.example.com/api? How do I check the queue?")) == [
        "Is the page https://status.example.com/api", "How do I check the queue"]


@pytest.mark.parametrize(
    "query",
    [
        "The nginx access logs also show 502 errors after the upgrade",
        "Postgres replication lag also increases during nightly vacuum runs",
        "Django admin page plus custom user model migration fails",
    ],
    ids=["also", "also-a-verb-after", "plus"],
)
def test_a_bare_also_or_plus_inside_a_sentence_cuts_nothing(query: str) -> None:
    """Read as a clause boundary, an adverb's "also" cut a sentence into its subject and a
    predicate without one ("The nginx access logs", "show 502 errors after the upgrade")."""
    assert asyncio.run(_not_applicable(ClassicalAnalyzer(), query))


@pytest.mark.parametrize(
    ("query", "parts"),
    [
        ("Set up SSO for our whole team, also configure SCIM provisioning",
         ["Set up SSO for our whole team", "configure SCIM provisioning"]),
        ("Reset the admin password for the billing portal plus how do I rotate its keys",
         ["Reset the admin password for the billing portal", "how do I rotate its keys"]),
    ],
    ids=["after-a-comma", "before-a-question-word"],
)
def test_also_or_plus_cuts_after_a_comma_or_before_a_question_word(query: str, parts: list[str]) -> None:
    assert asyncio.run(ClassicalAnalyzer().decompose(query)) == parts


@pytest.mark.parametrize(
    ("query", "parts"),
    [
        ("What is plan B. Is it cheaper than plan A?", ["What is plan B", "Is it cheaper than plan A"]),
        ("How much vitamin D. The dose for adults over 60?", ["How much vitamin D", "The dose for adults over 60"]),
        ("What did John F. Kennedy say. What about the U.S. Army?", ["What did John F. Kennedy say", "What about the U.S. Army"]),
    ],
    ids=["plan-b", "vitamin-d", "initial-then-a-sentence"],
)
def test_a_letter_before_a_full_stop_ends_a_sentence_when_a_function_word_follows(query: str, parts: list[str]) -> None:
    """Any lone letter before a full stop was an initial, and "plan B. Is it ..." one question: an
    initial comes before a name, a sentence usually starts with a function word."""
    assert asyncio.run(ClassicalAnalyzer().decompose(query)) == parts


@pytest.mark.parametrize(
    ("query", "parts"),
    [
        ("什么是RRF？它如何与BM25结合？", ["什么是RRF", "它如何与BM25结合"]),
        ("我们用RRF。它如何与BM25结合？", ["我们用RRF", "它如何与BM25结合"]),
        ("ما هو RRF؟ وكيف يعمل مع BM25؟", ["ما هو RRF", "وكيف يعمل مع BM25"]),
        ("What is IT? What is HR? What is PR?", ["What is IT", "What is HR", "What is PR"]),
    ],
    ids=["chinese-questions", "chinese-full-stop", "arabic", "acronyms-that-spell-stop-words"],
)
def test_questions_are_told_apart_in_any_script(query: str, parts: list[str]) -> None:
    """Counted between spaces, a Chinese question was one word, under the three a question needs,
    and the Arabic question mark cut nothing: neither was decomposed, though the English was. "IT"
    was read as the stop word "it", and its question dropped."""
    assert asyncio.run(ClassicalAnalyzer().decompose(query)) == parts


def test_a_part_written_all_in_capitals_reads_no_acronyms() -> None:
    assert asyncio.run(_not_applicable(ClassicalAnalyzer(), "WHAT IS IT? HOW DOES RRF WORK IN HYBRID SEARCH?"))


def test_a_part_without_a_content_word_is_never_a_sub_query_of_its_own() -> None:
    """A first part without a content word was a part of its own ("- - -" was searched as a
    sub-query): it joins the next, as a later one stays with the one before."""
    analyzer = ClassicalAnalyzer()
    assert asyncio.run(analyzer.decompose("- - - ? What is reciprocal rank fusion? How does BM25 score terms?")) == [
        "- - - ? What is reciprocal rank fusion", "How does BM25 score terms"]
    assert asyncio.run(analyzer.decompose("What is it? What is reciprocal rank fusion? How does BM25 score terms?")) == [
        "What is it? What is reciprocal rank fusion", "How does BM25 score terms"]
    for query in ("- - - ? What is reciprocal rank fusion?", "=== === ===; what is reciprocal rank fusion"):
        assert asyncio.run(_not_applicable(analyzer, query)), query


@pytest.mark.parametrize(
    "query",
    [
        "int x = a > b ? a : b; what does this do",
        "SELECT id FROM orders WHERE status = 'open' AND total > 100 AND customer_id = 7",
        "x = compute(1); y = transform(x, 2); z = x + y",
        "deep learning models AND medical imaging diagnosis",
        "What is the p-value?0.05 or less",
        "Why does SELECT * FROM users WHERE a = 1 AND b = 2 return nothing?",
        "int status = count > 0 ? is_valid(x) : has_errors(y); return status",
        "int status = count > 0 ? has(x) : errors(y); return status",
        "int status = count > 0 ? cans(x) : errors(y); return status",
        "mRNA vaccine booster efficacy AND WHO booster dose guidelines",
        "CAN bus error frames timing AND CAN FD frame timing",
        "what are the CDC recommendations and WHO guidelines for masks",
        "the CDC guidelines also WHO advice on masks",
    ],
    ids=["ternary", "sql", "statements", "a-search-operator", "a-mark-before-a-digit", "sql-in-a-question",
         "ternary-of-a-predicate", "ternary-of-a-call", "ternary-of-a-call-opening-with-an-opener",
         "an-acronym-spelling-a-question-word", "an-acronym-spelling-an-opener", "an-acronym-after-a-lower-case-and",
         "an-acronym-after-also"],
)
def test_code_and_operators_are_not_cut_into_fragments(query: str) -> None:
    """"?" and ";" always cut, and so did "AND" in any case: a ternary, SQL's conditions and
    statements were searched as fragments ("city = 'Paris'", "a : b; what does this do"). A
    ternary's operand read up to its first "_" or "(" ("is" of "is_valid(x)", "has(x)") opened a
    question, and so did an acronym after "AND" among lower case ("WHO", "CAN"), and after "and"
    or "also" "WHO" was read as "who" and cut a left side too short to stand alone."""
    assert asyncio.run(_not_applicable(ClassicalAnalyzer(), query))


@pytest.mark.parametrize(
    ("query", "parts"),
    [
        ("¿Cómo restablezco mi contraseña? ¿Dónde está la página de inicio de sesión?",
         ["¿Cómo restablezco mi contraseña", "¿Dónde está la página de inicio de sesión"]),
        ("1) What is reciprocal rank fusion? 2) How does BM25 weigh rare terms? 3) When should I use HNSW?",
         ["1) What is reciprocal rank fusion", "2) How does BM25 weigh rare terms", "3) When should I use HNSW"]),
        ("What is reciprocal rank fusion?How does BM25 weigh rare terms?",
         ["What is reciprocal rank fusion", "How does BM25 weigh rare terms"]),
        ("What is the refund policy? (annual plans) How do I cancel?", ["What is the refund policy", "(annual plans) How do I cancel"]),
        ('Is the VPN allowed for contractors? "Remote access" policy details?',
         ["Is the VPN allowed for contractors", '"Remote access" policy details']),
        ("Which plan includes SSO? 50 users or more?", ["Which plan includes SSO", "50 users or more"]),
        ("How do I rotate the API key;which version fixed it?", ["How do I rotate the API key", "which version fixed it"]),
    ],
    ids=["inverted-marks", "numbered", "no-space", "brackets", "quotes", "a-number", "semicolon-no-space"],
)
def test_a_question_mark_ends_a_question_whatever_opens_the_next(query: str, parts: list[str]) -> None:
    """Read as a sentence's end only before white space and a letter, "?" left these one question:
    the next opened with "¿", a list's number, a bracket, a quote or a number, or followed the mark
    without a space."""
    assert asyncio.run(ClassicalAnalyzer().decompose(query)) == parts


@pytest.mark.parametrize(
    ("query", "parts"),
    [
        ("How do I configure the retry policy? What do max_attempts=3 and backoff=2 mean?",
         ["How do I configure the retry policy", "What do max_attempts=3 and backoff=2 mean"]),
        ("What is 3 * 4? What is 5 * 6?", ["What is 3 * 4", "What is 5 * 6"]),
        ("What is 3 * 4? What's 5 * 6?", ["What is 3 * 4", "What's 5 * 6"]),
        ("What do <b> and <i> tags do? Are they deprecated?", ["What do <b> and <i> tags do", "Are they deprecated"]),
        ("How do I set RETRIEVAL_TOP_K=20 and what does RETRIEVAL_TOP_K_MAX=100 do?",
         ["How do I set RETRIEVAL_TOP_K=20", "what does RETRIEVAL_TOP_K_MAX=100 do?"]),
        ("WHAT IS THE REFUND POLICY AND HOW DO I CANCEL MY SUBSCRIPTION?",
         ["WHAT IS THE REFUND POLICY", "HOW DO I CANCEL MY SUBSCRIPTION?"]),
        ("WHAT IS THE REFUND POLICY FOR iPhone AND HOW DO I CANCEL MY ORDER",
         ["WHAT IS THE REFUND POLICY FOR iPhone", "HOW DO I CANCEL MY ORDER"]),
        ("MY LOGIN AT https://example.com/login FAILS AND IS THERE A RESET LINK",
         ["MY LOGIN AT https://example.com/login FAILS", "IS THERE A RESET LINK"]),
        ("How do I rotate the API key AND HOW much does it cost?", ["How do I rotate the API key", "HOW much does it cost?"]),
        ("How do I rotate the API key AND what does it cost?", ["How do I rotate the API key", "what does it cost?"]),
        ("What are the side effects of metformin AND is there a workaround?",
         ["What are the side effects of metformin", "is there a workaround?"]),
        ("What are the side effects of metformin AND Is there a workaround?",
         ["What are the side effects of metformin", "Is there a workaround?"]),
        ("How do I rotate the API key - also can it be automated?", ["How do I rotate the API key", "can it be automated?"]),
    ],
    ids=["settings", "arithmetic", "arithmetic-contracted", "tags", "settings-and-what", "shouted-and-how",
         "shouted-and-how-naming-a-product", "shouted-and-is-beside-a-url", "stressed-and-how", "and-what", "and-is",
         "and-title-case-is", "dash-also"],
)
def test_questions_naming_code_or_joined_by_a_capital_and_are_decomposed(query: str, parts: list[str]) -> None:
    """Two operators in eight words made a query code, and "AND" was never a boundary: ordinary
    two-part questions naming settings, arithmetic or tags, or joined by "AND", were searched
    whole. In code only a "?" before a question's opening word cuts; "AND" cuts before one. Read
    with its apostrophe, a contracted one ("What's") opened none; one lower-case letter anywhere (a
    URL, "iPhone", a question stressing its second part) stopped "AND HOW" from cutting."""
    assert asyncio.run(ClassicalAnalyzer().decompose(query)) == parts


def test_a_question_about_code_is_still_cut_where_a_word_follows() -> None:
    analyzer = ClassicalAnalyzer()
    assert asyncio.run(analyzer.decompose("grep -r foo . && echo done; why does this print nothing")) == [
        "grep -r foo . && echo done", "why does this print nothing"]
    assert asyncio.run(analyzer.decompose("What are symptoms of flu? And what are symptoms of cold")) == [
        "What are symptoms of flu", "And what are symptoms of cold"]


def test_decomposition_reads_whether_a_part_says_something_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each part was read for a content word when cut and again when kept, and a query with no cut
    was read whole, twice: 64 KiB of "a. " held the event loop 0.3 s, 7 times what it had."""
    read: list[str] = []
    says_something = analysis._says_something

    def reading(text: str) -> bool:
        read.append(text)
        return says_something(text)

    monkeypatch.setattr(analysis, "_says_something", reading)
    analyzer = ClassicalAnalyzer()
    assert asyncio.run(analyzer.decompose("What is RRF? How does BM25 score terms?")) == ["What is RRF", "How does BM25 score terms"]
    assert read == ["What is RRF", "How does BM25 score terms"]
    read.clear()
    assert asyncio.run(_not_applicable(analyzer, "a. " * 1_000))
    assert read == []


async def _not_applicable(analyzer: ClassicalAnalyzer, query: str) -> bool:
    try:
        await analyzer.decompose(query)
    except NotApplicable:
        return True
    return False


async def test_the_glossary_expands_each_abbreviation_once() -> None:
    """A query repeating an abbreviation grew tenfold, each copy expanded (and the query lowered
    again for every word: quadratic)."""
    from retrieval_server.workflow.analysis import ClassicalAnalyzer

    analyzer = ClassicalAnalyzer({"api": "application programming interface", "db": "database"})
    assert await analyzer.rewrite("api limits of the db api, api keys") == (
        "api (application programming interface) limits of the db (database) api, api keys"
    )
    long = await analyzer.rewrite("api " * 10_000)
    assert long.count("application programming interface") == 1
    # Its expansion there already, a repeated abbreviation is looked at once, not once a copy.
    with pytest.raises(NotApplicable):
        await analyzer.rewrite("api " * 10_000 + "application programming interface")
    # White space and a final mark are no rewrite: the same words would be embedded again.
    with pytest.raises(NotApplicable):
        await analyzer.rewrite("what  is  the   policy ?")


def test_a_glossary_written_decomposed_expands_composed_queries(tmp_path: Path) -> None:
    """Queries and documents are composed (NFC); a glossary saved decomposed (as macOS writes names) never matched."""
    path = tmp_path / "glossary.txt"
    path.write_text(unicodedata.normalize("NFD", "Ö1 = Österreich 1\n"), encoding="utf-8")
    glossary = load_glossary(path)
    assert glossary == {"Ö1": "Österreich 1"}
    assert asyncio.run(ClassicalAnalyzer(glossary).rewrite("Ö1 news")) == "Ö1 (Österreich 1) news"


async def test_an_abbreviation_written_in_capitals_expands_only_in_capitals(tmp_path: Path) -> None:
    """Matched whatever its case, "US" and "IT" expanded "contact us about it", and "REST" the verb."""
    path = tmp_path / "glossary.txt"
    path.write_text("US = United States\nIT = information technology\nREST = representational state transfer\napi = application programming interface\n",
                    encoding="utf-8")
    analyzer = ClassicalAnalyzer(load_glossary(path))
    for plain in ("how do I contact us about it", "let the service rest overnight", "Us and It"):
        with pytest.raises(NotApplicable):
            await analyzer.rewrite(plain)
    assert await analyzer.rewrite("IT budget in the US") == "IT (information technology) budget in the US (United States)"
    # A key in lower case still matches any case.
    assert await analyzer.rewrite("REST API limits") == (
        "REST (representational state transfer) API (application programming interface) limits"
    )


async def test_no_abbreviation_is_expanded_inside_quotes() -> None:
    """A quoted phrase is searched as written: '"API timeout"' became '"API (application
    programming interface) timeout"', a phrase no document holds."""
    analyzer = ClassicalAnalyzer({"API": "application programming interface", "db": "database"})
    with pytest.raises(NotApplicable):
        await analyzer.rewrite('error "API timeout" in billing')
    assert await analyzer.rewrite('grep "db not found" logs of the API') == (
        'grep "db not found" logs of the API (application programming interface)'
    )
    assert await analyzer.rewrite("«API limits» of the db and “db size” with API keys") == (
        "«API limits» of the db (database) and “db size” with API (application programming interface) keys"
    )
