"""The canonical encoding (`ownloop.identity`): pinned by stored vectors, one form per type.

``tests/fixtures/identity_vectors.json`` holds inputs and the canonical text and digests every
release must reproduce; a vector is never edited (a new encoding is a new ``digest_version``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import subprocess
import sys
import uuid
from collections.abc import Sequence
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from ipaddress import IPv4Address
from pathlib import Path
from typing import Annotated, Any, TypedDict, TypeVar
from uuid import UUID

import pytest
from pydantic import AnyUrl, BaseModel, Field, SecretStr

from ownloop.contracts import ToolCall, ToolSpec
from ownloop.exceptions import ConfigurationError, ToolDefinitionError
from ownloop.identity import (
    DIGEST_VERSION,
    call_digest,
    canonical_text,
    decode,
    digest,
    encode,
    unsupported_type,
)
from ownloop.policy import approval_digest
from ownloop.tools import (
    ExternalTool,
    ToolContext,
    ToolRegistry,
    ToolRejection,
    ValidatedCall,
)
from tests.identity_support import VECTORS, Address, Color, Point, build, load_vectors

ROOT = Path(__file__).resolve().parent.parent


def _reproduce() -> list[str]:
    """Return the names of the vectors this process does not reproduce."""
    wrong = []
    for vector in load_vectors():
        value = build(vector["input"])
        encoded = encode(value)
        if (
            canonical_text(encoded) != vector["canonical"]
            or call_digest("t", {"x": encoded}) != vector["call_digest"]
            or approval_digest("t", {"x": value}, "rev-1") != vector["approval_digest"]
        ):
            wrong.append(vector["name"])
    return wrong


def test_the_stored_vectors_are_reproduced() -> None:
    """Every stored input encodes to its stored canonical text, call digest and approval digest."""
    assert json.loads(VECTORS.read_text(encoding="utf-8"))["digest_version"] == DIGEST_VERSION
    assert len(load_vectors()) >= 40
    assert _reproduce() == []


def test_the_stored_vectors_are_reproduced_under_other_hash_seeds() -> None:
    """Fresh interpreters under other PYTHONHASHSEEDs reproduce every vector (sets included)."""
    code = (
        "import json; from tests.test_identity import _reproduce; print(json.dumps(_reproduce()))"
    )
    for seed in ("0", "4242"):
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        assert json.loads(done.stdout) == [], seed


def test_one_stated_form_per_type() -> None:
    """Sets sort, -0.0 and NFD stay apart, secrets show their value, dollar keys are escaped."""
    assert encode({"b", "a"}) == {"$set": ["a", "b"]}
    assert canonical_text(encode(-0.0)) == "-0.0" != canonical_text(encode(0.0))
    assert encode("cafe\u0301") != encode("caf\u00e9")
    assert encode(SecretStr("hunter2")) == {"$secret": "hunter2"}
    assert encode({"$set": 1}) == {"$$set": 1}
    assert encode(True) is True
    assert encode(1) == 1
    assert canonical_text(encode(1.0)) == "1.0"
    assert encode(float("nan")) == {"$float": "nan"}
    assert encode(Color.BLUE) == {"$enum": 2}
    assert encode(Point(1, 2.0)) == {"$dataclass": {"x": 1, "y": 2.0}}
    assert encode(Address(street="s")) == {"$model": {"street": "s", "tags": {"$set": []}}}
    assert encode(Decimal("1.10")) != encode(Decimal("1.1"))
    assert encode(Path("a") / "b") == {"$path": "a/b"}
    assert decode(encode(AnyUrl("https://x.test/a"))) == "https://x.test/a"


def test_the_same_instant_at_two_offsets_is_two_values() -> None:
    """A datetime's offset is part of its value (the handler sees it)."""
    utc = datetime(2026, 1, 1, 12, tzinfo=UTC)
    assert encode(utc) != encode(
        utc.astimezone(datetime.fromisoformat("2026-01-01T00:00+05:00").tzinfo)
    )


def test_decode_gives_back_what_validation_accepts() -> None:
    """Decoding undoes the tags: secrets, sets, maps, models and escaped keys come back."""
    value = {"$k": [{"a"}, SecretStr("s"), {1: Address(street="x")}, Decimal("2.5"), b"\x00"]}
    assert decode(json.loads(json.dumps(encode(value)))) == {
        "$k": [["a"], "s", {1: {"street": "x", "tags": []}}, Decimal("2.5"), b"\x00"]
    }


