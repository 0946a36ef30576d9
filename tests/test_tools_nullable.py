"""Whether a field admits null: one rule (`admits_null`) for Python tools, validation and MCP."""

from typing import Annotated, Any

import pytest
from pydantic import WithJsonSchema

from ownloop import ToolCall
from ownloop.tools import ToolRegistry, ValidatedCall
from ownloop.tools._schema import MAX_NULL_DEPTH, admits_null

NULLABLE = {"type": ["string", "null"]}
DEFS: dict[str, Any] = {
    "MaybeEmail": NULLABLE,
    "Alias": {"$ref": "#/$defs/MaybeEmail"},
    "Text": {"type": "string"},
    "Loop": {"$ref": "#/$defs/Loop"},
    "Nothing": False,
    "holder": {"properties": {"MaybeEmail": {"type": "string"}}},
}


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "null"}, True),
        (NULLABLE, True),
        ({"type": "string"}, False),
        ({"type": ["string", "integer"]}, False),
        ({"const": None}, True),
        ({"const": 0}, False),
        ({"const": False}, False),
        ({"enum": ["a", None]}, True),
        ({"enum": ["a", 0]}, False),
        ({"type": "string", "enum": ["a", None]}, False),  # every keyword must allow null
        ({"type": ["string", "null"], "const": "a"}, False),
        ({}, True),
        ({"description": "anything"}, True),
        (True, True),
        (False, False),
        ({"$ref": "#/$defs/MaybeEmail"}, True),
        ({"$ref": "#/$defs/Alias"}, True),  # a chain of references
        ({"$ref": "#/$defs/Text"}, False),
        ({"$ref": "#/$defs/Nothing"}, False),
        ({"$ref": "#/$defs/Gone"}, True),  # a reference to nothing: cannot tell, so yes
        ({"$ref": "#/$defs/holder/properties/MaybeEmail"}, True),  # not a local definition
        ({"$ref": "#/$defs/Loop"}, True),  # a cycle runs out of the budget: yes
        ({"type": "string", "$ref": "#/$defs/MaybeEmail"}, False),
        ({"allOf": [{"$ref": "#/$defs/Alias"}]}, True),
        ({"allOf": [NULLABLE, {"$ref": "#/$defs/Text"}]}, False),
        ({"allOf": []}, True),
        ({"anyOf": [{"type": "integer"}, {"$ref": "#/$defs/Alias"}]}, True),
        ({"anyOf": [{"type": "integer"}, {"$ref": "#/$defs/Text"}]}, False),
        ({"oneOf": [{"type": "integer"}, {"allOf": [NULLABLE]}]}, True),
        ({"oneOf": [{"type": "integer"}, False]}, False),
        ({"anyOf": [NULLABLE], "oneOf": [{"type": "integer"}]}, False),
        ({"anyOf": [{"type": "integer"}], "oneOf": [NULLABLE]}, False),
    ],
)
def test_admits_null_follows_references_and_combinators(schema: Any, expected: bool) -> None:
    """Type, const, enum, $ref chains, allOf (all), anyOf and oneOf (one): each must allow null."""
    assert admits_null(schema, DEFS) is expected


def test_admits_null_spends_its_limit_on_references_and_branches() -> None:
    """Each reference and branch spends one of the limit; a schema that runs out says yes."""
    chain = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(3)}
    chain["d3"] = {"type": "string"}
    entry = {"$ref": "#/$defs/d0"}
    assert admits_null(entry, chain, limit=5) is False
    assert admits_null(entry, chain, limit=4) is True
    nested = {"allOf": [{"anyOf": [{"oneOf": [{"type": "string"}]}]}]}
    assert admits_null(nested, {}, limit=4) is False
    assert admits_null(nested, {}, limit=3) is True
    assert admits_null({"type": "string"}, {}, limit=1) is False
    assert admits_null({"type": "string"}, {}, limit=0) is True
    deep = {"$ref": "#/$defs/d0"}
    many = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(MAX_NULL_DEPTH)}
    many[f"d{MAX_NULL_DEPTH}"] = {"type": "string"}
    assert admits_null(deep, many) is True  # the default limit is MAX_NULL_DEPTH
    many["d0"] = {"$ref": "#/$defs/d3"}  # two hops fewer
    assert admits_null(deep, many) is False


def _validated(registry: ToolRegistry, arguments: dict[str, Any]) -> dict[str, Any]:
    validated = registry.validate(ToolCall(id="c", name="contact", arguments=arguments))
    assert isinstance(validated, ValidatedCall), validated
    return dict(validated.arguments)


@pytest.mark.parametrize(
    "shown",
    [
        {"allOf": [NULLABLE]},
        {"anyOf": [{"allOf": [{"type": "null"}]}, {"type": "string"}]},
        {"oneOf": [{"type": "string"}, {"enum": [None]}]},
    ],
)
def test_a_python_field_that_admits_null_through_allof_keeps_null_as_none(
    shown: dict[str, Any],
) -> None:
    """A defaulted field whose schema admits null (allOf, nested branches): null means None."""
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def contact(
        phone: str, email: Annotated[str | None, WithJsonSchema(shown)] = "keep@example.com"
    ) -> str:
        """Update a contact.

        Args:
            phone: The phone number.
            email: The address; null clears it.
        """
        return f"{phone} {email}"

    email = registry.specs()[0].parameters["properties"]["email"]
    assert "Send null for the default" not in str(email)
    assert _validated(registry, {"phone": "1", "email": None}) == {"phone": "1", "email": None}
    assert _validated(registry, {"phone": "1"}) == {"phone": "1", "email": "keep@example.com"}
