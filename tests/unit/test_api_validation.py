from __future__ import annotations

import re

import pytest

from retrieval_server.api import validation
from retrieval_server.api.identity import HeaderIdentities, identity_from_headers
from retrieval_server.config import load_settings
from retrieval_server.domain import Identity, InvalidArgument, Role


def test_query_limits_after_trimming() -> None:
    s = load_settings()
    assert validation.query_text("  hi  ", s) == "hi"
    with pytest.raises(InvalidArgument, match=r"query must be at least 1 characters after trimming \(got 0\)"):
        validation.query_text("   ", s)
    # Long input is accepted up to the byte limit (counted in UTF-8: multi-byte characters count more).
    assert validation.query_text("x" * 65_536, s) == "x" * 65_536
    with pytest.raises(InvalidArgument, match=r"query must be at most 65536 bytes in UTF-8 after trimming \(got 65537\)"):
        validation.query_text("x" * 65_537, s)
    with pytest.raises(InvalidArgument, match="got 65538"):
        validation.query_text("é" * 32_769, s)


@pytest.mark.parametrize("query", ["\x00", "\x01\x02\x1f", "\x7f", "\x00 \u200b\x1b", "\u0085\x00"])
def test_a_query_without_a_visible_character_is_refused(query: str) -> None:
    """Control characters are not trimmed, and alone tokenize to nothing: a query of them was
    answered with whatever documents its empty embedding came nearest to."""
    s = load_settings()
    with pytest.raises(InvalidArgument, match=r"query must hold at least 1 visible character after trimming \(got \d+: white space, control and format characters only\)"):
        validation.query_text(query, s)
    assert validation.query_text("\x00a\x01", s) == "\x00a\x01"  # one visible character is a query


def test_text_that_would_take_normalization_long_is_refused_first() -> None:
    """NFC puts a run of combining marks in order in time quadratic in its length (a 160 KB run
    held the event loop 5 s before the size check refused it), and the trimming loop is Python's:
    both now see only text of bounded length and runs, refused in linear time, naming the field."""
    s = load_settings()
    marks = "a" + "\u0301\u0323" * 140_000
    # The limit as it is, in bytes: the raw length is checked against it in characters (never fewer).
    with pytest.raises(InvalidArgument, match=r"query must be at most 65536 bytes in UTF-8 after trimming \(got 280001 characters before\)"):
        validation.query_text(marks, s)
    with pytest.raises(InvalidArgument, match="query must not hold more than 30 combining marks in a row"):
        validation.query_text("a" + "\u0301\u0323" * 16_000, s)
    assert validation.query_text("Vie\u0302\u0323t Nam, a\u0301", s) == "Việt Nam, á"  # a few marks: composed
    # Tibetan vowel signs of class 0 that decompose into two marks each: a run of them is one too.
    with pytest.raises(InvalidArgument, match="query must not hold more than 30 combining marks in a row"):
        validation.query_text("a" + "\u0f73" * 16_000, s)
    assert validation.query_text("\u0f40\u0f73", s) == "\u0f40\u0f71\u0f72"  # accepted (NFC decomposes it)
    with pytest.raises(InvalidArgument, match="query must be at most 65536 bytes in UTF-8 after trimming"):
        validation.query_text(" \u200b" * 200_000 + "x", s)
    assert validation.query_text(" \u200b" * 1_000 + "x", s) == "x"
    with pytest.raises(InvalidArgument, match=r"filters.document_ids\[0\] must not hold more than 30 combining marks"):
        validation.document_ids(["a" + "\u0301" * 31], 10, "filters.document_ids")
    with pytest.raises(InvalidArgument, match=r"filters.document_ids\[0\] must be at most 200 characters after trimming"):
        validation.document_ids(["a" + "\u0301\u0323" * 40_000], 10, "filters.document_ids")
    with pytest.raises(InvalidArgument, match="x-user-id must not hold more than 30"):
        identity_from_headers("a" + "\u0301" * 31, "")