def test_a_value_without_a_canonical_form_is_refused() -> None:
    """Anything outside the stated forms is a ConfigurationError, never its str()."""
    with pytest.raises(ConfigurationError, match="type object has no canonical encoding"):
        encode(object())
    with pytest.raises(ConfigurationError, match="no canonical text"):
        digest({"x": float("nan")})


class _Hints(TypedDict):
    when: datetime


@dataclasses.dataclass
class _Holder:
    host: IPv4Address


class _Nested(BaseModel):
    host: IPv4Address


@pytest.mark.parametrize(
    ("annotation", "problem"),
    [
        (set[str], None),
        (dict[int, list[Decimal]] | None, None),
        (Sequence[Address], None),
        (_Hints, None),
        (Any, None),
        (Path, None),
        (IPv4Address, "IPv4Address"),
        (list[_Holder], "IPv4Address"),
        (_Nested | None, "IPv4Address"),
    ],
)
def test_a_type_says_which_part_has_no_canonical_form(annotation: Any, problem: str | None) -> None:
    """Types are checked through containers, unions, models, dataclasses and typed dicts."""
    assert unsupported_type(annotation) == problem


def test_a_parameter_type_without_a_canonical_form_is_refused_at_registration() -> None:
    """Registration names the function, the parameter and the type with no canonical form."""

    def block(target: IPv4Address) -> None:
        """Block an address."""

    refused = r"block'.*parameter 'target' has type IPv4Address"
    with pytest.raises(ToolDefinitionError, match=refused):
        ToolRegistry().add(block, effect="write")


def _call(tool: str, /, **arguments: Any) -> ToolCall:
    return ToolCall(id="c1", name=tool, arguments=arguments)


def test_a_recorded_call_is_rebuilt_with_its_recorded_values_and_digest() -> None:
    """Restoring a recorded call runs no factory again and keeps the journaled digest."""
    registry = ToolRegistry()

    @registry.tool(effect="write")
    def tag(
        name: str,
        labels: set[str],
        ref: Annotated[str, Field(default_factory=lambda: uuid.uuid4().hex)],
        when: datetime | None = None,
    ) -> None:
        """Tag a thing."""

    first = registry.validate(_call("tag", name="x", labels=["b", "a"]))
    assert isinstance(first, ValidatedCall)
    again = registry.restore(first.call, json.loads(json.dumps(first.encoded)), "recorded")
    assert again.arguments == first.arguments
    assert again.digest == "recorded"
    assert again.encoded == first.encoded


def test_a_recorded_call_the_current_signature_would_change_is_refused() -> None:
    """A parameter gone, retyped or unknown tool: the rebuild names the call and the tool."""
    registry = ToolRegistry()

    @registry.tool(effect="write")
    def pay(amount: float) -> None:
        """Pay an amount."""

    call = _call("pay", amount=5)
    with pytest.raises(ConfigurationError, match=r"'pay'.*parameters amount would change"):
        registry.restore(call, {"amount": 5}, "d")
    with pytest.raises(ConfigurationError, match=r"'c1' of tool 'pay' cannot run"):
        registry.restore(call, {"amount": 5.0, "gone": 1}, "d")
    with pytest.raises(ConfigurationError, match="names tool 'other', which is not registered"):
        registry.restore(_call("other"), {}, "d")


def test_a_factory_value_without_a_canonical_form_rejects_the_call() -> None:
    """A default factory making a value with no stated form is a rejection, not a crash."""
    registry = ToolRegistry()

    @registry.tool(effect="read", strict=False)
    def odd(value: Annotated[Any, Field(default_factory=object)]) -> None:
        """Take an odd value."""

    rejected = registry.validate(_call("odd"))
    assert isinstance(rejected, ToolRejection)
    assert "no canonical encoding" in rejected.message


