"""Declaring tools: signatures and docstrings become strict schemas, or definition errors."""

import enum
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
import yaml
from pydantic import AnyUrl, BaseModel, ConfigDict, Field, WithJsonSchema

import ownloop.tools
from ownloop.contracts import ToolSpec
from ownloop.exceptions import ConfigurationError, ToolDefinitionError
from ownloop.tools import RegisteredTool, Sensitive, ToolContext, ToolRegistry

OPENAPI = Path(__file__).resolve().parent / "fixtures" / "openai" / "spec" / "openapi.yaml"

# ----------------------------------------------------------------------------- strict-mode rules
# The rules OpenAI strict mode imposes, written down independently of the implementation.
STRICT_ALLOWED_KEYWORDS = {
    "type", "description", "properties", "required", "additionalProperties", "items", "anyOf",
    "enum", "const", "$ref", "$defs", "pattern", "format", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems",
}  # fmt: skip
STRICT_FORMATS = {
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
}


def sub_schemas(schema: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield every sub-schema with its path: properties, items, anyOf branches and $defs."""
    pending = [("$", schema)]
    pending += [(f"$defs.{name}", node) for name, node in schema.get("$defs", {}).items()]
    while pending:
        path, node = pending.pop()
        yield path, node
        pending += [(f"{path}.{key}", child) for key, child in node.get("properties", {}).items()]
        pending += [
            (f"{path}|{index}", branch) for index, branch in enumerate(node.get("anyOf", []))
        ]
        if isinstance(node.get("items"), dict):
            pending.append((f"{path}[]", node["items"]))


def keyword_rule(node: dict[str, Any], root: dict[str, Any]) -> list[str]:
    """Only allowed keywords; $defs only at the root; only formats strict mode knows."""
    problems = []
    if set(node) - STRICT_ALLOWED_KEYWORDS:
        problems.append(
            f"keywords not allowed in strict mode: {sorted(set(node) - STRICT_ALLOWED_KEYWORDS)}"
        )
    if "$defs" in node and node is not root:
        problems.append("$defs only at the root")
    if "format" in node and node["format"] not in STRICT_FORMATS:
        problems.append(f"format {node['format']!r} not supported")
    return problems


def reference_rule(node: dict[str, Any], root: dict[str, Any]) -> list[str]:
    """A $ref stands alone and points into the root's $defs; other schemas state a type."""
    if "$ref" not in node:
        typed = {"type", "anyOf", "enum", "const"} & set(node)
        return [] if typed else ["a schema must say its type"]
    problems = [] if set(node) == {"$ref"} else ["$ref with sibling keywords"]
    if node["$ref"].removeprefix("#/$defs/") not in root.get("$defs", {}):
        problems.append(f"dangling $ref {node['$ref']}")
    return problems


def object_rule(node: dict[str, Any], root: dict[str, Any]) -> list[str]:
    """Objects forbid extra keys and require every property (optional means nullable)."""
    if node.get("type") != "object":
        return []
    problems = []
    if node.get("additionalProperties") is not False:
        problems.append("additionalProperties must be false")
    if node.get("required") != list(node.get("properties", {})):
        problems.append("required must list every property, in order")
    return problems


def array_rule(node: dict[str, Any], root: dict[str, Any]) -> list[str]:
    """Arrays have one items schema (no prefixItems tuples)."""
    if node.get("type") == "array" and not isinstance(node.get("items"), dict):
        return ["arrays need an items schema"]
    return []


STRICT_RULES = (keyword_rule, reference_rule, object_rule, array_rule)


def strict_violations(schema: dict[str, Any]) -> list[str]:
    """Return every way ``schema`` breaks the strict-mode rules (empty when it complies)."""
    problems = []
    if schema.get("type") != "object" or "anyOf" in schema:
        problems.append("$: the root must be a plain object schema")
    for path, node in sub_schemas(schema):
        problems += [
            f"{path}: {problem}" for rule in STRICT_RULES for problem in rule(node, schema)
        ]
    return problems


# ----------------------------------------------------------------------------- OpenAI tool objects


@pytest.fixture(scope="module")
def openai_schemas() -> dict[str, Any]:
    """The component schemas of OpenAI's OpenAPI document, parsed once per module."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with OPENAPI.open(encoding="utf-8") as handle:
        return yaml.load(handle, Loader=loader)["components"]["schemas"]


def conforms(instance: Any, schema: dict[str, Any], schemas: dict[str, Any]) -> list[str]:
    """Check ``instance`` against the subset of JSON schema the OpenAPI tool objects use."""
    if "$ref" in schema:
        return conforms(instance, schemas[schema["$ref"].rsplit("/", 1)[-1]], schemas)
    if "anyOf" in schema:
        results = [conforms(instance, branch, schemas) for branch in schema["anyOf"]]
        return [] if any(not result for result in results) else [f"no anyOf branch: {results}"]
    kinds = {"object": dict, "string": str, "boolean": bool, "array": list, "null": type(None)}
    expected = kinds.get(schema.get("type", ""), object)
    if not isinstance(instance, expected):
        return [f"{instance!r} is not of type {schema['type']}"]
    if "enum" in schema and instance not in schema["enum"]:
        return [f"{instance!r} not in {schema['enum']}"]
    problems = [f"missing {key!r}" for key in schema.get("required", []) if key not in instance]
    if isinstance(instance, dict):
        for key, value in instance.items():
            if key in schema.get("properties", {}):
                problems += conforms(value, schema["properties"][key], schemas)
            elif schema.get("additionalProperties") is False:
                problems.append(f"unexpected {key!r}")
    return problems


def assert_openai_tool(spec: ToolSpec, schemas: dict[str, Any]) -> None:
    """Assert the spec, as a Chat and a Responses function tool, matches OpenAI's OpenAPI spec."""
    function = {
        "name": spec.name,
        "description": spec.description,
        "parameters": spec.parameters,
        "strict": spec.strict,
    }
    assert conforms(function, schemas["FunctionObject"], schemas) == []
    assert conforms({"type": "function", **function}, schemas["FunctionTool"], schemas) == []
    name_rule = schemas["FunctionObject"]["properties"]["name"]["description"]
    longest = int(re.search(r"maximum length of (\d+)", name_rule).group(1))  # type: ignore[union-attr]
    assert "a-z, A-Z, 0-9" in name_rule
    assert "underscores and dashes" in name_rule
    assert re.fullmatch(rf"[a-zA-Z0-9_-]{{1,{longest}}}", spec.name)
    assert spec.parameters["type"] == "object"
    assert isinstance(spec.strict, bool)
    if spec.strict:
        assert strict_violations(spec.parameters) == []


# ----------------------------------------------------------------------------- sample types


class Color(enum.Enum):
    """A colour the model may pick."""

    RED = "red"
    BLUE = "blue"


class Address(BaseModel):
    """A postal address."""

    street: str
    city: str = "Paris"
    zip_code: str | None = None


@dataclass
class Window:
    """A range of pages."""

    start: int
    end: int = 10
    labels: list[str] = field(default_factory=list)


class Order(BaseModel):
    """An order with nested parts."""

    address: Address
    window: Window | None = None
    colors: list[Color] = []


class Node(BaseModel):
    """A recursive tree node."""

    value: int
    children: list["Node"] = []


class Loose(BaseModel):
    """A model that accepts any extra fields."""

    model_config = ConfigDict(extra="allow")

    name: str


class WithMap(BaseModel):
    """A model hiding a free-form map."""

    labels: dict[str, str]


class Opaque:
    """A type Pydantic cannot describe."""


DEFAULT_WINDOW = Window(1)
DEFAULT_ADDRESS = Address(street="Main")
OLD_STYLE_ADDRESS = {
    "allOf": [{"type": "object", "properties": {"street": {"type": "string"}}}],
    "description": "Old style.",
}


def properties(registry: ToolRegistry, name: str) -> dict[str, Any]:
    """Return the schema properties of the tool ``name``."""
    tool = registry.get(name)
    assert tool is not None
    result: dict[str, Any] = tool.spec.parameters["properties"]
    return result


# ----------------------------------------------------------------------------- the broad signature


@pytest.fixture
def registry() -> ToolRegistry:
    """A registry holding tools over every supported kind of parameter."""
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def scalars(text: str, count: int, ratio: float, flag: bool) -> str:
        """Take one of each scalar.

        This paragraph is not part of the description.

        Args:
            text: Some text.
            count (int): How many, described
                over two lines.
            ratio: A ratio.
            flag: A switch.

        Returns:
            Nothing useful.
        """
        return text

    @registry.tool(effect="write", requires_approval=True, timeout_s=2.5, idempotent=True)
    def choices(
        mode: Literal["fast", "slow"],
        color: Color = Color.RED,
        level: Annotated[int, Field(ge=1, le=5)] = 3,
        when: datetime | None = None,
        limit: int | None = 5,
    ) -> None:
        """Pick among choices."""

    @registry.tool(effect="read", max_output_chars=500)
    def collections(
        words: list[str],
        numbers: tuple[int, ...] = (),
        unique: set[str] = frozenset(),  # type: ignore[assignment]
        short: Annotated[str, Field(min_length=2, max_length=8)] = "ab",
    ) -> None:
        """Take collections."""

    @registry.tool(effect="read")
    def nested(order: Order, tree: Node | None = None, window: Window = DEFAULT_WINDOW) -> None:
        """Take nested models and dataclasses.

        Args:
            order: The order to place.
            tree: A tree.
            window: A window.
        """

    @registry.tool(effect="read")
    async def context_and_secret(
        query: str, ctx: ToolContext, token: Annotated[str, Sensitive()]
    ) -> str:
        """Use the context and a secret."""
        return query

    @registry.tool(
        effect="read", name="renamed", description="An explicit description.", strict=False
    )
    def loose(labels: dict[str, int], pair: tuple[int, str]) -> None:
        """Ignored docstring summary."""

    return registry


def test_every_generated_tool_matches_openai_function_object(
    registry: ToolRegistry, openai_schemas: dict[str, Any]
) -> None:
    """Every tool, strict or not, is a valid OpenAI function tool; strict ones obey every rule."""
    for spec in registry.specs():
        assert_openai_tool(spec, openai_schemas)


def test_strict_checker_catches_broken_schemas() -> None:
    """The strict-mode checker itself flags each broken rule, so its silence means something."""
    broken = {
        "type": "object",
        "title": "T",
        "properties": {
            "a": {"type": "object", "properties": {"b": {"type": "string", "default": "x"}}},
            "c": {"$ref": "#/$defs/Missing", "description": "d"},
            "d": {"type": "array"},
            "e": {},
            "f": {"type": "string", "format": "uri"},
        },
        "required": ["a"],
        "additionalProperties": False,
    }
    problems = "\n".join(strict_violations(broken))
    for fragment in ("not allowed", "additionalProperties", "required", "sibling", "dangling"):
        assert fragment in problems
    assert "items" in problems
    assert "type" in problems
    assert "format" in problems
    assert strict_violations({"anyOf": []})
    assert strict_violations(
        {
            "type": "object",
            "properties": {"a": {"$defs": {}, "type": "string"}},
            "required": ["a"],
            "additionalProperties": False,
        }
    )


def test_scalar_types_and_docstring_descriptions(registry: ToolRegistry) -> None:
    """Scalars map to JSON types; the summary and Args entries become descriptions."""
    tool = registry.get("scalars")
    assert tool is not None
    assert tool.spec.description == "Take one of each scalar."
    assert tool.spec.parameters["properties"] == {
        "text": {"description": "Some text.", "type": "string"},
        "count": {"description": "How many, described over two lines.", "type": "integer"},
        "ratio": {"description": "A ratio.", "type": "number"},
        "flag": {"description": "A switch.", "type": "boolean"},
    }
    assert tool.spec.parameters["required"] == ["text", "count", "ratio", "flag"]
    assert tool.spec.parameters["additionalProperties"] is False


def test_optional_parameters_become_required_and_nullable(registry: ToolRegistry) -> None:
    """A defaulted parameter is required but nullable, and its description says null = default."""
    props = properties(registry, "choices")
    assert props["mode"] == {"enum": ["fast", "slow"], "type": "string"}
    assert props["color"] == {
        "anyOf": [{"$ref": "#/$defs/Color"}, {"type": "null"}],
        "description": 'Send null for the default ("red").',
    }
    assert props["level"] == {
        "anyOf": [{"maximum": 5, "minimum": 1, "type": "integer"}, {"type": "null"}],
        "description": "Send null for the default (3).",
    }
    assert props["when"] == {"anyOf": [{"format": "date-time", "type": "string"}, {"type": "null"}]}
    # The type admits None already: null means None, so no note about defaults.
    assert props["limit"] == {"anyOf": [{"type": "integer"}, {"type": "null"}]}
    schema = registry.specs()[1].parameters
    assert schema["$defs"] == {
        "Color": {
            "description": "A colour the model may pick.",
            "enum": ["red", "blue"],
            "type": "string",
        }
    }


def test_spec_records_every_option(registry: ToolRegistry) -> None:
    """The decorator's options land in the ToolSpec unchanged."""
    spec = registry.specs()[1]
    assert (spec.effect, spec.requires_approval, spec.timeout_s, spec.idempotent) == (
        "write",
        True,
        2.5,
        True,
    )
    assert registry.specs()[0].effect == "read"
    assert registry.specs()[2].max_output_chars == 500


def test_collections_and_dropped_constraints(registry: ToolRegistry) -> None:
    """Lists, variadic tuples and sets are arrays; length limits are restated in words."""
    props = properties(registry, "collections")
    assert props["words"] == {"items": {"type": "string"}, "type": "array"}
    assert props["numbers"]["anyOf"][0] == {"items": {"type": "integer"}, "type": "array"}
    assert props["unique"]["anyOf"][0] == {"items": {"type": "string"}, "type": "array"}
    assert props["unique"]["description"].startswith("Items must be unique.")
    assert props["short"]["anyOf"][0] == {"type": "string"}
    assert props["short"]["description"] == (
        'Maximum length 8; minimum length 2. Send null for the default ("ab").'
    )


def test_nested_models_and_dataclasses_are_strict(registry: ToolRegistry) -> None:
    """Nested models keep $defs; their defaulted fields are required and nullable too."""
    schema = registry.specs()[3].parameters
    assert strict_violations(schema) == []
    props = schema["properties"]
    # A $ref with a description is inlined (strict mode forbids siblings of $ref).
    assert props["order"]["description"] == "The order to place."
    assert props["order"]["required"] == ["address", "window", "colors"]
    assert props["tree"] == {
        "anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}],
        "description": "A tree.",
    }
    defs = schema["$defs"]
    assert set(defs) == {"Address", "Color", "Node", "Window"}
    assert defs["Address"]["properties"]["city"]["anyOf"][1] == {"type": "null"}
    assert defs["Address"]["properties"]["zip_code"] == {
        "anyOf": [{"type": "string"}, {"type": "null"}]
    }
    assert defs["Window"]["properties"]["labels"]["description"] == "Send null for the default."
    assert defs["Node"]["properties"]["children"]["anyOf"][0]["items"] == {"$ref": "#/$defs/Node"}
    assert "default" not in str(schema).replace("the default", "")


def test_context_parameter_is_hidden_and_secret_is_recorded(registry: ToolRegistry) -> None:
    """A ToolContext parameter never reaches the schema; Sensitive names go to spec.sensitive."""
    tool = registry.get("context_and_secret")
    assert tool is not None
    assert tool.is_async
    assert list(tool.spec.parameters["properties"]) == ["query", "token"]
    assert tool.spec.parameters["properties"]["token"] == {"type": "string"}
    assert tool.spec.sensitive == ("token",)
    assert tool.parameter_names == ("query", "token")


def test_strict_false_keeps_pydantic_schema(registry: ToolRegistry) -> None:
    """strict=False accepts maps and fixed tuples and keeps Pydantic's plain schema."""
    tool = registry.get("renamed")
    assert tool is not None
    assert tool.spec.strict is False
    assert tool.spec.description == "An explicit description."
    props = tool.spec.parameters["properties"]
    assert props["labels"]["additionalProperties"] == {"type": "integer"}
    assert "prefixItems" in props["pair"]
    assert tool.spec.parameters["additionalProperties"] is False
    assert "title" not in tool.spec.parameters


def test_annotated_field_description_wins_over_docstring() -> None:
    """A description given in Field() takes precedence over the docstring's Args entry."""
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def described(
        a: Annotated[int, Field(description="From the field.")],
        # Field() as a Python default, as FastAPI users write it.
        b: Address = Field(default_factory=lambda: Address(street="x"), description="Where."),  # noqa: B008
    ) -> None:
        """Describe.

        Args:
            a: From the docstring.
            b: Also from the docstring.
        """

    props = properties(registry, "described")
    assert props["a"]["description"] == "From the field."
    assert props["b"]["description"] == "Where. Send null for the default."


def test_docstring_variants() -> None:
    """Missing, non-Google and oddly ordered docstrings still give sensible descriptions."""
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def bare(x: int) -> None:
        pass

    @registry.tool(effect="read")
    def oddly(x: int, y: int) -> None:  # a deliberately sloppy docstring
        """Summary line
        that continues.
        Returns:
            Nothing.

        Parameters:
            Some words before the first entry.
            x: The x.
            not an entry line
        y: Outdented, so the section ended.
        """  # noqa: D205, D411

    assert registry.specs()[0].description == ""
    assert properties(registry, "bare") == {"x": {"type": "integer"}}
    assert registry.specs()[1].description == "Summary line that continues."
    props = properties(registry, "oddly")
    assert props["x"] == {"description": "The x. not an entry line", "type": "integer"}
    assert props["y"] == {"type": "integer"}


def test_callable_objects_partials_and_methods_can_be_tools() -> None:
    """Bound methods, partials and async callable objects register with the right shape."""

    class Service:
        def lookup(self, key: str) -> str:
            """Look a key up."""
            return key

        async def __call__(self, key: str) -> str:
            return key

    def scaled(factor: int, value: int) -> int:
        return factor * value

    registry = ToolRegistry()
    method = registry.add(Service().lookup, effect="read")
    callable_object = registry.add(Service(), effect="read", name="service")
    partial = registry.add(functools.partial(scaled, 2), effect="read", name="scaled")
    assert method.spec.description == "Look a key up."
    assert callable_object.is_async
    assert not method.is_async
    assert partial.parameter_names == ("value",)


class Cat(BaseModel):
    """A tagged union member."""

    kind: Literal["cat"]
    indoor: bool = True


class Dog(BaseModel):
    """Another tagged union member."""

    kind: Literal["dog"]
    good: bool = True


def test_exotic_but_expressible_constructs(openai_schemas: dict[str, Any]) -> None:
    """Discriminated unions, single allOf, unions with defaults and unknown formats stay strict."""
    registry = ToolRegistry()

    @registry.tool(effect="read")
    def exotic(
        pet: Annotated[Cat | Dog, Field(discriminator="kind")],
        merged: Annotated[
            int, WithJsonSchema({"allOf": [{"type": "integer"}], "description": "n"})
        ],
        *,
        either: int | str = 3,
        only: Literal["one"] = "one",
        maybe: Literal["a", None] = "a",
        url: AnyUrl | None = None,
        amount: float = 1.5,
        home: Annotated[Address, WithJsonSchema(OLD_STYLE_ADDRESS)] = DEFAULT_ADDRESS,
    ) -> None:
        """Take exotic types.

        Args:
            pet: A pet
            merged: Merged.
            either: An int or a string
            only: A single choice.
            maybe: A choice or None.
            url: A link.
            amount: An amount.
            home: Where the pet lives.
        """

    spec = registry.specs()[0]
    assert_openai_tool(spec, openai_schemas)
    props = spec.parameters["properties"]
    assert props["pet"] == {
        "anyOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}],
        "description": "A pet",
    }
    assert props["merged"] == {"type": "integer", "description": "Merged."}
    assert props["either"] == {
        "anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}],
        "description": "An int or a string. Send null for the default (3).",
    }
    assert props["only"]["anyOf"] == [{"const": "one", "type": "string"}, {"type": "null"}]
    assert props["maybe"] == {"description": "A choice or None.", "enum": ["a", None]}
    assert props["url"] == {
        "anyOf": [{"type": "string", "description": "Minimum length 1."}, {"type": "null"}],
        "description": "A link.",
    }
    assert spec.parameters["$defs"]["Cat"]["required"] == ["kind", "indoor"]
    assert props["home"]["anyOf"][0] == {
        "type": "object",
        "properties": {
            "street": {
                "anyOf": [{"type": "string"}, {"type": "null"}],
                "description": "Send null for the default.",
            }
        },
        "required": ["street"],
        "additionalProperties": False,
    }
    assert props["home"]["description"].startswith("Where the pet lives.")


# ----------------------------------------------------------------------------- definition errors


def define(function: Any, **options: Any) -> str:
    """Register ``function`` expecting a ToolDefinitionError; return its message."""
    with pytest.raises(ToolDefinitionError) as caught:
        ToolRegistry().add(function, **options)
    return str(caught.value)


def test_free_form_map_is_rejected_naming_function_and_parameter() -> None:
    """dict[str, X] cannot be strict: the error names the function and the parameter."""

    def tag(labels: dict[str, str]) -> None:
        pass

    message = define(tag)
    assert "'test_free_form_map_is_rejected_naming_function_and_parameter.<locals>.tag'" in message
    assert "parameter 'labels'" in message
    assert "free-form mapping" in message
    assert "strict=False" in message
    assert ToolRegistry().add(tag, strict=False).spec.strict is False


@pytest.mark.parametrize(
    ("annotation", "fragment"),
    [
        (tuple[int, str], "fixed-length tuple"),
        (Any, "any type"),
        (list, "any type"),
        (Loose, "free-form mapping"),
        (dict, "free-form mapping"),
        (tuple[()], "array without an item type"),
        (Annotated[int, WithJsonSchema({"allOf": [{"type": "integer"}, {"minimum": 1}]})], "allOf"),
        (
            Annotated[int, WithJsonSchema({"$ref": "https://example.com/x"})],
            "not a local definition",
        ),
        (Annotated[int, WithJsonSchema({"anyOf": [True, {"type": "integer"}]})], "any value"),
        (
            Annotated[int, WithJsonSchema({"anyOf": [False, {"type": "integer"}]})],
            "accepts no value (the schema false), which strict mode cannot express",
        ),
        (Annotated[int, WithJsonSchema({"allOf": [False]})], "accepts no value"),
        (Annotated[int, WithJsonSchema({"allOf": [True]})], "accepts any value"),
        (
            Annotated[list[int], WithJsonSchema({"type": ["array", "null"], "items": {}})],
            "has the type list ['array', 'null'], which strict mode cannot express",
        ),
        (Annotated[int, WithJsonSchema({"type": ["object", "null"]})], "type list"),
    ],
)
def test_constructs_strict_mode_cannot_express(annotation: Any, fragment: str) -> None:
    """Fixed tuples, Any, bare lists and extra-allowing models fail at registration."""

    def tool(value: annotation) -> None:  # type: ignore[valid-type]
        pass

    message = define(tool)
    assert "parameter 'value'" in message
    assert fragment in message


def test_nested_unsupported_construct_names_the_path() -> None:
    """A map inside a nested model names the parameter and the path to it."""

    def tool(items: list[WithMap]) -> None:
        pass

    message = define(tool)
    assert "parameter 'items' (at items[].labels)" in message


def test_signature_problems_are_definition_errors() -> None:
    """Missing annotations, *args, **kwargs and positional-only parameters are refused."""

    def unannotated(x) -> None:  # type: ignore[no-untyped-def]
        pass

    def variadic(*args: int) -> None:
        pass

    def keywords(**kwargs: int) -> None:
        pass

    def positional(x: int, /) -> None:
        pass

    assert "parameter 'x' has no type annotation" in define(unannotated)
    assert "parameter 'args' is *args" in define(variadic)
    assert "parameter 'kwargs' is **kwargs" in define(keywords)
    assert "parameter 'x' is positional-only" in define(positional)


def test_unresolvable_and_unsupported_types_name_the_parameter() -> None:
    """A forward reference that cannot resolve, or a type without schema, names the parameter."""

    def forward(x: "Undefined") -> None:  # type: ignore[name-defined]  # noqa: F821
        pass

    def opaque(fine: int, thing: Opaque) -> None:
        pass

    assert "parameter 'x' has an annotation that cannot be resolved" in define(forward)
    assert "parameter 'thing' cannot be modelled or described" in define(opaque)
    assert "\n" not in define(opaque)

    def clashing(x: Annotated[int, Field(default_factory=int)] = 5) -> None:
        pass

    assert "parameter 'x' cannot be modelled or described" in define(clashing)
    assert "is not callable" in define(42)
    assert "no readable signature" in define(int)


def test_names_and_options_are_checked() -> None:
    """Bad names, duplicates and invalid options are ToolDefinitionErrors."""

    def fine(x: int) -> None:
        pass

    registry = ToolRegistry()
    registry.add(fine, effect="read")
    with pytest.raises(ToolDefinitionError, match="already registered"):
        registry.add(fine, effect="read")
    assert "does not match" in define(fine, name="has space")
    assert "does not match" in define(fine, name="x" * 65)
    assert "does not match" in define(lambda: None)
    assert "timeout_s" in define(fine, timeout_s=0)
    assert "effect" in define(fine, effect="delete")
    assert "description" in define(fine, description="x" * 5000)
    assert registry.names() == ("fine",)


def test_registry_rejects_bad_argument_caps() -> None:
    """max_argument_bytes must be a positive integer."""
    with pytest.raises(ConfigurationError):
        ToolRegistry(max_argument_bytes=0)
    with pytest.raises(ConfigurationError):
        ToolRegistry(max_argument_bytes=True)


# ----------------------------------------------------------------------------- registry surface


def test_decorator_returns_function_and_registry_surface(registry: ToolRegistry) -> None:
    """The decorator returns the function unchanged; lookups follow registration order."""

    def plain(x: int) -> int:
        return x + 1

    fresh = ToolRegistry()
    assert fresh.tool(plain, effect="read") is plain
    assert fresh.tool(effect="read", name="other")(plain) is plain
    assert plain(1) == 2
    assert registry.names() == (
        "scalars",
        "choices",
        "collections",
        "nested",
        "context_and_secret",
        "renamed",
    )
    assert [spec.name for spec in registry.specs()] == list(registry.names())
    assert [tool.name for tool in registry] == list(registry.names())
    assert all(isinstance(tool, RegisteredTool) for tool in registry)
    assert len(registry) == 6
    assert "scalars" in registry
    assert "missing" not in registry
    assert ["scalars"] not in registry
    assert registry.get("missing") is None
    assert repr(fresh) == "ToolRegistry(tools=['plain', 'other'])"
    assert repr(fresh.get("plain")) == (
        "RegisteredTool(name='plain', effect='read', parameters=['x'], is_async=False, strict=True)"
    )


def test_public_api_is_sorted_and_importable() -> None:
    """ownloop.tools exports a sorted __all__ whose names all exist."""

    def isort_key(name: str) -> tuple[int, str]:
        """Constants first, then classes, then functions (ruff's RUF022 order)."""
        return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)

    assert ownloop.tools.__all__ == sorted(ownloop.tools.__all__, key=isort_key)
    for name in ownloop.tools.__all__:
        assert hasattr(ownloop.tools, name)
    assert repr(Sensitive()) == "Sensitive()"