def test_top_k_default_and_limits() -> None:
    assert validation.top_k(0, 5, 100) == 5
    assert validation.top_k(100, 5, 100) == 100
    for bad in (-1, 101):
        with pytest.raises(InvalidArgument, match="top_k must be between 1 and 100"):
            validation.top_k(bad, 5, 100)


def test_identity_from_headers() -> None:
    assert identity_from_headers("", "").role is Role.ANONYMOUS
    alice = identity_from_headers("alice", "")
    assert (alice.user_id, alice.role) == ("alice", Role.USER)
    admin = identity_from_headers("root", "SUPER_ADMIN")
    assert admin.reads_everything
    with pytest.raises(InvalidArgument, match="x-user-role must be one of"):
        identity_from_headers("", "king")
    # ANONYMOUS is no role a caller names: with a user id it read that user's documents.
    with pytest.raises(InvalidArgument, match=r"x-user-role must be one of SUPER_ADMIN, ADMIN, USER \(got 'ANONYMOUS'\)"):
        identity_from_headers("bob", "ANONYMOUS")
    assert identity_from_headers("", "ANONYMOUS").role is Role.ANONYMOUS  # what a caller without a user id is anyway
    # Grants name groups as group:<name>: a user by that name would read the group's documents.
    with pytest.raises(InvalidArgument, match="x-user-id must not start with 'group:'"):
        identity_from_headers(" group:eng ", "")
    with pytest.raises(ValueError, match="must not start with 'group:'"):
        Identity("group:eng", Role.USER)
    assert identity_from_headers("groupie", "").principals == ("groupie",)


def test_a_header_role_is_one_of_the_role_names_as_written() -> None:
    """Upper-cased, "adm\u0131n" (a dotless i) and "\u017fuper_admin" (a long s) were ADMIN and
    SUPER_ADMIN, as were names trimmed of an em space or a control character: a token's role claim
    is taken as written, and "admin" there is no role."""
    assert identity_from_headers("bob", " \tADMIN\t ").role is Role.ADMIN  # space and tab are no part of a value
    for folded in ("super_admin", " Super_Admin ", "admin", "adm\u0131n", "\u017fuper_admin", "\u2003ADMIN\u3000", "ADMIN\x1c", "anonymous"):
        with pytest.raises(InvalidArgument, match=r"^x-user-role must be one of SUPER_ADMIN, ADMIN, USER \(got ") as err:
            identity_from_headers("bob", folded)
        assert err.value.violations[0][0] == "x-user-role", folded
    with pytest.raises(InvalidArgument, match=r"\(got 'ADMIN\\x1c'\)"):  # shown, not printed
        identity_from_headers("bob", "ADMIN\x1c")


def test_the_contract_says_how_a_header_role_is_read() -> None:
    """The proto's header (and the Go and TypeScript stubs carrying it to callers) said the role was
    case-insensitive, which the server no longer reads it as."""
    from tests.support.paths import REPO

    lines = (REPO / "protos" / "retrieval" / "v1" / "retrieval.proto").read_text().splitlines()
    comments = " ".join(line.strip().removeprefix("//").strip() for line in lines if line.strip().startswith("//"))
    said = re.search(r"`x-user-role` \(([^)]*)\)", comments)
    assert said is not None and said.group(1) == "`SUPER_ADMIN`, `ADMIN` or `USER`, exactly as written; space and tab around it ignored"
    for name in re.findall(r"`([A-Z_]+)`", said.group(1)):
        assert identity_from_headers("bob", f" \t{name}\t ").role is Role(name)
        with pytest.raises(InvalidArgument, match="x-user-role must be one of"):
            identity_from_headers("bob", name.lower())