def test_an_external_tool_is_rebuilt_from_its_recorded_json() -> None:
    """An external tool's recorded arguments are checked again by its own schema check."""
    spec = ToolSpec(name="ext", parameters={"type": "object", "properties": {"$k": {}}})

    async def never(arguments: dict[str, Any], context: ToolContext) -> None:
        raise AssertionError("not called")

    tool = ExternalTool(spec, never, check=lambda a: None if a.get("$k") else "needs $k")
    validated = tool.validate(_call("ext", **{"$k": 1}))
    assert isinstance(validated, ValidatedCall)
    assert validated.encoded == {"$$k": 1}
    assert tool.restore(validated.call, validated.encoded, "d").arguments == {"$k": 1}
    with pytest.raises(ConfigurationError, match=r"current schema \(needs \$k\)"):
        tool.restore(validated.call, {}, "d")


class _Names(dict):  # type: ignore[type-arg]
    """A container subclass without type arguments."""


def test_odd_annotations_are_named_or_passed() -> None:
    """Generic aliases that are not containers, and type variables, are refused by name."""
    assert unsupported_type(type[int]) == "type[int]"
    assert unsupported_type(TypeVar("T")) == "~T"
    assert unsupported_type(_Names) is None
    assert decode({"$map": [[[1, 2], "a"], [{"$model": {"b": [3]}}, "c"]]}) == {
        (1, 2): "a",
        (("b", (3,)),): "c",
    }


def test_every_tag_decodes_to_what_its_type_validates_from() -> None:
    """Each tagged form decodes to the value (or the plain form) the tool's validation takes."""
    assert math.isnan(decode({"$float": "nan"}))
    assert decode([{"$float": "inf"}, {"$float": "-inf"}]) == [math.inf, -math.inf]
    moment = "2026-12-01T19:30:00.123456+01:30"
    assert decode({"$datetime": moment}) == datetime.fromisoformat(moment)
    assert decode({"$date": "2026-12-01"}) == date(2026, 12, 1)
    assert decode({"$time": "08:15:00+02:00"}) == time.fromisoformat("08:15:00+02:00")
    assert decode({"$timedelta": [1, 2, 3]}) == timedelta(days=1, seconds=2, microseconds=3)
    uid = "12345678-1234-5678-1234-567812345678"
    assert decode({"$uuid": uid}) == UUID(uid)
    assert decode({"$path": "a/b"}) == "a/b"
    assert decode({"$url": "https://x.test/"}) == "https://x.test/"
    assert decode({"$secret_bytes": "c2VjcmV0"}) == b"secret"
    assert decode({"$bytes": "AP8Q"}) == b"\x00\xff\x10"
    assert decode({"$secret": "hunter2"}) == "hunter2"
    assert decode({"$enum": {"$decimal": "1.5"}}) == Decimal("1.5")
    assert decode({"$dataclass": {"$$k": {"$set": [1]}}}) == {"$k": [1]}
    assert decode({"$model": {"a": {"$float": "inf"}}}) == {"a": math.inf}
    assert decode({"$unknown": 1}) == {"unknown": 1}  # not a tag: an escaped key
    assert decode({"$float": "nan", "b": 1}) == {"float": "nan", "b": 1}


def test_map_keys_sort_by_their_canonical_text() -> None:
    """Non-string keys sort by canonical text (10 before 9), never by value or insertion."""
    assert encode({9: "x", 10: "y"}) == {"$map": [[10, "y"], [9, "x"]]}
    assert encode({2: "a", 1: "b"}) == {"$map": [[1, "b"], [2, "a"]]}


def test_the_refusals_say_exactly_what_has_no_form() -> None:
    """Refusal messages are stated in full (they reach the developer registering a tool)."""
    with pytest.raises(ConfigurationError) as refused:
        encode(object())
    assert str(refused.value) == (
        "a value of type object has no canonical encoding (see ownloop.identity for the types "
        "a tool argument may hold)"
    )
    with pytest.raises(ConfigurationError) as untextual:
        canonical_text({"x": float("inf")})
    assert str(untextual.value).startswith("a value has no canonical text: Out of range float")


class _BadHints(TypedDict):
    host: IPv4Address


def test_annotated_types_and_typed_dicts_are_looked_into() -> None:
    """The type inside Annotated, and each typed-dict field, is checked for a stated form."""
    assert unsupported_type(Annotated[IPv4Address, "meta"]) == "IPv4Address"
    assert unsupported_type(_BadHints) == "IPv4Address"


def test_text_with_an_unpaired_surrogate_still_has_a_digest() -> None:
    """A default holding an unpaired surrogate is digested from its code points, not refused."""
    text = canonical_text(encode("\ud800"))
    assert (
        digest(encode("\ud800"))
        == hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    )