def test_header_identities_are_remembered_per_pair_of_values_and_failures_are_not() -> None:
    identities = HeaderIdentities(size=2)
    alice = identities({"x-user-id": " alice ", "x-user-role": "ADMIN"})
    assert (alice.user_id, alice.role, alice.verified_by) == ("alice", Role.ADMIN, "headers")
    assert identities({"x-user-id": " alice ", "x-user-role": "ADMIN"}) is alice
    # The same user with another role, or no headers at all, is another identity.
    assert identities({"x-user-id": " alice "}).role is Role.USER
    assert identities({}).role is Role.ANONYMOUS
    # At most two pairs: the oldest (alice as admin) went; what comes back is parsed again, equal.
    again = identities({"x-user-id": " alice ", "x-user-role": "ADMIN"})
    assert again == alice and again is not alice
    for _ in range(2):  # a refused pair is refused every time
        with pytest.raises(InvalidArgument, match="x-user-role must be one of"):
            identities({"x-user-id": "bob", "x-user-role": "king"})
    assert HeaderIdentities(verified_by="gateway")({"x-user-id": "carol"}).verified_by == "gateway"


def test_a_header_user_id_is_the_account_it_names_not_one_trimming_makes_of_it() -> None:
    """Space and tab around a header value are no part of it; a zero-width space or a no-break
    space is, and "alice\u200b" trimmed to "alice" read alice's documents."""
    assert identity_from_headers("\talice ", "").user_id == "alice"
    for forged in ("alice\u200b", "\ufeffalice", "alice\xa0", "Zu\u0308rich"):
        with pytest.raises(InvalidArgument, match="x-user-id must be sent as it is stored"):
            identity_from_headers(forged, "")


def test_padded_header_values_are_parsed_but_not_remembered() -> None:
    identities = HeaderIdentities()
    padded = {"x-user-id": " " * 7000 + "u1", "x-user-role": " " * 7000 + "ADMIN"}
    first = identities(padded)
    assert (first.user_id, first.role) == ("u1", Role.ADMIN)
    again = identities(padded)
    assert again == first and again is not first
    assert identities({"x-user-id": "u1", "x-user-role": "ADMIN"}) is identities({"x-user-id": "u1", "x-user-role": "ADMIN"})


def test_groups_header_is_a_list_of_exact_group_names() -> None:
    """x-user-groups carries a caller's groups through a gateway, as a token's groups claim does:
    documents granted to group:<name> were unreadable there."""
    dave = identity_from_headers("dave", "", "eng")
    assert (dave.groups, dave.principals) == (("eng",), ("dave", "group:eng"))
    # RFC 9110 list syntax: space and tab around an item are no part of it, an empty item is none.
    assert identity_from_headers("dave", "ADMIN", " eng ,\thr,, ,eng,").groups == ("eng", "hr")
    assert identity_from_headers("dave", "", " , ").groups == ()
    assert identity_from_headers("dave", "", "Sales EMEA").groups == ("Sales EMEA",)
    for forged in ("eng\u200b", "\xa0eng", "Zu\u0308rich", "e\x01ng"):
        with pytest.raises(InvalidArgument, match="^x-user-groups must ") as err:
            identity_from_headers("dave", "", f"hr, {forged}")
        assert err.value.violations[0][0] == "x-user-groups"
    with pytest.raises(InvalidArgument, match=r"^x-user-groups must be 1 to 255 characters after trimming \(got 256\)"):
        identity_from_headers("dave", "", "g" * 256)
    most = ",".join(f"g{i}" for i in range(1_000))
    assert len(identity_from_headers("dave", "", f"{most},g0").groups) == 1_000
    with pytest.raises(InvalidArgument, match=r"^x-user-groups must name at most 1000 groups \(got 1001\)"):
        identity_from_headers("dave", "", f"{most},g1000")
    # Groups are a user's: without one, the anonymous caller read a group's documents.
    for role in ("", "ANONYMOUS", "ADMIN"):
        with pytest.raises(InvalidArgument, match="^x-user-groups must come with x-user-id"):
            identity_from_headers("", role, "eng")


def test_header_identities_are_remembered_per_groups_too_and_padded_groups_are_not() -> None:
    identities = HeaderIdentities()
    member = identities({"x-user-id": "dave", "x-user-groups": "eng, hr"})
    assert member.groups == ("eng", "hr") and identities({"x-user-id": "dave", "x-user-groups": "eng, hr"}) is member
    assert identities({"x-user-id": "dave"}).groups == ()
    padded = {"x-user-id": "dave", "x-user-groups": "eng," + " ," * 5_000}
    first = identities(padded)
    assert first.groups == ("eng",)
    again = identities(padded)
    assert again == first and again is not first
    with pytest.raises(InvalidArgument, match="x-user-groups must come with x-user-id"):
        identities({"x-user-groups": "eng"})


def test_header_identities_hold_their_groups_to_a_budget_of_bytes() -> None:
    """4,096 users of 300 groups each held 233 MiB a process: the oldest go to stay in budget."""
    groups = ",".join(f"group-{i:04d}" for i in range(300))
    identities = HeaderIdentities(group_bytes=200_000)
    first = [identities({"x-user-id": f"u{i}", "x-user-groups": groups}) for i in range(20)]
    assert 0 < identities._held <= 200_000 and len(identities._known) < 20
    assert identities({"x-user-id": "u19", "x-user-groups": groups}) is first[19]  # the newest kept
    assert identities({"x-user-id": "u0", "x-user-groups": groups}) is not first[0]  # the oldest gone
    alone = HeaderIdentities(group_bytes=1_000)
    alone({"x-user-id": "u", "x-user-groups": groups})  # over the whole budget: parsed, not kept
    assert not alone._known and alone._held == 0


def test_grantees_are_counted_as_the_indexer_stores_them() -> None:
    """Distinct users, as trimmed: the API refuses what the indexer would refuse, and only that."""
    from retrieval_server.api.convert import document_in
    from retrieval_server.identifiers import MAX_GRANTEES
    from retrieval.v1 import retrieval_pb2 as pb

    users = [f"u{i}" for i in range(MAX_GRANTEES)]
    repeated = pb.DocumentInput(filename="a.txt", content=b"x", access=pb.ACCESS_PRIVATE, owner_id="alice", granted_user_ids=users + [f" {u} " for u in users])
    assert len(document_in(repeated, 0, 1 << 20).granted_user_ids) == 2 * MAX_GRANTEES
    one_more = pb.DocumentInput(filename="a.txt", content=b"x", access=pb.ACCESS_PRIVATE, owner_id="alice", granted_user_ids=[*users, "u-extra"])
    with pytest.raises(InvalidArgument, match=r"documents\[3\]\.granted_user_ids must hold at most 1000 users \(got 1001\)"):
        document_in(one_more, 3, 1 << 20)


def test_grants_to_a_group_are_counted_by_its_name_as_the_indexer_stores_it() -> None:
    """The indexer stores "group: hr" as "group:hr": counted apart, a document granted to 1,000
    groups, each sent both ways, was refused here though the indexer stores 1,000 grantees."""
    from retrieval_server.api.convert import document_in
    from retrieval_server.identifiers import MAX_GRANTEES, clean_grantee
    from retrieval.v1 import retrieval_pb2 as pb

    groups = [f"group:g{i}" for i in range(MAX_GRANTEES)]
    both = [*groups, *(g.replace(":", ": \u200b") for g in groups)]
    assert len({clean_grantee(g, "granted_user_ids") for g in both}) == MAX_GRANTEES
    doc = pb.DocumentInput(filename="a.txt", content=b"x", access=pb.ACCESS_PRIVATE, owner_id="alice", granted_user_ids=both)
    assert len(document_in(doc, 0, 1 << 20).granted_user_ids) == 2 * MAX_GRANTEES
    one_more = pb.DocumentInput(filename="a.txt", content=b"x", access=pb.ACCESS_PRIVATE, owner_id="alice", granted_user_ids=[*both, "group: extra"])
    with pytest.raises(InvalidArgument, match=r"granted_user_ids must hold at most 1000 users \(got 1001\)"):
        document_in(one_more, 0, 1 << 20)


def test_an_owner_or_grants_without_private_access_are_refused_not_published() -> None:
    """Unset access reads as ACCESS_PUBLIC: a document sent with an owner and grantees, but without
    access, was stored for every caller to read, and so was an owner's private document she sent
    again without repeating access."""
    from retrieval_server.api.convert import document_in
    from retrieval_server.domain import Access
    from retrieval.v1 import retrieval_pb2 as pb

    def refused(doc: pb.DocumentInput) -> tuple[tuple[str, str], ...]:
        with pytest.raises(InvalidArgument) as err:
            document_in(doc, 0, 1 << 20)
        return err.value.violations

    unset = "documents[0].access is unset (unset means ACCESS_PUBLIC) but"
    assert refused(pb.DocumentInput(filename="a.txt", content=b"x", owner_id="alice", granted_user_ids=["bob"])) == (
        ("documents[0].access", f"{unset} owner_id/granted_user_ids were sent: set ACCESS_PRIVATE (grants are for private documents)"),
    )
    assert refused(pb.DocumentInput(filename="a.txt", content=b"x", owner_id="alice")) == (
        ("documents[0].access", f"{unset} owner_id was sent: set ACCESS_PRIVATE or ACCESS_PUBLIC"),
    )
    assert refused(pb.DocumentInput(filename="a.txt", content=b"x", access=pb.ACCESS_PUBLIC, granted_user_ids=["bob"])) == (
        ("documents[0].access", "documents[0].access is ACCESS_PUBLIC, which every caller reads, but granted_user_ids was sent: "
                                "set ACCESS_PRIVATE (grants are for private documents)"),
    )
    # An owner of a document said to be public, a blank owner (no owner), and a private document's grants are taken.
    assert document_in(pb.DocumentInput(filename="a.txt", content=b"x", access=pb.ACCESS_PUBLIC, owner_id="alice"), 0, 1 << 20).owner_id == "alice"
    assert document_in(pb.DocumentInput(filename="a.txt", content=b"x", owner_id=" \u200b "), 0, 1 << 20).access is Access.PUBLIC
    private = pb.DocumentInput(filename="a.txt", content=b"x", access=pb.ACCESS_PRIVATE, owner_id="alice", granted_user_ids=["bob"])
    assert document_in(private, 0, 1 << 20).granted_user_ids == ("bob",)


def test_descriptive_fields_are_held_to_their_limits_as_stored() -> None:
    """Normalizing may lengthen a title (U+0958 is two code points in NFC): one the request check
    let through was refused when its document was stored, as that document's error."""
    from retrieval_server.api.convert import document_in
    from retrieval_server.identifiers import MAX_TITLE_CHARS
    from retrieval.v1 import retrieval_pb2 as pb

    fits = pb.DocumentInput(filename="a.txt", content=b"x", title="a" * MAX_TITLE_CHARS)
    assert document_in(fits, 0, 1 << 20).title == fits.title
    grows = pb.DocumentInput(filename="a.txt", content=b"x", title=chr(0x958) * MAX_TITLE_CHARS)
    with pytest.raises(InvalidArgument, match=rf"documents\[2\]\.title must be at most {MAX_TITLE_CHARS} characters \(got {2 * MAX_TITLE_CHARS}\)"):
        document_in(grows, 2, 1 << 20)
    # Stored on one line: its padding does not count, and white space inside it counts once.
    padded = pb.DocumentInput(filename="a.txt", content=b"x", title=" \n" + "a" * (MAX_TITLE_CHARS - 2) + " \t b\n ")
    assert document_in(padded, 0, 1 << 20)
    spaced = pb.DocumentInput(filename="a.txt", content=b"x", title="a" * MAX_TITLE_CHARS + "  b")
    with pytest.raises(InvalidArgument, match=rf"documents\[0\]\.title must be at most {MAX_TITLE_CHARS} characters \(got {MAX_TITLE_CHARS + 2}\)"):
        document_in(spaced, 0, 1 << 20)


def test_every_descriptive_field_is_held_to_its_limit_as_stored() -> None:
    """A url, source, file name (the source when none is sent) or metadata that NFC lengthened past
    its limit was let through, then refused when its document was stored, as that document's error."""
    from retrieval_server.api.convert import document_in
    from retrieval_server.identifiers import MAX_FILENAME_CHARS, MAX_METADATA_BYTES, MAX_SOURCE_CHARS, MAX_URL_CHARS
    from retrieval.v1 import retrieval_pb2 as pb

    grows = chr(0x958)  # two code points in NFC, three bytes of UTF-8 each
    for name, limit, kw in [
        ("url", MAX_URL_CHARS, {"url": grows * (MAX_URL_CHARS // 2 + 1)}),
        ("source", MAX_SOURCE_CHARS, {"source": grows * (MAX_SOURCE_CHARS // 2 + 1)}),
        ("filename", MAX_FILENAME_CHARS, {"filename": grows * (MAX_FILENAME_CHARS // 2 - 1) + ".txt"}),
    ]:
        with pytest.raises(InvalidArgument) as refused:
            document_in(pb.DocumentInput(document_id="d", content=b"x", **kw), 0, 1 << 20)
        assert refused.value.violations == ((f"documents[0].{name}", f"documents[0].{name} must be at most {limit} characters (got {limit + 2})"),)
    assert document_in(pb.DocumentInput(document_id="d", content=b"x", source=grows * (MAX_SOURCE_CHARS // 2)), 0, 1 << 20)
    sent = {"k": grows * (MAX_METADATA_BYTES // 6 + 1)}  # half the limit as sent
    with pytest.raises(InvalidArgument) as refused:
        document_in(pb.DocumentInput(document_id="d", content=b"x", metadata=sent), 0, 1 << 20)
    assert refused.value.violations == (
        ("documents[0].metadata", f"documents[0].metadata must be at most {MAX_METADATA_BYTES} bytes of UTF-8 in its keys and values (got {1 + 6 * (MAX_METADATA_BYTES // 6 + 1)})"),
    )
    # Two keys that are one once composed: one value would be dropped.
    with pytest.raises(InvalidArgument) as refused:
        document_in(pb.DocumentInput(document_id="d", content=b"x", metadata={"Zu\u0308rich": "a", "Z\u00fcrich": "b"}), 0, 1 << 20)
    assert [(f, d.split(": ", 1)[1]) for f, d in refused.value.violations] == [("documents[0].metadata", "send each key once")]


def test_a_document_gets_one_violation_per_invalid_field() -> None:
    """The first failing check was the only one reported: a caller fixing one field learned of the next
    from the next call."""
    from retrieval_server.api.convert import document_in
    from retrieval_server.identifiers import MAX_SOURCE_CHARS, MAX_TITLE_CHARS, MAX_URL_CHARS
    from retrieval.v1 import retrieval_pb2 as pb

    doc = pb.DocumentInput(filename="a.txt", content=b"x", title="t" * (MAX_TITLE_CHARS + 1), url="u" * (MAX_URL_CHARS + 1),
                           source="s" * (MAX_SOURCE_CHARS + 1), access=99)
    with pytest.raises(InvalidArgument) as refused:
        document_in(doc, 1, 1 << 20)
    assert [f for f, _ in refused.value.violations] == [f"documents[1].{f}" for f in ("access", "title", "url", "source")]
    assert [d.split(" ", 1)[0] for _, d in refused.value.violations] == [f for f, _ in refused.value.violations]
    assert f"at most {MAX_URL_CHARS} characters (got {MAX_URL_CHARS + 1})" in refused.value.violations[2][1]


def test_an_unknown_enum_value_is_refused_with_the_values_accepted() -> None:
    from retrieval_server.api.convert import document_in, fusion_in, mode_in, strategy_in
    from retrieval.v1 import retrieval_pb2 as pb

    for convert, field, accepted in [
        (strategy_in, "strategy", "STRATEGY_UNSPECIFIED=0, STRATEGY_SEMANTIC=1, STRATEGY_KEYWORD=2, STRATEGY_HYBRID=3, STRATEGY_ADAPTIVE=4, STRATEGY_GRAPH=5"),
        (mode_in, "mode", "MODE_UNSPECIFIED=0, MODE_RETRIEVAL_ONLY=1, MODE_GENERATION=2"),
        (fusion_in, "fusion", "FUSION_UNSPECIFIED=0, FUSION_RRF=1, FUSION_WEIGHTED=2"),
    ]:
        with pytest.raises(InvalidArgument) as refused:
            convert(99)
        assert refused.value.violations == ((field, f"{field} has unknown value 99 (one of {accepted})"),)
    with pytest.raises(InvalidArgument) as refused:
        document_in(pb.DocumentInput(filename="a.txt", content=b"x", access=7), 0, 1 << 20)
    assert refused.value.violations == (
        ("documents[0].access", "documents[0].access has unknown value 7 (one of ACCESS_UNSPECIFIED=0, ACCESS_PUBLIC=1, ACCESS_PRIVATE=2)"),
    )


def test_the_readme_states_the_id_limits_the_checks_apply() -> None:
    """The README gave ids 1 to 200 characters, read as owners' and grantees' too; user ids take 255."""
    from retrieval_server.identifiers import MAX_DOCUMENT_ID_CHARS, MAX_USER_ID_CHARS, clean_identifier
    from tests.support.paths import REPO

    row = next(line for line in (REPO / "README.md").read_text().splitlines() if line.startswith("| ids |"))
    assert f"document ids 1 to {MAX_DOCUMENT_ID_CHARS} characters" in row
    assert f"user ids (`owner_id`, `granted_user_ids`, `x-user-id`) and `x-user-groups` names at most {MAX_USER_ID_CHARS}" in row
    assert identity_from_headers("u" * MAX_USER_ID_CHARS, "").user_id == "u" * MAX_USER_ID_CHARS
    with pytest.raises(InvalidArgument, match=rf"x-user-id must be 1 to {MAX_USER_ID_CHARS} characters"):
        identity_from_headers("u" * (MAX_USER_ID_CHARS + 1), "")
    assert clean_identifier("d" * MAX_DOCUMENT_ID_CHARS, "document_ids", MAX_DOCUMENT_ID_CHARS)
    with pytest.raises(ValueError, match=rf"document_ids must be 1 to {MAX_DOCUMENT_ID_CHARS} characters"):
        clean_identifier("d" * (MAX_DOCUMENT_ID_CHARS + 1), "document_ids", MAX_DOCUMENT_ID_CHARS)


@pytest.mark.parametrize("blank", ["   ", "\u200b", " \t\x00 "], ids=["spaces", "zero-width", "mixed"])
def test_a_file_name_with_nothing_visible_is_none(blank: str) -> None:
    """A document sent with an id and a file name of white space alone was refused as of an
    unsupported file type, '(none)', where one without a file name is read as text."""
    from retrieval_server.api.convert import document_in
    from retrieval_server.ingest.loaders import load
    from retrieval.v1 import retrieval_pb2 as pb

    src = document_in(pb.DocumentInput(document_id="x", filename=blank, content=b"hi"), 0, 1 << 20)
    [doc] = load(src).documents
    assert (src.filename, src.name, doc.document_id, doc.title, doc.pages[0].text) == ("", "x.txt", "x", "x", "hi")
    # Without an id it names no document, as no file name does.
    with pytest.raises(InvalidArgument, match=r"documents\[1\] needs a filename \(its extension selects the loader\) or a document_id"):
        document_in(pb.DocumentInput(filename=blank, content=b"hi"), 1, 1 << 20)
    # Past its limit and the white space a name may come with, it is refused, not read through.
    with pytest.raises(InvalidArgument, match=r"documents\[2\]\.filename must be at most 1024 characters"):
        document_in(pb.DocumentInput(document_id="x", filename=blank * 5_000, content=b"hi"), 2, 1 << 20)
